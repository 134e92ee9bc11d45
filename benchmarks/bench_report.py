#!/usr/bin/env python3
"""A week's fleet report over 1,000 nodes x 8 GPUs: time and peak memory of `ridgeline report` and
of the Prometheus queries behind it, on this machine. Goal: the report process <= 60 s, <= 512 MiB.

A week of raw per-GPU series for that fleet cannot be generated here (2 h of them at 15 s were
26 GB of OpenMetrics text and 7 GB of RSS to backfill), and it is not what a report reads: over a
week it reads the recording rules' series, whose count follows workloads, not GPUs. So the
history (tests/fleet_history.py; each node runs one 8-GPU pod at a time, 6-48 h each, spread over
40 namespaces) is backfilled as:

* the recorded series the report reads, for the whole week — namespace_pod:* and cluster:*,
  one evaluation a minute, the values rules/ridgeline-recording.rules.yml would record (rates
  over the 5 minutes before each evaluation, computed from the schedules in closed form);
* the raw counters for the last --raw-hours (default 2), for every GPU, scraped every 15 s.

Both are streamed into `promtool tsdb create-blocks-from openmetrics` in parts — one 2-hour block
range of recorded series, or 1,000 GPUs of raw series, at a time — and each part's text is
deleted once promtool has read it, so the disk holds one part of text at most.

Then Prometheus (Debian's) serves the blocks and `ridgeline report --since 7d --by namespace`
runs as a child process; its wall time and peak RSS (getrusage of the child) are measured, and
Prometheus' CPU seconds and peak RSS over the same span are read from /proc. The report's own
log says how long its queries took. Cost against scale: --since 1d and 3d over the same data
(days), and the same week over a fleet of --small-nodes nodes (GPUs).

    nice -n 10 .venv/bin/python benchmarks/bench_report.py [--nodes 1000] [--small-nodes 250]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import fleet_history  # noqa: E402  (tests/ holds the one generator the tests check)

from exporter.report.series import CLUSTER, NAMESPACE_POD  # noqa: E402

EVAL_SECONDS = 60
WINDOW = 300.0
PART_SECONDS = 7200
RAW_GPUS_PER_PART = 1000
REPORT_GOAL_SECONDS = 60.0
REPORT_GOAL_MIB = 512.0


def _fmt(value: float) -> str:
    return "0" if value == 0 else f"{value:.9g}"


def _overlap(t: float, start: float, end: float) -> float:
    return max(0.0, min(t, end) - max(t - WINDOW, start)) / WINDOW


def write_recorded_part(fleet: fleet_history.Fleet, out: TextIO, lo: float, hi: float) -> int:
    """The recorded series of evaluations in [lo, hi) for a whole-node fleet: one pod per node
    segment holding all its GPUs, plus the cluster totals. Returns the samples written."""
    evals = [float(t) for t in range(math.ceil(lo / EVAL_SECONDS) * EVAL_SECONDS, int(hi), EVAL_SECONDS)]
    if not evals:
        return 0
    nodes: dict[str, list[fleet_history.Gpu]] = {}
    for gpu in fleet.gpus:
        nodes.setdefault(gpu.node, []).append(gpu)
    cluster = {"cluster": fleet.cluster}
    total_seconds = {r: [0.0] * len(evals) for r in fleet_history.REGIMES}
    total_flop = [0.0] * len(evals)
    total_dram = [0.0] * len(evals)
    total_gpus: dict[tuple[str, str], list[float]] = {}
    rows: dict[str, list[str]] = {NAMESPACE_POD.regime_seconds: [], NAMESPACE_POD.flop: [],
                                  NAMESPACE_POD.dram_bytes: [], NAMESPACE_POD.gpus: []}  # fmt: skip
    written = 0
    for _node, gpus in sorted(nodes.items()):
        first = gpus[0]
        count = len(gpus)
        for segment in first.segments:
            if segment.end + WINDOW <= lo or segment.start >= hi:
                continue
            flop_rate = segment.tk * first.peak * count
            dram_rate = segment.dram * first.bandwidth * count
            gpus_key = (segment.regime, first.card)
            labels = None
            if segment.pod is not None and segment.namespace is not None:
                labels = fleet_history._label_text(
                    {"namespace": segment.namespace, "pod": segment.pod, **cluster}
                )
            for i, t in enumerate(evals):
                if t < segment.start or t - WINDOW >= segment.end:
                    continue
                share = _overlap(t, segment.start, segment.end)
                busy = segment.start <= t < segment.end
                total_seconds[segment.regime][i] += count * share
                total_flop[i] += flop_rate * share
                total_dram[i] += dram_rate * share
                if busy:
                    total_gpus.setdefault(gpus_key, [0.0] * len(evals))[i] += count
                if labels is None:
                    continue
                stamp = int(t)
                for regime in fleet_history.REGIMES:
                    value = count * share if regime == segment.regime else 0.0
                    rows[NAMESPACE_POD.regime_seconds].append(
                        f'{{{labels},regime="{regime}"}} {_fmt(value)} {stamp}'
                    )
                rows[NAMESPACE_POD.flop].append(f"{{{labels}}} {_fmt(flop_rate * share)} {stamp}")
                rows[NAMESPACE_POD.dram_bytes].append(f"{{{labels}}} {_fmt(dram_rate * share)} {stamp}")
                if busy:
                    card = f'card="{first.card}",{labels},regime="{segment.regime}"'
                    rows[NAMESPACE_POD.gpus].append(f"{{{card}}} {count} {stamp}")
    # a family's lines together, each series' samples in time order (sorted by series, then time)
    for name, lines in rows.items():
        out.write(f"# TYPE {name} gauge\n")
        lines.sort(key=lambda line: line.rsplit(" ", 2)[0])
        for line in lines:
            out.write(name + line + "\n")
        written += len(lines)
    stamp_of = [int(t) for t in evals]
    label = fleet_history._label_text(cluster)
    out.write(f"# TYPE {CLUSTER.regime_seconds} gauge\n")
    for regime in fleet_history.REGIMES:
        for value, stamp in zip(total_seconds[regime], stamp_of, strict=True):
            out.write(f'{CLUSTER.regime_seconds}{{{label},regime="{regime}"}} {_fmt(value)} {stamp}\n')
    for name, series in ((CLUSTER.flop, total_flop), (CLUSTER.dram_bytes, total_dram)):
        out.write(f"# TYPE {name} gauge\n")
        for value, stamp in zip(series, stamp_of, strict=True):
            out.write(f"{name}{{{label}}} {_fmt(value)} {stamp}\n")
    out.write(f"# TYPE {CLUSTER.gpus} gauge\n")
    for (regime, card), series in sorted(total_gpus.items()):
        for value, stamp in zip(series, stamp_of, strict=True):
            if value:
                out.write(
                    f'{CLUSTER.gpus}{{card="{card}",{label},regime="{regime}"}} {_fmt(value)} {stamp}\n'
                )
    written += len(evals) * 6 + sum(1 for s in total_gpus.values() for v in s if v)
    return written


def _parts(fleet: fleet_history.Fleet, raw_hours: float) -> Iterator[tuple[str, object]]:
    for lo in range(int(fleet.start), int(fleet.end) + 1, PART_SECONDS):
        yield "recorded", (float(lo), float(min(lo + PART_SECONDS, fleet.end + 1)))
    gpus = fleet.gpus
    for i in range(0, len(gpus), RAW_GPUS_PER_PART):
        yield "raw", gpus[i : i + RAW_GPUS_PER_PART]


def backfill(fleet: fleet_history.Fleet, tsdb: Path, work: Path, raw_hours: float) -> dict[str, float]:
    """Write the history part by part into promtool; the text of each part is deleted after."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found: run scripts/bootstrap --test"
    figures = {
        "samples": 0.0,
        "text_bytes": 0.0,
        "generate_s": 0.0,
        "promtool_s": 0.0,
        "promtool_max_rss_mib": 0.0,
    }
    raw_start = fleet.end - raw_hours * 3600.0
    for kind, what in _parts(fleet, raw_hours):
        part = work / "part.om"
        started = time.monotonic()
        with part.open("w") as out:
            if kind == "recorded":
                lo, hi = what  # type: ignore[misc]
                figures["samples"] += write_recorded_part(fleet, out, lo, hi)
            else:
                sub = fleet_history.Fleet(
                    start=fleet.start,
                    end=fleet.end,
                    scrape_seconds=fleet.scrape_seconds,
                    gpus=tuple(what),  # type: ignore[arg-type]
                )
                figures["samples"] += fleet_history.write_raw(sub, out, raw_start, fleet.end, workloads=False)
            out.write("# EOF\n")
        figures["generate_s"] += time.monotonic() - started
        figures["text_bytes"] += part.stat().st_size
        started = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        done = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(part), str(tsdb)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        figures["promtool_s"] += time.monotonic() - started
        figures["promtool_max_rss_mib"] = max(
            figures["promtool_max_rss_mib"],
            max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024,
        )
        part.unlink()
    return figures


