"""The per-workload counters the rules read: gains carried across GPUs that change pods, restarts,
MIG parents, and the bounds on what is kept (exporter/sampling/workloads.py)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import EntityInference, InferenceConfig, Totals
from exporter.roofline import REGIMES
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sampling import workloads
from exporter.sampling.workloads import WorkloadLedger
from exporter.sources import SourceOptions
from exporter.state import GpuState, WorkloadKey, WorkloadTotals

H100 = "NVIDIA H100 80GB HBM3"
BUSY = {fields.DRAM_ACTIVE: 0.7, fields.PIPE_TENSOR_ACTIVE: 0.1, fields.GR_ENGINE_ACTIVE: 0.95}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _gpu(
    index: int, pod: str | None, idle: float, *, flop: float | None = None, mig_parent: bool = False
) -> GpuState:
    seconds: dict[str, float] = {**dict.fromkeys(REGIMES, 0.0), "idle": idle}
    entity = Entity(index, f"GPU-{index}", H100)
    inference = EntityInference(
        entity=entity,
        timestamp=0.0,
        smoothing=None,
        totals=Totals(regime_seconds=seconds, flop_total=flop),
        card_key="h100-sxm",
    )
    held = None if pod is None else Attribution("team", pod, "main")
    return GpuState(entity=entity, attribution=held, inference=inference, mig_parent=mig_parent)


def _idle(records: tuple[WorkloadTotals, ...]) -> dict[str, float]:
    return {r.key.pod or "": r.regime_seconds["idle"] for r in records}


def test_a_gpu_that_changes_pods_adds_only_what_it_gained_in_each() -> None:
    ledger = WorkloadLedger(Clock())
    ledger.update([_gpu(0, "a", 10.0), _gpu(1, "a", 5.0)])
    assert _idle(ledger.update([_gpu(0, "a", 20.0), _gpu(1, "a", 6.0)])) == {"a": 26.0}
    moved = ledger.update([_gpu(0, "b", 25.0), _gpu(1, "a", 7.0)])
    assert _idle(moved) == {"a": 27.0, "b": 5.0}  # a keeps GPU 0's past, b gets its gain
    assert [r.key for r in moved] == [
        WorkloadKey(card="h100-sxm", namespace="team", pod="a"),
        WorkloadKey(card="h100-sxm", namespace="team", pod="b"),
    ]


def test_a_pod_without_its_namespace_or_name_is_nobody_s_workload() -> None:
    """The rules select the pods' workloads by `namespace!=""`: no workload has one without the other."""
    half = [_gpu(0, "a", 1.0), _gpu(1, "b", 1.0), _gpu(2, "c", 1.0)]
    half[0] = half[0]._replace(attribution=Attribution("", "a", "main"))
    half[1] = half[1]._replace(attribution=Attribution("team", "", "main"))
    keys = {gpu.workload for gpu in half}
    assert keys == {WorkloadKey(card="h100-sxm"), WorkloadKey(card="h100-sxm", namespace="team", pod="c")}


def test_a_counter_that_goes_back_adds_its_new_value() -> None:
    ledger = WorkloadLedger(Clock())
    ledger.update([_gpu(0, "a", 100.0, flop=5e12)])
    after = ledger.update([_gpu(0, "a", 3.0, flop=1e12)])  # the GPU's counters started over
    assert _idle(after) == {"a": 103.0}
    assert after[0].flop_total == 6e12


def test_a_mig_parent_adds_nothing() -> None:
    ledger = WorkloadLedger(Clock())
    records = ledger.update([_gpu(0, "a", 50.0, mig_parent=True), _gpu(1, "a", 2.0)])
    assert _idle(records) == {"a": 2.0}


