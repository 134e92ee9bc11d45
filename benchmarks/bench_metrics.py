"""/metrics latency of `ridgeline serve` at 8 GPUs and 64 entities, next to prometheus-node-exporter.

Run: .venv/bin/python benchmarks/bench_metrics.py [--requests 400]

Both exporters run as their own processes on loopback and are scraped by the same keep-alive
HTTP client, one request at a time. Ridgeline replays a generated trace at real pace (one batch
per second), so most scrapes find the snapshot already encoded (as repeated scrapes by several
Prometheus servers would) and the first scrape after each batch encodes it. The encoding cost
itself (a scrape that always finds a new snapshot, e.g. a 15 s scrape interval) is measured
in-process and printed too. Goals (issue 2 of 4): p50 <= 0.25x node_exporter's at 8 GPUs,
<= 1x at 64 entities.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _loopback import free_port, stop

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.sources.replay_formats.jsonl import sample_to_json

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
MODEL = "NVIDIA H100 80GB HBM3"


def entity_values(i: int, step: int) -> dict[int, float]:
    phase = (i * 7 + step) % 10 / 10
    return {
        fields.DRAM_ACTIVE: 0.2 + 0.6 * phase,
        fields.PIPE_TENSOR_ACTIVE: 0.8 - 0.6 * phase,
        fields.GR_ENGINE_ACTIVE: 0.95,
        fields.SM_ACTIVE: 0.9,
        fields.SM_OCCUPANCY: 0.4,
        fields.SM_CLOCK: 1980.0,
        fields.GPU_UTIL: 99.0,
    }


def entities(n: int) -> list[tuple[Entity, Attribution]]:
    """n entities: 8 GPUs, MIG-partitioned into n / 8 instances each when n > 8."""
    per_gpu = max(1, n // 8)
    out = []
    for i in range(n):
        gpu, instance = divmod(i, per_gpu)
        entity = Entity(
            gpu, f"GPU-{gpu:08x}-0000-0000-0000-000000000000", MODEL, instance if per_gpu > 1 else None
        )
        out.append((entity, Attribution("team-" + str(i % 5), f"pod-{i:03d}-7f9c4b-x2kq8", "server")))
    return out


def write_trace(path: Path, n: int, batches: int, period: float = 1.0) -> None:
    """`batches` batches of n entities, one every `period` seconds of trace time."""
    with path.open("w") as out:
        for step in range(batches):
            for i, (entity, pod) in enumerate(entities(n)):
                sample = Sample(
                    timestamp=1_764_432_000.0 + step * period,
                    entity=entity,
                    values=entity_values(i, step),
                    attribution=pod,
                )
                out.write(sample_to_json(sample) + "\n")


def scrape_latencies(port: int, path: str, requests: int) -> tuple[list[float], int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times: list[float] = []
    size = 0
    for _ in range(requests):
        start = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        times.append(time.perf_counter() - start)
        size = len(body)
        if response.status != 200:
            raise SystemExit(f"{path} on port {port} answered {response.status}")
    conn.close()
    return times, size


def wait_http(port: int, path: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"nothing answered 200 on 127.0.0.1:{port}{path}")


def percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def encode_cost(n: int, rounds: int = 200) -> tuple[float, float]:
    """Milliseconds to encode a new snapshot (the scrape that finds a batch not yet encoded)."""
    sampler = Sampler("replay", SourceOptions(), load_catalog(), InferenceConfig())
    endpoint = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=True)
    ents = entities(n)
    times = []
    for step in range(rounds):
        sampler.ingest([Sample(1000.0 + step, e, entity_values(i, step), a) for i, (e, a) in enumerate(ents)])
        start = time.perf_counter()
        endpoint.render(None)
        times.append(time.perf_counter() - start)
    return percentiles(times)


def start_ridgeline(trace: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "--log-level",
            "warning",
            "serve",
            "--replay",
            str(trace),
            "--loop",
            "--speed",
            "1",
            "--listen",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()

    results: dict[str, tuple[float, float, int]] = {}
    if os.path.exists(NODE_EXPORTER):
        port = free_port()
        node = subprocess.Popen(
            [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_http(port, "/metrics")
            scrape_latencies(port, "/metrics", 20)  # warm-up
            times, size = scrape_latencies(port, "/metrics", args.requests)
            results["node_exporter"] = (*percentiles(times), size)
        finally:
            stop(node)
    else:
        print(f"{NODE_EXPORTER} not found: no node_exporter baseline")

    with tempfile.TemporaryDirectory() as tmp:
        for n in (8, 64):
            trace = Path(tmp) / f"trace-{n}.jsonl"
            write_trace(trace, n, 120)
            port = free_port()
            serve = start_ridgeline(trace, port)
            try:
                wait_http(port, "/readyz")
                scrape_latencies(port, "/metrics", 20)
                times, size = scrape_latencies(port, "/metrics", args.requests)
                results[f"ridgeline {n} entities"] = (*percentiles(times), size)
            finally:
                stop(serve)

    print(f"{'exporter':<24} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>8}")
    for name, (p50, p99, size) in results.items():
        print(f"{name:<24} {p50:8.3f} {p99:8.3f} {size:8d}")
    for n in (8, 64):
        p50, p99 = encode_cost(n)
        print(f"encode new snapshot, {n:>2} entities (in-process): p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    if "node_exporter" in results:
        base = results["node_exporter"][0]
        for n, goal in ((8, 0.25), (64, 1.0)):
            ratio = results[f"ridgeline {n} entities"][0] / base
            verdict = "meets" if ratio <= goal else "misses"
            print(f"p50 ridgeline/node_exporter at {n:>2} entities: {ratio:.3f} ({verdict} goal <= {goal})")


if __name__ == "__main__":
    main()
