"""Inference at its edges: every input clamped and smoothed on both the first and a later sample,
every estimate field checked by value, the config's limits, the per-card constants kept apart.

Each test here was written against a surviving mutant of exporter/inference.py (docs/testing.md):
removing the line it names makes the test fail.
"""

from __future__ import annotations

import logging
import math
import re

import pytest

from exporter import fields, roofline
from exporter.catalog import load_catalog
from exporter.inference import (
    UNKNOWN_CARD,
    EntityInference,
    InferenceConfig,
    Totals,
    integration_cap,
    note_unknown_model,
    step,
)
from exporter.sample import Entity, Sample

CATALOG = load_catalog()
H100 = CATALOG.lookup("h100-sxm")
V100 = CATALOG.lookup("v100-sxm2")
ENTITY = Entity(gpu=0, uuid="GPU-edge", model="NVIDIA H100 80GB HBM3")
CRISP = InferenceConfig(smoothing_seconds=0.0, dwell_seconds=0.0)
SMOOTH = InferenceConfig(smoothing_seconds=10.0, dwell_seconds=0.0)

FIELD = {
    "d": fields.DRAM_ACTIVE,
    "t": fields.PIPE_TENSOR_ACTIVE,
    "gr": fields.GR_ENGINE_ACTIVE,
    "sm": fields.SM_ACTIVE,
    "occ": fields.SM_OCCUPANCY,
    "fp64": fields.PIPE_FP64_ACTIVE,
    "fp32": fields.PIPE_FP32_ACTIVE,
    "fp16": fields.PIPE_FP16_ACTIVE,
    "imma": fields.PIPE_TENSOR_IMMA_ACTIVE,
    "hmma": fields.PIPE_TENSOR_HMMA_ACTIVE,
    "dfma": fields.PIPE_TENSOR_DFMA_ACTIVE,
    "clock": fields.SM_CLOCK,
    "util": fields.GPU_UTIL,
}
FP_LEVERS = {
    "fp64": roofline.LEVER_FP64_PIPE,
    "fp32": roofline.LEVER_FP32_PIPE,
    "fp16": roofline.LEVER_FP16_PIPE,
}
ESTIMATE_FIELD = {
    "d": "dram_active",
    "t": "tensor_active",
    "gr": "gr_engine_active",
    "sm": "sm_active",
    "occ": "sm_occupancy",
    "util": "gpu_utilization",
}


def sample(ts: float, **values: float | None) -> Sample:
    return Sample(timestamp=ts, entity=ENTITY, values={FIELD[k]: v for k, v in values.items()})


def feed(*samples: Sample, config: InferenceConfig = CRISP, card=H100) -> EntityInference:  # type: ignore[no-untyped-def]
    state: EntityInference | None = None
    for s in samples:
        state = step(state, s, card, config)
    assert state is not None
    return state


# -- every estimate field, by value -----------------------------------------------------------------


