"""Turn a validated classify body into the answer dict that `POST /classify` and the CLI return.

No FastAPI here: the HTTP route and `ridgeline classify` both call `classify()` and render the
same dict (JSON for the API and `--json`, prose for the terminal). The math is
exporter.roofline's; this layer only resolves the card and precision, derives the work, and names
the numbers as docs/design.md does.

Errors are raised as catalog.UnknownCard (404 with near matches), catalog.UnknownPrecision
(422 listing what the card has) and classify.models.BodyError (4xx naming the field).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from exporter import clock_events, roofline
from exporter.catalog import Card, Catalog, PrecisionSource, UnknownCard
from exporter.classify.answers import (
    Answer,
    CardSummary,
    Compared,
    CompareRow,
    CounterAnswer,
    Interconnect,
    KernelAnswer,
    KernelFields,
    Operation,
    OperationAnswer,
    RoofFields,
    Skipped,
)
from exporter.classify.models import (
    MAX_BYTES,
    MAX_FLOPS,
    BodyCommon,
    BodyError,
    CounterBody,
    KernelBody,
    OperationBody,
)
from exporter.readings import LINK_FIELDS, READING_FIELDS
from exporter.roofline import CounterReading, KernelVerdict, Roof, Thresholds, Work

CUSTOM_CARD_KEY = "custom"
INTERVAL_NOTE = (
    "DCGM counters average every kernel in the interval: this verdict describes the workload mix, "
    "not one kernel"
)


@dataclass(frozen=True, slots=True)
class ResolvedCard:
    """The card a body names: a catalog Card, or a custom roof given as peak_flops + bandwidth."""

    key: str
    name: str
    card: Card | None
    custom_peak: float | None = None
    custom_bandwidth: float | None = None

    @property
    def precisions(self) -> list[str]:
        return list(self.card.precisions if self.card is not None else roofline.PRECISIONS)

    def peak_clock_mhz(self, precision: str) -> float | None:
        """The clock the card's `precision` peak is quoted at; None for a custom roof or no basis."""
        return self.card.peak_clock_mhz(precision) if self.card is not None else None

    def vector_clock_mhz(self) -> float | None:
        """The clock the card's CUDA-core peaks are quoted at; None for a custom roof or no basis."""
        return self.card.vector_clock_mhz() if self.card is not None else None

    def clock_note(self, sm_clock_mhz: float | None, precision: str) -> str | None:
        """Why the clock ratio is unknown, when it is (FLOP/s then assume the quoted clock)."""
        if sm_clock_mhz is None:
            return "no sm_clock_mhz given: achieved FLOP/s assume the clock each peak is quoted at"
        if self.card is None:
            return "a custom roof has no clock basis: achieved FLOP/s assume the roof's own clock"
        if self.card.peak_clock_mhz(precision) is None:
            why = f" ({self.card.no_clock_basis})" if self.card.no_clock_basis else ""
            return (
                f"card {self.key} has no clock basis{why}: achieved FLOP/s assume the quoted clock, "
                "an upper bound"
            )
        return None

    def vector_peaks(self) -> dict[str, float]:
        """The catalog card's CUDA-core FP peaks (FLOP/s) where it has them; none for a custom roof."""
        if self.card is None:
            return {}
        peaks = {pipe: self.card.vector_peak_flop_per_second(pipe) for pipe in roofline.FP_PIPES}
        return {pipe: peak for pipe, peak in peaks.items() if peak is not None}

    @property
    def fp64_tensor_faster(self) -> bool:
        """The card's FP64 tensor cores beat its FP64 pipe (True for a custom roof: the general lever)."""
        return self.card is None or roofline.fp64_tensor_faster(self.card.peak_tflops)

    def link_load(self, body: CounterBody) -> roofline.LinkLoad | None:
        """Each link's load from the body's byte rates against the card's per-direction
        bandwidth; None for a custom roof, a card without figures or a body without rates."""
        if self.card is None:
            return None
        nvlink = roofline.link_load(
            body.nvlink_tx_bytes_per_second,
            body.nvlink_rx_bytes_per_second,
            self.card.link_bytes_per_second("nvlink"),
        )
        pcie = roofline.link_load(
            body.pcie_tx_bytes_per_second,
            body.pcie_rx_bytes_per_second,
            self.card.link_bytes_per_second("pcie"),
        )
        return None if nvlink is None and pcie is None else roofline.LinkLoad(nvlink=nvlink, pcie=pcie)

    def link_note(self, rates: dict[str, float]) -> str | None:
        """Why no link was judged against its wall, when none was (None when one was)."""
        if self.card is None:
            return "a custom roof has no link bandwidths: the links are not judged"
        if self.card.links is None:
            return f"card {self.key} has no link figures ({self.card.no_links}): the links are not judged"
        judged = [
            link
            for link in roofline.LINKS
            if self.card.link_bytes_per_second(link) is not None
            and any(f"{link}_{d}_bytes_per_second" in rates for d in ("tx", "rx"))
        ]
        if judged:
            return None
        return (
            "no link byte rates for a link with a figure: nvlink_tx/rx_bytes_per_second and "
            "pcie_tx/rx_bytes_per_second (DCGM fields 1009-1012) would tell whether a link is the wall"
        )

    def roof(self, precision: str) -> Roof:
        if self.card is not None:
            return self.card.roof(precision)
        assert self.custom_peak is not None and self.custom_bandwidth is not None
        return Roof(peak_flop_per_second=self.custom_peak, bandwidth_bytes_per_second=self.custom_bandwidth)


