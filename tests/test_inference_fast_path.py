"""The per-sample fast path agrees with the validated public math, and deferred publishing loses nothing."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from replay_lines import replay_line
from source_kit import replay_options

from exporter import clock_events, fields, roofline
from exporter.catalog import load_catalog
from exporter.inference import Estimate, InferenceConfig, Totals, step
from exporter.roofline import REGIMES, CounterReading, classify_counters
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import create_source
from exporter.sources.base import EndOfStream

CATALOG = load_catalog()
H100 = CATALOG.lookup("h100-sxm")
MODEL = "NVIDIA H100 80GB HBM3"
ENTITY = Entity(0, "GPU-fast", MODEL)

ratio = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
optional_ratio = st.none() | ratio


def test_integrating_never_writes_into_the_shared_zero_default() -> None:
    """Every GPU's counters are born from one shared zero mapping: step must copy it to add seconds."""
    values: dict[int, float | None] = {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.25}
    config = InferenceConfig(precision="bf16")
    state = step(None, Sample(0.0, ENTITY, values), H100, config)
    state = step(state, Sample(1.0, ENTITY, values), H100, config)
    assert state.totals.regime_seconds is not None
    assert sum(state.totals.regime_seconds.values()) == 1.0
    again = step(None, Sample(0.0, ENTITY, values), H100, config)
    assert again.totals.regime_seconds is not None
    assert dict(again.totals.regime_seconds) == dict.fromkeys(REGIMES, 0.0)


def test_totals_are_born_read_only_at_the_first_reading() -> None:
    assert Totals().regime_seconds is None  # no reading yet: no counter
    values: dict[int, float | None] = {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.25}
    born = step(None, Sample(0.0, ENTITY, values), H100, InferenceConfig()).totals
    assert born.regime_seconds is not None
    assert dict(born.regime_seconds) == dict.fromkeys(REGIMES, 0.0)
    with pytest.raises(TypeError):
        born.regime_seconds["idle"] = 1.0  # type: ignore[index]


@settings(max_examples=200, deadline=None)
@given(
    d=ratio,
    t=ratio,
    gr=optional_ratio,
    sm=optional_ratio,
    occ=optional_ratio,
    fp32=optional_ratio,
    # past the H100's 1980 MHz max (k clamps to 1), a sub-MHz clock, readings clock_ratio() ignores
    clock=st.none()
    | st.floats(min_value=100.0, max_value=3000.0)
    | st.sampled_from([0.5, 0.0, -1.0, math.inf]),
)
def test_first_sample_estimate_equals_the_validated_counter_form(
    d: float,
    t: float,
    gr: float | None,
    sm: float | None,
    occ: float | None,
    fp32: float | None,
    clock: float | None,
) -> None:
    values: dict[int, float | None] = {
        fields.DRAM_ACTIVE: d,
        fields.PIPE_TENSOR_ACTIVE: t,
        fields.GR_ENGINE_ACTIVE: gr,
        fields.SM_ACTIVE: sm,
        fields.SM_OCCUPANCY: occ,
        fields.PIPE_FP32_ACTIVE: fp32,
        fields.SM_CLOCK: clock,
    }
    state = step(None, Sample(0.0, ENTITY, values), H100, InferenceConfig(precision="bf16"))
    estimate = state.estimate
    assert isinstance(estimate, Estimate)
    k = roofline.clock_ratio(clock, H100.peak_clock_mhz("bf16"))
    k_vector = roofline.clock_ratio(clock, H100.vector_clock_mhz())
    reading = CounterReading(
        dram_active=d, tensor_active=t, gr_engine_active=gr, sm_active=sm, sm_occupancy=occ,
        fp32_active=fp32, clock_ratio=k, vector_clock_ratio=k_vector,
    )  # fmt: skip
    vectors = {pipe: H100.vector_peak_flop_per_second(pipe) or 0.0 for pipe in ("fp64", "fp32", "fp16")}
    verdict = classify_counters(H100.roof("bf16"), reading, vector_peaks=vectors)
    assert estimate.raw_regime == verdict.call.regime
    assert estimate.regime == verdict.call.regime
    # the daemon's lever: the verdict's, with the reduced-clock lever where the binding pipe's
    # clock is below its basis (no field 112 here: cause not reported), as POST /classify does
    usable = clock if clock is not None and 0 < clock < math.inf else None
    tensor = verdict.call.pipe == "tensor"
    expected_lever = clock_events.fitted_lever(
        verdict.call.regime,
        verdict.call.lever,
        k if tensor else k_vector,
        usable,
        H100.peak_clock_mhz("bf16") if tensor else H100.vector_clock_mhz(),
        (),
    )
    assert estimate.lever == expected_lever
    assert estimate.pipe == verdict.call.pipe
    assert estimate.intensity_flop_per_byte == pytest.approx(verdict.at.intensity_flop_per_byte)
    assert estimate.attainable_flop_per_second == pytest.approx(verdict.at.attainable_flop_per_second)
    assert estimate.roofline_efficiency == pytest.approx(verdict.at.roofline_efficiency)
    assert estimate.achieved_flop_per_second == pytest.approx(verdict.at.achieved_flop_per_second)


