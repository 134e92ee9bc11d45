"""CPU of `ridgeline serve --source scrape` reading a loopback dcgm-exporter-shaped page at 10 Hz.

Run: .venv/bin/python benchmarks/bench_scrape_source.py [--seconds 30] [--rounds 3]
     [--collect 1] [--base DIR] [--settle 5]

A page server (this file with --serve, its own process, so its CPU is not counted) answers
/metrics the way dcgm-exporter does: text format 0.0.4, dcgm-exporter's label set on every
series, the DCGM 3/4 default counters (about 40 families a GPU, of which Ridgeline reads 20)
and the profiling fields, for 8 GPUs or 56 MIG instances (8 H100s x 7 1g.10gb). Its values
change every --collect seconds (dcgm-exporter's `-c`, default here 1 s: its own default is 30 s,
which changes the page even less often); between two collections it serves the same bytes.

`ridgeline serve --source scrape --interval 0.1` reads it; prometheus-node-exporter (default
collectors) runs beside it. Each window scrapes both every 15 s, as Prometheus would, and reads
each one's CPU from /proc over the same wall time after a settle. With --base DIR (a checkout of
an older commit, e.g. `git worktree add /tmp/base-sources <commit>`), every round runs the old
code and then this one, alternating, and the medians of the rounds are printed side by side.
With --standin each round also runs benchmarks/live_standin.py's feed (`--source standin`: no
text, new values every tick, kept and folded about once a second, as DCGM's would be): the
serving process's own cost at 10 Hz, which a scrape adds to.
Goals (issue 22): 8 GPUs at 10 Hz <= 0.5 % of one core, 56 MIG instances <= 1 %.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _loopback import free_port, stop
from bench_metrics import wait_http
from bench_steady_state import cpu_seconds, scrape, start_node_exporter

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
SCRAPE_EVERY_SECONDS = 15.0
SETTLE_SECONDS = 5.0
MODEL = "NVIDIA H100 80GB HBM3"

READ = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", 1980),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", 99),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", 612.5),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", 700.0),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", 0),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", 0.97),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", 0.93),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", 0.41),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", 0.62),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", 0.35),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", 0.0),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", 0.12),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", 0.05),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "counter", 1.2e9),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "counter", 2.3e9),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "counter", 4.5e10),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "counter", 4.4e10),
    ("DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "gauge", 0.0),
    ("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "gauge", 0.61),
    ("DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "gauge", 0.0),
)
"""The families Ridgeline reads, each with a typical value."""
UNREAD = (
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", 2619),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", 51),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", 63),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 918273645),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", 0),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 38),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", 0),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", 0),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", 0),
    ("DCGM_FI_DEV_FB_FREE", "gauge", 2310),
    ("DCGM_FI_DEV_FB_USED", "gauge", 79000),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", 512),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", 123456789),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", 0),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", 0),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", 0),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", 0),
    ("DCGM_FI_DEV_SM_CLOCK_MAX", "gauge", 1980),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", 0),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", 0),
)
"""Families of dcgm-exporter's default counters Ridgeline does not read."""


