"""The roofline model: pure arithmetic on peaks, bandwidths, FLOPs, bytes and counter ratios.

Standard library only, so the math can be imported and tested without FastAPI, Prometheus or a
GPU library (docs/design.md, "Layout and layers"). Every formula here is one line of
docs/design.md, "The model":

    ridge R = P / B;  intensity I = F / Q;  attainable = min(P, I * B)

The seed fact it all rests on is Williams, Waterman & Patterson, "Roofline: an insightful visual
performance model for multicore architectures" (CACM 52(4), 2009): a kernel is bounded by either
its memory traffic or its arithmetic, whichever takes longer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

Precision = Literal["fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
"""Precisions a card may list a dense peak for (docs/design.md, "Card catalog"): the one list the
catalog, the request bodies and the `--precision` flag all read."""

ELEMENT_BYTES: dict[str, float] = {
    "fp64": 8.0,
    "fp64_tensor": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,  # stored as fp32 in memory; only the multiplier truncates the mantissa
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
}
"""Bytes one element occupies in memory, per precision (dtype)."""

BALANCED_BAND = 0.02
"""Within ±2 % of the ridge a kernel hits both walls at once (docs/design.md): call it balanced."""

KernelRegime = Literal["memory_bound", "compute_bound", "balanced"]
CounterRegime = Literal["idle", "memory_bound", "compute_bound", "latency_bound"]
REGIMES: tuple[CounterRegime, ...] = get_args(CounterRegime)
"""The regimes a GPU can be in, in the order metrics, rules and dashboards list them."""

LEVER_MEMORY = (
    "memory-bound: move fewer bytes per FLOP — fuse kernels, tile for reuse, lower the precision "
    "(fp8/int8 halves the bytes), batch more work per weight read"
)
LEVER_COMPUTE = (
    "compute-bound: do fewer or cheaper FLOPs — lower the precision (fp8 doubles the tensor peak), "
    "use structured sparsity, or a cheaper algorithm"
)
LEVER_BALANCED = (
    "on the ridge: both walls bind at once — lower precision helps both; otherwise cut bytes and "
    "FLOPs together"
)
LEVER_IDLE = "idle: nothing runs — release the GPU or give it work"
LEVER_FP_PIPE = (
    "compute-bound on the CUDA-core FP pipes, not the tensor cores: move the math onto tensor cores "
    "(TF32/BF16/FP16 matmuls, cuBLAS/cuDNN tensor-op paths) for several times the peak"
)
LEVER_LATENCY = (
    "latency-bound: busy but neither wall is reached — launch overhead, low occupancy or host/input "
    "stalls; batch more work per kernel, use CUDA graphs, overlap the input pipeline"
)
LEVER_LATENCY_FEW_SMS = (
    "latency-bound with few SMs busy: the grids are too small or kernels too short — fuse kernels, "
    "batch requests, capture CUDA graphs to cut launch overhead"
)
LEVER_LATENCY_OCCUPANCY = (
    "latency-bound at low occupancy: SMs are busy but hold few warps — reduce registers or shared "
    "memory per block, raise the block count, so more warps hide the latency"
)
LEVER_LATENCY_STARVED = (
    "latency-bound and starved: the engine is busy but the SMs mostly wait — look at the host: "
    "data loading, synchronisation, CPU-side launch, PCIe transfers"
)


class RooflineInputError(ValueError):
    """A number the model cannot use (zero, negative, NaN, infinite); the message names it."""


def _require_positive(name: str, value: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise RooflineInputError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise RooflineInputError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Roof:
    """A card at one precision: dense peak P (FLOP/s) and memory bandwidth B (bytes/s)."""

    peak_flop_per_second: float
    bandwidth_bytes_per_second: float

    def __post_init__(self) -> None:
        _require_positive("peak_flop_per_second", self.peak_flop_per_second)
        _require_positive("bandwidth_bytes_per_second", self.bandwidth_bytes_per_second)

    @property
    def ridge_flop_per_byte(self) -> float:
        """R = P / B: the intensity at which memory time equals compute time."""
        return self.peak_flop_per_second / self.bandwidth_bytes_per_second

    def attainable(self, intensity: float) -> float:
        """min(P, I * B): the roof over intensity I."""
        return min(self.peak_flop_per_second, intensity * self.bandwidth_bytes_per_second)


@dataclass(frozen=True, slots=True)
class Work:
    """An amount of work: F FLOPs over Q bytes of memory traffic."""

    flops: float
    bytes: float


@dataclass(frozen=True, slots=True)
class KernelVerdict:
    """The textbook roofline answer for one kernel (docs/design.md, "The model": kernel form)."""

    flops: float
    bytes: float
    intensity_flop_per_byte: float
    memory_time_seconds: float
    compute_time_seconds: float
    floor_time_seconds: float
    attainable_flop_per_second: float
    fraction_of_peak: float
    regime: KernelRegime
    lever: str


def kernel_regime(intensity: float, ridge: float) -> KernelRegime:
    """memory_bound left of the ridge, compute_bound right of it, balanced within ±2 %."""
    if abs(intensity - ridge) <= BALANCED_BAND * ridge:
        return "balanced"
    return "memory_bound" if intensity < ridge else "compute_bound"


REGIME_LEVERS: Mapping[str, str] = MappingProxyType(
    {
        "idle": LEVER_IDLE,
        "memory_bound": LEVER_MEMORY,
        "compute_bound": LEVER_COMPUTE,
        "latency_bound": LEVER_LATENCY,
        "balanced": LEVER_BALANCED,
    }
)
"""Each regime's general lever, in the API's own words (the dashboards' legends read it too)."""


def lever_for(regime: str) -> str:
    """The sentence that names the lever for a wall."""
    return REGIME_LEVERS[regime]


def kernel_roofline(roof: Roof, flops: float, bytes_: float) -> KernelVerdict:
    """Place F FLOPs over Q bytes on the roof.

    memory time = Q / B, compute time = F / P, the floor is the larger (a kernel cannot beat
    either wall), attainable = min(P, I * B), fraction of peak = attainable / P.
    """
    f = _require_positive("flops", flops)
    q = _require_positive("bytes", bytes_)
    intensity = f / q
    if not math.isfinite(intensity):
        raise RooflineInputError(f"flops / bytes overflows: {f!r} / {q!r}")
    memory_time = q / roof.bandwidth_bytes_per_second
    compute_time = f / roof.peak_flop_per_second
    attainable = roof.attainable(intensity)
    regime = kernel_regime(intensity, roof.ridge_flop_per_byte)
    return KernelVerdict(
        flops=f,
        bytes=q,
        intensity_flop_per_byte=intensity,
        memory_time_seconds=memory_time,
        compute_time_seconds=compute_time,
        floor_time_seconds=max(memory_time, compute_time),
        attainable_flop_per_second=attainable,
        fraction_of_peak=attainable / roof.peak_flop_per_second,
        regime=regime,
        lever=lever_for(regime),
    )


# --- operation form: dims and dtypes into FLOPs and bytes -------------------------------------


def gemm_work(m: int, n: int, k: int, element_bytes: float) -> Work:
    """C[m,n] = A[m,k] @ B[k,n]: F = 2mnk (one multiply and one add per term), Q = e(mk + kn + mn).

    Each operand is read once and C written once: the ideal-reuse traffic, which is what the
    roofline wants (a real kernel's tiles may re-read; that shows up as lower efficiency).
    A gemv is the m = 1 case.
    """
    for name, v in (("m", m), ("n", n), ("k", k)):
        _require_positive(name, v)
    _require_positive("element_bytes", element_bytes)
    return Work(flops=2.0 * m * n * k, bytes=element_bytes * (m * k + k * n + m * n))


def elementwise_work(
    n: int,
    element_bytes: float,
    flops_per_element: float = 1.0,
    reads: int = 1,
    writes: int = 1,
) -> Work:
    """y = f(x) over n elements: F = n * flops_per_element, Q = e * n * (reads + writes)."""
    _require_positive("n", n)
    _require_positive("element_bytes", element_bytes)
    _require_positive("flops_per_element", flops_per_element)
    if reads < 0 or writes < 0 or reads + writes <= 0:
        raise RooflineInputError(f"reads + writes must be positive, got reads={reads}, writes={writes}")
    return Work(flops=float(n) * flops_per_element, bytes=element_bytes * n * (reads + writes))


def decode_work(parameters: float, batch: int, element_bytes: float) -> Work:
    """One decode step of an N-parameter model at batch b: F = 2Nb, Q = e * N (weights only).

    Every weight is read once per step and used for b tokens, so I = 2b / e: about b in bf16.
    KV-cache and activation traffic are left out (docs/design.md, "The model").
    """
    _require_positive("parameters", parameters)
    _require_positive("batch", batch)
    _require_positive("element_bytes", element_bytes)
    return Work(flops=2.0 * parameters * batch, bytes=element_bytes * parameters)


# --- counter form: DCGM activity ratios into a position on the roof ----------------------------


@dataclass(frozen=True, slots=True)
class Thresholds:
    """How near a wall counts as "at" it, and what counts as idle (docs/design.md, "The model": regimes).

    dram_wall 0.8: NVIDIA's DCGM guidance that about 0.8 is the practical maximum of DRAM_ACTIVE.
    tensor_wall 0.93: what dcgmproftester's tensor-core load reaches on PIPE_TENSOR_ACTIVE.
    theta 0.6: a wall is "near" at 60 % of its practical maximum (DRAM_ACTIVE ≥ 0.48, tensor
    activity · clock ratio ≥ 0.56 at the defaults); below that on both, a busy GPU is latency-bound.
    """

    theta: float = 0.6
    dram_wall: float = 0.8
    tensor_wall: float = 0.93
    fp_pipe_wall: float = 1.0
    idle_gr_engine: float = 0.05
    idle_any: float = 0.02

    def __post_init__(self) -> None:
        for name in ("theta", "dram_wall", "tensor_wall", "fp_pipe_wall", "idle_gr_engine", "idle_any"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= 1):
                raise RooflineInputError(f"threshold {name} must be in (0, 1], got {value!r}")


@dataclass(frozen=True, slots=True)
class CounterReading:
    """One interval's DCGM profiling ratios for one GPU, each in [0, 1]; None means not reported."""

    dram_active: float
    tensor_active: float
    gr_engine_active: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    fp64_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None
    clock_ratio: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "dram_active",
            "tensor_active",
            "gr_engine_active",
            "sm_active",
            "sm_occupancy",
            "fp64_active",
            "fp32_active",
            "fp16_active",
        ):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise RooflineInputError(f"{name} must be a finite ratio, got {value!r}")
            if not 0.0 <= value <= 1.0:
                raise RooflineInputError(f"{name} must be a ratio in [0, 1], got {value!r}")
        if not (math.isfinite(self.clock_ratio) and 0 < self.clock_ratio <= 1.0):
            raise RooflineInputError(f"clock_ratio must be in (0, 1], got {self.clock_ratio!r}")

    @property
    def flop_utilization(self) -> float:
        """t * k: tensor activity scaled by the clock ratio ("OFU")."""
        return self.tensor_active * self.clock_ratio

    @property
    def busiest_fp_pipe(self) -> float:
        """The largest reported CUDA-core FP pipe ratio, 0 when none is reported."""
        pipes = [p for p in (self.fp64_active, self.fp32_active, self.fp16_active) if p is not None]
        return max(pipes, default=0.0)


