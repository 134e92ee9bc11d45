"""The report's model: per-group usage in, the report document out (docs/report.md).

Pure code over plain records, so every number the report prints is tested with hand-made
inputs. The inputs only measure `Usage` (counter increases per group); everything derived —
GPU-hours, intensity, the roofline point, the savings bounds — is computed here, once, and the
JSON and the HTML are both written from the one document `build_report` returns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from exporter.catalog import Card, Catalog
from exporter.inference import precision_on
from exporter.report.document import CoverageDoc, ReportDoc, RowDoc, TopEntryDoc
from exporter.roofline import REGIMES, Roof, Thresholds

SCHEMA = "ridgeline.report/v1"
"""The JSON document's `schema` value; a change that breaks readers bumps it (docs/report.md)."""

BUSY_REGIMES: tuple[str, ...] = ("memory_bound", "compute_bound", "latency_bound", "interconnect_bound")
"""Time the counters placed on the roofline: what achieved FLOP/s per GPU is taken over (idle
and `unknown` time — counters that cannot place the GPU — are not)."""

UNATTRIBUTED_SHARE = 1e-3
"""The fleet's GPU-seconds beyond the groups' sum become a group of their own (GPUs without the
grouping labels) once they exceed this share of the fleet; below it they are rounding between
two queries and are left out."""

MEMORY_BYTES_FACTOR = 0.5
"""The memory lever: the bytes a memory-bound workload moves are halved (fp8 weights, fusion)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What one group (or the whole fleet) accrued over the range: the counters' increases.

    labels: the grouping labels' values (a label the group's GPUs lack is absent).
    gpu_seconds: regime -> GPU-seconds (raw regime, as the daemon integrates it).
    idle_allocated_gpu_seconds: idle GPU-seconds of GPUs held by a pod or an HPC job.
    card_gpu_seconds: card key -> GPU-seconds, to choose the group's roof.
    clock_lost_gpu_seconds: cause label -> GPU-seconds a reduced clock cost
    (ridgeline_clock_lost_seconds_total's increase).
    """

    labels: Mapping[str, str]
    gpu_seconds: Mapping[str, float] = field(default_factory=dict)
    idle_allocated_gpu_seconds: float = 0.0
    flop: float = 0.0
    dram_bytes: float = 0.0
    card_gpu_seconds: Mapping[str, float] = field(default_factory=dict)
    clock_lost_gpu_seconds: Mapping[str, float] = field(default_factory=dict)

    @property
    def total_gpu_seconds(self) -> float:
        return sum(self.gpu_seconds.get(r, 0.0) for r in REGIMES)

    @property
    def busy_gpu_seconds(self) -> float:
        return sum(self.gpu_seconds.get(r, 0.0) for r in BUSY_REGIMES)

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages (labels kept from self)."""
        return Usage(
            labels=self.labels,
            gpu_seconds=_add(self.gpu_seconds, other.gpu_seconds),
            idle_allocated_gpu_seconds=self.idle_allocated_gpu_seconds + other.idle_allocated_gpu_seconds,
            flop=self.flop + other.flop,
            dram_bytes=self.dram_bytes + other.dram_bytes,
            card_gpu_seconds=_add(self.card_gpu_seconds, other.card_gpu_seconds),
            clock_lost_gpu_seconds=_add(self.clock_lost_gpu_seconds, other.clock_lost_gpu_seconds),
        )


def _add(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0.0) + value
    return out


def merge_usage(parts: Iterable[Usage]) -> list[Usage]:
    """Usages with equal labels summed into one (segments of a range, several cards of a group),
    in first-seen order."""
    merged: dict[tuple[tuple[str, str], ...], Usage] = {}
    for part in parts:
        key = tuple(sorted(part.labels.items()))
        found = merged.get(key)
        merged[key] = part if found is None else found.plus(part)
    return list(merged.values())


@dataclass(frozen=True, slots=True)
class Window:
    """A stretch of time [start, end) in seconds since the epoch."""

    start: float
    end: float


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """The fleet in one query window: GPUs (GPU-seconds ÷ window) per regime."""

    end: float
    gpus: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where the numbers came from, so that a reader can judge them."""

    kind: str
    """"prometheus" or "replay"."""
    location: str
    """The query API's URL (without credentials) or the trace's path."""
    start: float
    end: float
    step_seconds: float
    """The query window (Prometheus) or the trace's typical sample interval (replay)."""
    sample_interval_seconds: float | None
    """The scrape interval seen in the data (Prometheus), the trace's interval (replay)."""
    series: Mapping[str, str] = field(default_factory=dict)
    """Which series each part of the range was read from: span -> description."""
    gaps: tuple[Window, ...] = ()
    """Stretches without any data (no GPU reported)."""
    timeline: tuple[TimelinePoint, ...] = ()
    notes: tuple[str, ...] = ()
    clock_loss_measured: bool = True
    """False where the counter it comes from cannot be read (a server without raw counters): the
    clock-lost figures are then null, not 0."""
    coverage: Coverage | None = None
    """How much of the expected GPU-time was seen (None: not measured, a replay)."""


