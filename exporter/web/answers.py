"""Answers derived from one snapshot, each built once, when first asked, off the event loop.

A new snapshot's /metrics body, GET /classify, /live.json or SVG is CPU work that grows with the
entities (hundreds of milliseconds at 1,024); built on the event loop it held every other
request, `/healthz` included, for as long. `SnapshotAnswers` builds each answer in one worker
thread and keeps it for the snapshot it was built from: requests that ask while it is being
built wait for that one build, later ones read it, and a newer snapshot drops them all, so only
the current snapshot's answers are held (at most `max_answers` of them). A snapshot of a few
whole GPUs is built where it is asked (`inline_entities`): a millisecond or two on the loop costs
less than the two thread wake-ups a worker's build takes on a busy node.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from exporter.state import Snapshot

T = TypeVar("T")

INLINE_ENTITIES = 16
"""Snapshots of at most this many entities are built on the asking thread (a node of whole GPUs:
a build of a few milliseconds); larger ones (MIG nodes, replays of many) in the worker."""
MAX_ANSWERS = 256
"""Answers kept per snapshot at most; past it an answer is still built off the loop, not kept
(a key a client chooses, such as the Host a caption names, cannot grow memory)."""


class Same:
    """A key part that matches one object by identity, and keeps it alive while the key is held
    (so its id cannot be reused by another object meanwhile)."""

    __slots__ = ("item",)

    def __init__(self, item: object) -> None:
        self.item = item

    def __hash__(self) -> int:
        return id(self.item)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.item is self.item


class SnapshotAnswers:
    """A per-snapshot memo of derived answers, built in one worker thread."""

    def __init__(self, max_answers: int = MAX_ANSWERS, inline_entities: int = INLINE_ENTITIES) -> None:
        """`inline_entities`: snapshots of at most this many are built on the asking thread
        (-1: none, every build in the worker)."""
        self._max = max_answers
        self.inline_entities = inline_entities
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._answers: dict[Hashable, Future[Any]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self.builds = 0
        """Answers built so far (for tests: a shared build counts once)."""

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:  # under self._lock
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ridgeline-answers")
        return self._executor

    def _start(self, snapshot: Snapshot, build: Callable[[], T]) -> Future[T]:
        """`build` in the worker, or done here for a small snapshot (under self._lock)."""
        if len(snapshot.gpus) > self.inline_entities:
            return self._worker().submit(self._counted(build))
        done: Future[T] = Future()
        self.builds += 1
        try:
            done.set_result(build())
        except Exception as exc:  # handed to every asker, as the worker's Future would
            done.set_exception(exc)
        return done

    def _counted(self, build: Callable[[], T]) -> Callable[[], T]:
        def run() -> T:
            with self._lock:
                self.builds += 1
            return build()

        return run

    def future(self, snapshot: Snapshot, key: Hashable, build: Callable[[], T]) -> Future[T]:
        """The answer `key` of `snapshot`: the one being built or built already, else a new build.
        An older snapshot than the current one (a request that began before a publish) gets its
        answer built but not kept, so it never displaces the current snapshot's."""
        with self._lock:
            current = self._snapshot
            if snapshot is not current:
                if current is not None and snapshot.generation < current.generation:
                    return self._start(snapshot, build)
                self._snapshot, self._answers = snapshot, {}
            known = self._answers.get(key)
            if known is not None:
                return known
            made = self._start(snapshot, build)
            if len(self._answers) < self._max:
                self._answers[key] = made
            return made

    async def get(self, snapshot: Snapshot, key: Hashable, build: Callable[[], T]) -> T:
        """Await the answer `key` of `snapshot`; a request that goes away leaves the build to
        the others waiting for it."""
        made = self.future(snapshot, key, build)
        if made.done():
            return made.result()
        return await asyncio.shield(asyncio.wrap_future(made))

    async def run(self, work: Callable[[], T], entities: int) -> T:
        """`work` over a snapshot of `entities`, kept nowhere (an answer with a per-request part):
        in the worker thread, or here for a small snapshot."""
        if entities <= self.inline_entities:
            return work()
        with self._lock:
            made = self._worker().submit(work)
        return await asyncio.shield(asyncio.wrap_future(made))

    def close(self) -> None:
        """Stop the worker thread once what it was given is done."""
        with self._lock:
            executor, self._executor = self._executor, None
            self._snapshot, self._answers = None, {}
        if executor is not None:
            executor.shutdown(wait=False)
