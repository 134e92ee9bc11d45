"""Inference: one GPU's samples into smoothed ratios, a debounced regime and integrated totals.

Pure (roofline, catalog types, fields and the sample record only), so every rule here is tested
with synthetic samples and explicit timestamps — no clock, no thread, no GPU library.

Per sample (docs/design.md, "The model", counter form):

* The raw reading is DRAM_ACTIVE (1005) and PIPE_TENSOR_ACTIVE (1004) plus whatever optional
  fields the source has. A blank DRAM or tensor value means there is no reading: the GPU gets no
  derived values at all (never a 0), and its smoothing and debouncing restart.
* Inputs are smoothed exponentially with time constant tau: alpha = 1 - exp(-dt / tau), which is
  exact for uneven dt (a sample 3 s after the last weighs as three 1 s samples would).
* The exported regime is debounced: the regime of the smoothed reading must hold continuously for
  `dwell_seconds` before it replaces the exported one (the first reading sets it at once).
* Time in regime, FLOPs and DRAM bytes integrate the *raw* per-sample values over each sample's
  own interval (DCGM counters are averages over the interval that ends at the sample), so their
  fractions are exact: regime seconds += dt, FLOPs += t·k·P·dt, bytes += d·B·dt. Intervals that
  do not describe one contiguous measurement are not integrated (see `integration_cap`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from exporter import fields
from exporter.catalog import Card
from exporter.roofline import (
    REGIMES,
    CounterRegime,
    Roof,
    Thresholds,
    counter_position,
    counter_regime_values,
    dominant_precision,
)
from exporter.sample import Entity, Sample

log = logging.getLogger(__name__)

UNKNOWN_CARD = "unknown"
"""The `card` label of a GPU whose model the catalog does not know."""

DEFAULT_PRECISION = "bf16"

RECENT_INTERVALS = 8
"""How many recent sample intervals judge what a "normal" interval is for the integration cap."""

# Smoothed inputs, keyed by short names; the optional ones are absent when not reported.
_OPTIONAL_RATIOS: tuple[tuple[str, int], ...] = (
    ("gr_engine_active", fields.GR_ENGINE_ACTIVE),
    ("sm_active", fields.SM_ACTIVE),
    ("sm_occupancy", fields.SM_OCCUPANCY),
    ("fp64_active", fields.PIPE_FP64_ACTIVE),
    ("fp32_active", fields.PIPE_FP32_ACTIVE),
    ("fp16_active", fields.PIPE_FP16_ACTIVE),
    ("imma_active", fields.PIPE_TENSOR_IMMA_ACTIVE),
    ("hmma_active", fields.PIPE_TENSOR_HMMA_ACTIVE),
    ("dfma_active", fields.PIPE_TENSOR_DFMA_ACTIVE),
)

_OPTIONAL_INDEXED: tuple[tuple[int, str, int], ...] = tuple(
    (i, name, fid) for i, (name, fid) in enumerate(_OPTIONAL_RATIOS)
)
assert [name for name, _ in _OPTIONAL_RATIOS[:6]] == [
    "gr_engine_active", "sm_active", "sm_occupancy", "fp64_active", "fp32_active", "fp16_active",
]  # fmt: skip

_warned_models: set[str] = set()


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


# The per-sample results below are NamedTuples, not frozen dataclasses: `step` builds several
# per GPU per sample, and a NamedTuple is built with one tuple allocation, where a frozen
# dataclass's __init__ pays an object.__setattr__ per field (about 4 us for an Estimate).
# They are just as immutable; `_replace` makes a changed copy.


class Totals(NamedTuple):
    """Counters that only grow: seconds per raw regime, estimated FLOPs and DRAM bytes.

    Kept per GPU across dropouts and source reconnects, so a counter never goes backwards.
    `flop_total`/`dram_bytes_total` grow only while the card (hence P and B) is known.
    """

    regime_seconds: Mapping[str, float] = _NO_REGIME_SECONDS
    flop_total: float = 0.0
    dram_bytes_total: float = 0.0
    integrated_seconds: float = 0.0
    has_roof_totals: bool = False
    """True once FLOPs/bytes have been integrated at least once (known card): export them then."""


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
    dram_active: float
    tensor_active: float
    flop_utilization: float
    clock_ratio: float
    gr_engine_active: float | None
    gpu_utilization: float | None
    sm_active: float | None
    sm_occupancy: float | None
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


class EntityInference(NamedTuple):
    """Everything known about one GPU after its latest sample; replaced whole on each sample."""

    entity: Entity
    timestamp: float
    """The latest sample's timestamp (seconds since the epoch, the source's clock)."""
    estimate: Estimate | None
    """None while DRAM_ACTIVE or PIPE_TENSOR_ACTIVE is blank: no derived series at all."""
    smoothing: Smoothing | None
    totals: Totals
    recent_intervals: tuple[float, ...] = ()
    missing_fields: tuple[str, ...] = ()
    """Why `estimate` is None: the required fields that were blank or absent."""
    card_key: str | None = None
    """The catalog key (or "unknown"), known even while `estimate` is None, so that a blank
    reading does not change the `card` label of the GPU's counters."""


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
    """The longest interval still integrated: gap_factor × max(expected, shortest recent interval).

    The shortest recent interval (not the mean) is used so that one long gap does not widen the
    cap for the next gap, while a source that legitimately samples slower than `--interval`
    (a replay recorded every 10 s) is still integrated.
    """
    typical = min(recent) if recent else config.expected_interval_seconds
    return config.gap_factor * max(config.expected_interval_seconds, typical)


