"""The daemon's in-memory state: immutable snapshots the sampler publishes and scrapes read.

The sampler thread builds a new `Snapshot` after every batch, or about once a second for batches
due faster (at --speed max, at most every sampler.PUBLISH_EVERY_SECONDS), and swaps one
reference; a scrape, `GET /classify` or `GET /readyz` reads whichever snapshot is current and
never waits on a GPU library or on a lock held during sampling (docs/design.md, "HTTP API").
Everything here is immutable, so a reader can hold a snapshot as long as it likes. The records
are NamedTuples for the reason exporter/sample.py gives; `_replace` makes a changed copy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from exporter.inference import EntityInference, Estimate, Totals
from exporter.sample import Attribution, Entity, single_hpc_job
from exporter.verdict import LiveVerdict


class Derived:
    """What readers derive from one GpuState, built on the first read and kept with it: the
    sampler gives each GpuState of a snapshot its own, so /metrics, /classify, the live view and
    the trails share one Estimate and one LiveVerdict per GPU per snapshot. A cache, not data:
    any two compare equal, so GpuStates compare by what they hold."""

    __slots__ = ("estimate", "verdict")

    def __init__(self) -> None:
        self.estimate: tuple[Estimate | None] | None = None
        """(the GPU's Estimate,) once read; None until then (an Estimate of None: no reading)."""
        self.verdict: LiveVerdict | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Derived)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "Derived()"


class GpuState(NamedTuple):
    """One GPU (or MIG instance) as last sampled, with its pod when attributed."""

    entity: Entity
    attribution: Attribution | None
    inference: EntityInference
    hpc_job: str | None = None
    """Slurm (or other HPC) job id(s) on this GPU, comma-separated; exporter/attribution/hpc.py."""
    mig_parent: bool = False
    """A whole GPU whose MIG instances report in the same batch: its instances carry the roof,
    FLOP and byte series, so no sum counts the card twice (docs/model.md, "MIG roofs")."""
    gpu_share: float = 1.0
    """The part of a physical GPU this entity is: 1 for a whole GPU, a MIG instance its share of
    the GPU's instances (docs/model.md, "One count per physical GPU"), 0 for a MIG parent."""
    derived: Derived | None = None
    """This GpuState's own memo (the sampler gives each one); None: derive on every read. A copy
    made with `_replace` shares it: give a changed copy `derived=Derived()` (or None)."""

    @property
    def estimate(self) -> Estimate | None:
        """EntityInference.estimate, derived once per GpuState (on every read without `derived`)."""
        memo = self.derived
        if memo is None:
            return self.inference.estimate
        known = memo.estimate
        if known is None:
            known = memo.estimate = (self.inference.estimate,)
        return known[0]

    @property
    def totals(self) -> Totals:
        return self.inference.totals

    @property
    def card(self) -> str | None:
        """The catalog key or "unknown", kept through blank readings (the estimate's `card` when
        there is one)."""
        return self.inference.card_key

    @property
    def last_sample_timestamp(self) -> float:
        return self.inference.timestamp

    @property
    def workload(self) -> WorkloadKey:
        """What its time and work are summed under on this node (the card, the pod, the job). A pod
        is one only with its namespace and name both known (a replay line may give one alone): so
        `namespace!=""` selects the pods' workloads, a matcher much cheaper for Prometheus than
        `pod!=""` (rules/ridgeline-recording.rules.yml)."""
        held = self.attribution
        if held is not None and not (held.namespace and held.pod):
            held = None
        return WorkloadKey(
            card=self.card or "unknown",
            namespace=None if held is None else held.namespace,
            pod=None if held is None else held.pod,
            hpc_job=single_hpc_job(self.hpc_job),
        )


class WorkloadKey(NamedTuple):
    """A workload on one node: the GPUs of one card that one pod (or Slurm job, or nobody) holds.
    The labels of the per-workload families (docs/design.md §4)."""

    card: str
    namespace: str | None = None
    pod: str | None = None
    hpc_job: str | None = None

    @property
    def order(self) -> tuple[str, str, str, str]:
        """Where it sorts: an absent label first, as an empty one would."""
        return (self.card, self.namespace or "", self.pod or "", self.hpc_job or "")


class WorkloadTotals(NamedTuple):
    """A workload's counters: what its GPUs gained while they were its own, so they only grow
    while the workload exists (exporter/sampling/workloads.py)."""

    key: WorkloadKey
    regime_seconds: Mapping[str, float]
    flop_total: float | None = None
    """None until one of its GPUs has a FLOP counter (a known roof and a compute pipe)."""
    dram_bytes_total: float | None = None


