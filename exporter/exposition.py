"""Prometheus exposition: a custom collector over the current snapshot, encoded once per snapshot.

Every scrape builds fresh metric families from the snapshot it is handed (client_python's
custom-collector pattern), so a GPU that disappeared is simply not yielded again — no stale
series, no module-level Gauge objects. Because a snapshot is immutable, its encoding is too: the
bytes are cached per (snapshot, content type), and a scrape between two batches costs
a dictionary lookup. Process metrics (CPU, RSS, fds) are encoded fresh and appended.

Labels: per-GPU series carry gpu, uuid, model, card; namespace/pod/container only when the GPU is
attributed to a pod, gpu_instance only for MIG instances, hpc_job only while a Slurm (HPC) job
mapping names exactly one job on the GPU (exporter/attribution/hpc.py). A GPU several jobs share
is counted once, without hpc_job, and ridgeline_hpc_job_info has one series per job on it: every
sum over per-GPU series counts each GPU once (docs/deployment.md, "Slurm and other HPC
schedulers"). Series of one family may therefore have different label names, which both the
text format and OpenMetrics allow; nothing is padded with empty values.

    # HELP ridgeline_dram_active_ratio Smoothed DCGM DRAM_ACTIVE: fraction of cycles ...
    # TYPE ridgeline_dram_active_ratio gauge
    ridgeline_dram_active_ratio{card="h100-sxm",gpu="0",model="NVIDIA H100 80GB HBM3",uuid="GPU-..."} 0.71
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from exporter.collectors import DEFAULT_COLLECTORS
from exporter.inference import Estimate
from exporter.roofline import REGIMES, Roof
from exporter.state import GpuState, Snapshot

OPENMETRICS_EOF = b"# EOF\n"
HPC_JOB_SEPARATOR = ","
"""How GpuState.hpc_job lists several jobs (exporter/sample.py, join_hpc_jobs)."""

_go_float: Callable[[float], str] = floatToGoString
"""prometheus_client's number formatter (untyped upstream), so both encoders agree."""

_GAUGES: tuple[tuple[str, str, str, Callable[[Estimate], float | None]], ...] = (
    # (collector, name, help, value): per-GPU gauges (exporter/collectors.py)
    (
        "activity",
        "ridgeline_dram_active_ratio",
        "Smoothed DCGM DRAM_ACTIVE (field 1005): fraction of cycles the device memory interface "
        "is busy, 0-1 (about 0.8 is its practical maximum).",
        lambda e: e.dram_active,
    ),
    (
        "activity",
        "ridgeline_tensor_active_ratio",
        "Smoothed DCGM PIPE_TENSOR_ACTIVE (field 1004): fraction of cycles the tensor pipes are busy, 0-1.",
        lambda e: e.tensor_active,
    ),
    (
        "activity",
        "ridgeline_flop_utilization_ratio",
        "Smoothed activity times SM clock ratio of the busiest compute pipe (tensor or CUDA-core "
        "FP): achieved FLOP/s over the compute roof of the pipes in use, 0-1.",
        lambda e: e.flop_utilization,
    ),
    (
        "roofline",
        "ridgeline_arithmetic_intensity_flop_per_byte",
        "Smoothed arithmetic intensity in FLOP per DRAM byte (achieved FLOP/s over achieved "
        "bytes/s); absent while DRAM activity is about 0 or the card is unknown.",
        lambda e: e.intensity_flop_per_byte,
    ),
    (
        "roofline",
        "ridgeline_roofline_efficiency_ratio",
        "Achieved over attainable FLOP/s at the current intensity (how close to the roof), 0-1.",
        lambda e: e.roofline_efficiency,
    ),
    (
        "engine",
        "ridgeline_gr_engine_active_ratio",
        "Smoothed DCGM GR_ENGINE_ACTIVE (field 1001): fraction of time the graphics/compute "
        "engine is busy, 0-1; present when the source reports it.",
        lambda e: e.gr_engine_active,
    ),
    (
        "engine",
        "ridgeline_gpu_utilization_ratio",
        "Smoothed DCGM GPU_UTIL (field 203) divided by 100: fraction of time a kernel ran, 0-1; "
        "present when the source reports it.",
        lambda e: e.gpu_utilization,
    ),
    (
        "clocks",
        "ridgeline_clock_ratio",
        "Smoothed SM clock over the clock the tensor peak in use is quoted at (the card's clock "
        "basis), at most 1; absent when the source reports no SM clock or the card has no basis.",
        lambda e: e.clock_ratio,
    ),
)


