"""The collectors `ridgeline serve` exports: each declares its families and reads them off a snapshot.

node_exporter's shape: a name, a default, the families it writes and a `collect` over one
snapshot; `serve`'s `--collector.NAME` flags are derived from COLLECTORS (docs/design.md §4; what
reads each: docs/rules-and-dashboards.md, "Series budget"). At run time no Ridgeline module but
roofline, readings and sample is imported (state and inference for mypy only), so parsing
`serve`'s flags imports neither prometheus_client nor the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Literal, NamedTuple, cast, overload

from exporter import readings
from exporter.roofline import REGIMES
from exporter.sample import HPC_JOB_SEPARATOR, single_hpc_job

if TYPE_CHECKING:
    from exporter.inference import Estimate
    from exporter.roofline import Roof
    from exporter.state import GpuState, Snapshot, WorkloadKey

GPU_LABELS: tuple[str, ...] = (
    "gpu", "uuid", "model", "card", "gpu_instance", "namespace", "pod", "container", "hpc_job",
)  # fmt: skip
"""A GPU's labels (gpu_labels): the first four always, the others where they apply."""

ROOF_LABELS: tuple[str, ...] = ("card", "precision", "mig_profile")


class Row(NamedTuple):
    """One sample: its name, the GPU's (shared) label dict, extra labels, and the value.

    A NamedTuple built by position: construction is one tuple allocation, where a frozen
    dataclass's __init__ pays an object.__setattr__ per field, and the families not kept as
    ColumnRows build one per series of every new snapshot (docs/daemon.md, "A new snapshot's
    /metrics at 1,024 entities")."""

    sample: str
    labels: Mapping[str, str]
    extra: tuple[tuple[str, str], ...]
    value: float


Extra = tuple[tuple[str, str], ...]
"""Labels a series has beside its GPU's (its regime, cause, link...)."""
NO_EXTRA: Extra = ()


class ColumnRows(Sequence[Row]):
    """A family's rows as columns: one sample name, and per row its GPU's label dict, its extra
    labels and its value. Read as Rows like any family's; the encoder reads the columns, so a
    new snapshot builds no Row for the per-GPU families (docs/daemon.md, "A new snapshot's
    /metrics at 1,024 entities")."""

    __slots__ = ("extras", "labels", "sample", "values")

    def __init__(
        self,
        sample: str,
        labels: Iterable[Mapping[str, str]] = (),
        extras: Iterable[Extra] = (),
        values: Iterable[float] = (),
    ) -> None:
        self.sample = sample
        self.labels: list[Mapping[str, str]] = list(labels)
        self.extras: list[Extra] = list(extras)
        self.values: list[float] = list(values)
        if not len(self.labels) == len(self.extras) == len(self.values):
            raise ValueError("ColumnRows: columns of different lengths")

    def add(self, labels: Mapping[str, str], extra: Extra, value: float) -> None:
        self.labels.append(labels)
        self.extras.append(extra)
        self.values.append(value)

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return list(self)[index]
        return Row(self.sample, self.labels[index], self.extras[index], self.values[index])

    def __iter__(self) -> Iterator[Row]:
        for labels, extra, value in zip(self.labels, self.extras, self.values, strict=True):
            yield Row(self.sample, labels, extra, value)

    def __repr__(self) -> str:
        return f"ColumnRows({self.sample!r}, {len(self)} rows)"


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    documentation: str
    type: str
    rows: Sequence[Row]


@dataclass(frozen=True, slots=True)
class FamilySpec:
    """One metric family as docs/design.md §4 lists it: the name (a counter's without _total)."""

    name: str
    type: Literal["gauge", "counter"]
    help: str
    labels: tuple[str, ...]
    """Every label name its series may carry (GPU_LABELS where they apply)."""

    @property
    def exposed(self) -> str:
        """The name its samples have in /metrics (a counter's with _total)."""
        return self.name + "_total" if self.type == "counter" else self.name

    def family(self, rows: Sequence[Row]) -> Family:
        return Family(name=self.name, documentation=self.help, type=self.type, rows=rows)


Labelled = tuple["GpuState", Mapping[str, str], "Estimate | None"]
"""A GPU with its labels and its Estimate, read once per snapshot (it is derived on read)."""
Reader = Callable[["Snapshot", Sequence[Labelled]], Iterable[Family]]


@dataclass(frozen=True, slots=True)
class Collector:
    """A group of families switched as one (--collector.NAME), and how it reads a snapshot."""

    name: str
    summary: str
    """What it exports, for --help."""
    families: tuple[FamilySpec, ...]
    per_gpu: int
    """Series per whole GPU (or MIG instance) when every one of its readings is present."""
    read: Reader | None
    """None: not read from the snapshot (`process`: prometheus_client's, encoded per scrape)."""
    default: bool = True
    switchable: bool = True
    """False: always on, with no flag (the source health)."""

    @property
    def help(self) -> str:
        """Its --collector.NAME help: what it exports, its series, whether it is on by default."""
        series = f"{self.per_gpu} series per GPU" if self.per_gpu else "per node"
        return f"{self.summary} ({series}; {'on' if self.default else 'off'} by default)"

    @property
    def names(self) -> tuple[str, ...]:
        """The names of its families as /metrics writes their samples (counters with _total)."""
        return tuple(spec.exposed for spec in self.families) if self.families else ("process_*",)

    def collect(self, snapshot: Snapshot, labelled: Sequence[Labelled]) -> list[Family]:
        """Its families for one snapshot; a family it does not declare is a bug, raised here."""
        if self.read is None:
            return []
        found = list(self.read(snapshot, labelled))
        declared = {spec.name for spec in self.families}
        for family in found:
            if family.name not in declared:
                raise ValueError(f"collector {self.name!r} wrote undeclared family {family.name!r}")
        return found


