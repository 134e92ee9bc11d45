"""The sampler thread: owns the source, reads it every interval, and publishes snapshots.

One thread does all GPU-library work (open, read, close, reopen), feeds each sample through
inference and swaps in a new immutable `Snapshot`; readers only ever load the current reference.
It composes exporter/sampling/: the source supervisor (open, read, reopen, errors), the entity
tracker (per-GPU state, departures), the publisher (snapshots and their observers) and the
enrichers (a GPU's pod and job). Errors, dropouts, unbelievable timestamps and the end of a
replay: docs/daemon.md, "Dropouts, errors and health".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from exporter.catalog import Catalog
from exporter.inference import InferenceConfig
from exporter.sample import Sample
from exporter.sampling.enrichers import Enricher
from exporter.sampling.publisher import MIN_FRESHNESS_SECONDS, Publisher
from exporter.sampling.supervisor import (
    BACKOFF_INITIAL_SECONDS,
    BACKOFF_MAX_SECONDS,
    CORRUPT_LINE,
    END_OF_REPLAY,
    ErrorCounts,
    Opener,
    Outcome,
    SourceSupervisor,
)
from exporter.sampling.tracker import (
    DEPARTED_RETENTION_SECONDS,
    MAX_CARDS_KNOWN,
    MAX_DEPARTED,
    EntityKey,
    EntityTracker,
    mig_shares,
)
from exporter.sources.base import Source, SourceOptions
from exporter.state import Snapshot

log = logging.getLogger(__name__)

__all__ = [
    "BACKOFF_INITIAL_SECONDS",
    "BACKOFF_MAX_SECONDS",
    "CORRUPT_LINE",
    "DEPARTED_RETENTION_SECONDS",
    "END_OF_REPLAY",
    "FOLD_EVERY_SECONDS",
    "MAX_CARDS_KNOWN",
    "MAX_DEPARTED",
    "MIN_FRESHNESS_SECONDS",
    "PUBLISH_EVERY_SECONDS",
    "EntityKey",
    "Opener",
    "Sampler",
    "mig_shares",
]

PUBLISH_EVERY_SECONDS = 0.02
"""A replay at --speed max hands out batches without waiting, hundreds of thousands of samples a
second; the sampler thread then publishes a snapshot at most this often (and always at the end,
on errors and on stop). Readers only ever want the newest state, and building a snapshot per
batch would cost more than the batch."""
FOLD_EVERY_SECONDS = 1.0
"""Batches due faster than this (`--interval` under 1 s) are published about this often, not
one snapshot per batch; a source that keeps its batches (`read_batches`) is also read only this
often, so the thread wakes about once a second. A reader's ask (`current`) wakes it sooner."""


