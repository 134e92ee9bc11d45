"""The card catalog: each GPU's dense peaks and bandwidth, validated at load, found by any name.

The data lives in exporter/data/cards.yaml (one cited datasheet per entry); a user file given
with `--cards FILE` adds entries or overrides them by key. pydantic validates each entry at the
edge (CardSpec), which then becomes a frozen record (Card) with its figures scaled and its roofs
computed once, so the sample loop and the HTTP API only ever see a consistent catalog. Besides
the tensor peaks a card carries its CUDA-core (vector) peaks, for DCGM's FP64/FP32/FP16 pipe
counters, and its MIG slice table, so a GPU instance gets its own share of the roof
(docs/design.md, "Card catalog"; the figures per card are in docs/cards.md).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from exporter.roofline import PRECISIONS, Roof

TERA = 1e12


def from_tera(value: float) -> float:
    """value × 10¹² without binary noise: 2.039 TB/s is 2039000000000.0 bytes/s, not ...0002.

    Scaling the shortest decimal repr keeps datasheet figures exact in API answers.
    """
    return float(Decimal(repr(value)).scaleb(12))


KEY_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"

_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it: the catalog loads at every CLI start."""

PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
SourceUrl = Annotated[str, Field(pattern=r"^https?://\S+$")]

Vendor = Literal["nvidia", "amd", "google", "other"]
VectorPipe = Literal["fp64", "fp32", "fp16"]
VECTOR_PIPES: tuple[VectorPipe, ...] = ("fp64", "fp32", "fp16")
"""The CUDA-core (non-tensor) pipes DCGM reports activity for: fields 1006-1008,
PIPE_FP64_ACTIVE, PIPE_FP32_ACTIVE, PIPE_FP16_ACTIVE."""

MIG_PROFILE_KEY = r"^[1-9][0-9]*g\.[1-9][0-9]*gb$"
"""A GPU instance profile as the MIG user guide names it: compute slices `g`, memory `gb`."""

MIG_SM_KEY = r"^(?:[1-9][0-9]*c\.)?[1-9][0-9]*g\.[1-9][0-9]*gb$"
"""A `mig_sms` key: a GPU instance profile, or a compute instance of one (`1c.3g.20gb`)."""

_MIG_PROFILE_TEXT = re.compile(
    r"^(?:mig\s+)?(?:(?P<ci>[1-9][0-9]*)c\.)?(?P<gi>[1-9][0-9]*g\.[1-9][0-9]*gb)(?:[+-].*)?$"
)
"""How DCGM, dcgm-exporter (`GPU_I_PROFILE`) and nvidia-smi print a profile: an optional `MIG `
prefix, an optional compute-instance `Nc.` prefix, then the GPU instance profile and any
`+me`, `+me.all`, `+gfx` or `-me` variant suffix (media engines, graphics: same slices)."""


class CatalogError(ValueError):
    """A catalog file that cannot be used; the message names the file, entry and field."""