def resolve_card(catalog: Catalog, body: BodyCommon) -> ResolvedCard:
    """The body's card: catalog lookup (UnknownCard with suggestions) or its custom roof."""
    if body.card is not None:
        card = catalog.lookup(body.card)
        return ResolvedCard(key=card.key, name=card.name, card=card)
    return ResolvedCard(
        key=CUSTOM_CARD_KEY,
        name="custom roof",
        card=None,
        custom_peak=body.peak_flops,
        custom_bandwidth=body.bandwidth,
    )


def resolve_precision(card: ResolvedCard, asked: str | None, default: str) -> tuple[str, PrecisionSource]:
    """(precision, where it came from): the catalog card's own rule (Card.resolve_precision);
    a custom roof has every precision."""
    if card.card is None:
        return (asked, "body") if asked is not None else (default, "default")
    return card.card.resolve_precision(asked, default)


def _roof_fields(card: ResolvedCard | Card, precision: str, roof: Roof) -> RoofFields:
    """The fields every answer (and every compare row) opens with: which roof, and its ridge."""
    return {
        "card": card.key,
        "card_name": card.name,
        "precision": precision,
        "peak_flop_per_second": roof.peak_flop_per_second,
        "bandwidth_bytes_per_second": roof.bandwidth_bytes_per_second,
        "ridge_flop_per_byte": roof.ridge_flop_per_byte,
    }


def _kernel_fields(verdict: KernelVerdict, card: ResolvedCard, precision: str) -> KernelFields:
    """A kernel verdict's fields, its lever fitted to the precision (roofline.precision_lever)."""
    known = card.card.precisions if card.card is not None else ()
    lever = roofline.precision_lever(
        verdict.regime, verdict.lever, None, precision, known, fp64_tensor_faster=card.fp64_tensor_faster
    )
    return {
        "flops": verdict.flops,
        "bytes": verdict.bytes,
        "intensity_flop_per_byte": verdict.intensity_flop_per_byte,
        "memory_time_seconds": verdict.memory_time_seconds,
        "compute_time_seconds": verdict.compute_time_seconds,
        "floor_time_seconds": verdict.floor_time_seconds,
        "regime": verdict.regime,
        "attainable_flop_per_second": verdict.attainable_flop_per_second,
        "fraction_of_peak": verdict.fraction_of_peak,
        "lever": lever,
    }


def _run_kernel(roof: Roof, work: Work, field: str) -> KernelVerdict:
    try:
        return roofline.kernel_roofline(roof, work.flops, work.bytes)
    except roofline.RooflineInputError as exc:
        raise BodyError(str(exc), field=field) from None


def _check_work_limits(work: Work, flops_field: str, bytes_field: str) -> None:
    if not work.flops <= MAX_FLOPS:
        raise BodyError(
            f"the work comes to {work.flops:.3g} FLOPs, above the limit of {MAX_FLOPS:g}", field=flops_field
        )
    if not work.bytes <= MAX_BYTES:
        raise BodyError(
            f"the work comes to {work.bytes:.3g} bytes, above the limit of {MAX_BYTES:g}", field=bytes_field
        )


def operation_work(body: OperationBody, element_bytes: float) -> Work:
    """F and Q for the body's op (docs/design.md, "The model": operation form)."""
    try:
        if body.op == "gemm":
            assert body.m is not None and body.n is not None and body.k is not None
            return roofline.gemm_work(body.m, body.n, body.k, element_bytes)
        if body.op == "elementwise":
            assert body.n is not None
            return roofline.elementwise_work(
                body.n, element_bytes, body.flops_per_element, body.reads, body.writes
            )
        assert body.parameters is not None and body.batch is not None
        return roofline.decode_work(body.parameters, body.batch, element_bytes)
    except roofline.RooflineInputError as exc:
        raise BodyError(str(exc), field="op") from None