def test_one_sample_gives_every_estimate_field_its_value() -> None:
    state = feed(sample(0.0, d=0.5, t=0.4, clock=915.0, gr=0.9, sm=0.8, occ=0.3, util=50.0))
    peak = H100.peak_flop_per_second("bf16")
    bandwidth = H100.bandwidth_bytes_per_second
    assert state.estimate is not None
    estimate = state.estimate._asdict()
    assert estimate.pop("unknown_because") == ()
    assert estimate.pop("uncounted_pipes") == ("fp64", "fp32", "fp16")  # unreported: F a lower bound
    assert (estimate.pop("clock_event_reasons"), estimate.pop("clock_causes")) == ((), ())  # none reported
    assert (estimate.pop("link_bytes_per_second"), estimate.pop("link_utilization")) == (
        (),
        (),
    )  # no 1009-1012
    assert estimate.pop("link") is None
    assert estimate == pytest.approx(
        {
            "card": "h100-sxm",
            "precision": "bf16",
            "precision_note": None,
            "roof": H100.roof("bf16"),
            "dram_active": 0.5,
            "tensor_active": 0.4,
            "flop_utilization": 0.2,  # t·k with k = 915 / 1830, the bf16 peak's own clock
            "clock_ratio": 0.5,
            "vector_clock_ratio": 915.0 / 1980.0,  # the CUDA-core peaks are quoted at 1980 MHz
            "gr_engine_active": 0.9,
            "gpu_utilization": 0.5,
            "sm_active": 0.8,
            "sm_occupancy": 0.3,
            "fp64_active": None,
            "fp32_active": None,
            "fp16_active": None,
            "pipe": "tensor",
            "compute_roof_flop_per_second": 0.5 * peak,  # the tensor pipe alone: its peak at k = 0.5
            "intensity_flop_per_byte": 0.2 * peak / (0.5 * bandwidth),
            "position": 0.8,  # t / d: on the roof at the clock it runs
            "achieved_flop_per_second": 0.2 * peak,
            "achieved_bandwidth_bytes_per_second": 0.5 * bandwidth,
            "attainable_flop_per_second": 0.4 * peak,  # I·B on the memory side
            "fraction_of_peak": 0.8,  # of the roof at this clock
            "roofline_efficiency": 0.5,  # max(t·k, d)
            "regime": "memory_bound",  # 0.5 / 0.8 = 0.625 of the memory wall
            "smoothed_regime": "memory_bound",
            "raw_regime": "memory_bound",
            "lever": roofline.LEVER_MEMORY,
            "gr_engine_contradicted": False,
        }
    )
    assert state.missing_fields == (  # of 1001-1008, this sample lacks the FP pipes
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    )
    assert state.card_key == "h100-sxm"


def test_an_unknown_card_has_no_roof_numbers_and_integrates_no_flops() -> None:
    state = feed(sample(0.0, d=0.7, t=0.1, gr=0.9), sample(1.0, d=0.7, t=0.1, gr=0.9), card=None)
    estimate = state.estimate
    assert estimate is not None and estimate.card == UNKNOWN_CARD
    assert estimate.achieved_bandwidth_bytes_per_second is None
    assert estimate.attainable_flop_per_second is None
    assert estimate.fraction_of_peak is None
    assert estimate.compute_roof_flop_per_second is None
    assert estimate.position == pytest.approx(0.1 / 0.7)  # ratios need no roof
    assert (state.totals.flop_total, state.totals.dram_bytes_total) == (None, None)  # never born
    assert state.totals.integrated_seconds == 1.0
    assert state.totals.regime_seconds is not None and state.totals.regime_seconds["memory_bound"] == 1.0


# -- clamping, on the first sample and on later ones ----------------------------------------------


@pytest.mark.parametrize("name", ["d", "t", "gr", "sm", "occ"])
@pytest.mark.parametrize(
    ("given", "clamped"),
    [(1.25, 1.0), (-0.25, 0.0), (1, 1.0), (-0.0, 0.0), (0, 0.0)],
    ids=["above", "below", "int-one", "minus-zero", "int-zero"],
)
def test_every_ratio_is_clamped_to_a_float_in_zero_one(name: str, given: float, clamped: float) -> None:
    base = {"d": 0.5, "t": 0.5, "gr": 0.9}
    state: EntityInference | None = None
    for ts in (0.0, 1.0):  # the first sample and a later one take different paths
        state = step(state, sample(ts, **{**base, name: given}), H100, CRISP)
        assert state.estimate is not None
        value = getattr(state.estimate, ESTIMATE_FIELD[name])
        assert value == clamped and type(value) is float
        assert math.copysign(1.0, value) == 1.0  # a zero is +0.0: "-0" never reaches /metrics


@pytest.mark.parametrize(("percent", "ratio"), [(150.0, 1.0), (-5.0, 0.0), (37.0, 0.37)])
def test_gpu_util_is_a_percentage_clamped_to_zero_one(percent: float, ratio: float) -> None:
    state: EntityInference | None = None
    for ts in (0.0, 1.0):
        state = step(state, sample(ts, d=0.5, t=0.5, util=percent), H100, CRISP)
        assert state.estimate is not None and state.estimate.gpu_utilization == pytest.approx(ratio)


@pytest.mark.parametrize("pipe", ["fp64", "fp32", "fp16"])
def test_an_fp_pipe_above_one_is_clamped_before_the_regime_rules(pipe: str) -> None:
    # at t = 1 the tensor pipe is 1 / 0.93 of its wall; an FP pipe clamped to 1 is not the busiest
    for state in (
        feed(sample(0.0, d=0.1, t=1.0, gr=0.9, **{pipe: 1.5})),
        feed(sample(0.0, d=0.1, t=1.0, gr=0.9), sample(1.0, d=0.1, t=1.0, gr=0.9, **{pipe: 1.5})),
    ):
        assert state.estimate is not None
        assert state.estimate.lever == roofline.LEVER_COMPUTE


