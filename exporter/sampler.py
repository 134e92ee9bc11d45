"""The sampler thread: owns the source, reads it every interval, and publishes snapshots.

One thread does all GPU-library work (open, read, close, reopen), feeds each sample through
inference and swaps in a new immutable `Snapshot`; readers only ever load the current reference.

Failure handling, as an SRE would expect of an exporter:

* A source error (`SourceError`) marks the source down with its reason, counts it in
  `ridgeline_sample_errors_total{reason}`, closes the source and reopens it with exponential
  backoff (1 s doubling to 30 s). The scrape keeps succeeding throughout.
* A GPU missing from more than `grace_batches` consecutive batches is dropped: its series vanish.
  The same happens to every GPU once the source has been down for `grace_batches` intervals.
  Its counters are kept per (uuid, GPU instance), so when it returns they continue from where
  they were and never go backwards; the interval spanning the dropout is not integrated.
* End of a non-looping replay: the last state is kept, the source reads as down with reason
  "end_of_replay", and the thread idles until stopped.
* A sample whose timestamp cannot be believed (exporter/sample_checks.py) is skipped and counted
  under its reason; one that goes back restarts its GPU's timeline. The counters of GPUs that
  left are kept for their return within a retention (DEPARTED_RETENTION_SECONDS, MAX_DEPARTED).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from exporter import __version__
from exporter.catalog import Card, Catalog
from exporter.inference import EntityInference, InferenceConfig, Totals, note_unknown_model, step
from exporter.redaction import redact_credentials
from exporter.sample import Attribution, Sample
from exporter.sample_checks import (
    STALLED_SECONDS,
    TIMESTAMP_BACKWARDS,
    SummaryLog,
    timestamp_problem,
    why_not_believed,
)
from exporter.sources.base import EndOfStream, Source, SourceError, SourceOptions
from exporter.state import Derived, GpuState, Snapshot, SourceHealth

log = logging.getLogger(__name__)

END_OF_REPLAY = "end_of_replay"
CORRUPT_LINE = "corrupt_line"

BACKOFF_INITIAL_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
MIN_FRESHNESS_SECONDS = 5.0
"""/readyz: a batch counts as fresh for max(3 intervals, 5 s) of wall time."""
PUBLISH_EVERY_SECONDS = 0.02
"""A replay at --speed max hands out batches without waiting, hundreds of thousands of samples a
second; the sampler thread then publishes a snapshot at most this often (and always at the end,
on errors and on stop). Readers only ever want the newest state, and building a snapshot per
batch would cost more than the batch. Any source that waits between batches publishes each one."""

EntityKey = tuple[str, int | None]
"""(uuid, GPU instance): what identifies a GPU across reconnects (indexes may be renumbered)."""

DEPARTED_RETENTION_SECONDS = 3600.0
"""How long the counters of a GPU that left the batches are kept for its return."""
MAX_DEPARTED = 1024
"""Departed GPUs whose counters are kept at most (the oldest departure is forgotten first): a
replay of 100,000 GPUs or UUIDs that churn must not keep every identity ever seen."""
MAX_CARDS_KNOWN = 256
"""Model names whose catalog lookup is cached; beyond this the cache starts over."""


class Attributor(Protocol):
    """What the sampler needs from exporter.attribution.PodAttributor."""

    def lookup(self, uuid: str, gpu_instance: int | None) -> Attribution | None: ...


class JobMapper(Protocol):
    """What the sampler needs from exporter.attribution.hpc.HpcJobMap."""

    def lookup(self, gpu: int, gpu_instance: int | None) -> str | None: ...


Opener = Callable[[str, SourceOptions], Source]


@dataclass
class _Tracked:
    state: EntityInference
    attribution: Attribution | None
    missed_batches: int = 0
    hpc_job: str | None = None
    mig_parent: bool = False
    gpu_share: float = 1.0


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
        attributor: Attributor | None = None,
        job_mapper: JobMapper | None = None,
        grace_batches: int = 3,
        backoff_initial_seconds: float = BACKOFF_INITIAL_SECONDS,
        backoff_max_seconds: float = BACKOFF_MAX_SECONDS,
        wall_clock: Callable[[], float] = time.time,
        observers: Sequence[Callable[[Snapshot], None]] = (),
    ) -> None:
        """source: an already opened source (serve opens it once up front so that a user's
        mistake fails at start-up); opener reopens after errors (default: open_source).
        observers: called on this thread with each snapshot once published (the live view's
        trails, exporter/view/trails.py); they must be cheap, and one that raises is logged."""
        if opener is None:
            from exporter.sources import open_source

            opener = open_source
        self.source_name = source.name if source is not None else source_name
        self._requested_name = source_name
        self._options = options
        self._catalog = catalog
        self._config = config
        self._source = source
        self._opener = opener
        self._attributor = attributor
        self._job_mapper = job_mapper
        self._grace = grace_batches
        self._backoff_initial = backoff_initial_seconds
        self._backoff_max = backoff_max_seconds
        self._backoff = backoff_initial_seconds
        self._clock = wall_clock
        self._observers = tuple(observers)
        self._failed_observers: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tracked: dict[EntityKey, _Tracked] = {}
        self._totals: dict[EntityKey, Totals] = {}
        self._departed: dict[EntityKey, float] = {}
        """GPUs dropped from the snapshot whose counters are still kept: key -> wall time it left
        (oldest first)."""
        self._notes = SummaryLog(log, time.monotonic)
        """Per-sample and per-identity lines (bad timestamps, GPUs leaving and returning)."""
        self._advanced_wall: float | None = None
        """Wall time a GPU's sample timestamp last moved forward: the data's own freshness."""
        self._cards: dict[str, Card | None] = {}
        self._errors: dict[str, int] = {}
        self._skipped_errors: dict[str, int] = {}
        self._skipped_closed = 0
        """Records skipped by sources closed since (a reopened source counts from 0 again)."""
        self._skipped_open = 0
        """Records skipped by the source open now, as last collected."""
        self._samples_total = 0
        self._last_wall: float | None = None
        self._last_ok_wall: float | None = None
        self._finished = False
        self._generation = 0
        self._ordered: list[_Tracked] | None = None
        """The tracked GPUs in snapshot order; None when a GPU came, left or changed identity."""
        self._errors_view: MappingProxyType[str, int] | None = None
        """errors_total as last published; None when an error count changed since."""
        self._dirty = False
        """Batches were folded in since the last publish (the thread defers at --speed max)."""
        self._published_at = 0.0
        self._announce_open = False
        """A reopened source is announced after its first good read (an open that then fails
        every read was never really open)."""
        self._health = SourceHealth(
            name=self.source_name,
            up=source is not None,
            reason=None if source is not None else "starting",
        )
        self.snapshot: Snapshot = self._build_snapshot()
        """The current snapshot. Replaced whole (one reference store), never mutated."""

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
        source = self._source
        if source is not None and source.paced:
            source.close()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("sampler thread did not stop within %.0f s", timeout)
                return
        self._close_source()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def running(self) -> bool:
        """True while the sampler thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._finished:
                self._stop.wait(3600)
                continue
            started = time.monotonic()
            source = self._source
            unpaced_replay = source is not None and source.paced and self._options.speed is None
            publish = not unpaced_replay or started - self._published_at >= PUBLISH_EVERY_SECONDS
            ok = self._round(publish=publish)
            if self._stop.is_set():
                break
            if not ok:
                delay = self._backoff
                self._backoff = min(self._backoff * 2, self._backoff_max)
                self._stop.wait(delay)
            elif self._source is not None and not self._source.paced:
                elapsed = time.monotonic() - started
                self._stop.wait(max(0.0, self._options.interval_seconds - elapsed))
        if self._dirty:
            self._publish()
        self._notes.flush()

    # -- one round ---------------------------------------------------------------------------

    def run_once(self) -> bool:
        """Open if needed, read one batch, publish. False after a failure (caller backs off)."""
        return self._round(publish=True)

    def _round(self, *, publish: bool) -> bool:
        """run_once; publish=False folds a good batch in without publishing it yet."""
        if self._finished:
            return True
        if self._source is None and not self._reopen():
            self._expire_while_down()
            self._publish()
            return False
        source = self._source
        assert source is not None
        try:
            batch = source.read()
        except EndOfStream:
            if self._stop.is_set():
                return True  # our own stop() woke a pacing replay: not the end of the file
            self._collect_skipped(source)
            self._finished = True
            self._health = self._health._replace(
                up=False,
                reason=END_OF_REPLAY,
                message="the replay has played its last sample; serving the last state",
                finished=True,
            )
            log.info("replay finished: its last sample is played")
            self._publish()
            return True
        except SourceError as exc:
            self._record_error(exc.reason, exc.message)
            self._close_source()
            self._expire_while_down()
            self._publish()
            return False
        except Exception as exc:  # a bug in a source must not kill the sampler
            log.exception("source %s failed unexpectedly", self.source_name)
            self._record_error("internal_error", f"{type(exc).__name__}: {exc}")
            self._close_source()
            self._expire_while_down()
            self._publish()
            return False
        try:
            self._fold(batch, live=not source.paced)
        except Exception as exc:  # a bad value or a failing attributor must not kill the thread
            log.exception("folding a batch from %s failed", self.source_name)
            self._record_error("internal_error", f"{type(exc).__name__}: {exc}")
            self._publish()
            return False
        if self._announce_open:
            self._announce_open = False
            log.info("source %s opened and answered", self.source_name)
        if publish:
            self._collect_skipped(source)
            self._publish()
        self._backoff = self._backoff_initial
        return True

    def ingest(self, batch: list[Sample]) -> None:
        """Fold one batch into the tracked GPUs and publish (public so tests can drive it). Its
        timestamps are taken as trace time: checked finite and in order, not against the clock."""
        self._fold(batch, live=False)
        self._publish()

    def _fold(self, batch: list[Sample], *, live: bool) -> None:
        """Step every GPU of the batch through inference; count GPUs that missed it.

        live: the source's timestamps are meant to be the wall clock, so each must also lie
        within a window of it (exporter/sample_checks.py)."""
        now = self._clock()
        advanced = False
        refused: str | None = None
        seen: set[EntityKey] = set()
        tracked_by_key = self._tracked
        totals_by_key = self._totals
        config = self._config
        cards = self._cards
        attributor = self._attributor
        job_mapper = self._job_mapper
        mig_parents, shares = mig_shares(batch, self._card_for)
        for sample in batch:
            entity = sample.entity
            key = (entity.uuid, entity.gpu_instance)
            problem = timestamp_problem(sample.timestamp, now, live=live)
            if problem is not None:
                self._skip_sample(
                    problem,
                    f"GPU {entity.uuid}: sample timestamp {sample.timestamp!r} {why_not_believed(problem)}",
                )
                refused = problem
                continue  # the GPU misses this batch, as if the source had not listed it
            if key in seen:
                continue  # one sample per entity per batch; a duplicate is the source's mistake
            seen.add(key)
            mig_parent = entity.gpu_instance is None and entity.uuid in mig_parents
            share = 0.0 if mig_parent else shares.get(key, 1.0)
            model = entity.model
            card = cards[model] if model in cards else self._card_for(model)
            attribution = sample.attribution
            if attribution is None and attributor is not None:
                attribution = attributor.lookup(entity.uuid, entity.gpu_instance)
            hpc_job = sample.hpc_job
            if hpc_job is None and job_mapper is not None:
                hpc_job = job_mapper.lookup(entity.gpu, entity.gpu_instance)
            tracked = tracked_by_key.get(key)
            if tracked is None:
                earlier = totals_by_key.get(key)
                if earlier is not None:
                    self._departed.pop(key, None)
                    self._notes.note(
                        "gpu_back",
                        f"GPU {key[0]} is back in the batches; its series continue from where they were",
                        logging.INFO,
                    )
                state = step(
                    None,
                    sample,
                    card,
                    config,
                    totals=earlier,
                    count_work=not mig_parent,
                    time_weight=share,
                )
                advanced = True
                tracked_by_key[key] = _Tracked(
                    state=state,
                    attribution=attribution,
                    hpc_job=hpc_job,
                    mig_parent=mig_parent,
                    gpu_share=share,
                )
                self._ordered = None
            else:
                previous = tracked.state
                if sample.timestamp < previous.timestamp:
                    # the upstream's clock went back (or it restarted): start the GPU's timeline
                    # again from this sample rather than ignore every sample until it catches up
                    self._skip_sample(
                        TIMESTAMP_BACKWARDS,
                        f"GPU {entity.uuid}: sample timestamp {sample.timestamp!r} is older than its "
                        f"previous {previous.timestamp!r}; its timeline starts again here (the interval "
                        "is not integrated)",
                    )
                    state = step(
                        None,
                        sample,
                        card,
                        config,
                        totals=previous.totals,
                        count_work=not mig_parent,
                        time_weight=share,
                    )
                else:
                    state = step(
                        previous,
                        sample,
                        card,
                        config,
                        integrate=tracked.missed_batches == 0,
                        count_work=not mig_parent,
                        time_weight=share,
                    )
                advanced = advanced or state is not previous
                if state.entity is not previous.entity or tracked.mig_parent != mig_parent:
                    self._ordered = None  # the GPU index may have changed: sort again
                tracked.state = state
                tracked.attribution = attribution
                tracked.hpc_job = hpc_job
                tracked.missed_batches = 0
                tracked.mig_parent = mig_parent
                tracked.gpu_share = share
            totals_by_key[key] = state.totals
        if len(seen) != len(tracked_by_key):
            for key in list(tracked_by_key):
                if key in seen:
                    continue
                tracked = tracked_by_key[key]
                tracked.missed_batches += 1
                if tracked.missed_batches > self._grace:
                    self._notes.note(
                        "gpu_left", f"GPU {key[0]} left the batches; dropping its series", logging.INFO
                    )
                    del tracked_by_key[key]
                    self._depart(key, now)
                    self._ordered = None
        self._samples_total += 1
        self._last_wall = now
        self._last_ok_wall = now
        if advanced:
            self._advanced_wall = now
        if self._departed:
            self._prune_departed(now)
        self._notes.tick()
        if seen:
            refused = None  # some sample was believed
        health = self._health
        if (
            not health.up
            or health.reason is not None
            or health.message is not None
            or health.refused != refused
        ):
            self._health = health._replace(up=True, reason=None, message=None, refused=refused)
        self._dirty = True

    # -- helpers -----------------------------------------------------------------------------

    def _reopen(self) -> bool:
        try:
            self._source = self._opener(self._requested_name, self._options)
        except SourceError as exc:
            self._record_error(exc.reason, exc.message)
            return False
        except Exception as exc:  # a GPU library's own exception out of open(): retry, don't die
            log.exception("opening source %s failed unexpectedly", self._requested_name)
            self._record_error("internal_error", f"{type(exc).__name__}: {exc}")
            return False
        self.source_name = self._source.name
        self._announce_open = True  # logged once the source has answered a read, not before
        self._health = self._health._replace(name=self.source_name, up=True, reason=None, message=None)
        return True

    def _close_source(self) -> None:
        source, self._source = self._source, None
        if source is None:
            return
        self._collect_skipped(source)
        self._skipped_closed += self._skipped_open  # kept: corrupt_line never goes backwards
        self._skipped_open = 0
        try:
            source.close()
        except Exception:  # closing a broken library handle may fail too; nothing to save
            log.debug("closing source %s failed", self.source_name, exc_info=True)

    def _record_error(self, reason: str, message: str) -> None:
        message = redact_credentials(message)  # it reaches the log, /readyz and /classify
        self._errors[reason] = self._errors.get(reason, 0) + 1
        self._errors_view = None
        log.warning(
            "source %s: %s (%s); retrying in %.0f s", self.source_name, message, reason, self._backoff
        )
        self._health = self._health._replace(up=False, reason=reason, message=message)

    def _expire_while_down(self) -> None:
        """Drop every GPU once the source has been down for longer than the grace period."""
        if not self._tracked:
            return
        since = self._last_ok_wall
        grace_seconds = self._grace * self._options.interval_seconds
        if since is None or self._clock() - since > grace_seconds:
            log.info(
                "source %s down for more than %g s; dropping the series of %d GPUs",
                self.source_name,
                grace_seconds,
                len(self._tracked),
            )
            now = self._clock()
            for key in self._tracked:
                self._depart(key, now)
            self._tracked.clear()
            self._ordered = None

    def _skip_sample(self, reason: str, message: str) -> None:
        """Count one sample not believed under `reason`, and say so (summarised once a minute)."""
        self._errors[reason] = self._errors.get(reason, 0) + 1
        self._errors_view = None
        self._notes.note(reason, f"source {self.source_name}: {message}")

    def _depart(self, key: EntityKey, now: float) -> None:
        """Keep a dropped GPU's counters for its return, within the retention; forget the oldest."""
        self._departed.pop(key, None)
        self._departed[key] = now
        self._prune_departed(now)

    def _prune_departed(self, now: float) -> None:
        """Forget the counters of GPUs gone longer than the retention, or beyond MAX_DEPARTED
        (oldest first); O(1) when there is nothing to forget."""
        departed = self._departed
        while departed:
            oldest, left_at = next(iter(departed.items()))
            if len(departed) <= MAX_DEPARTED and now - left_at <= DEPARTED_RETENTION_SECONDS:
                break
            del departed[oldest]
            self._totals.pop(oldest, None)

    @property
    def identities_kept(self) -> int:
        """GPUs whose counters the sampler holds: those in the batches and those that left within
        the retention (bounded by the batch size plus MAX_DEPARTED)."""
        return len(self._totals)

    def _card_for(self, model: str) -> Card | None:
        if model not in self._cards:
            if len(self._cards) >= MAX_CARDS_KNOWN:
                self._cards.clear()
            card = self._catalog.find_by_nvml_name(model)
            if card is None:
                note_unknown_model(model)
            self._cards[model] = card
        return self._cards[model]

    def _collect_skipped(self, source: Source) -> None:
        """Records the source skipped (a replay's corrupt lines, whatever the parser's reason)
        become sample_errors_total{reason="corrupt_line"}, added to what sources closed before it
        had skipped, so the counter never goes backwards across reopens."""
        skipped = source.records_skipped
        if skipped == self._skipped_open:
            return
        if skipped < self._skipped_open:  # the same source object reopened: its count restarted
            self._skipped_closed += self._skipped_open
        self._skipped_open = skipped
        total = self._skipped_closed + skipped
        if total > 0:
            self._skipped_errors = {CORRUPT_LINE: total}
            self._errors_view = None

    def _freshness_seconds(self) -> float:
        return max(3 * self._options.interval_seconds, MIN_FRESHNESS_SECONDS)

    def _build_snapshot(self) -> Snapshot:
        """The snapshot of the current state: built on every publish, so kept cheap (errors and
        GPU order reused while unchanged)."""
        errors = self._errors_view
        if errors is None:
            counted = dict(self._errors)
            for reason, n in self._skipped_errors.items():
                counted[reason] = counted.get(reason, 0) + n
            errors = self._errors_view = MappingProxyType(counted)
        health = self._health._replace(
            samples_total=self._samples_total,
            errors_total=errors,
            last_sample_wall_time=self._last_wall,
            data_advanced_wall_time=self._advanced_wall,
        )
        ordered = self._ordered
        if ordered is None:
            ordered = self._ordered = sorted(self._tracked.values(), key=_order)
        gpus = tuple(
            [
                GpuState(
                    entity=t.state.entity,
                    attribution=t.attribution,
                    inference=t.state,
                    hpc_job=t.hpc_job,
                    mig_parent=t.mig_parent,
                    gpu_share=t.gpu_share,
                    derived=Derived(),
                )
                for t in ordered
            ]
        )
        config = self._config
        return Snapshot(
            generation=self._generation,
            source=health,
            gpus=gpus,
            interval_seconds=self._options.interval_seconds,
            smoothing_seconds=config.smoothing_seconds,
            dwell_seconds=config.dwell_seconds,
            freshness_seconds=self._freshness_seconds(),
            stalled_seconds=max(STALLED_SECONDS, self._freshness_seconds()),
            version=__version__,
        )

    def _publish(self) -> None:
        self._generation += 1
        snapshot = self.snapshot = self._build_snapshot()
        self._dirty = False
        self._published_at = time.monotonic()
        for index, observe in enumerate(self._observers):
            try:
                observe(snapshot)
            except Exception:  # a view's bug must not stop sampling, nor flood the log
                if index not in self._failed_observers:
                    self._failed_observers.add(index)
                    log.exception("snapshot observer %r failed (logged once)", observe)


