"""Hostile clients against a real uvicorn behind exporter/web/server.py, on loopback sockets.

Each attack from issue 10, scaled to the test machine: connections that never finish their
head, more connections than the cap, a body that never ends, malformed chunked bodies, clients
that vanish mid-body. Every wait is bounded by a generous deadline; nothing here asserts a
speed (benchmarks/bench_hostile.py measures those).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from conftest import Guarded, guarded_server

from exporter import fields
from exporter.catalog import Catalog
from exporter.inference import InferenceConfig
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.web.app import create_app
from exporter.web.live_routes import build_live_router
from exporter.web.server import ConnectionLimits

pytestmark = pytest.mark.slow

GPU0 = Entity(0, "GPU-0a", "NVIDIA H100 80GB HBM3")
PARTIAL_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: slow"
CHUNKED_HEAD = (
    b"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


@pytest.fixture(scope="module")
def app(catalog: Catalog) -> object:
    sampler = Sampler("replay", SourceOptions(), catalog, InferenceConfig())
    sampler.ingest([Sample(1000.0, GPU0, {fields.DRAM_ACTIVE: 0.7, fields.PIPE_TENSOR_ACTIVE: 0.1})])
    return create_app(catalog, live_router=build_live_router(lambda: sampler.snapshot))


@pytest.fixture
def serving(app: object) -> Iterator[Callable[..., Guarded]]:
    """Start a guarded server with the given limits; stopped at the end of the test."""
    stack: list[object] = []

    def start(limits: ConnectionLimits | None = None, cap: int | None = None) -> Guarded:
        manager = guarded_server(app, limits or ConnectionLimits(request_timeout=1.0), cap=cap)
        stack.append(manager)
        return manager.__enter__()

    yield start
    for manager in reversed(stack):
        manager.__exit__(None, None, None)  # type: ignore[attr-defined]


def connect(server: Guarded, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    if data:
        sock.sendall(data)
    return sock


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True once the server has closed `sock` (recv sees EOF or a reset), waiting up to `within`."""
    sock.settimeout(within)
    try:
        while True:
            piece = sock.recv(65536)
            if not piece:
                return True
    except TimeoutError:
        return False
    except OSError:
        return True