def _clamped(value: float) -> float:
    """min(1.0, max(0.0, float(value))): any zero (0, -0.0, False) becomes +0.0, as max() makes it."""
    if value == 0:
        return 0.0
    return min(1.0, max(0.0, float(value)))


def _debounce(
    previous: Smoothing | None, smoothed_regime: CounterRegime, lever: str, timestamp: float, dwell: float
) -> tuple[CounterRegime, str, CounterRegime | None, float | None]:
    """(exported regime, its lever, pending regime, pending since) after this sample."""
    if previous is None:
        return smoothed_regime, lever, None, None
    if smoothed_regime == previous.regime:
        return smoothed_regime, lever, None, None
    since = previous.pending_since
    if previous.pending_regime != smoothed_regime or since is None:
        since = timestamp
    if timestamp - since >= dwell:
        return smoothed_regime, lever, None, None
    return previous.regime, previous.lever, smoothed_regime, since


def note_unknown_model(model: str) -> None:
    """Log once per model name that the catalog lacks it (the GPU is still served, card="unknown")."""
    if model not in _warned_models:
        _warned_models.add(model)
        log.warning(
            "GPU model %r is not in the card catalog: exporting its ratios and regime with "
            'card="unknown" and no roof (add it with --cards FILE)',
            model,
        )


