"""Generates Ridgeline's Grafana dashboards (grafana/dashboards/*.json) with grafana-foundation-sdk.

Run `python grafana/build.py` to rewrite the JSON, `python grafana/build.py --check` to fail when
the committed JSON differs from what this module produces (tests/test_dashboards.py does the same).
Dashboards as code keep the queries reviewable and identical across panels; the JSON is committed
so Grafana's file provider can load it without Python.

Targets Grafana 11.3: the panels are built with the typed builders of grafana-foundation-sdk's
11.3 build (pinned in pyproject.toml), and tests/test_dashboards_schema.py type-checks the output
against npm's @grafana/schema 11.3. One panel is not expressible in the SDK's types: the XY chart
(Node dashboard, "Roofline per GPU"). Grafana 11.3 draws XY charts with the v2 save model
(`mapping` and field matchers per series) while the SDK's `xychart` module still models v1
(`seriesMapping`/`dims`), which 11.3 would not migrate once `pluginVersion` is set; that panel is
built with the SDK's generic panel builder and checked against @grafana/schema's `xychart2` types.

The regimes and their levers come from the package (exporter.roofline), so the dashboards say what
/classify says. Queries read the recording rules in rules/ where they exist and the raw per-GPU
series otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from grafana_foundation_sdk.builders import bargauge, prometheus, stat, statetimeline, table, text, timeseries
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dashboard_b
from grafana_foundation_sdk.cog import builder as cog_builder
from grafana_foundation_sdk.cog import variants as cog_variants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, dashboard
from grafana_foundation_sdk.models import prometheus as prometheus_m
from grafana_foundation_sdk.models import text as text_m

from exporter.roofline import REGIMES, lever_for
from exporter.view.units import regime_colour

Json = dict[str, Any]
Query = cog_builder.Builder[cog_variants.Dataquery]


class PanelBuilder(Protocol):
    """What every typed panel builder of the SDK offers (they share no base class that says so)."""

    def build(self) -> dashboard.Panel: ...
    def title(self, title: str) -> Self: ...
    def description(self, description: str) -> Self: ...
    def datasource(self, datasource: dashboard.DataSourceRef) -> Self: ...
    def targets(self, targets: list[Query]) -> Self: ...
    def span(self, w: int) -> Self: ...
    def height(self, h: int) -> Self: ...
    def override_by_name(self, name: str, properties: list[dashboard.DynamicConfigValue]) -> Self: ...


P = TypeVar("P", bound=PanelBuilder)

OUT_DIR = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = dashboard.DataSourceRef(type_val="prometheus", uid="${datasource}")
PLUGIN_VERSION = "11.3.0"
"""Grafana version the panels' save model follows (written as every panel's pluginVersion)."""
REGIME_COLORS = {regime: regime_colour(regime) for regime in REGIMES}
"""The package's palette (exporter.view.units.REGIME_LOOKS): the page, the report and `top` use it."""
LOG10 = {"type": "log", "log": 10}


def lever_phrase(regime: str) -> tuple[str, str]:
    """The package's lever sentence split into its head and the lever: ("memory-bound", "move ...")."""
    head, _, lever = lever_for(regime).partition(": ")
    return (head, lever) if lever else (regime, head)


# ---- building blocks ---------------------------------------------------------------------------


def target(
    expr: str, legend: str = "", ref: str = "A", *, instant: bool = False, table: bool = False
) -> Query:
    """One Prometheus query; `table` gives one row per series (instant queries for tables/XY)."""
    query = (
        prometheus.Dataquery()
        .datasource(DATASOURCE)
        .editor_mode(prometheus_m.QueryEditorMode.CODE)
        .expr(expr)
        .format(prometheus_m.PromQueryFormat.TABLE if table else prometheus_m.PromQueryFormat.TIME_SERIES)
        .legend_format(legend or "__auto")
        .ref_id(ref)
    )
    return query.instant() if instant else query.range()


def steps(*pairs: tuple[str, float | None]) -> dashboard_b.ThresholdsConfig:
    """Absolute thresholds from (colour, value) pairs; the first value is None (the base)."""
    return (
        dashboard_b.ThresholdsConfig()
        .mode(dashboard.ThresholdsMode.ABSOLUTE)
        .steps([dashboard.Threshold(color=color, value=value) for color, value in pairs])
    )


def fixed_color(color: str) -> dashboard.DynamicConfigValue:
    return dashboard.DynamicConfigValue(id_val="color", value={"fixedColor": color, "mode": "fixed"})


def value_map(options: dict[str, dashboard.ValueMappingResult]) -> list[dashboard.ValueMapping]:
    return [dashboard.ValueMap(options=options)]