def test_a_clock_above_the_cards_max_counts_as_the_max() -> None:
    for state in (
        feed(sample(0.0, d=0.2, t=0.8, clock=2500.0)),
        feed(sample(0.0, d=0.2, t=0.8, clock=1980.0), sample(1.0, d=0.2, t=0.8, clock=2500.0)),
    ):
        assert state.estimate is not None
        assert state.estimate.clock_ratio == 1.0
        assert state.estimate.flop_utilization == pytest.approx(0.8)


@pytest.mark.parametrize("clock", [0.0, -100.0, math.nan, math.inf, None])
def test_an_unusable_clock_is_unknown_and_flops_assume_the_quoted_clock(clock: float | None) -> None:
    state = feed(sample(0.0, d=0.2, t=0.8, clock=clock))
    assert state.estimate is not None
    assert state.estimate.clock_ratio is None and state.estimate.vector_clock_ratio is None
    assert state.estimate.achieved_flop_per_second == pytest.approx(0.8 * H100.peak_flop_per_second("bf16"))


def test_a_card_without_a_clock_basis_says_its_clock_ratio_is_unknown() -> None:
    b200 = CATALOG.lookup("b200")
    state = feed(sample(0.0, d=0.2, t=0.8, clock=1200.0), card=b200)
    assert state.estimate is not None and state.estimate.clock_ratio is None
    # not silently scaled and not silently 1.0: the quoted peak, an upper bound, and k says unknown
    assert state.estimate.achieved_flop_per_second == pytest.approx(0.8 * b200.peak_flop_per_second("bf16"))


# -- smoothing of every input -------------------------------------------------------------------------


def test_every_input_is_smoothed_with_the_same_alpha() -> None:
    first = {"d": 0.2, "t": 0.2, "clock": 1830.0, "gr": 0.1, "sm": 0.2, "occ": 0.1, "util": 20.0}
    second = {"d": 0.6, "t": 0.8, "clock": 915.0, "gr": 0.9, "sm": 0.6, "occ": 0.5, "util": 80.0}
    state = feed(sample(0.0, **first), sample(2.0, **second), config=SMOOTH)
    alpha = 1 - math.exp(-2.0 / 10.0)

    def smoothed(a: float, b: float) -> float:
        return a + alpha * (b - a)

    estimate = state.estimate
    assert estimate is not None
    assert estimate.dram_active == pytest.approx(smoothed(0.2, 0.6))
    assert estimate.tensor_active == pytest.approx(smoothed(0.2, 0.8))
    # the SM clock is an input smoothed like the rest (k against the bf16 peak's 1830 MHz);
    # u = smoothed t times smoothed k
    assert estimate.clock_ratio == pytest.approx(smoothed(1.0, 0.5))
    assert estimate.flop_utilization == pytest.approx(smoothed(0.2, 0.8) * smoothed(1.0, 0.5))
    assert estimate.gr_engine_active == pytest.approx(smoothed(0.1, 0.9))
    assert estimate.sm_active == pytest.approx(smoothed(0.2, 0.6))
    assert estimate.sm_occupancy == pytest.approx(smoothed(0.1, 0.5))
    assert estimate.gpu_utilization == pytest.approx(smoothed(0.2, 0.8))


def test_with_idle_tensor_cores_the_clock_ratio_is_the_smoothed_clock() -> None:
    state = feed(
        sample(0.0, d=0.5, t=0.0, clock=1830.0), sample(2.0, d=0.5, t=0.0, clock=915.0), config=SMOOTH
    )
    assert state.estimate is not None
    assert state.estimate.clock_ratio == pytest.approx(1.0 + (1 - math.exp(-0.2)) * (0.5 - 1.0))