_Labelled = list[tuple[GpuState, dict[str, str], Estimate | None]]
"""Each GPU with its labels and its Estimate, read once per snapshot (it is derived on read)."""


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
    if gpu.hpc_job is not None and HPC_JOB_SEPARATOR not in gpu.hpc_job:
        labels["hpc_job"] = gpu.hpc_job
    return dict(sorted(labels.items()))  # sorted once, as the encoders write them


class SnapshotCollector(Collector):
    """Yields fresh families for the snapshot `provider` returns at each collect()."""

    def __init__(
        self, provider: Callable[[], Snapshot], collectors: Collection[str] = DEFAULT_COLLECTORS
    ) -> None:
        self._provider = provider
        self._collectors = collectors

    def collect(self) -> Iterable[Metric]:
        return families(self._provider(), self._collectors)


@dataclass(frozen=True, slots=True)
class Row:
    """One sample: its name, the GPU's (shared) label dict, extra labels, and the value."""

    sample: str
    labels: Mapping[str, str]
    extra: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    documentation: str
    type: str
    rows: list[Row]


_NO_LABELS: Mapping[str, str] = {}


def build_families(snapshot: Snapshot, collectors: Collection[str] = DEFAULT_COLLECTORS) -> list[Family]:
    """The Ridgeline metric families of the enabled collectors for one snapshot (docs/design.md,
    "Prometheus metrics"); the source-health families always. A MIG parent is in no per-GPU
    family: its instances carry the time, the work and the verdicts (docs/model.md, "One count
    per physical GPU")."""
    labelled: _Labelled = [(g, gpu_labels(g), g.estimate) for g in snapshot.gpus if not g.mig_parent]
    out: list[Family] = []

    for collector, name, documentation, value_of in _GAUGES:
        if collector not in collectors:
            continue
        rows = []
        for _, labels, estimate in labelled:
            value = value_of(estimate) if estimate is not None else None
            if value is not None:
                rows.append(Row(sample=name, labels=labels, extra=(), value=value))
        out.append(Family(name=name, documentation=documentation, type="gauge", rows=rows))
    if "card" in collectors:
        out.extend(_card_families(labelled))
        out.append(_hpc_job_family(labelled))
    if "regime" in collectors:
        out.append(_regime_family(labelled))
        share = _share_family(labelled)
        if share.rows:  # MIG instances only: a node without MIG gets no empty HELP/TYPE header
            out.append(share)
    if "totals" in collectors:
        out.extend(_totals_families(labelled))
    if "engine" in collectors:
        out.append(_contradiction_family(labelled))
    if "missing" in collectors:
        out.append(_missing_fields_family(labelled))
    if "clocks" in collectors:
        out.append(_clock_cause_family(labelled))
        out.append(_clock_lost_family(labelled))
    if "links" in collectors:
        out.extend(_link_families(labelled))
    out.extend(_health_families(snapshot))
    return out


