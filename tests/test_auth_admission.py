"""The order and the CPU budget of password checks (exporter/web/auth_admission.py), on a real
event loop and worker thread; the checks are stand-ins that wait for a gate, so which one runs
when is decided by the pool and nothing else."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable

import pytest

from exporter.web.auth_admission import CheckPool

Verify = Callable[[str, bytes], bool]


def _gated(order: list[bytes], gate: threading.Event) -> Verify:
    """A check that records which password it was given; the password "busy" waits for `gate`,
    so the worker stays busy while the test fills the queue."""

    def verify(user: str, password: bytes) -> bool:
        order.append(password)
        if password == b"busy":
            gate.wait(10)
        return password == b"right"

    return verify


async def _started(order: list[bytes], password: bytes) -> None:
    """Until the worker thread has entered the check for `password` (polled, not slept for)."""
    for _ in range(10_000):
        if password in order:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"the check for {password!r} never started")


async def _queued(pool: CheckPool, count: int) -> None:
    """Until `count` checks wait (the loop has run every submitted coroutine up to its await)."""
    for _ in range(1000):
        if pool.pending >= count:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{pool.pending} checks waiting, expected {count}")


def test_a_user_name_sprayed_from_an_address_does_not_take_another_users_place() -> None:
    """The address's slots are full of guesses for one user; another user's first check from the
    same address gets a slot (the newest guess yields) and runs before the older guesses."""

    async def run() -> tuple[list[bool | None], bool | None, list[bytes]]:
        order: list[bytes] = []
        gate = threading.Event()
        pool = CheckPool(max_pending=64, peer_pending=4, cpu_share=1.0)
        verify = _gated(order, gate)
        for n in range(2):  # the address has a record of guessing "admin"
            assert await pool.check(verify, "admin", f"earlier-{n}".encode(), peer="10.0.0.9") is False
        del order[:]
        first = asyncio.ensure_future(pool.check(verify, "admin", b"busy", peer="10.0.0.9"))
        await _started(order, b"busy")  # the worker holds "busy" until the gate opens
        guesses = [
            asyncio.ensure_future(pool.check(verify, "admin", f"guess-{n}".encode(), peer="10.0.0.9"))
            for n in range(4)
        ]
        await _queued(pool, 4)
        scrape = asyncio.ensure_future(pool.check(verify, "prometheus", b"right", peer="10.0.0.9"))
        await asyncio.sleep(0.01)
        gate.set()
        verdicts = await asyncio.gather(first, *guesses)
        return verdicts[1:], await scrape, order

    guesses, scrape, order = asyncio.run(run())
    assert scrape is True  # checked, not refused unchecked
    assert guesses.count(None) == 1 and guesses[-1] is None  # the newest guess made room
    assert order[:2] == [b"busy", b"right"]  # and the other user went first: its record is clean


def test_a_second_guess_for_the_same_user_is_still_refused_when_the_address_is_full() -> None:
    async def run() -> bool | None:
        gate = threading.Event()
        pool = CheckPool(max_pending=64, peer_pending=4, cpu_share=1.0)
        order: list[bytes] = []
        verify = _gated(order, gate)
        busy = asyncio.ensure_future(pool.check(verify, "admin", b"busy", peer="10.0.0.9"))
        await _started(order, b"busy")
        guesses = [
            asyncio.ensure_future(pool.check(verify, "admin", f"guess-{n}".encode(), peer="10.0.0.9"))
            for n in range(4)
        ]
        await _queued(pool, 4)
        verdict = await pool.check(verify, "admin", b"one-more", peer="10.0.0.9")
        gate.set()
        await asyncio.gather(busy, *guesses)
        return verdict

    assert asyncio.run(run()) is None


def test_password_checks_take_at_most_their_share_of_a_core() -> None:
    """Eight checks of 50 ms each (on the worker's CPU clock, and as long on the wall): the CPU
    they took, less the last one's (whose rest comes after), over the time they took stays within
    the share, because the worker rests after each. A ratio in one run: load only lengthens it."""
    cpu = itertools.count(step=0.05)  # read before and after each check: 50 ms each

    def check(user: str, password: bytes) -> bool:
        time.sleep(0.05)
        return False

    async def run(pool: CheckPool) -> float:
        started = time.monotonic()
        await asyncio.gather(*(pool.check(check, "u", str(n).encode(), peer=f"10.0.0.{n}") for n in range(8)))
        return (pool.busy_seconds - 0.05) / (time.monotonic() - started)

    pool = CheckPool(cpu_share=0.25, cpu_clock=lambda: next(cpu))
    share = asyncio.run(run(pool))
    assert pool.busy_seconds > 0.35  # every check was counted (8 × 50 ms)
    assert share <= 0.25, f"password checks took {share:.0%} of a core"


def test_refused_guesses_are_held_for_spread_out_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each refused guess is held 1–2 × the refusal delay, drawn anew, so guesses refused
    together do not come back as one burst. The holds are read off asyncio.sleep, not timed."""
    import base64

    import bcrypt

    from exporter.web import webconfig

    class Full(CheckPool):
        async def check(self, *args: object, **kwargs: object) -> bool | None:
            return None  # no room: refused unchecked

    holds: list[float] = []

    async def no_wait(seconds: float) -> None:
        holds.append(seconds)

    monkeypatch.setattr(webconfig.asyncio, "sleep", no_wait)
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
    middleware = webconfig.BasicAuthMiddleware(
        lambda scope, receive, send: None,  # type: ignore[arg-type,return-value]
        {"prometheus": hashed},
        pool=Full(),
        refusal_delay=3.0,
    )
    statuses: list[int] = []

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(int(message["status"]))  # type: ignore[call-overload]

    async def guess(n: int) -> None:
        token = base64.b64encode(f"prometheus:guess-{n}".encode())
        scope = {"type": "http", "path": "/metrics", "headers": [(b"authorization", b"Basic " + token)]}
        await middleware(scope, None, send)  # type: ignore[arg-type]

    async def run() -> None:
        await asyncio.gather(*(guess(n) for n in range(20)))

    asyncio.run(run())
    assert statuses == [429] * 20
    assert len(holds) == 20 and all(3.0 <= hold <= 6.0 for hold in holds)
    assert len(set(holds)) == 20  # not one hold for all
