"""A real Prometheus (with rules/ loaded) scraping real `ridgeline serve` daemons, for end-to-end tests.

Shared by tests/test_rules_e2e.py (scenario traces, on Prometheus and on VictoriaMetrics),
tests/test_dashboards_demo.py (the bundled demo) and tests/test_alertmanager.py: starting and
stopping the processes, the Prometheus-compatible HTTP API, bounded polling, and running a
dashboard's queries with its template variables resolved through the dashboard's own
`label_values()` variable queries, as Grafana would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import listening_port, stop_process
from replay_lines import read_samples, write_samples

ROOT = Path(__file__).resolve().parents[1]
RULE_FILES = sorted((ROOT / "rules").glob("*.rules.yml"))
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)
VICTORIA_METRICS = shutil.which("victoria-metrics")
VMALERT = shutil.which("vmalert")
# Grafana's built-in interval variables, as Grafana would fill them for a 1 s scrape interval
# (GPU-hours panel: its panel interval is 1h).
BUILTINS = {"__rate_interval": "1m", "__interval": "1h", "__interval_ms": "3600000"}

REQUIRES_PROMETHEUS = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(
        PROMETHEUS is None, reason="prometheus binary not found (Debian package `prometheus`)"
    ),
]
"""pytestmark for a module that runs the real Prometheus against `ridgeline serve`."""


@dataclass
class Stack:
    """The running processes of one test module and the Prometheus they feed.

    `prometheus_url` answers the query API (Prometheus, or VictoriaMetrics in a view made by
    start_victoriametrics); `rules_url` the rules and alerts API when another process serves it
    (vmalert).
    """

    prometheus_url: str
    tmp: Path
    targets: dict[str, str] = field(default_factory=dict)
    processes: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)
    rules_url: str = ""
    held: list[socket.socket] = field(default_factory=list)

    def api(self, path: str, *, base: str | None = None, **params: str) -> Any:
        """GET a Prometheus API path; returns `data`, raising AssertionError with the error text."""
        url = f"{base or self.prometheus_url}{path}"
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
        """An instant query's samples (a scalar comes back as a one-element list)."""
        data = self.api("/api/v1/query", query=expr)
        result = data["result"]
        if data["resultType"] == "scalar":
            return [result]
        assert isinstance(result, list)
        return result

    def logs(self) -> str:
        """The tail of every process' log, for failure messages."""
        parts = []
        for name, process, log in self.processes:
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            parts.append(f"--- {name} (exit {process.poll()}) ---\n{tail}")
        return "\n".join(parts)

    def start_ridgeline(self, name: str, *args: str) -> str:
        """Start `ridgeline serve ARGS` on a loopback port of its own; returns HOST:PORT."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIDGELINE_")}
        env["PYTHONUNBUFFERED"] = "1"
        log = self.tmp / f"{name}.log"
        command = [sys.executable, "-m", "exporter", "serve", *args, "--web.listen-address", "127.0.0.1:0"]
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.tmp)
        self.processes.append((f"ridgeline {name}", process, log))
        address = f"127.0.0.1:{self.port_of(process, f'ridgeline {name}')}"
        self.targets[name] = address
        return address

    def start(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        """Start a process with its output in a log under tmp; stopped with the stack."""
        log = self.tmp / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=self.tmp)
        self.processes.append((name, process, log))
        return process

    def start_listening(self, name: str, command: list[str]) -> str:
        """Start a server whose command names port 0 (127.0.0.1:0); returns the URL of the port
        it got."""
        return f"http://127.0.0.1:{self.port_of(self.start(name, command), name)}"

    def port_of(self, process: subprocess.Popen[bytes], name: str) -> int:
        try:
            return listening_port(process, name)
        except AssertionError as exc:
            pytest.fail(f"{exc}\n{self.logs()}")

    def unreachable(self) -> str:
        """HOST:PORT where nothing listens until the stack stops (a scrape target that is down)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))  # bound, never listening: refused, and no one else gets it
        self.held.append(sock)
        return f"127.0.0.1:{sock.getsockname()[1]}"

    def wait_ready(self, url: str, what: str) -> None:
        """Wait until GET url answers 200 (a server's readiness endpoint)."""

        def ready() -> str | None:
            with urllib.request.urlopen(url, timeout=5) as response:
                return None if response.status == 200 else f"HTTP {response.status}"

        wait_for(ready, self, f"{what} ready", 60.0)

    def start_prometheus(
        self,
        static_configs: list[dict[str, Any]],
        job: str = "ridgeline",
        *,
        rule_files: list[Path] = RULE_FILES,
        alertmanager: str | None = None,
    ) -> None:
        """Start Prometheus (1 s scrape and evaluation, rules/ unchanged) and wait until ready.

        With `alertmanager` (HOST:PORT), firing alerts are sent there.
        """
        assert PROMETHEUS is not None
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": job, "static_configs": static_configs}],
        }
        if alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        self.prometheus_url = self.start_prometheus_with("prometheus", config)

    def start_prometheus_with(self, name: str, config: dict[str, Any]) -> str:
        """Start one more Prometheus named `name` (its own config file and TSDB under tmp) with
        `config`, wait until ready and return its URL; the stack's own URL is left as it is."""
        assert PROMETHEUS is not None
        config_file = self.tmp / f"{name}.yml"
        config_file.write_text(yaml.safe_dump(config))
        url = self.start_listening(
            name,
            [PROMETHEUS, f"--config.file={config_file}", f"--storage.tsdb.path={self.tmp / f'{name}-tsdb'}",
             "--web.listen-address=127.0.0.1:0", "--log.level=warn"],
        )  # fmt: skip
        self.wait_ready(f"{url}/-/ready", name)
        return url

    def start_victoriametrics(
        self,
        static_configs: list[dict[str, Any]],
        job: str = "ridgeline",
        *,
        rule_files: list[Path] = RULE_FILES,
    ) -> Stack:
        """VictoriaMetrics scraping the same targets every second, vmalert evaluating the rules.

        vmalert queries VictoriaMetrics every second and writes the recording rules' results back
        to it. Returns a view of this stack (same processes) whose queries go to VictoriaMetrics
        and whose rules and alerts come from vmalert. Alerts are read from vmalert's API; its
        notifier points where nothing listens (tests/test_alertmanager.py covers notification).
        """
        if VICTORIA_METRICS is None or VMALERT is None:
            pytest.fail("victoria-metrics/vmalert not found (Debian package victoria-metrics): "
                        "run scripts/bootstrap --test")  # fmt: skip
        scrape = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
            "scrape_configs": [{"job_name": job, "static_configs": static_configs}],
        }
        scrape_file = self.tmp / "victoriametrics-scrape.yml"
        scrape_file.write_text(yaml.safe_dump(scrape))
        vm_url = self.start_listening(
            "victoria-metrics",
            [VICTORIA_METRICS, f"-storageDataPath={self.tmp / 'victoriametrics'}",
             "-httpListenAddr=127.0.0.1:0", f"-promscrape.config={scrape_file}",
             # samples are queryable 1 s after the scrape (default 30 s), nothing is cached
             "-search.latencyOffset=1s", "-search.disableCache", "-loggerLevel=WARN"],
        )  # fmt: skip
        self.wait_ready(f"{vm_url}/health", "VictoriaMetrics")
        vmalert_url = self.start_listening(
            "vmalert",
            [VMALERT, *(f"-rule={p}" for p in rule_files), f"-datasource.url={vm_url}",
             f"-remoteWrite.url={vm_url}", f"-notifier.url=http://{self.unreachable()}",
             "-evaluationInterval=1s", "-httpListenAddr=127.0.0.1:0",
             "-loggerLevel=ERROR"],
        )  # fmt: skip
        self.wait_ready(f"{vmalert_url}/health", "vmalert")
        return replace(self, prometheus_url=vm_url, rules_url=vmalert_url)


