"""The replay input: one recorded trace through the daemon's own sampler and inference -> `Usage`.

The trace is streamed by the replay source itself (exporter/sources/replay.py, `--speed max`)
and every batch goes through the real `Sampler` (exporter/sampler.py) with `serve`'s inference
settings; the report observes the snapshots it publishes (`_Collector`) and judges gaps by the
tracker's rule (`Cadence`). So the regime seconds, FLOPs and bytes are the very totals
`ridgeline serve --replay FILE --speed max` would export at the end — the same parsing,
smoothing, debouncing, integration caps and dropout rules, not a re-implementation. Memory
stays bounded: the source's read-ahead, the sampler's per-GPU state, and one running total per
(GPU, label set).

A GPU's totals are credited to the labels it carried when they grew (its pod, HPC job, card):
a GPU that moves from one pod to another splits its time between them, as the counters'
series do in Prometheus.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from exporter.catalog import Catalog
from exporter.exposition import gpu_labels
from exporter.inference import InferenceConfig, Totals
from exporter.report.model import Collected, Provenance, TimelinePoint, Usage, Window, iso_time, merge_usage
from exporter.roofline import REGIMES
from exporter.sampler import Sampler
from exporter.sampling.tracker import Cadence, EntityKey
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable
from exporter.sources.replay import ReplaySettings, ReplaySource
from exporter.state import GpuState, Snapshot

TIMELINE_POINTS = 500
"""The timeline keeps at most this many checkpoints (merging neighbours as the trace goes on)."""
MAX_GAPS = 1000

_LabelKey = tuple[tuple[str, str], ...]


class ReplayReportError(Exception):
    """The trace could not be read to its end; the message says where and why."""


@dataclass
class _Segment:
    """A GPU's stretch under one label set: totals at its start and the latest ones."""

    entity: object
    attribution: object
    hpc_job: str | None
    card: str | None
    labels: _LabelKey
    allocated: bool
    start: Totals
    latest: Totals


@dataclass
class _Accrued:
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(REGIMES, 0.0))
    idle_allocated: float = 0.0
    flop: float = 0.0
    dram_bytes: float = 0.0
    clock_lost: dict[str, float] = field(default_factory=dict)

    def add(self, start: Totals, end: Totals, allocated: bool) -> None:
        before, after = start.regime_seconds or _ZERO, end.regime_seconds or _ZERO
        for regime in REGIMES:
            self.seconds[regime] += after[regime] - before[regime]
        if allocated:
            self.idle_allocated += after["idle"] - before["idle"]
        self.flop += (end.flop_total or 0.0) - (start.flop_total or 0.0)
        self.dram_bytes += (end.dram_bytes_total or 0.0) - (start.dram_bytes_total or 0.0)
        lost_before = start.clock_lost_seconds or {}
        for cause, value in (end.clock_lost_seconds or {}).items():
            self.clock_lost[cause] = self.clock_lost.get(cause, 0.0) + value - lost_before.get(cause, 0.0)


_ZERO: Mapping[str, float] = dict.fromkeys(REGIMES, 0.0)
"""A counter not born yet (None in Totals) has counted nothing."""


def _same_labels(segment: _Segment, gpu: GpuState) -> bool:
    """Whether the GPU still carries the segment's labels (entities and pods are shared objects
    per trace, so identity is the cheap test; a new object with equal values only costs a new
    segment under the same labels)."""
    return (
        segment.entity is gpu.entity
        and segment.attribution is gpu.attribution
        and segment.hpc_job == gpu.hpc_job
        and segment.card == gpu.card
    )


