"""The roofline rules at their edges: every threshold at its exact value, every refusal naming
its input, every optional counter reaching the rule that reads it (docs/model.md).

Thresholds are chosen as powers of two where a comparison is tested at equality, so the float
arithmetic is exact and `>=` versus `>` is what decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from exporter import roofline
from exporter.roofline import CounterReading, Roof, RooflineInputError, Thresholds

ROOF = Roof(1e15, 1e12)
EXACT = Thresholds(theta=0.5, dram_wall=0.5, tensor_wall=0.5, fp_pipe_wall=0.5)
"""Every wall at 0.5 and θ at 0.5: a ratio of 0.25 sits exactly on a wall's θ line."""


def regime(thresholds: Thresholds = EXACT, **ratios: float | None) -> tuple[str, str]:
    ratios.setdefault("gr_engine_active", 0.9)
    reading = CounterReading(**ratios)  # type: ignore[arg-type]
    verdict = roofline.classify_counters(ROOF, reading, thresholds)
    assert (verdict.regime, verdict.lever) == roofline.counter_regime(reading, thresholds)
    assert roofline.is_idle(reading, thresholds) == (verdict.regime == "idle")
    if verdict.regime == "latency_bound":
        assert roofline.latency_lever(reading) == verdict.lever
    return verdict.regime, verdict.lever


# -- refusals name what they refuse ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: Roof(0, 1e12), "peak_flop_per_second must be a positive"),
        (lambda: Roof(1e15, -1), "bandwidth_bytes_per_second must be a positive"),
        (lambda: roofline.kernel_roofline(ROOF, 0, 1), "flops must be a positive"),
        (lambda: roofline.kernel_roofline(ROOF, 1, 0), "bytes must be a positive"),
        (lambda: roofline.kernel_roofline(ROOF, 1e308, 1e-308), "flops / bytes overflows"),
        (lambda: roofline.gemm_work(0, 2, 3, 2.0), "m must be a positive"),
        (lambda: roofline.gemm_work(1, 0, 3, 2.0), "n must be a positive"),
        (lambda: roofline.gemm_work(1, 2, 0, 2.0), "k must be a positive"),
        (lambda: roofline.gemm_work(1, 2, 3, 0), "element_bytes must be a positive"),
        (lambda: roofline.elementwise_work(0, 2.0), "n must be a positive"),
        (lambda: roofline.elementwise_work(8, 0), "element_bytes must be a positive"),
        (lambda: roofline.elementwise_work(8, 2.0, flops_per_element=0), "flops_per_element must be"),
        (lambda: roofline.elementwise_work(8, 2.0, reads=0, writes=0), "reads \\+ writes must be positive"),
        (
            lambda: roofline.elementwise_work(8, 2.0, reads=-1, writes=2),
            "reads \\+ writes must be positive, got reads=-1, writes=2",
        ),
        (
            lambda: roofline.elementwise_work(8, 2.0, reads=2, writes=-1),
            "reads \\+ writes must be positive, got reads=2, writes=-1",
        ),
        (lambda: roofline.decode_work(0, 1, 2.0), "parameters must be a positive"),
        (lambda: roofline.decode_work(7e9, 0, 2.0), "batch must be a positive"),
        (lambda: roofline.decode_work(7e9, 1, 0), "element_bytes must be a positive"),
        (lambda: Thresholds(theta=0), "threshold theta must be in \\(0, 1\\], got 0"),
        (lambda: Thresholds(dram_wall=1.5), "threshold dram_wall must be in"),
        (lambda: Thresholds(idle_any=math.nan), "threshold idle_any must be in"),
        (lambda: CounterReading(dram_active=1.5, tensor_active=0.5), "dram_active must be a ratio in"),
        (lambda: CounterReading(0.5, 0.5, sm_active=-0.1), "sm_active must be a ratio in \\[0, 1\\]"),
        (lambda: CounterReading(0.5, 0.5, gr_engine_active=None, fp16_active=2.0), "fp16_active must be"),
        (lambda: CounterReading(0.5, 0.5, sm_occupancy=True), "sm_occupancy must be a finite ratio"),
        (lambda: CounterReading(0.5, math.nan), "tensor_active must be a finite ratio, got nan"),
        (lambda: CounterReading(0.5, 0.5, clock_ratio=0.0), "clock_ratio must be in \\(0, 1\\], got 0"),
        (lambda: CounterReading(0.5, 0.5, clock_ratio=1.5), "clock_ratio must be in"),
        (lambda: CounterReading(0.5, 0.5, clock_ratio=math.inf), "clock_ratio must be in"),
    ],
)
def test_a_refusal_names_the_input_it_refuses(call: Callable[[], object], named: str) -> None:
    with pytest.raises(RooflineInputError, match=f"^{named}"):
        call()