class UnknownCard(LookupError):
    """No card matches a name; `suggestions` holds the nearest keys and NVML names."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown card {name!r}{hint}")


PrecisionSource = Literal["body", "default", "default_substitute", "tensor_pipes"]
"""Where a precision came from: the request, the configured default, the default's stand-in, or
the dominant tensor pipe of a counter reading."""


class UnknownPrecision(LookupError):
    """The card has no peak for the asked precision; `available` lists the ones it has."""

    def __init__(self, card: str, precision: str, available: list[str]) -> None:
        self.card = card
        self.precision = precision
        self.available = available
        super().__init__(f"card {card!r} has no {precision!r} peak; it has: {', '.join(available)}")


STAND_IN_PRECISIONS: dict[str, tuple[str, ...]] = {
    "bf16": ("fp16",),
    "fp16": ("bf16",),
    "fp8": ("int8",),
    "int8": ("fp8",),
}
"""Same-width peaks that stand in for a default precision a card lacks: V100/T4 tensor cores run
fp16 at the rate bf16 would be quoted at; fp8 and int8 share the tensor rate on every card."""

GENERAL_STAND_INS: tuple[str, ...] = ("bf16", "fp16", "fp32")
"""Tried next, in order, before whatever the card lists first."""


@dataclass(frozen=True, slots=True)
class MigSlices:
    """A MIG instance's share of its card: compute slices (GPCs) and memory slices out of the totals.

    A 3g.20gb instance on an A100 40GB holds 3 of 7 compute slices and 4 of 8 memory slices (MIG
    user guide, "Supported MIG Profiles"), so it gets 3/7 of the peak and 4/8 of the bandwidth.
    """

    compute: int
    compute_total: int
    memory: int
    memory_total: int
    sms: int | None = None
    """The instance's SMs as `nvidia-smi mig -lgip`/`-lcip` print them; None where unpublished."""
    sm_total: int | None = None
    """The whole card's SMs (Card.sm_count)."""

    def __post_init__(self) -> None:
        for part, total, what in (
            (self.compute, self.compute_total, "compute"),
            (self.memory, self.memory_total, "memory"),
        ):
            if not 0 < part <= total:
                raise ValueError(f"{what} slices must be in 1..{total}, got {part}")

    @property
    def compute_fraction(self) -> float:
        """Compute slices over the total: what the profile's name says, not what it computes with."""
        return self.compute / self.compute_total

    @property
    def sm_fraction(self) -> float | None:
        """The instance's SMs over the card's: its share of the compute peak (None: unknown).

        Slices are not a seventh of the SMs each: an A100's 7g profile holds 98 of its 108 SMs, an
        H100 SXM's 1g.20gb 26 of 132 (docs/model.md, "MIG roofs")."""
        if self.sms is None or self.sm_total is None:
            return None
        return self.sms / self.sm_total

    @property
    def memory_fraction(self) -> float:
        return self.memory / self.memory_total


@functools.lru_cache(maxsize=512)
def parse_mig_profile(text: str) -> tuple[int | None, str] | None:
    """(compute-instance slices or None, GPU instance profile) from a printed profile, or None.

    `3g.20gb`, `MIG 3g.20gb`, `3G.20GB+me` and `3g.20gb-me` name the GPU instance 3g.20gb;
    `1c.3g.20gb` is one compute slice of it. Bounded cache: label values repeat every sample.
    """
    match = _MIG_PROFILE_TEXT.fullmatch(text.strip().casefold())
    if match is None:
        return None
    ci = match.group("ci")
    return (int(ci) if ci is not None else None), match.group("gi")


def _known_precisions(table: dict[str, float]) -> dict[str, float]:
    """A table keyed by precision names only roofline.PRECISIONS."""
    unknown = sorted(set(table) - set(PRECISIONS))
    if unknown:
        raise ValueError(f"unknown precision(s) {unknown}; known: {', '.join(PRECISIONS)}")
    return table


class MigGeometrySpec(BaseModel):
    """A card's MIG slices as written: totals and each GPU instance profile's [compute, memory]
    slice counts; validated at load, then held by the Card as a MigGeometry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compute_slices: Annotated[int, Field(gt=0)]
    memory_slices: Annotated[int, Field(gt=0)]
    profiles: dict[Annotated[str, Field(pattern=MIG_PROFILE_KEY)], tuple[int, int]]
    source: SourceUrl

    @model_validator(mode="after")
    def _profiles_fit_the_card(self) -> MigGeometrySpec:
        if not self.profiles:
            raise ValueError("profiles: at least one profile is required")
        for name, (compute, memory) in self.profiles.items():
            if not 0 < compute <= self.compute_slices:
                raise ValueError(
                    f"profile {name!r}: compute slices {compute} not in 1..{self.compute_slices}"
                )
            if not 0 < memory <= self.memory_slices:
                raise ValueError(f"profile {name!r}: memory slices {memory} not in 1..{self.memory_slices}")
            named = int(name.split("g.", 1)[0])
            if named != compute:
                raise ValueError(f"profile {name!r} names {named} compute slices but lists {compute}")
        return self


@dataclass(frozen=True, slots=True)
class MigGeometry:
    """A card's MIG slice table as the Card holds it (from a validated MigGeometrySpec)."""

    compute_slices: int
    memory_slices: int
    profiles: Mapping[str, tuple[int, int]]
    source: str

    def slices(
        self, profile: str, sms: Mapping[str, int] | None = None, sm_total: int | None = None
    ) -> MigSlices | None:
        """The slices a printed profile holds; None for a profile this card does not list.

        `sms` is the card's SM table (Card.mig_sms) and `sm_total` its SM count: the instance's
        SMs come from there, a compute instance's under its own `Nc.` key."""
        parsed = parse_mig_profile(profile)
        if parsed is None:
            return None
        compute_instance, gpu_instance = parsed
        counts = self.profiles.get(gpu_instance)
        if counts is None:
            return None
        compute, memory = counts
        key = gpu_instance
        if compute_instance is not None:
            if compute_instance > compute:
                return None
            if compute_instance < compute:
                key = f"{compute_instance}c.{gpu_instance}"
            compute = compute_instance  # a compute instance shares its GPU instance's memory
        return MigSlices(
            compute=compute,
            compute_total=self.compute_slices,
            memory=memory,
            memory_total=self.memory_slices,
            sms=None if sms is None else sms.get(key),
            sm_total=sm_total,
        )


