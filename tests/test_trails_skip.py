"""The trails observer decides "nothing to plot" before deriving an Estimate (issue 22.4), and
that decision never drops a point the Estimate would have placed."""

from __future__ import annotations

import itertools

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.state import GpuState
from exporter.view.node_view import trail_key
from exporter.view.trails import Trails, nothing_to_plot

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"


def sample(ts: float, entity: Entity, dram: float, tensor: float, fp32: float | None = None) -> Sample:
    values = {fields.DRAM_ACTIVE: dram, fields.PIPE_TENSOR_ACTIVE: tensor, fields.GR_ENGINE_ACTIVE: 0.9}
    if fp32 is not None:
        values[fields.PIPE_FP32_ACTIVE] = fp32
    return Sample(ts, entity, values)


BUSY = Entity(0, "GPU-busy", H100)
IDLE = Entity(1, "GPU-idle", H100)
UNKNOWN = Entity(2, "GPU-unknown", "Mystery Accelerator 9000")
NO_PROFILE = Entity(3, "MIG-no-profile", H100, gpu_instance=1)  # an instance without a roof


def derived(gpu: GpuState) -> bool:
    """Whether the GpuState's Estimate was built (its memo holds it once read)."""
    assert gpu.derived is not None
    return gpu.derived.estimate is not None


def test_an_idle_gpu_is_not_derived_and_a_plotted_one_is() -> None:
    trails = Trails(points=10, step_seconds=1.0)
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0))
    for second in range(3):
        ts = 1000.0 + second
        sampler.ingest(
            [
                sample(ts, BUSY, 0.6, 0.4),
                sample(ts, IDLE, 0.0, 0.0),
                sample(ts, UNKNOWN, 0.6, 0.4),
                sample(ts, NO_PROFILE, 0.6, 0.4),
            ]
        )
        snapshot = sampler.snapshot
        trails.observe(snapshot)  # observed here, not as a sampler observer: nothing else reads
        by_uuid = {g.entity.uuid: g for g in snapshot.gpus}
        assert derived(by_uuid["GPU-busy"])  # a point is due every second: its Estimate is read
        assert not derived(by_uuid["GPU-idle"])
        assert not derived(by_uuid["GPU-unknown"])
        assert not derived(by_uuid["MIG-no-profile"])
    assert set(trails.current()) == {trail_key("GPU-busy", None)}
    assert len(trails.current()[trail_key("GPU-busy", None)]) == 3


def test_nothing_to_plot_is_never_said_of_a_reading_that_places_a_point() -> None:
    """Over a grid of readings (idle with a trickle of traffic included), every GpuState said to
    have nothing to plot has an Estimate that places no point, and the trails equal those built
    from the Estimate alone."""
    levels = (0.0, 0.0005, 0.001, 0.01, 0.3)
    entities = [BUSY, UNKNOWN, NO_PROFILE]
    skipped = placed = 0
    for step, (dram, tensor, fp32) in enumerate(itertools.product(levels, levels, (None, 0.0, 0.2))):
        sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0))
        sampler.ingest([sample(1000.0 + step, e, dram, tensor, fp32) for e in entities])
        for gpu in sampler.snapshot.gpus:
            estimate = gpu.inference.estimate
            intensity = None if estimate is None else estimate.intensity_flop_per_byte
            flops = None if estimate is None else estimate.achieved_flop_per_second
            places = bool(intensity and flops and intensity > 0 and flops > 0)  # Trails.observe's test
            if nothing_to_plot(gpu):
                skipped += 1
                assert not places, (dram, tensor, fp32, gpu.entity)
            placed += places
    assert skipped and placed  # the grid has both kinds