def regime_value_mappings() -> list[dashboard.ValueMapping]:
    """Numeric regime code (see regime_code_expr) -> name and colour, for state timelines."""
    return value_map(
        {
            str(code): dashboard.ValueMappingResult(text=regime, color=REGIME_COLORS[regime], index=code)
            for code, regime in enumerate(REGIMES, start=1)
        }
    )


def lever_value_mappings() -> list[dashboard.ValueMapping]:
    """Regime name -> the lever, in the words /classify answers with."""
    return value_map(
        {
            regime: dashboard.ValueMappingResult(text=lever_for(regime), index=i)
            for i, regime in enumerate(REGIMES)
        }
    )


def regime_code_expr(selector: str, by: str) -> str:
    """One number per GPU for its current regime (1 idle, 2 memory, 3 compute, 4 latency, ...).

    ridgeline_regime is one series per GPU, labelled with its regime (a state set before issue
    22: one series per regime, 1 for the current one); each regime's series is weighted by its
    code and `or` keeps them all, so the sum is the code under either shape.
    """
    parts = [
        f'{code} * ridgeline_regime{{{selector}, regime="{regime}"}}'
        for code, regime in enumerate(REGIMES, start=1)
    ]
    return f"sum by ({by}) (\n  " + "\n  or ".join(parts) + "\n)"


def with_regime_colors(panel: P) -> P:
    """Fixed colours so a regime has the same colour on every panel."""
    for regime, color in REGIME_COLORS.items():
        panel.override_by_name(regime, [fixed_color(color)])
    return panel


def common_panel(panel: P, title: str, description: str, targets: Iterable[Query]) -> P:
    """Title, description, the datasource variable and the queries: what every panel has."""
    panel.title(title).description(description).datasource(DATASOURCE).targets(list(targets))
    return panel


def reduce_last() -> common_b.ReduceDataOptions:
    return common_b.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)


def stat_panel(
    title: str,
    description: str,
    expr: str,
    unit: str,
    *,
    legend: str = "",
    decimals: int | None = None,
    mappings: list[dashboard.ValueMapping] | None = None,
    thresholds: tuple[tuple[str, float | None], ...] = (("blue", None),),
    text_mode: common.BigValueTextMode = common.BigValueTextMode.VALUE,
) -> stat.Panel:
    panel = (
        common_panel(stat.Panel(), title, description, [target(expr, legend, instant=True)])
        .unit(unit)
        .mappings(mappings or [])
        .thresholds(steps(*thresholds))
        .color_mode(common.BigValueColorMode.VALUE)
        .graph_mode(common.BigValueGraphMode.NONE)
        .justify_mode(common.BigValueJustifyMode.AUTO)
        .reduce_options(reduce_last())
        .text_mode(text_mode)
    )
    return panel if decimals is None else panel.decimals(decimals)


def timeseries_panel(
    title: str,
    description: str,
    targets: list[Query],
    unit: str,
    *,
    stacked: bool = False,
    percent: bool = False,
    log_y: bool = False,
    bars: bool = False,
    fill: int = 10,
    regime_colors: bool = False,
    interval: str | None = None,
    thresholds: tuple[tuple[str, float | None], ...] = (),
    max_value: float | None = None,
) -> timeseries.Panel:
    stacking = common.StackingMode.PERCENT if percent else (common.StackingMode.NORMAL if stacked else None)
    panel = (
        common_panel(timeseries.Panel(), title, description, targets)
        .unit(unit)
        .draw_style(common.GraphDrawStyle.BARS if bars else common.GraphDrawStyle.LINE)
        .fill_opacity(80 if bars else (60 if stacked else fill))
        .line_width(1)
        .show_points(common.VisibilityMode.NEVER)
        .span_nulls(False)
        .stacking(common_b.StackingConfig().group("A").mode(stacking or common.StackingMode.NONE))
        .scale_distribution(
            common_b.ScaleDistributionConfig().type(common.ScaleDistribution.LOG).log(10)
            if log_y
            else common_b.ScaleDistributionConfig().type(common.ScaleDistribution.LINEAR)
        )
        .thresholds_style(
            common_b.GraphThresholdsStyleConfig().mode(
                common.GraphThresholdsStyleMode.DASHED if thresholds else common.GraphThresholdsStyleMode.OFF
            )
        )
        .legend(
            common_b.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.RIGHT)
            .show_legend(True)
            .calcs(["lastNotNull", "mean"])
        )
        .tooltip(
            common_b.VizTooltipOptions()
            .mode(common.TooltipDisplayMode.MULTI)
            .sort(common.SortOrder.DESCENDING)
        )
    )
    if not log_y:  # a log axis has no 0: leave its minimum to Grafana
        panel.min(0)
    if max_value is not None:
        panel.max(max_value)
    if thresholds:
        panel.thresholds(steps(*thresholds))
    if interval:
        panel.interval(interval)
    return with_regime_colors(panel) if regime_colors else panel


