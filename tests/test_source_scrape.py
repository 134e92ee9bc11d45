"""The scrape source against a real HTTP server on 127.0.0.1 serving dcgm-exporter pages: names and
units of every DCGM generation, MIG profiles, pages without profiling fields, odd series skipped
one by one, one deadline against a dripping upstream, basic and bearer auth with the password
never shown, and memory that does not grow with the page (a real process's peak RSS)."""

from __future__ import annotations

import base64
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from source_kit import scrape_options

from exporter import fields, readings
from exporter.catalog import load_catalog
from exporter.http_client import HTTPClientConfig, TLSConfig
from exporter.inference import InferenceConfig
from exporter.redaction import redact_credentials
from exporter.sample import MAX_ENTITIES, Attribution, Sample
from exporter.sampler import Sampler
from exporter.sources import create_source
from exporter.sources.base import MigProfileHint, SourceError, SourceOptions, SourceUnavailable
from exporter.sources.scrape import PageReader, ScrapeSettings, ScrapeSource, metric_field, parse_page

PAGES = Path(__file__).parent / "data" / "dcgm-exporter"
ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"
SECRET = "s3cr3t-p@ss"


class _Exporter(ThreadingHTTPServer):
    """A stand-in dcgm-exporter: fixture pages, generated pages, and misbehaving routes."""

    daemon_threads = True
    release: threading.Event
    pages: dict[str, bytes]
    expected_authorization: str
    seen_authorization: list[str | None]


class _Handler(BaseHTTPRequestHandler):
    server: _Exporter
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path
        if path.startswith("/auth/"):
            got = self.headers.get("Authorization")
            self.server.seen_authorization.append(got)
            if got != self.server.expected_authorization:
                self._reply(401, b"Unauthorized\n")
                return
            path = path.removeprefix("/auth")
        if path == "/slow":
            self.server.release.wait(10)
            self._reply(200, (PAGES / "legacy-h100-no-pods.txt").read_bytes())
        elif path in ("/drip-body", "/drip-headers"):
            self._drip(header_done=path == "/drip-body")
        elif path == "/error":
            self._reply(500, b"failed to collect metrics: DCGM not reachable\n")
        elif path == "/garbage":
            self._reply(200, b"<html><body>502 Bad Gateway</body></html>\n")
        elif path == "/binary":
            self._reply(200, b"\xff\xfe\x00garbage\x00")
        elif path.startswith("/page/"):
            body = self.server.pages.get(path.removeprefix("/page/"))
            if body is None:
                self._reply(404, b"not found\n")
            else:
                self._reply(200, body, chunked=path.endswith(".chunked"))
        elif path.startswith("/metrics/") and (PAGES / path.removeprefix("/metrics/")).is_file():
            self._reply(200, (PAGES / path.removeprefix("/metrics/")).read_bytes())
        else:
            self._reply(404, b"not found\n")

    def _reply(self, status: int, body: bytes, *, chunked: bool = False) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not chunked:
                self.wfile.write(body)
                return
            for start in range(0, len(body), 7919):
                piece = body[start : start + 7919]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout tests)

    def _drip(self, *, header_done: bool) -> None:
        """One byte every 0.2 s, for minutes: in the body, or still in the headers."""
        page = (PAGES / "legacy-h100-no-pods.txt").read_bytes()
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(page)}\r\n\r\n".encode()
        drip = page if header_done else head + page
        self.close_connection = True
        try:
            if header_done:
                self.wfile.write(head)
            for index in range(len(drip)):
                self.wfile.write(drip[index : index + 1])
                if self.server.release.wait(0.2):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


@pytest.fixture(scope="module")
def server() -> Iterator[_Exporter]:
    exporter = _Exporter(("127.0.0.1", 0), _Handler)
    exporter.release = threading.Event()
    exporter.pages = {}
    exporter.seen_authorization = []
    exporter.expected_authorization = "Basic " + base64.b64encode(f"ridgeline:{SECRET}".encode()).decode()
    thread = threading.Thread(target=exporter.serve_forever, daemon=True)
    thread.start()
    yield exporter
    exporter.release.set()
    exporter.shutdown()
    exporter.server_close()


