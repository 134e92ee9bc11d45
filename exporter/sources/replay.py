"""The replay source: plays a recorded file (or the bundled demo) at its own pace, faster, or flat out.

The file is streamed from disk: read() pulls the next batch from the parser, which reads only as
far as that batch needs, so memory stays flat for a file of any size and a 1 GB file plays as a
1 MB one does. open() reads the first lines to tell the format and parses up to the first batch,
so a file that cannot play fails at start-up with one clear line. Looping reads the file again
and shifts timestamps by whole trace periods so that they stay monotonic, as a live source's
would; what was skipped is counted (and logged) on the first pass only. A looping replay whose
file has no sample on a later pass (truncated to 0 bytes, being rewritten) is down with
`replay_empty`, not finished: the sampler reopens it with backoff until the file plays again.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from exporter.option_specs import OptionError, OptionSpec, parse_speed
from exporter.sample import Sample
from exporter.sources.base import REPLAY_FORMATS, EndOfStream, SourceError, SourceOptions, SourceUnavailable
from exporter.sources.replay_formats import (
    DETECT_LINES,
    FORMATS,
    PARSERS,
    Batch,
    ParseContext,
    ReplayFormatError,
    ReplayReadError,
    ReplayStats,
    detect_format,
    read_lines,
)
from exporter.sources.replay_formats.lines import Opener

log = logging.getLogger("exporter.sources.replay")

DEMO_NAME = "demo"
DEMO_RESOURCE = "data/demo.jsonl.gz"
"""The bundled trace (scripts/make_demo_trace.py writes it), inside the `exporter` package."""

PERIOD_GAPS = 1000
"""Gaps between batches kept (from the first pass) to find the trace's typical interval."""


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
        settings: ReplaySettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._options = options
        self._settings = settings if settings is not None else ReplaySettings()
        self._clock = clock
        self._closed = threading.Event()
        self._sleep: Callable[[float], object] = sleep if sleep is not None else self._closed.wait
        self._wall_clock = wall_clock
        self._opener: Opener | None = None
        self._batches: Iterator[Batch] | None = None
        self._pending: Batch | None = None
        self._ctx: ParseContext | None = None
        self._base_timestamp = 0.0
        self._first_ts: float | None = None
        self._last_ts: float | None = None
        self._gaps: list[float] = []
        self._start_wall: float | None = None
        self._start_trace = 0.0
        self._reset_counts()
        self.format: str | None = None
        self.display_name = self._settings.path or ""

    # -- Source protocol -------------------------------------------------------------------

    def open(self) -> None:
        """Tell the format and parse up to the first batch; SourceUnavailable with one clear line
        if the file cannot play."""
        settings = self._settings
        speed = settings.speed
        settings.check()
        if self._options.interval_seconds <= 0:
            raise SourceUnavailable(
                "bad_interval", f"--interval must be positive, not {self._options.interval_seconds}"
            )
        name, opener = self._locate()
        self.display_name = name
        head, too_long = _head(opener, name)
        if not head and not too_long:
            raise SourceUnavailable("replay_empty", f"replay file {name} is empty")
        detected = detect_format(head)
        chosen = settings.format or detected
        if chosen is None:
            raise SourceUnavailable(
                "replay_format",
                f"cannot tell the format of {name} (not JSON Lines, CSV or dcgmi dmon text); "
                "pass --replay-format jsonl|csv|dmon",
            )
        mismatch = (
            f"{name} looks like {detected} text, not {chosen}; pass --replay-format {detected} "
            "or leave --replay-format out"
        )
        self._opener = opener
        self.format = chosen
        self._base_timestamp = self._wall_clock()
        self._reset_counts()
        ctx = self._ctx = self._context(quiet=False)
        self._batches = PARSERS[chosen](read_lines(opener, name), ctx)
        try:
            self._pending = next(self._batches)
        except StopIteration:
            ctx.finish_logging()
            if detected is not None and detected != chosen:
                raise SourceUnavailable("replay_format", mismatch) from None
            raise _no_samples(name, ctx) from None
        except ReplayFormatError as exc:
            if detected is not None and detected != chosen:
                raise SourceUnavailable("replay_format", mismatch) from None
            raise SourceUnavailable("replay_format", str(exc)) from None
        except ReplayReadError as exc:
            raise SourceUnavailable("replay_unreadable", str(exc)) from None
        self._closed.clear()
        log.info(
            "replaying %s (%s) from disk, speed %s%s",
            name,
            chosen,
            "max" if speed is None else f"{speed:g}x",
            ", looping" if settings.loop else "",
        )

    def read(self) -> list[Sample]:
        """The next batch, once it is due; EndOfStream after the last one unless looping."""
        if self._batches is None:
            raise SourceError("not_open", "replay source read before open()")
        if self._closed.is_set():
            raise EndOfStream()
        timestamp, samples = self._next_batch()
        offset = self._offset
        speed = self._settings.speed
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
        if offset == 0.0:
            return samples
        return [s._replace(timestamp=s.timestamp + offset) for s in samples]

    def close(self) -> None:
        """Wake a read() that is waiting for its batch; safe to call twice."""
        self._closed.set()

    @property
    def records_skipped(self) -> int:
        """Lines the parser skipped (any reason) on the first pass: the Source protocol's count."""
        return 0 if self._ctx is None else sum(self._ctx.skipped.values())

    # -- for the daemon and the tests ------------------------------------------------------------

    @property
    def replay_stats(self) -> ReplayStats:
        """Lines read and skipped (by reason), samples and batches played on the first pass so
        far, and loops completed."""
        ctx = self._ctx
        skipped = {} if ctx is None else dict(ctx.skipped)
        return ReplayStats(
            lines_read=0 if ctx is None else ctx.lines_read,
            lines_skipped=sum(skipped.values()),
            skipped_by_reason=skipped,
            samples=self._samples,
            batches=self._batch_count,
            loops=self._loop,
        )

    @property
    def flat_out(self) -> bool:
        """True at --speed max: read() never waits, so the sampler publishes at most every
        PUBLISH_EVERY_SECONDS rather than once a batch (exporter/sampler.py)."""
        return self._settings.speed is None

    @property
    def period_seconds(self) -> float:
        """Trace time one loop adds to the timestamps: its duration plus one interval (known once
        the first pass has ended)."""
        return self._period

    # -- internals ---------------------------------------------------------------------------

    def _context(self, *, quiet: bool) -> ParseContext:
        options = self._options
        return ParseContext(
            name=self.display_name,
            default_model=self._settings.model,
            interval_seconds=options.interval_seconds,
            base_timestamp=self._base_timestamp,
            mig_profiles=options.mig_profiles,
            quiet=quiet,
        )

    def _reset_counts(self) -> None:
        """Where playing stands: nothing played yet (at construction, and again at open())."""
        self._first_pass = True
        self._batches_this_pass = 0
        self._ended = False
        self._loop = 0
        self._offset = 0.0
        self._period = 0.0
        self._samples = 0
        self._batch_count = 0
        self._first_ts = self._last_ts = None
        self._gaps = []
        self._start_wall = None

    def _next_batch(self) -> Batch:
        """The next batch of the file, reading it again from the start when looping."""
        if self._pending is not None:
            batch, self._pending = self._pending, None
            self._note(batch)
            return batch
        assert self._batches is not None and self._opener is not None and self.format is not None
        while not self._ended:
            try:
                batch = next(self._batches)
            except StopIteration:
                if self._first_pass:
                    self._end_first_pass()
                elif self._batches_this_pass == 0:
                    # the file was emptied or truncated between loops: not the end of a looping
                    # replay, a source that is down until the file has samples again
                    self._batches = PARSERS[self.format](
                        read_lines(self._opener, self.display_name), self._context(quiet=True)
                    )
                    raise SourceError(
                        "replay_empty",
                        f"replay file {self.display_name} had no sample to play on loop {self._loop} "
                        "(emptied or truncated?); reading it again",
                    ) from None
                if not self._settings.loop:
                    self._ended = True
                    break
                self._loop += 1
                self._offset += self._period
                self._batches_this_pass = 0
                self._batches = PARSERS[self.format](
                    read_lines(self._opener, self.display_name), self._context(quiet=True)
                )
                continue
            except ReplayReadError as exc:
                raise SourceError("replay_unreadable", str(exc)) from None
            except ReplayFormatError as exc:
                raise SourceError("replay_format", str(exc)) from None
            self._note(batch)
            return batch
        raise EndOfStream()

    def _note(self, batch: Batch) -> None:
        self._batches_this_pass += 1
        if not self._first_pass:
            return
        timestamp = batch[0]
        if self._last_ts is not None and len(self._gaps) < PERIOD_GAPS:
            self._gaps.append(timestamp - self._last_ts)
        if self._first_ts is None:
            self._first_ts = timestamp
        self._last_ts = timestamp
        self._samples += len(batch[1])
        self._batch_count += 1

    def _end_first_pass(self) -> None:
        """The trace's period (duration plus its median interval), and the first pass's summary."""
        self._first_pass = False
        interval = statistics.median(self._gaps) if self._gaps else self._options.interval_seconds
        if interval <= 0:
            interval = self._options.interval_seconds
        first = self._first_ts if self._first_ts is not None else 0.0
        last = self._last_ts if self._last_ts is not None else first
        self._period = (last - first) + interval
        ctx = self._ctx
        assert ctx is not None
        ctx.finish_logging()
        log.info(
            "%s: %d samples in %d batches over %.0f s, %d lines skipped",
            self.display_name,
            self._samples,
            self._batch_count,
            last - first,
            sum(ctx.skipped.values()),
        )

    def _locate(self) -> tuple[str, Opener]:
        """The file's name as shown and a way to open it, checked readable now."""
        replay = self._settings.path
        if not replay:
            raise SourceUnavailable(
                "replay_missing", "the replay source needs --replay PATH (or --replay demo)"
            )
        if replay == DEMO_NAME:
            resource = importlib.resources.files("exporter").joinpath(DEMO_RESOURCE)
            if not resource.is_file():
                raise SourceUnavailable(
                    "replay_unreadable", "the bundled demo trace is missing from this install"
                )
            return "demo.jsonl.gz", lambda: cast(BinaryIO, resource.open("rb"))
        path = Path(os.path.expanduser(replay))
        if path.is_dir():
            raise SourceUnavailable("replay_unreadable", f"replay path {replay} is a directory, not a file")
        try:
            with open(path, "rb"):
                pass
        except FileNotFoundError:
            raise SourceUnavailable("replay_unreadable", f"replay file {replay} does not exist") from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise SourceUnavailable(
                "replay_unreadable", f"cannot read replay file {replay}: {reason}"
            ) from None
        return replay, lambda: open(path, "rb")


