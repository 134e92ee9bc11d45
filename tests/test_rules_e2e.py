"""End-to-end proof of rules/ and grafana/ against a real Prometheus scraping real Ridgeline daemons.

One `ridgeline serve --source replay` per scenario trace (tests/data/scenarios/, one node each),
plus one target where nothing listens, are scraped every second by /usr/bin/prometheus with the
two rule files loaded unchanged. Through Prometheus' HTTP API the test checks that every rule
evaluates cleanly and every recording rule yields series, that exactly the expected alerts are
pending or firing (the `for:` durations are 5-30 minutes, so "pending" is the proof that the
expression matches; the durations themselves are proven by the promtool unit tests), and that every
dashboard query, with its template variables resolved through the dashboard's own variable
queries, runs without error and returns data.

The traces carry recorded timestamps; copies shifted to the present are replayed so that the
series line up with Prometheus' own clock (ridgeline_last_sample_timestamp_seconds reports the
wall-clock arrival of the newest sample either way).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "tests" / "data" / "scenarios"
RULE_FILES = sorted((ROOT / "rules").glob("*.rules.yml"))
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)
SPEED = 10
DEADLINE_SECONDS = 120.0

try:
    import exporter.cli  # noqa: F401  (the daemon under test)

    DAEMON_IMPORT_ERROR = ""
except ImportError as exc:  # pragma: no cover - only while the daemon is missing
    DAEMON_IMPORT_ERROR = str(exc)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None, reason="prometheus binary not found (Debian package `prometheus`)"
    ),
    pytest.mark.skipif(
        bool(DAEMON_IMPORT_ERROR), reason=f"exporter.cli cannot be imported: {DAEMON_IMPORT_ERROR}"
    ),
]

# (alertname, node, gpu) that must be pending or firing; gpu None for target-level alerts.
EXPECTED_ALERTS = {
    ("RidgelineGPUMemoryBound", "decode-serving", "0"),
    ("RidgelineGPUMemoryBound", "decode-serving", "1"),
    ("RidgelineGPULatencyBound", "input-starved", "0"),
    ("RidgelineGPULatencyBound", "input-starved", "1"),
    # frozen counters leave only the GR engine busy, so the daemon calls the GPU latency-bound too
    ("RidgelineGPULatencyBound", "profiling-frozen", "0"),
    ("RidgelineProfilingCountersFrozen", "profiling-frozen", "0"),
    ("RidgelineGPUIdleAllocated", "allocated-idle", "0"),
    ("RidgelineExporterDown", "unreachable", None),
}
# Variable values to pick when the dashboard's own variable query offers them.
PREFERRED = {"cluster": "e2e", "node": "decode-serving", "namespace": "llm", "pod": "decode-0"}
# Grafana's built-in interval variables, as Grafana would fill them for a 1 s scrape interval
# (GPU-hours panel: its panel interval is 1h).
BUILTINS = {"__rate_interval": "1m", "__interval": "1h"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rebased_trace(source: Path, target: Path, now: float) -> None:
    """Copy a JSON Lines trace with its timestamps shifted so that its first sample is `now`."""
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    shift = now - min(r["ts"] for r in records)
    target.write_text("".join(json.dumps({**r, "ts": r["ts"] + shift}) + "\n" for r in records))


@dataclass
class Stack:
    prometheus_url: str
    tmp: Path
    targets: dict[str, str]
    processes: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def api(self, path: str, **params: str) -> Any:
        """GET a Prometheus API path; returns `data`, raising AssertionError with the error text."""
        url = f"{self.prometheus_url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        assert body.get("status") == "success", (
            f"{path} {params}: {body.get('errorType')}: {body.get('error')}"
        )
        return body["data"]

    def query(self, expr: str) -> list[Any]:
        data = self.api("/api/v1/query", query=expr)
        result = data["result"]
        if data["resultType"] == "scalar":
            return [result]
        assert isinstance(result, list)
        return result

    def logs(self) -> str:
        parts = []
        for name, process, log in self.processes:
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            parts.append(f"--- {name} (exit {process.poll()}) ---\n{tail}")
        return "\n".join(parts)


def _wait_for(check: Callable[[], str | None], stack: Stack, what: str) -> None:
    """Poll `check` (None = satisfied, else a description of what is missing) until a deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    missing: str | None = "not checked"
    while time.monotonic() < deadline:
        for name, process, _log in stack.processes:
            if process.poll() is not None:
                pytest.fail(f"{name} exited early while waiting for {what}\n{stack.logs()}")
        try:
            missing = check()
        except (AssertionError, OSError) as exc:
            missing = str(exc)
        if missing is None:
            return
        time.sleep(1.0)
    pytest.fail(f"{what} not reached within {DEADLINE_SECONDS:.0f} s: {missing}\n{stack.logs()}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    assert PROMETHEUS is not None
    tmp = tmp_path_factory.mktemp("rules-e2e")
    now = time.time()
    stack = Stack(prometheus_url="", tmp=tmp, targets={})
    static_configs: list[dict[str, Any]] = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for env_name in [k for k in env if k.startswith("RIDGELINE_")]:
        del env[env_name]
    try:
        for trace in sorted(SCENARIOS.glob("*.jsonl")):
            node = trace.stem
            replay = tmp / trace.name
            _rebased_trace(trace, replay, now)
            address = f"127.0.0.1:{_free_port()}"
            log = tmp / f"{node}.log"
            command = [sys.executable, "-m", "exporter", "serve", "--source", "replay",
                       "--replay", str(replay), "--loop", "--speed", str(SPEED),
                       "--listen", address]  # fmt: skip
            with log.open("wb") as out:
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp)
            stack.processes.append((f"ridgeline {node}", process, log))
            stack.targets[node] = address
            static_configs.append({"targets": [address], "labels": {"cluster": "e2e", "node": node}})
        unreachable = f"127.0.0.1:{_free_port()}"  # nothing listens: RidgelineExporterDown
        stack.targets["unreachable"] = unreachable
        static_configs.append({"targets": [unreachable], "labels": {"cluster": "e2e", "node": "unreachable"}})

        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in RULE_FILES],
            "scrape_configs": [{"job_name": "ridgeline", "static_configs": static_configs}],
        }
        config_file = tmp / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config))
        port = _free_port()
        log = tmp / "prometheus.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config_file}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
            )  # fmt: skip
        stack.processes.append(("prometheus", process, log))
        stack.prometheus_url = f"http://127.0.0.1:{port}"

        def ready() -> str | None:
            with urllib.request.urlopen(f"{stack.prometheus_url}/-/ready", timeout=5) as response:
                return None if response.status == 200 else f"HTTP {response.status}"

        _wait_for(ready, stack, "Prometheus ready")
        yield stack
    finally:
        for _name, process, _log in stack.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for _name, process, _log in stack.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def _rules(stack: Stack) -> list[dict[str, Any]]:
    return [rule for group in stack.api("/api/v1/rules")["groups"] for rule in group["rules"]]


