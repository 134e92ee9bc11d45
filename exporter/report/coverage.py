"""How much of the expected GPU-time a report saw: pure arithmetic over per-unit window readings.

A unit is one scrape target's GPUs; one that reports less in some windows than both before and
after them went unseen there. The envelope, the flagged windows, the runs and the expected
GPU-time are defined once, in docs/report.md's "Coverage".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

UNIT_LABELS: tuple[str, ...] = ("cluster", "shard", "job", "instance", "node")
"""What a unit is keyed by: the node level of the recording rules keeps these (and a global
server adds the shards' external labels)."""

TOLERANCE_INTERVALS = 2.0
"""A unit is flagged when it is short of its envelope by more than this many scrape intervals per
GPU: a label change costs a raw `increase` at most one interval per series, an outage minutes."""

MERGE_WINDOWS = 2
"""Runs fewer windows apart than this are one run, so that runs widened by a window on each side
(to read the raw counters across them) never overlap."""

Key = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Run:
    """Windows [first, last] (indices) in which some unit went unseen, and the units that did."""

    first: int
    last: int
    units: tuple[Key, ...]


def envelope(seen: Sequence[float]) -> list[float]:
    """min(running maximum from the left, running maximum from the right) per window."""
    left: list[float] = []
    best = 0.0
    for value in seen:
        best = max(best, value)
        left.append(best)
    right = [0.0] * len(seen)
    best = 0.0
    for i in range(len(seen) - 1, -1, -1):
        best = max(best, seen[i])
        right[i] = best
    return [min(a, b) for a, b in zip(left, right, strict=True)]


def flagged_windows(seen: Sequence[float], step: float, interval: float) -> list[int]:
    """The windows in which one unit is short of its envelope by more than the tolerance."""
    out = []
    for i, (value, expected) in enumerate(zip(seen, envelope(seen), strict=True)):
        if expected - value > TOLERANCE_INTERVALS * interval * expected / step:
            out.append(i)
    return out


def find_runs(units: Mapping[Key, Sequence[float]], step: float, interval: float) -> list[Run]:
    """The runs of windows in which any unit went unseen (every unit: one reading per window)."""
    by_window: dict[int, list[Key]] = {}
    for key, seen in units.items():
        for i in flagged_windows(seen, step, interval):
            by_window.setdefault(i, []).append(key)
    runs: list[Run] = []
    for i in sorted(by_window):
        if runs and i - runs[-1].last <= MERGE_WINDOWS:
            last = runs[-1]
            runs[-1] = Run(first=last.first, last=i, units=tuple(dict.fromkeys([*last.units, *by_window[i]])))
        else:
            runs.append(Run(first=i, last=i, units=tuple(dict.fromkeys(by_window[i]))))
    return runs


def expected_over(seen: Sequence[float], first: int, last: int) -> float:
    """A unit's expected GPU-seconds over windows first..last: its envelope there."""
    return sum(envelope(seen)[first : last + 1])


def expected_between(before: float | None, after: float | None, windows: int) -> float:
    """A group's expected GPU-seconds over `windows` windows from the windows either side (None:
    outside the range; the other side stands alone)."""
    sides = [s for s in (before, after) if s is not None]
    return min(sides) * windows if sides else 0.0


def missing(expected: float, seen: float, seconds: float, interval: float) -> float:
    """Expected GPU-seconds not seen over `seconds`, once beyond the tolerance (else 0)."""
    short = expected - seen
    return short if short > TOLERANCE_INTERVALS * interval * expected / seconds else 0.0


def unit_name(key: Key) -> str:
    """How a unit is printed: its cluster, shard and node (or instance) where it has them."""
    labels = dict(zip(UNIT_LABELS, key, strict=True))
    parts = [f"{name}={labels[name]}" for name in ("cluster", "shard") if labels.get(name)]
    where = labels.get("node") or labels.get("instance") or labels.get("job")
    if where:
        parts.append(where)
    return " ".join(parts) or "(unlabelled target)"
