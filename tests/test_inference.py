"""Inference rules, smoothing, dwell and integration, fed synthetic samples with explicit timestamps."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import fields, readings
from exporter.catalog import Catalog, load_catalog
from exporter.inference import (
    UNKNOWN_CARD,
    EntityInference,
    InferenceConfig,
    Totals,
    integration_cap,
    step,
)
from exporter.sample import Entity, Sample

CATALOG: Catalog = load_catalog()
H100 = CATALOG.lookup("h100-sxm")
V100 = CATALOG.lookup("v100-sxm2")
ENTITY = Entity(gpu=0, uuid="GPU-0000", model="NVIDIA H100 80GB HBM3")
CRISP = InferenceConfig(smoothing_seconds=0.0, dwell_seconds=0.0)


def sample(ts: float, d: float | None, t: float | None, **extra: float | None) -> Sample:
    values: dict[int, float | None] = {fields.DRAM_ACTIVE: d, fields.PIPE_TENSOR_ACTIVE: t}
    names = {
        "gr": fields.GR_ENGINE_ACTIVE,
        "clock": fields.SM_CLOCK,
        "imma": fields.PIPE_TENSOR_IMMA_ACTIVE,
        "hmma": fields.PIPE_TENSOR_HMMA_ACTIVE,
        "util": fields.GPU_UTIL,
        "fp32": fields.PIPE_FP32_ACTIVE,
    }
    for key, value in extra.items():
        values[names[key]] = value
    return Sample(timestamp=ts, entity=ENTITY, values=values)


def feed(samples: list[Sample], config: InferenceConfig = CRISP, card=H100) -> EntityInference:  # type: ignore[no-untyped-def]
    state: EntityInference | None = None
    for s in samples:
        state = step(state, s, card, config)
    assert state is not None
    return state


@pytest.mark.parametrize(
    ("d", "t", "gr", "expected"),
    [
        (0.70, 0.10, 0.9, "memory_bound"),
        (0.20, 0.85, 0.9, "compute_bound"),
        (0.10, 0.10, 0.9, "latency_bound"),
        (0.00, 0.00, 0.01, "idle"),
    ],
)
def test_per_sample_regime_follows_the_design_rules(d: float, t: float, gr: float, expected: str) -> None:
    state = feed([sample(0.0, d, t, gr=gr)])
    assert state.estimate is not None
    assert state.estimate.raw_regime == expected
    assert state.estimate.regime == expected  # the first reading sets the exported regime at once


def test_blank_dram_gives_a_partial_reading_and_never_a_zero() -> None:
    state = feed([sample(0.0, 0.5, 0.5), sample(1.0, None, 0.5)])
    assert state.estimate is not None
    assert state.estimate.dram_active is None  # dropped, never 0
    assert state.estimate.raw_regime == "unknown"  # tensors at 0.54 of their wall: DRAM could bind
    assert state.estimate.unknown_because == (readings.field_name(fields.DRAM_ACTIVE),)
    assert readings.field_name(fields.DRAM_ACTIVE) in state.missing_fields
    # the interval is integrated, into the regime the reading gives; no bytes without DRAM
    assert state.totals.integrated_seconds == 1.0
    assert state.totals.regime_seconds is not None and state.totals.regime_seconds["unknown"] == 1.0


def test_a_sample_without_any_activity_field_is_no_reading() -> None:
    state = feed([sample(0.0, 0.5, 0.5), sample(1.0, None, None, util=97.0)])
    assert state.estimate is None
    assert len(state.missing_fields) == 8
    assert state.totals.integrated_seconds == 0.0  # its own interval is not integrated


def test_blank_tensor_on_first_sample_yields_no_flop_total() -> None:
    state = feed([sample(0.0, 0.5, None)])
    assert state.estimate is not None and state.estimate.achieved_flop_per_second is None
    assert state.totals.flop_total is None
    assert state.totals.dram_bytes_total == 0.0  # born at 0 with the first reading that has DRAM


def test_smoothing_is_exact_for_uneven_intervals() -> None:
    config = InferenceConfig(smoothing_seconds=10.0, dwell_seconds=0.0)
    one_step = feed([sample(0.0, 0.0, 0.0), sample(3.0, 0.6, 0.0)], config)
    three_steps = feed(
        [sample(0.0, 0.0, 0.0), sample(1.0, 0.6, 0.0), sample(2.0, 0.6, 0.0), sample(3.0, 0.6, 0.0)], config
    )
    assert one_step.estimate is not None and three_steps.estimate is not None
    expected = 0.6 * (1 - math.exp(-3.0 / 10.0))
    assert one_step.estimate.dram_active == pytest.approx(expected)
    assert three_steps.estimate.dram_active == pytest.approx(expected)


def test_new_regime_must_hold_for_the_dwell_time() -> None:
    config = InferenceConfig(smoothing_seconds=0.0, dwell_seconds=5.0)
    state = feed([sample(0.0, 0.7, 0.1, gr=0.9)], config)  # memory_bound
    compute = (0.2, 0.85)
    for ts in (1.0, 2.0, 3.0, 4.0, 5.0):
        state = step(state, sample(ts, *compute, gr=0.9), H100, config)
        assert state.estimate is not None
        assert state.estimate.raw_regime == "compute_bound"
        assert state.estimate.regime == "memory_bound"
        assert state.smoothing is not None and state.smoothing.pending_since == 1.0
    state = step(state, sample(6.0, *compute, gr=0.9), H100, config)
    assert state.estimate is not None and state.estimate.regime == "compute_bound"
    assert state.smoothing is not None and state.smoothing.pending_regime is None


def test_an_interrupted_candidate_restarts_the_dwell() -> None:
    config = InferenceConfig(smoothing_seconds=0.0, dwell_seconds=5.0)
    seq = [sample(0.0, 0.7, 0.1, gr=0.9)]
    seq += [sample(float(ts), 0.2, 0.85, gr=0.9) for ts in (1, 2, 3, 4)]
    seq += [sample(5.0, 0.7, 0.1, gr=0.9)]  # back to memory: the candidate is dropped
    seq += [sample(float(ts), 0.2, 0.85, gr=0.9) for ts in (6, 7, 8, 9, 10)]
    state = feed(seq, config)
    assert state.estimate is not None and state.estimate.regime == "memory_bound"
    assert state.smoothing is not None and state.smoothing.pending_since == 6.0
    state = step(state, sample(11.0, 0.2, 0.85, gr=0.9), H100, config)
    assert state.estimate is not None and state.estimate.regime == "compute_bound"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.1, 4.0),  # dt
            st.floats(0.0, 1.0),  # d
            st.floats(0.0, 1.0),  # t
            st.floats(700.0, 2600.0),  # SM clock: past the H100's 1980 MHz max, where k is clamped to 1
        ),
        min_size=1,
        max_size=40,
    )
)
def test_integration_is_exact(steps: list[tuple[float, float, float, float]]) -> None:
    config = InferenceConfig(expected_interval_seconds=1.0, gap_factor=5.0)
    assert integration_cap(config, (0.1,)) >= 4.0
    peak = H100.peak_flop_per_second("bf16")
    bandwidth = H100.bandwidth_bytes_per_second
    ts = 1000.0
    state = step(None, sample(ts, 0.3, 0.3), H100, config)
    flops = dram = covered = 0.0
    for dt, d, t, clock in steps:
        ts += dt
        state = step(state, sample(ts, d, t, clock=clock), H100, config)
        # every dt is under the cap (5 x the 1 s interval), so every interval counts
        k = min(1.0, clock / 1830.0)  # H100 SXM's bf16 peak is quoted at 1830 MHz
        flops += t * k * peak * dt
        dram += d * bandwidth * dt
        covered += dt
    totals = state.totals
    assert sum(totals.regime_seconds.values()) == pytest.approx(covered)
    assert totals.integrated_seconds == pytest.approx(covered)
    assert totals.flop_total == pytest.approx(flops, rel=1e-9, abs=1.0)
    assert totals.dram_bytes_total == pytest.approx(dram, rel=1e-9, abs=1.0)


def test_time_in_regime_integrates_the_raw_regime_not_the_debounced_one() -> None:
    config = InferenceConfig(smoothing_seconds=10.0, dwell_seconds=5.0)
    state = feed(
        [sample(0.0, 0.7, 0.1, gr=0.9), sample(1.0, 0.2, 0.85, gr=0.9), sample(2.0, 0.2, 0.85, gr=0.9)],
        config,
    )
    assert state.estimate is not None and state.estimate.regime == "memory_bound"
    assert state.totals.regime_seconds["compute_bound"] == pytest.approx(2.0)
    assert state.totals.regime_seconds["memory_bound"] == 0.0


def test_a_gap_longer_than_the_cap_is_not_integrated() -> None:
    state = feed(
        [sample(0.0, 0.5, 0.5), sample(1.0, 0.5, 0.5), sample(2.0, 0.5, 0.5), sample(60.0, 0.5, 0.5)]
    )
    assert state.totals.integrated_seconds == pytest.approx(2.0)
    state = step(state, sample(61.0, 0.5, 0.5), H100, CRISP)
    assert state.totals.integrated_seconds == pytest.approx(3.0)


def test_a_slow_but_steady_source_is_integrated_from_its_second_interval() -> None:
    """Its first 10 s interval has only --interval (1 s) to be judged by and is a gap; from then
    on the shortest recent interval (10 s) sets the cap."""
    state = feed([sample(float(ts), 0.5, 0.5) for ts in range(0, 100, 10)])
    assert state.totals.integrated_seconds == pytest.approx(80.0)


def test_a_first_interval_is_never_integrated_past_the_cap() -> None:
    """A first page stamped one second after the epoch, then one stamped now: 1.8e9 s that no
    interval before it vouches for (the cap once took the interval itself into account)."""
    now = 1.8e9
    state = feed([sample(1.0, 0.5, 0.5), sample(now, 0.5, 0.5), sample(now + 1, 0.5, 0.5)])
    assert state.totals.integrated_seconds == pytest.approx(1.0)
    assert state.totals.flop_total is not None and state.totals.flop_total < 1e16


def test_integrate_false_skips_the_interval_but_updates_the_state() -> None:
    state = feed([sample(0.0, 0.5, 0.5)])
    state = step(state, sample(1.0, 0.7, 0.1), H100, CRISP, integrate=False)
    assert state.totals.integrated_seconds == 0.0
    assert state.estimate is not None and state.estimate.dram_active == pytest.approx(0.7)


def test_totals_continue_from_a_given_store() -> None:
    carried = Totals(flop_total=5e15, dram_bytes_total=1e12, integrated_seconds=10.0)
    state = step(None, sample(0.0, 0.5, 0.5), H100, CRISP, totals=carried)
    state = step(state, sample(1.0, 0.5, 0.5), H100, CRISP)
    assert state.totals.flop_total is not None and state.totals.flop_total > 5e15
    assert state.totals.integrated_seconds == pytest.approx(11.0)


def test_out_of_order_sample_is_ignored() -> None:
    state = feed([sample(0.0, 0.5, 0.5), sample(2.0, 0.5, 0.5)])
    again = step(state, sample(1.0, 0.9, 0.9), H100, CRISP)
    assert again is state


def test_unknown_model_exports_ratios_and_regime_but_no_roof() -> None:
    state = feed([sample(0.0, 0.7, 0.1, gr=0.9), sample(1.0, 0.7, 0.1, gr=0.9)], card=None)
    estimate = state.estimate
    assert estimate is not None
    assert estimate.card == UNKNOWN_CARD
    assert estimate.roof is None
    assert estimate.intensity_flop_per_byte is None
    assert estimate.achieved_flop_per_second is None
    assert estimate.regime == "memory_bound"
    assert estimate.roofline_efficiency == pytest.approx(max(0.1, 0.7))
    assert state.totals.regime_seconds is not None
    assert state.totals.regime_seconds["memory_bound"] == pytest.approx(1.0)
    assert state.totals.flop_total is None and state.totals.dram_bytes_total is None


def test_configured_precision_missing_on_the_card_falls_back_and_says_so() -> None:
    config = InferenceConfig(precision="bf16", smoothing_seconds=0.0)
    state = feed([sample(0.0, 0.5, 0.5)], config, card=V100)
    assert state.estimate is not None
    assert state.estimate.precision == "fp16"
    assert state.estimate.precision_note is not None and "bf16" in state.estimate.precision_note
    assert state.estimate.roof == V100.roof("fp16")


def test_dominant_tensor_pipe_picks_the_precision_when_not_configured() -> None:
    state = feed([sample(0.0, 0.5, 0.5, imma=0.6, hmma=0.05)], InferenceConfig())
    assert state.estimate is not None and state.estimate.precision == "int8"
    fixed = feed([sample(0.0, 0.5, 0.5, imma=0.6)], InferenceConfig(precision="fp8"))
    assert fixed.estimate is not None and fixed.estimate.precision == "fp8"


def test_clock_ratio_scales_flop_utilization_against_the_peaks_own_clock() -> None:
    state = feed([sample(0.0, 0.2, 0.8, clock=915.0)])
    assert state.estimate is not None
    # 989.5 TFLOP/s bf16 is 132 SMs x 4096 FLOP/clock x 1830 MHz, not the 1980 MHz maximum
    assert state.estimate.clock_ratio == pytest.approx(0.5)
    assert state.estimate.flop_utilization == pytest.approx(0.8 * 0.5)
    peak = H100.peak_flop_per_second("bf16")
    assert state.estimate.achieved_flop_per_second == pytest.approx(0.4 * peak)


def test_a_clock_above_the_peaks_clock_is_clamped_to_the_quoted_peak() -> None:
    state = feed([sample(0.0, 0.2, 0.8, clock=1980.0)])
    assert state.estimate is not None and state.estimate.clock_ratio == 1.0
    assert state.estimate.achieved_flop_per_second == pytest.approx(0.8 * H100.peak_flop_per_second("bf16"))


def test_gpu_util_percent_becomes_a_ratio() -> None:
    state = feed([sample(0.0, 0.2, 0.2, util=97.0)])
    assert state.estimate is not None and state.estimate.gpu_utilization == pytest.approx(0.97)
