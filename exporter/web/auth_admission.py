"""Which password check runs next on the one bcrypt thread, so guessers cannot starve a scraper.

The order is the peer's failure score, then the user name's at that peer, then whether the
credential was refused unchecked before; the checks take at most `CPU_SHARE` of a core, and a
check whose client left before its turn is dropped. docs/daemon.md, "Connections and hostile
clients", gives the rules and why no order can do better. Runs on the event loop's thread; only
the check itself runs on the worker.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import itertools
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
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
CPU_SHARE = 0.25
"""The most of one core password checks may take: after a check of c CPU seconds the worker rests
c × (1 / CPU_SHARE − 1) before the next, so a flood leaves the rest to the authorised path."""


class ClientGone(Exception):
    """The client went away while its check waited: the check was dropped, nothing to answer."""


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
    user: str
    owed: bool
    order: int
    run: Callable[[], bool]
    done: asyncio.Future[bool | None] = field(repr=False)

    @property
    def user_at_peer(self) -> str:
        return f"{self.peer}\0{self.user}"


def _timed(run: Callable[[], bool], cpu_clock: Callable[[], float]) -> tuple[bool, float]:
    """run() on the worker, and the CPU seconds it took there (what the budget counts)."""
    started = cpu_clock()
    verdict = run()
    return verdict, cpu_clock() - started


class _Scores:
    """A failure score per key (a peer, or a user name at a peer), decayed by
    FAILURE_HALF_LIFE_SECONDS, at most TRACKED_PEERS keys."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._scores: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def get(self, key: str, now: float | None = None) -> float:
        """The score now (or at `now`: one instant for every check compared, so ties stay ties)."""
        entry = self._scores.get(key)
        if entry is None:
            return 0.0
        score, at = entry
        elapsed = (self._clock() if now is None else now) - at
        decay: float = 0.5 ** (elapsed / FAILURE_HALF_LIFE_SECONDS)
        return score * decay

    def failed(self, key: str) -> None:
        self._put(key, self.get(key) + 1.0)

    def succeeded(self, key: str) -> None:
        self._scores.pop(key, None)

    def _put(self, key: str, score: float) -> None:
        self._scores[key] = (score, self._clock())
        self._scores.move_to_end(key)
        while len(self._scores) > TRACKED_PEERS:
            self._scores.popitem(last=False)


