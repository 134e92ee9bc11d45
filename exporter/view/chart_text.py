"""The roofline in characters, for `ridgeline top`: the same axes as the SVG chart.

Roofs are ─ (━ where a GPU is measured against it), the bandwidth roof /, the ridge ┆, each GPU
its index (a letter A, B, … where several share a cell, listed by `TextChart.legend`). `marks` say where each
GPU's character is, so the terminal view can colour it.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    grid = _Grid.sized(spec, columns, rows)
    _draw_roofs(grid, spec)
    _draw_bandwidth(grid, spec)
    _draw_ridges(grid, spec)
    _draw_y_labels(grid)
    _draw_x_axis(grid)
    placed, off = place_points(spec.points, grid.axes)
    marks = _marks(placed, grid.axes)
    for (row, col), (char, _, _) in marks.items():
        grid.cells[row][col] = char
    lines = tuple("".join(row).rstrip() for row in grid.cells)
    return TextChart(
        lines=lines,
        marks=tuple((row, col, regime, keys) for (row, col), (_, regime, keys) in marks.items()),
        off_chart=tuple(off),
    )


_GUTTER_LEFT, _GUTTER_RIGHT = 6, 14


@dataclass(slots=True)
class _Grid:
    """The character cells being drawn, with the plot's axes and edges."""

    cells: list[list[str]]
    axes: LogAxes
    plot_rows: int
    right: int
    """The plot's last column."""

    @classmethod
    def sized(cls, spec: ChartSpec, columns: int, rows: int) -> _Grid:
        plot_columns = max(10, columns - _GUTTER_LEFT - _GUTTER_RIGHT)
        plot_rows = max(4, rows - 2)
        x_decades, y_decades = decade_ranges(spec)
        axes = LogAxes(
            x_decades=x_decades,
            y_decades=y_decades,
            left=float(_GUTTER_LEFT),
            top=0.0,
            width=float(plot_columns - 1),
            height=float(plot_rows - 1),
        )
        cells = [[" "] * (_GUTTER_LEFT + plot_columns + _GUTTER_RIGHT) for _ in range(plot_rows + 2)]
        return cls(cells=cells, axes=axes, plot_rows=plot_rows, right=_GUTTER_LEFT + plot_columns - 1)

    def put(self, row: int, col: int, char: str) -> None:
        """Set a cell inside the plot area; outside it, nothing."""
        if 0 <= row < self.plot_rows and _GUTTER_LEFT <= col <= self.right:
            self.cells[row][col] = char

    def y_range(self) -> tuple[float, float]:
        y_decades = self.axes.y_decades
        return 10.0 ** y_decades[0], 10.0 ** y_decades[1]


def _cell(x: float, y: float) -> tuple[int, int]:
    return round(y), round(x)


def _draw_roofs(grid: _Grid, spec: ChartSpec) -> None:
    """Each compute roof on the chart as a row of ─ (━ when in use), labelled in the right gutter."""
    axes = grid.axes
    bandwidth = spec.bandwidth_bytes_per_second
    y_lo, y_hi = grid.y_range()
    for roof in sorted(spec.roofs, key=lambda r: r.in_use):
        if not y_lo <= roof.flop_per_second <= y_hi:
            continue
        row = round(axes.y(roof.flop_per_second))
        start = max(
            _GUTTER_LEFT, round(axes.x(max(roof.flop_per_second / bandwidth, 10.0 ** axes.x_decades[0])))
        )
        for col in range(start, grid.right + 1):
            grid.put(row, col, "━" if roof.in_use else "─")
        label = f"{roof.label} {si(roof.flop_per_second)}"[: _GUTTER_RIGHT - 1]
        _write(grid.cells, row, grid.right + 2, label, grid.plot_rows)


def _draw_bandwidth(grid: _Grid, spec: ChartSpec) -> None:
    """The bandwidth roof as / in every column up to the highest compute roof."""
    axes = grid.axes
    bandwidth = spec.bandwidth_bytes_per_second
    y_lo, y_hi = grid.y_range()
    top_peak = max((r.flop_per_second for r in spec.roofs), default=y_hi)
    for col in range(_GUTTER_LEFT, grid.right + 1):
        intensity = axes.intensity_at(col)
        flops = intensity * bandwidth
        if flops > top_peak * 1.0000001 or not y_lo <= flops <= y_hi:
            continue
        row = round(axes.y(flops))
        grid.put(row, col, "/")


def _draw_ridges(grid: _Grid, spec: ChartSpec) -> None:
    """A ┆ column down from each in-use roof's ridge, through blank cells only."""
    axes = grid.axes
    for roof in spec.roofs:
        ridge = roof.flop_per_second / spec.bandwidth_bytes_per_second
        if roof.in_use and axes.contains(ridge, roof.flop_per_second):
            row, col = _cell(axes.x(ridge), axes.y(roof.flop_per_second))
            for r in range(row + 1, grid.plot_rows):
                if grid.cells[r][col] == " ":
                    grid.cells[r][col] = "┆"


def _draw_y_labels(grid: _Grid) -> None:
    """Each y decade's value, right-aligned in the left gutter."""
    y_decades = grid.axes.y_decades
    for d in range(y_decades[0], y_decades[1] + 1):
        row = round(grid.axes.y(10.0**d))
        _write(grid.cells, row, 0, si(10.0**d).rjust(_GUTTER_LEFT - 1)[: _GUTTER_LEFT - 1], grid.plot_rows)


def _draw_x_axis(grid: _Grid) -> None:
    """The x axis line, a ┴ and a label at each decade, and the unit."""
    axes, right = grid.axes, grid.right
    axis_row = grid.plot_rows
    for col in range(_GUTTER_LEFT, right + 1):
        grid.cells[axis_row][col] = "─"
    for d in range(axes.x_decades[0], axes.x_decades[1] + 1):
        col = round(axes.x(10.0**d))
        grid.cells[axis_row][col] = "┴"
        text = decade_text(d)
        start = min(max(_GUTTER_LEFT, col - len(text) // 2), right - len(text) + 1)
        _write(grid.cells, axis_row + 1, start, text, grid.plot_rows + 2)
    _write(grid.cells, axis_row + 1, right + 2, "FLOP/byte", grid.plot_rows + 2)


_Marks = dict[tuple[int, int], tuple[str, str | None, tuple[str, ...]]]


def _marks(placed: Sequence[tuple[ChartPoint, tuple[float, float]]], axes: LogAxes) -> _Marks:
    """(row, col) -> (char, regime, GPU keys) of each dot's cell: a GPU's own index, or a letter
    (SHARED_MARKS, in GPU order) for a cell several GPUs share."""
    marks: _Marks = {}
    for point, (intensity, flop_per_second) in placed:
        where = _cell(axes.x(intensity), axes.y(flop_per_second))
        char = point.key if len(point.key) == 1 else "•"
        if where in marks:
            _, regime, keys = marks[where]
            marks[where] = ("", regime, (*keys, point.key))
        else:
            marks[where] = (char, point.regime, (point.key,))
    shared = iter(SHARED_MARKS)
    for where, (char, regime, keys) in marks.items():
        if not char:
            marks[where] = (next(shared, "*"), regime, keys)
    return marks


def _write(grid: list[list[str]], row: int, col: int, text: str, rows: int) -> None:
    if not 0 <= row < rows:
        return
    for i, char in enumerate(text):
        if 0 <= col + i < len(grid[row]):
            grid[row][col + i] = char
