"""The node as a person sees it: `/classify`'s verdicts grouped into one roofline per card.

It reads LiveVerdicts (exporter/verdict.py: the records `GET /classify` answers), not the
daemon's state, so the live page and `/roofline.svg` (which have the state) and `ridgeline top` (which has
only the HTTP answer) place every GPU from the very numbers `/classify` reports. With the catalog
at hand (the server) a chart shows every compute roof of the card; without it (`top`) the roofs
the verdicts carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from exporter.verdict import LiveVerdict
from exporter.view.roofline_chart import ChartPoint, ChartSpec, ComputeRoof, TrailPoint

if TYPE_CHECKING:  # only the server passes a catalog; `ridgeline top` should not load one
    from exporter.catalog import Card, Catalog

PRECISION_LABELS: dict[str, str] = {"fp64_tensor": "fp64 tensor"}
"""How a precision key reads on a roof's label; the others read as themselves."""

SAME_FIGURE = 1e-6
"""Two peaks within this relative distance are one roof (bf16 and fp16 on most cards)."""


@dataclass(frozen=True, slots=True)
class Unplaced:
    """A GPU with no roofline to sit on (its card is not in the catalog, or no reading yet)."""

    key: str
    reason: str


def point_key(gpu: int | None, gpu_instance: int | None) -> str:
    """ "3", or "3/1" for GPU instance 1 of GPU 3."""
    return f"{gpu}" + ("" if gpu_instance is None else f"/{gpu_instance}")


def trail_key(uuid: str, gpu_instance: int | None) -> str:
    """What identifies a GPU's trail across restarts of its index: its UUID (and instance)."""
    return uuid if gpu_instance is None else f"{uuid}/{gpu_instance}"


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= SAME_FIGURE * max(abs(a), abs(b))


def compute_roof_of(verdict: LiveVerdict) -> float | None:
    """The flat roof a verdict measures its GPU against: its pipe's, else its precision's peak."""
    return _number(verdict.compute_roof_flop_per_second) or _number(verdict.peak_flop_per_second)


def card_roofs(card: Card, compute_fraction: float = 1.0) -> list[ComputeRoof]:
    """Every distinct compute roof of a card (tensor peaks and CUDA-core peaks), equal figures
    sharing one roof whose label names them all; scaled by `compute_fraction` for a MIG instance."""
    merged: list[tuple[float, list[str]]] = []

    def add(value: float, name: str) -> None:
        for figure, names in merged:
            if _same(figure, value):
                if name not in names:
                    names.append(name)
                return
        merged.append((value, [name]))

    for precision in card.precisions:
        add(
            card.peak_flop_per_second(precision) * compute_fraction,
            PRECISION_LABELS.get(precision, precision),
        )
    for pipe, tflops in card.vector_tflops.items():
        vector = card.vector_peak_flop_per_second(pipe)
        if vector is not None and tflops > 0:
            add(vector * compute_fraction, pipe if any(_same(vector * compute_fraction, f) for f, _ in merged)
                else f"{pipe} CUDA cores")  # fmt: skip
    return [ComputeRoof(label=" · ".join(names), flop_per_second=value) for value, names in merged]


def charts_from_verdicts(
    verdicts: Sequence[LiveVerdict],
    *,
    catalog: Catalog | None = None,
    trails: Mapping[str, tuple[TrailPoint, ...]] | None = None,
) -> tuple[list[ChartSpec], list[Unplaced]]:
    """One ChartSpec per (card, roof) on the node, in the order the GPUs come; and the GPUs that
    have no roofline (unknown card, no reading yet, a MIG parent whose instances are drawn)."""
    groups: dict[tuple[str, float, float], list[LiveVerdict]] = {}
    unplaced: list[Unplaced] = []
    for verdict in verdicts:
        why = _why_unplaced(verdict)
        if why is not None:
            unplaced.append(Unplaced(point_key(verdict.gpu, verdict.gpu_instance), why))
            continue
        groups.setdefault(_roof_group(verdict, catalog), []).append(verdict)
    charts: list[ChartSpec] = []
    used_keys: set[str] = set()
    for (card_key, compute_fraction, memory_fraction), members in groups.items():
        card = catalog.get(card_key) if catalog is not None else None
        bandwidth = _number(members[0].bandwidth_bytes_per_second)
        assert bandwidth is not None
        instance = any(m.gpu_instance is not None for m in members)
        charts.append(
            ChartSpec(
                key=_chart_key(card_key, instance, used_keys),
                title=_title(card_key, card, instance, compute_fraction, memory_fraction),
                bandwidth_bytes_per_second=bandwidth,
                roofs=tuple(_roofs(card, compute_fraction, members)),
                points=tuple(_point(m, trails) for m in members),
            )
        )
    return charts, unplaced


def _why_unplaced(verdict: LiveVerdict) -> str | None:
    """Why a verdict's GPU has no roofline to be drawn on; None when it has one."""
    if verdict.mig_parent:
        return "MIG-partitioned: its instances are drawn on their own roofs"
    if verdict.card is None or verdict.card == "unknown":
        model = verdict.model or "its model"
        return f"{model} is not in the card catalog: no roof to draw"
    bandwidth = _number(verdict.bandwidth_bytes_per_second)
    peak = _number(verdict.peak_flop_per_second)
    if bandwidth is None or peak is None or bandwidth <= 0 or peak <= 0:
        return "no reading yet"
    return None


