"""Inference: one GPU's samples into smoothed ratios, a debounced regime and integrated totals.

Pure (roofline, catalog types, fields and the sample record only), so every rule here is tested
with synthetic samples and explicit timestamps: no clock, no thread, no GPU library. The rules
(readings, smoothing, dwell, integration and its cap) are docs/daemon.md's "What a verdict is
made of" and "Counters and integration"; each step is a small function below.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from exporter import clock_events, fields, readings
from exporter.catalog import Card
from exporter.readings import READING_FIELDS
from exporter.roofline import (
    ACTIVITY_FIELD_SET,
    FP_PIPES,
    LINKS,
    REGIMES,
    CounterCall,
    CounterReading,
    CounterRegime,
    LinkLoad,
    RegimeAt,
    Roof,
    Thresholds,
    counter_call,
    counter_position,
    counter_regime,
    dominant_precision,
    fp64_tensor_faster,
    link_load,
    pipe_peaks,
    pipe_sums,
)
from exporter.sample import Entity, Sample

log = logging.getLogger(__name__)

UNKNOWN_CARD = "unknown"
"""The `card` label of a GPU whose model the catalog does not know."""

DEFAULT_PRECISION = "bf16"

RECENT_INTERVALS = 8
"""How many recent sample intervals judge what a "normal" interval is for the integration cap."""

FROZEN_BUSY = 0.1
"""GR_ENGINE_ACTIVE or GPU_UTIL above this says the GPU is busy: if its DRAM and tensor activity
then read exactly 0, the profiling counters are not being collected (frozen)."""
FROZEN_HOLD_SECONDS = 30.0
"""How long those readings must hold before `ridgeline_profiling_frozen` is written: a GPU going
from idle to busy can show its busy engine a sample or two before its DRAM and tensor activity and
must not count as frozen (issue 24.7). Three smoothing time constants; the alert adds its `for:`."""

READING_FIELD_IDS: Mapping[str, int] = readings.field_ids("activity", "occupancy")
"""The DCGM field behind each reading field (readings.READING_FIELDS)."""

TENSOR_PIPE_FIELDS: Mapping[str, int] = readings.field_ids("tensor_pipe")
"""The tensor sub-pipes: they name the precision, they are not part of the reading."""

LINK_FIELDS: Mapping[str, int] = readings.field_ids("link")
"""DCGM's link byte rates (1009-1012), by the names POST /classify gives them: bytes/s per
direction, smoothed like the ratios, judged against the card's link bandwidth."""
LINK_DIRECTIONS: tuple[tuple[str, str, str], ...] = tuple(
    (name.split("_")[0], name.split("_")[1], name) for name in LINK_FIELDS
)
"""(link, direction, input name) of each link byte rate: ("pcie", "tx", "pcie_tx_bytes_per_second")."""

PROFILING_FIELDS: tuple[int, ...] = tuple(READING_FIELD_IDS.values())
"""DCGM 1001-1008: a GPU lacking one of these has `ridgeline_profiling_field_missing` for it."""

_warned_models: set[str] = set()
MAX_WARNED_MODELS = 256
"""Unknown model names logged at most (names that churn must not grow this set, or the log)."""


