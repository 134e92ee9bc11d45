"""MIG parents through a real Prometheus (docs/model.md, "One count per physical GPU"): the 8-GPU
node of tests/test_mig_parents.py (two of its cards MIG-partitioned) backfilled for two hours is
8 GPUs and 8 GPU-hours per hour in `ridgeline report --prometheus`, in the rules' per-node counts
and in the Node dashboard's GPU stat.

The history is the real exporter's /metrics page after a minute of samples (the Sampler and
MetricsEndpoint of test_mig_parents.py), carried on at 15 s scrapes: every counter grows at the
rate the page shows, every gauge keeps its value, under the target labels a ServiceMonitor adds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_stack import PROMETHEUS, REQUIRES_PROMETHEUS, Stack, backfilled_prometheus
from test_mig_parents import SECONDS, node_batch

from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sampler import Sampler
from exporter.sources import SourceOptions

pytestmark = REQUIRES_PROMETHEUS

ROOT = Path(__file__).resolve().parents[1]
PROMTOOL = shutil.which("promtool")
HOURS = 2
SCRAPE = 15
TARGET = {"cluster": "mig", "job": "ridgeline", "instance": "node-m:10295", "node": "node-m"}
GPUS = 8


def _exporter_page() -> list[tuple[str, str, dict[str, str], float]]:
    """(family, type, labels, value) of each sample the exporter writes for the node."""
    sampler = Sampler("scrape", SourceOptions(), load_catalog(), InferenceConfig())
    for i in range(SECONDS + 1):
        sampler.ingest(node_batch(1_800_000_000.0 + i))
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    return [
        (family.name, family.type, dict(s.labels), s.value)
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == family.name or (family.type == "counter" and s.name == family.name + "_total")
    ]


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted({**labels, **TARGET}.items()))


def write_history(out: TextIO, start: float, end: float) -> None:
    """OpenMetrics for promtool: counters at their page rate per second since `start`."""
    times = range(int(start), int(end) + 1, SCRAPE)
    families: dict[tuple[str, str], list[tuple[dict[str, str], float]]] = {}
    for name, kind, labels, value in _exporter_page():
        families.setdefault((name, kind), []).append((labels, value))
    for (name, kind), rows in families.items():
        counter = kind == "counter"
        out.write(f"# TYPE {name} {'counter' if counter else 'gauge'}\n")
        sample = f"{name}_total" if counter else name
        for labels, value in rows:
            prefix = f"{sample}{{{_labels(labels)}}} "
            for t in times:
                out.write(f"{prefix}{value / SECONDS * (t - start) if counter else value} {t}\n")
    out.write("# TYPE up gauge\n")
    out.writelines(f"up{{{_labels({})}}} 1 {t}\n" for t in times)
    out.write("# EOF\n")


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, float, float]]:
    """Prometheus over the node's two hours; yields it with the history's start and end."""
    assert PROMETHEUS is not None and PROMTOOL is not None
    tmp = tmp_path_factory.mktemp("mig-prometheus")
    start = (time.time() // 3600 - HOURS - 1) * 3600  # whole hours, ending an hour ago
    end = start + HOURS * 3600
    history = tmp / "history.om"
    with history.open("w") as out:
        write_history(out, start, end)
    with backfilled_prometheus(
        tmp, history, scrape_interval="15s", evaluation_interval="1m", timeout=300
    ) as stack:
        yield stack, start, end


def _value_at(stack: Stack, expr: str, at: float) -> float:
    result = stack.api("/api/v1/query", query=expr, time=str(at))["result"]
    assert len(result) == 1, f"{expr}: {result}"
    return float(result[0]["value"][1])


def test_the_report_counts_8_gpu_hours_per_hour(
    backfilled: tuple[Stack, float, float], tmp_path: Path
) -> None:
    stack, start, end = backfilled
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "report", "--prometheus", stack.prometheus_url, "--by", "node",
         "--start", str(int(start)), "--end", str(int(end)), "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    document: dict[str, Any] = json.loads(out.read_text())
    assert document["fleet"]["gpu_seconds_total"] == pytest.approx(GPUS * HOURS * 3600, rel=0.01)
    (node,) = document["groups"]
    assert node["gpu_seconds_total"] == pytest.approx(GPUS * HOURS * 3600, rel=0.01)
    windows = [sum(point["gpus"].values()) for point in document["timeline"]]
    assert windows, "no timeline"
    assert windows == pytest.approx([GPUS] * len(windows), rel=0.01)


def _rule_exprs(group_prefix: str) -> list[str]:
    groups = yaml.safe_load((ROOT / "rules" / "ridgeline-recording.rules.yml").read_text())["groups"]
    return [r["expr"] for g in groups if g["name"].startswith(group_prefix) for r in g["rules"]]


def test_the_rules_count_8_gpus_and_8_gpu_seconds_per_second(backfilled: tuple[Stack, float, float]) -> None:
    """The node's count rule and the per-workload time rules, evaluated on the exporter's own
    label sets (its per-workload families, which leave the MIG parents out)."""
    stack, _start, end = backfilled
    counts = _rule_exprs("ridgeline-node-now")
    times = _rule_exprs("ridgeline-workload-time-")
    assert counts and times
    gpus = [v for expr in counts for v in _values(stack, f"sum({expr})", end)]
    assert sum(gpus) == pytest.approx(GPUS)
    seconds = [v for expr in times for v in _values(stack, f"sum({expr})", end)]
    assert sum(seconds) == pytest.approx(GPUS, rel=0.01)


def _values(stack: Stack, expr: str, at: float) -> list[float]:
    return [float(s["value"][1]) for s in stack.api("/api/v1/query", query=expr, time=str(at))["result"]]


def test_the_node_dashboard_counts_8_gpus(backfilled: tuple[Stack, float, float]) -> None:
    stack, _start, end = backfilled
    board = json.loads((ROOT / "grafana" / "dashboards" / "ridgeline-node.json").read_text())
    panels = [p for top in board["panels"] for p in (top, *top.get("panels", []))]
    (stat,) = [p for p in panels if p.get("title") == "GPUs" and p["type"] == "stat"]
    expr = stat["targets"][0]["expr"].replace("$instance", TARGET["instance"])
    assert _value_at(stack, expr, end) == GPUS
