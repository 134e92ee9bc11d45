"""Per-identity state is bounded: GPUs whose UUIDs churn, or a replay of 100,000 GPUs, keep at
most MAX_DEPARTED departed identities' counters (for DEPARTED_RETENTION_SECONDS), log a few
summarised lines rather than two per UUID, and hold the sampler's memory flat. Real replay files
played by the real replay source."""

from __future__ import annotations

import json
import logging
import tracemalloc
from pathlib import Path

import pytest
from source_kit import replay_options

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Entity, Sample
from exporter.sampler import DEPARTED_RETENTION_SECONDS, MAX_DEPARTED, Sampler
from exporter.sources import open_source
from exporter.sources.base import SourceOptions

CATALOG = load_catalog()
MODEL = "NVIDIA H100 80GB HBM3"
GPUS = 64


def churn_file(path: Path, batches: int, gpus: int = GPUS) -> Path:
    """`gpus` GPUs per timestamp, each timestamp with UUIDs never seen before."""
    with open(path, "w") as out:
        for batch in range(batches):
            for gpu in range(gpus):
                line = {
                    "ts": 1_764_432_000.0 + batch,
                    "gpu": gpu,
                    "uuid": f"GPU-{batch:06d}-{gpu:02d}",
                    "model": MODEL,
                    "fields": {str(fields.DRAM_ACTIVE): 0.5, str(fields.PIPE_TENSOR_ACTIVE): 0.3},
                }
                out.write(json.dumps(line) + "\n")
    return path


def played(path: Path, batches: int | None = None) -> Sampler:
    options = replay_options(path=str(path), speed=None)
    sampler = Sampler("replay", options, CATALOG, InferenceConfig(), source=open_source("replay", options))
    count = 0
    while not sampler.snapshot.source.finished and (batches is None or count < batches):
        sampler.run_once()
        count += 1
    return sampler


def test_churning_uuids_keep_a_bounded_number_of_identities_and_log_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    batches = 300  # 19,200 identities, 18x the bound
    with caplog.at_level(logging.INFO, logger="exporter.sampler"):
        sampler = played(churn_file(tmp_path / "churn.jsonl", batches))
        sampler.stop()
    assert sampler.identities_kept <= MAX_DEPARTED + 4 * GPUS  # departed + those within the grace
    assert len(sampler.snapshot.gpus) <= 4 * GPUS
    lines = [r.getMessage() for r in caplog.records if r.name == "exporter.sampler"]
    left = [line for line in lines if "left the batches" in line]
    assert 1 <= len(left) <= 3, left  # once at once, then a summary a minute (and at stop)
    assert len(lines) < 10, lines[:10]


def test_the_sampler_memory_does_not_grow_with_the_identities_seen(tmp_path: Path) -> None:
    """tracemalloc over the sampler alone: 300 more batches of fresh UUIDs (19,200 identities)
    once the bound is reached add no more than a tenth of what keeping each would (~300 B)."""
    path = churn_file(tmp_path / "churn.jsonl", 500)
    options = replay_options(path=str(path), speed=None)
    sampler = Sampler("replay", options, CATALOG, InferenceConfig(), source=open_source("replay", options))
    tracemalloc.start()
    try:
        for _ in range(100):
            sampler.run_once()
        settled, _ = tracemalloc.get_traced_memory()
        for _ in range(300):
            sampler.run_once()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    grown = after - settled
    assert grown < 19_200 * 300 / 10, f"grew {grown} bytes over 19,200 new identities"


def test_a_departed_gpu_is_kept_for_the_retention_and_then_forgotten() -> None:
    clock = [1000.0]
    sampler = Sampler("replay", SourceOptions(), CATALOG, InferenceConfig(), wall_clock=lambda: clock[0])
    away, stays = Entity(0, "GPU-away", MODEL), Entity(1, "GPU-stays", MODEL)
    values = {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.5}
    for ts in range(3):
        sampler.ingest([Sample(float(ts), away, values), Sample(float(ts), stays, values)])
    kept = next(g for g in sampler.snapshot.gpus if g.entity.uuid == "GPU-away").totals.integrated_seconds
    assert kept == 2.0
    for ts in range(3, 8):
        sampler.ingest([Sample(float(ts), stays, values)])
    assert [g.entity.uuid for g in sampler.snapshot.gpus] == ["GPU-stays"]
    assert sampler.identities_kept == 2, "the departed GPU's counters wait for its return"
    clock[0] += DEPARTED_RETENTION_SECONDS + 1
    sampler.ingest([Sample(8.0, stays, values)])
    assert sampler.identities_kept == 1, "forgotten after the retention"
    sampler.ingest([Sample(9.0, away, values), Sample(9.0, stays, values)])
    back = next(g for g in sampler.snapshot.gpus if g.entity.uuid == "GPU-away")
    assert back.totals.integrated_seconds == 0.0, "it starts again at 0: a counter reset to Prometheus"


def test_a_gpu_back_within_the_retention_continues_its_counters() -> None:
    sampler = Sampler("replay", SourceOptions(), CATALOG, InferenceConfig())
    away, stays = Entity(0, "GPU-away", MODEL), Entity(1, "GPU-stays", MODEL)
    values = {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.5}
    for ts in range(3):
        sampler.ingest([Sample(float(ts), away, values), Sample(float(ts), stays, values)])
    for ts in range(3, 8):
        sampler.ingest([Sample(float(ts), stays, values)])
    sampler.ingest([Sample(8.0, away, values), Sample(8.0, stays, values)])
    back = next(g for g in sampler.snapshot.gpus if g.entity.uuid == "GPU-away")
    assert back.totals.integrated_seconds == 2.0
