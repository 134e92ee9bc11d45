"""The scrape source reads cheaply: an unchanged page (same bytes, or a 304 to the upstream's own
ETag/Last-Modified) costs a comparison, not a parse, and gives what a parse would; lines of
families Ridgeline does not read are skipped before they are decoded; without --interval the
source reads the upstream at the cadence its page is seen to change. Against a real HTTP server
on 127.0.0.1 whose page the test changes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from exporter import fields
from exporter.catalog import load_catalog
from exporter.http_client import HTTPClientConfig
from exporter.inference import InferenceConfig, Totals
from exporter.sample import Sample
from exporter.sampler import Sampler
from exporter.sources.base import SourceOptions
from exporter.sources.scrape import (
    MAX_REMEMBERED_BYTES,
    MAX_SKIP_SECONDS,
    PageReader,
    ScrapeSettings,
    ScrapeSource,
    _Cadence,
    parse_page,
)

PAGES = Path(__file__).parent / "data" / "dcgm-exporter"


class _Upstream(ThreadingHTTPServer):
    """A dcgm-exporter stand-in whose page the test sets; it counts GETs and, when asked, answers
    conditional GETs with its ETag and Last-Modified."""

    daemon_threads = True
    body: bytes
    etag: str | None
    last_modified: str | None
    gets: int
    conditional: list[tuple[str | None, str | None]]
    not_modified: int
    connections: int
    close_after_each: bool


class _Handler(BaseHTTPRequestHandler):
    server: _Upstream
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        server = self.server
        server.gets += 1
        if server.close_after_each:
            self.close_connection = True  # an upstream that drops idle connections, silently
        match = self.headers.get("If-None-Match")
        since = self.headers.get("If-Modified-Since")
        server.conditional.append((match, since))
        unchanged = (match is not None and match == server.etag) or (
            match is None and since is not None and since == server.last_modified
        )
        if unchanged:
            server.not_modified += 1
            self.send_response(304)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(server.body)))
        if server.etag is not None:
            self.send_header("ETag", server.etag)
        if server.last_modified is not None:
            self.send_header("Last-Modified", server.last_modified)
        self.end_headers()
        self.wfile.write(server.body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream(("127.0.0.1", 0), _Handler)
    server.body = (PAGES / "legacy-h100-pods.txt").read_bytes()
    server.etag = None
    server.last_modified = None
    server.gets = 0
    server.conditional = []
    server.not_modified = 0
    server.connections = 0
    server.close_after_each = False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


class _Counting(PageReader):
    """A PageReader that counts the pages parsed and the lines its line reader decodes."""

    pages = 0
    decoded = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        _Counting.pages += 1

    def _family(self, name: str) -> tuple[int, float] | str | None:
        _Counting.decoded += 1  # every DCGM_FI_ line that is decoded asks for its family
        return super()._family(name)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[_Counting]:
    _Counting.pages = 0
    _Counting.decoded = 0
    monkeypatch.setattr("exporter.sources.scrape.PageReader", _Counting)
    return _Counting


def _open(upstream: _Upstream, **settings: Any) -> ScrapeSource:
    host, port = upstream.server_address[:2]
    source = ScrapeSource(SourceOptions(), ScrapeSettings(url=f"http://{host!s}:{port}/metrics", **settings))
    source.open()
    return source


def _without_stamps(samples: list[Sample]) -> list[tuple[object, ...]]:
    return [(s.entity, dict(s.values), s.attribution, s.hpc_job) for s in samples]


def test_an_unchanged_page_is_not_parsed_again_and_reads_as_a_parse_would(
    upstream: _Upstream, counting: type[_Counting]
) -> None:
    source = _open(upstream)
    first = source.read()
    second = source.read()
    assert upstream.gets == 2 and counting.pages == 1  # fetched twice, parsed once
    assert _without_stamps(second) == _without_stamps(first)
    assert _without_stamps(second) == _without_stamps(parse_page(upstream.body.decode(), 0.0))
    assert second == first  # stamps too: stamped when these bytes were first fetched


def test_a_changed_page_is_parsed(upstream: _Upstream, counting: type[_Counting]) -> None:
    source = _open(upstream)
    first = source.read()
    upstream.body = upstream.body.replace(b"} 0.", b"} 0.0")  # every ratio a tenth of itself
    second = source.read()
    assert counting.pages == 2
    before = first[0].values[fields.DRAM_ACTIVE]
    after = second[0].values[fields.DRAM_ACTIVE]
    assert before is not None and after is not None and after == pytest.approx(before / 10)


def test_a_page_with_its_own_stamps_keeps_them_when_unchanged(upstream: _Upstream) -> None:
    page = b""
    for line in (PAGES / "legacy-h100-pods.txt").read_bytes().splitlines():
        page += line + (b" 1764633600000" if line.startswith(b"DCGM_FI_") else b"") + b"\n"
    upstream.body = page
    source = _open(upstream)
    first, second = source.read(), source.read()
    assert {s.timestamp for s in first} == {1764633600.0}
    assert second == first  # the sampler takes them as duplicates: no new interval


def test_to_the_sampler_an_unchanged_page_is_no_new_interval(upstream: _Upstream) -> None:
    """dcgm-exporter collected nothing new: the repeat is a duplicate (no step, nothing integrated),
    the GPUs stay in the batch, and the next page's interval is integrated with its values."""
    source = _open(upstream)
    sampler = Sampler("scrape", SourceOptions(), load_catalog(), InferenceConfig(), source=source)
    assert sampler.run_once()
    first = [g.inference for g in sampler.snapshot.gpus]
    for _ in range(2):
        assert sampler.run_once()
        assert all(g.inference is f for g, f in zip(sampler.snapshot.gpus, first, strict=True))
    assert sampler.snapshot.source.samples_total == 3 and sampler.snapshot.source.up
    upstream.body = upstream.body.replace(b"} 0.", b"} 0.0")
    assert sampler.run_once()
    after = [g.inference for g in sampler.snapshot.gpus]
    assert all(a.timestamp > f.timestamp for a, f in zip(after, first, strict=True))
    assert sampler.snapshot.source.errors_total == {}