class _Collector:
    """A sampler observer: every published snapshot credits each GPU's totals to its labels and
    times the batches (their intervals, the gaps by the tracker's rule, the timeline)."""

    def __init__(self, config: InferenceConfig, progress: Callable[[int], None] | None) -> None:
        self.progress = progress
        self.cadence = Cadence(config)
        self.failure: Exception | None = None
        """An exception out of observing (the publisher would only log it): the report fails."""
        self.segments: dict[EntityKey, _Segment] = {}
        self.accrued: dict[_LabelKey, _Accrued] = {}
        self.first_seen: dict[EntityKey, float] = {}
        self.last_seen: dict[EntityKey, float] = {}
        self.shares: dict[EntityKey, float] = {}
        """Each GPU's part of a physical GPU (a MIG instance's share; a parent's 0): its span counts so."""
        self.intervals: Counter[float] = Counter()
        self.gaps: list[Window] = []
        self.gap_count = 0
        self.checkpoints: list[tuple[float, dict[str, float]]] = []
        self.checkpoint_every = 10.0
        self.previous_ts: float | None = None
        self.first_ts: float | None = None
        self.batches = self.samples = 0

    def observe(self, snapshot: Snapshot) -> None:
        if self.failure is not None:
            return
        try:
            self._observe(snapshot)
        except Exception as exc:
            self.failure = exc

    def _observe(self, snapshot: Snapshot) -> None:
        health = snapshot.source
        if health.finished or not health.up:
            return  # the end of the trace, or a failure collect_replay reports
        self.batches += 1
        ts = max((g.inference.timestamp for g in snapshot.gpus), default=None)
        if ts is None:
            return
        self._time(ts)
        for gpu in snapshot.gpus:
            self._credit(gpu, ts)
        if self.progress is not None and self.batches % 10000 == 0:
            self.progress(self.batches)
        first = self.first_ts if self.first_ts is not None else ts
        if ts - (self.checkpoints[-1][0] if self.checkpoints else first) >= self.checkpoint_every:
            self.checkpoints.append((ts, self.fleet_totals()))
            if len(self.checkpoints) > TIMELINE_POINTS:
                self.checkpoints = self.checkpoints[1::2]
                self.checkpoint_every *= 2

    def _time(self, ts: float) -> None:
        """The batch's newest timestamp: the interval since the previous one, and whether it is a gap."""
        if self.first_ts is None:
            self.first_ts = ts
        previous = self.previous_ts
        if previous is not None and ts > previous:
            dt = ts - previous
            self.intervals[round(dt, 3)] += 1
            if self.cadence.is_gap(dt):
                self.gap_count += 1
                if len(self.gaps) < MAX_GAPS:
                    self.gaps.append(Window(start=previous, end=ts))
        self.previous_ts = ts if previous is None else max(previous, ts)

    def _credit(self, gpu: GpuState, ts: float) -> None:
        """The GPU's totals so far, under the labels it carries (a new segment when they changed)."""
        key = (gpu.entity.uuid, gpu.entity.gpu_instance)
        self.samples += 1 if gpu.inference.timestamp == ts else 0
        totals = gpu.inference.totals
        segment = self.segments.get(key)
        if segment is None or not _same_labels(segment, gpu):
            if segment is not None:
                self.close(segment)
                start = segment.latest
            else:
                start = totals
                self.first_seen[key] = gpu.inference.timestamp
            # the sample that brought the new labels integrated under them
            segment = self.segments[key] = _Segment(
                entity=gpu.entity,
                attribution=gpu.attribution,
                hpc_job=gpu.hpc_job,
                card=gpu.card,
                labels=_labels_of(gpu),
                allocated=gpu.attribution is not None or gpu.hpc_job is not None,
                start=start,
                latest=totals,
            )
        segment.latest = totals
        self.last_seen[key] = gpu.inference.timestamp
        self.shares[key] = gpu.gpu_share

    def close(self, segment: _Segment) -> None:
        if segment.latest is segment.start:
            return
        bucket = self.accrued.get(segment.labels)
        if bucket is None:
            bucket = self.accrued[segment.labels] = _Accrued()
        bucket.add(segment.start, segment.latest, segment.allocated)

    def fleet_totals(self) -> dict[str, float]:
        total: dict[str, float] = dict.fromkeys(REGIMES, 0.0)
        for bucket in self.accrued.values():
            for regime, value in bucket.seconds.items():
                total[regime] += value
        for segment in self.segments.values():
            after = segment.latest.regime_seconds or _ZERO
            before = segment.start.regime_seconds or _ZERO
            for regime in REGIMES:
                total[regime] += after[regime] - before[regime]
        return total

    def finish(self) -> None:
        for segment in self.segments.values():
            self.close(segment)