@dataclass(frozen=True, slots=True)
class Collected:
    """What an input (the Prometheus query API, a replayed trace) measured: build_report's input."""

    groups: list[Usage]
    fleet: Usage
    workloads: list[Usage]
    provenance: Provenance


@dataclass(frozen=True, slots=True)
class Lever:
    """One lever: which time it acts on, and the bound's formula and assumptions as printed."""

    key: str
    title: str
    formula: str
    assumptions: str


def levers(thresholds: Thresholds) -> tuple[Lever, ...]:
    """The levers the report bounds, in the order it prints them."""
    ceiling = thresholds.theta * max(thresholds.tensor_wall, thresholds.dram_wall)
    return (
        Lever(
            key="idle_allocated",
            title="Give back GPUs that sit idle while allocated",
            formula="S = T_idle,allocated",
            assumptions=(
                "every idle GPU-second of a GPU held by a pod or an HPC job is recoverable "
                "(scale the job down, share the GPU, or release it); idle GPUs nobody holds are "
                "not counted"
            ),
        ),
        Lever(
            key="memory_bound",
            title="Move half the bytes (fp8 weights, kernel fusion, a quantized KV cache)",
            formula=f"S ≤ T_memory × {MEMORY_BYTES_FACTOR:g}",
            assumptions=(
                "memory-bound time is at most proportional to the DRAM bytes moved "
                "(time ≥ bytes ÷ B at the wall), so halving the bytes saves at most half of it; "
                "the work stays memory-bound and nothing else slows down"
            ),
        ),
        Lever(
            key="latency_bound",
            title="Reach the roofline (bigger batches, CUDA graphs, fewer launches, a faster input path)",
            formula=(
                "S ≤ T_latency × (1 − e),  e = min(achieved ÷ attainable, "
                f"θ·max(tensor_wall, dram_wall) = {ceiling:.3g})"
            ),
            assumptions=(
                "latency-bound intervals run at the group's own intensity and efficiency "
                "(achieved = Σflop ÷ busy GPU-seconds, attainable = min(P, I·B) at the group's "
                "card), and never above the highest efficiency a latency-bound interval can have "
                "by the regime rules; at the roof the same work takes e of the time. Without a "
                "card roof, e = 0: the whole latency-bound time"
            ),
        ),
        Lever(
            key="reduced_clock",
            title="Restore the full clock (power limit, cooling, application clocks)",
            formula="S = Σ T_compute,reduced × (1 − k)",
            assumptions=(
                "compute-bound time whose binding pipe ran below 97 % of the clock its peak is "
                "quoted at (k = SM clock ÷ that clock; ridgeline_clock_lost_seconds_total adds "
                "(1 − k) of each such GPU-second): at its wall a pipe does a fixed amount of work "
                "per cycle, so at the full clock the same work takes k of the time; within 3 % of "
                "the clock is sampling jitter and not counted, and the other regimes lose little "
                "to a lower clock"
            ),
        ),
    )


