"""The readings table: each counter input Ridgeline reads, written once.

One row per reading: its name (the POST /classify key and the daemon's input name), the DCGM
field behind it, its unit and its `ridgeline classify` flag and help. The roofline's reading
fields, the daemon's field maps, the CLI's counter flags and docs/readings.md derive from it;
the counter body's fields are checked against it. A row's DCGM name, renames and dmon tag are
the names every replay format and the scrape source read it by (field_id, field_name).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from exporter import fields

Role = Literal["activity", "occupancy", "tensor_pipe", "clock", "link", "clock_event", "power"]
"""What a reading is for: `activity` and `occupancy` make up the counter reading the regime rules
read (an activity says whether something runs; occupancy alone does not); `tensor_pipe` names
the precision; `clock` scales FLOP/s; `link` is judged against the link walls; `clock_event` and
`power` say why a clock is held down."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One counter input: name, DCGM field, unit, role, CLI help (None: no CLI flag) and the
    names the sources read it by: the DCGM name, its later spellings and its dmon tag."""

    name: str
    field_id: int
    unit: str
    role: Role
    help: str | None
    dcgm_name: str
    """The name DCGM has used since profiling fields arrived (DCGM 1.7/2.x) and dcgm-exporter
    prints; CSV headers use it too."""
    renamed: tuple[str, ...] = ()
    """Later spellings of the same field (same id, same unit); sources above READINGS."""
    dmon: str | None = None
    """The column tag `dcgmi dmon` prints (valueFormat->shortName in NVIDIA DCGM
    dcgmlib/src/dcgm_fields.cpp); None where it has none."""

    @property
    def json_key(self) -> str:
        """The key POST /classify's counter body and the verdict's inputs use: the name."""
        return self.name

    @property
    def flag(self) -> str | None:
        """`ridgeline classify`'s flag for it (dashes for underscores); None where it has none."""
        return None if self.help is None else "--" + self.name.replace("_", "-")

    @property
    def ratio(self) -> bool:
        """DCGM reports it as a ratio in [0, 1] (fields.RATIO_FIELDS)."""
        return self.field_id in fields.RATIO_FIELDS

    @property
    def csv(self) -> str:
        """The CSV replay column that names it: the DCGM name (csv_names all read)."""
        return self.dcgm_name

    @property
    def csv_names(self) -> tuple[str, ...]:
        """Every CSV column or scrape family name that reads as it: the DCGM name, then renames."""
        return (self.dcgm_name, *self.renamed)

    @property
    def jsonl(self) -> str:
        """The key of a JSON Lines replay line's `fields` object: the field id as a string."""
        return str(self.field_id)


# DCGM 4.6 renamed the profiling fields to *_UTIL_RATIO; id, type (double) and unit
# (ratio 0..1) are unchanged and the old names stay as deprecated aliases (NVIDIA DCGM python
# bindings dcgm_fields.py, `_DEPRECATED_ALIASES`, "renamed per DCGM Field Naming Standard";
# go-dcgm pkg/dcgm/alias_resolution_test.go, TestAliasResolution_DCGM46RenamedFieldsResolve).
# DCGM 3.3 renamed field 112 from *_CLOCK_THROTTLE_REASONS to *_CLOCKS_EVENT_REASONS (go-dcgm
# const_fields.go); dcgm-exporter prints either, by version. 1009-1012 and 100 kept their names
# in DCGM 4.6. Names whose unit changed with a rename are not renames: see fields.CONVERTED_NAMES
# and fields.GPU_UTIL_RATIO_NAME. TDFMA follows the TIMMA/THMMA pattern of the DFMA pipe added
# later (see docs/replay-formats.md).

