"""The scrape source GETs the page when the upstream's cadence says a change may be there, with
or without --interval: the promises it keeps, against a real HTTP server on 127.0.0.1 whose
page changes on a schedule. Time is a test clock, shared by the schedule and the source's
cadence, so each bound is checked exactly (no timed assertion): a change is seen within one
interval while the cadence holds; when it moves (dcgm-exporter restarted with another `-c`) a
change is seen late at most by one blind spell and then within one interval again; a stalled
page is read every interval; an upstream that fails is noticed within one learned period."""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from exporter.cli import build_parser
from exporter.sources import source_options
from exporter.sources.base import SourceError
from exporter.sources.scrape import MAX_SKIP_SECONDS, ScrapeSettings, ScrapeSource, _Cadence, _Gatherer

PAGE = (Path(__file__).parent / "data" / "dcgm-exporter" / "legacy-h100-pods.txt").read_bytes()
EPSILON = 1e-6


class _Scheduled(ThreadingHTTPServer):
    """A dcgm-exporter stand-in serving page `version` (its values nudged by it), or a 500 while
    `failing`; it counts GETs."""

    daemon_threads = True
    version: int
    failing: bool
    gets: int


class _Handler(BaseHTTPRequestHandler):
    server: _Scheduled
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as Go's server: the body is not held for the headers' ACK

    def do_GET(self) -> None:
        self.server.gets += 1
        if self.server.failing:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = PAGE.replace(b"} 0.", f"}} 0.{self.server.version + 1}".encode())
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def upstream() -> Iterator[_Scheduled]:
    server = _Scheduled(("127.0.0.1", 0), _Handler)
    server.version = 0
    server.failing = False
    server.gets = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class _Run:
    """What reading every interval saw: when each version was first seen, each read's time and
    whether it was a GET, and when a read failed."""

    seen: dict[int, float] = field(default_factory=dict)
    reads: list[tuple[float, bool]] = field(default_factory=list)
    failed_at: list[float] = field(default_factory=list)


def _source(upstream: _Scheduled, interval: float, clock: _Clock) -> ScrapeSource:
    """The source `serve --source scrape --scrape-url ... --interval S` builds, on the test clock."""
    host, port = upstream.server_address[:2]
    values = build_parser().parse_args(
        ["serve", "--source", "scrape", "--scrape-url", f"http://{host!s}:{port}/metrics",
         "--interval", f"{interval:g}"]
    )  # fmt: skip
    options = source_options("scrape", values)
    settings = options.settings["scrape"]
    assert isinstance(settings, ScrapeSettings) and options.interval_seconds == interval
    source = ScrapeSource(options, settings)
    source.open()
    source._cadence._clock = clock
    return source


def _read_every_interval(
    source: ScrapeSource,
    upstream: _Scheduled,
    clock: _Clock,
    changes: list[float],
    *,
    interval: float,
    seconds: float,
    failing_from: float | None = None,
) -> _Run:
    """Reads at each interval for `seconds`, the upstream's page changing at each of `changes`
    (seconds from the start) and failing from `failing_from`. Every read hands out samples."""
    run = _Run()
    start = clock.now
    tick = 0
    while tick * interval < seconds:
        at = tick * interval
        tick += 1
        clock.now = start + at
        upstream.version = bisect.bisect_right(changes, at + EPSILON)
        upstream.failing = failing_from is not None and at >= failing_from - EPSILON
        gets = upstream.gets
        try:
            samples, new = source._read_page()
        except SourceError:
            run.failed_at.append(at)
            run.reads.append((at, True))
            continue
        assert samples  # a skipped read serves the last page, as an unchanged one does
        run.reads.append((at, upstream.gets > gets))
        if new:
            run.seen.setdefault(upstream.version, at)
    clock.now = start + seconds
    return run


def _late(run: _Run, changes: list[float]) -> dict[float, float]:
    """How long after it appeared each change was first seen (None: never)."""
    return {
        appeared: run.seen[version] - appeared
        for version, appeared in enumerate(changes, start=1)
        if version in run.seen
    }


def test_a_steady_cadence_is_seen_within_one_interval_with_a_fraction_of_the_gets(
    upstream: _Scheduled,
) -> None:
    """--interval 0.1 against a page collected every second: every change is seen by the read
    after it appeared, and once the cadence is learned three GETs a change are made, not ten."""
    clock = _Clock()
    source = _source(upstream, 0.1, clock)
    changes = [0.35 + k for k in range(40)]
    run = _read_every_interval(source, upstream, clock, changes, interval=0.1, seconds=40.0)
    late = _late(run, changes)
    assert len(late) == len(changes)
    assert max(late.values()) <= 0.1 + EPSILON
    assert sum(got for at, got in run.reads if at >= 5.0) <= 35 * 4  # of 350 reads


@pytest.mark.parametrize(("interval", "period", "seconds"), [(0.1, 1.0, 30.0), (1.0, 30.0, 200.0)])
def test_no_read_skips_for_longer_than_the_cap(
    upstream: _Scheduled, interval: float, period: float, seconds: float
) -> None:
    """Default (1 s reads of a 30 s collect) or --interval 0.1 of a 1 s one: no two GETs are
    further apart than MAX_SKIP_SECONDS, every change is seen within an interval, and most
    reads make no GET."""
    clock = _Clock()
    source = _source(upstream, interval, clock)
    changes = [0.5 + period * k for k in range(int(seconds / period))]
    run = _read_every_interval(source, upstream, clock, changes, interval=interval, seconds=seconds)
    get_times = [at for at, got in run.reads if got]
    assert max(b - a for a, b in itertools.pairwise(get_times)) <= MAX_SKIP_SECONDS + EPSILON
    assert max(_late(run, changes).values()) <= interval + EPSILON
    assert len(get_times) < len(run.reads) / 2


