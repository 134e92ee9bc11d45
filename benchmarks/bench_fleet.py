"""Fleet-scale cost of Ridgeline's rules and dashboards on a real Prometheus (issue 14).

Run: nice -n 10 .venv/bin/python benchmarks/bench_fleet.py [--nodes 100 --nodes 1000] [--hours 2]
                                                           [--json results.json] [--workdir DIR]
Rules only, before and after side by side (about 15 minutes at 1,000 nodes on a quiet 2-core machine):
     nice -n 10 .venv/bin/python benchmarks/bench_fleet.py --nodes 1000 --hours 0.25 \
         --recorded-step 0 --dashboards --baseline-rev main --rounds 3 --cycles 4

For each fleet size N (nodes of 8 GPUs each):

1. The fleet: N nodes whose series are exactly what the exporter writes. Every node's 8 GpuStates
   come from the real inference step (exporter.inference.step) on a workload profile (training,
   LLM decode, notebooks, Slurm jobs, free GPUs, a few dead exporters), and their series from
   exporter.exposition.build_families, so a family added, removed or switched off in the exporter
   changes the benchmark too. Target labels (cluster, node, job, instance) are what a
   ServiceMonitor attaches. process_* series are left out (no rule or panel reads them).
2. History: --hours of those series at a 15 s scrape interval, written as OpenMetrics in time
   slices of about 8 M samples and fed to `promtool tsdb create-blocks-from openmetrics` one slice
   at a time, each slice deleted once it is a block, until the history reaches the present.
3. Live: one HTTP server plays every node's /metrics page (one scrape target per node, continuing
   the history's values), and Prometheus scrapes them and evaluates the rule files every 15 s.
4. Recorded history: the recording rules are backfilled over the same hours with `promtool tsdb
   create-blocks-from rules`, one dependency level at a time (a rule that reads a recorded series
   waits until that series' blocks are loaded), at one step per --recorded-step (60 s: a 15 s step
   costs four times as much and the recorded series a panel reads are few, so their cost hardly
   depends on it), so a 24 h panel on recorded series reads history as one on raw series does.
   Then the benchmark waits until Prometheus has compacted the overlapping blocks away, so
   compaction does not run during the measurement.
5. Measures: each rule group's evaluationTime over --cycles evaluations (/api/v1/rules), with the
   1-minute load average when each was seen and Prometheus' own CPU (process_cpu_seconds_total)
   over the round; with --baseline-rev, the rule files of that git revision and the current ones
   are loaded in turn (a configuration reload), --rounds rounds each, alternating, so that both
   meet the same load on a shared machine. Only the rules are swapped: the series are this
   checkout's exporter's, so a change to what the exporter writes is compared by running each
   checkout's own benchmark back to back, mirrored (docs/rules-and-dashboards.md, "Fewer series
   to read"). Then the alerts
   pending or firing (/api/v1/alerts), and every dashboard query as Grafana issues it for the last
   24 h: instant queries at the range's end, range queries with Grafana's $__interval for the
   panel's width (a 1,870 px wide dashboard) and $__rate_interval for a 15 s scrape interval,
   each the median of 3 runs, with the samples Prometheus reports reading (stats=all).

History at 15 s for 2 h of 8,000 GPUs is about 80 M samples; the 24 h range of the panels then
holds 2 h of data, for raw and recorded series alike. Goals (issue 14): every rule group <= 100 ms
at 8,000 GPUs, every fleet dashboard panel <= 500 ms over 24 h. It is a benchmark, not a test:
it prints figures and asserts none. Takes about 8 minutes at N = 100 and 40 at N = 1,000 on 2
cores (the history is 100 M samples, 29 GB of OpenMetrics written and deleted in slices); not in
benchmarks/run for that reason.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from _loopback import free_port, stop

from exporter import __version__, fields
from exporter.catalog import load_catalog
from exporter.exposition import build_families
from exporter.inference import EntityInference, InferenceConfig, step
from exporter.sample import Attribution, Entity, Sample
from exporter.sampling.workloads import WorkloadLedger
from exporter.state import GpuState, Snapshot, SourceHealth

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
SCRAPE = 15
"""Scrape and rule evaluation interval, seconds (Prometheus' and kube-prometheus' common default)."""
GPUS_PER_NODE = 8
CATCH_UP_SECONDS = 120
"""The history stops this close to the present rather than chase it with slices of a scrape or
two, each a promtool run that takes longer than a scrape interval on a loaded machine."""
SLICE_SAMPLES = 8_000_000
"""Samples per OpenMetrics slice: about 1.5 GB of text, a few hundred MB of promtool memory."""
DASHBOARD_WIDTH_PX = 1870
"""A 24-column Grafana row at 1920 px: a 12-column panel is about 935 px wide (its maxDataPoints)."""
JOB = "ridgeline"

# ---- the fleet ----------------------------------------------------------------------------------

CARDS = (("h100-sxm", 0.6), ("a100-sxm4-80gb", 0.25), ("h200", 0.15))
"""Card mix of the fleet: key and share of nodes."""

PROFILES: dict[str, dict[int, float]] = {
    # DCGM readings (fields.py ids) that the inference places in each regime; SM clock added per card.
    "compute": {
        fields.DRAM_ACTIVE: 0.35,
        fields.PIPE_TENSOR_ACTIVE: 0.88,
        fields.GR_ENGINE_ACTIVE: 0.98,
        fields.SM_ACTIVE: 0.95,
        fields.SM_OCCUPANCY: 0.5,
        fields.GPU_UTIL: 100.0,
    },
    "memory": {
        fields.DRAM_ACTIVE: 0.77,
        fields.PIPE_TENSOR_ACTIVE: 0.07,
        fields.GR_ENGINE_ACTIVE: 0.96,
        fields.SM_ACTIVE: 0.8,
        fields.SM_OCCUPANCY: 0.3,
        fields.GPU_UTIL: 100.0,
    },
    "latency": {
        fields.DRAM_ACTIVE: 0.2,
        fields.PIPE_TENSOR_ACTIVE: 0.15,
        fields.GR_ENGINE_ACTIVE: 0.9,
        fields.SM_ACTIVE: 0.4,
        fields.SM_OCCUPANCY: 0.15,
        fields.GPU_UTIL: 95.0,
    },
    "idle": {
        fields.DRAM_ACTIVE: 0.0,
        fields.PIPE_TENSOR_ACTIVE: 0.0,
        fields.GR_ENGINE_ACTIVE: 0.01,
        fields.SM_ACTIVE: 0.0,
        fields.SM_OCCUPANCY: 0.0,
        fields.GPU_UTIL: 0.0,
    },
}
EXPECTED_REGIME = {"compute": "compute_bound", "memory": "memory_bound", "latency": "latency_bound",
                   "idle": "idle"}  # fmt: skip


@dataclass(frozen=True)
class GpuPlan:
    profile: str
    attribution: Attribution | None = None
    hpc_job: str | None = None


@dataclass(frozen=True)
class NodePlan:
    index: int
    cluster: str
    name: str
    card: str
    kind: str
    gpus: tuple[GpuPlan, ...] = ()

    @property
    def instance(self) -> str:
        return f"{self.name}:10295"

    @property
    def target_labels(self) -> dict[str, str]:
        return {"cluster": self.cluster, "node": self.name, "job": JOB, "instance": self.instance}


def _pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    roll, total = rng.random(), 0.0
    for name, share in weighted:
        total += share
        if roll < total:
            return name
    return weighted[-1][0]


def plan_node(index: int, nodes: int, seed: int) -> NodePlan:
    """One node of the fleet: its card, its kind of workload and what each GPU runs for whom.

    Training jobs span 4 nodes (one 8-GPU pod per node), Slurm jobs 2 nodes (hpc_job label, no
    pod), serving pods hold 1 or 2 GPUs, notebooks 1; about 2% of exporters are down.
    """
    rng = random.Random(seed * 1_000_003 + index)
    cluster = "gpu-east" if index < (nodes + 1) // 2 else "gpu-west"
    card = _pick(rng, CARDS)
    kind = _pick(
        rng,
        (
            ("down", 0.02),
            ("training", 0.40),
            ("serving", 0.30),
            ("interactive", 0.10),
            ("hpc", 0.10),
            ("free", 0.08),
        ),
    )
    name = f"gpu-{index:05d}"
    gpus: list[GpuPlan] = []
    if kind == "training":
        job = index // 4
        profile = _pick(random.Random(seed + job), (("compute", 0.7), ("latency", 0.2), ("memory", 0.1)))
        pod = Attribution("train", f"pretrain-{job:04d}-worker-{index % 4}", "trainer")
        gpus = [GpuPlan(profile, pod)] * GPUS_PER_NODE
    elif kind == "serving":
        while len(gpus) < GPUS_PER_NODE:
            size = min(rng.choice((1, 1, 2)), GPUS_PER_NODE - len(gpus))
            profile = _pick(rng, (("memory", 0.75), ("compute", 0.15), ("idle", 0.10)))
            pod = Attribution("serve", f"llm-{rng.randrange(40):02d}-{index:05d}-{len(gpus)}", "server")
            gpus.extend([GpuPlan(profile, pod)] * size)
    elif kind == "interactive":
        for g in range(GPUS_PER_NODE):
            profile = _pick(rng, (("idle", 0.5), ("latency", 0.4), ("compute", 0.1)))
            gpus.append(GpuPlan(profile, Attribution("research", f"notebook-{index:05d}-{g}", "notebook")))
    elif kind == "hpc":
        job = str(700_000 + index // 2)
        profile = _pick(
            random.Random(seed + index // 2), (("compute", 0.5), ("memory", 0.25), ("latency", 0.25))
        )
        gpus = [GpuPlan(profile, hpc_job=job)] * GPUS_PER_NODE
    elif kind == "free":
        gpus = [GpuPlan("idle")] * GPUS_PER_NODE
    return NodePlan(index=index, cluster=cluster, name=name, card=card, kind=kind, gpus=tuple(gpus))


def profile_inferences() -> dict[tuple[str, str], EntityInference]:
    """(card, profile) -> a steady-state EntityInference from the real inference step.

    Totals are rescaled to one second (integrated_seconds = 1), so each counter row's value is its
    rate per second.
    """
    catalog = load_catalog()
    config = InferenceConfig()
    out: dict[tuple[str, str], EntityInference] = {}
    for card_key, _share in CARDS:
        card = catalog.lookup(card_key)
        entity = Entity(0, "GPU-template", card.nvml_names[0])
        for profile, values in PROFILES.items():
            readings = {**values, fields.SM_CLOCK: float(card.max_sm_clock_mhz or 1980.0)}
            state: EntityInference | None = None
            for second in range(60):
                state = step(
                    state, Sample(timestamp=float(second), entity=entity, values=readings), card, config
                )
            assert state is not None and state.estimate is not None
            assert state.estimate.regime == EXPECTED_REGIME[profile], (
                card_key,
                profile,
                state.estimate.regime,
            )
            totals = state.totals
            seconds = totals.integrated_seconds
            per_second = totals._replace(
                regime_seconds=None
                if totals.regime_seconds is None
                else {r: s / seconds for r, s in totals.regime_seconds.items()},
                flop_total=None if totals.flop_total is None else totals.flop_total / seconds,
                dram_bytes_total=None
                if totals.dram_bytes_total is None
                else totals.dram_bytes_total / seconds,
                integrated_seconds=1.0,
            )
            out[(card_key, profile)] = state._replace(totals=per_second)
    return out


# ---- the node's series, as the exporter writes them ----------------------------------------------

COUNTER, CLOCK, NOISY, CONSTANT = "counter", "clock", "noisy", "constant"
NOISE = [1.0 + 0.03 * math.sin(2 * math.pi * k / 40) for k in range(40)]
"""Gauges wander +-3% with a 10-minute period (40 scrapes), so they compress like real readings."""


@dataclass(frozen=True)
class Series:
    labels: str
    """The exporter's own labels, rendered `name="value",...` (target labels are added separately)."""
    kind: str
    value: float
    """CONSTANT/NOISY: the value; COUNTER: the rate per second."""
    birth: float = 0.0
    phase: int = 0

    def at(self, t: float) -> float:
        if self.kind == COUNTER:
            return self.value * (t - self.birth)
        if self.kind == CLOCK:
            return t
        if self.kind == NOISY:
            return self.value * NOISE[(int(t) // SCRAPE + self.phase) % len(NOISE)]
        return self.value


@dataclass(frozen=True)
class FamilySeries:
    name: str
    type: str
    samples: tuple[tuple[str, Series], ...]
    """(sample name, series)."""


def _render_labels(labels: dict[str, str]) -> str:
    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items()))


