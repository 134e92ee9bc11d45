"""The scrape source against a real HTTP server on 127.0.0.1 serving dcgm-exporter pages."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from exporter import fields
from exporter.sample import Attribution, Sample
from exporter.sources import create_source
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable
from exporter.sources.scrape import ScrapeSource, metric_field

PAGES = Path(__file__).parent / "data" / "dcgm-exporter"


class _Exporter(ThreadingHTTPServer):
    """A stand-in dcgm-exporter: /metrics/<fixture>, plus /slow, /error and /garbage."""

    daemon_threads = True
    release: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Exporter

    def do_GET(self) -> None:
        if self.path == "/slow":
            self.server.release.wait(10)
            self._reply(200, (PAGES / "legacy-h100-no-pods.txt").read_bytes())
        elif self.path == "/error":
            self._reply(500, b"failed to collect metrics: DCGM not reachable\n")
        elif self.path == "/garbage":
            self._reply(200, b"<html><body>502 Bad Gateway</body></html>\n")
        elif self.path == "/binary":
            self._reply(200, b"\xff\xfe\x00garbage\x00")
        elif self.path.startswith("/metrics/"):
            page = PAGES / self.path.removeprefix("/metrics/")
            if page.is_file():
                self._reply(200, page.read_bytes())
            else:
                self._reply(404, b"not found\n")
        else:
            self._reply(404, b"not found\n")

    def _reply(self, status: int, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


@pytest.fixture(scope="module")
def exporter_url() -> Iterator[str]:
    server = _Exporter(("127.0.0.1", 0), _Handler)
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host!s}:{port}"
    server.release.set()
    server.shutdown()
    server.server_close()


def _read(url: str, timeout: float = 5.0) -> list[Sample]:
    source = ScrapeSource(SourceOptions(scrape_url=url, scrape_timeout_seconds=timeout))
    source.open()
    try:
        return source.read()
    finally:
        source.close()


def _by_gpu(samples: list[Sample]) -> dict[tuple[int, int | None], Sample]:
    return {s.entity.key: s for s in samples}


def test_registry_builds_the_scrape_source() -> None:
    source = create_source("scrape", SourceOptions(scrape_url="http://127.0.0.1:9400/metrics"))
    assert isinstance(source, ScrapeSource)
    assert source.name == "scrape"
    assert source.paced is False


def test_legacy_names_map_to_field_ids_with_pod_labels(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/legacy-h100-pods.txt"))
    assert set(samples) == {(0, None), (1, None)}
    busy = samples[(1, None)]
    assert busy.entity.uuid == "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
    assert busy.entity.model == "NVIDIA H100 80GB HBM3"
    assert busy.values[fields.DRAM_ACTIVE] == pytest.approx(0.712663)
    assert busy.values[fields.PIPE_TENSOR_ACTIVE] == pytest.approx(0.128875)
    assert busy.values[fields.SM_CLOCK] == 1755
    assert busy.values[fields.GPU_UTIL] == 100
    assert busy.values[fields.NVLINK_TX_BYTES] == 14829331456
    assert busy.attribution == Attribution(namespace="llm", pod="decode-7f9c4", container="server")


def test_counters_typed_families_are_read_under_their_dcgm_name(exporter_url: str) -> None:
    """prometheus-client's parser appends _total to counter samples; the field must still map."""
    samples = _by_gpu(_read(f"{exporter_url}/metrics/legacy-h100-pods.txt"))
    assert samples[(0, None)].values[fields.PCIE_TX_BYTES] == 1253412
    assert samples[(0, None)].values[fields.PCIE_RX_BYTES] == 2011983


