"""QuietServer (exporter/web/server.py): uvicorn's housekeeping once a tick instead of ten times a
second, the Date header still fresh, and a stop request that does not wait for the next tick."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest
from conftest import guarded_server
from fastapi import FastAPI

from exporter.web.server import (
    ConnectionGuard,
    ConnectionLimits,
    QuietServer,
    bind_listener,
    build_server,
    serve,
)

pytestmark = pytest.mark.slow


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/")
    def root() -> dict[str, str]:
        return {"ok": "yes"}

    return app


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every on_tick of a QuietServer, as a monotonic time."""
    seen: list[float] = []
    original = QuietServer.on_tick

    async def counted(self: QuietServer, counter: int) -> bool:
        seen.append(time.monotonic())
        return await original(self, counter)

    monkeypatch.setattr(QuietServer, "on_tick", counted)
    yield seen


def test_it_wakes_once_a_tick_and_the_date_header_still_moves(ticks: list[float]) -> None:
    with guarded_server(_app()) as server, httpx.Client(base_url=server.url) as client:
        first = client.get("/").headers["date"]
        began = time.monotonic()
        deadline = began + 10
        while (date := client.get("/").headers["date"]) == first and time.monotonic() < deadline:
            time.sleep(0.1)
        elapsed = time.monotonic() - began
        during = [t for t in ticks if began <= t <= began + elapsed]
    assert date != first, "the Date header was not refreshed within 10 s"
    assert abs(parsedate_to_datetime(date).timestamp() - time.time()) < 5
    # uvicorn's own loop ticks every 0.1 s: about 10 ticks in the second or so this took
    assert len(during) <= elapsed / QuietServer.tick_seconds + 2, (len(during), elapsed)


def test_a_stop_set_from_another_thread_does_not_wait_for_the_next_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(QuietServer, "tick_seconds", 600.0)
    guard = ConnectionGuard(ConnectionLimits())
    sock = bind_listener("127.0.0.1", 0)
    server: Any = build_server(_app(), guard)
    thread = threading.Thread(target=serve, args=(server, sock, guard), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    try:
        server.should_exit = True
        thread.join(timeout=30)  # a missed wake would sleep out the 600 s tick
        assert not thread.is_alive(), "the server slept through should_exit"
    finally:
        sock.close()


def _listen_queue(port: int) -> int:
    """The kernel's accept-queue limit for the socket listening on 127.0.0.1:`port` (`ss -ltn`
    shows it as Send-Q)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[2])


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_asyncio_accepts_a_batch_a_turn_while_the_kernel_keeps_the_whole_queue() -> None:
    """asyncio listens with the backlog it is given and accepts that many connections a turn; the
    server gives it ACCEPT_BATCH and sets the kernel's queue back to the guard's backlog, so a
    burst waits in the kernel instead of being refused (and a turn stays short)."""
    from exporter.web.server import ACCEPT_BATCH

    with guarded_server(_app()) as served:
        assert served.server.config.backlog == ACCEPT_BATCH
        assert _listen_queue(served.port) == served.guard.backlog > ACCEPT_BATCH
