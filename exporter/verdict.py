"""One GPU's live verdict as a typed record: what `GET /classify`, `/live.json`, `/roofline.svg`
and `ridgeline top` read (docs/api.md, "GET /classify").

The daemon builds one per GPU per snapshot (exporter/web/live_routes.py, memoised on the
snapshot's GpuState); `to_json` writes it as the API answers it, and `decode_verdict` reads an
answer back for `top`, which has only the HTTP API. The field order is the JSON's key order, so
a new field is one line here, placed where it should appear (a nested object: a record class here
and the line); its JSON reader follows from its annotation. Standard library only: `top` imports
it without the daemon's state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple


class VerdictAttribution(NamedTuple):
    """The pod a GPU is attributed to (exporter/attribution/)."""

    namespace: str | None = None
    pod: str | None = None
    container: str | None = None


class VerdictSmoothing(NamedTuple):
    """The smoothing the regime is debounced with, and the regime it is waiting to confirm."""

    time_constant_seconds: float | None = None
    dwell_seconds: float | None = None
    pending_regime: str | None = None
    pending_since: float | None = None


class VerdictTotals(NamedTuple):
    """The GPU's counters (`ridgeline_regime_seconds_total`, `_flop_total`, `_dram_bytes_total`)."""

    regime_seconds: Mapping[str, float] | None = None
    flop_total: float | None = None
    dram_bytes_total: float | None = None
    integrated_seconds: float | None = None


class VerdictReducedClock(NamedTuple):
    """The clock marker (exporter/clock_events.py): a busy GPU's binding pipe below its clock."""

    clock_ratio: float | None = None
    causes: tuple[str, ...] = ()
    cause_text: str | None = None
    give_back: float | None = None
    """1/k − 1 of the FLOP/s while compute-bound; None in another regime."""
    note: str | None = None


class LiveVerdict(NamedTuple):
    """One GPU (or MIG instance) as GET /classify answers it; a field without a reading is None.

    Fields also named on exporter.inference.Estimate are copied from it by name (the builder
    reads this class's fields), so a new Estimate figure is one line here.
    """

    gpu: int | None = None
    uuid: str | None = None
    model: str | None = None
    gpu_instance: int | None = None
    attribution: VerdictAttribution | None = None
    timestamp: float | None = None
    reading: str | None = None
    """ok, partial or none (docs/api.md)."""
    no_verdict_reason: str | None = None
    missing_fields: tuple[str, ...] = ()
    unknown_because: tuple[str, ...] = ()
    mig_parent: bool = False
    card: str | None = None
    precision: str | None = None
    precision_note: str | None = None
    peak_flop_per_second: float | None = None
    bandwidth_bytes_per_second: float | None = None
    ridge_flop_per_byte: float | None = None
    pipe: str | None = None
    compute_roof_flop_per_second: float | None = None
    intensity_flop_per_byte: float | None = None
    position: float | None = None
    regime: str | None = None
    raw_regime: str | None = None
    smoothed_regime: str | None = None
    attainable_flop_per_second: float | None = None
    fraction_of_peak: float | None = None
    lever: str | None = None
    achieved_flop_per_second: float | None = None
    achieved_bandwidth_bytes_per_second: float | None = None
    flop_utilization: float | None = None
    roofline_efficiency: float | None = None
    dram_active: float | None = None
    tensor_active: float | None = None
    clock_ratio: float | None = None
    vector_clock_ratio: float | None = None
    gr_engine_active: float | None = None
    gr_engine_contradicted: bool | None = None
    uncounted_pipes: tuple[str, ...] | None = None
    clock_event_reasons: tuple[str, ...] | None = None
    clock_causes: tuple[str, ...] | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    fp64_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None
    smoothing: VerdictSmoothing | None = None
    totals: VerdictTotals | None = None
    own_ridge_flop_per_byte: float | None = None
    """The GPU's own ridge when its compute roof is not the card's (exporter/view/ridge.py)."""
    ridge_note: str | None = None
    reduced_clock: VerdictReducedClock | None = None
    """Set while the binding pipe runs below its peak's clock (docs/live-view.md); else None."""
    link: str | None = None
    """The link at its wall of an interconnect-bound verdict (nvlink, pcie); else None."""
    link_utilization: Mapping[str, float] | None = None
    """{link: load}: each link's busier direction over the card's per-direction bandwidth, for
    the links with counters and a figure (docs/model.md, "The interconnect wall")."""

    def to_json(self) -> dict[str, Any]:
        """The verdict as the API writes it: nested records as objects, in field order."""
        return _as_json(self)


def _as_json(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = record._asdict()
    for name in _NESTED[type(record)]:
        value = out[name]
        if value is not None:
            out[name] = _as_json(value)
    return out


# -- reading an answer back (`ridgeline top`): whatever a node sent, a wrong type reads as absent --


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _names(value: object) -> tuple[str, ...] | None:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list | tuple) else None


def _seconds(value: object) -> dict[str, float] | None:
    if not isinstance(value, Mapping):
        return None
    numbers = {k: _number(v) for k, v in value.items() if isinstance(k, str)}
    return {k: v for k, v in numbers.items() if v is not None}


_DECODERS: dict[str, Callable[[object], object]] = {
    "int | None": _integer,
    "float | None": _number,
    "str | None": _text,
    "bool | None": _flag,
    "bool": lambda v: v is True,
    "tuple[str, ...]": lambda v: _names(v) or (),
    "tuple[str, ...] | None": _names,
    "Mapping[str, float] | None": _seconds,
}
"""How each annotation of the records above is read from JSON, keyed by its text."""


def _decoder(record: type[Any]) -> Callable[[object], Any]:
    """A reader of `record` from a JSON object, one converter per field from its annotation; a
    field of a type without a converter fails at import, so a new field cannot be left unread."""
    fields: list[tuple[str, Callable[[object], object]]] = []
    for name, annotation in record.__annotations__.items():
        text = _annotation(annotation)
        nested = _RECORDS.get(text.removesuffix(" | None"))
        if nested is not None:
            fields.append((name, _decoder(nested)))
            continue
        convert = _DECODERS.get(text)
        if convert is None:
            raise TypeError(f"{record.__name__}.{name}: no JSON reader for {text!r}")
        fields.append((name, convert))

    def decode(value: object) -> Any:
        if not isinstance(value, Mapping):
            return None
        return record(**{name: convert(value.get(name)) for name, convert in fields})

    return decode


def _annotation(annotation: object) -> str:
    return str(getattr(annotation, "__forward_arg__", annotation))  # NamedTuple's: a ForwardRef


_RECORDS: dict[str, type[Any]] = {
    name: value
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")
}
"""The records of this module by name: a field annotated with one holds a record of its own."""
_NESTED: dict[type[Any], tuple[str, ...]] = {
    record: tuple(
        name
        for name, annotation in record.__annotations__.items()
        if _annotation(annotation).removesuffix(" | None") in _RECORDS
    )
    for record in _RECORDS.values()
}
"""Each record's fields holding a record (written as a JSON object, read back as the record)."""
_decode_live = _decoder(LiveVerdict)


def decode_verdict(answer: Mapping[str, Any]) -> LiveVerdict:
    """One GPU of a GET /classify answer as a LiveVerdict: a missing or mistyped field reads as
    None (an older or newer node's answer still shows what it has)."""
    verdict: LiveVerdict = _decode_live(answer)
    return verdict
