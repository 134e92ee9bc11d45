"""A laid-out roofline (exporter/view/roofline_chart.py's `Scene`) as SVG.

Presentation attributes only — no <style>, no style="" — so the same markup works inline in the
live page, whose Content-Security-Policy forbids inline styles, and standalone in a ticket or a
wiki (`GET /roofline.svg`). Classes (rl-*) let the page's stylesheet restyle it (dark theme);
data-* attributes carry each dot's numbers for tests and tools.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from exporter.view.roofline_chart import LABEL_CHAR_WIDTH, MARK_RADIUS, Scene
from exporter.view.units import intensity_text, regime_colour, regime_shape, regime_word, si

INK = "#222222"
MUTED = "#6b6b6b"
GRID = "#d9d9d9"


def _f(value: float) -> str:
    """A coordinate with 2 decimals: sub-pixel exact, short text."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _line(css_class: str, attrs: str, x1: float, y1: float, x2: float, y2: float) -> str:
    """One SVG line: its class, its other attributes as given, then its two ends."""
    return f'<line class="{css_class}" {attrs} x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}"/>'


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
    if shape == "triangle_down":
        pts = f"{_f(x)},{_f(y + r)} {_f(x + r)},{_f(y - r)} {_f(x - r)},{_f(y - r)}"
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


def render_svg(
    scene: Scene, *, id_prefix: str = "rl", standalone: bool = False, at: tuple[float, float] | None = None
) -> str:
    """The chart as an <svg> element: presentation attributes only (no <style>, no style="").

    So it works inline in a page whose Content-Security-Policy forbids inline styles, and on its
    own (`standalone`: the XML namespace, a size and a white background) in a ticket or a wiki;
    `at` places it, at its own size, at (x, y) inside another SVG.
    Classes (rl-*) let the page's stylesheet restyle it, e.g. for a dark theme.
    """
    out = _svg_head(scene, id_prefix=id_prefix, standalone=standalone, at=at)
    out += _grid_svg(scene)
    out += _axis_text_svg(scene)
    out += _roofs_svg(scene)
    out += _bandwidth_svg(scene)
    out += _ridges_svg(scene)
    out += _trails_svg(scene)  # trails, then dots on top
    out += _dots_svg(scene)
    out += _dot_labels_svg(scene)
    out.append("</svg>")
    return "".join(out)


def _svg_head(scene: Scene, *, id_prefix: str, standalone: bool, at: tuple[float, float] | None) -> list[str]:
    """The <svg> start tag, <title> and <desc> (and a white background when standalone)."""
    spec = scene.spec
    ident = "".join(c if c.isalnum() or c in "-_" else "-" for c in f"{id_prefix}-{spec.key}")
    title_id, desc_id = f"{ident}-title", f"{ident}-desc"
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
    elif at is not None:
        attrs = (
            f'x="{_f(at[0])}" y="{_f(at[1])}" width="{_f(scene.width)}" height="{_f(scene.height)}" ' + attrs
        )
    out = [
        f"<svg {attrs}>",
        f'<title id="{title_id}">Roofline: {_esc(spec.title)}</title>',
        f'<desc id="{desc_id}">{_esc(describe(scene))}</desc>',
    ]
    if standalone:
        out.append(f'<rect width="{_f(scene.width)}" height="{_f(scene.height)}" fill="#ffffff"/>')
    return out


def _grid_svg(scene: Scene) -> list[str]:
    """The grid lines at each tick."""
    axes = scene.axes
    left, top = axes.left, axes.top
    right, bottom = axes.left + axes.width, axes.top + axes.height
    out = ['<g class="rl-grid" stroke="' + GRID + '" stroke-width="1">']
    for tick in scene.x_ticks:
        out.append(
            _line("rl-tick-x", f'data-value="{tick.value:g}"', tick.position, top, tick.position, bottom)
        )
    for tick in scene.y_ticks:
        out.append(
            _line("rl-tick-y", f'data-value="{tick.value:g}"', left, tick.position, right, tick.position)
        )
    out.append("</g>")
    return out


