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

Sections are functions in SECTIONS, run in order; each takes the Context and returns its rows.
`--src DIR` runs the server from another checkout (e.g. /work/main) for a before/after figure.
Other sections (peak RSS for a 64 MiB upstream page and a 1 GB replay) go in the same list.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import multiprocessing
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
from _loopback import free_port, stop

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
USER, PASSWORD = "prometheus", "scrape-secret"
PARTIAL_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: slow"


# -- the server and what we read off it -------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / CLOCK_TICKS


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
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
    idle_p50_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def authorised_scrape(port: int, timeout: float = 30) -> float:
    """Seconds for one authorised GET /metrics on a fresh connection (raises on a non-200)."""
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
    response = conn.getresponse()
    response.read()
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"authorised scrape answered {response.status}")
    return time.perf_counter() - started


def measure(ctx: Context, name: str, port: int | None = None, pid: int | None = None) -> dict[str, Any]:
    """`ctx.scrapes` authorised scrapes, 10 ms apart; latency of those answered, how many were
    not (error or no answer within 5 s), the server's CPU and RSS over them."""
    port, pid = port or ctx.port, pid or ctx.pid
    cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
    latencies, failed, tried = [], 0, 0
    for _ in range(ctx.scrapes):
        tried += 1
        try:
            latencies.append(authorised_scrape(port, timeout=5))
        except (OSError, RuntimeError, http.client.HTTPException):
            failed += 1
            if failed >= 10 and not latencies:
                break  # nothing answers: ten 5 s timeouts say enough
        time.sleep(0.01)
    wall = time.monotonic() - wall_before
    row: dict[str, Any] = {"section": name, "scrapes_failed": f"{failed}/{tried}"}
    if latencies:
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        row["p50_ms"] = p50
        row["p99_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
        if ctx.idle_p50_ms is None:
            ctx.idle_p50_ms = p50
        row["p50_vs_idle"] = p50 / ctx.idle_p50_ms
    row["server_cpu_pct"] = 100 * (cpu_seconds(pid) - cpu_before) / wall
    row["server_rss_mib"] = rss_mib(pid)
    row["server_fds"] = open_fds(pid)
    return row


# -- attackers (each in its own process) -------------------------------------------------------


def hold_slow_connections(port: int, count: int, ready: Any, stop_event: Any) -> None:
    """Keep `count` connections open that never finish their head; reconnect each one the server
    closes (its request deadline), as a slowloris client does, and trickle a byte a second."""
    selector = selectors.DefaultSelector()

    def open_one() -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(PARTIAL_HEAD)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        except OSError:
            time.sleep(0.01)

    for _ in range(count):
        open_one()
    ready.set()
    last_trickle = time.monotonic()
    while not stop_event.is_set():
        for key, _ in selector.select(timeout=0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                selector.unregister(sock)
                sock.close()
                open_one()
        if time.monotonic() - last_trickle > 1.0:
            last_trickle = time.monotonic()
            for key in list(selector.get_map().values()):
                with contextlib.suppress(OSError):
                    key.fileobj.send(b"x")  # type: ignore[union-attr]
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]


def guess_passwords(port: int, concurrency: int, counts: Any, stop_event: Any) -> None:
    """`concurrency` clients sending wrong passwords back to back; counts answers by status."""
    import asyncio

    async def guesser(index: int) -> None:
        attempt = 0
        while not stop_event.is_set():
            attempt += 1
            token = base64.b64encode(f"{USER}:guess-{index}-{attempt}".encode()).decode()
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(
                    f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                await writer.drain()
                status_line = await asyncio.wait_for(reader.readline(), 30)
                await reader.read()
                writer.close()
                status = int(status_line.split()[1]) if status_line else 0
            except (TimeoutError, OSError, ValueError, IndexError):
                status = 0
            with counts.get_lock():
                counts[{401: 0, 429: 1}.get(status, 2)] += 1

    async def main() -> None:
        await asyncio.gather(*(guesser(i) for i in range(concurrency)))

    asyncio.run(main())


# -- sections -----------------------------------------------------------------------------------


def section_idle(ctx: Context) -> list[dict[str, Any]]:
    return [measure(ctx, "idle")]


def section_slow_connections(ctx: Context) -> list[dict[str, Any]]:
    ready, stop_event = multiprocessing.Event(), multiprocessing.Event()
    attacker = multiprocessing.Process(
        target=hold_slow_connections, args=(ctx.port, ctx.slow, ready, stop_event)
    )
    attacker.start()
    try:
        ready.wait(120)
        time.sleep(6.0)  # past one request deadline (5 s): the attacker is reconnecting by now
        row = measure(ctx, f"{ctx.slow} slow connections held")
    finally:
        stop_event.set()
        attacker.join(30)
    time.sleep(6)  # the request deadline closes whatever is left; the server settles by itself
    after = {"section": "after the slow connections", "server_rss_mib": rss_mib(ctx.pid)}
    after["server_fds"] = open_fds(ctx.pid)
    return [row, after]


def section_guessing_flood(ctx: Context) -> list[dict[str, Any]]:
    counts = multiprocessing.Array("l", 3)  # 401, 429, other
    stop_event = multiprocessing.Event()
    attacker = multiprocessing.Process(
        target=guess_passwords, args=(ctx.port, ctx.guessers, counts, stop_event)
    )
    attacker.start()
    try:
        time.sleep(2.0)
        started, before = time.monotonic(), list(counts)
        row = measure(ctx, f"{ctx.guessers} concurrent password guessers")
        elapsed = time.monotonic() - started
        done = [now - then for now, then in zip(list(counts), before, strict=True)]
    finally:
        stop_event.set()
        attacker.join(60)
        if attacker.is_alive():
            attacker.terminate()
    row["guesses_401_per_s"] = done[0] / elapsed
    row["guesses_429_per_s"] = done[1] / elapsed
    row["guesses_failed_per_s"] = done[2] / elapsed
    return [row]


FD_LIMIT = 1024
"""The open-file limit the fdlimit section gives its server (a common soft default)."""


def section_past_the_fd_limit(ctx: Context) -> list[dict[str, Any]]:
    """The issue's descriptor exhaustion: a second server whose open-file limit is FD_LIMIT,
    and twice that many slow connections. Also how much it logged while under attack."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "serve.log"
        with open(log_path, "wb") as log_file:
            server = start_server(port, Path(tmp), ctx.extra.get("src"), stderr=log_file, fd_limit=FD_LIMIT)
        ready, stop_event = multiprocessing.Event(), multiprocessing.Event()
        count = 2 * FD_LIMIT
        attacker = multiprocessing.Process(
            target=hold_slow_connections, args=(port, count, ready, stop_event)
        )
        attacker.start()
        try:
            ready.wait(120)
            time.sleep(1.0)
            row = measure(ctx, f"{count} slow conns, fd limit {FD_LIMIT}", port=port, pid=server.pid)
        finally:
            stop_event.set()
            attacker.join(30)
            time.sleep(6)
            after = measure(ctx, "  then, the flood over", port=port, pid=server.pid)
            stop(server)
        row["log_bytes"] = log_path.stat().st_size
    return [row, after]


SECTIONS: list[tuple[str, Callable[[Context], list[dict[str, Any]]]]] = [
    ("idle", section_idle),
    ("slow", section_slow_connections),
    ("flood", section_guessing_flood),
    ("fdlimit", section_past_the_fd_limit),
]


# -- main -----------------------------------------------------------------------------------------


def start_server(
    port: int, directory: Path, src: str | None, stderr: Any = subprocess.DEVNULL, fd_limit: int | None = None
) -> subprocess.Popen[bytes]:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    config = directory / "web.yml"
    config.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "exporter", "--log-level", "warning", "serve", "--replay", "demo"),
            *("--loop", "--listen", f"127.0.0.1:{port}", "--web-config", str(config)),
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
            authorised_scrape(port)
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
                port=port, pid=process.pid, scrapes=args.scrapes, slow=args.slow, guessers=args.guessers
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