@pytest.fixture(scope="module")
def exporter_url(server: _Exporter) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


def _source(url: str, **settings: Any) -> ScrapeSource:
    source = ScrapeSource(SourceOptions(), ScrapeSettings(url=url, **settings))
    source.open()
    return source


def _read(url: str, timeout: float = 5.0) -> list[Sample]:
    source = _source(url, timeout_seconds=timeout)
    try:
        return source.read()
    finally:
        source.close()


def _by_gpu(samples: list[Sample]) -> dict[tuple[int, int | None], Sample]:
    return {s.entity.key: s for s in samples}


def _bounded(call: Callable[[], object], seconds: float) -> object:
    """Run call on a thread; fail (not hang) if it has not returned within `seconds`. Returns
    what it returned or raised."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as exc:  # handed back to the test
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return result[0]


def test_registry_builds_the_scrape_source() -> None:
    source = create_source("scrape", scrape_options(url="http://127.0.0.1:9400/metrics"))
    assert isinstance(source, ScrapeSource)
    assert source.name == "scrape"
    assert source.paced is False


# -- names, units and labels -------------------------------------------------------------------


def test_legacy_names_map_to_field_ids_with_pod_labels(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/legacy-h100-pods.txt"))
    assert set(samples) == {(0, None), (1, None)}
    busy = samples[(1, None)]
    assert busy.entity.uuid == "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
    assert busy.entity.model == H100
    assert busy.values[fields.DRAM_ACTIVE] == pytest.approx(0.712663)
    assert busy.values[fields.PIPE_TENSOR_ACTIVE] == pytest.approx(0.128875)
    assert busy.values[fields.SM_CLOCK] == 1755
    assert busy.values[fields.GPU_UTIL] == 100
    assert busy.values[fields.NVLINK_TX_BYTES] == 14829331456
    assert busy.attribution == Attribution(namespace="llm", pod="decode-7f9c4", container="server")
    assert samples[(0, None)].attribution is None  # empty pod labels: an unallocated GPU


def test_counter_families_are_read_under_their_dcgm_name(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/legacy-h100-pods.txt"))
    assert samples[(0, None)].values[fields.PCIE_TX_BYTES] == 1253412
    assert samples[(0, None)].values[fields.PCIE_RX_BYTES] == 2011983


def test_page_without_kubernetes_labels_has_no_attribution(exporter_url: str) -> None:
    samples = _read(f"{exporter_url}/metrics/legacy-h100-no-pods.txt")
    assert len(samples) == 1
    assert samples[0].attribution is None
    assert samples[0].values[fields.DRAM_ACTIVE] == pytest.approx(0.712663)


def test_fields_that_are_not_roofline_inputs_are_ignored(exporter_url: str) -> None:
    sample = _read(f"{exporter_url}/metrics/legacy-h100-no-pods.txt")[0]
    assert set(sample.values) <= set(readings.DCGM_NAMES)
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


def test_dcgm_4_6_names_read_field_203_in_percent(exporter_url: str) -> None:
    """DCGM 4.6 printed field 203 (percent) as DCGM_FI_DEV_GPU_UTIL_RATIO; read as a ratio, 87
    would be dropped and 1 % would read as 100 %."""
    samples = _by_gpu(_read(f"{exporter_url}/metrics/renamed-4.6-h100.txt"))
    assert samples[(0, None)].values[fields.GPU_UTIL] == 87.0
    assert samples[(1, None)].values[fields.GPU_UTIL] == 1.0
    assert samples[(0, None)].values[fields.GR_ENGINE_ACTIVE] == pytest.approx(0.912)
    assert samples[(0, None)].values[fields.SM_CLOCK] == 1980.0


def _util_page(values: list[str], *, clock_name: str) -> str:
    lines = []
    for gpu, value in enumerate(values):
        labels = f'gpu="{gpu}",UUID="GPU-{gpu}",modelName="{H100}"'
        lines.append(f"{clock_name}{{{labels}}} 1980")
        lines.append(f"DCGM_FI_DEV_GPU_UTIL_RATIO{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("values", "clock", "expected"),
    [
        (["1", "0"], "DCGM_FI_DEV_SM_CLOCK", [1.0, 0.0]),  # "%d": DCGM 4.6's INT64 field 203
        (["1.000000", "0.000000"], "DCGM_FI_DEV_SM_CLOCK", [100.0, 0.0]),  # "%f": 4.9's 1613
        (["1", "0"], "DCGM_FI_DEV_SM_CLOCK_HERTZ", [100.0, 0.0]),  # a 4.9 page re-served as "1"
        (["0.93", "1"], "DCGM_FI_DEV_SM_CLOCK", [93.0, 100.0]),  # one fraction: the family is a ratio
        (["45", "1"], "DCGM_FI_DEV_SM_CLOCK_HERTZ", [45.0, 1.0]),  # one value above 1: percent
        (["1.3e-1"], "DCGM_FI_DEV_SM_CLOCK", [13.0]),
    ],
)
def test_gpu_util_ratio_unit_is_told_by_the_page(
    values: list[str], clock: str, expected: list[float]
) -> None:
    samples = parse_page(_util_page(values, clock_name=clock), 1.0)
    assert [s.values[fields.GPU_UTIL] for s in samples] == pytest.approx(expected)


def test_gpu_util_legacy_name_wins_over_the_ambiguous_one() -> None:
    page = (
        f'DCGM_FI_DEV_GPU_UTIL_RATIO{{gpu="0",UUID="GPU-0",modelName="{H100}"}} 1\n'
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-0",modelName="{H100}"}} 64\n'
    )
    assert parse_page(page, 1.0)[0].values[fields.GPU_UTIL] == 64.0


def test_mig_instances_become_separate_entities_with_their_pods_and_profiles(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/mig-a100.txt"))
    assert set(samples) == {(0, 1), (0, 2)}
    first, second = samples[(0, 1)], samples[(0, 2)]
    assert first.entity.uuid == second.entity.uuid == "GPU-63bc0b91-2265-1b94-831c-15c41fe92675"
    assert first.values[fields.PIPE_TENSOR_ACTIVE] == pytest.approx(0.402)
    assert second.values[fields.DRAM_ACTIVE] == pytest.approx(0.84)
    assert first.attribution is not None and first.attribution.pod == "triton-7d9f8-abcde"
    assert second.attribution is not None and second.attribution.namespace == "batch"
    assert first.entity.profile == second.entity.profile == "3g.40gb"


def test_mig_profiles_per_instance_on_two_gpus(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/mig-a100-profiles.txt"))
    assert {key: s.entity.profile for key, s in samples.items()} == {
        (0, 1): "3g.20gb",
        (0, 2): "2g.10gb",
        (0, 3): "1g.5gb",
        (1, 1): "4g.20gb",
        (1, 2): "3g.20gb",
    }
    assert samples[(1, 1)].values[fields.DRAM_ACTIVE] == pytest.approx(0.45)
    assert samples[(1, 1)].entity.uuid == "GPU-1d2e3f40-5b6c-7d8e-9fa0-b1c2d3e4f506"  # the parent's


def test_mig_profile_flag_fills_in_a_missing_label() -> None:
    page = (
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="0",UUID="GPU-a",modelName="{H100}",GPU_I_ID="3"}} 0.5\n'
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="1",UUID="GPU-b",modelName="{H100}",GPU_I_ID="3",'
        f'GPU_I_PROFILE="1g.10gb"}} 0.5\n'
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="1",UUID="GPU-b",modelName="{H100}"}} 0.5\n'
    )
    hints = (MigProfileHint(gpu_instance=3, profile="3g.40gb"),)
    samples = _by_gpu(parse_page(page, 1.0, hints))
    assert samples[(0, 3)].entity.profile == "3g.40gb"  # from the flag
    assert samples[(1, 3)].entity.profile == "1g.10gb"  # the label wins
    assert samples[(1, None)].entity.profile is None  # a whole GPU has no profile


def test_page_without_profiling_fields_still_lists_every_gpu(exporter_url: str) -> None:
    samples = _by_gpu(_read(f"{exporter_url}/metrics/no-dcp-h100.txt"))
    assert set(samples) == {(0, None), (1, None)}
    # the power draw too (field 155), read since issue 19 for the clock-event verdict
    assert samples[(0, None)].values == {
        fields.SM_CLOCK: 1980.0,
        fields.GPU_UTIL: 97.0,
        fields.POWER_USAGE: 512.331,
    }
    assert samples[(1, None)].values == {
        fields.SM_CLOCK: 345.0,
        fields.GPU_UTIL: 0.0,
        fields.POWER_USAGE: 71.204,
    }
    assert samples[(0, None)].entity.uuid == "GPU-5a1c0e7d-3b2f-4c61-8d9e-0f1a2b3c4d5e"


def test_page_with_only_fields_ridgeline_does_not_read_still_lists_the_gpus(exporter_url: str) -> None:
    samples = _read(f"{exporter_url}/metrics/no-dcp-no-util-h100.txt")
    assert [(s.entity.gpu, s.values) for s in samples] == [(0, {}), (1, {})]


def test_edge_values_clamp_drop_and_blank(exporter_url: str) -> None:
    values = _read(f"{exporter_url}/metrics/edge-values.txt")[0].values
    assert values[fields.GR_ENGINE_ACTIVE] == 1.0  # 1.03: rounding above 1, clamped
    assert values[fields.SM_ACTIVE] is None  # 1.7: not a ratio, dropped
    assert values[fields.PIPE_TENSOR_ACTIVE] is None  # NaN
    assert values[fields.DRAM_ACTIVE] is None  # DCGM FP64 blank sentinel
    assert fields.DRAM_ACTIVE in values  # reported, but blank: None, never 0


def test_gpus_without_a_uuid_label_stay_distinct() -> None:
    """The sampler keys GPUs by (uuid, GPU instance): a page whose series lack UUID (relabelled
    away) must not give every GPU the same empty uuid, or all but one are dropped as duplicates."""
    page = (
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="0",modelName="{H100}"}} 0.5\n'
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="1",modelName="{H100}"}} 0.6\n'
    )
    uuids = [s.entity.uuid for s in parse_page(page, 1.0)]
    assert len(set(uuids)) == 2 and all(uuids)


def test_escaped_label_values_and_timestamps_are_read() -> None:
    page = (
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="0",UUID="GPU-0",modelName="{H100}",'
        'pod="a\\"b\\\\c",namespace="n,}{"}  0.25 1764432000000\n'
    )
    (sample,) = parse_page(page, 1.0)
    assert sample.values[fields.DRAM_ACTIVE] == 0.25
    assert sample.timestamp == 1764432000.0
    assert sample.attribution == Attribution(namespace="n,}{", pod='a"b\\c', container="")


# -- odd series are skipped and counted, not the page ------------------------------------------


def test_odd_gpu_labels_skip_their_series_and_keep_the_page(
    exporter_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    source = _source(f"{exporter_url}/metrics/odd-gpu-labels.txt")
    with caplog.at_level(logging.WARNING, logger="exporter.sources.scrape"):
        samples = _by_gpu(source.read())
        source.read()
    assert set(samples) == {(0, None), (1, None)}
    assert samples[(0, None)].values == {fields.DRAM_ACTIVE: 0.512, fields.PIPE_TENSOR_ACTIVE: 0.25}
    assert samples[(1, None)].values == {fields.PIPE_TENSOR_ACTIVE: 0.125}
    assert source.records_skipped == 2 * 5  # four odd labels and one bad value, on each page
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1  # once, not once per page or per series
    assert "bad_gpu_label: 4" in warnings[0] and "bad_line: 1" in warnings[0]


def test_a_page_whose_every_series_is_odd_names_why() -> None:
    reader = PageReader(1.0)
    reader.feed(b'DCGM_FI_PROF_DRAM_ACTIVE{gpu="\xc2\xb2"} 0.5\n')
    assert reader.finish() == []
    assert reader.skipped == {"bad_gpu_label": 1}


def test_a_line_longer_than_the_limit_is_skipped_and_the_rest_read() -> None:
    reader = PageReader(1.0)
    huge = b'DCGM_FI_PROF_DRAM_ACTIVE{gpu="0",pod="' + b"x" * 200_000 + b'"} 0.9\n'
    good = f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="1",UUID="GPU-1",modelName="{H100}"}} 0.5\n'.encode()
    for start in range(0, len(huge), 65536):
        reader.feed(huge[start : start + 65536])
    reader.feed(good)
    assert [(s.entity.gpu, s.values) for s in reader.finish()] == [(1, {fields.DRAM_ACTIVE: 0.5})]
    assert reader.skipped == {"line_too_long": 1}


def test_more_gpus_than_any_node_has_are_cut_off_and_counted() -> None:
    page = "".join(
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="{gpu}",UUID="GPU-{gpu}",modelName="{H100}"}} 0.5\n'
        for gpu in range(MAX_ENTITIES + 10)
    )
    reader = PageReader(1.0)
    reader.feed(page.encode())
    assert len(reader.finish()) == MAX_ENTITIES
    assert reader.skipped == {"too_many_entities": 10}


def test_a_label_set_per_line_reads_as_a_full_parse_would() -> None:
    """A page whose every series has its own label set (an id label per series) goes through the
    short gpu/GPU_I_ID lookup; a later series that brings the pod must still attribute the GPU,
    and an odd gpu label must still be skipped."""
    base = f'gpu="0",UUID="GPU-0",modelName="{H100}"'
    page = (
        f'DCGM_FI_PROF_DRAM_ACTIVE{{{base},serial="1"}} 0.5\n'
        f'DCGM_FI_DEV_FB_USED{{{base},serial="2"}} 10\n'
        f'DCGM_FI_DEV_FB_FREE{{{base},serial="3",namespace="llm",pod="decode-0"}} 10\n'
        f'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{base},serial="4",namespace="other",pod="late"}} 0.25\n'
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0²",UUID="GPU-0",serial="5"}} 0.9\n'
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{base},GPU_I_ID="x",serial="6"}} 0.9\n'
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{base},serial="7"}} 0.8\n'
    )
    reader = PageReader(1.0)
    reader.feed(page.encode())
    (sample,) = reader.finish()
    assert sample.attribution == Attribution(namespace="llm", pod="decode-0", container="")
    assert sample.values == {
        fields.DRAM_ACTIVE: 0.5,
        fields.PIPE_TENSOR_ACTIVE: 0.25,
        fields.GR_ENGINE_ACTIVE: 0.8,
    }
    assert reader.skipped == {"bad_gpu_label": 2}


def test_a_page_fed_byte_by_byte_parses_as_the_whole() -> None:
    page = (PAGES / "legacy-h100-pods.txt").read_bytes() + (PAGES / "mig-a100-profiles.txt").read_bytes()
    whole = PageReader(1.0)
    whole.feed(page)
    drip = PageReader(1.0)
    for index in range(len(page)):
        drip.feed(page[index : index + 1])
    assert drip.finish() == whole.finish()


# -- one deadline --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/drip-body", "/drip-headers", "/slow"])
def test_a_dripping_or_silent_upstream_times_out_by_the_deadline(exporter_url: str, path: str) -> None:
    """One byte every 0.2 s resets any per-read timeout; the whole-scrape deadline still ends it.
    The page would take minutes to drip; the read must give up well within 10 s of its 0.5 s."""
    outcome = _bounded(lambda: _read(f"{exporter_url}{path}", timeout=0.5), seconds=10)
    assert isinstance(outcome, SourceError)
    assert outcome.reason == "timeout"
    assert path in outcome.message and "0.5 s" in outcome.message


def test_the_sampler_marks_the_source_down_with_reason_timeout(exporter_url: str) -> None:
    options = scrape_options(url=f"{exporter_url}/drip-body", timeout_seconds=0.5)
    source = create_source("scrape", options)
    source.open()
    sampler = Sampler("scrape", options, load_catalog(), InferenceConfig(), source=source)
    assert _bounded(sampler.run_once, seconds=10) is False
    health = sampler.snapshot.source
    assert health.up is False and health.reason == "timeout"
    assert dict(health.errors_total) == {"timeout": 1}


def test_a_chunked_page_is_read_as_it_streams(server: _Exporter, exporter_url: str) -> None:
    server.pages["legacy.chunked"] = (PAGES / "legacy-h100-pods.txt").read_bytes()
    samples = _by_gpu(_read(f"{exporter_url}/page/legacy.chunked"))
    assert samples[(1, None)].values[fields.DRAM_ACTIVE] == pytest.approx(0.712663)


# -- failures, each with its own reason ----------------------------------------------------------


def test_http_500_is_reported_with_its_status(exporter_url: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(f"{exporter_url}/error")
    assert caught.value.reason == "http_status"
    assert "500" in caught.value.message


@pytest.mark.parametrize("path", ["/garbage", "/binary"])
def test_a_body_that_is_not_prometheus_text_is_a_parse_error(exporter_url: str, path: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(f"{exporter_url}{path}")
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


def test_an_unresolvable_name_is_a_connection_error_or_a_timeout() -> None:
    with pytest.raises(SourceError) as caught:
        _read("http://no-such-host.invalid:9400/metrics", timeout=5.0)
    assert caught.value.reason in ("connection", "timeout")
    assert "no-such-host.invalid" in caught.value.message


@pytest.mark.parametrize(
    "url", ["", "localhost:9400/metrics", "ftp://host/metrics", "http://", "http://h:x/"]
)
def test_open_rejects_urls_that_are_not_http(url: str) -> None:
    source = ScrapeSource(SourceOptions(), ScrapeSettings(url=url))
    with pytest.raises(SourceUnavailable) as caught:
        source.open()
    assert "--scrape-url" in caught.value.message


def test_source_keeps_working_after_a_failed_read(server: _Exporter, exporter_url: str) -> None:
    """A failed read is one error; the next read of the same URL, once healthy, succeeds."""
    source = _source(f"{exporter_url}/page/flaky")
    with pytest.raises(SourceError) as caught:
        source.read()
    assert caught.value.reason == "http_status"
    server.pages["flaky"] = (PAGES / "legacy-h100-no-pods.txt").read_bytes()
    assert len(source.read()) == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("DCGM_FI_PROF_DRAM_ACTIVE", (fields.DRAM_ACTIVE, 1.0)),
        ("DCGM_FI_PROF_DRAM_UTIL_RATIO", (fields.DRAM_ACTIVE, 1.0)),
        ("DCGM_FI_PROF_PCIE_TX_BYTES_total", (fields.PCIE_TX_BYTES, 1.0)),
        ("DCGM_FI_DEV_SM_CLOCK_HERTZ", (fields.SM_CLOCK, 1e-6)),
        ("DCGM_FI_DEV_GPU_UTIL_RATIO", None),  # unit told per page, not by name
        ("DCGM_FI_DEV_FB_FREE", None),
        ("DCGM_EXP_XID_ERRORS_COUNT", None),
        ("GRACT", None),
    ],
)
def test_metric_names_map_to_fields(name: str, expected: tuple[int, float] | None) -> None:
    assert metric_field(name) == expected


# -- authentication, and the password never shown ------------------------------------------------


def _auth_url(exporter_url: str, userinfo: str, page: str = "legacy-h100-no-pods.txt") -> str:
    return exporter_url.replace("http://", f"http://{userinfo}@") + f"/auth/metrics/{page}"


def test_basic_auth_from_the_url_is_sent_and_never_shown(server: _Exporter, exporter_url: str) -> None:
    encoded = SECRET.replace("@", "%40")
    source = _source(_auth_url(exporter_url, f"ridgeline:{encoded}"))
    assert len(source.read()) == 1
    assert server.seen_authorization[-1] == server.expected_authorization
    assert SECRET not in source.display_name and encoded not in source.display_name
    assert "ridgeline:xxxxx@" in source.display_name
    assert encoded not in repr(scrape_options(url=_auth_url(exporter_url, f"u:{encoded}")))


def test_an_unescaped_at_sign_in_the_password_is_read_too(exporter_url: str) -> None:
    assert len(_read(_auth_url(exporter_url, f"ridgeline:{SECRET}"))) == 1


def test_a_wrong_password_is_http_401_with_a_hint_and_no_password(exporter_url: str) -> None:
    with pytest.raises(SourceError) as caught:
        _read(_auth_url(exporter_url, "ridgeline:wrong-horse"))
    assert caught.value.reason == "http_status"
    assert "401" in caught.value.message and "credentials" in caught.value.message
    assert "wrong-horse" not in caught.value.message


def test_credentials_file_and_bearer_token_file_are_reread_each_scrape(
    server: _Exporter, exporter_url: str, tmp_path: Path
) -> None:
    auth = tmp_path / "auth"
    auth.write_text(f"ridgeline:{SECRET}\n")
    source = _source(
        f"{exporter_url}/auth/metrics/legacy-h100-no-pods.txt",
        client=HTTPClientConfig(basic_auth_file=auth),
    )
    assert len(source.read()) == 1
    auth.write_text("ridgeline:rotated-away\n")
    with pytest.raises(SourceError, match="401"):
        source.read()
    token = tmp_path / "token"
    token.write_text("abc.def.ghi\n")
    bearer = _source(
        f"{exporter_url}/auth/metrics/legacy-h100-no-pods.txt",
        client=HTTPClientConfig(bearer_token_file=token),
    )
    with pytest.raises(SourceError, match="401"):
        bearer.read()
    assert server.seen_authorization[-1] == "Bearer abc.def.ghi"


def test_unreadable_or_conflicting_credentials_fail_at_open(exporter_url: str, tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="--scrape-auth-file") as caught:
        _source(f"{exporter_url}/metrics/x", client=HTTPClientConfig(basic_auth_file=tmp_path / "missing"))
    assert caught.value.reason == "bad_credentials"
    (tmp_path / "bad").write_text("no-colon-here\n")
    with pytest.raises(SourceUnavailable, match="user:password"):
        _source(f"{exporter_url}/metrics/x", client=HTTPClientConfig(basic_auth_file=tmp_path / "bad"))
    with pytest.raises(SourceUnavailable, match="one way"):
        _source(_auth_url(exporter_url, "u:p"), client=HTTPClientConfig(bearer_token_file=tmp_path / "bad"))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:p%40ss@host:9400/metrics", "http://u:xxxxx@host:9400/metrics"),
        ("https://token@host/metrics", "https://xxxxx@host/metrics"),
        ("http://host:9400/metrics", "http://host:9400/metrics"),
        ("http://u:pw@[::1]:9400/m", "http://u:xxxxx@[::1]:9400/m"),
        ("http://u:pw@[bad/m", "http://u:xxxxx@[bad/m"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_credentials(url) == shown


def test_a_bad_url_error_does_not_print_its_password() -> None:
    source = ScrapeSource(SourceOptions(), ScrapeSettings(url="ftp://user:hunter2@host/metrics"))
    with pytest.raises(SourceUnavailable) as caught:
        source.open()
    assert "hunter2" not in caught.value.message


# -- memory does not grow with the page ----------------------------------------------------------


def padded_page(mebibytes: int, gpus: int = 8) -> bytes:
    """A valid page of about `mebibytes` MiB: the GPUs' roofline fields, then families Ridgeline
    does not read (DCGM ones and others) until the size is reached."""
    labels = [
        f'gpu="{gpu}",UUID="GPU-{gpu:08d}",pci_bus_id="00000000:{gpu:02X}:00.0",device="nvidia{gpu}",'
        f'modelName="{H100}",Hostname="node",DCGM_FI_DRIVER_VERSION="570.124.06"'
        for gpu in range(gpus)
    ]
    head = "".join(
        f"DCGM_FI_PROF_DRAM_ACTIVE{{{label}}} 0.5\nDCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{label}}} 0.25\n"
        for label in labels
    ).encode()
    block = "".join(
        f"# HELP DCGM_FI_DEV_PAD_{n} Padding.\n# TYPE DCGM_FI_DEV_PAD_{n} gauge\n"
        + "".join(f"DCGM_FI_DEV_PAD_{n}{{{label}}} {n}\n" for label in labels)
        + f'go_memstats_pad{{n="{n}"}} 1\n'
        for n in range(100)
    ).encode()
    return head + block * (mebibytes * 1024 * 1024 // len(block) + 1)


RSS_PROBE = """
import sys
from exporter.sources.base import SourceOptions
from exporter.sources.scrape import ScrapeSettings, ScrapeSource

