"""Ridgeline under hostile clients: scrape latency idle, under held slow connections, under a
password-guessing flood (docs/daemon.md, "Hostile clients" has the figures).

Run: .venv/bin/python benchmarks/bench_hostile.py [--scrapes 200] [--slow 1000] [--guessers 50]
     [--only SECTION ...] [--src DIR]

One `ridgeline serve --replay demo --loop` with a --web-config of one basic-auth user (bcrypt
cost 10, as `htpasswd -nBC 10` writes it) serves every section. The scraper is an authorised
client that opens a new connection per scrape (as Prometheus does at a 15 s interval, past the
keep-alive timeout); attackers run in their own processes, so their work never shares the
scraper's interpreter. Each section prints scrape p50/p99 and its p50 as a ratio of the idle p50
measured in the same run, plus the server's CPU share and RSS over the section.

Issue 20's floods have their own servers (so the figures do not mix): cold-start guessers (from
other loopback addresses, and from the scraper's own), a web-config reload every second under a
flood, idle sockets and partial ClientHellos on a TLS port, and slow clients reconnecting at once
past a small connection cap. Each reports how many authorised scrapes were refused, the first
(cold) scrape, p50 as a ratio to the same server's idle p50, and the server's peak RSS (VmHWM).

Sections are functions in SECTIONS, run in order; each takes the Context and returns its rows.
`--src DIR` runs the server from another checkout (e.g. /work/main) for a before/after figure.
Other sections (peak RSS for a 64 MiB upstream page and a 1 GB replay) go in the same list.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import os
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
from _loopback import free_port, stop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from flood_clients import attacking, guessers_running, hold_connections

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
USER, PASSWORD = "prometheus", "scrape-secret"  # flood_clients.GUESSED_USER is this user
PARTIAL_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: slow"


# -- the server and what we read off it -------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / CLOCK_TICKS


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Context:
    port: int
    pid: int
    scrapes: int
    slow: int
    guessers: int
    rounds: int = 5
    idle_p50_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def authorised_scrape(port: int, timeout: float = 30, tls: ssl.SSLContext | None = None) -> float:
    """Seconds for one authorised GET /metrics on a fresh connection (raises on a non-200)."""
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    started = time.perf_counter()
    conn = (
        http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=tls)
        if tls is not None
        else http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    )
    conn.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
    response = conn.getresponse()
    response.read()
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"authorised scrape answered {response.status}")
    return time.perf_counter() - started


def scrape_round(port: int, count: int, tls: ssl.SSLContext | None = None) -> tuple[list[float], int, int]:
    """`count` authorised scrapes, 10 ms apart: latencies of those answered, failures, tries."""
    latencies, failed, tried = [], 0, 0
    for _ in range(count):
        tried += 1
        try:
            latencies.append(authorised_scrape(port, timeout=5, tls=tls))
        except (OSError, RuntimeError, http.client.HTTPException):
            failed += 1
            if failed >= 10 and not latencies:
                break  # nothing answers: ten 5 s timeouts say enough
        time.sleep(0.01)
    return latencies, failed, tried


def measure(
    ctx: Context,
    name: str,
    port: int | None = None,
    pid: int | None = None,
    tls: ssl.SSLContext | None = None,
    idle_p50_ms: float | None = None,
) -> dict[str, Any]:
    """`ctx.scrapes` authorised scrapes, 10 ms apart; latency of those answered, how many were
    not (error or no answer within 5 s), the server's CPU and RSS over them. The p50 ratio is to
    `idle_p50_ms` when given (another server's idle), else to the main server's."""
    port, pid = port or ctx.port, pid or ctx.pid
    cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
    latencies, failed, tried = scrape_round(port, ctx.scrapes, tls)
    wall = time.monotonic() - wall_before
    row: dict[str, Any] = {"section": name, "scrapes_failed": f"{failed}/{tried}"}
    if latencies:
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        row["p50_ms"] = p50
        row["p99_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
        if ctx.idle_p50_ms is None:
            ctx.idle_p50_ms = p50
        row["p50_vs_idle"] = p50 / (idle_p50_ms or ctx.idle_p50_ms)
    row["server_cpu_pct"] = 100 * (cpu_seconds(pid) - cpu_before) / wall
    row["server_rss_mib"] = rss_mib(pid)
    row["server_fds"] = open_fds(pid)
    return row


def settle(pid: int, seconds: float = 60.0) -> None:
    """Wait until the server is quiet again (under a tenth of a core over a quarter second): what
    a flood left queued (bcrypt checks, held refusals, closing sockets) must not count as idle.
    64 queued checks at a quarter of a core take about 25 s to drain."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(0.25)
        if cpu_seconds(pid) - before < 0.025:
            return


def load_average() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def alternating(
    ctx: Context,
    name: str,
    flood: Callable[[], contextlib.AbstractContextManager[Any]],
    *,
    port: int | None = None,
    pid: int | None = None,
    tls: ssl.SSLContext | None = None,
    during: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Idle round, flood round, idle round, ... (`ctx.rounds` flood rounds, `ctx.scrapes` scrapes
    in all), so that the machine's load, which moves on a shared VM, hits both alike. Each flood
    round's p50 is divided by the mean of the idle rounds either side; the row gives the median
    of those ratios, both p50s' medians, the load average at the start and end, and how many
    authorised scrapes failed in flood rounds, and the server's CPU share (of one core) during the
    flood rounds' scrapes. `during` runs once inside the first flood round,
    before its scrapes (e.g. to read RSS with the flood in place)."""
    port, pid = port or ctx.port, pid or ctx.pid
    per_round = max(5, ctx.scrapes // ctx.rounds)
    load_before = load_average()
    idle_p50s: list[float] = []
    flood_p50s: list[float] = []
    failed = tried = 0
    flood_cpu = flood_wall = 0.0
    flood_latencies: list[float] = []
    for index in range(ctx.rounds):
        settle(pid)
        idle, _, _ = scrape_round(port, per_round, tls)
        idle_p50s.append(statistics.median(idle) * 1000 if idle else float("nan"))
        with flood():
            if index == 0 and during is not None:
                during()
            cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
            latencies, round_failed, round_tried = scrape_round(port, per_round, tls)
            flood_cpu += cpu_seconds(pid) - cpu_before
            flood_wall += time.monotonic() - wall_before
        failed, tried = failed + round_failed, tried + round_tried
        flood_latencies += latencies
        flood_p50s.append(statistics.median(latencies) * 1000 if latencies else float("nan"))
    settle(pid)
    idle, _, _ = scrape_round(port, per_round, tls)
    idle_p50s.append(statistics.median(idle) * 1000 if idle else float("nan"))
    ratios = [flood_p50 / ((idle_p50s[i] + idle_p50s[i + 1]) / 2) for i, flood_p50 in enumerate(flood_p50s)]
    row: dict[str, Any] = {"section": name, "scrapes_failed": f"{failed}/{tried}"}
    row["idle_p50_ms"] = statistics.median(idle_p50s)
    row["p50_ms"] = statistics.median(flood_p50s)
    if flood_latencies:
        flood_latencies.sort()
        row["p99_ms"] = (
            flood_latencies[min(len(flood_latencies) - 1, int(len(flood_latencies) * 0.99))] * 1000
        )
    row["p50_vs_idle"] = statistics.median(ratios)
    row["ratios"] = ",".join(f"{ratio:.2f}" for ratio in ratios)
    row["load"] = f"{load_before}->{load_average()}"
    row["server_cpu_pct"] = 100 * flood_cpu / flood_wall if flood_wall else float("nan")
    return row


# -- attackers (each in its own process) -------------------------------------------------------


def hold_slow_connections(port: int, count: int, ready: Any, stop_event: Any) -> None:
    """Keep `count` connections open that never finish their head; reconnect each one the server
    closes (its request deadline), as a slowloris client does, and trickle a byte a second."""
    hold_connections(port, count, PARTIAL_HEAD, ready, stop_event, trickle=True)


# -- sections -----------------------------------------------------------------------------------


def section_idle(ctx: Context) -> list[dict[str, Any]]:
    return [measure(ctx, "idle")]


def section_slow_connections(ctx: Context) -> list[dict[str, Any]]:
    def flood() -> Any:  # past one request deadline (5 s): the attacker is reconnecting by then
        return attacking(hold_slow_connections, (ctx.port, ctx.slow), warmup=6.0)

    row = alternating(ctx, f"{ctx.slow} slow connections held", flood)
    time.sleep(6)  # the request deadline closes whatever is left; the server settles by itself
    after = {"section": "after the slow connections", "server_rss_mib": rss_mib(ctx.pid)}
    after["server_fds"] = open_fds(ctx.pid)
    return [row, after]


class Guessing:
    """Guessers as a flood for `alternating`: each round a fresh attacker process; the guesses it
    had answered are summed over the rounds."""

    def __init__(
        self, port: int, count: int, sources: tuple[str, ...] = ("127.0.0.1",), user: str = USER
    ) -> None:
        self.port, self.count, self.sources, self.user = port, count, sources, user
        self.answered = [0, 0, 0]  # 401, 429, other
        self.seconds = 0.0

    @contextlib.contextmanager
    def __call__(self) -> Any:
        with guessers_running(self.port, self.count, self.sources, self.user) as counts:
            started, before = time.monotonic(), list(counts)
            try:
                yield
            finally:
                self.seconds += time.monotonic() - started
                for kind, (now, then) in enumerate(zip(list(counts), before, strict=True)):
                    self.answered[kind] += now - then

    def rates(self) -> dict[str, float]:
        seconds = self.seconds or float("nan")
        return {
            f"guesses_{kind}_per_s": n / seconds
            for kind, n in zip(("401", "429", "failed"), self.answered, strict=True)
        }


def section_guessing_flood(ctx: Context) -> list[dict[str, Any]]:
    guessing = Guessing(ctx.port, ctx.guessers)
    row = alternating(ctx, f"{ctx.guessers} concurrent password guessers", guessing)
    row.update(guessing.rates())
    return [row]


FD_LIMIT = 1024
"""The open-file limit the fdlimit section gives its server (a common soft default)."""


def section_past_the_fd_limit(ctx: Context) -> list[dict[str, Any]]:
    """The issue's descriptor exhaustion: a second server whose open-file limit is FD_LIMIT,
    and twice that many slow connections. Also how much it logged while under attack."""
    port = free_port()
    count = 2 * FD_LIMIT
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "serve.log"
        with open(log_path, "wb") as log_file:
            server = start_server(port, Path(tmp), ctx.extra.get("src"), stderr=log_file, fd_limit=FD_LIMIT)
        try:

            def flood() -> Any:
                return attacking(hold_slow_connections, (port, count), warmup=1.0)

            row = alternating(
                ctx, f"{count} slow conns, fd limit {FD_LIMIT}", flood, port=port, pid=server.pid
            )
        finally:
            stop(server)
        row["log_bytes"] = log_path.stat().st_size
    return [row]


# -- issue 20's floods: each on a server of its own ------------------------------------------------

GUESSERS_SOURCES = tuple(f"127.0.0.{n}" for n in range(2, 10))
"""Loopback addresses standing in for the guessers' hosts (Linux routes all of 127/8 locally)."""
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
"""A TLS record header and the start of a ClientHello that promises 512 bytes and sends 11."""
TLS_SOCKETS = 3000
RECONNECT_CAP = 100
"""The connection cap of the reconnecting-slow-clients server (`--max-connections`)."""


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 (the scraper does not verify it)."""
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def client_tls() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@contextlib.contextmanager
def own_server(ctx: Context, *, tls: bool = False, extra: tuple[str, ...] = ()) -> Any:
    """A fresh server for one section (its own port, pid, peak RSS); yields (port, pid, its web
    config file)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(port, Path(tmp), ctx.extra.get("src"), tls=tls, extra=extra)
        try:
            context = client_tls() if tls else None
            for _ in range(20):
                authorised_scrape(port, tls=context)
            yield port, server.pid, Path(tmp) / "web.yml"
        finally:
            stop(server)


def _cold_guessing(
    ctx: Context, name: str, sources: tuple[str, ...], user: str = USER
) -> list[dict[str, Any]]:
    """Guessers first, then the scraper's first scrape (never verified: a fresh server, waited
    for on /healthz only), then alternating rounds (the scraper is verified by then)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        write_web_config(Path(tmp))
        server = start_server_cold(port, Path(tmp), ctx.extra.get("src"))
        try:
            guessing = Guessing(port, ctx.guessers, sources, user)
            with guessing():
                try:
                    first_ms = authorised_scrape(port, timeout=30) * 1000
                except (OSError, RuntimeError, http.client.HTTPException) as exc:
                    first_ms = float("nan")
                    print(f"  first scrape failed: {exc}")
            row = alternating(ctx, name, guessing, port=port, pid=server.pid)
            row["first_scrape_ms"] = first_ms
            row.update(guessing.rates())
            row["server_peak_rss_mib"] = rss_mib(server.pid, "VmHWM")
        finally:
            stop(server)
    return [row]


def start_server_cold(port: int, directory: Path, src: str | None) -> subprocess.Popen[bytes]:
    """`ridgeline serve` on the web config already in `directory`, waited for on /healthz only,
    so no authorised scrape has been verified when the section starts."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "exporter", "--log-level", "warning", "serve", "--replay", "demo"),
            *("--loop", "--listen", f"127.0.0.1:{port}", "--web-config", str(directory / "web.yml")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=src or None,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if sock.recv(12).startswith(b"HTTP/1.1 200"):
                    return process
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise SystemExit("ridgeline serve did not come up") from None
        time.sleep(0.1)


def section_cold_guessers_other_hosts(ctx: Context) -> list[dict[str, Any]]:
    return _cold_guessing(ctx, f"cold, {ctx.guessers} guessers, other hosts", GUESSERS_SOURCES)


def section_cold_guessers_same_host(ctx: Context) -> list[dict[str, Any]]:
    return _cold_guessing(ctx, f"cold, {ctx.guessers} guessers, same host", ("127.0.0.1",))


def section_cold_guessers_same_host_other_user(ctx: Context) -> list[dict[str, Any]]:
    return _cold_guessing(ctx, f"cold, {ctx.guessers} guessing admin, same host", ("127.0.0.1",), "admin")


def section_reload_under_flood(ctx: Context) -> list[dict[str, Any]]:
    """The web config rewritten every second (a user added each time) while guessers run."""
    with own_server(ctx) as (port, pid, config):
        guessing = Guessing(port, ctx.guessers)
        base = config.read_text()

        @contextlib.contextmanager
        def flood() -> Any:
            done = threading.Event()

            def rewrite() -> None:
                n = 0
                while not done.wait(1.0):
                    n += 1
                    hashed = bcrypt.hashpw(b"x", bcrypt.gensalt(rounds=4)).decode()
                    config.write_text(base + f"  user{n}: '{hashed}'\n")

            writer = threading.Thread(target=rewrite, daemon=True)
            with guessing():
                writer.start()
                try:
                    yield
                finally:
                    done.set()
                    writer.join()

        row = alternating(ctx, f"reload each 1 s, {ctx.guessers} guessers", flood, port=port, pid=pid)
        row.update(guessing.rates())
        row["server_peak_rss_mib"] = rss_mib(pid, "VmHWM")
    return [row]


def _tls_flood(ctx: Context, name: str, payload: bytes) -> list[dict[str, Any]]:
    with own_server(ctx, tls=True, extra=("--request-timeout", "60")) as (port, pid, _):
        settle(pid)
        before = rss_mib(pid)
        held: list[float] = []

        def flood() -> Any:
            return attacking(hold_connections, (port, TLS_SOCKETS, payload), warmup=2.0)

        def during() -> None:
            held.append(rss_mib(pid))

        row = alternating(ctx, name, flood, port=port, pid=pid, tls=client_tls(), during=during)
        row["rss_before_mib"] = before
        row["kib_per_socket"] = (held[0] - before) * 1024 / TLS_SOCKETS
        row["server_peak_rss_mib"] = rss_mib(pid, "VmHWM")
    return [row]


def section_tls_idle_sockets(ctx: Context) -> list[dict[str, Any]]:
    return _tls_flood(ctx, f"TLS: {TLS_SOCKETS} idle sockets", b"")


def section_tls_partial_hellos(ctx: Context) -> list[dict[str, Any]]:
    return _tls_flood(ctx, f"TLS: {TLS_SOCKETS} partial ClientHellos", PARTIAL_HELLO)


def section_plain_idle_sockets(ctx: Context) -> list[dict[str, Any]]:
    """The same idle sockets on a plain port: what a TLS one should cost at most."""
    with own_server(ctx, extra=("--request-timeout", "60")) as (port, pid, _):
        settle(pid)
        before = rss_mib(pid)
        with attacking(hold_connections, (port, 1000, b""), warmup=2.0):
            row = {
                "section": "plain: 1000 idle sockets",
                "kib_per_socket": (rss_mib(pid) - before) * 1024 / 1000,
            }
    return [row]


def section_reconnecting_past_the_cap(ctx: Context) -> list[dict[str, Any]]:
    """Slow clients (a head that never ends) four times the cap, each reconnecting at once."""
    cap = ("--max-connections", str(RECONNECT_CAP))
    with own_server(ctx, extra=cap) as (port, pid, _):

        def flood() -> Any:
            return attacking(hold_connections, (port, 4 * RECONNECT_CAP, PARTIAL_HEAD), warmup=1.0)

        name = f"{4 * RECONNECT_CAP} slow reconnecting, cap {RECONNECT_CAP}"
        row = alternating(ctx, name, flood, port=port, pid=pid)
        row["server_peak_rss_mib"] = rss_mib(pid, "VmHWM")
    return [row]


SECTIONS: list[tuple[str, Callable[[Context], list[dict[str, Any]]]]] = [
    ("idle", section_idle),
    ("slow", section_slow_connections),
    ("flood", section_guessing_flood),
    ("fdlimit", section_past_the_fd_limit),
    ("coldother", section_cold_guessers_other_hosts),
    ("coldsame", section_cold_guessers_same_host),
    ("coldsameother", section_cold_guessers_same_host_other_user),
    ("reload", section_reload_under_flood),
    ("plainidle", section_plain_idle_sockets),
    ("tlsidle", section_tls_idle_sockets),
    ("tlshello", section_tls_partial_hellos),
    ("reconnect", section_reconnecting_past_the_cap),
]


# -- main -----------------------------------------------------------------------------------------


def write_web_config(directory: Path, *, tls: bool = False) -> Path:
    """The scraper's user and `admin` (another's, for guessers to spray) at bcrypt cost 10 (as
    `htpasswd -nBC 10` writes it), TLS if asked."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    config = directory / "web.yml"
    text = f"basic_auth_users:\n  {USER}: '{hashed}'\n  admin: '{hashed}'\n"
    if tls:
        cert, key = self_signed(directory)
        text += f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
    config.write_text(text)
    return config


def start_server(
    port: int,
    directory: Path,
    src: str | None,
    stderr: Any = subprocess.DEVNULL,
    fd_limit: int | None = None,
    *,
    tls: bool = False,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    config = write_web_config(directory, tls=tls)
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "exporter", "--log-level", "warning", "serve", "--replay", "demo"),
            *("--loop", "--listen", f"127.0.0.1:{port}", "--web-config", str(config), *extra),
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=env,
        cwd=src or None,
        preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit)))
        if fd_limit
        else None,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            authorised_scrape(port, tls=client_tls() if tls else None)
            return process
        except (OSError, RuntimeError):
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process)
                raise SystemExit("ridgeline serve did not come up") from None
            time.sleep(0.1)


def print_rows(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        cells = [f"{row.pop('section'):<34}"]
        for key, value in row.items():
            cells.append(f"{key}={value:.2f}" if isinstance(value, float) else f"{key}={value}")
        print("  ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scrapes", type=int, default=200, help="authorised scrapes per section")
    parser.add_argument("--slow", type=int, default=1000, help="slow connections held")
    parser.add_argument("--guessers", type=int, default=50, help="concurrent password guessers")
    parser.add_argument(
        "--rounds", type=int, default=5, help="flood rounds per section (idle rounds between)"
    )
    parser.add_argument("--only", nargs="*", choices=[name for name, _ in SECTIONS], help="sections to run")
    parser.add_argument("--src", help="run the server from this checkout instead (PYTHONPATH)")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        process = start_server(port, Path(tmp), args.src)
        try:
            for _ in range(20):  # warm: imports, the first bcrypt check, caches
                authorised_scrape(port)
            ctx = Context(
                port=port,
                pid=process.pid,
                scrapes=args.scrapes,
                slow=args.slow,
                guessers=args.guessers,
                rounds=args.rounds,
            )
            ctx.extra["src"] = args.src
            wanted = set(args.only or [name for name, _ in SECTIONS]) | {"idle"}
            print(
                f"ridgeline serve pid {process.pid}, {os.cpu_count()} CPUs, src {args.src or 'this checkout'}"
            )
            for name, section in SECTIONS:
                if name in wanted:
                    print_rows(section(ctx))
        finally:
            stop(process)


if __name__ == "__main__":
    main()