READINGS: tuple[Reading, ...] = (
    Reading(
        "dram_active",
        fields.DRAM_ACTIVE,
        "ratio",
        "activity",
        "DRAM_ACTIVE ratio in [0, 1]",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        ("DCGM_FI_PROF_DRAM_UTIL_RATIO",),
        "DRAMA",
    ),
    Reading(
        "tensor_active",
        fields.PIPE_TENSOR_ACTIVE,
        "ratio",
        "activity",
        "PIPE_TENSOR_ACTIVE ratio in [0, 1]",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        ("DCGM_FI_PROF_TENSOR_UTIL_RATIO",),
        "TENSO",
    ),
    Reading(
        "gr_engine_active",
        fields.GR_ENGINE_ACTIVE,
        "ratio",
        "activity",
        "GR_ENGINE_ACTIVE ratio",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        ("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",),
        "GRACT",
    ),
    Reading(
        "sm_active",
        fields.SM_ACTIVE,
        "ratio",
        "activity",
        "SM_ACTIVE ratio",
        "DCGM_FI_PROF_SM_ACTIVE",
        ("DCGM_FI_PROF_SM_UTIL_RATIO",),
        "SMACT",
    ),
    Reading(
        "sm_occupancy",
        fields.SM_OCCUPANCY,
        "ratio",
        "occupancy",
        "SM_OCCUPANCY ratio",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        ("DCGM_FI_PROF_SM_OCCUPANCY_RATIO",),
        "SMOCC",
    ),
    Reading(
        "fp64_active",
        fields.PIPE_FP64_ACTIVE,
        "ratio",
        "activity",
        "PIPE_FP64_ACTIVE ratio",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        ("DCGM_FI_PROF_FP64_UTIL_RATIO",),
        "FP64A",
    ),
    Reading(
        "fp32_active",
        fields.PIPE_FP32_ACTIVE,
        "ratio",
        "activity",
        "PIPE_FP32_ACTIVE ratio",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        ("DCGM_FI_PROF_FP32_UTIL_RATIO",),
        "FP32A",
    ),
    Reading(
        "fp16_active",
        fields.PIPE_FP16_ACTIVE,
        "ratio",
        "activity",
        "PIPE_FP16_ACTIVE ratio",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        ("DCGM_FI_PROF_FP16_UTIL_RATIO",),
        "FP16A",
    ),
    Reading(
        "imma_active",
        fields.PIPE_TENSOR_IMMA_ACTIVE,
        "ratio",
        "tensor_pipe",
        "PIPE_TENSOR_IMMA_ACTIVE ratio (int8 tensor pipe)",
        "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
        ("DCGM_FI_PROF_IMMA_UTIL_RATIO",),
        "TIMMA",
    ),
    Reading(
        "hmma_active",
        fields.PIPE_TENSOR_HMMA_ACTIVE,
        "ratio",
        "tensor_pipe",
        "PIPE_TENSOR_HMMA_ACTIVE ratio (fp16/bf16 tensor pipe)",
        "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",
        ("DCGM_FI_PROF_HMMA_UTIL_RATIO",),
        "THMMA",
    ),
    Reading(
        "dfma_active",
        fields.PIPE_TENSOR_DFMA_ACTIVE,
        "ratio",
        "tensor_pipe",
        "PIPE_TENSOR_DFMA_ACTIVE ratio (fp64 tensor pipe)",
        "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
        ("DCGM_FI_PROF_DFMA_UTIL_RATIO",),
        "TDFMA",
    ),
    Reading(
        "sm_clock_mhz",
        fields.SM_CLOCK,
        "MHz",
        "clock",
        "SM clock in MHz (scales achieved FLOP/s by clock / max clock)",
        "DCGM_FI_DEV_SM_CLOCK",
        dmon="SMCLK",
    ),
    Reading(
        "pcie_tx_bytes_per_second",
        fields.PCIE_TX_BYTES,
        "bytes/s",
        "link",
        "PCIe TX bytes/s (judged against the card's PCIe bandwidth)",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        dmon="PCITX",
    ),
    Reading(
        "pcie_rx_bytes_per_second",
        fields.PCIE_RX_BYTES,
        "bytes/s",
        "link",
        "PCIe RX bytes/s",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        dmon="PCIRX",
    ),
    Reading(
        "nvlink_tx_bytes_per_second",
        fields.NVLINK_TX_BYTES,
        "bytes/s",
        "link",
        "NVLink TX bytes/s",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        dmon="NVLTX",
    ),
    Reading(
        "nvlink_rx_bytes_per_second",
        fields.NVLINK_RX_BYTES,
        "bytes/s",
        "link",
        "NVLink RX bytes/s",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        dmon="NVLRX",
    ),
    Reading(
        "clock_event_reasons",
        fields.CLOCKS_EVENT_REASONS,
        "bitmask",
        "clock_event",
        None,
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",),
    ),
    Reading("power_usage_watts", fields.POWER_USAGE, "W", "power", None, "DCGM_FI_DEV_POWER_USAGE"),
    Reading("power_limit_watts", fields.POWER_MGMT_LIMIT, "W", "power", None, "DCGM_FI_DEV_POWER_MGMT_LIMIT"),
)
"""Every counter input, in the order the CLI lists its flags and docs/readings.md its rows."""