def step(
    previous: EntityInference | None,
    sample: Sample,
    card: Card | None,
    config: InferenceConfig,
    *,
    totals: Totals | None = None,
    integrate: bool = True,
) -> EntityInference:
    """Fold one sample into a GPU's state.

    previous: this GPU's state after its last sample (None for a GPU seen for the first time or
    returning after it was dropped). totals: counters to continue from when `previous` is None.
    integrate=False skips integrating this sample's interval (the sampler says so after the GPU
    missed a batch: the interval then spans a dropout).

    This runs once per GPU per sample (hundreds of thousands of times a second for a replay at
    --speed max), so it works on plain floats: the ratios are clamped here, so the regime rules
    run without building and re-validating `CounterReading`s, and card constants are computed
    once per card.
    """
    timestamp = sample.timestamp
    prior: Smoothing | None
    dt: float | None
    if previous is not None:
        if timestamp <= previous.timestamp:
            return previous  # duplicate or out-of-order: the interval was already accounted for
        base_totals = previous.totals
        dt = timestamp - previous.timestamp
        recent = previous.recent_intervals
        recent = (*recent[1:], dt) if len(recent) >= RECENT_INTERVALS else (*recent, dt)
        prior = previous.smoothing
    else:
        base_totals = totals or Totals()
        dt = None
        recent = ()
        prior = None

    values = sample.values
    dram = values.get(fields.DRAM_ACTIVE)
    tensor = values.get(fields.PIPE_TENSOR_ACTIVE)
    if dram is None or tensor is None:
        missing = [
            fields.field_name(fid)
            for fid, v in ((fields.DRAM_ACTIVE, dram), (fields.PIPE_TENSOR_ACTIVE, tensor))
            if v is None
        ]
        return EntityInference(
            entity=sample.entity,
            timestamp=timestamp,
            estimate=None,
            smoothing=None,
            totals=base_totals,
            recent_intervals=recent,
            missing_fields=tuple(missing),
            card_key=_card_profile(card, config).key,
        )

    profile = _card_profile(card, config)
    # The raw reading, clamped to [0, 1] as floats (a float in (0, 1] already is; 0 and -0.0 take
    # the slow path so that a zero stays +0.0, as max(0.0, x) makes it), smoothed in the same
    # pass. The smoothed dict keeps the order dram, tensor, clock ratio, t·k, optionals, GPU_UTIL.
    d = dram if dram.__class__ is float and 0.0 < dram <= 1.0 else min(1.0, max(0.0, float(dram)))
    t = tensor if tensor.__class__ is float and 0.0 < tensor <= 1.0 else min(1.0, max(0.0, float(tensor)))
    max_clock = profile.max_clock
    k = 1.0
    if max_clock is not None:
        clock = values.get(fields.SM_CLOCK)
        if clock is not None and 0.0 < clock < math.inf:  # clock_ratio(), inlined
            k = min(1.0, clock / max_clock)
    tk = t * k
    optional: list[float | None] = [None] * len(_OPTIONAL_RATIOS)
    if prior is None:
        smoothed = {"dram_active": d, "tensor_active": t, "clock_ratio": k, "flop_utilization": tk}
        for i, name, fid in _OPTIONAL_INDEXED:
            v = values.get(fid)
            if v is not None:
                x = v if v.__class__ is float and 0.0 < v <= 1.0 else _clamped(v)
                optional[i] = smoothed[name] = x
        util = values.get(fields.GPU_UTIL)
        if util is not None:
            smoothed["gpu_utilization"] = min(1.0, max(0.0, float(util / 100.0)))  # a percentage
    else:
        if dt is None or config.smoothing_seconds == 0:
            alpha = 1.0
        else:
            alpha = -math.expm1(-dt / config.smoothing_seconds)
        before = prior.values.get
        smoothed = {}
        s = before("dram_active")
        smoothed["dram_active"] = d if s is None else s + alpha * (d - s)
        s = before("tensor_active")
        smoothed["tensor_active"] = t if s is None else s + alpha * (t - s)
        s = before("clock_ratio")
        smoothed["clock_ratio"] = k if s is None else s + alpha * (k - s)
        s = before("flop_utilization")
        smoothed["flop_utilization"] = tk if s is None else s + alpha * (tk - s)
        for i, name, fid in _OPTIONAL_INDEXED:
            v = values.get(fid)
            if v is not None:
                x = v if v.__class__ is float and 0.0 < v <= 1.0 else _clamped(v)
                optional[i] = x
                s = before(name)
                smoothed[name] = x if s is None else s + alpha * (x - s)
        util = values.get(fields.GPU_UTIL)
        if util is not None:
            x = min(1.0, max(0.0, float(util / 100.0)))  # DCGM GPU_UTIL is a percentage
            s = before("gpu_utilization")
            smoothed["gpu_utilization"] = x if s is None else s + alpha * (x - s)

    precision = profile.precision
    roof = profile.roof
    if profile.dominant and (
        "hmma_active" in smoothed or "imma_active" in smoothed or "dfma_active" in smoothed
    ):
        assert card is not None and precision is not None
        precision = dominant_precision(
            precision,
            imma_active=smoothed.get("imma_active"),
            hmma_active=smoothed.get("hmma_active"),
            dfma_active=smoothed.get("dfma_active"),
            available=profile.available,
        )
        roof = _card_roof(card, precision)
    if roof is not None:
        peak, bandwidth = roof.peak_flop_per_second, roof.bandwidth_bytes_per_second
    else:
        peak = bandwidth = 1.0  # the unit roof: regime and efficiency do not depend on it

    thresholds = config.thresholds
    gr, sm, occ, fp64, fp32, fp16 = optional[:6]  # the order of _OPTIONAL_RATIOS
    raw_regime, _ = counter_regime_values(d, t, tk, gr, sm, occ, fp64, fp32, fp16, thresholds)
    s_tensor = smoothed["tensor_active"]
    s_k = smoothed["flop_utilization"] / s_tensor if s_tensor > 1e-12 else smoothed["clock_ratio"]
    s_k = min(1.0, max(s_k, 1e-9))
    s_dram = smoothed["dram_active"]
    s_util = s_tensor * s_k
    s_get = smoothed.get
    s_gr = s_get("gr_engine_active")
    s_sm = s_get("sm_active")
    s_occ = s_get("sm_occupancy")
    smoothed_regime, smoothed_lever = counter_regime_values(
        s_dram, s_tensor, s_util, s_gr, s_sm, s_occ,
        s_get("fp64_active"), s_get("fp32_active"), s_get("fp16_active"), thresholds,
    )  # fmt: skip
    at = counter_position(peak, bandwidth, s_dram, s_util)

    regime, lever, pending, since = _debounce(
        prior, smoothed_regime, smoothed_lever, timestamp, config.dwell_seconds
    )

    new_totals = base_totals
    if (
        integrate
        and dt is not None
        and dt <= config.gap_factor * max(config.expected_interval_seconds, min(recent))
    ):  # integration_cap(config, recent), inlined; recent holds dt
        so_far = base_totals.regime_seconds
        seconds = so_far.copy() if so_far.__class__ is MappingProxyType else dict(so_far)
        seconds[raw_regime] += dt
        if roof is not None:
            # t·k·P·dt and d·B·dt, exactly as classify_counters computes the achieved rates
            flop_total = base_totals.flop_total + tk * peak * dt
            dram_bytes_total = base_totals.dram_bytes_total + d * bandwidth * dt
        else:
            flop_total = base_totals.flop_total + 0.0
            dram_bytes_total = base_totals.dram_bytes_total + 0.0
        new_totals = Totals(
            regime_seconds=MappingProxyType(seconds),
            flop_total=flop_total,
            dram_bytes_total=dram_bytes_total,
            integrated_seconds=base_totals.integrated_seconds + dt,
            has_roof_totals=base_totals.has_roof_totals or roof is not None,
        )

    known = roof is not None
    estimate = Estimate(
        card=profile.key,
        precision=precision,
        precision_note=profile.note,
        roof=roof,
        dram_active=s_dram,
        tensor_active=s_tensor,
        flop_utilization=smoothed["flop_utilization"],
        clock_ratio=s_k,
        gr_engine_active=s_gr,
        gpu_utilization=s_get("gpu_utilization"),
        sm_active=s_sm,
        sm_occupancy=s_occ,
        intensity_flop_per_byte=at.intensity_flop_per_byte if known else None,
        position=at.position,
        achieved_flop_per_second=at.achieved_flop_per_second if known else None,
        achieved_bandwidth_bytes_per_second=at.achieved_bandwidth_bytes_per_second if known else None,
        attainable_flop_per_second=at.attainable_flop_per_second if known else None,
        fraction_of_peak=at.fraction_of_peak if known else None,
        roofline_efficiency=at.roofline_efficiency,
        regime=regime,
        smoothed_regime=smoothed_regime,
        raw_regime=raw_regime,
        lever=lever,
    )
    return EntityInference(
        entity=sample.entity,
        timestamp=timestamp,
        estimate=estimate,
        smoothing=Smoothing(
            values=smoothed, regime=regime, lever=lever, pending_regime=pending, pending_since=since
        ),
        totals=new_totals,
        recent_intervals=recent,
        missing_fields=(),
        card_key=profile.key,
    )


