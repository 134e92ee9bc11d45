"""Which ridge: the card's (its precision's peak over its bandwidth) or the GPU's own.

A verdict measures its GPU against its compute roof P_c = F / u*, the ceiling of the mix of
pipes it runs (tensor cores and CUDA cores together can pass the tensor peak: 1.06 PFLOP/s on a
989.5 TFLOP/s H100), so its own ridge P_c / B differs from the ridge the chart marks. `GET
/classify` carries both and a note saying why; the page shows the note as a tooltip and `top`
under its chart. It reads LiveVerdicts (exporter/verdict.py), like node_view.
"""

from __future__ import annotations

import math

from exporter.verdict import LiveVerdict
from exporter.view.units import intensity_text, si

SAME_RIDGE = 0.005
"""Ridges within 0.5 % read the same at three significant figures: no note."""

PIPE_WORDS: dict[str, str] = {
    "tensor": "tensor cores",
    "fp64": "FP64 CUDA cores",
    "fp32": "FP32 CUDA cores",
    "fp16": "FP16 CUDA cores",
}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def own_ridge(verdict: LiveVerdict) -> float | None:
    """The GPU's own ridge: its compute roof over its bandwidth, else its precision's ridge."""
    roof = _finite(verdict.compute_roof_flop_per_second)
    bandwidth = _finite(verdict.bandwidth_bytes_per_second)
    if roof is not None and bandwidth:
        return roof / bandwidth
    return _finite(verdict.ridge_flop_per_byte)


def ridge_note(verdict: LiveVerdict) -> str | None:
    """Why this GPU's ridge is not the card's, in one sentence; None when they read the same."""
    mine = own_ridge(verdict)
    card = _finite(verdict.ridge_flop_per_byte)
    roof = _finite(verdict.compute_roof_flop_per_second)
    peak = _finite(verdict.peak_flop_per_second)
    if mine is None or card is None or roof is None or peak is None or card <= 0:
        return None
    if abs(mine / card - 1.0) <= SAME_RIDGE:
        return None
    whose = "this MIG instance's" if verdict.gpu_instance is not None else "the card's"
    precision = verdict.precision or ""
    pipe = PIPE_WORDS.get(str(verdict.pipe), "its busiest pipe")
    return (
        f"own ridge {intensity_text(mine)} FLOP/byte, not {whose} {precision} ridge "
        f"{intensity_text(card)}: this GPU's compute roof is {si(roof, 'FLOP/s', digits=4)}, the ceiling of "
        f"the mix of pipes it runs (busiest: {pipe}; FLOP/s ÷ that pipe's activity), against a "
        f"{precision} tensor peak of {si(peak, 'FLOP/s', digits=4)}"
    ).replace("  ", " ")
