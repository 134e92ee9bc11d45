"""Lifecycle faults of the data path: `ridgeline record` onto a full disk is one line and exit 2;
31 MB of blank lines at the head of a replay cost a scan, not 31 million parser steps; a looping
replay truncated to 0 bytes is down until it has samples again, not finished for good; and the
once-a-minute log summaries lose no count at the minute's boundary. Real files, the real
processes, /dev/full for ENOSPC."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import http_get, http_until, serve_process
from source_kit import replay_options

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sampler import Sampler
from exporter.sources import open_source
from exporter.sources.replay_formats.lines import physical_lines, read_lines
from exporter.web.ratelog import EveryMinute

ROOT = Path(__file__).resolve().parent.parent
DEMO = gzip.decompress((ROOT / "exporter" / "data" / "demo.jsonl.gz").read_bytes())
HEAD = DEMO[: DEMO.index(b"\n", 200_000) + 1]
"""The demo trace's first ~200 KB: whole lines, 8 GPUs."""


def record(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", "record", "--replay", "demo", "--speed", "max", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (ENOSPC on every write)")
@pytest.mark.parametrize("name", ["full.jsonl", "full.jsonl.gz"])
def test_record_onto_a_full_disk_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    out.symlink_to("/dev/full")
    done = record(out)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        f"ridgeline record: error: cannot write {out}: No space left on device (0 samples written)"
    ]
    assert "Traceback" not in done.stderr + done.stdout


def test_a_run_of_blank_lines_is_one_line_to_the_parsers_and_keeps_the_numbers() -> None:
    blank = 31_000_000
    data = b"\n" * blank + b'{"ts": 1}\n\n\nnot json\n'
    chunks = (data[i : i + 65536] for i in range(0, len(data), 65536))
    lines = list(physical_lines(chunks))
    assert len(lines) <= len(data) // 65536 + 5, "a run costs one line per 64 KiB read at most"
    texts = [(n, t) for n, t in lines if t]
    assert texts == [(blank + 1, '{"ts": 1}'), (blank + 4, "not json")]
    assert lines[-1][0] == blank + 4


def _open_seconds(path: Path) -> float:
    started = time.perf_counter()
    open_source("replay", replay_options(path=str(path), speed=None))
    return time.perf_counter() - started


def test_blank_lines_at_the_head_cost_no_more_than_reading_them(tmp_path: Path) -> None:
    """Ratio in one run: opening a replay behind 4 MB of blank lines against opening it plain.
    Each blank line was a trip through the line reader, detection and the parser: ~10 µs each."""
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(HEAD)
    padded = tmp_path / "padded.jsonl"
    padded.write_bytes(b"\n" * 4_000_000 + HEAD)
    _open_seconds(plain)
    ratio = min(_open_seconds(padded) for _ in range(2)) / min(_open_seconds(plain) for _ in range(2))
    assert ratio < 10, f"4 MB of blank lines made open() {ratio:.0f}x slower"


@pytest.mark.slow
def test_serve_is_serving_soon_after_31_mb_of_blank_lines(tmp_path: Path) -> None:
    """The real process: before, "serving" came 89 s after start (the port bound meanwhile);
    serve_process gives it 30 s."""
    trace = tmp_path / "blank-head.jsonl"
    trace.write_bytes(b"\n" * 31_000_000 + HEAD)
    with serve_process("--replay", str(trace), "--speed", "max") as (base, _process):
        deadline = time.monotonic() + 20
        while "ridgeline_samples_total" not in http_get(base + "/metrics")[1]:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def _line(ts: float) -> str:
    values = {str(fields.DRAM_ACTIVE): 0.5, str(fields.PIPE_TENSOR_ACTIVE): 0.5}
    return json.dumps(
        {"ts": ts, "gpu": 0, "uuid": "GPU-loop", "model": "NVIDIA H100 80GB HBM3", "fields": values}
    )