def _card_families(labelled: _Labelled) -> list[Family]:
    """ridgeline_gpu_info per GPU and each roof's constants once per node.

    A roof is a card at a precision, or a MIG instance profile of a card at a precision (its slice
    of the card's peak and bandwidth). A node of 8 identical GPUs writes one peak, one bandwidth and
    one ridge series instead of 8 of each; PromQL joins them to the GPUs through
    ridgeline_gpu_info's card, precision and mig_profile labels (rules/ridgeline-recording.rules.yml
    sums the peaks that way). A MIG parent whose instances report, an unknown card and an instance
    of an unknown profile have no roof: their ridgeline_gpu_info has no precision, so no peak joins.
    """
    info_rows: list[Row] = []
    roofs: dict[tuple[str, str, str | None], Roof] = {}
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
        info_rows.append(Row(sample="ridgeline_gpu_info", labels=labels, extra=extra, value=1.0))
    peak_rows, ridge_rows = [], []
    bandwidths: dict[tuple[str, str | None], float] = {}
    for (card, precision, profile), roof in sorted(
        roofs.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")
    ):
        key = {"card": card, "precision": precision} | ({"mig_profile": profile} if profile else {})
        peak_rows.append(
            Row(
                "ridgeline_card_peak_flop_per_second",
                dict(sorted(key.items())),
                (),
                roof.peak_flop_per_second,
            )
        )
        ridge_rows.append(
            Row("ridgeline_card_ridge_flop_per_byte", dict(sorted(key.items())), (), roof.ridge_flop_per_byte)
        )
        bandwidths.setdefault((card, profile), roof.bandwidth_bytes_per_second)
    bandwidth_rows = [
        Row(
            "ridgeline_card_peak_bandwidth_bytes_per_second",
            {"card": card} | ({"mig_profile": profile} if profile else {}),
            (),
            value,
        )
        for (card, profile), value in sorted(bandwidths.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))
    ]
    return [
        Family(
            name="ridgeline_gpu_info",
            documentation="1 per GPU (or MIG instance) with a reading: its labels, and its roof's "
            "precision and MIG profile (absent without a roof); join the card constants on (card, "
            "precision, mig_profile).",
            type="gauge",
            rows=info_rows,
        ),
        Family(
            name="ridgeline_card_peak_flop_per_second",
            documentation="A card's (or MIG profile's) dense peak at a precision in use on this node, "
            "FLOP per second (boost clock); one series per roof, not per GPU.",
            type="gauge",
            rows=peak_rows,
        ),
        Family(
            name="ridgeline_card_peak_bandwidth_bytes_per_second",
            documentation="A card's (or MIG profile's) peak memory bandwidth, bytes per second; one "
            "series per card (and profile) on this node.",
            type="gauge",
            rows=bandwidth_rows,
        ),
        Family(
            name="ridgeline_card_ridge_flop_per_byte",
            documentation="A card's (or MIG profile's) ridge point at a precision in use on this node: "
            "peak FLOP/s over bandwidth, FLOP per byte.",
            type="gauge",
            rows=ridge_rows,
        ),
    ]


def _regime_family(labelled: _Labelled) -> Family:
    regime_rows = []
    for _, labels, estimate in labelled:
        if estimate is None:
            continue
        current = estimate.regime
        for name in REGIMES:
            regime_rows.append(
                Row(
                    sample="ridgeline_regime",
                    labels=labels,
                    extra=(("regime", name),),
                    value=1.0 if current == name else 0.0,
                )
            )
    return Family(
        name="ridgeline_regime",
        documentation="Debounced regime (state set): 1 for the current one of idle, memory_bound, "
        "compute_bound, latency_bound, unknown; 0 for the others.",
        type="gauge",
        rows=regime_rows,
    )


def _share_family(labelled: _Labelled) -> Family:
    """The part of a physical GPU each MIG instance with a reading is: what the rules weight GPU
    counts by, so that a MIG-partitioned card counts as one GPU. A whole GPU is 1 and has none,
    so the family costs a series per MIG instance, not per GPU."""
    rows = [
        Row(sample="ridgeline_gpu_share_ratio", labels=labels, extra=(), value=gpu.gpu_share)
        for gpu, labels, estimate in labelled
        if estimate is not None and gpu.entity.gpu_instance is not None
    ]
    return Family(
        name="ridgeline_gpu_share_ratio",
        documentation="The part of its physical GPU a MIG instance is, 0-1: its compute slices over "
        "those of its GPU's instances (equal parts when a profile is unknown); only on MIG "
        "instances with a regime (a whole GPU is 1).",
        type="gauge",
        rows=rows,
    )


