"""`ridgeline serve` with a stand-in for a live GPU source: the live budget without a GPU.

Run (bench_steady_state.py does): .venv/bin/python benchmarks/live_standin.py ENTITIES serve ARGS...

A live DCGM or NVML source hands the sampler one batch per `--interval`, built from numbers the
library already holds: no text to parse. A replay file at `--speed 1` paces the same way but
parses each line as its batch falls due, which a live node never pays (at 56 instances and
10 Hz that parse was ~45 % of the Python time). This source stands in for the live one: it is
unpaced (the sampler waits `--interval` between reads, as it does for dcgm and nvml) and each
read builds one `Sample` per entity, stamped with the wall clock, from values prepared before
serving started (bench_metrics.entity_values: the synthetic node the replay-fed rows use too).

Why not the pynvml fake (tests/fakes) through the real nvml source: the fake emulates
libnvidia-ml in Python (ctypes structs, per-call bookkeeping), a cost no node has, and it
would put a test helper into a benchmark's numbers. What this source leaves out is the GPU
library's own call time and the source module's glue around it.

Two kinds: `--source standin` keeps its batches at `--interval` between reads and hands over
every one since the last (`read_batches`), as DCGM does with fields watched at that rate (the
sampler then reads it about once a second); `--source standin-plain` answers one batch per read,
so the sampler reads it every `--interval` (today's dcgm and nvml sources).

Both are registered only in this process (`SOURCE_CLASSES`); the package knows nothing of them.
"""

from __future__ import annotations

import sys
import time

from bench_metrics import entities, entity_values

from exporter import sources
from exporter.sample import Sample
from exporter.sources.base import SourceOptions

VARIANTS = 10
"""entity_values cycles with a period of 10 batches; so do the prepared values."""


class PrebuiltBatches:
    """A live-like source: unpaced, one Sample per entity per read, values prepared in advance."""

    name = "standin"
    paced = False
    records_skipped = 0
    entity_count = 8
    """Set by main() from the command line before serve creates the source."""

    def __init__(self, options: SourceOptions) -> None:
        self._entities = entities(self.entity_count)
        self._values = [
            [entity_values(i, variant) for i in range(len(self._entities))] for variant in range(VARIANTS)
        ]
        self._reads = 0

    def open(self) -> None:
        pass

    def read(self) -> list[Sample]:
        now = time.time()
        values = self._values[self._reads % VARIANTS]
        self._reads += 1
        return [
            Sample(timestamp=now, entity=entity, values=values[i], attribution=attribution)
            for i, (entity, attribution) in enumerate(self._entities)
        ]

    def close(self) -> None:
        pass


class WatchedBatches(PrebuiltBatches):
    """A live-like source that keeps a batch per `--interval` between reads, each stamped at its
    own tick, and hands over every batch since the previous read."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._interval = options.interval_seconds
        self._next_tick = time.time()

    def read_batches(self) -> list[list[Sample]]:
        now = time.time()
        batches = []
        while self._next_tick <= now:
            values = self._values[self._reads % VARIANTS]
            self._reads += 1
            stamp = self._next_tick
            batches.append(
                [
                    Sample(timestamp=stamp, entity=entity, values=values[i], attribution=attribution)
                    for i, (entity, attribution) in enumerate(self._entities)
                ]
            )
            self._next_tick += self._interval
        return batches


class SecondOfBatches(PrebuiltBatches):
    """WatchedBatches without the wall clock, for in-process timing: each read hands over one
    second of batches (`per_read` of them, `--interval` apart on its own clock, `now`)."""

    def __init__(self, options: SourceOptions, per_read: int = 10) -> None:
        super().__init__(options)
        self._interval = options.interval_seconds
        self._per_read = per_read
        self.now = 1_764_432_000.0

    def read_batches(self) -> list[list[Sample]]:
        batches = []
        for _ in range(self._per_read):
            values = self._values[self._reads % VARIANTS]
            self._reads += 1
            self.now += self._interval
            stamp = self.now
            batches.append(
                [
                    Sample(timestamp=stamp, entity=entity, values=values[i], attribution=attribution)
                    for i, (entity, attribution) in enumerate(self._entities)
                ]
            )
        return batches


def main() -> int:
    PrebuiltBatches.entity_count = int(sys.argv.pop(1))
    sources.SOURCE_CLASSES["standin"] = f"{__name__}:WatchedBatches"
    sources.SOURCE_CLASSES["standin-plain"] = f"{__name__}:PrebuiltBatches"
    sources.SOURCE_NAMES = (*sources.SOURCE_NAMES, "standin", "standin-plain")  # before the CLI reads them
    from exporter.cli import main as cli

    return cli(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
