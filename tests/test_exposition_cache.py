"""The encoder's cross-snapshot cache (exposition.SeriesCache): the same bytes as a cold encode
while pods, jobs and GPUs come and go, and only the latest snapshot's GPUs held."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector, CollectorRegistry

from exporter import fields
from exporter.catalog import load_catalog
from exporter.collectors import ColumnRows, Family, Row
from exporter.exposition import (
    MAX_LINES_PER_GPU,
    MetricsEndpoint,
    SeriesCache,
    SnapshotCollector,
    as_metrics,
    build_families,
    encode,
)
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.state import GpuState, Snapshot

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"
GPUS = [Entity(i, f"GPU-{i}", H100) for i in range(4)]
MIG = Entity(4, "GPU-mig", "NVIDIA A100-SXM4-40GB", gpu_instance=3, profile="3g.20gb")
POD = Attribution("llm", "decode-0", "server")
OTHER_POD = Attribution("llm", "decode-1", "server")
ODD_POD = Attribution('ns"x', "pod\\y", "c\nz")


def _zero() -> float:
    return 0.0


def _sampler() -> Sampler:
    return Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())


def _batch(step: int) -> list[Sample]:
    """Values that move every batch (and a GPU whose DRAM reading stays blank)."""
    out = []
    for i, entity in enumerate([*GPUS, MIG]):
        phase = (i + step) % 7 / 7
        values: dict[int, float | None] = {
            fields.DRAM_ACTIVE: None if i == 3 else 0.2 + 0.6 * phase,
            fields.PIPE_TENSOR_ACTIVE: 0.7 - 0.5 * phase,
            fields.SM_CLOCK: 1980.0,
        }
        out.append(Sample(1000.0 + step, entity, values))
    return out


def _relabel(snapshot: Snapshot, **changes: tuple[Attribution | None, str | None]) -> Snapshot:
    """The snapshot with GPU `gN`'s (attribution, hpc_job) replaced."""
    gpus: list[GpuState] = []
    for gpu in snapshot.gpus:
        change = changes.get(f"g{gpu.entity.gpu}")
        if change is not None:
            gpu = gpu._replace(attribution=change[0], hpc_job=change[1])
        gpus.append(gpu)
    return snapshot._replace(gpus=tuple(gpus))


def _reference(snapshot: Snapshot, *, openmetrics: bool) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot, clock=_zero))
    return generate_openmetrics(registry) if openmetrics else generate_latest(registry)


@pytest.mark.parametrize("openmetrics", [False, True])
def test_a_warm_encode_equals_a_cold_one_as_pods_jobs_and_gpus_come_and_go(openmetrics: bool) -> None:
    sampler = _sampler()
    cache = SeriesCache()
    labels = [
        {},  # no pods
        {"g0": (POD, None)},  # a pod arrives
        {"g0": (OTHER_POD, None), "g1": (POD, "4242")},  # it is replaced; a Slurm job on GPU 1
        {"g1": (POD, "4242,4243")},  # GPU 0's pod leaves; GPU 1 shared by two jobs
        {"g2": (ODD_POD, None)},  # label values to escape
        {},  # all gone again
    ]
    for step, change in enumerate(labels * 2):
        sampler.ingest(_batch(step))
        snapshot = _relabel(sampler.snapshot, **change)
        if step == 7:  # two GPUs depart for a snapshot, then return
            snapshot = snapshot._replace(gpus=snapshot.gpus[2:])
        warm = encode(
            build_families(snapshot, clock=_zero, cache=cache), openmetrics=openmetrics, cache=cache
        )
        cold = encode(build_families(snapshot, clock=_zero), openmetrics=openmetrics)
        assert warm == cold, f"step {step}"
        assert warm == _reference(snapshot, openmetrics=openmetrics), f"step {step}"
        assert len(cache) == len(snapshot.gpus)