@dataclass(frozen=True, slots=True)
class CounterVerdict:
    """Where a counter reading sits on the roof, and which wall (if any) it is at."""

    achieved_flop_per_second: float
    achieved_bandwidth_bytes_per_second: float
    flop_utilization: float
    intensity_flop_per_byte: float | None
    position: float | None
    attainable_flop_per_second: float
    fraction_of_peak: float
    roofline_efficiency: float | None
    regime: CounterRegime
    lever: str


DRAM_EPSILON = 1e-3
"""DRAM_ACTIVE below this is "≈ 0": intensity is undefined rather than a huge number."""


def is_idle(reading: CounterReading, thresholds: Thresholds) -> bool:
    """GR_ENGINE_ACTIVE < 0.05 where reported; otherwise every reported activity < 0.02."""
    r = reading
    return _is_idle(
        r.dram_active, r.tensor_active, r.gr_engine_active, r.sm_active,
        r.fp64_active, r.fp32_active, r.fp16_active, thresholds,
    )  # fmt: skip


def _is_idle(
    dram: float,
    tensor: float,
    gr_engine: float | None,
    sm_active: float | None,
    fp64: float | None,
    fp32: float | None,
    fp16: float | None,
    th: Thresholds,
) -> bool:
    if gr_engine is not None:
        return gr_engine < th.idle_gr_engine
    floor = th.idle_any
    if dram >= floor or tensor >= floor:
        return False
    return all(a is None or a < floor for a in (sm_active, fp64, fp32, fp16))


