"""Why a GPU runs below the clock its peaks are quoted at, and what raising it would give back.

Standard library and exporter.fields only (docs/design.md, "Layout and layers"): the model's
side of field 112 (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, formerly DCGM_FI_DEV_CLOCK_THROTTLE_REASONS:
NVML's nvmlClocksEventReasons bits) and of the power draw against its limit (fields 155, 160).
A compute-bound verdict at a reduced clock names the cause and the FLOP/s a full clock would
add (docs/model.md, "At a reduced clock").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from exporter import fields

REDUCED_CLOCK = 0.97
"""A binding pipe's clock ratio below this is a reduced clock; within it is clock sampling
jitter (docs/model.md, "At a reduced clock")."""

POWER_CAP_FRACTION = 0.97
"""Power draw at this fraction of the power management limit or more counts as held at the cap
(the SW power cap regulates the draw just under the limit)."""

CAUSES: Mapping[str, str] = MappingProxyType(
    {
        "applications_clocks_setting": "application clocks",
        "sw_power_cap": "power cap",
        "hw_slowdown": "HW slowdown",
        "hw_power_brake_slowdown": "HW slowdown",
        "sw_thermal_slowdown": "thermal",
        "hw_thermal_slowdown": "thermal",
        "sync_boost": "sync boost",
    }
)
"""Each NVML reason (fields.CLOCK_EVENT_REASONS) by the cause a verdict names."""

CAUSE_LEVERS: Mapping[str, str] = MappingProxyType(
    {
        "power cap": "the board is held at its power limit: raise the limit (nvidia-smi -pl, up to the "
        "board's maximum) or lower the power per FLOP (a lower precision, fewer bytes moved)",
        "thermal": "the GPU is too hot: check airflow, inlet temperature and the fans or liquid loop",
        "HW slowdown": "the hardware slowed the clock (power brake or over-temperature protection): check "
        "the power supplies and the system's power-brake signal (nvidia-smi -q -d PERFORMANCE)",
        "sync boost": "sync boost holds this GPU to the slowest of its group: find that GPU's own cause",
        "application clocks": "application clocks are set below the maximum: reset them (nvidia-smi -rac) "
        "or set them higher (nvidia-smi -ac)",
    }
)
"""What to do about each cause, in the lever's words."""

NOT_REPORTED = (
    "cause not reported: add fields 112 (DCGM_FI_DEV_CLOCKS_EVENT_REASONS), 155 "
    "(DCGM_FI_DEV_POWER_USAGE) and 160 (DCGM_FI_DEV_POWER_MGMT_LIMIT) to the DCGM field list"
)


def active_reasons(mask: float | None) -> tuple[str, ...]:
    """The NVML reasons set in a field-112 mask that slow a loaded GPU; () for none or a blank."""
    if mask is None or not math.isfinite(mask) or mask < 0:
        return ()
    bits = int(mask)
    return tuple(name for bit, name in fields.CLOCK_EVENT_REASONS if bits & bit)


def power_capped(draw: float | None, limit: float | None) -> bool:
    """The draw is at its power management limit (≥ POWER_CAP_FRACTION of it)."""
    if draw is None or limit is None or limit <= 0:
        return False
    return draw >= POWER_CAP_FRACTION * limit


def causes_of(reasons: tuple[str, ...], draw: float | None, limit: float | None) -> tuple[str, ...]:
    """The causes a verdict names, in the order NVML lists the bits, each once; the power cap also
    from the draw at its limit when field 112 is not reported."""
    found: list[str] = []
    for reason in reasons:
        cause = CAUSES[reason]
        if cause not in found:
            found.append(cause)
    if "power cap" not in found and power_capped(draw, limit):
        found.append("power cap")
    return tuple(found)


def fitted_lever(
    regime: str,
    lever: str,
    clock_ratio: float | None,
    sm_clock_mhz: float | None,
    basis_mhz: float | None,
    causes: tuple[str, ...],
) -> str:
    """The lever of a verdict: reduced_clock_lever's when it is compute-bound with the binding
    pipe's clock ratio below REDUCED_CLOCK (all three clock figures known), else `lever`."""
    if regime != "compute_bound" or clock_ratio is None or sm_clock_mhz is None or basis_mhz is None:
        return lever
    if clock_ratio >= REDUCED_CLOCK:
        return lever
    return reduced_clock_lever(lever, clock_ratio, sm_clock_mhz, basis_mhz, causes)