def test_a_looping_replay_truncated_to_0_bytes_is_down_until_it_has_samples_again(tmp_path: Path) -> None:
    trace = tmp_path / "loop.jsonl"
    content = "".join(_line(1000.0 + i) + "\n" for i in range(5))
    trace.write_text(content)
    options = replay_options(path=str(trace), speed=None, loop=True)
    sampler = Sampler(
        "replay", options, load_catalog(), InferenceConfig(), source=open_source("replay", options)
    )
    for _ in range(12):  # past the end of the first pass: looping
        assert sampler.run_once()
    trace.write_text("")  # truncated between loops
    outcomes = [sampler.run_once() for _ in range(10)]
    health = sampler.snapshot.source
    assert not health.finished and not health.up
    assert health.reason in ("replay_empty", "replay_no_samples")
    assert health.errors_total.get("replay_empty", 0) >= 1
    assert not all(outcomes)
    played = health.samples_total
    trace.write_text(content)  # the file has samples again
    for _ in range(3):
        sampler.run_once()
    health = sampler.snapshot.source
    assert health.up and not health.finished
    assert health.samples_total > played
    assert sampler.snapshot.gpus[0].entity.uuid == "GPU-loop"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_summary_held_at_the_minute_boundary_is_not_lost(caplog: pytest.LogCaptureFixture) -> None:
    """An event after the window is over but before its timer fires once replaced the window and
    its count with it (the timer then found nothing to say)."""
    clock = _Clock()
    logger = logging.getLogger("test.ratelog")
    faults = EveryMinute(logger, window=60.0, clock=clock)
    try:
        with caplog.at_level(logging.WARNING, logger="test.ratelog"):
            faults.note("slow", "first")
            for second in range(1, 60):
                clock.now = second
                faults.note("slow", f"held {second}")
            clock.now = 60.5  # the window is over; its timer (60 s of real time away) has not fired
            faults.note("slow", "next window")
    finally:
        faults.close()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "first (further slow events summarised once a minute)",
        "slow events: 59 more in the last 60 s, the latest: held 59",
        "next window (further slow events summarised once a minute)",
    ]
    assert faults.counts["slow"] == 61


def test_the_timer_summarises_a_window_only_once(caplog: pytest.LogCaptureFixture) -> None:
    faults = EveryMinute(logging.getLogger("test.ratelog2"), window=0.3)
    try:
        with caplog.at_level(logging.WARNING, logger="test.ratelog2"):
            faults.note("kind", "a")
            faults.note("kind", "b")
            time.sleep(0.6)  # the timer fires
    finally:
        faults.close()
    summaries = [r.getMessage() for r in caplog.records if "more in the last" in r.getMessage()]
    assert summaries == ["kind events: 1 more in the last 0 s, the latest: b"]


def test_read_lines_of_a_gzip_replay_collapse_blank_runs_too(tmp_path: Path) -> None:
    path = tmp_path / "blank.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n" * 1_000_000 + HEAD))
    lines = list(read_lines(lambda: path.open("rb"), str(path)))
    assert lines[0][1] == "" and len([t for _, t in lines if not t]) < 100
    assert lines[-1][0] == 1_000_000 + HEAD.count(b"\n")


@pytest.mark.slow
def test_serve_reports_a_looping_replay_truncated_and_plays_it_again(tmp_path: Path) -> None:
    """The real process, a looping replay at 20x: truncated to 0 bytes it is down with
    `replay_empty` (it ended for good before); with its samples back it is ready again."""
    trace = tmp_path / "loop.jsonl"
    content = "".join(_line(1000.0 + i) + "\n" for i in range(10))
    trace.write_text(content)
    with serve_process("--replay", str(trace), "--loop", "--speed", "20") as (base, _process):
        http_until(base, "/readyz", "ready")
        trace.write_text("")
        assert "replay_empty" in http_until(base, "/readyz", "replay_empty")
        trace.write_text(content)
        assert http_until(base, "/readyz", "ready", seconds=40).strip() == "ready"
