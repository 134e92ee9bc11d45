"""The sampler's parts (exporter/sampling/): enrichers as a list, the gap rule's window, error counts."""

from __future__ import annotations

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig, integration_cap
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sampling.enrichers import JobEnricher, Labels, PodEnricher, build_enrichers, enrich
from exporter.sampling.supervisor import ErrorCounts
from exporter.sampling.tracker import Cadence
from exporter.sources import SourceOptions

CATALOG = load_catalog()
GPU0 = Entity(0, "GPU-aaaa", "NVIDIA H100 80GB HBM3", gpu_instance=None)
POD = Attribution("ns", "kubelet-pod", "c")
OWN = Attribution("ns", "page-pod", "c")


class Pods:
    def __init__(self) -> None:
        self.asked = 0

    def lookup(self, uuid: str, gpu_instance: int | None) -> Attribution | None:
        self.asked += 1
        return POD


class Jobs:
    def lookup(self, gpu: int, gpu_instance: int | None) -> str | None:
        return f"job-{gpu}"


class Tagger:
    """A third enricher, to show the sampler runs whatever list it is given, in order."""

    def enrich(self, entity: Entity, labels: Labels) -> Labels:
        return labels._replace(hpc_job=f"{labels.hpc_job}+tagged")


def sample(ts: float, attribution: Attribution | None = None) -> Sample:
    return Sample(ts, GPU0, {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.5}, attribution)


def test_serve_builds_pods_then_jobs_and_nothing_for_what_is_off() -> None:
    pods, jobs = Pods(), Jobs()
    assert build_enrichers(None, None) == ()
    built = build_enrichers(pods, jobs)
    assert [type(e) for e in built] == [PodEnricher, JobEnricher]
    assert [type(e) for e in build_enrichers(None, jobs)] == [JobEnricher]
    assert enrich(built, GPU0, Labels(None, None)) == Labels(POD, "job-0")


def test_a_label_the_sample_carries_is_kept_and_not_looked_up() -> None:
    pods = Pods()
    assert enrich(build_enrichers(pods, None), GPU0, Labels(OWN, "j")) == Labels(OWN, "j")
    assert pods.asked == 0


def test_the_sampler_runs_its_list_of_enrichers_in_order() -> None:
    sampler = Sampler(
        "scripted",
        SourceOptions(),
        CATALOG,
        InferenceConfig(),
        enrichers=(*build_enrichers(Pods(), Jobs()), Tagger()),
        opener=lambda name, options: None,  # type: ignore[arg-type,return-value]
    )
    sampler.ingest([sample(1.0)])
    (gpu,) = sampler.snapshot.gpus
    assert (gpu.attribution, gpu.hpc_job) == (POD, "job-0+tagged")


def test_cadence_is_inferences_gap_rule_over_the_intervals_before() -> None:
    config = InferenceConfig(expected_interval_seconds=1.0, gap_factor=5.0)
    cadence = Cadence(config)
    assert cadence.is_gap(5.5)  # no interval before: the cap is 5 x the expected one
    cadence = Cadence(config)
    judged = [cadence.is_gap(dt) for dt in (2.0, 2.0, 9.9, 10.1, 2.0)]
    assert judged == [False, False, False, True, False]  # the cap is 5 x the shortest recent (2 s)
    recent: tuple[float, ...] = ()
    cadence = Cadence(config)
    for dt in [3.0] * 9 + [1.0] + [3.0] * 8 + [14.0, 16.0]:  # the 1 s leaves the window after 8
        assert cadence.is_gap(dt) == (dt > integration_cap(config, recent[-8:]))
        recent = (*recent, dt)


def test_error_counts_add_skipped_records_and_reuse_their_view() -> None:
    counts = ErrorCounts()
    counts.count("timeout")
    first = counts.view()
    assert counts.view() is first
    counts.set_skipped(3)
    counts.count("corrupt_line")
    assert dict(counts.view()) == {"timeout": 1, "corrupt_line": 4}