def _totals_families(labelled: _Labelled) -> list[Family]:
    seconds_rows, flop_rows, dram_rows = [], [], []
    for gpu, labels, _ in labelled:
        totals = gpu.totals
        if totals.regime_seconds is not None:
            for name in REGIMES:
                seconds_rows.append(
                    Row(
                        sample="ridgeline_regime_seconds_total",
                        labels=labels,
                        extra=(("regime", name),),
                        value=totals.regime_seconds[name],
                    )
                )
        if totals.flop_total is not None:
            flop_rows.append(
                Row(sample="ridgeline_flop_total", labels=labels, extra=(), value=totals.flop_total)
            )
        if totals.dram_bytes_total is not None:
            dram_rows.append(
                Row(
                    sample="ridgeline_dram_bytes_total",
                    labels=labels,
                    extra=(),
                    value=totals.dram_bytes_total,
                )
            )
    return [
        Family(
            name="ridgeline_regime_seconds",
            documentation="Seconds spent in each raw per-sample regime (integrated over sample intervals; "
            "fractions of rate() are exact).",
            type="counter",
            rows=seconds_rows,
        ),
        Family(
            name="ridgeline_flop",
            documentation="Estimated FLOPs executed (each compute pipe's activity x clock ratio x its "
            "peak x interval, summed); rate() is FLOP/s. Born at 0 with the first reading that has a "
            "compute pipe; a MIG parent whose instances report has none.",
            type="counter",
            rows=flop_rows,
        ),
        Family(
            name="ridgeline_dram_bytes",
            documentation="Estimated DRAM bytes moved (DRAM activity x bandwidth x interval); "
            "rate() is bytes/s. Born at 0 with the first reading that has DRAM_ACTIVE.",
            type="counter",
            rows=dram_rows,
        ),
    ]


def _hpc_job_family(labelled: _Labelled) -> Family:
    """ridgeline_hpc_job_info: one series per HPC job on each GPU (or MIG instance), as
    dcgm-exporter repeats its series per job, so a GPU several jobs share is found by each job id
    while its readings stay one series each (see gpu_labels)."""
    rows = []
    for gpu, labels, _ in labelled:
        if gpu.hpc_job is None:
            continue
        own = {name: value for name, value in labels.items() if name != "hpc_job"}
        for job in gpu.hpc_job.split(HPC_JOB_SEPARATOR):
            rows.append(Row("ridgeline_hpc_job_info", labels=own, extra=(("hpc_job", job),), value=1.0))
    return Family(
        name="ridgeline_hpc_job_info",
        documentation="1 per HPC (Slurm) job on a GPU or MIG instance, from the job-mapping directory "
        "or the scraped page; a GPU with several jobs has one series per job, and its readings carry "
        "no hpc_job (join on uuid and gpu_instance).",
        type="gauge",
        rows=rows,
    )