def gpu_labels(gpu: GpuState) -> dict[str, str]:
    """gpu, uuid, model, card; + namespace/pod/container when attributed; + gpu_instance for MIG;
    + hpc_job when an HPC job mapping names one job on the GPU (several: ridgeline_hpc_job_info)."""
    entity = gpu.entity
    labels = {
        "gpu": str(entity.gpu),
        "uuid": entity.uuid,
        "model": entity.model,
        "card": gpu.card or "unknown",
    }
    if entity.gpu_instance is not None:
        labels["gpu_instance"] = str(entity.gpu_instance)
    if gpu.attribution is not None:
        labels["namespace"] = gpu.attribution.namespace
        labels["pod"] = gpu.attribution.pod
        labels["container"] = gpu.attribution.container
    job = single_hpc_job(gpu.hpc_job)
    if job is not None:
        labels["hpc_job"] = job
    return dict(sorted(labels.items()))  # sorted once, as the encoders write them


def labelled_gpus(
    snapshot: Snapshot, labels_of: Callable[[GpuState], Mapping[str, str]] = gpu_labels
) -> list[Labelled]:
    """Every GPU of the snapshot but a MIG parent, whose instances carry the time, the work and
    the verdicts (docs/model.md, "One count per physical GPU"); `labels_of` may hand back the
    label dict of an earlier snapshot (the encoder's cache, exporter/exposition.py)."""
    return [(g, labels_of(g), g.estimate) for g in snapshot.gpus if not g.mig_parent]


_Present = tuple[list[Mapping[str, str]], list["Estimate"]]
"""The GPUs with an Estimate: their label dicts and their Estimates, as two columns."""


def _present(labelled: Sequence[Labelled]) -> _Present:
    """Each column by a C-level map (four collectors read it per snapshot), the GPUs without an
    Estimate left out only where there are any."""
    labels = list(map(_LABELS_OF, labelled))
    estimates = list(map(_ESTIMATE_OF, labelled))
    if None in estimates:
        keep = [estimate is not None for estimate in estimates]
        labels, estimates = list(compress(labels, keep)), list(compress(estimates, keep))
    return labels, cast("list[Estimate]", estimates)


_LABELS_OF: Callable[[Labelled], Mapping[str, str]] = itemgetter(1)
_ESTIMATE_OF: Callable[[Labelled], Estimate | None] = itemgetter(2)


def _gauge(spec: FamilySpec, present: _Present, value_of: Callable[[Estimate], float | None]) -> Family:
    """A per-GPU gauge of one Estimate field: a series per GPU where the field has a value."""
    labels, estimates = present
    found = list(map(value_of, estimates))
    if None in found:
        keep = [value is not None for value in found]
        labels, found = list(compress(labels, keep)), list(compress(found, keep))
    values = cast("list[float]", found)  # its Nones left out
    return spec.family(ColumnRows(spec.name, labels, [NO_EXTRA] * len(values), values))


_NO_LABELS: Mapping[str, str] = {}


def reading_gauge(reading: str, what: str) -> FamilySpec:
    """A smoothed ratio reading's gauge: name and help's head from its readings-table row."""
    row = readings.BY_NAME[reading]
    dcgm = row.dcgm_name.removeprefix("DCGM_FI_PROF_")
    return FamilySpec(
        f"ridgeline_{row.name}_ratio",
        "gauge",
        f"Smoothed DCGM {dcgm} (field {row.field_id}): {what}",
        GPU_LABELS,
    )


# -- activity ------------------------------------------------------------------------------

DRAM_ACTIVE = reading_gauge(
    "dram_active",
    "fraction of cycles the device memory interface is busy, 0-1 (about 0.8 is its practical maximum).",
)
TENSOR_ACTIVE = reading_gauge("tensor_active", "fraction of cycles the tensor pipes are busy, 0-1.")
FLOP_UTILIZATION = FamilySpec(
    "ridgeline_flop_utilization_ratio",
    "gauge",
    "Smoothed activity times SM clock ratio of the busiest compute pipe (tensor or CUDA-core "
    "FP): achieved FLOP/s over the compute roof of the pipes in use, 0-1.",
    GPU_LABELS,
)


