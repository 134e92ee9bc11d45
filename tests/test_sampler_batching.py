"""Batches, not wake-ups: a source that keeps its batches is read once and folded whole; batches
due faster than once a second are published about once a second; a reader's ask wakes the thread."""

from __future__ import annotations

import time

import pytest

from exporter import fields
from exporter import sampler as sampler_module
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.sources.base import Source

CATALOG = load_catalog()
VALUES = {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.5, fields.GR_ENGINE_ACTIVE: 0.9}
GPU0 = Entity(0, "GPU-aaaa", "NVIDIA H100 80GB HBM3")
GPU1 = Entity(1, "GPU-bbbb", "NVIDIA H100 80GB HBM3")


def batch(ts: float) -> list[Sample]:
    return [Sample(ts, gpu, VALUES) for gpu in (GPU0, GPU1)]


class Batches:
    """A live source handing over `per_read` batches 0.1 s apart at each read."""

    name = "kept"
    paced = False
    records_skipped = 0

    def __init__(self, per_read: int) -> None:
        self.per_read = per_read
        self.reads = 0
        self.taken = 0

    def open(self) -> None:
        pass

    def take(self) -> list[list[Sample]]:
        self.reads += 1
        batches = [batch(1000.0 + 0.1 * (self.taken + i)) for i in range(self.per_read)]
        self.taken += self.per_read
        return batches

    def close(self) -> None:
        pass


class Kept(Batches):
    """Keeps its batches between reads (`read_batches`), as DCGM's watches do."""

    def read(self) -> list[Sample]:
        raise AssertionError("a source with read_batches is not read batch by batch")

    def read_batches(self) -> list[list[Sample]]:
        return self.take()


class Plain(Batches):
    """Answers one batch per read."""

    def read(self) -> list[Sample]:
        return self.take()[0]


def make(source: Source, interval: float = 0.1) -> Sampler:
    return Sampler(
        "kept",
        SourceOptions(interval_seconds=interval),
        CATALOG,
        InferenceConfig(expected_interval_seconds=interval, smoothing_seconds=0.0, dwell_seconds=0.0),
        source=source,
        opener=lambda name, options: source,
        wall_clock=lambda: 1000.0,
    )


def wait_until(check: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the sampler thread did not get there"
        time.sleep(0.005)


def test_every_kept_batch_is_folded_in_one_read_and_one_publish() -> None:
    sampler = make(Kept(per_read=10))
    sampler.run_once()
    snapshot = sampler.snapshot
    assert (snapshot.generation, snapshot.source.samples_total) == (1, 10)
    assert [g.inference.timestamp for g in snapshot.gpus] == [1000.0 + 0.1 * 9] * 2
    assert all(g.totals.regime_seconds and sum(g.totals.regime_seconds.values()) > 0.8 for g in snapshot.gpus)


def test_folded_batch_by_batch_or_kept_the_totals_are_the_same() -> None:
    kept, plain = make(Kept(per_read=10)), make(Plain(per_read=1))
    kept.run_once()
    for _ in range(10):
        plain.run_once()
    assert [g.totals for g in kept.snapshot.gpus] == [g.totals for g in plain.snapshot.gpus]


def test_a_kept_source_is_read_again_only_when_a_reader_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampler_module, "FOLD_EVERY_SECONDS", 3600.0)  # no read of its own again
    source = Kept(per_read=3)
    sampler = make(source, interval=0.001)
    sampler.start()
    try:
        wait_until(lambda: sampler.snapshot.source.samples_total == 3)
        time.sleep(0.01)  # older than one interval: the ask wakes the thread
        sampler.current()
        wait_until(lambda: sampler.snapshot.source.samples_total == 6)
        assert source.reads == 2
    finally:
        sampler.stop()


def test_fast_batches_are_published_when_asked_not_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampler_module, "FOLD_EVERY_SECONDS", 3600.0)
    source = Plain(per_read=1)
    sampler = make(source, interval=0.001)
    sampler.start()
    try:
        wait_until(lambda: source.reads >= 20)
        first = sampler.snapshot
        assert first.generation == 1  # the first batch only: the rest wait for a publish
        sampler.current()
        wait_until(lambda: sampler.snapshot.generation > first.generation)
        assert sampler.snapshot.source.samples_total >= 20
    finally:
        sampler.stop()