def test_departed_and_relabelled_gpus_leave_the_cache() -> None:
    """A GPU whose pod changes every snapshot (a new label dict each time) and GPUs that depart:
    the cache holds the latest snapshot's GPUs and their series only, at most MAX_LINES_PER_GPU
    each on average."""
    sampler = _sampler()
    cache = SeriesCache()
    for step in range(30):
        sampler.ingest(_batch(step))
        pod = Attribution("batch", f"job-{step}", "worker")
        snapshot = _relabel(sampler.snapshot, g0=(pod, None))
        if step % 3 == 2:
            snapshot = snapshot._replace(gpus=snapshot.gpus[: 1 + step % 4])
        family_list = build_families(snapshot, clock=_zero, cache=cache)
        encode(family_list, openmetrics=False, cache=cache)
        written = {id(row.labels) for f in family_list for row in f.rows if "uuid" in row.labels}
        held = {labels_id for labels_id, _, _ in cache.held.lines}
        assert len(cache) == len(snapshot.gpus) == len(cache.held.by_id)
        assert held == set(cache.held.by_id) and held <= written, f"step {step}"
        assert cache.series <= MAX_LINES_PER_GPU * len(cache)
    assert sum(1 for g in snapshot.gpus if g.attribution is not None) == 1


def test_an_unchanged_value_is_written_as_before_and_a_changed_one_afresh() -> None:
    """One series across encodes, its value kept or changed: every figure written as
    prometheus_client writes it (a negative zero apart from a zero, NaN, Go's exponents)."""
    sampler = _sampler()
    sampler.ingest(_batch(0))
    cache = SeriesCache()
    ((_, labels, _), *_) = cache.labelled(sampler.snapshot)
    values = [0.0, -0.0, -0.0, 0.0, 1.5, 1.5, math.nan, math.nan, math.inf, -math.inf, 999999.9,
              1e6, 1e6, 123456789.0, 1e16, 1e-07, -1234567.0, 2.0**53, 3]  # fmt: skip
    for value in values:
        family = Family(name="x", documentation="d", type="gauge", rows=[Row("x", labels, (), value)])
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families([family]))
        assert encode([family], openmetrics=False, cache=cache) == generate_latest(registry), value
        assert cache.series == 1


class _Families(Collector):
    def __init__(self, family_list: list[Family]) -> None:
        self.family_list = family_list

    def collect(self) -> Iterable[Metric]:
        return as_metrics(self.family_list)


def test_the_endpoint_serves_what_a_fresh_one_would_as_a_pod_moves() -> None:
    sampler = _sampler()
    current: list[Snapshot] = []
    endpoint = MetricsEndpoint(lambda: current[0], process_metrics=False, clock=_zero)
    for step, change in enumerate([{}, {"g0": (POD, None)}, {"g1": (POD, None)}, {}]):
        sampler.ingest(_batch(step))
        current[:] = [_relabel(sampler.snapshot, **change)]
        fresh = MetricsEndpoint(lambda: current[0], process_metrics=False, clock=_zero)
        for accept in (None, "application/openmetrics-text; version=1.0.0"):
            assert endpoint.render(accept) == fresh.render(accept), (step, accept)


def test_a_column_family_whose_series_change_under_the_same_gpus_is_written_afresh() -> None:
    """The GPUs stay (so the cache keeps its columns), but a gauge's GPUs, or a GPU's extra
    label (its regime), change from one encode to the next: the bytes are prometheus_client's."""
    sampler = _sampler()
    sampler.ingest(_batch(0))
    cache = SeriesCache()
    (_, first, _), (_, second, _), *_ = cache.labelled(sampler.snapshot)
    idle, busy = (("regime", "idle"),), (("regime", "compute_bound"),)
    for labels, extras in [
        ([first, second], [idle, busy]),
        ([first, second], [busy, busy]),  # a regime changes
        ([second, first], [busy, busy]),  # the same GPUs in another order
        ([second], [busy]),  # a GPU's value goes blank
        ([first], [busy]),  # and another's instead: the same length
        ([first, second], [busy, idle]),
    ]:
        rows = ColumnRows("ridgeline_regime")
        for gpu_labels, extra in zip(labels, extras, strict=True):
            rows.add(gpu_labels, extra, 1.0)
        family = Family(name="ridgeline_regime", documentation="d", type="gauge", rows=rows)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families([family]))
        for openmetrics in (False, True):
            expected = generate_openmetrics(registry) if openmetrics else generate_latest(registry)
            assert encode([family], openmetrics=openmetrics, cache=cache) == expected, (labels, extras)


