"""Verdicts from dcgm-exporter pages, end to end through the real scrape source on loopback.

A dcgm-exporter without the profiling (DCP) counters: a real `ridgeline serve --source scrape`,
read back through /metrics and GET /classify. Before issue 9 every GPU of such a node vanished
from /metrics without a word; now each stays, naming the fields it lacks, and /classify says why
there is no verdict. A MIG page (GPU_I_PROFILE="3g.40gb"): each instance gets its slices' roof.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from conftest import DcgmExporterPage, http_get, serve_process
from prometheus_client.parser import text_string_to_metric_families
from source_kit import scrape_options
from test_serve_cli import poll

from exporter.catalog import Catalog, load_catalog
from exporter.collectors import DEFAULT_COLLECTORS
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sampler import Sampler
from exporter.sources import create_source
from exporter.sources.scrape import ScrapeSource

PROFILING = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_OCCUPANCY",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
}

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def throttled_node() -> Iterator[str]:
    """`serve --source scrape` on tests/data/dcgm-exporter/throttled-h100.txt over loopback: GPU 0
    a GEMM held at 1185 MHz by its power cap, GPU 1 at 1410 MHz by heat, GPU 2 at full clock."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), DcgmExporterPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/throttled-h100.txt"
    try:
        with serve_process("--source", "scrape", "--scrape-url", url) as (base, _):
            deadline = time.monotonic() + 20
            while '"gpu": 2' not in http_get(base + "/classify")[1]:
                assert time.monotonic() < deadline, "the page's three GPUs did not show"
                time.sleep(0.1)
            yield base
    finally:
        server.shutdown()
        server.server_close()