def _no_samples(name: str, ctx: ParseContext) -> SourceUnavailable:
    """The error for a file that held no valid sample: lines read and what was skipped, why."""
    reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(ctx.skipped.items()))
    hint = "; pass --model with the GPU's NVML name" if "no_model" in ctx.skipped else ""
    return SourceUnavailable(
        "replay_no_samples",
        f"no valid sample in {name} ({ctx.lines_read} lines read"
        + (f"; skipped {reasons})" if reasons else ")")
        + hint,
    )


def _head(opener: Opener, name: str) -> tuple[list[str], int]:
    """The file's first non-blank lines (at most DETECT_LINES), for format detection, and how many
    lines too long to keep came among them."""
    head: list[str] = []
    too_long = 0
    lines = read_lines(opener, name)
    try:
        for _, text in lines:
            if text is None:
                too_long += 1
                if too_long >= DETECT_LINES:
                    break
                continue
            if not text.strip():
                continue
            head.append(text)
            if len(head) >= DETECT_LINES:
                break
    except ReplayReadError as exc:
        raise SourceUnavailable("replay_unreadable", str(exc)) from None
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    return head, too_long


# -- the flags this source reads (exporter/sources/options.py) ------------------------------

FILE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        flag="--replay",
        dest="replay",
        metavar="PATH|demo",
        help="replay a recorded file, or the bundled demo trace",
    ),
    OptionSpec(
        flag="--replay-format",
        dest="replay_format",
        choices=REPLAY_FORMATS,
        help="format of the --replay file (detected from its content when omitted)",
    ),
    OptionSpec(
        flag="--model",
        dest="model",
        metavar="NAME",
        help="NVML model name, for replay formats that lack it (dmon)",
    ),
)
"""The flags that name and read a replay file: `report --replay` takes them too."""

