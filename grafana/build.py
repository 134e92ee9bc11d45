"""Generates Ridgeline's Grafana dashboards (grafana/dashboards/*.json) from plain Python dicts.

Run `python grafana/build.py` to rewrite the JSON, `python grafana/build.py --check` to fail when
the committed JSON differs from what this module produces (tests/test_dashboards.py does the same).
Dashboards as code keep the queries reviewable and identical across panels; the JSON is committed
so Grafana's file provider can load it without Python.

Targets Grafana 11.3 or newer (the XY chart save model with `mapping`/`series` matchers). Queries
read the recording rules in rules/ where they exist and the raw per-GPU series otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Json = dict[str, Any]

OUT_DIR = Path(__file__).resolve().parent / "dashboards"
DATASOURCE: Json = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39
PLUGIN_VERSION = "11.3.0"
REGIMES = ("idle", "memory_bound", "compute_bound", "latency_bound")
REGIME_COLORS = {
    "idle": "#8e8e8e",
    "memory_bound": "#3274d9",
    "compute_bound": "#56a64b",
    "latency_bound": "#ff9830",
}
# The lever per regime, as DESIGN.md words it (the exporter's /classify says the same).
LEVERS = {
    "idle": "Nothing runs: release the GPU or give it work",
    "memory_bound": "Move fewer bytes per FLOP: batch more, fuse kernels, tile for reuse, lower precision",
    "compute_bound": "Fewer or cheaper FLOPs: lower precision (fp8), sparsity, a better algorithm",
    "latency_bound": "Feed it: larger batches, CUDA graphs, faster input pipeline, fewer host syncs",
}


# ---- building blocks ---------------------------------------------------------------------------


def target(
    expr: str, legend: str = "", ref: str = "A", *, instant: bool = False, table: bool = False
) -> Json:
    """One Prometheus query; `table` gives one row per series (instant queries for tables/XY)."""
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": expr,
        "format": "table" if table else "time_series",
        "instant": instant,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "refId": ref,
    }


def regime_overrides(suffix: str = "") -> list[Json]:
    """Fixed colours so a regime has the same colour on every panel."""
    return [
        {
            "matcher": {"id": "byName", "options": f"{regime}{suffix}"},
            "properties": [{"id": "color", "value": {"fixedColor": color, "mode": "fixed"}}],
        }
        for regime, color in REGIME_COLORS.items()
    ]


def regime_value_mappings() -> list[Json]:
    """Numeric regime code (see regime_code_expr) -> name and colour, for state timelines."""
    return [
        {
            "type": "value",
            "options": {
                str(code): {"text": regime, "color": REGIME_COLORS[regime], "index": code}
                for code, regime in enumerate(REGIMES, start=1)
            },
        }
    ]


def lever_value_mappings() -> list[Json]:
    return [
        {
            "type": "value",
            "options": {
                regime: {"text": lever, "index": i} for i, (regime, lever) in enumerate(LEVERS.items())
            },
        }
    ]


def regime_code_expr(selector: str, by: str) -> str:
    """One number per GPU for its current regime (1 idle, 2 memory, 3 compute, 4 latency).

    ridgeline_regime is a state set (one series per regime, 1 for the current one); a state
    timeline needs one series per GPU, so the state set is folded into a code.
    """
    parts = [
        f'{code} * sum by ({by}) (ridgeline_regime{{{selector}, regime="{regime}"}})'
        for code, regime in enumerate(REGIMES, start=1)
    ]
    return "\n+ ".join(parts)


class Layout:
    """Places panels left to right on Grafana's 24-column grid, wrapping to a new line."""

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.line_height = 0
        self.next_id = 1
        self.panels: list[Json] = []

    def add(self, panel: Json, w: int, h: int) -> None:
        if self.x + w > 24:
            self.newline()
        panel["id"] = self.next_id
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.next_id += 1
        self.panels.append(panel)
        self.x += w
        self.line_height = max(self.line_height, h)

    def newline(self) -> None:
        self.y += self.line_height
        self.x = 0
        self.line_height = 0

    def row(self, title: str) -> None:
        if self.x:
            self.newline()
        self.add({"type": "row", "title": title, "collapsed": False, "panels": []}, 24, 1)
        self.newline()


def panel(
    kind: str,
    title: str,
    description: str,
    targets: Iterable[Json],
    *,
    unit: str = "none",
    options: Json | None = None,
    custom: Json | None = None,
    defaults: Json | None = None,
    overrides: list[Json] | None = None,
    transformations: list[Json] | None = None,
    interval: str | None = None,
) -> Json:
    field_defaults: Json = {"unit": unit, "custom": custom or {}}
    field_defaults.update(defaults or {})
    result: Json = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "pluginVersion": PLUGIN_VERSION,
        "targets": list(targets),
        "fieldConfig": {"defaults": field_defaults, "overrides": overrides or []},
        "options": options or {},
    }
    if transformations:
        result["transformations"] = transformations
    if interval:
        result["interval"] = interval
    return result


