"""Checks the Prometheus rules in rules/: promtool accepts them, their unit tests pass, and every
alert carries what an on-call engineer needs (severity, summary, description, a runbook anchor that
exists) with thresholds documented in one table that matches the rules."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.collectors import COLLECTORS, WORKLOAD_FAMILIES
from exporter.roofline import REGIMES

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "rules"
RULE_FILES = sorted(RULES_DIR.glob("*.rules.yml"))
TEST_FILES = sorted((RULES_DIR / "tests").glob("*.yml"))
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RULES_DOC = ROOT / "docs" / "rules-and-dashboards.md"
RUNBOOK_PREFIX = yaml.safe_load((ROOT / "deploy" / "names.yaml").read_text())["runbookUrlBase"] + "#"
"""deploy/names.yaml is the one place naming the runbooks; generate.py and the chart read it too."""
SEVERITIES = {"critical", "warning", "info"}
RECORD_NAME = re.compile(
    r"^(instance_workload|instance|namespace_pod|hpc_job|cluster):ridgeline_[a-z0-9_]+:[a-z0-9_]+$"
)

PROMTOOL = shutil.which("promtool")
# The rules must load in the Prometheus a user has: Debian bookworm's (2.42, on PATH) and the next
# Debian release's (2.53, fetched into .tools/ by scripts/bootstrap --test without touching apt).
PROMTOOL_NEXT = ROOT / ".tools" / "promtool-trixie" / "usr" / "bin" / "promtool"
PROMTOOL_RELEASES = {"2.42": PROMTOOL, "2.53": str(PROMTOOL_NEXT)}


def _groups() -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every rule group across the rule files, with the file it is in."""
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            yield path, group


def _rules(kind: str) -> list[dict[str, Any]]:
    """Every rule of one kind ("alert" or "record") across the rule files."""
    return [rule for _, group in _groups() for rule in group["rules"] if kind in rule]


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
    broken.write_text(text.replace("humanizeDuration", "humaniseDuration", 1))
    proc = _vmalert_dry_run(broken)
    assert proc.returncode != 0 and "humaniseDuration" in proc.stdout + proc.stderr


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
    for path, group in _groups():
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


def _names_read(expr: str) -> set[str]:
    """Metric names an expression reads (identifiers that are neither keywords, functions nor labels)."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_matchers = re.sub(r"\{[^}]*\}", "{}", without_strings)
    without_groupings = re.sub(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", without_matchers
    )
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_groupings)
    tokens = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*(?:\{|\[|\)|$|\s|[-+*/<>=!]))", without_ranges))
    keywords = {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
    }
    return {t for t in tokens if t not in keywords and (t.startswith("ridgeline_") or ":" in t or t == "up")}


def _level(name: str) -> str:
    if ":" in name:
        return name.split(":", 1)[0]
    return "workload" if name.startswith(WORKLOAD_PREFIX) else "raw"


WORKLOAD_PREFIX = "ridgeline_workload_"
"""The exporter's per-workload families (collector `workload`, and the clock events)."""

# Which level each level may read (docs/rules-and-dashboards.md, "Recording rules"): no level reads
# per-GPU series; instance_workload rates the exporter's per-workload counters; the node and
# workload levels sum it, or the exporter's per-workload gauges; the cluster level sums the node
# level (and the workload levels for GPUs held by a workload). Each level may read itself (a ratio
# of two of its own sums).
READS = {
    "instance_workload": {"workload", "instance_workload"},
    "instance": {"workload", "instance_workload", "instance"},
    "namespace_pod": {"workload", "instance_workload", "namespace_pod"},
    "hpc_job": {"workload", "instance_workload", "hpc_job"},
    "cluster": {"instance", "namespace_pod", "hpc_job", "cluster"},
}
CARD_CONSTANTS = {"ridgeline_card_ridge_flop_per_byte", "ridgeline_card_peak_flop_per_second",
                  "ridgeline_card_peak_bandwidth_bytes_per_second"}  # fmt: skip
