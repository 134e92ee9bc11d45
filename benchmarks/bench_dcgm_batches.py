#!/usr/bin/env python3
"""CPU of DCGM's `read_batches` at one read a second: the source's own work on what
dcgmGetValuesSince_v2 hands it (the callbacks, decoding their records, ticks, batches).

The fake bindings (tests/fakes/dcgm) give the values, as DCGM does: one callback per value, field
by field within each entity, into one reused record (dcgmlib/src/DcgmApi.cpp,
helperGetValuesSince). Their cost of building them in Python is taken out: the bench captures the
records once, and on every read a small C library (built here with `cc`) calls the source's ctypes
callback for each, copying the record's 32 bytes into one scratch record first, as libdcgm does;
so the figure is the source's alone, the C-to-Python callbacks included. Without a C compiler,
Python calls the callbacks, and that loop's cost counts too. `--arrays` hands each entity's values
in one array, tick by tick, instead (the shape of this bench before). Nodes of 8 GPUs and of 8
GPUs with 7 MIG instances each, at `--interval 0.1` (ten ticks a read) and `--interval 1` (one);
best of several rounds, load average beside it; the heap built before the reads is frozen, as
`serve` freezes it after start-up.

With --base DIR (a copy of an older commit, e.g. `git archive main | tar -x -C DIR`), each round
runs the old code and then this one, each in its own process, alternating, and prints both with
the load average beside each; the medians of the rounds come last. --profile prints where a read
goes (cProfile, 8 x 7 at --interval 0.1; with --base, the older code's first): the source's own
functions on the replayed records, then one read through the fake itself, to show what the fake's
building of them costs (libdcgm's C code on a real node, no Python).

    .venv/bin/python benchmarks/bench_dcgm_batches.py [--reads 50] [--rounds 5] [--arrays]
    .venv/bin/python benchmarks/bench_dcgm_batches.py --base DIR [--rounds 5] [--reads 20] [--arrays]
    .venv/bin/python benchmarks/bench_dcgm_batches.py --profile [--base DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import gc
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAKE_DIR = ROOT / "tests" / "fakes" / "dcgm"
NODES = ((8, 0, 1.0), (8, 0, 0.1), (8, 7, 1.0), (8, 7, 0.1))
"""(GPUs, MIG instances per GPU, --interval)."""
START = 1_764_633_600_000_000
_REAL: dict[str, Any] = {}
ARRAYS = [False]
"""--arrays: the fake hands each entity's values tick by tick in one array per entity (the shape
this bench had before), instead of DCGM's: field by field, one value per callback."""


def _modules(code: Path) -> tuple[ModuleType, ModuleType, ModuleType, Any]:
    """The fake's modules and the DcgmSource class of the code under `code` (this checkout or --base)."""
    for directory in (str(FAKE_DIR), str(code)):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    import _fake_dcgm_engine as engine_module
    import dcgm_agent
    import dcgm_structs

    from exporter.sources.dcgm import DcgmSource

    return engine_module, dcgm_agent, dcgm_structs, DcgmSource


def values(watched: tuple[int, ...]) -> dict[int, float | None]:
    from exporter import fields

    ints = {fields.SM_CLOCK: 1755, fields.GPU_UTIL: 100, fields.CLOCKS_EVENT_REASONS: 0}
    return {f: ints.get(f, 0.5) for f in watched}


def _open_source(source_class: Any, options_class: Any, interval: float) -> Any:
    """The source over the fake bindings, built as the code under test builds it: a DcgmSettings
    record where the source owns its settings, the older SourceOptions(dcgm_bindings=) for --base."""
    try:
        from exporter.sources.dcgm import DcgmSettings
    except ImportError:
        return source_class(options_class(dcgm_bindings=FAKE_DIR, interval_seconds=interval))
    return source_class(options_class(interval_seconds=interval), DcgmSettings(bindings=FAKE_DIR))


