"""The series the Prometheus input reads, named in one place.

The raw counters are the daemon's own (docs/design.md, "Prometheus metrics"); the recorded ones
are rules/ridgeline-recording.rules.yml's. A rename of either lands here and nowhere else;
tests/test_report_promql.py checks every recorded name below against the rules file.
"""

from __future__ import annotations

from dataclasses import dataclass

RAW_REGIME_SECONDS = "ridgeline_regime_seconds_total"
RAW_FLOP = "ridgeline_flop_total"
RAW_DRAM_BYTES = "ridgeline_dram_bytes_total"
RAW_CLOCK_LOST = "ridgeline_clock_lost_seconds_total"
"""GPU-seconds a reduced clock cost, by `cause`: read raw only (no recording rule sums it; only
GPUs that ever ran compute-bound at a reduced clock have it, so the raw read is cheap)."""

RATE_WINDOW_SECONDS = 300
"""The recorded series are rates over 5 minutes (`:rate5m`); read every 5 minutes and multiplied
by 300 s, consecutive readings tile the range (each counter increment lands in one of them)."""


@dataclass(frozen=True, slots=True)
class RecordedLevel:
    """One aggregation level of the recording rules and the names of its series."""

    name: str
    labels: frozenset[str]
    """The labels the level keeps: a grouping or a matcher on any other label cannot use it."""
    regime_seconds: str
    """GPU-seconds per second in each raw regime (label `regime`)."""
    flop: str
    dram_bytes: str
    gpus: str
    """GPUs per debounced regime and card (labels `regime`, `card`)."""
    allocated_only: bool
    """Every GPU the level counts is held by a workload (so its idle time is idle while allocated)."""
    idle_allocated: str | None = None
    """Idle-while-allocated GPU-seconds per second, on a level that also counts GPUs nobody holds."""
    without_raw_only: bool = False
    """Read only from a server without raw counters (a global one): where they are, the raw
    counters are exact to the scrape, while a level of many short-lived series (HPC jobs, one per
    node each) rounds every series' start and end to its 5-minute rates."""
    held_by: str | None = None
    """On an allocated-only level, the label a GPU it leaves out lacks (`pod`): the raw counters
    without it are those GPUs."""


def _level(
    name: str,
    labels: set[str],
    *,
    allocated_only: bool,
    idle_allocated: bool = False,
    without_raw_only: bool = False,
    held_by: str | None = None,
) -> RecordedLevel:
    """A level's series, named as the recording rules name them: `<level>:<series>:<operation>`."""
    return RecordedLevel(
        name=name,
        labels=frozenset(labels),
        regime_seconds=f"{name}:ridgeline_regime_seconds:rate5m",
        flop=f"{name}:ridgeline_flop:rate5m",
        dram_bytes=f"{name}:ridgeline_dram_bytes:rate5m",
        gpus=f"{name}:ridgeline_gpus:count",
        allocated_only=allocated_only,
        idle_allocated=f"{name}:ridgeline_idle_allocated_seconds:rate5m" if idle_allocated else None,
        without_raw_only=without_raw_only,
        held_by=held_by,
    )


NAMESPACE_POD = _level("namespace_pod", {"cluster", "namespace", "pod"}, allocated_only=True, held_by="pod")
INSTANCE = _level(
    "instance", {"cluster", "job", "instance", "node"}, allocated_only=False, idle_allocated=True
)
HPC_JOB = _level(
    "hpc_job", {"cluster", "hpc_job"}, allocated_only=True, without_raw_only=True, held_by="hpc_job"
)
CLUSTER = _level("cluster", {"cluster"}, allocated_only=False, idle_allocated=True)

GROUP_LEVELS: tuple[RecordedLevel, ...] = (CLUSTER, NAMESPACE_POD, INSTANCE, HPC_JOB)
"""Levels a grouping may be read from, tried in this order (`--by cluster` from the complete
cluster level, not from the pods)."""
LEVELS: tuple[RecordedLevel, ...] = (NAMESPACE_POD, INSTANCE, HPC_JOB, CLUSTER)


def recorded_names() -> list[str]:
    """Every recorded series name the report reads."""
    return [
        name
        for level in LEVELS
        for name in (level.regime_seconds, level.flop, level.dram_bytes, level.gpus, level.idle_allocated)
        if name is not None
    ]