@dataclass(frozen=True, slots=True)
class ReportOptions:
    by: tuple[str, ...]
    precision: str = "bf16"
    """The roofs' precision (the daemon's default, or its --precision)."""
    thresholds: Thresholds = field(default_factory=Thresholds)
    top: int = 10
    """How many workloads each top list shows."""


def build_report(
    *,
    groups: Sequence[Usage],
    fleet: Usage,
    workloads: Sequence[Usage],
    provenance: Provenance,
    catalog: Catalog,
    options: ReportOptions,
) -> ReportDoc:
    """The report document (docs/report.md, "JSON"): what `--json` writes and the HTML shows.

    Groups are sorted by GPU-seconds, largest first. When the fleet has materially more
    GPU-seconds than its groups (recorded series only cover pods, so unattributed GPUs appear
    only in the cluster totals), the difference becomes one group without labels.
    """
    lever_list = levers(options.thresholds)
    rows = _rows(groups, fleet)
    cards: dict[str, Roof] = {}
    group_docs = [_group_doc(u, catalog, options, cards) for u in rows]
    fleet_doc = _fleet_doc(rows, fleet, group_docs, lever_list, catalog, options, cards)
    coverage = provenance.coverage
    if coverage is not None:
        for g in group_docs:
            missing = coverage.group_missing.get(tuple(sorted(g["labels"].items())))
            g["coverage"] = _coverage_ratio(g["gpu_seconds_total"], missing or 0.0)
        fleet_doc["coverage"] = _coverage_ratio(fleet_doc["gpu_seconds_total"], coverage.missing_gpu_seconds)
    workload_rows = [_group_doc(u, catalog, options, cards) for u in workloads]
    if not provenance.clock_loss_measured:
        for row in [*group_docs, fleet_doc, *workload_rows]:
            row["clock_lost_gpu_seconds"] = row["clock_lost_by_cause"] = None
            row["savings_gpu_seconds"]["reduced_clock"] = None
    return {
        "schema": SCHEMA,
        "range": {
            "start": iso_time(provenance.start),
            "end": iso_time(provenance.end),
            "start_timestamp": provenance.start,
            "end_timestamp": provenance.end,
            "seconds": provenance.end - provenance.start,
        },
        "by": list(options.by),
        "source": {
            "kind": provenance.kind,
            "location": provenance.location,
            "series": dict(provenance.series),
        },
        "resolution": {
            "step_seconds": provenance.step_seconds,
            "sample_interval_seconds": provenance.sample_interval_seconds,
        },
        "gaps": [
            {"start": iso_time(w.start), "end": iso_time(w.end), "seconds": w.end - w.start}
            for w in provenance.gaps
        ],
        "notes": list(provenance.notes),
        "precision": options.precision,
        "thresholds": {
            "theta": options.thresholds.theta,
            "dram_wall": options.thresholds.dram_wall,
            "tensor_wall": options.thresholds.tensor_wall,
        },
        "levers": [
            {"key": lv.key, "title": lv.title, "formula": lv.formula, "assumptions": lv.assumptions}
            for lv in lever_list
        ],
        "cards": {
            key: {
                "peak_flop_per_second": roof.peak_flop_per_second,
                "bandwidth_bytes_per_second": roof.bandwidth_bytes_per_second,
                "ridge_flop_per_byte": roof.ridge_flop_per_byte,
            }
            for key, roof in sorted(cards.items())
        },
        "groups": group_docs,
        "fleet": fleet_doc,
        "workloads": {
            "memory_bound": _top(workload_rows, "memory_bound", options.top),
            "latency_bound": _top(workload_rows, "latency_bound", options.top),
        },
        "timeline": [
            {"end": p.end, "gpus": {r: p.gpus.get(r, 0.0) for r in REGIMES}} for p in provenance.timeline
        ],
        "coverage": None if coverage is None else _coverage_doc(coverage, fleet_doc["gpu_seconds_total"]),
    }