def latency_lever(reading: CounterReading) -> str:
    """Refine the latency-bound hint with SM_ACTIVE and SM_OCCUPANCY where they are reported.

    SM_ACTIVE is the fraction of time at least one warp is resident on an SM; low values with a
    busy graphics engine mean the SMs mostly wait (small grids, launch gaps, host stalls).
    SM_OCCUPANCY is resident warps over the maximum; low values with busy SMs mean too few warps
    to hide memory latency (DCGM profiling metrics documentation).
    """
    return _latency_lever(reading.gr_engine_active, reading.sm_active, reading.sm_occupancy)


def _latency_lever(gr_engine: float | None, sm_active: float | None, sm_occupancy: float | None) -> str:
    if sm_active is not None and sm_active < 0.5:
        if gr_engine is not None and gr_engine >= 0.5 and sm_active < 0.35:
            return LEVER_LATENCY_STARVED
        return LEVER_LATENCY_FEW_SMS
    if sm_occupancy is not None and sm_occupancy < 0.25:
        return LEVER_LATENCY_OCCUPANCY
    return LEVER_LATENCY


def counter_regime(reading: CounterReading, thresholds: Thresholds) -> tuple[CounterRegime, str]:
    """The per-sample regime and its lever (docs/design.md, "The model": regimes).

    The side of the ridge (position t·k / d) says which wall could bind; the GPU is bound by it
    only when it is near that wall (its ratio over the wall ≥ θ): memory_bound on the memory side
    with DRAM_ACTIVE / d_wall ≥ θ, compute_bound on the compute side with t·k / t_wall ≥ θ, or
    whenever a CUDA-core FP pipe is the busiest thing near its wall. Busy otherwise is
    latency-bound — including the compute side with DRAM busy but tensors far from their wall.
    """
    r = reading
    return counter_regime_values(
        r.dram_active, r.tensor_active, r.tensor_active * r.clock_ratio, r.gr_engine_active,
        r.sm_active, r.sm_occupancy, r.fp64_active, r.fp32_active, r.fp16_active, thresholds,
    )  # fmt: skip


