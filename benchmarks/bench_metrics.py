"""/metrics of `ridgeline serve` at 8 GPUs, 64 and 1,024 entities next to prometheus-node-exporter,
and `/healthz` while /metrics is scraped back to back.

Run: .venv/bin/python benchmarks/bench_metrics.py [--requests 400] [--new 20] [--src DIR]

Both exporters run as their own processes on loopback and are scraped by the same keep-alive
HTTP client. Ridgeline replays a generated trace at real pace (one batch per second), or with
`--feed live` reads benchmarks/live_standin.py's live-like source of the same node at
`--interval 1` (no text parsed per batch, as from DCGM or NVML). Printed:

* back-to-back scrapes (most find the snapshot already encoded, as several Prometheus servers
  would), p50/p99;
* scrapes of a new snapshot (one a second, each the first after its batch: what one Prometheus
  scraping every 15 s sees), p50/p99, and their ratio to node_exporter's p50 (issue 22's goals:
  <= 0.5x at 8 GPUs, <= 1x at 64, <= 4x at 1,024);
* serve's CPU time per new-snapshot scrape (from /proc's schedstat, from the request to the
  response; every thread's but the sampler's), the steadier measure on a shared machine: the
  latency adds the wait for a core;
* `/healthz` p50/p99 at 1,024 entities (one every 10 ms) while another client scrapes /metrics
  back to back (goal: p99 <= 50 ms; the DaemonSet's probe timeout is 3 s);
* the in-process cost of encoding a new snapshot, and the part of it deriving the snapshot's
  Estimates (exporter/inference.py's, not the encoder's), for scale.

`--src DIR` serves from another checkout (e.g. a `git worktree` of the base commit), and times
the in-process encoding of that checkout too, for a before/after in one run of this script.
The load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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


def serve_process_settings() -> None:
    """What `serve` sets for its process (exporter/web/server.py: malloc keeps freed memory,
    start-up's objects frozen out of the collector's sight), where the checkout has them."""
    try:
        from exporter.web.server import keep_freed_memory
    except ImportError:  # a checkout from before it
        pass
    else:
        keep_freed_memory()
    gc.freeze()


def encode_cost(n: int, rounds: int = 200) -> tuple[tuple[float, float], tuple[float, float]]:
    """Milliseconds to encode a new snapshot (the scrape that finds a batch not yet encoded),
    p50/p99: the whole render, and the part of it that derives the snapshot's Estimates
    (exporter/inference.py), timed apart; with serve's process settings."""
    sampler = Sampler("replay", SourceOptions(), load_catalog(), InferenceConfig())
    serve_process_settings()
    endpoint = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=True)
    ents = entities(n)
    times, estimates = [], []
    for step in range(rounds):
        sampler.ingest([Sample(1000.0 + step, e, entity_values(i, step), a) for i, (e, a) in enumerate(ents)])
        start = time.perf_counter()
        for gpu in sampler.snapshot.gpus:
            gpu.estimate  # noqa: B018  (derived on first read, kept with the GpuState)
        derived = time.perf_counter()
        endpoint.render(None)
        times.append(time.perf_counter() - start)
        estimates.append(derived - start)
    return percentiles(times), percentiles(estimates)


SIZES = (8, 64, 1024)
"""Entities served (--sizes picks some)."""


def print_encode_costs(sizes: tuple[int, ...] = SIZES) -> None:
    for n in sizes:
        (p50, p99), (est50, _) = encode_cost(n, rounds=200 if n <= 64 else 20)
        print(
            f"encode new snapshot, {n:>4} entities (in-process): p50 {p50:.3f} ms, p99 {p99:.3f} ms"
            f" (of which deriving the Estimates: p50 {est50:.3f} ms)"
        )


BENCHMARKS = Path(__file__).resolve().parent


