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
from exporter.roofline import CounterReading, Roof, RooflineInputError, Thresholds, check_reading

ROOF = Roof(1e15, 1e12)
EXACT = Thresholds(theta=0.5, dram_wall=0.5, tensor_wall=0.5, fp_pipe_wall=0.5)
"""Every wall at 0.5 and θ at 0.5: a ratio of 0.25 sits exactly on a wall's θ line."""


def judged(thresholds: Thresholds = EXACT, **ratios: float | None) -> roofline.CounterCall:
    """The counter form's call, checked against the rule functions it is made of."""
    ratios.setdefault("gr_engine_active", 0.9)
    reading = CounterReading(**ratios)  # type: ignore[arg-type]
    call = roofline.classify_counters(ROOF, reading, thresholds).call
    assert call == roofline.judge_counters(reading, thresholds)
    assert call.gr_engine_contradicted == roofline.gr_engine_contradicted(reading, thresholds)
    trusted = not call.gr_engine_contradicted
    assert roofline.is_idle(reading, thresholds, trust_gr_engine=trusted) == (call.regime == "idle")
    if call.regime == "latency_bound" and call.lever != roofline.LEVER_LATENCY_BUSY_SMS:
        gr = reading.gr_engine_active if trusted else None
        assert roofline.latency_lever(reading, gr_engine=gr) == call.lever
    return call


def regime(thresholds: Thresholds = EXACT, **ratios: float | None) -> tuple[str, str]:
    verdict = judged(thresholds, **ratios)
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
        (
            lambda: check_reading(CounterReading(dram_active=1.5, tensor_active=0.5)),
            "dram_active must be a ratio in",
        ),
        (
            lambda: check_reading(CounterReading(0.5, 0.5, sm_active=-0.1)),
            "sm_active must be a ratio in \\[0, 1\\]",
        ),
        (
            lambda: check_reading(CounterReading(0.5, 0.5, gr_engine_active=None, fp16_active=2.0)),
            "fp16_active must be",
        ),
        (
            lambda: check_reading(CounterReading(0.5, 0.5, sm_occupancy=True)),
            "sm_occupancy must be a finite ratio",
        ),
        (
            lambda: check_reading(CounterReading(0.5, math.nan)),
            "tensor_active must be a finite ratio, got nan",
        ),
        (
            lambda: check_reading(CounterReading(0.5, 0.5, clock_ratio=0.0)),
            "clock_ratio must be in \\(0, 1\\], got 0",
        ),
        (lambda: check_reading(CounterReading(0.5, 0.5, clock_ratio=1.5)), "clock_ratio must be in"),
        (lambda: check_reading(CounterReading(0.5, 0.5, clock_ratio=math.inf)), "clock_ratio must be in"),
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


def test_the_walls_are_judged_at_the_clock_the_gpu_runs() -> None:
    # the clock ratio scales the roof, not the activity against it: t = 0.6 of cycles is the
    # compute side and 0.645 of the tensor wall at any clock
    assert regime(dram_active=0.2, tensor_active=0.6, clock_ratio=0.5)[0] == "compute_bound"
    assert regime(dram_active=0.2, tensor_active=0.6, clock_ratio=1.0)[0] == "compute_bound"
    # t = 0.3 > d = 0.2: the compute side at k = 0.5 too (t·k = 0.15 would have put it on the memory side)
    assert regime(dram_active=0.2, tensor_active=0.3, clock_ratio=0.5) == regime(
        dram_active=0.2, tensor_active=0.3
    )


def test_on_the_ridge_is_the_compute_side() -> None:
    """position = t·k / d = 1 is not below 1: memory near its wall does not make it memory-bound."""
    memory_near_tensor_far = Thresholds(theta=0.5, dram_wall=0.5, tensor_wall=1.0)
    assert regime(memory_near_tensor_far, dram_active=0.375, tensor_active=0.375)[0] == "latency_bound"


FP_LEVERS = {
    "fp64_active": roofline.LEVER_FP64_PIPE,
    "fp32_active": roofline.LEVER_FP32_PIPE,
    "fp16_active": roofline.LEVER_FP16_PIPE,
}


@pytest.mark.parametrize("pipe", list(FP_LEVERS))
def test_each_fp_pipe_binds_from_theta_of_its_wall_with_its_own_lever(pipe: str) -> None:
    assert regime(dram_active=0.05, tensor_active=0.05, **{pipe: 0.25}) == (
        "compute_bound",
        FP_LEVERS[pipe],
    )  # exactly θ · fp_pipe_wall
    assert regime(dram_active=0.05, tensor_active=0.05, **{pipe: 0.24})[0] == "latency_bound"
    assert judged(dram_active=0.05, tensor_active=0.05, **{pipe: 0.25}).pipe == pipe.removesuffix("_active")


