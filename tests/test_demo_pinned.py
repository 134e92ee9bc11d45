"""The bundled demo trace's verdicts, numbers and counters, pinned: a speed-up of the per-sample path
must leave every one of them as it was (docs/daemon.md, "Live budget").

The values were recorded from the code of issue 9's rules before the live-budget work. Every
published snapshot's verdicts (regime, smoothed and raw regime, pipe, lever per GPU) and every
Estimate's repr (each number to the last bit) are folded into one SHA-256 each; the counters at
the end of the trace are spelled out. A change that alters any of them fails here and must be
argued for, not re-pinned in passing.
"""

from __future__ import annotations

import hashlib

import pytest

from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.sources.base import EndOfStream
from exporter.sources.replay import ReplaySource

DEFAULT = InferenceConfig()
FP8_CRISP = InferenceConfig(precision="fp8", smoothing_seconds=0.0, dwell_seconds=0.0)

COMPUTE_SECONDS = {
    "idle": 0.0,
    "memory_bound": 60.0,
    "compute_bound": 479.0,
    "latency_bound": 60.0,
    "unknown": 0.0,
}
MEMORY_SECONDS = {
    "idle": 0.0,
    "memory_bound": 599.0,
    "compute_bound": 0.0,
    "latency_bound": 0.0,
    "unknown": 0.0,
}
DROPOUT_SECONDS = {**MEMORY_SECONDS, "memory_bound": 578.0}
LATENCY_SECONDS = {
    "idle": 0.0,
    "memory_bound": 0.0,
    "compute_bound": 0.0,
    "latency_bound": 599.0,
    "unknown": 0.0,
}
IDLE_SECONDS = {
    "idle": 599.0,
    "memory_bound": 0.0,
    "compute_bound": 0.0,
    "latency_bound": 0.0,
    "unknown": 0.0,
}
REGIME_SECONDS = [*[COMPUTE_SECONDS] * 4, MEMORY_SECONDS, DROPOUT_SECONDS, LATENCY_SECONDS, IDLE_SECONDS]
DRAM_BYTES = [
    747991350000000.0, 749006400000000.0, 743277900000000.0, 750101850000000.0,
    1433337700000000.0, 1388595100000000.0, 100540200000000.0, 1031800000000.0,
]  # fmt: skip

PINNED = {
    "bf16 by the tensor pipes, smoothed": (
        DEFAULT,
        "b995e75e8b5c161211ce0a98643d48db6c2a614943781c19e38980276faf3b50",
        "57c1371a5029b0d5e2bcdfcd561700109c3dd7cc4d4a6c757c21c40c9eea2db7",
        ["compute_bound"] * 4 + ["memory_bound", "memory_bound", "latency_bound", "idle"],
        [
            3.816387933643939e17, 3.7992441679924243e17, 3.8120302549318163e17, 3.82141301869697e17,
            7.05772909590909e16, 6.927859839848488e16, 3.1614595301515148e16, 0.0,
        ],
    ),
    "fp8 fixed, no smoothing or dwell": (
        FP8_CRISP,
        "9ba72abb39e2f94486d72020ffe69dbeb1a0d7947a4311c4fd7b90dcd3b9ad12",
        "34d58a8b8437e2dcb9201da697e177be407fb84dbc244e73535127c1d307f0d7",
        ["memory_bound", "compute_bound"] * 2 + ["memory_bound", "memory_bound", "latency_bound", "idle"],
        [
            7.57231261845454e17, 7.537450805833331e17, 7.563320481560605e17, 7.582510764530304e17,
            1.3716127069393926e17, 1.3471861118636354e17, 6.102548880909087e16, 0.0,
        ],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PINNED))
def test_the_demo_trace_gives_the_pinned_verdicts_numbers_and_counters(name: str) -> None:
    config, verdict_digest, number_digest, final_regimes, flops = PINNED[name]
    source = ReplaySource(SourceOptions(replay="demo", speed=None))
    source.open()
    sampler = Sampler("replay", SourceOptions(replay="demo"), load_catalog(), config, source=source)
    verdicts, numbers, estimates = hashlib.sha256(), hashlib.sha256(), 0
    while True:
        try:
            batch = source.read()
        except EndOfStream:
            break
        sampler.ingest(batch)
        for gpu in sampler.snapshot.gpus:
            e = gpu.inference.estimate
            if e is None:
                verdicts.update(b"none;")
                continue
            verdicts.update(
                f"{gpu.entity.gpu}:{e.regime}:{e.smoothed_regime}:{e.raw_regime}:{e.pipe}:{e.lever};".encode()
            )
            numbers.update(repr(e).encode())
            estimates += 1
    gpus = sampler.snapshot.gpus
    assert estimates == 4783
    assert [g.inference.estimate.regime for g in gpus if g.inference.estimate] == final_regimes
    assert [dict(g.inference.totals.regime_seconds or {}) for g in gpus] == REGIME_SECONDS
    assert [g.inference.totals.flop_total for g in gpus] == flops
    assert [g.inference.totals.dram_bytes_total for g in gpus] == DRAM_BYTES
    assert (verdicts.hexdigest(), numbers.hexdigest()) == (verdict_digest, number_digest)
    body, _ = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=False).render(None)
    assert body.count(b"ridgeline_regime{") == 8 * 5
