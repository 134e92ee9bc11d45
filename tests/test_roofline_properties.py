"""Properties the roofline must hold for any card and any work (hypothesis)."""

from __future__ import annotations

import math

import yaml
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from exporter import roofline
from exporter.catalog import Card, CardSpec, parse_catalog_text
from exporter.roofline import BALANCED_BAND, Roof

peaks = st.floats(min_value=1e9, max_value=1e19)
bandwidths = st.floats(min_value=1e8, max_value=1e15)
amounts = st.floats(min_value=1.0, max_value=1e24)
ratios = st.floats(min_value=0.0, max_value=1.0)


@given(peaks, bandwidths, amounts, amounts)
def test_attainable_never_exceeds_either_roof(
    peak: float, bandwidth: float, flops: float, bytes_: float
) -> None:
    roof = Roof(peak, bandwidth)
    verdict = roofline.kernel_roofline(roof, flops, bytes_)
    assert verdict.attainable_flop_per_second <= peak
    assert verdict.attainable_flop_per_second <= verdict.intensity_flop_per_byte * bandwidth * (1 + 1e-12)


@given(peaks, bandwidths, amounts, amounts)
def test_fraction_of_peak_is_in_zero_one(peak: float, bandwidth: float, flops: float, bytes_: float) -> None:
    verdict = roofline.kernel_roofline(Roof(peak, bandwidth), flops, bytes_)
    assert 0 < verdict.fraction_of_peak <= 1


@given(peaks, bandwidths, amounts, amounts)
def test_verdict_agrees_with_the_longer_time(
    peak: float, bandwidth: float, flops: float, bytes_: float
) -> None:
    roof = Roof(peak, bandwidth)
    verdict = roofline.kernel_roofline(roof, flops, bytes_)
    assume(
        abs(verdict.intensity_flop_per_byte - roof.ridge_flop_per_byte)
        > BALANCED_BAND * roof.ridge_flop_per_byte
    )
    if verdict.memory_time_seconds > verdict.compute_time_seconds:
        assert verdict.regime == "memory_bound"
    else:
        assert verdict.regime == "compute_bound"
    assert verdict.floor_time_seconds == max(verdict.memory_time_seconds, verdict.compute_time_seconds)


@given(peaks, bandwidths, amounts, amounts, st.floats(min_value=1e-3, max_value=1e3))
def test_scaling_flops_and_bytes_together_keeps_the_verdict(
    peak: float, bandwidth: float, flops: float, bytes_: float, scale: float
) -> None:
    roof = Roof(peak, bandwidth)
    before = roofline.kernel_roofline(roof, flops, bytes_)
    after = roofline.kernel_roofline(roof, flops * scale, bytes_ * scale)
    # intensity is unchanged up to rounding; stay clear of the band edges where rounding could flip it
    edge = abs(abs(before.intensity_flop_per_byte / roof.ridge_flop_per_byte - 1) - BALANCED_BAND)
    assume(edge > 1e-9)
    assert after.regime == before.regime
    assert math.isclose(after.fraction_of_peak, before.fraction_of_peak, rel_tol=1e-9)


@given(peaks, bandwidths, ratios, ratios, st.floats(min_value=0.05, max_value=1.0))
# a subnormal tensor ratio: F/Q underflows and the efficiency rounded to 1.000004 (found by hypothesis)
@example(peak=209428723083.0, bandwidth=182587506.0, dram=1.0, tensor=5e-324, clock=1.0)
def test_counter_efficiency_and_fraction_stay_in_range(
    peak: float, bandwidth: float, dram: float, tensor: float, clock: float
) -> None:
    verdict = roofline.classify_counters(
        Roof(peak, bandwidth),
        roofline.CounterReading(dram_active=dram, tensor_active=tensor, clock_ratio=clock),
    )
    assert verdict.call.regime in roofline.REGIMES
    # the FP pipes are unreported: with the tensor pipe at 0, FLOP/s are unknown, not 0
    assert verdict.at.uncounted_pipes == ("fp64", "fp32", "fp16")
    if tensor * clock == 0.0:  # 0, or a subnormal activity whose u underflows to 0
        assert verdict.at.achieved_flop_per_second is None and verdict.at.intensity_flop_per_byte is None
        assert verdict.at.fraction_of_peak is None and verdict.at.roofline_efficiency == dram
        return
    assert verdict.at.achieved_flop_per_second is not None
    assert verdict.at.achieved_flop_per_second <= peak * (1 + 1e-12)
    assert verdict.at.fraction_of_peak is not None and 0 <= verdict.at.fraction_of_peak <= 1
    if verdict.at.roofline_efficiency is not None:
        assert 0 <= verdict.at.roofline_efficiency <= 1 + 1e-9
    if verdict.at.position is not None:
        assert (verdict.at.position < 1) == (tensor < dram)  # a / d: the roof at the running clock


