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
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple, get_args

from exporter.readings import ACTIVITY_FIELDS, READING_FIELDS

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
CounterRegime = Literal[
    "idle", "memory_bound", "compute_bound", "latency_bound", "unknown", "interconnect_bound"
]
REGIMES: tuple[CounterRegime, ...] = get_args(CounterRegime)
"""The regimes a GPU can be in, in the order metrics, rules and dashboards list them. `unknown`:
the counters present cannot place it (a partial reading; docs/model.md, "Partial readings").
`interconnect_bound` (a link near its wall, neither HBM nor a pipe near theirs) came last and
is listed last, so the earlier regimes keep their places."""

Pipe = Literal["tensor", "fp64", "fp32", "fp16"]
PIPES: tuple[Pipe, ...] = get_args(Pipe)
"""The compute pipes DCGM reports: PIPE_TENSOR_ACTIVE (1004) and the CUDA-core PIPE_FP64/FP32/
FP16_ACTIVE (1006-1008). Each does FLOPs at its own peak."""
FP_PIPES: tuple[Pipe, ...] = ("fp64", "fp32", "fp16")

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
LEVER_FP64_PIPE = (
    "compute-bound on the FP64 CUDA-core pipe, not the tensor cores: move the FP64 math onto the "
    "FP64 tensor cores (DMMA: cuBLAS DGEMM, cuSOLVER and cuFFT use them) for a higher FP64 peak"
)
LEVER_FP64_PIPE_NO_TENSOR = (
    "compute-bound on the FP64 CUDA-core pipe, and this card has no faster FP64 tensor-core path: "
    "run FP64 work on a card with FP64 tensor cores (A100, H100), or use mixed precision "
    "(FP32/TF32 with iterative refinement)"
)
LEVER_FP32_PIPE = (
    "compute-bound on the FP32 CUDA-core pipe, not the tensor cores: move matmuls and convolutions "
    "onto TF32 or BF16 tensor cores (TF32 math mode, autocast to bf16) for several times the peak"
)
LEVER_FP16_PIPE = (
    "compute-bound on the FP16 CUDA-core pipe: half-precision arithmetic outside the tensor cores — "
    "move it onto tensor cores (cuBLAS/cuDNN tensor-op paths, mma/WMMA) for several times the peak"
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
LEVER_LATENCY_BUSY_SMS = (
    "latency-bound with busy SMs: warps are resident, but no tensor or FP pipe and not DRAM is near "
    "its wall — integer or address math, special functions, shared-memory or L2 traffic, or "
    "dependent-latency stalls; Nsight Compute's speed-of-light section tells which"
)
LEVER_LATENCY_MIG_PARTIAL = (
    "latency-bound on a MIG instance whose GR_ENGINE_ACTIVE tops out below 1: only part of its "
    "GPCs (compute instances) are busy and the SM ratios average over the whole instance — give "
    "the idle compute instances work, or use a smaller MIG profile"
)
LEVER_SMS_BUSY_NO_FP_PIPES = (
    "SMs busy on non-tensor work (CUDA-core math or on-chip memory: shared memory, L1, L2) while "
    "neither the tensor cores nor DRAM are near a wall: add fields 1006-1008 "
    "(PIPE_FP64/FP32/FP16_ACTIVE) to the DCGM field list to tell which — not a launch problem"
)
LEVER_INTERCONNECT = (
    "interconnect-bound: a link (NVLink or PCIe) is near its wall while neither HBM nor the compute "
    "pipes are — overlap the transfers with compute, move fewer bytes over the link"
)
LEVER_INTERCONNECT_NVLINK = (
    "interconnect-bound on NVLink: overlap communication with compute — the GPUs wait on each "
    "other's bytes: overlap collectives with compute (DDP/FSDP overlap, async collectives), tune "
    "gradient bucket sizes, place ranks by NVLink/NVSwitch topology, check NCCL settings "
    "(NCCL_ALGO, NCCL_PROTO, channels, NVLink SHARP)"
)
LEVER_INTERCONNECT_PCIE = (
    "interconnect-bound on PCIe: cut host↔device transfers — the GPU waits on the host link: keep "
    "data resident, batch small copies, use pinned memory and async copies that overlap compute, "
    "speed up data loading (workers, prefetch, GPU decode), GPUDirect RDMA/Storage to skip the host"
)
LINK_LEVERS: Mapping[str, str] = MappingProxyType(
    {"nvlink": LEVER_INTERCONNECT_NVLINK, "pcie": LEVER_INTERCONNECT_PCIE}
)
"""The lever of an interconnect-bound verdict, by the link at its wall."""
LEVER_UNKNOWN = (
    "unknown: the counters present cannot place this GPU on its roof — add the missing profiling "
    "fields (listed with the verdict) to the DCGM field list"
)
LEVER_COMPUTE_NO_FP8 = (
    "compute-bound on the tensor cores at 16 bits, on a card without fp8: use 2:4 structured "
    "sparsity (twice the dense peak), int8 where the card has it and accuracy allows, or fewer FLOPs"
)
LEVER_COMPUTE_TF32 = (
    "compute-bound on the tensor cores at TF32: bf16/fp16 autocast doubles the tensor peak (fp8 "
    "doubles it again where the card has it), or use structured sparsity"
)
LEVER_COMPUTE_FP8 = (
    "compute-bound on the tensor cores at 8 bits: fp4 (this card has it) doubles the tensor peak "
    "where accuracy allows; otherwise 2:4 structured sparsity or fewer FLOPs"
)
LEVER_COMPUTE_LOWEST = (
    "compute-bound at this card's lowest tensor precision: 2:4 structured sparsity, a cheaper "
    "algorithm (fewer FLOPs), or more GPUs"
)
LEVER_COMPUTE_FP64_TENSOR = (
    "compute-bound on the FP64 tensor cores (DMMA), FP64's fastest path: do fewer FLOPs (a cheaper "
    "algorithm, reuse factorisations), a mixed-precision method (FP32/TF32 work with FP64 "
    "iterative refinement) where the accuracy allows, or more GPUs"
)
LEVER_MEMORY_FP64 = (
    "memory-bound on FP64 data: move fewer bytes per FLOP — fuse kernels, block/tile for cache "
    "reuse, batch more work per byte read; storing in FP32 with FP64 accumulation (mixed precision) "
    "halves the bytes where the accuracy allows"
)
LEVER_BALANCED_FP64 = (
    "on the ridge with FP64 work: both walls bind — cut bytes and FLOPs together (fusion, reuse, a "
    "cheaper algorithm); mixed precision (FP32 with FP64 refinement) helps both where it is accurate"
)
FP64_PRECISIONS: frozenset[str] = frozenset({"fp64", "fp64_tensor"})
"""Precisions of FP64 work: never told to lower the precision to fp8 or int8 (issue 19)."""

PIPE_LEVERS: Mapping[str, str] = MappingProxyType(
    {"tensor": LEVER_COMPUTE, "fp64": LEVER_FP64_PIPE, "fp32": LEVER_FP32_PIPE, "fp16": LEVER_FP16_PIPE}
)
"""The lever of a compute-bound verdict, by the pipe at its wall (docs/model.md, "Every pipe")."""


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
        "unknown": LEVER_UNKNOWN,
        "balanced": LEVER_BALANCED,
        "interconnect_bound": LEVER_INTERCONNECT,
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
    link_wall 0.8: the practical maximum of a link's bytes over its per-direction bandwidth (NCCL's
    all-reduce bus bandwidth on NVLink and a PCIe x16 copy both top out near 80 % of the nominal
    figure); a link is near its wall at θ · 0.8 = 0.48 (docs/model.md, "The interconnect wall").
    """

    theta: float = 0.6
    dram_wall: float = 0.8
    tensor_wall: float = 0.93
    fp_pipe_wall: float = 1.0
    idle_gr_engine: float = 0.05
    idle_any: float = 0.02
    link_wall: float = 0.8

    def __post_init__(self) -> None:
        for name in (
            "theta",
            "dram_wall",
            "tensor_wall",
            "fp_pipe_wall",
            "idle_gr_engine",
            "idle_any",
            "link_wall",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= 1):
                raise RooflineInputError(f"threshold {name} must be in (0, 1], got {value!r}")

    def wall(self, pipe: str) -> float:
        """The practical maximum of a compute pipe's activity."""
        return self.tensor_wall if pipe == "tensor" else self.fp_pipe_wall