def node_series(
    plan: NodePlan, inferences: dict[tuple[str, str], EntityInference], born: float
) -> list[FamilySeries]:
    """The node's families from exporter.exposition.build_families, with a value model per series."""
    if plan.kind == "down":
        return []
    gpus = []
    for g, gpu in enumerate(plan.gpus):
        template = inferences[(plan.card, gpu.profile)]
        entity = Entity(
            g, f"GPU-{plan.index:05d}{g:03d}-5a1e-4c0b-9d2e-{plan.index * 8 + g:012x}", template.entity.model
        )
        gpus.append(
            GpuState(
                entity=entity,
                attribution=gpu.attribution,
                inference=template._replace(entity=entity),
                hpc_job=gpu.hpc_job,
            )
        )
    source = SourceHealth(name="dcgm", up=True, samples_total=1, last_sample_wall_time=born)
    snapshot = Snapshot(
        generation=1,
        source=source,
        gpus=tuple(gpus),
        version=__version__,
        workloads=WorkloadLedger().update(gpus),  # the per-workload families the rules read
    )
    out = []
    for number, family in enumerate(build_families(snapshot)):
        samples = []
        for row in family.rows:
            labels = _render_labels({**row.labels, **dict(row.extra)})
            if family.type == "counter":
                kind = COUNTER
            elif row.sample == "ridgeline_last_sample_timestamp_seconds":
                kind = CLOCK
            elif (
                row.sample.endswith("_ratio") or row.sample == "ridgeline_arithmetic_intensity_flop_per_byte"
            ):
                kind = NOISY
            else:
                kind = CONSTANT
            phase = (plan.index * 31 + number * 7 + len(samples)) % len(NOISE)
            samples.append((row.sample, Series(labels, kind, row.value, born, phase)))
        out.append(FamilySeries(family.name, family.type, tuple(samples)))
    return out


