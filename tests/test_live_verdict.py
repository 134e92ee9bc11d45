"""The typed live verdict (exporter/verdict.py): built once per GPU per snapshot and shared by its
readers, written as GET /classify answers it, and read back by `top` field for field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from source_kit import replay_options

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import Estimate, InferenceConfig
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.sources.base import EndOfStream
from exporter.sources.replay import ReplaySettings, ReplaySource
from exporter.state import Derived, Snapshot
from exporter.top.client import parse_answer
from exporter.verdict import LiveVerdict, VerdictAttribution, _decoder, decode_verdict
from exporter.view.trails import Trails
from exporter.web.live_routes import gpu_verdict

BATCHES = 40


def demo_snapshots() -> Iterator[Snapshot]:
    """The first BATCHES snapshots of the bundled demo trace (eight H100s, every regime)."""
    source = ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=None))
    source.open()
    sampler = Sampler("replay", replay_options(path="demo"), load_catalog(), InferenceConfig(), source=source)
    for _ in range(BATCHES):
        try:
            sampler.ingest(source.read())
        except EndOfStream:
            return
        yield sampler.snapshot


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    *_, last = demo_snapshots()
    return last


def test_each_gpu_state_derives_its_estimate_and_verdict_once(snapshot: Snapshot) -> None:
    for gpu in snapshot.gpus:
        assert gpu.derived is not None
        assert gpu.estimate is gpu.estimate  # one Estimate per GpuState, however many readers
        first = gpu_verdict(gpu, snapshot)
        assert gpu_verdict(gpu, snapshot) is first
        assert gpu.derived.verdict is first


def test_the_trails_metrics_and_classify_read_one_estimate_per_gpu() -> None:
    """The Estimate's readers (the trails on the sampler's thread, then /metrics and the verdict)
    get the one object the snapshot's GpuState holds, not one built per reader."""
    seen: list[Estimate | None] = []
    trails = Trails(points=2, step_seconds=0.5)

    def observe(snapshot: Snapshot) -> None:
        trails.observe(snapshot)
        seen[:] = [g.estimate for g in snapshot.gpus]

    source = ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=None))
    source.open()
    sampler = Sampler(
        "replay",
        replay_options(path="demo"),
        load_catalog(),
        InferenceConfig(),
        source=source,
        observers=(observe,),
    )
    for _ in range(5):
        sampler.ingest(source.read())
    snapshot = sampler.snapshot
    assert b"ridgeline_regime{" in MetricsEndpoint(lambda: snapshot).render(None)[0]
    verdicts = [gpu_verdict(g, snapshot) for g in snapshot.gpus]
    assert len(seen) == 8 and all(e is not None for e in seen)
    assert all(g.estimate is e for g, e in zip(snapshot.gpus, seen, strict=True))
    assert [v.regime for v in verdicts] == [e.regime for e in seen if e is not None]


def test_a_new_snapshot_gets_new_verdicts() -> None:
    earlier, later = list(demo_snapshots())[-2:]
    assert later.generation == earlier.generation + 1
    for before, after in zip(earlier.gpus, later.gpus, strict=True):
        assert gpu_verdict(after, later) is not gpu_verdict(before, earlier)
        assert gpu_verdict(after, later).timestamp == after.last_sample_timestamp


def test_a_gpu_state_without_a_memo_derives_on_every_read(snapshot: Snapshot) -> None:
    gpu = snapshot.gpus[0]._replace(derived=None)
    assert gpu.estimate is not gpu.estimate and gpu.estimate == gpu.estimate
    assert gpu_verdict(gpu, snapshot) is not gpu_verdict(gpu, snapshot)
    assert gpu_verdict(gpu, snapshot) == gpu_verdict(snapshot.gpus[0], snapshot)


def test_the_memo_is_not_data(snapshot: Snapshot) -> None:
    """GpuStates compare by what they hold, whatever their memos hold."""
    gpu = snapshot.gpus[0]
    gpu_verdict(gpu, snapshot)
    assert gpu._replace(derived=Derived()) == gpu
    assert gpu._replace(gpu_share=0.5) != gpu


def test_the_json_has_every_field_in_order_and_reads_back_the_same(snapshot: Snapshot) -> None:
    for gpu in snapshot.gpus:
        verdict = gpu_verdict(gpu, snapshot)
        written = verdict.to_json()
        assert list(written) == list(LiveVerdict._fields)
        assert set(written["attribution"] or {}) <= {"namespace", "pod", "container"}
        assert list(written["smoothing"]) == [
            "time_constant_seconds",
            "dwell_seconds",
            "pending_regime",
            "pending_since",
        ]
        assert list(written["totals"]) == [
            "regime_seconds",
            "flop_total",
            "dram_bytes_total",
            "integrated_seconds",
        ]
        back = decode_verdict(json.loads(json.dumps(written, allow_nan=False)))
        assert back == verdict, gpu.entity.gpu


