"""The readings table: each counter input Ridgeline reads, written once.

One row per reading: its name (the POST /classify key and the daemon's input name), the DCGM
field behind it, its unit and its `ridgeline classify` flag and help. The roofline's reading
fields, the daemon's field maps, the CLI's counter flags and docs/readings.md derive from it;
the counter body's fields are checked against it. A row's dmon, CSV and JSON Lines column names
are exporter/fields.py's names for its field id, which is what every replay format reads.
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
    """One counter input: name, DCGM field, unit, role and its CLI help (None: no CLI flag)."""

    name: str
    field_id: int
    unit: str
    role: Role
    help: str | None

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
    def dcgm_name(self) -> str:
        """The DCGM name dcgm-exporter prints and CSV headers use (fields.LEGACY_NAMES)."""
        return fields.field_name(self.field_id)

    @property
    def csv(self) -> str:
        """The CSV replay column that names it: the DCGM name (any name or the id reads too)."""
        return self.dcgm_name

    @property
    def dmon(self) -> str | None:
        """The column tag `dcgmi dmon` prints (fields.SHORT_NAMES); None where it has none."""
        return _DMON_TAGS.get(self.field_id)

    @property
    def jsonl(self) -> str:
        """The key of a JSON Lines replay line's `fields` object: the field id as a string."""
        return str(self.field_id)


_DMON_TAGS: Mapping[int, str] = MappingProxyType({fid: tag for tag, fid in fields.SHORT_NAMES.items()})

READINGS: tuple[Reading, ...] = (
    Reading("dram_active", fields.DRAM_ACTIVE, "ratio", "activity", "DRAM_ACTIVE ratio in [0, 1]"),
    Reading(
        "tensor_active", fields.PIPE_TENSOR_ACTIVE, "ratio", "activity", "PIPE_TENSOR_ACTIVE ratio in [0, 1]"
    ),
    Reading("gr_engine_active", fields.GR_ENGINE_ACTIVE, "ratio", "activity", "GR_ENGINE_ACTIVE ratio"),
    Reading("sm_active", fields.SM_ACTIVE, "ratio", "activity", "SM_ACTIVE ratio"),
    Reading("sm_occupancy", fields.SM_OCCUPANCY, "ratio", "occupancy", "SM_OCCUPANCY ratio"),
    Reading("fp64_active", fields.PIPE_FP64_ACTIVE, "ratio", "activity", "PIPE_FP64_ACTIVE ratio"),
    Reading("fp32_active", fields.PIPE_FP32_ACTIVE, "ratio", "activity", "PIPE_FP32_ACTIVE ratio"),
    Reading("fp16_active", fields.PIPE_FP16_ACTIVE, "ratio", "activity", "PIPE_FP16_ACTIVE ratio"),
    Reading(
        "imma_active",
        fields.PIPE_TENSOR_IMMA_ACTIVE,
        "ratio",
        "tensor_pipe",
        "PIPE_TENSOR_IMMA_ACTIVE ratio (int8 tensor pipe)",
    ),
    Reading(
        "hmma_active",
        fields.PIPE_TENSOR_HMMA_ACTIVE,
        "ratio",
        "tensor_pipe",
        "PIPE_TENSOR_HMMA_ACTIVE ratio (fp16/bf16 tensor pipe)",
    ),
    Reading(
        "dfma_active",
        fields.PIPE_TENSOR_DFMA_ACTIVE,
        "ratio",
        "tensor_pipe",
        "PIPE_TENSOR_DFMA_ACTIVE ratio (fp64 tensor pipe)",
    ),
    Reading(
        "sm_clock_mhz",
        fields.SM_CLOCK,
        "MHz",
        "clock",
        "SM clock in MHz (scales achieved FLOP/s by clock / max clock)",
    ),
    Reading(
        "pcie_tx_bytes_per_second",
        fields.PCIE_TX_BYTES,
        "bytes/s",
        "link",
        "PCIe TX bytes/s (judged against the card's PCIe bandwidth)",
    ),
    Reading("pcie_rx_bytes_per_second", fields.PCIE_RX_BYTES, "bytes/s", "link", "PCIe RX bytes/s"),
    Reading("nvlink_tx_bytes_per_second", fields.NVLINK_TX_BYTES, "bytes/s", "link", "NVLink TX bytes/s"),
    Reading("nvlink_rx_bytes_per_second", fields.NVLINK_RX_BYTES, "bytes/s", "link", "NVLink RX bytes/s"),
    Reading("clock_event_reasons", fields.CLOCKS_EVENT_REASONS, "bitmask", "clock_event", None),
    Reading("power_usage_watts", fields.POWER_USAGE, "W", "power", None),
    Reading("power_limit_watts", fields.POWER_MGMT_LIMIT, "W", "power", None),
)
"""Every counter input, in the order the CLI lists its flags and docs/readings.md its rows."""

BY_NAME: Mapping[str, Reading] = MappingProxyType({reading.name: reading for reading in READINGS})


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
