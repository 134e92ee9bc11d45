"""The replay source: plays a recorded file (or the bundled demo) at its own pace, faster, or flat out.

The whole file is parsed once at open() into batches (one timestamp, one sample per GPU), so
read() in the sampler loop only waits until the next batch is due and hands it out; parsing is
what costs, and it happens once. Looping shifts timestamps by whole trace periods so that they
stay monotonic, as a live source's would.
"""

from __future__ import annotations

import gc
import importlib.resources
import itertools
import logging
import os
import statistics
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from exporter.sample import Sample
from exporter.sources.base import EndOfStream, SourceError, SourceOptions, SourceUnavailable
from exporter.sources.replay_formats import (
    FORMATS,
    PARSERS,
    Batch,
    ParseContext,
    ReplayFormatError,
    ReplayStats,
    detect_format,
)

log = logging.getLogger("exporter.sources.replay")

DEMO_NAME = "demo"
DEMO_RESOURCE = "data/demo.jsonl.gz"
"""The bundled trace (scripts/make_demo_trace.py writes it), inside the `exporter` package."""

_GZIP_MAGIC = b"\x1f\x8b"


class ReplaySource:
    """Source that replays a JSON Lines, CSV or `dcgmi dmon` file (see docs/replay-formats.md).

    `clock`, `sleep` and `wall_clock` are injectable so tests can pace without waiting; by
    default sleep waits on an event that close() sets, so shutdown never waits out a slow replay.
    """

    name = "replay"
    paced = True

    def __init__(
        self,
        options: SourceOptions,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._options = options
        self._clock = clock
        self._closed = threading.Event()
        self._sleep: Callable[[float], object] = sleep if sleep is not None else self._closed.wait
        self._wall_clock = wall_clock
        self._batches: list[Batch] = []
        self._index = 0
        self._loop = 0
        self._period = 0.0
        self._start_wall: float | None = None
        self._start_trace = 0.0
        self._stats = ReplayStats(lines_read=0, lines_skipped=0, skipped_by_reason={}, samples=0, batches=0)
        self.format: str | None = None
        self.display_name = options.replay or ""

    # -- Source protocol -------------------------------------------------------------------

    def open(self) -> None:
        """Read and parse the whole file; SourceUnavailable with one clear line if it cannot play."""
        options = self._options
        speed = options.speed
        if speed is not None and not (speed > 0 and speed != float("inf")):
            raise SourceUnavailable("bad_speed", f"--speed must be a positive number or 'max', not {speed}")
        if options.replay_format is not None and options.replay_format not in FORMATS:
            raise SourceUnavailable(
                "bad_format",
                f"unknown --replay-format {options.replay_format!r}; choose one of: {', '.join(FORMATS)}",
            )
        if options.interval_seconds <= 0:
            raise SourceUnavailable(
                "bad_interval", f"--interval must be positive, not {options.interval_seconds}"
            )
        name, data = self._read_bytes()
        self.display_name = name
        lines = _decode(name, data).splitlines()
        if not any(line.strip() for line in lines):
            raise SourceUnavailable("replay_empty", f"replay file {name} is empty")
        detected = detect_format(lines)
        chosen = options.replay_format or detected
        if chosen is None:
            raise SourceUnavailable(
                "replay_format",
                f"cannot tell the format of {name} (not JSON Lines, CSV or dcgmi dmon text); "
                "pass --replay-format jsonl|csv|dmon",
            )
        ctx = ParseContext(
            name=name,
            default_model=options.model,
            interval_seconds=options.interval_seconds,
            base_timestamp=self._wall_clock(),
        )
        mismatch = (
            f"{name} looks like {detected} text, not {chosen}; pass --replay-format {detected} "
            "or leave --replay-format out"
        )
        try:
            batches = _parse_without_gc(chosen, lines, ctx)
        except ReplayFormatError as exc:
            if detected is not None and detected != chosen:
                raise SourceUnavailable("replay_format", mismatch) from None
            raise SourceUnavailable("replay_format", str(exc)) from None
        ctx.finish_logging()
        skipped = sum(ctx.skipped.values())
        if not batches:
            if detected is not None and detected != chosen:
                raise SourceUnavailable("replay_format", mismatch)
            reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(ctx.skipped.items()))
            raise SourceUnavailable(
                "replay_no_samples",
                f"no valid sample in {name} ({ctx.lines_read} lines read"
                + (f"; skipped {reasons})" if reasons else ")"),
            )
        self.format = chosen
        self._batches = batches
        self._period = _period(batches, options.interval_seconds)
        samples = sum(len(samples) for _, samples in batches)
        self._stats = ReplayStats(
            lines_read=ctx.lines_read,
            lines_skipped=skipped,
            skipped_by_reason=dict(ctx.skipped),
            samples=samples,
            batches=len(batches),
        )
        self._index = 0
        self._loop = 0
        self._start_wall = None
        self._closed.clear()
        log.info(
            "replaying %s (%s): %d samples in %d batches over %.0f s, %d lines skipped, speed %s%s",
            name,
            chosen,
            samples,
            len(batches),
            batches[-1][0] - batches[0][0],
            skipped,
            "max" if speed is None else f"{speed:g}x",
            ", looping" if options.loop else "",
        )

    def read(self) -> list[Sample]:
        """The next batch, once it is due; EndOfStream after the last one unless looping."""
        if not self._batches:
            raise SourceError("not_open", "replay source read before open()")
        if self._closed.is_set():
            raise EndOfStream()
        if self._index >= len(self._batches):
            if not self._options.loop:
                raise EndOfStream()
            self._index = 0
            self._loop += 1
        timestamp, samples = self._batches[self._index]
        offset = self._loop * self._period
        speed = self._options.speed
        if speed is not None:
            now = self._clock()
            if self._start_wall is None:
                self._start_wall = now
                self._start_trace = timestamp + offset
            due = self._start_wall + (timestamp + offset - self._start_trace) / speed
            if due > now:
                self._sleep(due - now)
                if self._closed.is_set():
                    raise EndOfStream()
        self._index += 1
        if offset == 0.0:
            return list(samples)
        return [
            Sample(
                timestamp=s.timestamp + offset, entity=s.entity, values=s.values, attribution=s.attribution
            )
            for s in samples
        ]

    def close(self) -> None:
        """Wake a read() that is waiting for its batch; safe to call twice."""
        self._closed.set()

    @property
    def records_skipped(self) -> int:
        """Lines the parser skipped (any reason): the Source protocol's count of bad input."""
        return self._stats.lines_skipped

    # -- for the daemon and the tests ------------------------------------------------------------

    @property
    def replay_stats(self) -> ReplayStats:
        """Lines read and skipped (by reason), samples and batches parsed, loops completed."""
        stats = self._stats
        return ReplayStats(
            lines_read=stats.lines_read,
            lines_skipped=stats.lines_skipped,
            skipped_by_reason=dict(stats.skipped_by_reason),
            samples=stats.samples,
            batches=stats.batches,
            loops=self._loop,
        )

    @property
    def period_seconds(self) -> float:
        """Trace time one loop adds to the timestamps: its duration plus one interval."""
        return self._period

    # -- internals ---------------------------------------------------------------------------

    def _read_bytes(self) -> tuple[str, bytes]:
        replay = self._options.replay
        if not replay:
            raise SourceUnavailable(
                "replay_missing", "the replay source needs --replay PATH (or --replay demo)"
            )
        if replay == DEMO_NAME:
            resource = importlib.resources.files("exporter").joinpath(DEMO_RESOURCE)
            try:
                return "demo.jsonl.gz", resource.read_bytes()
            except OSError as exc:
                raise SourceUnavailable(
                    "replay_unreadable", f"the bundled demo trace is missing from this install ({exc})"
                ) from None
        path = Path(os.path.expanduser(replay))
        if path.is_dir():
            raise SourceUnavailable("replay_unreadable", f"replay path {replay} is a directory, not a file")
        try:
            return replay, path.read_bytes()
        except FileNotFoundError:
            raise SourceUnavailable("replay_unreadable", f"replay file {replay} does not exist") from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise SourceUnavailable(
                "replay_unreadable", f"cannot read replay file {replay}: {reason}"
            ) from None


