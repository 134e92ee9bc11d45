"""The recorder: what it writes replays to the same samples, and an interrupted recording is a
valid file up to its last line."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from exporter.recorder import RecordError, record
from exporter.sample import Entity, Sample
from exporter.sources.base import EndOfStream, SourceError, SourceOptions
from exporter.sources.replay import ReplaySettings, ReplaySource

H100 = "NVIDIA H100 80GB HBM3"


def play_all(source: ReplaySource) -> list[Sample]:
    source.open()
    samples: list[Sample] = []
    while True:
        try:
            samples.extend(source.read())
        except EndOfStream:
            return samples


def test_recording_the_demo_replays_to_the_same_samples(tmp_path: Path) -> None:
    out = tmp_path / "copy.jsonl"
    source = ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=None))
    source.open()
    written = record(source, out, duration_seconds=None, interval_seconds=1.0)
    original = play_all(ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=None)))
    copy = play_all(ReplaySource(SourceOptions(), ReplaySettings(path=str(out), speed=None)))
    assert written == len(original) > 4000
    assert copy == original  # timestamps, entities, blanks (None) and pod labels alike


def test_lines_are_json_with_ids_as_keys_and_null_for_blanks(tmp_path: Path) -> None:
    source = ListSource([[sample(0, {1005: None, 1004: 0.25, 100: 1980.0})]])
    out = tmp_path / "r.jsonl"
    assert record(source, out, None, 0.001) == 1
    (line,) = out.read_text().splitlines()
    assert json.loads(line) == {
        "ts": 10.0,
        "gpu": 0,
        "uuid": "GPU-0",
        "model": H100,
        "gpu_instance": None,
        "fields": {"100": 1980.0, "1004": 0.25, "1005": None},
    }


def test_gzip_recording_round_trips(tmp_path: Path) -> None:
    batches = [[sample(g, {1005: 0.5}, ts=float(t)) for g in range(2)] for t in range(5)]
    out = tmp_path / "r.jsonl.gz"
    assert record(ListSource(batches), out, None, 0.001) == 10
    assert gzip.decompress(out.read_bytes()).count(b"\n") == 10
    assert play_all(ReplaySource(SourceOptions(), ReplaySettings(path=str(out), speed=None))) == [
        s for b in batches for s in b
    ]


def test_interrupted_recording_leaves_every_written_line_valid(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    batches = [[sample(0, {1005: 0.1 * t}, ts=float(t))] for t in range(3)]
    source = ListSource(batches, interrupt_after=3)
    written = record(source, out, None, 0.001)
    assert written == 3
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["gpu"] == 0 for line in lines)


def test_gzip_recording_killed_mid_way_still_replays(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl.gz"
    batches = [[sample(0, {1005: 0.5}, ts=float(t))] for t in range(4)]
    observed: list[bytes] = []

    class Peek(ListSource):
        def read(self) -> list[Sample]:
            observed.append(out.read_bytes())  # what a crash right now would leave on disk
            return super().read()

    record(Peek(batches), out, None, 0.001)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(observed[-1])  # after 4 flushed lines, before the gzip trailer
    assert len(play_all(ReplaySource(SourceOptions(), ReplaySettings(path=str(cut), speed=None)))) == 4


def test_source_errors_are_counted_and_recording_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    source = ListSource([SourceError("timeout", "DCGM did not answer"), [sample(0, {1005: 0.5})]])
    stop = threading.Event()
    assert record(source, out, None, 0.001, stop) == 1


def test_live_source_waits_the_interval_and_stops_at_the_duration(tmp_path: Path) -> None:
    now = [0.0]
    waits: list[float] = []

    class Stop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            assert timeout is not None
            waits.append(timeout)
            now[0] += timeout
            return False

    source = ListSource([[sample(0, {1005: 0.5})]] * 100)
    written = record(source, tmp_path / "r.jsonl", 3.0, 1.0, Stop(), clock=lambda: now[0])
    assert written == 3
    assert waits == [1.0, 1.0, 1.0]


def test_stop_event_ends_the_recording(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert record(ListSource([[sample(0, {1005: 0.5})]]), tmp_path / "r.jsonl", None, 1.0, stop) == 0


def test_unwritable_output_is_a_record_error(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="cannot write"):
        record(ListSource([]), tmp_path / "missing-dir" / "r.jsonl", None, 1.0)


def sample(gpu: int, values: dict[int, float | None], ts: float = 10.0) -> Sample:
    return Sample(ts, Entity(gpu=gpu, uuid=f"GPU-{gpu}", model=H100), values)


class ListSource:
    """A live source (paced=False) that hands out prepared batches or errors, then ends."""

    name = "fake"
    paced = False
    records_skipped = 0

    def __init__(
        self, items: Sequence[list[Sample] | SourceError], interrupt_after: int | None = None
    ) -> None:
        self._items = list(items)
        self._interrupt_after = interrupt_after

    def open(self) -> None:
        pass

    def read(self) -> list[Sample]:
        if self._interrupt_after is not None and self._interrupt_after == 0:
            raise KeyboardInterrupt
        if not self._items:
            raise EndOfStream()
        if self._interrupt_after is not None:
            self._interrupt_after -= 1
        item = self._items.pop(0)
        if isinstance(item, SourceError):
            raise item
        return item

    def close(self) -> None:
        pass