def table_panel(
    title: str,
    description: str,
    targets: list[Query],
    *,
    rename: dict[str, str],
    units: dict[str, str] | None = None,
    links: dict[str, Json] | None = None,
    mappings: dict[str, list[dashboard.ValueMapping]] | None = None,
    sort_by: str | None = None,
) -> table.Panel:
    """Instant queries merged into one row per label set; only the renamed columns are shown."""
    panel = (
        common_panel(table.Panel(), title, description, targets)
        .unit("none")
        .show_header(True)
        .cell_height(common.TableCellHeight.SM)
        .footer(common_b.TableFooterOptions().show(False).reducer(["sum"]))
        .transformations(
            [
                dashboard.DataTransformerConfig(id_val="merge", options={}),
                dashboard.DataTransformerConfig(
                    id_val="organize",
                    options={
                        "excludeByName": {"Time": True},
                        "includeByName": dict.fromkeys(rename, True),
                        "indexByName": {name: i for i, name in enumerate(rename)},
                        "renameByName": rename,
                    },
                ),
            ]
        )
    )
    for column, unit in (units or {}).items():
        panel.override_by_name(column, [dashboard.DynamicConfigValue(id_val="unit", value=unit)])
    for column, link in (links or {}).items():
        panel.override_by_name(column, [dashboard.DynamicConfigValue(id_val="links", value=[link])])
    for column, column_mappings in (mappings or {}).items():
        panel.override_by_name(
            column, [dashboard.DynamicConfigValue(id_val="mappings", value=column_mappings)]
        )
    if sort_by:
        panel.sort_by([common_b.TableSortByFieldState().display_name(sort_by).desc(True)])
    return panel