def test_an_input_that_appears_later_starts_from_its_first_value() -> None:
    state = feed(
        sample(0.0, d=0.2, t=0.2),
        sample(2.0, d=0.2, t=0.2, gr=0.9, sm=0.6, occ=0.5, util=80.0),
        config=SMOOTH,
    )
    estimate = state.estimate
    assert estimate is not None
    assert (estimate.gr_engine_active, estimate.sm_active, estimate.sm_occupancy) == (0.9, 0.6, 0.5)
    assert estimate.gpu_utilization == pytest.approx(0.8)


@pytest.mark.parametrize("pipe", ["fp64", "fp32", "fp16"])
def test_each_fp_pipe_reaches_the_raw_and_the_smoothed_regime(pipe: str) -> None:
    busy = sample(0.0, d=0.1, t=0.1, gr=0.9, **{pipe: 0.9})
    estimate = feed(busy).estimate
    assert estimate is not None
    assert (estimate.raw_regime, estimate.smoothed_regime) == ("compute_bound", "compute_bound")
    assert estimate.lever == FP_LEVERS[pipe] and estimate.pipe == pipe
    # on a later sample the raw regime sees the raw pipe while the smoothed one still lags
    later = feed(
        sample(0.0, d=0.1, t=0.1, gr=0.9, **{pipe: 0.0}), busy._replace(timestamp=1.0), config=SMOOTH
    )
    assert later.estimate is not None
    assert (later.estimate.raw_regime, later.estimate.smoothed_regime) == ("compute_bound", "latency_bound")


def test_sm_activity_keeps_a_gpu_without_an_engine_reading_out_of_idle() -> None:
    for state in (
        feed(sample(0.0, d=0.01, t=0.01, sm=0.5)),
        feed(sample(0.0, d=0.01, t=0.01, sm=0.5), sample(1.0, d=0.01, t=0.01, sm=0.5)),
    ):
        assert state.estimate is not None and state.estimate.raw_regime == "latency_bound"


def test_the_later_samples_optional_ratios_reach_the_raw_regime() -> None:
    state = feed(sample(0.0, d=0.01, t=0.01, gr=0.9), sample(1.0, d=0.01, t=0.01, gr=0.9))
    assert state.estimate is not None and state.estimate.raw_regime == "latency_bound"  # not idle


def test_low_occupancy_reaches_the_exported_lever() -> None:
    state = feed(sample(0.0, d=0.1, t=0.1, gr=0.9, sm=0.9, occ=0.1))
    assert state.estimate is not None and state.estimate.lever == roofline.LEVER_LATENCY_OCCUPANCY


# -- debouncing ---------------------------------------------------------------------------------------


def test_a_new_candidate_restarts_the_dwell_and_the_old_lever_stays_exported() -> None:
    config = InferenceConfig(smoothing_seconds=0.0, dwell_seconds=5.0)
    memory = {"d": 0.7, "t": 0.1, "gr": 0.9}
    compute = {"d": 0.2, "t": 0.85, "gr": 0.9}
    latency = {"d": 0.1, "t": 0.1, "gr": 0.9}
    state = feed(sample(0.0, **memory), *(sample(float(ts), **compute) for ts in (1, 2, 3)), config=config)
    for ts in (4.0, 6.0, 8.0):  # latency from t=4: it needs until t=9, not the compute candidate's t=6
        state = step(state, sample(ts, **latency), H100, config)
        assert state.estimate is not None
        assert (state.estimate.regime, state.estimate.lever) == ("memory_bound", roofline.LEVER_MEMORY)
        assert state.smoothing is not None and state.smoothing.pending_since == 4.0
    state = step(state, sample(9.0, **latency), H100, config)
    assert state.estimate is not None
    assert (state.estimate.regime, state.estimate.lever) == ("latency_bound", roofline.LEVER_LATENCY)


# -- intervals ---------------------------------------------------------------------------------------


def test_an_interval_of_exactly_the_cap_is_integrated() -> None:
    state = feed(sample(0.0, d=0.5, t=0.5), sample(1.0, d=0.5, t=0.5), sample(6.0, d=0.5, t=0.5))
    assert state.totals.integrated_seconds == 6.0  # 1 s, then 5 s = 5 × the 1 s interval


def test_the_recent_intervals_keep_the_last_eight_in_order() -> None:
    ts, samples = 0.0, [sample(0.0, d=0.5, t=0.5)]
    for dt in range(1, 12):
        ts += dt
        samples.append(sample(ts, d=0.5, t=0.5))
    assert feed(*samples).recent_intervals == (4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0)