def start_ridgeline(
    trace: Path, port: int, src: Path | None = None, feed: str = "replay", entities: int = 8
) -> subprocess.Popen[bytes]:
    """`serve` on `port`, fed by the trace replayed at real pace, or (`feed` "live") by
    live_standin.py's live-like source of `entities` at --interval 1: no text parsed per batch."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    if feed == "live":
        command = [str(BENCHMARKS / "live_standin.py"), str(entities), "--log-level", "warning",
                   "serve", "--source", "standin", "--interval", "1"]  # fmt: skip
    else:
        command = ["-m", "exporter", "--log-level", "warning", "serve", "--replay", str(trace), "--loop",
                   "--speed", "1"]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, *command, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=src,
        env=env,
    )


SAMPLES_TOTAL = re.compile(rb"^ridgeline_samples_total(?:\{[^}]*\})? (\S+)$", re.MULTILINE)


def samples_total(body: bytes) -> bytes | None:
    """The batches the source has given (one snapshot each), as the body says."""
    found = SAMPLES_TOTAL.search(body)
    return None if found is None else found.group(1)


def thread_cpu(pid: int) -> dict[str, int]:
    """Each thread of `pid` (by its id) and the CPU time it has had so far: schedstat's first
    field, ns on a CPU."""
    found: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended meanwhile
            found[task.name] = int((task / "schedstat").read_text().split()[0])
    return found


def sampler_thread(pid: int, seconds: float = 3.0) -> str:
    """The thread of `serve` that takes the most CPU while nothing scrapes it: the sampler,
    which reads and folds a batch a second whether or not anyone scrapes."""
    before = thread_cpu(pid)
    time.sleep(seconds)
    after = thread_cpu(pid)
    return max(after, key=lambda tid: after[tid] - before.get(tid, 0))


def cpu_seconds(pid: int, leave_out: str) -> float:
    """CPU time serve's threads but `leave_out` (the sampler) have had so far."""
    return sum(ns for tid, ns in thread_cpu(pid).items() if tid != leave_out) / 1e9


Round = tuple[float, float | None, float]
"""One new-snapshot round: (ridgeline seconds, node_exporter seconds, serve's CPU seconds)."""


def new_snapshot_rounds(port: int, node_port: int | None, count: int, pid: int) -> list[Round]:
    """`count` rounds, a little over the batch period apart, of one Ridgeline scrape that found a
    snapshot no scrape had read (its ridgeline_samples_total moved) and one node_exporter scrape
    in the same round, the order alternating; with the CPU time `serve` (process `pid`) took
    from the request to the response, its sampler thread left out: it folds each batch at the
    batch's own time, which a round's scrape meets or not as the two periods drift."""
    sampler = sampler_thread(pid)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    node = http.client.HTTPConnection("127.0.0.1", node_port, timeout=30) if node_port else None
    rounds: list[Round] = []
    seen = None
    deadline = time.monotonic() + count * 4 + 30
    while len(rounds) < count and time.monotonic() < deadline:
        time.sleep(1.05)
        node_first = len(rounds) % 2 == 1
        node_time = timed(node) if node is not None and node_first else None
        cpu = cpu_seconds(pid, sampler)
        start = time.perf_counter()
        conn.request("GET", "/metrics")
        body = conn.getresponse().read()
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(pid, sampler) - cpu
        if node is not None and not node_first:
            node_time = timed(node)
        total = samples_total(body)
        if seen is not None and total != seen:
            rounds.append((elapsed, node_time, cpu))
        seen = total
    conn.close()
    if node is not None:
        node.close()
    if len(rounds) < count:
        raise SystemExit(f"only {len(rounds)} scrapes found a new snapshot on port {port}")
    return rounds


def timed(conn: http.client.HTTPConnection) -> float:
    start = time.perf_counter()
    conn.request("GET", "/metrics")
    conn.getresponse().read()
    return time.perf_counter() - start


def healthz_under_scrapes(port: int, seconds: float, scraping: bool = True) -> tuple[list[float], int]:
    """/healthz latencies (one request every 10 ms, each on its own connection, as a probe
    connects) while another client scrapes /metrics back to back (`scraping`; else alone, the
    machine's own noise); and how many scrapes ran."""
    stop_scraping = threading.Event()
    scrapes = [0]

    def scrape() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while not stop_scraping.is_set():
            conn.request("GET", "/metrics")
            conn.getresponse().read()
            scrapes[0] += 1
        conn.close()

    scraper = threading.Thread(target=scrape if scraping else lambda: None, daemon=True)
    scraper.start()
    times: list[float] = []
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            start = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            conn.close()
            times.append(time.perf_counter() - start)
            time.sleep(0.01)
    finally:
        stop_scraping.set()
        scraper.join(60)
    return times, scrapes[0]


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