CUDA_CORE_PRECISIONS: frozenset[str] = frozenset({"fp64", "fp32"})
"""peak_tflops rows that are CUDA-core (not tensor-core) figures: the datasheets' FP64 and FP32."""


class ClockBasisSpec(BaseModel):
    """The SM clocks a card's peaks are quoted at: a datasheet peak is SMs × FLOP/clock × a clock.

    H100 SXM's dense BF16 989.5 TFLOP/s is 132 SMs × 4096 FLOP/clock × 1830 MHz, its FP32 67 is
    132 × 256 × 1980 MHz: the tensor and CUDA-core figures have their own clocks, and a precision
    may have its own (H100's FP64 tensor 67 = 132 × 256 × 1980 MHz). docs/model.md, "Clock basis".
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_mhz: PositiveFinite
    """The clock of the tensor-core peaks (every peak_tflops precision but fp64 and fp32)."""
    cuda_core_mhz: PositiveFinite
    """The clock of the CUDA-core figures: peak_tflops fp64/fp32 and every vector_tflops pipe."""
    precision_mhz: dict[str, PositiveFinite] = Field(default_factory=dict)
    """Precisions quoted at another clock than their kind's."""
    derivation: Annotated[str, Field(min_length=1)]
    """How the clocks follow from the figures (SMs × FLOP/clock × clock = the peak)."""
    source: SourceUrl

    @field_validator("precision_mhz")
    @classmethod
    def _known_precisions(cls, clocks: dict[str, float]) -> dict[str, float]:
        return _known_precisions(clocks)


@dataclass(frozen=True, slots=True)
class ClockBasis:
    """The clocks a card's peaks are quoted at, as the model reads them (from a ClockBasisSpec;
    its derivation and source stay on the spec)."""

    tensor_mhz: float
    cuda_core_mhz: float
    precision_mhz: Mapping[str, float]

    def peak_mhz(self, precision: str) -> float:
        """The clock the `precision` peak is quoted at."""
        found = self.precision_mhz.get(precision)
        if found is not None:
            return found
        return self.cuda_core_mhz if precision in CUDA_CORE_PRECISIONS else self.tensor_mhz


GIGA = 1e9

LinkName = Literal["nvlink", "pcie"]
LINK_NAMES: tuple[LinkName, ...] = ("nvlink", "pcie")
"""The links DCGM counts bytes on: PCIe (fields 1009-1010) and NVLink (1011-1012)."""


class LinkBandwidthSpec(BaseModel):
    """A card's NVLink and PCIe bandwidth per direction, GB/s (10⁹ bytes/s), from its datasheet.

    Datasheets quote both directions together (H100 SXM: NVLink 900 GB/s, PCIe Gen5 128 GB/s);
    DCGM counts each direction apart (TX and RX), so the catalog holds half: 450 and 64. A link
    the card does not have (a PCIe card without an NVLink bridge) or whose figure NVIDIA does not
    publish says why instead (docs/model.md, "The interconnect wall").
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    nvlink_gbps: PositiveFinite | None = None
    no_nvlink: Annotated[str, Field(min_length=1)] | None = None
    pcie_gbps: PositiveFinite | None = None
    no_pcie: Annotated[str, Field(min_length=1)] | None = None
    quoted: Annotated[str, Field(min_length=1)]
    """The datasheet's own words, totals and all, so the halving can be checked."""
    source: SourceUrl

    @model_validator(mode="after")
    def _figure_or_reason(self) -> LinkBandwidthSpec:
        """Each link has a figure or says why not, never both and never neither."""
        for link in LINK_NAMES:
            figure, reason = getattr(self, f"{link}_gbps"), getattr(self, f"no_{link}")
            if (figure is None) == (reason is None):
                raise ValueError(f"give {link}_gbps or no_{link} (why there is no figure), exactly one")
        return self