def test_series_skipped_on_an_unchanged_page_count_again_as_a_parse_would(upstream: _Upstream) -> None:
    upstream.body = (PAGES / "odd-gpu-labels.txt").read_bytes()
    source = _open(upstream)
    source.read()
    once = source.records_skipped
    source.read()
    assert once > 0 and source.records_skipped == 2 * once


def test_an_etag_is_sent_back_and_a_304_reuses_the_page(
    upstream: _Upstream, counting: type[_Counting]
) -> None:
    upstream.etag = '"page-1"'
    source = _open(upstream)
    first = source.read()
    second = source.read()
    assert upstream.conditional == [(None, None), ('"page-1"', None)]
    assert upstream.not_modified == 1 and counting.pages == 1
    assert _without_stamps(second) == _without_stamps(first)
    upstream.etag = '"page-2"'
    upstream.body = upstream.body.replace(b"} 0.", b"} 0.0")
    source.read()
    assert counting.pages == 2 and upstream.not_modified == 1


def test_last_modified_is_sent_back_as_if_modified_since(upstream: _Upstream) -> None:
    upstream.last_modified = "Wed, 02 Dec 2026 04:00:00 GMT"
    source = _open(upstream)
    source.read()
    source.read()
    assert upstream.conditional[-1] == (None, "Wed, 02 Dec 2026 04:00:00 GMT")
    assert upstream.not_modified == 1


