"""The roofline in characters, for `ridgeline top`: the same axes as the SVG chart.

Roofs are ─ (━ where a GPU is measured against it), the bandwidth roof /, the ridge ┆, each GPU
its index (a letter A, B, … where several share a cell, listed by `TextChart.legend`). `marks` say where each
GPU's character is, so the terminal view can colour it.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.view.roofline_chart import (
    ChartPoint,
    ChartSpec,
    LogAxes,
    decade_ranges,
    decade_text,
    place_points,
)
from exporter.view.units import si

SHARED_MARKS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The characters of cells several GPUs share, one each, so the legend tells them apart (digits
are GPU indexes); `*` once they run out."""


@dataclass(frozen=True, slots=True)
class TextChart:
    """A roofline drawn in characters; `marks` say where each GPU's character is, to colour it."""

    lines: tuple[str, ...]
    marks: tuple[tuple[int, int, str | None, tuple[str, ...]], ...]
    """(row, column, regime, GPU keys) of each dot's cell; several keys where dots share it."""
    off_chart: tuple[tuple[ChartPoint, str], ...]

    def legend(self) -> str:
        """What each shared cell's letter stands for: "A GPU 0, 1, 2, 3; B GPU 4, 5" (empty when
        no cell is shared)."""
        shared = [(char, keys) for char, keys in self.shared()]
        return "; ".join(f"{char} GPU " + ", ".join(keys) for char, keys in shared)

    def shared(self) -> list[tuple[str, tuple[str, ...]]]:
        """(letter, GPU keys) of every cell several GPUs share."""
        return [(self.lines[row][col], keys) for row, col, _, keys in self.marks if len(keys) > 1]


def render_text(spec: ChartSpec, columns: int = 72, rows: int = 16) -> TextChart:
    """The same chart in a `columns` x `rows` grid of characters, for `ridgeline top`.

    Roofs are ─ (━ when a GPU is measured against it), the bandwidth roof /, the ridge ┆, a GPU
    its index (a letter where several share a cell). The axes are the SVG chart's (decade_ranges).
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
    placed, off = place_points(spec.points, axes)
    for point, (intensity, flop_per_second) in placed:
        where = cell(axes.x(intensity), axes.y(flop_per_second))
        char = point.key if len(point.key) == 1 else "•"
        if where in marks:
            _, regime, keys = marks[where]
            marks[where] = ("", regime, (*keys, point.key))
        else:
            marks[where] = (char, point.regime, (point.key,))
    shared = iter(SHARED_MARKS)
    for where, (char, regime, keys) in marks.items():  # a letter per shared cell, in GPU order
        if not char:
            marks[where] = (next(shared, "*"), regime, keys)
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