@dataclass
class Fleet:
    nodes: list[NodePlan]
    series: dict[str, list[FamilySeries]]
    """Node name -> its families (empty for a dead exporter)."""

    @property
    def series_count(self) -> int:
        return sum(len(f.samples) for families in self.series.values() for f in families) + len(self.nodes)

    @property
    def gpus(self) -> int:
        return sum(len(n.gpus) for n in self.nodes)


def build_fleet(nodes: int, seed: int, history_start: float) -> Fleet:
    inferences = profile_inferences()
    plans = [plan_node(i, nodes, seed) for i in range(nodes)]
    # Exporters started up to four days before the history: their counters are already large.
    series = {p.name: node_series(p, inferences, history_start - (p.index % 97) * 3600.0) for p in plans}
    return Fleet(plans, series)


def _fmt(value: float) -> str:
    return repr(value) if value != int(value) or abs(value) >= 1e15 else str(int(value))


# ---- history: OpenMetrics slices through promtool ------------------------------------------------


def write_slice(fleet: Fleet, path: Path, times: list[int]) -> int:
    """One OpenMetrics file with every series of the fleet at `times`; returns its sample count.

    Series-major (each series' samples in time order, each family's series together), as
    OpenMetrics requires and promtool's importer needs.
    """
    stamps = [str(t) for t in times]
    by_family: dict[str, list[tuple[str, str, Series]]] = {}
    types: dict[str, str] = {}
    for plan in fleet.nodes:
        target = _render_labels(plan.target_labels)
        for family in fleet.series[plan.name]:
            types[family.name] = family.type
            rows = by_family.setdefault(family.name, [])
            for sample, series in family.samples:
                rows.append((sample, f"{target},{series.labels}" if series.labels else target, series))
    written = 0
    with path.open("w", buffering=1 << 22) as out:
        for name, rows in by_family.items():
            out.write(f"# TYPE {name} {types[name]}\n")
            for sample, labels, series in rows:
                prefix = f"{sample}{{{labels}}} "
                if series.kind == CONSTANT:
                    value = _fmt(series.value) + " "
                    out.write("".join([prefix + value + s + "\n" for s in stamps]))
                else:
                    out.write(
                        "".join(
                            [
                                f"{prefix}{_fmt(series.at(t))} {s}\n"
                                for t, s in zip(times, stamps, strict=True)
                            ]
                        )
                    )
                written += len(times)
        out.write("# TYPE up gauge\n")
        for plan in fleet.nodes:
            value = "0 " if plan.kind == "down" else "1 "
            prefix = f"up{{{_render_labels(plan.target_labels)}}} "
            out.write("".join([prefix + value + s + "\n" for s in stamps]))
            written += len(times)
        out.write("# EOF\n")
    return written


@dataclass
class History:
    start: int
    end: int
    samples: int = 0
    text_bytes: int = 0
    generate_seconds: float = 0.0
    promtool_seconds: float = 0.0
    slices: int = 0


def backfill_history(fleet: Fleet, start: int, tsdb: Path, work: Path) -> History:
    """Slices from `start` until the present, each written, turned into blocks and deleted."""
    per_slice = max(4, SLICE_SAMPLES // max(1, fleet.series_count))
    history = History(start=start, end=start)
    t = start
    while True:
        present = int(time.time() - 5) // SCRAPE * SCRAPE
        if t > present or (history.slices and present - t < CATCH_UP_SECONDS):
            break
        times = list(range(t, min(t + per_slice * SCRAPE, present + SCRAPE), SCRAPE))
        path = work / f"slice-{history.slices:03d}.om"
        began = time.monotonic()
        history.samples += write_slice(fleet, path, times)
        history.text_bytes += path.stat().st_size
        history.generate_seconds += time.monotonic() - began
        began = time.monotonic()
        run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tsdb)], quiet=True)
        history.promtool_seconds += time.monotonic() - began
        path.unlink()
        history.slices += 1
        history.end = times[-1]
        t = times[-1] + SCRAPE
        print(
            f"  history slice {history.slices}: {len(times)} scrapes up to "
            f"{time.strftime('%H:%M:%S', time.localtime(history.end))}, "
            f"{history.samples / 1e6:.1f} M samples so far",
            flush=True,
        )
    return history