OPTIONS: tuple[OptionSpec, ...] = (
    *FILE_OPTIONS,
    OptionSpec(
        flag="--speed",
        dest="speed",
        type=parse_speed,
        default=1.0,
        metavar="N|max",
        help="replay speed multiplier or max",
    ),
    OptionSpec(
        flag="--loop", dest="loop", action="store_true", default=False, help="replay the file over and over"
    ),
)


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """What --replay, --replay-format, --model, --speed and --loop say."""

    path: str | None = None
    """The file to play, or "demo" (the bundled trace); None: nothing to play (open() says so)."""
    format: str | None = None
    """One of REPLAY_FORMATS; None: told from the file's first lines."""
    model: str | None = None
    """The NVML model name for formats that lack it (dmon)."""
    speed: float | None = 1.0
    """Replay speed multiplier; None means as fast as possible (`--speed max`)."""
    loop: bool = False

    def check(self) -> None:
        """SourceUnavailable for a speed or format no replay can use (open() calls it: the flags'
        parsers refuse these already, a caller building the record may not)."""
        speed = self.speed
        if speed is not None and not (speed > 0 and speed != float("inf")):
            raise SourceUnavailable("bad_speed", f"--speed must be a positive number or 'max', not {speed}")
        if self.format is not None and self.format not in FORMATS:
            raise SourceUnavailable(
                "bad_format",
                f"unknown --replay-format {self.format!r}; choose one of: {', '.join(FORMATS)}",
            )


def options_from(values: Any, chosen: bool) -> ReplaySettings:
    """The replay settings; --replay is refused beside another --source."""
    if chosen and not values.replay:
        raise OptionError("--source replay needs --replay PATH (or --replay demo)")
    if not chosen and values.replay:
        raise OptionError(
            f"--replay is only used with --source replay, not --source {values.source or 'auto'}"
        )
    return ReplaySettings(
        path=values.replay,
        format=values.replay_format,
        model=values.model,
        speed=values.speed,
        loop=bool(values.loop),
    )