Link = Literal["nvlink", "pcie"]
LINKS: tuple[Link, ...] = get_args(Link)
"""The links DCGM counts bytes on: PCIe (fields 1009-1010) and NVLink (1011-1012)."""


class LinkLoad(NamedTuple):
    """Each link's load: its busier direction's bytes/s over its per-direction bandwidth.

    None where the link's counters are not reported or the card has no figure for it (no wall);
    a value can exceed 1 (a counter above the quoted figure is reported as read).
    """

    nvlink: float | None = None
    pcie: float | None = None


def link_load(
    tx_bytes_per_second: float | None, rx_bytes_per_second: float | None, bandwidth: float | None
) -> float | None:
    """max(TX, RX) / the per-direction bandwidth: the busier direction is the one at the wall
    (a link carries each direction on its own lanes). None without a figure or either counter."""
    if bandwidth is None or not (0.0 < bandwidth < math.inf):
        return None
    tx, rx = tx_bytes_per_second, rx_bytes_per_second
    if tx is None:
        return None if rx is None else rx / bandwidth
    return (tx if rx is None or tx >= rx else rx) / bandwidth


def busiest_link(load: LinkLoad | None) -> tuple[Link, float] | None:
    """The link with the largest load (NVLink on a tie); None when no link has one."""
    if load is None:
        return None
    best: tuple[Link, float] | None = None
    for link in LINKS:
        value = getattr(load, link)
        if value is not None and (best is None or value > best[1]):
            best = (link, value)
    return best


