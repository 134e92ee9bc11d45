"""Prometheus exposition: a custom collector over the current snapshot, encoded once per snapshot.

Every scrape builds fresh metric families from the snapshot it is handed (client_python's
custom-collector pattern), so a GPU that disappeared is simply not yielded again — no stale
series, no module-level Gauge objects. Because a snapshot is immutable, its encoding is too: the
bytes are cached per (snapshot, content type), and a scrape between two batches costs
a dictionary lookup. Process metrics (CPU, RSS, fds) are encoded fresh and appended.

Labels: per-GPU series carry gpu, uuid, model, card; namespace/pod/container only when the GPU is
attributed to a pod, gpu_instance only for MIG instances. Series of one family may therefore have
different label names, which both the text format and OpenMetrics allow; nothing is padded
with empty values.

    # HELP ridgeline_dram_active_ratio Smoothed DCGM DRAM_ACTIVE: fraction of cycles ...
    # TYPE ridgeline_dram_active_ratio gauge
    ridgeline_dram_active_ratio{card="h100-sxm",gpu="0",model="NVIDIA H100 80GB HBM3",uuid="GPU-..."} 0.71
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from exporter.roofline import REGIMES
from exporter.state import GpuState, Snapshot

OPENMETRICS_EOF = b"# EOF\n"

_GAUGES: tuple[tuple[str, str, Callable[[GpuState], float | None]], ...] = (
    (
        "ridgeline_dram_active_ratio",
        "Smoothed DCGM DRAM_ACTIVE (field 1005): fraction of cycles the device memory interface "
        "is busy, 0-1 (about 0.8 is its practical maximum).",
        lambda g: g.estimate.dram_active if g.estimate else None,
    ),
    (
        "ridgeline_tensor_active_ratio",
        "Smoothed DCGM PIPE_TENSOR_ACTIVE (field 1004): fraction of cycles the tensor pipes are busy, 0-1.",
        lambda g: g.estimate.tensor_active if g.estimate else None,
    ),
    (
        "ridgeline_flop_utilization_ratio",
        "Smoothed tensor activity times SM clock ratio (t*k): achieved FLOP/s over the card's "
        "peak at the precision in use, 0-1.",
        lambda g: g.estimate.flop_utilization if g.estimate else None,
    ),
    (
        "ridgeline_arithmetic_intensity_flop_per_byte",
        "Smoothed arithmetic intensity in FLOP per DRAM byte (achieved FLOP/s over achieved "
        "bytes/s); absent while DRAM activity is about 0 or the card is unknown.",
        lambda g: g.estimate.intensity_flop_per_byte if g.estimate else None,
    ),
    (
        "ridgeline_roofline_efficiency_ratio",
        "Achieved over attainable FLOP/s at the current intensity (how close to the roof), 0-1.",
        lambda g: g.estimate.roofline_efficiency if g.estimate else None,
    ),
    (
        "ridgeline_gr_engine_active_ratio",
        "Smoothed DCGM GR_ENGINE_ACTIVE (field 1001): fraction of time the graphics/compute "
        "engine is busy, 0-1; present when the source reports it.",
        lambda g: g.estimate.gr_engine_active if g.estimate else None,
    ),
    (
        "ridgeline_gpu_utilization_ratio",
        "Smoothed DCGM GPU_UTIL (field 203) divided by 100: fraction of time a kernel ran, 0-1; "
        "present when the source reports it.",
        lambda g: g.estimate.gpu_utilization if g.estimate else None,
    ),
    (
        "ridgeline_ridge_flop_per_byte",
        "The card's ridge point at the precision in use: peak FLOP/s over bandwidth, FLOP per byte.",
        lambda g: g.estimate.roof.ridge_flop_per_byte if g.estimate and g.estimate.roof else None,
    ),
    (
        "ridgeline_peak_flop_per_second",
        "The card's dense peak at the precision in use, FLOP per second (boost clock).",
        lambda g: g.estimate.roof.peak_flop_per_second if g.estimate and g.estimate.roof else None,
    ),
    (
        "ridgeline_peak_bandwidth_bytes_per_second",
        "The card's peak memory bandwidth, bytes per second.",
        lambda g: g.estimate.roof.bandwidth_bytes_per_second if g.estimate and g.estimate.roof else None,
    ),
)


def gpu_labels(gpu: GpuState) -> dict[str, str]:
    """gpu, uuid, model, card; + namespace/pod/container when attributed; + gpu_instance for MIG."""
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
    return labels


class SnapshotCollector(Collector):
    """Yields fresh families for the snapshot `provider` returns at each collect()."""

    def __init__(self, provider: Callable[[], Snapshot]) -> None:
        self._provider = provider

    def collect(self) -> Iterable[Metric]:
        return families(self._provider())


def families(snapshot: Snapshot) -> Iterator[Metric]:
    """Every Ridgeline metric family for one snapshot (DESIGN.md, "Prometheus metrics")."""
    labelled = [(g, gpu_labels(g)) for g in snapshot.gpus]

    for name, documentation, value_of in _GAUGES:
        metric = Metric(name, documentation, "gauge")
        for gpu, labels in labelled:
            value = value_of(gpu)
            if value is not None:
                metric.add_sample(name, labels, value)
        yield metric

    regime = Metric(
        "ridgeline_regime",
        "Debounced regime (state set): 1 for the current one of idle, memory_bound, compute_bound, "
        "latency_bound; 0 for the others.",
        "gauge",
    )
    for gpu, labels in labelled:
        if gpu.estimate is None:
            continue
        for name in REGIMES:
            regime.add_sample(
                "ridgeline_regime", {**labels, "regime": name}, 1.0 if gpu.estimate.regime == name else 0.0
            )
    yield regime

    seconds = Metric(
        "ridgeline_regime_seconds",
        "Seconds spent in each raw per-sample regime (integrated over sample intervals; fractions "
        "of rate() are exact).",
        "counter",
    )
    flop = Metric(
        "ridgeline_flop",
        "Estimated FLOPs executed (tensor activity x clock ratio x peak x interval); rate() is FLOP/s.",
        "counter",
    )
    dram = Metric(
        "ridgeline_dram_bytes",
        "Estimated DRAM bytes moved (DRAM activity x bandwidth x interval); rate() is bytes/s.",
        "counter",
    )
    for gpu, labels in labelled:
        totals = gpu.totals
        if totals.integrated_seconds > 0:
            for name in REGIMES:
                seconds.add_sample(
                    "ridgeline_regime_seconds_total", {**labels, "regime": name}, totals.regime_seconds[name]
                )
        if totals.has_roof_totals:
            flop.add_sample("ridgeline_flop_total", labels, totals.flop_total)
            dram.add_sample("ridgeline_dram_bytes_total", labels, totals.dram_bytes_total)
    yield seconds
    yield flop
    yield dram

    health = snapshot.source
    up = Metric(
        "ridgeline_source_up", "1 while the GPU source answers, 0 while it is down or finished.", "gauge"
    )
    up.add_sample("ridgeline_source_up", {"source": health.name}, 1.0 if health.up else 0.0)
    yield up

    newest = snapshot.last_sample_timestamp
    last = Metric(
        "ridgeline_last_sample_timestamp_seconds",
        "Timestamp of the newest sample, seconds since the epoch (the source's clock).",
        "gauge",
    )
    if newest is not None:
        last.add_sample("ridgeline_last_sample_timestamp_seconds", {}, newest)
    yield last

    samples = Metric("ridgeline_samples", "Successful source reads (one batch of every GPU each).", "counter")
    samples.add_sample("ridgeline_samples_total", {}, float(health.samples_total))
    yield samples

    errors = Metric(
        "ridgeline_sample_errors", "Failed source reads and skipped replay lines, by reason.", "counter"
    )
    for reason, count in sorted(health.errors_total.items()):
        errors.add_sample("ridgeline_sample_errors_total", {"reason": reason}, float(count))
    yield errors

    info = Metric("ridgeline_build_info", "Ridgeline version and the source it reads; always 1.", "gauge")
    info.add_sample("ridgeline_build_info", {"version": snapshot.version, "source": health.name}, 1.0)
    yield info


class MetricsEndpoint:
    """Encodes snapshots for /metrics with content negotiation, caching each snapshot's bytes."""

    def __init__(self, provider: Callable[[], Snapshot], *, process_metrics: bool = True) -> None:
        self._provider = provider
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
        registry = CollectorRegistry(auto_describe=False)
        registry.register(SnapshotCollector(lambda: snapshot))
        encoded = encoder(registry)
        with self._lock:
            if snapshot is self._cached_snapshot:
                self._cache[content_type] = encoded
        return encoded
