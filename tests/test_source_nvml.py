"""The NVML (GPM) source against a fake pynvml (tests/fakes/pynvml_fake/pynvml.py)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from exporter import fields
from exporter.sources import create_source
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable
from exporter.sources.nvml import MIB, NvmlSource

FAKE_PATH = Path(__file__).parent / "fakes" / "pynvml_fake" / "pynvml.py"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("pynvml", FAKE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    spec.loader.exec_module(module)
    module.reset()
    yield module


def _metrics(m: ModuleType, dram_pct: float, tensor_pct: float) -> dict[int, float]:
    return {
        m.NVML_GPM_METRIC_GRAPHICS_UTIL: 97.0,
        m.NVML_GPM_METRIC_SM_UTIL: 91.0,
        m.NVML_GPM_METRIC_SM_OCCUPANCY: 33.0,
        m.NVML_GPM_METRIC_ANY_TENSOR_UTIL: tensor_pct,
        m.NVML_GPM_METRIC_DRAM_BW_UTIL: dram_pct,
        m.NVML_GPM_METRIC_FP64_UTIL: 0.0,
        m.NVML_GPM_METRIC_FP32_UTIL: 5.0,
        m.NVML_GPM_METRIC_FP16_UTIL: 1.0,
        m.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 46.0,
        m.NVML_GPM_METRIC_PCIE_RX_PER_SEC: 372.0,
        m.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 14142.0,
        m.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 14000.0,
        m.NVML_GPM_METRIC_IMMA_TENSOR_UTIL: 0.0,
        m.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: tensor_pct,
        m.NVML_GPM_METRIC_DFMA_TENSOR_UTIL: 0.0,
    }


def _two_h100(m: ModuleType) -> None:
    m.FAKE.devices = [
        m.FakeDevice(
            H100,
            "GPU-8e5c3a1f-2d4b-6c7e-9f01-23456789abcd",
            sm_clock_mhz=1755,
            gpu_util_percent=100,
            metrics=_metrics(m, 71.0, 13.0),
        ),
        m.FakeDevice(
            H100,
            "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901",
            sm_clock_mhz=1980,
            gpu_util_percent=64,
            metrics=_metrics(m, 12.0, 82.0),
        ),
    ]


def _open(**overrides: object) -> NvmlSource:
    source = NvmlSource(SourceOptions(**overrides))  # type: ignore[arg-type]
    source.open()
    return source


def test_registry_builds_the_nvml_source() -> None:
    source = create_source("nvml", SourceOptions())
    assert isinstance(source, NvmlSource)
    assert source.paced is False


def test_percentages_become_ratios_and_mib_become_bytes(nvml: ModuleType) -> None:
    _two_h100(nvml)
    source = _open()
    samples = {s.entity.gpu: s for s in source.read()}
    assert set(samples) == {0, 1}
    first = samples[0]
    assert first.entity.uuid == "GPU-8e5c3a1f-2d4b-6c7e-9f01-23456789abcd"
    assert first.entity.model == H100
    assert first.values[fields.DRAM_ACTIVE] == pytest.approx(0.71)
    assert first.values[fields.PIPE_TENSOR_ACTIVE] == pytest.approx(0.13)
    assert first.values[fields.GR_ENGINE_ACTIVE] == pytest.approx(0.97)
    assert first.values[fields.PCIE_TX_BYTES] == pytest.approx(46 * 1_048_576)
    assert first.values[fields.NVLINK_TX_BYTES] == pytest.approx(14142 * MIB)
    assert first.values[fields.NVLINK_RX_BYTES] == pytest.approx(14000 * MIB)
    assert first.values[fields.SM_CLOCK] == 1755
    assert first.values[fields.GPU_UTIL] == 100
    assert samples[1].values[fields.PIPE_TENSOR_HMMA_ACTIVE] == pytest.approx(0.82)
    source.close()


def test_one_new_gpm_sample_per_gpu_per_read(nvml: ModuleType) -> None:
    """The first sample is taken at open, then one per read; NVML gets (older, newer) each time."""
    _two_h100(nvml)
    source = _open()
    assert nvml.FAKE.samples_taken == [(0, None), (1, None)]
    for reads in range(1, 4):
        nvml.FAKE.devices[0].metrics[nvml.NVML_GPM_METRIC_DRAM_BW_UTIL] = 10.0 * reads
        sample = next(s for s in source.read() if s.entity.gpu == 0)
        assert sample.values[fields.DRAM_ACTIVE] == pytest.approx(0.1 * reads)
        assert len(nvml.FAKE.samples_taken) == 2 + 2 * reads
    source.close()


def test_gpm_unsupported_gpus_make_the_source_unavailable(nvml: ModuleType) -> None:
    nvml.FAKE.devices = [nvml.FakeDevice("Tesla V100-SXM2-32GB", "GPU-aaaa", gpm_supported=False)]
    with pytest.raises(SourceUnavailable) as caught:
        _open()
    assert caught.value.reason == "gpm_unsupported"
    assert "Tesla V100-SXM2-32GB" in caught.value.message
    assert "--source dcgm" in caught.value.message and "--source scrape" in caught.value.message
    assert nvml.FAKE.initialized == 0  # NVML was shut down again


def test_mixed_node_samples_only_gpm_capable_gpus(nvml: ModuleType) -> None:
    _two_h100(nvml)
    nvml.FAKE.devices.insert(0, nvml.FakeDevice("NVIDIA A100-SXM4-80GB", "GPU-bbbb", gpm_supported=False))
    source = _open()
    assert sorted(s.entity.gpu for s in source.read()) == [1, 2]


def test_gpu_that_falls_off_the_bus_leaves_the_batch(nvml: ModuleType) -> None:
    _two_h100(nvml)
    source = _open()
    assert len(source.read()) == 2
    nvml.FAKE.devices[1].lost = True
    samples = source.read()
    assert [s.entity.gpu for s in samples] == [0]
    assert "fell off the bus" in source.dropped[1]
    assert [s.entity.gpu for s in source.read()] == [0]
    nvml.FAKE.devices[0].lost = True
    with pytest.raises(SourceError) as caught:
        source.read()
    assert caught.value.reason == "gpu_lost"
    assert "GPU 0" in caught.value.message and "GPU 1" in caught.value.message


def test_missing_nvml_library_is_unavailable(nvml: ModuleType) -> None:
    nvml.FAKE.library_present = False
    with pytest.raises(SourceUnavailable) as caught:
        _open()
    assert caught.value.reason == "nvml_not_found"
    assert "NVML Shared Library Not Found" in caught.value.message


def test_missing_nvidia_ml_py_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(SourceUnavailable) as caught:
        _open()
    assert caught.value.reason == "nvml_not_found"


def test_mig_instances_are_sampled_with_the_mig_call(nvml: ModuleType) -> None:
    device = nvml.FakeDevice(H100, "GPU-cccc", metrics=_metrics(nvml, 50.0, 30.0))
    device.mig_instances = [
        nvml.FakeMigInstance(1, {nvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 21.0}),
        nvml.FakeMigInstance(2, {nvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 84.0}),
    ]
    nvml.FAKE.devices = [device]
    source = _open()
    samples = {s.entity.key: s for s in source.read()}
    assert set(samples) == {(0, None), (0, 1), (0, 2)}
    assert samples[(0, 2)].values[fields.DRAM_ACTIVE] == pytest.approx(0.84)
    assert samples[(0, 1)].values[fields.PIPE_TENSOR_ACTIVE] is None  # metric not given for the instance
    assert samples[(0, None)].values[fields.GPU_UTIL] is None  # NVML: not supported with MIG on
    assert (0, 2) in nvml.FAKE.samples_taken


def test_out_of_range_percentages_follow_the_clamp_rule(nvml: ModuleType) -> None:
    _two_h100(nvml)
    nvml.FAKE.devices[0].metrics[nvml.NVML_GPM_METRIC_SM_UTIL] = 103.0
    nvml.FAKE.devices[0].metrics[nvml.NVML_GPM_METRIC_SM_OCCUPANCY] = 250.0
    sample = next(s for s in _open().read() if s.entity.gpu == 0)
    assert sample.values[fields.SM_ACTIVE] == 1.0
    assert sample.values[fields.SM_OCCUPANCY] is None


def test_close_frees_samples_and_shuts_nvml_down(nvml: ModuleType) -> None:
    _two_h100(nvml)
    source = _open()
    source.read()
    source.close()
    source.close()
    assert nvml.FAKE.initialized == 0
    assert nvml.FAKE.freed == 4


def test_a_gpu_lost_before_open_is_skipped_and_the_others_are_sampled(nvml: ModuleType) -> None:
    """Reopening after a GPU fell off the bus meets it again in nvmlDeviceGetCount; NVML's
    GPU_IS_LOST there must not escape open() as a raw NVMLError (it would kill the sampler)."""
    _two_h100(nvml)
    nvml.FAKE.devices[1].lost = True
    source = _open()
    assert [s.entity.gpu for s in source.read()] == [0]
    assert "fell off the bus" in source.dropped[1]


def test_every_gpu_lost_at_open_is_a_source_error(nvml: ModuleType) -> None:
    _two_h100(nvml)
    for device in nvml.FAKE.devices:
        device.lost = True
    with pytest.raises(SourceUnavailable) as caught:
        _open()
    assert "GPU 0" in caught.value.message and "GPU 1" in caught.value.message
    assert nvml.FAKE.initialized == 0


def test_clocks_event_reasons_and_power_are_read_and_name_the_cause(nvml: ModuleType) -> None:
    # a GEMM on a power-capped H100: nvmlDeviceGetCurrentClocksEventReasons says SwPowerCap (0x4),
    # the draw (mW) sits at the management limit
    from exporter.catalog import load_catalog
    from exporter.inference import InferenceConfig
    from exporter.sampler import Sampler

    device = nvml.FakeDevice(H100, "GPU-dddd", sm_clock_mhz=1185, metrics=_metrics(nvml, 30.0, 85.0))
    device.clocks_event_reasons = 0x4 | 0x1
    device.power_usage_mw, device.power_limit_mw = 699_412, 700_000
    other = nvml.FakeDevice(H100, "GPU-eeee", sm_clock_mhz=1830, metrics=_metrics(nvml, 30.0, 85.0))
    nvml.FAKE.devices = [device, other]
    source = _open()
    by_gpu = {s.entity.gpu: s for s in source.read()}
    values = by_gpu[0].values
    assert values[fields.CLOCKS_EVENT_REASONS] == 5.0
    assert values[fields.POWER_USAGE] == pytest.approx(699.412) and values[fields.POWER_MGMT_LIMIT] == 700.0
    assert fields.CLOCKS_EVENT_REASONS not in by_gpu[1].values  # not supported: left out, not 0
    sampler = Sampler("nvml", SourceOptions(), load_catalog(), InferenceConfig(), source=source)
    assert sampler.run_once()
    estimate = next(g.estimate for g in sampler.snapshot.gpus if g.entity.gpu == 0)
    assert estimate is not None and estimate.regime == "compute_bound"
    assert estimate.clock_causes == ("power cap",) and "gives back up to 54%" in estimate.lever
    source.close()


def _mig_h100(m: ModuleType) -> None:
    """An H100 with three GPU instances: NVML names 3g.40gb (60 SMs, as the MIG user guide prints)
    and 1g.10gb (given 14 SMs here, two fewer than the catalog's 16, so that the live count's
    precedence shows), and refuses the third's profile info."""
    busy = {m.NVML_GPM_METRIC_DRAM_BW_UTIL: 30.0, m.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 90.0}
    device = m.FakeDevice(H100, "GPU-mig0", metrics=_metrics(m, 50.0, 30.0))
    device.mig_instances = [
        m.FakeMigInstance(1, dict(busy), m.FakeGpuInstanceProfile(9, "MIG 3g.40gb", 3, 60, 40320)),
        m.FakeMigInstance(2, dict(busy), m.FakeGpuInstanceProfile(19, "MIG 1g.10gb", 1, 14, 9856)),
        m.FakeMigInstance(3, dict(busy)),  # NVML_ERROR_NO_PERMISSION for its profile info
    ]
    m.FAKE.devices = [device]