def mig_shares(
    batch: list[Sample], card_for: Callable[[str], Card | None]
) -> tuple[set[str], dict[EntityKey, float]]:
    """The MIG parents of a batch (uuids of GPUs with an instance in it) and each instance's share
    of its GPU: its compute slices over those of the GPU's instances in the batch, or equal
    shares when a profile is unknown. A GPU's instances together carry one GPU-second per second,
    so a node's GPU-seconds are its cards' (docs/model.md, "One count per physical GPU")."""
    by_parent: dict[str, list[tuple[EntityKey, int | None]]] = {}
    for sample in batch:
        entity = sample.entity
        if entity.gpu_instance is None:
            continue
        card = card_for(entity.model)
        slices = card.mig_slices(entity.profile) if card is not None and entity.profile else None
        compute = slices.compute if slices is not None else None
        by_parent.setdefault(entity.uuid, []).append(((entity.uuid, entity.gpu_instance), compute))
    shares: dict[EntityKey, float] = {}
    for instances in by_parent.values():
        unique = dict(instances)
        known = [c for c in unique.values() if c is not None]
        whole = sum(known) if len(known) == len(unique) else 0
        for key, compute in unique.items():
            shares[key] = compute / whole if whole and compute is not None else 1.0 / len(unique)
    return set(by_parent), shares


def _order(tracked: _Tracked) -> tuple[int, int, str]:
    entity = tracked.state.entity
    return (entity.gpu, -1 if entity.gpu_instance is None else entity.gpu_instance, entity.uuid)