def _health_families(snapshot: Snapshot) -> list[Family]:
    out: list[Family] = []
    health = snapshot.source
    up_labels = {"source": health.name}
    out.append(
        Family(
            name="ridgeline_source_up",
            documentation="1 while the GPU source answers, 0 while it is down or finished.",
            type="gauge",
            rows=[
                Row(sample="ridgeline_source_up", labels=up_labels, extra=(), value=1.0 if health.up else 0.0)
            ],
        )
    )
    # Wall-clock arrival, not the sample's own time: a replay's samples carry the trace's
    # recording time, and staleness alerts compare this gauge with time().
    newest = health.last_sample_wall_time
    out.append(
        Family(
            name="ridgeline_last_sample_timestamp_seconds",
            documentation="When the newest sample arrived, seconds since the epoch "
            "(a replay: when it was played).",
            type="gauge",
            rows=[]
            if newest is None
            else [
                Row(
                    sample="ridgeline_last_sample_timestamp_seconds",
                    labels=_NO_LABELS,
                    extra=(),
                    value=newest,
                )
            ],
        )
    )
    moved = health.data_advanced_wall_time
    out.append(
        Family(
            name="ridgeline_last_data_advance_timestamp_seconds",
            documentation="When a GPU's own sample timestamp last moved forward, seconds since the "
            "epoch (wall clock): behind ridgeline_last_sample_timestamp_seconds while the source "
            "answers with data that stands still.",
            type="gauge",
            rows=[]
            if moved is None
            else [
                Row(
                    sample="ridgeline_last_data_advance_timestamp_seconds",
                    labels=_NO_LABELS,
                    extra=(),
                    value=moved,
                )
            ],
        )
    )
    out.append(
        Family(
            name="ridgeline_samples",
            documentation="Successful source reads (one batch of every GPU each).",
            type="counter",
            rows=[
                Row(
                    sample="ridgeline_samples_total",
                    labels=_NO_LABELS,
                    extra=(),
                    value=float(health.samples_total),
                )
            ],
        )
    )
    out.append(
        Family(
            name="ridgeline_sample_errors",
            documentation="Failed source reads and skipped replay lines, by reason.",
            type="counter",
            rows=[
                Row(
                    sample="ridgeline_sample_errors_total",
                    labels={"reason": reason},
                    extra=(),
                    value=float(count),
                )
                for reason, count in sorted(health.errors_total.items())
            ],
        )
    )
    info_labels = {"version": snapshot.version, "source": health.name}
    out.append(
        Family(
            name="ridgeline_build_info",
            documentation="Ridgeline version and the source it reads; always 1.",
            type="gauge",
            rows=[Row(sample="ridgeline_build_info", labels=info_labels, extra=(), value=1.0)],
        )
    )
    return out


def _missing_fields_family(labelled: _Labelled) -> Family:
    """One series per profiling field (1001-1008) a GPU's latest sample lacks: every GPU the
    source sees stays in /metrics, and says what it lacks (docs/runbooks.md,
    RidgelineProfilingCountersMissing)."""
    rows = [
        Row(
            sample="ridgeline_profiling_field_missing",
            labels=labels,
            extra=(("field", name),),
            value=1.0,
        )
        for gpu, labels, _ in labelled
        for name in (*gpu.inference.missing_fields, *gpu.inference.missing_link_fields)
    ]
    return Family(
        name="ridgeline_profiling_field_missing",
        documentation="1 for each DCGM profiling field (1001-1008) the GPU's latest sample lacks "
        "(absent or blank), and each link byte field (1009-1012) of a link its card has a "
        "bandwidth for; the field label is its DCGM name.",
        type="gauge",
        rows=rows,
    )


def _clock_cause_family(labelled: _Labelled) -> Family:
    """1 for each cause holding a GPU's clock down by its latest sample (clock_events.causes_of):
    field 112's reasons, and the power cap from the draw at its limit (fields 155, 160)."""
    rows = [
        Row(
            sample="ridgeline_clock_event_active",
            labels=labels,
            extra=(("cause", cause.lower().replace(" ", "_")),),
            value=1.0,
        )
        for _, labels, estimate in labelled
        if estimate is not None
        for cause in estimate.clock_causes
    ]
    return Family(
        name="ridgeline_clock_event_active",
        documentation="1 for each cause holding the GPU's clock down in its latest sample: power_cap, "
        "thermal, hw_slowdown, sync_boost, application_clocks (DCGM field 112's clocks-event reasons; "
        "power_cap also from fields 155/160, draw at its limit).",
        type="gauge",
        rows=rows,
    )