NEW_GOALS = {8: 0.5, 64: 1.0, 1024: 4.0}
HEALTHZ_ENTITIES = 1024
HEALTHZ_GOAL_MS = 50.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400, help="back-to-back scrapes per exporter")
    parser.add_argument("--new", type=int, default=20, help="scrapes of a new snapshot per size")
    parser.add_argument("--healthz-seconds", type=float, default=20.0)
    parser.add_argument(
        "--src", type=Path, default=None, help="serve (and encode in-process) from this checkout"
    )
    parser.add_argument("--encode-only", action="store_true", help="print the in-process encode costs only")
    parser.add_argument(
        "--feed",
        choices=("replay", "live"),
        default="replay",
        help="what feeds serve (live: live_standin.py)",
    )
    parser.add_argument(
        "--sizes",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=SIZES,
        help="entity counts to serve, comma-separated (default 8,64,1024)",
    )
    args = parser.parse_args()
    if args.encode_only:
        print_encode_costs(args.sizes)
        return
    src = args.src.resolve() if args.src is not None else None
    print(f"serving from {src or BENCHMARKS.parent}, fed by {args.feed}; {load()}")

    results: dict[str, tuple[float, float, int]] = {}
    node: subprocess.Popen[bytes] | None = None
    node_port: int | None = None
    if os.path.exists(NODE_EXPORTER):
        node_port = free_port()
        node = subprocess.Popen(
            [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{node_port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    else:
        print(f"{NODE_EXPORTER} not found: no node_exporter baseline")

    new: dict[int, tuple[float, float, float | None, float | None, float]] = {}
    """size: (p50, p99, node_exporter's p50 in the same rounds, median of the rounds' ratios,
    median of serve's CPU milliseconds per round)."""
    healthz: tuple[float, float, int, int, float, float] | None = None
    try:
        if node_port is not None:
            wait_http(node_port, "/metrics")
            scrape_latencies(node_port, "/metrics", 20)  # warm-up
            times, size = scrape_latencies(node_port, "/metrics", args.requests)
            results["node_exporter"] = (*percentiles(times), size)
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.sizes:
                trace = Path(tmp) / f"trace-{n}.jsonl"
                if args.feed == "replay":
                    write_trace(trace, n, 120)
                port = free_port()
                serve = start_ridgeline(trace, port, src, args.feed, n)
                try:
                    wait_http(port, "/readyz", seconds=120)
                    scrape_latencies(port, "/metrics", 20)
                    requests = args.requests if n <= 64 else max(20, args.requests // 10)
                    times, size = scrape_latencies(port, "/metrics", requests)
                    results[f"ridgeline {n} entities"] = (*percentiles(times), size)
                    rounds = new_snapshot_rounds(port, node_port, args.new, serve.pid)
                    ours = percentiles([r for r, _, _ in rounds])
                    theirs = [t for _, t, _ in rounds if t is not None]
                    ratios = [r / t for r, t, _ in rounds if t]
                    new[n] = (
                        *ours,
                        percentiles(theirs)[0] if theirs else None,
                        statistics.median(ratios) if ratios else None,
                        statistics.median(cpu for _, _, cpu in rounds) * 1000,
                    )
                    if n == HEALTHZ_ENTITIES:
                        alone, _ = healthz_under_scrapes(port, args.healthz_seconds / 4, scraping=False)
                        times, scrapes = healthz_under_scrapes(port, args.healthz_seconds)
                        healthz = (*percentiles(times), len(times), scrapes, *percentiles(alone))
                finally:
                    stop(serve)
    finally:
        if node is not None:
            stop(node)

    print(f"{'exporter':<24} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>9}   (back-to-back scrapes)")
    for name, (p50, p99, size) in results.items():
        print(f"{name:<24} {p50:8.3f} {p99:8.3f} {size:9d}")
    for n, (p50, p99, node_p50, ratio, cpu) in new.items():
        line = f"new snapshot, {n:>4} entities: p50 {p50:8.3f} ms, p99 {p99:8.3f} ms"
        line += f" (serve's CPU but the sampler's: p50 {cpu:.1f} ms)"
        if node_p50 is not None and ratio is not None:
            verdict = "meets" if ratio <= NEW_GOALS[n] else "misses"
            line += (
                f"; node_exporter p50 {node_p50:.3f} ms in the same rounds; median ratio "
                f"{ratio:.2f}x ({verdict} goal <= {NEW_GOALS[n]:g}x)"
            )
        print(line)
    if healthz is not None:
        p50, p99, count, scrapes, alone_p50, alone_p99 = healthz
        verdict = "meets" if p99 <= HEALTHZ_GOAL_MS else "misses"
        print(
            f"/healthz at {HEALTHZ_ENTITIES} entities under back-to-back /metrics ({scrapes} scrapes, "
            f"{count} probes): p50 {p50:.2f} ms, p99 {p99:.2f} ms ({verdict} goal <= {HEALTHZ_GOAL_MS:g} ms);"
            f" without scrapes: p50 {alone_p50:.2f} ms, p99 {alone_p99:.2f} ms"
        )
    # the in-process figures of the checkout served, in a fresh process either way: this one's
    # heap (the traces written, the clients) would slow its collector's passes, not the other's
    env = dict(os.environ, PYTHONPATH=str(src)) if src is not None else None
    sizes = ",".join(map(str, args.sizes))
    subprocess.run([sys.executable, __file__, "--encode-only", "--sizes", sizes], env=env, check=True)
    print(load())


if __name__ == "__main__":
    main()
