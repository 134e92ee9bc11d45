"""The publisher: builds the immutable `Snapshot` from the tracker and the supervisor, swaps it in
(one reference store) and tells the observers (the live view's trails, the report's replay).

Building is on the sampler's hot path, so it reuses what did not change: the GPU order (the
tracker's), the error counts (ErrorCounts' view) and the workloads' records (WorkloadLedger's).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

from exporter import __version__
from exporter.inference import InferenceConfig
from exporter.sample_checks import STALLED_SECONDS
from exporter.sampling.supervisor import SourceSupervisor
from exporter.sampling.tracker import EntityTracker
from exporter.sampling.workloads import WorkloadLedger
from exporter.sources.base import SourceOptions
from exporter.state import Derived, GpuState, Snapshot, SourceHealth

log = logging.getLogger("exporter.sampler")

MIN_FRESHNESS_SECONDS = 5.0
"""/readyz: a batch counts as fresh for max(3 intervals, 5 s) of wall time."""

Observer = Callable[[Snapshot], None]


class Publisher:
    """Holds the current snapshot; `publish` replaces it whole and calls every observer."""

    def __init__(
        self,
        options: SourceOptions,
        config: InferenceConfig,
        *,
        observers: Sequence[Observer] = (),
    ) -> None:
        self._interval = options.interval_seconds
        self._config = config
        self._observers = tuple(observers)
        self._failed_observers: set[int] = set()
        self._freshness = max(3 * options.interval_seconds, MIN_FRESHNESS_SECONDS)
        self.generation = 0
        self.published_at = -math.inf
        """time.monotonic() of the newest publish (none yet: the first batch is published)."""
        self.snapshot: Snapshot = Snapshot(generation=0, source=SourceHealth(name=""))
        self.workloads = WorkloadLedger()

    def build(self, supervisor: SourceSupervisor, tracker: EntityTracker) -> Snapshot:
        """The snapshot of the current state (numbered with the current generation)."""
        health = supervisor.health._replace(
            samples_total=tracker.folds,
            errors_total=supervisor.errors.view(),
            last_sample_wall_time=tracker.last_fold_wall,
            data_advanced_wall_time=tracker.advanced_wall,
        )
        gpus = tuple(
            [
                GpuState(
                    entity=t.state.entity,
                    attribution=t.attribution,
                    inference=t.state,
                    hpc_job=t.hpc_job,
                    mig_parent=t.mig_parent,
                    gpu_share=t.gpu_share,
                    derived=Derived(),
                )
                for t in tracker.ordered()
            ]
        )
        config = self._config
        return Snapshot(
            generation=self.generation,
            source=health,
            gpus=gpus,
            interval_seconds=self._interval,
            smoothing_seconds=config.smoothing_seconds,
            dwell_seconds=config.dwell_seconds,
            freshness_seconds=self._freshness,
            stalled_seconds=max(STALLED_SECONDS, self._freshness),
            version=__version__,
            workloads=self.workloads.update(gpus),
        )

    def start(self, supervisor: SourceSupervisor, tracker: EntityTracker) -> None:
        """The first snapshot (generation 0), before any batch; observers are not told."""
        self.snapshot = self.build(supervisor, tracker)

    def publish(self, supervisor: SourceSupervisor, tracker: EntityTracker) -> Snapshot:
        self.generation += 1
        snapshot = self.snapshot = self.build(supervisor, tracker)
        self.published_at = time.monotonic()
        for index, observe in enumerate(self._observers):
            try:
                observe(snapshot)
            except Exception:  # a view's bug must not stop sampling, nor flood the log
                if index not in self._failed_observers:
                    self._failed_observers.add(index)
                    log.exception("snapshot observer %r failed (logged once)", observe)
        return snapshot