def compare_targets(catalog: Catalog, compare: str | list[str] | None, own_key: str) -> list[Card]:
    """The cards a `compare` names, in order, without duplicates or the card itself."""
    if compare is None:
        return []
    if compare == "all":
        return [card for card in catalog if card.key != own_key]
    cards: list[Card] = []
    seen = {own_key}
    for index, name in enumerate(compare):
        try:
            card = catalog.lookup(name)
        except UnknownCard as exc:
            raise BodyError(
                str(exc), field=f"compare[{index}]", status=404, suggestions=exc.suggestions
            ) from None
        if card.key not in seen:
            seen.add(card.key)
            cards.append(card)
    return cards


def compare_kernel(
    catalog: Catalog,
    body: BodyCommon,
    own: ResolvedCard,
    precision: str,
    work: Work,
    own_regime: str,
    own_floor_seconds: float,
) -> Compared:
    """The same work on other cards at the same precision: their ridge, verdict and floor time.

    `speedup` is this card's floor time over theirs (> 1: the other card is faster); `reverses`
    marks a verdict that differs from this card's — the reversal condition (docs/design.md, "HTTP API").
    Cards without a peak at this precision are listed under `compare_skipped` with the reason.
    """
    rows: list[CompareRow] = []
    skipped: list[Skipped] = []
    for card in compare_targets(catalog, body.compare, own.key):
        if precision not in card.peak_tflops:
            skipped.append(
                {"card": card.key, "reason": f"no {precision} peak; it has {', '.join(card.precisions)}"}
            )
            continue
        roof = card.roof(precision)
        verdict = _run_kernel(roof, work, "compare")
        rows.append(
            {
                **_roof_fields(card, precision, roof),
                "regime": verdict.regime,
                "reverses": verdict.regime != own_regime,
                "memory_time_seconds": verdict.memory_time_seconds,
                "compute_time_seconds": verdict.compute_time_seconds,
                "floor_time_seconds": verdict.floor_time_seconds,
                "attainable_flop_per_second": verdict.attainable_flop_per_second,
                "fraction_of_peak": verdict.fraction_of_peak,
                "speedup": own_floor_seconds / verdict.floor_time_seconds,
            }
        )
    return {"compare": rows, "compare_skipped": skipped}


def _compared(
    catalog: Catalog, body: BodyCommon, own: ResolvedCard, precision: str, work: Work, verdict: KernelVerdict
) -> Compared:
    """The compare fields of a kernel or operation answer; none when the body asked for none."""
    if body.compare is None:
        return {}
    return compare_kernel(catalog, body, own, precision, work, verdict.regime, verdict.floor_time_seconds)


def classify_kernel(catalog: Catalog, body: KernelBody, precision_default: str) -> KernelAnswer:
    card = resolve_card(catalog, body)
    precision, source = resolve_precision(card, body.precision, precision_default)
    roof = card.roof(precision)
    work = Work(flops=body.flops, bytes=body.bytes)
    verdict = _run_kernel(roof, work, "bytes")
    return {
        "form": "kernel",
        **_roof_fields(card, precision, roof),
        "precision_source": source,
        **_kernel_fields(verdict, card, precision),
        **_compared(catalog, body, card, precision, work, verdict),
    }


def classify_operation(catalog: Catalog, body: OperationBody, precision_default: str) -> OperationAnswer:
    card = resolve_card(catalog, body)
    asked = body.precision if body.precision is not None else body.dtype
    precision, source = resolve_precision(card, asked, precision_default)
    dtype = body.dtype if body.dtype is not None else precision
    element_bytes = roofline.ELEMENT_BYTES[dtype]
    work = operation_work(body, element_bytes)
    _check_work_limits(work, "op", "op")
    roof = card.roof(precision)
    verdict = _run_kernel(roof, work, "op")
    return {
        "form": "operation",
        **_roof_fields(card, precision, roof),
        "precision_source": source,
        "operation": _operation(body, dtype, element_bytes),
        **_kernel_fields(verdict, card, precision),
        **_compared(catalog, body, card, precision, work, verdict),
    }


def _operation(body: OperationBody, dtype: str, element_bytes: float) -> Operation:
    """The op, its dtype and the sizes that op takes, as the body gave them."""
    operation: Operation = {"op": body.op, "dtype": dtype, "element_bytes": element_bytes}
    if body.op == "gemm":
        operation.update({"m": body.m, "n": body.n, "k": body.k})
    elif body.op == "elementwise":
        operation.update(
            {
                "n": body.n,
                "flops_per_element": body.flops_per_element,
                "reads": body.reads,
                "writes": body.writes,
            }
        )
    else:
        operation.update({"parameters": body.parameters, "batch": body.batch})
    return operation