def test_a_blank_reading_keeps_the_recent_intervals() -> None:
    state = feed(sample(0.0, d=0.5, t=0.5), sample(1.0, d=0.5, t=0.5), sample(2.0, d=None, t=None, occ=0.5))
    assert state.estimate is None and state.recent_intervals == (1.0, 1.0)
    assert state.totals.integrated_seconds == 1.0  # no reading: its interval is not integrated


def test_a_repeated_timestamp_changes_nothing() -> None:
    state = feed(sample(0.0, d=0.5, t=0.5), sample(1.0, d=0.5, t=0.5))
    assert step(state, sample(1.0, d=0.9, t=0.9), H100, CRISP) is state


def test_totals_carried_as_a_plain_mapping_continue() -> None:
    carried = Totals(regime_seconds=dict.fromkeys(roofline.REGIMES, 2.0), integrated_seconds=8.0)
    state = step(None, sample(0.0, d=0.7, t=0.1, gr=0.9), H100, CRISP, totals=carried)
    state = step(state, sample(1.0, d=0.7, t=0.1, gr=0.9), H100, CRISP)
    assert state.totals.regime_seconds["memory_bound"] == 3.0
    assert state.totals.regime_seconds["idle"] == 2.0


def test_integration_cap_is_the_gap_factor_times_the_longer_of_expected_and_shortest_recent() -> None:
    config = InferenceConfig(expected_interval_seconds=1.0, gap_factor=5.0)
    assert integration_cap(config, ()) == 5.0
    assert integration_cap(config, (12.0, 10.0)) == 50.0
    assert integration_cap(config, (0.5, 3.0)) == 5.0