def _roof_group(verdict: LiveVerdict, catalog: Catalog | None) -> tuple[str, float, float]:
    """(card, compute fraction, memory fraction) of a placeable verdict: the GPUs sharing one
    chart (a whole card, or MIG instances of one profile)."""
    card_key = verdict.card
    bandwidth = _number(verdict.bandwidth_bytes_per_second)
    peak = _number(verdict.peak_flop_per_second)
    assert card_key is not None and bandwidth is not None and peak is not None
    card = catalog.get(card_key) if catalog is not None else None
    precision = verdict.precision
    full_peak = (
        card.peak_flop_per_second(precision)
        if card is not None and precision is not None and precision in card.peak_tflops
        else peak
    )
    compute_fraction = round(peak / full_peak, 6)
    memory_fraction = round(bandwidth / card.bandwidth_bytes_per_second, 6) if card is not None else 1.0
    return card_key, compute_fraction, memory_fraction


def _chart_key(card_key: str, instance: bool, used_keys: set[str]) -> str:
    """A chart key unique on the node (the card, "-instance" for MIG, "-2", "-3" after); noted
    in `used_keys`."""
    chart_key = card_key if not instance else f"{card_key}-instance"
    n = 2
    while chart_key in used_keys:
        chart_key, n = f"{card_key}-{n}", n + 1
    used_keys.add(chart_key)
    return chart_key


def _title(card_key: str, card: Card | None, instance: bool, compute: float, memory: float) -> str:
    name = card.name if card is not None else card_key
    if not instance:
        return name
    if card is None:
        return f"{name}, MIG instance roof"
    return f"{name}, MIG instance roof ({compute:.0%} of compute, {memory:.0%} of bandwidth)"


def binding_roof(
    verdict: LiveVerdict, card: Card | None, compute_fraction: float
) -> tuple[float, str] | None:
    """(FLOP/s, label) of the card roof a verdict's GPU is measured against.

    The verdict's `pipe` names the compute pipe nearest its wall: the tensor cores (the
    precision's peak, `peak_flop_per_second`) or a CUDA-core FP pipe, whose card roof is its
    vector peak. Without the catalog (`top`) a CUDA-core pipe's roof is the verdict's own
    `compute_roof_flop_per_second`: the ceiling of the GPU's mix of pipes.
    """
    pipe = verdict.pipe
    precision = verdict.precision or "peak"
    if pipe is not None and pipe != "tensor":
        vector = (
            card.vector_peak_flop_per_second(pipe)
            if card is not None and pipe in card.vector_tflops
            else None
        )
        if vector is not None:
            return vector * compute_fraction, f"{pipe} CUDA cores"
        roof = _number(verdict.compute_roof_flop_per_second)
        return (roof, f"{pipe} pipe mix") if roof is not None else None
    peak = _number(verdict.peak_flop_per_second)
    return (peak, PRECISION_LABELS.get(precision, precision)) if peak is not None else None


def _roofs(card: Card | None, compute_fraction: float, members: Sequence[LiveVerdict]) -> list[ComputeRoof]:
    """The card's roofs (or, without it, the precisions' peaks the verdicts carry), the ones a
    GPU here is measured against marked in use, and any such roof the card lacks added."""
    in_use: list[tuple[float, str]] = []
    for m in members:
        found = binding_roof(m, card, compute_fraction)
        if found is not None and not any(_same(found[0], v) for v, _ in in_use):
            in_use.append(found)
    roofs: list[ComputeRoof] = []
    if card is not None:
        roofs = card_roofs(card, compute_fraction)
    else:
        for m in members:  # the precision's peak, even where a pipe's roof is the one in use
            peak = _number(m.peak_flop_per_second)
            precision = m.precision or "peak"
            if peak is not None and not any(_same(peak, r.flop_per_second) for r in roofs):
                roofs.append(
                    ComputeRoof(label=PRECISION_LABELS.get(precision, precision), flop_per_second=peak)
                )
    out = [
        ComputeRoof(
            label=r.label,
            flop_per_second=r.flop_per_second,
            in_use=any(_same(r.flop_per_second, v) for v, _ in in_use),
        )
        for r in roofs
    ]
    for value, label in in_use:
        if not any(_same(value, r.flop_per_second) for r in out):
            out.append(ComputeRoof(label=label, flop_per_second=value, in_use=True))
    return out


def _point(verdict: LiveVerdict, trails: Mapping[str, tuple[TrailPoint, ...]] | None) -> ChartPoint:
    attribution = verdict.attribution
    pod = attribution.pod if attribution is not None else None
    instance = verdict.gpu_instance
    trail = trails.get(trail_key(verdict.uuid or "", instance), ()) if trails else ()
    return ChartPoint(
        key=point_key(verdict.gpu, instance),
        regime=verdict.regime,
        intensity=_number(verdict.intensity_flop_per_byte),
        flop_per_second=_number(verdict.achieved_flop_per_second),
        timestamp=_number(verdict.timestamp),
        detail=str(pod) if pod else "",
        trail=trail,
    )
