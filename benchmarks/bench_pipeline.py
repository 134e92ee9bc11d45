#!/usr/bin/env python3
"""GPU-samples per second through the daemon's sample pipeline, stage by stage, in one run.

`ridgeline serve --replay FILE.jsonl --speed max` runs: replay parse -> Sampler -> inference ->
snapshot. This writes an 8-GPU JSON Lines trace (the demo trace's generator: training, decode,
starved and idle GPUs, a blank DRAM stretch and a dropout) to a temporary directory and times

    (a) replay only: ReplaySource(speed=None) open() (the parse) plus read() until EndOfStream;
    (b) Sampler.ingest() (inference + snapshot publish) over the batches (a) delivered;
    (c) end to end: a fresh ReplaySource opened and handed to a Sampler whose own thread reads it
        at speed max until the replay ends (what `serve --speed max` does, minus HTTP).

Each figure is GPU-samples per second, best of --repeat runs: printed, not a goal (a live node is
8 GPUs at 1-10 Hz, at most ~56 MIG instances; bench_steady_state.py measures that budget).

    .venv/bin/python benchmarks/bench_pipeline.py [--batches 50000] [--repeat 3] [--profile b|c]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from exporter.catalog import Catalog, load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Sample
from exporter.sampler import Sampler
from exporter.sources.base import EndOfStream, SourceOptions
from exporter.sources.replay import ReplaySettings, ReplaySource
from exporter.sources.replay_formats.jsonl import sample_to_json

GPUS = 8
ROOT = Path(__file__).resolve().parent.parent


def _demo_generator() -> ModuleType:
    """scripts/make_demo_trace.py (not a package): its generate() writes realistic 8-GPU lines."""
    spec = importlib.util.spec_from_file_location("make_demo_trace", ROOT / "scripts" / "make_demo_trace.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_trace(path: Path, batches: int) -> int:
    """`batches` seconds of the demo node as JSON Lines; returns the number of lines (samples)."""
    samples: Iterator[Sample] = _demo_generator().generate(seconds=batches)
    count = 0
    with path.open("w") as out:
        for sample in samples:
            out.write(sample_to_json(sample) + "\n")
            count += 1
    return count


def _settings(path: Path) -> ReplaySettings:
    return ReplaySettings(path=str(path), format="jsonl", speed=None)


def replay_only(path: Path) -> tuple[int, float, list[list[Sample]]]:
    """(a): samples delivered, seconds, and the batches themselves for (b)."""
    source = ReplaySource(SourceOptions(), _settings(path))
    started = time.perf_counter()
    source.open()
    batches: list[list[Sample]] = []
    delivered = 0
    try:
        while True:
            batch = source.read()
            delivered += len(batch)
            batches.append(batch)
    except EndOfStream:
        pass
    return delivered, time.perf_counter() - started, batches


def ingest_only(batches: list[list[Sample]], catalog: Catalog) -> tuple[int, float]:
    """(b): every pre-parsed batch through Sampler.ingest (inference and snapshot publish)."""
    sampler = Sampler("replay", SourceOptions(), catalog, InferenceConfig())
    ingest = sampler.ingest
    started = time.perf_counter()
    for batch in batches:
        ingest(batch)
    seconds = time.perf_counter() - started
    assert sampler.snapshot.gpus, "the sampler kept no GPU"
    return sum(len(b) for b in batches), seconds


def end_to_end(path: Path, catalog: Catalog, *, threaded: bool = True) -> tuple[int, float]:
    """(c): open (parse) + the sampler thread's own loop until the replay ends.

    threaded=False drives the same rounds (run_once) from this thread, so cProfile sees them.
    """
    started = time.perf_counter()
    source = ReplaySource(SourceOptions(), _settings(path))
    source.open()
    sampler = Sampler(
        "replay",
        SourceOptions(settings={"replay": _settings(path)}),
        catalog,
        InferenceConfig(),
        source=source,
    )
    if threaded:
        sampler.start()
        while not sampler.snapshot.source.finished:
            time.sleep(0.002)
    else:
        while not sampler.snapshot.source.finished:
            sampler.run_once()
    seconds = time.perf_counter() - started
    sampler.stop()
    return source.replay_stats.samples, seconds


def _best(run: Callable[[], tuple[int, float]], repeat: int) -> tuple[int, float]:
    results = [run() for _ in range(repeat)]
    return min(results, key=lambda r: r[1])


def _line(label: str, samples: int, seconds: float) -> None:
    print(f"{label:<42s} {samples:9,d} GPU-samples in {seconds:7.3f} s = {samples / seconds:10,.0f} /s")


def main() -> None:
    parser = argparse.ArgumentParser(description="replay -> sampler -> inference -> snapshot throughput")
    parser.add_argument("--batches", type=int, default=50_000, help="8-GPU batches in the trace")
    parser.add_argument("--repeat", type=int, default=3, help="runs per stage; the best is printed")
    parser.add_argument("--profile", choices=("b", "c"), help="cProfile one stage and print the top")
    args = parser.parse_args()
    catalog = load_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        lines = write_trace(path, args.batches)
        print(
            f"trace: {args.batches:,d} batches x {GPUS} GPUs, {lines:,d} lines, "
            f"{path.stat().st_size / 1e6:.1f} MB JSON Lines; Python {sys.version.split()[0]}"
        )
        results_a = [replay_only(path) for _ in range(args.repeat)]
        samples_a, seconds_a, batches = min(results_a, key=lambda r: r[1])
        del results_a
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            if args.profile == "b":
                ingest_only(batches, catalog)
            else:
                end_to_end(path, catalog, threaded=False)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            return
        _line("(a) replay parse + read, speed max", samples_a, seconds_a)
        samples_b, seconds_b = _best(lambda: ingest_only(batches, catalog), args.repeat)
        _line("(b) sampler ingest + inference + snapshot", samples_b, seconds_b)
        samples_c, seconds_c = _best(lambda: end_to_end(path, catalog), args.repeat)
        _line("(c) end to end (sampler thread, speed max)", samples_c, seconds_c)


if __name__ == "__main__":
    main()
