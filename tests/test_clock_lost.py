"""GPU-seconds lost to a reduced clock: the `ridgeline_clock_lost_seconds_total{cause}` counter.

While the raw regime is compute-bound and the binding pipe runs below 97 % of the clock its peak
is quoted at, each interval adds (1 − k) × dt × the GPU's share, split evenly between the causes
(docs/report.md, "The levers"). Explicit timestamps, the real inference and exposition.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter import fields
from exporter.catalog import load_catalog
from exporter.clock_events import CAUSE_LABELS
from exporter.inference import EntityInference, InferenceConfig, step
from exporter.sample import Entity, Sample

CATALOG = load_catalog()
H100 = CATALOG.lookup("h100-sxm")
ENTITY = Entity(0, "GPU-clock", "NVIDIA H100 80GB HBM3")
K = 1185 / 1830
"""1185 MHz against the 1830 MHz H100's tensor peak is quoted at."""


def run(values: dict[int, float | None], seconds: int, *, time_weight: float = 1.0) -> EntityInference:
    state = None
    for t in range(seconds + 1):
        state = step(
            state, Sample(float(t), ENTITY, values), H100, InferenceConfig(), time_weight=time_weight
        )
    assert state is not None
    return state


def gemm(clock: float, reasons: int | None, dram: float = 0.3) -> dict[int, float | None]:
    return {
        fields.DRAM_ACTIVE: dram,
        fields.PIPE_TENSOR_ACTIVE: 0.9,
        fields.SM_CLOCK: clock,
        fields.CLOCKS_EVENT_REASONS: reasons,
    }


def test_a_power_capped_gemm_loses_one_minus_k_of_each_second() -> None:
    state = run(gemm(1185, 0x4), 10)  # sw_power_cap
    lost = state.totals.clock_lost_seconds
    assert lost is not None and set(lost) == set(CAUSE_LABELS)  # every cause born together
    assert lost["power_cap"] == pytest.approx(10 * (1 - K))
    assert sum(lost.values()) == pytest.approx(10 * (1 - K))
    assert state.totals.regime_seconds is not None and state.totals.regime_seconds["compute_bound"] == 10


def test_two_causes_share_the_loss_and_none_is_unreported() -> None:
    both = run(gemm(1185, 0x4 | 0x20), 4).totals.clock_lost_seconds  # power cap and SW thermal
    assert both is not None
    assert both["power_cap"] == pytest.approx(2 * (1 - K)) and both["thermal"] == pytest.approx(2 * (1 - K))
    quiet = run({**gemm(1185, None)}, 4).totals.clock_lost_seconds
    assert quiet is not None and quiet["unreported"] == pytest.approx(4 * (1 - K))


def test_a_mig_instance_counts_its_share_of_the_gpu() -> None:
    lost = run(gemm(1185, 0x4), 10, time_weight=3 / 7).totals.clock_lost_seconds
    assert lost is not None and lost["power_cap"] == pytest.approx(10 * 3 / 7 * (1 - K))


def test_nothing_is_lost_at_full_clock_out_of_compute_or_without_a_basis() -> None:
    assert run(gemm(1800, 0x4), 10).totals.clock_lost_seconds is None  # 98 %: jitter, not a loss
    memory = run({fields.DRAM_ACTIVE: 0.9, fields.PIPE_TENSOR_ACTIVE: 0.1, fields.SM_CLOCK: 1185.0}, 10)
    assert memory.totals.regime_seconds is not None and memory.totals.regime_seconds["memory_bound"] == 10
    assert memory.totals.clock_lost_seconds is None  # memory-bound: the clock is not what binds
    no_clock = run({fields.DRAM_ACTIVE: 0.3, fields.PIPE_TENSOR_ACTIVE: 0.9}, 10)
    assert no_clock.totals.clock_lost_seconds is None  # k unknown: never counted as a loss


def test_the_counter_is_exported_per_cause_and_switched_off_with_clocks() -> None:
    from exporter.collectors import DEFAULT_COLLECTORS
    from exporter.exposition import MetricsEndpoint
    from exporter.sampler import Sampler
    from exporter.sources import SourceOptions

    sampler = Sampler("replay", SourceOptions(), CATALOG, InferenceConfig())
    batches = [[Sample(float(t), ENTITY, gemm(1185, 0x4))] for t in range(6)]
    for batch in batches:
        sampler.ingest(batch)
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    lost = {
        s.labels["cause"]: s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "ridgeline_clock_lost_seconds_total"
    }
    assert lost == pytest.approx({**dict.fromkeys(CAUSE_LABELS, 0.0), "power_cap": 5 * (1 - K)})
    off, _ = MetricsEndpoint(lambda: sampler.snapshot, collectors=DEFAULT_COLLECTORS - {"clocks"}).render(
        None
    )
    assert b"ridgeline_clock_lost_seconds" not in off
