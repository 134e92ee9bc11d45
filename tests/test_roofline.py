"""The roofline formulas on worked examples (docs/design.md, "The model")."""

from __future__ import annotations

import math

import pytest

from exporter import roofline
from exporter.catalog import Catalog
from exporter.roofline import CounterReading, Roof, Thresholds

H100_BF16 = Roof(989.5e12, 3.35e12)


def test_h100_worked_check_from_the_design_brief() -> None:
    verdict = roofline.kernel_roofline(H100_BF16, 4e12, 40e9)
    assert verdict.intensity_flop_per_byte == pytest.approx(100)
    assert H100_BF16.ridge_flop_per_byte == pytest.approx(295.37, rel=1e-3)
    assert verdict.regime == "memory_bound"
    assert verdict.memory_time_seconds == pytest.approx(11.94e-3, rel=1e-3)
    assert verdict.compute_time_seconds == pytest.approx(4.04e-3, rel=1e-3)
    assert verdict.floor_time_seconds == verdict.memory_time_seconds
    assert verdict.attainable_flop_per_second == pytest.approx(335e12)
    assert verdict.fraction_of_peak == pytest.approx(0.3386, rel=1e-3)
    assert verdict.lever == roofline.LEVER_MEMORY


def test_catalog_h100_reproduces_the_worked_check(catalog: Catalog) -> None:
    roof = catalog.lookup("NVIDIA H100 80GB HBM3").roof("bf16")
    assert roof == H100_BF16


def test_high_intensity_is_compute_bound_and_the_compute_time_is_the_floor() -> None:
    verdict = roofline.kernel_roofline(H100_BF16, 4e12, 4e9)  # I = 1000 > 295
    assert verdict.regime == "compute_bound"
    assert verdict.floor_time_seconds == verdict.compute_time_seconds == pytest.approx(4e12 / 989.5e12)
    assert verdict.attainable_flop_per_second == H100_BF16.peak_flop_per_second
    assert verdict.fraction_of_peak == 1.0
    assert verdict.lever == roofline.LEVER_COMPUTE


@pytest.mark.parametrize("offset", [-0.019, 0.0, 0.019])
def test_within_two_percent_of_the_ridge_is_balanced(offset: float) -> None:
    ridge = H100_BF16.ridge_flop_per_byte
    verdict = roofline.kernel_roofline(H100_BF16, ridge * (1 + offset) * 1e9, 1e9)
    assert verdict.regime == "balanced"


@pytest.mark.parametrize(("offset", "regime"), [(-0.021, "memory_bound"), (0.021, "compute_bound")])
def test_just_outside_the_band_takes_a_side(offset: float, regime: str) -> None:
    ridge = H100_BF16.ridge_flop_per_byte
    assert roofline.kernel_roofline(H100_BF16, ridge * (1 + offset) * 1e9, 1e9).regime == regime


def test_gemm_work_counts_two_flops_per_term_and_each_operand_once() -> None:
    work = roofline.gemm_work(4096, 2048, 1024, 2.0)
    assert work.flops == 2 * 4096 * 2048 * 1024
    assert work.bytes == 2.0 * (4096 * 1024 + 1024 * 2048 + 4096 * 2048)


def test_gemv_is_memory_bound_on_h100() -> None:
    work = roofline.gemm_work(1, 8192, 8192, 2.0)
    verdict = roofline.kernel_roofline(H100_BF16, work.flops, work.bytes)
    assert verdict.intensity_flop_per_byte == pytest.approx(1.0, rel=1e-3)  # 2k / (2k) per weight
    assert verdict.regime == "memory_bound"


def test_large_square_gemm_is_compute_bound_on_h100() -> None:
    work = roofline.gemm_work(8192, 8192, 8192, 2.0)
    # I = 2n^3 / (2 * 3n^2) = n / 3 = 2731 FLOP/byte
    verdict = roofline.kernel_roofline(H100_BF16, work.flops, work.bytes)
    assert verdict.intensity_flop_per_byte == pytest.approx(8192 / 3)
    assert verdict.regime == "compute_bound"


def test_elementwise_reads_and_writes_each_element_once_by_default() -> None:
    work = roofline.elementwise_work(1_000_000, 4.0)
    assert work.flops == 1_000_000
    assert work.bytes == 8_000_000
    work = roofline.elementwise_work(1000, 2.0, flops_per_element=3, reads=2, writes=1)
    assert (work.flops, work.bytes) == (3000, 6000)


