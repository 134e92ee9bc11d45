"""Checks the Prometheus rules in rules/: promtool accepts them, their unit tests pass, and every
alert carries what an on-call engineer needs (severity, summary, description, a runbook anchor that
exists) with thresholds documented in one table that matches the rules."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "rules"
RULE_FILES = sorted(RULES_DIR.glob("*.rules.yml"))
TEST_FILES = sorted((RULES_DIR / "tests").glob("*.yml"))
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RULES_DOC = ROOT / "docs" / "rules-and-dashboards.md"
RUNBOOK_PREFIX = yaml.safe_load((ROOT / "deploy" / "names.yaml").read_text())["runbookUrlBase"] + "#"
"""deploy/names.yaml is the one place naming the runbooks; generate.py and the chart read it too."""
SEVERITIES = {"critical", "warning", "info"}
RECORD_NAME = re.compile(r"^(instance|namespace_pod|cluster):ridgeline_[a-z0-9_]+:[a-z0-9_]+$")

PROMTOOL = shutil.which("promtool")
# The rules must load in the Prometheus a user has: Debian bookworm's (2.42, on PATH) and the next
# Debian release's (2.53, fetched into .tools/ by scripts/bootstrap --test without touching apt).
PROMTOOL_NEXT = ROOT / ".tools" / "promtool-trixie" / "usr" / "bin" / "promtool"
PROMTOOL_RELEASES = {"2.42": PROMTOOL, "2.53": str(PROMTOOL_NEXT)}


def _rules(kind: str) -> list[dict[str, Any]]:
    """Every rule of one kind ("alert" or "record") across the rule files."""
    found: list[dict[str, Any]] = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            found.extend(rule for rule in group["rules"] if kind in rule)
    return found


def _promtool(*args: str, cwd: Path = ROOT, promtool: str | None = PROMTOOL) -> None:
    assert promtool is not None
    proc = subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"promtool {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}", pytrace=False)


def _github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _runbook_anchors() -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", RUNBOOKS.read_text(), flags=re.MULTILINE)
    return {_github_anchor(h) for h in headings}


def test_rule_files_exist() -> None:
    names = {p.name for p in RULE_FILES}
    assert {"ridgeline-alerts.rules.yml", "ridgeline-recording.rules.yml"} <= names
    assert TEST_FILES, "no promtool unit tests in rules/tests/"


def _release(release: str) -> str:
    """The promtool binary of one Prometheus release, checked to be that release."""
    promtool = PROMTOOL_RELEASES[release]
    if promtool is None or not Path(promtool).exists():
        pytest.fail(f"promtool {release} not found ({promtool}): run scripts/bootstrap --test", pytrace=False)
    version = subprocess.run([promtool, "--version"], capture_output=True, text=True, timeout=30, check=True)
    assert f"version {release}." in version.stdout, f"{promtool} is not promtool {release}: {version.stdout}"
    return promtool


@pytest.mark.parametrize("release", sorted(PROMTOOL_RELEASES))
def test_promtool_check_rules_accepts_every_rule_file(release: str) -> None:
    _promtool("check", "rules", *(str(p) for p in RULE_FILES), promtool=_release(release))


@pytest.mark.parametrize("release", sorted(PROMTOOL_RELEASES))
def test_promtool_unit_tests_pass(release: str) -> None:
    _promtool(
        "test", "rules", *(p.name for p in TEST_FILES), cwd=RULES_DIR / "tests", promtool=_release(release)
    )


def _vmalert_dry_run(*rule_files: Path) -> subprocess.CompletedProcess[str]:
    vmalert = shutil.which("vmalert")
    if vmalert is None:
        pytest.fail("vmalert not found (Debian package victoria-metrics): run scripts/bootstrap --test")
    return subprocess.run(
        [vmalert, "-dryRun", *(f"-rule={p}" for p in rule_files)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_vmalert_dry_run_loads_every_rule_file() -> None:
    """VictoriaMetrics' vmalert parses every expression as MetricsQL and every annotation template."""
    proc = _vmalert_dry_run(*RULE_FILES)
    assert proc.returncode == 0, f"vmalert -dryRun rejects the rules:\n{proc.stdout}\n{proc.stderr}"


