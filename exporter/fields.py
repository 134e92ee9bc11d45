"""DCGM field ids, the names they go by, and how blanks and odd ratios are read.

Field ids and names follow NVIDIA's dcgm_fields.h (DCGM_FI_DEV_* and DCGM_FI_PROF_*). Sources
key every value by numeric id, so the rest of Ridgeline never sees a name.
"""

from __future__ import annotations

import math

SM_CLOCK = 100
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

LEGACY_NAMES: dict[int, str] = {
    SM_CLOCK: "DCGM_FI_DEV_SM_CLOCK",
    GPU_UTIL: "DCGM_FI_DEV_GPU_UTIL",
    GR_ENGINE_ACTIVE: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    SM_ACTIVE: "DCGM_FI_PROF_SM_ACTIVE",
    SM_OCCUPANCY: "DCGM_FI_PROF_SM_OCCUPANCY",
    PIPE_TENSOR_ACTIVE: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    DRAM_ACTIVE: "DCGM_FI_PROF_DRAM_ACTIVE",
    PIPE_FP64_ACTIVE: "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    PIPE_FP32_ACTIVE: "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    PIPE_FP16_ACTIVE: "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    PCIE_TX_BYTES: "DCGM_FI_PROF_PCIE_TX_BYTES",
    PCIE_RX_BYTES: "DCGM_FI_PROF_PCIE_RX_BYTES",
    NVLINK_TX_BYTES: "DCGM_FI_PROF_NVLINK_TX_BYTES",
    NVLINK_RX_BYTES: "DCGM_FI_PROF_NVLINK_RX_BYTES",
    PIPE_TENSOR_IMMA_ACTIVE: "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
    PIPE_TENSOR_HMMA_ACTIVE: "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",
    PIPE_TENSOR_DFMA_ACTIVE: "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
}
"""The names DCGM has used since profiling fields arrived (DCGM 1.7/2.x) and dcgm-exporter prints."""

RENAMED: dict[str, int] = {}
"""Later spellings of the same fields: DCGM 4.6's *_UTIL_RATIO names and dcgm-exporter 4.9's renames.

Filled in by the sources' module; kept here so every parser shares one table.
"""

SHORT_NAMES: dict[str, int] = {}
"""The short column tags `dcgmi dmon` prints (GRACT, SMACT, DRAMA, ...)."""

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


def _name_table() -> dict[str, int]:
    table = {name.upper(): fid for fid, name in LEGACY_NAMES.items()}
    table.update({name.upper(): fid for name, fid in RENAMED.items()})
    table.update({name.upper(): fid for name, fid in SHORT_NAMES.items()})
    return table


def field_id(name_or_id: str | int) -> int | None:
    """The DCGM field id for an id (int or digits) or any known name; None when unknown."""
    if isinstance(name_or_id, int):
        return name_or_id
    text = name_or_id.strip()
    if text.isdigit():
        return int(text)
    return _name_table().get(text.upper())


def field_name(fid: int) -> str:
    """The legacy DCGM name of a field id, or the id itself when Ridgeline has no name for it."""
    return LEGACY_NAMES.get(fid, str(fid))


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
