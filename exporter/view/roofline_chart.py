"""The roofline chart as geometry: a `ChartSpec` in, a `Scene` out (log-log axes, the roofs, the
ridge and a dot per GPU, every element with its position).

Pure code (the standard library and exporter.view.units), so one piece of arithmetic places a GPU
wherever it is drawn: exporter/view/chart_svg.py draws a Scene as SVG (`GET /roofline.svg`, the
live page at `/`), exporter/view/chart_text.py a spec in characters (`ridgeline top`). Specs are
built from `/classify` verdicts by exporter.view.node_view.

The chart is the textbook one (Williams, Waterman & Patterson, CACM 52(4), 2009; docs/design.md,
"The model"): the bandwidth roof FLOP/s = B · I (slope 1 on log-log axes), each compute roof flat
at its peak P from its ridge I = P / B, a GPU at its (intensity, achieved FLOP/s). Axes span whole
decades chosen from the roofs (so the frame holds still while dots move) and widen only to take in
a dot, at most `MAX_DECADES` per axis. Every marker is symmetric about its point, so its bounding
box's centre *is* the point: the browser test measures that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.view.units import intensity_text, si

MAX_DECADES = 9
"""The most decades one axis spans; a dot further out is listed as off the chart."""

BASE_INTENSITY_DECADE = -1
"""The intensity axis starts at 0.1 FLOP/byte (a streaming kernel) unless a dot sits lower."""

WIDTH = 660
HEIGHT = 400
PLOT_LEFT = 62.0
PLOT_RIGHT_GUTTER = 150.0
"""Room right of the plot for the compute roofs' labels."""
PLOT_TOP = 14.0
PLOT_BOTTOM_GUTTER = 44.0
MARK_RADIUS = 5.0
LABEL_GAP = 12.0
"""Least vertical distance between two roof labels (px); closer ones are pushed apart."""
LABEL_CHAR_WIDTH = 6.5
"""A label character's width at the chart's 11-unit font, near enough to keep labels apart."""
LABEL_ASCENT = 9.0
LABEL_DESCENT = 3.0
"""How far a label's glyphs reach above and below its baseline at the 11-unit font (px)."""
CLUSTER_DISTANCE = 12.0
"""Dots nearer than this (px) share one label ("GPU 0, 1, 3")."""

# -- what to draw ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ComputeRoof:
    """One flat roof: a peak in FLOP/s and what it is the peak of ("bf16 · fp16")."""

    label: str
    flop_per_second: float
    in_use: bool = False
    """Some GPU on this chart is measured against this roof: drawn bold, its ridge marked."""


@dataclass(frozen=True, slots=True)
class TrailPoint:
    """Where a GPU was a little while ago."""

    intensity: float
    flop_per_second: float


@dataclass(frozen=True, slots=True)
class ChartPoint:
    """One GPU (or MIG instance) as /classify reports it."""

    key: str
    """"3", or "3/1" for GPU instance 1 of GPU 3: short, shown next to the dot."""
    regime: str | None
    intensity: float | None
    flop_per_second: float | None
    timestamp: float | None = None
    detail: str = ""
    """Who runs on it (a pod), for the dot's tooltip."""
    trail: tuple[TrailPoint, ...] = ()
    """Older positions, oldest first."""

    @property
    def label(self) -> str:
        return f"GPU {self.key}"

    @property
    def placeable(self) -> bool:
        return _positive(self.intensity) and _positive(self.flop_per_second)

    def why_not_placed(self) -> str:
        if self.regime is None:
            return "no reading"
        if not _positive(self.intensity):
            return "no DRAM traffic, so no intensity" if self.regime != "idle" else "idle"
        return "no FLOPs" if self.regime != "idle" else "idle"


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """One roofline: a card (or MIG instance roof) and the GPUs on it."""

    key: str
    """Stable and unique per chart on a node (used in element ids)."""
    title: str
    bandwidth_bytes_per_second: float
    roofs: tuple[ComputeRoof, ...]
    points: tuple[ChartPoint, ...] = ()


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