def test_a_page_too_big_to_keep_is_parsed_every_time(upstream: _Upstream, counting: type[_Counting]) -> None:
    page = (PAGES / "legacy-h100-no-pods.txt").read_bytes()
    filler = b"# " + b"x" * 1000 + b"\n"
    upstream.body = page + filler * (MAX_REMEMBERED_BYTES // len(filler) + 1)
    source = _open(upstream)
    first = source.read()
    second = source.read()
    assert counting.pages == 2
    assert _without_stamps(second) == _without_stamps(first)


def test_lines_of_families_not_read_skip_the_decoder(counting: type[_Counting]) -> None:
    """dcgm-exporter's default counters carry ~40 families per GPU; Ridgeline reads 20. A line of
    an unread family for a GPU already known is dropped on its `NAME{` prefix, undecoded."""
    page = (PAGES / "legacy-h100-pods.txt").read_text()
    gpu_lines = [line for line in page.splitlines() if line.startswith("DCGM_FI_")]
    unread = [f"DCGM_FI_DEV_NOT_READ_{n}{{" + line.split("{", 1)[1] for n in range(10) for line in gpu_lines]
    plain = _Counting(0.0)
    plain.feed(page.encode())
    expected = plain.finish()
    baseline = counting.decoded
    counting.decoded = 0
    reader = _Counting(0.0)
    reader.feed((page + "\n".join(unread) + "\n").encode())
    assert _without_stamps(reader.finish()) == _without_stamps(expected)
    # of the 10 unread families, one line each is decoded (to learn what it is), no other
    assert counting.decoded == baseline + 10
    assert len(unread) > 10 * 2


def test_an_unread_line_bringing_a_pod_is_still_read() -> None:
    page = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3"} 50\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3"} 1\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",'
        'namespace="ml",pod="train-0"} 1\n'
    )
    (sample,) = parse_page(page, 0.0)
    assert sample.attribution is not None and sample.attribution.pod == "train-0"


def test_the_connection_is_kept_alive_between_reads(upstream: _Upstream) -> None:
    source = _open(upstream)
    for _ in range(5):
        source.read()
    assert upstream.gets == 5 and upstream.connections == 1
    source.close()
    source.read()
    assert upstream.connections == 2


def test_an_upstream_that_closed_the_kept_connection_is_read_on_a_new_one(upstream: _Upstream) -> None:
    """The server closes after each answer without saying so (no `Connection: close`): the next
    GET finds the kept socket dead and is sent again on a fresh one, with no error."""
    upstream.close_after_each = True
    source = _open(upstream)
    first = source.read()
    for _ in range(3):
        assert _without_stamps(source.read()) == _without_stamps(first)
    assert upstream.gets == 4 and upstream.connections == 4


def test_the_same_request_is_sent_until_the_credentials_change(upstream: _Upstream, tmp_path: Path) -> None:
    """While the token file and the validators stay the same, each GET is the one Request (the
    kept connection sends the bytes it built for it); the file is still read every GET, so a
    rotated token makes a new Request with the new header at once."""
    token = tmp_path / "token"
    token.write_text("first\n")
    source = _open(upstream, client=HTTPClientConfig(bearer_token_file=token))
    source.read()
    request = source._page_request(source._page)
    assert source._page_request(source._page) is request and request.authorization == "Bearer first"
    token.write_text("second\n")
    rotated = source._page_request(source._page)
    assert rotated is not request and rotated.authorization == "Bearer second"
    source.read()
    assert upstream.gets == 2