def _axis_text_svg(scene: Scene) -> list[str]:
    """The tick labels, the axis titles and the plot's frame."""
    axes = scene.axes
    left, top = axes.left, axes.top
    bottom = axes.top + axes.height
    out = [f'<g class="rl-axis-text" fill="{MUTED}">']
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
    return out


def _roofs_svg(scene: Scene) -> list[str]:
    """Each compute roof's line (solid when in use, dashed otherwise) and its label."""
    right = scene.axes.left + scene.axes.width
    out: list[str] = []
    for line in scene.roof_lines:
        s = line.segment
        roof = line.roof
        style = (
            f'stroke="{INK}" stroke-width="2.5"'
            if roof.in_use
            else f'stroke="{MUTED}" stroke-width="1" stroke-dasharray="5 3"'
        )
        kind = "rl-roof rl-roof-used" if roof.in_use else "rl-roof"
        out.append(_line(kind, f'data-flops="{roof.flop_per_second:g}" {style}', s.x1, s.y1, s.x2, s.y2))
        weight = ' font-weight="600"' if roof.in_use else ""
        out.append(
            f'<text class="rl-roof-label" x="{_f(right + 6)}" y="{_f(line.label_y + 4)}" '
            f'fill="{INK if roof.in_use else MUTED}"{weight}>'
            f"{_esc(roof.label)} {_esc(si(roof.flop_per_second))}</text>"
        )
    return out


def _bandwidth_svg(scene: Scene) -> list[str]:
    """The bandwidth roof and its slanted label, when it shows on the chart."""
    if scene.bandwidth_roof is None:
        return []
    spec = scene.spec
    s = scene.bandwidth_roof
    bx, by, angle = scene.bandwidth_label
    attrs = f'data-bandwidth="{spec.bandwidth_bytes_per_second:g}" stroke="{INK}" stroke-width="2.5"'
    return [
        _line("rl-roof rl-roof-bandwidth", attrs, s.x1, s.y1, s.x2, s.y2),
        f'<text class="rl-roof-label" fill="{INK}" x="{_f(bx)}" y="{_f(by)}" '
        f'transform="rotate({_f(angle)} {_f(bx)} {_f(by)})">'
        f"{_esc(si(spec.bandwidth_bytes_per_second, 'B/s'))}</text>",
    ]


def _ridges_svg(scene: Scene) -> list[str]:
    """Each ridge's dotted drop to the x axis and its label."""
    bottom = scene.axes.top + scene.axes.height
    out: list[str] = []
    for ridge in scene.ridges:
        attrs = (
            f'data-intensity="{ridge.intensity:g}" stroke="{MUTED}" stroke-width="1" stroke-dasharray="2 3"'
        )
        out.append(_line("rl-ridge", attrs, ridge.x, ridge.y, ridge.x, bottom))
        out.append(
            f'<text class="rl-ridge-label" fill="{INK}" x="{_f(ridge.x + 4)}" y="{_f(bottom - 6)}">'
            f"{_esc(ridge.text)}</text>"
        )
    return out


def _trails_svg(scene: Scene) -> list[str]:
    """A polyline through each dot's older positions to where it is now."""
    out: list[str] = []
    for dot in scene.dots:
        if len(dot.trail) >= 1:
            points = " ".join(f"{_f(x)},{_f(y)}" for x, y in (*dot.trail, (dot.x, dot.y)))
            out.append(
                f'<polyline class="rl-trail" data-gpu="{_esc(dot.point.key)}" fill="none" '
                f'stroke="{regime_colour(dot.point.regime)}" stroke-opacity="0.45" stroke-width="1.5" '
                f'points="{points}"/>'
            )
    return out


def _dots_svg(scene: Scene) -> list[str]:
    """Each GPU's marker with a tooltip, its numbers in data-* attributes."""
    out: list[str] = []
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
    return out


def _dot_labels_svg(scene: Scene) -> list[str]:
    """The GPU keys beside each cluster of dots."""
    return [
        f'<text class="rl-dot-label" fill="{INK}" x="{_f(label.x)}" y="{_f(label.y)}" '
        f'text-anchor="{label.anchor}">{_esc(label.text)}</text>'
        for label in scene.dot_labels
    ]