def test_a_workload_nobody_holds_stays_for_its_retention_then_goes() -> None:
    clock = Clock()
    ledger = WorkloadLedger(clock)
    ledger.update([_gpu(0, "a", 1.0)])
    clock.now = 10.0
    ledger.update([_gpu(0, "b", 2.0)])
    clock.now = workloads.WORKLOAD_RETENTION_SECONDS  # a was last held at 0
    assert set(_idle(ledger.update([_gpu(0, "b", 3.0)]))) == {"a", "b"}
    clock.now += 1.0
    assert _idle(ledger.update([_gpu(0, "b", 4.0)])) == {"b": 3.0}  # its gains since 1.0


def test_unheld_workloads_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloads, "MAX_IDLE_WORKLOADS", 3)
    clock = Clock()
    ledger = WorkloadLedger(clock)
    for second in range(6):
        clock.now = float(second)
        records = ledger.update([_gpu(0, f"p{second}", float(second))])
    assert sorted(_idle(records)) == ["p2", "p3", "p4", "p5"]  # three unheld, the newest


def test_workloads_let_go_at_once_are_ordered_even_when_one_has_no_pod() -> None:
    """Two workloads unheld since the same update, one without a pod: their keys hold None beside
    a name, which Python cannot compare, so the ledger orders them by when they were held alone."""
    clock = Clock()
    ledger = WorkloadLedger(clock)
    ledger.update([_gpu(0, None, 1.0), _gpu(1, "a", 1.0)])
    clock.now = 1.0
    assert set(_idle(ledger.update([_gpu(0, "b", 2.0), _gpu(1, "b", 2.0)]))) == {"", "a", "b"}


def test_a_gpu_that_departs_and_returns_is_not_counted_twice() -> None:
    clock = Clock()
    ledger = WorkloadLedger(clock)
    ledger.update([_gpu(0, "a", 10.0), _gpu(1, "a", 10.0)])
    clock.now = 60.0
    ledger.update([_gpu(1, "a", 20.0)])  # GPU 0 fell off the bus; its totals are kept
    clock.now = 120.0
    assert _idle(ledger.update([_gpu(0, "a", 10.0), _gpu(1, "a", 30.0)])) == {"a": 40.0}
    assert ledger.gpus_kept == 2


def _page(sampler: Sampler) -> dict[str, dict[tuple[str, ...], float]]:
    body, _ = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=False).render(None)
    page: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name.startswith("ridgeline_workload_"):
                key = tuple(sample.labels.get(name, "") for name in ("pod", "regime", "cause"))
                page.setdefault(sample.name, {})[key] = sample.value
    return page


def _batch(second: int, pods: Mapping[int, str]) -> list[Sample]:
    return [
        Sample(1000.0 + second, Entity(gpu, f"GPU-{gpu}", H100), BUSY, Attribution("team", pod, "main"))
        for gpu, pod in pods.items()
    ]


def test_the_workload_families_follow_the_gpus_through_a_pod_change() -> None:
    sampler = Sampler("scrape", SourceOptions(), load_catalog(), InferenceConfig())
    for second in range(4):
        sampler.ingest(_batch(second, {0: "a", 1: "a"}))
    before = _page(sampler)
    for second in range(4, 7):
        sampler.ingest(_batch(second, {0: "a", 1: "b"}))
    after = _page(sampler)
    seconds = "ridgeline_workload_regime_seconds_total"
    assert before[seconds][("a", "memory_bound", "")] == 6.0  # two GPUs, three intervals
    assert after[seconds][("a", "memory_bound", "")] == 9.0  # GPU 0's three more
    assert after[seconds][("b", "memory_bound", "")] == 3.0
    assert ("a", "unknown", "") not in after[seconds]  # a rare regime once not 0, as per GPU
    assert after["ridgeline_workload_gpus"] == {
        ("a", "memory_bound", ""): 1.0,
        ("b", "memory_bound", ""): 1.0,
    }
    peak = after["ridgeline_workload_peak_flop_per_second"]
    assert (
        peak[("a", "", "")]
        == peak[("b", "", "")]
        == before["ridgeline_workload_peak_flop_per_second"][("a", "", "")] / 2
    )
    flop = "ridgeline_workload_flop_total"
    assert after[flop][("a", "", "")] > before[flop][("a", "", "")]