def _rows(groups: Sequence[Usage], fleet: Usage) -> list[Usage]:
    """The groups and their remainder (if any), largest first."""
    rows = list(groups)
    rest = _remainder(rows, fleet)
    if rest is not None:
        rows = merge_usage([*rows, rest])
    rows.sort(key=lambda u: (-u.total_gpu_seconds, sorted(u.labels.items())))
    return rows


def _fleet_doc(
    rows: Sequence[Usage],
    fleet: Usage,
    group_docs: Sequence[RowDoc],
    lever_list: Sequence[Lever],
    catalog: Catalog,
    options: ReportOptions,
    cards: dict[str, Roof],
) -> RowDoc:
    """The fleet's row: its roofline point from the fleet's own usage, its sums from the rows."""
    fleet_doc = _group_doc(
        Usage(
            labels={},
            gpu_seconds=fleet.gpu_seconds,
            flop=fleet.flop,
            dram_bytes=fleet.dram_bytes,
            card_gpu_seconds=fleet.card_gpu_seconds or _cards_of(rows),
        ),
        catalog,
        options,
        cards,
    )
    # The fleet's savings are the groups' sum: the latency bound is not linear in its inputs.
    fleet_doc["savings_gpu_seconds"] = {
        lever.key: sum(_measured(g["savings_gpu_seconds"][lever.key]) for g in group_docs)
        for lever in lever_list
    }
    fleet_doc["clock_lost_gpu_seconds"], fleet_doc["clock_lost_by_cause"] = _clock_lost_sum(group_docs)
    # Allocation is a property of the groups' GPUs: the fleet's is their sum.
    fleet_doc["idle_allocated_gpu_seconds"] = sum(g["idle_allocated_gpu_seconds"] for g in group_docs)
    # The fleet row is the sum of the rows above it (the remainder included), added in their
    # order, so it equals them to the last digit; the separately measured fleet total only
    # decides whether there is a remainder.
    fleet_doc["gpu_seconds"] = {r: sum(g["gpu_seconds"][r] for g in group_docs) for r in REGIMES}
    fleet_doc["gpu_seconds_total"] = sum(g["gpu_seconds_total"] for g in group_docs)
    return fleet_doc


def _remainder(groups: Sequence[Usage], fleet: Usage) -> Usage | None:
    """The fleet's usage that no group accounts for, when it is more than rounding: GPUs without
    the grouping labels (not held by a pod when the groups come from pod-level series). Its idle
    time counts as allocated as far as the fleet's idle-while-allocated exceeds the groups' (an
    HPC job's GPUs that no pod holds). Inputs whose groups hold every GPU pass their sum as the
    fleet, so there is none: only a server without raw counters leaves a difference to take."""
    total = fleet.total_gpu_seconds
    if total <= 0:
        return None
    grouped = sum(u.total_gpu_seconds for u in groups)
    if total - grouped <= UNATTRIBUTED_SHARE * total:
        return None
    seconds = {
        r: fleet.gpu_seconds.get(r, 0.0) - sum(u.gpu_seconds.get(r, 0.0) for u in groups) for r in REGIMES
    }
    rest = total - grouped
    gpu_seconds: dict[str, float] = {
        r: s if s > UNATTRIBUTED_SHARE * rest else 0.0 for r, s in seconds.items()
    }
    idle_allocated = fleet.idle_allocated_gpu_seconds - sum(u.idle_allocated_gpu_seconds for u in groups)
    return Usage(
        labels={},
        # a regime the difference leaves a rounding's worth of (two queries over one range) is 0
        gpu_seconds=gpu_seconds,
        idle_allocated_gpu_seconds=min(gpu_seconds["idle"], max(0.0, idle_allocated)),
        flop=max(0.0, fleet.flop - sum(u.flop for u in groups)),
        dram_bytes=max(0.0, fleet.dram_bytes - sum(u.dram_bytes for u in groups)),
        card_gpu_seconds={},
    )


def _cards_of(rows: Sequence[Usage]) -> dict[str, float]:
    out: dict[str, float] = {}
    for u in rows:
        out = _add(out, u.card_gpu_seconds)
    return out


