"""Enrichers: what the sampler asks about a GPU that its sample did not say (its pod, its job).

The sampler runs a list of them over every sample, in order; serve builds the list from what is
configured (the kubelet's pods, Slurm's job mapping). A label the sample already carries (a
scraped page's pod, a replay's job) is kept: an enricher only fills in what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from exporter.sample import Attribution, Entity


class Labels(NamedTuple):
    """What enrichers may add to a sample: its pod and its HPC job(s)."""

    attribution: Attribution | None
    hpc_job: str | None


class Enricher(Protocol):
    """Fills in labels a sample lacks; returns `labels` itself when it has nothing to add."""

    def enrich(self, entity: Entity, labels: Labels) -> Labels: ...


class PodLookup(Protocol):
    """What the pod enricher needs from exporter.attribution.PodAttributor."""

    def lookup(self, uuid: str, gpu_instance: int | None) -> Attribution | None: ...


class JobLookup(Protocol):
    """What the job enricher needs from exporter.attribution.hpc.HpcJobMap."""

    def lookup(self, gpu: int, gpu_instance: int | None) -> str | None: ...


class PodEnricher:
    """The kubelet's pod for a GPU whose sample names none (looked up by uuid and instance)."""

    def __init__(self, pods: PodLookup) -> None:
        self.pods = pods

    def enrich(self, entity: Entity, labels: Labels) -> Labels:
        if labels.attribution is not None:
            return labels
        return labels._replace(attribution=self.pods.lookup(entity.uuid, entity.gpu_instance))


class JobEnricher:
    """The HPC job(s) on a GPU whose sample names none (looked up by index and instance)."""

    def __init__(self, jobs: JobLookup) -> None:
        self.jobs = jobs

    def enrich(self, entity: Entity, labels: Labels) -> Labels:
        if labels.hpc_job is not None:
            return labels
        return labels._replace(hpc_job=self.jobs.lookup(entity.gpu, entity.gpu_instance))


def build_enrichers(pods: PodLookup | None, jobs: JobLookup | None) -> tuple[Enricher, ...]:
    """The enrichers for what is configured: pods first, then jobs; none for what is off."""
    found: list[Enricher] = []
    if pods is not None:
        found.append(PodEnricher(pods))
    if jobs is not None:
        found.append(JobEnricher(jobs))
    return tuple(found)


def enrich(enrichers: Sequence[Enricher], entity: Entity, labels: Labels) -> Labels:
    """`labels` after every enricher in turn."""
    for enricher in enrichers:
        labels = enricher.enrich(entity, labels)
    return labels
