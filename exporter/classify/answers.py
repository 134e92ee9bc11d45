"""The answers `POST /classify` and `ridgeline classify` return, one TypedDict per form, and a
card as `GET /cards` and `ridgeline cards` show it: mypy checks every field the service writes
and the CLI's prose reads (docs/design.md, "HTTP API").

Plain dicts at run time: the JSON writer and `--json` see exactly what they saw before.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from exporter.catalog import PrecisionSource
from exporter.roofline import CounterRegime, KernelRegime, Link, Pipe


class RoofFields(TypedDict):
    """What every answer and every compare row opens with: which roof, and its ridge."""

    card: str
    card_name: str
    precision: str
    peak_flop_per_second: float
    bandwidth_bytes_per_second: float
    ridge_flop_per_byte: float


class CompareRow(RoofFields):
    """The same work on another card at the same precision."""

    regime: KernelRegime
    reverses: bool
    memory_time_seconds: float
    compute_time_seconds: float
    floor_time_seconds: float
    attainable_flop_per_second: float
    fraction_of_peak: float
    speedup: float


class Skipped(TypedDict):
    card: str
    reason: str


class Compared(TypedDict, total=False):
    """The compare fields: both present when the body asked to compare, else neither."""

    compare: list[CompareRow]
    compare_skipped: list[Skipped]


class Operation(TypedDict):
    """The operation an operation-form body named; its sizes by op."""

    op: str
    dtype: str
    element_bytes: float
    m: NotRequired[int | None]
    n: NotRequired[int | None]
    k: NotRequired[int | None]
    flops_per_element: NotRequired[float]
    reads: NotRequired[int]
    writes: NotRequired[int]
    parameters: NotRequired[float | None]
    batch: NotRequired[int | None]


class KernelFields(TypedDict):
    """A kernel verdict: the work, its two times, the regime and the lever."""

    flops: float
    bytes: float
    intensity_flop_per_byte: float
    memory_time_seconds: float
    compute_time_seconds: float
    floor_time_seconds: float
    regime: KernelRegime
    attainable_flop_per_second: float
    fraction_of_peak: float
    lever: str


class KernelAnswer(RoofFields, KernelFields, Compared):
    form: Literal["kernel"]
    precision_source: PrecisionSource


class OperationAnswer(RoofFields, KernelFields, Compared):
    form: Literal["operation"]
    precision_source: PrecisionSource
    operation: Operation


class Interconnect(TypedDict, total=False):
    """The link rates the body gave, when it gave any."""

    interconnect: dict[str, float]


class CounterAnswer(RoofFields, Interconnect, Compared):
    form: Literal["counters"]
    precision_source: PrecisionSource
    reading: Literal["ok", "partial"]
    missing: list[str]
    pipe: Pipe | None
    compute_roof_flop_per_second: float
    intensity_flop_per_byte: float | None
    position: float | None
    regime: CounterRegime
    attainable_flop_per_second: float | None
    fraction_of_peak: float | None
    lever: str
    clock_event_reasons: list[str]
    clock_causes: list[str]
    achieved_flop_per_second: float | None
    achieved_bandwidth_bytes_per_second: float | None
    flop_utilization: float | None
    roofline_efficiency: float | None
    gr_engine_contradicted: bool
    uncounted_pipes: list[Pipe]
    flops_lower_bound: bool
    clock_ratio: float | None
    vector_clock_ratio: float | None
    peak_clock_mhz: float | None
    clock_note: str | None
    thresholds: dict[str, float]
    note: str
    link_utilization: dict[str, float]
    link: Link | None
    link_note: str | None


Answer = KernelAnswer | OperationAnswer | CounterAnswer


class CardSummary(TypedDict):
    """A card as `GET /cards` shows it: SI units (FLOP/s, bytes/s) and the ridge per precision."""

    key: str
    name: str
    vendor: str
    nvml_names: list[str]
    aliases: list[str]
    reference_only: bool
    peak_flop_per_second: dict[str, float]
    bandwidth_bytes_per_second: float
    ridge_flop_per_byte: dict[str, float]
    memory_gib: float | None
    sm_count: int | None
    max_sm_clock_mhz: float | None
    clock_basis: dict[str, Any] | None
    """The clock basis as the catalog states it (catalog.ClockBasisSpec's fields)."""
    no_clock_basis: str | None
    link_bytes_per_second: dict[str, float | None]
    no_links: str | None
    source: str
