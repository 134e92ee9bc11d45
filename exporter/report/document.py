"""The report document's shape: what `build_report` returns, `--json` writes and the page reads.

One TypedDict per object of docs/report.schema.json, so mypy checks every key the model writes
and the renderer reads; tests/test_report_schema.py holds their keys equal to the schema's. Maps
keyed by data (a regime, a lever, a card, a label) stay plain dicts, as the schema's are.
"""

from __future__ import annotations

from typing import TypedDict


class RangeDoc(TypedDict):
    start: str
    end: str
    start_timestamp: float
    end_timestamp: float
    seconds: float


class SourceDoc(TypedDict):
    kind: str
    location: str
    series: dict[str, str]


class ResolutionDoc(TypedDict):
    step_seconds: float
    sample_interval_seconds: float | None


class GapDoc(TypedDict):
    start: str
    end: str
    seconds: float


class ThresholdsDoc(TypedDict):
    theta: float
    dram_wall: float
    tensor_wall: float


class LeverDoc(TypedDict):
    key: str
    title: str
    formula: str
    assumptions: str


class CardDoc(TypedDict):
    peak_flop_per_second: float
    bandwidth_bytes_per_second: float
    ridge_flop_per_byte: float


class RowDoc(TypedDict):
    """A group's row, the fleet's (labels {}), and a workload's before it is ranked."""

    labels: dict[str, str]
    card: str | None
    cards_gpu_seconds: dict[str, float]
    gpu_seconds: dict[str, float]
    gpu_seconds_total: float
    busy_gpu_seconds: float
    idle_allocated_gpu_seconds: float
    flop: float
    dram_bytes: float
    intensity_flop_per_byte: float | None
    achieved_flop_per_second_per_gpu: float | None
    attainable_flop_per_second: float | None
    roofline_efficiency: float | None
    savings_gpu_seconds: dict[str, float | None]
    clock_lost_gpu_seconds: float | None
    clock_lost_by_cause: dict[str, float] | None
    coverage: float | None


class TopEntryDoc(TypedDict):
    labels: dict[str, str]
    card: str | None
    gpu_seconds: float
    share_of_own_time: float | None
    gpu_seconds_total: float
    intensity_flop_per_byte: float | None
    roofline_efficiency: float | None
    savings_gpu_seconds: float | None


class WorkloadsDoc(TypedDict):
    memory_bound: list[TopEntryDoc]
    latency_bound: list[TopEntryDoc]


class TimelineDoc(TypedDict):
    end: float
    gpus: dict[str, float]


class StretchDoc(TypedDict):
    start: str
    end: str
    seconds: float
    expected_gpu_seconds: float
    seen_gpu_seconds: float
    ratio: float
    reconstructed: bool
    targets: list[str]


class CoverageDoc(TypedDict):
    ratio: float
    expected_gpu_seconds: float
    missing_gpu_seconds: float
    stretches: list[StretchDoc]


class ReportDoc(TypedDict):
    schema: str
    range: RangeDoc
    by: list[str]
    source: SourceDoc
    resolution: ResolutionDoc
    gaps: list[GapDoc]
    notes: list[str]
    precision: str
    thresholds: ThresholdsDoc
    levers: list[LeverDoc]
    cards: dict[str, CardDoc]
    groups: list[RowDoc]
    fleet: RowDoc
    workloads: WorkloadsDoc
    timeline: list[TimelineDoc]
    coverage: CoverageDoc | None
