"""Inference: one GPU's samples into smoothed ratios, a debounced regime and integrated totals.

Pure (roofline, catalog types, fields and the sample record only), so every rule here is tested
with synthetic samples and explicit timestamps — no clock, no thread, no GPU library.

Per sample (DESIGN.md, "The model", counter form):

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

from exporter import fields
from exporter.catalog import Card
from exporter.roofline import (
    REGIMES,
    CounterReading,
    CounterRegime,
    Roof,
    Thresholds,
    classify_counters,
    clock_ratio,
    dominant_precision,
)
from exporter.sample import Entity, Sample

log = logging.getLogger(__name__)

UNKNOWN_CARD = "unknown"
"""The `card` label of a GPU whose model the catalog does not know."""

FALLBACK_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp32")
"""Tried in order when the configured precision is missing on a card (V100/T4 have no bf16)."""

DEFAULT_PRECISION = "bf16"

RECENT_INTERVALS = 8
"""How many recent sample intervals judge what a "normal" interval is for the integration cap."""

_UNIT_ROOF = Roof(1.0, 1.0)
"""Regime and efficiency do not depend on the roof (efficiency = max(t·k, d)); for a card the
catalog does not know, they are computed on this unit roof and nothing roof-dependent is kept."""

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


@dataclass(frozen=True, slots=True)
class Totals:
    """Counters that only grow: seconds per raw regime, estimated FLOPs and DRAM bytes.

    Kept per GPU across dropouts and source reconnects, so a counter never goes backwards.
    `flop_total`/`dram_bytes_total` grow only while the card (hence P and B) is known.
    """

    regime_seconds: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(dict.fromkeys(REGIMES, 0.0))
    )
    flop_total: float = 0.0
    dram_bytes_total: float = 0.0
    integrated_seconds: float = 0.0
    has_roof_totals: bool = False
    """True once FLOPs/bytes have been integrated at least once (known card): export them then."""


@dataclass(frozen=True, slots=True)
class Smoothing:
    """What the next sample needs: the smoothed inputs and the debouncer's state."""

    values: Mapping[str, float]
    regime: CounterRegime
    """The debounced (exported) regime."""
    lever: str
    pending_regime: CounterRegime | None = None
    pending_since: float | None = None
    """Timestamp of the first sample whose smoothed regime was `pending_regime`."""


@dataclass(frozen=True, slots=True)
class Estimate:
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


@dataclass(frozen=True, slots=True)
class EntityInference:
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


def resolve_precision(card: Card, wanted: str) -> tuple[str, str | None]:
    """The precision to use on `card` and, when it differs from `wanted`, a note saying why."""
    available = card.precisions
    if wanted in available:
        return wanted, None
    for candidate in (*FALLBACK_PRECISIONS, *available):
        if candidate in available:
            return candidate, f"card {card.key} has no {wanted} peak; using {candidate}"
    raise AssertionError("a catalog card always has at least one peak")  # pragma: no cover


def integration_cap(config: InferenceConfig, recent: tuple[float, ...]) -> float:
    """The longest interval still integrated: gap_factor × max(expected, shortest recent interval).

    The shortest recent interval (not the mean) is used so that one long gap does not widen the
    cap for the next gap, while a source that legitimately samples slower than `--interval`
    (a replay recorded every 10 s) is still integrated.
    """
    typical = min(recent) if recent else config.expected_interval_seconds
    return config.gap_factor * max(config.expected_interval_seconds, typical)


def _reading_from(values: Mapping[str, float], k: float) -> CounterReading:
    return CounterReading(
        dram_active=values["dram_active"],
        tensor_active=values["tensor_active"],
        gr_engine_active=values.get("gr_engine_active"),
        sm_active=values.get("sm_active"),
        sm_occupancy=values.get("sm_occupancy"),
        fp64_active=values.get("fp64_active"),
        fp32_active=values.get("fp32_active"),
        fp16_active=values.get("fp16_active"),
        clock_ratio=k,
    )


def _raw_inputs(sample: Sample, card: Card | None) -> tuple[dict[str, float] | None, list[str]]:
    """The sample's ratios by short name, or None (with the missing names) without d and t."""
    values = sample.values
    dram = values.get(fields.DRAM_ACTIVE)
    tensor = values.get(fields.PIPE_TENSOR_ACTIVE)
    missing = [
        fields.field_name(fid)
        for fid, v in ((fields.DRAM_ACTIVE, dram), (fields.PIPE_TENSOR_ACTIVE, tensor))
        if v is None
    ]
    if dram is None or tensor is None:
        return None, missing
    max_clock = card.max_sm_clock_mhz if card is not None else None
    k = clock_ratio(values.get(fields.SM_CLOCK), max_clock)
    raw: dict[str, float] = {
        "dram_active": _ratio(dram),
        "tensor_active": _ratio(tensor),
        "clock_ratio": k,
    }
    raw["flop_utilization"] = raw["tensor_active"] * k
    for name, fid in _OPTIONAL_RATIOS:
        v = values.get(fid)
        if v is not None:
            raw[name] = _ratio(v)
    util = values.get(fields.GPU_UTIL)
    if util is not None:
        raw["gpu_utilization"] = _ratio(util / 100.0)  # DCGM GPU_UTIL is a percentage
    return raw, []


