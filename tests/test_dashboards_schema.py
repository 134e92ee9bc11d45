"""The dashboards against Grafana's own schema: npm's @grafana/schema at the Grafana version the
dashboards target, type-checked with `tsc --noEmit` (grafana/schema_check.py), and the generator
built on grafana-foundation-sdk's build for that same version."""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GRAFANA = ROOT / "grafana"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"ridgeline_grafana_{name}", GRAFANA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCHEMA_CHECK = _load("schema_check")
BUILD = _load("build")


def _check(dashboards: dict[str, dict[str, Any]]) -> Any:
    try:
        return SCHEMA_CHECK.check(dashboards)
    except SCHEMA_CHECK.SchemaCheckUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def _minor(version: str) -> str:
    return ".".join(version.split("!")[-1].split(".")[:2])


def test_schema_sdk_and_dashboards_target_the_same_grafana_version() -> None:
    schema = json.loads((SCHEMA_CHECK.NODE_MODULES / "@grafana" / "schema" / "package.json").read_text())
    pinned = json.loads((SCHEMA_CHECK.TYPECHECK / "package.json").read_text())["devDependencies"]
    assert schema["version"] == pinned["@grafana/schema"], (
        "node_modules is not what package.json pins: npm ci"
    )
    sdk = importlib.metadata.version("grafana-foundation-sdk")
    assert _minor(schema["version"]) == _minor(sdk) == _minor(BUILD.PLUGIN_VERSION), (
        f"@grafana/schema {schema['version']}, grafana-foundation-sdk {sdk}, "
        f"dashboards' pluginVersion {BUILD.PLUGIN_VERSION}"
    )


def test_committed_dashboards_type_check_against_grafana_schema() -> None:
    dashboards = SCHEMA_CHECK.committed_dashboards()
    assert len(dashboards) == 3
    result = _check(dashboards)
    assert result.ok, f"tsc rejects the dashboards:\n{result.output}"


def _panel(dashboard: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(p for p in dashboard["panels"] if p["type"] == kind)


# What the check exists to catch, one broken copy of the Node dashboard each.
BREAKAGES = {
    "min_null": lambda d: _panel(d, "timeseries")["fieldConfig"]["defaults"].update(min=None),
    "all_value_null": lambda d: d["templating"]["list"][1].update(allValue=None),
    "unknown_option": lambda d: _panel(d, "table")["options"].update(showHeaders=True),
    "bad_enum": lambda d: _panel(d, "timeseries")["options"]["legend"].update(displayMode="tabel"),
    "unknown_custom_override": lambda d: _panel(d, "timeseries")["fieldConfig"]["overrides"].append(
        {"matcher": {"id": "byName", "options": "x"}, "properties": [{"id": "custom.lineWidht", "value": 1}]}
    ),
    "custom_on_stat": lambda d: _panel(d, "stat")["fieldConfig"]["defaults"].update(custom={"lineWidth": 1}),
    "xychart_v1_model": lambda d: _panel(d, "xychart")["options"].update(seriesMapping="manual"),
    "unknown_panel_type": lambda d: _panel(d, "stat").update(type="singlestat"),
    "sdk_interval_keys": lambda d: d["templating"]["list"][1].update(auto=False, auto_min="10s"),
}


def test_the_check_rejects_what_grafana_does_not_allow() -> None:
    node = SCHEMA_CHECK.committed_dashboards()["ridgeline-node.json"]
    broken = {}
    for name, breakage in BREAKAGES.items():
        dashboard = copy.deepcopy(node)
        breakage(dashboard)
        broken[f"{name}.json"] = dashboard
    result = _check(broken)
    assert not result.ok
    failing = {
        line.split("(", 1)[0].removesuffix(".ts")
        for line in result.output.splitlines()
        if ": error TS" in line
    }
    assert failing == set(BREAKAGES), f"not rejected: {sorted(set(BREAKAGES) - failing)}\n{result.output}"


def test_a_missing_toolchain_is_an_error_that_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SCHEMA_CHECK, "TSC", SCHEMA_CHECK.TYPECHECK / "no-such" / "tsc")
    with pytest.raises(SCHEMA_CHECK.SchemaCheckUnavailable, match="scripts/bootstrap --test"):
        SCHEMA_CHECK.check({})
