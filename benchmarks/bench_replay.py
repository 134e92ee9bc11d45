#!/usr/bin/env python3
"""How many GPU-samples per second the replay source delivers at --speed max, per format.

Writes an 8-GPU trace (the demo's fields) in each format to a temporary directory, then times
ReplaySource open() plus reading every batch as it streams from disk, as `ridgeline serve
--replay FILE --speed max` would. A printed figure, not a goal: a live node needs 8 GPUs x 10 Hz
= 80 GPU-samples/s (bench_steady_state.py measures that budget), so this says how many
node-hours of trace a second of replay covers. JSON Lines is timed once more with orjson's loads
in place of the standard library's (when orjson is importable), to show what that dependency
would buy.

    .venv/bin/python benchmarks/bench_replay.py [--samples 200000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from exporter.sample import Entity, Sample
from exporter.sources.base import REPLAY_FORMATS, EndOfStream, SourceOptions
from exporter.sources.replay import ReplaySettings, ReplaySource
from exporter.sources.replay_formats import jsonl as jsonl_format
from exporter.sources.replay_formats.jsonl import sample_to_json

LIVE_SAMPLES_PER_SECOND = 8 * 10
"""A node's live need: 8 GPUs sampled at 10 Hz."""

MODEL = "NVIDIA H100 80GB HBM3"
GPUS = 8
FIELDS = (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1011, 1012, 100, 203)
TAGS = {
    1001: "GRACT",
    1002: "SMACT",
    1003: "SMOCC",
    1004: "TENSO",
    1005: "DRAMA",
    1006: "FP64A",
    1007: "FP32A",
    1008: "FP16A",
    1011: "NVLTX",
    1012: "NVLRX",
    100: "SMCLK",
    203: "GPUTL",
}


def _value(fid: int, rng: random.Random) -> float:
    if fid == 100:
        return 1980.0
    if fid == 203:
        return float(rng.randint(0, 100))
    if fid in (1011, 1012):
        return float(rng.randint(0, 300_000_000_000))
    return round(rng.random(), 3)


def write_traces(directory: Path, samples: int) -> dict[str, Path]:
    """The same trace as JSON Lines, CSV and dmon text."""
    rng = random.Random(1)
    batches = samples // GPUS
    csv_header = ",".join(["timestamp", "gpu", "uuid", "model"] + [str(f) for f in FIELDS])
    jsonl: list[str] = []
    csv_rows = [csv_header]
    dmon: list[str] = []
    # Column widths as DCGM's DeviceMonitor.cpp lays them out: the field's width + 6 + 2 padding.
    widths = {fid: (28 if fid in (1011, 1012) else 13) for fid in FIELDS}
    header = f"{'#Entity':<10}" + "".join(f"{TAGS[f]:<{widths[f]}}" for f in FIELDS)
    for b in range(batches):
        if b % 14 == 0:
            dmon.append(header)
            dmon.append("ID")
        ts = 1764432000.0 + b
        for gpu in range(GPUS):
            values = {fid: _value(fid, rng) for fid in FIELDS}
            uuid = f"GPU-00000000-0000-0000-0000-00000000000{gpu}"
            entity = Entity(gpu=gpu, uuid=uuid, model=MODEL)
            jsonl.append(sample_to_json(Sample(timestamp=ts, entity=entity, values=values)))
            csv_rows.append(",".join([str(ts), str(gpu), uuid, MODEL] + [f"{values[f]:g}" for f in FIELDS]))
            cells = "".join(f"{values[f]:<{widths[f]}.3f}" for f in FIELDS)
            dmon.append(f"{'GPU ' + str(gpu):<10}" + cells)
    paths = {fmt: directory / f"trace.{fmt}" for fmt in REPLAY_FORMATS}
    paths["jsonl"].write_text("\n".join(jsonl) + "\n")
    paths["csv"].write_text("\n".join(csv_rows) + "\n")
    paths["dmon"].write_text("\n".join(dmon) + "\n")
    return paths


def bench(path: Path) -> tuple[int, float]:
    """Samples delivered and seconds taken (open + every read) at speed max."""
    source = ReplaySource(SourceOptions(), ReplaySettings(path=str(path), model=MODEL, speed=None))
    started = time.perf_counter()
    source.open()
    delivered = 0
    try:
        while True:
            delivered += len(source.read())
    except EndOfStream:
        pass
    return delivered, time.perf_counter() - started


class _OrjsonLoads:
    """Stands in for the json module inside the JSON Lines reader (loads only)."""

    JSONDecodeError = json.JSONDecodeError

    def __init__(self, loads: Callable[[str], object]) -> None:
        self.loads = loads


def main() -> None:
    parser = argparse.ArgumentParser(description="replay throughput at --speed max")
    parser.add_argument("--samples", type=int, default=200_000, help="GPU-samples per trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_traces(Path(tmp), args.samples)
        runs: list[tuple[str, Path, object]] = [(fmt, path, json) for fmt, path in paths.items()]
        try:
            import orjson
        except ImportError:
            print("(orjson not importable: no comparison)")
        else:
            runs.append(("jsonl (orjson)", paths["jsonl"], _OrjsonLoads(orjson.loads)))
        for label, path, decoder in runs:
            saved = jsonl_format.json
            jsonl_format.json = decoder  # type: ignore[assignment]
            try:
                delivered, seconds = bench(path)
            finally:
                jsonl_format.json = saved
            rate = delivered / seconds
            print(
                f"{label:15s} {delivered:8d} GPU-samples in {seconds:6.3f} s = {rate:9,.0f} GPU-samples/s"
                f" ({rate / LIVE_SAMPLES_PER_SECOND:,.0f}x a live 8-GPU node at 10 Hz)"
            )


if __name__ == "__main__":
    main()
