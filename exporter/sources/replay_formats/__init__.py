"""Replay file formats (Ridgeline JSON Lines, CSV, `dcgmi dmon` text): detection and parsing.

Each parser turns the file's lines into batches of samples once; exporter.sources.replay plays
them. See docs/replay-formats.md for what each format accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from exporter.sources.base import REPLAY_FORMATS
from exporter.sources.replay_formats.common import (
    Batch,
    ParseContext,
    ReplayFormatError,
    ReplayStats,
)
from exporter.sources.replay_formats.csv_table import parse_csv
from exporter.sources.replay_formats.dmon import is_header, looks_like_row, parse_dmon
from exporter.sources.replay_formats.jsonl import parse_jsonl

FORMATS = REPLAY_FORMATS

PARSERS: dict[str, Callable[[Sequence[str], ParseContext], list[Batch]]] = {
    "jsonl": parse_jsonl,
    "csv": parse_csv,
    "dmon": parse_dmon,
}
assert tuple(PARSERS) == FORMATS

_DETECT_LINES = 200
"""How many non-blank lines detection looks at before giving up."""


def detect_format(lines: Sequence[str]) -> str | None:
    """The format a file's content looks like, or None when nothing decides it.

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
        if looked > _DETECT_LINES:
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
    "FORMATS",
    "PARSERS",
    "Batch",
    "ParseContext",
    "ReplayFormatError",
    "ReplayStats",
    "detect_format",
]
