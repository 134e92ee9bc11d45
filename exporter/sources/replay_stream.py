"""A replay read in parts: the same files, formats, parsers and batches as exporter/sources/replay.py,
in memory bounded by one part instead of the whole file (`ridgeline report --replay`).

`serve --replay` parses the whole file at start-up, so that looping and pacing are cheap; a
report only walks a trace once, flat out, and a trace may be days long. This source reads the
file (plain or gzip) in blocks, cuts it into parts of about `part_lines` lines and hands each part
to the format's own parser, so every value, skip and message is the parser's. What a part
boundary could change is put back together:

* jsonl, csv with timestamps: a batch cut in two by a boundary (same timestamp on both sides)
  is joined again before it is handed out.
* csv without timestamps: its batches are numbered from the previous part's last batch, and
  the first batch of a part is joined to that one when their GPUs do not overlap (the parser's
  own rule: a repeated GPU starts a new batch). A part boundary inside a batch whose rest
  repeats one of its GPUs can still cut it differently than one whole parse would: one batch
  in PART_LINES lines at most.
* dmon: parts are cut only at a `#Entity` header line, where the parser closes a batch anyway;
  the next part's batches continue the previous part's timestamps.

A trace whose time goes back across a boundary (it would need the whole file to sort) is counted
in `out_of_order_batches`; the inference ignores samples that do not advance a GPU's time, as
the daemon does for a live source.
"""

from __future__ import annotations

import codecs
import csv
import importlib.resources
import logging
import os
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from exporter.sample import Sample
from exporter.sources.base import EndOfStream, SourceError, SourceOptions, SourceUnavailable
from exporter.sources.replay_formats import (
    FORMATS,
    PARSERS,
    Batch,
    ParseContext,
    ReplayFormatError,
    detect_format,
)
from exporter.sources.replay_formats.dmon import is_header

log = logging.getLogger("exporter.sources.replay")

PART_LINES = 20_000
"""Lines per part: a part's samples are what the source holds at once (a few MB)."""

_BLOCK_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_DEMO_NAME = "demo"
_DEMO_RESOURCE = "data/demo.jsonl.gz"
_DMON_HEADERLESS_LIMIT = 10
"""dmon parts wait for a header line at most this many parts' worth of lines (a file without
repeated headers is then cut anywhere)."""


