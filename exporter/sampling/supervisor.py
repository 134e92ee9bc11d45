"""The source supervisor: owns the source (open, read, close, reopen) and says how it is doing.

A source error marks the source down with its reason, counts it, closes the source and lets the
sampler back off (1 s doubling to 30 s) before reopening; a replay's end is kept as a state, not
an error. Once the source has been down longer than the grace, every tracked GPU is dropped.
Errors and skipped records are counted here (`ErrorCounts`) so that they never go backwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum
from types import MappingProxyType

from exporter.redaction import redact_credentials
from exporter.sample import Sample
from exporter.sampling.tracker import EntityTracker
from exporter.sources.base import EndOfStream, Source, SourceError, SourceOptions
from exporter.state import SourceHealth

log = logging.getLogger("exporter.sampler")

END_OF_REPLAY = "end_of_replay"
CORRUPT_LINE = "corrupt_line"

BACKOFF_INITIAL_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0

Opener = Callable[[str, SourceOptions], Source]


class Outcome(Enum):
    """How a read ended when it brought no batch."""

    FAILED = "failed"
    """The source failed (or could not be reopened): it is closed and down; back off."""
    ENDED = "ended"
    """A non-looping replay played its last sample: the last state is kept."""
    STOPPED = "stopped"
    """Our own stop() woke a pacing replay: not the end of its file."""


class ErrorCounts:
    """sample_errors_total by reason: the sampler's own counts plus the source's skipped records."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._skipped: dict[str, int] = {}
        self._view: MappingProxyType[str, int] | None = None
        """The counts as last read; None when one changed since."""

    def count(self, reason: str) -> None:
        self._counts[reason] = self._counts.get(reason, 0) + 1
        self._view = None

    def set_skipped(self, total: int) -> None:
        """The records skipped by every source so far (reason corrupt_line)."""
        self._skipped = {CORRUPT_LINE: total}
        self._view = None

    def view(self) -> MappingProxyType[str, int]:
        """A read-only copy, reused while nothing changed (the snapshot is built per batch)."""
        view = self._view
        if view is None:
            counted = dict(self._counts)
            for reason, n in self._skipped.items():
                counted[reason] = counted.get(reason, 0) + n
            view = self._view = MappingProxyType(counted)
        return view


