"""The interconnect wall (issue 19): DCGM's NVLink and PCIe byte rates against each card's
per-direction bandwidth, through the real sources.

The data is written from published facts: an H100 SXM's NVLink is 900 GB/s both directions
together, 450 each way, and its PCIe Gen5 x16 128 GB/s, 64 each way (docs/cards.md). An NCCL
all-reduce holding NVLink at 84 % of 450 GB/s (378 GB/s TX, 376 RX) runs its reduction on a few
SMs (SM_ACTIVE 0.18, tensor 0.02) and streams HBM at about twice the link rate (DRAM_ACTIVE 0.24
of 3.35 TB/s); a host-to-device copy at 55 GB/s (86 % of PCIe's 64) runs on the copy engines
with the SMs and GR engine idle. Before issue 19 the first was latency-bound (look at the host)
and the second idle.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import http_get, serve_process
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from source_kit import replay_options, scrape_options
from test_serve_cli import poll

from exporter import roofline
from exporter.catalog import load_catalog
from exporter.cli import main
from exporter.collectors import DEFAULT_COLLECTORS
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.roofline import (
    LEVER_INTERCONNECT_NVLINK,
    LEVER_INTERCONNECT_PCIE,
    CounterReading,
    LinkLoad,
    Thresholds,
    judge_counters,
)
from exporter.sampler import Sampler
from exporter.sources import create_source
from exporter.sources.base import EndOfStream

DATA = Path(__file__).parent / "data"
REPLAY = DATA / "replay" / "links-h100.jsonl"
NVLINK_H100 = 450e9
PCIE_H100 = 64e9
LINK_FIELD_IDS = ("1009", "1010", "1011", "1012")


def _replayed(path: Path) -> Sampler:
    options = replay_options(path=str(path), speed=None)
    source = create_source("replay", options)
    source.open()
    sampler = Sampler("replay", options, load_catalog(), InferenceConfig(), source=source)
    while True:
        try:
            sampler.ingest(source.read())
        except EndOfStream:
            return sampler


def _by_gpu(sampler: Sampler) -> dict[int, Any]:
    return {gpu.entity.gpu: gpu for gpu in sampler.snapshot.gpus}


# ---- a replay file -------------------------------------------------------------------------


def test_an_all_reduce_and_a_host_copy_from_a_replay_are_interconnect_bound() -> None:
    gpus = _by_gpu(_replayed(REPLAY))
    allreduce, copy = gpus[0].estimate, gpus[1].estimate
    assert allreduce is not None and copy is not None
    assert (allreduce.regime, allreduce.raw_regime, allreduce.link) == ("interconnect_bound",) * 2 + (
        "nvlink",
    )
    assert allreduce.lever == LEVER_INTERCONNECT_NVLINK
    loads = dict(allreduce.link_utilization)
    assert loads["nvlink"] == pytest.approx(378e9 / NVLINK_H100)  # the busier direction, TX
    assert loads["pcie"] == pytest.approx(2.3e9 / PCIE_H100)
    assert (copy.regime, copy.link, copy.lever) == ("interconnect_bound", "pcie", LEVER_INTERCONNECT_PCIE)
    assert dict(copy.link_utilization)["pcie"] == pytest.approx(55.18e9 / PCIE_H100)
    # the raw regime is integrated: nine 1 s intervals after the first sample
    assert gpus[0].inference.totals.regime_seconds["interconnect_bound"] == 9.0
    assert gpus[0].inference.totals.regime_seconds["latency_bound"] == 0.0


def test_without_link_counters_nothing_changes_and_the_missing_fields_say_which(tmp_path: Path) -> None:
    bare = tmp_path / "no-links.jsonl"
    lines = []
    for line in REPLAY.read_text().splitlines():
        row = json.loads(line)
        row["fields"] = {k: v for k, v in row["fields"].items() if k not in LINK_FIELD_IDS}
        lines.append(json.dumps(row))
    bare.write_text("\n".join(lines) + "\n")
    gpus = _by_gpu(_replayed(bare))
    allreduce, copy = gpus[0].estimate, gpus[1].estimate
    assert allreduce is not None and copy is not None
    assert (allreduce.regime, allreduce.lever) == ("latency_bound", roofline.LEVER_LATENCY_STARVED)
    assert copy.regime == "idle"
    assert allreduce.link_utilization == () and allreduce.link is None
    assert gpus[0].inference.missing_link_fields == (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
    )
    body, _ = MetricsEndpoint(lambda: _replayed(bare).snapshot).render(None)
    missing = {
        field
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "ridgeline_profiling_fields_missing" and s.labels["gpu"] == "0"
        for field in s.labels["fields"].split(",")
    }
    assert missing == {f"DCGM_FI_PROF_{link}_{d}_BYTES" for link in ("PCIE", "NVLINK") for d in ("TX", "RX")}


# ---- a dcgm-exporter page on loopback, through a real daemon ---------------------------------


def test_a_scraped_page_tells_each_link_wall_from_the_others(exporter_url: str) -> None:
    options = scrape_options(url=f"{exporter_url}/links-h100.txt")
    source = create_source("scrape", options)
    source.open()
    sampler = Sampler("scrape", options, load_catalog(), InferenceConfig(), source=source)
    for _ in range(2):
        assert sampler.run_once()
    gpus = _by_gpu(sampler)
    regimes = {i: (g.estimate.regime, g.estimate.link) for i, g in gpus.items() if g.estimate}
    assert regimes == {
        0: ("interconnect_bound", "nvlink"),  # the all-reduce
        1: ("compute_bound", None),  # a GEMM whose all-reduce overlaps it: the tensor wall binds
        2: ("interconnect_bound", "pcie"),  # a host-to-device copy
        3: ("memory_bound", None),  # decode streaming weights, PCIe busy too: HBM binds
    }
    with_links = DEFAULT_COLLECTORS | {"links"}  # off by default (docs/rules-and-dashboards.md)
    body, _ = MetricsEndpoint(lambda: sampler.snapshot, collectors=with_links).render(None)
    assert b"ridgeline_link_bytes_per_second" not in MetricsEndpoint(lambda: sampler.snapshot).render(None)[0]
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    loads = {(labels["gpu"], labels["link"]): v for labels, v in found["ridgeline_link_utilization_ratio"]}
    assert loads[("0", "nvlink")] == pytest.approx(0.84)
    assert loads[("2", "pcie")] == pytest.approx(55.18e9 / PCIE_H100)
    rates = {
        (labels["gpu"], labels["link"], labels["direction"]): v
        for labels, v in found["ridgeline_link_bytes_per_second"]
    }
    assert rates[("0", "nvlink", "tx")] == 378e9 and rates[("0", "nvlink", "rx")] == 376.2e9
    current = {
        labels["gpu"]
        for labels, v in found["ridgeline_regime"]
        if labels["regime"] == "interconnect_bound" and v == 1
    }
    assert current == {"0", "2"}


def _post(base: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base}/classify", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


ALL_REDUCE = {
    "card": "h100-sxm",
    "gr_engine_active": 0.93,
    "sm_active": 0.18,
    "sm_occupancy": 0.06,
    "tensor_active": 0.02,
    "dram_active": 0.24,
    "fp64_active": 0.0,
    "fp32_active": 0.03,
    "fp16_active": 0.01,
    "nvlink_tx_bytes_per_second": 378e9,
    "nvlink_rx_bytes_per_second": 376.2e9,
}


@pytest.mark.slow
def test_the_daemon_answers_the_link_wall_on_metrics_and_classify(exporter_url: str) -> None:
    url = f"{exporter_url}/links-h100.txt"
    with serve_process("--source", "scrape", "--scrape-url", url) as (base, _):
        poll(base, "/readyz", 200)
        live = json.loads(poll(base, "/classify", 200))
        by_gpu = {g["gpu"]: g for g in live["gpus"]}
        assert by_gpu[0]["regime"] == "interconnect_bound" and by_gpu[0]["link"] == "nvlink"
        assert by_gpu[0]["link_utilization"]["nvlink"] == pytest.approx(0.84)
        assert by_gpu[2]["lever"] == LEVER_INTERCONNECT_PCIE
        answer = _post(base, ALL_REDUCE)
        assert (answer["regime"], answer["link"]) == ("interconnect_bound", "nvlink")
        assert answer["lever"] == LEVER_INTERCONNECT_NVLINK
        assert answer["link_utilization"] == {"nvlink": pytest.approx(0.84)}
        assert answer["link_note"] is None
        bare = _post(base, {k: v for k, v in ALL_REDUCE.items() if "bytes" not in k})
        assert bare["regime"] == "latency_bound" and bare["link_utilization"] == {}
        assert "1009-1012" in bare["link_note"]
        status, cards = http_get(f"{base}/cards")
        assert status == 200
        h100 = next(c for c in json.loads(cards) if c["key"] == "h100-sxm")
        assert h100["link_bytes_per_second"] == {"nvlink": NVLINK_H100, "pcie": PCIE_H100}


def test_the_cli_names_the_link_and_its_load(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["classify"]
    for name, value in ALL_REDUCE.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "verdict: interconnect-bound" in out
    assert "links: nvlink 84% of the per-direction bandwidth" in out
    assert f"lever: {LEVER_INTERCONNECT_NVLINK}" in out


# ---- the rules ---------------------------------------------------------------------------------

TH = Thresholds()
BUSY_QUIET = CounterReading(dram_active=0.24, tensor_active=0.02, gr_engine_active=0.93, sm_active=0.18)


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        (LinkLoad(nvlink=0.84), ("interconnect_bound", "nvlink")),
        (LinkLoad(nvlink=0.84, pcie=0.9), ("interconnect_bound", "pcie")),  # the busier link
        (LinkLoad(nvlink=0.48), ("interconnect_bound", "nvlink")),  # θ · link_wall exactly
        (LinkLoad(nvlink=0.47), ("latency_bound", None)),  # below: not near
        (LinkLoad(), ("latency_bound", None)),
        (None, ("latency_bound", None)),
    ],
)
def test_a_link_near_its_wall_is_judged_with_theta_times_the_link_wall(
    load: LinkLoad | None, expected: tuple[str, str | None]
) -> None:
    call = judge_counters(BUSY_QUIET, TH, links=load)
    assert (call.regime, call.link) == expected


def test_a_saturated_link_on_a_quiet_gpu_is_not_idle_but_its_gaps_stay_unknown() -> None:
    quiet = CounterReading(gr_engine_active=0.01, dram_active=0.05, tensor_active=0.0)
    assert judge_counters(quiet, TH).regime == "idle"
    assert judge_counters(quiet, TH, links=LinkLoad(pcie=0.86)).regime == "interconnect_bound"
    # without DRAM, HBM could be the wall: unknown, naming the field, as for latency-bound
    no_dram = CounterReading(gr_engine_active=0.9, tensor_active=0.02)
    call = judge_counters(no_dram, TH, links=LinkLoad(nvlink=0.9))
    assert (call.regime, call.missing) == ("unknown", ("dram_active",))


def test_a_lower_link_wall_calls_a_link_near_sooner() -> None:
    load = LinkLoad(nvlink=0.4)
    assert judge_counters(BUSY_QUIET, TH, links=load).regime == "latency_bound"
    assert judge_counters(BUSY_QUIET, Thresholds(link_wall=0.6), links=load).regime == "interconnect_bound"


def test_a_mig_instance_has_no_link_wall() -> None:
    card = load_catalog().lookup("h100-sxm")
    from exporter.inference import link_bandwidths_of

    assert link_bandwidths_of(card, instance=True) == {}
    assert link_bandwidths_of(card, instance=False) == {"nvlink": NVLINK_H100, "pcie": PCIE_H100}


_ratio = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0))
_readings = st.builds(
    CounterReading,
    dram_active=_ratio,
    tensor_active=_ratio,
    gr_engine_active=_ratio,
    sm_active=_ratio,
    sm_occupancy=_ratio,
    fp64_active=_ratio,
    fp32_active=_ratio,
    fp16_active=_ratio,
    clock_ratio=st.floats(min_value=0.05, max_value=1.0),
)
_loads = st.builds(
    LinkLoad,
    nvlink=st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.5)),
    pcie=st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.5)),
)


@settings(max_examples=400, deadline=None)
@given(reading=_readings, load=_loads)
def test_a_saturated_link_never_turns_a_wall_into_anything_else(
    reading: CounterReading, load: LinkLoad
) -> None:
    """Adding any link load, a saturated one included, to a compute- or memory-bound reading
    leaves its regime, pipe and lever as they were: a wall near binds before the link."""
    alone = judge_counters(reading, TH, precision="bf16", precisions=("bf16", "fp8"))
    linked = judge_counters(reading, TH, precision="bf16", precisions=("bf16", "fp8"), links=load)
    saturated = judge_counters(
        reading, TH, precision="bf16", precisions=("bf16", "fp8"), links=LinkLoad(nvlink=1.0, pcie=1.0)
    )
    if alone.regime in ("compute_bound", "memory_bound"):
        assert linked == alone and saturated == alone
    if linked.regime == "interconnect_bound":
        assert alone.regime in ("latency_bound", "idle", "unknown") and linked.link is not None