@contextmanager
def running_stack(tmp: Path) -> Iterator[Stack]:
    """A Stack whose processes are all stopped (SIGTERM, then SIGKILL) on the way out."""
    stack = Stack(prometheus_url="", tmp=tmp)
    try:
        yield stack
    finally:
        for _name, process, _log in reversed(stack.processes):
            stop_process(process, timeout=10)
        for sock in stack.held:
            sock.close()


@contextmanager
def backfilled_prometheus(
    tmp: Path, history: Path, *, scrape_interval: str, evaluation_interval: str, timeout: float = 120
) -> Iterator[Stack]:
    """A Prometheus that serves an OpenMetrics history (backfilled by promtool into tmp/tsdb),
    with no targets and no rules of its own; its URL is the stack's prometheus_url."""
    promtool = shutil.which("promtool")
    assert PROMETHEUS is not None and promtool is not None
    tsdb = tmp / "tsdb"
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(history), str(tsdb)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    config = tmp / "prometheus.yml"
    config.write_text(
        f"global: {{scrape_interval: {scrape_interval}, evaluation_interval: {evaluation_interval}}}\n"
    )
    with running_stack(tmp) as stack:
        stack.prometheus_url = stack.start_listening(
            "prometheus",
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
             "--web.listen-address=127.0.0.1:0", "--storage.tsdb.retention.time=30d", "--log.level=error"],
        )  # fmt: skip
        stack.wait_ready(f"{stack.prometheus_url}/-/ready", "prometheus")
        yield stack


