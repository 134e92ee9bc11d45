"""Shared fixtures: the built-in catalog, the app over it, and a real uvicorn server on loopback."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from forked_serve import ForkedProcess, forkable

from exporter.catalog import Catalog, load_catalog

# The answer fields docs/design.md names for /classify (POST forms and the live GET).
COMMON_FIELDS = {
    "card",
    "precision",
    "peak_flop_per_second",
    "bandwidth_bytes_per_second",
    "ridge_flop_per_byte",
    "intensity_flop_per_byte",
    "regime",
    "attainable_flop_per_second",
    "fraction_of_peak",
    "lever",
}
KERNEL_FIELDS = {"flops", "bytes", "memory_time_seconds", "compute_time_seconds", "floor_time_seconds"}
COUNTER_FIELDS = {
    "achieved_flop_per_second",
    "achieved_bandwidth_bytes_per_second",
    "flop_utilization",
    "roofline_efficiency",
}


STEP_TIMES_VARIABLE = "PYTEST_RIDGELINE_STEP_TIMES"
"""A file of lines like "image build: 13.5 s" that slow fixtures record (record_step_time),
printed in the run's summary. A file, not the config's stash: under pytest-xdist the fixture
runs in a worker and the summary in the controller, and the workers inherit its environment."""


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        fd, path = tempfile.mkstemp(prefix="ridgeline-step-times-", suffix=".txt")
        os.close(fd)
        os.environ[STEP_TIMES_VARIABLE] = path


LONGEST_FILES_FIRST = (
    "test_image.py",
    "test_federation.py",
    "test_report_e2e.py",
    "test_serve_cli.py",
    "test_auth_flood.py",
)
"""The files that hold one worker longest (docs/testing.md, "How long it takes"): the full suite's
three, then the quick run's two, collected first in that order, so that under --dist loadfile
they run beside the rest of the suite, not after it."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FILES_FIRST.index(name) if name in LONGEST_FILES_FIRST else len(LONGEST_FILES_FIRST)

    items.sort(key=rank)  # stable: else as found