def test_the_edges_of_what_is_accepted() -> None:
    assert Thresholds(theta=1.0, idle_any=1.0).theta == 1.0
    assert CounterReading(0.0, 1.0, clock_ratio=1.0).clock_ratio == 1.0
    # a pure write (memset) or a pure read (reduction into registers) is elementwise work too
    assert roofline.elementwise_work(8, 2.0, reads=0, writes=1).bytes == 16.0
    assert roofline.elementwise_work(8, 2.0, reads=1, writes=0).bytes == 16.0


# -- kernel form ------------------------------------------------------------------------------------


def test_the_balanced_band_includes_its_edge() -> None:
    roof = Roof(100.0, 1.0)  # ridge 100 FLOP/byte; the band is ±2 FLOP/byte
    assert roofline.kernel_regime(102.0, roof.ridge_flop_per_byte) == "balanced"
    assert roofline.kernel_regime(98.0, roof.ridge_flop_per_byte) == "balanced"
    assert roofline.kernel_regime(97.0, roof.ridge_flop_per_byte) == "memory_bound"


@pytest.mark.parametrize("name", [*roofline.REGIMES, "balanced"])
def test_every_regime_has_its_lever(name: str) -> None:
    assert roofline.lever_for(name).startswith({"balanced": "on the ridge"}.get(name, name.replace("_", "-")))


# -- counter form: idle -------------------------------------------------------------------------------


def test_idle_is_strictly_below_the_graphics_engine_threshold() -> None:
    assert regime(dram_active=0.0, tensor_active=0.0, gr_engine_active=0.0499)[0] == "idle"
    assert regime(dram_active=0.0, tensor_active=0.0, gr_engine_active=0.05)[0] == "latency_bound"


@pytest.mark.parametrize(
    "field", ["dram_active", "tensor_active", "sm_active", "fp64_active", "fp32_active", "fp16_active"]
)
def test_without_the_graphics_engine_any_activity_at_two_percent_is_not_idle(field: str) -> None:
    quiet: dict[str, float | None] = {"dram_active": 0.01, "tensor_active": 0.01, "gr_engine_active": None}
    assert regime(**quiet)[0] == "idle"
    assert regime(**{**quiet, field: 0.0199})[0] == "idle"
    assert regime(**{**quiet, field: 0.02})[0] != "idle"


# -- counter form: walls ------------------------------------------------------------------------------


def test_a_wall_binds_from_theta_on() -> None:
    assert regime(dram_active=0.25, tensor_active=0.125) == ("memory_bound", roofline.LEVER_MEMORY)
    assert regime(dram_active=0.125, tensor_active=0.25) == ("compute_bound", roofline.LEVER_COMPUTE)
    assert regime(dram_active=0.2, tensor_active=0.1)[0] == "latency_bound"
    assert regime(dram_active=0.1, tensor_active=0.2)[0] == "latency_bound"


def test_the_clock_ratio_scales_tensor_activity_before_the_walls() -> None:
    # t·k = 0.3 · 0.5 = 0.15 < d: the memory side, DRAM below its θ line (t / k would be 0.6)
    assert regime(dram_active=0.2, tensor_active=0.3, clock_ratio=0.5)[0] == "latency_bound"
    assert regime(dram_active=0.2, tensor_active=0.6, clock_ratio=0.5)[0] == "compute_bound"


def test_on_the_ridge_is_the_compute_side() -> None:
    """position = t·k / d = 1 is not below 1: memory near its wall does not make it memory-bound."""
    memory_near_tensor_far = Thresholds(theta=0.5, dram_wall=0.5, tensor_wall=1.0)
    assert regime(memory_near_tensor_far, dram_active=0.375, tensor_active=0.375)[0] == "latency_bound"


@pytest.mark.parametrize("pipe", ["fp64_active", "fp32_active", "fp16_active"])
def test_each_fp_pipe_reaches_the_fp_pipe_rule(pipe: str) -> None:
    assert regime(dram_active=0.05, tensor_active=0.05, **{pipe: 0.25}) == (
        "compute_bound",
        roofline.LEVER_FP_PIPE,
    )  # exactly θ · fp_pipe_wall
    assert regime(dram_active=0.05, tensor_active=0.05, **{pipe: 0.24})[0] == "latency_bound"


