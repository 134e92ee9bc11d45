#!/usr/bin/env python3
"""CPU of DCGM's `read_batches` at one read a second: the source's own work on what
dcgmGetValuesSince_v2 hands it (the callback's reads of each value, ticks, batches).

The fake bindings (tests/fakes/dcgm) give the values; their cost of building them is taken out by
capturing the arrays once and handing the same ones again on every read, so the figure is the
source's alone. Nodes of 8 GPUs and of 8 GPUs with 7 MIG instances each, at `--interval 0.1`
(ten ticks a read) and `--interval 1` (one); best of several rounds, load average beside it.

    .venv/bin/python benchmarks/bench_dcgm_batches.py [--reads 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FAKE_DIR = ROOT / "tests" / "fakes" / "dcgm"
sys.path.insert(0, str(FAKE_DIR))

import _fake_dcgm_engine as engine_module  # noqa: E402
import dcgm_agent  # noqa: E402
import dcgm_structs  # noqa: E402

from exporter import fields  # noqa: E402
from exporter.sources.base import SourceOptions  # noqa: E402
from exporter.sources.dcgm import WATCHED_FIELDS, DcgmSettings, DcgmSource  # noqa: E402

START = 1_764_633_600_000_000
REAL = dcgm_agent.dcgmGetValuesSince_v2


def values() -> dict[int, float | None]:
    ints = {fields.SM_CLOCK: 1755, fields.GPU_UTIL: 100, fields.CLOCKS_EVENT_REASONS: 0}
    return {f: ints.get(f, 0.5) for f in WATCHED_FIELDS}


def build(gpus: int, instances: int, interval: float) -> tuple[DcgmSource, int]:
    """An opened source over a fake engine that kept one read's ticks; the entities sampled."""
    engine = engine_module.reset()
    for g in range(gpus):
        gpu = engine_module.FakeGpu(g, f"GPU-{g:08d}-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3")
        gpu.values = values()
        gpu.instances = [
            engine_module.FakeInstance(g * instances + i, i + 1, values()) for i in range(instances)
        ]
        engine.gpus.append(gpu)
    source = DcgmSource(SourceOptions(interval_seconds=interval), DcgmSettings(bindings=FAKE_DIR))
    source.open()
    for tick in range(round(1.0 / interval)):
        engine.collect(START + tick * round(interval * 1e6))
    return source, gpus * (1 + instances)


def replaying(source: DcgmSource) -> None:
    """Capture what the fake hands once; every later call hands the same arrays again."""
    calls: list[tuple[int, int, Any, int]] = []
    real = REAL

    def capture(*args: Any) -> int:
        handle, group, field_group, since, callback, user = args

        def keep(g: int, e: int, array: Any, count: int, u: Any) -> int:
            kept = (dcgm_structs.c_dcgmFieldValue_v1 * count)()  # the fake frees its own after the call
            ctypes.memmove(kept, array, ctypes.sizeof(kept))
            calls.append((g, e, kept, count))
            return callback(g, e, array, count, u)

        return int(
            real(handle, group, field_group, since, dcgm_agent.dcgmFieldValueEntityEnumeration_f(keep), user)
        )

    dcgm_agent.dcgmGetValuesSince_v2 = capture
    source.read_since()
    since = source._since

    def replay(handle: Any, group: Any, field_group: Any, _since: int, callback: Any, user: Any) -> int:
        for g, e, array, count in calls:
            callback(g, e, array, count, user)
        return since

    dcgm_agent.dcgmGetValuesSince_v2 = replay


def measure(gpus: int, instances: int, interval: float, reads: int, rounds: int) -> tuple[float, int, int]:
    source, entities = build(gpus, instances, interval)
    replaying(source)
    source._fresh = False
    batches = len(source.read_batches())
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(reads):
            source._pending = []
            source.read_batches()
        best = min(best, (time.process_time() - started) / reads)
    source.close()
    return best, entities, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    print(
        f"{'node':<28} {'--interval':>10} {'batches':>8} {'values':>8} {'ms a read':>10} {'CPU at 1/s':>11}"
    )
    for gpus, instances in ((8, 0), (8, 7)):
        for interval in (1.0, 0.1):
            seconds, entities, batches = measure(gpus, instances, interval, args.reads, args.rounds)
            node = f"{gpus} GPUs" + (f" x {instances} MIG instances" if instances else "")
            count = entities * batches * len(WATCHED_FIELDS)
            figures = f"{seconds * 1e3:>10.2f} {seconds * 100:>10.2f}%"
            print(f"{node:<28} {interval:>10g} {batches:>8} {count:>8} {figures}")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) after")


if __name__ == "__main__":
    main()
