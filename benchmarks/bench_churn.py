#!/usr/bin/env python3
"""Memory and log of `ridgeline serve` when GPU identities churn: a replay of 100,000 GPUs (64 per
timestamp, every timestamp with UUIDs never seen before), played at --speed max.

Runs `ridgeline serve` as a real process and reads its VmRSS from /proc every 0.5 s while it
plays, and its VmHWM (peak) at the end of the replay; prints RSS after each quarter of the
identities, the peak, and the bytes of log the run wrote. With per-identity state unbounded, RSS
grows with the identities (~300 B each) and every UUID logs a line; bounded, RSS is flat.

    .venv/bin/python benchmarks/bench_churn.py [--identities 100000] [--per-batch 64] [--src DIR]

`--src DIR` runs another checkout's `exporter` package (e.g. main's, for a before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from _loopback import free_port, stop

ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"
SERVE = (sys.executable, "-m", "exporter", "serve")


def write_churn(path: Path, identities: int, per_batch: int) -> int:
    """`per_batch` GPUs per timestamp, fresh UUIDs each timestamp; returns the batches written."""
    batches = -(-identities // per_batch)
    with path.open("w", encoding="utf-8") as out:
        for batch in range(batches):
            out.writelines(
                json.dumps(
                    {
                        "ts": 1_764_432_000.0 + batch,
                        "gpu": gpu,
                        "uuid": f"GPU-{batch:07d}-{gpu:03d}",
                        "model": H100,
                        "fields": {"1005": 0.5, "1004": 0.3, "1001": 0.9},
                    }
                )
                + "\n"
                for gpu in range(per_batch)
            )
    return batches


def _status_mib(pid: int, key: str) -> float:
    match = re.search(rf"^{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.MULTILINE)
    return int(match.group(1)) / 1024 if match else float("nan")


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as error:
        return str(error.read().decode())
    except OSError:
        return ""


def _samples_total(metrics: str) -> float:
    match = re.search(r"^ridgeline_samples_total(?:\{[^}]*\})? (\S+)", metrics, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def run(trace: Path, batches: int, src: Path | None) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [*SERVE, "--listen", f"127.0.0.1:{port}", "--replay", str(trace), "--speed", "max"],
            cwd=src or ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        started = time.monotonic()
        marks = [batches * q // 4 for q in (1, 2, 3)]
        try:
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"serve exited with {process.returncode}")
                played = _samples_total(_get(base + "/metrics"))
                while marks and played >= marks[0]:
                    rss = _status_mib(process.pid, "VmRSS")
                    print(f"  after {marks.pop(0):>6,} of {batches:,} batches: RSS {rss:6.1f} MiB")
                if "end_of_replay" in _get(base + "/readyz"):
                    break
                if time.monotonic() - started > 1800:
                    raise SystemExit("gave up after 30 min")
                time.sleep(0.5)
            rss, peak = _status_mib(process.pid, "VmRSS"), _status_mib(process.pid, "VmHWM")
        finally:
            stop(process)
        log_bytes = log.seek(0, os.SEEK_END)
    took = time.monotonic() - started
    print(f"  at the end: RSS {rss:.1f} MiB, peak {peak:.1f} MiB; {log_bytes:,} bytes of log; {took:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description="serve's memory and log when GPU identities churn")
    parser.add_argument("--identities", type=int, default=100_000)
    parser.add_argument("--per-batch", type=int, default=64)
    parser.add_argument("--src", type=Path, help="a checkout whose exporter package to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "churn.jsonl"
        batches = write_churn(trace, args.identities, args.per_batch)
        print(
            f"{args.identities:,} identities, {args.per_batch} per batch, {batches:,} batches "
            f"({trace.stat().st_size / 2**20:.1f} MiB), --speed max, code from {args.src or ROOT}"
        )
        run(trace, batches, args.src)


if __name__ == "__main__":
    main()