def build(code: Path, gpus: int, instances: int, interval: float) -> tuple[Any, int]:
    """An opened source over a fake engine that kept one read's ticks; the entities sampled."""
    engine_module, _agent, _structs, source_class = _modules(code)
    from exporter.sources.base import SourceOptions
    from exporter.sources.dcgm import WATCHED_FIELDS

    engine = engine_module.reset()
    if ARRAYS[0]:
        engine.field_major, engine.callback_values = False, None
    for g in range(gpus):
        gpu = engine_module.FakeGpu(g, f"GPU-{g:08d}-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3")
        gpu.values = values(WATCHED_FIELDS)
        gpu.instances = [
            engine_module.FakeInstance(g * instances + i, i + 1, values(WATCHED_FIELDS))
            for i in range(instances)
        ]
        engine.gpus.append(gpu)
    source = _open_source(source_class, SourceOptions, interval)
    source.open()
    for tick in range(round(1.0 / interval)):
        engine.collect(START + tick * round(interval * 1e6))
    return source, gpus * (1 + instances)


def replaying(code: Path, source: Any) -> None:
    """Capture what the fake hands once; every later call hands the same arrays again."""
    _engine, dcgm_agent, dcgm_structs, _source_class = _modules(code)
    calls: list[tuple[int, int, Any, int]] = []
    real = _REAL.setdefault("since", dcgm_agent.dcgmGetValuesSince_v2)  # the fake's own, not a replay

    def capture(*args: Any) -> int:
        handle, group, field_group, since, callback, user = args

        as_from_c = ctypes.cast(callback, FROM_C)

        def keep(g: int, e: int, array: Any, count: int, u: Any) -> int:
            kept = (dcgm_structs.c_dcgmFieldValue_v1 * count)()  # the fake reuses its own
            ctypes.memmove(kept, array, ctypes.sizeof(kept))
            calls.append((g, e, kept, count))
            return int(as_from_c(g, e, ctypes.addressof(kept), count, u))

        return int(
            real(handle, group, field_group, since, dcgm_agent.dcgmFieldValueEntityEnumeration_f(keep), user)
        )

    dcgm_agent.dcgmGetValuesSince_v2 = capture
    source.read_since()
    since = source._since
    dcgm_agent.dcgmGetValuesSince_v2 = real

    shim = _shim()
    if shim is None:  # no C compiler: Python calls each callback (its own cost counts too)

        def replay(handle: Any, group: Any, field_group: Any, _since: int, callback: Any, user: Any) -> int:
            for g, e, array, count in calls:
                callback(g, e, array, count, user)
            return since

        dcgm_agent.dcgmGetValuesSince_v2 = replay
        return
    n = len(calls)
    groups = (ctypes.c_uint * n)(*(call[0] for call in calls))
    entities = (ctypes.c_uint * n)(*(call[1] for call in calls))
    records = (ctypes.c_void_p * n)(*(ctypes.addressof(call[2]) for call in calls))
    counts = (ctypes.c_int * n)(*(call[3] for call in calls))
    record = ctypes.sizeof(dcgm_structs.c_dcgmFieldValue_v1)
    scratch = (ctypes.c_char * (record * max(call[3] for call in calls)))()

    def replay_c(handle: Any, group: Any, field_group: Any, _since: int, callback: Any, user: Any) -> int:
        assert calls  # `records` points into them: they live as long as this replay
        shim.replay(callback, n, groups, entities, records, counts, scratch, record, HEAD_BYTES)
        return since

    dcgm_agent.dcgmGetValuesSince_v2 = replay_c