def counter_regime_values(
    dram: float,
    tensor: float,
    flop_utilization: float,
    gr_engine: float | None,
    sm_active: float | None,
    sm_occupancy: float | None,
    fp64: float | None,
    fp32: float | None,
    fp16: float | None,
    thresholds: Thresholds,
) -> tuple[CounterRegime, str]:
    """`counter_regime` on plain ratios that are already valid (d, t, t·k, optional others).

    The daemon's per-sample path: inference clamps its inputs to [0, 1] itself, so building and
    re-validating a `CounterReading` twice per sample would only cost time. `counter_regime` is
    this after `CounterReading`'s validation; both share every rule.
    """
    th = thresholds
    if _is_idle(dram, tensor, gr_engine, sm_active, fp64, fp32, fp16, th):
        return "idle", LEVER_IDLE
    busiest_fp = max(fp64 or 0.0, fp32 or 0.0, fp16 or 0.0)
    memory_near = dram / th.dram_wall
    tensor_near = flop_utilization / th.tensor_wall
    fp_near = busiest_fp / th.fp_pipe_wall
    theta = th.theta
    memory_at_wall = memory_near >= theta
    tensor_at_wall = tensor_near >= theta
    if fp_near >= theta and fp_near >= tensor_near and (not memory_at_wall or fp_near >= memory_near):
        return "compute_bound", LEVER_FP_PIPE
    # position = t·k / d: below 1 is the memory side of the ridge (d ≈ 0 is the compute side)
    if flop_utilization < dram:
        if memory_at_wall:
            return "memory_bound", LEVER_MEMORY
    elif tensor_at_wall:
        return "compute_bound", LEVER_COMPUTE
    return "latency_bound", _latency_lever(gr_engine, sm_active, sm_occupancy)


def classify_counters(
    roof: Roof, reading: CounterReading, thresholds: Thresholds | None = None
) -> CounterVerdict:
    """The counter form (docs/design.md): achieved = t·k·P and d·B, I = achieved FLOP/s / achieved B/s.

    position = I / R = t·k / d; attainable = min(P, I·B); roofline efficiency = achieved /
    attainable, which works out to max(t·k, d). With d ≈ 0 the intensity is undefined: the
    attainable roof is then the flat peak and efficiency is t·k. With t·k = 0 and d > 0 nothing
    is attainable on the roof at I = 0 and efficiency is undefined.
    """
    th = thresholds or Thresholds()
    r = reading
    utilization = r.tensor_active * r.clock_ratio
    regime, lever = counter_regime_values(
        r.dram_active, r.tensor_active, utilization, r.gr_engine_active, r.sm_active,
        r.sm_occupancy, r.fp64_active, r.fp32_active, r.fp16_active, th,
    )  # fmt: skip
    peak, bandwidth = roof.peak_flop_per_second, roof.bandwidth_bytes_per_second
    at = counter_position(peak, bandwidth, r.dram_active, utilization)
    return CounterVerdict(
        achieved_flop_per_second=at.achieved_flop_per_second,
        achieved_bandwidth_bytes_per_second=at.achieved_bandwidth_bytes_per_second,
        flop_utilization=at.flop_utilization,
        intensity_flop_per_byte=at.intensity_flop_per_byte,
        position=at.position,
        attainable_flop_per_second=at.attainable_flop_per_second,
        fraction_of_peak=at.fraction_of_peak,
        roofline_efficiency=at.roofline_efficiency,
        regime=regime,
        lever=lever,
    )


