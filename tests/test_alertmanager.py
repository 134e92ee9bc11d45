"""The shipped alerts through a real Alertmanager (Debian's prometheus-alertmanager) to webhooks.

rules/alertmanager.example.yml is the route docs/rules-and-dashboards.md gives: critical -> page,
warning -> ticket, info -> none. amtool checks it and resolves every shipped alert's severity to
its receiver. Then the whole path runs: two `ridgeline serve --source replay` daemons (the
decode-serving and input-starved scenario traces) and one target where nothing listens are
scraped by /usr/bin/prometheus, which evaluates the recording rules (unchanged) and
rules/ridgeline-alerts.rules.yml and sends what fires to Alertmanager, which notifies two webhooks
served by this test. The alert file is loaded with its `for:` durations removed (5-30 minutes; the
promtool unit tests prove them) and nothing else changed, so the labels and annotations that arrive
are the shipped ones, rendered by Prometheus from live data. Alertmanager's own timers (30 s group
wait, ...) are shortened the same way; the routes, grouping, receivers and inhibit rule are the
example's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_stack import REQUIRES_PROMETHEUS, Stack, alert_key, rebased_trace, running_stack, wait_for

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "rules" / "alertmanager.example.yml"
ALERT_RULES = ROOT / "rules" / "ridgeline-alerts.rules.yml"
RECORDING_RULES = ROOT / "rules" / "ridgeline-recording.rules.yml"
RULES_DOC = ROOT / "docs" / "rules-and-dashboards.md"
SCENARIOS = ROOT / "tests" / "data" / "scenarios"
ALERTMANAGER = shutil.which("prometheus-alertmanager")
AMTOOL = shutil.which("amtool")
RECEIVER_FOR = {"critical": "page", "warning": "ticket", "info": "none"}
DEADLINE_SECONDS = 90.0

pytestmark = REQUIRES_PROMETHEUS


def _shipped_alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERT_RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _binary(path: str | None, name: str) -> str:
    if path is None:
        pytest.fail(
            f"{name} not found (Debian package prometheus-alertmanager): run scripts/bootstrap --test"
        )
    return path


def _amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_binary(AMTOOL, "amtool"), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_docs_show_the_example_route_as_shipped() -> None:
    if EXAMPLE.read_text().strip() not in RULES_DOC.read_text():
        pytest.fail(f"{RULES_DOC.name} must quote {EXAMPLE.relative_to(ROOT)} verbatim", pytrace=False)


def test_amtool_accepts_the_example_config() -> None:
    proc = _amtool("check-config", str(EXAMPLE))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("rule", _shipped_alerts(), ids=lambda rule: rule["alert"])
def test_each_shipped_alert_resolves_to_the_receiver_of_its_severity(rule: dict[str, Any]) -> None:
    severity = rule["labels"]["severity"]
    labels = [f"alertname={rule['alert']}", f"severity={severity}", "instance=gpu-node-1:10295"]
    proc = _amtool("config", "routes", "test", f"--config.file={EXAMPLE}", *labels)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == [RECEIVER_FOR[severity]], f"{rule['alert']} ({severity}) -> {proc.stdout}"


class Webhooks:
    """An HTTP server on loopback that records every Alertmanager notification by path."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        lock = threading.Lock()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    received.append((self.path, body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="webhooks", daemon=True)
        self.thread.start()

    def alerts(self, path: str) -> list[dict[str, Any]]:
        return [alert for got, body in list(self.received) if got == path for alert in body["alerts"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Routed:
    """The running stack, the webhooks and the Alertmanager URL."""

    def __init__(self, stack: Stack, webhooks: Webhooks, alertmanager_url: str) -> None:
        self.stack = stack
        self.webhooks = webhooks
        self.alertmanager_url = alertmanager_url

    def alertmanager_alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.alertmanager_url}/api/v2/alerts", timeout=5) as response:
            alerts: list[dict[str, Any]] = json.load(response)
        return alerts

    def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        request = urllib.request.Request(
            f"{self.alertmanager_url}/api/v2/alerts",
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200


def _alertmanager_config(webhooks: Webhooks) -> dict[str, Any]:
    """The example with its webhook URLs pointed at this test and its timers shortened."""
    config = yaml.safe_load(EXAMPLE.read_text())
    config["route"].update(group_wait="1s", group_interval="2s")
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            webhook["url"] = f"{webhooks.url}/{receiver['name']}"
    return config


def _rules_firing_at_once(path: Path) -> None:
    """The shipped alert rules without their `for:`; everything else as shipped."""
    document = yaml.safe_load(ALERT_RULES.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("for", None)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routed]:
    tmp = tmp_path_factory.mktemp("alertmanager")
    webhooks = Webhooks()
    try:
        with running_stack(tmp) as stack:
            config = tmp / "alertmanager.yml"
            config.write_text(yaml.safe_dump(_alertmanager_config(webhooks), sort_keys=False))
            alertmanager_url = stack.start_listening(
                "alertmanager",
                [_binary(ALERTMANAGER, "prometheus-alertmanager"), f"--config.file={config}",
                 f"--storage.path={tmp / 'alertmanager'}", "--web.listen-address=127.0.0.1:0",
                 "--cluster.listen-address=", "--log.level=warn"],
            )  # fmt: skip
            address = alertmanager_url.removeprefix("http://")
            stack.wait_ready(f"{alertmanager_url}/-/ready", "Alertmanager")
            now = time.time()
            static_configs: list[dict[str, Any]] = []
            for node in ("decode-serving", "input-starved"):
                replay = tmp / f"{node}.jsonl"
                rebased_trace(SCENARIOS / f"{node}.jsonl", replay, now)
                target = stack.start_ridgeline(
                    node, "--source", "replay", "--replay", str(replay), "--loop", "--speed", "1"
                )  # fmt: skip: rates in wall-clock units
                static_configs.append({"targets": [target], "labels": {"cluster": "am", "node": node}})
            unreachable = stack.unreachable()
            static_configs.append(
                {"targets": [unreachable], "labels": {"cluster": "am", "node": "unreachable"}}
            )
            rules = tmp / "ridgeline-alerts.firing-at-once.rules.yml"
            _rules_firing_at_once(rules)
            stack.start_prometheus(static_configs, rule_files=[RECORDING_RULES, rules], alertmanager=address)
            yield Routed(stack, webhooks, f"http://{address}")
    finally:
        webhooks.close()


# (alertname, where) each receiver must be notified of (prometheus_stack.alert_key): the
# input-starved node's two latency-bound GPUs are one namespace's, so one ticket.
PAGED = {("RidgelineExporterDown", "unreachable")}
TICKETED = {("RidgelineWorkloadLatencyBound", "vision")}
SILENT = {("RidgelineWorkloadMemoryBound", "llm")}  # one per namespace: both decode pods


def _key(alert: dict[str, Any]) -> tuple[str, str | None]:
    return alert_key(alert["labels"])


def test_critical_pages_warning_tickets_and_info_notifies_nobody(routed: Routed) -> None:
    def all_delivered() -> str | None:
        paged = {_key(a) for a in routed.webhooks.alerts("/page")}
        ticketed = {_key(a) for a in routed.webhooks.alerts("/ticket")}
        in_alertmanager = {_key(a) for a in routed.alertmanager_alerts()}
        missing = (PAGED - paged) | (TICKETED - ticketed) | (SILENT - in_alertmanager)
        return f"not yet delivered: {sorted(missing, key=str)}" if missing else None

    wait_for(all_delivered, routed.stack, "pages, tickets and silent info alerts", DEADLINE_SECONDS)
    pages = routed.webhooks.alerts("/page")
    tickets = routed.webhooks.alerts("/ticket")
    assert {a["labels"]["severity"] for a in pages} == {"critical"}
    assert {a["labels"]["severity"] for a in tickets} == {"warning"}
    assert not routed.webhooks.alerts("/none"), "the none receiver has no webhook"
    # Info alerts reached Alertmanager and were routed to `none`: visible, nobody notified.
    info = [a for a in routed.alertmanager_alerts() if a["labels"]["severity"] == "info"]
    assert {_key(a) for a in info} >= SILENT
    assert all([r["name"] for r in a["receivers"]] == ["none"] for a in info), info
    assert not [a for a in pages + tickets if a["labels"]["severity"] == "info"]


def test_notifications_carry_the_rendered_annotations(routed: Routed) -> None:
    wait_for(
        lambda: None if routed.webhooks.alerts("/ticket") and routed.webhooks.alerts("/page") else "none yet",
        routed.stack,
        "a page and a ticket",
        DEADLINE_SECONDS,
    )
    for alert in routed.webhooks.alerts("/page") + routed.webhooks.alerts("/ticket"):
        annotations = alert["annotations"]
        labels = alert["labels"]
        name = labels["alertname"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, name
        for key, value in annotations.items():
            assert value.strip() and "{{" not in value and "<no value>" not in value, f"{name} {key}: {value}"
        # a per-target alert names its target, a per-workload one its namespace
        where = labels["namespace"] if name.startswith("RidgelineWorkload") else labels["instance"]
        assert where in annotations["summary"], annotations["summary"]
        assert annotations["runbook_url"].endswith(f"#{name.lower()}")
        assert "Lever:" in annotations["description"]
    latency = next(
        a
        for a in routed.webhooks.alerts("/ticket")
        if a["labels"]["alertname"] == "RidgelineWorkloadLatencyBound"
    )
    # The alert's own value, rendered: both GPUs of the namespace's pod are latency-bound.
    assert latency["annotations"]["summary"].startswith("2 GPU(s) of namespace vision "), latency
    assert "(2 now)" in latency["annotations"]["description"], latency


def test_workload_findings_ticket_per_namespace_and_slurm_jobs_share_one(routed: Routed) -> None:
    """The example groups performance findings by (alertname, cluster, namespace): each team's
    namespace gets its own ticket, the Slurm jobs (no namespace) one between them."""
    ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
    finding = {"alertname": "RidgelineWorkloadLatencyBound", "severity": "warning", "cluster": "grp"}
    routed.post_alerts(
        [
            {"labels": {**finding, "namespace": "team-x"}, "endsAt": ends},
            {"labels": {**finding, "namespace": "team-y"}, "endsAt": ends},
            {"labels": {**finding, "hpc_job": "101"}, "endsAt": ends},
            {"labels": {**finding, "hpc_job": "102"}, "endsAt": ends},
        ]
    )

    def grouped() -> str | None:
        groups = {
            body["groupLabels"].get("namespace"): sorted(str(_key(a)[1]) for a in body["alerts"])
            for path, body in list(routed.webhooks.received)
            if path == "/ticket" and body["groupLabels"].get("cluster") == "grp"
        }
        wanted = {"team-x": ["team-x"], "team-y": ["team-y"], None: ["101", "102"]}
        return None if groups == wanted else f"notifications so far: {groups}"

    wait_for(grouped, routed.stack, "one ticket per namespace, one for the Slurm jobs", 30.0)


def test_an_exporter_down_inhibits_the_other_health_alerts_of_its_target(routed: Routed) -> None:
    """The example's inhibit rule, with alerts posted straight to Alertmanager's API."""
    ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
    target = {"cluster": "am", "job": "ridgeline", "instance": "inhibit-test:10295"}
    other = {**target, "instance": "other-node:10295"}
    alerts = [
        {"labels": {"alertname": "RidgelineExporterDown", "severity": "critical", **target}},
        {"labels": {"alertname": "RidgelineProfilingCountersFrozen", "severity": "warning", **target}},
        {"labels": {"alertname": "RidgelineProfilingCountersFrozen", "severity": "warning", **other}},
    ]
    routed.post_alerts([{**alert, "endsAt": ends} for alert in alerts])

    def inhibited() -> str | None:
        state = {
            a["labels"]["instance"]: a["status"]
            for a in routed.alertmanager_alerts()
            if a["labels"]["alertname"] == "RidgelineProfilingCountersFrozen" and a["labels"]["instance"] in {
                target["instance"], other["instance"]}
        }  # fmt: skip
        if len(state) < 2:
            return f"posted alerts not listed yet: {state}"
        if not state[target["instance"]]["inhibitedBy"]:
            return f"not inhibited: {state[target['instance']]}"
        return None

    wait_for(inhibited, routed.stack, "the inhibition", 30.0)
    state = {
        a["labels"]["instance"]: a["status"]
        for a in routed.alertmanager_alerts()
        if a["labels"]["alertname"] == "RidgelineProfilingCountersFrozen"
    }
    assert state[other["instance"]]["state"] == "active" and not state[other["instance"]]["inhibitedBy"]


def test_every_notifying_receiver_sends_resolved() -> None:
    """A ticket or a page that never closes outlives its cause: every webhook says when it ends."""
    config = yaml.safe_load(EXAMPLE.read_text())
    webhooks = [w for r in config["receivers"] for w in r.get("webhook_configs", [])]
    assert webhooks and all(w.get("send_resolved") is True for w in webhooks), webhooks


def test_a_ticket_resolves_when_its_alert_ends(routed: Routed) -> None:
    """Posted to Alertmanager's API: a warning opens a ticket, and its end closes it (the webhook
    gets the alert again with status resolved)."""
    labels = {
        "alertname": "RidgelineGREngineActiveStuck",
        "severity": "warning",
        "cluster": "resolve",
        "job": "ridgeline",
        "instance": "resolve-test:10295",
    }
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
    routed.post_alerts([{"labels": labels, "endsAt": later}])

    def ticket(status: str) -> str | None:
        seen = [
            a["status"] for a in routed.webhooks.alerts("/ticket") if a["labels"].get("cluster") == "resolve"
        ]
        return None if status in seen else f"ticket notifications so far: {seen}"

    wait_for(lambda: ticket("firing"), routed.stack, "the ticket", 30.0)
    ended = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    routed.post_alerts([{"labels": labels, "endsAt": ended}])
    wait_for(lambda: ticket("resolved"), routed.stack, "the ticket's resolution", 30.0)
