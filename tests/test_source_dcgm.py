"""The DCGM source against a fake of NVIDIA's DCGM Python bindings (tests/fakes/dcgm).

The fake directory is handed to the source as --dcgm-bindings, so the source's own import
path logic puts it on sys.path and imports pydcgm, dcgm_agent, ... by their real names.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from source_kit import dcgm_options

from exporter import fields
from exporter.sources import create_source
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable
from exporter.sources.dcgm import DcgmSettings, DcgmSource
from exporter.sources.dcgm_bindings import load_bindings

FAKE_DIR = Path(__file__).parent / "fakes" / "dcgm"
FAKE_MODULES = ("pydcgm", "dcgm_agent", "dcgm_structs", "dcgm_fields", "dcgmvalue", "_fake_dcgm_engine")

ST_PROFILING_NOT_SUPPORTED = -36
ST_PROFILING_MULTI_PASS = -38
ST_PAUSED = -54

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


def _load_engine_module() -> ModuleType:
    """Register the simulated host engine under the name the fake bindings import it by."""
    spec = importlib.util.spec_from_file_location("_fake_dcgm_engine", FAKE_DIR / "_fake_dcgm_engine.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_fake_dcgm_engine"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake() -> Iterator[ModuleType]:
    for name in FAKE_MODULES:
        sys.modules.pop(name, None)
    module = _load_engine_module()
    module.reset()
    yield module
    for name in FAKE_MODULES:
        sys.modules.pop(name, None)
    while str(FAKE_DIR) in sys.path:
        sys.path.remove(str(FAKE_DIR))


def _busy_values(dram: float, tensor: float) -> dict[int, float | None]:
    return {
        fields.GR_ENGINE_ACTIVE: 0.97,
        fields.SM_ACTIVE: 0.91,
        fields.SM_OCCUPANCY: 0.33,
        fields.PIPE_TENSOR_ACTIVE: tensor,
        fields.DRAM_ACTIVE: dram,
        fields.PIPE_FP64_ACTIVE: 0.0,
        fields.PIPE_FP32_ACTIVE: 0.05,
        fields.PIPE_FP16_ACTIVE: 0.01,
        fields.PCIE_TX_BYTES: 4.8e7,
        fields.PCIE_RX_BYTES: 3.9e8,
        fields.NVLINK_TX_BYTES: 1.5e10,
        fields.NVLINK_RX_BYTES: 1.5e10,
        fields.PIPE_TENSOR_IMMA_ACTIVE: 0.0,
        fields.PIPE_TENSOR_HMMA_ACTIVE: tensor,
        fields.PIPE_TENSOR_DFMA_ACTIVE: 0.0,
        fields.SM_CLOCK: 1755,
        fields.GPU_UTIL: 100,
    }


def _two_h100(fake: ModuleType) -> Any:
    engine = fake.ENGINE
    engine.gpus = [
        fake.FakeGpu(0, "GPU-8e5c3a1f-2d4b-6c7e-9f01-23456789abcd", H100, values=_busy_values(0.71, 0.13)),
        fake.FakeGpu(1, "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", H100, values=_busy_values(0.12, 0.82)),
    ]
    return engine


WATCHED = 20
"""Fields in the full watch: 1001-1015, 100, 203, 112, 155, 160."""


def _stamp(tick_usec: int, entity_index: int, step: int = 3) -> float:
    """When the fake engine stamps an entity's newest value of a tick (seconds): values are
    collected one after another, `step` usec apart, entities in group order."""
    return (tick_usec + ((entity_index + 1) * WATCHED - 1) * step) / 1e6


def _source(**overrides: Any) -> DcgmSource:
    """The source over the fake bindings; `overrides`: DcgmSettings' fields and the shared ones."""
    source = create_source("dcgm", dcgm_options(bindings=FAKE_DIR, **overrides))
    assert isinstance(source, DcgmSource)
    return source