@pytest.mark.parametrize("batch", [1, 8, 64, 256])
def test_decode_intensity_is_about_the_batch_in_bf16(batch: int) -> None:
    work = roofline.decode_work(70e9, batch, roofline.ELEMENT_BYTES["bf16"])
    assert work.flops == 2 * 70e9 * batch
    assert work.bytes == 2 * 70e9
    assert work.flops / work.bytes == pytest.approx(batch)


def test_decode_crosses_the_h100_ridge_near_batch_295() -> None:
    below = roofline.decode_work(7e9, 280, 2.0)
    above = roofline.decode_work(7e9, 310, 2.0)
    assert roofline.kernel_roofline(H100_BF16, below.flops, below.bytes).regime == "memory_bound"
    assert roofline.kernel_roofline(H100_BF16, above.flops, above.bytes).regime == "compute_bound"


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True])
def test_kernel_refuses_unusable_numbers_naming_them(bad: float) -> None:
    with pytest.raises(roofline.RooflineInputError, match="flops"):
        roofline.kernel_roofline(H100_BF16, bad, 1e9)
    with pytest.raises(roofline.RooflineInputError, match="bytes"):
        roofline.kernel_roofline(H100_BF16, 1e9, bad)


def test_roof_refuses_a_zero_bandwidth() -> None:
    with pytest.raises(roofline.RooflineInputError, match="bandwidth"):
        Roof(1e15, 0)


# --- counter form ---------------------------------------------------------------------------


def test_counter_form_achieved_rates_and_position() -> None:
    reading = CounterReading(dram_active=0.5, tensor_active=0.2, clock_ratio=0.9)
    verdict = roofline.classify_counters(H100_BF16, reading)
    assert verdict.at.flop_utilization == pytest.approx(0.18)
    assert verdict.at.achieved_flop_per_second == pytest.approx(0.18 * 989.5e12)
    assert verdict.at.achieved_bandwidth_bytes_per_second == pytest.approx(0.5 * 3.35e12)
    assert verdict.at.position == pytest.approx(0.2 / 0.5)  # a / d: on the roof at the clock it runs
    assert verdict.at.intensity_flop_per_byte == pytest.approx(0.36 * H100_BF16.ridge_flop_per_byte)
    # memory side: attainable = I * B, so efficiency = achieved / (I * B) = d
    assert verdict.at.attainable_flop_per_second == pytest.approx(
        verdict.at.intensity_flop_per_byte * 3.35e12
    )
    assert verdict.at.roofline_efficiency == pytest.approx(0.5)


def test_memory_wall_with_idle_tensor_cores_is_memory_bound() -> None:
    verdict = roofline.classify_counters(H100_BF16, CounterReading(dram_active=0.7, tensor_active=0.05))
    assert verdict.call.regime == "memory_bound"
    assert verdict.call.lever == roofline.LEVER_MEMORY


def test_busy_tensor_cores_with_light_memory_are_compute_bound() -> None:
    verdict = roofline.classify_counters(H100_BF16, CounterReading(dram_active=0.2, tensor_active=0.8))
    assert verdict.call.regime == "compute_bound"
    assert verdict.call.lever == roofline.LEVER_COMPUTE


def test_a_low_clock_does_not_take_busy_tensor_cores_off_their_wall() -> None:
    # busy 80 % of cycles at 60 % of the quoted clock: at the wall of the roof at that clock
    # (before issue 19, t·k = 0.48 < θ · 0.93 called this latency-bound: "fewer registers")
    reading = CounterReading(dram_active=0.2, tensor_active=0.8, gr_engine_active=0.9, clock_ratio=0.6)
    verdict = roofline.classify_counters(H100_BF16, reading)
    assert verdict.call.regime == "compute_bound"
    assert verdict.at.achieved_flop_per_second == pytest.approx(0.8 * 0.6 * 989.5e12)
    assert verdict.at.compute_roof_flop_per_second == pytest.approx(0.6 * 989.5e12)  # the roof at the clock


def test_an_fp32_pipe_at_its_wall_is_compute_bound_with_the_tensor_core_lever() -> None:
    reading = CounterReading(dram_active=0.1, tensor_active=0.0, fp32_active=0.9, gr_engine_active=0.95)
    verdict = roofline.classify_counters(H100_BF16, reading)
    assert verdict.call.regime == "compute_bound"
    assert verdict.call.lever == roofline.LEVER_FP32_PIPE
    assert verdict.call.pipe == "fp32"