def recording_levels(rule_files: list[Path]) -> list[list[dict[str, Any]]]:
    """The recording rules by dependency depth: level 0 reads only raw series, level k reads k-1.

    `promtool tsdb create-blocks-from rules` evaluates against the data already in Prometheus, so
    layered rules (rules/ridgeline-recording.rules.yml) are backfilled one level at a time, each
    level's blocks loaded before the next is evaluated.
    """
    rules = [
        rule
        for path in rule_files
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    ]
    names = {rule["record"] for rule in rules}
    depth: dict[str, int] = {}

    def depth_of(rule: dict[str, Any]) -> int:
        name = rule["record"]
        if name not in depth:
            depth[name] = -1  # a rule that reads its own name (a ratio of its level) is no deeper
            used = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule["expr"])) & names
            depth[name] = 1 + max((depth_of(r) for r in rules if r["record"] in used - {name}), default=-1)
        return depth[name]

    levels: list[list[dict[str, Any]]] = []
    for rule in rules:
        d = depth_of(rule)
        levels.extend([] for _ in range(d + 1 - len(levels)))
        levels[d].append(rule)
    return levels


def rebased_trace(source: Path, target: Path, now: float) -> None:
    """Copy a JSON Lines trace with its timestamps shifted so that its first sample is `now`."""
    samples = read_samples(source)
    shift = now - min(s.timestamp for s in samples)
    write_samples(target, (s._replace(timestamp=s.timestamp + shift) for s in samples))


def wait_for(check: Callable[[], str | None], stack: Stack, what: str, deadline_seconds: float) -> None:
    """Poll `check` (None = satisfied, else a description of what is missing) until a deadline."""
    deadline = time.monotonic() + deadline_seconds
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
    pytest.fail(f"{what} not reached within {deadline_seconds:.0f} s: {missing}\n{stack.logs()}")


def loaded_rules(stack: Stack) -> list[dict[str, Any]]:
    """Every rule Prometheus has loaded, with its health and last error."""
    groups = stack.api("/api/v1/rules", base=stack.rules_url or None)["groups"]
    return [rule for group in groups for rule in group["rules"]]


def alert_key(labels: Mapping[str, str]) -> tuple[str, str | None]:
    """(alertname, where): the node for a per-target alert, the namespace or the Slurm job for a
    per-workload one (namespace/pod for an alert that names a pod)."""
    if labels.get("pod"):
        where: str | None = f"{labels.get('namespace')}/{labels['pod']}"
    elif labels.get("namespace"):
        where = labels["namespace"]
    else:
        where = labels.get("hpc_job") or labels.get("node")
    return labels["alertname"], where


def active_alerts(stack: Stack) -> set[tuple[str, str | None]]:
    """alert_key() of every alert that is pending or firing."""
    return {
        alert_key(a["labels"])
        for a in stack.api("/api/v1/alerts", base=stack.rules_url or None)["alerts"]
        if a["state"] in {"pending", "firing"}
    }


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*(\w+)\)$", re.DOTALL)


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace Grafana template variables ($name, ${name}, ${name:fmt}) that `values` knows."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return values.get(name, match.group(0))  # `$1` in label_replace stays as it is

    return _VARIABLE.sub(replace, text)


def variable_assignments(
    stack: Stack,
    dashboard: dict[str, Any],
    preferred: Mapping[str, str],
    *,
    every_value: bool = False,
) -> list[dict[str, str]]:
    """Values for the dashboard's variables, found by running its own label_values() queries.

    A variable takes its `preferred` value when its query offers it, else "All" when it has one,
    else its first offered value; with `every_value`, "All" and then each offered value in turn
    (one assignment per combination: every GPU of the Node dashboard, every namespace/pod of the
    Workload dashboard).
    """
    assignments = [dict(BUILTINS)]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        name = variable["name"]
        expanded: list[dict[str, str]] = []
        for values in assignments:
            query = substitute(variable["query"]["query"], values)
            match = _LABEL_VALUES.match(query)
            assert match, f"{dashboard['uid']}: variable {name}: unsupported query {query!r}"
            selector, label = match.groups()
            offered = stack.api(f"/api/v1/label/{label}/values", **{"match[]": selector})
            assert offered, f"{dashboard['uid']}: variable {name} offers no value ({query})"
            all_value = [variable["allValue"]] if variable.get("includeAll") else []
            if preferred.get(name) in offered:
                picks = [preferred[name]]
            elif every_value:
                picks = [*all_value, *offered]
            else:
                picks = all_value or [offered[0]]
            expanded.extend({**values, name: pick} for pick in picks)
        assignments = expanded
    return assignments


def resolve_variables(
    stack: Stack, dashboard: dict[str, Any], preferred: Mapping[str, str]
) -> dict[str, str]:
    """One value per variable (see variable_assignments)."""
    return variable_assignments(stack, dashboard, preferred)[0]


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every panel target, collapsed rows included."""
    panels = [p for top in dashboard["panels"] for p in (top, *top.get("panels", []))]  # rows nest
    return [
        (panel["title"], target["refId"], target["expr"])
        for panel in panels
        for target in panel.get("targets", [])
    ]