# -- axes ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogAxes:
    """Decade ranges mapped onto a box (SVG pixels, or terminal cells): log10 is linear here."""

    x_decades: tuple[int, int]
    y_decades: tuple[int, int]
    left: float
    top: float
    width: float
    height: float

    def x(self, intensity: float) -> float:
        lo, hi = self.x_decades
        return self.left + (math.log10(intensity) - lo) / (hi - lo) * self.width

    def y(self, flop_per_second: float) -> float:
        lo, hi = self.y_decades
        return self.top + self.height - (math.log10(flop_per_second) - lo) / (hi - lo) * self.height

    def intensity_at(self, x: float) -> float:
        lo, hi = self.x_decades
        return float(10.0 ** (lo + (x - self.left) / self.width * (hi - lo)))

    def contains(self, intensity: float, flop_per_second: float) -> bool:
        x_lo, x_hi = self.x_decades
        y_lo, y_hi = self.y_decades
        lx, ly = math.log10(intensity), math.log10(flop_per_second)
        return x_lo <= lx <= x_hi and y_lo <= ly <= y_hi


def decade_ranges(spec: ChartSpec) -> tuple[tuple[int, int], tuple[int, int]]:
    """(x, y) decade ranges: the roofs' frame, widened for the dots up to MAX_DECADES per axis."""
    bandwidth = spec.bandwidth_bytes_per_second
    peaks = [r.flop_per_second for r in spec.roofs] or [bandwidth * 100.0]
    top_ridge = max(peaks) / bandwidth
    x_lo = BASE_INTENSITY_DECADE
    x_hi = max(x_lo + 2, math.floor(math.log10(top_ridge)) + 2)
    y_hi = math.floor(math.log10(max(peaks))) + 1
    y_lo = min(math.floor(math.log10(bandwidth * 10.0**x_lo)), math.floor(math.log10(min(peaks))))
    placed = [p for p in spec.points if p.placeable]
    if placed:
        xs = [math.log10(p.intensity) for p in placed if p.intensity is not None]
        ys = [math.log10(p.flop_per_second) for p in placed if p.flop_per_second is not None]
        x_lo, x_hi = _widen(x_lo, x_hi, min(xs), max(xs))
        y_lo, y_hi = _widen(y_lo, y_hi, min(ys), max(ys))
    return (x_lo, x_hi), (y_lo, y_hi)


def _widen(lo: int, hi: int, least: float, most: float) -> tuple[int, int]:
    """Take in [least, most] by whole decades, never past MAX_DECADES in all."""
    want_lo = min(lo, math.floor(least))
    want_hi = max(hi, math.floor(most) + 1)
    want_lo = max(want_lo, hi - MAX_DECADES)
    want_hi = min(want_hi, want_lo + MAX_DECADES)
    return want_lo, want_hi


# -- the scene: every element with its position --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tick:
    value: float
    position: float
    text: str


@dataclass(frozen=True, slots=True)
class Segment:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True, slots=True)
class RoofLine:
    roof: ComputeRoof
    segment: Segment
    label_y: float


@dataclass(frozen=True, slots=True)
class Ridge:
    intensity: float
    x: float
    y: float
    text: str


@dataclass(frozen=True, slots=True)
class Dot:
    point: ChartPoint
    x: float
    y: float
    trail: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class DotLabel:
    text: str
    x: float
    y: float
    anchor: str = "start"
    """SVG text-anchor: "end" when the label would run past the plot's right edge."""


@dataclass(frozen=True, slots=True)
class Scene:
    """A chart laid out: what render_svg draws, with every position computed here."""

    spec: ChartSpec
    axes: LogAxes
    width: float
    height: float
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    bandwidth_roof: Segment | None
    bandwidth_label: tuple[float, float, float]
    """(x, y, angle in degrees) of the bandwidth roof's label."""
    roof_lines: tuple[RoofLine, ...]
    ridges: tuple[Ridge, ...]
    dots: tuple[Dot, ...]
    dot_labels: tuple[DotLabel, ...]
    off_chart: tuple[tuple[ChartPoint, str], ...]
    """GPUs the chart cannot place, with why (idle, no traffic, off the axes)."""