def _write_trace(path: Path, batches: int) -> None:
    lines = []
    for b in range(batches):
        for gpu in range(3):
            phase = (b * 7 + gpu * 3) % 11 / 10
            values = {1005: round(phase, 3), 1004: round(1 - phase, 3), 1001: 0.9, 100: 1900.0}
            lines.append(replay_line(1000.0 + b, gpu, values, model=MODEL))
    path.write_text("\n".join(lines) + "\n")


def test_speed_max_thread_publishes_the_same_final_state_as_ingesting_every_batch(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    _write_trace(trace, 400)
    options = replay_options(path=str(trace), speed=None)
    config = InferenceConfig()

    reference = Sampler("replay", options, CATALOG, config)
    source = create_source("replay", options)
    source.open()
    try:
        while True:
            reference.ingest(source.read())
    except EndOfStream:
        pass

    played = create_source("replay", options)
    played.open()
    threaded = Sampler("replay", options, CATALOG, config, source=played)
    threaded.start()
    deadline = time.monotonic() + 30
    while not threaded.snapshot.source.finished:
        assert time.monotonic() < deadline, "the replay did not finish"
        time.sleep(0.01)
    threaded.stop()

    expected, got = reference.snapshot, threaded.snapshot
    assert got.source.samples_total == expected.source.samples_total == 400
    assert [g.inference for g in got.gpus] == [g.inference for g in expected.gpus]


def test_a_clock_falling_between_samples_is_judged_at_its_smoothed_clock() -> None:
    """The smoothed reading's clock ratio is the smoothed clock's, not the raw sample's: the fold
    reuses the raw reading's clock ratios only when the two clocks are equal."""
    config = InferenceConfig(precision="bf16", smoothing_seconds=1.0)
    busy = {fields.DRAM_ACTIVE: 0.2, fields.PIPE_TENSOR_ACTIVE: 0.95, fields.GR_ENGINE_ACTIVE: 0.95}
    state = step(None, Sample(0.0, ENTITY, {**busy, fields.SM_CLOCK: 1980.0}), H100, config)
    state = step(state, Sample(1.0, ENTITY, {**busy, fields.SM_CLOCK: 1100.0}), H100, config)
    assert state.smoothing is not None and state.call is not None
    smoothed_clock = state.smoothing.values["sm_clock_mhz"]
    assert 1100.0 < smoothed_clock < 1980.0
    basis = H100.peak_clock_mhz("bf16")
    assert basis is not None
    k = roofline.clock_ratio(smoothed_clock, basis)
    assert k is not None and k < clock_events.REDUCED_CLOCK
    assert state.call.regime == "compute_bound"
    lever = state.smoothing.lever
    assert f"({smoothed_clock:.0f} of the {basis:.0f} MHz" in lever
    assert f"gives back up to {1.0 / k - 1.0:.0%} more FLOP/s" in lever  # not the raw clock's
