"""Steady-state cost of the daemon: the live budget (CPU per node next to node_exporter's), RSS.

Run: .venv/bin/python benchmarks/bench_steady_state.py [--seconds 90] [--samples 1000000]
     [--feed both|all|live|live-plain|replay] [--rounds 1] [--base DIR [--only 10hz]]

Part 1, the live budget. `ridgeline serve` runs as its own process, as on a node:

    the bundled demo trace: 8 GPUs, one batch per second (the figure this script always printed);
    the floor: the same process after its replay has ended (HTTP server and threads, no batch);
    8 GPUs at --interval 1, 8 GPUs at --interval 0.1 (DCGM's fastest) and 56 MIG instances
    (8 GPUs x 7) at --interval 0.1, each fed two ways:
      live:   benchmarks/live_standin.py, a stand-in for a live source that keeps its batches
              between reads as DCGM's watches do (read about once a second, a batch per
              --interval, built from prepared values: no text to parse), the goal's row;
      live-plain: the same stand-in answering one batch per read, read every --interval;
      replay: bench_metrics.write_trace's synthetic node replayed at real pace (--speed 1
              --loop), which also parses each line as its batch falls due.

prometheus-node-exporter (Debian, default collectors) runs beside it for the whole run. In each
window both are scraped every 15 s, as Prometheus would, and each one's CPU time is read from
/proc/PID/stat over the same wall time, after a 5 s settle (imports, the trace parse). Goals
(issue 8): <= 0.5 % of one core for 8 GPUs at 10 Hz, <= 1 % for 56 instances at 10 Hz.

No GPU library runs here (none on the development VM or in CI): the figures cover the sampler,
inference, snapshots, exposition and the HTTP server, not DCGM's or NVML's own calls.

Part 2 pushes synthetic 8-GPU batches through the sampler and inference in-process as fast as
they go (rendering /metrics every 15 batches) and prints RSS before and after: counters and
state are per GPU, so memory must stay flat. --samples 0 skips it. Before it, the live path's
CPU per batch in-process (8 and 56 entities, warm). --seconds 0 skips part 1.

--base DIR (a checkout of older code with its own .venv, e.g. /work/main, or a `git worktree`
of a commit) runs part 1's live rows side by side instead: each round runs every node's `live`
window from DIR and then from this checkout, alternating, and the medians (range) of the rounds
are printed with their ratio, node_exporter's median and the load averages seen. --only 10hz
keeps the two --interval 0.1 nodes (the goals).
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _loopback import free_port, stop
from bench_metrics import NODE_EXPORTER, wait_http, write_trace

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SCRAPE_EVERY_SECONDS = 15.0
SETTLE_SECONDS = 5.0
TRACE_SECONDS = 30.0
"""Each generated trace covers 30 s and loops, so a window spans several loops."""


@dataclass(frozen=True)
class Node:
    """One configuration of the live budget."""

    label: str
    entities: int
    interval: float
    goal_percent: float | None = None


LIVE = (
    Node("8 GPUs at --interval 1", 8, 1.0),
    Node("8 GPUs at --interval 0.1", 8, 0.1, goal_percent=0.5),
    Node("56 MIG instances (8 GPUs x 7) at --interval 0.1", 56, 0.1, goal_percent=1.0),
)


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


@dataclass(frozen=True)
class Window:
    """What one measurement window saw of one process."""

    cpu_percent: float
    rss_start_mib: float
    rss_end_mib: float
    wall_seconds: float
    scrapes: int


def measure(targets: dict[str, tuple[int, int]], seconds: float) -> dict[str, Window]:
    """CPU (% of one core) and RSS of each (pid, port) over one window, each scraped every 15 s."""
    rss_start = {name: rss_mib(pid) for name, (pid, _) in targets.items()}
    cpu_start = {name: cpu_seconds(pid) for name, (pid, _) in targets.items()}
    wall_start = time.monotonic()
    next_scrape, scrapes = wall_start, 0
    while time.monotonic() - wall_start < seconds:
        if time.monotonic() >= next_scrape:
            for _, port in targets.values():
                scrape(port)
            scrapes += 1
            next_scrape += SCRAPE_EVERY_SECONDS
        time.sleep(0.2)
    wall = time.monotonic() - wall_start
    return {
        name: Window(
            cpu_percent=100 * (cpu_seconds(pid) - cpu_start[name]) / wall,
            rss_start_mib=rss_start[name],
            rss_end_mib=rss_mib(pid),
            wall_seconds=wall,
            scrapes=scrapes,
        )
        for name, (pid, _) in targets.items()
    }


BENCHMARKS = Path(__file__).resolve().parent


def replay_command(replay: str, *, loop: bool = True) -> list[str]:
    """`ridgeline serve` fed by a replay at real pace."""
    return [sys.executable, "-m", "exporter", "--log-level", "warning", "serve", "--replay", replay,
            *(["--loop"] if loop else []), "--speed", "1"]  # fmt: skip


def standin_command(entities: int, *, plain: bool = False, root: Path | None = None) -> list[str]:
    """`ridgeline serve` fed by live_standin.py's live-like source (keeping its batches, or not);
    `root`: another checkout's stand-in, package and .venv (run with PYTHONPATH=root: serve_env)."""
    python = sys.executable
    benchmarks = BENCHMARKS
    if root is not None:
        benchmarks = root / "benchmarks"
        venv = root / ".venv" / "bin" / "python"
        python = str(venv) if venv.exists() else python
    return [python, str(benchmarks / "live_standin.py"), str(entities), "--log-level", "warning",
            "serve", "--source", "standin-plain" if plain else "standin"]  # fmt: skip