precision_peaks = st.dictionaries(
    st.sampled_from(roofline.PRECISIONS), st.floats(min_value=0.01, max_value=1e5), min_size=1
)


@settings(max_examples=50)
@given(
    key=st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,6}){0,2}", fullmatch=True),
    peaks=precision_peaks,
    bandwidth=st.floats(min_value=0.01, max_value=100),
    nvml=st.lists(
        st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=30),
        max_size=3,
        unique_by=str.casefold,
    ),
    clock=st.none() | st.floats(min_value=100, max_value=5000),
)
def test_a_card_dumped_to_yaml_loads_back_equal(
    key: str, peaks: dict[str, float], bandwidth: float, nvml: list[str], clock: float | None
) -> None:
    spec = CardSpec(
        key=key,
        name=f"Test card {key}",
        nvml_names=nvml,
        peak_tflops=peaks,
        bandwidth_tbps=bandwidth,
        max_sm_clock_mhz=clock,
        source="https://example.com/datasheet.pdf",
    )
    text = yaml.safe_dump({"cards": [spec.model_dump(mode="json")]}, allow_unicode=True)
    (card,) = parse_catalog_text(text, "roundtrip.yaml")
    assert card == Card.from_spec(spec) and card.spec == spec


optional_ratios = st.none() | st.sampled_from([0.0, 1.0]) | ratios
clock_ratios = st.floats(min_value=1e-9, max_value=1.0)


def _pipe_utilizations(reading: roofline.CounterReading) -> dict[str, float]:
    """The definition: each reported pipe's u = a · k (tensor at its clock ratio, the rest at
    the vector one)."""
    found: dict[str, float] = {}
    for pipe in roofline.PIPES:
        activity = getattr(reading, f"{pipe}_active")
        if activity is not None:
            found[pipe] = activity * (reading.clock_ratio if pipe == "tensor" else reading.vector_clock_ratio)
    return found


def _counted_pipes(utilizations: dict[str, float], peaks: dict[str, float]) -> tuple[float, float] | None:
    """The definition: (F = Σ u · P, u* = max u) over the pipes with a peak, None when none."""
    flops = 0.0
    busiest = -1.0
    for pipe, u in utilizations.items():
        peak = peaks.get(pipe)
        if peak is not None:
            flops += u * peak
            if u > busiest:
                busiest = u
    return None if busiest < 0.0 else (flops, busiest)


@given(
    st.tuples(*[optional_ratios] * 8),
    clock_ratios,
    clock_ratios,
    st.dictionaries(st.sampled_from(roofline.FP_PIPES), peaks),
)
def test_one_pass_over_the_pipes_is_the_definitions(
    ratio_values: tuple[float | None, ...], k: float, vector_k: float, fp_peaks: dict[str, float]
) -> None:
    """pipe_sums: F and u* the bits of the definitions (u = a · k, F = Σ u · P, u* = max u; what
    the counters integrate), a* the busiest counted activity, the uncounted pipes unreported or busy with no
    peak (issue 19)."""
    reading = roofline.CounterReading(*ratio_values, clock_ratio=k, vector_clock_ratio=vector_k)
    pipe_peaks = {"tensor": 1e15, **fp_peaks}
    counted, active, uncounted = roofline.pipe_sums(reading, pipe_peaks)
    assert counted == _counted_pipes(_pipe_utilizations(reading), pipe_peaks)
    activities = {pipe: getattr(reading, f"{pipe}_active") for pipe in roofline.PIPES}
    with_peak = [a for pipe, a in activities.items() if a is not None and pipe in pipe_peaks]
    assert active == (max(with_peak) if with_peak else None)
    assert uncounted == tuple(
        pipe for pipe, a in activities.items() if a is None or (a > 0.0 and pipe not in pipe_peaks)
    )