@dataclass(frozen=True, slots=True)
class _CardProfile:
    """What `step` needs of a card, computed once per (card, configured precision)."""

    key: str
    precision: str | None
    note: str | None
    roof: Roof | None
    available: tuple[str, ...]
    max_clock: float | None
    dominant: bool
    """The tensor pipes may override the precision (no --precision given, a known card)."""


_profiles: dict[tuple[int, str | None], tuple[Card | None, _CardProfile]] = {}
_roofs: dict[tuple[int, str], tuple[Card, Roof]] = {}
_last_profile: tuple[Card | None, str | None, _CardProfile] = (
    None,
    None,
    _CardProfile(
        key=UNKNOWN_CARD, precision=None, note=None, roof=None, available=(), max_clock=None, dominant=False
    ),
)


def _card_profile(card: Card | None, config: InferenceConfig) -> _CardProfile:
    """The card's constants for this configuration, cached by card identity.

    The cache keeps a reference to the card, so an id is never reused while its entry lives;
    catalogs are small and long-lived, so the cache stays small.
    """
    last = _last_profile
    if last[0] is card and last[1] == config.precision:
        return last[2]
    cache_key = (id(card), config.precision)
    hit = _profiles.get(cache_key)
    if hit is not None and hit[0] is card:
        _remember_profile(card, config.precision, hit[1])
        return hit[1]
    if card is None:
        profile = _CardProfile(
            key=UNKNOWN_CARD,
            precision=config.precision,
            note=None,
            roof=None,
            available=(),
            max_clock=None,
            dominant=False,
        )
    else:
        precision, note = precision_on(card, config.precision or DEFAULT_PRECISION)
        profile = _CardProfile(
            key=card.key,
            precision=precision,
            note=note,
            roof=_card_roof(card, precision),
            available=tuple(card.precisions),
            max_clock=card.max_sm_clock_mhz if card.max_sm_clock_mhz and card.max_sm_clock_mhz > 0 else None,
            dominant=config.precision is None,
        )
    _profiles[cache_key] = (card, profile)
    _remember_profile(card, config.precision, profile)
    return profile


def _remember_profile(card: Card | None, precision: str | None, profile: _CardProfile) -> None:
    """One-entry cache in front of _profiles: a node's GPUs are nearly always one model."""
    global _last_profile
    _last_profile = (card, precision, profile)


def _card_roof(card: Card, precision: str) -> Roof:
    """card.roof(precision), built once per card and precision."""
    cache_key = (id(card), precision)
    hit = _roofs.get(cache_key)
    if hit is not None and hit[0] is card:
        return hit[1]
    roof = card.roof(precision)
    _roofs[cache_key] = (card, roof)
    return roof
