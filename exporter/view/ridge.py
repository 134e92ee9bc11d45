"""Which ridge: the card's (its precision's peak over its bandwidth) or the GPU's own.

A verdict measures its GPU against its compute roof P_c = F / u*, the ceiling of the mix of
pipes it runs (tensor cores and CUDA cores together can pass the tensor peak: 1.06 PFLOP/s on a
989.5 TFLOP/s H100), so its own ridge P_c / B differs from the ridge the chart marks. `GET
/classify` carries both and a note saying why; the page shows the note as a tooltip and `top`
under its chart. It reads verdicts in /classify's shape (docs/api.md), like node_view.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from exporter.view.units import intensity_text, si

SAME_RIDGE = 0.005
"""Ridges within 0.5 % read the same at three significant figures: no note."""

PIPE_WORDS: dict[str, str] = {
    "tensor": "tensor cores",
    "fp64": "FP64 CUDA cores",
    "fp32": "FP32 CUDA cores",
    "fp16": "FP16 CUDA cores",
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def own_ridge(verdict: Mapping[str, Any]) -> float | None:
    """The GPU's own ridge: its compute roof over its bandwidth, else its precision's ridge."""
    roof = _number(verdict.get("compute_roof_flop_per_second"))
    bandwidth = _number(verdict.get("bandwidth_bytes_per_second"))
    if roof is not None and bandwidth:
        return roof / bandwidth
    return _number(verdict.get("ridge_flop_per_byte"))


def ridge_note(verdict: Mapping[str, Any]) -> str | None:
    """Why this GPU's ridge is not the card's, in one sentence; None when they read the same."""
    mine = own_ridge(verdict)
    card = _number(verdict.get("ridge_flop_per_byte"))
    roof = _number(verdict.get("compute_roof_flop_per_second"))
    peak = _number(verdict.get("peak_flop_per_second"))
    if mine is None or card is None or roof is None or peak is None or card <= 0:
        return None
    if abs(mine / card - 1.0) <= SAME_RIDGE:
        return None
    whose = "this MIG instance's" if verdict.get("gpu_instance") is not None else "the card's"
    precision = str(verdict.get("precision") or "")
    pipe = PIPE_WORDS.get(str(verdict.get("pipe")), "its busiest pipe")
    return (
        f"own ridge {intensity_text(mine)} FLOP/byte, not {whose} {precision} ridge "
        f"{intensity_text(card)}: this GPU's compute roof is {si(roof, 'FLOP/s', digits=4)}, the ceiling of "
        f"the mix of pipes it runs (busiest: {pipe}; FLOP/s ÷ that pipe's activity), against a "
        f"{precision} tensor peak of {si(peak, 'FLOP/s', digits=4)}"
    ).replace("  ", " ")
