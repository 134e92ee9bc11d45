"""What a sample's timestamp must be before the sampler believes it, and a log that summarises.

A source's timestamp is the upstream's word (a scraped page's stamp, DCGM's clock): NaN, an
infinity, a page stamped in 2100 or one second after the epoch would otherwise freeze a GPU
(every later sample looks older) or integrate decades of regime seconds. The sampler checks each
sample here; one that fails is skipped and counted under its reason
(`ridgeline_sample_errors_total{reason}`), and the reasons are logged by `SummaryLog`, once at
once and then at most once a minute. docs/daemon.md, "Sample timestamps", says why each bound.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

TIMESTAMP_NOT_FINITE = "timestamp_not_finite"
TIMESTAMP_FUTURE = "timestamp_future"
TIMESTAMP_PAST = "timestamp_past"
TIMESTAMP_BACKWARDS = "timestamp_backwards"

FUTURE_SECONDS = 300.0
"""A live sample stamped more than this ahead of the wall clock is not believed: NTP keeps
nodes within milliseconds, so five minutes only forgives a badly set clock, not a page from 2100."""
PAST_SECONDS = 3600.0
"""A live sample stamped more than this before the wall clock is not believed: DCGM keeps its
samples for 30 s, and Prometheus's TSDB head refuses samples over an hour older than its newest
(docs/daemon.md, "Sample timestamps")."""
STALLED_SECONDS = 60.0
"""/readyz: a live source's data has stopped moving when no GPU's sample timestamp advanced for
max(this, the freshness window) of wall time. dcgm-exporter collects every 30 s by default
(`-c 30000`); a page that prints its timestamps legitimately repeats one for that long."""

SUMMARY_EVERY_SECONDS = 60.0


def timestamp_problem(timestamp: float, now: float, *, live: bool) -> str | None:
    """Why a sample's timestamp cannot be believed (a reason for the errors counter), or None.

    live: the source's clock is meant to be the wall clock (dcgm, nvml, scrape); a replay plays
    trace time, which only has to be finite (its parser bounds it, and the batcher its order).
    """
    if not math.isfinite(timestamp):
        return TIMESTAMP_NOT_FINITE
    if live:
        if timestamp > now + FUTURE_SECONDS:
            return TIMESTAMP_FUTURE
        if timestamp < now - PAST_SECONDS:
            return TIMESTAMP_PAST
    return None


def why_not_believed(reason: str) -> str:
    """What is wrong with a timestamp `timestamp_problem` refused, for its log line."""
    return {
        TIMESTAMP_NOT_FINITE: "is not a time",
        TIMESTAMP_FUTURE: f"is more than {FUTURE_SECONDS:g} s ahead of this machine's clock",
        TIMESTAMP_PAST: f"is more than {PAST_SECONDS:g} s behind this machine's clock",
    }.get(reason, reason)


class SummaryLog:
    """One line per kind at once, then at most one per `every` seconds saying how many came since.

    Driven by the caller's clock (`note` per event, `tick` once a round), with no timer thread, so
    no count is lost at a window's boundary: whatever was held back is reported by the first
    `note` or `tick` after the window, and by `flush` at the end.
    """

    def __init__(
        self, logger: logging.Logger, clock: Callable[[], float], every: float = SUMMARY_EVERY_SECONDS
    ) -> None:
        self._logger = logger
        self._clock = clock
        self._every = every
        self._logged_at: dict[str, float] = {}
        self._held: dict[str, tuple[int, str, int]] = {}
        """kind -> (events held back, the latest message, its level)."""
        self.counts: dict[str, int] = {}
        """Every event noted, per kind (for tests)."""

    def note(self, kind: str, message: str, level: int = logging.WARNING) -> None:
        now = self._clock()
        self.counts[kind] = self.counts.get(kind, 0) + 1
        logged_at = self._logged_at.get(kind)
        if logged_at is not None and now - logged_at < self._every:
            held, _, _ = self._held.get(kind, (0, "", level))
            self._held[kind] = (held + 1, message, level)
            return
        self._summarise(kind, now)
        self._logged_at[kind] = now
        self._logger.log(level, "%s (more of these are summarised once a minute)", message)

    def tick(self) -> None:
        """Report each kind whose window is over and that held events back."""
        if not self._held:
            return
        now = self._clock()
        for kind in [k for k, at in self._logged_at.items() if k in self._held and now - at >= self._every]:
            self._summarise(kind, now)
            self._logged_at[kind] = now

    def flush(self) -> None:
        """Report everything held back (at shutdown)."""
        now = self._clock()
        for kind in list(self._held):
            self._summarise(kind, now)

    def _summarise(self, kind: str, now: float) -> None:
        held = self._held.pop(kind, None)
        if held is None:
            return
        count, message, level = held
        since = now - self._logged_at.get(kind, now)
        self._logger.log(level, "%d more like this in the last %.0f s, the latest: %s", count, since, message)