"""Per node, not per GPU: a level may read them where it needs a card's figure."""
PER_MIG_INSTANCE = {"ridgeline_gpu_share_ratio"}
"""On MIG instances only (a whole GPU is 1): a few series per partitioned card, not one per GPU."""
PER_GPU_FAMILIES = {
    name
    for spec in COLLECTORS
    if spec.name not in {"card", "process"}
    for name in spec.names
    if not name.startswith(WORKLOAD_PREFIX)
} - PER_MIG_INSTANCE | {"ridgeline_gpu_info"}
WORKLOAD_COUNTERS = {spec.exposed for spec in WORKLOAD_FAMILIES if spec.type == "counter"}
"""Rated by instance_workload only, each once per evaluation like a per-GPU family was."""


def test_names_read_finds_what_an_expression_reads() -> None:
    expr = (
        'sum by (cluster, pod) (rate(ridgeline_flop_total{pod!=""}[5m])) / on (pod) group_left () x:y:z > 0'
    )
    assert _names_read(expr) == {"ridgeline_flop_total", "x:y:z"}


def test_each_recording_level_reads_only_the_level_below() -> None:
    for rule in _rules("record"):
        level = _level(rule["record"])
        for used in _names_read(rule["expr"]) - CARD_CONSTANTS:
            assert _level(used) in READS[level], f"{rule['record']} ({level}) reads {used}"


def test_every_per_gpu_family_is_read_once_per_evaluation() -> None:
    """A rule that reads a per-GPU family scans every GPU of the fleet: only the per-node health
    alerts read one, and no recording rule. A workload counter is a few series per node, but the
    rule that rates it still scans every workload of the fleet: each has one reader, or one per
    regime (each matching one `regime`, all of them together: the family read once in parts, each
    part in a group of its own)."""
    readers: dict[str, list[dict[str, Any]]] = {}
    for rule in _rules("record") + _rules("alert"):
        for used in _names_read(rule["expr"]) & (PER_GPU_FAMILIES | WORKLOAD_COUNTERS):
            readers.setdefault(used, []).append(rule)
    assert set(readers) >= WORKLOAD_COUNTERS, "a workload counter no rule reads?"
    for family, rules in readers.items():
        if len(rules) == 1:
            continue
        selectors = [re.findall(rf'{family}\{{(regime="(\w+)"[^}}]*)\}}', r["expr"]) for r in rules]
        for rule, found in zip(rules, selectors, strict=True):
            repeated = len({matchers for matchers, _ in found}) < len(found)
            assert not repeated, f"{rule.get('record') or rule['alert']} reads {family} twice: {found}"
        regimes = [[regime for _, regime in found] for found in selectors]
        assert all(len(set(found)) == 1 for found in regimes), f"{family} read whole by several rules"
        assert sorted(found[0] for found in regimes) == sorted(REGIMES), f"{family}: {regimes}"
    groups_reading: dict[str, set[str]] = {}
    for _, group in _groups():
        for rule in group["rules"]:
            for used in _names_read(rule["expr"]) & (PER_GPU_FAMILIES | WORKLOAD_COUNTERS):
                groups_reading.setdefault(group["name"], set()).add(used)
    crowded = {g: f for g, f in groups_reading.items() if len(f) > 1}
    assert not crowded, f"groups reading more than one per-GPU or workload counter family: {crowded}"
    for rule in _rules("record"):
        raw = _names_read(rule["expr"]) & PER_GPU_FAMILIES
        assert not raw, f"{rule['record']} reads per-GPU series {raw}"


WORKLOAD_ROOFS = {
    "ridgeline_workload_peak_flop_per_second",
    "ridgeline_workload_peak_bandwidth_bytes_per_second",
}
"""The exporter's per-workload peaks: a gauge per workload, summed by the node, pod and job levels."""


def test_no_recording_group_reads_both_roofs() -> None:
    """Each roof (a peak sum and the utilization that divides by it) is a group of its own at each
    level: together the pod level's was the slowest group of the rules at 8,000 GPUs, and Prometheus
    runs groups side by side but a group's rules one after the other."""
    for _, group in _groups():
        roofs = {used for rule in group["rules"] for used in _names_read(rule["expr"])} & WORKLOAD_ROOFS
        assert len(roofs) <= 1, f"{group['name']} reads {sorted(roofs)}"
    readers = {used for rule in _rules("record") for used in _names_read(rule["expr"])}
    assert readers >= WORKLOAD_ROOFS, "a roof no rule reads?"


