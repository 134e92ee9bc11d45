"""The rows `ridgeline top` shows, how they sort, and the plain table `--once` prints.

One row per GPU per node from its /classify verdict. The interactive view (exporter/top/tui.py)
and `--once` share the rows, the sort orders and the cell texts; `--once` adds colour only when
its stdout is a terminal (and NO_COLOR is unset), so a pipe or a file gets plain text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exporter.top.sort_keys import HIGH_FIRST
from exporter.verdict import LiveVerdict
from exporter.view.node_view import point_key
from exporter.view.ridge import own_ridge, ridge_note
from exporter.view.units import (
    REGIME_ORDER,
    intensity_text,
    percent,
    regime_glyph,
    regime_look,
    regime_word,
)

if TYPE_CHECKING:  # `ridgeline --help` builds top's parser from SORT_KEYS: keep this import light
    from exporter.top.client import NodeReading


def ansi_colour(regime: str | None) -> str:
    """The regime's terminal colour (exporter.view.units.REGIME_LOOKS) as an escape sequence."""
    return f"\x1b[{regime_look(regime).ansi}m"


ANSI_RESET = "\x1b[0m"


@dataclass(frozen=True, slots=True)
class Row:
    node: str
    key: str
    gpu: int
    instance: int
    card: str
    pod: str
    regime: str | None
    dram: float | None
    tensor: float | None
    flop: float | None
    intensity: float | None
    ridge: float | None
    efficiency: float | None
    lever: str
    ridge_note: str | None = None
    """Why the ridge is this GPU's own, not the card's (exporter.view.ridge); None when the same."""
    stale: bool = False
    """The node did not answer this poll: the row is its last answer."""
    clock_ratio: float | None = None
    """The binding pipe's clock ratio while GET /classify's reduced_clock marks it; else None."""
    clock_cause: str = ""
    """What holds the clock down, in words ("power cap", "cause not reported"); "" at full clock."""
    clock_note: str | None = None
    """The marker's whole sentence: the clock, the cause and what the full clock gives back."""

    @property
    def position(self) -> float | None:
        """Intensity over the ridge: below 1 is the memory side."""
        if self.intensity is None or not self.ridge:
            return None
        return self.intensity / self.ridge

    @property
    def regime_text(self) -> str:
        return f"{regime_glyph(self.regime)} {regime_word(self.regime)}"

    @property
    def clock_text(self) -> str:
        """The clock column: "65% power cap" at a reduced clock, "–" at full clock or unknown."""
        if self.clock_ratio is None:
            return "–"
        return f"{percent(self.clock_ratio)} {self.clock_cause}"

    @property
    def intensity_text(self) -> str:
        if self.intensity is None:
            return "–"
        return f"{intensity_text(self.intensity)}/{intensity_text(self.ridge)}"


def row_from_verdict(node: str, verdict: LiveVerdict, stale: bool = False) -> Row:
    """One GPU's row (a decoded verdict: every number finite or None, exporter/verdict.py)."""
    attribution = verdict.attribution
    pod = attribution.pod if attribution is not None else None
    gpu = verdict.gpu
    instance = verdict.gpu_instance
    marker = verdict.reduced_clock
    return Row(
        node=node,
        key=point_key(gpu, instance),
        gpu=gpu if gpu is not None else -1,
        instance=instance if instance is not None else -1,
        card=verdict.card or "–",
        pod=pod or "–",
        regime=verdict.regime,
        dram=verdict.dram_active,
        tensor=verdict.tensor_active,
        flop=verdict.flop_utilization,
        intensity=verdict.intensity_flop_per_byte,
        ridge=own_ridge(verdict),
        ridge_note=ridge_note(verdict),
        efficiency=verdict.roofline_efficiency,
        lever=verdict.lever or verdict.no_verdict_reason or "–",
        stale=stale,
        clock_ratio=marker.clock_ratio if marker is not None else None,
        clock_cause=(marker.cause_text or "") if marker is not None else "",
        clock_note=marker.note if marker is not None else None,
    )


def rows_of(readings: Sequence[NodeReading], previous: Mapping[str, NodeReading] | None = None) -> list[Row]:
    """Every GPU of every node; a node that did not answer shows its last answer, marked stale."""
    rows: list[Row] = []
    for reading in readings:
        source, stale = reading, False
        if not reading.answered and previous is not None and reading.name in previous:
            source, stale = previous[reading.name], True
        rows.extend(row_from_verdict(reading.name, v, stale) for v in source.verdicts)
    return rows