def reduced_clock_lever(
    lever: str, clock_ratio: float, sm_clock_mhz: float, basis_mhz: float, causes: tuple[str, ...]
) -> str:
    """A compute-bound lever at a reduced clock: the cause, what a full clock gives back (1/k − 1
    of the FLOP/s: the pipe is at its wall at this clock, so FLOP/s scale with the clock), then
    the pipe's own lever."""
    give_back = 1.0 / clock_ratio - 1.0
    cause = ", ".join(causes) if causes else "cause not reported"
    fixes = "; ".join(CAUSE_LEVERS[c] for c in causes) if causes else NOT_REPORTED
    return (
        f"compute-bound at a reduced clock ({sm_clock_mhz:.0f} of the {basis_mhz:.0f} MHz its peak is "
        f"quoted at: {cause}): the pipe is at its wall at this clock, and the full clock gives back up "
        f"to {give_back:.0%} more FLOP/s — {fixes}. At this clock: {lever}"
    )


class ReducedClock(NamedTuple):
    """A busy GPU whose pipe nearest its wall runs below REDUCED_CLOCK of its peak's clock: what
    the live page's and `top`'s clock marker show."""

    clock_ratio: float
    """k of that pipe (SM clock ÷ the clock its peak is quoted at)."""
    causes: tuple[str, ...]
    """causes_of's words; () when neither field 112 nor the power draw says."""
    give_back: float | None
    """1/k − 1 of the FLOP/s while compute-bound (the pipe at its wall scales with the clock);
    None in another regime, where the clock is not what holds the work back."""


def reduced_clock(
    regime: str,
    pipe: str | None,
    clock_ratio: float | None,
    vector_clock_ratio: float | None,
    causes: tuple[str, ...],
) -> ReducedClock | None:
    """The marker of a verdict: its pipe's known k below REDUCED_CLOCK while it does work (an
    idle GPU lowers its own clock; an unknown one has no pipe to judge); else None."""
    if regime in ("idle", "unknown") or pipe is None:
        return None
    k = clock_ratio if pipe == "tensor" else vector_clock_ratio
    if k is None or k >= REDUCED_CLOCK:
        return None
    give_back = 1.0 / k - 1.0 if regime == "compute_bound" else None
    return ReducedClock(clock_ratio=k, causes=causes, give_back=give_back)


def cause_words(causes: tuple[str, ...]) -> str:
    """The causes as a marker says them: "power cap", "thermal, sync boost", or "cause not reported"."""
    return ", ".join(causes) if causes else "cause not reported"


def reduced_clock_note(marker: ReducedClock) -> str:
    """The marker's tooltip: the clock, the cause, and what the full clock gives back."""
    causes = cause_words(marker.causes)
    said = f"SM clock at {marker.clock_ratio:.0%} of the clock its peak is quoted at ({causes})"
    if marker.give_back is None:
        return f"{said}: not compute-bound, so the full clock would give back little of its time"
    return f"{said}: compute-bound, so the full clock gives back up to {marker.give_back:.0%} more FLOP/s"


UNREPORTED = "unreported"
"""The cause label of clock-lost time neither field 112 nor the power draw explains."""


def cause_label(cause: str) -> str:
    """A cause as a label value: "power cap" -> "power_cap" (ridgeline_clock_event_active's)."""
    return cause.lower().replace(" ", "_")


CAUSE_LABELS: tuple[str, ...] = (*dict.fromkeys(cause_label(c) for c in CAUSES.values()), UNREPORTED)
"""Every cause label of ridgeline_clock_lost_seconds_total, each born at 0 together."""


def clock_loss(
    regime: str,
    pipe: str | None,
    clock_ratio: float,
    vector_clock_ratio: float,
    causes: tuple[str, ...],
) -> tuple[float, tuple[str, ...]] | None:
    """(1 − k, the causes) of a compute-bound reading whose binding pipe runs below REDUCED_CLOCK
    of its peak's clock (k: that pipe's ratio, 1 where unknown); None for any other reading. At its
    wall the pipe's work per cycle is fixed, so the full clock would do the same work in k of the
    time: 1 − k of each such GPU-second is what the clock cost."""
    if regime != "compute_bound" or pipe is None:
        return None
    k = clock_ratio if pipe == "tensor" else vector_clock_ratio
    if not k < REDUCED_CLOCK:
        return None
    return 1.0 - k, causes


def lost_to_clock(
    lost: Mapping[str, float] | None, fraction: float, causes: tuple[str, ...], gpu_seconds: float
) -> Mapping[str, float]:
    """`lost` (None: not born: every cause label at 0) plus fraction × gpu_seconds, split evenly
    between the causes (UNREPORTED without one)."""
    grown = dict.fromkeys(CAUSE_LABELS, 0.0) if lost is None else dict(lost)
    labels = [cause_label(c) for c in causes] or [UNREPORTED]
    for label in labels:
        grown[label] += fraction * gpu_seconds / len(labels)
    return MappingProxyType(grown)