def status_kib(key):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(key + ":"))

warm = ScrapeSource(SourceOptions(), ScrapeSettings(url=sys.argv[1], timeout_seconds=60))
warm.open()
warm.read()
before = status_kib("VmRSS")
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # reset the peak (VmHWM) to the current RSS
source = ScrapeSource(SourceOptions(), ScrapeSettings(url=sys.argv[2], timeout_seconds=60))
source.open()
assert len(source.read()) == 8
print(status_kib("VmHWM") - before)
"""
"""Run as its own process: prints how far a scrape of the page at argv[2] raised peak RSS (KiB)
above the RSS after a warm-up scrape of argv[1]."""


def test_a_large_page_costs_no_more_memory_than_a_small_one(server: _Exporter, exporter_url: str) -> None:
    """Peak RSS of a real process reading a 24 MiB page, above its RSS after a small page: holding
    the page (as bytes, then as text) would add 48 MiB or more, one copy 24 MiB; streaming adds a
    few chunks and the allocator's arenas (7.6-8.3 MiB on this machine, so the bound is 16 MiB)."""
    server.pages["padded"] = padded_page(24)
    try:
        result = subprocess.run(
            [sys.executable, "-c", RSS_PROBE, f"{exporter_url}/metrics/legacy-h100-no-pods.txt",
             f"{exporter_url}/page/padded"],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    finally:
        del server.pages["padded"]
    assert result.returncode == 0, result.stderr
    extra_kib = int(result.stdout.strip())
    assert extra_kib < 16 * 1024, f"reading a 24 MiB page raised peak RSS by {extra_kib} KiB"


def test_tls_settings_for_an_http_scrape_url_fail_at_open(exporter_url: str, tmp_path: Path) -> None:
    """The one TLS rule (HTTPClientConfig.context_for) holds for the scrape source as for top and
    report: a CA for an http:// URL is refused at open, naming its flag, not silently unused."""
    client = HTTPClientConfig(tls_config=TLSConfig(ca_file=tmp_path / "ca.crt"))
    with pytest.raises(
        SourceUnavailable, match=r"tls.ca-file is set, but the URL is plain http://"
    ) as caught:
        _source(f"{exporter_url}/metrics/x", client=client)
    assert caught.value.reason == "bad_credentials"