def test_prometheus_loads_every_rule_and_each_evaluates_cleanly(stack: Stack) -> None:
    expected: set[str] = set()
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            expected.update(rule.get("record") or rule["alert"] for rule in group["rules"])

    def evaluated() -> str | None:
        rules = _rules(stack)
        unknown = [r["name"] for r in rules if r["health"] == "unknown"]
        return f"not yet evaluated: {unknown}" if unknown else None

    _wait_for(evaluated, stack, "first evaluation of every rule")
    rules = _rules(stack)
    assert {r["name"] for r in rules} == expected
    unhealthy = {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"}
    assert not unhealthy, unhealthy


def test_every_recording_rule_yields_series(stack: Stack) -> None:
    names = [r["name"] for r in _rules(stack) if r["type"] == "recording"]
    assert names

    nodes = {"decode-serving", "training", "input-starved", "allocated-idle", "profiling-frozen"}
    pods = {"decode-0", "decode-1", "pretrain-0", "resnet-train-0", "notebook-0", "etl-0"}

    def all_present() -> str | None:
        empty = [name for name in names if not stack.query(name)]
        if empty:
            return f"no series for {empty}"
        # The node level carries the node name from the scrape config, the workload level only pods.
        seen_nodes = {s["metric"].get("node") for s in stack.query("instance:ridgeline_flop:rate5m")}
        seen_pods = {s["metric"].get("pod") for s in stack.query("namespace_pod:ridgeline_flop:rate5m")}
        if seen_nodes != nodes or seen_pods != pods:
            return f"nodes {sorted(map(str, seen_nodes))}, pods {sorted(map(str, seen_pods))}"
        return None

    _wait_for(all_present, stack, "series for every recording rule, node and pod")
    # Regime shares of each node add up to 1.
    for sample in stack.query("sum by (node) (instance:ridgeline_regime_time:ratio_rate5m)"):
        assert float(sample["value"][1]) == pytest.approx(1.0), sample


def _active_alerts(stack: Stack) -> set[tuple[str, str | None, str | None]]:
    return {
        (a["labels"]["alertname"], a["labels"].get("node"), a["labels"].get("gpu"))
        for a in stack.api("/api/v1/alerts")["alerts"]
        if a["state"] in {"pending", "firing"}
    }


def test_expected_alerts_are_pending_or_firing_and_no_others(stack: Stack) -> None:
    def expected_active() -> str | None:
        missing = EXPECTED_ALERTS - _active_alerts(stack)
        return f"not active yet: {sorted(missing, key=str)}" if missing else None

    _wait_for(expected_active, stack, "the expected alerts")
    unexpected = _active_alerts(stack) - EXPECTED_ALERTS
    assert not unexpected, f"alerts that should stay quiet are active: {sorted(unexpected, key=str)}"


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*(\w+)\)$", re.DOTALL)


def _substitute(text: str, values: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return values.get(name, match.group(0))  # `$1` in label_replace stays as it is

    return _VARIABLE.sub(replace, text)


def _resolve_variables(stack: Stack, dashboard: dict[str, Any]) -> dict[str, str]:
    """Values for the dashboard's variables, found by running its own label_values() queries."""
    values = dict(BUILTINS)
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = _substitute(variable["query"]["query"], values)
        match = _LABEL_VALUES.match(query)
        assert match, f"{dashboard['uid']}: variable {variable['name']}: unsupported query {query!r}"
        selector, label = match.groups()
        offered = stack.api(f"/api/v1/label/{label}/values", **{"match[]": selector})
        assert offered, f"{dashboard['uid']}: variable {variable['name']} offers no value ({query})"
        preferred = PREFERRED.get(variable["name"])
        if preferred is not None and preferred in offered:
            values[variable["name"]] = preferred
        elif variable.get("includeAll"):
            values[variable["name"]] = variable["allValue"]
        else:
            values[variable["name"]] = offered[0]
    return values


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_every_dashboard_query_runs_and_returns_data(stack: Stack, path: Path) -> None:
    dashboard = json.loads(path.read_text())
    queries = [
        (panel["title"], target["refId"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    assert queries
    resolved: dict[str, str] = {}

    def all_return_data() -> str | None:
        resolved.update(_resolve_variables(stack, dashboard))
        empty = []
        for title, ref, expr in queries:
            if not stack.query(_substitute(expr, resolved)):
                empty.append(f"{title} [{ref}]")
        return f"no data for {empty} (variables {resolved})" if empty else None

    _wait_for(all_return_data, stack, f"data in every panel of {path.name}")
