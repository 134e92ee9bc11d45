"""Prometheus exposition: the encoder that walks the enabled collectors, once per snapshot.

Each collector (exporter/collectors.py) reads fresh families off the snapshot it is handed; the
encoder times each one (ridgeline_scrape_collector_*), caches the bytes per (snapshot, content
type) and appends the process metrics, encoded fresh. Labels, formats and the cache:
docs/daemon.md, "Exposition"; `hpc_job` on a GPU several jobs share: docs/deployment.md, "Slurm
and other HPC schedulers".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from exporter.collectors import (
    COLLECTORS,
    DEFAULT_COLLECTORS,
    HPC_JOB_SEPARATOR,
    SCRAPE_DURATION,
    SCRAPE_SUCCESS,
    SOURCE_HEALTH,
    WRITE_ORDER,
    Family,
    Labelled,
    Row,
    gpu_labels,
    labelled_gpus,
)
from exporter.collectors import Collector as SnapshotReader
from exporter.state import Snapshot

__all__ = ["HPC_JOB_SEPARATOR", "Family", "MetricsEndpoint", "Row", "build_families", "encode", "gpu_labels"]

log = logging.getLogger(__name__)

OPENMETRICS_EOF = b"# EOF\n"

_go_float: Callable[[float], str] = floatToGoString
"""prometheus_client's number formatter (untyped upstream), so both encoders agree."""


class SnapshotCollector(Collector):
    """Yields fresh families for the snapshot `provider` returns at each collect()."""

    def __init__(
        self,
        provider: Callable[[], Snapshot],
        collectors: Collection[str] = DEFAULT_COLLECTORS,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._provider = provider
        self._collectors = collectors
        self._clock = clock

    def collect(self) -> Iterable[Metric]:
        return families(self._provider(), self._collectors, clock=self._clock)


def build_families(
    snapshot: Snapshot,
    collectors: Collection[str] = DEFAULT_COLLECTORS,
    *,
    registry: Sequence[SnapshotReader] = (*COLLECTORS, SOURCE_HEALTH),
    clock: Callable[[], float] = time.perf_counter,
) -> list[Family]:
    """The families of the enabled collectors for one snapshot (docs/design.md, "Prometheus
    metrics"), the source health always, in WRITE_ORDER; then each collector's success and
    duration. A collector that raises is logged and reports 0; the others are still written."""
    labelled = labelled_gpus(snapshot)
    written: dict[str, Family] = {}
    success: list[Row] = []
    duration: list[Row] = []
    for collector in registry:
        if collector.read is None or (collector.switchable and collector.name not in collectors):
            continue
        start = clock()
        found = _collect(collector, snapshot, labelled)
        seconds = clock() - start
        labels = {"collector": collector.name}
        success.append(Row(SCRAPE_SUCCESS.name, labels, (), 0.0 if found is None else 1.0))
        duration.append(Row(SCRAPE_DURATION.name, labels, (), seconds))
        written.update((family.name, family) for family in found or ())
    out = [written[spec.name] for spec in WRITE_ORDER if spec.name in written]
    return [*out, SCRAPE_SUCCESS.family(success), SCRAPE_DURATION.family(duration)]


def _collect(collector: SnapshotReader, snapshot: Snapshot, labelled: list[Labelled]) -> list[Family] | None:
    """The collector's families, or None when it raised (logged: node_exporter's "collector failed")."""
    try:
        return collector.collect(snapshot, labelled)
    except Exception:
        log.exception("collector %s failed; its families are left out of /metrics", collector.name)
        return None


class _FamilyListCollector(Collector):
    """Families already read, for prometheus_client's own encoders."""

    def __init__(self, family_list: list[Family]) -> None:
        self._families = family_list

    def collect(self) -> Iterable[Metric]:
        return as_metrics(self._families)


def as_metrics(family_list: Iterable[Family]) -> Iterator[Metric]:
    """The families as prometheus_client Metric objects (the reference the fast encoder must match)."""
    for family in family_list:
        metric = Metric(family.name, family.documentation, family.type)
        for row in family.rows:
            metric.add_sample(row.sample, {**row.labels, **dict(row.extra)}, row.value)
        yield metric


def families(
    snapshot: Snapshot,
    collectors: Collection[str] = DEFAULT_COLLECTORS,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[Metric]:
    """One snapshot's families as prometheus_client Metric objects."""
    return as_metrics(build_families(snapshot, collectors, clock=clock))


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def encode(family_list: list[Family], *, openmetrics: bool) -> bytes:
    """Text format 0.0.4 or OpenMetrics 1.0.0, byte for byte what prometheus_client writes.

    prometheus_client re-validates and re-escapes every label name of every sample (its cost:
    docs/daemon.md, "Figures"). Ridgeline's label names are fixed and legal, and every series of
    one GPU shares one label dict, so its escaped label block is built once per GPU per snapshot.
    Values are escaped as the formats require (backslash, newline, double quote) and numbers are
    written with prometheus_client's own float formatter.
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
    when "process" is among them, unless `process_metrics` says otherwise. A snapshot's families
    are read once, so both formats report the same collector durations; `clock` times them.
    """

    def __init__(
        self,
        provider: Callable[[], Snapshot],
        *,
        process_metrics: bool | None = None,
        collectors: Collection[str] = DEFAULT_COLLECTORS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._provider = provider
        self._collectors = frozenset(collectors)
        self._clock = clock
        if process_metrics is None:
            process_metrics = "process" in self._collectors
        self._lock = threading.Lock()
        self._cached_snapshot: Snapshot | None = None
        self._cache: dict[str, bytes] = {}
        self._families: list[Family] | None = None
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
                self._families = None
                self._cached_snapshot = snapshot
            cached = self._cache.get(content_type)
            family_list = self._families
        if cached is not None:
            return cached
        if family_list is None:
            family_list = build_families(snapshot, self._collectors, clock=self._clock)
        if content_type.startswith("application/openmetrics-text"):
            encoded = encode(family_list, openmetrics=True)
        elif content_type == CONTENT_TYPE_PLAIN_0_0_4:
            encoded = encode(family_list, openmetrics=False)
        else:  # text format 1.x with an escaping scheme: let prometheus_client write it
            registry = CollectorRegistry(auto_describe=False)
            registry.register(_FamilyListCollector(family_list))
            encoded = encoder(registry)
        with self._lock:
            if snapshot is self._cached_snapshot:
                self._cache[content_type] = encoded
                self._families = family_list
        return encoded
