"""Scraped pages that lie about themselves, against a loopback dcgm-exporter (tests/upstream.py):
a body cut short of its Content-Length is a `connection` error, not a page; a whole line over
the 64 KiB limit is refused however it arrives; and lines beyond the 1,024-entity cap cost a
byte search, not a parse, so a 10,000-GPU page is read within the scrape deadline."""

from __future__ import annotations

import time

import pytest
from conftest import http_get, serve_process
from source_kit import scrape_options
from upstream import DRAM, PAGE, upstream, url_of

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import MAX_ENTITIES
from exporter.sampler import Sampler
from exporter.sources import open_source
from exporter.sources.base import SourceError
from exporter.sources.scrape import MAX_LINE_BYTES, PageReader

H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("cut", ["mid-number", "after-a-line", "first-byte"])
def test_a_body_short_of_its_content_length_is_a_connection_error(cut: str) -> None:
    at = {
        "mid-number": PAGE.index(DRAM.encode()) + 4,  # 0.712663 read as 0.71 if it passed
        "after-a-line": PAGE.index(b"\n", PAGE.index(b"DCGM_FI_PROF_DRAM_ACTIVE{")) + 1,
        "first-byte": 1,
    }[cut]
    with upstream() as server:
        server.cut_at = at
        source = open_source("scrape", scrape_options(url=url_of(server)))
        with pytest.raises(SourceError) as raised:
            source.read()
        assert raised.value.reason == "connection"
        assert "short of the Content-Length" in raised.value.message
        server.cut_at = None
        (sample,) = source.read()
        assert sample.values[fields.DRAM_ACTIVE] == pytest.approx(float(DRAM))


def test_a_cut_page_leaves_what_was_collected_and_counts_a_connection_error() -> None:
    with upstream() as server:
        options = scrape_options(url=url_of(server))
        sampler = Sampler(
            "scrape", options, load_catalog(), InferenceConfig(), source=open_source("scrape", options)
        )
        assert sampler.run_once()
        server.cut_at = PAGE.index(DRAM.encode()) + 4
        assert not sampler.run_once()
        snapshot = sampler.snapshot
        assert dict(snapshot.source.errors_total) == {"connection": 1}
        (gpu,) = snapshot.gpus  # kept within the grace period, with the whole page's values
        assert gpu.estimate is not None and gpu.estimate.dram_active == pytest.approx(float(DRAM))


LONG_LABEL = "x" * 70_000


def _page_with_a_long_label() -> bytes:
    """The fixture page with one series carrying a 70,000-character pod label (a whole line over
    the limit, which arrives in one piece or across two 64 KiB reads)."""
    line = (
        f'DCGM_FI_PROF_DRAM_ACTIVE{{gpu="0",UUID="GPU-long",modelName="{H100}",namespace="n",'
        f'pod="{LONG_LABEL}",container="c"}} 0.9\n'
    ).encode()
    assert len(line) > MAX_LINE_BYTES
    return line + PAGE


@pytest.mark.parametrize("piece", [len(_page_with_a_long_label()), 65536, 4096])
def test_a_whole_line_over_the_limit_is_refused_however_it_arrives(piece: int) -> None:
    page = _page_with_a_long_label()
    reader = PageReader(1.0)
    for start in range(0, len(page), piece):
        reader.feed(page[start : start + piece])
    samples = reader.finish()
    assert reader.skipped == {"line_too_long": 1}
    assert [s.entity.uuid for s in samples] == ["GPU-8e5c3a1f-2d4b-6c7e-9f01-23456789abcd"]
    assert samples[0].attribution is None
    assert samples[0].values[fields.DRAM_ACTIVE] == pytest.approx(float(DRAM))