class CheckPool:
    """Password checks on one worker thread, chosen by the peer's record; at most `max_pending`
    wait, and they take at most `cpu_share` of a core."""

    def __init__(
        self,
        workers: int = 1,
        max_pending: int = MAX_PENDING,
        peer_pending: int = PEER_PENDING,
        clock: Callable[[], float] = time.monotonic,
        cpu_share: float = CPU_SHARE,
        cpu_clock: Callable[[], float] = time.thread_time,
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
        self._cpu_share = cpu_share
        self._cpu_clock = cpu_clock
        """The worker thread's CPU seconds (time.thread_time, read on the worker)."""
        self._rest_until = 0.0
        """The event loop's time before which no check starts (the worker's rest after the last)."""
        self._wake: asyncio.TimerHandle | None = None
        self.busy_seconds = 0.0
        """CPU seconds spent in checks since start."""

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
        gone: Callable[[], Awaitable[object]] | None = None,
    ) -> bool | None:
        """verify(user, password) on the worker; None when refused unchecked (no room for it).

        `gone()` returns when the client has left: a check still waiting then is dropped
        (ClientGone) before it costs a bcrypt; one already running is let finish and scored.
        """
        owed = self._take_owed(digest)
        done: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        job = _Job(
            peer=peer,
            user=user,
            owed=owed,
            order=next(self._order),
            run=lambda: verify(user, password),
            done=done,
        )
        if not self._admit(job):
            self._owe(digest)
            return None
        self._dispatch()
        verdict = await self._outcome(job, gone)
        if verdict is None:  # made room for a check from a cleaner peer
            self._owe(digest)
        elif verdict:
            self._scores.succeeded(peer)
            self._scores.succeeded(job.user_at_peer)
        else:
            self._scores.failed(peer)
            self._scores.failed(job.user_at_peer)
        return verdict

    async def _outcome(self, job: _Job, gone: Callable[[], Awaitable[object]] | None) -> bool | None:
        """The job's verdict; ClientGone when `gone()` returns while the job still waits."""
        if gone is not None and job in self._waiting:
            watch = asyncio.ensure_future(gone())
            try:
                await asyncio.wait((job.done, watch), return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not watch.cancel() and not watch.cancelled():
                    watch.exception()  # retrieved: a receive() that failed is a client gone too
                if job in self._waiting and not job.done.done():  # gone (or cancelled) first
                    self._waiting.remove(job)
                    job.done.cancel()
            if job.done.cancelled():
                raise ClientGone
        return await job.done

    # -- admission and order ---------------------------------------------------------------------

    def _ranking(self) -> Callable[[_Job], tuple[float, float, int, int]]:
        """The order of checks, lowest first, as of one instant."""
        scores, now = self._scores, self._clock()

        def rank(job: _Job) -> tuple[float, float, int, int]:
            return (
                scores.get(job.peer, now),
                scores.get(job.user_at_peer, now),
                0 if job.owed else 1,
                job.order,
            )

        return rank

    def _admit(self, job: _Job) -> bool:
        mine = [waiting for waiting in self._waiting if waiting.peer == job.peer]
        if len(mine) >= self.peer_pending:
            yielding = self._yields_to(job, mine)
            if yielding is None:
                return False
            self._refuse(yielding)
        elif len(self._waiting) >= self.max_pending:
            rank = self._ranking()
            worst = max(self._waiting, key=rank)
            if rank(worst) <= rank(job):
                return False
            self._refuse(worst)
        self._waiting.append(job)
        return True

    @staticmethod
    def _yields_to(job: _Job, mine: list[_Job]) -> _Job | None:
        """Which of its peer's waiting checks makes room for `job` when the peer has no slot left:
        for a retry, the peer's newest fresh guess; else the newest guess for the user name with
        most checks waiting, when `job`'s user name has fewer; else none."""
        if not mine:
            return None
        if job.owed:
            candidates = [waiting for waiting in mine if not waiting.owed]
        else:
            per_user = Counter(waiting.user for waiting in mine)
            crowded, most = per_user.most_common(1)[0]
            if per_user[job.user] + 1 >= most:
                return None
            candidates = [waiting for waiting in mine if waiting.user == crowded]
            candidates = [waiting for waiting in candidates if not waiting.owed] or candidates
        return max(candidates, key=lambda waiting: waiting.order) if candidates else None

    def _refuse(self, job: _Job) -> None:
        self._waiting.remove(job)
        if not job.done.done():
            job.done.set_result(None)

    def _dispatch(self) -> None:
        """Start the best-ranked waiting checks on free workers, unless the worker is resting;
        the choice is made when a check starts, so a check that came in during the rest can win."""
        loop = asyncio.get_running_loop()
        rest = self._rest_until - loop.time()
        if rest > 0:
            if self._wake is None and self._waiting:
                self._wake = loop.call_later(rest, self._woken)
            return
        while self._running < self._workers and self._waiting:
            job = min(self._waiting, key=self._ranking())
            self._waiting.remove(job)
            if job.done.done():  # its client went away
                continue
            self._running += 1
            outcome = loop.run_in_executor(self._executor, _timed, job.run, self._cpu_clock)
            outcome.add_done_callback(functools.partial(self._finished, job))

    def _woken(self) -> None:
        self._wake = None
        self._dispatch()

    def _finished(self, job: _Job, outcome: asyncio.Future[tuple[bool, float]]) -> None:
        self._running -= 1
        error = outcome.exception()
        verdict, cpu = (False, 0.0) if error is not None else outcome.result()
        self.busy_seconds += cpu
        if self._cpu_share < 1:
            rest = cpu * (1 / self._cpu_share - 1)
            self._rest_until = max(self._rest_until, asyncio.get_running_loop().time() + rest)
        if not job.done.done():
            job.done.set_result(verdict)
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