def test_top_reads_the_answer_into_the_same_verdicts(snapshot: Snapshot) -> None:
    answer = {
        "source": "replay",
        "ready": True,
        "gpus": [gpu_verdict(g, snapshot).to_json() for g in snapshot.gpus],
    }
    reading = parse_answer("n", json.dumps(answer).encode())
    assert reading.verdicts == tuple(gpu_verdict(g, snapshot) for g in snapshot.gpus)
    assert all(isinstance(v, LiveVerdict) for v in reading.verdicts)


def test_the_verdict_copies_the_estimates_fields_by_name(snapshot: Snapshot) -> None:
    for gpu in snapshot.gpus:
        estimate = gpu.estimate
        assert estimate is not None
        verdict = gpu_verdict(gpu, snapshot)
        for name in LiveVerdict._fields:
            if name in Estimate._fields and name not in ("card", "unknown_because", "link_utilization"):
                assert getattr(verdict, name) == getattr(estimate, name), name
        assert verdict.unknown_because == estimate.unknown_because
        assert verdict.link_utilization == dict(estimate.link_utilization)  # {link: load} in JSON
        assert verdict.card == gpu.card
        assert estimate.roof is not None
        assert verdict.peak_flop_per_second == estimate.roof.peak_flop_per_second
        assert verdict.bandwidth_bytes_per_second == estimate.roof.bandwidth_bytes_per_second
        assert verdict.ridge_flop_per_byte == estimate.roof.ridge_flop_per_byte
        assert verdict.totals is not None and verdict.totals.flop_total == gpu.totals.flop_total
        assert verdict.smoothing is not None
        assert verdict.smoothing.time_constant_seconds == snapshot.smoothing_seconds
        assert verdict.smoothing.dwell_seconds == snapshot.dwell_seconds


def test_a_mistyped_or_missing_field_reads_as_absent() -> None:
    verdict = decode_verdict(
        {
            "gpu": True,  # a bool is not an index
            "gpu_instance": 2,
            "uuid": 7,
            "dram_active": float("nan"),
            "tensor_active": 1,
            "regime": ["idle"],
            "mig_parent": "yes",
            "missing_fields": ["DCGM_FI_PROF_DRAM_ACTIVE", 3],
            "uncounted_pipes": "fp64",
            "attribution": {"namespace": "ml", "pod": 5},
            "smoothing": [1, 2],
            "totals": {"regime_seconds": {"idle": 3, "memory_bound": "x"}, "flop_total": "1e9"},
            "a_newer_field": 1,
        }
    )
    assert verdict.gpu is None and verdict.gpu_instance == 2 and verdict.uuid is None
    assert verdict.dram_active is None
    assert verdict.tensor_active == 1.0 and isinstance(verdict.tensor_active, float)
    assert verdict.regime is None and verdict.mig_parent is False
    assert verdict.missing_fields == ("DCGM_FI_PROF_DRAM_ACTIVE",)
    assert verdict.uncounted_pipes is None
    assert verdict.attribution == VerdictAttribution(namespace="ml", pod=None, container=None)
    assert verdict.smoothing is None
    assert verdict.totals is not None and verdict.totals.regime_seconds == {"idle": 3.0}
    assert verdict.totals.flop_total is None
    assert decode_verdict({}) == LiveVerdict()


def test_a_field_of_a_type_without_a_reader_fails_at_import() -> None:
    class Odd(NamedTuple):
        when: complex | None = None

    with pytest.raises(TypeError, match=r"Odd\.when: no JSON reader for 'complex \| None'"):
        _decoder(Odd)


def test_a_reduced_clock_marker_is_a_record_written_and_read_back() -> None:
    sampler = Sampler("scrape", SourceOptions(), load_catalog(), InferenceConfig(smoothing_seconds=0))
    for second in range(3):
        sampler.ingest(
            [
                Sample(
                    1000.0 + second,
                    Entity(0, "GPU-0", "NVIDIA H100 80GB HBM3"),
                    {
                        fields.DRAM_ACTIVE: 0.2,
                        fields.PIPE_TENSOR_ACTIVE: 0.9,
                        fields.GR_ENGINE_ACTIVE: 0.95,
                        fields.SM_CLOCK: 1185.0,  # of the 1830 MHz the tensor peak is quoted at
                    },
                )
            ]
        )
    snapshot = sampler.snapshot
    verdict = gpu_verdict(snapshot.gpus[0], snapshot)
    marker = verdict.reduced_clock
    assert marker is not None and marker.clock_ratio == pytest.approx(1185 / 1830)
    assert marker.note and marker.cause_text == "cause not reported"
    written = verdict.to_json()["reduced_clock"]
    assert list(written) == ["clock_ratio", "causes", "cause_text", "give_back", "note"]
    assert decode_verdict(json.loads(json.dumps(verdict.to_json()))) == verdict