def run(command: list[str], *, quiet: bool = False) -> str:
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(command[:4])} failed ({proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return "" if quiet else proc.stdout


# ---- live: every node's /metrics page ------------------------------------------------------------


def render_page(families: list[FamilySeries], t: float) -> bytes:
    """Text format 0.0.4 as the exporter writes it (counter families as NAME_total)."""
    lines = []
    for family in families:
        name = family.name + "_total" if family.type == "counter" else family.name
        lines.append(f"# TYPE {name} {family.type}\n")
        lines.extend(
            f"{sample}{{{s.labels}}} {_fmt(s.at(t))}\n" if s.labels else f"{sample} {_fmt(s.at(t))}\n"
            for sample, s in family.samples
        )
    return "".join(lines).encode()


def serve_fleet(fleet: Fleet, port: int) -> None:
    """Serves /node/NAME for every node (503 for a dead exporter) until terminated."""
    pages = fleet.series
    dead = {p.name for p in fleet.nodes if p.kind == "down"}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = self.path.rsplit("/", 1)[-1]
            if name in dead or name not in pages:
                self.send_response(503 if name in dead else 404)
                self.end_headers()
                return
            body = render_page(pages[name], time.time())
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer.request_queue_size = 1024
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


# ---- Prometheus ----------------------------------------------------------------------------------


@dataclass
class Prometheus:
    url: str
    tsdb: Path
    process: subprocess.Popen[bytes]
    log: Path
    config_file: Path
    config: dict[str, Any]

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=300) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        if body.get("status") != "success":
            raise RuntimeError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def self_metrics(self) -> dict[str, float]:
        """Prometheus' own /metrics, unlabelled series only (and summed per name otherwise)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as response:
            text = response.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name = re.split(r"[{ ]", line, maxsplit=1)[0]
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    def load_rules(self, rule_files: list[Path]) -> None:
        """Points Prometheus at `rule_files` and reloads its configuration (SIGHUP)."""
        reloaded = "prometheus_config_last_reload_success_timestamp_seconds"
        before = self.self_metrics().get(reloaded, 0.0)
        self.config["rule_files"] = [str(p) for p in rule_files]
        self.config_file.write_text(yaml.safe_dump(self.config))
        time.sleep(1.1)  # the reload timestamp counts whole seconds
        self.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            own = self.self_metrics()
            if own.get("prometheus_config_last_reload_successful", 1.0) == 0.0:
                break
            if own.get(reloaded, 0.0) > before:
                return
            time.sleep(1)
        raise SystemExit(f"prometheus did not load {rule_files[0].parent}:\n{self.log.read_text()[-2000:]}")


def start_prometheus(
    fleet: Fleet, rule_files: list[Path], tsdb: Path, work: Path, exporter_port: int
) -> Prometheus:
    targets = [
        {
            "targets": [f"127.0.0.1:{exporter_port}"],
            "labels": {**p.target_labels, "__metrics_path__": f"/node/{p.name}"},
        }
        for p in fleet.nodes
    ]
    config = {
        "global": {
            "scrape_interval": f"{SCRAPE}s",
            "scrape_timeout": "10s",
            "evaluation_interval": f"{SCRAPE}s",
        },
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": JOB, "static_configs": targets}],
    }
    config_file = work / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    log = work / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={tsdb}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=30d",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prometheus = Prometheus(f"http://127.0.0.1:{port}", tsdb, process, log, config_file, config)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"prometheus exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=5) as response:
                if response.status == 200:
                    return prometheus
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit("prometheus not ready within 300 s")


def _blocks(tsdb: Path) -> list[tuple[int, int]]:
    out = []
    for meta in tsdb.glob("*/meta.json"):
        if meta.parent.name.startswith(("wal", "chunks_head")) or meta.parent.suffix:
            continue
        data = json.loads(meta.read_text())
        out.append((int(data["minTime"]), int(data["maxTime"])))
    return sorted(out)


def _overlaps(blocks: list[tuple[int, int]]) -> bool:
    return any(b[0] < a[1] for a, b in itertools.pairwise(blocks))


def wait_for_blocks(prometheus: Prometheus, timeout: float = 900.0) -> float:
    """Until Prometheus has loaded every block in its directory and none overlap (compacted)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        blocks = _blocks(prometheus.tsdb)
        loaded = prometheus.self_metrics().get("prometheus_tsdb_blocks_loaded", -1)
        if loaded == len(blocks) and not _overlaps(blocks):
            return time.monotonic() - began
        time.sleep(5)
    print(f"  (blocks still overlapping after {timeout:.0f} s: compaction may run during the measurement)")
    return time.monotonic() - began


def recording_levels(rule_files: list[Path]) -> list[list[dict[str, Any]]]:
    """The recording rules by dependency depth: level 0 reads only raw series, level k reads k-1."""
    rules = [
        rule
        for path in rule_files
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    ]
    by_name = {rule["record"]: rule for rule in rules}
    depth: dict[str, int] = {}

    def depth_of(name: str) -> int:
        if name not in depth:
            used = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", by_name[name]["expr"])) & set(by_name)
            depth[name] = 1 + max((depth_of(u) for u in used - {name}), default=-1)
        return depth[name]

    levels: list[list[dict[str, Any]]] = []
    for rule in rules:
        d = depth_of(rule["record"])
        levels.extend([] for _ in range(d + 1 - len(levels)))
        levels[d].append(rule)
    return levels


def backfill_recordings(
    prometheus: Prometheus, rule_files: list[Path], start: int, end: int, work: Path, step: int
) -> float:
    """Seconds spent; a level whose backfill fails is reported and the measurement goes on."""
    began = time.monotonic()
    for level, rules in enumerate(recording_levels(rule_files)):
        rule_file = work / f"level-{level}.rules.yml"
        rule_file.write_text(
            yaml.safe_dump({"groups": [{"name": f"backfill-level-{level}", "rules": rules}]})
        )
        out = work / f"level-{level}-blocks"
        try:
            run(
                [
                    PROMTOOL,
                    "tsdb",
                    "create-blocks-from",
                    "rules",
                    f"--start={start}",
                    f"--end={end}",
                    f"--eval-interval={step}s",
                    f"--url={prometheus.url}",
                    f"--output-dir={out}",
                    "--quiet",
                    str(rule_file),
                ],
                quiet=True,
            )
        except SystemExit as exc:
            print(
                f"  recorded history level {level} FAILED (measuring without it): {str(exc)[-300:]}",
                flush=True,
            )
        moved = 0
        for block in out.iterdir() if out.exists() else ():
            if (block / "meta.json").exists():
                block.rename(prometheus.tsdb / block.name)
                moved += 1
        shutil.rmtree(out, ignore_errors=True)
        print(f"  recorded history level {level}: {len(rules)} rules, {moved} blocks", flush=True)
        wait_for_blocks(prometheus)
    return time.monotonic() - began


# ---- measuring -----------------------------------------------------------------------------------


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def _epoch(stamp: str) -> float:
    """An RFC 3339 time as the rules API writes it (nanoseconds, Z or an offset) -> Unix seconds."""
    match = _STAMP.match(stamp)
    if match is None:
        return 0.0
    whole, fraction, zone = match.groups()
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(whole + zone).timestamp() + float(fraction or 0.0)


@dataclass
class Round:
    """One variant's rules loaded, `cycles` evaluations of each group."""

    variant: str
    groups: dict[str, list[float]]
    """Group -> evaluationTime (ms) of each evaluation."""
    loads: dict[str, list[float]]
    """Group -> the 1-minute load average when each of those evaluations was seen."""
    rules: dict[str, list[float]]
    """Rule -> evaluationTime (ms) at each poll."""
    cpu_cores: float
    """Prometheus' CPU seconds per second over the round (process_cpu_seconds_total)."""


def measure_round(prometheus: Prometheus, variant: str, cycles: int, after: float) -> Round:
    """Evaluations that began after `after` (Unix seconds), until every group has `cycles` of them."""
    seen: dict[str, dict[str, tuple[float, float]]] = {}
    rules: dict[str, dict[str, float]] = {}
    cpu_before, began = prometheus.self_metrics().get("process_cpu_seconds_total", 0.0), time.monotonic()
    deadline = began + cycles * SCRAPE * 4 + 120
    while time.monotonic() < deadline:
        load = os.getloadavg()[0]
        for group in prometheus.api("/api/v1/rules")["groups"]:
            name = f"{Path(group['file']).name}: {group['name']}"
            evaluated = group.get("lastEvaluation", "")
            if _epoch(evaluated) <= after or evaluated in seen.get(name, {}):
                continue
            seen.setdefault(name, {})[evaluated] = (float(group["evaluationTime"]) * 1000, load)
            for rule in group["rules"]:
                key = f"{group['name']}: {rule['name']}"
                rules.setdefault(key, {})[f"{evaluated}/{len(rules.get(key, {}))}"] = (
                    float(rule.get("evaluationTime", 0.0)) * 1000
                )
        if seen and all(len(v) >= cycles for v in seen.values()):
            break
        time.sleep(2)
    cpu = prometheus.self_metrics().get("process_cpu_seconds_total", 0.0) - cpu_before
    kept = {name: list(times.values())[-cycles:] for name, times in sorted(seen.items())}
    return Round(
        variant=variant,
        groups={name: [ms for ms, _ in pairs] for name, pairs in kept.items()},
        loads={name: [load for _, load in pairs] for name, pairs in kept.items()},
        rules={name: list(times.values()) for name, times in rules.items()},
        cpu_cores=cpu / max(1e-9, time.monotonic() - began),
    )


def alternate_rounds(
    prometheus: Prometheus, variants: dict[str, list[Path]], rounds: int, cycles: int
) -> list[Round]:
    """`rounds` rounds of each variant, alternating in mirrored pairs (A B B A A B ...), so both see
    the same load: a load or a warm-up that drifts through the run (the first rounds after the
    start are the slowest) favours neither variant, as A B A B would favour B."""
    out: list[Round] = []
    loaded: str | None = None
    order = list(variants.items())
    for number in range(rounds):
        for variant, files in order if number % 2 == 0 else order[::-1]:
            if loaded != variant:
                if loaded is not None or len(variants) > 1:
                    prometheus.load_rules(files)
                loaded = variant
                # the reloaded groups' first evaluation reads recorded series the other variant left
                time.sleep(SCRAPE)
            out.append(measure_round(prometheus, variant, cycles, after=time.time()))
            print(
                f"  round {len(out)}: {variant}, {len(out[-1].groups)} groups, "
                f"load {os.getloadavg()[0]:.2f}, prometheus {out[-1].cpu_cores:.2f} cores",
                flush=True,
            )
    return out


def rule_errors(prometheus: Prometheus) -> list[str]:
    return [
        f"{rule['name']}: {rule.get('lastError')}"
        for group in prometheus.api("/api/v1/rules")["groups"]
        for rule in group["rules"]
        if rule.get("health") != "ok"
    ]


def alert_counts(prometheus: Prometheus) -> dict[str, int]:
    counts: dict[str, int] = {}
    for alert in prometheus.api("/api/v1/alerts")["alerts"]:
        if alert["state"] in {"pending", "firing"}:
            counts[alert["labels"]["alertname"]] = counts.get(alert["labels"]["alertname"], 0) + 1
    return dict(sorted(counts.items()))


_ROUND = (  # Grafana's roundInterval (public/app/core/utils/rangeutil / @grafana/data rangeutil)
    (0.015, 0.01),
    (0.035, 0.02),
    (0.075, 0.05),
    (0.15, 0.1),
    (0.35, 0.2),
    (0.75, 0.5),
    (1.5, 1),
    (3.5, 2),
    (7.5, 5),
    (12.5, 10),
    (17.5, 15),
    (25, 20),
    (45, 30),
    (90, 60),
    (210, 120),
    (450, 300),
    (1050, 600),
    (2100, 1200),
    (4500, 3600),
    (9000, 7200),
    (16200, 10800),
    (32400, 21600),
    (86400, 43200),
)


def grafana_interval(range_seconds: float, width_columns: int, min_interval: float) -> float:
    raw = range_seconds / max(1.0, DASHBOARD_WIDTH_PX * width_columns / 24)
    rounded = next((to for below, to in _ROUND if raw < below), 86400.0)
    return max(rounded, min_interval)


def _duration(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text))


