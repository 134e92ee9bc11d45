"""Replay lines for tests, written by the package's one writer of them (`sample_to_json`).

Tests of the JSON Lines reader's tolerance (names instead of ids, bad values, odd keys) write
their lines by hand on purpose; every other test that needs a trace writes it through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from source_kit import replay_options

from exporter.sample import Attribution, Entity, Sample
from exporter.sources import EndOfStream
from exporter.sources.replay import ReplaySource
from exporter.sources.replay_formats import PARSERS, ParseContext, read_lines
from exporter.sources.replay_formats.jsonl import sample_to_json

H100 = "NVIDIA H100 80GB HBM3"


def replay_line(
    ts: float,
    gpu: int,
    values: Mapping[int, float | None],
    *,
    uuid: str | None = None,
    model: str = H100,
    gpu_instance: int | None = None,
    profile: str | None = None,
    attribution: Attribution | None = None,
    hpc_job: str | None = None,
) -> str:
    """One line for GPU `gpu` at `ts`; the UUID defaults to GPU-<index>."""
    entity = Entity(
        gpu=gpu, uuid=uuid or f"GPU-{gpu}", model=model, gpu_instance=gpu_instance, profile=profile
    )
    sample = Sample(timestamp=ts, entity=entity, values=values, attribution=attribution, hpc_job=hpc_job)
    return sample_to_json(sample)


def read_samples(path: Path) -> list[Sample]:
    """Every sample of a JSON Lines trace, as the replay source reads them (batch order)."""
    ctx = ParseContext(name=str(path), default_model=None, interval_seconds=1.0, base_timestamp=0.0)
    batches = PARSERS["jsonl"](read_lines(lambda: path.open("rb"), str(path)), ctx)
    return [sample for _, samples in batches for sample in samples]


def write_samples(path: Path, samples: Iterable[Sample]) -> Path:
    path.write_text("".join(sample_to_json(sample) + "\n" for sample in samples), encoding="utf-8")
    return path


def replay_source(path: Path | str, **given: Any) -> ReplaySource:
    """A replay of `path` at --speed max (unless `given` says otherwise), its wall clock fixed;
    `given`: ReplaySettings' fields and the shared ones (source_kit.replay_options)."""
    options = replay_options(path=str(path), **{"speed": None, **given})
    return ReplaySource(options, options.settings["replay"], wall_clock=lambda: 1_000_000.0)


def play_all(source: ReplaySource) -> list[list[Sample]]:
    """Open the source and read batches until EndOfStream."""
    source.open()
    batches = []
    while True:
        try:
            batches.append(source.read())
        except EndOfStream:
            return batches