@dataclass(frozen=True, slots=True)
class LinkBandwidth:
    """A card's link bandwidth per direction in bytes/s, None where it has no figure (from a
    LinkBandwidthSpec's GB/s; the datasheet's words stay on the spec)."""

    nvlink: float | None
    pcie: float | None

    @classmethod
    def from_spec(cls, spec: LinkBandwidthSpec) -> LinkBandwidth:
        nvlink, pcie = (None if gbps is None else gbps * GIGA for gbps in (spec.nvlink_gbps, spec.pcie_gbps))
        return cls(nvlink=nvlink, pcie=pcie)

    def bytes_per_second(self, link: str) -> float | None:
        """The link's bandwidth per direction in bytes/s; None where the card has no figure."""
        return self.nvlink if link == "nvlink" else self.pcie


def _scales(value: float, what: str, unit: str, scaled_unit: str) -> None:
    """A figure that stays finite once scaled from tera: a huge one would overflow to inf."""
    if not math.isfinite(from_tera(value)):
        raise ValueError(f"{what}{value} {unit} overflows a float once scaled to {scaled_unit}")


def _peaks_scale(peaks: dict[str, float]) -> dict[str, float]:
    """Each TFLOP/s peak of a table finite in FLOP/s (_scales)."""
    for name, value in peaks.items():
        _scales(value, f"{name}: ", "TFLOP/s", "FLOP/s")
    return peaks


class CardSpec(BaseModel):
    """One catalog entry as written: dense peaks per precision (TFLOP/s) and memory bandwidth
    (TB/s), as datasheets say; validated at load, then made a Card (`Card.from_spec`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: Annotated[str, Field(pattern=KEY_PATTERN)]
    name: Annotated[str, Field(min_length=1)]
    vendor: Vendor = "nvidia"
    nvml_names: list[str] = Field(default_factory=list)
    nvml_patterns: list[str] = Field(default_factory=list)
    aliases: list[Annotated[str, Field(pattern=KEY_PATTERN)]] = Field(default_factory=list)
    peak_tflops: dict[str, PositiveFinite]
    bandwidth_tbps: PositiveFinite
    memory_gib: PositiveFinite | None = None
    sm_count: Annotated[int, Field(gt=0)] | None = None
    max_sm_clock_mhz: PositiveFinite | None = None
    reference_only: bool = False
    source: SourceUrl
    vector_tflops: dict[VectorPipe, PositiveFinite] = Field(default_factory=dict)
    vector_source: SourceUrl | None = None
    mig: MigGeometrySpec | None = None
    mig_sms: dict[Annotated[str, Field(pattern=MIG_SM_KEY)], Annotated[int, Field(gt=0)]] = Field(
        default_factory=dict
    )
    """SMs per MIG profile (and compute instance, `1c.3g.20gb`), the SM column of `nvidia-smi mig
    -lgip` / `-lcip`: an instance's compute peak is the card's × its SMs ÷ sm_count."""
    mig_sms_source: SourceUrl | None = None
    clock_basis: ClockBasisSpec | None = None
    no_clock_basis: Annotated[str, Field(min_length=1)] | None = None
    """Why the card has no clock basis (nothing published): its clock ratio is then unknown."""
    links: LinkBandwidthSpec | None = None
    """NVLink and PCIe bandwidth per direction: the interconnect wall (docs/model.md)."""
    no_links: Annotated[str, Field(min_length=1)] | None = None
    """Why the card has no link figures: its links then have no wall (never interconnect_bound)."""

    @field_validator("peak_tflops")
    @classmethod
    def _known_precisions(cls, peaks: dict[str, float]) -> dict[str, float]:
        _known_precisions(peaks)
        if not peaks:
            raise ValueError("at least one precision peak is required")
        return _peaks_scale(peaks)

    @field_validator("vector_tflops")
    @classmethod
    def _vector_peaks_scale(cls, peaks: dict[str, float]) -> dict[str, float]:
        return _peaks_scale(peaks)

    @field_validator("bandwidth_tbps")
    @classmethod
    def _bandwidth_scales(cls, value: float) -> float:
        _scales(value, "", "TB/s", "bytes/s")
        return value

    @model_validator(mode="after")
    def _ridges_are_finite(self) -> CardSpec:
        """Every answer carries the ridge P / B: a pair whose ratio overflows is unusable."""
        bandwidth = from_tera(self.bandwidth_tbps)
        figures = [("peak_tflops", p, v) for p, v in self.peak_tflops.items()]
        figures += [("vector_tflops", p, v) for p, v in self.vector_tflops.items()]
        for figure, precision, value in figures:
            if not math.isfinite(from_tera(value) / bandwidth):
                raise ValueError(
                    f"the {precision} ridge ({figure} / bandwidth_tbps) overflows a float; "
                    "check the units (TFLOP/s and TB/s)"
                )
        return self

    @model_validator(mode="after")
    def _one_story_each(self) -> CardSpec:
        """A card states its clock basis (its link bandwidths) or why it has none, not both."""
        for part in ("clock_basis", "links"):
            if getattr(self, part) is not None and getattr(self, f"no_{part}") is not None:
                raise ValueError(f"{part} and no_{part} exclude each other")
        return self

    @model_validator(mode="after")
    def _mig_sms_fit_the_card(self) -> CardSpec:
        """Every SM count names a listed profile and fits in it and in the card."""
        if not self.mig_sms:
            return self
        if self.mig is None or self.sm_count is None:
            raise ValueError("mig_sms needs the card's mig table and sm_count")
        if self.mig_sms_source is None:
            raise ValueError("mig_sms needs mig_sms_source (where the SM counts are published)")
        for name, sms in self.mig_sms.items():
            parsed = parse_mig_profile(name)
            assert parsed is not None  # the key pattern is a subset of what parses
            compute_instance, gpu_instance = parsed
            if gpu_instance not in self.mig.profiles:
                raise ValueError(f"mig_sms {name!r}: {gpu_instance} is not in this card's mig profiles")
            if compute_instance is not None and compute_instance >= self.mig.profiles[gpu_instance][0]:
                raise ValueError(
                    f"mig_sms {name!r}: a compute instance must hold fewer slices than its GPU instance"
                )
            if sms > self.sm_count:
                raise ValueError(f"mig_sms {name!r}: {sms} SMs is more than the card's {self.sm_count}")
        return self

    @field_validator("nvml_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return patterns


_NESTED = frozenset({"mig", "clock_basis", "links"})
"""CardSpec's nested specs: the Card holds each as its plain record."""