def _prom_duration(seconds: float) -> str:
    return f"{int(seconds)}s"


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def substitute(text: str, values: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)


@dataclass
class QueryTime:
    dashboard: str
    panel: str
    ref: str
    kind: str
    ms: float
    samples: int | None
    series: int
    error: str = ""


@dataclass
class RuleAlone:
    """One rule's expression run as an instant query on its own, nothing else evaluating beside it
    but the other groups: what the expression costs, against what its group's evaluation took."""

    variant: str
    group: str
    rule: str
    ms: float
    """Median wall time of the query (HTTP included) over 3 runs."""
    preparation_ms: float
    """Prometheus' queryPreparationTime: the series lookup (the index, the matchers' postings)."""
    inner_ms: float
    """Prometheus' innerEvalTime: reading the samples and computing."""
    samples: int
    series: int


def rules_alone(prometheus: Prometheus, variant: str, rule_files: list[Path]) -> Iterator[RuleAlone]:
    """Every rule of `rule_files` as an instant query now (stats=all): whether a slow group is slow
    for its own expression, or for the CPU it waited for while the other groups ran (the rounds'
    evaluationTime is wall time, and groups of one interval start at offsets hashed from their names)."""
    for path in rule_files:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                params = {"query": rule["expr"], "time": f"{time.time():.3f}", "stats": "all"}
                ms, data = _timed(prometheus, "/api/v1/query", params)
                stats = data.get("stats", {})
                timings = stats.get("timings", {})
                yield RuleAlone(
                    variant=variant,
                    group=group["name"],
                    rule=rule.get("record") or rule.get("alert", "?"),
                    ms=ms,
                    preparation_ms=1000 * float(timings.get("queryPreparationTime", 0.0)),
                    inner_ms=1000 * float(timings.get("innerEvalTime", 0.0)),
                    samples=int(stats.get("samples", {}).get("totalQueryableSamples", 0)),
                    series=len(data["result"]) if isinstance(data["result"], list) else 1,
                )


