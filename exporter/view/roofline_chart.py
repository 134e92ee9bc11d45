"""The roofline chart as geometry: log-log axes, the roofs, the ridge, and a dot per GPU.

Pure code (the standard library and exporter.view.units), so one piece of arithmetic places a GPU
wherever it is drawn: `GET /roofline.svg` and the live page at `/` serve `render_svg`, and
`ridgeline top` prints `render_text`. The input is a `ChartSpec` — a bandwidth, compute roofs and
points in FLOP/byte and FLOP/s — built from `/classify` verdicts by exporter.view.node_view.

The chart is the textbook one (Williams, Waterman & Patterson, CACM 52(4), 2009; the formulas in
docs/design.md, "The model"): the bandwidth roof is the line FLOP/s = B · I, each compute roof the
flat line at its peak P from its ridge I = P / B to the right, and a GPU sits at its
(intensity, achieved FLOP/s). On log-log axes the bandwidth roof has slope 1.

Axes span whole decades chosen from the roofs (so the frame holds still while dots move) and
widen only to take in a dot that would fall outside, at most `MAX_DECADES` per axis. Every marker
is drawn symmetric about its point, so its bounding box's centre *is* the point: the browser test
measures that.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.view.units import intensity_text, regime_shape, regime_word, si

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
CLUSTER_DISTANCE = 12.0
"""Dots nearer than this (px) share one label ("GPU 0, 1, 3")."""

REGIME_COLOURS: dict[str, str] = {
    "memory_bound": "#0072b2",
    "compute_bound": "#d55e00",
    "latency_bound": "#e69f00",
    "idle": "#7f7f7f",
    "balanced": "#009e73",
}
"""Okabe–Ito colours, distinguishable with the common colour-vision deficiencies; the shape
(exporter.view.units.REGIME_SHAPES) says the same without colour."""
OTHER_COLOUR = "#cc79a7"
INK = "#222222"
MUTED = "#6b6b6b"
GRID = "#d9d9d9"


def regime_colour(regime: str | None) -> str:
    return REGIME_COLOURS.get(regime or "", OTHER_COLOUR)


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
    off: list[tuple[ChartPoint, str]] = []
    for point in spec.points:
        if not point.placeable:
            off.append((point, point.why_not_placed()))
            continue
        assert point.intensity is not None and point.flop_per_second is not None
        if not axes.contains(point.intensity, point.flop_per_second):
            off.append((point, "outside the axes"))
            continue
        trail = tuple(
            (axes.x(t.intensity), axes.y(t.flop_per_second))
            for t in point.trail
            if _positive(t.intensity)
            and _positive(t.flop_per_second)
            and axes.contains(t.intensity, t.flop_per_second)
        )
        dots.append(Dot(point=point, x=axes.x(point.intensity), y=axes.y(point.flop_per_second), trail=trail))
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
        dot_labels=_dot_labels(axes, dots),
        off_chart=tuple(off),
    )


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


def _dot_labels(axes: LogAxes, dots: Sequence[Dot]) -> tuple[DotLabel, ...]:
    """One label per cluster of nearby dots: the keys, beside the cluster's first dot."""
    clusters: list[list[Dot]] = []
    for dot in dots:
        for cluster in clusters:
            if any(math.hypot(dot.x - d.x, dot.y - d.y) < CLUSTER_DISTANCE for d in cluster):
                cluster.append(dot)
                break
        else:
            clusters.append([dot])
    labels = []
    right = axes.left + axes.width
    for cluster in clusters:
        first = cluster[0]
        text = "GPU " + ", ".join(d.point.key for d in cluster)
        x = first.x + MARK_RADIUS + 3
        anchor_left = x + 7 * len(text) > right
        labels.append(
            DotLabel(
                text=text,
                x=(first.x - MARK_RADIUS - 3) if anchor_left else x,
                y=max(axes.top + 10, first.y - MARK_RADIUS - 2),
                anchor="end" if anchor_left else "start",
            )
        )
    return tuple(labels)


# -- SVG -------------------------------------------------------------------------------------------