def test_the_tensor_pipe_wins_a_tie_with_an_fp_pipe() -> None:
    verdict = judged(dram_active=0.05, tensor_active=0.375, fp32_active=0.375)
    assert (verdict.regime, verdict.lever, verdict.pipe) == (
        "compute_bound",
        roofline.LEVER_COMPUTE,
        "tensor",
    )
    fp32_nearer = judged(dram_active=0.05, tensor_active=0.375, fp32_active=0.376)
    assert (fp32_nearer.lever, fp32_nearer.pipe) == (roofline.LEVER_FP32_PIPE, "fp32")


def test_the_busiest_pipe_against_dram_picks_the_side_of_the_ridge() -> None:
    # u* = d is the compute side; u* just below d the memory side
    assert regime(dram_active=0.375, tensor_active=0.05, fp32_active=0.375) == (
        "compute_bound",
        roofline.LEVER_FP32_PIPE,
    )
    assert regime(dram_active=0.4, tensor_active=0.05, fp32_active=0.375) == (
        "memory_bound",
        roofline.LEVER_MEMORY,
    )
    # default walls: FP32 at 0.95 is busier than DRAM at 0.7, so the compute side, at its wall
    reading = CounterReading(dram_active=0.7, tensor_active=0.1, fp32_active=0.95, gr_engine_active=0.9)
    assert roofline.classify_counters(ROOF, reading).call.lever == roofline.LEVER_FP32_PIPE


def test_the_fp_pipe_wall_divides() -> None:
    assert regime(dram_active=0.05, tensor_active=0.05, fp32_active=0.3)[1] == roofline.LEVER_FP32_PIPE
    loose = Thresholds(fp_pipe_wall=1.0)
    assert regime(loose, dram_active=0.05, tensor_active=0.05, fp32_active=0.3)[0] == "latency_bound"


def test_the_fp64_lever_depends_on_faster_fp64_tensor_cores() -> None:
    reading = CounterReading(dram_active=0.05, tensor_active=0.05, fp64_active=0.9, gr_engine_active=0.9)
    assert roofline.classify_counters(ROOF, reading).call.lever == roofline.LEVER_FP64_PIPE
    slow = roofline.classify_counters(ROOF, reading, fp64_tensor_faster=False)
    assert slow.call.lever == roofline.LEVER_FP64_PIPE_NO_TENSOR
    assert roofline.fp64_tensor_faster({"fp64": 9.7, "fp64_tensor": 19.5})
    assert not roofline.fp64_tensor_faster({"fp64": 40.0, "fp64_tensor": 40.0})  # equal is not faster
    assert not roofline.fp64_tensor_faster({"fp64": 1.0})
    assert roofline.fp64_tensor_faster({"fp64_tensor": 1.0})  # no FP64 pipe peak at all


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
        (0.9, 0.5, 0.1, roofline.LEVER_LATENCY_OCCUPANCY),  # busy SMs at low occupancy
        (0.9, 0.4, 0.1, roofline.LEVER_LATENCY_FEW_SMS),  # few SMs outranks low occupancy
        (0.9, None, 0.1, roofline.LEVER_LATENCY_OCCUPANCY),
        (0.9, None, 0.25, roofline.LEVER_LATENCY),  # low occupancy strictly below 0.25
        (0.9, None, None, roofline.LEVER_LATENCY),
    ],
)
def test_the_latency_lever_reads_the_engine_the_sms_and_occupancy(
    gr: float | None, sm: float | None, occupancy: float | None, lever: str
) -> None:
    assert regime(
        dram_active=0.1, tensor_active=0.1, gr_engine_active=gr, sm_active=sm, sm_occupancy=occupancy
    ) == ("latency_bound", lever)


@pytest.mark.parametrize("occupancy", [None, 0.25, 0.9])
def test_busy_sms_without_fp_pipes_ask_for_them(occupancy: float | None) -> None:
    """SM_ACTIVE from θ on (0.5 here) with neither wall near: unknown, naming fields 1006-1008."""
    verdict = judged(dram_active=0.1, tensor_active=0.1, sm_active=0.5, sm_occupancy=occupancy)
    assert (verdict.regime, verdict.lever) == ("unknown", roofline.LEVER_SMS_BUSY_NO_FP_PIPES)
    assert verdict.missing == ("fp64_active", "fp32_active", "fp16_active")
    below = judged(dram_active=0.1, tensor_active=0.1, sm_active=0.4999, sm_occupancy=occupancy)
    assert below.regime == "latency_bound" and below.missing == ()