def layout(spec: ChartSpec, width: float = WIDTH, height: float = HEIGHT) -> Scene:
    """Place every element of one chart in a width x height box (SVG user units)."""
    x_decades, y_decades = decade_ranges(spec)
    axes = LogAxes(
        x_decades=x_decades,
        y_decades=y_decades,
        left=PLOT_LEFT,
        top=PLOT_TOP,
        width=width - PLOT_LEFT - PLOT_RIGHT_GUTTER,
        height=height - PLOT_TOP - PLOT_BOTTOM_GUTTER,
    )
    x_ticks = tuple(
        Tick(value=10.0**d, position=axes.x(10.0**d), text=decade_text(d))
        for d in range(x_decades[0], x_decades[1] + 1)
    )
    y_ticks = tuple(
        Tick(value=10.0**d, position=axes.y(10.0**d), text=si(10.0**d))
        for d in range(y_decades[0], y_decades[1] + 1)
    )
    bandwidth = spec.bandwidth_bytes_per_second
    peaks = [r.flop_per_second for r in spec.roofs]
    top_peak = max(peaks) if peaks else 10.0 ** y_decades[1]
    bandwidth_roof = _clip_diagonal(axes, bandwidth, top_peak)
    roof_lines = _roof_lines(axes, spec.roofs, bandwidth)
    ridges = tuple(
        Ridge(
            intensity=r.flop_per_second / bandwidth,
            x=axes.x(r.flop_per_second / bandwidth),
            y=axes.y(r.flop_per_second),
            text=f"ridge {intensity_text(r.flop_per_second / bandwidth)}",
        )
        for r in spec.roofs
        if r.in_use and axes.contains(r.flop_per_second / bandwidth, r.flop_per_second)
    )
    dots: list[Dot] = []
    placed, off = place_points(spec.points, axes)
    for point, (intensity, flop_per_second) in placed:
        trail = tuple(
            (axes.x(t.intensity), axes.y(t.flop_per_second))
            for t in point.trail
            if _positive(t.intensity)
            and _positive(t.flop_per_second)
            and axes.contains(t.intensity, t.flop_per_second)
        )
        dots.append(Dot(point=point, x=axes.x(intensity), y=axes.y(flop_per_second), trail=trail))
    return Scene(
        spec=spec,
        axes=axes,
        width=width,
        height=height,
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        bandwidth_roof=bandwidth_roof,
        bandwidth_label=_bandwidth_label(axes, bandwidth_roof),
        roof_lines=roof_lines,
        ridges=ridges,
        dots=tuple(dots),
        dot_labels=_dot_labels(axes, dots, [line.segment for line in roof_lines]),
        off_chart=tuple(off),
    )


def place_points(
    points: Sequence[ChartPoint], axes: LogAxes
) -> tuple[list[tuple[ChartPoint, tuple[float, float]]], list[tuple[ChartPoint, str]]]:
    """(points on the chart with their (intensity, FLOP/s), points left off with why): the one
    rule the SVG and the text chart share."""
    placed: list[tuple[ChartPoint, tuple[float, float]]] = []
    off: list[tuple[ChartPoint, str]] = []
    for point in points:
        if not point.placeable:
            off.append((point, point.why_not_placed()))
            continue
        assert point.intensity is not None and point.flop_per_second is not None
        if not axes.contains(point.intensity, point.flop_per_second):
            off.append((point, "outside the axes"))
            continue
        placed.append((point, (point.intensity, point.flop_per_second)))
    return placed, off


def decade_text(decade: int) -> str:
    """An intensity tick: 0.01, 0.1, 1, 10, 100, 1 k, 10 k."""
    if decade < 0:
        return f"{10.0**decade:.{-decade}f}"
    return si(10.0**decade)


def _clip_diagonal(axes: LogAxes, bandwidth: float, top_peak: float) -> Segment | None:
    """FLOP/s = B · I from the left or bottom edge up to the highest roof, inside the box."""
    x_lo, x_hi = (10.0**d for d in axes.x_decades)
    y_lo, y_hi = (10.0**d for d in axes.y_decades)
    start = max(x_lo, y_lo / bandwidth)
    end = min(x_hi, min(top_peak, y_hi) / bandwidth)
    if end <= start:
        return None
    return Segment(axes.x(start), axes.y(start * bandwidth), axes.x(end), axes.y(end * bandwidth))


def _roof_lines(axes: LogAxes, roofs: Sequence[ComputeRoof], bandwidth: float) -> tuple[RoofLine, ...]:
    """Each roof from its ridge (or the left edge) to the right edge; labels pushed apart."""
    x_lo, x_hi = (10.0**d for d in axes.x_decades)
    y_lo, y_hi = (10.0**d for d in axes.y_decades)
    drawn = [
        (
            roof,
            Segment(
                axes.x(max(x_lo, roof.flop_per_second / bandwidth)),
                axes.y(roof.flop_per_second),
                axes.x(x_hi),
                axes.y(roof.flop_per_second),
            ),
        )
        for roof in sorted(roofs, key=lambda r: -r.flop_per_second)
        if y_lo <= roof.flop_per_second <= y_hi and roof.flop_per_second / bandwidth < x_hi
    ]
    label_ys = spread([segment.y1 for _, segment in drawn], LABEL_GAP, axes.top, axes.top + axes.height)
    return tuple(
        RoofLine(roof=roof, segment=segment, label_y=y)
        for (roof, segment), y in zip(drawn, label_ys, strict=True)
    )