Record = TypeVar("Record", MigGeometry, ClockBasis)


def _plain(record: type[Record], spec: BaseModel | None) -> Record | None:
    """The plain record of a validated spec (None: none): each of the record's fields read from
    the spec by name (what the model does not read, such as a derivation, stays on the spec); a
    table made read-only."""
    if spec is None:
        return None
    values: dict[str, Any] = {}
    for name in (f.name for f in fields(record)):
        value = getattr(spec, name)
        values[name] = MappingProxyType(dict(value)) if isinstance(value, dict) else value
    return record(**values)


@dataclass(frozen=True, slots=True)
class Card:
    """One card as Ridgeline reads it: the spec's fields, and its figures in FLOP/s and bytes/s
    with its roof and ridge per precision computed once at load (`Card.from_spec`)."""

    key: str
    name: str
    vendor: Vendor
    nvml_names: list[str]
    nvml_patterns: list[str]
    aliases: list[str]
    peak_tflops: dict[str, float]
    bandwidth_tbps: float
    memory_gib: float | None
    sm_count: int | None
    max_sm_clock_mhz: float | None
    reference_only: bool
    source: str
    vector_tflops: dict[VectorPipe, float]
    vector_source: str | None
    mig: MigGeometry | None
    mig_sms: dict[str, int]
    mig_sms_source: str | None
    clock_basis: ClockBasis | None
    no_clock_basis: str | None
    links: LinkBandwidth | None
    no_links: str | None
    precisions: tuple[str, ...]
    """The precisions this card has a peak for, in PRECISIONS order."""
    peaks: Mapping[str, float]
    """Dense peak per precision, FLOP/s."""
    vectors: Mapping[str, float]
    """CUDA-core peak per pipe (fp64, fp32, fp16), FLOP/s, where published."""
    bandwidth_bytes_per_second: float
    roofs: Mapping[str, Roof]
    """The whole card's roof per precision."""
    ridges: Mapping[str, float]
    """The whole card's ridge P / B per precision, FLOP/byte."""
    spec: CardSpec = field(repr=False, compare=False)
    """The entry as validated (what a catalog file would hold)."""
    identity: str = field(repr=False, compare=False)
    """The spec as JSON: records with equal identities are the same card (a --cards entry that
    overrides a built-in key has its own). The same figures in another key order give another
    identity: a cache miss, never a wrong hit."""
    instance_roofs: dict[tuple[str, tuple[int | None, str], int | None], Roof] = field(
        default_factory=dict, repr=False, compare=False
    )
    """MIG instance roofs asked for so far, by (precision, parsed profile, live SMs)."""

    @classmethod
    def from_spec(cls, spec: CardSpec) -> Card:
        """The record of a validated entry: every figure scaled once (the spec's validators
        guarantee each is positive and finite, ridges included)."""
        peaks = {p: from_tera(v) for p, v in spec.peak_tflops.items()}
        bandwidth = from_tera(spec.bandwidth_tbps)
        roofs = {
            p: Roof(peak_flop_per_second=v, bandwidth_bytes_per_second=bandwidth) for p, v in peaks.items()
        }
        links = spec.links
        return cls(
            **{name: getattr(spec, name) for name in CardSpec.model_fields if name not in _NESTED},
            mig=_plain(MigGeometry, spec.mig),
            clock_basis=_plain(ClockBasis, spec.clock_basis),
            links=None if links is None else LinkBandwidth.from_spec(links),
            precisions=tuple(p for p in PRECISIONS if p in peaks),
            peaks=MappingProxyType(peaks),
            vectors=MappingProxyType({p: from_tera(v) for p, v in spec.vector_tflops.items()}),
            bandwidth_bytes_per_second=bandwidth,
            roofs=MappingProxyType(roofs),
            ridges=MappingProxyType({p: roof.ridge_flop_per_byte for p, roof in roofs.items()}),
            spec=spec,
            identity=spec.model_dump_json(),
        )

    def peak_flop_per_second(self, precision: str) -> float:
        """Dense peak at `precision` in FLOP/s; UnknownPrecision when the card lacks it."""
        try:
            return self.peaks[precision]
        except KeyError:
            raise UnknownPrecision(self.key, precision, list(self.precisions)) from None

    def vector_peak_flop_per_second(self, pipe: str) -> float | None:
        """The CUDA-core (non-tensor) peak of one DCGM pipe in FLOP/s; None when unpublished.

        `pipe` is fp64, fp32 or fp16 (fields 1006-1008); anything else is a programming error.
        """
        if pipe not in VECTOR_PIPES:
            raise ValueError(f"unknown vector pipe {pipe!r}; known: {', '.join(VECTOR_PIPES)}")
        return self.vectors.get(pipe)

    def peak_clock_mhz(self, precision: str) -> float | None:
        """The SM clock the `precision` peak is quoted at; None when the card has no basis.

        A card without `clock_basis` (a user file from before it) falls back to max_sm_clock_mhz,
        the old rule, unless it says `no_clock_basis`."""
        if self.clock_basis is not None:
            return self.clock_basis.peak_mhz(precision)
        return None if self.no_clock_basis is not None else self.max_sm_clock_mhz

    def vector_clock_mhz(self) -> float | None:
        """The SM clock the CUDA-core (vector) peaks are quoted at; None without a basis."""
        if self.clock_basis is not None:
            return self.clock_basis.cuda_core_mhz
        return None if self.no_clock_basis is not None else self.max_sm_clock_mhz

    def link_bytes_per_second(self, link: str) -> float | None:
        """A link's bandwidth per direction (bytes/s), `nvlink` or `pcie`; None without a figure."""
        if link not in LINK_NAMES:
            raise ValueError(f"unknown link {link!r}; known: {', '.join(LINK_NAMES)}")
        return None if self.links is None else self.links.bytes_per_second(link)

    def mig_slices(self, profile: str, live_sms: int | None = None) -> MigSlices | None:
        """The slices a MIG profile holds on this card (`3g.20gb`, `MIG 3g.20gb+me`, any case).

        None when the card has no MIG table or does not list the profile. `live_sms`: the
        instance's SM count as the GPU library reports it, which overrides `mig_sms` and fills it
        for a profile the table lacks (docs/model.md, "MIG roofs"); one above the card's is ignored.
        """
        if self.mig is None:
            return None
        slices = self.mig.slices(profile, self.mig_sms, self.sm_count)
        if slices is None or live_sms is None or self.sm_count is None or not 0 < live_sms <= self.sm_count:
            return slices
        return replace(slices, sms=live_sms)

    def instance_roof(self, precision: str, profile: str, live_sms: int | None = None) -> Roof | None:
        """The roof of one MIG instance: peak × its SMs ÷ the card's, bandwidth × memory fraction.

        None for a profile the card does not list or whose SM count is not published (ratios and a
        regime, no roof); UnknownPrecision as `roof` raises it.
        """
        peak = self.peak_flop_per_second(precision)
        parsed = parse_mig_profile(profile)
        if self.mig is None or parsed is None or parsed[1] not in self.mig.profiles:
            return None
        memo = self.instance_roofs  # listed profiles only: bounded by the card's table
        key = (precision, parsed, live_sms)
        roof = memo.get(key)
        if roof is None:
            slices = self.mig_slices(profile, live_sms)
            fraction = None if slices is None else slices.sm_fraction
            if slices is None or fraction is None:  # too many compute slices; SMs unpublished
                return None
            roof = memo[key] = Roof(
                peak_flop_per_second=peak * fraction,
                bandwidth_bytes_per_second=self.bandwidth_bytes_per_second * slices.memory_fraction,
            )
        return roof

    def stand_in_precision(self, wanted: str) -> str:
        """The precision to use when `wanted` is a default (not an explicit ask) the card lacks.

        `wanted` itself when the card has it; else a same-width substitute; else bf16, fp16,
        fp32; else the card's first precision. One rule for the API and the daemon.
        """
        available = self.peak_tflops
        for candidate in (wanted, *STAND_IN_PRECISIONS.get(wanted, ()), *GENERAL_STAND_INS):
            if candidate in available:
                return candidate
        return self.precisions[0]

    def resolve_precision(self, asked: str | None, default: str) -> tuple[str, PrecisionSource]:
        """(precision, where it came from): the one rule the API and the daemon share.

        An explicit ask the card lacks is UnknownPrecision (the API answers 422 listing what the
        card has); a default the card lacks takes its stand-in (`stand_in_precision`).
        """
        if asked is not None:
            if asked not in self.peak_tflops:
                raise UnknownPrecision(self.key, asked, list(self.precisions))
            return asked, "body"
        if default in self.peak_tflops:
            return default, "default"
        return self.stand_in_precision(default), "default_substitute"

    def roof(self, precision: str) -> Roof:
        """The roof this card offers at one precision (computed at load); UnknownPrecision when
        the card has no peak for it."""
        roof = self.roofs.get(precision)
        if roof is None:
            raise UnknownPrecision(self.key, precision, list(self.precisions))
        return roof

    def matches_nvml_name(self, nvml_name: str) -> bool:
        """Exact, case-insensitive NVML name match, then the optional patterns."""
        wanted = nvml_name.strip().casefold()
        if any(wanted == n.casefold() for n in self.nvml_names):
            return True
        return any(re.fullmatch(p, nvml_name.strip(), flags=re.IGNORECASE) for p in self.nvml_patterns)


