"""A replay file's physical lines, streamed from disk: plain or gzip, split on "\\n" only.

Memory stays flat whatever the file's size: the file is read 64 KiB at a time, gzip is
inflated as it streams (several members, as `ridgeline record` writes, and a stream cut short
by a crash keeps what it holds), and a line longer than MAX_LINE_BYTES is passed over without
being kept. Lines are numbered as an editor numbers them: only "\\n" ends one, so U+2028 or
U+0085 inside a JSON string, or "\\r" before the "\\n", never shifts the count. A run of empty
lines is handed out as one (numbered by its last line), found by one regular-expression match:
31 MB of blank lines must not cost 31 million trips through every parser.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

log = logging.getLogger("exporter.sources.replay")

READ_BYTES = 64 * 1024
MAX_LINE_BYTES = 1024 * 1024
"""A longer line is skipped as `line_too_long` (a replay line is a few hundred bytes)."""

_BLANK_RUN = re.compile(rb"[\r\n]+")
"""Line ends one after another: empty lines (CRLF ones too) up to the last "\\n" in the match
(a character class, which the regular-expression engine repeats in C; docs/replay-formats.md,
"Throughput", says what the obvious `(?:\\r?\\n)+` cost)."""
_BLANK_STARTS = (b"\n", b"\r")
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"

Opener = Callable[[], BinaryIO]
"""Opens the replay file (or the bundled demo) for reading bytes, from its start."""

Line = tuple[int, str | None]
"""(physical line number from 1, text without its "\\n"; None when the line was too long)."""


class ReplayReadError(Exception):
    """The file could not be read (an I/O error, or gzip data corrupt from its first byte)."""


def file_bytes(opener: Opener, name: str) -> Iterator[bytes]:
    """The file's content in chunks, inflated when it is gzip."""
    try:
        handle = opener()
    except OSError as exc:
        raise ReplayReadError(f"cannot read replay file {name}: {exc.strerror or exc}") from None
    with handle:
        try:
            first = handle.read(READ_BYTES)
            if first[:2] == _GZIP_MAGIC:
                yield from _inflate(first, handle, name)
                return
            while first:
                yield first
                first = handle.read(READ_BYTES)
        except OSError as exc:
            raise ReplayReadError(f"cannot read replay file {name}: {exc.strerror or exc}") from None


def _inflate(first: bytes, handle: BinaryIO, name: str) -> Iterator[bytes]:
    """gzip members one after another, output handed out in bounded pieces (no zip bomb)."""
    inflater = zlib.decompressobj(wbits=31)
    fresh = True  # the current member has been fed nothing yet
    produced = False
    data = first
    while True:
        while data:
            fresh = False
            try:
                out = inflater.decompress(data, READ_BYTES * 4)
            except zlib.error as exc:
                if not produced:
                    raise ReplayReadError(f"{name}: corrupt gzip data ({exc})") from None
                log.warning("%s: corrupt gzip data; replaying what came before it", name)
                return
            if out:
                produced = True
                yield out
            if inflater.eof:
                data = inflater.unused_data
                if data and data[:2] != _GZIP_MAGIC:
                    if data.strip(b"\x00"):
                        log.warning("%s: data after the gzip stream ignored", name)
                    return
                inflater = zlib.decompressobj(wbits=31)
                fresh = True
            else:
                data = inflater.unconsumed_tail
        data = handle.read(READ_BYTES)
        if not data:
            if not fresh:
                tail = inflater.flush()
                if tail:
                    yield tail
                log.warning("%s: gzip stream ends early (interrupted recording?); replaying it", name)
            return


def physical_lines(chunks: Iterator[bytes]) -> Iterator[Line]:
    """(number, text) for every line; text decoded as UTF-8 (bad bytes become U+FFFD), BOM dropped.

    A run of empty lines within a chunk comes out as one empty line, numbered by the run's last:
    every parser skips blank lines, and the numbers of the lines after it stay right."""
    number = 0
    tail = b""
    skipping = False
    first = True
    for chunk in chunks:
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        start = 0
        while True:
            if not tail and not skipping and chunk[start : start + 1] in _BLANK_STARTS:
                run = _BLANK_RUN.match(chunk, start)
                end = chunk.rfind(b"\n", start, run.end()) + 1 if run is not None else 0
                if end - start > 2:
                    number += chunk.count(b"\n", start, end)
                    yield number, ""
                    start = end
            newline = chunk.find(b"\n", start)
            if newline < 0:
                if skipping:
                    break
                tail += chunk[start:]
                if len(tail) > MAX_LINE_BYTES:
                    tail = b""
                    skipping = True
                break
            number += 1
            if skipping:
                skipping = False
                yield number, None
            else:
                piece = chunk[start:newline]
                line = tail + piece if tail else piece
                tail = b""
                if len(line) > MAX_LINE_BYTES:
                    yield number, None
                else:
                    yield number, line.decode("utf-8", errors="replace")
            start = newline + 1
    if skipping:
        yield number + 1, None
    elif tail:
        yield number + 1, tail.decode("utf-8", errors="replace")


def read_lines(opener: Opener, name: str) -> Iterator[Line]:
    """The physical lines of a replay file (plain or gzip), streamed."""
    return physical_lines(file_bytes(opener, name))