class Sampler:
    """Reads a source on its own thread and publishes `Snapshot`s; `snapshot` is always readable."""

    def __init__(
        self,
        source_name: str,
        options: SourceOptions,
        catalog: Catalog,
        config: InferenceConfig,
        *,
        source: Source | None = None,
        opener: Opener | None = None,
        enrichers: Sequence[Enricher] = (),
        grace_batches: int = 3,
        backoff_initial_seconds: float = BACKOFF_INITIAL_SECONDS,
        backoff_max_seconds: float = BACKOFF_MAX_SECONDS,
        wall_clock: Callable[[], float] = time.time,
        observers: Sequence[Callable[[Snapshot], None]] = (),
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """source: an already opened source (serve opens it once up front so that a user's
        mistake fails at start-up); opener reopens after errors (default: open_source).
        enrichers: what fills in a sample's pod and job (serve builds the list: build_enrichers).
        observers: called on this thread with each snapshot once published (the live view's
        trails, exporter/view/trails.py); they must be cheap, and one that raises is logged.
        on_failure: called on this thread if it dies of an error no source or reading explains
        (a bug): serve stops, so that its supervisor restarts it instead of a daemon that answers
        its probes with a snapshot that no longer moves."""
        if opener is None:
            from exporter.sources import open_source

            opener = open_source
        self._options = options
        self._clock = wall_clock
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set by a reader's ask (`current`) and by stop(): the thread's waits end on it."""
        self._thread: threading.Thread | None = None
        self._on_failure = on_failure
        self.failure: BaseException | None = None
        """What ended the thread, if it was not a stop."""
        self._dirty = False
        """Batches were folded in since the last publish (the thread defers at --speed max)."""
        self._supervisor = SourceSupervisor(
            source_name,
            options,
            source=source,
            opener=opener,
            errors=ErrorCounts(),
            backoff_initial_seconds=backoff_initial_seconds,
            backoff_max_seconds=backoff_max_seconds,
        )
        self._tracker = EntityTracker(
            catalog, config, grace_batches=grace_batches, enrichers=enrichers, skipped=self._skip_sample
        )
        self._publisher = Publisher(options, config, observers=observers)
        self._publisher.start(self._supervisor, self._tracker)

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot. Replaced whole (one reference store), never mutated."""
        return self._publisher.snapshot

    def current(self) -> Snapshot:
        """The current snapshot, for a reader: when it is older than one interval, the thread is
        woken to fold what has come since (it is the next reader that sees it; this one never
        waits)."""
        publisher = self._publisher
        if time.monotonic() - publisher.published_at >= self._options.interval_seconds:
            self._wake.set()
        return publisher.snapshot

    @property
    def source_name(self) -> str:
        return self._supervisor.name

    @property
    def identities_kept(self) -> int:
        """GPUs whose counters the sampler holds: those in the batches and those that left within
        the retention (bounded by the batch size plus MAX_DEPARTED)."""
        return self._tracker.identities_kept

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="ridgeline-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and close the source.

        A paced source (replay) may be waiting inside read(); its close() is documented to wake
        that wait, so it is closed first. A live source is only ever touched by the sampler
        thread, which waits on the stop event between reads, so it is closed after the join.
        """
        self._stop.set()
        self._wake.set()
        self._supervisor.close_paced()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("sampler thread did not stop within %.0f s", timeout)
                return
        self._supervisor.close()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def running(self) -> bool:
        """True while the sampler thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # a bug: said once, whole, and handed to whoever stops the daemon
            self.failure = exc
            log.exception("the sampler stopped on an unexpected error; nothing more is read or published")
            if self._on_failure is not None:
                self._on_failure(exc)

    def _loop(self) -> None:
        supervisor = self._supervisor
        while not self._stop.is_set():
            if supervisor.finished:
                self._stop.wait(3600)
                continue
            started = time.monotonic()
            asked = self._wake.is_set()
            if asked:
                self._wake.clear()
            gap = self._publish_gap(supervisor.source)
            ok = self._round(publish=asked or started - self._publisher.published_at >= gap)
            if self._stop.is_set():
                break
            if not ok:
                self._stop.wait(supervisor.next_backoff())
            elif supervisor.source is not None and not supervisor.source.paced:
                self._wait_for_next_read(started)
        if self._dirty:
            self._publish()
        self._tracker.notes.flush()

    def _publish_gap(self, source: Source | None) -> float:
        """The least time between two publishes while batches keep coming."""
        if source is not None and source.paced and getattr(source, "flat_out", False):
            return PUBLISH_EVERY_SECONDS
        return FOLD_EVERY_SECONDS if self._options.interval_seconds < FOLD_EVERY_SECONDS else 0.0

    def _wait_for_next_read(self, started: float) -> None:
        """Wait until the next read is due: one interval for a source read batch by batch, about
        a second for one that keeps its batches. A reader's ask publishes what is folded (the
        first kind) or ends the wait (the second: read now, publish)."""
        interval = self._options.interval_seconds
        batching = self._supervisor.batching
        deadline = started + (max(interval, FOLD_EVERY_SECONDS) if batching else interval)
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._wake.wait(remaining) or batching:
                return
            self._wake.clear()
            if self._dirty and not self._stop.is_set():
                self._publish()

    # -- one round ---------------------------------------------------------------------------

    def run_once(self) -> bool:
        """Open if needed, read (one batch, or every batch a source kept), publish. False after a
        failure (caller backs off)."""
        return self._round(publish=True)

    def _round(self, *, publish: bool) -> bool:
        """run_once; publish=False folds a good batch in without publishing it yet."""
        supervisor = self._supervisor
        if supervisor.finished:
            return True
        batches = supervisor.read(self._stop.is_set)
        if batches is Outcome.STOPPED:
            return True
        if batches is Outcome.ENDED:
            self._publish()
            return True
        if batches is Outcome.FAILED:
            supervisor.expire_while_down(self._tracker, self._clock())
            self._publish()
            return False
        assert supervisor.source is not None and not isinstance(batches, Outcome)
        live = not supervisor.source.paced
        try:
            for batch in batches:
                self._fold(batch, live=live)
        except Exception as exc:  # a bad value or a failing enricher must not kill the thread
            log.exception("folding a batch from %s failed", supervisor.name)
            supervisor.record_error("internal_error", f"{type(exc).__name__}: {exc}")
            self._publish()
            return False
        supervisor.settled()
        if publish:
            supervisor.collect_skipped()
            self._publish()
        return True

    def ingest(self, batch: list[Sample]) -> None:
        """Fold one batch into the tracked GPUs and publish (public so tests can drive it). Its
        timestamps are taken as trace time: checked finite and in order, not against the clock."""
        self._fold(batch, live=False)
        self._publish()

    def _fold(self, batch: list[Sample], *, live: bool) -> None:
        folded = self._tracker.fold(batch, self._clock(), live=live)
        self._supervisor.answered(folded.refused)
        self._dirty = True

    # -- helpers -----------------------------------------------------------------------------

    def _skip_sample(self, reason: str, message: str) -> None:
        """Count one sample not believed under `reason`, and say so (summarised once a minute)."""
        self._supervisor.errors.count(reason)
        self._tracker.notes.note(reason, f"source {self._supervisor.name}: {message}")

    def _record_error(self, reason: str, message: str) -> None:
        self._supervisor.record_error(reason, message)

    def _publish(self) -> None:
        self._publisher.publish(self._supervisor, self._tracker)
        self._dirty = False