def record_step_time(line: str) -> None:
    path = os.environ.get(STEP_TIMES_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    path = Path(os.environ.get(STEP_TIMES_VARIABLE, ""))
    if hasattr(config, "workerinput") or not path.name or not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    path.unlink()
    if lines:
        terminalreporter.section("step times")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    """The packaged catalog, loaded and validated once per run."""
    return load_catalog()


# -- ports: every server a test starts binds port 0 itself and the test reads back what it got,
# so no port is picked before it is bound (a pick races: the next pick can hand out the same
# port), and nothing needs a fixed port free (./scripts/demo may hold 10295 beside the suite).


def loopback_listener() -> socket.socket:
    """A listening socket on 127.0.0.1, on a port the kernel picked: hand it to the server.

    Created with IPPROTO_TCP, as getaddrinfo's answer is (exporter/web/server.py's bind_listener):
    asyncio sets TCP_NODELAY only on a socket whose proto says TCP, and without it every response
    written in two parts waits for the client's delayed ACK."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on while the block runs: bound here and never listened
    on, so a connection is refused, and no server (nor the kernel's pick for port 0) can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on, from /proc (its socket inodes in the LISTEN
    state): the port a server started on port 0 got, whatever it logs and at any log level."""
    inodes = set()
    try:
        for fd in os.scandir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(fd.path)
            except OSError:  # closed while we looked
                continue
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    except OSError:  # the process is gone
        return set()
    if not inodes:  # no socket yet (serve is still starting): no need to read the kernel's tables
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: TCP_LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def listening_port(process: subprocess.Popen[Any], what: str, timeout: float = 60.0) -> int:
    """The one port `process` (started with port 0) listens on, once it listens."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with status {process.returncode} before it listened")
        ports = listening_ports(process.pid)
        if len(ports) == 1:
            return ports.pop()
        if len(ports) > 1:
            raise AssertionError(f"{what} listens on several ports: {sorted(ports)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not listen within {timeout:.0f} s")
        time.sleep(0.02)


@contextmanager
def running_server(app: Any, **config: Any) -> Iterator[str]:
    """Serve `app` with uvicorn in a thread on a loopback port of its own; yields the base URL."""
    import uvicorn

    sock = loopback_listener()
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **config)
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on 127.0.0.1:{port}")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class Guarded:
    """A real uvicorn behind exporter/web/server.py's guard, serving in a thread on loopback."""

    url: str
    port: int
    guard: Any
    server: Any


@contextmanager
def guarded_server(
    app: Any, limits: Any = None, *, cap: int | None = None, tls_context: Any = None
) -> Iterator[Guarded]:
    """Serve `app` the way `ridgeline serve` does (connection cap, request deadline, TLS per
    connection, client-fault log filter), in a thread; yields where and what."""
    from exporter.web.server import ConnectionGuard, ConnectionLimits, bind_listener, build_server, serve

    guard = ConnectionGuard(limits or ConnectionLimits(), cap=cap, tls_context=tls_context)
    sock = bind_listener("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    server = build_server(app, guard)
    thread = threading.Thread(target=serve, args=(server, sock, guard), name=f"guarded-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"guarded uvicorn did not start on 127.0.0.1:{port}")
        time.sleep(0.01)
    scheme = "https" if tls_context is not None else "http"
    try:
        yield Guarded(f"{scheme}://127.0.0.1:{port}", port, guard, server)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def http_get(url: str) -> tuple[int, str]:
    """GET `url`: its status and body, an HTTP error status included (5 s timeout)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def http_until(base: str, path: str, fragment: str, seconds: float = 20.0) -> str:
    """GET `base + path` every 0.1 s until its body holds `fragment`; the body, or fail naming it."""
    deadline = time.monotonic() + seconds
    while True:
        _, body = http_get(base + path)
        if fragment in body:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never said {fragment!r}: {body.strip()[:500]}")
        time.sleep(0.1)


@contextmanager
def serve_process(
    *args: str, env: dict[str, str] | None = None, preexec_fn: Callable[[], None] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`ridgeline serve ARGS` as its own process on a free loopback port, until /healthz answers;
    yields its base URL and the process, and stops it after. The process is forked from one that
    has imported serve's modules already (tests/forked_serve.py) where the interpreter's own start
    does not matter: the same process, without the second of CPU its imports take."""
    argv = ["serve", "--web.listen-address", "127.0.0.1:0", *args]
    process: Any
    if forkable(env, preexec_fn):
        process = ForkedProcess(argv, {**os.environ, **(env or {})})
    else:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
            preexec_fn=preexec_fn,
        )
    try:
        try:
            base = f"http://127.0.0.1:{listening_port(process, 'serve', timeout=30)}"
        except AssertionError as exc:
            output = process.stdout.read() if process.poll() is not None and process.stdout else ""
            raise AssertionError(f"serve did not come up ({exc}):\n{output}") from None
        deadline = time.monotonic() + 30
        while True:
            try:
                http_get(base + "/healthz")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read() if process.stdout else ""
                    raise AssertionError(f"serve did not come up:\n{output}") from None
                time.sleep(0.05)
        yield base, process
    finally:
        stop_process(process)


class OutputSoFar:
    """What a running process has written to its stdout pipe so far, read without blocking: a
    test waits for the log line that says a thing happened rather than sleeping for it. Read
    the process's output through this only (`rest` once it has stopped)."""

    def __init__(self, process: Any) -> None:
        self._fd = process.stdout.fileno()
        self.text = ""

    def _read(self, timeout: float | None) -> bool:
        """Whatever arrives within `timeout` seconds; False at end of file."""
        if select.select([self._fd], [], [], timeout)[0]:
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return False
            self.text += chunk.decode(errors="replace")
        return True

    def until(self, done: Callable[[str], bool], seconds: float = 20.0) -> str:
        """The output once `done(output)` holds; fails with it after `seconds` or at its end."""
        deadline = time.monotonic() + seconds
        while not done(self.text):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._read(min(remaining, 0.1)):
                raise AssertionError(f"the process never wrote what the test waited for:\n{self.text}")
        return self.text

    def rest(self) -> str:
        """Everything, to the end (the process has stopped)."""
        while self._read(None):
            pass
        return self.text


def stop_process(process: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM a child (ridgeline serve, prometheus) and reap it; SIGKILL if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- dcgm-exporter pages on loopback ----------------------------------------------------------------

DCGM_EXPORTER_PAGES = Path(__file__).parent / "data" / "dcgm-exporter"


class DcgmExporterPage(BaseHTTPRequestHandler):
    """Serves tests/data/dcgm-exporter/<path> as dcgm-exporter would (text format 0.0.4)."""

    def do_GET(self) -> None:
        body = (DCGM_EXPORTER_PAGES / self.path.removeprefix("/")).read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the daemon, not this server."""


@pytest.fixture
def exporter_url() -> Iterator[str]:
    """The base URL of a loopback server answering tests/data/dcgm-exporter's pages."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), DcgmExporterPage)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