FROM_C = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p
)
"""A callback called as libdcgm calls it: through a bare C function pointer."""
HEAD_BYTES = 32
"""What DCGM writes into its one stack record per value (DcgmFvBuffer::ConvertBufferedFvToFv1 for
a number: version, field, type, status, stamp, the 8-byte value), so the shim copies that much."""
SHIM_C = r"""
#include <string.h>
typedef int (*callback_t)(unsigned int, unsigned int, void *, int, void *);
int replay(callback_t callback, int n, const unsigned int *groups, const unsigned int *entities,
           char *const *records, const int *counts, char *scratch, int record, int head) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < counts[i]; j++)
            memcpy(scratch + (size_t)j * record, records[i] + (size_t)j * record, head);
        int status = callback(groups[i], entities[i], scratch, counts[i], 0);
        if (status) return status;
    }
    return 0;
}
"""
_SHIM: list[Any] = []


def _shim() -> Any:
    """libdcgm's side of the replay in C (the callbacks called from C, as on a node): a small
    library built once per process; None without a C compiler."""
    if not _SHIM:
        directory = Path(tempfile.mkdtemp(prefix="bench-dcgm-"))
        (directory / "replay.c").write_text(SHIM_C)
        built = subprocess.run(
            [
                "cc",
                "-O2",
                "-shared",
                "-fPIC",
                "-o",
                str(directory / "replay.so"),
                str(directory / "replay.c"),
            ],
            capture_output=True,
        )
        library = ctypes.CDLL(str(directory / "replay.so")) if built.returncode == 0 else None
        if library is not None:
            library.replay.restype = ctypes.c_int
        _SHIM.append(library)
    return _SHIM[0]


def measure(code: Path, node: tuple[int, int, float], reads: int, rounds: int) -> tuple[float, int, int]:
    """Best CPU seconds a read over `rounds` rounds of `reads` reads; entities; batches a read."""
    gpus, instances, interval = node
    source, entities = build(code, gpus, instances, interval)
    replaying(code, source)
    source._fresh = False
    batches = len(source.read_batches())
    gc.collect()
    gc.freeze()  # as serve does after start-up (exporter/web/server.py): what is built so far stays
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(reads):
            source._pending = []
            source.read_batches()
        best = min(best, (time.process_time() - started) / reads)
    source.close()
    gc.unfreeze()
    return best, entities, batches


def describe(node: tuple[int, int, float]) -> str:
    gpus, instances, _interval = node
    return f"{gpus} GPUs" + (f" x {instances} MIG instances" if instances else "")


def load() -> float:
    return os.getloadavg()[0]


def table(code: Path, reads: int, rounds: int) -> None:
    from exporter.sources.dcgm import WATCHED_FIELDS

    shape = "one array an entity, tick by tick" if ARRAYS[0] else "one value a callback, field by field"
    harness = "from C" if _shim() is not None else "from Python (no C compiler)"
    print(f"load average {load():.2f} (1 min), {os.cpu_count()} cores; values handed {shape}, {harness}")
    print(
        f"{'node':<28} {'--interval':>10} {'batches':>8} {'values':>8} {'ms a read':>10} {'CPU at 1/s':>11}"
    )
    for node in NODES:
        seconds, entities, batches = measure(code, node, reads, rounds)
        count = entities * batches * len(WATCHED_FIELDS)
        figures = f"{seconds * 1e3:>10.2f} {seconds * 100:>10.2f}%"
        print(f"{describe(node):<28} {node[2]:>10g} {batches:>8} {count:>8} {figures}")
    print(f"load average {load():.2f} (1 min) after")


def child(code: Path, reads: int) -> None:
    """One round of every node, as JSON: ms a read, and the load average before each node."""
    figures = []
    for node in NODES:
        before = load()
        seconds, _entities, _batches = measure(code, node, reads, 1)
        figures.append({"ms": seconds * 1e3, "load": before})
    print(json.dumps(figures))