def collect_replay(
    options: SourceOptions,
    catalog: Catalog,
    config: InferenceConfig,
    *,
    by: Sequence[str],
    workload_by: Sequence[str],
    require_by: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Collected:
    """Run the trace through the sampler and measure every group's usage: the replay settings
    in `options` (source_options("replay", ...) builds them), played once, flat out. A `by` no
    GPU carries is refused (require_by) or, for the default grouping, noted."""
    given = options.settings.get("replay")
    settings = replace(
        given if isinstance(given, ReplaySettings) else ReplaySettings(), speed=None, loop=False
    )
    options = replace(options, settings={"replay": settings})
    source = ReplaySource(options, settings)
    source.open()  # SourceUnavailable: one line, exit 2

    def no_reopen(name: str, opts: SourceOptions) -> ReplaySource:
        raise SourceUnavailable("replay_stopped", "the trace cannot be reopened mid-report")

    collector = _Collector(config, progress)
    sampler = Sampler(
        "replay", options, catalog, config, source=source, opener=no_reopen, observers=(collector.observe,)
    )
    try:
        while True:
            ok = sampler.run_once()
            if collector.failure is not None:
                raise collector.failure
            health = sampler.snapshot.source
            if health.finished:
                break
            if not ok:
                raise ReplayReportError(f"{source.display_name}: {health.message or health.reason}")
    except SourceError as exc:
        raise ReplayReportError(str(exc)) from None
    finally:
        sampler.stop()
    collector.finish()
    _refuse_mostly_skipped(source)
    first_ts, last_ts = collector.first_ts, collector.previous_ts
    if first_ts is None or last_ts is None:
        raise ReplayReportError(f"{source.display_name}: no sample to report on")
    parts = [_usage_for(labels, bucket, tuple(by)) for labels, bucket in collector.accrued.items()]
    workloads = merge_usage(
        _usage_for(labels, bucket, tuple(workload_by)) for labels, bucket in collector.accrued.items()
    )
    fleet = _fleet(parts)
    provenance = _provenance(collector, source, options, config, fleet, first_ts, last_ts)
    missing = _by_missing(collector.accrued, parts, by)
    if missing is not None:
        if require_by:
            raise ReplayReportError(f"{source.display_name}: {missing}")
        provenance = replace(provenance, notes=(*provenance.notes, missing))
    return Collected(
        groups=merge_usage(parts),
        fleet=fleet,
        workloads=[w for w in workloads if w.labels],
        provenance=provenance,
    )


def _by_missing(
    accrued: Mapping[_LabelKey, _Accrued], parts: Sequence[Usage], by: Sequence[str]
) -> str | None:
    """Why the grouping says nothing, where no GPU in the trace carries any of `by`'s labels:
    one group without a name is a mistyped label, not a report."""
    if not parts or any(part.labels for part in parts):
        return None
    present = sorted({name for labels in accrued for name, value in labels if value})
    there = ", ".join(present) or "none"
    return f"--by {','.join(by)}: no GPU in the trace carries it; the labels they have: {there}"


def _fleet(parts: Sequence[Usage]) -> Usage:
    """Every group's usage added up, under no labels."""
    fleet = Usage(labels={})
    for part in parts:
        fleet = fleet.plus(part)  # plus keeps self's labels: {}
    return fleet


def _provenance(
    collector: _Collector,
    source: ReplaySource,
    options: SourceOptions,
    config: InferenceConfig,
    fleet: Usage,
    first_ts: float,
    last_ts: float,
) -> Provenance:
    """Where the numbers came from: the trace, its interval, its gaps and what was left out."""
    interval = _median(collector.intervals) or options.interval_seconds
    spans = sum(
        (collector.last_seen[k] - collector.first_seen[k]) * collector.shares[k] for k in collector.last_seen
    )
    integrated = fleet.total_gpu_seconds
    notes = [
        f"{collector.samples} samples in {collector.batches} batches from {source.display_name} "
        f"({source.format}), through the daemon's sampler and inference",
    ]
    if spans - integrated > max(1e-6 * spans, 1e-9):
        notes.append(
            f"{spans - integrated:.0f} of {spans:.0f} GPU-seconds between each GPU's first and last "
            "sample were not integrated (each GPU's first sample, blank readings, gaps, missed batches)"
        )
    stats = source.replay_stats
    if stats.lines_skipped:
        reasons = ", ".join(f"{r}: {n}" for r, n in sorted(stats.skipped_by_reason.items()))
        notes.append(f"{stats.lines_skipped} lines skipped ({reasons})")
    if collector.gap_count > len(collector.gaps):
        notes.append(f"{collector.gap_count} gaps, the first {len(collector.gaps)} listed")
    return Provenance(
        kind="replay",
        location=source.display_name,
        start=first_ts,
        end=last_ts,
        step_seconds=interval,
        sample_interval_seconds=interval,
        series={
            f"{iso_time(first_ts)} to {iso_time(last_ts)}": (
                "the trace's samples through the daemon's inference "
                f"(smoothing {config.smoothing_seconds:g} s, dwell {config.dwell_seconds:g} s)"
            )
        },
        gaps=tuple(collector.gaps),
        timeline=_timeline(first_ts, collector.checkpoints),
        notes=tuple(notes),
    )


def _labels_of(gpu: GpuState) -> _LabelKey:
    """The GPU's series labels, and its node where a multi-node trace names one."""
    labels = gpu_labels(gpu)
    if gpu.entity.node is not None:
        labels = {**labels, "node": gpu.entity.node}
    return tuple(sorted(labels.items()))


def _usage_for(labels: _LabelKey, bucket: _Accrued, by: Sequence[str]) -> Usage:
    own: Mapping[str, str] = dict(labels)
    card = own.get("card")
    return Usage(
        labels={label: own[label] for label in by if own.get(label)},
        gpu_seconds=dict(bucket.seconds),
        idle_allocated_gpu_seconds=bucket.idle_allocated,
        flop=bucket.flop,
        dram_bytes=bucket.dram_bytes,
        card_gpu_seconds={card: sum(bucket.seconds.values())} if card else {},
        clock_lost_gpu_seconds=dict(bucket.clock_lost),
    )


SKIPPED_SHARE_REFUSED = 0.5
"""A trace with at least this share of its lines skipped is refused: its report would describe
what was left, not the trace (two nodes' lines told apart by index alone lose exactly half)."""


def _refuse_mostly_skipped(source: ReplaySource) -> None:
    stats = source.replay_stats
    if stats.lines_read == 0 or stats.lines_skipped < SKIPPED_SHARE_REFUSED * stats.lines_read:
        return
    reasons = ", ".join(
        f"{r}: {n}" for r, n in sorted(stats.skipped_by_reason.items(), key=lambda kv: -kv[1])
    )
    hint = ""
    if "duplicate_entity" in stats.skipped_by_reason:
        hint = (
            " (lines for one GPU index at one time: a multi-node trace needs a uuid or a node on each "
            "line to tell its GPUs apart)"
        )
    raise ReplayReportError(
        f"{source.display_name}: {stats.lines_skipped} of {stats.lines_read} lines skipped ({reasons}){hint}"
    )


def _median(counts: Counter[float]) -> float | None:
    total = sum(counts.values())
    if total == 0:
        return None
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if 2 * seen >= total:
            return value
    return None


def _timeline(
    first_ts: float, checkpoints: list[tuple[float, dict[str, float]]]
) -> tuple[TimelinePoint, ...]:
    points = []
    before_ts: float = first_ts
    before: dict[str, float] = dict.fromkeys(REGIMES, 0.0)
    for ts, totals in checkpoints:
        width = ts - before_ts
        if width > 0 and not math.isclose(width, 0.0):
            points.append(TimelinePoint(end=ts, gpus={r: (totals[r] - before[r]) / width for r in REGIMES}))
        before_ts, before = ts, totals
    return tuple(points)