def test_a_mig_instance_carries_the_profile_and_sm_count_nvml_reports(nvml: ModuleType) -> None:
    _mig_h100(nvml)
    entities = {s.entity.gpu_instance: s.entity for s in _open().read()}
    assert (entities[1].profile, entities[1].sm_count) == ("3g.40gb", 60)  # "MIG " dropped
    assert (entities[2].profile, entities[2].sm_count) == ("1g.10gb", 14)
    assert (entities[3].profile, entities[3].sm_count) == (None, None)  # refused: no roof, as before
    assert (entities[None].profile, entities[None].sm_count) == (None, None)  # the parent GPU


def test_the_live_sm_count_sets_the_instance_roof_over_the_catalogs(nvml: ModuleType) -> None:
    from exporter.catalog import load_catalog
    from exporter.inference import InferenceConfig
    from exporter.sampler import Sampler

    _mig_h100(nvml)
    sampler = Sampler("nvml", SourceOptions(), load_catalog(), InferenceConfig(), source=_open())
    assert sampler.run_once()
    roofs = {g.entity.gpu_instance: g.estimate.roof if g.estimate else None for g in sampler.snapshot.gpus}
    h100 = load_catalog().lookup("h100-sxm")
    assert roofs[1] is not None and roofs[1].peak_flop_per_second == pytest.approx(989.5e12 * 60 / 132)
    # NVML's 14 SMs, not the table's 16: the library knows this instance
    assert roofs[2] is not None and roofs[2].peak_flop_per_second == pytest.approx(989.5e12 * 14 / 132)
    assert roofs[2].bandwidth_bytes_per_second == pytest.approx(
        h100.roof("bf16").bandwidth_bytes_per_second / 8
    )
    assert roofs[3] is None  # no profile: ratios and a regime, no roof


