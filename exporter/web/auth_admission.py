"""Which password check runs next on the one bcrypt thread, so guessers cannot starve a scraper.

bcrypt is slow on purpose, so a guessing flood always offers more checks than one thread can do,
and a first-in-first-out queue with a bound (what this replaced) hands every slot to whoever
sends most: a scraper whose password was not verified yet got 429 for as long as the flood
lasted. Nothing in one request tells a correct password from a guess before bcrypt has run, so
the order uses what a request's history does tell:

* **The peer's record.** Each client address (an IPv6 /64 counts as one) has a failure score:
  +1 per wrong password, halved every `FAILURE_HALF_LIFE_SECONDS`, reset by a success. The
  next check is the waiting one whose peer has the lowest score, so a scraper connecting from
  an address that has not been guessing is checked next, however many guesses wait. When every
  slot is taken, a newcomer from a cleaner peer takes the slot of the guess from the worst one.
* **A credential that was refused unchecked and comes back** (a client retrying after 429) goes
  before its peer's fresh guesses: a guesser gains nothing by repeating a guess it never had
  answered, while a scraper sharing the guessers' address repeats its password every scrape.

Credentials verified once never come here (exporter/web/webconfig.py caches them), and wrong
ones seen before are answered from a cache too. Everything here runs on the event loop's
thread; only the check itself runs on the worker, one at a time.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

MAX_PENDING = 64
"""Checks waiting for the worker, all peers together; beyond it the worst peer's guess yields or the
newcomer is refused."""
PEER_PENDING = 8
"""Checks one peer may have waiting: a peer that floods only refuses itself."""
FAILURE_HALF_LIFE_SECONDS = 60.0
"""How fast a peer's wrong passwords are forgotten."""
TRACKED_PEERS = 4096
"""Peers whose failure score is remembered (least recently seen forgotten first)."""
OWED_CREDENTIALS = 1024
"""Credentials refused unchecked that are remembered so their retry goes first."""
OWED_SECONDS = 600.0
"""How long such a credential keeps its place: a few scrape intervals."""


def peer_key(client: tuple[str, int] | None) -> str:
    """The address a request is judged by: IPv4 as is, IPv6 by its /64 (one host's allocation)."""
    if not client:
        return ""
    host = client[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(eq=False)
class _Job:
    peer: str
    owed: bool
    order: int
    run: Callable[[], bool]
    done: asyncio.Future[bool | None] = field(repr=False)


class _Scores:
    """Each peer's failure score, decayed by FAILURE_HALF_LIFE_SECONDS, at most TRACKED_PEERS."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._scores: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def get(self, peer: str) -> float:
        entry = self._scores.get(peer)
        if entry is None:
            return 0.0
        score, at = entry
        decay: float = 0.5 ** ((self._clock() - at) / FAILURE_HALF_LIFE_SECONDS)
        return score * decay

    def failed(self, peer: str) -> None:
        self._put(peer, self.get(peer) + 1.0)

    def succeeded(self, peer: str) -> None:
        self._scores.pop(peer, None)

    def _put(self, peer: str, score: float) -> None:
        self._scores[peer] = (score, self._clock())
        self._scores.move_to_end(peer)
        while len(self._scores) > TRACKED_PEERS:
            self._scores.popitem(last=False)


class CheckPool:
    """Password checks on one worker thread, chosen by the peer's record; at most `max_pending` wait."""

    def __init__(
        self,
        workers: int = 1,
        max_pending: int = MAX_PENDING,
        peer_pending: int = PEER_PENDING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ridgeline-bcrypt")
        self._workers = workers
        self.max_pending = max_pending
        self.peer_pending = peer_pending
        self._clock = clock
        self._scores = _Scores(clock)
        self._owed: OrderedDict[bytes, float] = OrderedDict()
        self._waiting: list[_Job] = []
        self._running = 0
        self._order = itertools.count()

    @property
    def pending(self) -> int:
        """Checks waiting for the worker (not counting those running)."""
        return len(self._waiting)

    def score(self, peer: str) -> float:
        return self._scores.get(peer)

    async def check(
        self,
        verify: Callable[[str, bytes], bool],
        user: str,
        password: bytes,
        *,
        peer: str = "",
        digest: bytes = b"",
    ) -> bool | None:
        """verify(user, password) on the worker; None when refused unchecked (no room for it)."""
        owed = self._take_owed(digest)
        done: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        job = _Job(peer, owed, next(self._order), lambda: verify(user, password), done)
        if not self._admit(job):
            self._owe(digest)
            return None
        self._dispatch()
        verdict = await done
        if verdict is None:  # made room for a check from a cleaner peer
            self._owe(digest)
        elif verdict:
            self._scores.succeeded(peer)
        else:
            self._scores.failed(peer)
        return verdict

    # -- admission and order ---------------------------------------------------------------------

    def _rank(self, job: _Job) -> tuple[float, int, int]:
        return (self._scores.get(job.peer), 0 if job.owed else 1, job.order)

    def _admit(self, job: _Job) -> bool:
        mine = [waiting for waiting in self._waiting if waiting.peer == job.peer]
        if len(mine) >= self.peer_pending:
            yielding = [waiting for waiting in mine if not waiting.owed] if job.owed else []
            if not yielding:
                return False
            self._refuse(max(yielding, key=lambda waiting: waiting.order))  # its newest guess
        elif len(self._waiting) >= self.max_pending:
            worst = max(self._waiting, key=self._rank)
            if self._rank(worst) <= self._rank(job):
                return False
            self._refuse(worst)
        self._waiting.append(job)
        return True

    def _refuse(self, job: _Job) -> None:
        self._waiting.remove(job)
        if not job.done.done():
            job.done.set_result(None)

    def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._running < self._workers and self._waiting:
            job = min(self._waiting, key=self._rank)
            self._waiting.remove(job)
            if job.done.done():  # its client went away
                continue
            self._running += 1
            outcome = loop.run_in_executor(self._executor, job.run)
            outcome.add_done_callback(functools.partial(self._finished, job))

    def _finished(self, job: _Job, outcome: asyncio.Future[bool]) -> None:
        self._running -= 1
        if not job.done.done():
            error = outcome.exception()
            job.done.set_result(False if error is not None else outcome.result())
        self._dispatch()

    # -- credentials refused unchecked -----------------------------------------------------------

    def _owe(self, digest: bytes) -> None:
        if digest:
            self._owed[digest] = self._clock()
            self._owed.move_to_end(digest)
            while len(self._owed) > OWED_CREDENTIALS:
                self._owed.popitem(last=False)

    def _take_owed(self, digest: bytes) -> bool:
        at = self._owed.pop(digest, None) if digest else None
        return at is not None and self._clock() - at <= OWED_SECONDS