@pytest.mark.slow
def test_serve_keeps_a_70000_character_label_out_of_metrics() -> None:
    """The issue's figure: the label turned /metrics from 41 KB into 2.9 MB."""
    with (
        upstream(_page_with_a_long_label) as server,
        serve_process("--source", "scrape", "--scrape-url", url_of(server)) as (base, _process),
    ):
        deadline = time.monotonic() + 20
        while True:
            status, metrics = http_get(base + "/metrics")
            if "ridgeline_dram_active_ratio{" in metrics or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert status == 200 and "ridgeline_dram_active_ratio{" in metrics
    assert LONG_LABEL[:1000] not in metrics
    assert len(metrics.encode()) < 100_000
    assert 'ridgeline_sample_errors_total{reason="corrupt_line"}' in metrics


def _many_gpus(gpus: int) -> bytes:
    """The fixture page's series repeated for `gpus` GPUs, each with its own label set."""
    series = [line for line in PAGE.split(b"\n") if line.startswith(b"DCGM_FI_")]
    out = [line for line in PAGE.split(b"\n") if line.startswith(b"#")]
    for gpu in range(gpus):
        for line in series:
            out.append(
                line.replace(b'gpu="0"', b'gpu="%d"' % gpu)
                .replace(b"GPU-8e5c3a1f", b"GPU-%08x" % gpu)
                .replace(b'device="nvidia0"', b'device="nvidia%d"' % gpu)
            )
    return b"\n".join(out) + b"\n"


def test_a_10000_gpu_page_is_read_within_the_deadline_and_cut_at_the_cap() -> None:
    page = _many_gpus(10_000)
    with upstream(lambda: page) as server:
        source = open_source("scrape", scrape_options(url=url_of(server)))
        samples = source.read()  # the default 5 s deadline: it timed out on every read before
    assert len(samples) == MAX_ENTITIES
    assert source.records_skipped == (10_000 - MAX_ENTITIES) * (PAGE.count(b"\nDCGM_FI_"))


def test_lines_beyond_the_cap_are_never_decoded_or_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The work per line, counted: every line of the 8,976 GPUs beyond the cap went through the
    label parse before it was skipped; now none reaches it, nor the known-GPU lookup on text
    (docs/sources.md has the timings)."""
    parsed: list[int] = []
    looked_up: list[int] = []
    labels_of, known_entry = PageReader._labels_of, PageReader._known_entry

    def counted_labels_of(self: PageReader, text: str) -> object:
        parsed.append(1)
        return labels_of(self, text)

    def counted_known_entry(self: PageReader, text: str) -> object:
        looked_up.append(1)
        return known_entry(self, text)

    monkeypatch.setattr(PageReader, "_labels_of", counted_labels_of)
    monkeypatch.setattr(PageReader, "_known_entry", counted_known_entry)
    page = _many_gpus(10_000)
    reader = PageReader(1.0)
    for start in range(0, len(page), 65536):
        reader.feed(page[start : start + 65536])
    assert len(reader.finish()) == MAX_ENTITIES
    series = PAGE.count(b"\nDCGM_FI_")
    assert reader.skipped == {"too_many_entities": (10_000 - MAX_ENTITIES) * series}
    assert len(parsed) <= MAX_ENTITIES * series
    assert len(looked_up) <= MAX_ENTITIES * series


@pytest.mark.slow
def test_serve_reads_a_10000_gpu_page_within_the_deadline() -> None:
    """The real process: the page is read (source up, 1,024 GPUs served) instead of timing out on
    every read."""
    page = _many_gpus(10_000)
    with (
        upstream(lambda: page) as server,
        serve_process("--source", "scrape", "--scrape-url", url_of(server), "--interval", "5") as (
            base,
            _process,
        ),
    ):
        deadline = time.monotonic() + 30
        while True:
            metrics = http_get(base + "/metrics")[1]
            if "ridgeline_samples_total 1" in metrics or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert 'ridgeline_source_up{source="scrape"} 1' in metrics
    assert "timeout" not in metrics
    assert metrics.count("ridgeline_dram_active_ratio{") == MAX_ENTITIES