def test_the_fp_pipe_wins_ties_with_the_tensor_and_memory_walls() -> None:
    assert regime(dram_active=0.05, tensor_active=0.375, fp32_active=0.375)[1] == roofline.LEVER_FP_PIPE
    assert regime(dram_active=0.375, tensor_active=0.05, fp32_active=0.375)[1] == roofline.LEVER_FP_PIPE
    assert regime(dram_active=0.4, tensor_active=0.05, fp32_active=0.375) == (
        "memory_bound",
        roofline.LEVER_MEMORY,
    )


def test_the_fp_pipe_beats_a_memory_wall_it_is_nearer_to() -> None:
    # default walls: memory at 0.7 / 0.8 = 0.875 of its wall, FP32 at 0.95 of its own
    reading = CounterReading(dram_active=0.7, tensor_active=0.1, fp32_active=0.95, gr_engine_active=0.9)
    assert roofline.classify_counters(ROOF, reading).lever == roofline.LEVER_FP_PIPE


def test_the_fp_pipe_wall_divides() -> None:
    assert regime(dram_active=0.05, tensor_active=0.05, fp32_active=0.3)[1] == roofline.LEVER_FP_PIPE
    loose = Thresholds(fp_pipe_wall=1.0)
    assert regime(loose, dram_active=0.05, tensor_active=0.05, fp32_active=0.3)[0] == "latency_bound"


# -- counter form: latency levers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gr", "sm", "occupancy", "lever"),
    [
        (0.9, 0.2, None, roofline.LEVER_LATENCY_STARVED),
        (0.5, 0.2, None, roofline.LEVER_LATENCY_STARVED),  # the engine counts as busy from 0.5
        (0.49, 0.2, None, roofline.LEVER_LATENCY_FEW_SMS),
        (0.9, 0.35, None, roofline.LEVER_LATENCY_FEW_SMS),  # starved strictly below 0.35
        (0.9, 0.4, None, roofline.LEVER_LATENCY_FEW_SMS),
        (None, 0.2, None, roofline.LEVER_LATENCY_FEW_SMS),  # no engine reading: not "starved"
        (0.9, 0.5, 0.1, roofline.LEVER_LATENCY_OCCUPANCY),  # few SMs strictly below 0.5
        (0.9, 0.9, None, roofline.LEVER_LATENCY),
        (0.9, 0.9, 0.25, roofline.LEVER_LATENCY),  # low occupancy strictly below 0.25
        (0.9, 0.9, 0.9, roofline.LEVER_LATENCY),
    ],
)
def test_the_latency_lever_reads_the_engine_the_sms_and_occupancy(
    gr: float | None, sm: float | None, occupancy: float | None, lever: str
) -> None:
    assert regime(
        dram_active=0.1, tensor_active=0.1, gr_engine_active=gr, sm_active=sm, sm_occupancy=occupancy
    ) == ("latency_bound", lever)


# -- counter form: numbers ----------------------------------------------------------------------------


def test_intensity_is_defined_from_dram_epsilon_on() -> None:
    at = roofline.classify_counters(ROOF, CounterReading(roofline.DRAM_EPSILON, 0.5))
    assert at.position == pytest.approx(0.5 / roofline.DRAM_EPSILON)
    below = roofline.classify_counters(ROOF, CounterReading(roofline.DRAM_EPSILON * 0.99, 0.5))
    assert below.position is None


@pytest.mark.parametrize(
    ("clock", "max_clock", "ratio"),
    [
        (0.25, 0.5, 0.5),  # tiny but valid numbers are still a ratio
        (990.0, 1980.0, 0.5),
        (0.0, 1980.0, 1.0),  # no clock reading is not a stopped clock
        (-5.0, 1980.0, 1.0),
        (math.nan, 1980.0, 1.0),
        (math.inf, 1980.0, 1.0),
        (1000.0, 0.0, 1.0),
        (1000.0, -1.0, 1.0),
    ],
)
def test_clock_ratio_falls_back_to_one_for_unusable_numbers(
    clock: float, max_clock: float, ratio: float
) -> None:
    assert roofline.clock_ratio(clock, max_clock) == ratio


def test_dominant_precision_counts_a_pipe_from_the_floor_on() -> None:
    floor = roofline.DOMINANT_PIPE_FLOOR
    assert roofline.dominant_precision("bf16", imma_active=floor) == "int8"
    assert roofline.dominant_precision("bf16", imma_active=floor * 0.99) == "bf16"


def test_dominant_precision_compares_the_pipes_by_activity_not_by_name() -> None:
    assert roofline.dominant_precision("fp8", imma_active=0.3, hmma_active=0.6) == "bf16"
    assert roofline.dominant_precision("fp8", imma_active=0.3, dfma_active=0.6) == "fp64_tensor"
