"""Hostile clients, each run in a process of its own so its work never shares the scraper's
interpreter: password guessers, and holders of connections that never finish (idle sockets,
partial ClientHellos, slow request heads) and reconnect at once when closed. The flood tests
(tests/test_auth_flood.py, tests/test_tls_flood.py) and benchmarks/bench_hostile.py use these
same clients, so a figure and the test that holds it are about one flood."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import multiprocessing
import selectors
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

GUESSED_USER = "prometheus"


def guess_passwords(
    port: int,
    concurrency: int,
    counts: Any,
    stop_event: Any,
    sources: tuple[str, ...] = ("127.0.0.1",),
    user: str = GUESSED_USER,
) -> None:
    """`concurrency` clients sending wrong passwords for `user` back to back, one connection per
    guess, from the `sources` addresses in turn; counts answers in `counts` as [401, 429, other]."""

    async def guesser(index: int) -> None:
        attempt = 0
        source = sources[index % len(sources)]
        while not stop_event.is_set():
            attempt += 1
            token = base64.b64encode(f"{user}:guess-{index}-{attempt}".encode()).decode()
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
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
                await asyncio.sleep(0.05)
            with counts.get_lock():
                counts[{401: 0, 429: 1}.get(status, 2)] += 1

    async def main() -> None:
        await asyncio.gather(*(guesser(i) for i in range(concurrency)))

    asyncio.run(main())


@contextlib.contextmanager
def guessers_running(
    port: int, count: int, sources: tuple[str, ...] = ("127.0.0.1",), user: str = GUESSED_USER
) -> Iterator[Any]:
    """`count` guessers (guess_passwords) until the block ends, which starts once as many guesses
    were refused as there are guessers (the check queue is full); yields their counts. At its end
    they are stopped at once, their connections closed: a guess still waiting for its check is
    dropped by the server, not checked (a queue of cost-10 checks at a quarter of a core took
    longer to drain than the test took to run)."""
    counts = multiprocessing.Array("l", 3)
    stop_event = multiprocessing.Event()
    attacker = multiprocessing.Process(
        target=guess_passwords, args=(port, count, counts, stop_event, sources, user)
    )
    attacker.start()
    try:
        deadline = time.monotonic() + 30
        while counts[1] < count and time.monotonic() < deadline:
            time.sleep(0.1)
        yield counts
    finally:
        stop_event.set()
        attacker.terminate()
        attacker.join(60)


def hold_connections(
    port: int, count: int, payload: bytes, ready: Any, stop_event: Any, trickle: bool = False
) -> None:
    """Keep `count` connections open that send `payload` and then nothing (or, with `trickle`, a
    byte a second); reopen each one the server closes at once (a client that reconnects as soon
    as it is dropped). Sets `ready` once all are open."""
    selector = selectors.DefaultSelector()

    def open_one() -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            if payload:
                sock.sendall(payload)
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
        if trickle and time.monotonic() - last_trickle > 1.0:
            last_trickle = time.monotonic()
            for key in list(selector.get_map().values()):
                with contextlib.suppress(OSError):
                    key.fileobj.send(b"x")  # type: ignore[union-attr]
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]


@contextlib.contextmanager
def attacking(target: Callable[..., None], args: tuple[Any, ...], warmup: float) -> Iterator[None]:
    """`target(*args, ready, stop_event)` in its own process until the block ends; the block
    starts once it is ready and `warmup` seconds more have passed."""
    ready, stop_event = multiprocessing.Event(), multiprocessing.Event()
    attacker = multiprocessing.Process(target=target, args=(*args, ready, stop_event))
    attacker.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the attacker never got its connections open")
        time.sleep(warmup)
        yield
    finally:
        stop_event.set()
        attacker.join(30)
        if attacker.is_alive():
            attacker.terminate()
