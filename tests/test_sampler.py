"""The sampler: dropouts, reconnects, source errors, end of replay, attribution, replay stats."""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from replay_lines import replay_line as write_line
from source_kit import replay_options

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import CORRUPT_LINE, END_OF_REPLAY, Sampler
from exporter.sampling.enrichers import build_enrichers
from exporter.sources import SourceOptions, open_source
from exporter.sources.base import EndOfStream, Source, SourceError

CATALOG = load_catalog()
MODEL = "NVIDIA H100 80GB HBM3"
GPU0 = Entity(0, "GPU-aaaa", MODEL)
GPU1 = Entity(1, "GPU-bbbb", MODEL)

Step = list[Sample] | Exception


def reading(ts: float, entity: Entity, d: float = 0.5, t: float = 0.5, **kw: Attribution) -> Sample:
    return Sample(ts, entity, {fields.DRAM_ACTIVE: d, fields.PIPE_TENSOR_ACTIVE: t}, kw.get("attribution"))


class ScriptedSource:
    """A live source whose reads follow a script: a batch, or an exception to raise."""

    name = "scripted"
    paced = False
    records_skipped = 0

    def __init__(self, script: list[Step]) -> None:
        self.script = script
        self.opened = 0
        self.closed = 0

    def open(self) -> None:
        self.opened += 1

    def read(self) -> list[Sample]:
        if not self.script:
            raise EndOfStream()
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self.closed += 1


def make_sampler(source: ScriptedSource, **kw: object) -> Sampler:
    def opener(name: str, options: SourceOptions) -> Source:
        source.open()
        return source

    kw.setdefault("wall_clock", lambda: 100.0)  # the scripts stamp their samples 0 s to 10 s

    sampler = Sampler(
        "scripted",
        SourceOptions(interval_seconds=1.0),
        CATALOG,
        InferenceConfig(smoothing_seconds=0.0, dwell_seconds=0.0),
        source=source,
        opener=opener,
        **kw,  # type: ignore[arg-type]
    )
    return sampler


def flop_total(sampler: Sampler, uuid: str) -> float | None:
    for gpu in sampler.snapshot.gpus:
        if gpu.entity.uuid == uuid:
            return gpu.totals.flop_total
    return None


def test_a_missing_gpu_is_dropped_after_the_grace_period_and_its_counters_continue_on_return() -> None:
    script: list[Step] = [[reading(float(ts), GPU0), reading(float(ts), GPU1)] for ts in range(3)]
    script += [[reading(float(ts), GPU0)] for ts in range(3, 7)]  # GPU1 away for 4 batches
    script += [[reading(float(ts), GPU0), reading(float(ts), GPU1)] for ts in range(7, 9)]
    source = ScriptedSource(script)
    sampler = make_sampler(source, grace_batches=3)
    for _ in range(3):
        sampler.run_once()
    before = flop_total(sampler, GPU1.uuid)
    assert before is not None and before > 0
    for batch in range(3):
        sampler.run_once()
        assert flop_total(sampler, GPU1.uuid) == before, f"kept during grace (batch {batch})"
    sampler.run_once()
    assert [g.entity.uuid for g in sampler.snapshot.gpus] == [GPU0.uuid]
    sampler.run_once()  # back at ts 7: continues from `before`, the gap is not integrated
    assert flop_total(sampler, GPU1.uuid) == before
    sampler.run_once()  # ts 8: one more second integrated
    after = flop_total(sampler, GPU1.uuid)
    assert after is not None and after > before


def test_a_gpu_back_within_grace_does_not_integrate_the_gap() -> None:
    script: list[Step] = [[reading(0.0, GPU0)], [reading(1.0, GPU0)], [], [reading(3.0, GPU0)]]
    sampler = make_sampler(ScriptedSource(script))
    for _ in range(4):
        sampler.run_once()
    (gpu,) = sampler.snapshot.gpus
    assert gpu.totals.integrated_seconds == pytest.approx(1.0)


def test_source_error_marks_it_down_counts_the_reason_and_recovers() -> None:
    script: list[Step] = [
        [reading(0.0, GPU0)],
        SourceError("dcgm_timeout", "host engine did not answer"),
        SourceError("dcgm_timeout", "host engine did not answer"),
        [reading(3.0, GPU0)],
    ]
    source = ScriptedSource(script)
    sampler = make_sampler(source)
    assert sampler.run_once()
    assert sampler.snapshot.source.up
    assert not sampler.run_once()
    health = sampler.snapshot.source
    assert not health.up
    assert health.reason == "dcgm_timeout"
    assert dict(health.errors_total) == {"dcgm_timeout": 1}
    assert source.closed == 1
    assert not sampler.run_once()
    assert sampler.run_once()  # reopened through the opener, read succeeds
    health = sampler.snapshot.source
    assert health.up and health.reason is None
    assert dict(health.errors_total) == {"dcgm_timeout": 2}
    assert health.samples_total == 2
    assert source.opened >= 1