BY_NAME: Mapping[str, Reading] = MappingProxyType({reading.name: reading for reading in READINGS})

OTHER_FIELDS: tuple[tuple[int, str, str], ...] = ((fields.GPU_UTIL, "DCGM_FI_DEV_GPU_UTIL", "GPUTL"),)
"""(id, DCGM name, dmon tag) of the fields sources read that are no counter input."""

DCGM_NAMES: Mapping[int, str] = MappingProxyType(
    {r.field_id: r.dcgm_name for r in READINGS} | {fid: name for fid, name, _ in OTHER_FIELDS}
)
"""Field id -> its DCGM name, for every field Ridgeline reads (generated from READINGS)."""
RENAMED: Mapping[str, int] = MappingProxyType({name: r.field_id for r in READINGS for name in r.renamed})
"""Later spellings of the same fields (same id, same unit), generated from READINGS."""
DMON_TAGS: Mapping[str, int] = MappingProxyType(
    {r.dmon: r.field_id for r in READINGS if r.dmon is not None} | {tag: fid for fid, _, tag in OTHER_FIELDS}
)
"""The short column tags `dcgmi dmon` prints (GRACT, SMACT, DRAMA, ...) -> field id."""

_BY_COLUMN_NAME: Mapping[str, int] = MappingProxyType(
    {name.upper(): fid for fid, name in DCGM_NAMES.items()}
    | {name.upper(): fid for name, fid in RENAMED.items()}
    | {tag.upper(): fid for tag, fid in DMON_TAGS.items()}
)


def field_id(name_or_id: str | int) -> int | None:
    """The DCGM field id for an id (int or digits) or any name above; None when unknown."""
    if isinstance(name_or_id, int):
        return name_or_id
    text = name_or_id.strip()
    if text.isdigit():
        return int(text)
    return _BY_COLUMN_NAME.get(text.upper())


def field_name(fid: int) -> str:
    """The DCGM name of a field id, or the id itself when Ridgeline has no name for it."""
    return DCGM_NAMES.get(fid, str(fid))


def names(*roles: Role) -> tuple[str, ...]:
    """The names of the readings with one of `roles`, in table order."""
    return tuple(reading.name for reading in READINGS if reading.role in roles)


def field_ids(*roles: Role) -> Mapping[str, int]:
    """name -> DCGM field id of the readings with one of `roles`, in table order."""
    return MappingProxyType({r.name: r.field_id for r in READINGS if r.role in roles})


READING_FIELDS: tuple[str, ...] = names("activity", "occupancy")
"""The ratios a counter reading carries (roofline's CounterReading, DCGM 1001-1008)."""
ACTIVITY_FIELDS: tuple[str, ...] = names("activity")
"""Fields that say whether something runs: a reading needs at least one of them."""
TENSOR_PIPE_FIELDS: tuple[str, ...] = names("tensor_pipe")
LINK_FIELDS: tuple[str, ...] = names("link")

DOCS_HEADER = "| reading | DCGM field | DCGM name | dmon | unit | role | `ridgeline classify` flag |"


def docs_table() -> str:
    """docs/readings.md's table, generated: tests/test_readings.py checks the page holds it."""
    lines = [DOCS_HEADER, "|---|---|---|---|---|---|---|"]
    for r in READINGS:
        flag = "—" if r.flag is None else f"`{r.flag}`"
        dmon = "—" if r.dmon is None else f"`{r.dmon}`"
        lines.append(
            f"| `{r.name}` | {r.field_id} | `{r.dcgm_name}` | {dmon} | {r.unit} | {r.role} | {flag} |"
        )
    return "\n".join(lines) + "\n"
