"""The roofline chart's geometry: log axes, roofs, ridge, dots, trails, SVG and text renderings."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from exporter.view.chart_svg import render_svg, render_svg_document
from exporter.view.chart_text import render_text
from exporter.view.roofline_chart import (
    MAX_DECADES,
    ChartPoint,
    ChartSpec,
    ComputeRoof,
    LogAxes,
    TrailPoint,
    decade_ranges,
    layout,
    spread,
)

SVG = "{http://www.w3.org/2000/svg}"
H100_BANDWIDTH = 3.35e12
BF16 = ComputeRoof("bf16 · fp16", 989.5e12, in_use=True)
FP8 = ComputeRoof("fp8 · int8", 1979e12)
FP64 = ComputeRoof("fp64", 34e12)


def spec(*points: ChartPoint, roofs: tuple[ComputeRoof, ...] = (FP64, BF16, FP8)) -> ChartSpec:
    return ChartSpec(
        key="h100-sxm", title="NVIDIA H100", bandwidth_bytes_per_second=H100_BANDWIDTH, roofs=roofs,
        points=points,
    )  # fmt: skip


def point(key: str, intensity: float | None, flops: float | None, regime: str = "memory_bound") -> ChartPoint:
    return ChartPoint(key=key, regime=regime, intensity=intensity, flop_per_second=flops)


def test_axes_are_logarithmic_and_decades_evenly_spaced() -> None:
    axes = LogAxes(x_decades=(-1, 4), y_decades=(11, 16), left=10, top=5, width=500, height=250)
    assert axes.x(0.1) == pytest.approx(10)
    assert axes.x(1e4) == pytest.approx(510)
    assert axes.x(10) - axes.x(1) == pytest.approx(axes.x(1000) - axes.x(100)) == pytest.approx(100)
    assert axes.x(math.sqrt(10)) == pytest.approx((axes.x(1) + axes.x(10)) / 2)
    assert axes.y(1e16) == pytest.approx(5) and axes.y(1e11) == pytest.approx(255)
    assert axes.intensity_at(axes.x(42.0)) == pytest.approx(42.0)


def test_the_frame_comes_from_the_roofs_and_widens_only_for_dots() -> None:
    assert decade_ranges(spec()) == ((-1, 4), (11, 16))  # fp8 ridge 591 -> 10 k; 1.98 P -> 10 P
    wide = spec(point("0", 0.004, 2e9), point("1", 3e5, 1e15))
    (x_lo, x_hi), (y_lo, y_hi) = decade_ranges(wide)
    assert (x_lo, x_hi) == (-3, 6) and (y_lo, y_hi) == (9, 16)
    far = spec(point("0", 1e-30, 1.0))
    (x_lo, x_hi), (y_lo, y_hi) = decade_ranges(far)
    assert x_hi - x_lo <= MAX_DECADES and y_hi - y_lo <= MAX_DECADES
    assert layout(far).off_chart[0][1] == "outside the axes"


def test_roofs_ridge_and_dots_sit_where_the_model_says() -> None:
    scene = layout(spec(point("4", 34.5, 89.1e12), point("0", 585.0, 745e12, "compute_bound")))
    axes = scene.axes
    bandwidth = scene.bandwidth_roof
    assert bandwidth is not None
    # the bandwidth roof has slope 1 in decades: FLOP/s = B * I at both of its ends
    for x, y in ((bandwidth.x1, bandwidth.y1), (bandwidth.x2, bandwidth.y2)):
        intensity = axes.intensity_at(x)
        assert axes.y(H100_BANDWIDTH * intensity) == pytest.approx(y)
    assert bandwidth.x2 == pytest.approx(axes.x(1979e12 / H100_BANDWIDTH))  # up to the top roof
    lines = {line.roof.label: line.segment for line in scene.roof_lines}
    assert lines["bf16 · fp16"].x1 == pytest.approx(axes.x(989.5e12 / H100_BANDWIDTH))
    assert lines["bf16 · fp16"].y1 == pytest.approx(axes.y(989.5e12)) == lines["bf16 · fp16"].y2
    assert lines["fp8 · int8"].x2 == pytest.approx(axes.left + axes.width)
    # only the roof in use gets its ridge marked, at P / B
    assert [r.intensity for r in scene.ridges] == [pytest.approx(989.5e12 / H100_BANDWIDTH)]
    dots = {d.point.key: d for d in scene.dots}
    assert (dots["4"].x, dots["4"].y) == (pytest.approx(axes.x(34.5)), pytest.approx(axes.y(89.1e12)))
    assert (dots["0"].x, dots["0"].y) == (pytest.approx(axes.x(585.0)), pytest.approx(axes.y(745e12)))


def test_gpus_that_cannot_be_placed_are_listed_with_why() -> None:
    scene = layout(
        spec(point("7", None, 0.0, "idle"), point("6", None, 1e12, "latency_bound"), point("5", 3.0, None))
    )
    assert scene.dots == ()
    assert [(p.key, why) for p, why in scene.off_chart] == [
        ("7", "idle"),
        ("6", "no DRAM traffic, so no intensity"),
        ("5", "no FLOPs"),
    ]


def test_trails_lead_to_the_dot_and_drop_points_off_the_axes() -> None:
    trail = (TrailPoint(20.0, 50e12), TrailPoint(1e-40, 1.0), TrailPoint(30.0, 80e12))
    scene = layout(spec(ChartPoint("4", "memory_bound", 34.5, 89.1e12, trail=trail)))
    (dot,) = scene.dots
    assert dot.trail == (
        (pytest.approx(scene.axes.x(20.0)), pytest.approx(scene.axes.y(50e12))),
        (pytest.approx(scene.axes.x(30.0)), pytest.approx(scene.axes.y(80e12))),
    )
    root = ET.fromstring(render_svg(scene, standalone=True))
    (line,) = root.iter(f"{SVG}polyline")
    assert line.get("points", "").split()[-1] == f"{dot.x:.2f},{dot.y:.2f}".replace(".00", "")


@pytest.mark.parametrize(
    "regime", ["memory_bound", "compute_bound", "latency_bound", "idle", "balanced", "x"]
)
def test_every_marker_is_centred_on_its_point(regime: str) -> None:
    """The browser test reads a dot's position as its marker's bounding-box centre."""
    scene = layout(spec(point("3", 100.0, 1e14, regime)))
    (dot,) = scene.dots
    root = ET.fromstring(render_svg(scene, standalone=True))
    group = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "rl-dot")
    mark = next(e for e in group if e.get("class") == "rl-mark")
    xs: list[float] = []
    ys: list[float] = []
    if mark.tag == f"{SVG}circle":
        cx, cy, r = (float(mark.get(a, "nan")) for a in ("cx", "cy", "r"))
        xs, ys = [cx - r, cx + r], [cy - r, cy + r]
    elif mark.tag == f"{SVG}rect":
        x, y, w, h = (float(mark.get(a, "nan")) for a in ("x", "y", "width", "height"))
        xs, ys = [x, x + w], [y, y + h]
    elif mark.tag == f"{SVG}polygon":
        pairs = [tuple(map(float, p.split(","))) for p in mark.get("points", "").split()]
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    else:
        numbers = [
            float(n) for n in mark.get("d", "").replace("M", " ").replace("L", " ").replace(",", " ").split()
        ]
        xs, ys = numbers[0::2], numbers[1::2]
    assert (min(xs) + max(xs)) / 2 == pytest.approx(dot.x, abs=0.02)
    assert (min(ys) + max(ys)) / 2 == pytest.approx(dot.y, abs=0.02)
    assert group.get("data-regime") == regime


def test_svg_is_well_formed_carries_no_inline_style_and_escapes_text() -> None:
    """No <style> and no style="": the page's Content-Security-Policy forbids inline styles."""
    nasty = ChartPoint("0", "memory_bound", 10.0, 1e13, detail='<pod name="x">&')
    scene = layout(ChartSpec("k<1>", 'Card "A" & <B>', H100_BANDWIDTH, (BF16,), (nasty,)))
    text = render_svg(scene, standalone=True)
    root = ET.fromstring(text)
    assert not list(root.iter(f"{SVG}style"))
    assert all("style" not in element.attrib for element in root.iter())
    assert (
        root.find(f"{SVG}title") is not None and root.find(f"{SVG}title").text == 'Roofline: Card "A" & <B>'
    )  # type: ignore[union-attr]
    tip = next(t.text for t in root.iter(f"{SVG}title") if t.text and "GPU 0" in t.text)
    assert tip is not None and '<pod name="x">&' in tip
    assert "GPU 0: memory-bound at 10 FLOP/byte" in (root.find(f"{SVG}desc").text or "")  # type: ignore[union-attr]
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert all(i and all(c.isalnum() or c in "-_" for c in i) for i in ids)