@pytest.mark.parametrize("pipe", list(FP_LEVERS))
def test_busy_sms_with_quiet_fp_pipes_are_latency_bound_on_other_work(pipe: str) -> None:
    verdict = judged(dram_active=0.1, tensor_active=0.1, sm_active=0.5, **{pipe: 0.05})
    assert (verdict.regime, verdict.lever, verdict.missing) == (
        "latency_bound",
        roofline.LEVER_LATENCY_BUSY_SMS,
        (),
    )


@pytest.mark.parametrize(("gr", "partial"), [(0.49, True), (0.5, False), (None, False)])
def test_a_mig_instance_below_half_its_engine_is_told_part_of_it_idles(
    gr: float | None, partial: bool
) -> None:
    reading = CounterReading(dram_active=0.1, tensor_active=0.1, gr_engine_active=gr, sm_active=0.2)
    mig = roofline.classify_counters(ROOF, reading, EXACT, mig_instance=True)
    assert mig.call.regime == "latency_bound"
    assert (mig.call.lever == roofline.LEVER_LATENCY_MIG_PARTIAL) is partial
    whole = roofline.classify_counters(ROOF, reading, EXACT)
    assert whole.call.lever != roofline.LEVER_LATENCY_MIG_PARTIAL


# -- counter form: partial readings -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ratios", "verdict", "missing"),
    [
        ({"tensor_active": 0.25}, "compute_bound", ()),  # a pipe at θ of its wall needs no DRAM
        ({"tensor_active": 0.2}, "unknown", ("dram_active",)),
        ({"dram_active": 0.25}, "memory_bound", ()),  # DRAM at θ of its wall needs no pipe
        ({"dram_active": 0.2}, "unknown", ("tensor_active",)),
        ({"dram_active": 0.25, "tensor_active": 0.3}, "compute_bound", ()),
        ({"dram_active": 0.2, "fp32_active": 0.1}, "unknown", ("tensor_active",)),
        ({"sm_active": 0.9}, "unknown", ("dram_active", "tensor_active")),
        ({}, "unknown", ("dram_active", "tensor_active")),  # GR busy, nothing else
    ],
)
def test_a_partial_reading_says_what_it_can_and_names_what_it_lacks(
    ratios: dict[str, float], verdict: str, missing: tuple[str, ...]
) -> None:
    judged_ = judged(**ratios)
    assert (judged_.regime, judged_.missing) == (verdict, missing)
    if verdict == "unknown":
        assert judged_.lever == roofline.LEVER_UNKNOWN


def test_an_fp_pipe_alone_is_a_pipe_for_the_compute_wall() -> None:
    verdict = judged(fp64_active=0.25)
    assert (verdict.regime, verdict.pipe, verdict.lever) == (
        "compute_bound",
        "fp64",
        roofline.LEVER_FP64_PIPE,
    )
    assert judged(fp64_active=0.2).missing == ("dram_active", "tensor_active")


# -- counter form: contradictory readings -------------------------------------------------------------

QUIET_GR = Thresholds(theta=0.5, dram_wall=0.5, tensor_wall=0.5, fp_pipe_wall=0.5, idle_gr_engine=0.125)
"""The GR idle floor at 0.125: the evidence floor 2 × 0.125 = 0.25 and θ · dram_wall = 0.25 are exact."""


@pytest.mark.parametrize("field", ["sm_active", "tensor_active", "fp64_active", "fp32_active", "fp16_active"])
def test_an_idle_engine_is_contradicted_from_twice_its_floor_on(field: str) -> None:
    base: dict[str, float | None] = {"gr_engine_active": 0.0, "dram_active": 0.0, "tensor_active": 0.0}
    at = judged(QUIET_GR, **{**base, field: 0.25})
    assert at.gr_engine_contradicted and at.regime != "idle"
    below = judged(QUIET_GR, **{**base, field: 0.2499})
    assert not below.gr_engine_contradicted and below.regime == "idle"


def test_dram_near_its_wall_contradicts_an_idle_engine() -> None:
    at = judged(QUIET_GR, gr_engine_active=0.0, dram_active=0.25, tensor_active=0.0)
    assert at.gr_engine_contradicted and (at.regime, at.lever) == ("memory_bound", roofline.LEVER_MEMORY)
    below = judged(QUIET_GR, gr_engine_active=0.0, dram_active=0.2499, tensor_active=0.0)
    assert not below.gr_engine_contradicted and below.regime == "idle"