def _link_families(labelled: _Labelled) -> list[Family]:
    """Each GPU's smoothed link bytes/s per link and direction (DCGM 1009-1012), and each link's
    load: the busier direction over the card's per-direction bandwidth (docs/model.md, "The
    interconnect wall")."""
    rates = [
        Row(
            sample="ridgeline_link_bytes_per_second",
            labels=labels,
            extra=(("link", link), ("direction", direction)),
            value=value,
        )
        for _, labels, estimate in labelled
        if estimate is not None
        for link, direction, value in estimate.link_bytes_per_second
    ]
    loads = [
        Row(sample="ridgeline_link_utilization_ratio", labels=labels, extra=(("link", link),), value=value)
        for _, labels, estimate in labelled
        if estimate is not None
        for link, value in estimate.link_utilization
    ]
    return [
        Family(
            name="ridgeline_link_bytes_per_second",
            documentation="Smoothed DCGM PCIe and NVLink bytes/s (fields 1009-1012) per link (pcie, "
            "nvlink) and direction (tx, rx); present where the source reports them.",
            type="gauge",
            rows=rates,
        ),
        Family(
            name="ridgeline_link_utilization_ratio",
            documentation="Smoothed busier direction of a link over the card's per-direction "
            "bandwidth (cards.yaml links), 0-1 (about 0.8 is its practical maximum); absent without "
            "the link's counters, its figure, or on a MIG instance.",
            type="gauge",
            rows=loads,
        ),
    ]


def _clock_lost_family(labelled: _Labelled) -> Family:
    """GPU-seconds a reduced clock cost each compute-bound GPU, by cause: what `ridgeline report`
    sums (docs/report.md, "The levers"); only GPUs that ever ran compute-bound at one have it."""
    rows = [
        Row(
            sample="ridgeline_clock_lost_seconds_total", labels=labels, extra=(("cause", cause),), value=value
        )
        for gpu, labels, _ in labelled
        if gpu.totals.clock_lost_seconds is not None
        for cause, value in gpu.totals.clock_lost_seconds.items()
    ]
    return Family(
        name="ridgeline_clock_lost_seconds",
        documentation="GPU-seconds a reduced clock cost: (1 - clock ratio) x interval while the raw "
        "regime is compute-bound with the binding pipe below 97% of its peak's clock, split by cause "
        "(power_cap, thermal, hw_slowdown, sync_boost, application_clocks, unreported). Born at 0 for "
        "every cause the first time the GPU is so.",
        type="counter",
        rows=rows,
    )


def _contradiction_family(labelled: _Labelled) -> Family:
    """GR_ENGINE_ACTIVE idle while SM, tensor, FP or DRAM activity says work runs (1), else 0."""
    rows = [
        Row(
            sample="ridgeline_gr_engine_contradicted",
            labels=labels,
            extra=(),
            value=1.0 if estimate.gr_engine_contradicted else 0.0,
        )
        for _, labels, estimate in labelled
        if estimate is not None and estimate.gr_engine_active is not None
    ]
    return Family(
        name="ridgeline_gr_engine_contradicted",
        documentation="1 while the smoothed GR_ENGINE_ACTIVE reads idle but SM_ACTIVE, a tensor or FP "
        "pipe, or DRAM_ACTIVE near its wall says work runs (the busier evidence wins); 0 otherwise. "
        "Present while GR_ENGINE_ACTIVE is reported.",
        type="gauge",
        rows=rows,
    )