def _f(value: float) -> str:
    """A coordinate with 2 decimals: sub-pixel exact, short text."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def marker_svg(shape: str, x: float, y: float, colour: str, r: float = MARK_RADIUS) -> str:
    """A marker whose bounding box is centred on (x, y)."""
    common = f'class="rl-mark" stroke="{colour}" stroke-width="{2 if shape == "cross" else 1.5}"'
    if shape == "circle":
        return f'<circle {common} fill="{colour}" cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}"/>'
    if shape == "ring":
        return f'<circle {common} fill="none" cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}"/>'
    if shape == "square":
        s = r * 0.9
        return (
            f'<rect {common} fill="{colour}" x="{_f(x - s)}" y="{_f(y - s)}" '
            f'width="{_f(2 * s)}" height="{_f(2 * s)}"/>'
        )
    if shape == "diamond":
        s = r * 1.2
        pts = f"{_f(x)},{_f(y - s)} {_f(x + s)},{_f(y)} {_f(x)},{_f(y + s)} {_f(x - s)},{_f(y)}"
        return f'<polygon {common} fill="{colour}" points="{pts}"/>'
    if shape == "triangle":
        pts = f"{_f(x)},{_f(y - r)} {_f(x + r)},{_f(y + r)} {_f(x - r)},{_f(y + r)}"
        return f'<polygon {common} fill="{colour}" points="{pts}"/>'
    s = r * 0.8
    a, b, c, d = _f(x - s), _f(x + s), _f(y - s), _f(y + s)
    return f'<path {common} fill="none" d="M{a},{c}L{b},{d}M{a},{d}L{b},{c}"/>'


def describe(scene: Scene) -> str:
    """The chart in words, for screen readers (the SVG's <desc>) and the page's text alternative."""
    spec = scene.spec
    parts = [f"Bandwidth roof {si(spec.bandwidth_bytes_per_second, 'B/s')}."]
    if spec.roofs:
        roofs = ", ".join(f"{r.label} {si(r.flop_per_second, 'FLOP/s')}" for r in spec.roofs)
        parts.append(f"Compute roofs: {roofs}.")
    for ridge in scene.ridges:
        parts.append(f"Ridge at {intensity_text(ridge.intensity)} FLOP/byte.")
    for dot in scene.dots:
        p = dot.point
        parts.append(
            f"{p.label}: {regime_word(p.regime)} at {intensity_text(p.intensity)} FLOP/byte, "
            f"{si(p.flop_per_second, 'FLOP/s')}."
        )
    for point, why in scene.off_chart:
        parts.append(f"{point.label}: not on the chart ({why}).")
    return " ".join(parts)


def render_svg(scene: Scene, *, id_prefix: str = "rl", standalone: bool = False) -> str:
    """The chart as an <svg> element: presentation attributes only (no <style>, no style="").

    So it works inline in a page whose Content-Security-Policy forbids inline styles, and on its
    own (`standalone`: the XML namespace, a size and a white background) in a ticket or a wiki.
    Classes (rl-*) let the page's stylesheet restyle it, e.g. for a dark theme.
    """
    spec = scene.spec
    axes = scene.axes
    ident = "".join(c if c.isalnum() or c in "-_" else "-" for c in f"{id_prefix}-{spec.key}")
    title_id, desc_id = f"{ident}-title", f"{ident}-desc"
    out: list[str] = []
    attrs = (
        f'class="rl-chart" viewBox="0 0 {_f(scene.width)} {_f(scene.height)}" role="img" '
        f'aria-labelledby="{title_id} {desc_id}" font-family="system-ui, -apple-system, Segoe UI, '
        f'Roboto, Helvetica, Arial, sans-serif" font-size="11" data-card="{_esc(spec.key)}"'
    )
    if standalone:
        attrs = (
            f'xmlns="http://www.w3.org/2000/svg" width="{_f(scene.width)}" height="{_f(scene.height)}" '
            + attrs
        )
    out.append(f"<svg {attrs}>")
    out.append(f'<title id="{title_id}">Roofline: {_esc(spec.title)}</title>')
    out.append(f'<desc id="{desc_id}">{_esc(describe(scene))}</desc>')
    if standalone:
        out.append(f'<rect width="{_f(scene.width)}" height="{_f(scene.height)}" fill="#ffffff"/>')
    left, top = axes.left, axes.top
    right, bottom = axes.left + axes.width, axes.top + axes.height
    # grid and ticks
    out.append('<g class="rl-grid" stroke="' + GRID + '" stroke-width="1">')
    for tick in scene.x_ticks:
        out.append(
            f'<line class="rl-tick-x" data-value="{tick.value:g}" x1="{_f(tick.position)}" '
            f'y1="{_f(top)}" x2="{_f(tick.position)}" y2="{_f(bottom)}"/>'
        )
    for tick in scene.y_ticks:
        out.append(
            f'<line class="rl-tick-y" data-value="{tick.value:g}" x1="{_f(left)}" y1="{_f(tick.position)}" '
            f'x2="{_f(right)}" y2="{_f(tick.position)}"/>'
        )
    out.append("</g>")
    out.append(f'<g class="rl-axis-text" fill="{MUTED}">')
    for tick in scene.x_ticks:
        x = _f(tick.position)
        out.append(f'<text x="{x}" y="{_f(bottom + 14)}" text-anchor="middle">{_esc(tick.text)}</text>')
    for tick in scene.y_ticks:
        out.append(
            f'<text x="{_f(left - 5)}" y="{_f(tick.position + 4)}" text-anchor="end">{_esc(tick.text)}</text>'
        )
    out.append(
        f'<text x="{_f(left + axes.width / 2)}" y="{_f(bottom + 32)}" text-anchor="middle">'
        "arithmetic intensity (FLOP/byte, log)</text>"
    )
    mid_y = top + axes.height / 2
    out.append(
        f'<text x="14" y="{_f(mid_y)}" text-anchor="middle" transform="rotate(-90 14 {_f(mid_y)})">'
        "achieved FLOP/s (log)</text>"
    )
    out.append("</g>")
    out.append(
        f'<rect class="rl-frame" x="{_f(left)}" y="{_f(top)}" width="{_f(axes.width)}" '
        f'height="{_f(axes.height)}" fill="none" stroke="{MUTED}" stroke-width="1"/>'
    )
    # roofs
    for line in scene.roof_lines:
        s = line.segment
        roof = line.roof
        style = (
            f'stroke="{INK}" stroke-width="2.5"'
            if roof.in_use
            else f'stroke="{MUTED}" stroke-width="1" stroke-dasharray="5 3"'
        )
        kind = "rl-roof rl-roof-used" if roof.in_use else "rl-roof"
        out.append(
            f'<line class="{kind}" data-flops="{roof.flop_per_second:g}" {style} '
            f'x1="{_f(s.x1)}" y1="{_f(s.y1)}" x2="{_f(s.x2)}" y2="{_f(s.y2)}"/>'
        )
        weight = ' font-weight="600"' if roof.in_use else ""
        out.append(
            f'<text class="rl-roof-label" x="{_f(right + 6)}" y="{_f(line.label_y + 4)}" '
            f'fill="{INK if roof.in_use else MUTED}"{weight}>'
            f"{_esc(roof.label)} {_esc(si(roof.flop_per_second))}</text>"
        )
    if scene.bandwidth_roof is not None:
        s = scene.bandwidth_roof
        out.append(
            f'<line class="rl-roof rl-roof-bandwidth" data-bandwidth="{spec.bandwidth_bytes_per_second:g}" '
            f'stroke="{INK}" stroke-width="2.5" x1="{_f(s.x1)}" y1="{_f(s.y1)}" '
            f'x2="{_f(s.x2)}" y2="{_f(s.y2)}"/>'
        )
        bx, by, angle = scene.bandwidth_label
        out.append(
            f'<text class="rl-roof-label" fill="{INK}" x="{_f(bx)}" y="{_f(by)}" '
            f'transform="rotate({_f(angle)} {_f(bx)} {_f(by)})">'
            f"{_esc(si(spec.bandwidth_bytes_per_second, 'B/s'))}</text>"
        )
    for ridge in scene.ridges:
        out.append(
            f'<line class="rl-ridge" data-intensity="{ridge.intensity:g}" stroke="{MUTED}" '
            f'stroke-width="1" stroke-dasharray="2 3" x1="{_f(ridge.x)}" y1="{_f(ridge.y)}" '
            f'x2="{_f(ridge.x)}" y2="{_f(bottom)}"/>'
        )
        out.append(
            f'<text class="rl-ridge-label" fill="{INK}" x="{_f(ridge.x + 4)}" y="{_f(bottom - 6)}">'
            f"{_esc(ridge.text)}</text>"
        )
    # trails, then dots on top
    for dot in scene.dots:
        if len(dot.trail) >= 1:
            points = " ".join(f"{_f(x)},{_f(y)}" for x, y in (*dot.trail, (dot.x, dot.y)))
            out.append(
                f'<polyline class="rl-trail" data-gpu="{_esc(dot.point.key)}" fill="none" '
                f'stroke="{regime_colour(dot.point.regime)}" stroke-opacity="0.45" stroke-width="1.5" '
                f'points="{points}"/>'
            )
    for dot in scene.dots:
        p = dot.point
        tip = f"{p.label}{' (' + p.detail + ')' if p.detail else ''}: {regime_word(p.regime)}, " + (
            f"{intensity_text(p.intensity)} FLOP/byte, {si(p.flop_per_second, 'FLOP/s')}"
        )
        timestamp = f' data-timestamp="{p.timestamp!r}"' if p.timestamp is not None else ""
        out.append(
            f'<g class="rl-dot" data-gpu="{_esc(p.key)}" data-regime="{_esc(p.regime or "")}" '
            f'data-intensity="{p.intensity!r}" data-flops="{p.flop_per_second!r}"{timestamp}>'
            f"<title>{_esc(tip)}</title>"
            + marker_svg(regime_shape(p.regime), dot.x, dot.y, regime_colour(p.regime))
            + "</g>"
        )
    for label in scene.dot_labels:
        out.append(
            f'<text class="rl-dot-label" fill="{INK}" x="{_f(label.x)}" y="{_f(label.y)}" '
            f'text-anchor="{label.anchor}">{_esc(label.text)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def render_svg_document(scenes: Sequence[Scene], *, note: str = "") -> str:
    """A standalone SVG of one or more charts stacked, for GET /roofline.svg."""
    if not scenes:
        text = note or "no GPU with a known card on this node yet"
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" width="640" height="60" viewBox="0 0 640 60" '
            'role="img" font-family="system-ui, sans-serif" font-size="13">'
            f'<title>Roofline</title><rect width="640" height="60" fill="#ffffff"/>'
            f'<text x="16" y="34" fill="{INK}">{_esc(text)}</text></svg>'
        )
    if len(scenes) == 1:
        return render_svg(scenes[0], standalone=True)
    heading = 22.0
    total = sum(s.height + heading for s in scenes)
    width = max(s.width for s in scenes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(total)}" '
        f'viewBox="0 0 {_f(width)} {_f(total)}" font-family="system-ui, sans-serif" font-size="13">'
        f'<rect width="{_f(width)}" height="{_f(total)}" fill="#ffffff"/>'
    ]
    y = 0.0
    for scene in scenes:
        parts.append(
            f'<text x="8" y="{_f(y + 16)}" fill="{INK}" font-weight="600">{_esc(scene.spec.title)}</text>'
        )
        inner = render_svg(scene, id_prefix=f"rl{int(y)}")
        parts.append(f'<g transform="translate(0 {_f(y + heading)})">' + inner + "</g>")
        y += scene.height + heading
    parts.append("</svg>")
    return "".join(parts)


# -- text ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextChart:
    """A roofline drawn in characters; `marks` say where each GPU's character is, to colour it."""

    lines: tuple[str, ...]
    marks: tuple[tuple[int, int, str | None, tuple[str, ...]], ...]
    """(row, column, regime, GPU keys) of each dot's cell; several keys where dots share it."""
    off_chart: tuple[tuple[ChartPoint, str], ...]

    def legend(self) -> str:
        """What each `*` stands for: "* GPU 0, 1, 2, 3; * GPU 4, 5" (empty when none is shared)."""
        shared = [keys for _, _, _, keys in self.marks if len(keys) > 1]
        return "; ".join("* GPU " + ", ".join(keys) for keys in shared)


def render_text(spec: ChartSpec, columns: int = 72, rows: int = 16) -> TextChart:
    """The same chart in a `columns` x `rows` grid of characters, for `ridgeline top`.

    Roofs are ─ (━ when a GPU is measured against it), the bandwidth roof /, the ridge ┆, a GPU
    its index (* where several share a cell). The axes are the SVG chart's (decade_ranges).
    """
    gutter_left, gutter_right = 6, 14
    plot_columns = max(10, columns - gutter_left - gutter_right)
    plot_rows = max(4, rows - 2)
    x_decades, y_decades = decade_ranges(spec)
    axes = LogAxes(
        x_decades=x_decades,
        y_decades=y_decades,
        left=float(gutter_left),
        top=0.0,
        width=float(plot_columns - 1),
        height=float(plot_rows - 1),
    )
    grid = [[" "] * (gutter_left + plot_columns + gutter_right) for _ in range(plot_rows + 2)]
    right = gutter_left + plot_columns - 1

    def cell(x: float, y: float) -> tuple[int, int]:
        return round(y), round(x)

    def put(row: int, col: int, char: str) -> None:
        if 0 <= row < plot_rows and gutter_left <= col <= right:
            grid[row][col] = char

    bandwidth = spec.bandwidth_bytes_per_second
    top_peak = max((r.flop_per_second for r in spec.roofs), default=10.0 ** y_decades[1])
    y_lo, y_hi = 10.0 ** y_decades[0], 10.0 ** y_decades[1]
    for roof in sorted(spec.roofs, key=lambda r: r.in_use):
        if not y_lo <= roof.flop_per_second <= y_hi:
            continue
        row = round(axes.y(roof.flop_per_second))
        start = max(gutter_left, round(axes.x(max(roof.flop_per_second / bandwidth, 10.0 ** x_decades[0]))))
        for col in range(start, right + 1):
            put(row, col, "━" if roof.in_use else "─")
        label = f"{roof.label} {si(roof.flop_per_second)}"[: gutter_right - 1]
        _write(grid, row, right + 2, label, plot_rows)
    for col in range(gutter_left, right + 1):
        intensity = axes.intensity_at(col)
        flops = intensity * bandwidth
        if flops > top_peak * 1.0000001 or not y_lo <= flops <= y_hi:
            continue
        row = round(axes.y(flops))
        put(row, col, "/")
    for roof in spec.roofs:
        ridge = roof.flop_per_second / bandwidth
        if roof.in_use and axes.contains(ridge, roof.flop_per_second):
            row, col = cell(axes.x(ridge), axes.y(roof.flop_per_second))
            for r in range(row + 1, plot_rows):
                if grid[r][col] == " ":
                    grid[r][col] = "┆"
    # y labels and x labels
    for d in range(y_decades[0], y_decades[1] + 1):
        row = round(axes.y(10.0**d))
        _write(grid, row, 0, si(10.0**d).rjust(gutter_left - 1)[: gutter_left - 1], plot_rows)
    axis_row = plot_rows
    for col in range(gutter_left, right + 1):
        grid[axis_row][col] = "─"
    for d in range(x_decades[0], x_decades[1] + 1):
        col = round(axes.x(10.0**d))
        grid[axis_row][col] = "┴"
        text = decade_text(d)
        start = min(max(gutter_left, col - len(text) // 2), right - len(text) + 1)
        _write(grid, axis_row + 1, start, text, plot_rows + 2)
    _write(grid, axis_row + 1, right + 2, "FLOP/byte", plot_rows + 2)
    marks: dict[tuple[int, int], tuple[str, str | None, tuple[str, ...]]] = {}
    off: list[tuple[ChartPoint, str]] = []
    for point in spec.points:
        if not point.placeable:
            off.append((point, point.why_not_placed()))
            continue
        assert point.intensity is not None and point.flop_per_second is not None
        if not axes.contains(point.intensity, point.flop_per_second):
            off.append((point, "outside the axes"))
            continue
        where = cell(axes.x(point.intensity), axes.y(point.flop_per_second))
        char = point.key if len(point.key) == 1 else "•"
        if where in marks:
            _, regime, keys = marks[where]
            marks[where] = ("*", regime, (*keys, point.key))
        else:
            marks[where] = (char, point.regime, (point.key,))
    for (row, col), (char, _, _) in marks.items():
        grid[row][col] = char
    lines = tuple("".join(row).rstrip() for row in grid)
    return TextChart(
        lines=lines,
        marks=tuple((row, col, regime, keys) for (row, col), (_, regime, keys) in marks.items()),
        off_chart=tuple(off),
    )


def _write(grid: list[list[str]], row: int, col: int, text: str, rows: int) -> None:
    if not 0 <= row < rows:
        return
    for i, char in enumerate(text):
        if 0 <= col + i < len(grid[row]):
            grid[row][col + i] = char