def _read_activity(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    present = _present(labelled)
    yield _gauge(DRAM_ACTIVE, present, attrgetter("dram_active"))
    yield _gauge(TENSOR_ACTIVE, present, attrgetter("tensor_active"))
    yield _gauge(FLOP_UTILIZATION, present, attrgetter("flop_utilization"))


# -- roofline ------------------------------------------------------------------------------

INTENSITY = FamilySpec(
    "ridgeline_arithmetic_intensity_flop_per_byte",
    "gauge",
    "Smoothed arithmetic intensity in FLOP per DRAM byte (achieved FLOP/s over achieved "
    "bytes/s); absent while DRAM activity is about 0 or the card is unknown.",
    GPU_LABELS,
)
EFFICIENCY = FamilySpec(
    "ridgeline_roofline_efficiency_ratio",
    "gauge",
    "Achieved over attainable FLOP/s at the current intensity (how close to the roof), 0-1.",
    GPU_LABELS,
)


def _read_roofline(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    present = _present(labelled)
    yield _gauge(INTENSITY, present, attrgetter("intensity_flop_per_byte"))
    yield _gauge(EFFICIENCY, present, attrgetter("roofline_efficiency"))


# -- engine --------------------------------------------------------------------------------

GR_ENGINE_ACTIVE = reading_gauge(
    "gr_engine_active",
    "fraction of time the graphics/compute engine is busy, 0-1; present when the source reports it.",
)
GPU_UTILIZATION = FamilySpec(
    "ridgeline_gpu_utilization_ratio",
    "gauge",
    "Smoothed DCGM GPU_UTIL (field 203) divided by 100: fraction of time a kernel ran, 0-1; "
    "present when the source reports it.",
    GPU_LABELS,
)
GR_ENGINE_CONTRADICTED = FamilySpec(
    "ridgeline_gr_engine_contradicted",
    "gauge",
    "1 while the smoothed GR_ENGINE_ACTIVE reads idle but SM_ACTIVE, a tensor or FP "
    "pipe, or DRAM_ACTIVE near its wall says work runs (the busier evidence wins). Absent "
    "otherwise.",
    GPU_LABELS,
)


def _contradicted(estimate: Estimate) -> float | None:
    return 1.0 if estimate.gr_engine_contradicted else None


def _read_engine(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """The GR engine and GPU_UTIL; the contradiction only where it holds: a 0 series on every
    other GPU was a per-GPU series that one alert read and always found 0 (issue 24.9)."""
    present = _present(labelled)
    yield _gauge(GR_ENGINE_ACTIVE, present, attrgetter("gr_engine_active"))
    yield _gauge(GPU_UTILIZATION, present, attrgetter("gpu_utilization"))
    contradicted = _gauge(GR_ENGINE_CONTRADICTED, present, _contradicted)
    if contradicted.rows:
        yield contradicted


# -- regime --------------------------------------------------------------------------------

REGIME = FamilySpec(
    "ridgeline_regime",
    "gauge",
    "The debounced regime: 1, one series per GPU, its regime label the current one of idle, "
    "memory_bound, compute_bound, latency_bound, unknown, interconnect_bound.",
    (*GPU_LABELS, "regime"),
)
GPU_SHARE = FamilySpec(
    "ridgeline_gpu_share_ratio",
    "gauge",
    "The part of its physical GPU a MIG instance is, 0-1: its compute slices over "
    "those of its GPU's instances (equal parts when a profile is unknown); only on MIG "
    "instances with a regime (a whole GPU is 1).",
    GPU_LABELS,
)


_REGIME_EXTRA: dict[str, Extra] = {name: (("regime", name),) for name in REGIMES}
"""Each regime's extra label, built once: a series' cached text is found by it."""


def _regime_extra(regime: str) -> Extra:
    return _REGIME_EXTRA.get(regime) or (("regime", regime),)


def _read_regime(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """The current regime, one series per GPU: a state set wrote five zeros beside it, and every
    rule and panel selects `== 1` (docs/rules-and-dashboards.md, "Series budget"). The share of
    MIG instances only, so that a node without MIG gets no empty HELP/TYPE header for it (a whole
    GPU is 1: the rules weight GPU counts by it)."""
    regime_rows, share_rows = ColumnRows(REGIME.name), ColumnRows(GPU_SHARE.name)
    for gpu, labels, estimate in labelled:
        if estimate is not None:
            regime = estimate.regime
            regime_rows.add(labels, _regime_extra(regime), 1.0)
            if gpu.entity.gpu_instance is not None:
                share_rows.add(labels, NO_EXTRA, gpu.gpu_share)
    yield REGIME.family(regime_rows)
    if share_rows:
        yield GPU_SHARE.family(share_rows)


# -- totals --------------------------------------------------------------------------------

REGIME_SECONDS = FamilySpec(
    "ridgeline_regime_seconds",
    "counter",
    "Seconds spent in each raw per-sample regime (integrated over sample intervals; "
    "fractions of rate() are exact); unknown and interconnect_bound only once the GPU has "
    "spent time in them.",
    (*GPU_LABELS, "regime"),
)
FLOP = FamilySpec(
    "ridgeline_flop",
    "counter",
    "Estimated FLOPs executed (each compute pipe's activity x clock ratio x its "
    "peak x interval, summed); rate() is FLOP/s. Born at 0 with the first reading that has a "
    "compute pipe; a MIG parent whose instances report has none.",
    GPU_LABELS,
)
DRAM_BYTES = FamilySpec(
    "ridgeline_dram_bytes",
    "counter",
    "Estimated DRAM bytes moved (DRAM activity x bandwidth x interval); "
    "rate() is bytes/s. Born at 0 with the first reading that has DRAM_ACTIVE.",
    GPU_LABELS,
)


RARE_REGIMES: tuple[str, ...] = ("unknown", "interconnect_bound")
"""Regimes whose seconds counter is written only once the GPU has spent time in them: most GPUs
never do, and a 0 series per GPU for each was two of every GPU's series (issue 24.9)."""
_COMMON_REGIMES: tuple[str, ...] = tuple(name for name in REGIMES if name not in RARE_REGIMES)


def _read_totals(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """The counters, each column in one comprehension or C-level map (a loop of `add` calls took
    2.4 ms at 1,024 entities, the most of any collector). A rare regime's counter is born with
    the first interval a GPU spends in it, which Prometheus' increase() extrapolates back to its
    zero (docs/model.md, "Counters from the first reading"); those few follow the common ones."""
    totals = [(labels, gpu.inference.totals) for gpu, labels, _ in labelled]
    counted = [(labels, t.regime_seconds) for labels, t in totals if t.regime_seconds is not None]
    by_gpu = [seconds for _, seconds in counted]
    each = [labels for labels, _ in counted]
    seconds_rows = ColumnRows(  # a series per common regime, in REGIMES' order
        REGIME_SECONDS.exposed,
        chain.from_iterable(zip(*[each] * len(_COMMON_REGIMES), strict=True)),  # each one's, repeated
        _COMMON_EXTRAS * len(counted),
        chain.from_iterable(map(_COMMON_VALUES, by_gpu)),
    )
    for (labels, seconds), rare in zip(counted, map(_RARE_VALUES, by_gpu), strict=True):
        if rare != _RARE_ZEROS:  # most GPUs: neither regime ever
            for name in RARE_REGIMES:
                if seconds[name] > 0.0:
                    seconds_rows.add(labels, _REGIME_EXTRA[name], seconds[name])
    yield REGIME_SECONDS.family(seconds_rows)
    flops = [(labels, t.flop_total) for labels, t in totals if t.flop_total is not None]
    yield FLOP.family(_column(FLOP.exposed, flops))
    dram = [(labels, t.dram_bytes_total) for labels, t in totals if t.dram_bytes_total is not None]
    yield DRAM_BYTES.family(_column(DRAM_BYTES.exposed, dram))


_COMMON_EXTRAS: list[Extra] = [_REGIME_EXTRA[name] for name in _COMMON_REGIMES]
_COMMON_VALUES = itemgetter(*_COMMON_REGIMES)
"""A GPU's common regimes' seconds in REGIMES' order, as one tuple."""
_RARE_VALUES = itemgetter(*RARE_REGIMES)
_RARE_ZEROS = (0.0,) * len(RARE_REGIMES)


def _column(sample: str, rows: list[tuple[Mapping[str, str], float]]) -> ColumnRows:
    """A family of one series per GPU without extra labels, from (label dict, value) pairs."""
    return ColumnRows(sample, [labels for labels, _ in rows], [NO_EXTRA] * len(rows), [v for _, v in rows])


# -- card ----------------------------------------------------------------------------------

GPU_INFO = FamilySpec(
    "ridgeline_gpu_info",
    "gauge",
    "1 per GPU (or MIG instance) with a reading: its labels, and its roof's "
    "precision and MIG profile (absent without a roof); join the card constants on (card, "
    "precision, mig_profile).",
    (*GPU_LABELS, "precision", "mig_profile"),
)
PEAK_FLOP = FamilySpec(
    "ridgeline_card_peak_flop_per_second",
    "gauge",
    "A card's (or MIG profile's) dense peak at a precision in use on this node, "
    "FLOP per second (boost clock); one series per roof, not per GPU.",
    ROOF_LABELS,
)
PEAK_BANDWIDTH = FamilySpec(
    "ridgeline_card_peak_bandwidth_bytes_per_second",
    "gauge",
    "A card's (or MIG profile's) peak memory bandwidth, bytes per second; one "
    "series per card (and profile) on this node.",
    ("card", "mig_profile"),
)
RIDGE = FamilySpec(
    "ridgeline_card_ridge_flop_per_byte",
    "gauge",
    "A card's (or MIG profile's) ridge point at a precision in use on this node: "
    "peak FLOP/s over bandwidth, FLOP per byte.",
    ROOF_LABELS,
)
HPC_JOB_INFO = FamilySpec(
    "ridgeline_hpc_job_info",
    "gauge",
    "1 per HPC (Slurm) job on a GPU or MIG instance, from the job-mapping directory "
    "or the scraped page; a GPU with several jobs has one series per job, and its readings carry "
    "no hpc_job (join on uuid and gpu_instance).",
    GPU_LABELS,
)

_RoofKey = tuple[str, str, "str | None"]


def _read_card(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """ridgeline_gpu_info per GPU, each roof's constants once per node, the HPC jobs.

    A roof is a card at a precision, or a MIG instance profile of a card at a precision (its slice
    of the card's peak and bandwidth). A node of 8 identical GPUs writes one peak, one bandwidth and
    one ridge series instead of 8 of each; PromQL joins them to the GPUs through
    ridgeline_gpu_info's card, precision and mig_profile labels (rules/ridgeline-recording.rules.yml
    sums the peaks that way). A MIG parent whose instances report, an unknown card and an instance
    of an unknown profile have no roof: their ridgeline_gpu_info has no precision, so no peak joins.
    """
    info_rows, roofs = _gpu_info_rows(labelled)
    yield GPU_INFO.family(info_rows)
    yield from _roof_families(roofs)
    yield _hpc_job_family(labelled)


def _gpu_info_rows(labelled: Sequence[Labelled]) -> tuple[ColumnRows, dict[_RoofKey, Roof]]:
    info_rows = ColumnRows(GPU_INFO.name)
    roofs: dict[_RoofKey, Roof] = {}
    for gpu, labels, estimate in labelled:
        if estimate is None:
            continue
        extra: tuple[tuple[str, str], ...] = ()
        roof = estimate.roof
        if roof is not None and estimate.precision is not None:
            profile = gpu.entity.profile if gpu.entity.gpu_instance is not None else None
            extra = (("precision", estimate.precision),)
            if profile is not None:
                extra = (("mig_profile", profile), *extra)
            roofs.setdefault((estimate.card, estimate.precision, profile), roof)
        info_rows.add(labels, extra, 1.0)
    return info_rows, roofs


def _roof_families(roofs: dict[_RoofKey, Roof]) -> Iterator[Family]:
    peak_rows, ridge_rows = [], []
    bandwidths: dict[tuple[str, str | None], float] = {}
    for (card, precision, profile), roof in sorted(
        roofs.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")
    ):
        key = {"card": card, "precision": precision} | ({"mig_profile": profile} if profile else {})
        peak_rows.append(Row(PEAK_FLOP.name, dict(sorted(key.items())), (), roof.peak_flop_per_second))
        ridge_rows.append(Row(RIDGE.name, dict(sorted(key.items())), (), roof.ridge_flop_per_byte))
        bandwidths.setdefault((card, profile), roof.bandwidth_bytes_per_second)
    bandwidth_rows = [
        Row(PEAK_BANDWIDTH.name, {"card": card} | ({"mig_profile": profile} if profile else {}), (), value)
        for (card, profile), value in sorted(bandwidths.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))
    ]
    yield PEAK_FLOP.family(peak_rows)
    yield PEAK_BANDWIDTH.family(bandwidth_rows)
    yield RIDGE.family(ridge_rows)


def _hpc_job_family(labelled: Sequence[Labelled]) -> Family:
    """One series per HPC job on each GPU (or MIG instance), as dcgm-exporter repeats its series
    per job, so a GPU several jobs share is found by each job id while its readings stay one
    series each (see gpu_labels)."""
    rows = []
    for gpu, labels, _ in labelled:
        if gpu.hpc_job is None:
            continue
        own = {name: value for name, value in labels.items() if name != "hpc_job"}
        for job in gpu.hpc_job.split(HPC_JOB_SEPARATOR):
            rows.append(Row(HPC_JOB_INFO.name, labels=own, extra=(("hpc_job", job),), value=1.0))
    return HPC_JOB_INFO.family(rows)


# -- missing -------------------------------------------------------------------------------

FIELDS_MISSING = FamilySpec(
    "ridgeline_profiling_fields_missing",
    "gauge",
    "1 while the GPU's latest sample lacks a DCGM profiling field (1001-1008: absent or blank) or a "
    "link byte field (1009-1012) of a link its card has a bandwidth for; the fields label lists "
    "their DCGM names, comma-separated. Absent while none is missing.",
    (*GPU_LABELS, "fields"),
)
FIELD_SEPARATOR = ","
PROFILING_FROZEN = FamilySpec(
    "ridgeline_profiling_frozen",
    "gauge",
    "1 while the GPU's DRAM and tensor activity have read exactly 0 for 30 s or more of samples "
    "in which GR_ENGINE_ACTIVE or GPU_UTIL reads above 0.1: the profiling counters are not being "
    "collected (a profiler holds them, or DCGM profiling is paused). Absent otherwise.",
    GPU_LABELS,
)


def _read_missing(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """One series per GPU that lacks a field, naming them all: every GPU the source sees stays in
    /metrics and says what it lacks (docs/runbooks.md, RidgelineProfilingCountersMissing), at one
    series however many fields its source leaves off (dcgm-exporter's default counters: seven).
    And 1 per GPU whose counters are frozen, decided from its own samples: four rule groups read
    four per-GPU families each evaluation to find these, normally none (issue 24.9)."""
    rows, frozen = ColumnRows(FIELDS_MISSING.name), ColumnRows(PROFILING_FROZEN.name)
    extras: dict[tuple[str, ...], Extra] = {}  # the GPUs of a node mostly lack the same fields
    for gpu, labels, _ in labelled:
        inference = gpu.inference
        missing, links = inference.missing_fields, inference.missing_link_fields
        if links:
            missing = (*missing, *links)
        if missing:
            extra = extras.get(missing)
            if extra is None:
                extra = extras[missing] = (("fields", FIELD_SEPARATOR.join(missing)),)
            rows.add(labels, extra, 1.0)
        if inference.frozen_since is not None and inference.profiling_frozen:
            frozen.add(labels, NO_EXTRA, 1.0)
    yield FIELDS_MISSING.family(rows)
    if frozen:
        yield PROFILING_FROZEN.family(frozen)


# -- clocks --------------------------------------------------------------------------------

CLOCK_RATIO = FamilySpec(
    "ridgeline_clock_ratio",
    "gauge",
    "Smoothed SM clock over the clock the tensor peak in use is quoted at (the card's clock "
    "basis), at most 1; absent when the source reports no SM clock or the card has no basis.",
    GPU_LABELS,
)
CLOCK_EVENT = FamilySpec(
    "ridgeline_clock_event_active",
    "gauge",
    "1 for each cause holding the GPU's clock down in its latest sample: power_cap, "
    "thermal, hw_slowdown, sync_boost, application_clocks (DCGM field 112's clocks-event reasons; "
    "power_cap also from fields 155/160, draw at its limit).",
    (*GPU_LABELS, "cause"),
)
CLOCK_LOST = FamilySpec(
    "ridgeline_clock_lost_seconds",
    "counter",
    "GPU-seconds a reduced clock cost: (1 - clock ratio) x interval while the raw "
    "regime is compute-bound with the binding pipe below 97% of its peak's clock, split by cause "
    "(power_cap, thermal, hw_slowdown, sync_boost, application_clocks, unreported). Born at 0 for "
    "every cause the first time the GPU is so.",
    (*GPU_LABELS, "cause"),
)


def _read_clocks(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """The clock ratio; 1 per cause holding a clock down by the latest sample
    (clock_events.causes_of); the GPU-seconds a reduced clock cost each compute-bound GPU by
    cause, what `ridgeline report` sums (docs/report.md, "The levers")."""
    yield _gauge(CLOCK_RATIO, _present(labelled), attrgetter("clock_ratio"))
    yield CLOCK_EVENT.family(
        [
            Row(CLOCK_EVENT.name, labels, (("cause", _cause_label(cause)),), 1.0)
            for _, labels, estimate in labelled
            if estimate is not None
            for cause in estimate.clock_causes
        ]
    )
    yield WORKLOAD_CLOCK_EVENTS.family(_workload_clock_rows(labelled))
    yield CLOCK_LOST.family(
        [
            Row(CLOCK_LOST.exposed, labels, (("cause", cause),), value)
            for gpu, labels, _ in labelled
            if gpu.totals.clock_lost_seconds is not None
            for cause, value in gpu.totals.clock_lost_seconds.items()
        ]
    )


def _cause_label(cause: str) -> str:
    return cause.lower().replace(" ", "_")


WORKLOAD_CLOCK_EVENTS = FamilySpec(
    "ridgeline_workload_clock_events",
    "gauge",
    "GPUs of the workload (card, pod, HPC job) on this node whose clock `cause` holds down in "
    "their latest sample: ridgeline_clock_event_active summed, what the clock-event rules read.",
    ("card", "namespace", "pod", "hpc_job", "cause"),
)


def _workload_clock_rows(labelled: Sequence[Labelled]) -> list[Row]:
    counts: dict[tuple[WorkloadKey, str], int] = {}
    for gpu, _, estimate in labelled:
        if estimate is not None:
            for cause in estimate.clock_causes:
                at = (gpu.workload, _cause_label(cause))
                counts[at] = counts.get(at, 0) + 1
    return [
        Row(WORKLOAD_CLOCK_EVENTS.name, workload_labels(key), (("cause", cause),), float(count))
        for (key, cause), count in sorted(counts.items(), key=lambda kv: (kv[0][0].order, kv[0][1]))
    ]


# -- workload ------------------------------------------------------------------------------

WORKLOAD_LABELS: tuple[str, ...] = ("card", "namespace", "pod", "hpc_job")
"""A workload's labels (workload_labels): card always, the others where they apply."""

WORKLOAD_REGIME_SECONDS = FamilySpec(
    "ridgeline_workload_regime_seconds",
    "counter",
    "GPU-seconds the workload's GPUs (a card's GPUs one pod or HPC job holds on this node, or "
    "nobody) spent in each raw regime while they were its own: ridgeline_regime_seconds_total "
    "summed without the GPU moving its past; unknown and interconnect_bound once not 0. Kept "
    "10 minutes after its last GPU leaves.",
    (*WORKLOAD_LABELS, "regime"),
)
WORKLOAD_FLOP = FamilySpec(
    "ridgeline_workload_flop",
    "counter",
    "Estimated FLOPs the workload's GPUs executed while they were its own "
    "(ridgeline_flop_total summed the same way); born with its first GPU that has one.",
    WORKLOAD_LABELS,
)
WORKLOAD_DRAM_BYTES = FamilySpec(
    "ridgeline_workload_dram_bytes",
    "counter",
    "Estimated DRAM bytes the workload's GPUs moved while they were its own "
    "(ridgeline_dram_bytes_total summed the same way).",
    WORKLOAD_LABELS,
)
WORKLOAD_GPUS = FamilySpec(
    "ridgeline_workload_gpus",
    "gauge",
    "The workload's GPUs whose debounced regime is `regime`: a whole GPU 1, a MIG instance its "
    "share of the GPU (its compute slices over those of the GPU's instances), so a partitioned card "
    "counts once.",
    (*WORKLOAD_LABELS, "regime"),
)
WORKLOAD_PEAK_FLOP = FamilySpec(
    "ridgeline_workload_peak_flop_per_second",
    "gauge",
    "The summed dense peak of the workload's GPUs at the precision each is on, FLOP per second "
    "(a MIG instance its slice); absent while none has a roof.",
    WORKLOAD_LABELS,
)
WORKLOAD_PEAK_BANDWIDTH = FamilySpec(
    "ridgeline_workload_peak_bandwidth_bytes_per_second",
    "gauge",
    "The summed peak memory bandwidth of the workload's GPUs that have a roof, bytes per second.",
    WORKLOAD_LABELS,
)


WORKLOAD_FAMILIES = (
    WORKLOAD_REGIME_SECONDS, WORKLOAD_FLOP, WORKLOAD_DRAM_BYTES, WORKLOAD_GPUS, WORKLOAD_PEAK_FLOP,
    WORKLOAD_PEAK_BANDWIDTH,
)  # fmt: skip


def workload_labels(key: WorkloadKey) -> dict[str, str]:
    """card; + namespace and pod when a pod holds the GPUs; + hpc_job when one job does."""
    labels = {"card": key.card}
    if key.namespace is not None:
        labels["namespace"] = key.namespace
    if key.pod is not None:
        labels["pod"] = key.pod
    if key.hpc_job is not None:
        labels["hpc_job"] = key.hpc_job
    return dict(sorted(labels.items()))


def _read_workloads(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """The counters the ledger carries across snapshots (Snapshot.workloads), and the current
    GPU counts and peaks summed from this snapshot's GPUs."""
    seconds_rows, flop_rows, dram_rows = [], [], []
    for record in snapshot.workloads:
        labels = workload_labels(record.key)
        for regime, value in record.regime_seconds.items():
            if regime in _COMMON_REGIMES or value > 0.0:
                extra = _REGIME_EXTRA[regime]
                seconds_rows.append(Row(WORKLOAD_REGIME_SECONDS.exposed, labels, extra, value))
        if record.flop_total is not None:
            flop_rows.append(Row(WORKLOAD_FLOP.exposed, labels, NO_EXTRA, record.flop_total))
        if record.dram_bytes_total is not None:
            dram_rows.append(Row(WORKLOAD_DRAM_BYTES.exposed, labels, NO_EXTRA, record.dram_bytes_total))
    yield WORKLOAD_REGIME_SECONDS.family(seconds_rows)
    yield WORKLOAD_FLOP.family(flop_rows)
    yield WORKLOAD_DRAM_BYTES.family(dram_rows)
    yield from _workload_now(labelled)


def _workload_now(labelled: Sequence[Labelled]) -> Iterator[Family]:
    gpus: dict[tuple[WorkloadKey, str], float] = {}
    peaks: dict[WorkloadKey, list[float]] = {}
    for gpu, _, estimate in labelled:
        if estimate is None:
            continue
        key = gpu.workload
        at = (key, estimate.regime)
        gpus[at] = gpus.get(at, 0.0) + gpu.gpu_share
        roof = estimate.roof
        if roof is not None and estimate.precision is not None:
            summed = peaks.setdefault(key, [0.0, 0.0])
            summed[0] += roof.peak_flop_per_second
            summed[1] += roof.bandwidth_bytes_per_second
    yield WORKLOAD_GPUS.family(
        [
            Row(WORKLOAD_GPUS.name, workload_labels(key), _regime_extra(regime), count)
            for (key, regime), count in sorted(gpus.items(), key=lambda kv: (kv[0][0].order, kv[0][1]))
        ]
    )
    ordered = sorted(peaks.items(), key=lambda kv: kv[0].order)
    yield WORKLOAD_PEAK_FLOP.family(
        [Row(WORKLOAD_PEAK_FLOP.name, workload_labels(key), NO_EXTRA, flop) for key, (flop, _) in ordered]
    )
    yield WORKLOAD_PEAK_BANDWIDTH.family(
        [Row(WORKLOAD_PEAK_BANDWIDTH.name, workload_labels(key), NO_EXTRA, bw) for key, (_, bw) in ordered]
    )


# -- links ---------------------------------------------------------------------------------

LINK_BYTES = FamilySpec(
    "ridgeline_link_bytes_per_second",
    "gauge",
    "Smoothed DCGM PCIe and NVLink bytes/s (fields 1009-1012) per link (pcie, "
    "nvlink) and direction (tx, rx); present where the source reports them.",
    (*GPU_LABELS, "link", "direction"),
)
LINK_UTILIZATION = FamilySpec(
    "ridgeline_link_utilization_ratio",
    "gauge",
    "Smoothed busier direction of a link over the card's per-direction "
    "bandwidth (cards.yaml links), 0-1 (about 0.8 is its practical maximum); absent without "
    "the link's counters, its figure, or on a MIG instance.",
    (*GPU_LABELS, "link"),
)


def _read_links(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """Each GPU's smoothed link bytes/s per link and direction (DCGM 1009-1012), and each link's
    load: the busier direction over the card's per-direction bandwidth (docs/model.md, "The
    interconnect wall")."""
    yield LINK_BYTES.family(
        [
            Row(LINK_BYTES.name, labels, (("link", link), ("direction", direction)), value)
            for _, labels, estimate in labelled
            if estimate is not None
            for link, direction, value in estimate.link_bytes_per_second
        ]
    )
    yield LINK_UTILIZATION.family(
        [
            Row(LINK_UTILIZATION.name, labels, (("link", link),), value)
            for _, labels, estimate in labelled
            if estimate is not None
            for link, value in estimate.link_utilization
        ]
    )


# -- source health (always on) -------------------------------------------------------------

SOURCE_UP = FamilySpec(
    "ridgeline_source_up",
    "gauge",
    "1 while the GPU source answers, 0 while it is down or finished.",
    ("source",),
)
LAST_SAMPLE = FamilySpec(
    "ridgeline_last_sample_timestamp_seconds",
    "gauge",
    "When the newest sample arrived, seconds since the epoch (a replay: when it was played).",
    (),
)
LAST_ADVANCE = FamilySpec(
    "ridgeline_last_data_advance_timestamp_seconds",
    "gauge",
    "When a GPU's own sample timestamp last moved forward, seconds since the "
    "epoch (wall clock): behind ridgeline_last_sample_timestamp_seconds while the source "
    "answers with data that stands still.",
    (),
)
SAMPLES = FamilySpec(
    "ridgeline_samples", "counter", "Successful source reads (one batch of every GPU each).", ()
)
SAMPLE_ERRORS = FamilySpec(
    "ridgeline_sample_errors",
    "counter",
    "Failed source reads and skipped replay lines, by reason.",
    ("reason",),
)
BUILD_INFO = FamilySpec(
    "ridgeline_build_info",
    "gauge",
    "Ridgeline version and the source it reads; always 1.",
    ("version", "source"),
)


def _read_health(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    """Wall-clock arrival, not the sample's own time: a replay's samples carry the trace's
    recording time, and staleness alerts compare these gauges with time()."""
    health = snapshot.source
    yield SOURCE_UP.family([Row(SOURCE_UP.name, {"source": health.name}, (), 1.0 if health.up else 0.0)])
    newest, moved = health.last_sample_wall_time, health.data_advanced_wall_time
    yield LAST_SAMPLE.family([] if newest is None else [Row(LAST_SAMPLE.name, _NO_LABELS, (), newest)])
    yield LAST_ADVANCE.family([] if moved is None else [Row(LAST_ADVANCE.name, _NO_LABELS, (), moved)])
    yield SAMPLES.family([Row(SAMPLES.exposed, _NO_LABELS, (), float(health.samples_total))])
    yield SAMPLE_ERRORS.family(
        [
            Row(SAMPLE_ERRORS.exposed, {"reason": reason}, (), float(count))
            for reason, count in sorted(health.errors_total.items())
        ]
    )
    info = {"version": snapshot.version, "source": health.name}
    yield BUILD_INFO.family([Row(BUILD_INFO.name, info, (), 1.0)])


# -- the collectors' own health (written by the encoder, exporter/exposition.py) -----------

SCRAPE_SUCCESS = FamilySpec(
    "ridgeline_scrape_collector_success",
    "gauge",
    "1 if the collector read this snapshot without an error, 0 if it failed (its families are "
    "left out; the log says why).",
    ("collector",),
)
SCRAPE_DURATION = FamilySpec(
    "ridgeline_scrape_collector_duration_seconds",
    "gauge",
    "Seconds the collector took to read this snapshot (once per snapshot: a scrape of an "
    "unchanged snapshot is served from the encoded page).",
    ("collector",),
)


COLLECTORS: tuple[Collector, ...] = (
    Collector(
        "activity",
        "the smoothed readings behind the regime (DRAM, tensor, flop utilization)",
        (DRAM_ACTIVE, TENSOR_ACTIVE, FLOP_UTILIZATION),
        3,
        _read_activity,
    ),
    Collector(
        "roofline",
        "each GPU's arithmetic intensity and roofline efficiency",
        (INTENSITY, EFFICIENCY),
        2,
        _read_roofline,
    ),
    Collector(
        "engine",
        "GR_ENGINE_ACTIVE and GPU_UTIL where the source reports them, and whether GR_ENGINE_ACTIVE is "
        "contradicted by busier counters",
        (GR_ENGINE_ACTIVE, GPU_UTILIZATION, GR_ENGINE_CONTRADICTED),
        2,
        _read_engine,
    ),
    Collector(
        "regime",
        "the debounced regime (one series, labelled with it), and the part of its physical GPU each "
        "MIG instance is",
        (REGIME, GPU_SHARE),
        1,
        _read_regime,
    ),
    Collector(
        "totals",
        "the counters every recording rule is built on (time in each regime, FLOPs, DRAM bytes)",
        (REGIME_SECONDS, FLOP, DRAM_BYTES),
        len(_COMMON_REGIMES) + 2,
        _read_totals,
    ),
    Collector(
        "card",
        "one ridgeline_gpu_info per GPU naming its card and precision, the card constants once "
        "per card and precision on the node, and one ridgeline_hpc_job_info per HPC job on a GPU",
        (GPU_INFO, PEAK_FLOP, PEAK_BANDWIDTH, RIDGE, HPC_JOB_INFO),
        1,
        _read_card,
    ),
    Collector(
        "missing",
        "one series per GPU that lacks a DCGM profiling field (1001-1008, and the link fields "
        "1009-1012 of each link its card has a figure for), naming them all, and one per GPU whose "
        "profiling counters are frozen; none where the source reports every one and none is",
        (FIELDS_MISSING, PROFILING_FROZEN),
        0,
        _read_missing,
    ),
    Collector(
        "clocks",
        "the SM clock against the clock the peak is quoted at, the cause holding it down (power "
        "cap, thermal, HW slowdown, sync boost, application clocks) while one does, and the "
        "GPU-seconds a reduced clock cost (six series, only on GPUs it ever did)",
        (CLOCK_RATIO, CLOCK_EVENT, CLOCK_LOST, WORKLOAD_CLOCK_EVENTS),
        12,
        _read_clocks,
    ),
    Collector(
        "workload",
        "per workload on the node (a card's GPUs one pod or HPC job holds, or nobody): the time in "
        "each regime, FLOPs and DRAM bytes carried across GPUs that change pods, the GPUs in each "
        "regime and their summed peaks: what the recording rules read instead of every GPU's",
        WORKLOAD_FAMILIES,
        0,
        _read_workloads,
    ),
    Collector(
        "links",
        "each GPU's PCIe and NVLink bytes/s per direction (DCGM 1009-1012) and each link's load "
        "against the card's per-direction bandwidth: the interconnect wall",
        (LINK_BYTES, LINK_UTILIZATION),
        6,
        _read_links,
        default=False,
    ),
    Collector("process", "the exporter process' CPU, memory and file descriptors", (), 0, None),
)
"""The switchable collectors, in the order --help lists their flags."""

SOURCE_HEALTH = Collector(
    "source",
    "the source-health families the health alerts read",
    (SOURCE_UP, LAST_SAMPLE, LAST_ADVANCE, SAMPLES, SAMPLE_ERRORS, BUILD_INFO),
    0,
    _read_health,
    switchable=False,
)
"""Always on (no flag): ridgeline_source_up, the arrival and advance times, the read counters."""

BY_NAME = {c.name: c for c in COLLECTORS}
DEFAULT_COLLECTORS: frozenset[str] = frozenset(c.name for c in COLLECTORS if c.default)

WRITE_ORDER: tuple[FamilySpec, ...] = (
    DRAM_ACTIVE, TENSOR_ACTIVE, FLOP_UTILIZATION, INTENSITY, EFFICIENCY, GR_ENGINE_ACTIVE,
    GPU_UTILIZATION, CLOCK_RATIO, GPU_INFO, PEAK_FLOP, PEAK_BANDWIDTH, RIDGE, HPC_JOB_INFO, REGIME,
    GPU_SHARE, REGIME_SECONDS, FLOP, DRAM_BYTES, GR_ENGINE_CONTRADICTED, FIELDS_MISSING,
    PROFILING_FROZEN, CLOCK_EVENT, CLOCK_LOST, WORKLOAD_REGIME_SECONDS, WORKLOAD_FLOP,
    WORKLOAD_DRAM_BYTES, WORKLOAD_GPUS, WORKLOAD_PEAK_FLOP, WORKLOAD_PEAK_BANDWIDTH,
    WORKLOAD_CLOCK_EVENTS, LINK_BYTES, LINK_UTILIZATION, SOURCE_UP, LAST_SAMPLE,
    LAST_ADVANCE, SAMPLES, SAMPLE_ERRORS, BUILD_INFO, SCRAPE_SUCCESS, SCRAPE_DURATION,
)  # fmt: skip
"""The order /metrics writes the families in: the order of every release so far (the per-GPU
gauges first), so that a collector's families need not be adjacent and outputs stay as they were."""


def collectors_from_flags(
    choices: dict[str, bool | None], *, disable_defaults: bool = False
) -> frozenset[str]:
    """The enabled set: the defaults (or none), then each explicit --collector.X / --no-collector.X."""
    enabled = set() if disable_defaults else set(DEFAULT_COLLECTORS)
    for name, on in choices.items():
        if name not in BY_NAME:
            raise ValueError(f"unknown collector {name!r}; known: {', '.join(BY_NAME)}")
        if on is True:
            enabled.add(name)
        elif on is False:
            enabled.discard(name)
    return frozenset(enabled)