def test_vmalert_dry_run_rejects_a_broken_template(tmp_path: Path) -> None:
    broken = tmp_path / "broken.rules.yml"
    text = (RULES_DIR / "ridgeline-alerts.rules.yml").read_text()
    broken.write_text(text.replace("humanizePercentage", "humanisePercentage", 1))
    proc = _vmalert_dry_run(broken)
    assert proc.returncode != 0 and "humanisePercentage" in proc.stdout + proc.stderr


def test_every_alert_has_severity_summary_description_and_runbook() -> None:
    alerts = _rules("alert")
    assert alerts
    for rule in alerts:
        name = rule["alert"]
        assert rule.get("labels", {}).get("severity") in SEVERITIES, f"{name}: severity label"
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            assert annotations.get(key, "").strip(), f"{name}: annotation {key!r} missing"
        assert "Lever" in annotations["description"], f"{name}: description does not name the lever"


def test_every_runbook_url_points_at_an_existing_section() -> None:
    anchors = _runbook_anchors()
    for rule in _rules("alert"):
        url = rule["annotations"]["runbook_url"]
        assert url.startswith(RUNBOOK_PREFIX), f"{rule['alert']}: runbook_url {url!r}"
        anchor = url.removeprefix(RUNBOOK_PREFIX)
        assert anchor == rule["alert"].lower(), f"{rule['alert']}: anchor {anchor!r} is not the alert name"
        assert anchor in anchors, f"{rule['alert']}: no heading for #{anchor} in {RUNBOOKS}"


def test_rule_groups_leave_the_evaluation_interval_to_prometheus() -> None:
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            assert "interval" not in group, f"{path.name}: group {group['name']} sets an interval"


def test_recording_rules_follow_level_metric_operations() -> None:
    records = _rules("record")
    assert records
    for rule in records:
        assert RECORD_NAME.match(rule["record"]), rule["record"]


def test_every_rule_is_exercised_by_a_promtool_test() -> None:
    tested_alerts: set[str] = set()
    tested_exprs: list[str] = []
    for path in TEST_FILES:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for alert_test in case.get("alert_rule_test", []):
                if alert_test.get("exp_alerts"):
                    tested_alerts.add(alert_test["alertname"])
            tested_exprs.extend(t["expr"] for t in case.get("promql_expr_test", []))
    for rule in _rules("alert"):
        assert rule["alert"] in tested_alerts, f"{rule['alert']} is never shown to fire"
    for rule in _rules("record"):
        name = rule["record"]
        assert any(re.search(rf"\b{re.escape(name)}\b", e) for e in tested_exprs), f"{name} untested"


def _documented_alerts() -> dict[str, tuple[str, str]]:
    """Alert -> (for, severity) from the table in docs/rules-and-dashboards.md."""
    table: dict[str, tuple[str, str]] = {}
    for line in RULES_DOC.read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0].startswith("Ridgeline"):
            table[cells[0]] = (cells[2], cells[3])
    return table


def test_alert_table_in_docs_matches_the_rules() -> None:
    documented = _documented_alerts()
    header = (RULES_DIR / "ridgeline-alerts.rules.yml").read_text()
    for rule in _rules("alert"):
        name = rule["alert"]
        assert name in documented, f"{name} missing from the alert table in {RULES_DOC.name}"
        assert documented[name] == (rule["for"], rule["labels"]["severity"]), name
        header_row = re.search(rf"^#\s+{name}\s.*$", header, flags=re.MULTILINE)
        assert header_row, f"{name} missing from the header table of the rules file"
        assert f" {rule['for']} " in header_row.group(0) and rule["labels"]["severity"] in header_row.group(0)
    assert set(documented) == {r["alert"] for r in _rules("alert")}