def _dominant_card(card_seconds: Mapping[str, float]) -> str | None:
    """The card with the most GPU-seconds (ties: the key that sorts first)."""
    best = sorted(((-s, k) for k, s in card_seconds.items() if s > 0))
    return best[0][1] if best else None


def _roof(card_key: str | None, catalog: Catalog, precision: str) -> Roof | None:
    if card_key is None:
        return None
    card: Card | None = catalog.get(card_key)
    if card is None or card.reference_only:
        return None
    used, _ = precision_on(card, precision)
    return card.roof(used)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def _group_doc(u: Usage, catalog: Catalog, options: ReportOptions, cards: dict[str, Roof]) -> RowDoc:
    """One group's row of the document, with its roofline point and its savings bounds."""
    card_key = _dominant_card(u.card_gpu_seconds)
    roof = _roof(card_key, catalog, options.precision)
    if roof is not None and card_key is not None:
        cards[card_key] = roof
    busy = u.busy_gpu_seconds
    intensity = _ratio(u.flop, u.dram_bytes)
    if intensity is None and u.flop > 0:
        intensity = math.inf
    achieved = _ratio(u.flop, busy) if u.flop > 0 or u.dram_bytes > 0 else None
    attainable = None
    efficiency = None
    if roof is not None and intensity is not None and achieved is not None:
        attainable = roof.attainable(intensity) if math.isfinite(intensity) else roof.peak_flop_per_second
        efficiency = min(1.0, achieved / attainable) if attainable > 0 else None
    seconds: dict[str, float] = {r: u.gpu_seconds.get(r, 0.0) for r in REGIMES}
    thresholds = options.thresholds
    ceiling = thresholds.theta * max(thresholds.tensor_wall, thresholds.dram_wall)
    e_latency = min(efficiency, ceiling) if efficiency is not None else 0.0
    savings: dict[str, float | None] = {
        "idle_allocated": u.idle_allocated_gpu_seconds,
        "memory_bound": seconds["memory_bound"] * MEMORY_BYTES_FACTOR,
        "latency_bound": seconds["latency_bound"] * (1.0 - e_latency),
        "reduced_clock": sum(u.clock_lost_gpu_seconds.values()),
    }
    return {
        "labels": dict(sorted(u.labels.items())),
        "card": card_key,
        "cards_gpu_seconds": dict(sorted(u.card_gpu_seconds.items())),
        "gpu_seconds": seconds,
        "gpu_seconds_total": u.total_gpu_seconds,
        "busy_gpu_seconds": busy,
        "idle_allocated_gpu_seconds": u.idle_allocated_gpu_seconds,
        "flop": u.flop,
        "dram_bytes": u.dram_bytes,
        "intensity_flop_per_byte": intensity if intensity is None or math.isfinite(intensity) else None,
        "achieved_flop_per_second_per_gpu": achieved,
        "attainable_flop_per_second": attainable,
        "roofline_efficiency": efficiency,
        "savings_gpu_seconds": savings,
        "clock_lost_gpu_seconds": savings["reduced_clock"],
        "clock_lost_by_cause": {c: v for c, v in sorted(u.clock_lost_gpu_seconds.items()) if v > 0},
        "coverage": None,  # build_report's, for a group and the fleet
    }


def _clock_lost_sum(rows: Sequence[RowDoc]) -> tuple[float, dict[str, float]]:
    """The fleet's clock-lost GPU-seconds and their causes: its groups' sum (the counter is read
    per group)."""
    by_cause: dict[str, float] = {}
    for row in rows:
        by_cause = _add(by_cause, row["clock_lost_by_cause"] or {})
    return sum(_measured(row["clock_lost_gpu_seconds"]) for row in rows), dict(sorted(by_cause.items()))


def _measured(value: float | None) -> float:
    """A figure that build_report sets to None only after the sums (not measured): as it is."""
    return 0.0 if value is None else value