def state_timeline_panel(title: str, description: str, expr: str, legend: str) -> statetimeline.Panel:
    return (
        common_panel(statetimeline.Panel(), title, description, [target(expr, legend)])
        .unit("none")
        .mappings(regime_value_mappings())
        .thresholds(steps(("transparent", None)))
        .color_scheme(dashboard_b.FieldColor().mode(dashboard.FieldColorModeId.THRESHOLDS))
        .fill_opacity(80)
        .line_width(0)
        .show_value(common.VisibilityMode.NEVER)
        .merge_values(True)
        .row_height(0.8)
        .align_value(common.TimelineValueAlignment.LEFT)
        .legend(
            common_b.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
    )


def text_panel(title: str, content: str) -> text.Panel:
    return text.Panel().title(title).mode(text_m.TextMode.MARKDOWN).content(content)


# ---- template variables and the dashboard ------------------------------------------------------


def datasource_variable() -> dashboard_b.DatasourceVariable:
    return (
        dashboard_b.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .hide(dashboard.VariableHide.DONT_HIDE)
        .regex("")
        .include_all(False)
        .multi(False)
    )


def query_variable(
    name: str, label: str, query: str, *, all_value: str | None = ".*", multi: bool = False
) -> dashboard_b.QueryVariable:
    """A label_values() variable; all_value=None makes it single-valued without an All option."""
    variable = (
        dashboard_b.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query({"query": query, "refId": f"{name}-variable"})
        .refresh(dashboard.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dashboard.VariableSort.ALPHABETICAL_ASC)
        .hide(dashboard.VariableHide.DONT_HIDE)
        .include_all(all_value is not None)
        .multi(multi)
        .regex("")
    )
    return variable if all_value is None else variable.all_value(all_value)


class Board:
    """A dashboard being laid out: rows and panels left to right on Grafana's 24-column grid.

    The SDK's builder places each panel after the previous one and wraps when a line is full;
    Board adds the panel ids and the pluginVersion the SDK's typed panels leave unset.
    """

    def __init__(self, uid: str, title: str, description: str) -> None:
        self.builder = (
            dashboard_b.Dashboard(title)
            .uid(uid)
            .description(description)
            .tags(["ridgeline", "gpu", "roofline"])
            .editable()
            .tooltip(dashboard.DashboardCursorSync.CROSSHAIR)
            .refresh("30s")
            .time("now-6h", "now")
            .timezone("browser")
            .version(1)
            .annotations([])
            .link(
                dashboard_b.DashboardLink("Ridgeline")
                .type(dashboard.DashboardLinkType.DASHBOARDS)
                .tags(["ridgeline"])
                .as_dropdown(True)
                .include_vars(True)
                .keep_time(True)
            )
            .with_variable(datasource_variable())
        )

    def variable(self, variable: cog_builder.Builder[dashboard.VariableModel]) -> None:
        self.builder.with_variable(variable)

    def row(self, title: str) -> None:
        self.builder.with_row(dashboard_b.Row(title).collapsed(False))

    def add(self, panel: PanelBuilder, w: int, h: int) -> None:
        sized = panel.span(w).height(h)
        assert isinstance(sized, cog_builder.Builder), "an SDK panel builder"
        self.builder.with_panel(sized)

    def build(self) -> Json:
        board = self.builder.build()
        for variable in board.templating.list_val or []:
            # The SDK writes the interval variable's auto* keys on every variable; Grafana 11.3's
            # schema has them on none (tests/test_dashboards_schema.py).
            variable.auto = variable.auto_min = variable.auto_count = None
        for number, panel in enumerate(board.panels or [], start=1):
            panel.id_val = number
            if isinstance(panel, dashboard.Panel):
                panel.plugin_version = PLUGIN_VERSION
        encoded = json.loads(json.dumps(board, cls=JSONEncoder))
        assert isinstance(encoded, dict)
        return encoded


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
CLUSTER_VARIABLE = ("cluster", "Cluster", "label_values(ridgeline_build_info, cluster)")
FLEET_CLUSTER_VARIABLE = ("cluster", "Cluster", "label_values(cluster:ridgeline_gpus:count, cluster)")
"""The Fleet dashboard reads only cluster:, namespace_pod: and hpc_job: series, so that it answers
from a global Prometheus that federates those (deploy/federation/); its variable does too."""

# ---- Fleet -------------------------------------------------------------------------------------


WORKLOAD_KEY = "cluster, namespace, pod, hpc_job"
"""A workload: a pod (namespace, pod) or a Slurm job (hpc_job); the labels it lacks are empty."""


def workloads(metric: str, selector: str) -> str:
    """One recorded quantity for pods and Slurm jobs alike: namespace_pod: or hpc_job: `metric`."""
    return f"(namespace_pod:{metric}{{{selector}}} or hpc_job:{metric}{{{selector}}})"


def workload_ranking(regime: str) -> list[Query]:
    """Top workloads by GPU-equivalents spent in `regime`, with their share, intensity and utilization."""
    c = 'cluster=~"$cluster"'
    in_regime = f'{c}, regime="{regime}"'
    top = f"topk(10, sum by ({WORKLOAD_KEY}) {workloads('ridgeline_regime_seconds:rate5m', in_regime)})"
    keep = f"and on ({WORKLOAD_KEY}) {top}"
    return [
        target(top, ref="A", instant=True, table=True),
        target(
            f"sum by ({WORKLOAD_KEY}) {workloads('ridgeline_regime_time:ratio_rate5m', in_regime)} {keep}",
            ref="B",
            instant=True,
            table=True,
        ),
        target(
            f"{workloads('ridgeline_arithmetic_intensity_flop_per_byte:rate5m', c)} {keep}",
            ref="C",
            instant=True,
            table=True,
        ),
        target(
            f"{workloads('ridgeline_flop_utilization:ratio_rate5m', c)} {keep}",
            ref="D",
            instant=True,
            table=True,
        ),
    ]


WORKLOAD_COLUMNS = {
    "cluster": "Cluster",
    "namespace": "Namespace",
    "pod": "Pod",
    "hpc_job": "Slurm job",
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
    board = Board(
        "ridgeline-fleet",
        "Ridgeline / Fleet",
        "Where the fleet's GPUs sit on their rooflines: regimes, GPU-hours, intensity, utilization "
        "and the workloads to look at.",
    )
    board.variable(query_variable(*FLEET_CLUSTER_VARIABLE, multi=True))
    board.row("Fleet now")
    board.add(
        stat_panel(
            "GPUs reporting",
            "GPUs with a current regime, over the selected clusters.",
            f"sum(cluster:ridgeline_gpus:count{{{c}}})",
            "short",
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Idle but allocated",
            "GPUs whose regime is idle while a pod or a Slurm job holds them.",
            f'sum(cluster:ridgeline_allocated_gpus:count{{{c}, regime="idle"}}) or vector(0)',
            "short",
            thresholds=(("green", None), ("orange", 1)),
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Latency-bound GPUs",
            "GPUs busy but at neither wall (the costliest regime).",
            f'sum(cluster:ridgeline_gpus:count{{{c}, regime="latency_bound"}}) or vector(0)',
            "short",
            thresholds=(("green", None), ("orange", 1)),
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Fleet flop utilization",
            "Achieved FLOP/s over the summed peak of every GPU (idle ones count).",
            FLEET_FLOP_UTILIZATION,
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Fleet DRAM bandwidth utilization",
            "DRAM bytes/s over the summed bandwidth of every GPU.",
            FLEET_BANDWIDTH_UTILIZATION,
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Fleet arithmetic intensity",
            "sum(FLOP/s) / sum(DRAM bytes/s): FLOP per byte over the fleet.",
            FLEET_INTENSITY,
            "FLOP/B",
            decimals=1,
        ),
        4,
        4,
    )

    board.row("Regimes over time")
    board.add(
        timeseries_panel(
            "GPUs by regime",
            "Count of GPUs by current (debounced) regime.",
            [target(f"sum by (regime) (cluster:ridgeline_gpus:count{{{c}}})", "{{regime}}")],
            "short",
            stacked=True,
            regime_colors=True,
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
            "GPU-hours by regime",
            "GPU-hours spent in each raw regime per interval: the mean GPU-equivalents in the regime "
            "over the interval (from the time-in-regime counters, recorded every evaluation) times its "
            "length. The window is the whole interval, at least an hour, so it always holds many samples.",
            [
                target(
                    "sum by (regime) (avg_over_time(cluster:ridgeline_regime_seconds:rate5m"
                    f"{{{c}}}[$__interval])) * $__interval_ms / 3600000",
                    "{{regime}}",
                )
            ],
            "h",
            stacked=True,
            bars=True,
            regime_colors=True,
            interval="1h",
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
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
            regime_colors=True,
        ),
        12,
        8,
    )
    board.add(
        table_panel(
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

    board.row("Roofline")
    board.add(
        timeseries_panel(
            "Fleet arithmetic intensity vs ridge",
            "Fleet FLOP per DRAM byte against each card's ridge: below the ridge the fleet is on "
            "the memory side.",
            [
                target(FLEET_INTENSITY, "fleet intensity", "A"),
                target(
                    f"max by (card, precision) (cluster:ridgeline_card_ridge_flop_per_byte:max{{{c}}})",
                    "ridge {{card}} {{precision}}",
                    "B",
                ),
            ],
            "FLOP/B",
            log_y=True,
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
            "Fleet flop and bandwidth utilization",
            "Achieved FLOP/s and DRAM bytes/s as fractions of the fleet's summed peaks.",
            [
                target(FLEET_FLOP_UTILIZATION, "flop utilization", "A"),
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
    board.add(
        table_panel(
            "Clusters",
            "Per cluster: GPUs reporting, flop utilization, DRAM bandwidth utilization and intensity (5m). "
            "Nodes are on each cluster's Node dashboard.",
            [
                target(
                    f"sum by (cluster) (cluster:ridgeline_gpus:count{{{c}}})",
                    ref="A",
                    instant=True,
                    table=True,
                ),
                target(
                    f"cluster:ridgeline_flop_utilization:ratio_rate5m{{{c}}}",
                    ref="B",
                    instant=True,
                    table=True,
                ),
                target(
                    f"cluster:ridgeline_dram_bandwidth_utilization:ratio_rate5m{{{c}}}",
                    ref="C",
                    instant=True,
                    table=True,
                ),
                target(
                    f"cluster:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{c}}}",
                    ref="D",
                    instant=True,
                    table=True,
                ),
            ],
            rename={
                "cluster": "Cluster",
                "Value #A": "GPUs",
                "Value #B": "Flop utilization",
                "Value #C": "DRAM bandwidth utilization",
                "Value #D": "Intensity (FLOP/B)",
            },
            units={"Flop utilization": "percentunit", "DRAM bandwidth utilization": "percentunit"},
            sort_by="GPUs",
        ),
        24,
        8,
    )

    board.row("Workloads")
    for regime, title in (("memory_bound", "memory-bound"), ("latency_bound", "latency-bound")):
        board.add(
            table_panel(
                f"Top {title} workloads",
                f"Pods by GPU-equivalents spent {title} (5m). Lever: {lever_phrase(regime)[1]}.",
                workload_ranking(regime),
                rename=WORKLOAD_COLUMNS,
                units=WORKLOAD_UNITS,
                links={"Pod": WORKLOAD_LINK},
                sort_by="GPUs in regime",
            ),
            12,
            8,
        )
    idle_sel = f'{c}, regime="idle"'
    idle_now = workloads("ridgeline_gpus:count", idle_sel)
    board.add(
        table_panel(
            "Idle-but-allocated workloads",
            "Pods and Slurm jobs holding GPUs that are idle now, with their idle GPUs averaged over the "
            "last hour.",
            [
                target(f"sum by ({WORKLOAD_KEY}) {idle_now}", ref="A", instant=True, table=True),
                target(
                    f"(avg_over_time(namespace_pod:ridgeline_regime_seconds:rate5m{{{idle_sel}}}[1h])\n"
                    f" or avg_over_time(hpc_job:ridgeline_regime_seconds:rate5m{{{idle_sel}}}[1h]))\n"
                    f"and on ({WORKLOAD_KEY}) {idle_now}",
                    ref="B",
                    instant=True,
                    table=True,
                ),
            ],
            rename={
                "cluster": "Cluster",
                "namespace": "Namespace",
                "pod": "Pod",
                "hpc_job": "Slurm job",
                "Value #A": "Idle GPUs now",
                "Value #B": "Idle GPUs, last hour",
            },
            units={"Idle GPUs now": "short", "Idle GPUs, last hour": "short"},
            links={"Pod": WORKLOAD_LINK},
            sort_by="Idle GPUs now",
        ),
        24,
        8,
    )
    return board.build()


# ---- Node --------------------------------------------------------------------------------------


def roofline_xy(sel: str, gpu_sel: str) -> dashboard_b.Panel:
    """Per-GPU roofline: x = intensity (log), y = achieved FLOP/s (log), the card's roof as a line.

    The roof is three points per card — (1, B), (ridge, P), (10 x ridge, P) — built with
    label_replace so that both queries share a `point` label and merge into one x/y table.
    The SDK's typed xychart builder models the v1 save model, so this panel is the generic builder
    with the v2 options (see the module docstring).
    """
    ridge = f"max by (card) (ridgeline_card_ridge_flop_per_byte{{{sel}}})"
    peak = f"max by (card) (ridgeline_card_peak_flop_per_second{{{sel}}})"
    bandwidth = f"max by (card) (ridgeline_card_peak_bandwidth_bytes_per_second{{{sel}}})"
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

    def prop(name: str, value: object) -> dashboard.DynamicConfigValue:
        return dashboard.DynamicConfigValue(id_val=name, value=value)

    return (
        common_panel(
            dashboard_b.Panel().type("xychart"),
            "Roofline per GPU",
            "Each GPU at its measured arithmetic intensity (x, FLOP per DRAM byte, log) and achieved "
            "FLOP/s (y, log). The line is the card's roof: bandwidth x intensity up to the ridge, then "
            "the peak. Left of the ridge the lever is fewer bytes per FLOP; far below the roof the GPU "
            "is latency-bound.",
            targets,
        )
        .unit("flops")
        .custom(
            {
                "show": "points",
                "pointSize": {"fixed": 8},
                "scaleDistribution": LOG10,
                "axisPlacement": "auto",
                "lineWidth": 2,
            }
        )
        .override_by_name(
            "Value #GX",
            [
                prop("unit", "FLOP/B"),
                prop("custom.axisLabel", "FLOP / byte"),
                prop("custom.scaleDistribution", LOG10),
            ],
        )
        .override_by_name("Value #RX", [prop("unit", "FLOP/B"), prop("custom.scaleDistribution", LOG10)])
        .override_by_name(
            "Value #RY", [prop("custom.show", "lines"), prop("color", {"fixedColor": "red", "mode": "fixed"})]
        )
        .with_transformation(dashboard.DataTransformerConfig(id_val="merge", options={}))
        .options(
            {
                "mapping": "manual",
                "series": [
                    series("GPUs", "Value #GX", "Value #GY"),
                    series("roof", "Value #RX", "Value #RY"),
                ],
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []},
                "tooltip": {"mode": "single", "sort": "none"},
            }
        )
    )


def node() -> Json:
    sel = 'instance="$instance"'
    gpu = 'gpu=~"$gpu"'
    board = Board(
        "ridgeline-node",
        "Ridgeline / Node",
        "One node's GPUs on their rooflines: where each GPU sits, its regime over time, the "
        "counters behind it and the exporter's health.",
    )
    board.variable(query_variable(*CLUSTER_VARIABLE, multi=True))
    board.variable(
        query_variable(
            "node", "Node", 'label_values(ridgeline_build_info{cluster=~"$cluster"}, node)', multi=True
        )
    )
    board.variable(
        query_variable(
            "instance",
            "Instance",
            'label_values(ridgeline_build_info{cluster=~"$cluster", node=~"$node"}, instance)',
            all_value=None,
        )
    )
    board.variable(
        query_variable("gpu", "GPU", 'label_values(ridgeline_regime{instance="$instance"}, gpu)', multi=True)
    )
    board.row("Node")
    board.add(
        stat_panel(
            "GPUs",
            "Physical GPUs Ridgeline sees on this node: a MIG-partitioned card once, however it is cut "
            "(its instances share its uuid).",
            f"count(count by (uuid) (ridgeline_gpu_info{{{sel}}}))",
            "short",
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Flop utilization",
            "Node FLOP/s over the summed peak of its GPUs (5m).",
            f"instance:ridgeline_flop_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "DRAM bandwidth utilization",
            "Node DRAM bytes/s over the summed bandwidth (5m).",
            f"instance:ridgeline_dram_bandwidth_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Arithmetic intensity",
            "Node FLOP per DRAM byte (5m).",
            f"instance:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{sel}}}",
            "FLOP/B",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Source",
            "Whether the exporter can read GPU counters (ridgeline_source_up).",
            f"min by (source) (ridgeline_source_up{{{sel}}})",
            "none",
            legend="{{source}}",
            text_mode=common.BigValueTextMode.VALUE_AND_NAME,
            mappings=value_map(
                {
                    "0": dashboard.ValueMappingResult(text="DOWN", color="red", index=0),
                    "1": dashboard.ValueMappingResult(text="UP", color="green", index=1),
                }
            ),
            thresholds=(("red", None), ("green", 1)),
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Newest sample age",
            "Seconds since the newest sample; over 120 s alerts (RidgelineSamplesStale).",
            f"time() - max(ridgeline_last_sample_timestamp_seconds{{{sel}}})",
            "s",
            decimals=1,
            thresholds=(("green", None), ("orange", 30), ("red", 120)),
        ),
        4,
        4,
    )

    board.row("Roofline")
    board.add(roofline_xy(sel, gpu), 12, 12)
    board.add(
        state_timeline_panel(
            "Regime per GPU",
            "Current (debounced) regime of each GPU over time.",
            regime_code_expr(f"{sel}, {gpu}", "gpu, gpu_instance"),
            "GPU {{gpu}}",
        ),
        12,
        12,
    )

    board.row("Counters")
    board.add(
        timeseries_panel(
            "DRAM vs tensor activity",
            "Smoothed DRAM_ACTIVE and PIPE_TENSOR_ACTIVE per GPU. DRAM's practical wall is 0.8, "
            "the tensor pipe's 0.93.",
            [
                target(f"ridgeline_dram_active_ratio{{{sel}, {gpu}}}", "GPU {{gpu}} DRAM", "A"),
                target(f"ridgeline_tensor_active_ratio{{{sel}, {gpu}}}", "GPU {{gpu}} tensor", "B"),
            ],
            "percentunit",
            max_value=1,
            thresholds=(("transparent", None), ("orange", 0.8)),
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
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
    board.add(
        timeseries_panel(
            "Arithmetic intensity vs ridge",
            "Smoothed FLOP per DRAM byte per GPU against the card's ridge (absent while DRAM is idle).",
            [
                target(f"ridgeline_arithmetic_intensity_flop_per_byte{{{sel}, {gpu}}}", "GPU {{gpu}}", "A"),
                target(
                    f"max by (card, precision) (ridgeline_card_ridge_flop_per_byte{{{sel}}})",
                    "ridge {{card}} {{precision}}",
                    "B",
                ),
            ],
            "FLOP/B",
            log_y=True,
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
            "Flop utilization per GPU",
            "Smoothed tensor activity x clock ratio: the fraction of peak FLOP/s achieved.",
            [target(f"ridgeline_flop_utilization_ratio{{{sel}, {gpu}}}", "GPU {{gpu}}")],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
            "Share of node GPU time by regime",
            "Fraction of the node's GPU time in each raw regime (5m).",
            [target(f"instance:ridgeline_regime_time:ratio_rate5m{{{sel}}}", "{{regime}}")],
            "percentunit",
            stacked=True,
            percent=True,
            regime_colors=True,
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
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
    board.add(
        timeseries_panel(
            "Link load per GPU",
            "Busier direction of each link (NVLink, PCIe) over the card's per-direction bandwidth; "
            "above 48% (60% of the 80% practical maximum) with HBM and the pipes below theirs, the "
            "GPU is interconnect-bound.",
            [target(f"ridgeline_link_utilization_ratio{{{sel}, {gpu}}}", "GPU {{gpu}} {{link}}")],
            "percentunit",
            max_value=1,
        ),
        12,
        8,
    )

    board.row("GPUs")
    board.add(
        table_panel(
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

    board.row("Source health")
    board.add(
        timeseries_panel(
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
    board.add(
        timeseries_panel(
            "Newest sample age",
            "time() - ridgeline_last_sample_timestamp_seconds.",
            [target(f"time() - ridgeline_last_sample_timestamp_seconds{{{sel}}}", "age")],
            "s",
            thresholds=(("transparent", None), ("red", 120)),
        ),
        8,
        8,
    )
    board.add(
        timeseries_panel(
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

    board.row("Nodes of the cluster")
    c = 'cluster=~"$cluster", node=~"$node"'
    board.add(
        table_panel(
            "Nodes",
            "Every node of the selected clusters: flop utilization, DRAM bandwidth utilization and "
            "intensity (5m). An instance opens its Node dashboard.",
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
    return board.build()


# ---- Workload ----------------------------------------------------------------------------------

POD_RIDGE = (
    "max by (card) (ridgeline_card_ridge_flop_per_byte\n"
    "and on (cluster, job, instance, card, precision) ridgeline_gpu_info{{{sel}}})"
)
"""The ridge of the cards a pod's GPUs use: the node's card constants, joined through the GPUs'
ridgeline_gpu_info (card constants carry no pod label)."""


def workload() -> Json:
    sel = 'cluster=~"$cluster", namespace="$namespace", pod="$pod"'
    board = Board(
        "ridgeline-workload",
        "Ridgeline / Workload",
        "One namespace/pod across its GPUs: regime share, intensity against the ridge, and the lever.",
    )
    board.variable(query_variable(*CLUSTER_VARIABLE, multi=True))
    board.variable(
        query_variable(
            "namespace",
            "Namespace",
            'label_values(namespace_pod:ridgeline_gpus:count{cluster=~"$cluster"}, namespace)',
            all_value=None,
        )
    )
    board.variable(
        query_variable(
            "pod",
            "Pod",
            "label_values(namespace_pod:ridgeline_gpus:count"
            '{cluster=~"$cluster", namespace="$namespace"}, pod)',
            all_value=None,
        )
    )
    board.row("Workload")
    board.add(
        stat_panel(
            "GPUs held",
            "GPUs attributed to this pod.",
            f"sum(namespace_pod:ridgeline_gpus:count{{{sel}}})",
            "short",
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Main regime (5m)",
            "The regime with the largest share of the pod's GPU time.",
            f"topk(1, namespace_pod:ridgeline_regime_time:ratio_rate5m{{{sel}}})",
            "percentunit",
            legend="{{regime}}",
            text_mode=common.BigValueTextMode.VALUE_AND_NAME,
            decimals=0,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Flop utilization",
            "Pod FLOP/s over the summed peak of its GPUs (5m).",
            f"namespace_pod:ridgeline_flop_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "DRAM bandwidth utilization",
            "Pod DRAM bytes/s over the summed bandwidth of its GPUs (5m).",
            f"namespace_pod:ridgeline_dram_bandwidth_utilization:ratio_rate5m{{{sel}}}",
            "percentunit",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Arithmetic intensity",
            "Pod FLOP per DRAM byte (5m).",
            f"namespace_pod:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{sel}}}",
            "FLOP/B",
            decimals=1,
        ),
        4,
        4,
    )
    board.add(
        stat_panel(
            "Ridge",
            "The ridge of the pod's card(s): intensity needed to leave the memory side.",
            POD_RIDGE.format(sel=sel),
            "FLOP/B",
            legend="{{card}}",
            decimals=0,
        ),
        4,
        4,
    )

    board.row("Regimes")
    board.add(
        with_regime_colors(
            common_panel(
                bargauge.Panel(),
                "Regime share (5m)",
                "Share of the pod's GPU time in each regime.",
                [
                    target(
                        f"namespace_pod:ridgeline_regime_time:ratio_rate5m{{{sel}}}",
                        "{{regime}}",
                        instant=True,
                    )
                ],
            )
            .unit("percentunit")
            .min(0)
            .max(1)
            .orientation(common.VizOrientation.HORIZONTAL)
            .display_mode(common.BarGaugeDisplayMode.BASIC)
            .show_unfilled(True)
            .reduce_options(reduce_last())
        ),
        8,
        8,
    )
    board.add(
        timeseries_panel(
            "Regime share over time",
            "Share of the pod's GPU time in each regime (5m windows).",
            [target(f"namespace_pod:ridgeline_regime_time:ratio_rate5m{{{sel}}}", "{{regime}}")],
            "percentunit",
            stacked=True,
            percent=True,
            regime_colors=True,
        ),
        16,
        8,
    )
    board.add(
        state_timeline_panel(
            "Regime per GPU",
            "Current (debounced) regime of each of the pod's GPUs.",
            regime_code_expr(sel, "instance, gpu, gpu_instance"),
            "{{instance}} GPU {{gpu}}",
        ),
        24,
        6,
    )

    board.row("Roofline")
    board.add(
        timeseries_panel(
            "Arithmetic intensity vs ridge",
            "Pod FLOP per DRAM byte against its card's ridge.",
            [
                target(
                    f"namespace_pod:ridgeline_arithmetic_intensity_flop_per_byte:rate5m{{{sel}}}",
                    "intensity",
                    "A",
                ),
                target(POD_RIDGE.format(sel=sel), "ridge {{card}}", "B"),
            ],
            "FLOP/B",
            log_y=True,
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
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
    board.add(
        timeseries_panel(
            "Achieved FLOP/s",
            "Estimated FLOP/s over the pod's GPUs.",
            [target(f"namespace_pod:ridgeline_flop:rate5m{{{sel}}}", "FLOP/s")],
            "flops",
        ),
        12,
        8,
    )
    board.add(
        timeseries_panel(
            "DRAM bytes/s",
            "Estimated DRAM traffic over the pod's GPUs.",
            [target(f"namespace_pod:ridgeline_dram_bytes:rate5m{{{sel}}}", "bytes/s")],
            "Bps",
        ),
        12,
        8,
    )

    board.row("The lever")
    board.add(
        table_panel(
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
    board.add(
        text_panel(
            "Reading the regimes",
            "\n".join(
                [
                    f"- **{head}** (`{regime}`): {lever}."
                    for regime in REGIMES
                    for head, lever in [lever_phrase(regime)]
                ]
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
    return board.build()


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
