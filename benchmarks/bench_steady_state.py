"""Steady-state cost of the daemon: CPU and RSS of `ridgeline serve`, and RSS over 1M samples.

Run: .venv/bin/python benchmarks/bench_steady_state.py [--seconds 90] [--samples 1000000]

Part 1 runs `ridgeline serve --replay demo --loop --speed 1` (8 GPUs, one batch per second, as a
live node would) with a /metrics scrape every 15 s, and reads the process's CPU time from
/proc/PID/stat and VmRSS from /proc/PID/status. Part 2 pushes synthetic 8-GPU batches through
the sampler and inference in-process as fast as they go (rendering /metrics every 15 batches)
and prints RSS before and after: counters and state are per GPU, so memory must stay flat.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import time

from _loopback import free_port

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    utime, stime = int(parts[11]), int(parts[12])
    return (utime + stime) / CLOCK_TICKS


def rss_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def scrape(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read()
    conn.close()
    return len(body)


def serve_run(seconds: float) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "--log-level",
            "warning",
            "serve",
            "--replay",
            "demo",
            "--loop",
            "--speed",
            "1",
            "--listen",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                scrape(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("ridgeline serve did not come up") from None
                time.sleep(0.1)
        time.sleep(5)  # let start-up (imports, parsing the trace) settle out of the measurement
        rss_start = rss_mib(process.pid)
        cpu_start, wall_start = cpu_seconds(process.pid), time.monotonic()
        next_scrape = wall_start
        scrapes = 0
        while time.monotonic() - wall_start < seconds:
            if time.monotonic() >= next_scrape:
                scrape(port)
                scrapes += 1
                next_scrape += 15
            time.sleep(0.2)
        cpu = cpu_seconds(process.pid) - cpu_start
        wall = time.monotonic() - wall_start
        rss_end = rss_mib(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    print(f"serve, 8 GPUs at 1 batch/s, scrape every 15 s, {wall:.0f} s ({scrapes} scrapes):")
    print(f"  CPU {100 * cpu / wall:.2f} % of one core; RSS {rss_start:.1f} MiB -> {rss_end:.1f} MiB")


def inprocess_run(samples: int) -> None:
    catalog = load_catalog()
    sampler = Sampler("replay", SourceOptions(), catalog, InferenceConfig())
    endpoint = MetricsEndpoint(lambda: sampler.snapshot)
    gpus = [
        (
            Entity(i, f"GPU-{i:08x}-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3"),
            Attribution("ns", f"pod-{i}", "c"),
        )
        for i in range(8)
    ]
    batches = samples // len(gpus)
    rss_before = rss_mib()
    checkpoints = {batches // 10, batches // 2}
    start = time.perf_counter()
    for step in range(batches):
        phase = step % 97 / 97
        sampler.ingest(
            [
                Sample(
                    1_000_000.0 + step,
                    entity,
                    {
                        fields.DRAM_ACTIVE: (phase + i / 8) % 1,
                        fields.PIPE_TENSOR_ACTIVE: 1 - phase,
                        fields.GR_ENGINE_ACTIVE: 0.9,
                        fields.SM_CLOCK: 1980.0,
                    },
                    attribution,
                )
                for i, (entity, attribution) in enumerate(gpus)
            ]
        )
        if step % 15 == 0:
            endpoint.render(None)
        if step in checkpoints:
            print(f"  after {step * len(gpus):>9,d} samples: RSS {rss_mib():.1f} MiB")
    elapsed = time.perf_counter() - start
    rss_after = rss_mib()
    print(
        f"in-process, {batches * len(gpus):,d} samples through sampler + inference in {elapsed:.1f} s "
        f"({batches * len(gpus) / elapsed:,.0f} samples/s):"
    )
    print(f"  RSS before {rss_before:.1f} MiB, after {rss_after:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--samples", type=int, default=1_000_000)
    args = parser.parse_args()
    serve_run(args.seconds)
    inprocess_run(args.samples)


if __name__ == "__main__":
    main()