def test_failing_reopen_is_counted_and_gpus_expire_while_down() -> None:
    clock = [100.0]

    def failing_opener(name: str, options: SourceOptions) -> Source:
        raise SourceError("no_gpu", "NVML: no GPU found")

    source = ScriptedSource([[reading(0.0, GPU0)], SourceError("lost", "GPU fell off the bus")])
    sampler = Sampler(
        "scripted",
        SourceOptions(interval_seconds=1.0),
        CATALOG,
        InferenceConfig(),
        source=source,
        opener=failing_opener,
        wall_clock=lambda: clock[0],
    )
    sampler.run_once()
    clock[0] += 1
    sampler.run_once()
    assert sampler.snapshot.gpus, "kept within the grace period"
    clock[0] += 10
    assert not sampler.run_once()
    snapshot = sampler.snapshot
    assert snapshot.gpus == ()
    assert dict(snapshot.source.errors_total) == {"lost": 1, "no_gpu": 1}
    assert snapshot.source.reason == "no_gpu"


def test_end_of_replay_keeps_the_last_state_and_marks_the_source_finished() -> None:
    sampler = make_sampler(ScriptedSource([[reading(0.0, GPU0)], [reading(1.0, GPU0)]]))
    for _ in range(3):
        sampler.run_once()
    snapshot = sampler.snapshot
    assert snapshot.source.finished
    assert snapshot.source.reason == END_OF_REPLAY
    assert not snapshot.source.up
    assert len(snapshot.gpus) == 1
    ready, reason = snapshot.readiness()
    assert not ready and END_OF_REPLAY in reason


class FixedAttributor:
    def __init__(self, table: dict[str, Attribution]) -> None:
        self.table = table

    def lookup(self, uuid: str, gpu_instance: int | None) -> Attribution | None:
        return self.table.get(uuid)


def test_attribution_from_the_attributor_unless_the_source_has_its_own() -> None:
    kubelet = Attribution("k8s", "from-kubelet", "c")
    labels = Attribution("dcgm", "from-labels", "c")
    batch = [reading(0.0, GPU0), reading(0.0, GPU1, attribution=labels)]
    pods = FixedAttributor({GPU0.uuid: kubelet, GPU1.uuid: kubelet})
    sampler = make_sampler(ScriptedSource([batch]), enrichers=build_enrichers(pods, None))
    sampler.run_once()
    by_uuid = {g.entity.uuid: g.attribution for g in sampler.snapshot.gpus}
    assert by_uuid == {GPU0.uuid: kubelet, GPU1.uuid: labels}


def test_readiness_turns_ready_with_a_fresh_sample() -> None:
    clock = [1000.0]
    source = ScriptedSource([[reading(0.0, GPU0)]])
    sampler = Sampler(
        "scripted",
        SourceOptions(interval_seconds=1.0),
        CATALOG,
        InferenceConfig(),
        source=source,
        wall_clock=lambda: clock[0],
    )
    ready, reason = sampler.snapshot.readiness(now=clock[0])
    assert not ready and "not produced a sample" in reason
    sampler.run_once()
    assert sampler.snapshot.readiness(now=clock[0]) == (True, "ready")
    ready, reason = sampler.snapshot.readiness(now=clock[0] + 60)
    assert not ready and "old" in reason


def write_replay(path: Path, lines: list[str]) -> Path:
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


def replay_line(ts: float, gpu: int, d: float, t: float) -> str:
    return write_line(ts, gpu, {1005: d, 1004: t}, uuid=f"GPU-{gpu:04d}", model=MODEL)


def test_skipped_replay_lines_become_corrupt_line_errors(tmp_path: Path) -> None:
    lines = [replay_line(float(ts), 0, 0.5, 0.5) for ts in range(4)]
    lines.insert(2, "{not json")
    path = write_replay(tmp_path / "trace.jsonl.gz", lines)
    options = replay_options(path=str(path), speed=None)
    source = open_source("replay", options)
    sampler = Sampler("replay", options, CATALOG, InferenceConfig(), source=source)
    sampler.run_once()
    assert dict(sampler.snapshot.source.errors_total) == {CORRUPT_LINE: 1}