def test_an_engine_at_its_floor_is_neither_idle_nor_contradicted() -> None:
    verdict = judged(QUIET_GR, gr_engine_active=0.125, dram_active=0.0, tensor_active=0.9)
    assert not verdict.gr_engine_contradicted and verdict.regime == "compute_bound"


def test_a_set_aside_engine_does_not_pick_the_latency_lever() -> None:
    """A contradicted GR 0 on a MIG instance would read "part of its GPCs idle": the lever ignores it."""
    reading = CounterReading(dram_active=0.1, tensor_active=0.1, gr_engine_active=0.0, sm_active=0.3)
    mig = roofline.classify_counters(ROOF, reading, QUIET_GR, mig_instance=True)
    assert mig.call.gr_engine_contradicted
    assert (mig.call.regime, mig.call.lever) == ("latency_bound", roofline.LEVER_LATENCY_FEW_SMS)


# -- counter form: numbers ----------------------------------------------------------------------------


def test_intensity_is_defined_from_dram_epsilon_on() -> None:
    at = roofline.classify_counters(ROOF, CounterReading(roofline.DRAM_EPSILON, 0.5))
    assert at.at.position == pytest.approx(0.5 / roofline.DRAM_EPSILON)
    below = roofline.classify_counters(ROOF, CounterReading(roofline.DRAM_EPSILON * 0.99, 0.5))
    assert below.at.position is None


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


# -- defaults and the walls as shipped ------------------------------------------------------------


def test_at_the_default_walls_the_tensor_pipe_binds_before_an_fp_pipe() -> None:
    """Tensor wall 0.93, FP pipe wall 1.0: u = 0.56 is at θ of the first and below θ of the second."""
    tensor = CounterReading(dram_active=0.05, tensor_active=0.56, gr_engine_active=0.9)
    assert roofline.classify_counters(ROOF, tensor).call.regime == "compute_bound"
    fp32 = CounterReading(dram_active=0.05, tensor_active=0.05, fp32_active=0.56, gr_engine_active=0.9)
    assert roofline.classify_counters(ROOF, fp32).call.regime == "latency_bound"
    # 0.56 / 0.93 is nearer its wall than 0.58 / 1.0
    both = CounterReading(dram_active=0.05, tensor_active=0.56, fp32_active=0.58, gr_engine_active=0.9)
    assert roofline.classify_counters(ROOF, both).call.pipe == "tensor"


def test_the_public_defaults_trust_the_engine_and_assume_fp64_tensor_cores() -> None:
    quiet_engine = CounterReading(dram_active=0.3, tensor_active=0.01, gr_engine_active=0.01)
    assert roofline.is_idle(quiet_engine, Thresholds()) is True
    assert roofline.is_idle(quiet_engine, Thresholds(), trust_gr_engine=False) is False
    assert roofline.compute_lever("fp64") == roofline.LEVER_FP64_PIPE


def test_nothing_but_occupancy_is_not_idle() -> None:
    reading = CounterReading(sm_occupancy=0.5)
    assert roofline.is_idle(reading, Thresholds()) is False
    verdict = roofline.classify_counters(ROOF, reading)
    assert (verdict.call.regime, verdict.call.missing) == ("unknown", ("dram_active", "tensor_active"))


def test_an_idle_verdict_names_no_pipe() -> None:
    verdict = judged(dram_active=0.0, tensor_active=0.0, gr_engine_active=0.01)
    assert (verdict.regime, verdict.pipe) == ("idle", None)
    assert judged(dram_active=0.0, tensor_active=0.0, gr_engine_active=0.05).pipe == "tensor"


def test_the_compute_roof_of_a_mix_on_unit_peaks() -> None:
    """An unknown card's unit peaks: F = 0.8 FLOP/s is below 1, P_c is still F / u* = 2."""
    unit = {"tensor": 1.0, "fp64": 1.0, "fp32": 1.0, "fp16": 1.0}
    reading = CounterReading(dram_active=0.1, tensor_active=0.4, fp32_active=0.4)
    at = roofline.counter_position(reading, unit, 1.0)
    assert at.compute_roof_flop_per_second == pytest.approx(2.0)
    assert at.roofline_efficiency == pytest.approx(0.4)  # max(u*, d)


def test_classify_counters_reports_the_compute_roof_of_the_mix() -> None:
    reading = CounterReading(dram_active=0.1, tensor_active=0.2, fp64_active=0.2)
    verdict = roofline.classify_counters(ROOF, reading, vector_peaks={"fp64": 1e13})
    assert verdict.at.compute_roof_flop_per_second == pytest.approx((0.2 * 1e15 + 0.2 * 1e13) / 0.2)