def families(snapshot: Snapshot, collectors: Collection[str] = DEFAULT_COLLECTORS) -> Iterator[Metric]:
    """The families as prometheus_client Metric objects (the reference the fast encoder must match)."""
    for family in build_families(snapshot, collectors):
        metric = Metric(family.name, family.documentation, family.type)
        for row in family.rows:
            metric.add_sample(row.sample, {**row.labels, **dict(row.extra)}, row.value)
        yield metric


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def encode(family_list: list[Family], *, openmetrics: bool) -> bytes:
    """Text format 0.0.4 or OpenMetrics 1.0.0, byte for byte what prometheus_client writes.

    prometheus_client re-validates and re-escapes every label name of every sample (about
    18 µs per sample here, 23 ms for 64 MIG entities). Ridgeline's label names are fixed and
    legal, and every series of one GPU shares one label dict, so its escaped label block is built
    once per GPU per snapshot. Values are escaped as the formats require (backslash, newline,
    double quote) and numbers are written with prometheus_client's own float formatter.
    tests/test_exposition.py checks the output equals prometheus_client's, in both formats.
    """
    blocks: dict[tuple[int, tuple[tuple[str, str], ...]], str] = {}
    escaped: dict[int, list[tuple[str, str]]] = {}
    lines: list[str] = []
    append = lines.append
    for family in family_list:
        if openmetrics:
            doc = family.documentation.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
            append(f"# HELP {family.name} {doc}\n# TYPE {family.name} {family.type}\n")
        else:
            mname = family.name + "_total" if family.type == "counter" else family.name
            doc = family.documentation.replace("\\", "\\\\").replace("\n", "\\n")
            append(f"# HELP {mname} {doc}\n# TYPE {mname} {family.type}\n")
        for row in family.rows:
            key = (id(row.labels), row.extra)
            labels = blocks.get(key)
            if labels is None:
                pairs = escaped.get(key[0])
                if pairs is None:
                    pairs = [(k, f'{k}="{_escape_label_value(v)}"') for k, v in row.labels.items()]
                    escaped[key[0]] = pairs
                if row.extra:
                    extra = [(k, f'{k}="{_escape_label_value(v)}"') for k, v in row.extra]
                    labels = ",".join(text for _, text in sorted([*pairs, *extra]))
                else:
                    labels = ",".join(text for _, text in sorted(pairs))
                blocks[key] = labels
            value = _go_float(row.value)
            append(f"{row.sample}{{{labels}}} {value}\n" if labels else f"{row.sample} {value}\n")
    if openmetrics:
        append("# EOF\n")
    return "".join(lines).encode("utf-8")


class MetricsEndpoint:
    """Encodes snapshots for /metrics with content negotiation, caching each snapshot's bytes.

    `collectors` are the enabled collectors (exporter/collectors.py); process metrics are written
    when "process" is among them, unless `process_metrics` says otherwise.
    """

    def __init__(
        self,
        provider: Callable[[], Snapshot],
        *,
        process_metrics: bool | None = None,
        collectors: Collection[str] = DEFAULT_COLLECTORS,
    ) -> None:
        self._provider = provider
        self._collectors = frozenset(collectors)
        if process_metrics is None:
            process_metrics = "process" in self._collectors
        self._lock = threading.Lock()
        self._cached_snapshot: Snapshot | None = None
        self._cache: dict[str, bytes] = {}
        self._process_registry: CollectorRegistry | None = None
        if process_metrics:
            self._process_registry = CollectorRegistry(auto_describe=False)
            ProcessCollector(registry=self._process_registry)

    def render(self, accept_header: str | None) -> tuple[bytes, str]:
        """(body, content type) for one scrape: text format unless OpenMetrics is asked for."""
        encoder, content_type = choose_encoder(accept_header or "")
        snapshot = self._provider()
        body = self._snapshot_bytes(snapshot, encoder, content_type)
        openmetrics = content_type.startswith("application/openmetrics-text")
        if self._process_registry is not None:
            extra = encoder(self._process_registry)
            body = body.removesuffix(OPENMETRICS_EOF) + extra if openmetrics else body + extra
        return body, content_type

    def _snapshot_bytes(
        self, snapshot: Snapshot, encoder: Callable[[Collector], bytes], content_type: str
    ) -> bytes:
        with self._lock:
            if snapshot is not self._cached_snapshot:
                self._cache = {}
                self._cached_snapshot = snapshot
            cached = self._cache.get(content_type)
        if cached is not None:
            return cached
        if content_type.startswith("application/openmetrics-text"):
            encoded = encode(build_families(snapshot, self._collectors), openmetrics=True)
        elif content_type == CONTENT_TYPE_PLAIN_0_0_4:
            encoded = encode(build_families(snapshot, self._collectors), openmetrics=False)
        else:  # text format 1.x with an escaping scheme: let prometheus_client write it
            registry = CollectorRegistry(auto_describe=False)
            registry.register(SnapshotCollector(lambda: snapshot, self._collectors))
            encoded = encoder(registry)
        with self._lock:
            if snapshot is self._cached_snapshot:
                self._cache[content_type] = encoded
        return encoded