def test_a_live_count_fills_a_profile_the_table_lacks_and_a_bad_one_is_ignored() -> None:
    from exporter.catalog import load_catalog

    h100 = load_catalog().lookup("h100-sxm")
    assert h100.mig_slices("1c.3g.40gb") is not None and h100.mig_slices("1c.3g.40gb").sms is None  # type: ignore[union-attr]
    filled = h100.instance_roof("bf16", "1c.3g.40gb", live_sms=20)
    assert filled is not None and filled.peak_flop_per_second == pytest.approx(989.5e12 * 20 / 132)
    assert h100.instance_roof("bf16", "1c.3g.40gb") is None  # unpublished, and no source told
    # more SMs than the card has: not believed, the table's count stands
    assert h100.instance_roof("bf16", "3g.40gb", live_sms=500) == h100.instance_roof("bf16", "3g.40gb")


def test_a_recording_keeps_the_live_sm_count_and_a_bad_one_is_refused(
    nvml: ModuleType, tmp_path: Path
) -> None:
    from replay_lines import play_all, read_samples, replay_source

    from exporter.recorder import record

    _mig_h100(nvml)
    source = _open()
    trace = tmp_path / "mig.jsonl"
    ticks = iter(range(100))  # one read: the clock passes the 2.5 s deadline at the second
    assert record(source, trace, 2.5, 0.001, clock=lambda: float(next(ticks))) == 4
    source.close()
    entities = {s.entity.gpu_instance: s.entity for s in read_samples(trace)}
    assert (entities[2].profile, entities[2].sm_count) == ("1g.10gb", 14)  # replays with NVML's count
    assert entities[3].sm_count is None and entities[None].sm_count is None
    line = (
        '{"ts": 1.0, "gpu": 0, "model": "%s", "gpu_instance": 1, "gpu_instance_sm_count": %s, '
        '"fields": {"1005": 0.5}}'
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(line % (H100, value) + "\n" for value in ("0", "true", '"60"', "2000", "60")))
    replay = replay_source(bad)
    samples = [s for batch in play_all(replay) for s in batch]
    assert [s.entity.sm_count for s in samples] == [60]
    assert replay.replay_stats.skipped_by_reason == {"bad_entity": 4}