def _decode(name: str, data: bytes) -> str:
    """Text of a plain or gzip file; a gzip cut short (an interrupted recording) keeps what it has."""
    if data[:2] == _GZIP_MAGIC:
        parts: list[bytes] = []
        rest = data
        while rest[:2] == _GZIP_MAGIC:
            inflater = zlib.decompressobj(wbits=31)
            try:
                parts.append(inflater.decompress(rest))
            except zlib.error as exc:
                if not parts:
                    raise SourceUnavailable(
                        "replay_unreadable", f"{name}: corrupt gzip data ({exc})"
                    ) from None
                log.warning("%s: corrupt gzip data; replaying what came before it", name)
                break
            if not inflater.eof:
                log.warning("%s: gzip stream ends early (interrupted recording?); replaying it", name)
                break
            rest = inflater.unused_data
        data = b"".join(parts)
    return data.decode("utf-8-sig", errors="replace")


def _parse_without_gc(chosen: str, lines: list[str], ctx: ParseContext) -> list[Batch]:
    """Run a parser with the cyclic garbage collector paused, then file its output as old.

    A parse allocates about a million objects that live on and hold no cycles; with the
    collector running, generation scans go over them again and again (about 40 % of the parse),
    and the first young-generation scan after it walks all of them once more (another 7 %).
    gc.freeze() then gc.unfreeze() moves every young object straight into the oldest generation
    without a scan; it is skipped when something else (a pre-forking server) has frozen objects,
    since unfreezing would release those too.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return PARSERS[chosen](lines, ctx)
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def _period(batches: list[Batch], fallback_interval: float) -> float:
    """Trace duration plus one typical interval (the median gap between batches)."""
    first, last = batches[0][0], batches[-1][0]
    if len(batches) > 1:
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(batches)]
        interval = statistics.median(gaps)
        if interval <= 0:
            interval = fallback_interval
    else:
        interval = fallback_interval
    return (last - first) + interval