def _top(rows: Sequence[RowDoc], regime: str, n: int) -> list[TopEntryDoc]:
    """The n workloads with the most GPU-seconds in `regime` (none with zero)."""
    ranked = sorted(
        (r for r in rows if r["labels"] and r["gpu_seconds"][regime] > 0),  # no labels: no workload
        key=lambda r: (-r["gpu_seconds"][regime], sorted(r["labels"].items())),
    )
    out: list[TopEntryDoc] = []
    for r in ranked[:n]:
        total = r["gpu_seconds_total"]
        out.append(
            {
                "labels": r["labels"],
                "card": r["card"],
                "gpu_seconds": r["gpu_seconds"][regime],
                "share_of_own_time": r["gpu_seconds"][regime] / total if total > 0 else None,
                "gpu_seconds_total": total,
                "intensity_flop_per_byte": r["intensity_flop_per_byte"],
                "roofline_efficiency": r["roofline_efficiency"],
                "savings_gpu_seconds": r["savings_gpu_seconds"][regime],
            }
        )
    return out


def iso_time(timestamp: float) -> str:
    """RFC 3339 in UTC with a Z, as Prometheus writes times."""
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z")


def group_name(labels: Mapping[str, str], by: Sequence[str]) -> str:
    """How a group is printed: its label values joined by "/", "(no LABEL)" for a missing one."""
    if not any(labels.get(label) for label in by):
        return "(no " + "/".join(by) + ")"
    return "/".join(labels.get(label) or "-" for label in by)


@dataclass(frozen=True, slots=True)
class CoverageStretch:
    """A stretch in which some scrape targets went unseen: what was expected, what was read."""

    start: float
    end: float
    expected_gpu_seconds: float
    """GPUs seen before and after the stretch × its length (docs/report.md, "Coverage")."""
    seen_gpu_seconds: float
    reconstructed: bool
    """Read from the raw counters across the stretch (counters survive an outage of the scrape)."""
    targets: tuple[str, ...]
    """The targets that went unseen in it."""

    @property
    def missing_gpu_seconds(self) -> float:
        return max(0.0, self.expected_gpu_seconds - self.seen_gpu_seconds)


@dataclass(frozen=True, slots=True)
class Coverage:
    """What the report expected and did not see, per stretch and per group."""

    stretches: tuple[CoverageStretch, ...] = ()
    group_missing: Mapping[tuple[tuple[str, str], ...], float] = field(default_factory=dict)
    """Group labels (sorted items) -> GPU-seconds expected but not seen."""

    @property
    def missing_gpu_seconds(self) -> float:
        return sum(s.missing_gpu_seconds for s in self.stretches)


def _coverage_ratio(seen: float, missing: float) -> float:
    """Seen ÷ expected, expected being seen + missing (1 when nothing was expected)."""
    return seen / (seen + missing) if seen + missing > 0 else 1.0


def _coverage_doc(coverage: Coverage, seen: float) -> CoverageDoc:
    """The document's `coverage`: the fleet's ratio and every stretch with unseen targets."""
    missing = coverage.missing_gpu_seconds
    return {
        "ratio": _coverage_ratio(seen, missing),
        "expected_gpu_seconds": seen + missing,
        "missing_gpu_seconds": missing,
        "stretches": [
            {
                "start": iso_time(s.start),
                "end": iso_time(s.end),
                "seconds": s.end - s.start,
                "expected_gpu_seconds": s.expected_gpu_seconds,
                "seen_gpu_seconds": s.seen_gpu_seconds,
                "ratio": _coverage_ratio(s.seen_gpu_seconds, s.missing_gpu_seconds),
                "reconstructed": s.reconstructed,
                "targets": list(s.targets),
            }
            for s in coverage.stretches
        ],
    }


def remainder(groups: Sequence[Usage], fleet: Usage) -> Usage | None:
    """The fleet's usage no group accounts for (build_report's ungrouped remainder), for an input
    that takes it per part of the fleet — a Prometheus shard — before summing the parts, so that
    a global view's remainder is the shards' remainders summed."""
    return _remainder(groups, fleet)