def link_near_wall(load: LinkLoad | None, thresholds: Thresholds) -> Link | None:
    """The busiest link when it is near its wall (load / link_wall ≥ θ, as DRAM and the pipes are
    judged); None otherwise."""
    busiest = busiest_link(load)
    if busiest is None or busiest[1] / thresholds.link_wall < thresholds.theta:
        return None
    return busiest[0]


ACTIVITY_FIELD_SET: frozenset[str] = frozenset(ACTIVITY_FIELDS)


class CounterReading(NamedTuple):
    """One interval's DCGM profiling ratios for one GPU (None: not reported) and its clock ratios.

    The ratio fields are exporter/readings.py's READING_FIELDS, in its order. Any subset may be
    reported (a partial reading, docs/model.md); `has_activity` says whether there is anything to
    judge. The daemon builds two per GPU per sample (raw and smoothed) from values already
    clamped to [0, 1]; input from outside (POST /classify, the CLI) goes through `check_reading`.
    """

    dram_active: float | None = None
    tensor_active: float | None = None
    gr_engine_active: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    fp64_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None
    clock_ratio: float = 1.0
    """k of the tensor pipe: SM clock / the clock its peak is quoted at, at most 1."""
    vector_clock_ratio: float = 1.0
    """k of the CUDA-core FP64/FP32/FP16 pipes (their peaks have their own clock)."""


assert CounterReading._fields == (*READING_FIELDS, "clock_ratio", "vector_clock_ratio")