def test_a_cadence_that_moves_is_relearned_and_a_change_is_late_at_most_by_one_blind_spell(
    upstream: _Scheduled,
) -> None:
    """dcgm-exporter collecting every 3 s restarts with -c 500 ms, later with -c 2 s. The first
    change after the shorter cadence is seen by the next GET, late by at most the blind spell
    before it (the old cadence less two intervals; the pages of that spell are lost), and it
    makes the source poll every read until it learned the new cadence: from then every change
    is seen within one interval again. The longer cadence loses nothing: a change that is due
    and has not come is polled for every interval."""
    clock = _Clock()
    interval = 0.1
    source = _source(upstream, interval, clock)
    first = [0.35 + 3.0 * k for k in range(5)]  # every 3 s, to 12.35
    shorter = [13.05 + 0.5 * k for k in range(16)]  # every 0.5 s, to 20.55
    longer = [21.33 + 2.0 * k for k in range(10)]  # every 2 s
    changes = first + shorter + longer
    run = _read_every_interval(source, upstream, clock, changes, interval=interval, seconds=42.0)
    late = _late(run, changes)
    blind_spell = 3.0 - 2 * interval
    relearned = shorter[0] + blind_spell + 3 * 0.5  # the spell, then two changes to learn from
    for appeared, after in late.items():
        assert after <= (blind_spell if shorter[0] <= appeared < relearned else interval) + EPSILON
    assert all(appeared in late for appeared in changes if not shorter[0] <= appeared < relearned)
    assert len(changes) - len(late) <= blind_spell / 0.5  # the blind spell's pages, no more


def test_a_stalled_page_is_read_every_interval(upstream: _Scheduled) -> None:
    """The page stops changing (dcgm-exporter lost DCGM and serves its last collect): two
    intervals after the change that was due, every read GETs again, so nothing of the stall is
    hidden from what reads the page's bytes and stamps."""
    clock = _Clock()
    source = _source(upstream, 0.1, clock)
    changes = [0.35 + k for k in range(10)]  # the last at 9.35, seen at 9.4
    run = _read_every_interval(source, upstream, clock, changes, interval=0.1, seconds=20.0)
    due = 9.4 + 1.0 + 2 * 0.1
    assert all(got for at, got in run.reads if at > due + EPSILON)
    assert not all(got for at, got in run.reads if 5.0 <= at <= 9.0)  # it did skip before


@pytest.mark.parametrize(("interval", "period"), [(0.1, 1.0), (1.0, 30.0)])
def test_an_upstream_that_fails_is_noticed_within_one_learned_period(
    upstream: _Scheduled, interval: float, period: float
) -> None:
    """The upstream starts failing just after a change was seen, the longest it can go unseen:
    the failing read comes within the learned period (or MAX_SKIP_SECONDS) plus an interval,
    and after it every read GETs (the cadence is forgotten)."""
    clock = _Clock()
    source = _source(upstream, interval, clock)
    changes = [0.35 + period * k for k in range(12)]
    down = 0.35 + period * 6 + interval + EPSILON * 2
    run = _read_every_interval(
        source, upstream, clock, changes, interval=interval, seconds=period * 8, failing_from=down
    )
    assert run.failed_at
    assert run.failed_at[0] - down <= min(period, MAX_SKIP_SECONDS) + interval + EPSILON
    assert all(got for at, got in run.reads if at >= run.failed_at[0])


def test_the_reading_thread_sleeps_until_the_next_get_is_due() -> None:
    """The source's thread does not wake for reads the cadence would skip: with the next GET an
    hour away it reads nothing; with it due now it reads at its interval."""
    reads: list[float] = []

    def read() -> tuple[list[object], bool]:
        reads.append(time.monotonic())
        return [], False

    def gathered(due: Callable[[], float], wanted: int, patience: float) -> int:
        gatherer = _Gatherer(read, 0.01, lambda: None, due)  # type: ignore[arg-type]
        reads.clear()
        gatherer.start()
        waited = 0.0
        while len(reads) < wanted and waited < patience:
            time.sleep(0.05)
            waited += 0.05
        gatherer.stop(5.0)
        return len(reads)

    assert gathered(lambda: 0.0, 3, 5.0) >= 3
    assert gathered(lambda: time.monotonic() + 3600.0, 1, 0.5) == 0


def test_the_next_due_time_reads_whole_while_a_read_forgets_the_cadence() -> None:
    """The source's thread asks due_at without the read lock while the sampler's read may be
    forgetting the cadence: due_at reads one snapshot (last change, period), so a forget caught
    halfway (the changes cleared, the period not yet) gives the learned time, not an error."""
    clock = _Clock()
    cadence = _Cadence(1.0, clock)
    cadence.saw(changed=False)
    for second in range(1, 11):  # a GET a second, a change every 5 s
        clock.now += 1.0
        cadence.saw(changed=second % 5 == 0)
    learned = cadence.due_at()
    assert learned == pytest.approx(clock.now + 5.0 - 2.0)
    cadence._changes = []  # where a forget() on the other thread has got to
    assert cadence.due_at() == learned
    cadence.forget()
    assert cadence.due_at() == 0.0