class CatalogFile(BaseModel):
    """The YAML document: `cards:` followed by a list of entries."""

    model_config = ConfigDict(extra="forbid")

    cards: list[CardSpec]

    @model_validator(mode="after")
    def _unique_keys_and_names(self) -> CatalogFile:
        _check_unique(self.cards)
        return self


def _check_unique(cards: Iterable[CardSpec] | Iterable[Card]) -> None:
    keys: dict[str, str] = {}
    names: dict[str, str] = {}
    for card in cards:
        for key in (card.key, *card.aliases):
            if key in keys:
                raise ValueError(f"key or alias {key!r} of {card.key!r} is already used by {keys[key]!r}")
            keys[key] = card.key
        for name in card.nvml_names:
            folded = name.casefold()
            if folded in names:
                raise ValueError(f"NVML name {name!r} of {card.key!r} is already used by {names[folded]!r}")
            names[folded] = card.key


class Catalog:
    """Cards by key, alias and NVML name; immutable once built."""

    def __init__(self, cards: Iterable[Card]) -> None:
        self._cards: dict[str, Card] = {card.key: card for card in cards}
        try:
            _check_unique(self._cards.values())
        except ValueError as exc:
            raise CatalogError(str(exc)) from None
        self._by_alias = {alias: card for card in self._cards.values() for alias in card.aliases}
        self._by_nvml = {n.casefold(): card for card in self._cards.values() for n in card.nvml_names}

    def __iter__(self) -> Iterator[Card]:
        return iter(self._cards.values())

    def __len__(self) -> int:
        return len(self._cards)

    def keys(self) -> list[str]:
        return list(self._cards)

    def get(self, key: str) -> Card | None:
        return self._cards.get(key)

    def lookup(self, name: str) -> Card:
        """A card by key, alias, NVML name (case-insensitive) or NVML pattern; UnknownCard otherwise."""
        text = name.strip()
        folded = text.casefold()
        card = self._cards.get(folded) or self._by_alias.get(folded) or self._by_nvml.get(folded)
        if card is not None:
            return card
        for candidate in self._cards.values():
            if candidate.matches_nvml_name(text):
                return candidate
        raise UnknownCard(name, self.suggest(name))

    def find_by_nvml_name(self, nvml_name: str) -> Card | None:
        """The card a GPU reports itself as, or None (the daemon then labels it unknown)."""
        try:
            return self.lookup(nvml_name)
        except UnknownCard:
            return None

    def suggest(self, name: str, limit: int = 3) -> list[str]:
        """Near matches among keys, aliases and NVML names, nearest first (difflib ratio)."""
        names = {c.key: c.key for c in self._cards.values()}
        names.update({alias: alias for alias in self._by_alias})
        names.update({n.casefold(): n for c in self._cards.values() for n in c.nvml_names})
        folded = name.strip().casefold()
        close = difflib.get_close_matches(folded, list(names), n=limit, cutoff=0.5)
        if not close:
            # "h100" style fragments: keys that contain what was typed
            close = [k for k in names if folded and folded in k][:limit]
        return [names[c] for c in close]

    def merged(self, extra: Iterable[Card]) -> Catalog:
        """A new catalog with `extra` cards added, replacing same-key entries."""
        cards = dict(self._cards)
        for card in extra:
            cards[card.key] = card
        return Catalog(cards.values())