def check_reading(reading: CounterReading) -> CounterReading:
    """The reading itself when every ratio is in [0, 1] and each k in (0, 1]; RooflineInputError
    naming the first field that is not."""
    for name in READING_FIELDS:
        value = getattr(reading, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise RooflineInputError(f"{name} must be a finite ratio, got {value!r}")
        if not 0.0 <= value <= 1.0:
            raise RooflineInputError(f"{name} must be a ratio in [0, 1], got {value!r}")
    for name in ("clock_ratio", "vector_clock_ratio"):
        k = getattr(reading, name)
        if not (math.isfinite(k) and 0 < k <= 1.0):
            raise RooflineInputError(f"{name} must be in (0, 1], got {k!r}")
    return reading


def has_activity(reading: object) -> bool:
    """True when at least one activity field (ACTIVITY_FIELDS) is reported."""
    return any(getattr(reading, name) is not None for name in ACTIVITY_FIELDS)


_PIPE_FIELDS: tuple[tuple[Pipe, str], ...] = tuple((pipe, f"{pipe}_active") for pipe in PIPES)


GR_STUCK_SM_FACTOR = 2.0
"""SM_ACTIVE, a tensor or an FP pipe at this many times the GR idle floor contradicts an idle
GR_ENGINE_ACTIVE: each is a part of the engine's own activity and cannot exceed it."""


_INSIDE_GR_FIELDS: tuple[str, ...] = tuple(
    name for name in ACTIVITY_FIELDS if name not in ("gr_engine_active", "dram_active")
)
"""The activities that are parts of the GR engine's own: none can be busier than it."""


def gr_engine_contradicted(reading: CounterReading, thresholds: Thresholds) -> bool:
    """GR_ENGINE_ACTIVE below its idle floor while busier evidence says work runs.

    Evidence: SM_ACTIVE, the tensor pipe or an FP pipe at 2 × the GR idle floor (sub-activities of
    the engine, which cannot be busier than it), or DRAM_ACTIVE near its wall (θ · dram_wall;
    copy engines move DRAM bytes without the GR engine, but a PCIe or NVLink copy alone cannot
    drive DRAM that hard). dcgm-exporter has been seen to report GR_ENGINE_ACTIVE stuck at 0
    while GPU_UTIL reads 99 % (docs/model.md, "Contradictory readings").
    """
    gr = reading.gr_engine_active
    if gr is None or gr >= thresholds.idle_gr_engine:
        return False
    floor = GR_STUCK_SM_FACTOR * thresholds.idle_gr_engine
    for name in _INSIDE_GR_FIELDS:
        value = getattr(reading, name)
        if value is not None and value >= floor:
            return True
    dram = reading.dram_active
    return dram is not None and dram >= thresholds.theta * thresholds.dram_wall


_IDLE_FIELDS: tuple[str, ...] = tuple(name for name in ACTIVITY_FIELDS if name != "gr_engine_active")


def is_idle(reading: CounterReading, thresholds: Thresholds, *, trust_gr_engine: bool = True) -> bool:
    """GR_ENGINE_ACTIVE < idle_gr_engine where reported (and trusted); otherwise every reported
    activity < idle_any. False without any activity field: nothing says the GPU is idle."""
    gr = reading.gr_engine_active if trust_gr_engine else None
    if gr is not None:
        return gr < thresholds.idle_gr_engine
    floor = thresholds.idle_any
    reported = False
    for name in _IDLE_FIELDS:
        value = getattr(reading, name)
        if value is not None:
            if value >= floor:
                return False
            reported = True
    return reported


class CounterCall(NamedTuple):
    """A reading's regime, its lever, and why (docs/design.md, "The model": regimes)."""

    regime: CounterRegime
    lever: str
    pipe: Pipe | None = None
    """The compute pipe nearest its wall (the binding one of a compute-bound verdict); None when
    no compute pipe is reported."""
    missing: tuple[str, ...] = ()
    """Reading fields whose absence leaves the regime `unknown` (empty otherwise)."""
    gr_engine_contradicted: bool = False
    """GR_ENGINE_ACTIVE read idle while busier evidence said otherwise; it was set aside."""
    link: Link | None = None
    """The link at its wall of an interconnect-bound verdict; None for every other regime."""


def latency_lever(
    reading: CounterReading, *, mig_instance: bool = False, gr_engine: float | None = None
) -> str:
    """Refine the latency-bound hint with GR_ENGINE_ACTIVE, SM_ACTIVE and SM_OCCUPANCY.

    SM_ACTIVE is the fraction of time at least one warp is resident on an SM; low values with a
    busy graphics engine mean the SMs mostly wait (small grids, launch gaps, host stalls).
    SM_OCCUPANCY is resident warps over the maximum; low values with busy SMs mean too few warps
    to hide memory latency (DCGM profiling metrics documentation). On a MIG instance GR and SM
    activity average over the instance's GPCs, so one busy compute instance of several tops GR
    out below 1: that is named rather than read as "few SMs busy".
    """
    sm_active, sm_occupancy = reading.sm_active, reading.sm_occupancy
    if mig_instance and gr_engine is not None and gr_engine < 0.5:
        return LEVER_LATENCY_MIG_PARTIAL
    if sm_active is not None and sm_active < 0.5:
        if gr_engine is not None and gr_engine >= 0.5 and sm_active < 0.35:
            return LEVER_LATENCY_STARVED
        return LEVER_LATENCY_FEW_SMS
    if sm_occupancy is not None and sm_occupancy < 0.25:
        return LEVER_LATENCY_OCCUPANCY
    return LEVER_LATENCY


def fp64_tensor_faster(peaks: Mapping[str, float]) -> bool:
    """A card's FP64 tensor-core peak beats its FP64 pipe (A100, H100: yes; B200, V100: no)."""
    return "fp64_tensor" in peaks and peaks["fp64_tensor"] > peaks.get("fp64", 0.0)


def compute_lever(pipe: Pipe, *, fp64_tensor_faster: bool = True) -> str:
    """The lever of a compute-bound verdict on `pipe` (FP64 depends on the card's tensor cores)."""
    if pipe == "fp64" and not fp64_tensor_faster:
        return LEVER_FP64_PIPE_NO_TENSOR
    return PIPE_LEVERS[pipe]


def precision_lever(
    regime: str,
    lever: str,
    pipe: Pipe | None,
    precision: str | None,
    precisions: Collection[str] = (),
    *,
    fp64_tensor_faster: bool = True,
) -> str:
    """The lever fitted to the pipe and precision the work runs at (docs/model.md, "Levers").

    FP64 work (the FP64 pipe, or the fp64/fp64_tensor precision) is never told to drop to fp8;
    a tensor verdict names the next precision down only where the card has it (`precisions`:
    the card's, empty when unknown, which keeps the general lever). `pipe` None: the kernel or
    operation form, where the precision's own peak is the roof.
    """
    fp64 = pipe == "fp64" or (pipe in (None, "tensor") and precision in FP64_PRECISIONS)
    if regime == "memory_bound":
        return LEVER_MEMORY_FP64 if fp64 else lever
    if regime == "balanced":
        return LEVER_BALANCED_FP64 if fp64 else lever
    if regime != "compute_bound" or pipe not in (None, "tensor") or precision is None:
        return lever
    return _compute_precision_lever(lever, pipe, precision, precisions, fp64_tensor_faster=fp64_tensor_faster)


def _compute_precision_lever(
    lever: str,
    pipe: Pipe | None,
    precision: str,
    precisions: Collection[str],
    *,
    fp64_tensor_faster: bool,
) -> str:
    """precision_lever for compute-bound work on the tensor pipe or a precision's own peak."""
    if precision == "fp64_tensor":
        return LEVER_COMPUTE_FP64_TENSOR
    if pipe is None and precision == "fp64":  # a CUDA-core peak is the roof
        return compute_lever("fp64", fp64_tensor_faster=fp64_tensor_faster)
    if pipe is None and precision == "fp32":
        return LEVER_FP32_PIPE
    if not precisions:
        return lever
    return _next_precision_down_lever(lever, precision, precisions)


def _next_precision_down_lever(lever: str, precision: str, precisions: Collection[str]) -> str:
    """The tensor lever naming the next precision down, where the card (`precisions`) has it."""
    if precision == "tf32":
        return LEVER_COMPUTE_TF32
    if precision in ("bf16", "fp16"):
        return lever if "fp8" in precisions else LEVER_COMPUTE_NO_FP8
    if precision in ("fp8", "int8"):
        return LEVER_COMPUTE_FP8 if "fp4" in precisions else LEVER_COMPUTE_LOWEST
    if precision == "fp4":
        return LEVER_COMPUTE_LOWEST
    return lever


class RegimeAt(NamedTuple):
    """What `counter_regime` finds of a reading: its regime and the facts its lever is chosen by
    (`counter_call`). The daemon judges two readings per GPU per sample, but needs the whole call
    of one of them only when a snapshot is read (docs/daemon.md, "Live budget")."""

    regime: CounterRegime
    pipe: Pipe | None
    """The compute pipe nearest its wall; None when none is reported, or idle."""
    contradicted: bool
    """GR_ENGINE_ACTIVE read idle while busier evidence said work runs: it was set aside."""
    link: Link | None
    """The link near its wall, whatever the regime came out as."""


def judge_counters(
    reading: CounterReading,
    thresholds: Thresholds,
    *,
    mig_instance: bool = False,
    fp64_tensor_faster: bool = True,
    precision: str | None = None,
    precisions: Collection[str] = (),
    links: LinkLoad | None = None,
) -> CounterCall:
    """The per-sample regime and its lever (docs/design.md, "The model": regimes).

    In order: GR_ENGINE_ACTIVE idle while busier evidence disagrees is set aside; idle; the side
    of the ridge (the busiest pipe's activity a against DRAM_ACTIVE, both at the clock the GPU
    runs: the roof at that clock has the same shape, scaled by k) picks the wall that could bind
    and θ says whether the GPU is near it; busy with neither wall near is latency-bound. A field
    the rule at hand needs that is not reported leaves the regime `unknown`, naming it: a partial
    reading says only what its fields can say. `precision` and `precisions` (the card's) fit the
    lever to the work (`precision_lever`); without them the general lever stands. `links`: each
    link's load (LinkLoad); a link near its wall while neither HBM nor a pipe is near theirs is
    `interconnect_bound` (docs/model.md, "The interconnect wall"); without it nothing changes.
    The regime is `counter_regime`'s; the lever and the missing fields `counter_call`'s.
    """
    return counter_call(
        reading,
        thresholds,
        counter_regime(reading, thresholds, links),
        mig_instance=mig_instance,
        fp64_tensor_faster=fp64_tensor_faster,
        precision=precision,
        precisions=precisions,
    )


def counter_regime(
    reading: CounterReading, thresholds: Thresholds, links: LinkLoad | None = None
) -> RegimeAt:
    """judge_counters' rules in order, for the regime alone (its lever follows from the regime
    and the reading: `counter_call`).

    A link near its wall is judged after the memory and compute walls (a GPU near one of those
    is bound by it, whatever its links do) and before idle and latency (a GPU whose copy engines
    saturate a link is waiting on it, even with its SMs quiet)."""
    th = thresholds
    gr = reading.gr_engine_active
    if gr is not None and gr >= th.idle_gr_engine:  # a busy GR engine: neither set aside nor idle
        contradicted = idle = False
    else:
        contradicted = gr_engine_contradicted(reading, th)
        idle = is_idle(reading, th, trust_gr_engine=not contradicted)
    link = None if links is None else link_near_wall(links, th)
    if link is None and idle:
        return _new_regime_at(RegimeAt, ("idle", None, contradicted, None))
    pipe, near, busiest = nearest_pipe(reading, th)
    dram = reading.dram_active
    if pipe is None and dram is None:
        regime: CounterRegime = "unknown"
    elif dram is not None and busiest < dram:  # position u*/d below 1: the memory side
        regime = "memory_bound" if dram / th.dram_wall >= th.theta else _no_wall_regime(reading, th, link)
    elif pipe is not None and near >= th.theta:
        regime = "compute_bound"
    else:
        regime = _no_wall_regime(reading, th, link)
    return _new_regime_at(RegimeAt, (regime, pipe, contradicted, link))


_new_regime_at = tuple.__new__
"""RegimeAt built without its keyword handling (counter_regime runs twice a sample)."""


def _no_wall_regime(reading: CounterReading, th: Thresholds, link: Link | None) -> CounterRegime:
    """counter_regime's tail, once neither wall is near by what is reported: unknown unless DRAM
    and the tensor pipe are both reported (only together can they say so), then a link at its
    wall, then latency-bound, unless the SMs are busy and no CUDA-core pipe says on what."""
    if reading.dram_active is None or reading.tensor_active is None:
        return "unknown"
    if link is not None:
        return "interconnect_bound"
    if _busy_sms(reading, th) and _no_fp_pipe(reading):
        return "unknown"
    return "latency_bound"


def _busy_sms(reading: CounterReading, th: Thresholds) -> bool:
    """SM_ACTIVE near its wall without a low SM_OCCUPANCY: warps are resident and plenty."""
    sm_active, occupancy = reading.sm_active, reading.sm_occupancy
    return (
        sm_active is not None and sm_active >= th.theta and not (occupancy is not None and occupancy < 0.25)
    )


def _no_fp_pipe(reading: CounterReading) -> bool:
    """None of the CUDA-core FP64/FP32/FP16 pipes is reported."""
    return reading.fp64_active is None and reading.fp32_active is None and reading.fp16_active is None


_NO_WALL_FIELDS = ("dram_active", "tensor_active")
"""Only DRAM and the tensor pipe together can say that no wall is near."""
_FP_PIPE_FIELDS = tuple(f"{pipe}_active" for pipe in FP_PIPES)


def counter_call(
    reading: CounterReading,
    thresholds: Thresholds,
    at: RegimeAt,
    *,
    mig_instance: bool = False,
    fp64_tensor_faster: bool = True,
    precision: str | None = None,
    precisions: Collection[str] = (),
) -> CounterCall:
    """The call of a reading `counter_regime` has judged (`at`): the regime's lever, fitted to
    the precision when one is given (`precision_lever`), and the fields whose absence leaves it
    unknown (judge_counters' other arguments)."""
    regime, pipe = at.regime, at.pipe
    lever, missing = _regime_lever(reading, thresholds, at, mig_instance, fp64_tensor_faster)
    if precision is not None:
        lever = precision_lever(
            regime, lever, pipe, precision, precisions, fp64_tensor_faster=fp64_tensor_faster
        )
    return CounterCall(
        regime=regime,
        lever=lever,
        pipe=pipe,
        missing=missing,
        gr_engine_contradicted=at.contradicted,
        link=at.link if regime == "interconnect_bound" else None,
    )


def _regime_lever(
    reading: CounterReading, th: Thresholds, at: RegimeAt, mig_instance: bool, fp64_tensor_faster: bool
) -> tuple[str, tuple[str, ...]]:
    """(the general lever of the regime `at` names, the fields whose absence leaves it unknown)."""
    regime = at.regime
    if regime == "idle":
        return LEVER_IDLE, ()
    if regime == "memory_bound":
        return LEVER_MEMORY, ()
    if regime == "compute_bound":
        assert at.pipe is not None
        return compute_lever(at.pipe, fp64_tensor_faster=fp64_tensor_faster), ()
    if regime == "interconnect_bound":
        assert at.link is not None
        return LINK_LEVERS[at.link], ()
    if regime == "unknown":
        if reading.dram_active is None or reading.tensor_active is None:
            missing = tuple(name for name in _NO_WALL_FIELDS if getattr(reading, name) is None)
            return LEVER_UNKNOWN, missing
        return LEVER_SMS_BUSY_NO_FP_PIPES, _FP_PIPE_FIELDS
    if _busy_sms(reading, th):
        return LEVER_LATENCY_BUSY_SMS, ()
    gr = None if at.contradicted else reading.gr_engine_active
    return latency_lever(reading, mig_instance=mig_instance, gr_engine=gr), ()


_PIPE_AT: tuple[tuple[Pipe, int], ...] = tuple(
    (pipe, CounterReading._fields.index(f"{pipe}_active")) for pipe in PIPES
)
"""Each compute pipe with its activity's place in a CounterReading (read by index, in PIPES order)."""


def nearest_pipe(reading: CounterReading, thresholds: Thresholds) -> tuple[Pipe | None, float, float]:
    """(the reported pipe whose activity / wall is largest, the tensor pipe on a tie; that ratio;
    the largest activity), in one pass; (None, -1, 0) without a reported pipe. The rules read
    activities a, not u = a · k: a pipe busy 90 % of cycles at a power-capped clock is at its wall
    at that clock (docs/model.md, "At a reduced clock"). Each wall as Thresholds.wall gives it,
    inlined: this runs twice a sample."""
    best: Pipe | None = None
    best_near = -1.0
    busiest: float | None = None
    tensor_wall, fp_wall = thresholds.tensor_wall, thresholds.fp_pipe_wall
    for pipe, at in _PIPE_AT:
        activity: float | None = reading[at]
        if activity is None:
            continue
        near = activity / (tensor_wall if pipe == "tensor" else fp_wall)
        if near > best_near:
            best, best_near = pipe, near
        if busiest is None or activity > busiest:
            busiest = activity
    return best, best_near, 0.0 if busiest is None else busiest


DRAM_EPSILON = 1e-3
"""DRAM_ACTIVE below this is "≈ 0": intensity is undefined rather than a huge number."""


class CounterPosition(NamedTuple):
    """Where a counter reading sits on a roof: the numbers of a verdict, without the regime.

    None where the reading cannot say: no achieved FLOP/s without a compute pipe with a peak, no
    bytes/s without DRAM_ACTIVE, no intensity, position, attainable or efficiency without both.
    """

    achieved_flop_per_second: float | None
    achieved_bandwidth_bytes_per_second: float | None
    flop_utilization: float | None
    compute_roof_flop_per_second: float
    intensity_flop_per_byte: float | None
    position: float | None
    attainable_flop_per_second: float | None
    fraction_of_peak: float | None
    roofline_efficiency: float | None
    uncounted_pipes: tuple[Pipe, ...] = ()
    """Pipes whose FLOPs are not in F: not reported, or busy without a peak on this card. With
    any, F and the intensity are lower bounds; with any and F = 0 they are unknown (None)."""


def compute_roof(
    peaks: Mapping[str, float], flops: float | None, busiest: float | None, tensor_clock: float = 1.0
) -> float:
    """The compute ceiling of this instruction mix at the clock it runs: F / a*, the FLOP/s the
    same mix of pipes reaches with its busiest pipe saturated at this clock (Williams et al. 2009:
    in-core ceilings below the peak). `busiest` is a*, the busiest counted pipe's activity.

    One pipe alone gives that pipe's peak × its clock ratio; with nothing running it is the tensor
    peak × the tensor clock ratio.
    """
    if flops is None or busiest is None or busiest <= 0.0 or flops <= 0.0:
        return peaks["tensor"] * tensor_clock
    return flops / busiest


_PIPE_SLOTS: tuple[tuple[Pipe, int, bool], ...] = tuple(
    (pipe, CounterReading._fields.index(name), pipe == "tensor") for pipe, name in _PIPE_FIELDS
)
"""(pipe, its activity's place in a CounterReading, whether its clock ratio is the tensor one)."""


def pipe_sums(
    reading: CounterReading, peaks: Mapping[str, float]
) -> tuple[tuple[float, float] | None, float | None, tuple[Pipe, ...]]:
    """(F = Σ u · P and u* = max u over the reported pipes that have a peak, None when none does;
    a*, the largest activity among them, None without one; the pipes F leaves out: unreported, or
    active with no peak here), in one pass over the pipes (counter_position per GPU per snapshot
    read, the FLOP counter per sample).

    A pipe's utilization is its activity times its clock ratio, u = a · k: DCGM's pipe activities
    are fractions of cycles, so FLOP/s scale with the clock actually run (DCGM profiling metrics
    documentation: the FLOP/s formulas multiply by the SM clock); the tensor pipe's k is against
    its peak's clock, the CUDA-core FP64/FP32/FP16 pipes' against theirs (vector).
    """
    flops = 0.0
    busiest = -1.0
    active: float | None = None
    uncounted: list[Pipe] = []
    tensor_k, vector_k = reading.clock_ratio, reading.vector_clock_ratio
    for pipe, at, tensor in _PIPE_SLOTS:
        activity = reading[at]
        if activity is None:
            uncounted.append(pipe)
            continue
        peak = peaks.get(pipe)
        if peak is None:
            if activity > 0.0:
                uncounted.append(pipe)
            continue
        u = activity * (tensor_k if tensor else vector_k)
        flops += u * peak
        if u > busiest:
            busiest = u
        if active is None or activity > active:
            active = activity
    return None if busiest < 0.0 else (flops, busiest), active, tuple(uncounted)


def counter_position(
    reading: CounterReading, peaks: Mapping[str, float], bandwidth: float
) -> CounterPosition:
    """The counter form's numbers (docs/design.md): F = Σ a·k·P, Q = d·B, I = F / Q, and the
    roof at the clock the GPU runs, P_c = F / a*.

    position = I / (P_c / B) = a* / d; attainable = min(P_c, I·B); roofline efficiency = achieved
    / attainable, which works out to max(a*, d). With d ≈ 0 the intensity is undefined: the
    attainable roof is then the flat P_c and efficiency is a*. flop utilization u* = max a·k is
    against the quoted peaks. `peaks` maps "tensor" (required) and any FP pipe with a known peak
    to FLOP/s.
    """
    counted, active, uncounted = pipe_sums(reading, peaks)
    flops, busiest = (None, None) if counted is None else counted
    roof_c = compute_roof(peaks, flops, active, reading.clock_ratio)
    dram = reading.dram_active
    bytes_ = None if dram is None else dram * bandwidth
    if uncounted and flops is not None and flops <= 0.0:
        # the reported pipes sum to 0 and others could be busy: unknown, not zero (issue 19)
        efficiency = None if dram is None else dram  # max(u*, d) ≥ d: a lower bound
        return CounterPosition(
            achieved_flop_per_second=None,
            achieved_bandwidth_bytes_per_second=bytes_,
            flop_utilization=busiest,
            compute_roof_flop_per_second=roof_c,
            intensity_flop_per_byte=None,
            position=None,
            attainable_flop_per_second=None,
            fraction_of_peak=None,
            roofline_efficiency=efficiency,
            uncounted_pipes=uncounted,
        )
    intensity: float | None = None
    position: float | None = None
    attainable: float | None = None
    if flops is not None and dram is not None and bytes_ is not None and active is not None:
        if dram < DRAM_EPSILON or bytes_ <= 0.0:
            # d·B can underflow to 0 on an absurdly small (custom) bandwidth: undefined, like d ≈ 0
            attainable = roof_c
        else:
            intensity = flops / bytes_
            position = active / dram
            attainable = min(roof_c, intensity * bandwidth)
    efficiency = None
    if attainable is not None and attainable > 0 and flops is not None:
        # F / min(P_c, F/d) = max(u*, d) <= 1; with a subnormal F the intensity F/Q loses digits
        # and the quotient can round above 1, which the exact value never is
        efficiency = min(1.0, flops / attainable)
    return CounterPosition(
        achieved_flop_per_second=flops,
        achieved_bandwidth_bytes_per_second=bytes_,
        flop_utilization=busiest,
        compute_roof_flop_per_second=roof_c,
        intensity_flop_per_byte=intensity,
        position=position,
        attainable_flop_per_second=attainable,
        fraction_of_peak=None if attainable is None else attainable / roof_c,
        roofline_efficiency=efficiency,
        uncounted_pipes=uncounted,
    )


class CounterVerdict(NamedTuple):
    """A counter reading on one roof: where it sits (`at`) and what it is (`call`), each record
    once rather than their fields copied into a third."""

    at: CounterPosition
    call: CounterCall


def classify_counters(
    roof: Roof,
    reading: CounterReading,
    thresholds: Thresholds | None = None,
    *,
    vector_peaks: Mapping[str, float] | None = None,
    mig_instance: bool = False,
    fp64_tensor_faster: bool = True,
    precision: str | None = None,
    precisions: Collection[str] = (),
    links: LinkLoad | None = None,
) -> CounterVerdict:
    """The counter form on one roof: `judge_counters` and `counter_position` together.

    vector_peaks: the card's CUDA-core FP64/FP32/FP16 peaks (FLOP/s) where known; a pipe without
    one still counts for the regime but adds no FLOPs. fp64_tensor_faster: the card has FP64
    tensor cores faster than its FP64 pipe (the FP64 lever depends on it). links: each link's
    load (judge_counters).
    """
    call = judge_counters(
        reading,
        thresholds or Thresholds(),
        mig_instance=mig_instance,
        fp64_tensor_faster=fp64_tensor_faster,
        precision=precision,
        precisions=precisions,
        links=links,
    )
    at = counter_position(reading, pipe_peaks(roof, vector_peaks or {}), roof.bandwidth_bytes_per_second)
    return CounterVerdict(at=at, call=call)


def pipe_peaks(roof: Roof, vector_peaks: Mapping[str, float]) -> dict[str, float]:
    """{"tensor": P at the precision in use, "fp64"/"fp32"/"fp16": their vector peaks}."""
    peaks = {"tensor": roof.peak_flop_per_second}
    for pipe in FP_PIPES:
        value = vector_peaks.get(pipe)
        if value is not None:
            peaks[pipe] = value
    return peaks


def known_clock_ratio(sm_clock_mhz: float | None, basis_mhz: float | None) -> float | None:
    """k = min(1, SM clock / the clock a peak is quoted at); None when either is unknown.

    A pipe activity is a fraction of cycles, so FLOP/s scale with the clock actually run (DCGM
    profiling metrics documentation: the FLOP/s formulas multiply by the SM clock). The clamp:
    the quoted peak is the roof; a clock reported above the basis (H100 SXM boosts to 1980 MHz,
    its tensor peak is quoted at 1830) would put achieved FLOP/s above the roof they are judged
    against (docs/model.md, "Clock basis").
    """
    if sm_clock_mhz is None or basis_mhz is None or not math.isfinite(basis_mhz) or basis_mhz <= 0:
        return None
    if not math.isfinite(sm_clock_mhz) or sm_clock_mhz <= 0:
        return None
    return min(1.0, sm_clock_mhz / basis_mhz)


def clock_ratio(sm_clock_mhz: float | None, basis_mhz: float | None) -> float:
    """known_clock_ratio, or 1 (the quoted clock: an upper bound on FLOP/s) when it is unknown.

    The callers that use this 1 say so: the verdict's clock_ratio is then null."""
    known = known_clock_ratio(sm_clock_mhz, basis_mhz)
    return 1.0 if known is None else known


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