def test_registry_builds_the_dcgm_source() -> None:
    source = create_source("dcgm", dcgm_options(bindings=FAKE_DIR))
    assert isinstance(source, DcgmSource)
    assert source.paced is False


def test_embedded_engine_yields_one_sample_per_gpu(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source()
    source.open()
    samples = {s.entity.gpu: s for s in source.read()}
    source.close()
    assert engine.embedded_starts == 1
    assert set(samples) == {0, 1}
    assert samples[0].entity.uuid == "GPU-8e5c3a1f-2d4b-6c7e-9f01-23456789abcd"
    assert samples[0].entity.model == H100
    assert samples[0].entity.gpu_instance is None
    assert samples[0].values[fields.DRAM_ACTIVE] == pytest.approx(0.71)
    assert samples[1].values[fields.PIPE_TENSOR_ACTIVE] == pytest.approx(0.82)
    assert samples[1].values[fields.SM_CLOCK] == 1755
    assert samples[1].values[fields.GPU_UTIL] == 100
    assert samples[1].values[fields.NVLINK_TX_BYTES] == pytest.approx(1.5e10)
    # the device fields too: SM clock, GPU_UTIL, clock-event reasons and power (blank here)
    assert set(samples[0].values) == set(range(1001, 1016)) | {100, 203, 112, 155, 160}


def test_blank_values_read_as_none_and_ratios_are_clamped(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.gpus[0].values[fields.DRAM_ACTIVE] = None  # DCGM_FP64_BLANK
    engine.gpus[0].values[fields.SM_CLOCK] = None  # DCGM_INT64_BLANK
    engine.gpus[0].values[fields.SM_ACTIVE] = 1.02  # MIG-style rounding above 1
    source = _source()
    source.open()
    sample = next(s for s in source.read() if s.entity.gpu == 0)
    assert fields.DRAM_ACTIVE in sample.values
    assert sample.values[fields.DRAM_ACTIVE] is None
    assert sample.values[fields.SM_CLOCK] is None
    assert sample.values[fields.SM_ACTIVE] == 1.0


def test_watch_frequency_follows_the_interval(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source(interval_seconds=2.0)
    source.open()
    (watch,) = engine.watches
    assert watch[2] == 2_000_000  # updateFreq in microseconds
    assert sorted(engine.field_groups[watch[1]]) == sorted([*range(1001, 1016), 100, 203, 112, 155, 160])
    assert engine.groups[watch[0]] == [(1, 0), (1, 1)]


def test_remote_host_engine_by_address(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.listening_address = "10.0.0.7:5555"
    source = _source(address="10.0.0.7:5555")
    source.open()
    assert len(source.read()) == 2
    assert engine.connects == ["10.0.0.7:5555"]
    assert engine.embedded_starts == 0


def test_unreachable_remote_engine_is_a_connection_error(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.listening_address = None
    source = _source(address="10.0.0.7:5555")
    with pytest.raises(SourceError) as caught:
        source.open()
    assert caught.value.reason == "dcgm_connection"
    assert "10.0.0.7:5555" in caught.value.message


def test_gpu_without_profiling_is_skipped_with_its_reason(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.gpus[1].profiling_status = ST_PROFILING_NOT_SUPPORTED
    source = _source()
    source.open()
    samples = source.read()
    assert [s.entity.gpu for s in samples] == [0]
    assert "Profiling is not supported" in source.skipped[1]
    assert engine.groups[engine.watches[0][0]] == [(1, 0)]


def test_gpu_whose_metric_groups_lack_dram_is_skipped(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.gpus[0].metric_group_fields = ((1001, 1002, 1003, 1004),)
    source = _source()
    source.open()
    assert [s.entity.gpu for s in source.read()] == [1]
    assert "DCGM_FI_PROF_DRAM_ACTIVE" in source.skipped[0]


def test_no_gpu_with_profiling_makes_the_source_unavailable(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.gpus[0].profiling_status = ST_PAUSED
    engine.gpus[1].profiling_status = ST_PROFILING_NOT_SUPPORTED
    source = _source()
    with pytest.raises(SourceUnavailable) as caught:
        source.open()
    assert caught.value.reason == "dcgm_no_profiling"
    assert "GPU 0" in caught.value.message and "GPU 1" in caught.value.message
    assert "dcgmi profile --resume" in caught.value.message
    assert engine.live_handles == set()  # the embedded engine was shut down again


def test_mig_gpu_instances_are_sampled_alongside_the_gpu(fake: ModuleType) -> None:
    engine = fake.ENGINE
    gpu = fake.FakeGpu(0, "GPU-63bc0b91-2265-1b94-831c-15c41fe92675", A100, values=_busy_values(0.5, 0.3))
    gpu.instances = [
        fake.FakeInstance(entity_id=0, nvml_instance_id=1, values={fields.DRAM_ACTIVE: 0.21}),
        fake.FakeInstance(entity_id=1, nvml_instance_id=2, values={fields.DRAM_ACTIVE: 0.84}),
    ]
    engine.gpus = [gpu]
    source = _source()
    source.open()
    samples = {s.entity.key: s for s in source.read()}
    assert set(samples) == {(0, None), (0, 1), (0, 2)}
    assert samples[(0, 2)].values[fields.DRAM_ACTIVE] == pytest.approx(0.84)
    assert samples[(0, 1)].entity.uuid == gpu.uuid
    assert samples[(0, 1)].values[fields.PIPE_TENSOR_ACTIVE] is None  # not set on the instance: blank


def test_host_engine_lost_mid_run_then_reconnects(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source()
    source.open()
    assert len(source.read()) == 2
    engine.crash()
    with pytest.raises(SourceError) as caught:
        source.read()
    assert caught.value.reason == "dcgm_connection"
    samples = source.read()  # the next read starts a new embedded engine
    assert len(samples) == 2
    assert engine.embedded_starts == 2


def test_remote_engine_down_keeps_failing_until_it_returns(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source(address="127.0.0.1:5555")
    source.open()
    engine.crash()
    engine.listening_address = None
    for _ in range(2):
        with pytest.raises(SourceError) as caught:
            source.read()
        assert caught.value.reason == "dcgm_connection"
    engine.listening_address = "127.0.0.1:5555"
    assert len(source.read()) == 2


def test_fields_that_need_several_passes_fall_back_to_the_core_set(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.watch_error = ST_PROFILING_MULTI_PASS
    source = _source()
    source.open()
    sample = source.read()[0]
    assert fields.DRAM_ACTIVE in sample.values
    assert fields.PIPE_FP64_ACTIVE not in sample.values


def test_missing_libdcgm_is_unavailable(fake: ModuleType) -> None:
    _two_h100(fake).library_present = False
    source = _source()
    with pytest.raises(SourceUnavailable) as caught:
        source.open()
    assert caught.value.reason == "dcgm_not_found"
    assert "libdcgm" in caught.value.message


def test_missing_bindings_directory_names_the_flag(tmp_path: Path) -> None:
    source = DcgmSource(SourceOptions(), DcgmSettings(bindings=tmp_path))
    with pytest.raises(SourceUnavailable) as caught:
        source.open()
    assert str(tmp_path) in caught.value.message
    assert "--dcgm-bindings" in caught.value.message


def test_default_bindings_paths_are_all_named(tmp_path: Path) -> None:
    defaults = (tmp_path / "dcgm4", tmp_path / "dcgm3")
    with pytest.raises(SourceUnavailable) as caught:
        load_bindings(None, defaults)
    assert str(defaults[0]) in caught.value.message and str(defaults[1]) in caught.value.message


def test_close_twice_is_safe(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source()
    source.open()
    source.close()
    source.close()
    assert engine.live_handles == set()


def test_clock_event_reasons_and_power_are_watched_and_read(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.gpus[0].values.update({112: 0x40, 155: 512.25, 160: 700.0})  # HW thermal slowdown
    source = _source()
    source.open()
    sample = next(s for s in source.read() if s.entity.gpu == 0)
    source.close()
    assert sample.values[fields.CLOCKS_EVENT_REASONS] == 0x40
    assert sample.values[fields.POWER_USAGE] == pytest.approx(512.25)
    assert sample.values[fields.POWER_MGMT_LIMIT] == 700.0


def test_read_since_gives_every_sample_the_engine_kept_since_the_last_call(fake: ModuleType) -> None:
    """dcgmGetValuesSince_v2: ten watch ticks at 100 ms come back as ten samples per GPU, oldest
    first, each with that tick's values and stamp; the next call starts where this one ended."""
    engine = _two_h100(fake)
    source = _source()
    source.open()
    start = 1_764_633_600_000_000
    for tick in range(10):
        engine.gpus[0].values[fields.DRAM_ACTIVE] = tick / 10
        engine.collect(start + tick * 100_000)
    samples = source.read_since()
    assert len(samples) == 20
    gpu0 = [s for s in samples if s.entity.gpu == 0]
    assert [s.timestamp for s in gpu0] == [_stamp(start + t * 100_000, 0) for t in range(10)]
    assert [s.values[fields.DRAM_ACTIVE] for s in gpu0] == pytest.approx([t / 10 for t in range(10)])
    assert [s.timestamp for s in samples] == sorted(s.timestamp for s in samples)
    assert set(gpu0[0].values) == set(range(1001, 1016)) | {100, 203, 112, 155, 160}
    assert source.read_since() == []  # nothing new since
    engine.collect(start + 1_000_000)
    assert [s.timestamp for s in source.read_since()] == [_stamp(start + 1_000_000, i) for i in (0, 1)]


def test_read_since_keeps_mig_instances_and_blanks(fake: ModuleType) -> None:
    engine = fake.ENGINE
    gpu = fake.FakeGpu(0, "GPU-63bc0b91-2265-1b94-831c-15c41fe92675", A100, values=_busy_values(0.5, 0.3))
    gpu.instances = [fake.FakeInstance(entity_id=0, nvml_instance_id=1, values={fields.DRAM_ACTIVE: 0.21})]
    engine.gpus = [gpu]
    source = _source()
    source.open()
    engine.collect(1_764_633_600_000_000)
    samples = {s.entity.key: s for s in source.read_since()}
    assert set(samples) == {(0, None), (0, 1)}
    assert samples[(0, 1)].values[fields.DRAM_ACTIVE] == pytest.approx(0.21)
    assert samples[(0, 1)].values[fields.PIPE_TENSOR_ACTIVE] is None


def test_read_since_after_a_lost_engine_reconnects_and_starts_afresh(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source()
    source.open()
    engine.collect(5_000_000)
    assert len(source.read_since()) == 2
    engine.crash()
    with pytest.raises(SourceError) as caught:
        source.read_since()
    assert caught.value.reason == "dcgm_connection"
    engine.history = [(1_000_000, engine.history[0][1])]  # a new engine: its clock starts lower
    assert [s.timestamp for s in source.read_since()] == [_stamp(1_000_000, i) for i in (0, 1)]


# -- read_batches: the sampler's read (exporter/sources/base.py BatchingSource) --------------------

START = 1_764_633_600_000_000
TICK = 100_000
"""A watch at --interval 0.1: one tick every 100 ms (usec)."""


def _ticks(engine: Any, first: int, count: int) -> None:
    """The engine samples `count` ticks from tick `first`; GPU 0's DRAM activity is tick / 1000."""
    for tick in range(first, first + count):
        engine.gpus[0].values[fields.DRAM_ACTIVE] = tick / 1000
        engine.collect(START + tick * TICK)


def _opened(engine: Any, **overrides: Any) -> DcgmSource:
    """An opened source whose first read (the newest tick only) is behind it."""
    source = _source(**overrides)
    source.open()
    _ticks(engine, 0, 1)
    assert len(source.read_batches()) == 1
    return source


def _dram(batches: list[list[Any]]) -> list[float | None]:
    return [next(s for s in batch if s.entity.gpu == 0).values[fields.DRAM_ACTIVE] for batch in batches]


def test_a_watch_at_100ms_is_read_about_once_a_second_as_ten_batches(fake: ModuleType) -> None:
    """--interval 0.1: DCGM watches every 100 ms and keeps 30 s; the sampler reads about once a
    second (FOLD_EVERY_SECONDS) and gets each tick as its own batch, one sample per GPU."""
    from exporter.sampler import FOLD_EVERY_SECONDS

    engine = _two_h100(fake)
    source = _opened(engine, interval_seconds=0.1)
    (watch,) = engine.watches
    assert (watch[2], watch[3]) == (100_000, 30.0)
    _ticks(engine, 1, round(FOLD_EVERY_SECONDS / 0.1))
    batches = source.read_batches()
    assert len(batches) == 10
    assert [[s.entity.gpu for s in batch] for batch in batches] == [[0, 1]] * 10
    assert _dram(batches) == pytest.approx([t / 1000 for t in range(1, 11)])
    assert [batch[0].timestamp for batch in batches] == [_stamp(START + t * TICK, 0) for t in range(1, 11)]
    assert set(batches[0][1].values) == set(range(1001, 1016)) | {100, 203, 112, 155, 160}
    assert source.read_batches() == []  # nothing since


def test_batches_do_not_depend_on_the_order_dcgm_hands_values_in(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.field_major = True  # each field's samples, oldest first, one field after another
    source = _opened(engine)
    _ticks(engine, 1, 3)
    batches = source.read_batches()
    assert [[s.entity.gpu for s in batch] for batch in batches] == [[0, 1]] * 3
    assert _dram(batches) == pytest.approx([0.001, 0.002, 0.003])
    assert all(len(s.values) == WATCHED for batch in batches for s in batch)


def test_blanks_in_a_batch_read_as_none(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _opened(engine)
    engine.gpus[1].values[fields.SM_CLOCK] = None  # DCGM_INT64_BLANK
    engine.collect(START + TICK)
    (batch,) = source.read_batches()
    assert batch[1].values[fields.SM_CLOCK] is None
    assert batch[0].values[fields.SM_CLOCK] == 1755


def test_first_read_after_open_hands_over_the_newest_kept_tick_only(fake: ModuleType) -> None:
    """A remote engine that other clients watch keeps 30 s; folding it would count a stale
    half-minute as if live."""
    engine = _two_h100(fake)
    source = _source()
    source.open()
    _ticks(engine, 0, 300)
    (batch,) = source.read_batches()
    assert _dram([batch]) == pytest.approx([0.299])
    _ticks(engine, 300, 2)
    assert _dram(source.read_batches()) == pytest.approx([0.300, 0.301])


def test_first_read_after_a_reconnect_hands_over_the_newest_tick_only(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _opened(engine)
    _ticks(engine, 1, 5)
    assert len(source.read_batches()) == 5
    engine.crash()
    with pytest.raises(SourceError) as caught:
        source.read_batches()
    assert caught.value.reason == "dcgm_connection"
    _ticks(engine, 6, 300)  # the engine kept sampling: its history covers the outage
    (batch,) = source.read_batches()  # reconnects
    assert engine.embedded_starts == 2
    assert _dram([batch]) == pytest.approx([0.305])
    _ticks(engine, 306, 3)
    assert _dram(source.read_batches()) == pytest.approx([0.306, 0.307, 0.308])


def test_a_tick_caught_mid_sampling_is_held_for_the_next_read(fake: ModuleType) -> None:
    """The read came after GPU 0's values of the last tick and before GPU 1's: that tick waits
    for GPU 1 instead of counting it as missing from a batch."""
    engine = _two_h100(fake)
    source = _opened(engine)
    _ticks(engine, 1, 3)
    ts, entities = engine.history[-1]
    gpu1 = entities.pop((1, 1))
    batches = source.read_batches()
    assert [[s.entity.gpu for s in batch] for batch in batches] == [[0, 1], [0, 1]]
    engine.history.append((ts + 1_000, {(1, 1): gpu1}))  # GPU 1's values, stamped after the read
    _ticks(engine, 4, 1)
    batches = source.read_batches()
    assert [[s.entity.gpu for s in batch] for batch in batches] == [[0, 1], [0, 1]]
    assert _dram(batches) == pytest.approx([0.003, 0.004])
    assert source.read_batches() == []  # the held tick went out once


def test_a_gpu_that_stops_reporting_holds_back_one_read_at_most(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _opened(engine)
    _ticks(engine, 1, 2)
    engine.history[-1][1].pop((1, 1))
    assert len(source.read_batches()) == 1  # the last tick, GPU 0 alone, waits
    _ticks(engine, 3, 2)
    for _ts, entities in engine.history[-2:]:
        entities.pop((1, 1))  # GPU 1 is gone
    batches = source.read_batches()
    assert [[s.entity.gpu for s in batch] for batch in batches] == [[0], [0], [0]]


def test_values_never_collected_are_left_out(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source()
    source.open()
    engine.stamp_step_usec = 0
    engine.collect(0)  # stamp 0: DCGM has no sample for these values
    engine.collect(START)
    assert [s.timestamp for s in source.read_since()] == [START / 1e6] * 2


def test_a_held_tick_of_a_lost_connection_is_dropped(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _opened(engine)
    _ticks(engine, 1, 2)
    engine.history[-1][1].pop((1, 1))
    assert len(source.read_batches()) == 1  # GPU 0's last tick is held
    engine.crash()
    with pytest.raises(SourceError):
        source.read_batches()
    engine.history = []  # the new engine has sampled nothing yet
    assert source.read_batches() == []


def test_the_sampler_folds_every_kept_tick_in_one_read(fake: ModuleType) -> None:
    """The sampler takes read_batches over read(): one round folds ten 100 ms ticks, and each GPU
    integrates the whole second between its first and its last tick."""
    from exporter.catalog import load_catalog
    from exporter.inference import InferenceConfig
    from exporter.sampler import Sampler

    engine = _two_h100(fake)
    source = _source(interval_seconds=0.1)
    source.open()
    options = dcgm_options(bindings=FAKE_DIR, interval_seconds=0.1)
    sampler = Sampler(
        "dcgm",
        options,
        load_catalog(),
        InferenceConfig(expected_interval_seconds=0.1, smoothing_seconds=0.0, dwell_seconds=0.0),
        source=source,
        opener=lambda name, opts: source,
        wall_clock=lambda: START / 1e6 + 2.0,
    )
    _ticks(engine, 0, 1)
    assert sampler.run_once()  # the first read: tick 0 alone
    _ticks(engine, 1, 10)
    assert sampler.run_once()
    snapshot = sampler.snapshot
    assert snapshot.source.samples_total == 11
    assert [g.inference.timestamp for g in snapshot.gpus] == [_stamp(START + 10 * TICK, i) for i in (0, 1)]
    assert all(sum(g.totals.regime_seconds.values()) == pytest.approx(1.0) for g in snapshot.gpus)


def test_a_first_read_caught_mid_sampling_hands_over_the_last_whole_tick(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    source = _source()
    source.open()
    _ticks(engine, 0, 30)
    ts, entities = engine.history[-1]
    gpu1 = entities.pop((1, 1))
    (batch,) = source.read_batches()
    assert [s.entity.gpu for s in batch] == [0, 1]
    assert _dram([batch]) == pytest.approx([0.028])
    engine.history.append((ts + 1_000, {(1, 1): gpu1}))
    (batch,) = source.read_batches()
    assert [s.entity.gpu for s in batch] == [0, 1]
    assert _dram([batch]) == pytest.approx([0.029])