def _ratio(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


def _smooth(previous: Mapping[str, float] | None, raw: Mapping[str, float], alpha: float) -> dict[str, float]:
    """s += alpha · (x - s) per input; an input absent now is dropped, a new one starts at x."""
    if previous is None:
        return dict(raw)
    smoothed: dict[str, float] = {}
    for name, x in raw.items():
        s = previous.get(name)
        smoothed[name] = x if s is None else s + alpha * (x - s)
    return smoothed


def _precision_for(
    card: Card | None, config: InferenceConfig, smoothed: Mapping[str, float]
) -> tuple[str | None, str | None]:
    if card is None:
        return config.precision, None
    wanted = config.precision or DEFAULT_PRECISION
    precision, note = resolve_precision(card, wanted)
    if config.precision is None:
        precision = dominant_precision(
            precision,
            imma_active=smoothed.get("imma_active"),
            hmma_active=smoothed.get("hmma_active"),
            dfma_active=smoothed.get("dfma_active"),
            available=card.precisions,
        )
    return precision, note


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
    """
    base_totals = previous.totals if previous is not None else (totals or Totals())
    if previous is not None and sample.timestamp <= previous.timestamp:
        return previous  # duplicate or out-of-order: the interval was already accounted for
    dt = sample.timestamp - previous.timestamp if previous is not None else None
    recent = previous.recent_intervals if previous is not None else ()
    if dt is not None:
        recent = (*recent, dt)[-RECENT_INTERVALS:]

    raw, missing = _raw_inputs(sample, card)
    if raw is None:
        return EntityInference(
            entity=sample.entity,
            timestamp=sample.timestamp,
            estimate=None,
            smoothing=None,
            totals=base_totals,
            recent_intervals=recent,
            missing_fields=tuple(missing),
        )

    prior = previous.smoothing if previous is not None else None
    if prior is None or dt is None or config.smoothing_seconds == 0:
        alpha = 1.0
    else:
        alpha = -math.expm1(-dt / config.smoothing_seconds)
    smoothed = _smooth(prior.values if prior is not None else None, raw, alpha)

    precision, note = _precision_for(card, config, smoothed)
    roof = card.roof(precision) if card is not None and precision is not None else None
    on_roof = roof if roof is not None else _UNIT_ROOF

    raw_verdict = classify_counters(on_roof, _reading_from(raw, raw["clock_ratio"]), config.thresholds)
    s_tensor = smoothed["tensor_active"]
    s_k = smoothed["flop_utilization"] / s_tensor if s_tensor > 1e-12 else smoothed["clock_ratio"]
    s_k = min(1.0, max(s_k, 1e-9))
    verdict = classify_counters(on_roof, _reading_from(smoothed, s_k), config.thresholds)

    regime, lever, pending, since = _debounce(
        prior, verdict.regime, verdict.lever, sample.timestamp, config.dwell_seconds
    )

    new_totals = base_totals
    if integrate and dt is not None and dt <= integration_cap(config, recent):
        seconds = dict(base_totals.regime_seconds)
        seconds[raw_verdict.regime] += dt
        new_totals = Totals(
            regime_seconds=MappingProxyType(seconds),
            flop_total=base_totals.flop_total + (raw_verdict.achieved_flop_per_second * dt if roof else 0.0),
            dram_bytes_total=base_totals.dram_bytes_total
            + (raw_verdict.achieved_bandwidth_bytes_per_second * dt if roof else 0.0),
            integrated_seconds=base_totals.integrated_seconds + dt,
            has_roof_totals=base_totals.has_roof_totals or roof is not None,
        )

    estimate = Estimate(
        card=card.key if card is not None else UNKNOWN_CARD,
        precision=precision,
        precision_note=note,
        roof=roof,
        dram_active=smoothed["dram_active"],
        tensor_active=s_tensor,
        flop_utilization=smoothed["flop_utilization"],
        clock_ratio=s_k,
        gr_engine_active=smoothed.get("gr_engine_active"),
        gpu_utilization=smoothed.get("gpu_utilization"),
        sm_active=smoothed.get("sm_active"),
        sm_occupancy=smoothed.get("sm_occupancy"),
        intensity_flop_per_byte=verdict.intensity_flop_per_byte if roof else None,
        position=verdict.position,
        achieved_flop_per_second=verdict.achieved_flop_per_second if roof else None,
        achieved_bandwidth_bytes_per_second=verdict.achieved_bandwidth_bytes_per_second if roof else None,
        attainable_flop_per_second=verdict.attainable_flop_per_second if roof else None,
        fraction_of_peak=verdict.fraction_of_peak if roof else None,
        roofline_efficiency=verdict.roofline_efficiency,
        regime=regime,
        smoothed_regime=verdict.regime,
        raw_regime=raw_verdict.regime,
        lever=lever,
    )
    return EntityInference(
        entity=sample.entity,
        timestamp=sample.timestamp,
        estimate=estimate,
        smoothing=Smoothing(
            values=smoothed, regime=regime, lever=lever, pending_regime=pending, pending_since=since
        ),
        totals=new_totals,
        recent_intervals=recent,
    )

