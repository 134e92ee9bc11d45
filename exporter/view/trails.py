"""Each GPU's trail on its roofline: where it sat over the last few minutes, bounded.

The sampler calls `Trails.observe` with every snapshot it publishes (its thread, after the swap),
never a scrape: `/metrics` and `GET /classify` do no more work than before. A point is kept at
most every `step_seconds` of sample time, `points` of them per GPU, and only for GPUs in the
latest snapshot, so memory is bounded by GPUs x points whatever the replay speed. Readers (the
live page, `/roofline.svg`) take `current()`: an immutable mapping swapped whole, so they never see
one half-updated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from exporter.roofline import DRAM_EPSILON, PIPES
from exporter.state import GpuState, Snapshot
from exporter.view.node_view import trail_key
from exporter.view.roofline_chart import TrailPoint

TRAIL_POINTS = 36
TRAIL_STEP_SECONDS = 5.0
"""36 points 5 s apart: the last three minutes of sample time."""


class _Entry(NamedTuple):
    last_timestamp: float
    points: tuple[TrailPoint, ...]


_EMPTY: Mapping[str, tuple[TrailPoint, ...]] = MappingProxyType({})
_PIPE_NAMES: tuple[str, ...] = tuple(f"{pipe}_active" for pipe in PIPES)


def nothing_to_plot(gpu: GpuState) -> bool:
    """True when `gpu`'s Estimate, were it derived, could place no point: no reading, no roof (an
    unknown card, a MIG instance without a profile), DRAM at rest (intensity undefined below
    DRAM_EPSILON: an idle GPU) or no compute pipe busy (no FLOP/s). Read from the smoothed inputs
    and the card profile, which cost a lookup; False says only that the Estimate must be read."""
    inference = gpu.inference
    smoothing, profile = inference.smoothing, inference.profile
    if smoothing is None or profile is None or inference.call is None or inference.raw_regime is None:
        return True  # EntityInference.estimate is None
    if profile.roof is None:  # no roof: intensity and FLOP/s are None (CardProfile.roof_for)
        return True
    values = smoothing.values
    dram = values.get("dram_active")
    if dram is None or dram < DRAM_EPSILON:  # counter_position leaves the intensity undefined
        return True
    return not any(values.get(name) for name in _PIPE_NAMES)  # every pipe at 0 or absent: F = 0


class Trails:
    """A small ring of past positions per GPU, fed from published snapshots."""

    def __init__(self, points: int = TRAIL_POINTS, step_seconds: float = TRAIL_STEP_SECONDS) -> None:
        if points < 1 or not (math.isfinite(step_seconds) and step_seconds > 0):
            raise ValueError(f"a trail needs points >= 1 and step_seconds > 0, got {points}, {step_seconds}")
        self._points = points
        self._step = step_seconds
        self._entries: dict[str, _Entry] = {}
        self._generation = -1
        self._view: Mapping[str, tuple[TrailPoint, ...]] = _EMPTY

    def current(self) -> Mapping[str, tuple[TrailPoint, ...]]:
        """Trail points per GPU (exporter.view.node_view.trail_key), oldest first."""
        return self._view

    def observe(self, snapshot: Snapshot) -> None:
        """Take in one published snapshot: O(GPUs), and nothing at all for one already seen."""
        if snapshot.generation == self._generation:
            return
        self._generation = snapshot.generation
        entries = self._entries
        present: set[str] = set()
        changed = False
        for gpu in snapshot.gpus:
            key = trail_key(gpu.entity.uuid, gpu.entity.gpu_instance)
            present.add(key)
            timestamp = gpu.last_sample_timestamp
            entry = entries.get(key)
            if entry is not None and 0 <= timestamp - entry.last_timestamp < self._step:
                continue  # before the step is due: the Estimate (derived on read) is not built
            if nothing_to_plot(gpu):
                continue  # idle, no roof, no reading: nor is it built for nothing to place
            estimate = gpu.estimate
            if estimate is None:
                continue
            intensity = estimate.intensity_flop_per_byte
            flops = estimate.achieved_flop_per_second
            if not (intensity and flops and intensity > 0 and flops > 0):
                continue  # idle or no traffic: nothing to place; the trail keeps what it had
            if entry is None or timestamp < entry.last_timestamp:  # new, or a replay looped back
                points: tuple[TrailPoint, ...] = ()
            else:
                points = entry.points[-(self._points - 1) :] if self._points > 1 else ()
            entries[key] = _Entry(timestamp, (*points, TrailPoint(intensity, flops)))
            changed = True
        for key in [k for k in entries if k not in present]:
            del entries[key]
            changed = True
        if changed:
            self._view = MappingProxyType({k: e.points for k, e in entries.items()})
