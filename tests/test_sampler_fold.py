"""A batch folded in one pass equals the same samples folded one by one (docs/daemon.md, "Live
budget"): the sampler keeps each GPU's state mutable between publishes (inference.EntityFold) and
builds the records readers see only when a snapshot is built, so these tests pin that building
them late, or never for most samples, changes no bit of what is published, and that a record,
once published, is never changed by the samples folded after it.

The trace has regime switches (compute-bound at a reduced clock, memory-bound, idle, latency),
a gap, a blank field, a sample with no activity field at all, a GPU missing a batch within the
grace, one leaving past it and returning (its counters kept), and an upstream whose clock went
back (the timeline starts again, the counters continue)."""

from __future__ import annotations

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import EntityFold, EntityInference, InferenceConfig, step
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.state import Snapshot

CATALOG = load_catalog()
MODEL = "NVIDIA H100 80GB HBM3"
CARD = CATALOG.find_by_nvml_name(MODEL)
WHOLE = Entity(0, "GPU-aaaa", MODEL)
OTHER = Entity(1, "GPU-bbbb", MODEL)
INSTANCES = (Entity(2, "GPU-cccc", MODEL, 1), Entity(2, "GPU-cccc", MODEL, 2))
CONFIG = InferenceConfig(smoothing_seconds=2.0, dwell_seconds=1.0)
BATCHES = 80


