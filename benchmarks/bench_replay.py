#!/usr/bin/env python3
"""How many GPU-samples per second the replay source delivers at --speed max, per format.

Writes an 8-GPU trace (the demo's fields) in each format to a temporary directory, then times
ReplaySource open() (read, decode, parse) plus reading every batch, as `ridgeline serve --replay
FILE --speed max` would. Prints one line per format, and JSON Lines once more decoded by the
standard library's json instead of orjson, for comparison. A printed figure, not a goal: a live
node needs 8 GPUs at 1-10 Hz (bench_steady_state.py measures that budget).

    .venv/bin/python benchmarks/bench_replay.py [--samples 400000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from exporter.sources.base import EndOfStream, SourceOptions
from exporter.sources.replay import ReplaySource
from exporter.sources.replay_formats import jsonl as jsonl_format

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
            fields = {str(fid): value for fid, value in values.items()}
            line = {"ts": ts, "gpu": gpu, "uuid": uuid, "model": MODEL, "fields": fields}
            jsonl.append(json.dumps(line, separators=(",", ":")))
            csv_rows.append(",".join([str(ts), str(gpu), uuid, MODEL] + [f"{values[f]:g}" for f in FIELDS]))
            cells = "".join(f"{values[f]:<{widths[f]}.3f}" for f in FIELDS)
            dmon.append(f"{'GPU ' + str(gpu):<10}" + cells)
    paths = {fmt: directory / f"trace.{fmt}" for fmt in ("jsonl", "csv", "dmon")}
    paths["jsonl"].write_text("\n".join(jsonl) + "\n")
    paths["csv"].write_text("\n".join(csv_rows) + "\n")
    paths["dmon"].write_text("\n".join(dmon) + "\n")
    return paths


def bench(path: Path) -> tuple[int, float]:
    """Samples delivered and seconds taken (open + every read) at speed max."""
    source = ReplaySource(SourceOptions(replay=str(path), model=MODEL, speed=None))
    started = time.perf_counter()
    source.open()
    delivered = 0
    try:
        while True:
            delivered += len(source.read())
    except EndOfStream:
        pass
    return delivered, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description="replay throughput at --speed max")
    parser.add_argument("--samples", type=int, default=400_000, help="GPU-samples per trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_traces(Path(tmp), args.samples)
        runs = [
            (f"{fmt} ({jsonl_format.DECODER})" if fmt == "jsonl" else fmt, path)
            for fmt, path in paths.items()
        ]
        if jsonl_format.DECODER != "json":
            runs.append(("jsonl (json)", paths["jsonl"]))
        for label, path in runs:
            decoder = jsonl_format.DECODER
            if label == "jsonl (json)":
                jsonl_format.DECODER = "json"
            try:
                delivered, seconds = bench(path)
            finally:
                jsonl_format.DECODER = decoder
            rate = delivered / seconds
            print(
                f"{label:14s} {delivered:8d} GPU-samples in {seconds:6.3f} s  = {rate:10,.0f} GPU-samples/s"
            )


if __name__ == "__main__":
    main()