def test_gpus_without_profiling_counters_stay_and_say_why(exporter_url: str) -> None:
    url = f"{exporter_url}/no-dcp-h100-2gpus.txt"
    with serve_process("--source", "scrape", "--scrape-url", url) as (base, _):
        poll(base, "/readyz", 200)
        text = poll(base, "/metrics", 200)
        missing: dict[str, set[str]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "ridgeline_profiling_fields_missing":
                    missing.setdefault(sample.labels["gpu"], set()).update(sample.labels["fields"].split(","))
                elif sample.name.startswith("ridgeline_") and "gpu" in sample.labels:
                    pytest.fail(f"{sample.name} for a GPU with no profiling reading: {sample.labels}")
        # and the link byte fields 1009-1012: an H100 has NVLink and PCIe figures to judge them by
        links = {"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"}
        links |= {"DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}
        assert missing == {"0": PROFILING | links, "1": PROFILING | links}

        answer = json.loads(poll(base, "/classify", 200))
        assert [g["gpu"] for g in answer["gpus"]] == [0, 1]
        for gpu in answer["gpus"]:
            assert gpu["reading"] == "none" and gpu["regime"] is None
            assert set(gpu["missing_fields"]) == PROFILING
            assert "DCP" in gpu["no_verdict_reason"]
            assert "runbooks.md#ridgelineprofilingcountersmissing" in gpu["no_verdict_reason"]


def _sampled_twice(url: str) -> tuple[Sampler, ScrapeSource, Catalog]:
    """A sampler over the scrape source at `url`, after two rounds (the second has intervals)."""
    options = scrape_options(url=url)
    source = create_source("scrape", options)
    source.open()
    catalog = load_catalog()
    sampler = Sampler("scrape", options, catalog, InferenceConfig(), source=source)
    for _ in range(2):
        assert sampler.run_once()
    return sampler, source, catalog


def test_mig_instances_from_gpu_i_profile_get_their_sms_roof(exporter_url: str) -> None:
    sampler, source, catalog = _sampled_twice(f"{exporter_url}/mig-a100.txt")
    a100 = catalog.lookup("a100-sxm4-80gb")
    instances = [g for g in sampler.snapshot.gpus if g.entity.gpu_instance is not None]
    assert {g.entity.profile for g in instances} == {"3g.40gb"}
    for gpu in instances:
        roof = gpu.estimate.roof if gpu.estimate else None
        assert roof is not None
        assert roof.peak_flop_per_second == pytest.approx(a100.peak_flop_per_second("bf16") * 42 / 108)
        assert roof.bandwidth_bytes_per_second == pytest.approx(a100.bandwidth_bytes_per_second * 4 / 8)
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    samples = [s for family in text_string_to_metric_families(body.decode()) for s in family.samples]
    roof_keys = ("card", "precision", "mig_profile")
    card_peaks = {
        tuple(s.labels.get(k) for k in roof_keys): s.value
        for s in samples
        if s.name == "ridgeline_card_peak_flop_per_second"
    }
    # each GPU's peak: its roof's constant, joined through ridgeline_gpu_info as the rules do
    peaks = [
        card_peaks[tuple(s.labels.get(k) for k in roof_keys)]
        for s in samples
        if s.name == "ridgeline_gpu_info" and "precision" in s.labels
    ]
    assert len(peaks) == 2
    assert math.fsum(peaks) <= a100.peak_flop_per_second("bf16")  # two 3g.40gb: 84 of its 108 SMs
    source.close()


H100_INSTANCE_SMS = {"1g.10gb": 16, "1g.20gb": 26, "2g.20gb": 32, "3g.40gb": 60, "4g.40gb": 64}
"""`nvidia-smi mig -lgip`'s SM column on an H100 SXM5 80GB (exporter/data/cards.yaml, mig_sms)."""


def test_h100_mig_instances_get_their_sms_share_not_a_seventh_per_slice(exporter_url: str) -> None:
    sampler, source, catalog = _sampled_twice(f"{exporter_url}/mig-h100-profiles.txt")
    source.close()
    h100 = catalog.lookup("h100-sxm")
    instances = [g for g in sampler.snapshot.gpus if g.entity.gpu_instance is not None]
    assert sorted(g.entity.profile or "" for g in instances) == sorted(
        ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb", "4g.40gb", "1g.20gb", "2g.20gb"]
    )
    per_gpu: dict[int, float] = {}
    for gpu in instances:
        estimate = gpu.estimate
        assert estimate is not None and estimate.roof is not None and gpu.entity.profile is not None
        share = H100_INSTANCE_SMS[gpu.entity.profile] / 132
        assert estimate.roof.peak_flop_per_second == pytest.approx(989.5e12 * share)
        assert estimate.regime == "compute_bound"
        per_gpu[gpu.entity.gpu] = per_gpu.get(gpu.entity.gpu, 0.0) + estimate.roof.peak_flop_per_second
    # the instances of each card never hold more than the card: 124 and 122 of its 132 SMs
    assert per_gpu[0] == pytest.approx(989.5e12 * 124 / 132)
    assert per_gpu[1] == pytest.approx(989.5e12 * 122 / 132)
    assert all(total < h100.peak_flop_per_second("bf16") for total in per_gpu.values())


def _sampled(exporter_url: str, page: str) -> Sampler:
    options = scrape_options(url=f"{exporter_url}/{page}")
    source = create_source("scrape", options)
    source.open()
    sampler = Sampler("scrape", options, load_catalog(), InferenceConfig(), source=source)
    for _ in range(2):
        assert sampler.run_once()
    source.close()
    return sampler


@pytest.mark.parametrize(
    ("page", "thermal"),
    [("throttled-h100.txt", "sw_thermal_slowdown"), ("throttled-legacy-h100.txt", "hw_thermal_slowdown")],
)
def test_a_gemm_at_a_reduced_clock_is_compute_bound_naming_the_cause(
    exporter_url: str, page: str, thermal: str
) -> None:
    # field 112 under its new (DCGM 3.3+) and old names, power draw against its limit (155/160)
    sampler = _sampled(exporter_url, page)
    by_gpu = {g.entity.gpu: g.estimate for g in sampler.snapshot.gpus}
    capped, hot, full = by_gpu[0], by_gpu[1], by_gpu[2]
    assert capped is not None and hot is not None and full is not None
    # 85 % tensor at 1185 MHz: near its wall at that clock (t·k = 0.55 of the quoted peak, 0.59 of
    # the 0.93 wall: once read as latency-bound, "fewer registers per block")
    assert capped.regime == hot.regime == full.regime == "compute_bound"
    assert capped.clock_ratio == pytest.approx(1185 / 1830)
    assert capped.clock_event_reasons == ("sw_power_cap",) and capped.clock_causes == ("power cap",)
    assert "reduced clock (1185 of the 1830 MHz" in capped.lever and "power cap" in capped.lever
    assert "gives back up to 54% more FLOP/s" in capped.lever and "nvidia-smi -pl" in capped.lever
    assert hot.clock_event_reasons == (thermal,) and hot.clock_causes == ("thermal",)
    assert "gives back up to 30% more FLOP/s" in hot.lever and "airflow" in hot.lever
    assert full.clock_causes == () and "reduced clock" not in full.lever
    assert capped.achieved_flop_per_second == pytest.approx(0.85 * 989.5e12 * 1185 / 1830)
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    causes = {
        (s.labels["gpu"], s.labels["cause"])
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "ridgeline_clock_event_active"
    }
    assert causes == {("0", "power_cap"), ("1", "thermal")}
    ratios = {
        s.labels["gpu"]: s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "ridgeline_clock_ratio"
    }
    assert ratios == pytest.approx({"0": 1185 / 1830, "1": 1410 / 1830, "2": 1.0})
    off, _ = MetricsEndpoint(lambda: sampler.snapshot, collectors=DEFAULT_COLLECTORS - {"clocks"}).render(
        None
    )
    assert b"ridgeline_clock_event_active" not in off and b"ridgeline_clock_ratio" not in off


def test_a_b200_under_dcgm_4_7_names_has_an_unknown_clock_ratio(exporter_url: str) -> None:
    sampler = _sampled(exporter_url, "renamed-4.9-b200.txt")
    (gpu,) = sampler.snapshot.gpus
    estimate = gpu.estimate
    assert estimate is not None and estimate.card == "b200" and estimate.regime == "compute_bound"
    assert estimate.clock_ratio is None  # no published basis: unknown, never a silent 1.0
    b200 = load_catalog().lookup("b200")
    assert estimate.achieved_flop_per_second == pytest.approx(0.9 * b200.peak_flop_per_second("bf16"))
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    assert b"ridgeline_clock_ratio{" not in body