PER_POD_LABELS = {"pod", "uuid", "gpu", "container"}
"""Labels with about a value per pod or GPU. A matcher that selects on such a label's presence
(`pod!=""`, `pod=""`, `pod=~".+"`) has Prometheus merge the postings of every one of its values at
each evaluation: 50-100 ms per selector at 3,000 pods on the benchmark's machine. The rules select
pods by `namespace!=""` instead (a workload has a namespace exactly when it has a pod:
exporter/state.py, GpuState.workload)."""


def test_no_rule_selects_on_the_presence_of_a_per_pod_label() -> None:
    presence = re.compile(r'\b(\w+)\s*(?:!=|=|=~|!~)\s*"(?:|\.\+|\.\*)"')
    for rule in _rules("record") + _rules("alert"):
        for matcher in re.finditer(r"\{([^}]*)\}", rule["expr"]):
            labels = {m.group(1) for m in presence.finditer(matcher.group(1))}
            wide = labels & PER_POD_LABELS
            assert not wide, f"{rule.get('record') or rule['alert']} selects on {wide}: {matcher.group(0)}"


def test_performance_findings_read_only_the_workload_levels() -> None:
    for rule in _rules("alert"):
        if not rule["alert"].startswith("RidgelineWorkload"):
            continue
        levels = {_level(u) for u in _names_read(rule["expr"])}
        assert levels <= {"namespace_pod", "hpc_job"}, f"{rule['alert']} reads {levels}"
        assert "pod" in rule["expr"] and "hpc_job" in rule["expr"], f"{rule['alert']}: pods and Slurm jobs"


_ACTION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_ALLOWED_WORDS = {"if", "else", "end", "with", "humanize", "humanizePercentage", "humanizeDuration", "printf"}


def test_annotations_read_only_the_alerts_own_labels_and_value() -> None:
    """No `query` (or any other function that reaches the TSDB): Prometheus renders annotations for
    every active alert at every evaluation, so a query there is paid per alert per evaluation."""
    for rule in _rules("alert"):
        for key, text in rule["annotations"].items():
            for action in _ACTION.findall(text):
                words = set(re.findall(r"(?<![.$\w])[a-zA-Z_]\w*", action))
                assert words <= _ALLOWED_WORDS, (
                    f"{rule['alert']} {key}: {{{{{action}}}}} uses {words - _ALLOWED_WORDS}"
                )
                refs = set(re.findall(r"\$\w+", action))
                assert refs <= {"$labels", "$value"}, f"{rule['alert']} {key}: {refs}"


def _minutes(duration: str) -> int:
    found = re.fullmatch(r"(\d+)m", duration)
    assert found, f"durations here are whole minutes, not {duration!r}"
    return int(found.group(1))


def _lead_minutes(expr: str) -> int:
    """How long an alert's condition needs data before it can hold: the longest range or offset
    in its expression."""
    return max((int(m) for m in re.findall(r"(?:\[|offset )(\d+)m\b", expr)), default=0)


def test_each_alerts_text_says_its_own_durations() -> None:
    """The longest time an alert's text names is its `for:` (how long the condition has held when
    it fires); any other is the window its condition reads; the seconds it names are thresholds in
    its expression. One value, read from the rule, not retyped."""
    for rule in _rules("alert"):
        text = " ".join(rule["annotations"].values())
        hold = _minutes(rule["for"])
        lead = _lead_minutes(rule["expr"])
        for seconds in re.findall(r"(\d+) s\b", text):
            assert re.search(rf"\b{seconds}\b", rule["expr"]), (
                f"{rule['alert']}: {seconds} s is not in its expr"
            )
        minutes = [int(m) for m in re.findall(r"(\d+) minutes?", text)]
        if not minutes:  # RidgelineSamplesStale says how old the sample is, from its value
            continue
        assert max(minutes) == hold, f"{rule['alert']}: fires after {hold} min held, text says {minutes}"
        assert set(minutes) <= {hold, lead} - {0}, f"{rule['alert']}: {minutes}"