def wait_for(predicate: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        time.sleep(0.01)


def test_thread_plays_a_replay_to_its_end_and_stops_cleanly(tmp_path: Path) -> None:
    lines = [replay_line(float(ts), gpu, 0.6, 0.1) for ts in range(50) for gpu in range(2)]
    path = write_replay(tmp_path / "trace.jsonl.gz", lines)
    options = replay_options(path=str(path), speed=None)
    sampler = Sampler("replay", options, CATALOG, InferenceConfig(), source=open_source("replay", options))
    sampler.start()
    try:
        wait_for(lambda: sampler.snapshot.source.finished)
    finally:
        sampler.stop()
    snapshot = sampler.snapshot
    assert snapshot.source.samples_total == 50
    for gpu in snapshot.gpus:
        assert gpu.totals.integrated_seconds == pytest.approx(49.0)
        assert gpu.totals.regime_seconds["memory_bound"] == pytest.approx(49.0)


def test_stop_interrupts_a_slow_paced_replay(tmp_path: Path) -> None:
    lines = [replay_line(float(ts * 100), 0, 0.6, 0.1) for ts in range(5)]
    path = write_replay(tmp_path / "slow.jsonl.gz", lines)
    options = replay_options(path=str(path), speed=1.0, interval_seconds=100.0)
    sampler = Sampler("replay", options, CATALOG, InferenceConfig(), source=open_source("replay", options))
    sampler.start()
    wait_for(lambda: sampler.snapshot.source.samples_total >= 1)
    sampler.stop(timeout=20.0)
    assert not sampler.running
    assert not sampler.snapshot.source.finished


def test_an_unexpected_exception_while_reopening_is_counted_not_fatal() -> None:
    """A GPU library's own exception out of open() (not a SourceError) must not escape the
    sampler thread: the source stays down, the error is counted and the GPUs expire."""
    clock = [100.0]
    calls: list[int] = []

    def broken_opener(name: str, options: SourceOptions) -> Source:
        calls.append(1)
        raise RuntimeError("NVML: GPU is lost")

    source = ScriptedSource([[reading(0.0, GPU0)], SourceError("lost", "GPU fell off the bus")])
    sampler = Sampler(
        "scripted",
        SourceOptions(interval_seconds=1.0),
        CATALOG,
        InferenceConfig(),
        source=source,
        opener=broken_opener,
        wall_clock=lambda: clock[0],
    )
    assert sampler.run_once()
    clock[0] += 1
    assert not sampler.run_once()
    clock[0] += 10
    assert not sampler.run_once()
    assert calls
    snapshot = sampler.snapshot
    assert not snapshot.source.up and snapshot.source.reason == "internal_error"
    assert snapshot.source.errors_total["internal_error"] == 1
    assert snapshot.gpus == ()


def test_an_exception_while_folding_a_batch_is_counted_not_fatal() -> None:
    class BrokenAttributor:
        def lookup(self, uuid: str, gpu_instance: int | None) -> Attribution | None:
            raise OSError("kubelet socket vanished")

    sampler = make_sampler(
        ScriptedSource([[reading(0.0, GPU0)]]), enrichers=build_enrichers(BrokenAttributor(), None)
    )
    assert not sampler.run_once()
    health = sampler.snapshot.source
    assert not health.up and health.errors_total["internal_error"] == 1


# -- honest logs (issue 10) --------------------------------------------------------------------


def test_a_gpus_return_is_logged_like_its_departure(caplog: pytest.LogCaptureFixture) -> None:
    script: list[Step] = [[reading(0.0, GPU0), reading(0.0, GPU1)]]
    script += [[reading(float(ts), GPU0)] for ts in range(1, 5)]  # GPU1 gone past the grace
    script += [[reading(5.0, GPU0), reading(5.0, GPU1)]]
    sampler = make_sampler(ScriptedSource(script), grace_batches=3)
    with caplog.at_level("INFO", logger="exporter.sampler"):
        for _ in range(6):
            sampler.run_once()
    lines = [r.getMessage() for r in caplog.records if GPU1.uuid in r.getMessage()]
    assert len(lines) == 2 and "left" in lines[0] and "back" in lines[1], lines
    assert not [r for r in caplog.records if GPU0.uuid in r.getMessage()]  # GPU0 never left


def test_source_opened_is_logged_only_once_it_answered(caplog: pytest.LogCaptureFixture) -> None:
    script: list[Step] = [
        [reading(0.0, GPU0)],
        SourceError("connection", "refused"),  # the read fails: closed, reopened below
        SourceError("connection", "refused"),  # reopened, but the first read fails again
        [reading(3.0, GPU0)],
    ]
    sampler = make_sampler(ScriptedSource(script))
    with caplog.at_level("INFO", logger="exporter.sampler"):
        results = [sampler.run_once() for _ in range(4)]
    assert results == [True, False, False, True]
    opened = [r.getMessage() for r in caplog.records if "opened" in r.getMessage()]
    assert opened == ["source scripted opened and answered"]


def test_a_password_in_a_source_error_reaches_neither_the_log_nor_readyz(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "hunter2-upstream"
    script: list[Step] = [SourceError("connection", f"cannot reach http://prom:{secret}@dcgm:9400/metrics")]
    sampler = make_sampler(ScriptedSource(script))
    with caplog.at_level("DEBUG"):
        sampler.run_once()
    ready, reason = sampler.snapshot.readiness()
    assert not ready and "http://prom:xxxxx@dcgm:9400/metrics" in reason
    assert secret not in reason and secret not in caplog.text
    assert secret not in str(sampler.snapshot.source)
