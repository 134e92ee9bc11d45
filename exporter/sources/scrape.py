"""Scrape source: read an existing dcgm-exporter's `/metrics` page and turn it into samples.

For nodes that already run NVIDIA's dcgm-exporter: Ridgeline reads the page dcgm-exporter
serves (Prometheus text format, parsed with prometheus-client's own parser) instead of
opening a second DCGM connection. It accepts the legacy field names, DCGM 4.6's
`*_UTIL_RATIO` names and dcgm-exporter 4.9's renames, and keeps the pod labels dcgm-exporter
attached. Uses only the standard library's urllib, so it needs no HTTP client dependency.
"""

from __future__ import annotations

import logging
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.client import HTTPResponse
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from exporter import fields
from exporter.sample import Attribution, Entity, Sample, join_hpc_jobs
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable

log = logging.getLogger(__name__)

CONVERTED_NAMES: dict[str, tuple[int, float]] = {
    "DCGM_FI_DEV_SM_CLOCK_HERTZ": (fields.SM_CLOCK, 1e-6),
    "DCGM_FI_DEV_GPU_UTIL_RATIO": (fields.GPU_UTIL, 100.0),
}
"""Names whose unit changed with the rename: name -> (Ridgeline field id, factor to its unit).

dcgm-exporter 4.9 "renames the 23 default and profiling-preset fields that DCGM 4.7 deprecates
to their new DCGM 4.7 names. Eleven of them also change unit: clocks from MHz to hertz, ...
utilization from a percentage to a 0 to 1 ratio" (dcgm-exporter 4.9.0 release notes). DCGM 4.7
gives the SM clock in hertz as DCGM_FI_DEV_SM_CLOCK_HERTZ = field 1603 (go-dcgm
pkg/dcgm/base_unit_fields_test.go) and GPU utilisation as a ratio as DCGM_FI_DEV_GPU_UTIL_RATIO
= field 1613; Ridgeline keeps field 100 in MHz and field 203 in percent, so both are converted.
Caveat: DCGM 4.6's own Python bindings briefly used DCGM_FI_DEV_GPU_UTIL_RATIO for field 203
in percent; no released dcgm-exporter printed that name, so the 4.9 meaning wins here.
"""

MAX_BODY_BYTES = 64 * 1024 * 1024
"""A `/metrics` page larger than this is not dcgm-exporter's (a full 8-GPU page is ~200 KiB)."""

_DEVICE_RE = re.compile(r"^nvidia(\d+)$")


def metric_field(name: str) -> tuple[int, float] | None:
    """The Ridgeline field id and unit factor for a dcgm-exporter metric name; None if unused.

    Only DCGM_FI_* names count: a page may carry the exporter's own DCGM_EXP_* families or
    process metrics, which are not DCGM fields.
    """
    upper = name.upper()
    if upper.endswith("_TOTAL") and upper[: -len("_TOTAL")] in _KNOWN_NAMES:
        upper = upper[: -len("_TOTAL")]
    if upper in CONVERTED_NAMES:
        return CONVERTED_NAMES[upper]
    if not upper.startswith("DCGM_FI_"):
        return None
    fid = fields.field_id(upper)
    if fid is None or fid not in fields.LEGACY_NAMES:
        return None
    return (fid, 1.0)


_KNOWN_NAMES = frozenset(
    [*fields.LEGACY_NAMES.values(), *(n.upper() for n in fields.RENAMED), *CONVERTED_NAMES]
)


@dataclass
class _Series:
    """Values gathered for one entity while walking a page."""

    entity: Entity
    attribution: Attribution | None
    timestamp: float | None
    values: dict[int, float | None] = field(default_factory=dict)
    hpc_jobs: list[str] = field(default_factory=list)