@dataclass
class Measured:
    nodes: int
    gpus: int
    series_per_gpu: float
    series_per_node: float
    history: dict[str, Any]
    head_series: float
    rss_bytes: float
    rounds: list[Round]
    alerts: dict[str, int]
    queries: list[QueryTime] = field(default_factory=list)
    alone: list[RuleAlone] = field(default_factory=list)
    rule_errors: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)


def _timed(prometheus: Prometheus, path: str, params: dict[str, str], runs: int = 3) -> tuple[float, Any]:
    times, data = [], None
    for _ in range(runs):
        began = time.perf_counter()
        data = prometheus.api(path, **params)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), data


def dashboard_queries(
    prometheus: Prometheus, path: Path, end: float, range_seconds: float
) -> Iterator[QueryTime]:
    """Every variable query and panel target of one dashboard, as Grafana would run them."""
    dashboard = json.loads(path.read_text())
    start = end - range_seconds
    values: dict[str, str] = {"__range": _prom_duration(range_seconds)}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = substitute(variable["query"]["query"], values)
        match = re.match(r"^label_values\((.*),\s*(\w+)\)$", query, re.DOTALL)
        assert match, query
        selector, label = match.groups()
        params = {"match[]": selector, "start": str(int(start)), "end": str(int(end))}
        ms, offered = _timed(prometheus, f"/api/v1/label/{label}/values", params)
        yield QueryTime(
            dashboard["uid"], f"variable ${variable['name']}", "-", "labels", ms, None, len(offered)
        )
        values[variable["name"]] = ".*" if variable.get("includeAll") else (sorted(offered) or [""])[0]
    panels = [p for top in dashboard["panels"] for p in (top, *top.get("panels", []))]
    for panel in panels:
        for target in panel.get("targets", []):
            interval = grafana_interval(
                range_seconds, panel["gridPos"]["w"], _duration(panel.get("interval") or "15s")
            )
            builtins = {
                "__interval": _prom_duration(interval),
                "__interval_ms": str(int(interval * 1000)),
                "__rate_interval": _prom_duration(max(interval + SCRAPE, 4 * SCRAPE)),
            }
            expr = substitute(target["expr"], {**values, **builtins})
            if target.get("instant"):
                kind, api, params = "instant", "/api/v1/query", {"query": expr, "time": str(end)}
            else:
                aligned_end = math.floor(end / interval) * interval
                kind = f"range {builtins['__interval']}"
                api = "/api/v1/query_range"
                params = {
                    "query": expr,
                    "start": str(math.floor(start / interval) * interval),
                    "end": str(aligned_end),
                    "step": str(interval),
                }
            try:
                ms, data = _timed(prometheus, api, {**params, "stats": "all"})
                samples = data.get("stats", {}).get("samples", {}).get("totalQueryableSamples")
                yield QueryTime(
                    dashboard["uid"], panel["title"], target["refId"], kind, ms, samples, len(data["result"])
                )
            except RuntimeError as exc:
                yield QueryTime(
                    dashboard["uid"], panel["title"], target["refId"], kind, 0.0, None, 0, str(exc)[:120]
                )