def serve_env(root: Path | None) -> dict[str, str] | None:
    """The environment of a serve process from `root` (its package first), or this one's."""
    return None if root is None else dict(os.environ, PYTHONPATH=str(root))


def start_serve(
    command: list[str], interval: float, port: int, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [*command, "--interval", str(interval), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_http(port, "/metrics")
    except SystemExit:
        stop(process)
        raise SystemExit("ridgeline serve did not come up") from None
    return process


def serve_window(
    command: list[str],
    interval: float,
    seconds: float,
    node_exporter: tuple[int, int] | None,
    env: dict[str, str] | None = None,
) -> dict[str, Window]:
    """One window of `ridgeline serve` (and node_exporter beside it, when there is one)."""
    port = free_port()
    process = start_serve(command, interval, port, env)
    try:
        time.sleep(SETTLE_SECONDS)  # start-up (imports, parsing the trace) stays out of the figure
        targets = {"ridgeline": (process.pid, port)}
        if node_exporter is not None:
            targets["node_exporter"] = node_exporter
        return measure(targets, seconds)
    finally:
        stop(process)


def start_node_exporter() -> tuple[subprocess.Popen[bytes], int] | None:
    if not os.path.exists(NODE_EXPORTER):
        print(f"{NODE_EXPORTER} not found (scripts/bootstrap --test installs it): no node_exporter figure")
        return None
    port = free_port()
    node = subprocess.Popen(
        [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_http(port, "/metrics")
    scrape(port)  # its first scrape initialises collectors: keep it out of the windows
    return node, port


def row(label: str, window: dict[str, Window]) -> str:
    """One line of the live budget: our CPU, node_exporter's in the same window, our RSS."""
    line = f"  {label:<64} ridgeline {window['ridgeline'].cpu_percent:5.2f} %"
    if "node_exporter" in window:
        line += f", node_exporter {window['node_exporter'].cpu_percent:5.2f} %"
    return line + f"; RSS {window['ridgeline'].rss_end_mib:.1f} MiB; load {os.getloadavg()[0]:.1f}"


def live_budget(seconds: float, feeds: tuple[str, ...]) -> None:
    started = start_node_exporter()
    node_exporter = (started[0].pid, started[1]) if started is not None else None
    try:
        demo = serve_window(replay_command("demo"), 1.0, seconds, node_exporter)["ridgeline"]
        print(
            f"serve --replay demo, 8 GPUs at 1 batch/s, scrape every 15 s, "
            f"{demo.wall_seconds:.0f} s ({demo.scrapes} scrapes):"
        )
        print(
            f"  CPU {demo.cpu_percent:.2f} % of one core; "
            f"RSS {demo.rss_start_mib:.1f} MiB -> {demo.rss_end_mib:.1f} MiB"
        )
        print(f"live budget, {seconds:.0f} s windows, scrape every 15 s, CPU as % of one core:")
        with tempfile.TemporaryDirectory() as tmp:
            # the floor: the same process once its replay has ended, no batch arriving, still scraped
            ended = Path(tmp) / "ended.jsonl"
            write_trace(ended, 8, 2)
            floor = serve_window(replay_command(str(ended), loop=False), 1.0, seconds, node_exporter)
            print(row("no batch arriving (the floor: HTTP server, threads)", floor))
            for node in LIVE:
                for feed in feeds:
                    if feed.startswith("live"):
                        command = standin_command(node.entities, plain=feed == "live-plain")
                    else:
                        trace = Path(tmp) / f"node-{node.entities}-{node.interval}.jsonl"
                        if not trace.exists():
                            batches = round(TRACE_SECONDS / node.interval)
                            write_trace(trace, node.entities, batches, node.interval)
                        command = replay_command(str(trace))
                    window = serve_window(command, node.interval, seconds, node_exporter)
                    line = row(f"{node.label}, {feed}", window)
                    if node.goal_percent is not None and feed == "live":
                        cpu = window["ridgeline"].cpu_percent
                        verdict = "meets" if cpu <= node.goal_percent else "misses"
                        line += f" ({verdict} goal <= {node.goal_percent} %)"
                    print(line, flush=True)
    finally:
        if started is not None:
            stop(started[0])


def side_by_side(base: Path, seconds: float, rounds: int, nodes: tuple[Node, ...]) -> None:
    """Part 1's live rows, `base` then this checkout in every round, alternating; medians."""
    started = start_node_exporter()
    node_exporter = (started[0].pid, started[1]) if started is not None else None
    checkouts: tuple[tuple[str, Path | None], ...] = (("before", base.resolve()), ("after", None))
    cpu: dict[tuple[str, str], list[float]] = {}
    nodes_cpu: dict[str, list[float]] = {}
    loads: dict[str, list[float]] = {}
    print(
        f"live budget side by side, {seconds:.0f} s windows, {rounds} alternating rounds, scrape every "
        f"15 s; before: {base}, after: this checkout; CPU as % of one core"
    )
    try:
        for n in range(rounds):
            for node in nodes:
                for name, root in checkouts:
                    command = standin_command(node.entities, root=root)
                    window = serve_window(command, node.interval, seconds, node_exporter, serve_env(root))
                    cpu.setdefault((node.label, name), []).append(window["ridgeline"].cpu_percent)
                    if "node_exporter" in window:
                        nodes_cpu.setdefault(node.label, []).append(window["node_exporter"].cpu_percent)
                    loads.setdefault(node.label, []).append(os.getloadavg()[0])
                    print(f"  round {n + 1}: {row(f'{node.label}, {name}', window)}", flush=True)
    finally:
        if started is not None:
            stop(started[0])
    for node in nodes:
        before, after = cpu[(node.label, "before")], cpu[(node.label, "after")]
        line = (
            f"  {node.label}: before {spread(before)}, after {spread(after)}, "
            f"after/before {statistics.median(after) / statistics.median(before):.2f}"
        )
        if node.label in nodes_cpu:
            line += f"; node_exporter {statistics.median(nodes_cpu[node.label]):.2f} %"
        if node.goal_percent is not None:
            verdict = "meets" if statistics.median(after) <= node.goal_percent else "misses"
            line += f"; {verdict} goal <= {node.goal_percent} %"
        span = loads[node.label]
        print(line + f"; load {min(span):.1f}-{max(span):.1f}", flush=True)


def spread(values: list[float]) -> str:
    """A median with its range: "0.52 % (0.45-0.60)"."""
    return f"{statistics.median(values):.2f} % ({min(values):.2f}-{max(values):.2f})"


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


def live_batch_cost(batches: int) -> None:
    """CPU per batch of the live path in-process, warm, two ways. Batch by batch: a sampler round
    over live_standin's source (read one batch, inference, publish) and a /metrics render every
    150 batches (a 15 s scrape at 10 Hz). Kept batches (the `live` feed's shape): each round reads
    one second of batches (10 at --interval 0.1), folds them and publishes once, with the live
    page's trails observing, and a /metrics render every 15 rounds. The serve windows above pay
    more per batch: each read there follows a sleep."""
    from live_standin import PrebuiltBatches, SecondOfBatches

    from exporter.view.trails import Trails

    catalog = load_catalog()
    print(f"live path in-process, warm ({batches} batches; thread CPU time; load {os.getloadavg()[0]:.1f}):")
    for entities in (8, 56):
        PrebuiltBatches.entity_count = entities
        options = SourceOptions(interval_seconds=0.1)
        config = InferenceConfig(expected_interval_seconds=0.1)
        sampler = Sampler("standin", options, catalog, config, source=PrebuiltBatches(options))
        endpoint = MetricsEndpoint(lambda sampler=sampler: sampler.snapshot)
        for _ in range(20):
            sampler.run_once()
        start = time.thread_time()
        for n in range(batches):
            sampler.run_once()
            if n % 150 == 0:
                endpoint.render(None)
        per_batch = (time.thread_time() - start) / batches
        kept = SecondOfBatches(options)
        trails = Trails()
        kept_sampler = Sampler(
            "standin", options, catalog, config, source=kept, wall_clock=lambda kept=kept: kept.now,
            observers=(trails.observe,),
        )  # fmt: skip
        kept_endpoint = MetricsEndpoint(lambda sampler=kept_sampler: sampler.snapshot)
        for _ in range(2):
            kept_sampler.run_once()
        rounds = max(1, batches // 10)
        start = time.thread_time()
        for n in range(rounds):
            kept_sampler.run_once()
            if n % 15 == 0:
                kept_endpoint.render(None)
        kept_per_batch = (time.thread_time() - start) / (rounds * 10)
        for label, cost in (("batch by batch", per_batch), ("kept batches", kept_per_batch)):
            print(
                f"  {entities:2d} entities, {label:<14}: {cost * 1e6:5.0f} us per batch "
                f"({cost * 1e6 / entities:.1f} us per sample), {cost * 10 * 100:.2f} % of a core at 10 Hz"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument(
        "--feed",
        choices=("both", "all", "live", "live-plain", "replay"),
        default="both",
        help="which feed of each node to run (both: live and replay; all: the three)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="repeat the live budget (compare rounds)")
    parser.add_argument("--base", type=Path, help="a checkout to run side by side with this one (live rows)")
    parser.add_argument("--only", choices=("10hz",), help="with --base: only the --interval 0.1 nodes")
    args = parser.parse_args()
    if args.base is not None:
        nodes = tuple(node for node in LIVE if args.only is None or node.interval < 1)
        side_by_side(args.base, args.seconds, max(1, args.rounds), nodes)
        return
    feeds = {"both": ("live", "replay"), "all": ("live", "live-plain", "replay")}.get(args.feed, (args.feed,))
    rounds = args.rounds if args.seconds > 0 else 0
    for n in range(rounds):
        print(f"round {n + 1} of {args.rounds}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        live_budget(args.seconds, feeds)
    live_batch_cost(2000)
    if args.samples > 0:
        inprocess_run(args.samples)


if __name__ == "__main__":
    main()
