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
    """Every GPU the level counts is held by a pod (so its idle time is idle while allocated)."""


NAMESPACE_POD = RecordedLevel(
    name="namespace_pod",
    labels=frozenset({"cluster", "namespace", "pod"}),
    regime_seconds="namespace_pod:ridgeline_regime_seconds:rate5m",
    flop="namespace_pod:ridgeline_flop:rate5m",
    dram_bytes="namespace_pod:ridgeline_dram_bytes:rate5m",
    gpus="namespace_pod:ridgeline_gpus:count",
    allocated_only=True,
)
INSTANCE = RecordedLevel(
    name="instance",
    labels=frozenset({"cluster", "job", "instance", "node"}),
    regime_seconds="instance:ridgeline_regime_seconds:rate5m",
    flop="instance:ridgeline_flop:rate5m",
    dram_bytes="instance:ridgeline_dram_bytes:rate5m",
    gpus="instance:ridgeline_gpus:count",
    allocated_only=False,
)
CLUSTER = RecordedLevel(
    name="cluster",
    labels=frozenset({"cluster"}),
    regime_seconds="cluster:ridgeline_regime_seconds:rate5m",
    flop="cluster:ridgeline_flop:rate5m",
    dram_bytes="cluster:ridgeline_dram_bytes:rate5m",
    gpus="cluster:ridgeline_gpus:count",
    allocated_only=False,
)

HPC_JOB_IDLE_WITHOUT_POD = "hpc_job:ridgeline_idle_seconds_without_pod:rate5m"
"""Idle GPU-seconds per second of GPUs an HPC job holds and no pod does (labels cluster, hpc_job):
idle while allocated, though outside the pod level a pod grouping reads."""

GROUP_LEVELS: tuple[RecordedLevel, ...] = (NAMESPACE_POD, INSTANCE)
"""Levels a grouping may be read from, tried in this order."""
LEVELS: tuple[RecordedLevel, ...] = (NAMESPACE_POD, INSTANCE, CLUSTER)


def recorded_names() -> list[str]:
    """Every recorded series name the report reads."""
    return [
        *(
            name
            for level in LEVELS
            for name in (level.regime_seconds, level.flop, level.dram_bytes, level.gpus)
        ),
        HPC_JOB_IDLE_WITHOUT_POD,
    ]