@dataclass(frozen=True, slots=True)
class CounterPosition:
    """Where a counter reading sits on a roof: CounterVerdict's numbers, without the regime."""

    achieved_flop_per_second: float
    achieved_bandwidth_bytes_per_second: float
    flop_utilization: float
    intensity_flop_per_byte: float | None
    position: float | None
    attainable_flop_per_second: float
    fraction_of_peak: float
    roofline_efficiency: float | None


def counter_position(peak: float, bandwidth: float, dram: float, flop_utilization: float) -> CounterPosition:
    """classify_counters' numbers on plain floats (the daemon's per-sample path shares them)."""
    achieved_flops = flop_utilization * peak
    achieved_bytes = dram * bandwidth
    intensity: float | None
    position: float | None
    if dram < DRAM_EPSILON or achieved_bytes <= 0.0:
        # d·B can underflow to 0 on an absurdly small (custom) bandwidth: undefined, like d ≈ 0
        intensity = None
        position = None
        attainable = peak
    else:
        intensity = achieved_flops / achieved_bytes
        position = flop_utilization / dram
        attainable = min(peak, intensity * bandwidth)
    return CounterPosition(
        achieved_flop_per_second=achieved_flops,
        achieved_bandwidth_bytes_per_second=achieved_bytes,
        flop_utilization=flop_utilization,
        intensity_flop_per_byte=intensity,
        position=position,
        attainable_flop_per_second=attainable,
        fraction_of_peak=attainable / peak,
        roofline_efficiency=achieved_flops / attainable if attainable > 0 else None,
    )


def clock_ratio(sm_clock_mhz: float | None, max_sm_clock_mhz: float | None) -> float:
    """k = SM clock / max SM clock, clamped to (0, 1]; 1 when either is unknown.

    PIPE_TENSOR_ACTIVE is a fraction of cycles, so FLOP/s scale with the clock actually run
    (DCGM profiling metrics documentation: the FLOP/s formulas multiply by the SM clock).
    """
    if sm_clock_mhz is None or max_sm_clock_mhz is None or max_sm_clock_mhz <= 0:
        return 1.0
    if not math.isfinite(sm_clock_mhz) or sm_clock_mhz <= 0:
        return 1.0
    return min(1.0, sm_clock_mhz / max_sm_clock_mhz)


TENSOR_PIPE_PRECISION: dict[str, str] = {"dfma": "fp64_tensor", "imma": "int8", "hmma": "bf16"}
"""docs/design.md: DFMA -> fp64 tensor, IMMA -> int8, HMMA -> bf16 (HMMA covers fp16/bf16/tf32/fp8)."""

DOMINANT_PIPE_FLOOR = 0.01
"""A tensor pipe below this ratio is noise, not evidence of a precision."""


def dominant_precision(
    default: str,
    imma_active: float | None = None,
    hmma_active: float | None = None,
    dfma_active: float | None = None,
    available: tuple[str, ...] | list[str] | None = None,
) -> str:
    """The precision the tensor cores are mostly running, else `default`.

    The busiest of the HMMA/IMMA/DFMA pipes (DCGM 1013-1015) names the precision, when it is
    above the noise floor and the card has a peak for it (`available`); otherwise the configured
    precision stands.
    """
    pipes = {"imma": imma_active, "hmma": hmma_active, "dfma": dfma_active}
    reported = {name: v for name, v in pipes.items() if v is not None and v >= DOMINANT_PIPE_FLOOR}
    if not reported:
        return default
    busiest = max(reported, key=lambda name: reported[name])
    precision = TENSOR_PIPE_PRECISION[busiest]
    if available is not None and precision not in available:
        return default
    return precision