def test_busy_engine_with_neither_wall_is_latency_bound() -> None:
    reading = CounterReading(dram_active=0.15, tensor_active=0.1, gr_engine_active=0.9)
    verdict = roofline.classify_counters(H100_BF16, reading)
    assert verdict.call.regime == "latency_bound"


def test_idle_uses_the_graphics_engine_where_reported() -> None:
    reading = CounterReading(dram_active=0.01, tensor_active=0.0, gr_engine_active=0.03)
    assert roofline.classify_counters(H100_BF16, reading).call.regime == "idle"
    reading = CounterReading(dram_active=0.01, tensor_active=0.0, gr_engine_active=0.06)
    assert roofline.classify_counters(H100_BF16, reading).call.regime == "latency_bound"


def test_idle_without_the_graphics_engine_needs_every_activity_under_two_percent() -> None:
    assert roofline.classify_counters(H100_BF16, CounterReading(0.01, 0.01)).call.regime == "idle"
    assert roofline.classify_counters(H100_BF16, CounterReading(0.01, 0.03)).call.regime != "idle"


def test_no_dram_activity_leaves_intensity_undefined() -> None:
    verdict = roofline.classify_counters(H100_BF16, CounterReading(0.0, 0.7))
    assert verdict.at.intensity_flop_per_byte is None
    assert verdict.at.position is None
    assert verdict.at.roofline_efficiency == pytest.approx(0.7)


def test_thresholds_move_the_wall() -> None:
    reading = CounterReading(dram_active=0.4, tensor_active=0.05, gr_engine_active=0.9)
    # 0.4/0.8 = 0.5 < 0.6
    assert roofline.classify_counters(H100_BF16, reading).call.regime == "latency_bound"
    assert roofline.classify_counters(H100_BF16, reading, Thresholds(theta=0.5)).call.regime == "memory_bound"


def test_clock_ratio_is_clamped_and_defaults_to_one() -> None:
    assert roofline.clock_ratio(990, 1980) == pytest.approx(0.5)
    assert roofline.clock_ratio(2100, 1980) == 1.0
    assert roofline.clock_ratio(None, 1980) == 1.0
    assert roofline.clock_ratio(1500, None) == 1.0


def test_dominant_precision_follows_the_busiest_tensor_pipe() -> None:
    assert roofline.dominant_precision("bf16", imma_active=0.6, hmma_active=0.1) == "int8"
    assert roofline.dominant_precision("bf16", dfma_active=0.5) == "fp64_tensor"
    assert roofline.dominant_precision("fp8", hmma_active=0.5) == "bf16"
    assert roofline.dominant_precision("bf16", imma_active=0.001) == "bf16"
    assert roofline.dominant_precision("bf16", dfma_active=0.5, available=["fp16", "fp32"]) == "bf16"


@pytest.mark.parametrize(
    ("dram", "tensor", "regime"),
    [
        (0.50, 0.45, "memory_bound"),  # memory side, DRAM at 0.625 of its wall
        (0.50, 0.55, "latency_bound"),  # compute side, tensors at 0.59 of theirs: no wall binds
        (0.40, 0.30, "latency_bound"),  # memory side, DRAM below 0.6 of its wall
        (0.30, 0.60, "compute_bound"),  # compute side, tensors at 0.65 of their wall
    ],
)
def test_the_side_of_the_ridge_picks_the_wall_and_theta_says_whether_it_binds(
    dram: float, tensor: float, regime: str
) -> None:
    reading = CounterReading(dram_active=dram, tensor_active=tensor, gr_engine_active=0.95)
    assert roofline.classify_counters(H100_BF16, reading).call.regime == regime


@pytest.mark.parametrize(
    "roof",
    [Roof(1e24, 5e-324), Roof(5e-324, 5e-324)],
    ids=["bytes-underflow", "both-underflow"],
)
def test_counter_form_survives_achieved_bytes_underflowing_to_zero(roof: Roof) -> None:
    # d·B rounds to 0.0 for a subnormal bandwidth although d is well above DRAM_EPSILON:
    # the intensity is then undefined, never a ZeroDivisionError
    verdict = roofline.classify_counters(roof, CounterReading(dram_active=0.5, tensor_active=0.5))
    assert verdict.at.achieved_bandwidth_bytes_per_second == 0.0
    assert verdict.at.intensity_flop_per_byte is None