@dataclass(frozen=True, slots=True)
class InferenceConfig:
    """How samples become verdicts; every field is a documented CLI flag of `ridgeline serve`."""

    precision: str | None = None
    """A fixed precision (`--precision`); None: the dominant tensor pipe when HMMA/IMMA/DFMA are
    reported, else bf16."""
    smoothing_seconds: float = 10.0
    dwell_seconds: float = 5.0
    thresholds: Thresholds = field(default_factory=Thresholds)
    expected_interval_seconds: float = 1.0
    gap_factor: float = 5.0
    """An interval longer than gap_factor × max(expected interval, shortest recent interval) is
    a gap (a stall, a restart, a GPU that was away) and is not integrated."""

    def __post_init__(self) -> None:
        for name in ("smoothing_seconds", "dwell_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not (math.isfinite(self.expected_interval_seconds) and self.expected_interval_seconds > 0):
            raise ValueError(f"interval must be > 0 seconds, got {self.expected_interval_seconds!r}")
        if not (math.isfinite(self.gap_factor) and self.gap_factor >= 1):
            raise ValueError(f"gap_factor must be >= 1, got {self.gap_factor!r}")


_NO_REGIME_SECONDS: Mapping[str, float] = MappingProxyType(dict.fromkeys(REGIMES, 0.0))
"""Totals' default: read-only, so every fresh Totals can share it."""


# The per-sample results below are NamedTuples (`step` builds several per GPU per sample; why,
# exporter/sample.py): just as immutable, and `_replace` makes a changed copy.


class Totals(NamedTuple):
    """Counters that only grow: seconds per raw regime, estimated FLOPs and DRAM bytes.

    Kept per GPU across dropouts and source reconnects, so a counter never goes backwards. Each
    is born at 0 with the GPU's first reading that can feed it (a counter born at a non-zero
    value loses its first increase in Prometheus): regime seconds with any reading, FLOPs with a
    compute pipe on a known roof, bytes with DRAM_ACTIVE on a known roof. None: not born yet.
    """

    regime_seconds: Mapping[str, float] | None = None
    flop_total: float | None = None
    dram_bytes_total: float | None = None
    integrated_seconds: float = 0.0
    clock_lost_seconds: Mapping[str, float] | None = None
    """GPU-seconds a reduced clock cost by cause label (clock_events.lost_to_clock), every cause
    born at 0 the first time the GPU is compute-bound at one; None before (most GPUs never are)."""


class Smoothing(NamedTuple):
    """What the next sample needs: the smoothed inputs and the debouncer's state."""

    values: Mapping[str, float]
    regime: CounterRegime
    """The debounced (exported) regime."""
    lever: str
    pending_regime: CounterRegime | None = None
    pending_since: float | None = None
    """Timestamp of the first sample whose smoothed regime was `pending_regime`."""


class Estimate(NamedTuple):
    """The derived view of one GPU from its smoothed inputs (what /metrics and /classify show)."""

    card: str
    precision: str | None
    precision_note: str | None
    roof: Roof | None
    """The card's (or MIG instance's) roof at the precision in use; None when unknown."""
    dram_active: float | None
    tensor_active: float | None
    flop_utilization: float | None
    """u*: the busiest compute pipe's activity times the clock ratio (achieved / compute roof)."""
    clock_ratio: float | None
    """k of the tensor pipe: SM clock / the clock its peak is quoted at (at most 1); None when the
    card has no clock basis or the source no SM clock (FLOP/s then assume the quoted clock)."""
    vector_clock_ratio: float | None
    """k of the CUDA-core pipes, against their own quoted clock; None as for clock_ratio."""
    gr_engine_active: float | None
    gpu_utilization: float | None
    sm_active: float | None
    sm_occupancy: float | None
    fp64_active: float | None
    fp32_active: float | None
    fp16_active: float | None
    pipe: str | None
    """The compute pipe nearest its wall (tensor, fp64, fp32, fp16)."""
    compute_roof_flop_per_second: float | None
    intensity_flop_per_byte: float | None
    position: float | None
    achieved_flop_per_second: float | None
    achieved_bandwidth_bytes_per_second: float | None
    attainable_flop_per_second: float | None
    fraction_of_peak: float | None
    roofline_efficiency: float | None
    regime: CounterRegime
    """Debounced: what the `ridgeline_regime` state set reports."""
    smoothed_regime: CounterRegime
    """The regime of this sample's smoothed inputs (what the debouncer is looking at)."""
    raw_regime: CounterRegime
    """The regime of this sample's raw inputs (what the time-in-regime counters integrate)."""
    lever: str
    unknown_because: tuple[str, ...]
    """DCGM names of the fields whose absence leaves the smoothed regime `unknown`."""
    gr_engine_contradicted: bool
    """GR_ENGINE_ACTIVE (smoothed) reads idle while busier evidence says work runs."""
    clock_event_reasons: tuple[str, ...] = ()
    """NVML's clocks-event reasons (field 112) in the latest sample that slow a loaded GPU."""
    clock_causes: tuple[str, ...] = ()
    """The causes a reduced clock is put down to (clock_events.causes_of): field 112's reasons,
    and the power cap when the draw is at its limit (fields 155, 160)."""
    uncounted_pipes: tuple[str, ...] = ()
    """Compute pipes left out of achieved FLOP/s (unreported, or busy without a peak): with any,
    achieved FLOP/s and intensity are lower bounds, and unknown when the counted ones sum to 0."""
    link_bytes_per_second: tuple[tuple[str, str, float], ...] = ()
    """(link, direction, smoothed bytes/s) of each link byte rate the source reports (1009-1012)."""
    link_utilization: tuple[tuple[str, float], ...] = ()
    """(link, load): the busier direction over the card's per-direction bandwidth, for each link
    with counters and a figure (none on a MIG instance: the links are the whole GPU's)."""
    link: str | None = None
    """The link at its wall of an interconnect-bound verdict (nvlink, pcie); None otherwise."""


class EntityInference(NamedTuple):
    """Everything known about one GPU after its latest sample; replaced whole on each sample.

    The Estimate (the numbers /metrics and /classify show) is derived from the smoothed inputs
    when it is read (`estimate`), not stored: the sampler folds every sample in, while a scrape
    reads one in many (at --interval 0.1 and a 15 s scrape, one in 150), and building it per
    sample was a fifth of the per-sample cost (docs/daemon.md, "Live budget").
    """

    entity: Entity
    timestamp: float
    """The latest sample's timestamp (seconds since the epoch, the source's clock)."""
    smoothing: Smoothing | None
    """None while the sample has no activity field at all: no derived series."""
    totals: Totals
    recent_intervals: tuple[float, ...] = ()
    missing_fields: tuple[str, ...] = ()
    """DCGM names of the profiling fields 1001-1008 this sample lacks (absent or blank)."""
    card_key: str | None = None
    """The catalog key (or "unknown"), known even while there is no estimate, so that a sample
    without a reading does not change the `card` label of the GPU's counters."""
    profile: CardProfile | None = None
    """The card's (or MIG instance's) constants the sample was judged with."""
    call: CounterCall | None = None
    """The smoothed reading's verdict (what the debouncer looked at)."""
    raw_regime: CounterRegime | None = None
    """The raw reading's regime (what the time-in-regime counters integrated)."""
    clock_reasons: tuple[str, ...] = ()
    """The latest sample's field-112 reasons (a bitmask is not smoothed: the latest one stands)."""
    clock_causes: tuple[str, ...] = ()
    """The causes of a reduced clock by the latest sample (clock_events.causes_of)."""
    missing_link_fields: tuple[str, ...] = ()
    """DCGM names of the link byte fields (1009-1012) the latest sample lacks, for each link the
    card has a figure for: the fields that would tell whether that link is the wall."""
    frozen_since: float | None = None
    """Timestamp of the first of an unbroken run of samples that look frozen (looks_frozen);
    None while the latest one does not."""

    @property
    def profiling_frozen(self) -> bool:
        """The profiling counters have looked frozen for FROZEN_HOLD_SECONDS or more."""
        since = self.frozen_since
        return since is not None and self.timestamp - since >= FROZEN_HOLD_SECONDS

    @property
    def estimate(self) -> Estimate | None:
        """The derived view of the smoothed reading, built anew on each read (read it once per
        use); None while the sample has no activity field."""
        if self.smoothing is None or self.profile is None or self.call is None or self.raw_regime is None:
            return None
        return estimate_of(
            self.profile, self.smoothing, self.call, self.raw_regime, self.clock_reasons, self.clock_causes
        )


def precision_on(card: Card, wanted: str) -> tuple[str, str | None]:
    """The precision the daemon uses on `card` for the configured `wanted` and, when the card
    lacks it and a stand-in is used (Card.resolve_precision), a note saying so.

    The configured precision is a default, not a request: one --precision serves every GPU on
    the node, so a card without it gets its stand-in rather than no verdict.
    """
    precision, source = card.resolve_precision(None, wanted)
    if source == "default_substitute":
        return precision, f"card {card.key} has no {wanted} peak; using {precision}"
    return precision, None


def integration_cap(config: InferenceConfig, recent: tuple[float, ...]) -> float:
    """The longest interval still integrated: gap_factor × max(expected, shortest recent interval),
    where `recent` are the intervals *before* the one being judged (none: the expected interval).

    The shortest recent interval (not the mean) is used so that one long gap does not widen the
    cap for the next gap, while a source that legitimately samples slower than `--interval`
    (a replay recorded every 10 s) is still integrated from its second interval on. The interval
    being judged is never part of its own cap: a GPU's first interval after a page stamped one
    second after the epoch would otherwise allow itself.
    """
    typical = min(recent) if recent else config.expected_interval_seconds
    return config.gap_factor * max(config.expected_interval_seconds, typical)


def within_cap(config: InferenceConfig, recent: tuple[float, ...], dt: float) -> bool:
    """Whether an interval of dt seconds is integrated (dt ≤ integration_cap): the cap is never
    under gap_factor × the expected interval, so within that no min() of `recent` is taken
    (the common case, judged once a sample)."""
    return dt <= config.gap_factor * config.expected_interval_seconds or dt <= integration_cap(config, recent)


def note_unknown_model(model: str) -> None:
    """Log once per model name that the catalog lacks it (the GPU is still served, card="unknown")."""
    if model not in _warned_models and len(_warned_models) < MAX_WARNED_MODELS:
        _warned_models.add(model)
        log.warning(
            "GPU model %r is not in the card catalog: exporting its ratios and regime with "
            'card="unknown" and no roof (add it with --cards FILE)',
            model,
        )


# --- the steps -------------------------------------------------------------------------------


def _ratio(value: float) -> float:
    """A source value clamped to [0, 1] as a float (any zero, -0.0 included, becomes +0.0)."""
    if value.__class__ is float and 0.0 < value <= 1.0:
        return value  # the common case, already a ratio
    return min(1.0, max(0.0, float(value))) if value != 0 else 0.0


_LINK_INPUTS: tuple[tuple[str, int], ...] = tuple(LINK_FIELDS.items())
_RATIO_NAMES: frozenset[str] = frozenset(READING_FIELDS)
_TENSOR_INPUTS: tuple[tuple[str, int], ...] = tuple(TENSOR_PIPE_FIELDS.items())


_READING_INPUTS: tuple[tuple[str, int, str], ...] = tuple(
    (name, fid, readings.field_name(fid)) for name, fid in READING_FIELD_IDS.items()
)
assert tuple(READING_FIELD_IDS) == READING_FIELDS, "inputs_of's ratios are in CounterReading's order"
_OCCUPANCY_AT = READING_FIELDS.index("sm_occupancy")
assert set(READING_FIELDS) - ACTIVITY_FIELD_SET == {"sm_occupancy"}, "every other ratio is an activity"


def no_activity(ratios: list[float | None]) -> bool:
    """roofline.has_activity's negation on inputs_of's ratios: None in every place but perhaps
    SM occupancy's (the one ratio that is not an activity)."""
    return ratios.count(None) == len(ratios) - (ratios[_OCCUPANCY_AT] is not None)


def inputs_of(
    values: Mapping[int, float | None],
) -> tuple[dict[str, float], tuple[str, ...], list[float | None]]:
    """(this sample's other inputs by name, DCGM names of the profiling fields 1001-1008 it lacks,
    the reading's ratios clamped to [0, 1] in READING_FIELDS order, None where absent), in one
    pass. The other inputs: the tensor sub-pipes, the link byte rates, the SM clock in MHz (a
    positive finite one; the clock ratios are taken against the roof in use,
    CardProfile.clock_ratios) and GPU_UTIL as a fraction; blank fields are left out (and a blank
    profiling field is missing, as an absent one is)."""
    get = values.get  # looked up once: this runs ~17 times a sample
    inputs: dict[str, float] = {}
    missing: list[str] = []
    ratios: list[float | None] = []
    for _, fid, dcgm_name in _READING_INPUTS:
        value = get(fid)
        if value is None:
            missing.append(dcgm_name)
            ratios.append(None)
            continue
        if value.__class__ is not float or not 0.0 < value <= 1.0:
            value = _ratio(value)  # else _ratio's common case, without the call
        ratios.append(value)
    for name, fid in _TENSOR_INPUTS:
        value = get(fid)
        if value is not None:
            inputs[name] = _ratio(value)
    for name, fid in _LINK_INPUTS:
        rate = get(fid)
        if rate is not None and 0.0 <= rate < math.inf:
            inputs[name] = float(rate)
    clock = get(fields.SM_CLOCK)
    if clock is not None and 0.0 < clock < math.inf:
        inputs["sm_clock_mhz"] = float(clock)
    util = get(fields.GPU_UTIL)
    if util is not None:
        inputs["gpu_utilization"] = _ratio(util / 100.0)  # DCGM GPU_UTIL is a percentage
    return inputs, tuple(missing) if missing else (), ratios


def smooth(prior: Mapping[str, float] | None, inputs: Mapping[str, float], alpha: float) -> dict[str, float]:
    """s ← s + α(x − s) per input; an input seen for the first time (or again after a blank)
    starts at its value, and an input this sample lacks is dropped."""
    if prior is None:
        return dict(inputs)
    get = prior.get
    smoothed: dict[str, float] = {}
    for name, x in inputs.items():  # a loop, not a comprehension: no function call per sample
        s = get(name)
        smoothed[name] = x if s is None else s + alpha * (x - s)
    return smoothed


def smooth_ratios(
    prior: list[float | None] | None, ratios: list[float | None], alpha: float
) -> list[float | None]:
    """`smooth` over the reading's ratios in READING_FIELDS order (None: not reported): kept in
    a list per GPU, so the smoothed reading is built from it without a lookup by name. Blended
    in a copy of `ratios`, place by place: a ratio this sample lacks stays None, one seen anew
    stays as read."""
    if prior is None:
        return ratios
    smoothed = ratios.copy()
    for at, s in enumerate(prior):
        if s is not None and (x := smoothed[at]) is not None:
            smoothed[at] = s + alpha * (x - s)
    return smoothed


def smoothed_values(ratios: list[float | None], others: Mapping[str, float]) -> Mapping[str, float]:
    """The smoothed inputs by name as Smoothing.values holds them: the reported ratios (in
    READING_FIELDS order), then the others, in inputs_of's order (built when a record is)."""
    found = {name: value for name, value in zip(READING_FIELDS, ratios, strict=True) if value is not None}
    found.update(others)
    return MappingProxyType(found)


def smoothing_alpha(dt: float | None, time_constant: float) -> float:
    """1 − exp(−dt/τ): exact for uneven intervals; 1 (no smoothing) for τ = 0 or no interval."""
    if dt is None or time_constant == 0:
        return 1.0
    return -math.expm1(-dt / time_constant)


def reading_of(inputs: Mapping[str, float], clocks: tuple[float | None, float | None]) -> CounterReading:
    """The roofline reading of a sample's raw or smoothed inputs with its (tensor, CUDA-core)
    clock ratios: each of CounterReading's fields by its own name, in the order roofline's
    assertion checks (reading_from)."""
    return reading_from(map(inputs.get, READING_FIELDS), clocks)


def reading_from(ratios: Iterable[float | None], clocks: tuple[float | None, float | None]) -> CounterReading:
    """The reading of ratios in READING_FIELDS order (inputs_of's) with its clock ratios: an
    unknown k is 1 (the quoted clock), a known one is kept above 0 (a sub-MHz clock can
    underflow it)."""
    tensor, vector = clocks
    return _new_reading(
        CounterReading,
        (
            *ratios,
            1.0 if tensor is None else tensor if tensor >= 1e-9 else 1e-9,
            1.0 if vector is None else vector if vector >= 1e-9 else 1e-9,
        ),
    )


_new_reading = tuple.__new__
"""CounterReading._make without its length check (reading_of always gives every field)."""


_LINK_FIELD_NAMES: Mapping[str, tuple[tuple[int, str], ...]] = MappingProxyType(
    {
        link: tuple(
            (fid, readings.field_name(fid))
            for name, fid in LINK_FIELDS.items()
            if name.startswith(f"{link}_")
        )
        for link in LINKS
    }
)


def link_field_names(bandwidths: Mapping[str, float]) -> tuple[tuple[int, str], ...]:
    """(id, DCGM name) of the link byte fields (1009-1012) of each link with a figure."""
    return tuple(pair for link in bandwidths for pair in _LINK_FIELD_NAMES[link])


def missing_link_fields(
    values: Mapping[int, float | None], names: tuple[tuple[int, str], ...]
) -> tuple[str, ...]:
    """DCGM names of the link byte fields a sample lacks among `names` (link_field_names: the
    links with a figure): without them the interconnect wall cannot be judged, and the verdict
    is the ratios' alone."""
    if not names:
        return ()
    found = [name for fid, name in names if values.get(fid) is None]
    return tuple(found) if found else ()


def looks_frozen(ratios: Sequence[float | None], inputs: Mapping[str, float]) -> bool:
    """DRAM and tensor activity exactly 0 while GR_ENGINE_ACTIVE or GPU_UTIL says busy: counters
    a profiler or a paused DCGM holds (docs/model.md, "Frozen profiling counters"). `ratios` in
    READING_FIELDS order and the other inputs, as inputs_of gives them."""
    if ratios[_DRAM_AT] != 0.0 or ratios[_TENSOR_AT] != 0.0:
        return False  # also when either is not reported (RidgelineProfilingCountersMissing's case)
    engine = ratios[_ENGINE_AT]
    return (engine is not None and engine > FROZEN_BUSY) or inputs.get("gpu_utilization", 0.0) > FROZEN_BUSY


_DRAM_AT = READING_FIELDS.index("dram_active")
_TENSOR_AT = READING_FIELDS.index("tensor_active")
_ENGINE_AT = READING_FIELDS.index("gr_engine_active")


@functools.lru_cache(maxsize=64)
def dcgm_names(reading_fields: tuple[str, ...]) -> tuple[str, ...]:
    """Reading field names (dram_active, ...) as the DCGM names an SRE puts in a counters file
    (a few distinct tuples ever occur: cached)."""
    return tuple(readings.field_name(READING_FIELD_IDS[name]) for name in reading_fields)


def step(
    previous: EntityInference | None,
    sample: Sample,
    card: Card | None,
    config: InferenceConfig,
    *,
    totals: Totals | None = None,
    integrate: bool = True,
    count_work: bool = True,
    time_weight: float = 1.0,
) -> EntityInference:
    """Fold one sample into a GPU's state.

    previous: this GPU's state after its last sample (None for a GPU seen for the first time or
    returning after it was dropped). totals: counters to continue from when `previous` is None.
    integrate=False skips integrating this sample's interval (the sampler says so after
    the GPU missed a batch: the interval then spans a dropout). count_work=False keeps FLOPs and
    bytes out of this GPU's counters (a MIG parent whose instances report them: docs/model.md,
    "MIG roofs"). time_weight scales the regime seconds: a MIG instance's share of its GPU, 0 for
    a parent (docs/model.md, "One count per physical GPU").

    The rules are EntityFold.add's; this is one sample's fold from and to the immutable record.
    """
    if previous is not None and sample.timestamp <= previous.timestamp:
        return previous  # duplicate or out-of-order: the interval was already accounted for
    fold = EntityFold(previous, totals)
    fold.add(sample, card, config, integrate=integrate, count_work=count_work, time_weight=time_weight)
    return fold.inference()


class EntityFold:
    """One GPU's inference state, updated in place sample by sample and read as an EntityInference.

    The sampler folds every sample (ten a second per GPU at --interval 0.1) but publishes about
    once a second, so the records a reader sees (EntityInference, Smoothing, Totals) are built
    when read (`inference`), not per sample; the regime seconds are copied once per read, not per
    interval (docs/daemon.md, "Live budget"). `step` is one `add` between two records, so both
    paths run the same rules, in the same order, to the same bits (tests/test_sampler_fold.py).
    """

    __slots__ = (
        "_card",
        "_config",
        "_entity_seen",
        "_exported",
        "_judged",
        "_lever_from",
        "_profile",
        "_totals",
        "call",
        "card_key",
        "clock_causes",
        "clock_lost",
        "clock_reasons",
        "dram_bytes",
        "entity",
        "flops",
        "frozen_since",
        "integrated",
        "lever",
        "missing",
        "missing_link",
        "others",
        "pending_regime",
        "pending_since",
        "profile",
        "ratios",
        "raw_regime",
        "recent",
        "regime",
        "seconds",
        "seconds_shared",
        "timestamp",
        "values",
    )

    def __init__(self, previous: EntityInference | None = None, totals: Totals | None = None) -> None:
        """Continue from `previous` (None: a GPU's first sample, from `totals` or none)."""
        if previous is not None:
            totals = previous.totals
        elif totals is None:
            totals = Totals()
        self._totals: Totals | None = totals
        """Totals as last built (None: the counters changed since)."""
        self.seconds: Mapping[str, float] | None = totals.regime_seconds
        self.seconds_shared = True
        """`seconds` may be held by a record or be the shared zeros: copy it before adding to it."""
        self.flops = totals.flop_total
        self.dram_bytes = totals.dram_bytes_total
        self.integrated = totals.integrated_seconds
        self.clock_lost = totals.clock_lost_seconds
        self._exported = previous
        """The EntityInference of the state as it is (None: a sample came since it was built)."""
        self._card: Card | None = None
        self._config: InferenceConfig | None = None
        self._entity_seen: Entity | None = None
        self._profile: CardProfile | None = None
        """card_profile of (_card, _config, _entity_seen), reused while all three are the same."""
        self._judged: Judged | None = None
        """The latest smoothed reading as judged, while its call is not built (`call` is None)."""
        self._lever_from: Judged | None = None
        """The reading whose call's lever is the debounced one, while `lever` is not built."""
        if previous is None:
            self.timestamp: float | None = None
            self.entity: Entity | None = None
            self.recent: tuple[float, ...] = ()
            self.ratios: list[float | None] | None = None
            """The smoothed ratios (smooth_ratios); None while there is no activity field."""
            self.others: Mapping[str, float] | None = None
            """The other smoothed inputs (smooth), None with `ratios`."""
            self.values: Mapping[str, float] | None = None
            """Both as one read-only mapping (smoothed_values), built when a record is."""
            self.regime: CounterRegime = "unknown"
            self.lever: str | None = ""
            self.pending_regime: CounterRegime | None = None
            self.pending_since: float | None = None
            self.missing: tuple[str, ...] = ()
            self.card_key: str | None = None
            self.profile: CardProfile | None = None
            self.call: CounterCall | None = None
            self.raw_regime: CounterRegime | None = None
            self.clock_reasons: tuple[str, ...] = ()
            self.clock_causes: tuple[str, ...] = ()
            self.missing_link: tuple[str, ...] = ()
            self.frozen_since: float | None = None
            return
        self.timestamp = previous.timestamp
        self.entity = previous.entity
        self.recent = previous.recent_intervals
        smoothing = previous.smoothing
        if smoothing is None:
            self.values = self.ratios = self.others = None
            self.regime, self.lever, self.pending_regime, self.pending_since = "unknown", "", None, None
        else:
            values = self.values = smoothing.values
            self.ratios = [values.get(name) for name in READING_FIELDS]
            self.others = {name: value for name, value in values.items() if name not in _RATIO_NAMES}
            self.regime, self.lever = smoothing.regime, smoothing.lever
            self.pending_regime, self.pending_since = smoothing.pending_regime, smoothing.pending_since
        self.missing = previous.missing_fields
        self.card_key = previous.card_key
        self.profile = previous.profile
        self.call = previous.call
        self.raw_regime = previous.raw_regime
        self.clock_reasons = previous.clock_reasons
        self.clock_causes = previous.clock_causes
        self.missing_link = previous.missing_link_fields
        self.frozen_since = previous.frozen_since

    def totals(self) -> Totals:
        """The counters as a record (built once per change)."""
        built = self._totals
        if built is None:
            seconds = self.seconds
            if seconds is not None and not self.seconds_shared:
                seconds = self.seconds = MappingProxyType(seconds)
                self.seconds_shared = True
            built = self._totals = Totals(
                regime_seconds=seconds,
                flop_total=self.flops,
                dram_bytes_total=self.dram_bytes,
                integrated_seconds=self.integrated,
                clock_lost_seconds=self.clock_lost,
            )
        return built

    def inference(self) -> EntityInference:
        """The state as the record readers take (built once per sample folded since the last)."""
        built = self._exported
        if built is not None:
            return built
        assert self.entity is not None and self.timestamp is not None, "no sample folded yet"
        ratios, others = self.ratios, self.others
        smoothing = None
        call = self.call
        if ratios is not None and others is not None:
            values = self.values
            if values is None:
                values = self.values = smoothed_values(ratios, others)
            judged = self._judged
            if call is None and judged is not None:
                call = self.call = call_of(judged)
                self._judged = None
                if self._lever_from is judged:
                    self.lever, self._lever_from = call.lever, None
            smoothing = Smoothing(
                values=values,
                regime=self.regime,
                lever=self._lever(),
                pending_regime=self.pending_regime,
                pending_since=self.pending_since,
            )
        built = self._exported = EntityInference(
            entity=self.entity,
            timestamp=self.timestamp,
            smoothing=smoothing,
            totals=self.totals(),
            recent_intervals=self.recent,
            missing_fields=self.missing,
            card_key=self.card_key,
            profile=self.profile,
            call=call,
            raw_regime=self.raw_regime,
            clock_reasons=self.clock_reasons,
            clock_causes=self.clock_causes,
            missing_link_fields=self.missing_link,
            frozen_since=self.frozen_since,
        )
        return built

    def _lever(self) -> str:
        """The debounced lever, built from the reading that set it the first time it is read (a
        regime waiting out its dwell keeps the lever of an earlier sample)."""
        lever = self.lever
        if lever is None:
            source = self._lever_from
            assert source is not None, "a lever without the reading it came from"
            lever = self.lever = call_of(source).lever
            self._lever_from = None
        return lever

    def add(
        self,
        sample: Sample,
        card: Card | None,
        config: InferenceConfig,
        *,
        integrate: bool = True,
        count_work: bool = True,
        time_weight: float = 1.0,
    ) -> bool:
        """Fold one sample in (`step`'s arguments); False for a duplicate or out-of-order one,
        which changes nothing (its interval was already accounted for). The steps, in order: the
        card's profile, the interval, the inputs and the frozen counters, then, for a reading,
        its judging and debouncing (`_judge`) and the counters (`_count`)."""
        timestamp = sample.timestamp
        last = self.timestamp
        if last is not None and timestamp <= last:
            return False
        entity = sample.entity
        profile = self._profile_for(entity, card, config)
        dt, interval = self._interval_to(timestamp, integrate, config)
        self.timestamp, self.entity, self._exported = timestamp, entity, None
        values = sample.values
        inputs, self.missing, ratios = inputs_of(values)
        self.card_key = profile.key
        self.missing_link = missing_link_fields(values, profile.link_fields) if profile.link_fields else ()
        self._track_frozen(ratios, inputs, timestamp)
        if no_activity(ratios):
            self._forget_reading()
            return True
        raw, raw_at, roof, peaks, causes = self._judge(sample, inputs, ratios, profile, config, dt)
        self._count(raw, raw_at, roof if count_work else None, peaks, causes, interval, time_weight)
        return True

    def _profile_for(self, entity: Entity, card: Card | None, config: InferenceConfig) -> CardProfile:
        """card_profile for this sample, reused while its entity, card and config are the very
        objects of the last sample (compared by identity: no cache key is built per sample)."""
        profile = self._profile
        if (
            profile is None
            or entity is not self._entity_seen
            or card is not self._card
            or config is not self._config
        ):
            profile = self._profile = card_profile(
                card,
                config,
                instance=entity.gpu_instance is not None,
                mig_profile=entity.profile,
                live_sms=entity.sm_count,
            )
            self._entity_seen, self._card, self._config = entity, card, config
        return profile

    def _interval_to(
        self, timestamp: float, integrate: bool, config: InferenceConfig
    ) -> tuple[float | None, float | None]:
        """(the interval since the last sample, None for the first; the part of it integrated:
        all of it within the integration cap of the intervals before it, unless `integrate` is
        False, else None), the recent intervals moved on by it."""
        last = self.timestamp
        if last is None:
            return None, None
        dt = timestamp - last
        before = self.recent
        self.recent = (*before[1:], dt) if len(before) >= RECENT_INTERVALS else (*before, dt)
        return dt, dt if integrate and within_cap(config, before, dt) else None

    def _track_frozen(
        self, ratios: list[float | None], inputs: Mapping[str, float], timestamp: float
    ) -> None:
        """Since when the profiling counters have looked frozen (looks_frozen); None while not."""
        if not looks_frozen(ratios, inputs):
            self.frozen_since = None
        elif self.frozen_since is None:
            self.frozen_since = timestamp

    def _forget_reading(self) -> None:
        """A sample without an activity field: no smoothed reading, verdict or clock events."""
        self.values = self.ratios = self.others = None
        self.profile = self.call = self.raw_regime = self._judged = None
        self.clock_reasons = self.clock_causes = ()

    def _judge(
        self,
        sample: Sample,
        inputs: dict[str, float],
        ratios: list[float | None],
        profile: CardProfile,
        config: InferenceConfig,
        dt: float | None,
    ) -> tuple[CounterReading, RegimeAt, Roof | None, Mapping[str, float], tuple[str, ...]]:
        """Smooth the inputs, judge the raw and the smoothed readings on the roof the smoothed
        tensor pipes choose, and debounce the smoothed regime. Returns what the counters need:
        (raw reading, its regime, roof, pipe peaks, clock causes)."""
        prior = self.others
        alpha = smoothing_alpha(dt, config.smoothing_seconds)
        smoothed = smooth(prior, inputs, alpha)
        smoothed_ratios = smooth_ratios(self.ratios, ratios, alpha)
        precision, roof, peaks = profile.roof_for(smoothed)
        thresholds = config.thresholds
        raw_clock, sm_clock = inputs.get("sm_clock_mhz"), smoothed.get("sm_clock_mhz")
        raw_clocks = profile.clock_ratios(precision, raw_clock)
        raw = reading_from(ratios, raw_clocks)
        walls = profile.link_walls
        linked = walls[0] is not None or walls[1] is not None  # links_of is None without a figure
        raw_at = counter_regime(raw, thresholds, links_of(inputs, *walls) if linked else None)
        # a steady clock (or none) smooths to itself: its clock ratios are the raw reading's
        clocks = raw_clocks if sm_clock == raw_clock else profile.clock_ratios(precision, sm_clock)
        reading = reading_from(smoothed_ratios, clocks)
        at = counter_regime(reading, thresholds, links_of(smoothed, *walls) if linked else None)
        reasons, causes = clock_events_of(sample.values)
        # the smoothed reading's call (its lever) is built when a snapshot reads it (call_of)
        mig = sample.entity.gpu_instance is not None
        judged = self._judged = _new_judged(
            Judged, (reading, at, thresholds, mig, profile, precision, sm_clock, causes)
        )
        self.call = None
        self._debounce(at.regime, prior is None, judged, sample.timestamp, config.dwell_seconds)
        self.ratios, self.others, self.values = smoothed_ratios, smoothed, None
        self.profile = profile
        self.raw_regime = raw_at.regime
        self.clock_reasons = reasons
        self.clock_causes = causes
        return raw, raw_at, roof, peaks, causes

    def _debounce(
        self, regime: CounterRegime, first: bool, judged: Judged, timestamp: float, dwell: float
    ) -> None:
        """A new smoothed regime must hold `dwell` seconds before it is the GPU's (the first
        reading's is at once); the regime that holds takes its lever from `judged`."""
        if not first and regime != self.regime:
            since = self.pending_since
            if self.pending_regime != regime or since is None:
                since = timestamp
            held = timestamp - since >= dwell
            if not held:
                self.pending_regime, self.pending_since = regime, since
                return
        self.regime, self.lever, self._lever_from = regime, None, judged
        self.pending_regime = self.pending_since = None

    def _count(
        self,
        raw: CounterReading,
        raw_at: RegimeAt,
        roof: Roof | None,
        peaks: Mapping[str, float],
        causes: tuple[str, ...],
        interval: float | None,
        time_weight: float,
    ) -> None:
        """Grow the counters by the raw reading over `interval` (None: not integrated, but a
        counter the reading can feed is still born); `roof` None: no FLOPs or bytes counted.
        Each counter's operations are in the order step had before issue 22 (the same bits)."""
        self._totals = None
        flop_per_second, bytes_per_second = self._work_rates(raw, roof, peaks)
        seconds = self.seconds
        if seconds is None:
            seconds = self.seconds = _NO_REGIME_SECONDS
            self.seconds_shared = True
        regime = raw_at.regime
        if interval is not None:
            if self.seconds_shared:
                seconds = self.seconds = dict(seconds)
                self.seconds_shared = False
            seconds[regime] += interval * time_weight  # type: ignore[index]
            self.integrated += interval * time_weight
            if flop_per_second is not None and self.flops is not None:
                self.flops += flop_per_second * interval
            if bytes_per_second is not None and self.dram_bytes is not None:
                self.dram_bytes += bytes_per_second * interval
        if regime == "compute_bound":  # clock_loss is None for any other regime
            self._count_clock_loss(raw, raw_at, causes, (interval or 0.0) * time_weight)

    def _count_clock_loss(
        self, raw: CounterReading, raw_at: RegimeAt, causes: tuple[str, ...], gpu_seconds: float
    ) -> None:
        """Grow the seconds lost to a reduced clock (clock_events.clock_loss) by a compute-bound
        raw reading's share of these GPU-seconds, split between its causes."""
        loss = clock_events.clock_loss(
            raw_at.regime, raw_at.pipe, raw.clock_ratio, raw.vector_clock_ratio, causes
        )
        if loss is not None:
            self.clock_lost = clock_events.lost_to_clock(self.clock_lost, loss[0], loss[1], gpu_seconds)

    def _work_rates(
        self, raw: CounterReading, roof: Roof | None, peaks: Mapping[str, float]
    ) -> tuple[float | None, float | None]:
        """(FLOP/s, DRAM bytes/s) of the raw reading on `roof`, None where there is no roof or
        nothing to say it; the FLOP and byte counters are born at 0 with their first rate."""
        if roof is None:
            return None, None
        counted = pipe_sums(raw, peaks)[0]  # the F an Estimate reads (counter_position), one pass
        flop_per_second = None if counted is None else counted[0]
        dram = raw.dram_active
        bytes_per_second = None if dram is None else dram * roof.bandwidth_bytes_per_second
        if flop_per_second is not None and self.flops is None:
            self.flops = 0.0
        if bytes_per_second is not None and self.dram_bytes is None:
            self.dram_bytes = 0.0
        return flop_per_second, bytes_per_second


def clock_events_of(values: Mapping[int, float | None]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the clock event reasons of field 112's mask, the causes a verdict names) of a sample;
    neither without field 112 or the power draw (most sources report neither)."""
    mask = values.get(fields.CLOCKS_EVENT_REASONS)
    draw = values.get(fields.POWER_USAGE)
    if mask is None and draw is None:
        return (), ()
    reasons = clock_events.active_reasons(mask)
    return reasons, clock_events.causes_of(reasons, draw, values.get(fields.POWER_MGMT_LIMIT))


def at_reduced_clock(
    call: CounterCall,
    reading: CounterReading,
    profile: CardProfile,
    precision: str | None,
    sm_clock: float | None,
    causes: tuple[str, ...],
) -> CounterCall:
    """A compute-bound call whose binding pipe runs below its peak's clock gets the lever that
    names the cause and what the full clock gives back (clock_events.reduced_clock_lever)."""
    if call.regime != "compute_bound" or call.pipe is None or sm_clock is None or profile.card is None:
        return call
    tensor = call.pipe == "tensor"
    k = reading.clock_ratio if tensor else reading.vector_clock_ratio
    basis = (
        profile.card.peak_clock_mhz(precision) if tensor and precision is not None else profile.vector_clock
    )
    lever = clock_events.fitted_lever(call.regime, call.lever, k, sm_clock, basis, causes)
    return call if lever is call.lever else call._replace(lever=lever)


class Judged(NamedTuple):
    """A smoothed reading as `EntityFold._judge` judged it (its regime, `at`), with what its call
    needs beyond that: built per sample, turned into a CounterCall only when read (`call_of`)."""

    reading: CounterReading
    at: RegimeAt
    thresholds: Thresholds
    mig_instance: bool
    profile: CardProfile
    precision: str | None
    sm_clock: float | None
    causes: tuple[str, ...]


_new_judged = tuple.__new__
"""Judged built without its keyword handling (once a sample)."""


def call_of(judged: Judged) -> CounterCall:
    """The call of a judged reading: judge_counters' lever and missing fields for the regime it
    found, fitted to the precision and to a reduced clock (at_reduced_clock), as `step` had it."""
    profile, precision = judged.profile, judged.precision
    call = counter_call(
        judged.reading,
        judged.thresholds,
        judged.at,
        mig_instance=judged.mig_instance,
        fp64_tensor_faster=profile.fp64_tensor_faster,
        precision=precision,
        precisions=profile.precisions,
    )
    if call.regime == "compute_bound":  # at_reduced_clock keeps any other call as it is
        call = at_reduced_clock(call, judged.reading, profile, precision, judged.sm_clock, judged.causes)
    return call


_UNIT_PEAKS: Mapping[str, float] = MappingProxyType({"tensor": 1.0, "fp64": 1.0, "fp32": 1.0, "fp16": 1.0})
"""The unit roof of an unknown card: regime, position and efficiency do not depend on it."""


def estimate_of(
    profile: CardProfile,
    smoothing: Smoothing,
    call: CounterCall,
    raw_regime: CounterRegime,
    clock_reasons: tuple[str, ...] = (),
    clock_causes: tuple[str, ...] = (),
) -> Estimate:
    """The Estimate of a smoothed reading: its numbers on the roof (roofline.counter_position) and
    its verdicts; the numbers that need a roof are None on an unknown card or profile."""
    smoothed = smoothing.values
    precision, roof, peaks = profile.roof_for(smoothed)
    clocks = profile.clock_ratios(precision, smoothed.get("sm_clock_mhz"))
    reading = reading_of(smoothed, clocks)
    bandwidth = roof.bandwidth_bytes_per_second if roof is not None else 1.0
    at = counter_position(reading, peaks, bandwidth)
    known = roof is not None
    return Estimate(
        card=profile.key,
        precision=precision,
        precision_note=profile.note,
        roof=roof,
        dram_active=reading.dram_active,
        tensor_active=reading.tensor_active,
        flop_utilization=at.flop_utilization,
        clock_ratio=clocks[0],
        vector_clock_ratio=clocks[1],
        gr_engine_active=reading.gr_engine_active,
        gpu_utilization=smoothed.get("gpu_utilization"),
        sm_active=reading.sm_active,
        sm_occupancy=reading.sm_occupancy,
        fp64_active=reading.fp64_active,
        fp32_active=reading.fp32_active,
        fp16_active=reading.fp16_active,
        pipe=call.pipe,
        compute_roof_flop_per_second=at.compute_roof_flop_per_second if known else None,
        intensity_flop_per_byte=at.intensity_flop_per_byte if known else None,
        position=at.position,
        achieved_flop_per_second=at.achieved_flop_per_second if known else None,
        achieved_bandwidth_bytes_per_second=at.achieved_bandwidth_bytes_per_second if known else None,
        attainable_flop_per_second=at.attainable_flop_per_second if known else None,
        fraction_of_peak=at.fraction_of_peak if known else None,
        roofline_efficiency=at.roofline_efficiency,
        regime=smoothing.regime,
        smoothed_regime=call.regime,
        raw_regime=raw_regime,
        lever=smoothing.lever,
        unknown_because=dcgm_names(call.missing),
        gr_engine_contradicted=call.gr_engine_contradicted,
        clock_event_reasons=clock_reasons,
        clock_causes=clock_causes,
        uncounted_pipes=at.uncounted_pipes if known else (),
        link_bytes_per_second=_link_rates(smoothed),
        link_utilization=link_utilizations(links_of(smoothed, *profile.link_walls)),
        link=call.link,
    )


def _link_rates(smoothed: Mapping[str, float]) -> tuple[tuple[str, str, float], ...]:
    """(link, direction, smoothed bytes/s) of each link byte rate present; none without a check
    per rate where no link field is (most sources: dcgm-exporter's defaults have none)."""
    if smoothed.keys().isdisjoint(LINK_FIELDS):
        return ()
    return tuple(
        (link, direction, smoothed[name]) for link, direction, name in LINK_DIRECTIONS if name in smoothed
    )


def links_of(inputs: Mapping[str, float], nvlink_bw: float | None, pcie_bw: float | None) -> LinkLoad | None:
    """Each link's load from these inputs against the per-direction bandwidths (roofline.link_load);
    None without a link figure or a link counter (the verdict is then the ratios' alone)."""
    if nvlink_bw is None and pcie_bw is None:
        return None
    nvlink = pcie = None
    if nvlink_bw is not None:
        nvlink = link_load(
            inputs.get("nvlink_tx_bytes_per_second"), inputs.get("nvlink_rx_bytes_per_second"), nvlink_bw
        )
    if pcie_bw is not None:
        pcie = link_load(
            inputs.get("pcie_tx_bytes_per_second"), inputs.get("pcie_rx_bytes_per_second"), pcie_bw
        )
    return None if nvlink is None and pcie is None else LinkLoad(nvlink, pcie)


def link_utilizations(load: LinkLoad | None) -> tuple[tuple[str, float], ...]:
    """(link, load) for each link that has one, in LINKS order."""
    if load is None:
        return ()
    return tuple((link, value) for link in LINKS if (value := getattr(load, link)) is not None)


def link_bandwidths_of(card: Card, instance: bool) -> Mapping[str, float]:
    """The card's per-direction link bandwidths (bytes/s) where it has a figure; none for a MIG
    instance: DCGM counts the links for the whole GPU, NVLink P2P is unavailable under MIG and the
    PCIe link is shared by every instance (docs/cards.md, "Links: the interconnect wall")."""
    if instance:
        return _NO_LINKS
    found: dict[str, float] = {
        link: bw for link in LINKS if (bw := card.link_bytes_per_second(link)) is not None
    }
    return MappingProxyType(found) if found else _NO_LINKS


_NO_LINKS: Mapping[str, float] = MappingProxyType({})


# --- card constants, computed once per card ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class CardProfile:
    """What `step` needs of a card (or a MIG instance of it), computed once per (card, configured
    precision, MIG profile): the precision, its roof and the card's vector peaks."""

    key: str
    card: Card | None
    precision: str | None
    note: str | None
    roof: Roof | None
    vector_peaks: Mapping[str, float]
    vector_clock: float | None
    """The clock the card's CUDA-core peaks are quoted at (Card.vector_clock_mhz); None: no basis."""
    dominant: bool
    """The tensor pipes may override the precision (no --precision given, a known roof)."""
    fp64_tensor_faster: bool
    precisions: frozenset[str] = frozenset()
    """The card's precisions (the lever names a lower one only where the card has it)."""
    roofs: dict[str | None, tuple[Roof | None, Mapping[str, float]]] = field(
        default_factory=dict, compare=False
    )
    """(roof, pipe peaks) by precision, filled on first use (the dominant tensor pipe may ask for
    another precision)."""
    instance: bool = False
    mig_profile: str | None = None
    link_bandwidths: Mapping[str, float] = field(default_factory=lambda: _NO_LINKS)
    """Per-direction bytes/s of each link with a figure (link_bandwidths_of); empty: no wall."""
    link_walls: tuple[float | None, float | None] = (None, None)
    """(NVLink, PCIe) bytes/s per direction, None without a figure: link_bandwidths, unpacked
    once for the sample loop."""
    link_fields: tuple[tuple[int, str], ...] = ()
    """link_field_names(link_bandwidths): the link fields whose absence the missing family names."""
    live_sms: int | None = None
    """The instance's SM count from the GPU library (Entity.sm_count), over the catalog's."""
    clock_bases: dict[str | None, tuple[float | None, float | None]] = field(
        default_factory=dict, compare=False
    )
    """(tensor, CUDA-core) clock a peak is quoted at by precision, None where known_clock_ratio
    would find none: filled on first use, so a sample's clock ratios are two divisions."""

    def clock_ratios(
        self, precision: str | None, sm_clock: float | None
    ) -> tuple[float | None, float | None]:
        """(tensor k, CUDA-core k) at this SM clock, each against the clock its peak is quoted at
        (roofline.known_clock_ratio); None where the clock, the card or its basis is unknown."""
        if sm_clock is None or self.card is None:
            return None, None
        bases = self.clock_bases.get(precision)
        if bases is None:
            tensor = self.card.peak_clock_mhz(precision) if precision is not None else None
            bases = self.clock_bases[precision] = (_valid_basis(tensor), _valid_basis(self.vector_clock))
        if not (0.0 < sm_clock < math.inf):  # what known_clock_ratio refuses: NaN, <= 0, inf
            return None, None
        tensor_basis, vector_basis = bases  # k = min(1, clock / basis), as known_clock_ratio
        tensor = None if tensor_basis is None else sm_clock / tensor_basis
        vector = None if vector_basis is None else sm_clock / vector_basis
        return (
            tensor if tensor is None or tensor < 1.0 else 1.0,
            vector if vector is None or vector < 1.0 else 1.0,
        )

    def roof_for(self, smoothed: Mapping[str, float]) -> tuple[str | None, Roof | None, Mapping[str, float]]:
        """(precision, roof, pipe peaks) for this sample: the dominant tensor pipe's precision when
        it may choose; the unit peaks without a roof (regime and efficiency do not depend on them)."""
        precision = self.precision
        may_choose = self.dominant and self.card is not None and precision is not None
        if may_choose and not smoothed.keys().isdisjoint(TENSOR_PIPE_FIELDS):
            assert self.card is not None and precision is not None
            precision = dominant_precision(
                precision,
                imma_active=smoothed.get("imma_active"),
                hmma_active=smoothed.get("hmma_active"),
                dfma_active=smoothed.get("dfma_active"),
                available=tuple(self.card.precisions),
            )
        known = self.roofs.get(precision)
        if known is None:
            roof = self.roof
            if precision != self.precision and self.card is not None and precision is not None:
                roof = entity_roof(self.card, precision, self.instance, self.mig_profile, self.live_sms)
            peaks = pipe_peaks(roof, self.vector_peaks) if roof is not None else _UNIT_PEAKS
            known = self.roofs[precision] = (roof, peaks)
        return precision, known[0], known[1]


def _valid_basis(basis_mhz: float | None) -> float | None:
    """A clock basis known_clock_ratio would divide by (finite, > 0), else None."""
    if basis_mhz is None or not math.isfinite(basis_mhz) or basis_mhz <= 0:
        return None
    return basis_mhz


def entity_roof(
    card: Card, precision: str, instance: bool, mig_profile: str | None, live_sms: int | None = None
) -> Roof | None:
    """The roof of a whole card, or of a MIG instance: the card's peak scaled by the instance's
    SMs and its bandwidth by its memory slices (Card.instance_roof: the MIG user guide's slice
    tables, `nvidia-smi mig -lgip`'s SM counts). A MIG instance whose profile is absent, unknown
    to the card or without a published SM count has no roof: it gets ratios and a regime, never
    the whole card's figures. `live_sms` (the library's count) goes before the catalog's."""
    if not instance:
        return card.roof(precision)
    if mig_profile is None:
        return None
    return card.instance_roof(precision, mig_profile, live_sms)


def vector_peaks_of(
    card: Card, instance: bool, mig_profile: str | None, live_sms: int | None = None
) -> Mapping[str, float]:
    """The CUDA-core FP64/FP32/FP16 peaks in FLOP/s where the catalog has them; a MIG instance's
    scaled by its share of the SMs (none without a known profile and SM count, as for its roof)."""
    scale = 1.0
    if instance:
        slices = card.mig_slices(mig_profile, live_sms) if mig_profile is not None else None
        fraction = None if slices is None else slices.sm_fraction
        if fraction is None:
            return MappingProxyType({})
        scale = fraction
    peaks = {pipe: card.vector_peak_flop_per_second(pipe) for pipe in FP_PIPES}
    return MappingProxyType({pipe: peak * scale for pipe, peak in peaks.items() if peak is not None})


_profiles: dict[tuple[str | None, str | None, bool, str | None, int | None], CardProfile] = {}
MAX_PROFILES = 1024
"""Cached profiles at most: a node has a few cards and MIG profiles; a file may name any."""


def card_profile(
    card: Card | None,
    config: InferenceConfig,
    *,
    instance: bool,
    mig_profile: str | None,
    live_sms: int | None = None,
) -> CardProfile:
    """The card's (or one MIG instance's) constants for this configuration, cached by the card's
    identity (Card.identity: its figures, so a --cards override never shares a built-in's)."""
    cache_key = (None if card is None else card.identity, config.precision, instance, mig_profile, live_sms)
    hit = _profiles.get(cache_key)
    if hit is not None:
        return hit
    if card is None:
        profile = CardProfile(
            key=UNKNOWN_CARD,
            card=None,
            precision=config.precision,
            note=None,
            roof=None,
            vector_peaks=MappingProxyType({}),
            vector_clock=None,
            dominant=False,
            fp64_tensor_faster=True,
        )
    else:
        precision, note = precision_on(card, config.precision or DEFAULT_PRECISION)
        roof = entity_roof(card, precision, instance, mig_profile, live_sms)
        profile = CardProfile(
            key=card.key,
            card=card,
            precision=precision,
            note=note,
            roof=roof,
            vector_peaks=vector_peaks_of(card, instance, mig_profile, live_sms),
            vector_clock=card.vector_clock_mhz(),
            dominant=config.precision is None and roof is not None,
            fp64_tensor_faster=fp64_tensor_faster(card.peak_tflops),
            precisions=frozenset(card.precisions),
            roofs={},
            instance=instance,
            mig_profile=mig_profile,
            link_bandwidths=(bandwidths := link_bandwidths_of(card, instance)),
            link_walls=(bandwidths.get("nvlink"), bandwidths.get("pcie")),
            link_fields=link_field_names(bandwidths),
            live_sms=live_sms,
        )
    if len(_profiles) >= MAX_PROFILES:
        _profiles.clear()  # MIG profile names come from the input: a hostile one must not grow this
    _profiles[cache_key] = profile
    return profile