class SourceHealth(NamedTuple):
    """How the source is doing; `ridgeline_source_up` and `/readyz` are read from here."""

    name: str
    up: bool = False
    reason: str | None = None
    """Why the source is down (an error reason, "starting", "end_of_replay"); None while up."""
    message: str | None = None
    samples_total: int = 0
    """Successful reads (batches): one per sampling round that returned data."""
    errors_total: Mapping[str, int] = MappingProxyType({})
    """Errors per reason; the default is read-only, so SourceHealths can share it."""
    last_sample_wall_time: float | None = None
    """time.time() when the newest batch arrived (the sample's own timestamp may be trace time)."""
    refused: str | None = None
    """Why every sample of the newest batch was refused (a timestamp reason); None while any was
    believed."""
    data_advanced_wall_time: float | None = None
    """time.time() when a GPU's own sample timestamp last moved forward: a source that answers
    with the same (or refused) timestamps keeps arriving while its data stands still."""
    finished: bool = False
    """A non-looping replay has played its last sample; the last state is kept."""


class Snapshot(NamedTuple):
    """Everything a reader may ask about, as of one batch. `generation` grows by one per publish."""

    generation: int
    source: SourceHealth
    gpus: tuple[GpuState, ...] = ()
    interval_seconds: float = 1.0
    smoothing_seconds: float = 10.0
    dwell_seconds: float = 5.0
    freshness_seconds: float = 5.0
    """A batch older than this (wall clock) is stale: `/readyz` answers 503."""
    version: str = ""
    stalled_seconds: float = 60.0
    """No sample timestamp advanced for this long (wall clock): the data stopped moving, 503."""
    workloads: tuple[WorkloadTotals, ...] = ()
    """Each workload's counters on this node, in key order; one held by no GPU stays a while."""

    @property
    def last_sample_timestamp(self) -> float | None:
        """The newest sample timestamp across GPUs (the source's clock)."""
        return max((g.inference.timestamp for g in self.gpus), default=None)

    def readiness(self, now: float | None = None) -> tuple[bool, str]:
        """(ready, reason): ready once a fresh batch exists and the source is up."""
        health = self.source
        if not health.up:
            why = health.reason or "down"
            detail = f": {health.message}" if health.message else ""
            return False, f"source {health.name} is not up ({why}){detail}"
        if health.last_sample_wall_time is None:
            return False, f"source {health.name} has not produced a sample yet"
        if health.refused is not None:
            return False, (
                f"source {health.name} answers but every sample of its newest batch was refused "
                f"({health.refused})"
            )
        now = time.time() if now is None else now
        age = now - health.last_sample_wall_time
        if age > self.freshness_seconds:
            return False, (
                f"newest sample is {age:.1f} s old (fresh means under {self.freshness_seconds:g} s)"
            )
        moved = health.data_advanced_wall_time
        still = now - (moved if moved is not None else health.last_sample_wall_time)
        if moved is None or still > self.stalled_seconds:
            since = "since it started" if moved is None else f"for {still:.1f} s"
            return False, (
                f"source {health.name} answers but its data stopped moving: no GPU's sample timestamp "
                f"advanced {since} (moving means within {self.stalled_seconds:g} s)"
            )
        return True, "ready"

    def find(self, key: str) -> list[GpuState]:
        """GPUs matching an index ("0"), a UUID (case-insensitive) or an index/instance ("0/1").

        Only ASCII digits make an index: "²" or "٣" (str.isdigit() says yes, int() says no) and
        a 5,000-digit number (past int()'s digit limit) simply match nothing.
        """
        wanted = key.strip()
        folded = wanted.casefold()
        found = [g for g in self.gpus if g.entity.uuid.casefold() == folded]
        if found:
            return found
        gpu_text, _, instance_text = wanted.partition("/")
        gpu = _index(gpu_text)
        if gpu is None:
            return []
        matches = [g for g in self.gpus if g.entity.gpu == gpu]
        if instance_text:
            instance = _index(instance_text)
            if instance is None:
                return []
            matches = [g for g in matches if g.entity.gpu_instance == instance]
        return matches


MAX_INDEX_DIGITS = 9
"""No GPU or GPU-instance index is longer; a longer one cannot match."""


def _index(text: str) -> int | None:
    """An index written in ASCII digits, or None."""
    if not text or len(text) > MAX_INDEX_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    return int(text)