def _label(labels: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = labels.get(name, "")
        if value:
            return value
    return ""


def _entity(labels: Mapping[str, str]) -> Entity | None:
    """The GPU (or MIG instance) a dcgm-exporter series describes, from its labels.

    dcgm-exporter labels every series with gpu, UUID, pci_bus_id, device (nvidiaN) and
    modelName, plus GPU_I_PROFILE/GPU_I_ID on MIG instances (pkg/dcgmexporter; e.g. the page
    quoted in NVIDIA/dcgm-exporter PR #736). For MIG, gpu and UUID name the parent GPU.
    """
    gpu_text = labels.get("gpu", "")
    if not gpu_text.isdigit():
        match = _DEVICE_RE.match(labels.get("device", ""))
        if match is None:
            return None
        gpu_text = match.group(1)
    instance_text = labels.get("GPU_I_ID", "")
    gpu_instance = int(instance_text) if instance_text.isdigit() else None
    gpu = int(gpu_text)
    uuid = _label(labels, "UUID", "uuid")
    if not uuid:  # the sampler keys GPUs by uuid: without one, every GPU would collide
        uuid = f"GPU-scrape-{gpu}"
    return Entity(
        gpu=gpu,
        uuid=uuid,
        model=_label(labels, "modelName", "model_name", "model"),
        gpu_instance=gpu_instance,
    )


def _attribution(labels: Mapping[str, str]) -> Attribution | None:
    namespace = labels.get("namespace", "")
    pod = labels.get("pod", "")
    if not namespace or not pod:
        return None
    return Attribution(namespace=namespace, pod=pod, container=labels.get("container", ""))


def parse_page(text: str, now: float) -> list[Sample]:
    """Samples from a dcgm-exporter page: one per GPU / MIG instance, fields keyed by id.

    Raises ValueError when the text is not Prometheus exposition format. Blank sentinels,
    NaN and out-of-range ratios become None (exporter.fields.clean_value). When several series
    for the same GPU carry different pods (shared GPUs), the first attributed one is kept. A
    dcgm-exporter with --hpc-job-mapping-dir repeats each GPU's series once per job (label
    hpc_job); those become one sample whose hpc_job is the ids joined by commas.
    """
    series: dict[tuple[int, int | None], _Series] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            mapped = metric_field(family.name) or metric_field(sample.name)
            if mapped is None:
                continue
            fid, factor = mapped
            entity = _entity(sample.labels)
            if entity is None:
                log.debug("skipping %s series without a gpu or device label", sample.name)
                continue
            entry = series.get(entity.key)
            if entry is None:
                stamp = None if sample.timestamp is None else float(sample.timestamp)
                entry = _Series(entity, _attribution(sample.labels), stamp)
                series[entity.key] = entry
            elif entry.attribution is None:
                entry.attribution = _attribution(sample.labels)
            job = sample.labels.get("hpc_job", "")
            if job and job not in entry.hpc_jobs:
                entry.hpc_jobs.append(job)
            raw = float(sample.value)
            value = fields.clean_value(fid, raw if fields.is_blank(raw) else raw * factor)
            if fid not in entry.values or entry.values[fid] is None:
                entry.values[fid] = value
    return [
        Sample(
            timestamp=entry.timestamp if entry.timestamp is not None else now,
            entity=entry.entity,
            values=dict(entry.values),
            attribution=entry.attribution,
            hpc_job=join_hpc_jobs(entry.hpc_jobs),
        )
        for _, entry in sorted(series.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1))
    ]


class ScrapeSource:
    """Reads dcgm-exporter's `/metrics` once per sampling interval (paced by the sampler)."""

    name = "scrape"
    paced = False
    records_skipped = 0

    def __init__(self, options: SourceOptions) -> None:
        self._url = options.scrape_url or ""
        self._timeout = options.scrape_timeout_seconds

    def open(self) -> None:
        """Check the URL only: dcgm-exporter may start after Ridgeline, so a first failed read is
        reported by read() (source_up 0) rather than stopping the daemon."""
        parts = urlsplit(self._url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SourceUnavailable(
                "bad_url",
                f"--scrape-url must be an http(s) URL of a dcgm-exporter /metrics page, "
                f"e.g. http://localhost:9400/metrics; got {self._url!r}",
            )
        if self._timeout <= 0:
            raise SourceUnavailable("bad_timeout", f"scrape timeout must be > 0 s, got {self._timeout}")

    def read(self) -> list[Sample]:
        body = self._fetch()
        try:
            text = body.decode("utf-8")
            samples = parse_page(text, time.time())
        except (UnicodeDecodeError, ValueError, TypeError, IndexError) as exc:
            raise SourceError(
                "parse_error", f"{self._url} did not return Prometheus text format: {exc}"
            ) from exc
        if not samples:
            raise SourceError(
                "no_dcgm_metrics",
                f"{self._url} answered, but with no DCGM_FI_* GPU series: is it dcgm-exporter, "
                "and does its collectors CSV include the profiling fields?",
            )
        return samples

    def close(self) -> None:
        """Nothing is held between reads."""

    def _fetch(self) -> bytes:
        """GET the page within the timeout, as a whole (not per socket read)."""
        request = urllib.request.Request(
            self._url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "ridgeline"}
        )
        deadline = time.monotonic() + self._timeout
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return _read_until(response, deadline, self._url, self._timeout)
        except urllib.error.HTTPError as exc:
            exc.close()  # the error carries the open response; release its socket now
            raise SourceError("http_status", f"{self._url} answered HTTP {exc.code} {exc.reason}") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise _timeout(self._url, self._timeout) from exc
            raise SourceError("connection", f"cannot reach {self._url}: {exc.reason}") from exc
        except TimeoutError as exc:
            raise _timeout(self._url, self._timeout) from exc
        except OSError as exc:
            raise SourceError("connection", f"cannot reach {self._url}: {exc}") from exc


def _timeout(url: str, seconds: float) -> SourceError:
    return SourceError("timeout", f"{url} did not answer within {seconds:g} s")


def _read_until(response: HTTPResponse, deadline: float, url: str, seconds: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise _timeout(url, seconds)
        chunk = response.read(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise SourceError("parse_error", f"{url} returned more than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