def stat(
    title: str,
    description: str,
    expr: str,
    unit: str,
    *,
    legend: str = "",
    decimals: int | None = None,
    mappings: list[Json] | None = None,
    thresholds: list[Json] | None = None,
    text_mode: str = "value",
) -> Json:
    defaults: Json = {
        "mappings": mappings or [],
        "thresholds": {"mode": "absolute", "steps": thresholds or [{"color": "blue", "value": None}]},
    }
    if decimals is not None:
        defaults["decimals"] = decimals
    return panel(
        "stat",
        title,
        description,
        [target(expr, legend, instant=True)],
        unit=unit,
        defaults=defaults,
        options={
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": text_mode,
        },
    )


def timeseries(
    title: str,
    description: str,
    targets: list[Json],
    unit: str,
    *,
    stacked: bool = False,
    percent: bool = False,
    log_y: bool = False,
    bars: bool = False,
    fill: int = 10,
    overrides: list[Json] | None = None,
    interval: str | None = None,
    thresholds: list[Json] | None = None,
    max_value: float | None = None,
) -> Json:
    custom: Json = {
        "drawStyle": "bars" if bars else "line",
        "fillOpacity": 80 if bars else (60 if stacked else fill),
        "lineWidth": 1,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"group": "A", "mode": "percent" if percent else ("normal" if stacked else "none")},
        "scaleDistribution": {"type": "log", "log": 10} if log_y else {"type": "linear"},
        "thresholdsStyle": {"mode": "dashed" if thresholds else "off"},
    }
    defaults: Json = {"min": None if log_y else 0}
    if max_value is not None:
        defaults["max"] = max_value
    if thresholds:
        defaults["thresholds"] = {"mode": "absolute", "steps": thresholds}
    return panel(
        "timeseries",
        title,
        description,
        targets,
        unit=unit,
        custom=custom,
        defaults=defaults,
        overrides=overrides,
        interval=interval,
        options={
            "legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "mean"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    )


def table(
    title: str,
    description: str,
    targets: list[Json],
    *,
    rename: dict[str, str],
    units: dict[str, str] | None = None,
    links: dict[str, Json] | None = None,
    mappings: dict[str, list[Json]] | None = None,
    sort_by: str | None = None,
) -> Json:
    """Instant queries merged into one row per label set; only the renamed columns are shown."""
    overrides: list[Json] = []
    for column, unit in (units or {}).items():
        overrides.append(
            {"matcher": {"id": "byName", "options": column}, "properties": [{"id": "unit", "value": unit}]}
        )
    for column, link in (links or {}).items():
        overrides.append(
            {"matcher": {"id": "byName", "options": column}, "properties": [{"id": "links", "value": [link]}]}
        )
    for column, column_mappings in (mappings or {}).items():
        overrides.append(
            {
                "matcher": {"id": "byName", "options": column},
                "properties": [{"id": "mappings", "value": column_mappings}],
            }
        )
    order = {name: i for i, name in enumerate(rename)}
    transformations: list[Json] = [
        {"id": "merge", "options": {}},
        {
            "id": "organize",
            "options": {
                "excludeByName": {"Time": True},
                "includeByName": dict.fromkeys(rename, True),
                "indexByName": order,
                "renameByName": rename,
            },
        },
    ]
    options: Json = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False, "reducer": ["sum"]}}
    if sort_by:
        options["sortBy"] = [{"displayName": sort_by, "desc": True}]
    return panel(
        "table",
        title,
        description,
        targets,
        overrides=overrides,
        transformations=transformations,
        options=options,
    )


def state_timeline(title: str, description: str, expr: str, legend: str) -> Json:
    return panel(
        "state-timeline",
        title,
        description,
        [target(expr, legend)],
        defaults={
            "mappings": regime_value_mappings(),
            "thresholds": {"mode": "absolute", "steps": [{"color": "transparent", "value": None}]},
            "color": {"mode": "thresholds"},
        },
        custom={"fillOpacity": 80, "lineWidth": 0},
        options={
            "showValue": "never",
            "mergeValues": True,
            "rowHeight": 0.8,
            "alignValue": "left",
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
        },
    )


def text(title: str, content: str) -> Json:
    return {"type": "text", "title": title, "options": {"mode": "markdown", "content": content}}


# ---- template variables ------------------------------------------------------------------------


def datasource_variable() -> Json:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "includeAll": False,
        "multi": False,
    }


