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


NAMESPACE_POD = RecordedLevel(
    name="namespace_pod",
    labels=frozenset({"cluster", "namespace", "pod"}),
    regime_seconds="namespace_pod:ridgeline_regime_seconds:rate5m",
    flop="namespace_pod:ridgeline_flop:rate5m",
    dram_bytes="namespace_pod:ridgeline_dram_bytes:rate5m",
    gpus="namespace_pod:ridgeline_gpus:count",
    allocated_only=True,
    held_by="pod",
)
INSTANCE = RecordedLevel(
    name="instance",
    labels=frozenset({"cluster", "job", "instance", "node"}),
    regime_seconds="instance:ridgeline_regime_seconds:rate5m",
    flop="instance:ridgeline_flop:rate5m",
    dram_bytes="instance:ridgeline_dram_bytes:rate5m",
    gpus="instance:ridgeline_gpus:count",
    allocated_only=False,
    idle_allocated="instance:ridgeline_idle_allocated_seconds:rate5m",
)
HPC_JOB = RecordedLevel(
    name="hpc_job",
    labels=frozenset({"cluster", "hpc_job"}),
    regime_seconds="hpc_job:ridgeline_regime_seconds:rate5m",
    flop="hpc_job:ridgeline_flop:rate5m",
    dram_bytes="hpc_job:ridgeline_dram_bytes:rate5m",
    gpus="hpc_job:ridgeline_gpus:count",
    allocated_only=True,
    without_raw_only=True,
    held_by="hpc_job",
)
CLUSTER = RecordedLevel(
    name="cluster",
    labels=frozenset({"cluster"}),
    regime_seconds="cluster:ridgeline_regime_seconds:rate5m",
    flop="cluster:ridgeline_flop:rate5m",
    dram_bytes="cluster:ridgeline_dram_bytes:rate5m",
    gpus="cluster:ridgeline_gpus:count",
    allocated_only=False,
    idle_allocated="cluster:ridgeline_idle_allocated_seconds:rate5m",
)

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