def sort_rows(rows: Sequence[Row], key: str, reverse: bool = False) -> list[Row]:
    """Rows in `key` order (SORT_KEYS); missing values go last whichever the direction."""

    def natural(row: Row) -> tuple[Any, ...]:
        return (row.node, row.gpu, row.instance)

    numeric: dict[str, tuple[str, bool]] = {
        "dram": ("dram", "dram" in HIGH_FIRST),
        "tensor": ("tensor", "tensor" in HIGH_FIRST),
        "flop": ("flop", "flop" in HIGH_FIRST),
        "intensity": ("position", "intensity" in HIGH_FIRST),
        "efficiency": ("efficiency", "efficiency" in HIGH_FIRST),
    }
    if key == "gpu":
        ordered = sorted(rows, key=lambda r: (r.gpu, r.instance, r.node), reverse=reverse)
    elif key == "regime":
        ordered = sorted(rows, key=lambda r: (_regime_rank(r.regime), *natural(r)), reverse=reverse)
    elif key == "pod":
        ordered = sorted(rows, key=lambda r: (r.pod, *natural(r)), reverse=reverse)
    elif key in numeric:
        attribute, high_first = numeric[key]
        present = [r for r in rows if getattr(r, attribute) is not None]
        missing = [r for r in rows if getattr(r, attribute) is None]
        ordered = sorted(
            present, key=lambda r: (getattr(r, attribute), *natural(r)), reverse=high_first != reverse
        )
        ordered += sorted(missing, key=natural)
    else:
        ordered = sorted(rows, key=natural, reverse=reverse)
    return ordered


def _regime_rank(regime: str | None) -> int:
    return REGIME_ORDER.index(regime) if regime in REGIME_ORDER else len(REGIME_ORDER)


COLUMNS: tuple[tuple[str, str], ...] = (
    ("NODE", "node"),
    ("GPU", "key"),
    ("CARD", "card"),
    ("POD", "pod"),
    ("REGIME", "regime"),
    ("DRAM", "dram"),
    ("TENSOR", "tensor"),
    ("FLOP", "flop"),
    ("I/RIDGE", "intensity"),
    ("EFF", "efficiency"),
    ("CLOCK", "clock"),
    ("LEVER", "lever"),
)
RIGHT_ALIGNED = frozenset({"dram", "tensor", "flop", "intensity", "efficiency"})


def cell_text(row: Row, field: str, *, plain: bool = False) -> str:
    """What a column shows for a row, colourless. `plain`: the regime without its glyph and "-"
    for no value, so a script splitting on whitespace gets one word per column."""
    if field == "regime":
        word = regime_word(row.regime) if plain else row.regime_text
        return (
            word.replace(" ", "-") + ("(stale)" if row.stale else "")
            if plain
            else word + (" (stale)" if row.stale else "")
        )
    if field in ("dram", "tensor", "flop", "efficiency"):
        text = percent(getattr(row, field))
    elif field == "intensity":
        text = row.intensity_text
    elif field == "clock":
        text = row.clock_text
        if plain:  # one word: "65%:power-cap", "77%:thermal,sync-boost"
            text = text.replace(", ", ",").replace(" ", ":", 1).replace(" ", "-")
    else:
        text = str(getattr(row, field))
    return text.replace("–", "-") if plain else text


def plain_table(rows: Sequence[Row], *, with_node: bool, colour: bool = False) -> list[str]:
    """Whitespace-aligned lines (header first). With `colour` (a terminal) the regime has its
    glyph and ANSI colour; without, every cell but the lever is one plain word."""
    columns = [(title, name) for title, name in COLUMNS if with_node or name != "node"]
    texts = [[cell_text(row, name, plain=not colour) for _, name in columns] for row in rows]
    widths = [max([len(title)] + [len(t[i]) for t in texts]) for i, (title, _) in enumerate(columns)]
    lines = []

    def join(cells: Sequence[str], raw: Sequence[str]) -> str:
        parts = []
        for i, (cell, plain) in enumerate(zip(cells, raw, strict=True)):
            name = columns[i][1]
            pad = " " * (widths[i] - len(plain))
            last = i == len(cells) - 1
            parts.append(pad + cell if name in RIGHT_ALIGNED else (cell if last else cell + pad))
        return "  ".join(parts).rstrip()

    header = [title for title, _ in columns]
    lines.append(join(header, header))
    for row, raw in zip(rows, texts, strict=True):
        cells = list(raw)
        if colour:
            i = [name for _, name in columns].index("regime")
            cells[i] = f"{ansi_colour(row.regime)}{raw[i]}{ANSI_RESET}"
        lines.append(join(cells, raw))
    return lines
