"""Shared fixtures: the built-in catalog, the app over it, and a real uvicorn server on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

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


STEP_TIMES = pytest.StashKey[list[str]]()
"""Lines like "image build: 13.5 s" that slow fixtures record; printed in the run's summary."""


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = config.stash.get(STEP_TIMES, [])
    if lines:
        terminalreporter.section("step times")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    """The packaged catalog, loaded and validated once per run."""
    return load_catalog()


def free_port() -> int:
    """A port the kernel says is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(app: Any, **config: Any) -> Iterator[str]:
    """Serve `app` with uvicorn in a thread on a free loopback port; yields the base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **config)
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
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


@contextmanager
def serve_process(
    *args: str, env: dict[str, str] | None = None, preexec_fn: Callable[[], None] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`ridgeline serve ARGS` as its own process on a free loopback port, until /healthz answers;
    yields its base URL and the process, and stops it after."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=preexec_fn,
    )
    base = f"http://127.0.0.1:{port}"
    try:
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


def stop_process(process: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM a child (ridgeline serve, prometheus) and reap it; SIGKILL if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