def spread(positions: Sequence[float], gap: float, low: float, high: float) -> list[float]:
    """Positions (ascending) moved apart to at least `gap`, kept inside [low, high] where they fit."""
    out: list[float] = []
    for y in positions:
        out.append(max(y, out[-1] + gap) if out else y)
    overflow = (out[-1] - high) if out else 0.0
    if overflow > 0:
        out = [y - overflow for y in out]
        for i in range(len(out) - 2, -1, -1):  # pull back up without breaking the gaps
            out[i] = min(out[i], out[i + 1] - gap)
    return [max(low, y) for y in out]


def _bandwidth_label(axes: LogAxes, segment: Segment | None) -> tuple[float, float, float]:
    if segment is None:
        return (axes.left + 8, axes.top + axes.height - 8, 0.0)
    angle = math.degrees(math.atan2(segment.y2 - segment.y1, segment.x2 - segment.x1))
    t = 0.3
    x = segment.x1 + t * (segment.x2 - segment.x1)
    y = segment.y1 + t * (segment.y2 - segment.y1)
    # 6 units above the line, perpendicular to it
    rad = math.radians(angle)
    return (x + 6 * math.sin(rad), y - 6 * math.cos(rad), angle)


def _crosses_roof(left: float, right: float, baseline: float, roofs: Sequence[Segment]) -> bool:
    """Would a label at `baseline` spanning [left, right] be struck through by a flat roof?"""
    return any(
        baseline - LABEL_ASCENT - 1 <= s.y1 <= baseline + LABEL_DESCENT + 1 and s.x1 < right and left < s.x2
        for s in roofs
    )


def _dot_labels(axes: LogAxes, dots: Sequence[Dot], roofs: Sequence[Segment] = ()) -> tuple[DotLabel, ...]:
    """One label per cluster of nearby dots: the keys, beside the cluster's first dot, above it
    unless a flat roof runs there (a compute-bound GPU sits just under its roof), then below."""
    labels: list[DotLabel] = []
    spans: list[tuple[float, float, float]] = []  # (left, right, baseline) of labels placed so far
    right = axes.left + axes.width
    for cluster in _clusters(dots):
        first = cluster[0]
        text = "GPU " + ", ".join(d.point.key for d in cluster)
        width = LABEL_CHAR_WIDTH * len(text)
        x = first.x + MARK_RADIUS + 3
        anchor_left = x + width > right
        left_edge = (first.x - MARK_RADIUS - 3 - width) if anchor_left else x
        y = _clear_of_roofs(axes, first, left_edge, width, roofs)
        y = _clear_of_labels(axes, spans, left_edge, width, y)
        spans.append((left_edge, left_edge + width, y))
        labels.append(
            DotLabel(
                text=text,
                x=(first.x - MARK_RADIUS - 3) if anchor_left else x,
                y=y,
                anchor="end" if anchor_left else "start",
            )
        )
    return tuple(labels)


def _clusters(dots: Sequence[Dot]) -> list[list[Dot]]:
    """Dots grouped with the first earlier cluster any of whose dots is within CLUSTER_DISTANCE."""
    clusters: list[list[Dot]] = []
    for dot in dots:
        for cluster in clusters:
            if any(math.hypot(dot.x - d.x, dot.y - d.y) < CLUSTER_DISTANCE for d in cluster):
                cluster.append(dot)
                break
        else:
            clusters.append([dot])
    return clusters


def _clear_of_roofs(
    axes: LogAxes, first: Dot, left_edge: float, width: float, roofs: Sequence[Segment]
) -> float:
    """The first baseline (above, beside, below the dot, then further out) no flat roof strikes
    through; above when none is clear."""
    above = max(axes.top + 10, first.y - MARK_RADIUS - 2)
    candidates = [above, first.y + 4, first.y + MARK_RADIUS + LABEL_ASCENT + 2]  # above, beside, below
    candidates += [c for k in range(1, 8) for c in (above - 3 * k, first.y + 4 + 3 * k)]
    return next((c for c in candidates if not _crosses_roof(left_edge, left_edge + width, c, roofs)), above)


def _clear_of_labels(
    axes: LogAxes, spans: Sequence[tuple[float, float, float]], left_edge: float, width: float, y: float
) -> float:
    """`y` stepped up past any label already placed (`spans`) that this one would overprint."""
    for _ in range(len(spans)):
        clash = [b for a, z, b in spans if a < left_edge + width and left_edge < z and abs(b - y) < LABEL_GAP]
        if not clash:
            break
        y = max(axes.top + 10, min(clash) - LABEL_GAP)
    return y