def test_a_document_of_several_charts_and_one_of_none() -> None:
    other = ChartSpec(
        "a100", "A100", 2.039e12, (ComputeRoof("bf16", 312e12, True),), (point("8", 5.0, 1e13),)
    )
    doc = ET.fromstring(render_svg_document([layout(spec(point("0", 50.0, 1e14))), layout(other)]))
    assert doc.tag == f"{SVG}svg"
    assert len([g for g in doc.iter(f"{SVG}g") if g.get("class") == "rl-dot"]) == 2
    empty = ET.fromstring(render_svg_document([], note="GPU 3: not in the catalog"))
    assert "GPU 3: not in the catalog" in "".join(empty.itertext())


def test_roof_labels_are_pushed_apart_inside_the_frame() -> None:
    assert spread([10.0, 12.0, 13.0, 40.0], 5.0, 0.0, 100.0) == [10.0, 15.0, 20.0, 40.0]
    assert spread([90.0, 95.0, 99.0], 5.0, 0.0, 100.0) == [90.0, 95.0, 100.0]
    assert spread([96.0, 97.0, 98.0], 5.0, 0.0, 100.0) == [90.0, 95.0, 100.0]


def test_text_chart_puts_each_gpu_in_its_cell() -> None:
    chart_spec = spec(point("4", 34.5, 89.1e12), point("0", 600.0, 750e12, "compute_bound"),
                      point("1", 610.0, 760e12, "compute_bound"), point("7", None, 0.0, "idle"))  # fmt: skip
    chart = render_text(chart_spec, columns=80, rows=18)
    scene_axes = LogAxes(
        x_decades=(-1, 4), y_decades=(11, 16), left=6.0, top=0.0, width=80 - 6 - 14 - 1, height=18 - 2 - 1
    )
    row, col = round(scene_axes.y(89.1e12)), round(scene_axes.x(34.5))
    assert chart.lines[row][col] == "4"
    shared = [m for m in chart.marks if len(m[3]) > 1]
    assert [m[3] for m in shared] == [("0", "1")] and chart.lines[shared[0][0]][shared[0][1]] == "A"
    assert chart.legend() == "A GPU 0, 1"
    assert "━" in "".join(chart.lines) and "/" in "".join(chart.lines) and "┆" in "".join(chart.lines)
    assert [(p.key, why) for p, why in chart.off_chart] == [("7", "idle")]
    assert all(len(line) <= 80 for line in chart.lines)


