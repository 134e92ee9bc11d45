"""Replay file formats (Ridgeline JSON Lines, CSV, `dcgmi dmon` text): detection and parsing.

Each parser reads a file's physical lines as they stream from disk (lines.read_lines) and yields
batches as soon as each is complete; exporter.sources.replay plays them. See
docs/replay-formats.md for what each format accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from exporter.sources.base import REPLAY_FORMATS
from exporter.sources.replay_formats.common import (
    Batch,
    ParseContext,
    ReplayFormatError,
    ReplayStats,
)
from exporter.sources.replay_formats.csv_table import iter_csv
from exporter.sources.replay_formats.dmon import is_header, iter_dmon, looks_like_row
from exporter.sources.replay_formats.jsonl import iter_jsonl
from exporter.sources.replay_formats.lines import Line, ReplayReadError, read_lines

FORMATS = REPLAY_FORMATS

PARSERS: dict[str, Callable[[Iterator[Line], ParseContext], Iterator[Batch]]] = {
    "jsonl": iter_jsonl,
    "csv": iter_csv,
    "dmon": iter_dmon,
}
assert tuple(PARSERS) == FORMATS

DETECT_LINES = 200
"""How many non-blank lines detection looks at before giving up."""


def detect_format(lines: Iterable[str]) -> str | None:
    """The format a file's first lines look like, or None when nothing decides it.

    A line starting with "{" is JSON Lines; an "#Entity" header or a "GPU 0 ..." row is dmon;
    the first other line with a comma is a CSV header. A leading "dcgmi dmon ..." command echo
    and "#" comments are passed over.
    """
    looked = 0
    for line in lines:
        text = line.strip()
        if not text:
            continue
        looked += 1
        if looked > DETECT_LINES:
            break
        if text.startswith("{"):
            return "jsonl"
        if is_header(text) or looks_like_row(text):
            return "dmon"
        if "dcgmi" in text or text.startswith("#") or text.startswith("$"):
            continue
        if "," in text:
            return "csv"
    return None


__all__ = [
    "DETECT_LINES",
    "FORMATS",
    "PARSERS",
    "Batch",
    "Line",
    "ParseContext",
    "ReplayFormatError",
    "ReplayReadError",
    "ReplayStats",
    "detect_format",
    "read_lines",
]
