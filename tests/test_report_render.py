"""The report page's "Over time" chart and resolution line, drawn from a report document.

A replay's timeline points are its checkpoints (10 s apart here) while its samples are 1 s
apart: each window is drawn over its own span from the range's start, the resolution line says
the timeline's window, the legend sits above the plot, and a stretch no window covers is shaded
like a gap.
"""

from __future__ import annotations

from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.dates import date2num

from exporter.report.render import _meta_table, timeline_figure, timeline_window
from exporter.roofline import REGIMES

START = 1_800_000_000.0


def iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def replay_doc(points: int = 6, width: float = 10.0, end_pad: float = 0.0) -> dict[str, Any]:
    """A replay-like document: samples every 1 s, a timeline point every `width` s."""
    end = START + points * width + end_pad
    return {
        "range": {"start": iso(START), "end": iso(end), "seconds": end - START},
        "resolution": {"step_seconds": 1.0, "sample_interval_seconds": 1.0},
        "timeline": [
            {
                "end": START + (i + 1) * width,
                "gpus": {r: (2.0 if r == "memory_bound" else 0.0) for r in REGIMES},
            }
            for i in range(points)
        ],
        "gaps": [],
        "by": ["namespace"],
        "source": {"kind": "replay", "location": "t.jsonl", "series": {}},
        "notes": [],
    }


def drawn(doc: dict[str, Any]) -> tuple[Any, Any]:
    figure = timeline_figure(doc)
    FigureCanvasAgg(figure).draw()
    return figure, figure.axes[0]


def test_each_window_is_drawn_over_its_own_span_from_the_ranges_start() -> None:
    doc = replay_doc()
    assert timeline_window(doc) == 10.0
    _, axes = drawn(doc)
    stacks = [c for c in axes.collections if isinstance(c, PolyCollection)]
    xs = [v[0] for c in stacks for path in c.get_paths() for v in path.vertices]
    assert min(xs) == pytest.approx(date2num(_utc(START)), abs=1e-9)  # not 10 s late
    assert max(xs) == pytest.approx(date2num(_utc(START + 60)), abs=1e-9)
    assert "windows of 10 s; samples every 1 s" in _meta_table(doc)


def test_the_axes_say_what_they_show_and_the_legend_is_above_the_plot() -> None:
    figure, axes = drawn(replay_doc())
    assert axes.get_ylabel() == "GPUs" and axes.get_xlabel() == "time (UTC)"
    (legend,) = figure.legends
    renderer = figure.canvas.get_renderer()
    assert legend.get_window_extent(renderer).y0 >= axes.get_window_extent(renderer).y1
    assert [t.get_text() for t in legend.get_texts()][-1] == "no data"


def test_a_stretch_no_window_covers_is_shaded() -> None:
    doc = replay_doc(end_pad=30.0)  # the data stops 30 s before the range does; no gap listed
    _, axes = drawn(doc)
    spans = [p for p in axes.patches if p.get_alpha() == pytest.approx(0.12)]
    extents = [(p.get_x(), p.get_x() + p.get_width()) for p in spans]
    assert extents == [pytest.approx((date2num(_utc(START + 60)), date2num(_utc(START + 90))))]
    for covered in (replay_doc(), replay_doc(end_pad=5.0)):  # the last, partial window is no gap
        assert [p for p in drawn(covered)[1].patches if p.get_alpha() == pytest.approx(0.12)] == []


def _utc(t: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, tz=UTC)


def test_a_window_after_a_gap_covers_only_itself() -> None:
    """Drawn "up to its end" from the point before, the first window after a gap filled the gap
    and hid its shading; it spans its own window."""
    from exporter.report.render import timeline_windows

    doc = replay_doc()
    doc["timeline"] = [p for p in doc["timeline"] if p["end"] not in (START + 30, START + 40)]
    doc["gaps"] = [{"start": iso(START + 20), "end": iso(START + 40), "seconds": 20.0}]
    spans = [(start - START, end - START) for start, end, _ in timeline_windows(doc)]
    assert spans == [(0, 10), (10, 20), (40, 50), (50, 60)]
    _, axes = drawn(doc)
    shaded = [p for p in axes.patches if p.get_alpha() == pytest.approx(0.12)]
    assert [(p.get_x(), p.get_x() + p.get_width()) for p in shaded] == [
        pytest.approx((date2num(_utc(START + 20)), date2num(_utc(START + 40))))
    ]