def test_a_column_family_rewritten_with_some_values_kept_is_written_as_prometheus_client_would() -> None:
    """A gauge's values across encodes of the same series: all equal (its text kept whole), some
    the very objects written last time (their texts kept), a zero's sign flipped, a NaN or a
    value past 1e6 arriving and leaving (series by series): every encode is prometheus_client's."""
    sampler = _sampler()
    sampler.ingest(_batch(0))
    cache = SeriesCache()
    labels = [gpu_labels for _, gpu_labels, _ in cache.labelled(sampler.snapshot)][:4]
    kept = 0.25
    steps: list[list[float]] = [
        [kept, 0.5, 0.0, 1.0],
        [kept, 0.5, 0.0, 1.0],  # every value equal: new objects of the same values
        [kept, 0.75, 0.0, 1.0],  # one moved, the others kept
        [kept, 0.75, -0.0, 1.0],  # a zero's sign: == says equal, the text does not
        [kept, 0.75, -0.0, 1.0],
        [kept, 0.75, 0.0, 1.0],
        [kept, math.nan, 0.0, 1.0],  # not plain: series by series
        [kept, 0.75, 0.0, 1.0],
        [kept, 0.75, 0.0, 2e6],  # Go's exponent form
        [kept, 0.75, 0.125, 0.5],  # most moved
        [kept, 0.75, 0.125, 0.5],
    ]
    for values in steps:
        values = [float(repr(v)) if v is not kept else v for v in values]  # fresh objects but `kept`
        rows = ColumnRows("ridgeline_x", labels, [()] * len(labels), values)
        family = Family(name="ridgeline_x", documentation="d", type="gauge", rows=rows)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families([family]))
        for openmetrics in (False, True):
            expected = generate_openmetrics(registry) if openmetrics else generate_latest(registry)
            assert encode([family], openmetrics=openmetrics, cache=cache) == expected, values


FREED: list[str] = []


class _Marked(str):
    """A version string that notes when it is freed (so, when the snapshot holding it is)."""

    def __del__(self) -> None:
        FREED.append(str(self))


def test_the_last_snapshot_is_freed_on_release_not_during_the_scrape_of_a_new_one() -> None:
    sampler = _sampler()
    sampler.ingest(_batch(0))
    current = [sampler.snapshot._replace(version=_Marked("v1"))]
    endpoint = MetricsEndpoint(lambda: current[0], process_metrics=False, clock=_zero)
    endpoint.render(None)
    current[0] = current[0]._replace(version=_Marked("v2"))
    body, _ = endpoint.render(None)
    assert b'version="v2"' in body and "v1" not in FREED  # kept past the scrape
    assert endpoint.retired
    endpoint.release()
    assert "v1" in FREED and "v2" not in FREED
    endpoint.render(None)  # the same snapshot again: nothing to release
    assert not endpoint.retired


def test_families_with_the_same_values_in_one_encode_are_written_as_prometheus_client_would() -> None:
    """Columns whose values are the same doubles share their texts within one encode; a zero's
    sign tells two otherwise equal columns apart."""
    sampler = _sampler()
    sampler.ingest(_batch(0))
    cache = SeriesCache()
    labels = [gpu_labels for _, gpu_labels, _ in cache.labelled(sampler.snapshot)][:2]
    family_list = [
        Family(name, "d", "gauge", ColumnRows(name, labels, [(), ()], [float(repr(a)), float(repr(b))]))
        for name, a, b in [("x_a", 0.0, 0.5), ("x_b", -0.0, 0.5), ("x_c", 0.0, 0.5), ("x_d", 0.25, 0.5)]
    ]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(family_list))
    for openmetrics in (False, True):
        expected = generate_openmetrics(registry) if openmetrics else generate_latest(registry)
        assert encode(family_list, openmetrics=openmetrics, cache=cache) == expected
        assert encode(family_list, openmetrics=openmetrics) == expected


def test_a_gpu_keeps_its_label_dict_when_the_gpus_come_in_another_order() -> None:
    """The label dicts are found by place first, then by what they are made of: GPUs listed in
    another order, or one relabelled at its place, still find their own (or a new one)."""
    sampler = _sampler()
    sampler.ingest(_batch(0))
    cache = SeriesCache()
    first = {gpu.entity: labels for gpu, labels, _ in cache.labelled(sampler.snapshot)}
    reordered = sampler.snapshot._replace(gpus=sampler.snapshot.gpus[::-1])
    again = {gpu.entity: labels for gpu, labels, _ in cache.labelled(reordered)}
    assert again.keys() == first.keys()
    assert all(again[entity] is first[entity] for entity in first)
    relabelled = _relabel(reordered, g1=(POD, None))
    after = {gpu.entity: labels for gpu, labels, _ in cache.labelled(relabelled)}
    assert after[GPUS[1]] is not first[GPUS[1]] and after[GPUS[1]]["pod"] == POD.pod
    assert all(after[entity] is first[entity] for entity in first if entity != GPUS[1])