def _describe_validation_error(path: str, data: Any, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        loc = list(err["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "cards" and isinstance(loc[1], int):
            index = loc[1]
            try:
                entry_key = data["cards"][index].get("key", f"#{index}")
            except (KeyError, IndexError, TypeError, AttributeError):
                entry_key = f"#{index}"
            field = ".".join(str(p) for p in loc[2:]) or "(entry)"
            where = f"entry {entry_key!r}, field {field}"
        else:
            where = ".".join(str(p) for p in loc) or "(document)"
        problems.append(f"{where}: {err['msg']}")
    return f"{path}: " + "; ".join(problems)


def parse_catalog_text(text: str, origin: str) -> list[Card]:
    """Validate one YAML catalog document; CatalogError names the file, entry and field."""
    try:
        data = yaml.load(text, Loader=_SAFE_LOADER)  # a safe loader either way
    except yaml.YAMLError as exc:
        # PyYAML's message spans lines (problem, then "in ..., line L, column C"): keep one line
        raise CatalogError(f"{origin}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{origin}: expected a mapping with a `cards:` list at the top")
    try:
        specs = CatalogFile.model_validate(data).cards
    except ValidationError as exc:
        raise CatalogError(_describe_validation_error(origin, data, exc)) from None
    return [Card.from_spec(spec) for spec in specs]


def builtin_cards() -> list[Card]:
    """The cards shipped in the package."""
    text = resources.files("exporter").joinpath("data/cards.yaml").read_text(encoding="utf-8")
    return parse_catalog_text(text, "exporter/data/cards.yaml")


def load_catalog(extra_files: Iterable[str | Path] = ()) -> Catalog:
    """The built-in catalog, then each user file in turn adding or overriding entries by key."""
    catalog = Catalog(builtin_cards())
    for path in extra_files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogError(f"{path}: cannot read cards file: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise CatalogError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
        cards = parse_catalog_text(text, str(path))
        try:
            catalog = catalog.merged(cards)
        except ValueError as exc:  # CatalogError included: a clash with a card already loaded
            raise CatalogError(f"{path}: {exc}") from None
    return catalog
