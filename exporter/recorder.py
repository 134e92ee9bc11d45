"""`ridgeline record`: copy any source's samples into a Ridgeline JSON Lines replay file.

Each sample is one line, written and flushed on its own, so a recording stopped by Ctrl-C,
SIGTERM or a crash is valid up to its last line, and `ridgeline serve --replay FILE` plays it.
A path ending in .gz is gzip-compressed; each line is flushed as a complete gzip block, so a
cut-short .gz still replays (the replay reader keeps what the stream holds).
"""

from __future__ import annotations

import gzip
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from exporter.sample import Sample
from exporter.sources.base import EndOfStream, Source, SourceError
from exporter.sources.replay_formats.jsonl import sample_to_json

log = logging.getLogger("exporter.recorder")


class RecordError(Exception):
    """The output file cannot be written (bad directory, no permission, disk full)."""


def record(
    source: Source,
    out_path: str | os.PathLike[str],
    duration_seconds: float | None,
    interval_seconds: float,
    stop_event: threading.Event | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Record an opened `source` into `out_path` until the duration ends, the stop event is set,
    a replay ends, or Ctrl-C; returns the number of samples written.

    The caller opens and closes the source. Paced sources (replay) wait inside read(); for live
    sources this waits `interval_seconds` between reads, measured from the start of each read.
    A SourceError is logged and counted and recording goes on; KeyboardInterrupt ends the
    recording cleanly (the file is closed and valid) instead of propagating.
    Raises RecordError when the file cannot be opened or written.
    """
    if interval_seconds <= 0:
        raise ValueError(f"interval_seconds must be positive, not {interval_seconds}")
    stop = stop_event if stop_event is not None else threading.Event()
    path = Path(out_path)
    tally = _Tally()
    deadline = None if duration_seconds is None else clock() + duration_seconds
    try:
        out = _open_output(path)
    except OSError as exc:
        raise RecordError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        _copy(source, out, tally, stop, deadline, interval_seconds, clock)
    except KeyboardInterrupt:
        log.info("recording interrupted; %s holds %d samples", path, tally.written)
    except OSError as exc:
        _close_quietly(out)
        raise RecordError(
            f"cannot write {path}: {exc.strerror or exc} ({tally.written} samples written)"
        ) from None
    except BaseException:
        _close_quietly(out)
        raise
    try:
        out.close()  # flushes what is buffered: a full disk may say so only now
    except OSError as exc:
        raise RecordError(
            f"cannot write {path}: {exc.strerror or exc} ({tally.written} samples written)"
        ) from None
    if tally.errors:
        log.warning("recording %s: %d samples written, %d errors", path, tally.written, tally.errors)
    return tally.written


@dataclass
class _Tally:
    written: int = 0
    errors: int = 0


def _copy(
    source: Source,
    out: _LineSink,
    tally: _Tally,
    stop: threading.Event,
    deadline: float | None,
    interval_seconds: float,
    clock: Callable[[], float],
) -> None:
    """Batches from `source` into `out` until the deadline, the stop event or the source's end."""
    while not stop.is_set():
        read_started = clock()
        if deadline is not None and read_started >= deadline:
            return
        batch = _read(source, tally)
        if batch is None:
            return
        _write(out, batch, tally)
        if not source.paced or not batch:
            wait = interval_seconds - (clock() - read_started)
            if deadline is not None:
                wait = min(wait, deadline - clock())
            if wait > 0:
                stop.wait(wait)


def _read(source: Source, tally: _Tally) -> list[Sample] | None:
    """One batch; [] after a source error (logged, counted), None when the source has ended."""
    try:
        return source.read()
    except EndOfStream:
        log.info("%s source ended; recording stops", source.name)
        return None
    except SourceError as exc:
        tally.errors += 1
        log.warning("%s source error (%s): %s", source.name, exc.reason, exc.message)
        return []


def _write(out: _LineSink, batch: list[Sample], tally: _Tally) -> None:
    """Each sample as one flushed line; one that is not valid JSON (NaN, infinity) is counted."""
    for sample in batch:
        try:
            out.write(sample_to_json(sample) + "\n")
            out.flush()
        except ValueError as exc:
            tally.errors += 1
            log.warning("GPU %d: sample not recorded (%s)", sample.entity.gpu, exc)
            continue
        tally.written += 1


def _close_quietly(out: _LineSink) -> None:
    """Close after a write already failed: that failure is the one to report, not a second."""
    try:
        out.close()
    except OSError:
        log.debug("closing the recording after a write error failed too", exc_info=True)


class _LineSink(Protocol):
    def write(self, text: str, /) -> object: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


def _open_output(path: Path) -> _LineSink:
    """A text sink to `path`; gzip when it ends in .gz, where flush() ends a deflate block."""
    if path.suffix == ".gz":
        return _GzipLines(gzip.GzipFile(filename=str(path), mode="wb", mtime=0))
    return open(path, "w", encoding="utf-8", newline="\n")


class _GzipLines:
    """Lines into a gzip file; flush() is gzip's Z_SYNC_FLUSH, so every flushed line can be read
    back from a file that was never closed."""

    def __init__(self, gz: gzip.GzipFile) -> None:
        self._gz = gz

    def write(self, text: str, /) -> object:
        return self._gz.write(text.encode("utf-8"))

    def flush(self) -> None:
        self._gz.flush()

    def close(self) -> None:
        self._gz.close()