def query_variable(
    name: str, label: str, query: str, *, all_value: str | None = ".*", multi: bool = False, hide: int = 0
) -> Json:
    """A label_values() variable; all_value=None makes it single-valued without an All option."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "refresh": 2,
        "sort": 1,
        "hide": hide,
        "includeAll": all_value is not None,
        "allValue": all_value,
        "multi": multi,
        "current": {},
        "regex": "",
    }


def dashboard(uid: str, title: str, description: str, variables: list[Json], layout: Layout) -> Json:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["ridgeline", "gpu", "roofline"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "version": 1,
        "annotations": {"list": []},
        "links": [
            {
                "title": "Ridgeline",
                "type": "dashboards",
                "tags": ["ridgeline"],
                "asDropdown": True,
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "templating": {"list": [datasource_variable(), *variables]},
        "panels": layout.panels,
    }


NODE_LINK: Json = {
    "title": "Node dashboard",
    "url": "/d/ridgeline-node/ridgeline-node?${__url_time_range}&var-datasource=${datasource}"
    "&var-instance=${__data.fields.instance}",
}
WORKLOAD_LINK: Json = {
    "title": "Workload dashboard",
    "url": "/d/ridgeline-workload/ridgeline-workload?${__url_time_range}&var-datasource=${datasource}"
    "&var-namespace=${__data.fields.namespace}&var-pod=${__data.fields.pod}",
}

# ---- Fleet -------------------------------------------------------------------------------------


def workload_ranking(regime: str) -> list[Json]:
    """Top pods by GPU-equivalents spent in `regime`, with their share, intensity and utilization."""
    c = 'cluster=~"$cluster"'
    in_regime = f'{c}, regime="{regime}"'
    top = (
        "topk(10, sum by (cluster, namespace, pod) "
        f"(namespace_pod:ridgeline_regime_seconds:rate5m{{{in_regime}}}) > 0)"
    )
    keep = f"and on (cluster, namespace, pod) {top}"
    return [
        target(top, ref="A", instant=True, table=True),
        target(
            "sum by (cluster, namespace, pod) "
            f"(namespace_pod:ridgeline_regime_time:ratio_rate5m{{{in_regime}}}) {keep}",
            ref="B",
            instant=True,
            table=True,
        ),
        target(
            f"namespace_pod:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{c}}} {keep}",
            ref="C",
            instant=True,
            table=True,
        ),
        target(
            f"namespace_pod:ridgeline_flop_utilization:ratio_rate5m{{{c}}} {keep}",
            ref="D",
            instant=True,
            table=True,
        ),
    ]


WORKLOAD_COLUMNS = {
    "cluster": "Cluster",
    "namespace": "Namespace",
    "pod": "Pod",
    "Value #A": "GPUs in regime",
    "Value #B": "Share of its GPU time",
    "Value #C": "Intensity (FLOP/B)",
    "Value #D": "Flop utilization",
}
WORKLOAD_UNITS = {
    "Share of its GPU time": "percentunit",
    "Flop utilization": "percentunit",
    "GPUs in regime": "short",
    "Intensity (FLOP/B)": "short",
}


FLEET_FLOP_UTILIZATION = (
    'sum(cluster:ridgeline_flop:rate5m{cluster=~"$cluster"})\n'
    '/ sum(cluster:ridgeline_peak_flop_per_second:sum{cluster=~"$cluster"})'
)
FLEET_BANDWIDTH_UTILIZATION = (
    'sum(cluster:ridgeline_dram_bytes:rate5m{cluster=~"$cluster"})\n'
    '/ sum(cluster:ridgeline_peak_bandwidth_bytes_per_second:sum{cluster=~"$cluster"})'
)
FLEET_INTENSITY = (
    'sum(cluster:ridgeline_flop:rate5m{cluster=~"$cluster"})\n'
    '/ sum(cluster:ridgeline_dram_bytes:rate5m{cluster=~"$cluster"})'
)


def fleet() -> Json:
    c = 'cluster=~"$cluster"'
    lay = Layout()
    lay.row("Fleet now")
    lay.add(
        stat(
            "GPUs reporting",
            "GPUs with a current regime, over the selected clusters.",
            f"sum(cluster:ridgeline_gpus:count{{{c}}})",
            "short",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Idle but allocated",
            "GPUs whose regime is idle while a pod holds them.",
            f'count(ridgeline_regime{{{c}, regime="idle", pod!=""}} == 1) or vector(0)',
            "short",
            thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Latency-bound GPUs",
            "GPUs busy but at neither wall (the costliest regime).",
            f'sum(cluster:ridgeline_gpus:count{{{c}, regime="latency_bound"}}) or vector(0)',
            "short",
            thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Fleet flop utilization",
            "Achieved FLOP/s over the summed peak of every GPU (idle ones count).",
            FLEET_FLOP_UTILIZATION,
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Fleet DRAM bandwidth utilization",
            "DRAM bytes/s over the summed bandwidth of every GPU.",
            FLEET_BANDWIDTH_UTILIZATION,
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Fleet arithmetic intensity",
            "sum(FLOP/s) / sum(DRAM bytes/s): FLOP per byte over the fleet.",
            FLEET_INTENSITY,
            "FLOP/B",
            decimals=1,
        ),
        4,
        4,
    )

    lay.row("Regimes over time")
    lay.add(
        timeseries(
            "GPUs by regime",
            "Count of GPUs by current (debounced) regime.",
            [target(f"sum by (regime) (cluster:ridgeline_gpus:count{{{c}}})", "{{regime}}")],
            "short",
            stacked=True,
            overrides=regime_overrides(),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "GPU-hours by regime",
            "GPU-hours spent in each raw regime per interval (from the time-in-regime counters, so exact).",
            [
                target(
                    f"sum by (regime) (increase(ridgeline_regime_seconds_total{{{c}}}[$__interval])) / 3600",
                    "{{regime}}",
                )
            ],
            "h",
            stacked=True,
            bars=True,
            overrides=regime_overrides(),
            interval="1h",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Share of GPU time by regime",
            "Fraction of all GPU time in each regime (5m windows).",
            [
                target(
                    f"sum by (regime) (cluster:ridgeline_regime_seconds:rate5m{{{c}}})\n/ ignoring (regime) "
                    f"group_left () sum(cluster:ridgeline_regime_seconds:rate5m{{{c}}})",
                    "{{regime}}",
                )
            ],
            "percentunit",
            stacked=True,
            percent=True,
            overrides=regime_overrides(),
        ),
        12,
        8,
    )
    lay.add(
        table(
            "GPUs by card and regime",
            "Current regime counts per card model.",
            [
                target(
                    f"sum by (card, regime) (cluster:ridgeline_gpus:count{{{c}}})", instant=True, table=True
                )
            ],
            rename={"card": "Card", "regime": "Regime", "Value": "GPUs"},
            sort_by="GPUs",
        ),
        12,
        8,
    )

    lay.row("Roofline")
    lay.add(
        timeseries(
            "Fleet arithmetic intensity vs ridge",
            "Fleet FLOP per DRAM byte against each card's ridge: below the ridge the fleet is on "
            "the memory side.",
            [
                target(
                    FLEET_INTENSITY,
                    "fleet intensity",
                    "A",
                ),
                target(f"max by (card) (ridgeline_ridge_flop_per_byte{{{c}}})", "ridge {{card}}", "B"),
            ],
            "FLOP/B",
            log_y=True,
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Fleet flop and bandwidth utilization",
            "Achieved FLOP/s and DRAM bytes/s as fractions of the fleet's summed peaks.",
            [
                target(
                    FLEET_FLOP_UTILIZATION,
                    "flop utilization",
                    "A",
                ),
                target(
                    f"sum(cluster:ridgeline_dram_bytes:rate5m{{{c}}}) / "
                    f"sum(cluster:ridgeline_peak_bandwidth_bytes_per_second:sum{{{c}}})",
                    "DRAM bandwidth utilization",
                    "B",
                ),
            ],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    lay.add(
        table(
            "Nodes",
            "Per node: flop utilization, DRAM bandwidth utilization and intensity (5m).",
            [
                target(
                    f"instance:ridgeline_flop_utilization:ratio_rate5m{{{c}}}",
                    ref="A",
                    instant=True,
                    table=True,
                ),
                target(
                    f"instance:ridgeline_dram_bandwidth_utilization:ratio_rate5m{{{c}}}",
                    ref="B",
                    instant=True,
                    table=True,
                ),
                target(
                    f"instance:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{c}}}",
                    ref="C",
                    instant=True,
                    table=True,
                ),
            ],
            rename={
                "cluster": "Cluster",
                "node": "Node",
                "instance": "Instance",
                "Value #A": "Flop utilization",
                "Value #B": "DRAM bandwidth utilization",
                "Value #C": "Intensity (FLOP/B)",
            },
            units={"Flop utilization": "percentunit", "DRAM bandwidth utilization": "percentunit"},
            links={"Instance": NODE_LINK},
            sort_by="Flop utilization",
        ),
        24,
        8,
    )

    lay.row("Workloads")
    lay.add(
        table(
            "Top memory-bound workloads",
            "Pods by GPU-equivalents spent memory-bound (5m). Lever: " + LEVERS["memory_bound"] + ".",
            workload_ranking("memory_bound"),
            rename=WORKLOAD_COLUMNS,
            units=WORKLOAD_UNITS,
            links={"Pod": WORKLOAD_LINK},
            sort_by="GPUs in regime",
        ),
        12,
        8,
    )
    lay.add(
        table(
            "Top latency-bound workloads",
            "Pods by GPU-equivalents spent latency-bound (5m). Lever: " + LEVERS["latency_bound"] + ".",
            workload_ranking("latency_bound"),
            rename=WORKLOAD_COLUMNS,
            units=WORKLOAD_UNITS,
            links={"Pod": WORKLOAD_LINK},
            sort_by="GPUs in regime",
        ),
        12,
        8,
    )
    by = "cluster, node, instance, gpu, uuid, card, namespace, pod"
    idle_held = f'{c}, regime="idle", pod!=""'
    lay.add(
        table(
            "Idle-but-allocated GPUs",
            "GPUs idle now while a pod holds them, with the idle share of their last hour.",
            [
                target(
                    f"sum by ({by}) (rate(ridgeline_regime_seconds_total{{{idle_held}}}[1h]))\n"
                    f'/ sum by ({by}) (rate(ridgeline_regime_seconds_total{{{c}, pod!=""}}[1h]))\n'
                    f"and on (cluster, instance, uuid) (ridgeline_regime{{{idle_held}}} == 1)",
                    instant=True,
                    table=True,
                )
            ],
            rename={
                "cluster": "Cluster",
                "node": "Node",
                "instance": "Instance",
                "gpu": "GPU",
                "card": "Card",
                "namespace": "Namespace",
                "pod": "Pod",
                "Value": "Idle share, last hour",
            },
            units={"Idle share, last hour": "percentunit"},
            links={"Pod": WORKLOAD_LINK, "Instance": NODE_LINK},
            sort_by="Idle share, last hour",
        ),
        24,
        8,
    )
    return dashboard(
        "ridgeline-fleet",
        "Ridgeline / Fleet",
        "Where the fleet's GPUs sit on their rooflines: regimes, GPU-hours, intensity, utilization "
        "and the workloads to look at.",
        [query_variable("cluster", "Cluster", "label_values(ridgeline_build_info, cluster)", multi=True)],
        lay,
    )


# ---- Node --------------------------------------------------------------------------------------


def roofline_xy(sel: str, gpu_sel: str) -> Json:
    """Per-GPU roofline: x = intensity (log), y = achieved FLOP/s (log), the card's roof as a line.

    The roof is three points per card — (1, B), (ridge, P), (10 x ridge, P) — built with
    label_replace so that both queries share a `point` label and merge into one x/y table.
    """
    ridge = f"max by (card) (ridgeline_ridge_flop_per_byte{{{sel}}})"
    peak = f"max by (card) (ridgeline_peak_flop_per_second{{{sel}}})"
    bandwidth = f"max by (card) (ridgeline_peak_bandwidth_bytes_per_second{{{sel}}})"
    roof_x = (
        f'label_replace({ridge} * 0 + 1, "point", "1", "", "")\n'
        f'or label_replace({ridge}, "point", "2", "", "")\n'
        f'or label_replace({ridge} * 10, "point", "3", "", "")'
    )
    roof_y = (
        f'label_replace({bandwidth}, "point", "1", "", "")\n'
        f'or label_replace({peak}, "point", "2", "", "")\n'
        f'or label_replace({peak}, "point", "3", "", "")'
    )
    gpus = f"{sel}, {gpu_sel}"
    gpu_flops = f"sum by (gpu, card) (rate(ridgeline_flop_total{{{gpus}}}[$__rate_interval]))"
    gpu_bytes = f"sum by (gpu, card) (rate(ridgeline_dram_bytes_total{{{gpus}}}[$__rate_interval]))"
    targets = [
        target(f"{gpu_flops} / ({gpu_bytes} > 0)", ref="GX", instant=True, table=True),
        target(f"{gpu_flops} and {gpu_bytes} > 0", ref="GY", instant=True, table=True),
        target(roof_x, ref="RX", instant=True, table=True),
        target(roof_y, ref="RY", instant=True, table=True),
    ]

    def series(name: str, x: str, y: str) -> Json:
        return {
            "name": {"fixed": name},
            "frame": {"matcher": {"id": "byIndex", "options": 0}},
            "x": {"matcher": {"id": "byName", "options": x}},
            "y": {"matcher": {"id": "byName", "options": y}},
        }

    log = {"type": "log", "log": 10}
    return panel(
        "xychart",
        "Roofline per GPU",
        "Each GPU at its measured arithmetic intensity (x, FLOP per DRAM byte, log) and achieved FLOP/s "
        "(y, log). The line is the card's roof: bandwidth x intensity up to the ridge, then the peak. "
        "Left of the ridge the lever is fewer bytes per FLOP; far below the roof the GPU is latency-bound.",
        targets,
        unit="flops",
        custom={
            "show": "points",
            "pointSize": {"fixed": 8},
            "scaleDistribution": log,
            "axisPlacement": "auto",
            "lineWidth": 2,
        },
        overrides=[
            {
                "matcher": {"id": "byName", "options": "Value #GX"},
                "properties": [
                    {"id": "unit", "value": "FLOP/B"},
                    {"id": "custom.axisLabel", "value": "FLOP / byte"},
                    {"id": "custom.scaleDistribution", "value": log},
                ],
            },
            {
                "matcher": {"id": "byName", "options": "Value #RX"},
                "properties": [
                    {"id": "unit", "value": "FLOP/B"},
                    {"id": "custom.scaleDistribution", "value": log},
                ],
            },
            {
                "matcher": {"id": "byName", "options": "Value #RY"},
                "properties": [
                    {"id": "custom.show", "value": "lines"},
                    {"id": "color", "value": {"fixedColor": "red", "mode": "fixed"}},
                ],
            },
        ],
        transformations=[{"id": "merge", "options": {}}],
        options={
            "mapping": "manual",
            "series": [series("GPUs", "Value #GX", "Value #GY"), series("roof", "Value #RX", "Value #RY")],
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "single"},
        },
    )


def node() -> Json:
    sel = 'instance="$instance"'
    gpu = 'gpu=~"$gpu"'
    lay = Layout()
    lay.row("Node")
    lay.add(
        stat(
            "GPUs",
            "GPUs Ridgeline sees on this node.",
            f"count(ridgeline_peak_flop_per_second{{{sel}}})",
            "short",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Flop utilization",
            "Node FLOP/s over the summed peak of its GPUs (5m).",
            f"instance:ridgeline_flop_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "DRAM bandwidth utilization",
            "Node DRAM bytes/s over the summed bandwidth (5m).",
            f"instance:ridgeline_dram_bandwidth_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Arithmetic intensity",
            "Node FLOP per DRAM byte (5m).",
            f"instance:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{sel}}}",
            "FLOP/B",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Source",
            "Whether the exporter can read GPU counters (ridgeline_source_up).",
            f"min by (source) (ridgeline_source_up{{{sel}}})",
            "none",
            legend="{{source}}",
            text_mode="value_and_name",
            mappings=[
                {
                    "type": "value",
                    "options": {
                        "0": {"text": "DOWN", "color": "red", "index": 0},
                        "1": {"text": "UP", "color": "green", "index": 1},
                    },
                }
            ],
            thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}],
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Newest sample age",
            "Seconds since the newest sample; over 120 s alerts (RidgelineSamplesStale).",
            f"time() - max(ridgeline_last_sample_timestamp_seconds{{{sel}}})",
            "s",
            decimals=1,
            thresholds=[
                {"color": "green", "value": None},
                {"color": "orange", "value": 30},
                {"color": "red", "value": 120},
            ],
        ),
        4,
        4,
    )

    lay.row("Roofline")
    lay.add(roofline_xy(sel, gpu), 12, 12)
    lay.add(
        state_timeline(
            "Regime per GPU",
            "Current (debounced) regime of each GPU over time.",
            regime_code_expr(f"{sel}, {gpu}", "gpu, gpu_instance"),
            "GPU {{gpu}}",
        ),
        12,
        12,
    )

    lay.row("Counters")
    lay.add(
        timeseries(
            "DRAM vs tensor activity",
            "Smoothed DRAM_ACTIVE and PIPE_TENSOR_ACTIVE per GPU. DRAM's practical wall is 0.8, "
            "the tensor pipe's 0.93.",
            [
                target(f"ridgeline_dram_active_ratio{{{sel}, {gpu}}}", "GPU {{gpu}} DRAM", "A"),
                target(f"ridgeline_tensor_active_ratio{{{sel}, {gpu}}}", "GPU {{gpu}} tensor", "B"),
            ],
            "percentunit",
            max_value=1,
            thresholds=[{"color": "transparent", "value": None}, {"color": "orange", "value": 0.8}],
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Roofline efficiency",
            "Achieved over attainable FLOP/s at the GPU's intensity: "
            "max(DRAM active, tensor active x clock ratio).",
            [target(f"ridgeline_roofline_efficiency_ratio{{{sel}, {gpu}}}", "GPU {{gpu}}")],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Arithmetic intensity vs ridge",
            "Smoothed FLOP per DRAM byte per GPU against the card's ridge (absent while DRAM is idle).",
            [
                target(f"ridgeline_arithmetic_intensity_flop_per_byte{{{sel}, {gpu}}}", "GPU {{gpu}}", "A"),
                target(f"max by (card) (ridgeline_ridge_flop_per_byte{{{sel}}})", "ridge {{card}}", "B"),
            ],
            "FLOP/B",
            log_y=True,
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Flop utilization per GPU",
            "Smoothed tensor activity x clock ratio: the fraction of peak FLOP/s achieved.",
            [target(f"ridgeline_flop_utilization_ratio{{{sel}, {gpu}}}", "GPU {{gpu}}")],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Share of node GPU time by regime",
            "Fraction of the node's GPU time in each raw regime (5m).",
            [target(f"instance:ridgeline_regime_time:ratio_rate5m{{{sel}}}", "{{regime}}")],
            "percentunit",
            stacked=True,
            percent=True,
            overrides=regime_overrides(),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Activity as the GPU reports it",
            "GR_ENGINE_ACTIVE and GPU_UTIL where the source "
            "has them; busy here with DRAM and tensor flat at 0 means frozen profiling counters.",
            [
                target(f"ridgeline_gr_engine_active_ratio{{{sel}, {gpu}}}", "GPU {{gpu}} GR engine", "A"),
                target(f"ridgeline_gpu_utilization_ratio{{{sel}, {gpu}}}", "GPU {{gpu}} GPU_UTIL", "B"),
            ],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )

    lay.row("GPUs")
    lay.add(
        table(
            "GPUs on this node",
            "Current regime, who holds the GPU, and the lever.",
            [
                target(
                    f'label_replace(ridgeline_regime{{{sel}, {gpu}}} == 1, "lever", "$1", "regime", "(.*)")',
                    instant=True,
                    table=True,
                )
            ],
            rename={
                "gpu": "GPU",
                "gpu_instance": "MIG instance",
                "model": "Model",
                "card": "Card",
                "namespace": "Namespace",
                "pod": "Pod",
                "regime": "Regime",
                "lever": "Lever",
            },
            mappings={"Lever": lever_value_mappings()},
            links={"Pod": WORKLOAD_LINK},
        ),
        24,
        8,
    )

    lay.row("Source health")
    lay.add(
        timeseries(
            "Source and scrape up",
            "ridgeline_source_up per source and Prometheus' up for the target.",
            [
                target(f"ridgeline_source_up{{{sel}}}", "source {{source}}", "A"),
                target(f"up{{{sel}}}", "scrape", "B"),
            ],
            "none",
            max_value=1,
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Newest sample age",
            "time() - ridgeline_last_sample_timestamp_seconds.",
            [target(f"time() - ridgeline_last_sample_timestamp_seconds{{{sel}}}", "age")],
            "s",
            thresholds=[{"color": "transparent", "value": None}, {"color": "red", "value": 120}],
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Samples and errors",
            "Samples per second and sample errors per second by reason.",
            [
                target(f"sum(rate(ridgeline_samples_total{{{sel}}}[$__rate_interval]))", "samples", "A"),
                target(
                    f"sum by (reason) (rate(ridgeline_sample_errors_total{{{sel}}}[$__rate_interval])) "
                    "or on () vector(0)",
                    "errors {{reason}}",
                    "B",
                ),
            ],
            "ops",
        ),
        8,
        8,
    )
    return dashboard(
        "ridgeline-node",
        "Ridgeline / Node",
        "One node's GPUs on their rooflines: where each GPU sits, its regime over time, the "
        "counters behind it and the exporter's health.",
        [
            query_variable("cluster", "Cluster", "label_values(ridgeline_build_info, cluster)", multi=True),
            query_variable(
                "node", "Node", 'label_values(ridgeline_build_info{cluster=~"$cluster"}, node)', multi=True
            ),
            query_variable(
                "instance",
                "Instance",
                'label_values(ridgeline_build_info{cluster=~"$cluster", node=~"$node"}, instance)',
                all_value=None,
            ),
            query_variable(
                "gpu", "GPU", 'label_values(ridgeline_regime{instance="$instance"}, gpu)', multi=True
            ),
        ],
        lay,
    )


# ---- Workload ----------------------------------------------------------------------------------


def workload() -> Json:
    sel = 'cluster=~"$cluster", namespace="$namespace", pod="$pod"'
    lay = Layout()
    lay.row("Workload")
    lay.add(
        stat(
            "GPUs held",
            "GPUs attributed to this pod.",
            f"count(ridgeline_peak_flop_per_second{{{sel}}})",
            "short",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Main regime (5m)",
            "The regime with the largest share of the pod's GPU time.",
            f"topk(1, namespace_pod:ridgeline_regime_time:ratio_rate5m{{{sel}}})",
            "percentunit",
            legend="{{regime}}",
            text_mode="value_and_name",
            decimals=0,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Flop utilization",
            "Pod FLOP/s over the summed peak of its GPUs (5m).",
            f"namespace_pod:ridgeline_flop_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "DRAM bandwidth utilization",
            "Pod DRAM bytes/s over the summed bandwidth of its GPUs (5m).",
            f"namespace_pod:ridgeline_dram_bandwidth_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Arithmetic intensity",
            "Pod FLOP per DRAM byte (5m).",
            f"namespace_pod:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{sel}}}",
            "FLOP/B",
            decimals=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Ridge",
            "The ridge of the pod's card(s): intensity needed to leave the memory side.",
            f"max by (card) (ridgeline_ridge_flop_per_byte{{{sel}}})",
            "FLOP/B",
            legend="{{card}}",
            decimals=0,
        ),
        4,
        4,
    )

    lay.row("Regimes")
    lay.add(
        panel(
            "bargauge",
            "Regime share (5m)",
            "Share of the pod's GPU time in each regime.",
            [
                target(
                    f"namespace_pod:ridgeline_regime_time:ratio_rate5m{{{sel}}}", "{{regime}}", instant=True
                )
            ],
            unit="percentunit",
            defaults={"min": 0, "max": 1},
            overrides=regime_overrides(),
            options={
                "orientation": "horizontal",
                "displayMode": "basic",
                "showUnfilled": True,
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Regime share over time",
            "Share of the pod's GPU time in each regime (5m windows).",
            [target(f"namespace_pod:ridgeline_regime_time:ratio_rate5m{{{sel}}}", "{{regime}}")],
            "percentunit",
            stacked=True,
            percent=True,
            overrides=regime_overrides(),
        ),
        16,
        8,
    )
    lay.add(
        state_timeline(
            "Regime per GPU",
            "Current (debounced) regime of each of the pod's GPUs.",
            regime_code_expr(sel, "instance, gpu, gpu_instance"),
            "{{instance}} GPU {{gpu}}",
        ),
        24,
        6,
    )

    lay.row("Roofline")
    lay.add(
        timeseries(
            "Arithmetic intensity vs ridge",
            "Pod FLOP per DRAM byte against its card's ridge.",
            [
                target(
                    f"namespace_pod:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{sel}}}",
                    "intensity",
                    "A",
                ),
                target(f"max by (card) (ridgeline_ridge_flop_per_byte{{{sel}}})", "ridge {{card}}", "B"),
            ],
            "FLOP/B",
            log_y=True,
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Flop and bandwidth utilization",
            "Pod FLOP/s and DRAM bytes/s over its GPUs' peaks.",
            [
                target(
                    f"namespace_pod:ridgeline_flop_utilization:ratio_rate5m{{{sel}}}", "flop utilization", "A"
                ),
                target(
                    f"namespace_pod:ridgeline_dram_bandwidth_utilization:ratio_rate5m{{{sel}}}",
                    "DRAM bandwidth utilization",
                    "B",
                ),
            ],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Achieved FLOP/s",
            "Estimated FLOP/s over the pod's GPUs.",
            [target(f"namespace_pod:ridgeline_flop:rate5m{{{sel}}}", "FLOP/s")],
            "flops",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "DRAM bytes/s",
            "Estimated DRAM traffic over the pod's GPUs.",
            [target(f"namespace_pod:ridgeline_dram_bytes:rate5m{{{sel}}}", "bytes/s")],
            "Bps",
        ),
        12,
        8,
    )

    lay.row("The lever")
    lay.add(
        table(
            "GPUs and the lever",
            "Each GPU of the pod, its current regime and what would move it.",
            [
                target(
                    f'label_replace(ridgeline_regime{{{sel}}} == 1, "lever", "$1", "regime", "(.*)")',
                    instant=True,
                    table=True,
                )
            ],
            rename={
                "node": "Node",
                "instance": "Instance",
                "gpu": "GPU",
                "gpu_instance": "MIG instance",
                "card": "Card",
                "container": "Container",
                "regime": "Regime",
                "lever": "Lever",
            },
            mappings={"Lever": lever_value_mappings()},
            links={"Instance": NODE_LINK},
        ),
        16,
        8,
    )
    lay.add(
        text(
            "Reading the regimes",
            "\n".join(
                [f"- **{regime}**: {lever}." for regime, lever in LEVERS.items()]
                + [
                    "",
                    "DCGM counters average every kernel in an interval, so a regime describes the pod's "
                    "workload mix, not one kernel: profile with Nsight to find the kernel.",
                ]
            ),
        ),
        8,
        8,
    )
    return dashboard(
        "ridgeline-workload",
        "Ridgeline / Workload",
        "One namespace/pod across its GPUs: regime share, intensity against the ridge, and the lever.",
        [
            query_variable("cluster", "Cluster", "label_values(ridgeline_build_info, cluster)", multi=True),
            query_variable(
                "namespace",
                "Namespace",
                'label_values(ridgeline_regime{cluster=~"$cluster", pod!=""}, namespace)',
                all_value=None,
            ),
            query_variable(
                "pod",
                "Pod",
                'label_values(ridgeline_regime{cluster=~"$cluster", namespace="$namespace", pod!=""}, pod)',
                all_value=None,
            ),
        ],
        lay,
    )


DASHBOARDS = {"ridgeline-fleet.json": fleet, "ridgeline-node.json": node, "ridgeline-workload.json": workload}


def render() -> dict[str, str]:
    """File name -> JSON text, deterministic (sorted keys, fixed indent, trailing newline)."""
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON is out of date")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="directory to write (default: %(default)s)")
    args = parser.parse_args(argv)
    stale = []
    for name, text_ in render().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text_:
                stale.append(name)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text_)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python grafana/build.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
