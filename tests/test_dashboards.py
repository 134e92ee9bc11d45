"""Checks the Grafana dashboards: the committed JSON is exactly what grafana/build.py generates, and
every dashboard is wired the way Grafana needs (datasource variable, unique ids, sane grid, queries
that only name recording rules which exist)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from exporter.roofline import REGIMES, lever_for

ROOT = Path(__file__).resolve().parents[1]
GRAFANA = ROOT / "grafana"
DASHBOARD_DIR = GRAFANA / "dashboards"


def _load_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ridgeline_grafana_build", GRAFANA / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


BUILD = _load_build()
DASHBOARDS: dict[str, dict[str, Any]] = {
    path.name: json.loads(path.read_text()) for path in sorted(DASHBOARD_DIR.glob("*.json"))
}


def _recorded_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "rules").glob("*.rules.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            names.update(rule["record"] for rule in group["rules"] if "record" in rule)
    return names


def _query_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p.get("targets")]


def test_committed_json_is_exactly_what_build_py_generates() -> None:
    generated = BUILD.render()
    assert set(generated) == set(DASHBOARDS), (
        "dashboards/ holds files build.py does not produce (or lacks some)"
    )
    for name, text in generated.items():
        committed = (DASHBOARD_DIR / name).read_text()
        assert committed == text, (
            f"{name} is out of date: run `python grafana/build.py` and commit the result"
        )


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    assert BUILD.main(["--out", str(tmp_path)]) == 0
    assert BUILD.main(["--check", "--out", str(tmp_path)]) == 0
    stale = tmp_path / "ridgeline-node.json"
    stale.write_text(stale.read_text().replace("Roofline per GPU", "Roofline"))
    assert BUILD.main(["--check", "--out", str(tmp_path)]) == 1


def test_fleet_node_and_workload_dashboards_exist_with_stable_uids() -> None:
    uids = {d["uid"] for d in DASHBOARDS.values()}
    assert {"ridgeline-fleet", "ridgeline-node", "ridgeline-workload"} <= uids
    assert len(uids) == len(DASHBOARDS)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_query_goes_through_the_datasource_variable(name: str) -> None:
    dashboard = DASHBOARDS[name]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in _query_panels(dashboard):
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            assert target["expr"].strip(), panel["title"]
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == "${datasource}", variable["name"]


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_panels_have_unique_ids_and_do_not_overlap(name: str) -> None:
    panels = DASHBOARDS[name]["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    occupied: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & occupied, f"{panel['title']} overlaps another panel"
        occupied |= cells


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_queries_only_name_recording_rules_that_exist(name: str) -> None:
    recorded = _recorded_names()
    for panel in _query_panels(DASHBOARDS[name]):
        for target in panel["targets"]:
            for used in re.findall(
                r"\b(?:instance|namespace_pod|cluster):ridgeline_[a-z0-9_]+:[a-z0-9_]+", target["expr"]
            ):
                assert used in recorded, f"{panel['title']}: {used} is not a recording rule"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_template_variables_used_in_queries_are_defined(name: str) -> None:
    dashboard = DASHBOARDS[name]
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in _query_panels(dashboard):
        for target in panel["targets"]:
            for used in re.findall(r"\$(\w+)", target["expr"]):
                if not used.startswith("__") and not used.isdigit():
                    assert used in defined, f"{panel['title']}: ${used} is not a dashboard variable"


def test_node_dashboard_draws_a_log_x_roofline_and_a_regime_timeline() -> None:
    node = next(d for d in DASHBOARDS.values() if d["uid"] == "ridgeline-node")
    xy = next(p for p in node["panels"] if p["type"] == "xychart")
    assert xy["options"]["mapping"] == "manual"
    x_fields = {s["x"]["matcher"]["options"] for s in xy["options"]["series"]}
    log_fields = {
        o["matcher"]["options"]
        for o in xy["fieldConfig"]["overrides"]
        if {"id": "custom.scaleDistribution", "value": {"type": "log", "log": 10}} in o["properties"]
    }
    assert x_fields <= log_fields, "the intensity axis must be logarithmic"
    roof = [s for s in xy["options"]["series"] if s["name"]["fixed"] == "roof"]
    assert roof, "the card's roof is not drawn"
    assert any(p["type"] == "state-timeline" for p in node["panels"])


def test_regime_code_mapping_covers_every_regime() -> None:
    node = next(d for d in DASHBOARDS.values() if d["uid"] == "ridgeline-node")
    timeline = next(p for p in node["panels"] if p["type"] == "state-timeline")
    mapped = {m["text"] for m in timeline["fieldConfig"]["defaults"]["mappings"][0]["options"].values()}
    assert mapped == set(REGIMES)
    expr = timeline["targets"][0]["expr"]
    for regime in mapped:
        assert f'regime="{regime}"' in expr


def test_levers_are_the_packages_words() -> None:
    """The Lever columns and the regime legend say what /classify says (exporter.roofline)."""
    lever_columns = [
        prop["value"]
        for dashboard in DASHBOARDS.values()
        for panel in dashboard["panels"]
        for override in panel.get("fieldConfig", {}).get("overrides", [])
        for prop in override["properties"]
        if override["matcher"]["options"] == "Lever" and prop["id"] == "mappings"
    ]
    assert len(lever_columns) == 2, "the Node and Workload GPU tables map regime -> lever"
    for mappings in lever_columns:
        (mapping,) = mappings
        assert {regime: m["text"] for regime, m in mapping["options"].items()} == {
            r: lever_for(r) for r in REGIMES
        }
    workload = next(d for d in DASHBOARDS.values() if d["uid"] == "ridgeline-workload")
    legend = next(p for p in workload["panels"] if p["type"] == "text")["options"]["content"]
    for regime in REGIMES:
        head, _, lever = lever_for(regime).partition(": ")
        assert f"**{head}** (`{regime}`): {lever}." in legend


def test_provisioning_points_the_file_provider_at_the_dashboards() -> None:
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "ridgeline.yml").read_text())
    (entry,) = provider["providers"]
    assert entry["type"] == "file" and entry["options"]["path"]
    datasources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.example.yml").read_text()
    )
    assert datasources["datasources"][0]["type"] == "prometheus"