# -- configuration ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"smoothing_seconds": -1.0}, "smoothing_seconds must be a finite number >= 0, got -1.0"),
        ({"smoothing_seconds": math.inf}, "smoothing_seconds must be a finite number >= 0, got inf"),
        ({"dwell_seconds": math.nan}, "dwell_seconds must be a finite number >= 0, got nan"),
        ({"expected_interval_seconds": 0.0}, "interval must be > 0 seconds, got 0.0"),
        ({"expected_interval_seconds": math.inf}, "interval must be > 0 seconds, got inf"),
        ({"gap_factor": 0.5}, "gap_factor must be >= 1, got 0.5"),
        ({"gap_factor": math.inf}, "gap_factor must be >= 1, got inf"),
    ],
)
def test_a_config_out_of_range_is_refused_naming_the_setting(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        InferenceConfig(**options)  # type: ignore[arg-type]


def test_the_edges_of_a_valid_config() -> None:
    config = InferenceConfig(smoothing_seconds=0.0, dwell_seconds=0.0, gap_factor=1.0)
    assert config.gap_factor == 1.0


# -- per-card constants ------------------------------------------------------------------------------


def test_two_configs_on_one_card_keep_their_own_precision() -> None:
    fixed = InferenceConfig(precision="fp8", smoothing_seconds=0.0)
    chosen = InferenceConfig(smoothing_seconds=0.0)
    for config, precision in ((fixed, "fp8"), (chosen, "bf16"), (fixed, "fp8"), (chosen, "bf16")):
        estimate = feed(sample(0.0, d=0.5, t=0.5), config=config).estimate
        assert estimate is not None and estimate.precision == precision


def test_an_unknown_card_after_a_known_one_is_still_unknown() -> None:
    config = InferenceConfig(precision="bf16", smoothing_seconds=0.0)
    for card, key in ((H100, "h100-sxm"), (None, UNKNOWN_CARD), (H100, "h100-sxm"), (None, UNKNOWN_CARD)):
        estimate = feed(sample(0.0, d=0.5, t=0.5), config=config, card=card).estimate
        assert estimate is not None and estimate.card == key


def test_an_unknown_card_keeps_the_configured_precision_whatever_the_pipes() -> None:
    config = InferenceConfig(precision="fp8", smoothing_seconds=0.0)
    estimate = feed(sample(0.0, d=0.5, t=0.5, hmma=0.5, imma=0.1), config=config, card=None).estimate
    assert estimate is not None and estimate.precision == "fp8" and estimate.roof is None


@pytest.mark.parametrize(
    ("pipes", "card", "precision"),
    [
        ({"imma": 0.6}, H100, "int8"),
        ({"imma": 0.3, "hmma": 0.6}, H100, "bf16"),
        ({"imma": 0.3, "dfma": 0.6}, H100, "fp64_tensor"),
        ({"dfma": 0.6}, H100, "fp64_tensor"),
        ({"imma": 0.005}, H100, "bf16"),  # below the noise floor: the default stands
        ({"imma": 0.6}, V100, "fp16"),  # V100 has no int8 peak: its stand-in for bf16 stays
    ],
)
def test_the_busiest_tensor_pipe_picks_a_precision_the_card_has(
    pipes: dict[str, float], card: object, precision: str
) -> None:
    state = feed(sample(0.0, d=0.5, t=0.5, **pipes), config=InferenceConfig(), card=card)
    assert state.estimate is not None and state.estimate.precision == precision
    assert state.estimate.roof == card.roof(precision)  # type: ignore[attr-defined]


def test_an_unknown_model_is_logged_once_naming_it_and_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    model = "NVIDIA Test Card only in test_inference_edges"
    with caplog.at_level(logging.WARNING, logger="exporter.inference"):
        note_unknown_model(model)
        note_unknown_model(model)
    assert [r.getMessage() for r in caplog.records] == [
        f"GPU model {model!r} is not in the card catalog: exporting its ratios and regime with "
        'card="unknown" and no roof (add it with --cards FILE)'
    ]


# -- what a later sample keeps and what a reading carries -----------------------------------------


def test_a_sample_without_any_activity_keeps_the_card_label() -> None:
    """The `card` label of the counters must not change while the reading is blank."""
    blank = feed(sample(0.0, occ=0.5, clock=1980.0))
    assert (blank.estimate, blank.card_key) == (None, "h100-sxm")
    after_reading = feed(sample(0.0, d=0.5, t=0.5), sample(1.0, occ=0.5))
    assert (after_reading.estimate, after_reading.card_key) == (None, "h100-sxm")


def test_the_fp_pipes_reach_the_estimate() -> None:
    estimate = feed(sample(0.0, d=0.1, t=0.1, gr=0.9, fp64=0.25, fp32=0.5, fp16=0.125)).estimate
    assert estimate is not None
    assert (estimate.fp64_active, estimate.fp32_active, estimate.fp16_active) == (0.25, 0.5, 0.125)


def test_flops_stop_growing_while_no_compute_pipe_is_reported() -> None:
    state = feed(sample(0.0, d=0.5, t=0.5), sample(1.0, d=0.5, t=0.5))
    assert state.totals.flop_total is not None and state.totals.flop_total > 0
    later = feed(sample(0.0, d=0.5, t=0.5), sample(1.0, d=0.5, t=0.5), sample(2.0, d=0.5))
    assert later.totals.flop_total == state.totals.flop_total  # DRAM alone adds bytes, not FLOPs
    assert later.totals.dram_bytes_total is not None and state.totals.dram_bytes_total is not None
    assert later.totals.dram_bytes_total > state.totals.dram_bytes_total
    assert later.totals.integrated_seconds == 2.0


def test_a_mig_instance_keeps_its_own_roof_when_the_tensor_pipes_pick_the_precision() -> None:
    instance = Entity(gpu=0, uuid="GPU-edge", model=ENTITY.model, gpu_instance=1, profile="3g.40gb")
    values = {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.5, fields.PIPE_TENSOR_IMMA_ACTIVE: 0.6}
    state = step(None, Sample(timestamp=0.0, entity=instance, values=values), H100, InferenceConfig())
    assert state.estimate is not None and state.estimate.precision == "int8"
    assert state.estimate.roof == H100.instance_roof("int8", "3g.40gb") != H100.roof("int8")


def test_an_unknown_card_has_faster_fp64_tensor_cores_by_default() -> None:
    """Nothing says it lacks them: the lever points at the FP64 tensor cores, as on A100/H100."""
    estimate = feed(sample(0.0, d=0.05, t=0.05, gr=0.9, fp64=0.9), card=None).estimate
    assert estimate is not None and estimate.lever == roofline.LEVER_FP64_PIPE