def measure(nodes: int, args: argparse.Namespace) -> Measured:
    phases: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{nodes}-", dir=args.workdir))
    tsdb = work / "tsdb"
    tsdb.mkdir()
    start = (int(time.time()) - int(args.hours * 3600)) // SCRAPE * SCRAPE
    began = time.monotonic()
    rules = copied_rules(args.rules, work / "current-rules")  # edits during the run change nothing
    fleet = build_fleet(nodes, args.seed, float(start))
    phases["fleet model s"] = time.monotonic() - began
    print(f"N={nodes}: {fleet.gpus} GPUs, {fleet.series_count} series ({work})", flush=True)
    history = backfill_history(fleet, start, tsdb, work)
    port = free_port()
    server = multiprocessing.get_context("fork").Process(target=serve_fleet, args=(fleet, port), daemon=True)
    server.start()
    prometheus: Prometheus | None = None
    try:
        prometheus = start_prometheus(fleet, rules, tsdb, work, port)
        if args.recorded_step > 0:
            phases["recorded history s"] = backfill_recordings(
                prometheus, rules, start + 300, history.end, work, args.recorded_step
            )
        phases["compaction wait s"] = wait_for_blocks(prometheus)
        began = time.monotonic()
        load_before = os.getloadavg()[0]
        time.sleep(2 * SCRAPE)  # every target scraped and every group evaluated on the settled TSDB
        variants = {"current": rules}
        if args.baseline_rev:
            variants = {args.baseline_rev: baseline_rules(args.baseline_rev, work), **variants}
        rounds = alternate_rounds(prometheus, variants, args.rounds, args.cycles)
        alerts = alert_counts(prometheus)
        alone = [a for variant, files in variants.items() for a in rules_alone(prometheus, variant, files)]
        own = prometheus.self_metrics()
        end = time.time()
        queries = [
            q
            for path in args.dashboards
            for q in dashboard_queries(prometheus, path, end, args.range_hours * 3600)
        ]
        errors = rule_errors(prometheus)
        phases["measure s"] = time.monotonic() - began
        phases["load average at start"] = load_before
        phases["load average at end"] = os.getloadavg()[0]
        gpus = fleet.gpus or 1
        per_gpu = (
            sum(
                len(f.samples)
                for fam in fleet.series.values()
                for f in fam
                if f.samples and "gpu=" in f.samples[0][1].labels
            )
            / gpus
        )
        return Measured(
            nodes=nodes,
            gpus=fleet.gpus,
            series_per_gpu=per_gpu,
            series_per_node=(fleet.series_count - per_gpu * gpus) / max(1, nodes),
            history={
                "samples": history.samples,
                "text_gb": history.text_bytes / 1e9,
                "slices": history.slices,
                "generate_s": history.generate_seconds,
                "promtool_s": history.promtool_seconds,
                "hours": (history.end - history.start) / 3600,
            },
            head_series=own.get("prometheus_tsdb_head_series", 0.0),
            rss_bytes=own.get("process_resident_memory_bytes", 0.0),
            rounds=rounds,
            alerts=alerts,
            queries=queries,
            alone=alone,
            rule_errors=errors,
            phases=phases,
        )
    finally:
        if prometheus is not None:
            stop(prometheus.process)
        server.terminate()
        server.join(10)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def copied_rules(files: list[Path], into: Path) -> list[Path]:
    into.mkdir(exist_ok=True)
    for path in files:
        shutil.copyfile(path, into / path.name)
    return [into / path.name for path in files]


def baseline_rules(revision: str, work: Path) -> list[Path]:
    """The rule files of rules/ at a git revision, written under `work`."""
    listed = run(["git", "-C", str(ROOT), "ls-tree", "--name-only", revision, "rules/"])
    names = [n for n in listed.split() if n.endswith(".rules.yml")]
    if not names:
        raise SystemExit(f"no rules/*.rules.yml at git revision {revision!r}")
    out = work / "baseline-rules"
    out.mkdir(exist_ok=True)
    for name in names:
        (out / Path(name).name).write_text(run(["git", "-C", str(ROOT), "show", f"{revision}:{name}"]))
    return sorted(out.iterdir())


@dataclass(frozen=True)
class GroupFigures:
    median_ms: float
    max_ms: float
    load: float
    """Mean 1-minute load average at the evaluations measured."""
    cores: float
    """Prometheus' CPU (cores) over the rounds they were measured in."""


def group_figures(rounds: list[Round], variant: str) -> dict[str, GroupFigures]:
    times: dict[str, list[float]] = {}
    loads: dict[str, list[float]] = {}
    cores: dict[str, list[float]] = {}
    for r in (r for r in rounds if r.variant == variant):
        for name, ms in r.groups.items():
            times.setdefault(name, []).extend(ms)
            loads.setdefault(name, []).extend(r.loads[name])
            cores.setdefault(name, []).append(r.cpu_cores)
    return {
        name: GroupFigures(
            median_ms=statistics.median(ms),
            max_ms=max(ms),
            load=statistics.fmean(loads[name]),
            cores=statistics.fmean(cores[name]),
        )
        for name, ms in sorted(times.items())
    }


BUDGET_MS = 100.0
"""Issue 14's and 24's budget per rule group."""


