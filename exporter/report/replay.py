"""The replay input: one recorded trace through the daemon's own sampler and inference -> `Usage`.

The trace is streamed by the replay source itself (exporter/sources/replay.py, `--speed max`)
and every batch goes through the real `Sampler` (exporter/sampler.py) with `serve`'s inference
settings, so the regime seconds, FLOPs and bytes are the very totals `ridgeline serve --replay
FILE --speed max` would export at the end — the same parsing, smoothing, debouncing,
integration caps and dropout rules, not a re-implementation. Memory stays bounded: the
source's read-ahead, the sampler's per-GPU state, and one running total per (GPU, label set).

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
from exporter.report.model import Provenance, TimelinePoint, Usage, Window, iso_time, merge_usage
from exporter.roofline import REGIMES
from exporter.sampler import Sampler
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable
from exporter.sources.replay import ReplaySource
from exporter.state import GpuState

TIMELINE_POINTS = 500
"""The timeline keeps at most this many checkpoints (merging neighbours as the trace goes on)."""
MAX_GAPS = 1000

_LabelKey = tuple[tuple[str, str], ...]


class ReplayReportError(Exception):
    """The trace could not be read to its end; the message says where and why."""


@dataclass(frozen=True, slots=True)
class ReplayCollected:
    groups: list[Usage]
    fleet: Usage
    workloads: list[Usage]
    provenance: Provenance
    samples: int
    batches: int


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


def collect_replay(
    options: SourceOptions,
    catalog: Catalog,
    config: InferenceConfig,
    *,
    by: Sequence[str],
    workload_by: Sequence[str],
    progress: Callable[[int], None] | None = None,
) -> ReplayCollected:
    """Run the trace through the sampler and measure every group's usage."""
    options = replace(options, speed=None, loop=False)
    source = ReplaySource(options)
    source.open()  # SourceUnavailable: one line, exit 2

    def no_reopen(name: str, opts: SourceOptions) -> ReplaySource:
        raise SourceUnavailable("replay_stopped", "the trace cannot be reopened mid-report")

    sampler = Sampler("replay", options, catalog, config, source=source, opener=no_reopen)
    segments: dict[tuple[str, int | None], _Segment] = {}
    accrued: dict[_LabelKey, _Accrued] = {}
    first_seen: dict[tuple[str, int | None], float] = {}
    last_seen: dict[tuple[str, int | None], float] = {}
    shares: dict[tuple[str, int | None], float] = {}
    """Each GPU's part of a physical GPU (a MIG instance's share; a parent's 0): its span counts so."""
    intervals: Counter[float] = Counter()
    recent: list[float] = []
    gaps: list[Window] = []
    gap_count = 0
    checkpoints: list[tuple[float, dict[str, float]]] = []
    checkpoint_every = 10.0
    previous_ts: float | None = None
    first_ts: float | None = None
    batches = samples = 0

    def close(segment: _Segment) -> None:
        if segment.latest is segment.start:
            return
        bucket = accrued.get(segment.labels)
        if bucket is None:
            bucket = accrued[segment.labels] = _Accrued()
        bucket.add(segment.start, segment.latest, segment.allocated)

    def fleet_totals() -> dict[str, float]:
        total: dict[str, float] = dict.fromkeys(REGIMES, 0.0)
        for bucket in accrued.values():
            for regime, value in bucket.seconds.items():
                total[regime] += value
        for segment in segments.values():
            after = segment.latest.regime_seconds or _ZERO
            before = segment.start.regime_seconds or _ZERO
            for regime in REGIMES:
                total[regime] += after[regime] - before[regime]
        return total

    try:
        while True:
            ok = sampler.run_once()
            snapshot = sampler.snapshot
            health = snapshot.source
            if health.finished:
                break
            if not ok:
                raise ReplayReportError(f"{source.display_name}: {health.message or health.reason}")
            batches += 1
            ts = max((g.inference.timestamp for g in snapshot.gpus), default=None)
            if ts is None:
                continue
            if first_ts is None:
                first_ts = ts
            if previous_ts is not None and ts > previous_ts:
                dt = ts - previous_ts
                intervals[round(dt, 3)] += 1
                typical = min(recent) if recent else options.interval_seconds
                if dt > config.gap_factor * max(options.interval_seconds, typical):
                    gap_count += 1
                    if len(gaps) < MAX_GAPS:
                        gaps.append(Window(start=previous_ts, end=ts))
                recent.append(dt)
                if len(recent) > 8:
                    recent.pop(0)
            previous_ts = ts if previous_ts is None else max(previous_ts, ts)
            for gpu in snapshot.gpus:
                key = (gpu.entity.uuid, gpu.entity.gpu_instance)
                samples += 1 if gpu.inference.timestamp == ts else 0
                totals = gpu.inference.totals
                segment = segments.get(key)
                if segment is None or not _same_labels(segment, gpu):
                    if segment is not None:
                        close(segment)
                        start = segment.latest
                    else:
                        start = totals
                        first_seen[key] = gpu.inference.timestamp
                    # the sample that brought the new labels integrated under them
                    segment = segments[key] = _Segment(
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
                last_seen[key] = gpu.inference.timestamp
                shares[key] = gpu.gpu_share
            if progress is not None and batches % 10000 == 0:
                progress(batches)
            if ts - (checkpoints[-1][0] if checkpoints else first_ts) >= checkpoint_every:
                checkpoints.append((ts, fleet_totals()))
                if len(checkpoints) > TIMELINE_POINTS:
                    checkpoints = checkpoints[1::2]
                    checkpoint_every *= 2
    except SourceError as exc:
        raise ReplayReportError(str(exc)) from None
    finally:
        sampler.stop()
    for segment in segments.values():
        close(segment)
    _refuse_mostly_skipped(source)
    if first_ts is None or previous_ts is None:
        raise ReplayReportError(f"{source.display_name}: no sample to report on")

    by = tuple(by)
    workload_by = tuple(workload_by)
    parts = [_usage_for(labels, bucket, by) for labels, bucket in accrued.items()]
    groups = merge_usage(parts)
    workloads = merge_usage(_usage_for(labels, bucket, workload_by) for labels, bucket in accrued.items())
    workloads = [w for w in workloads if w.labels]
    fleet = Usage(labels={})
    for part in parts:
        fleet = fleet.plus(part)
    fleet = Usage(
        labels={},
        gpu_seconds=fleet.gpu_seconds,
        idle_allocated_gpu_seconds=fleet.idle_allocated_gpu_seconds,
        flop=fleet.flop,
        dram_bytes=fleet.dram_bytes,
        card_gpu_seconds=fleet.card_gpu_seconds,
        clock_lost_gpu_seconds=fleet.clock_lost_gpu_seconds,
    )
    interval = _median(intervals) or options.interval_seconds
    spans = sum((last_seen[k] - first_seen[k]) * shares[k] for k in last_seen)
    integrated = fleet.total_gpu_seconds
    notes = [
        f"{samples} samples in {batches} batches from {source.display_name} ({source.format}), "
        f"through the daemon's sampler and inference",
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
    if gap_count > len(gaps):
        notes.append(f"{gap_count} gaps, the first {len(gaps)} listed")
    timeline = _timeline(first_ts, checkpoints)
    provenance = Provenance(
        kind="replay",
        location=source.display_name,
        start=first_ts,
        end=previous_ts,
        step_seconds=interval,
        sample_interval_seconds=interval,
        series={
            f"{iso_time(first_ts)} to {iso_time(previous_ts)}": (
                "the trace's samples through the daemon's inference "
                f"(smoothing {config.smoothing_seconds:g} s, dwell {config.dwell_seconds:g} s)"
            )
        },
        gaps=tuple(gaps),
        timeline=timeline,
        notes=tuple(notes),
    )
    return ReplayCollected(
        groups=groups,
        fleet=fleet,
        workloads=workloads,
        provenance=provenance,
        samples=samples,
        batches=batches,
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
