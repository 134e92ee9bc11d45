"""`ridgeline top`'s interactive view, on Textual (why Textual: docs/live-view.md).

Polling runs on a worker thread, one request per node in parallel, and the results are applied
on the app's thread; a node that stops answering keeps its last rows, marked stale.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Footer, Static

from exporter.top.client import NodeClient, NodeReading, fetch_all
from exporter.top.sort_keys import HIGH_FIRST, SORT_KEYS
from exporter.top.table import COLUMNS, RIGHT_ALIGNED, Row, cell_text, rows_of, sort_rows
from exporter.view.chart_text import render_text
from exporter.view.node_view import charts_from_verdicts
from exporter.view.units import regime_colour, short_lever

POD_WIDTH = 18
"""The most characters of a pod name in the table (the rest is cut with "…")."""
MIN_POD_WIDTH = 10
MIN_CHART_ROWS = 6


def regime_style(regime: str | None) -> str:
    """The regime's colour from exporter.view.units.REGIME_LOOKS, bold so it stands out."""
    return f"bold {regime_colour(regime)}"


class TopApp(App[None]):
    """The table of every GPU on every node, a status line per node, and the text roofline of
    the highlighted GPU's node."""

    TITLE = "ridgeline top"
    CSS = """
    #status { height: auto; padding: 0 1; }
    #gpus { height: auto; max-height: 70%; min-height: 4; }
    #chart { height: auto; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("s", "next_sort", "Sort by next column"),
        Binding("r", "reverse", "Reverse"),
        Binding("p", "pause", "Pause"),
        Binding("p", "resume", "Resume"),
        Binding("g", "refresh_now", "Refresh now"),
    ]

    def __init__(
        self,
        clients: Sequence[NodeClient],
        *,
        interval: float = 2.0,
        sort: str = "node",
        chart_rows: int = 14,
    ) -> None:
        super().__init__()
        self.clients = list(clients)
        self.interval = interval
        self.sort_key = sort
        self.reverse = False
        self.paused = False
        self.chart_rows = chart_rows
        self.readings: list[NodeReading] = []
        self.last_answers: dict[str, NodeReading] = {}
        self.down_since: dict[str, float] = {}
        self.rows: list[Row] = []
        self.pod_width = POD_WIDTH
        self.compact = False
        """Cells cut to fit a narrow terminal (`_columns`)."""
        self.polls = 0
        """Polls applied so far (tests wait on it)."""

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("connecting…", id="status")
            yield DataTable(id="gpus", zebra_stripes=True, cursor_type="row")
            yield Static("", id="chart")
        yield Footer()

    def on_mount(self) -> None:
        self._set_columns(self.query_one("#gpus", DataTable))
        self.poll()
        self.set_interval(self.interval, self.poll)

    def _columns(self) -> list[tuple[str, str]]:
        """The columns shown: NODE only for several nodes, CLOCK only while a GPU runs at a reduced
        clock; on a narrow terminal CARD goes when
        every GPU has the same one (the chart's title names it), then LEVER (the highlighted
        GPU's lever is under the chart), then the cells go compact (`compact`: the regime without
        "-bound", the clock's cause without its percentage, no "own": the highlighted GPU's are
        under the chart), so the numbers are never cut off. Sets `pod_width` and `compact`,
        which the cells' widths depend on."""
        many = len(self.clients) > 1
        slowed = any(r.clock_ratio is not None for r in self.rows)
        columns = [(t, n) for t, n in COLUMNS if (many or n != "node") and (slowed or n != "clock")]
        room = (self.size.width or 200) - 4  # the view's and the table's scrollbars
        if self._width(columns) > room and len({r.card for r in self.rows}) <= 1:
            columns = [c for c in columns if c[1] != "card"]
        if self._width(columns) > room:
            columns = [c for c in columns if c[1] != "lever"]
        self.compact = False
        if self._width(columns) > room:
            self.compact = True
        self.pod_width = POD_WIDTH  # measured with whole pod names, then cut to what is left
        self.pod_width = max(MIN_POD_WIDTH, POD_WIDTH - max(0, self._width(columns) - room))
        return columns

    def _width(self, columns: Sequence[tuple[str, str]]) -> int:
        """Terminal columns the table needs for these columns and the current rows."""
        total = 0
        for title, name in columns:
            cells = [len(self._cell_text(row, name)) for row in self.rows]
            total += max([len(title + self._sort_arrow(name)), *cells]) + 2  # each cell's padding
        return total

    def _set_columns(self, table: DataTable[Any]) -> None:
        """The columns `_columns` chooses, the sorted one's title marked: rebuilt when either changes."""
        wanted = [(title + self._sort_arrow(name), name) for title, name in self._columns()]
        if [(str(c.label), str(c.key.value)) for c in table.columns.values()] != wanted:
            table.clear(columns=True)
            for title, name in wanted:
                table.add_column(title, key=name)

    # -- polling -------------------------------------------------------------------------------

    def poll(self) -> None:
        if not self.paused:
            self.run_worker(self._fetch, thread=True, exclusive=True, group="poll", exit_on_error=False)

    def _fetch(self) -> None:
        readings = fetch_all(self.clients)
        if self.is_running:
            with contextlib.suppress(RuntimeError):  # the app closed while we were fetching
                self.call_from_thread(self.apply, readings)

    def apply(self, readings: list[NodeReading]) -> None:
        now = time.time()
        for reading in readings:
            if reading.answered:
                self.last_answers[reading.name] = reading
                self.down_since.pop(reading.name, None)
            else:
                self.down_since.setdefault(reading.name, now)
        self.readings = readings
        self.rows = rows_of(readings, self.last_answers)
        self.polls += 1
        self._show()

    # -- drawing -------------------------------------------------------------------------------

    def status_text(self) -> Text:
        text = Text()
        for i, reading in enumerate(self.readings):
            if i:
                text.append("\n")
            if reading.answered:
                count = len(reading.verdicts)
                state = "ready" if reading.ready else f"not ready: {reading.reason}"
                text.append("● ", style="green")
                text.append(f"{reading.name}  {count} GPU{'s' if count != 1 else ''}, {state}")
            else:
                since = time.strftime(
                    "%H:%M:%S", time.localtime(self.down_since.get(reading.name, time.time()))
                )
                text.append("✕ ", style="bold red")
                said = (
                    f"answered {reading.error} since {since}"
                    if reading.http_status is not None
                    else f"not answering since {since}: {reading.error}"
                )
                text.append(f"{reading.name}  {said}", style="red")
        sort = SORT_KEYS.get(self.sort_key, self.sort_key)
        text.append(f"\nsorted by {sort}{' (reversed)' if self.reverse else ''}", style="dim")
        if self.paused:
            text.append("  · paused", style="bold")
        return text

    def _mounted(self) -> bool:
        """False while the app is starting up or closing: nothing to draw on."""
        return self.is_running and bool(self.screen.query("#gpus"))

    def _show(self) -> None:
        if not self._mounted():
            return
        self.query_one("#status", Static).update(self.status_text())
        table = self.query_one("#gpus", DataTable)
        current = None
        if table.row_count and table.cursor_row is not None:
            try:
                current = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
            except Exception:  # the table was empty or shrank
                current = None
        table.clear()
        self._set_columns(table)
        ordered = sort_rows(self.rows, self.sort_key, self.reverse)
        for row in ordered:
            table.add_row(*self._cells(row), key=f"{row.node}|{row.key}")
        if current is not None:
            with contextlib.suppress(Exception):  # that GPU is gone: the cursor stays put
                table.move_cursor(row=table.get_row_index(current))
        self._show_chart()

    def _sort_arrow(self, name: str) -> str:
        """ " ▲" or " ▼" for the column the rows are sorted by (which way its values run down the
        table), else nothing."""
        sorted_by = "gpu" if self.sort_key == "node" and len(self.clients) == 1 else self.sort_key
        key = "gpu" if name == "key" else name
        if key != sorted_by:
            return ""
        return " ▼" if (key in HIGH_FIRST) != self.reverse else " ▲"

    def _cells(self, row: Row) -> list[Any]:
        cells: list[Any] = []
        for _, name in self._columns():
            text = self._cell_text(row, name)
            style = regime_style(row.regime) if name == "regime" else ("dim" if row.stale else "")
            cells.append(Text(text, style=style, justify="right" if name in RIGHT_ALIGNED else "left"))
        return cells

    def _cell_text(self, row: Row, name: str) -> str:
        """Narrower than `--once`'s cells, so ten columns fit 80 terminal columns: the lever's
        gist (the whole of it is under the chart for the highlighted GPU), a long pod name cut,
        and "own" where the ridge is the GPU's own, not the card's (why: under the chart too)."""
        text = cell_text(row, name)
        if name == "lever":
            return short_lever(row.lever)
        if name == "pod" and len(text) > self.pod_width:
            return text[: self.pod_width - 1] + "…"
        if self.compact and name == "regime":
            return text.replace("-bound", "")
        if self.compact and name == "clock" and row.clock_ratio is not None:
            return row.clock_cause
        if name == "intensity" and row.ridge_note and row.intensity is not None and not self.compact:
            return text + " own"
        return text

    def _highlighted_row(self, node: str | None, gpu: str | None) -> Row | None:
        return next((r for r in self.rows if r.node == node and r.key == gpu), None)

    def _chart_rows(self, extra_lines: int) -> int:
        """The chart's height in the room the status, the table and the footer leave, so its
        legend and notes are not cut at 24 lines (at least MIN_CHART_ROWS; the view scrolls)."""
        height = self.size.height or 50
        table = min(len(self.rows) + 2, int(height * 0.7))
        status = len(self.readings) + 1
        room = height - status - table - 1 - extra_lines
        return max(MIN_CHART_ROWS, min(self.chart_rows, room))

    def highlighted(self) -> tuple[str | None, str | None]:
        """(node, GPU key) of the row under the cursor; the first node when the table is empty."""
        table = self.query_one("#gpus", DataTable)
        if not table.row_count:
            return (self.readings[0].name if self.readings else None), None
        try:
            key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        except Exception:
            return None, None
        node, _, gpu = (key or "").partition("|")
        return node or None, gpu or None

    def chart_text(self) -> Text:
        """The highlighted node's rooflines, its dots in their regime's colour, the highlighted
        GPU's in reverse video."""
        node, gpu = self.highlighted()
        reading = self.last_answers.get(node) if node else None
        if reading is None:
            return Text("")
        specs, unplaced = charts_from_verdicts(list(reading.verdicts))
        width = max(40, min(self.size.width - 2, 110))
        notes = self._notes(self._highlighted_row(node, gpu))
        wrapped = sum(-(-len(line) // width) for line in notes)
        rows = self._chart_rows(extra_lines=len(specs) * 3 + len(unplaced) + wrapped)
        out = Text()
        for spec in specs:
            chart = render_text(spec, columns=width, rows=rows)
            out.append(f"{reading.name} · {spec.title}\n", style="bold")
            marks = {(r, c): (regime, keys) for r, c, regime, keys in chart.marks}
            for row_index, line in enumerate(chart.lines):
                for col, char in enumerate(line):
                    mark = marks.get((row_index, col))
                    if mark is None:
                        out.append(char)
                        continue
                    regime, keys = mark
                    out.append(char, style=regime_style(regime) + (" reverse" if gpu in keys else ""))
                out.append("\n")
            if chart.legend():
                out.append(chart.legend() + "\n", style="dim")
            if chart.off_chart:
                off = ", ".join(f"GPU {p.key} ({why})" for p, why in chart.off_chart)
                out.append(f"not on the chart: {off}\n", style="dim")
        for item in unplaced:
            out.append(f"GPU {item.key}: {item.reason}\n", style="dim")
        for line in notes:
            out.append(line + "\n")
        return out

    @staticmethod
    def _notes(row: Row | None) -> list[str]:
        """The highlighted GPU's whole lever, its reduced clock's sentence and, where its ridge is
        its own, why."""
        if row is None:
            return []
        notes = [f"GPU {row.key}: {row.lever}"]
        if row.clock_note:
            notes.append(f"GPU {row.key}: {row.clock_note}")
        if row.ridge_note:
            notes.append(f"GPU {row.key}: {row.ridge_note}")
        return notes

    def _show_chart(self) -> None:
        if self._mounted():
            self.query_one("#chart", Static).update(self.chart_text())

    def on_resize(self, event: events.Resize) -> None:
        self._show()  # the columns and the chart follow the terminal's size

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_chart()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        name = str(event.column_key.value)
        wanted = "gpu" if name == "key" else name
        if wanted in SORT_KEYS:
            self.reverse = (not self.reverse) if wanted == self.sort_key else False
            self.sort_key = wanted
            self._show()

    # -- actions -------------------------------------------------------------------------------

    def sort_cycle(self) -> list[str]:
        """The keys `s` steps through: on one node "node" orders as "gpu" does, so it is left out
        (the first `s` would otherwise change nothing)."""
        return [k for k in SORT_KEYS if len(self.clients) > 1 or k != "node"]

    def action_next_sort(self) -> None:
        keys = self.sort_cycle()
        current = self.sort_key if self.sort_key in keys else "gpu"
        self.sort_key = keys[(keys.index(current) + 1) % len(keys)] if current in keys else keys[0]
        self.reverse = False
        self._show()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self._show()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`p` is "Pause" while polling and "Resume" while paused: the footer shows the one it does."""
        if action == "pause":
            return not self.paused
        if action == "resume":
            return self.paused
        return True

    def action_pause(self) -> None:
        self._set_paused(True)

    def action_resume(self) -> None:
        self._set_paused(False)

    def _set_paused(self, paused: bool) -> None:
        self.paused = paused
        self.refresh_bindings()
        if self._mounted():
            self.query_one("#status", Static).update(self.status_text())

    def action_refresh_now(self) -> None:
        self.run_worker(self._fetch, thread=True, exclusive=True, group="poll", exit_on_error=False)