def thresholds_for(body: CounterBody, base: Thresholds) -> Thresholds:
    """The server's thresholds with the body's overrides applied."""
    if body.thresholds is None:
        return base
    overrides = {k: v for k, v in body.thresholds.model_dump().items() if v is not None}
    try:
        return dataclasses.replace(base, **overrides)
    except roofline.RooflineInputError as exc:
        raise BodyError(str(exc), field="thresholds") from None


def counter_reading(body: CounterBody, ratio: float | None, vector_ratio: float | None) -> CounterReading:
    """The body's ratios (readings.READING_FIELDS) with its clock ratios, an unknown k as 1 (the
    quoted clock) and a known one kept above 0 (a sub-MHz clock can underflow it)."""
    ratios = [getattr(body, name) for name in READING_FIELDS]
    clocks = [1.0 if k is None else max(k, 1e-9) for k in (ratio, vector_ratio)]
    try:
        return roofline.check_reading(CounterReading._make([*ratios, *clocks]))
    except roofline.RooflineInputError as exc:
        raise BodyError(str(exc), field="sm_clock_mhz") from None


def classify_counter_body(
    catalog: Catalog, body: CounterBody, precision_default: str, thresholds: Thresholds
) -> CounterAnswer:
    """The counter form; precision from the body, else the dominant tensor pipe, else the default.

    Compare, for counters: the achieved FLOP/s and bytes/s become a one-second kernel (F = achieved
    FLOP/s x 1 s, Q = achieved bytes/s x 1 s) placed on each other card's roof. `floor_time_seconds`
    there is how long that card would need for one second of this GPU's work (at full speed on its
    binding wall); `speedup` = 1 / that, against an ideal this card is not reaching either.
    """
    card = resolve_card(catalog, body)
    if body.precision is not None:
        precision, source = resolve_precision(card, body.precision, precision_default)
    else:
        dominant = roofline.dominant_precision(
            precision_default,
            imma_active=body.imma_active,
            hmma_active=body.hmma_active,
            dfma_active=body.dfma_active,
            available=card.precisions,
        )
        if dominant != precision_default:
            precision, source = dominant, "tensor_pipes"
        else:
            precision, source = resolve_precision(card, None, precision_default)
    roof = card.roof(precision)
    tensor_basis = card.peak_clock_mhz(precision)
    ratio = roofline.known_clock_ratio(body.sm_clock_mhz, tensor_basis)
    vector_ratio = roofline.known_clock_ratio(body.sm_clock_mhz, card.vector_clock_mhz())
    used = thresholds_for(body, thresholds)
    load = card.link_load(body)
    reading = counter_reading(body, ratio, vector_ratio)
    at, call = roofline.classify_counters(
        roof,
        reading,
        used,
        vector_peaks=card.vector_peaks(),
        fp64_tensor_faster=card.fp64_tensor_faster,
        precision=precision,
        precisions=card.card.precisions if card.card is not None else (),
        links=load,
    )
    reasons = clock_events.active_reasons(body.clock_event_reasons)
    causes = clock_events.causes_of(reasons, body.power_usage_watts, body.power_limit_watts)
    tensor = call.pipe == "tensor"
    lever = clock_events.fitted_lever(
        call.regime,
        call.lever,
        ratio if tensor else vector_ratio,
        body.sm_clock_mhz,
        tensor_basis if tensor else card.vector_clock_mhz(),
        causes,
    )
    links = {name: getattr(body, name) for name in LINK_FIELDS if getattr(body, name) is not None}
    interconnect: Interconnect = {"interconnect": links} if links else {}
    return {
        "form": "counters",
        **_roof_fields(card, precision, roof),
        "precision_source": source,
        "reading": "partial" if call.missing else "ok",
        "missing": list(call.missing),
        "pipe": call.pipe,
        "compute_roof_flop_per_second": at.compute_roof_flop_per_second,
        "intensity_flop_per_byte": at.intensity_flop_per_byte,
        "position": at.position,
        "regime": call.regime,
        "attainable_flop_per_second": at.attainable_flop_per_second,
        "fraction_of_peak": at.fraction_of_peak,
        "lever": lever,
        "clock_event_reasons": list(reasons),
        "clock_causes": list(causes),
        "achieved_flop_per_second": at.achieved_flop_per_second,
        "achieved_bandwidth_bytes_per_second": at.achieved_bandwidth_bytes_per_second,
        "flop_utilization": at.flop_utilization,
        "roofline_efficiency": at.roofline_efficiency,
        "gr_engine_contradicted": call.gr_engine_contradicted,
        "uncounted_pipes": list(at.uncounted_pipes),
        "flops_lower_bound": bool(at.uncounted_pipes) and at.achieved_flop_per_second is not None,
        "clock_ratio": ratio,
        "vector_clock_ratio": vector_ratio,
        "peak_clock_mhz": tensor_basis,
        "clock_note": card.clock_note(body.sm_clock_mhz, precision),
        "thresholds": dataclasses.asdict(used),
        "note": INTERVAL_NOTE,
        **interconnect,
        "link_utilization": link_utilization_fields(load),
        "link": call.link,
        "link_note": card.link_note(links),
        **_counter_compared(catalog, body, card, precision, roof, at),
    }