def against(base: Path, reads: int, rounds: int) -> None:
    """Alternating rounds, old code then this one, each a process of its own."""
    runs: dict[str, list[list[dict[str, float]]]] = {"before": [], "after": []}
    for round_index in range(rounds):
        for label, code in (("before", base), ("after", ROOT)):
            command = [sys.executable, __file__, "--child", str(code), "--reads", str(reads)]
            command += ["--arrays"] if ARRAYS[0] else []
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            runs[label].append(json.loads(output.strip().splitlines()[-1]))
        print(f"round {round_index + 1}")
        for index, node in enumerate(NODES):
            old, new = runs["before"][-1][index], runs["after"][-1][index]
            print(
                f"  {describe(node):<28} --interval {node[2]:<4g} before {old['ms']:7.2f} ms (load "
                f"{old['load']:.1f})  after {new['ms']:7.2f} ms (load {new['load']:.1f})  "
                f"{old['ms'] / new['ms']:5.1f}x"
            )
    print(
        f"medians of {rounds} rounds, {reads} reads each (ms a read = % of a core at one read a second / 10)"
    )
    for index, node in enumerate(NODES):
        old = statistics.median(r[index]["ms"] for r in runs["before"])
        new = statistics.median(r[index]["ms"] for r in runs["after"])
        ratios = [b[index]["ms"] / a[index]["ms"] for b, a in zip(runs["before"], runs["after"], strict=True)]
        print(
            f"  {describe(node):<28} --interval {node[2]:<4g} before {old:7.2f} ms  after {new:7.2f} ms  "
            f"{old / new:5.1f}x (rounds {min(ratios):.1f}-{max(ratios):.1f}x)"
        )


def profile(code: Path, reads: int) -> None:
    """Where a read of 8 x 7 at --interval 0.1 goes: the source on replayed arrays, then the fake."""
    node = (8, 7, 0.1)
    source, _entities = build(code, *node)
    replaying(code, source)
    source._fresh = False
    profiler = cProfile.Profile(time.process_time)
    started = time.process_time()
    profiler.enable()
    for _ in range(reads):
        source._pending = []
        source.read_batches()
    profiler.disable()
    spent = (time.process_time() - started) / reads
    print(
        f"the source's own read, replayed arrays: {spent * 1e3:.2f} ms a read under cProfile "
        f"(load {load():.2f})"
    )
    _print_stats(profiler, 12)
    source.close()

    _modules(code)[1].dcgmGetValuesSince_v2 = _REAL["since"]  # the fake builds its arrays anew
    source, _entities = build(code, *node)
    source._fresh = False
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    source.read_batches()
    profiler.disable()
    stats = pstats.Stats(profiler)
    whole = _cumulative(stats, "dcgmGetValuesSince_v2")
    callbacks = _cumulative(stats, "collect") + _cumulative(stats, "collect_heads")  # old, new name
    print(
        f"one read through the fake: dcgmGetValuesSince_v2 {whole * 1e3:.1f} ms, of which the source's "
        f"callback {callbacks * 1e3:.1f} ms: the fake's own {(whole - callbacks) * 1e3:.1f} ms "
        f"(load {load():.2f})"
    )
    source.close()


def _cumulative(stats: pstats.Stats, name: str) -> float:
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    return float(sum(entry[3] for key, entry in table.items() if key[2] == name))


def _print_stats(profiler: cProfile.Profile, lines: int) -> None:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(lines)
    text = out.getvalue()
    print(text[text.index("   ncalls") :].rstrip() if "   ncalls" in text else text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", type=Path, help="a copy of older code: alternate rounds, old then this")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile one node's reads, and the fake's cost"
    )
    parser.add_argument(
        "--arrays", action="store_true", help="one array per entity, tick by tick (not one value a call)"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    ARRAYS[0] = args.arrays
    if args.profile:
        if args.base is not None:  # the older code first, in a process of its own
            print("before (--base):", flush=True)
            command = [sys.executable, __file__, "--profile", "--child", str(args.base.resolve())]
            subprocess.run([*command, "--reads", str(args.reads)], check=True)
            print("after:")
        profile(args.child or ROOT, args.reads)
    elif args.child is not None:
        child(args.child, args.reads)
    elif args.base is not None:
        against(args.base.resolve(), args.reads, args.rounds)
    else:
        table(ROOT, args.reads, args.rounds)


if __name__ == "__main__":
    main()
