"""The report's "Over time" and roofline charts in the package's colours and markers (issue 23.5),
and the stack down to nothing across a stretch no window covers (23.7).

tests/test_palette.py holds the bar chart and the swatches to exporter/view/units.py's table;
these read the other two charts' matplotlib artists: the stacked areas and the legend above them,
the groups' points and the "mostly …" legend of the roofline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex
from matplotlib.markers import MarkerStyle
from test_report_render import START, drawn, replay_doc

from exporter.report import render
from exporter.report.model import BUSY_REGIMES
from exporter.roofline import REGIMES
from exporter.view.units import regime_colour, regime_shape, regime_word

ROOT = Path(__file__).resolve().parent.parent


def _marker_path(regime: str) -> Any:
    """The path matplotlib's scatter draws for this regime's marker (as scatter builds it)."""
    style = MarkerStyle(render._MARKERS[regime_shape(regime)])
    return style.get_path().transformed(style.get_transform())


def _is_marker_of(collection: PathCollection, regime: str) -> bool:
    (drawn_path,) = collection.get_paths()
    want = _marker_path(regime)
    same_shape = drawn_path.vertices.shape == want.vertices.shape
    return same_shape and np.allclose(drawn_path.vertices, want.vertices)


def test_the_over_time_stacks_and_their_legend_use_the_tables_colours() -> None:
    doc = replay_doc()
    for i, point in enumerate(doc["timeline"]):  # every regime holds some GPUs in some window
        point["gpus"] = {r: float(j == i % len(REGIMES)) + 1.0 for j, r in enumerate(REGIMES)}
    figure, axes = drawn(doc)
    stacks = [c for c in axes.collections if isinstance(c, PolyCollection)]
    assert [to_hex(c.get_facecolor()[0]) for c in stacks] == [regime_colour(r) for r in REGIMES]
    (legend,) = figure.legends
    words = [t.get_text() for t in legend.get_texts()]
    colours = [to_hex(h.get_facecolor()) for h in legend.legend_handles if h is not None]
    assert words[: len(REGIMES)] == [regime_word(r) for r in REGIMES]
    assert colours[: len(REGIMES)] == [regime_colour(r) for r in REGIMES]


def test_the_stack_falls_to_nothing_between_windows_that_do_not_touch() -> None:
    """Two windows a gap apart: the areas drop to 0 at the first's end and rise at the second's
    start, rather than a slope drawn across the gap as if GPUs had been there."""
    doc = replay_doc()
    doc["timeline"] = [p for p in doc["timeline"] if p["end"] not in (START + 30, START + 40)]
    times, stacks = render._stacks(render.timeline_windows(doc))
    seconds = [t.timestamp() - START for t in times]
    memory = stacks[REGIMES.index("memory_bound")]
    gap = [(s, v) for s, v in zip(seconds, memory, strict=True) if 20 <= s <= 40]
    assert gap == [(20, 2.0), (20, 0.0), (40, 0.0), (40, 2.0)]


@pytest.fixture(scope="module")
def demo_doc(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("report") / "demo.json"
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "report", "--replay", "demo", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_the_roofline_points_and_legend_use_the_tables_colours_and_markers(
    demo_doc: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures: list[Any] = []
    monkeypatch.setattr(render, "_svg", lambda figure: figures.append(figure) or "")
    render.roofline_svg(demo_doc)
    (axes,) = figures[0].axes
    scatters = [c for c in axes.collections if isinstance(c, PathCollection)]
    points = [c for c in scatters if len(c.get_offsets())]
    legend = [c for c in scatters if not len(c.get_offsets())]
    busy = [r for r in REGIMES if r in BUSY_REGIMES]
    assert [c.get_label() for c in legend] == [f"mostly {regime_word(r)}" for r in busy]
    for collection, regime in zip(legend, busy, strict=True):
        assert to_hex(collection.get_facecolor()[0]) == regime_colour(regime), regime
        assert _is_marker_of(collection, regime), regime
    drawn_groups = [  # roofline_svg's points: the groups that did measurable work
        g
        for g in demo_doc["groups"]
        if g["intensity_flop_per_byte"]
        and g["achieved_flop_per_second_per_gpu"]
        and g["busy_gpu_seconds"] > 0
    ]
    regimes = {render._main_busy_regime(g) for g in drawn_groups}
    assert len(points) == len(regimes) >= 2  # the demo's groups are mostly in more than one regime
    by_colour = {regime_colour(r): r for r in regimes}
    for collection in points:
        regime = by_colour[to_hex(collection.get_facecolor()[0])]
        assert _is_marker_of(collection, regime), regime