def _counter_compared(
    catalog: Catalog,
    body: CounterBody,
    own: ResolvedCard,
    precision: str,
    roof: Roof,
    at: roofline.CounterPosition,
) -> Compared:
    """The counter form's compare fields: one second of the achieved work on each other card;
    none when the body asked for none, every card skipped when nothing was achieved."""
    if body.compare is None:
        return {}
    flops = at.achieved_flop_per_second
    bytes_ = at.achieved_bandwidth_bytes_per_second
    if flops is not None and bytes_ is not None and flops > 0 and bytes_ > 0:
        work = Work(flops=flops, bytes=bytes_)
        own_regime = roofline.kernel_regime(flops / bytes_, roof.ridge_flop_per_byte)
        return compare_kernel(catalog, body, own, precision, work, own_regime, 1.0)
    reason = "no achieved FLOP/s or bytes/s (no compute pipe or dram_active reported, or 0): nothing to place"
    targets = compare_targets(catalog, body.compare, own.key)
    return {"compare": [], "compare_skipped": [{"card": c.key, "reason": reason} for c in targets]}


def link_utilization_fields(load: roofline.LinkLoad | None) -> dict[str, float]:
    """{link: load} for each link with one (its busier direction over its per-direction bandwidth)."""
    if load is None:
        return {}
    return {link: value for link in roofline.LINKS if (value := getattr(load, link)) is not None}


def classify(
    catalog: Catalog,
    body: KernelBody | OperationBody | CounterBody,
    *,
    precision_default: str = "bf16",
    thresholds: Thresholds | None = None,
    check_finite: bool = True,
) -> Answer:
    """The answer to one classify body, as a JSON-ready dict of finite floats, strings and None.

    `check_finite=False` skips the walk over the answer for callers that serialise with
    allow_nan=False anyway and call `require_finite` only when that fails (the HTTP route: the
    walk costs as much as the classification itself).
    """
    out: Answer
    if isinstance(body, KernelBody):
        out = classify_kernel(catalog, body, precision_default)
    elif isinstance(body, OperationBody):
        out = classify_operation(catalog, body, precision_default)
    else:
        out = classify_counter_body(catalog, body, precision_default, thresholds or Thresholds())
    if check_finite:
        require_finite(out)
    return out


def require_finite(value: Any, path: str = "") -> None:
    """Every number in the answer is finite: an overflow is the body's fault, so 422, never 500."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BodyError(
            f"the numbers overflow: {path or 'a result'} is {value}; use smaller figures", field=None
        )
    if isinstance(value, dict):
        for k, v in value.items():
            require_finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            require_finite(v, f"{path}[{i}]")


def card_summary(card: Card) -> CardSummary:
    """A card as `GET /cards` shows it: SI units (FLOP/s, bytes/s) and the ridge per precision."""
    bandwidth = card.bandwidth_bytes_per_second
    peaks = {p: card.peak_flop_per_second(p) for p in card.precisions}
    return {
        "key": card.key,
        "name": card.name,
        "vendor": card.vendor,
        "nvml_names": list(card.nvml_names),
        "aliases": list(card.aliases),
        "reference_only": card.reference_only,
        "peak_flop_per_second": peaks,
        "bandwidth_bytes_per_second": bandwidth,
        "ridge_flop_per_byte": {p: peak / bandwidth for p, peak in peaks.items()},
        "memory_gib": card.memory_gib,
        "sm_count": card.sm_count,
        "max_sm_clock_mhz": card.max_sm_clock_mhz,
        "clock_basis": None if card.spec.clock_basis is None else card.spec.clock_basis.model_dump(),
        "no_clock_basis": card.no_clock_basis,
        "link_bytes_per_second": {link: card.link_bytes_per_second(link) for link in roofline.LINKS},
        "no_links": card.no_links,
        "source": card.source,
    }
