"""The report as one self-contained HTML page: tables, and charts drawn by matplotlib as inline SVG.

Everything the page shows comes from the report document (exporter/report/model.py), so the
HTML and the JSON can never disagree. The page loads nothing: no script, no font, no stylesheet,
no image from anywhere (the SVG's text uses the page's own sans-serif font), so it opens offline
and can be mailed as it is. matplotlib draws through its object API (Figure + the SVG canvas),
never pyplot, so no global state or display backend is involved.
"""

from __future__ import annotations

import html
import io
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from exporter import clock_events
from exporter.report.document import CardDoc, LeverDoc, ReportDoc, RowDoc, StretchDoc, TopEntryDoc
from exporter.report.model import BUSY_REGIMES, group_name
from exporter.roofline import REGIMES
from exporter.view.units import regime_colour, regime_shape, regime_word, si_g

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_MARKERS = {
    "circle": "o",
    "square": "s",
    "diamond": "D",
    "ring": "o",
    "triangle": "^",
    "triangle_down": "v",
    "cross": "X",
}
"""matplotlib's marker for each shape of exporter.view.units.REGIME_LOOKS (a ring is drawn as a
circle: a hollow marker would hide a group's size)."""

CHART_GROUPS = 15
"""Groups drawn one by one in the bar chart; the rest are one bar ("N others")."""
LABELLED_POINTS = 8
ACROSS_COLOUR = "#555555"
"""Hatching over a stretch whose unseen targets were read across from the raw counters."""

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:2em auto;
max-width:1180px;color:#1b1b1b;padding:0 1em;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:.25em .55em;text-align:right;vertical-align:top}
th{background:#f4f4f4}td.name,th.name{text-align:left}
.meta td{text-align:left}.note{color:#555;font-size:.9em}
.formula{font-family:ui-monospace,"DejaVu Sans Mono",monospace;width:30%}
table.levers{width:100%}table.levers td:first-child{width:22%}
.chart svg{max-width:100%;height:auto}
.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:-.05em}
"""


def render_html(doc: ReportDoc) -> str:
    """The whole page for one report document."""
    by = doc["by"]
    groups = doc["groups"]
    fleet = doc["fleet"]
    title = f"Ridgeline fleet report: {_when(doc['range']['start'])} to {_when(doc['range']['end'])}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">By {_e(", ".join(by))}: {len(groups)} groups, '
        f"{_hours(fleet['gpu_seconds_total'])} GPU-hours. "
        f"Source: {_e(doc['source']['kind'])} {_e(doc['source']['location'])}.</p>",
        _summary(doc),
        "<h2>GPU-hours by regime</h2>",
        f'<div class="chart">{regime_bars_svg(groups, by)}</div>',
        _regime_table(groups, fleet, by, with_coverage=bool(_coverage_stretches(doc))),
        "<h2>The fleet roofline</h2>",
        '<p class="note">Each group is a point at its intensity (Σflop ÷ Σbytes) and its achieved '
        "FLOP/s per GPU while busy, sized by its GPU-hours and coloured by the regime it spent most "
        "busy time in, against the roofs of the cards it ran on (precision "
        f"{_e(doc['precision'])}).</p>",
        f'<div class="chart">{roofline_svg(doc)}</div>',
        _roofline_table(groups, by),
        "<h2>Idle while allocated</h2>",
        _idle_table(groups, fleet, by),
        "<h2>GPU-hours lost to a reduced clock</h2>",
        _clock_table(groups, fleet, by),
        "<h2>Top memory-bound and latency-bound workloads</h2>",
        _workload_table(doc["workloads"]["memory_bound"], "memory-bound"),
        _workload_table(doc["workloads"]["latency_bound"], "latency-bound"),
        "<h2>What the levers would save</h2>",
        _levers_table(doc),
        _savings_table(groups, fleet, doc["levers"], by),
        "<h2>Over time</h2>",
        f'<div class="chart">{timeline_svg(doc)}</div>',
        "<h2>Range, source, resolution, gaps</h2>",
        _meta_table(doc),
        f'<p class="note">Written by ridgeline report ({_e(doc["schema"])}); charts drawn with '
        "matplotlib. The JSON form of these numbers is documented in docs/report.md.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


# -- numbers as people read them ------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    hours = seconds / 3600.0
    if hours >= 100:
        return f"{hours:,.0f}"
    return f"{hours:,.1f}" if hours >= 1 else f"{hours:.3g}"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole > 0 else "–"


def _when(text: str) -> str:
    return text.replace("T", " ").replace("Z", " UTC")


def _name(row: RowDoc, by: Sequence[str]) -> str:
    return group_name(row["labels"], by)


def _swatch(regime: str) -> str:
    return f'<span class="swatch" style="background:{regime_colour(regime)}"></span>'


# -- tables ---------------------------------------------------------------------------------


def _summary(doc: ReportDoc) -> str:
    fleet = doc["fleet"]
    total = fleet["gpu_seconds_total"]
    savings = fleet["savings_gpu_seconds"]
    shares = ", ".join(
        f"{_swatch(r)}{regime_word(r)} {_pct(fleet['gpu_seconds'][r], total)}" for r in REGIMES
    )
    saved = sum(v for v in savings.values() if v is not None)  # None: not measured
    lost = fleet["clock_lost_gpu_seconds"]
    clock = f" A reduced clock cost {_hours(lost)} GPU-hours of compute-bound work." if lost else ""
    unseen = ""
    coverage = doc.get("coverage")
    if coverage and coverage["stretches"]:
        unseen = (
            f" <b>Coverage: {_ratio(coverage['ratio'])} of the expected GPU-time seen</b> "
            f"({_hours(coverage['missing_gpu_seconds'])} GPU-hours missing; the gaps are shaded "
            "over time and listed below)."
        )
    return (
        f"<p>Of {_hours(total)} GPU-hours: {shares}. Idle while allocated: "
        f"{_hours(fleet['idle_allocated_gpu_seconds'])} GPU-hours.{clock} The levers below would give "
        f"back at most {_hours(saved)} GPU-hours ({_pct(saved, total)}).{unseen}</p>"
    )


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.1f} %"


def _coverage_stretches(doc: ReportDoc) -> list[StretchDoc]:
    """The stretches in which targets went unseen (none: a replay, or nothing missed)."""
    coverage = doc.get("coverage")
    return list(coverage["stretches"]) if coverage else []


def _regime_table(
    groups: Sequence[RowDoc],
    fleet: RowDoc,
    by: Sequence[str],
    *,
    with_coverage: bool = False,
) -> str:
    head = "".join(f"<th>{_swatch(r)}{regime_word(r)}</th>" for r in REGIMES)
    if with_coverage:
        head += "<th>coverage</th>"

    def cells(row: RowDoc) -> str:
        total = row["gpu_seconds_total"]
        shares = "".join(
            f"<td>{_hours(row['gpu_seconds'][r])} "
            f"<span class='note'>{_pct(row['gpu_seconds'][r], total)}</span></td>"
            for r in REGIMES
        )
        if with_coverage:
            shares += f"<td>{_ratio(row.get('coverage'))}</td>"
        return f"<td>{_hours(total)}</td>{shares}<td>{_e(row['card'] or '–')}</td>"

    return _rows_table(by, f"<th>GPU-hours</th>{head}<th>card</th>", groups, cells, fleet=fleet)


def _rows_table(
    by: Sequence[str],
    head: str,
    rows: Sequence[RowDoc],
    cells: Callable[[RowDoc], str],
    *,
    fleet: RowDoc | None = None,
    bold_fleet: bool = True,
) -> str:
    """A table of one row per group, then the fleet's where given: its name, then `cells(row)`."""
    out = [f'<table><tr><th class="name">{_e("/".join(by))}</th>{head}</tr>']
    out += [f'<tr><td class="name">{_e(_name(row, by))}</td>{cells(row)}</tr>' for row in rows]
    if fleet is not None:
        name = "<b>fleet</b>" if bold_fleet else "fleet"
        out.append(f'<tr><td class="name">{name}</td>{cells(fleet)}</tr>')
    out.append("</table>")
    return "".join(out)


def _roofline_table(groups: Sequence[RowDoc], by: Sequence[str]) -> str:
    def cells(row: RowDoc) -> str:
        intensity = row["intensity_flop_per_byte"]
        efficiency = row["roofline_efficiency"]
        return (
            f"<td>{si_g(row['flop'], 'FLOP')}</td><td>{si_g(row['dram_bytes'], 'B')}</td>"
            f"<td>{'–' if intensity is None else f'{intensity:.3g}'}</td>"
            f"<td>{si_g(row['achieved_flop_per_second_per_gpu'], 'FLOP/s')}</td>"
            f"<td>{si_g(row['attainable_flop_per_second'], 'FLOP/s')}</td>"
            f"<td>{'–' if efficiency is None else f'{100 * efficiency:.1f} %'}</td>"
        )

    head = (
        "<th>FLOPs</th><th>DRAM bytes</th><th>intensity FLOP/byte</th><th>achieved per GPU</th>"
        "<th>attainable</th><th>of the roof</th>"
    )
    return _rows_table(by, head, groups, cells)


def _idle_table(groups: Sequence[RowDoc], fleet: RowDoc, by: Sequence[str]) -> str:
    ranked = sorted(
        (g for g in groups if g["idle_allocated_gpu_seconds"] > 0),
        key=lambda g: -g["idle_allocated_gpu_seconds"],
    )
    if not ranked:
        return "<p>No GPU held by a pod or an HPC job sat idle in this range.</p>"

    def cells(row: RowDoc) -> str:
        idle = row["idle_allocated_gpu_seconds"]
        return f"<td>{_hours(idle)}</td><td>{_pct(idle, row['gpu_seconds_total'])}</td>"

    head = "<th>idle while allocated, GPU-hours</th><th>of the group's GPU-hours</th>"
    return _rows_table(by, head, ranked, cells, fleet=fleet)


CLOCK_CAUSES: Mapping[str, str] = {
    **{clock_events.cause_label(c): c for c in clock_events.CAUSES.values()},
    clock_events.UNREPORTED: clock_events.cause_words(()),
}
"""The cause labels of ridgeline_clock_lost_seconds_total in words, in the table's order."""


def _clock_table(groups: Sequence[RowDoc], fleet: RowDoc, by: Sequence[str]) -> str:
    """Per group, the compute-bound GPU-hours a reduced clock cost, by cause (the fleet's causes)."""
    if fleet["clock_lost_gpu_seconds"] is None:
        return (
            "<p>Not measured: the GPU-seconds lost to a reduced clock come from the raw counter "
            "ridgeline_clock_lost_seconds_total, which this server does not have.</p>"
        )
    ranked = sorted((g for g in groups if _lost(g) > 0), key=lambda g: -_lost(g))
    if not ranked:
        return "<p>No compute-bound GPU ran below its peak's clock in this range.</p>"
    fleet_causes = fleet["clock_lost_by_cause"] or {}
    causes = [c for c in CLOCK_CAUSES if c in fleet_causes]
    causes += sorted(set(fleet_causes) - set(CLOCK_CAUSES))
    head = "".join(f"<th>{_e(CLOCK_CAUSES.get(c, c))}</th>" for c in causes)

    def cells(row: RowDoc) -> str:
        by_cause = row["clock_lost_by_cause"] or {}
        lost = "".join(f"<td>{_hours(by_cause.get(c, 0.0))}</td>" for c in causes)
        return (
            f"<td>{_hours(row['clock_lost_gpu_seconds'])}</td>{lost}"
            f"<td>{_pct(_lost(row), row['gpu_seconds']['compute_bound'])}</td>"
        )

    note = (
        '<p class="note">What the full clock would give back: Σ (1 − k) of each compute-bound '
        "GPU-second whose binding pipe ran below 97 % of the clock its peak is quoted at (k = SM clock "
        "÷ that clock), by what held the clock down.</p>"
    )
    head = f"<th>lost, GPU-hours</th>{head}<th>of the group's compute-bound GPU-hours</th>"
    return note + _rows_table(by, head, ranked, cells, fleet=fleet)


def _lost(row: RowDoc) -> float:
    """A row's clock-lost GPU-seconds where they were measured (the table is not drawn where not)."""
    lost = row["clock_lost_gpu_seconds"]
    return 0.0 if lost is None else lost


def _workload_table(rows: Sequence[TopEntryDoc], what: str) -> str:
    if not rows:
        return f"<p>No {what} workload in this range.</p>"
    labels = list(rows[0]["labels"])
    out = [
        f"<h3>{_e(what)}</h3><table><tr><th class='name'>{_e('/'.join(labels))}</th>"
        f"<th>{_e(what)} GPU-hours</th><th>of its time</th><th>intensity</th><th>of the roof</th>"
        "<th>lever bound, GPU-hours</th></tr>"
    ]
    for row in rows:
        intensity = row["intensity_flop_per_byte"]
        efficiency = row["roofline_efficiency"]
        share = row["share_of_own_time"]
        out.append(
            f'<tr><td class="name">{_e(group_name(row["labels"], labels))}</td>'
            f"<td>{_hours(row['gpu_seconds'])}</td>"
            f"<td>{'–' if share is None else f'{100 * share:.0f} %'}</td>"
            f"<td>{'–' if intensity is None else f'{intensity:.3g}'}</td>"
            f"<td>{'–' if efficiency is None else f'{100 * efficiency:.0f} %'}</td>"
            f"<td>{_hours(row['savings_gpu_seconds'])}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _levers_table(doc: ReportDoc) -> str:
    rows = [
        '<table class="levers"><tr><th class="name">lever</th><th class="name">bound</th>'
        '<th class="name">assumptions</th></tr>'
    ]
    for lever in doc["levers"]:
        rows.append(
            f'<tr><td class="name">{_e(lever["title"])}</td>'
            f'<td class="name formula">{_e(lever["formula"])}</td>'
            f'<td class="name">{_e(lever["assumptions"])}</td></tr>'
        )
    rows.append("</table>")
    thresholds = doc["thresholds"]
    rows.append(
        f"<p class='note'>Upper bounds, not forecasts: each assumes its lever works perfectly on the "
        f"time it names. Levers act on disjoint time (idle, memory-bound, latency-bound, "
        f"compute-bound at a reduced clock), so their "
        f"sum is a bound too. Thresholds: θ = {thresholds['theta']:g}, dram_wall = "
        f"{thresholds['dram_wall']:g}, tensor_wall = {thresholds['tensor_wall']:g}.</p>"
    )
    return "".join(rows)


def _savings_table(
    groups: Sequence[RowDoc],
    fleet: RowDoc,
    levers: Sequence[LeverDoc],
    by: Sequence[str],
) -> str:
    head = "".join(f"<th>{_e(lever['key'])}</th>" for lever in levers)

    def cells(row: RowDoc) -> str:
        savings = row["savings_gpu_seconds"]
        total = sum(v for v in savings.values() if v is not None)
        each = "".join(f"<td>{_hours(savings[lever['key']])}</td>" for lever in levers)
        return f"{each}<td>{_hours(total)}</td><td>{_pct(total, row['gpu_seconds_total'])}</td>"

    table = _rows_table(
        by, f"{head}<th>sum</th><th>of its GPU-hours</th>", groups, cells, fleet=fleet, bold_fleet=False
    )
    return table + "<p class='note'>GPU-hours.</p>"


def _meta_table(doc: ReportDoc) -> str:
    rng = doc["range"]
    resolution = doc["resolution"]
    interval = resolution["sample_interval_seconds"]
    gaps = doc["gaps"]
    gap_text = (
        "none"
        if not gaps
        else f"{len(gaps)} stretch(es) without data, {_hours(sum(g['seconds'] for g in gaps))} hours: "
        + "; ".join(f"{_when(g['start'])} to {_when(g['end'])}" for g in gaps[:20])
        + (" …" if len(gaps) > 20 else "")
    )
    series = "<br>".join(f"{_e(_when(span))}: {_e(what)}" for span, what in doc["source"]["series"].items())
    rows = [
        ("range", f"{_when(rng['start'])} to {_when(rng['end'])} ({_hours(rng['seconds'])} hours)"),
        ("grouped by", ", ".join(doc["by"])),
        ("source", f"{doc['source']['kind']}: {doc['source']['location']}"),
        ("series read", None),
        (
            "resolution",
            f"windows of {timeline_window(doc):g} s; samples every "
            + ("? s (unknown)" if interval is None else f"{interval:.3g} s"),
        ),
        ("gaps", gap_text),
    ]
    coverage = doc.get("coverage")
    if coverage:
        stretches = coverage["stretches"]
        rows.append(
            (
                "coverage",
                f"{_ratio(coverage['ratio'])} of the expected GPU-time seen"
                + (
                    f"; {len(stretches)} stretch(es) with unseen targets, "
                    f"{_hours(coverage['missing_gpu_seconds'])} GPU-hours missing: "
                    + "; ".join(
                        f"{_when(s['start'])} to {_when(s['end'])} {_ratio(s['ratio'])}"
                        + (" (read across from the raw counters)" if s["reconstructed"] else "")
                        for s in stretches[:20]
                    )
                    if stretches
                    else ""
                ),
            )
        )
    out = ['<table class="meta">']
    for key, value in rows:
        cell = series if value is None else _e(value)
        out.append(f'<tr><th class="name">{_e(key)}</th><td>{cell}</td></tr>')
    for note in doc["notes"]:
        out.append(f'<tr><th class="name">note</th><td>{_e(note)}</td></tr>')
    out.append("</table>")
    return "".join(out)


# -- charts ---------------------------------------------------------------------------------


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _svg(figure: Figure) -> str:
    """The figure as an <svg> element for inlining (no XML prolog, no DOCTYPE, text as text)."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(figure)
    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "ridgeline", "font.family": "sans-serif"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    start = text.find("<svg")
    return re.sub(r"<!--.*?-->", "", text[start:], flags=re.DOTALL).strip()


def regime_bars_svg(groups: Sequence[RowDoc], by: Sequence[str]) -> str:
    """Stacked horizontal bars: each group's GPU-hours by regime (largest group on top)."""
    shown = list(groups[:CHART_GROUPS])
    names = [_name(g, by) for g in shown]
    hours = {r: [g["gpu_seconds"][r] / 3600.0 for g in shown] for r in REGIMES}
    rest = groups[CHART_GROUPS:]
    if rest:
        names.append(f"{len(rest)} others")
        for r in REGIMES:
            hours[r].append(sum(g["gpu_seconds"][r] for g in rest) / 3600.0)
    figure = _figure(9.5, 0.9 + 0.36 * max(1, len(names)))
    axes = figure.add_subplot()
    y = list(range(len(names)))
    left = [0.0] * len(names)
    for regime in REGIMES:
        axes.barh(
            y, hours[regime], left=left, color=regime_colour(regime), label=regime_word(regime), height=0.7
        )
        left = [a + b for a, b in zip(left, hours[regime], strict=True)]
    axes.set_yticks(y, labels=[n if len(n) <= 40 else n[:39] + "…" for n in names])
    axes.invert_yaxis()
    axes.set_xlabel("GPU-hours")
    axes.grid(axis="x", alpha=0.3)
    axes.legend(loc="lower right", fontsize="small", ncols=4)
    return _svg(figure)


def roofline_svg(doc: ReportDoc) -> str:
    """Log-log roofline: each card's roofs, each group a point sized by its GPU-hours."""
    cards = doc["cards"]
    points = [
        g
        for g in doc["groups"]
        if g["intensity_flop_per_byte"]
        and g["achieved_flop_per_second_per_gpu"]
        and g["busy_gpu_seconds"] > 0
    ]
    figure = _figure(9.5, 5.6)
    axes = figure.add_subplot()
    axes.set_xscale("log")
    axes.set_yscale("log")
    xs = [p["intensity_flop_per_byte"] or 0.0 for p in points]  # never 0 or None: the filter above
    ys = [p["achieved_flop_per_second_per_gpu"] or 0.0 for p in points]
    ridges = [c["ridge_flop_per_byte"] for c in cards.values()]
    peaks = [c["peak_flop_per_second"] for c in cards.values()]
    x_lo = min([*xs, *ridges, 10.0]) / 4
    x_hi = max([*xs, *ridges, 10.0]) * 4
    y_hi = max([*ys, *peaks, 1e12]) * 2
    y_lo = min([*ys, *(c["bandwidth_bytes_per_second"] * x_lo for c in cards.values()), y_hi / 1e4]) / 2
    _draw_roofs(axes, cards, x_lo, x_hi)
    if points:
        _draw_points(axes, points, xs, ys, doc["by"])
    else:
        axes.text(0.5, 0.5, "no group did measurable work", transform=axes.transAxes, ha="center")
    axes.set_xlim(x_lo, x_hi)
    axes.set_ylim(y_lo, y_hi)
    axes.set_xlabel("arithmetic intensity, FLOP per DRAM byte (Σflop ÷ Σbytes)")
    axes.set_ylabel("achieved FLOP/s per busy GPU")
    axes.grid(which="both", alpha=0.2)
    handles = [
        axes.scatter(
            [],
            [],
            s=60,
            color=regime_colour(r),
            marker=_MARKERS[regime_shape(r)],
            label=f"mostly {regime_word(r)}",
        )
        for r in REGIMES
        if r in BUSY_REGIMES
    ]
    axes.legend(handles=handles, loc="lower right", fontsize="small")
    return _svg(figure)


def _draw_roofs(axes: Axes, cards: Mapping[str, CardDoc], x_lo: float, x_hi: float) -> None:
    """Each card's memory slope and compute roof across the chart, named at its right end."""
    for key, card in sorted(cards.items()):
        bandwidth, peak, ridge = (
            card["bandwidth_bytes_per_second"],
            card["peak_flop_per_second"],
            card["ridge_flop_per_byte"],
        )
        axes.plot([x_lo, ridge, x_hi], [bandwidth * x_lo, peak, peak], color="#444", linewidth=1.2)
        axes.annotate(
            f"{key}: {si_g(peak, 'FLOP/s')}, {si_g(bandwidth, 'B/s')}",
            (x_hi, peak),
            xytext=(-4, 4),
            textcoords="offset points",
            ha="right",
            fontsize="small",
            color="#444",
        )


def _draw_points(
    axes: Axes, points: Sequence[RowDoc], xs: Sequence[float], ys: Sequence[float], by: Sequence[str]
) -> None:
    """The groups' points, one scatter per regime (its colour and marker), the largest named."""
    largest = max(p["gpu_seconds_total"] for p in points)
    sizes = [30 + 900 * math.sqrt(p["gpu_seconds_total"] / largest) for p in points]
    for regime in REGIMES:
        mine = [i for i, p in enumerate(points) if _main_busy_regime(p) == regime]
        if mine:
            axes.scatter(
                [xs[i] for i in mine],
                [ys[i] for i in mine],
                s=[sizes[i] for i in mine],
                color=regime_colour(regime),
                marker=_MARKERS[regime_shape(regime)],
                alpha=0.75,
                edgecolors="#222",
                linewidths=0.6,
                zorder=3,
            )
    for p, x, y in list(zip(points, xs, ys, strict=True))[:LABELLED_POINTS]:
        axes.annotate(_name(p, by), (x, y), xytext=(6, 6), textcoords="offset points", fontsize="small")


def _main_busy_regime(row: RowDoc) -> str:
    return max(BUSY_REGIMES, key=lambda r: row["gpu_seconds"][r])


def timeline_window(doc: ReportDoc) -> float:
    """How long one window of the timeline is: the most common distance between its windows'
    ends (a replay's windows are its checkpoints, not its samples), else the query step."""
    ends = [p["end"] for p in doc["timeline"]]
    widths = sorted(round(b - a, 6) for a, b in itertools.pairwise(ends) if b > a)
    if not widths:
        return float(doc["resolution"]["step_seconds"])
    return float(max(set(widths), key=lambda w: (widths.count(w), -w)))


def timeline_windows(doc: ReportDoc) -> list[tuple[float, float, Mapping[str, float]]]:
    """(start, end, GPUs per regime) of every window: each starts where the one before ended
    when they touch (within half a window), else one window before its end; never before the
    range does."""
    window = timeline_window(doc)
    range_start = _epoch(doc["range"]["start"])
    out: list[tuple[float, float, Mapping[str, float]]] = []
    before: float | None = None
    for point in doc["timeline"]:
        end = point["end"]
        start = before if before is not None and end - before <= 1.5 * window else end - window
        out.append((max(start, range_start), end, point["gpus"]))
        before = end
    return out


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _uncovered(
    windows: Sequence[tuple[float, float, object]], start: float, end: float, window: float
) -> list[tuple[float, float]]:
    """The stretches of [start, end] no window covers, a window long or more: no data there,
    shaded like a gap (a shorter one at an end is the last partial window, not missing data)."""
    out: list[tuple[float, float]] = []
    at = start
    for w_start, w_end, _ in [*windows, (end, end, None)]:
        if w_start - at >= window - 1e-6:
            out.append((at, w_start))
        at = max(at, w_end)
    return out


def _union(stretches: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping or touching stretches merged: a listed gap the timeline also lacks is one."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(stretches):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _stacks(
    windows: Sequence[tuple[float, float, Mapping[str, float]]],
) -> tuple[list[datetime], list[list[float]]]:
    """The stackplot's times and GPUs per regime: each window flat over its span, down to 0
    between windows that do not touch."""
    times: list[datetime] = []
    stacks: list[list[float]] = [[] for _ in REGIMES]
    previous_end: float | None = None
    for start, end, gpus in windows:
        if previous_end is not None and start > previous_end:  # nothing between: down to 0
            for t in (previous_end, start):
                times.append(datetime.fromtimestamp(t, tz=UTC))
                for stack in stacks:
                    stack.append(0.0)
        for t in (start, end):
            times.append(datetime.fromtimestamp(t, tz=UTC))
            for stack, regime in zip(stacks, REGIMES, strict=True):
                stack.append(gpus.get(regime, 0.0))
        previous_end = end
    return times, stacks


def timeline_figure(doc: ReportDoc) -> Figure:
    """The fleet over the range: GPUs in each regime per window (stacked, each window drawn over
    its own span), stretches without data shaded, the legend above the plot."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.patches import Patch

    figure = _figure(9.5, 3.4)
    axes: Any = figure.add_subplot()  # a date axis: matplotlib's stubs take floats, not datetimes
    windows = timeline_windows(doc)
    if windows:
        times, stacks = _stacks(windows)
        axes.stackplot(times, *stacks, colors=[regime_colour(r) for r in REGIMES])
        locator = AutoDateLocator()  # type: ignore[no-untyped-call]
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    range_start, range_end = _epoch(doc["range"]["start"]), _epoch(doc["range"]["end"])
    shaded = [(_epoch(g["start"]), _epoch(g["end"])) for g in doc["gaps"]]
    shaded += _uncovered(windows, range_start, range_end, timeline_window(doc)) if windows else []
    unseen = _coverage_stretches(doc)
    shaded += [(_epoch(s["start"]), _epoch(s["end"])) for s in unseen if not s["reconstructed"]]
    for start, end in _union(shaded):
        axes.axvspan(
            datetime.fromtimestamp(start, tz=UTC),
            datetime.fromtimestamp(end, tz=UTC),
            color="#d62728",
            alpha=0.12,
            linewidth=0,
        )
    across = [(_epoch(s["start"]), _epoch(s["end"])) for s in unseen if s["reconstructed"]]
    for start, end in _union(across):
        axes.axvspan(
            datetime.fromtimestamp(start, tz=UTC),
            datetime.fromtimestamp(end, tz=UTC),
            facecolor="none",
            edgecolor=ACROSS_COLOUR,
            hatch="//",
            alpha=0.5,
            linewidth=0,
        )
    axes.set_xlim(datetime.fromtimestamp(range_start, tz=UTC), datetime.fromtimestamp(range_end, tz=UTC))
    axes.set_ylabel("GPUs")
    axes.set_xlabel("time (UTC)")
    axes.grid(alpha=0.3)
    handles = [Patch(color=regime_colour(r), label=regime_word(r)) for r in REGIMES]
    handles.append(Patch(color="#d62728", alpha=0.12, label="no data"))
    if across:
        handles.append(
            Patch(facecolor="none", edgecolor=ACROSS_COLOUR, hatch="//", label="read across a gap")
        )
    figure.legend(handles=handles, loc="outside upper center", fontsize="small", ncols=len(handles))
    return figure


def timeline_svg(doc: ReportDoc) -> str:
    """The timeline chart (timeline_figure) as inline SVG."""
    return _svg(timeline_figure(doc))
