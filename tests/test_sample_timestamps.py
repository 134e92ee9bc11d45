"""Sample timestamps are checked before they are believed (exporter/sample_checks.py): a scraped
page stamped NaN, +Inf, in 2100, an hour ago or going backwards is a counted skip with its reason,
never a frozen GPU or a 500; /readyz says when the data stopped moving; and no first interval or
gap is integrated past the cap. Against a loopback dcgm-exporter (tests/upstream.py), real replay
files and the real `serve` process."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import pytest
from conftest import http_get, http_until, serve_process
from source_kit import replay_options, scrape_options
from upstream import DRAM, Upstream, millis, stamped, upstream, url_of

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample_checks import FUTURE_SECONDS, PAST_SECONDS, SummaryLog, timestamp_problem
from exporter.sampler import Sampler
from exporter.sources import open_source
from exporter.sources.base import SourceOptions

CATALOG = load_catalog()
NOW = 1_780_000_000.0
"""The wall clock the in-process samplers are given (2026)."""


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def scrape_sampler(server: Upstream, clock: Clock) -> Sampler:
    options = scrape_options(url=url_of(server), interval_seconds=1.0)
    source = open_source("scrape", options)
    return Sampler(
        "scrape",
        options,
        CATALOG,
        InferenceConfig(smoothing_seconds=0.0, dwell_seconds=0.0),
        source=source,
        wall_clock=clock,
    )


def dram(sampler: Sampler) -> float | None:
    (gpu,) = sampler.snapshot.gpus
    estimate = gpu.estimate
    return None if estimate is None else estimate.dram_active


def errors(sampler: Sampler) -> dict[str, int]:
    return dict(sampler.snapshot.source.errors_total)


@pytest.mark.parametrize(
    ("stamp", "reason"),
    [("NaN", "timestamp_not_finite"), ("+Inf", "timestamp_not_finite"), ("-Inf", "timestamp_not_finite")],
)
def test_a_page_stamped_nan_or_inf_is_skipped_and_counted_and_the_gpu_moves_on(
    stamp: str, reason: str
) -> None:
    clock = Clock()
    page = [stamped(millis(NOW))]
    with upstream(lambda: page[0]) as server:
        sampler = scrape_sampler(server, clock)
        assert sampler.run_once()
        assert dram(sampler) == pytest.approx(float(DRAM))
        page[0] = stamped(stamp, dram="0.2")
        clock.now += 1
        assert sampler.run_once()
        assert errors(sampler) == {reason: 1}
        assert all(math.isfinite(g.last_sample_timestamp) for g in sampler.snapshot.gpus)
        page[0] = stamped(millis(clock.now + 1), dram="0.3")
        clock.now += 1
        assert sampler.run_once()
        assert dram(sampler) == pytest.approx(0.3), "the GPU is not frozen by the bad page"


@pytest.mark.parametrize(
    ("offset", "reason"),
    [
        (FUTURE_SECONDS + 1, "timestamp_future"),
        (4_102_444_800 - NOW, "timestamp_future"),
        (-PAST_SECONDS - 1, "timestamp_past"),
        (1 - NOW, "timestamp_past"),
    ],
    ids=["6-min-ahead", "year-2100", "an-hour-ago", "epoch-plus-1s"],
)
def test_a_page_stamped_outside_the_window_is_refused_and_never_freezes_the_gpu(
    offset: float, reason: str
) -> None:
    clock = Clock()
    page = [stamped(millis(NOW + offset), dram="0.2")]
    with upstream(lambda: page[0]) as server:
        sampler = scrape_sampler(server, clock)
        assert sampler.run_once()
        assert errors(sampler) == {reason: 1}
        assert sampler.snapshot.gpus == ()
        ready, why = sampler.snapshot.readiness(now=clock.now)
        assert not ready and f"was refused ({reason})" in why, why
        for step in range(1, 4):
            page[0] = stamped(millis(NOW + step), dram=f"0.{step}")
            clock.now = NOW + step
            assert sampler.run_once()
            assert dram(sampler) == pytest.approx(step / 10)
        assert errors(sampler) == {reason: 1}
        assert sampler.snapshot.readiness(now=clock.now) == (True, "ready")
        totals = sampler.snapshot.gpus[0].totals
        assert totals.integrated_seconds == pytest.approx(2.0), "nothing of the refused page integrated"


def test_a_window_edge_is_believed() -> None:
    assert timestamp_problem(NOW + FUTURE_SECONDS, NOW, live=True) is None
    assert timestamp_problem(NOW - PAST_SECONDS, NOW, live=True) is None
    assert timestamp_problem(1.0, NOW, live=False) is None, "a replay plays trace time"
    assert timestamp_problem(math.nan, NOW, live=False) == "timestamp_not_finite"


def test_backwards_stamps_are_counted_and_restart_the_gpus_timeline() -> None:
    clock = Clock()
    page = [stamped(millis(NOW))]
    with upstream(lambda: page[0]) as server:
        sampler = scrape_sampler(server, clock)
        assert sampler.run_once()
        clock.now += 1
        page[0] = stamped(millis(NOW + 1))
        assert sampler.run_once()
        before = sampler.snapshot.gpus[0].totals
        page[0] = stamped(millis(NOW - 100), dram="0.25")  # the upstream's clock stepped back
        clock.now += 1
        assert sampler.run_once()
        assert errors(sampler) == {"timestamp_backwards": 1}
        (gpu,) = sampler.snapshot.gpus
        assert gpu.last_sample_timestamp == pytest.approx(NOW - 100)
        assert dram(sampler) == pytest.approx(0.25), "the GPU follows the new timeline"
        assert gpu.totals.integrated_seconds == before.integrated_seconds, "the jump is not integrated"
        page[0] = stamped(millis(NOW - 99), dram="0.35")
        clock.now += 1
        assert sampler.run_once()
        assert dram(sampler) == pytest.approx(0.35)
        assert sampler.snapshot.gpus[0].totals.integrated_seconds == pytest.approx(
            before.integrated_seconds + 1
        )
        assert errors(sampler) == {"timestamp_backwards": 1}


def test_readiness_says_when_the_data_stopped_moving_while_the_source_answers() -> None:
    clock = Clock()
    with upstream(lambda: stamped(millis(NOW))) as server:  # one stamp, for ever
        sampler = scrape_sampler(server, clock)
        assert sampler.run_once()
        assert sampler.snapshot.readiness(now=clock.now) == (True, "ready")
        stalled = sampler.snapshot.stalled_seconds
        for _ in range(int(stalled // 10) + 1):
            clock.now += 10
            assert sampler.run_once()
        snapshot = sampler.snapshot
        assert snapshot.source.up and snapshot.source.last_sample_wall_time == clock.now, "it answers"
        assert snapshot.source.data_advanced_wall_time == NOW
        ready, why = snapshot.readiness(now=clock.now)
        assert not ready and "stopped moving" in why, why
        assert errors(sampler) == {}, "a repeated stamp is no error: dcgm-exporter collects every 30 s"


def test_refused_samples_are_logged_once_then_summarised_without_losing_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    logger = logging.getLogger("test.summary")
    notes = SummaryLog(logger, clock, every=60.0)
    with caplog.at_level(logging.WARNING, logger="test.summary"):
        for second in range(150):
            clock.now = NOW + second
            notes.note("timestamp_future", f"sample {second}")
            notes.tick()
        notes.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 6, lines  # per minute: the first at once, the rest in one summary
    held = sum(int(line.split(" more like this")[0]) for line in lines if " more like this" in line)
    logged_at_once = sum(1 for line in lines if "summarised once a minute" in line)
    assert held + logged_at_once == 150 == notes.counts["timestamp_future"]


def write_jsonl(path: Path, rows: list[tuple[float, float]]) -> Path:
    lines = [
        json.dumps(
            {
                "ts": ts,
                "gpu": 0,
                "uuid": "GPU-ts",
                "model": "NVIDIA H100 80GB HBM3",
                "fields": {str(fields.DRAM_ACTIVE): d, str(fields.PIPE_TENSOR_ACTIVE): 0.5},
            }
        )
        for ts, d in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def play(path: Path) -> Sampler:
    options = replay_options(path=str(path), speed=None)
    sampler = Sampler("replay", options, CATALOG, InferenceConfig(), source=open_source("replay", options))
    while not sampler.snapshot.source.finished:
        sampler.run_once()
    return sampler


def test_a_replay_line_stamped_minus_5_integrates_no_decades(tmp_path: Path) -> None:
    """`"ts": -5` then a trace of 10 one-second samples: the first interval (1.8e9 s) has only
    --interval to be judged by, so it is a gap; the 9 that follow are integrated."""
    rows = [(-5.0, 0.5)] + [(1_764_432_000.0 + i, 0.5) for i in range(10)]
    sampler = play(write_jsonl(tmp_path / "minus5.jsonl", rows))
    (gpu,) = sampler.snapshot.gpus
    totals = gpu.totals
    assert totals.integrated_seconds == pytest.approx(9.0)
    assert totals.regime_seconds is not None and sum(totals.regime_seconds.values()) == pytest.approx(9.0)
    assert totals.flop_total is not None and totals.flop_total < 1e17


def test_a_replay_gap_after_a_steady_run_is_not_integrated(tmp_path: Path) -> None:
    rows = [(1000.0 + i, 0.5) for i in range(5)] + [(1e9 + i, 0.5) for i in range(3)]
    totals = play(write_jsonl(tmp_path / "gap.jsonl", rows)).snapshot.gpus[0].totals
    assert totals.integrated_seconds == pytest.approx(4.0 + 2.0)


@pytest.mark.slow
def test_serve_answers_200_through_nan_and_inf_pages_and_then_follows_the_gpu() -> None:
    """The real process: a good page, then NaN and +Inf stamps; /classify, /classify/0 and
    /live.json stay 200 with no NaN, the reasons are counted in /metrics, /readyz says the data
    stopped, and a good page afterwards is followed at once (the GPU is not frozen)."""
    mode = ["good", "0.45"]

    def page() -> bytes:
        stamp = millis(time.time()) if mode[0] == "good" else mode[0]
        return stamped(stamp, dram=mode[1])

    args = ("--source", "scrape", "--scrape-url", "", "--interval", "0.2", "--smoothing-seconds", "0")
    with upstream(page) as server:
        args = (*args[:3], url_of(server), *args[4:])
        with serve_process(*args) as (base, _process):
            assert http_until(base, "/readyz", "ready").strip() == "ready"
            for bad in ("NaN", "+Inf"):
                mode[:] = [bad, "0.2"]
                requests = server.requests
                while server.requests < requests + 2:  # a page read with this stamp
                    time.sleep(0.05)
                # published within about a second (batches due faster are not published one by one)
                http_until(base, "/readyz", "refused (timestamp_not_finite)")
            # both bad pages counted: the scrape source folds its reads about once a second
            deadline = time.monotonic() + 10
            while True:
                metrics = http_get(base + "/metrics")[1]
                refused = [line for line in metrics.splitlines() if 'reason="timestamp_not_finite"' in line]
                if (refused and float(refused[0].split()[-1]) >= 2) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert refused and float(refused[0].split()[-1]) >= 2
            for path in ("/classify", "/classify/0", "/live.json"):
                status, body = http_get(base + path)
                # GPU 0 may be gone already (its samples refused past the grace): 404, never 500
                assert status == 200 or (path == "/classify/0" and status == 404), (path, status, body[:300])
                assert "NaN" not in body and "Infinity" not in body, (path, body[:300])
            mode[:] = ["good", "0.65"]
            gpu = json.loads(http_until(base, "/classify/0", '"dram_active": 0.65'))
            assert math.isfinite(gpu["timestamp"]) and abs(gpu["timestamp"] - time.time()) < 60
            assert http_until(base, "/readyz", "ready").strip() == "ready"


def test_ingest_takes_trace_time_and_checks_only_finiteness() -> None:
    from exporter.sample import Entity, Sample

    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    gpu = Entity(0, "GPU-ingest", "NVIDIA H100 80GB HBM3")
    values = {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.5}
    sampler.ingest([Sample(1000.0, gpu, values)])
    sampler.ingest([Sample(math.nan, gpu, values)])
    assert dict(sampler.snapshot.source.errors_total) == {"timestamp_not_finite": 1}
    assert sampler.snapshot.gpus[0].last_sample_timestamp == 1000.0