LEGEND_HEIGHT = 26.0
CAPTION_HEIGHT = 22.0
HEADING_HEIGHT = 22.0


def legend_svg(regimes: Sequence[str], y: float, width: float) -> str:
    """A row of each regime's marker and word (the chart's own marks), for a standalone SVG."""
    out = [f'<g class="rl-legend" font-size="12" fill="{INK}">']
    x = 14.0
    for regime in regimes:
        word = regime_word(regime)
        if x + 24 + LABEL_CHAR_WIDTH * len(word) > width:
            break
        out.append(marker_svg(regime_shape(regime), x + MARK_RADIUS, y, regime_colour(regime)))
        out.append(f'<text x="{_f(x + 2 * MARK_RADIUS + 5)}" y="{_f(y + 4)}">{_esc(word)}</text>')
        x += 2 * MARK_RADIUS + 5 + LABEL_CHAR_WIDTH * len(word) + 18
    out.append("</g>")
    return "".join(out)


def render_svg_document(
    scenes: Sequence[Scene], *, note: str = "", caption: str = "", legend: Sequence[str] = ()
) -> str:
    """A standalone SVG of one or more charts stacked, for GET /roofline.svg: a `caption` line on
    top (node and time), each chart under its card's title, and a `legend` of the regimes' marks
    at the bottom, so it still says what it shows pasted into a ticket. Without caption and
    legend one chart is the bare chart."""
    if not scenes:
        return _empty_document(note or "no GPU with a known card on this node yet", caption)
    if len(scenes) == 1 and not caption and not legend:
        return render_svg(scenes[0], standalone=True)
    headed = bool(caption) or len(scenes) > 1
    width = max(s.width for s in scenes)
    total = (
        (CAPTION_HEIGHT if caption else 0.0)
        + sum(s.height + (HEADING_HEIGHT if headed else 0.0) for s in scenes)
        + (LEGEND_HEIGHT if legend else 0.0)
    )
    titles = "; ".join(s.spec.title for s in scenes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(total)}" '
        f'viewBox="0 0 {_f(width)} {_f(total)}" role="img" font-family="system-ui, sans-serif" '
        'font-size="13">'
        f"<title>{_esc('Roofline: ' + titles + (' · ' + caption if caption else ''))}</title>"
        f'<rect width="{_f(width)}" height="{_f(total)}" fill="#ffffff"/>'
    ]
    y = 0.0
    if caption:
        parts.append(f'<text class="rl-caption" x="8" y="{_f(y + 16)}" fill="{MUTED}">{_esc(caption)}</text>')
        y += CAPTION_HEIGHT
    y = _stack_charts(parts, scenes, y, headed=headed)
    if legend:
        parts.append(legend_svg(legend, y + LEGEND_HEIGHT / 2, width))
    parts.append("</svg>")
    return "".join(parts)


def _empty_document(text: str, caption: str) -> str:
    """A standalone SVG saying there is no chart to draw (and the caption, when there is one)."""
    lines = [t for t in (caption, text) if t]
    height = 24 + 22 * len(lines)
    texts = "".join(
        f'<text x="16" y="{34 + 22 * i}" fill="{INK}">{_esc(line)}</text>' for i, line in enumerate(lines)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="640" height="{height}" '
        f'viewBox="0 0 640 {height}" role="img" font-family="system-ui, sans-serif" font-size="13">'
        f'<title>Roofline</title><rect width="640" height="{height}" fill="#ffffff"/>{texts}</svg>'
    )


def _stack_charts(parts: list[str], scenes: Sequence[Scene], y: float, *, headed: bool) -> float:
    """Append each chart from `y` down (under its title when `headed`); the y below the last."""
    for scene in scenes:
        if headed:
            parts.append(
                f'<text class="rl-heading" x="8" y="{_f(y + 16)}" fill="{INK}" font-weight="600">'
                f"{_esc(scene.spec.title)}</text>"
            )
            y += HEADING_HEIGHT
        parts.append(render_svg(scene, id_prefix=f"rl{int(y)}", at=(0.0, y)))
        y += scene.height
    return y