def page(entities: int, version: int) -> bytes:
    """A dcgm-exporter page for `entities` (8 GPUs, or 8 GPUs split into entities / 8 instances
    each), its values nudged by `version` (one collection)."""
    per_gpu = max(1, entities // 8)
    labels = []
    for index in range(entities):
        gpu, instance = divmod(index, per_gpu)
        text = (
            f'gpu="{gpu}",UUID="GPU-{gpu:08x}-1111-2222-3333-444455556666",'
            f'pci_bus_id="00000000:{gpu + 24:02X}:00.0",device="nvidia{gpu}",modelName="{MODEL}"'
        )
        if per_gpu > 1:
            text += f',GPU_I_PROFILE="1g.10gb",GPU_I_ID="{instance + 7}"'
        text += ',Hostname="hgx-h100-01",DCGM_FI_DRIVER_VERSION="570.133.20"'
        text += f',container="main",namespace="ml",pod="train-{index}"'
        labels.append(text)
    lines = []
    for name, kind, value in READ + UNREAD:
        lines.append(f"# HELP {name} {name.lower().replace('_', ' ')}.")
        lines.append(f"# TYPE {name} {kind}")
        for index, label in enumerate(labels):
            nudged = value * (1 + 0.01 * ((version + index) % 5)) if isinstance(value, float) else value
            if isinstance(nudged, float) and value < 1:
                nudged = min(nudged, 1.0)
            shown = f"{nudged:f}" if isinstance(nudged, float) else str(nudged)
            lines.append(f"{name}{{{label}}} {shown}")
    return ("\n".join(lines) + "\n").encode()


def serve(port: int, entities: int, collect: float) -> None:
    """The page server: the page of the current collection, built once per collection."""
    pages: dict[int, bytes] = {}
    lock = threading.Lock()
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as dcgm-exporter's Go server

        def do_GET(self) -> None:
            version = int((time.monotonic() - started) // collect)
            with lock:
                body = pages.get(version)
                if body is None:
                    pages.clear()
                    body = pages[version] = page(entities, version)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def window(pids: dict[str, tuple[int, int]], seconds: float) -> dict[str, float]:
    """CPU (% of one core) of each (pid, port) over one window, each scraped every 15 s."""
    before = {name: cpu_seconds(pid) for name, (pid, _) in pids.items()}
    start = time.monotonic()
    next_scrape = start
    while time.monotonic() - start < seconds:
        if time.monotonic() >= next_scrape:
            for _, port in pids.values():
                scrape(port)
            next_scrape += SCRAPE_EVERY_SECONDS
        time.sleep(0.2)
    wall = time.monotonic() - start
    return {name: 100 * (cpu_seconds(pid) - before[name]) / wall for name, (pid, _) in pids.items()}


def run_serve(
    root: Path,
    url: str,
    seconds: float,
    node: tuple[int, int] | None,
    standin: int | None = None,
    settle: float = SETTLE_SECONDS,
) -> dict[str, float]:
    """One window of `ridgeline serve --source scrape --interval 0.1` from the checkout `root`;
    with `standin`, of `serve --source standin` (benchmarks/live_standin.py) for that many
    entities instead: the same sampler fed without any text, the floor a scrape adds to."""
    port = free_port()
    python = root / ".venv" / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(root))
    if standin is None:
        head = [
            "-m",
            "exporter",
            "--log-level",
            "warning",
            "serve",
            "--source",
            "scrape",
            "--scrape-url",
            url,
        ]
    else:
        head = [str(BENCHMARKS / "live_standin.py"), str(standin), "--log-level", "warning", "serve",
                "--source", "standin"]  # fmt: skip
    process = subprocess.Popen(
        [str(python if python.exists() else sys.executable), *head, "--interval", "0.1",
         "--listen", f"127.0.0.1:{port}"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_http(port, "/metrics")
        time.sleep(settle)
        pids = {"ridgeline": (process.pid, port)}
        if node is not None:
            pids["node_exporter"] = node
        return window(pids, seconds)
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="length of one window")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per node shape")
    parser.add_argument("--collect", type=float, default=1.0, help="seconds between page changes")
    parser.add_argument("--base", type=Path, help="a checkout of the code to compare against")
    parser.add_argument("--entities", type=int, nargs="*", default=[8, 56])
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_SECONDS,
        help="seconds from start to the window: over two collects lets the source learn the cadence",
    )
    parser.add_argument(
        "--standin", action="store_true", help="also run live_standin.py's text-free feed each round"
    )
    parser.add_argument("--serve", type=int, nargs=2, metavar=("PORT", "ENTITIES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.collect)
        return
    node_exporter = start_node_exporter()
    node_process = node_exporter[0] if node_exporter else None
    node = (node_exporter[0].pid, node_exporter[1]) if node_exporter else None
    checkouts = [("before", args.base.resolve())] if args.base else []
    checkouts.append(("now", ROOT))
    print(
        f"serve --source scrape --interval 0.1 of a loopback dcgm-exporter page changing every "
        f"{args.collect:g} s; {args.seconds:g} s windows, {args.rounds} alternating rounds, scraped every "
        f"15 s; CPU as % of one core, medians (range); load average {os.getloadavg()[0]:.2f} at start"
    )
    try:
        for entities in args.entities:
            page_port = free_port()
            server = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--collect",
                    str(args.collect),
                    "--serve",
                    str(page_port),
                    str(entities),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_http(page_port, "/metrics")
                url = f"http://127.0.0.1:{page_port}/metrics"
                size = len(page(entities, 0))
                figures: dict[str, list[float]] = {name: [] for name, _ in checkouts}
                nodes: list[float] = []
                loads: list[float] = []
                if args.standin:
                    figures["stand-in, no scrape"] = []
                for _ in range(args.rounds):
                    for name, root in checkouts:
                        cpu = run_serve(root, url, args.seconds, node, settle=args.settle)
                        figures[name].append(cpu["ridgeline"])
                        if "node_exporter" in cpu:
                            nodes.append(cpu["node_exporter"])
                        loads.append(os.getloadavg()[0])
                    if args.standin:
                        cpu = run_serve(ROOT, url, args.seconds, node, standin=entities)
                        figures["stand-in, no scrape"].append(cpu["ridgeline"])
                label = "8 GPUs" if entities == 8 else f"{entities} MIG instances"
                goal = 0.5 if entities <= 8 else 1.0
                parts = []
                for name, values in figures.items():
                    parts.append(
                        f"{name} {statistics.median(values):.2f} % ({min(values):.2f}-{max(values):.2f})"
                    )
                ne = f"node_exporter {statistics.median(nodes):.2f} %" if nodes else "no node_exporter"
                now = statistics.median(figures["now"])
                if "before" in figures:
                    parts.append(f"now/before {now / statistics.median(figures['before']):.2f}")
                if nodes and statistics.median(nodes) > 0:
                    parts.append(f"now/node_exporter {now / statistics.median(nodes):.1f}x")
                print(
                    f"  {label:<18} page {size / 1024:.0f} KiB: {'; '.join(parts)}; {ne}; "
                    f"goal <= {goal} %; load {min(loads):.1f}-{max(loads):.1f}",
                    flush=True,
                )
            finally:
                stop(server)
    finally:
        if node_process is not None:
            stop(node_process)


if __name__ == "__main__":
    main()
