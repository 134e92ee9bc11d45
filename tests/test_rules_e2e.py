"""End-to-end proof of rules/ and grafana/ against a real Prometheus scraping real Ridgeline daemons,
and once more against VictoriaMetrics.

One `ridgeline serve --source replay` at wall-clock pace per scenario trace
(tests/data/scenarios/, one node each), plus one target where nothing listens, are scraped every
second by /usr/bin/prometheus with the two rule files loaded unchanged, and by Debian's
victoria-metrics with vmalert evaluating the same two files (MetricsQL) every second; every test
below runs against both. Through the HTTP APIs (Prometheus', or VictoriaMetrics' and vmalert's)
the test checks that every rule evaluates cleanly and every recording rule yields series, that
exactly the expected alerts are pending or firing (the `for:` durations are 5-30 minutes, so
"pending" is the proof that the expression matches; the durations themselves are proven by the
promtool unit tests), and that every dashboard query, with its template variables resolved through
the dashboard's own variable queries, runs without error and returns data.

The traces carry recorded timestamps; copies shifted to the present are replayed so that the
series line up with Prometheus' own clock (ridgeline_last_sample_timestamp_seconds reports the
wall-clock arrival of the newest sample either way).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_stack import (
    DASHBOARDS,
    PROMETHEUS,
    REQUIRES_PROMETHEUS,
    RULE_FILES,
    Stack,
    active_alerts,
    dashboard_queries,
    loaded_rules,
    rebased_trace,
    resolve_variables,
    running_stack,
    substitute,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "tests" / "data" / "scenarios"
SPEED = 1
"""Wall-clock pace: the workload findings divide counter rates (FLOP/s) by peaks, and a faster
replay would multiply the rates."""
DEADLINE_SECONDS = 120.0

pytestmark = REQUIRES_PROMETHEUS

# (alertname, where) that must be pending or firing: the node of a per-target alert, the
# namespace or Slurm job of a per-workload one (prometheus_stack.alert_key). One alert per
# namespace: the two latency-bound GPUs of vision/resnet-train-0 make one alert, llm's two decode
# pods one, and the Slurm job's two GPUs one.
EXPECTED_ALERTS = {
    ("RidgelineWorkloadMemoryBound", "llm"),
    ("RidgelineWorkloadMemoryBound", "4242"),
    ("RidgelineWorkloadLatencyBound", "vision"),
    # frozen DRAM and tensor counters at 0 with SMs busy and no FP pipes reported: the regime is
    # unknown (SMs busy on non-tensor work), not latency-bound, so only the frozen alert speaks
    ("RidgelineProfilingCountersFrozen", "profiling-frozen"),
    ("RidgelineWorkloadIdleAllocated", "research"),
    ("RidgelineExporterDown", "unreachable"),
    # the decode GPUs at their power cap, the input-starved ones held by sync boost (field 112)
    ("RidgelineWorkloadClockHeldDown", "llm"),
    ("RidgelineWorkloadClockHeldDown", "4242"),
    ("RidgelineWorkloadClockHeldDown", "vision"),
}
HPC_JOBS = {"slurm-job": "4242"}
"""Scenario -> the Slurm job its daemon's --hpc-job-mapping-dir gives every GPU."""
# Variable values to pick when the dashboard's own variable query offers them.
PREFERRED = {"cluster": "e2e", "node": "decode-serving", "namespace": "llm", "pod": "decode-0"}


def _wait_for(check: Callable[[], str | None], stack: Stack, what: str) -> None:
    """Poll until `check` returns None, within this module's deadline."""
    wait_for(check, stack, what, DEADLINE_SECONDS)