def test_two_shared_cells_get_two_letters_the_legend_tells_apart() -> None:
    """Each cell several GPUs share has its own letter: two clusters are not both `*`."""
    chart_spec = spec(point("0", 600.0, 750e12, "compute_bound"), point("1", 610.0, 760e12, "compute_bound"),
                      point("4", 34.5, 89.1e12), point("5", 34.6, 89.3e12))  # fmt: skip
    chart = render_text(chart_spec, columns=80, rows=18)
    letters = [(chart.lines[row][col], keys) for row, col, _, keys in chart.marks if len(keys) > 1]
    assert letters == [("A", ("0", "1")), ("B", ("4", "5"))]
    assert chart.legend() == "A GPU 0, 1; B GPU 4, 5"


def test_nearby_dots_share_a_label_and_labels_do_not_overprint() -> None:
    scene = layout(
        spec(
            point("0", 600.0, 750e12),
            point("1", 601.0, 751e12),
            point("4", 38.0, 1e14),
            point("5", 50.0, 1.3e14),
        )
    )
    texts = [label.text for label in scene.dot_labels]
    assert texts == ["GPU 0, 1", "GPU 4", "GPU 5"]
    four, five = scene.dot_labels[1], scene.dot_labels[2]
    overlapping_columns = abs(four.x - five.x) < 6.5 * len(four.text)
    assert not overlapping_columns or abs(four.y - five.y) >= 12.0