class StreamingReplaySource:
    """A Source over a replay file read in parts; unpaced (as `--speed max`), never looping."""

    name = "replay"
    paced = True

    def __init__(self, options: SourceOptions, *, part_lines: int = PART_LINES) -> None:
        if part_lines < 1:
            raise ValueError("part_lines must be at least 1")
        self._options = options
        self._part_lines = part_lines
        self._closed = threading.Event()
        self._batches: Iterator[Batch] | None = None
        self._ctx: ParseContext | None = None
        self.format: str | None = None
        self.display_name = options.replay or ""
        self.out_of_order_batches = 0
        self.lines = 0

    # -- Source protocol -------------------------------------------------------------------

    def open(self) -> None:
        """Read the first part and its first batch: SourceUnavailable with one clear line if the
        file cannot play (missing, empty, unknown format, no valid sample)."""
        options = self._options
        if options.replay_format is not None and options.replay_format not in FORMATS:
            raise SourceUnavailable(
                "bad_format",
                f"unknown --replay-format {options.replay_format!r}; choose one of: {', '.join(FORMATS)}",
            )
        if options.interval_seconds <= 0:
            raise SourceUnavailable(
                "bad_interval", f"--interval must be positive, not {options.interval_seconds}"
            )
        name, stream = self._open_stream()
        self.display_name = name
        lines = _lines(name, stream)
        head: list[str] = []
        for line in lines:
            head.append(line)
            if len(head) >= self._part_lines and sum(1 for h in head if h.strip()) >= 200:
                break
        if not any(line.strip() for line in head):
            raise SourceUnavailable("replay_empty", f"replay file {name} is empty")
        detected = detect_format(head)
        chosen = options.replay_format or detected
        if chosen is None:
            raise SourceUnavailable(
                "replay_format",
                f"cannot tell the format of {name} (not JSON Lines, CSV or dcgmi dmon text); "
                "pass --replay-format jsonl|csv|dmon",
            )
        self.format = chosen
        ctx = ParseContext(
            name=name,
            default_model=options.model,
            interval_seconds=options.interval_seconds,
            base_timestamp=time.time(),
        )
        self._ctx = ctx
        batches = self._batches_of(chosen, _chain(head, lines), ctx)
        try:
            first = next(batches, None)
        except ReplayFormatError as exc:
            if detected is not None and detected != chosen:
                raise SourceUnavailable(
                    "replay_format",
                    f"{name} looks like {detected} text, not {chosen}; pass --replay-format {detected} "
                    "or leave --replay-format out",
                ) from None
            raise SourceUnavailable("replay_format", str(exc)) from None
        if first is None:
            reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(ctx.skipped.items()))
            raise SourceUnavailable(
                "replay_no_samples",
                f"no valid sample in {name} ({ctx.lines_read} lines read"
                + (f"; skipped {reasons})" if reasons else ")"),
            )
        self._batches = _chain_batches(first, batches)

    def read(self) -> list[Sample]:
        """The next batch; EndOfStream after the last one (or once closed)."""
        if self._batches is None:
            raise SourceError("not_open", "replay source read before open()")
        if self._closed.is_set():
            raise EndOfStream()
        try:
            batch = next(self._batches, None)
        except ReplayFormatError as exc:
            raise SourceError("replay_format", str(exc)) from None
        if batch is None:
            if self._ctx is not None:
                self._ctx.finish_logging()
            raise EndOfStream()
        return batch[1]

    def close(self) -> None:
        self._closed.set()

    @property
    def records_skipped(self) -> int:
        return sum(self._ctx.skipped.values()) if self._ctx is not None else 0

    @property
    def skipped_by_reason(self) -> dict[str, int]:
        return dict(self._ctx.skipped) if self._ctx is not None else {}

    # -- parts -----------------------------------------------------------------------------

    def _open_stream(self) -> tuple[str, IO[bytes]]:
        replay = self._options.replay
        if not replay:
            raise SourceUnavailable(
                "replay_missing", "the replay source needs --replay PATH (or --replay demo)"
            )
        if replay == _DEMO_NAME:
            try:
                resource = importlib.resources.files("exporter").joinpath(_DEMO_RESOURCE)
                return "demo.jsonl.gz", resource.open("rb")
            except OSError as exc:
                raise SourceUnavailable(
                    "replay_unreadable", f"the bundled demo trace is missing from this install ({exc})"
                ) from None
        path = Path(os.path.expanduser(replay))
        if path.is_dir():
            raise SourceUnavailable("replay_unreadable", f"replay path {replay} is a directory, not a file")
        try:
            return replay, path.open("rb")
        except FileNotFoundError:
            raise SourceUnavailable("replay_unreadable", f"replay file {replay} does not exist") from None
        except OSError as exc:
            raise SourceUnavailable(
                "replay_unreadable", f"cannot read replay file {replay}: {exc.strerror or exc}"
            ) from None

    def _batches_of(self, chosen: str, lines: Iterator[str], ctx: ParseContext) -> Iterator[Batch]:
        """Batches of the whole file, part by part, joined across part boundaries."""
        parser = PARSERS[chosen]
        interval = ctx.interval_seconds
        pending: Batch | None = None
        last_emitted = -float("inf")
        header: str | None = None
        synthetic = False  # csv without a timestamp column
        consumed = 0
        for part in self._parts(chosen, lines):
            text = part
            ctx.line_offset = consumed
            if chosen == "csv":
                if header is None:
                    header_index = _csv_header_index(part)
                    if header_index is not None:
                        header = part[header_index]
                        synthetic = not _csv_has_timestamp(header)
                else:
                    text = [header, *part]
                    ctx.line_offset = consumed - 1
            consumed += len(part)
            self.lines = consumed
            if pending is not None and (chosen == "dmon" or synthetic):
                ctx.base_timestamp = pending[0] if synthetic else pending[0] + interval
            batches = parser(text, ctx)
            if not batches:
                continue
            if pending is not None:
                first_ts, first_samples = batches[0]
                if first_ts == pending[0] and not _overlap(pending[1], first_samples):
                    pending = (pending[0], [*pending[1], *first_samples])
                    batches = batches[1:]
                elif synthetic and first_ts == pending[0]:
                    batches = [_shifted(b, interval) for b in batches]
            for batch in batches:
                if pending is not None:
                    if pending[0] < last_emitted:
                        self.out_of_order_batches += 1
                    last_emitted = max(last_emitted, pending[0])
                    yield pending
                pending = batch
        if pending is not None:
            if pending[0] < last_emitted:
                self.out_of_order_batches += 1
            yield pending

    def _parts(self, chosen: str, lines: Iterator[str]) -> Iterator[list[str]]:
        """The file's lines in parts of about part_lines; dmon parts start at a header line."""
        size = self._part_lines
        part: list[str] = []
        for line in lines:
            if len(part) >= size and (
                chosen != "dmon" or is_header(line.strip()) or len(part) >= size * _DMON_HEADERLESS_LIMIT
            ):
                yield part
                part = []
            part.append(line)
        if part:
            yield part