BACKENDS = ("prometheus", "victoriametrics")


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Stack]]:
    """Both backends, started together over the same daemons so that their waits overlap."""
    assert PROMETHEUS is not None
    tmp = tmp_path_factory.mktemp("rules-e2e")
    now = time.time()
    with running_stack(tmp) as stack:
        static_configs: list[dict[str, Any]] = []
        for trace in sorted(SCENARIOS.glob("*.jsonl")):
            node = trace.stem
            replay = tmp / trace.name
            rebased_trace(trace, replay, now)
            hpc: list[str] = []
            if node in HPC_JOBS:
                mapping = tmp / f"{node}-jobs"
                mapping.mkdir()
                for gpu in (0, 1):
                    (mapping / str(gpu)).write_text(HPC_JOBS[node] + "\n")
                hpc = ["--hpc-job-mapping-dir", str(mapping)]
            # --collector.links (off by default): the Node dashboard's link panel must show data too
            address = stack.start_ridgeline(
                node, "--source", "replay", "--replay", str(replay), "--loop", "--speed", str(SPEED),
                "--collector.links", *hpc,
            )  # fmt: skip
            static_configs.append({"targets": [address], "labels": {"cluster": "e2e", "node": node}})
        unreachable = stack.unreachable()  # nothing listens: RidgelineExporterDown
        stack.targets["unreachable"] = unreachable
        static_configs.append({"targets": [unreachable], "labels": {"cluster": "e2e", "node": "unreachable"}})
        stack.start_prometheus(static_configs)
        victoriametrics = stack.start_victoriametrics(static_configs)
        yield {"prometheus": stack, "victoriametrics": victoriametrics}


@pytest.fixture(params=BACKENDS)
def stack(request: pytest.FixtureRequest, stacks: dict[str, Stack]) -> Stack:
    return stacks[request.param]


def test_prometheus_loads_every_rule_and_each_evaluates_cleanly(stack: Stack) -> None:
    expected: set[str] = set()
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            expected.update(rule.get("record") or rule["alert"] for rule in group["rules"])

    def evaluated() -> str | None:
        rules = loaded_rules(stack)
        unknown = [r["name"] for r in rules if r["health"] == "unknown"]
        return f"not yet evaluated: {unknown}" if unknown else None

    _wait_for(evaluated, stack, "first evaluation of every rule")
    rules = loaded_rules(stack)
    assert {r["name"] for r in rules} == expected
    unhealthy = {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"}
    assert not unhealthy, unhealthy


def test_every_recording_rule_yields_series(stack: Stack) -> None:
    names = [r["name"] for r in loaded_rules(stack) if r["type"] == "recording"]
    assert names

    nodes = {"decode-serving", "training", "input-starved", "allocated-idle", "profiling-frozen", "slurm-job"}
    pods = {"decode-0", "decode-1", "pretrain-0", "resnet-train-0", "notebook-0", "etl-0"}

    def all_present() -> str | None:
        empty = [name for name in names if not stack.query(name)]
        if empty:
            return f"no series for {empty}"
        # The node level carries the node name from the scrape config, the workload level only pods.
        seen_nodes = {s["metric"].get("node") for s in stack.query("instance:ridgeline_flop:rate5m")}
        seen_pods = {s["metric"].get("pod") for s in stack.query("namespace_pod:ridgeline_flop:rate5m")}
        seen_jobs = {s["metric"].get("hpc_job") for s in stack.query("hpc_job:ridgeline_flop:rate5m")}
        if seen_nodes != nodes or seen_pods != pods or seen_jobs != set(HPC_JOBS.values()):
            return (
                f"nodes {sorted(map(str, seen_nodes))}, pods {sorted(map(str, seen_pods))}, jobs {seen_jobs}"
            )
        return None

    _wait_for(all_present, stack, "series for every recording rule, node and pod")
    # Regime shares of each node add up to 1.
    for sample in stack.query("sum by (node) (instance:ridgeline_regime_time:ratio_rate5m)"):
        assert float(sample["value"][1]) == pytest.approx(1.0), sample


def test_expected_alerts_are_pending_or_firing_and_no_others(stack: Stack) -> None:
    def expected_active() -> str | None:
        missing = EXPECTED_ALERTS - active_alerts(stack)
        return f"not active yet: {sorted(missing, key=str)}" if missing else None

    _wait_for(expected_active, stack, "the expected alerts")
    unexpected = active_alerts(stack) - EXPECTED_ALERTS
    assert not unexpected, f"alerts that should stay quiet are active: {sorted(unexpected, key=str)}"


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_every_dashboard_query_runs_and_returns_data(stack: Stack, path: Path) -> None:
    dashboard = json.loads(path.read_text())
    queries = dashboard_queries(dashboard)
    assert queries
    resolved: dict[str, str] = {}

    def all_return_data() -> str | None:
        resolved.update(resolve_variables(stack, dashboard, PREFERRED))
        empty = []
        for title, ref, expr in queries:
            if not stack.query(substitute(expr, resolved)):
                empty.append(f"{title} [{ref}]")
        return f"no data for {empty} (variables {resolved})" if empty else None

    _wait_for(all_return_data, stack, f"data in every panel of {path.name}")