def wait_until(condition: Callable[[], bool], seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def scrape(server: Guarded) -> int:
    return httpx.get(f"{server.url}/metrics", timeout=10).status_code


def test_a_connection_that_never_finishes_its_head_is_closed(serving: Callable[..., Guarded]) -> None:
    server = serving(ConnectionLimits(request_timeout=1.0))
    silent, partial = connect(server), connect(server, PARTIAL_HEAD)
    assert closed_by_server(silent, within=15) and closed_by_server(partial, within=15)
    assert wait_until(lambda: not server.guard.open)
    assert server.guard.faults.counts["slow_request"] >= 2


def test_scrapes_answer_while_a_thousand_slow_connections_are_held(serving: Callable[..., Guarded]) -> None:
    """1,000 held connections, the cap at 1,024: every scrape in between is answered."""
    server = serving(ConnectionLimits(request_timeout=60.0))
    held = []
    try:
        for i in range(1000):
            held.append(connect(server, PARTIAL_HEAD))
            if i % 250 == 249:
                assert scrape(server) == 200
        assert wait_until(lambda: len(server.guard.open) >= 1000)
        assert all(scrape(server) == 200 for _ in range(5))
    finally:
        for sock in held:
            sock.close()
    assert wait_until(lambda: not server.guard.open), "the server did not recover by itself"


def test_past_the_cap_the_longest_waiting_connection_makes_room(serving: Callable[..., Guarded]) -> None:
    server = serving(ConnectionLimits(request_timeout=60.0), cap=20)
    held = [connect(server, PARTIAL_HEAD) for _ in range(200)]
    try:
        assert all(scrape(server) == 200 for _ in range(5))
        assert len(server.guard.open) <= 20
        assert closed_by_server(held[0], within=10)  # the oldest waiter was evicted
        assert server.guard.faults.counts["connection_cap"] >= 180
    finally:
        for sock in held:
            sock.close()


def test_with_every_slot_mid_request_a_new_connection_is_refused_then_served_again(
    serving: Callable[..., Guarded],
) -> None:
    server = serving(ConnectionLimits(request_timeout=2.0), cap=3)
    head = (
        b"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n"
    )
    busy = [connect(server, head + b'{"card"') for _ in range(3)]
    assert wait_until(lambda: len(server.guard.open) == 3)
    time.sleep(0.2)
    refused = connect(server)
    assert closed_by_server(refused, within=10)
    assert server.guard.faults.counts["connection_cap"] >= 1  # refused at accept, not timed out
    assert len(server.guard.open) == 3
    answers = []
    for sock in busy:  # the deadline answers the unfinished bodies 408 and frees the slots
        sock.settimeout(15)
        answers.append(sock.recv(200))
        sock.close()
    assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers
    assert wait_until(lambda: scrape(server) == 200)


def test_a_body_that_never_ends_gets_408(serving: Callable[..., Guarded]) -> None:
    server = serving(ConnectionLimits(request_timeout=1.0))
    sock = connect(server, CHUNKED_HEAD + b'5\r\n{"car')
    sock.settimeout(15)
    answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert closed_by_server(sock, within=10)


def test_overload_is_logged_once_per_kind_not_once_per_socket(
    serving: Callable[..., Guarded], caplog: pytest.LogCaptureFixture
) -> None:
    server = serving(ConnectionLimits(request_timeout=3.0), cap=30)
    caplog.set_level(logging.DEBUG)
    socks = [connect(server, PARTIAL_HEAD) for _ in range(150)]
    try:
        assert wait_until(lambda: server.guard.faults.counts.get("slow_request", 0) >= 10)
    finally:
        for sock in socks:
            sock.close()
    faults = server.guard.faults.counts
    assert faults["connection_cap"] >= 2 and faults["slow_request"] >= 10  # many events ...
    lines = [r.getMessage() for r in caplog.records if r.name == "exporter.web"]
    assert sum("--max-connections" in line for line in lines) == 1, lines  # ... one line each
    assert sum("no complete request" in line for line in lines) == 1, lines
    assert not [r for r in caplog.records if r.exc_info], "a client's fault logged a traceback"


def test_malformed_chunked_bodies_get_400_and_no_traceback(
    serving: Callable[..., Guarded], caplog: pytest.LogCaptureFixture
) -> None:
    server = serving()
    caplog.set_level(logging.DEBUG)
    malformed = [b"zz\r\nabc\r\n", b"5\r\nabcdefghij\r\n", b"-1\r\n\r\n", b"3\r\nabc\r\nxyz\r\n\r\n"]
    for index in range(40):
        sock = connect(server, CHUNKED_HEAD + malformed[index % len(malformed)])
        sock.settimeout(10)
        answer = sock.recv(4096)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 400"), answer
    assert scrape(server) == 200
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(noisy) <= 1, [r.getMessage() for r in noisy]
    assert not [r for r in caplog.records if r.exc_info]


def test_a_client_gone_mid_body_costs_no_log_line(
    serving: Callable[..., Guarded], caplog: pytest.LogCaptureFixture
) -> None:
    server = serving(ConnectionLimits(request_timeout=30.0))
    caplog.set_level(logging.DEBUG)
    for _ in range(40):
        sock = connect(server, CHUNKED_HEAD + b'20\r\n{"card": "h100')
        sock.close()
        sock = connect(
            server,
            b"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 400\r\n\r\n{"card"',
        )
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()  # a reset, not a FIN
    assert wait_until(lambda: not server.guard.open)
    assert scrape(server) == 200
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert noisy == [], [r.getMessage() for r in noisy]


@pytest.mark.parametrize(
    ("requested", "limit", "cap", "backlog"),
    [(1024, 1_048_576, 1024, 1024), (1024, 20_000, 1024, 1024), (1024, 1024, 480, 240), (1024, 256, 96, 48)],
)
def test_the_cap_leaves_two_accept_batches_and_the_reserve_below_the_fd_limit(
    requested: int, limit: int, cap: int, backlog: int
) -> None:
    from exporter.web.server import FD_RESERVE, accept_backlog, connection_cap

    assert (connection_cap(requested, limit), accept_backlog(limit)) == (cap, backlog)
    assert connection_cap(requested, limit) + 2 * accept_backlog(limit) + FD_RESERVE <= limit
