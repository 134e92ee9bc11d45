"""DCGM field ids, the names whose unit changed, and how blanks and odd ratios are read.

Field ids follow NVIDIA's dcgm_fields.h (DCGM_FI_DEV_* and DCGM_FI_PROF_*); the names a field
goes by are its row's in exporter/readings.py. Sources key every value by numeric id, so the
rest of Ridgeline never sees a name.
"""

from __future__ import annotations

import math

SM_CLOCK = 100
CLOCKS_EVENT_REASONS = 112
"""Why the clocks are held below their maximum: a bitmask of NVML's clocks-event reasons
(nvmlClocksEventReasons, formerly nvmlClocksThrottleReasons); see CLOCK_EVENT_REASONS."""
POWER_USAGE = 155
"""Board power draw, W."""
POWER_MGMT_LIMIT = 160
"""The power management limit, W: the draw the SW power cap holds the board to."""
GPU_UTIL = 203
GR_ENGINE_ACTIVE = 1001
SM_ACTIVE = 1002
SM_OCCUPANCY = 1003
PIPE_TENSOR_ACTIVE = 1004
DRAM_ACTIVE = 1005
PIPE_FP64_ACTIVE = 1006
PIPE_FP32_ACTIVE = 1007
PIPE_FP16_ACTIVE = 1008
PCIE_TX_BYTES = 1009
PCIE_RX_BYTES = 1010
NVLINK_TX_BYTES = 1011
NVLINK_RX_BYTES = 1012
PIPE_TENSOR_IMMA_ACTIVE = 1013
PIPE_TENSOR_HMMA_ACTIVE = 1014
PIPE_TENSOR_DFMA_ACTIVE = 1015
SM_CLOCK_HERTZ = 1603
"""DCGM 4.7's SM clock in hertz (go-dcgm pkg/dcgm/base_unit_fields_test.go); read as field 100."""
GPU_UTIL_RATIO = 1613
"""DCGM 4.7's GPU utilisation as a 0..1 double (dcgm_fields.h); read as field 203 in percent."""

CONVERTED_IDS: dict[int, tuple[int, float]] = {
    SM_CLOCK_HERTZ: (SM_CLOCK, 1e-6),
    GPU_UTIL_RATIO: (GPU_UTIL, 100.0),
}
"""DCGM 4.7 fields that carry one of Ridgeline's fields in another unit: id -> (the field
Ridgeline keeps, factor to its unit). Ridgeline keeps field 100 in MHz and 203 in percent."""

CONVERTED_NAMES: dict[str, tuple[int, float]] = {"DCGM_FI_DEV_SM_CLOCK_HERTZ": (SM_CLOCK, 1e-6)}
"""Names whose unit changed with the DCGM 4.7 rename (dcgm-exporter 4.9.0 release notes: "clocks
from MHz to hertz ... utilization from a percentage to a 0 to 1 ratio")."""

GPU_UTIL_RATIO_NAME = "DCGM_FI_DEV_GPU_UTIL_RATIO"
"""One name, two fields. DCGM 4.6's bindings named field 203 (DCGM_FT_INT64, percent 0-100) so;
DCGM 4.7 gave 203 back its old name and made this the name of field 1613 (DCGM_FT_DOUBLE, ratio
0..1), which dcgm-exporter 4.9 prints. `gpu_util_ratio_is_percent` tells them apart."""

DCGM_4_7_NAMES: frozenset[str] = frozenset({"DCGM_FI_DEV_SM_CLOCK_HERTZ"})
"""Names only DCGM 4.7 / dcgm-exporter 4.9 print; a page carrying one is a 4.9 page."""


def gpu_util_ratio_is_percent(value: float, written_as_integer: bool) -> bool:
    """Whether a DCGM_FI_DEV_GPU_UTIL_RATIO value is DCGM 4.6's field 203 (percent), not 1613.

    The value itself first: above 1 (beyond RATIO_CLAMP_LIMIT) it cannot be a ratio; a fraction
    such as 0.37 cannot be field 203, an integer field. Then how it was written: dcgm-exporter
    formats an INT64 field with "%d" and a DOUBLE with "%f" (pkg/dcgmexporter ToString), so
    "1" is field 203 and "1.000000" is 1613. 0 reads the same either way. The scrape source
    adds page-level evidence for the one case this leaves open (see docs/sources.md).
    """
    if value > RATIO_CLAMP_LIMIT:
        return True
    if not value.is_integer():
        return False
    return written_as_integer


CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
)
"""Field 112's bits that hold a loaded GPU's clock down, as NVML names them
(nvmlClocksEventReasonApplicationsClocksSetting 0x2, SwPowerCap 0x4, HwSlowdown 0x8, SyncBoost
0x10, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80). GpuIdle (0x1)
and DisplayClockSetting (0x100) are left out: neither slows a GPU that has work."""

RATIO_FIELDS: frozenset[int] = frozenset(
    {
        GR_ENGINE_ACTIVE,
        SM_ACTIVE,
        SM_OCCUPANCY,
        PIPE_TENSOR_ACTIVE,
        DRAM_ACTIVE,
        PIPE_FP64_ACTIVE,
        PIPE_FP32_ACTIVE,
        PIPE_FP16_ACTIVE,
        PIPE_TENSOR_IMMA_ACTIVE,
        PIPE_TENSOR_HMMA_ACTIVE,
        PIPE_TENSOR_DFMA_ACTIVE,
    }
)
"""Fields DCGM reports as a ratio of time or cycles in [0, 1]."""

FP64_BLANK = 140737488355328.0
"""DCGM_FP64_BLANK (dcgm_structs.h): this value and above mean "no value", not a number."""
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
"""DCGM_INT64_BLANK (dcgm_structs.h): this value and above mean "no value"."""
INT32_BLANK = 0x7FFFFFF0
"""DCGM_INT32_BLANK (dcgm_structs.h), for the few int32 fields."""

RATIO_CLAMP_LIMIT = 1.05
"""Ratios up to this are clamped to 1; above it they are dropped as not a ratio.

DCGM reports SM_ACTIVE and friends slightly above 1 on some MIG instances (rounding in the
per-instance scaling); a value well above 1 is a percentage or garbage, and guessing would lie.
"""


def is_blank(raw: float) -> bool:
    """True for DCGM's blank sentinels (FP64 and INT64 blanks and everything above them)."""
    return raw >= FP64_BLANK


def clean_value(fid: int, raw: float | int | None) -> float | None:
    """A source's raw value as Ridgeline keeps it: None for blanks, NaN and unusable ratios.

    Ratio fields: negatives are dropped, values in (1, 1.05] are clamped to 1, larger ones are
    dropped (see RATIO_CLAMP_LIMIT). Never turns a blank into 0.
    """
    if raw is None or isinstance(raw, bool):
        return None
    value = float(raw)
    if math.isnan(value) or math.isinf(value) or is_blank(value):
        return None
    if fid in RATIO_FIELDS:
        if value < 0 or value > RATIO_CLAMP_LIMIT:
            return None
        return min(value, 1.0)
    if value < 0:
        return None
    return value