# -- the upstream's cadence ---------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reads(cadence: _Cadence, clock: _Clock, *, period: float, interval: float, seconds: float) -> int:
    """GETs over `seconds` of reads every `interval`, the page changing every `period`."""
    gets = 0
    last_version = -1
    start = clock.now
    while clock.now - start < seconds:
        if not cadence.may_skip():
            gets += 1
            version = int((clock.now - start) // period)
            cadence.saw(changed=last_version >= 0 and version != last_version)
            last_version = version
        clock.now += interval
    return gets


def test_following_the_upstream_gets_the_page_about_when_it_changes() -> None:
    clock = _Clock()
    cadence = _Cadence(1.0, clock)
    _reads(cadence, clock, period=30.0, interval=1.0, seconds=95.0)  # learns the cadence
    assert cadence.period is not None and 29.0 <= cadence.period <= 31.0
    gets = _reads(cadence, clock, period=30.0, interval=1.0, seconds=300.0)
    assert gets <= 300 / 30 * (4 + 300 / MAX_SKIP_SECONDS / 10 + 1)
    assert gets < 300 / 3  # against 300 GETs at every read


def test_following_the_upstream_sees_every_change_within_a_few_reads() -> None:
    clock = _Clock()
    cadence = _Cadence(1.0, clock)
    start = clock.now
    seen_at: list[float] = []
    last = -1
    while clock.now - start < 400:
        if not cadence.may_skip():
            version = int((clock.now - start - 0.5) // 30)
            cadence.saw(changed=last >= 0 and version != last)
            if last >= 0 and version != last:
                seen_at.append(clock.now - start - 0.5 - version * 30)
            last = version
        clock.now += 1.0
    assert len(seen_at) >= 12 and max(seen_at) <= 1.0  # each change seen at the next read


def test_an_upstream_that_changes_every_read_or_two_is_read_every_time() -> None:
    clock = _Clock()
    cadence = _Cadence(1.0, clock)
    assert _reads(cadence, clock, period=2.0, interval=1.0, seconds=100.0) == 100


def test_no_get_is_skipped_for_longer_than_the_cap() -> None:
    clock = _Clock()
    cadence = _Cadence(1.0, clock)
    _reads(cadence, clock, period=60.0, interval=1.0, seconds=200.0)
    last_get = clock.now
    longest = 0.0
    for _ in range(300):
        if not cadence.may_skip():
            cadence.saw(changed=False)
            longest = max(longest, clock.now - last_get)
            last_get = clock.now
        clock.now += 1.0
    assert 0 < longest <= MAX_SKIP_SECONDS


def test_the_source_skips_the_get_while_the_page_is_not_due(upstream: _Upstream) -> None:
    source = _open(upstream)
    clock = _Clock()
    source._cadence = _Cadence(1.0, clock)
    body = upstream.body
    for second in range(62):  # a read a second, the page changing every 30 s
        upstream.body = body.replace(b"} 0.", f"}} 0.{second // 30}".encode())
        source.read()
        clock.now += 1.0
    gets = upstream.gets
    clock.now += 3.0  # 5 s after the last change (at 60 s): the next is 25 s away
    skipped = source.read()
    assert upstream.gets == gets and skipped
    clock.now += 23.0  # due: read
    source.read()
    assert upstream.gets == gets + 1


@pytest.mark.parametrize(
    ("argv", "variable", "interval"),
    [([], None, 1.0), (["--interval", "0.1"], None, 0.1), ([], "0.5", 0.5)],
)
def test_serve_follows_the_upstream_at_the_interval_given_or_not(
    argv: list[str], variable: str | None, interval: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One mechanism for every interval: the source learns the upstream's cadence and GETs at
    the read interval around each due change, whether --interval was given or not."""
    from exporter.cli import build_parser
    from exporter.sources import source_options

    if variable is not None:
        monkeypatch.setenv("RIDGELINE_SERVE_INTERVAL", variable)
    values = build_parser().parse_args(
        ["serve", "--source", "scrape", "--scrape-url", "http://127.0.0.1:9400/metrics", *argv]
    )
    options = source_options("scrape", values)
    assert options.interval_seconds == interval
    settings = options.settings["scrape"]
    assert isinstance(settings, ScrapeSettings)
    assert ScrapeSource(options, settings)._cadence.interval == interval


def test_a_label_set_seen_before_is_read_without_a_decode(counting: type[_Counting]) -> None:
    """After its first line, a GPU's label set is settled: the lines of the other read families
    with it take their value from the bytes, and the page reads as the full path reads it."""
    page = (PAGES / "legacy-h100-pods.txt").read_text()
    gpu_lines = [line for line in page.splitlines() if line.startswith("DCGM_FI_")]
    label_sets = {line.split("{", 1)[1].rsplit("}", 1)[0] for line in gpu_lines}
    families = {line.split("{", 1)[0] for line in gpu_lines}
    samples = parse_page(page, 0.0)
    assert len(samples) == len(label_sets) and len(gpu_lines) == len(label_sets) * len(families)
    # each label set's first line, then each further family's first line: nothing else
    assert counting.decoded == len(label_sets) + len(families) - 1
    full = _Counting(0.0)
    full._settle = lambda *args: None  # type: ignore[method-assign]
    full.feed(page.encode())
    assert full.finish() == samples


def test_a_bad_job_label_is_counted_on_every_line_that_has_it() -> None:
    bad = 'gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",hpc_job="a b"'
    good = 'gpu="1",UUID="GPU-b",modelName="NVIDIA H100 80GB HBM3",hpc_job="42"'
    page = "".join(
        f"{name}{{{labels}}} 0.5\n"
        for name, labels in (
            ("DCGM_FI_PROF_DRAM_ACTIVE", bad),
            ("DCGM_FI_PROF_DRAM_ACTIVE", good),
            ("DCGM_FI_PROF_SM_ACTIVE", good),
            ("DCGM_FI_PROF_SM_ACTIVE", bad),  # a family and a label set both seen before
        )
    )
    reader = PageReader(0.0)
    reader.feed(page.encode())
    samples = reader.finish()
    assert reader.skipped == {"bad_hpc_job": 2}
    assert [s.hpc_job for s in samples] == [None, "42"]
    assert samples[0].values[fields.SM_ACTIVE] == 0.5


# -- batches: what the sampler folds about once a second -------------------------------------


def _stamped(body: bytes, version: int, stamp_ms: int) -> bytes:
    """The page of collection `version`: its ratios nudged, every series stamped `stamp_ms`."""
    lines = body.replace(b"} 0.", f"}} 0.{version % 10}".encode()).split(b"\n")
    return b"\n".join(
        line + f" {stamp_ms}".encode() if line.startswith(b"DCGM_FI_") else line for line in lines
    )


class _ReadOnly:
    """The source as the sampler saw it before batches: read() only, one fold per read."""

    name = "scrape"
    paced = False

    def __init__(self, source: ScrapeSource) -> None:
        self._source = source

    @property
    def records_skipped(self) -> int:
        return self._source.records_skipped

    def open(self) -> None:
        pass

    def read(self) -> list[Sample]:
        return self._source.read()

    def close(self) -> None:
        self._source.close()


def test_totals_over_a_run_of_unchanged_reads_equal_those_of_folding_every_read(
    upstream: _Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten reads a second of a page that changes every 1-3 s: the thread keeps the changed pages,
    the sampler folds them once a second, and every GPU's totals, stamp and recent intervals (the
    gap rule's window) equal those of folding every read, duplicates and all."""
    monkeypatch.setattr("exporter.sources.scrape._Gatherer.start", lambda self: None)  # reads by hand
    import time as _time

    start_ms = int((_time.time() - 600) * 1000)
    body = upstream.body
    options = SourceOptions(interval_seconds=0.1)
    catalog, config = load_catalog(), InferenceConfig()
    plain_source, batched_source = _open(upstream), _open(upstream)
    batched_source._cadence.interval = 0.1
    plain = Sampler("scrape", options, catalog, config, source=_ReadOnly(plain_source))  # type: ignore[arg-type]
    batched = Sampler("scrape", options, catalog, config, source=batched_source)
    handed: list[float] = []
    original_take = batched_source.read_batches

    def take() -> list[list[Sample]]:
        batches = original_take()
        handed.extend(batch[0].timestamp for batch in batches)
        return batches

    batched_source.read_batches = take  # type: ignore[method-assign]
    stamp = start_ms
    for read in range(120):
        if read % 10 == 0 or read % 17 == 0:  # a new collection every 1-1.7 s of reads
            stamp += 1000 + 100 * (read % 7)
            upstream.body = _stamped(body, read, stamp)
        assert plain.run_once()
        if read % 10 == 0:
            assert batched.run_once()
        else:
            assert batched_source._gatherer is not None and batched_source._gatherer.gather()
    assert batched.run_once() and plain.run_once()
    by_key = {(g.entity.uuid, g.entity.gpu_instance): g.inference for g in plain.snapshot.gpus}
    assert len(by_key) == 2 and len(batched.snapshot.gpus) == 2
    for gpu in batched.snapshot.gpus:
        expected = by_key[(gpu.entity.uuid, gpu.entity.gpu_instance)]
        assert gpu.inference.totals == expected.totals
        assert gpu.inference.timestamp == expected.timestamp
        assert gpu.inference.recent_intervals == expected.recent_intervals
        assert gpu.inference.totals != Totals()  # something was integrated
    # each collection handed over once, in order: no duplicate beyond one per quiet fold
    changed = sorted(set(handed))
    assert handed == sorted(handed) and len(changed) > 12
    assert batched.snapshot.source.samples_total < plain.snapshot.source.samples_total / 5


def test_the_thread_reads_between_the_samplers_reads_and_stops_on_close(upstream: _Upstream) -> None:
    import time as _time

    body = upstream.body
    source = _open(upstream)
    source._cadence.interval = 0.05
    first = source.read_batches()
    assert len(first) == 1 and source._gatherer is not None
    for version in range(1, 4):
        _time.sleep(0.25)
        upstream.body = body.replace(b"} 0.", f"}} 0.{version}".encode())
    _time.sleep(0.25)
    batches = source.read_batches()
    dram = [batch[0].values[fields.DRAM_ACTIVE] for batch in batches]
    assert len(batches) == 3 and len(set(dram)) == 3  # each change once, none repeated
    assert upstream.gets >= 10 and upstream.connections == 1
    assert source.read_batches() == [batches[-1]]  # nothing new: the last page once, a duplicate
    thread = source._gatherer._thread
    source.close()
    assert thread is not None and not thread.is_alive() and source._gatherer is None
    gets = upstream.gets
    _time.sleep(0.2)
    assert upstream.gets == gets


def test_a_failed_read_on_the_thread_is_raised_after_the_pages_before_it(
    upstream: _Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporter.sources.base import SourceError

    monkeypatch.setattr("exporter.sources.scrape._Gatherer.start", lambda self: None)
    body = upstream.body
    source = _open(upstream)
    source._cadence.interval = 0.1
    source.read_batches()
    gatherer = source._gatherer
    assert gatherer is not None
    upstream.body = body.replace(b"} 0.", b"} 0.0")
    assert gatherer.gather()
    upstream.body = b"# HELP nothing here\n"
    assert not gatherer.gather()
    (changed,) = source.read_batches()  # the page read before the failure, no read of its own
    assert (
        changed[0].values[fields.DRAM_ACTIVE] != parse_page(body.decode(), 0.0)[0].values[fields.DRAM_ACTIVE]
    )
    gets = upstream.gets
    with pytest.raises(SourceError) as failure:
        source.read_batches()
    assert failure.value.reason == "no_dcgm_metrics" and upstream.gets == gets


def test_with_an_interval_of_a_second_every_read_is_the_samplers(upstream: _Upstream) -> None:
    from exporter.sampler import FOLD_EVERY_SECONDS
    from exporter.sources.scrape import GATHER_BELOW_SECONDS

    assert GATHER_BELOW_SECONDS == FOLD_EVERY_SECONDS
    source = _open(upstream)
    for _ in range(3):
        assert len(source.read_batches()) == 1
    assert source._gatherer is None and upstream.gets == 3


@pytest.mark.parametrize("change", ["one_byte", "longer", "shorter"])
def test_a_page_that_differs_anywhere_from_the_last_is_parsed(
    upstream: _Upstream, counting: type[_Counting], change: str
) -> None:
    """The comparison is chunk by chunk as the body arrives: a byte changed mid-page (the same
    length), bytes added after the last page's end or a page cut short of it all read as new."""
    body = upstream.body
    middle = body.index(b"} 0.", len(body) // 2) + 3
    changed = {
        "one_byte": body[:middle] + b"9" + body[middle + 1 :],
        "longer": body + body.splitlines(keepends=True)[-1].replace(b'gpu="1"', b'gpu="2"'),
        "shorter": body[: body.rindex(b"\n", 0, len(body) - 1) + 1],
    }[change]
    assert changed != body and (change != "one_byte" or len(changed) == len(body))
    source = _open(upstream)
    source.read()
    upstream.body = changed
    samples = source.read()
    assert counting.pages == 2
    assert _without_stamps(samples) == _without_stamps(parse_page(changed.decode(), 0.0))


# -- a changed page with the same series: read by the last page's template -----------------------


def _revalued(body: bytes, k: int, stamp: bool = False) -> bytes:
    """The page with every DCGM_FI_ value changed (as a next collect changes them), and with
    `stamp`, a timestamp column added: the same series, line for line."""
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"DCGM_FI_") and b"}" in line:
            head, _, tail = line.rpartition(b"}")
            token = tail.split()[0] if tail.split() else b""
            try:
                value = float(token)
            except ValueError:
                out.append(line)
                continue
            new = value * (1 + k / 10) if value == value and abs(value) < 1e15 else value
            text = (b"%d" % new) if token.isdigit() else repr(new).encode()
            line = head + b"} " + text + (b" %d" % (1764633600000 + k) if stamp else b"")
        out.append(line)
    return b"\n".join(out)


def _full(body: bytes) -> PageReader:
    reader = PageReader(5.0, record=True)
    reader.feed(body)
    return reader


@pytest.mark.parametrize("name", sorted(p.name for p in PAGES.glob("*.txt")))
def test_a_page_with_the_same_series_reads_by_its_template_as_the_full_parse(name: str) -> None:
    from exporter.sources.scrape import replay

    body = (PAGES / name).read_bytes()
    first = _full(body)
    first.finish()
    template = first.template()
    if first.skipped or not first._series:
        assert template is None  # odd series are the full parse's to count
        return
    assert template is not None
    for k, stamp in ((1, False), (2, True), (3, False)):
        page = _revalued(body, k, stamp)
        replayed = replay(template, page, 5.0, ())
        expected = _full(page)
        samples = expected.finish()
        assert replayed is not None and not expected.skipped
        assert replayed.finish() == samples


def test_the_benchmarks_pages_read_by_their_template() -> None:
    import sys

    from exporter.sources.scrape import replay

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from bench_scrape_source import page

    for entities in (8, 56):
        first = _full(page(entities, 0))
        first.finish()
        template = first.template()
        assert template is not None
        for version in range(1, 6):
            body = page(entities, version)
            replayed = replay(template, body, 5.0, ())
            assert replayed is not None and replayed.finish() == _full(body).finish()


@pytest.mark.parametrize(
    "change",
    [
        "label",
        "added",
        "removed",
        "bad_value",
        "three_parts",
        "brace_in_value",
        "not_utf8",
        "too_long",
        "comment_to_series",
    ],
)
def test_a_page_whose_series_are_not_the_templates_takes_the_full_parse(change: str) -> None:
    from exporter.sources.scrape import MAX_LINE_BYTES, replay

    body = (PAGES / "legacy-h100-pods.txt").read_bytes()
    first = _full(body)
    first.finish()
    template = first.template()
    assert template is not None
    lines = body.split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b"DCGM_FI_PROF_DRAM_ACTIVE{"))
    unread = next(i for i, line in enumerate(lines) if line.startswith(b"DCGM_FI_DEV_FB_FREE{"))
    line = lines[at]
    head, _, _ = line.rpartition(b"}")
    edited = list(lines)
    if change == "label":
        edited[at] = line.replace(b'pod="', b'pod="x')
    elif change == "added":
        edited.insert(at + 1, line)
    elif change == "removed":
        del edited[at]
    elif change == "bad_value":
        edited[at] = head + b"} 0.3x"
    elif change == "three_parts":
        edited[at] = head + b"} 0.3 1 2"
    elif change == "brace_in_value":
        edited[at] = head + b"} 0.3 }"
    elif change == "not_utf8":
        edited[unread] = lines[unread].rpartition(b"}")[0] + b"} \xff"
    elif change == "too_long":
        edited[unread] = lines[unread].rpartition(b"}")[0] + b"} " + b"1" * MAX_LINE_BYTES
    elif change == "comment_to_series":
        comment = next(i for i, line in enumerate(lines) if line.startswith(b"# HELP"))
        edited[comment] = line
    assert replay(template, b"\n".join(edited), 5.0, ()) is None


def test_the_source_reads_a_changed_page_by_its_template(
    upstream: _Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporter.sources import scrape

    results: list[bool] = []
    original = scrape.replay

    def counted(*args: object) -> PageReader | None:
        reader = original(*args)  # type: ignore[arg-type]
        results.append(reader is not None)
        return reader

    monkeypatch.setattr(scrape, "replay", counted)
    body = upstream.body
    source = _open(upstream)
    source.read()
    assert results == []  # the first page: parsed whole, its template kept
    upstream.body = _revalued(body, 1)
    changed = source.read()
    assert results == [True]
    assert _without_stamps(changed) == _without_stamps(parse_page(upstream.body.decode(), 0.0))
    upstream.body = upstream.body.replace(b'pod="', b'pod="x', 1)  # a new series: parsed whole
    source.read()
    upstream.body = _revalued(upstream.body, 2)
    source.read()
    assert results == [True, False, True]


def test_a_series_printed_twice_keeps_its_first_value_by_the_template_too() -> None:
    from exporter.sources.scrape import replay

    lines = (PAGES / "legacy-h100-pods.txt").read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b"DCGM_FI_PROF_DRAM_ACTIVE{"))
    body = b"\n".join([*lines[: at + 1], lines[at].rpartition(b"}")[0] + b"} 0.99", *lines[at + 1 :]])
    first = _full(body)
    first.finish()
    template = first.template()
    assert template is not None
    page = _revalued(body, 1)
    replayed = replay(template, page, 5.0, ())
    assert replayed is not None and replayed.finish() == _full(page).finish()


@pytest.mark.parametrize(
    "value",
    [b"1", b"0", b"-0.0", b"1.02", b"1.05", b"1.2", b"-0.5", b"NaN", b"+Inf", b"1e300", b"140737488355328"],
)
@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("legacy-h100-pods.txt", b"DCGM_FI_PROF_DRAM_ACTIVE{"),
        ("legacy-h100-pods.txt", b"DCGM_FI_DEV_SM_CLOCK{"),
        ("legacy-h100-pods.txt", b"DCGM_FI_DEV_GPU_UTIL{"),
        ("renamed-4.9-h100.txt", b"DCGM_FI_DEV_SM_CLOCK_HERTZ{"),  # a factor: 1e-6 MHz per Hz
    ],
)
def test_an_odd_value_reads_by_the_template_as_the_full_parse(name: str, family: bytes, value: bytes) -> None:
    """replay keeps a plain value as it is and hands any other to fields.clean_value: a ratio
    clamped or dropped, a negative, NaN, infinite or blank value dropped (a blank in hertz too,
    not scaled into a number), as the full parse."""
    from exporter.sources.scrape import replay

    body = (PAGES / name).read_bytes()
    first = _full(body)
    first.finish()
    template = first.template()
    assert template is not None
    lines = body.split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(family))
    lines[at] = lines[at].rpartition(b"}")[0] + b"} " + value
    page = b"\n".join(lines)
    replayed = replay(template, page, 5.0, ())
    assert replayed is not None and replayed.finish() == _full(page).finish()