def values(k: int, lane: int) -> dict[int, float | None]:
    """The k-th sample of one GPU: a phase per ten samples, each a different regime."""
    phase = (k // 10 + lane) % 6
    busy: dict[int, float | None] = {
        fields.GR_ENGINE_ACTIVE: 0.95,
        fields.SM_ACTIVE: 0.9,
        fields.SM_OCCUPANCY: 0.5,
        fields.PIPE_FP64_ACTIVE: 0.0,
        fields.PIPE_FP32_ACTIVE: 0.1,
        fields.PIPE_FP16_ACTIVE: 0.0,
        fields.SM_CLOCK: 1980.0 - k,
        fields.GPU_UTIL: 99.0,
        fields.NVLINK_TX_BYTES: 1e9 * (k % 7),
    }
    if phase == 0:  # compute-bound, then at a reduced clock with its reasons and the power cap
        busy |= {fields.PIPE_TENSOR_ACTIVE: 0.9, fields.DRAM_ACTIVE: 0.3}
        if k % 10 >= 5:
            busy |= {
                fields.SM_CLOCK: 1100.0,
                fields.CLOCKS_EVENT_REASONS: 0x4 | 0x80,
                fields.POWER_USAGE: 699.0,
                fields.POWER_MGMT_LIMIT: 700.0,
            }
    elif phase == 1:
        busy |= {fields.PIPE_TENSOR_ACTIVE: 0.1, fields.DRAM_ACTIVE: 0.92}
    elif phase == 2:  # idle
        busy = {fields.GR_ENGINE_ACTIVE: 0.0, fields.DRAM_ACTIVE: 0.0, fields.PIPE_TENSOR_ACTIVE: 0.0}
    elif phase == 3:  # a blank DRAM_ACTIVE, and one sample with no activity field at all
        busy |= {fields.PIPE_TENSOR_ACTIVE: 0.4, fields.DRAM_ACTIVE: None}
        if k % 10 == 4:
            busy = {fields.SM_CLOCK: 1500.0}
    elif phase == 4:  # latency-bound
        busy |= {fields.PIPE_TENSOR_ACTIVE: 0.2, fields.DRAM_ACTIVE: 0.2, fields.SM_ACTIVE: 0.3}
    else:
        busy |= {fields.PIPE_TENSOR_ACTIVE: 0.55 + 0.004 * k, fields.DRAM_ACTIVE: 0.5 - 0.004 * k}
    return busy


def stamp(k: int) -> float:
    """0.25 s apart, with a 40 s gap after batch 25."""
    return 1_000.0 + 0.25 * k + (40.0 if k > 25 else 0.0)


def trace() -> list[list[Sample]]:
    batches = []
    for k in range(BATCHES):
        batch = [Sample(stamp(k), WHOLE, values(k, 0))]
        if not (40 <= k <= 41 or 50 <= k <= 56):  # misses two batches, then leaves and returns
            other = stamp(k) - (300.0 if k >= 65 else 0.0)  # its upstream's clock went back
            batch.append(Sample(other, OTHER, values(k, 1)))
        batch += [Sample(stamp(k), entity, values(k, 2 + i)) for i, entity in enumerate(INSTANCES)]
        batches.append(batch)
    return batches


class Kept:
    """Hands over the trace a few batches per read, as a source that keeps its batches does."""

    name = "kept"
    paced = True  # trace time: timestamps are checked for order, not against the wall clock
    records_skipped = 0

    def __init__(self, batches: list[list[Sample]], per_read: int) -> None:
        self._batches = batches
        self._per_read = per_read
        self.read_count = 0

    def open(self) -> None:
        pass

    def read(self) -> list[Sample]:
        raise AssertionError("read whole batches")

    def read_batches(self) -> list[list[Sample]]:
        taken = self._batches[: self._per_read]
        del self._batches[: self._per_read]
        self.read_count += len(taken)
        return taken

    def close(self) -> None:
        pass


def make(source: Kept | None = None) -> Sampler:
    return Sampler(
        "kept",
        SourceOptions(interval_seconds=0.25),
        CATALOG,
        CONFIG,
        source=source,  # type: ignore[arg-type]
        opener=lambda name, options: source,  # type: ignore[arg-type,return-value]
        grace_batches=3,
        wall_clock=lambda: 1_000.0,
    )


def published(snapshot: Snapshot) -> list[tuple[object, ...]]:
    """What a reader sees of each GPU: its state record, labels and Estimate."""
    return [(g.entity, g.inference, g.mig_parent, g.gpu_share, g.estimate) for g in snapshot.gpus]


def test_batches_folded_in_one_pass_publish_what_sample_by_sample_publishes() -> None:
    one_by_one = make()
    expected: dict[int, list[tuple[object, ...]]] = {}
    for k, batch in enumerate(trace()):
        one_by_one.ingest(batch)
        expected[k + 1] = published(one_by_one.snapshot)

    source = Kept(trace(), per_read=7)
    batched = make(source)
    kept: list[tuple[int, Snapshot, list[tuple[object, ...]]]] = []
    while source.read_count < BATCHES:
        assert batched.run_once()
        snapshot = batched.snapshot
        kept.append((source.read_count, snapshot, published(snapshot)))
        assert published(snapshot) == expected[source.read_count], f"after batch {source.read_count}"
    assert len(kept) == -(-BATCHES // 7)
    for count, snapshot, seen in kept:  # nothing folded later changed a published record
        assert published(snapshot) == seen == expected[count]

    final = batched.snapshot
    regimes = {g.estimate.raw_regime for g in final.gpus if g.estimate is not None}
    totals = final.gpus[0].totals
    assert totals.clock_lost_seconds and sum(totals.clock_lost_seconds.values()) > 0
    assert totals.regime_seconds is not None and totals.regime_seconds["compute_bound"] > 0
    assert len({g.entity for g in final.gpus}) == 4 and regimes  # every GPU still there
    assert final.source.errors_total.get("timestamp_backwards") == 1


def test_a_fold_read_now_and_then_equals_step_by_step() -> None:
    """EntityFold kept between reads, against `step` (one fold from and to the record) per sample:
    the same records at every read, whatever was folded in between without one."""
    samples = [Sample(stamp(k), WHOLE, values(k, 0)) for k in range(BATCHES)]
    renumbered = Entity(3, "GPU-aaaa", MODEL, 0)  # the same GPU, now a MIG instance: another roof
    samples += [Sample(stamp(BATCHES + k), renumbered, values(k, 0)) for k in range(4)]
    reference: EntityInference | None = None
    by_step: list[EntityInference] = []
    for sample in samples:
        reference = step(reference, sample, CARD, CONFIG, time_weight=0.5)
        by_step.append(reference)
    fold = EntityFold()
    read: list[tuple[int, EntityInference]] = []
    for i, sample in enumerate(samples):
        assert fold.add(sample, CARD, CONFIG, time_weight=0.5)
        if i % 3 == 0 or i == len(samples) - 1:
            read.append((i, fold.inference()))
    for i, record in read:
        assert record == by_step[i], f"sample {i}"
        assert record.estimate == by_step[i].estimate
    assert not fold.add(samples[-1], CARD, CONFIG), "a duplicate changes nothing"
    assert fold.inference() is read[-1][1]