def test_empty_pod_labels_mean_no_attribution(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/legacy-h100-pods.txt"))
    assert samples[(0, None)].attribution is None


def test_page_without_kubernetes_labels_has_no_attribution(exporter_url: str) -> None:
    samples = _read(f"{exporter_url}/metrics/legacy-h100-no-pods.txt")
    assert len(samples) == 1
    assert samples[0].attribution is None
    assert samples[0].values[fields.DRAM_ACTIVE] == pytest.approx(0.712663)


def test_fields_that_are_not_roofline_inputs_are_ignored(exporter_url: str) -> None:
    sample = _read(f"{exporter_url}/metrics/legacy-h100-no-pods.txt")[0]
    assert set(sample.values) <= set(fields.LEGACY_NAMES)
    assert 150 not in sample.values  # DCGM_FI_DEV_GPU_TEMP
    assert 251 not in sample.values  # DCGM_FI_DEV_FB_FREE


def test_dcgm_exporter_4_9_names_and_units(exporter_url: str) -> None:
    sample = _read(f"{exporter_url}/metrics/renamed-4.9-h100.txt")[0]
    assert sample.values[fields.GR_ENGINE_ACTIVE] == pytest.approx(0.950112)
    assert sample.values[fields.SM_ACTIVE] == pytest.approx(0.889001)
    assert sample.values[fields.SM_OCCUPANCY] == pytest.approx(0.412)
    assert sample.values[fields.PIPE_TENSOR_ACTIVE] == pytest.approx(0.803117)
    assert sample.values[fields.DRAM_ACTIVE] == pytest.approx(0.350422)
    assert sample.values[fields.PIPE_TENSOR_HMMA_ACTIVE] == pytest.approx(0.801002)
    # Hz -> MHz and ratio -> percent, so field 100 and 203 keep one unit whatever the exporter.
    assert sample.values[fields.SM_CLOCK] == pytest.approx(1980.0)
    assert sample.values[fields.GPU_UTIL] == pytest.approx(87.0)
    assert sample.attribution == Attribution(namespace="train", pod="llama-ft-0", container="trainer")


def test_mig_instances_become_separate_entities_with_their_pods(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/mig-a100.txt"))
    assert set(samples) == {(0, 1), (0, 2)}
    first, second = samples[(0, 1)], samples[(0, 2)]
    assert first.entity.uuid == second.entity.uuid == "GPU-63bc0b91-2265-1b94-831c-15c41fe92675"
    assert first.values[fields.PIPE_TENSOR_ACTIVE] == pytest.approx(0.402)
    assert second.values[fields.DRAM_ACTIVE] == pytest.approx(0.84)
    assert first.attribution is not None and first.attribution.pod == "triton-7d9f8-abcde"
    assert second.attribution is not None and second.attribution.namespace == "batch"


def test_edge_values_clamp_drop_and_blank(exporter_url: str) -> None:
    values = _read(f"{exporter_url}/metrics/edge-values.txt")[0].values
    assert values[fields.GR_ENGINE_ACTIVE] == 1.0  # 1.03: rounding above 1, clamped
    assert values[fields.SM_ACTIVE] is None  # 1.7: not a ratio, dropped
    assert values[fields.PIPE_TENSOR_ACTIVE] is None  # NaN
    assert values[fields.DRAM_ACTIVE] is None  # DCGM FP64 blank sentinel
    assert fields.DRAM_ACTIVE in values  # reported, but blank: None, never 0


def test_timeout_is_its_own_reason(exporter_url: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(f"{exporter_url}/slow", timeout=0.2)
    assert caught.value.reason == "timeout"
    assert "/slow" in caught.value.message


def test_http_500_is_reported_with_its_status(exporter_url: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(f"{exporter_url}/error")
    assert caught.value.reason == "http_status"
    assert "500" in caught.value.message


def test_html_body_is_a_parse_error(exporter_url: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(f"{exporter_url}/garbage")
    assert caught.value.reason == "parse_error"


def test_undecodable_body_is_a_parse_error(exporter_url: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(f"{exporter_url}/binary")
    assert caught.value.reason == "parse_error"


def test_page_without_gpu_series_says_so(exporter_url: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(f"{exporter_url}/metrics/not-dcgm.txt")
    assert caught.value.reason == "no_dcgm_metrics"


def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SourceError) as caught:
        _read(f"http://127.0.0.1:{port}/metrics")
    assert caught.value.reason == "connection"
    assert str(port) in caught.value.message


@pytest.mark.parametrize("url", ["", "localhost:9400/metrics", "ftp://host/metrics", "http://"])
def test_open_rejects_urls_that_are_not_http(url: str) -> None:
    source = ScrapeSource(SourceOptions(scrape_url=url))
    with pytest.raises(SourceUnavailable) as caught:
        source.open()
    assert "--scrape-url" in caught.value.message


def test_source_keeps_working_after_a_failed_read(exporter_url: str) -> None:
    """A failed read is one error; the next read of a healthy page succeeds."""
    source = ScrapeSource(SourceOptions(scrape_url=f"{exporter_url}/error"))
    source.open()
    with pytest.raises(SourceError):
        source.read()
    source._url = f"{exporter_url}/metrics/legacy-h100-no-pods.txt"
    assert len(source.read()) == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("DCGM_FI_PROF_DRAM_ACTIVE", (fields.DRAM_ACTIVE, 1.0)),
        ("DCGM_FI_PROF_DRAM_UTIL_RATIO", (fields.DRAM_ACTIVE, 1.0)),
        ("DCGM_FI_PROF_PCIE_TX_BYTES_total", (fields.PCIE_TX_BYTES, 1.0)),
        ("DCGM_FI_DEV_SM_CLOCK_HERTZ", (fields.SM_CLOCK, 1e-6)),
        ("DCGM_FI_DEV_FB_FREE", None),
        ("DCGM_EXP_XID_ERRORS_COUNT", None),
        ("GRACT", None),
    ],
)
def test_metric_names_map_to_fields(name: str, expected: tuple[int, float] | None) -> None:
    assert metric_field(name) == expected


def test_gpus_without_a_uuid_label_stay_distinct() -> None:
    """The sampler keys GPUs by (uuid, GPU instance): a page whose series lack UUID (relabelled
    away) must not give every GPU the same empty uuid, or all but one are dropped as duplicates."""
    from exporter.sources.scrape import parse_page

    page = (
        'DCGM_FI_PROF_DRAM_ACTIVE{gpu="0",modelName="NVIDIA H100 80GB HBM3"} 0.5\n'
        'DCGM_FI_PROF_DRAM_ACTIVE{gpu="1",modelName="NVIDIA H100 80GB HBM3"} 0.6\n'
    )
    samples = parse_page(page, 1.0)
    uuids = [s.entity.uuid for s in samples]
    assert len(set(uuids)) == 2 and all(uuids)