class SourceSupervisor:
    """The one owner of the source; only the sampler thread calls it (but `close_paced`)."""

    def __init__(
        self,
        source_name: str,
        options: SourceOptions,
        *,
        source: Source | None,
        opener: Opener,
        errors: ErrorCounts,
        backoff_initial_seconds: float = BACKOFF_INITIAL_SECONDS,
        backoff_max_seconds: float = BACKOFF_MAX_SECONDS,
    ) -> None:
        self.name = source.name if source is not None else source_name
        self._requested_name = source_name
        self._options = options
        self.source = source
        self._opener = opener
        self.errors = errors
        self._backoff_initial = backoff_initial_seconds
        self._backoff_max = backoff_max_seconds
        self._backoff = backoff_initial_seconds
        self.finished = False
        self._skipped_closed = 0
        """Records skipped by sources closed since (a reopened source counts from 0 again)."""
        self._skipped_open = 0
        """Records skipped by the source open now, as last collected."""
        self._announce_open = False
        """A reopened source is announced after its first good read (an open that then fails
        every read was never really open)."""
        self.health = SourceHealth(
            name=self.name,
            up=source is not None,
            reason=None if source is not None else "starting",
        )

    # -- reading -----------------------------------------------------------------------------

    def read(self, stopping: Callable[[], bool]) -> list[list[Sample]] | Outcome:
        """Open the source if it is closed and read it: one batch, or every batch since the last
        read from a source that keeps them (`read_batches`); an Outcome when it failed or ended."""
        if self.source is None and not self._reopen():
            return Outcome.FAILED
        source = self.source
        assert source is not None
        try:
            read_batches = getattr(source, "read_batches", None)
            return read_batches() if read_batches is not None else [source.read()]
        except EndOfStream:
            if stopping():
                return Outcome.STOPPED
            self._end(source)
            return Outcome.ENDED
        except SourceError as exc:
            self.record_error(exc.reason, exc.message)
        except Exception as exc:  # a bug in a source must not kill the sampler
            log.exception("source %s failed unexpectedly", self.name)
            self.record_error("internal_error", f"{type(exc).__name__}: {exc}")
        self.close()
        return Outcome.FAILED

    def _end(self, source: Source) -> None:
        self.collect_skipped(source)
        self.finished = True
        self.health = self.health._replace(
            up=False,
            reason=END_OF_REPLAY,
            message="the replay has played its last sample; serving the last state",
            finished=True,
        )
        log.info("replay finished: its last sample is played")

    def answered(self, refused: str | None) -> None:
        """A batch was folded in: the source is up (every sample refused, or not); reset backoff."""
        health = self.health
        if (
            not health.up
            or health.reason is not None
            or health.message is not None
            or health.refused != refused
        ):
            self.health = health._replace(up=True, reason=None, message=None, refused=refused)

    @property
    def batching(self) -> bool:
        """The open source keeps its batches between reads (exporter/sources/base.py)."""
        return self.source is not None and hasattr(self.source, "read_batches")

    def settled(self) -> None:
        """The read went through whole: announce a reopened source once, reset the backoff."""
        if self._announce_open:
            self._announce_open = False
            log.info("source %s opened and answered", self.name)
        self._backoff = self._backoff_initial

    def next_backoff(self) -> float:
        """Seconds to wait before the next try after a failure (doubling up to the maximum)."""
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self._backoff_max)
        return delay

    # -- errors and state --------------------------------------------------------------------

    def _reopen(self) -> bool:
        try:
            self.source = self._opener(self._requested_name, self._options)
        except SourceError as exc:
            self.record_error(exc.reason, exc.message)
            return False
        except Exception as exc:  # a GPU library's own exception out of open(): retry, don't die
            log.exception("opening source %s failed unexpectedly", self._requested_name)
            self.record_error("internal_error", f"{type(exc).__name__}: {exc}")
            return False
        self.name = self.source.name
        self._announce_open = True  # logged once the source has answered a read, not before
        self.health = self.health._replace(name=self.name, up=True, reason=None, message=None)
        return True

    def close(self) -> None:
        source, self.source = self.source, None
        if source is None:
            return
        self.collect_skipped(source)
        self._skipped_closed += self._skipped_open  # kept: corrupt_line never goes backwards
        self._skipped_open = 0
        try:
            source.close()
        except Exception:  # closing a broken library handle may fail too; nothing to save
            log.debug("closing source %s failed", self.name, exc_info=True)

    def close_paced(self) -> None:
        """Close a paced source (a replay) from another thread: its close() wakes a read()."""
        source = self.source
        if source is not None and source.paced:
            source.close()

    def record_error(self, reason: str, message: str) -> None:
        message = redact_credentials(message)  # it reaches the log, /readyz and /classify
        self.errors.count(reason)
        log.warning("source %s: %s (%s); retrying in %.0f s", self.name, message, reason, self._backoff)
        self.health = self.health._replace(up=False, reason=reason, message=message)

    def expire_while_down(self, tracker: EntityTracker, now: float) -> None:
        """Drop every GPU once the source has been down for longer than the grace period."""
        if not tracker.tracking:
            return
        since = tracker.last_fold_wall
        grace_seconds = tracker.grace_batches * self._options.interval_seconds
        if since is None or now - since > grace_seconds:
            log.info(
                "source %s down for more than %g s; dropping the series of %d GPUs",
                self.name,
                grace_seconds,
                tracker.tracking,
            )
            tracker.depart_all(now)

    def collect_skipped(self, source: Source | None = None) -> None:
        """Records the source skipped (a replay's corrupt lines, whatever the parser's reason)
        become sample_errors_total{reason="corrupt_line"}, added to what sources closed before it
        had skipped, so the counter never goes backwards across reopens."""
        source = source if source is not None else self.source
        if source is None:
            return
        skipped = source.records_skipped
        if skipped == self._skipped_open:
            return
        if skipped < self._skipped_open:  # the same source object reopened: its count restarted
            self._skipped_closed += self._skipped_open
        self._skipped_open = skipped
        total = self._skipped_closed + skipped
        if total > 0:
            self.errors.set_skipped(total)