def report_groups(rounds: list[Round]) -> None:
    """Each group's median and max evaluation time per variant, its share of the variant's sum of
    medians (what ranks the groups when the load makes absolute figures mean little), with the load
    and Prometheus CPU."""
    variants = list(dict.fromkeys(r.variant for r in rounds))
    figures = {v: group_figures(rounds, v) for v in variants}
    sums = {v: sum(g.median_ms for g in f.values()) or 1.0 for v, f in figures.items()}
    names = sorted({name for f in figures.values() for name in f})
    head = "".join(f" | {v[:22]:>22} {'max':>6} {'share':>6} {'load':>5} {'cores':>5}" for v in variants)
    print(f"\n{'rule group':58}{head}")
    for name in names:
        cells = ""
        for v in variants:
            g = figures[v].get(name)
            cells += (
                f" | {g.median_ms:22.1f} {g.max_ms:6.0f} {100 * g.median_ms / sums[v]:5.1f}%"
                f" {g.load:5.2f} {g.cores:5.2f}"
                if g
                else f" | {'-':>22} {'':6} {'':6} {'':5} {'':5}"
            )
        print(f"{name[:58]:58}{cells}")
    for v in variants:
        f = figures[v]
        over = sorted((g.median_ms, n) for n, g in f.items() if g.median_ms > BUDGET_MS)
        mine = [r for r in rounds if r.variant == v]
        print(
            f"{v}: {len(over)} of {len(f)} groups over {BUDGET_MS:.0f} ms (median), sum of medians "
            f"{sum(g.median_ms for g in f.values()):,.0f} ms, slowest "
            f"{max((g.median_ms for g in f.values()), default=0.0):,.0f} ms; prometheus "
            f"{statistics.fmean(r.cpu_cores for r in mine):.2f} cores, load average "
            f"{statistics.fmean(x for r in mine for ls in r.loads.values() for x in ls):.2f} "
            f"over {len(mine)} round(s)"
        )
    rules: dict[str, list[float]] = {}
    for r in (r for r in rounds if r.variant == variants[-1]):
        for name, ms in r.rules.items():
            rules.setdefault(name, []).extend(ms)
    slowest = sorted(((statistics.median(v), k) for k, v in rules.items() if v), reverse=True)[:12]
    print(f"\n{'slowest rules of ' + variants[-1] + ' (median over the polls)':70} {'ms':>8}")
    for ms, name in slowest:
        print(f"{name[:70]:70} {ms:8.1f}")


def report_alone(alone: list[RuleAlone], rounds: list[Round]) -> None:
    """Per group and variant: its evaluation in the rounds beside its rules' queries run alone."""
    print(
        f"\n{'rule group (rules run alone as instant queries)':48} {'variant':>12} {'in rounds':>9} "
        f"{'alone':>7} {'prep':>7} {'inner':>7} {'samples':>10} {'series':>7}"
    )
    groups: dict[tuple[str, str], list[RuleAlone]] = {}
    for a in alone:
        groups.setdefault((a.group, a.variant), []).append(a)
    figures = {v: group_figures(rounds, v) for v in {v for _, v in groups}}
    for (group, variant), rules in sorted(groups.items()):
        evaluated = next((g.median_ms for n, g in figures[variant].items() if n.endswith(f": {group}")), None)
        print(
            f"{group[:48]:48} {variant[:12]:>12} "
            f"{'-' if evaluated is None else f'{evaluated:.1f}':>9} {sum(r.ms for r in rules):7.1f} "
            f"{sum(r.preparation_ms for r in rules):7.1f} {sum(r.inner_ms for r in rules):7.1f} "
            f"{sum(r.samples for r in rules):10,} {sum(r.series for r in rules):7,}"
        )


def report(m: Measured) -> None:
    h = m.history
    print(
        f"\n== N = {m.nodes} nodes, {m.gpus} GPUs, {m.series_per_gpu:.1f} series per GPU, "
        f"{m.series_per_node:.1f} more per node"
    )
    print(
        f"history: {h['hours']:.2f} h, {h['samples'] / 1e6:.1f} M samples, "
        f"{h['text_gb']:.2f} GB OpenMetrics in "
        f"{h['slices']} slices; generating {h['generate_s']:.0f} s, promtool {h['promtool_s']:.0f} s"
    )
    print(
        f"prometheus: {m.head_series:,.0f} head series, RSS {m.rss_bytes / 2**30:.2f} GiB; "
        + ", ".join(f"{k} {v:.1f}" for k, v in m.phases.items())
    )
    report_groups(m.rounds)
    report_alone(m.alone, m.rounds)
    total = sum(m.alerts.values())
    print(f"\nalerts pending or firing: {total}")
    for name, count in m.alerts.items():
        print(f"  {name:44} {count:6d}")
    if m.rule_errors:
        print("rules with errors:", *m.rule_errors, sep="\n  ")
    print(f"\n{'dashboard / panel [ref]':66} {'query':>11} {'ms':>8} {'samples':>13} {'series':>7}")
    for q in m.queries:
        label = f"{q.dashboard.removeprefix('ridgeline-')} / {q.panel} [{q.ref}]"
        samples = f"{q.samples:,}" if q.samples is not None else "-"
        tail = f"  ERROR {q.error}" if q.error else ""
        print(f"{label[:66]:66} {q.kind:>11} {q.ms:8.1f} {samples:>13} {q.series:7d}{tail}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--nodes", type=int, action="append", help="fleet sizes in nodes of 8 GPUs (default 100 and 1000)"
    )
    parser.add_argument("--hours", type=float, default=2.0, help="history backfilled before the measurement")
    parser.add_argument("--range-hours", type=float, default=24.0, help="dashboard time range")
    parser.add_argument("--cycles", type=int, default=6, help="rule evaluations measured per group and round")
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds per rule variant, alternating with --baseline-rev"
    )
    parser.add_argument(
        "--baseline-rev",
        help="also measure rules/ at this git revision, alternating rounds with the current rules",
    )
    parser.add_argument(
        "--recorded-step",
        type=int,
        default=60,
        help="step of the recorded history, seconds (0: no recorded history, rules only)",
    )
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--rules", type=Path, nargs="+", default=sorted((ROOT / "rules").glob("*.rules.yml")))
    parser.add_argument(
        "--dashboards",
        type=Path,
        nargs="*",
        default=sorted((ROOT / "grafana" / "dashboards").glob("*.json")),
        help="dashboards whose queries are timed (none: `--dashboards` alone)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where the TSDB and slices go (default: TMPDIR)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    results = []
    for nodes in args.nodes or [100, 1000]:
        m = measure(nodes, args)
        report(m)
        results.append(m)
        if args.json:  # after each size: a later one may not finish
            args.json.write_text(
                json.dumps(
                    [
                        r.__dict__
                        | {
                            "queries": [q.__dict__ for q in r.queries],
                            "alone": [a.__dict__ for a in r.alone],
                            "rounds": [x.__dict__ for x in r.rounds],
                        }
                        for r in results
                    ],
                    indent=1,
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