def _chain(head: list[str], rest: Iterator[str]) -> Iterator[str]:
    yield from head
    yield from rest


def _chain_batches(first: Batch, rest: Iterator[Batch]) -> Iterator[Batch]:
    yield first
    yield from rest


def _overlap(a: list[Sample], b: list[Sample]) -> bool:
    keys = {s.entity.key for s in a}
    return any(s.entity.key in keys for s in b)


def _shifted(batch: Batch, seconds: float) -> Batch:
    ts = batch[0] + seconds
    return ts, [s._replace(timestamp=ts) for s in batch[1]]


def _csv_header_index(lines: list[str]) -> int | None:
    for index, line in enumerate(lines):
        text = line.strip()
        if not text or (text.startswith("#") and "," not in text):
            continue
        return index
    return None


def _csv_has_timestamp(header: str) -> bool:
    names = {cell.strip().lstrip("#").strip().lower() for cell in next(csv.reader([header]))}
    return bool(names & {"timestamp", "ts", "time"})


def _lines(name: str, stream: IO[bytes]) -> Iterator[str]:
    """The file's text lines (plain or gzip, UTF-8 with an optional BOM), as str.splitlines()
    would cut the whole text; a gzip cut short yields what it holds, as the replay source does."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    carry = ""
    with stream:
        for block in _blocks(name, stream):
            text = carry + decoder.decode(block)
            if not text:
                continue
            pieces = text.splitlines(keepends=True)
            last = pieces[-1]
            # a last piece without its line end, or a "\r" that a "\n" may follow, waits
            if last == last.rstrip("\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029") or last.endswith("\r"):
                carry = pieces.pop()
            else:
                carry = ""
            if pieces:
                yield from "".join(pieces).splitlines()
        tail = carry + decoder.decode(b"", final=True)
        if tail:
            yield from tail.splitlines()


def _blocks(name: str, stream: IO[bytes]) -> Iterator[bytes]:
    first = stream.read(_BLOCK_BYTES)
    if first[:2] != _GZIP_MAGIC:
        while first:
            yield first
            first = stream.read(_BLOCK_BYTES)
        return
    inflater = zlib.decompressobj(wbits=31)
    produced = False
    data = first
    while True:
        try:
            out = inflater.decompress(data)
        except zlib.error as exc:
            if not produced:
                raise SourceUnavailable("replay_unreadable", f"{name}: corrupt gzip data ({exc})") from None
            log.warning("%s: corrupt gzip data; replaying what came before it", name)
            return
        if out:
            produced = True
            yield out
        if inflater.eof:
            rest = inflater.unused_data or stream.read(_BLOCK_BYTES)
            if rest[:2] != _GZIP_MAGIC:
                return  # the end, or trailing bytes that are not another gzip member
            inflater = zlib.decompressobj(wbits=31)
            data = rest
            continue
        data = stream.read(_BLOCK_BYTES)
        if not data:
            log.warning("%s: gzip stream ends early (interrupted recording?); replaying it", name)
            tail = inflater.flush()
            if tail:
                yield tail
            return