def _proc(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
    return cpu, hwm


def worst_error(document: dict[str, object], fleet: fleet_history.Fleet) -> float:
    """The largest |reported - known| GPU-seconds of a namespace's regime, over its known total."""
    rng = document["range"]  # type: ignore[index]
    truth = fleet_history.truth(fleet, ("namespace",), rng["start_timestamp"], rng["end_timestamp"])  # type: ignore[index]
    groups = {g["labels"].get("namespace", ""): g for g in document["groups"]}  # type: ignore[attr-defined]
    worst = 0.0
    for key, known in truth.items():
        group = groups.get(key[0])
        for regime in fleet_history.REGIMES:
            got = group["gpu_seconds"][regime] if group else 0.0
            worst = max(worst, abs(got - known.gpu_seconds[regime]) / max(known.total, 1.0))
    return worst


def run_report(
    url: str, fleet: fleet_history.Fleet, since: str, out: Path, prometheus_pid: int
) -> dict[str, float]:
    """One `ridgeline report` child: wall time, peak RSS, and Prometheus' CPU while it ran."""
    end = fleet.end
    cpu_before, _ = _proc(prometheus_pid)
    command = [
        sys.executable, "-m", "exporter", "report", "--prometheus", url, "--since", since,
        "--end", str(int(end)), "--by", "namespace",
        "--json", str(out.with_suffix(".json")), "--out", str(out.with_suffix(".html")),
    ]  # fmt: skip
    # a fresh child per run: wait4 gives its own peak RSS
    started = time.monotonic()
    child = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    stderr = child.stderr.read() if child.stderr else ""
    assert os.waitstatus_to_exitcode(status) == 0, stderr[-2000:]
    cpu_after, hwm = _proc(prometheus_pid)
    found = re.search(r"(\d+) queries to .* in ([\d.]+) s", stderr)
    document = json.loads(out.with_suffix(".json").read_text())
    return {
        "wall_s": wall,
        "rss_mib": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "queries": float(found.group(1)) if found else math.nan,
        "query_wall_s": float(found.group(2)) if found else math.nan,
        "prometheus_cpu_s": cpu_after - cpu_before,
        "prometheus_peak_rss_mib": hwm,
        "groups": float(len(document["groups"])),
        "gpu_hours": document["fleet"]["gpu_seconds_total"] / 3600.0,
        "worst_error": worst_error(document, fleet),
    }


def build(
    nodes: int, days: float, raw_hours: float, work: Path
) -> tuple[fleet_history.Fleet, Path, dict[str, float]]:
    end = (time.time() // 3600 - 1) * 3600
    start = end - days * 86400
    fleet = fleet_history.make_fleet(
        nodes=nodes,
        gpus_per_node=8,
        start=start,
        hours=days * 24,
        min_segment_hours=6,
        max_segment_hours=48,
        whole_nodes=True,
        teams=10,
    )
    tsdb = work / f"tsdb-{nodes}"
    figures = backfill(fleet, tsdb, work, raw_hours)
    return fleet, tsdb, figures


def serve(tsdb: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    prometheus = shutil.which("prometheus")
    assert prometheus, "prometheus not found: run scripts/bootstrap --test"
    port = _free_port()
    config = work / "prometheus.yml"
    config.write_text("global: {scrape_interval: 15s, evaluation_interval: 1m}\n")
    process = subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d", "--log.level=error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    time.sleep(5)  # let the head and block loading settle before measuring
    return process, url


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--small-nodes", type=int, default=250, help="a second, smaller fleet (0: none)")
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--raw-hours", type=float, default=2.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    results: list[tuple[str, dict[str, float]]] = []
    try:
        for nodes in [n for n in (args.small_nodes, args.nodes) if n]:
            started = time.monotonic()
            fleet, tsdb, fill = build(nodes, args.days, args.raw_hours, work)
            size = sum(f.stat().st_size for f in tsdb.rglob("*") if f.is_file()) / 2**20
            print(
                f"backfill {nodes} nodes x 8 GPUs, {args.days:g} d recorded + {args.raw_hours:g} h raw: "
                f"{fill['samples'] / 1e6:.1f} M samples, "
                f"{fill['text_bytes'] / 2**30:.2f} GiB of text in parts, "
                f"generate {fill['generate_s']:.0f} s, promtool {fill['promtool_s']:.0f} s "
                f"(peak RSS {fill['promtool_max_rss_mib']:.0f} MiB), TSDB {size:.0f} MiB, "
                f"total {time.monotonic() - started:.0f} s",
                flush=True,
            )
            process, url = serve(tsdb, work)
            try:
                spans = ["1d", "3d", f"{args.days:g}d"] if nodes == args.nodes else [f"{args.days:g}d"]
                for since in spans:
                    figures = run_report(url, fleet, since, work / f"report-{nodes}-{since}", process.pid)
                    results.append((f"{nodes * 8} GPUs, --since {since}", figures))
            finally:
                process.terminate()
                process.wait(timeout=60)
            shutil.rmtree(tsdb)
        print()
        print(
            f"{'report':<26} {'wall s':>7} {'RSS MiB':>8} {'CPU s':>6} {'queries':>7} {'query s':>8} "
            f"{'prom CPU s':>10} {'prom RSS MiB':>12} {'groups':>6} {'GPU-h':>9} {'worst %':>8}"
        )
        for name, f in results:
            print(
                f"{name:<26} {f['wall_s']:7.1f} {f['rss_mib']:8.0f} {f['cpu_s']:6.1f} "
                f"{f['queries']:7.0f} {f['query_wall_s']:8.1f} {f['prometheus_cpu_s']:10.1f} "
                f"{f['prometheus_peak_rss_mib']:12.0f} {f['groups']:6.0f} {f['gpu_hours']:9.0f} "
                f"{100 * f['worst_error']:8.2f}"
            )
        full = results[-1][1]
        met = full["wall_s"] <= REPORT_GOAL_SECONDS and full["rss_mib"] <= REPORT_GOAL_MIB
        print(
            "\nworst %: the largest error of a namespace's GPU-seconds (of its total) against the "
            "known history.\n"
            f"goal for the report process: <= {REPORT_GOAL_SECONDS:g} s and <= {REPORT_GOAL_MIB:g} MiB; "
            f"measured {full['wall_s']:.1f} s and {full['rss_mib']:.0f} MiB ({'met' if met else 'NOT met'})"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
