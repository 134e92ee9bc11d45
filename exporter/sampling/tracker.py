"""The entity tracker: each GPU's inference state, folded one batch at a time.

It steps every believed sample through inference (exporter/inference.py), counts the batches a
GPU misses and drops it after the grace, keeps a departed GPU's counters for its return within a
retention, and holds the GPUs in snapshot order. It also owns the gap rule's window for a stream
of batch times (`Cadence`), which the report's replay uses so that its gaps are the daemon's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from exporter.catalog import Card, Catalog
from exporter.inference import (
    RECENT_INTERVALS,
    EntityFold,
    EntityInference,
    InferenceConfig,
    Totals,
    note_unknown_model,
    within_cap,
)
from exporter.sample import Attribution, Entity, Sample
from exporter.sample_checks import (
    FUTURE_SECONDS,
    PAST_SECONDS,
    TIMESTAMP_BACKWARDS,
    SummaryLog,
    timestamp_problem,
    why_not_believed,
)
from exporter.sampling.enrichers import Enricher, Labels, enrich

log = logging.getLogger("exporter.sampler")
"""The sampler's parts log as the sampler: one logger name for operators' filters."""

EntityKey = tuple[str, int | None]
"""(uuid, GPU instance): what identifies a GPU across reconnects (indexes may be renumbered)."""

DEPARTED_RETENTION_SECONDS = 3600.0
"""How long the counters of a GPU that left the batches are kept for its return."""
MAX_DEPARTED = 1024
"""Departed GPUs whose counters are kept at most (the oldest departure is forgotten first): a
replay of 100,000 GPUs or UUIDs that churn must not keep every identity ever seen."""
MAX_CARDS_KNOWN = 256
"""Model names whose catalog lookup is cached; beyond this the cache starts over."""

SkipHook = Callable[[str, str], None]
"""Told (reason, message) of each sample not believed: the sampler counts and logs it."""


@dataclass
class Tracked:
    """One GPU in the batches: its inference state and the labels it last carried."""

    fold: EntityFold
    """Updated in place by each sample; read as a record (`state`) when a snapshot is built."""
    attribution: Attribution | None
    missed_batches: int = 0
    hpc_job: str | None = None
    mig_parent: bool = False
    gpu_share: float = 1.0

    @property
    def state(self) -> EntityInference:
        """The GPU's inference after its latest sample (built once per sample folded since)."""
        return self.fold.inference()


@dataclass(frozen=True, slots=True)
class Folded:
    """What one fold found: whether any GPU's timestamp moved, and why all were refused (or None)."""

    advanced: bool
    refused: str | None


class EntityTracker:
    """Per-GPU state across batches; `fold` is its only writer besides departures."""

    def __init__(
        self,
        catalog: Catalog,
        config: InferenceConfig,
        *,
        grace_batches: int,
        enrichers: Sequence[Enricher] = (),
        skipped: SkipHook,
    ) -> None:
        self._catalog = catalog
        self._config = config
        self.grace_batches = grace_batches
        self._enrichers = tuple(enrichers)
        self._skipped = skipped
        self._tracked: dict[EntityKey, Tracked] = {}
        self._totals: dict[EntityKey, Totals] = {}
        """The counters of departed GPUs, kept for their return (those in the batches keep theirs
        in their fold)."""
        self._shares: tuple[tuple[Entity, ...], tuple[set[str], dict[EntityKey, float]]] | None = None
        """The last batch's entities and their mig_shares: a node's batches list the same ones."""
        self._departed: dict[EntityKey, float] = {}
        """GPUs dropped from the snapshot whose counters are still kept: key -> wall time it left
        (oldest first)."""
        self._cards: dict[str, Card | None] = {}
        self._ordered: list[Tracked] | None = None
        """The tracked GPUs in snapshot order; None when a GPU came, left or changed identity."""
        self.notes = SummaryLog(log, time.monotonic)
        """Per-sample and per-identity lines (bad timestamps, GPUs leaving and returning)."""
        self.folds = 0
        """Batches folded in (SourceHealth.samples_total)."""
        self.last_fold_wall: float | None = None
        """Wall time of the newest fold."""
        self.advanced_wall: float | None = None
        """Wall time a GPU's sample timestamp last moved forward: the data's own freshness."""

    # -- folding -----------------------------------------------------------------------------

    def fold(self, batch: list[Sample], now: float, *, live: bool) -> Folded:
        """Step every GPU of the batch through inference; count GPUs that missed it.

        live: the source's timestamps are meant to be the wall clock, so each must also lie
        within a window of it (exporter/sample_checks.py)."""
        advanced = False
        refused: str | None = None
        seen: set[EntityKey] = set()
        mig_parents, shares = self._mig_shares(batch)
        earliest, latest = now - PAST_SECONDS, now + FUTURE_SECONDS
        for sample in batch:
            entity = sample.entity
            timestamp = sample.timestamp
            if live and earliest <= timestamp <= latest:
                problem = None  # timestamp_problem's answer for a live one inside its window
            else:
                problem = timestamp_problem(timestamp, now, live=live)
            if problem is not None:
                self._skipped(
                    problem,
                    f"GPU {entity.uuid}: sample timestamp {sample.timestamp!r} {why_not_believed(problem)}",
                )
                refused = problem
                continue  # the GPU misses this batch, as if the source had not listed it
            key = (entity.uuid, entity.gpu_instance)
            if key in seen:
                continue  # one sample per entity per batch; a duplicate is the source's mistake
            seen.add(key)
            mig_parent = entity.gpu_instance is None and entity.uuid in mig_parents
            share = 0.0 if mig_parent else shares.get(key, 1.0)
            if self._step(key, sample, mig_parent, share):
                advanced = True
        if len(seen) != len(self._tracked):
            self._count_missing(seen, now)
        self.folds += 1
        self.last_fold_wall = now
        if advanced:
            self.advanced_wall = now
        if self._departed:
            self._prune_departed(now)
        self.notes.tick()
        return Folded(advanced=advanced, refused=None if seen else refused)

    def _mig_shares(self, batch: list[Sample]) -> tuple[set[str], dict[EntityKey, float]]:
        """mig_shares of the batch, reused while its entities are the previous batch's."""
        listed = tuple([sample.entity for sample in batch])
        known = self._shares
        if known is not None and known[0] == listed:
            return known[1]
        found = mig_shares(batch, self.card_for)
        self._shares = (listed, found)
        return found

    def _step(self, key: EntityKey, sample: Sample, mig_parent: bool, share: float) -> bool:
        """Fold one believed sample into its GPU; True when its timestamp moved."""
        entity = sample.entity
        model = entity.model
        cards = self._cards
        card = cards[model] if model in cards else self.card_for(model)
        if self._enrichers:
            labels = enrich(self._enrichers, entity, Labels(sample.attribution, sample.hpc_job))
            attribution, hpc_job = labels.attribution, labels.hpc_job
        else:
            attribution, hpc_job = sample.attribution, sample.hpc_job
        tracked = self._tracked.get(key)
        if tracked is None:
            self._tracked[key] = Tracked(
                fold=self._arrive(key, sample, card, mig_parent, share),
                attribution=attribution,
                hpc_job=hpc_job,
                mig_parent=mig_parent,
                gpu_share=share,
            )
            self._ordered = None
            return True
        fold = tracked.fold
        last = fold.timestamp
        assert last is not None
        if sample.timestamp < last:
            fold = tracked.fold = self._restart(sample, card, fold, mig_parent, share)
            moved = True
        else:
            previous_entity = fold.entity
            moved = fold.add(
                sample,
                card,
                self._config,
                integrate=tracked.missed_batches == 0,
                count_work=not mig_parent,
                time_weight=share,
            )
            if fold.entity is not previous_entity:
                self._ordered = None  # the GPU index may have changed: sort again
        if tracked.mig_parent != mig_parent:
            self._ordered = None
        tracked.attribution = attribution
        tracked.hpc_job = hpc_job
        tracked.missed_batches = 0
        tracked.mig_parent = mig_parent
        tracked.gpu_share = share
        return moved

    def _arrive(
        self, key: EntityKey, sample: Sample, card: Card | None, mig_parent: bool, share: float
    ) -> EntityFold:
        """A GPU not in the batches before (or back within the retention, its counters kept)."""
        earlier = self._totals.pop(key, None)
        if earlier is not None:
            self._departed.pop(key, None)
            self.notes.note(
                "gpu_back",
                f"GPU {key[0]} is back in the batches; its series continue from where they were",
                logging.INFO,
            )
        fold = EntityFold(None, earlier)
        fold.add(sample, card, self._config, count_work=not mig_parent, time_weight=share)
        return fold

    def _restart(
        self, sample: Sample, card: Card | None, previous: EntityFold, mig_parent: bool, share: float
    ) -> EntityFold:
        """The upstream's clock went back (or it restarted): start the GPU's timeline again from
        this sample rather than ignore every sample until it catches up."""
        self._skipped(
            TIMESTAMP_BACKWARDS,
            f"GPU {sample.entity.uuid}: sample timestamp {sample.timestamp!r} is older than its "
            f"previous {previous.timestamp!r}; its timeline starts again here (the interval "
            "is not integrated)",
        )
        fold = EntityFold(None, previous.totals())
        fold.add(sample, card, self._config, count_work=not mig_parent, time_weight=share)
        return fold

    def _count_missing(self, seen: set[EntityKey], now: float) -> None:
        """Count a missed batch for every GPU not seen; drop those past the grace."""
        tracked_by_key = self._tracked
        for key in list(tracked_by_key):
            if key in seen:
                continue
            tracked = tracked_by_key[key]
            tracked.missed_batches += 1
            if tracked.missed_batches > self.grace_batches:
                self.notes.note(
                    "gpu_left", f"GPU {key[0]} left the batches; dropping its series", logging.INFO
                )
                del tracked_by_key[key]
                self._depart(key, tracked.fold.totals(), now)
                self._ordered = None

    # -- departures --------------------------------------------------------------------------

    @property
    def tracking(self) -> int:
        """GPUs in the batches now."""
        return len(self._tracked)

    def depart_all(self, now: float) -> None:
        """Drop every GPU (the source has been down past the grace); their counters are kept."""
        for key, tracked in self._tracked.items():
            self._depart(key, tracked.fold.totals(), now)
        self._tracked.clear()
        self._ordered = None

    def _depart(self, key: EntityKey, totals: Totals, now: float) -> None:
        """Keep a dropped GPU's counters for its return, within the retention; forget the oldest."""
        self._totals[key] = totals
        self._departed.pop(key, None)
        self._departed[key] = now
        self._prune_departed(now)

    def _prune_departed(self, now: float) -> None:
        """Forget the counters of GPUs gone longer than the retention, or beyond MAX_DEPARTED
        (oldest first); O(1) when there is nothing to forget."""
        departed = self._departed
        while departed:
            oldest, left_at = next(iter(departed.items()))
            if len(departed) <= MAX_DEPARTED and now - left_at <= DEPARTED_RETENTION_SECONDS:
                break
            del departed[oldest]
            self._totals.pop(oldest, None)

    @property
    def identities_kept(self) -> int:
        """GPUs whose counters are held: those in the batches and those that left within the
        retention (bounded by the batch size plus MAX_DEPARTED)."""
        return len(self._tracked) + len(self._totals)

    # -- reading -----------------------------------------------------------------------------

    def ordered(self) -> list[Tracked]:
        """The tracked GPUs in snapshot order (index, instance, uuid); sorted again only after a
        GPU came, left or changed identity."""
        ordered = self._ordered
        if ordered is None:
            ordered = self._ordered = sorted(self._tracked.values(), key=_order)
        return ordered

    def card_for(self, model: str) -> Card | None:
        if model not in self._cards:
            if len(self._cards) >= MAX_CARDS_KNOWN:
                self._cards.clear()
            card = self._catalog.find_by_nvml_name(model)
            if card is None:
                note_unknown_model(model)
            self._cards[model] = card
        return self._cards[model]


class Cadence:
    """The gap rule over a stream of times (a trace's batches): an interval longer than the
    integration cap of the intervals before it is a gap, as inference judges each GPU's."""

    def __init__(self, config: InferenceConfig) -> None:
        self._config = config
        self._recent: tuple[float, ...] = ()

    def is_gap(self, dt: float) -> bool:
        """Judge one interval, then count it among the recent ones."""
        gap = not within_cap(self._config, self._recent, dt)
        recent = self._recent
        self._recent = (*recent[1:], dt) if len(recent) >= RECENT_INTERVALS else (*recent, dt)
        return gap


def mig_shares(
    batch: list[Sample], card_for: Callable[[str], Card | None]
) -> tuple[set[str], dict[EntityKey, float]]:
    """The MIG parents of a batch (uuids of GPUs with an instance in it) and each instance's share
    of its GPU: its compute slices over those of the GPU's instances in the batch, or equal
    shares when a profile is unknown. A GPU's instances together carry one GPU-second per second,
    so a node's GPU-seconds are its cards' (docs/model.md, "One count per physical GPU")."""
    by_parent: dict[str, list[tuple[EntityKey, int | None]]] = {}
    for sample in batch:
        entity = sample.entity
        if entity.gpu_instance is None:
            continue
        card = card_for(entity.model)
        slices = card.mig_slices(entity.profile) if card is not None and entity.profile else None
        compute = slices.compute if slices is not None else None
        by_parent.setdefault(entity.uuid, []).append(((entity.uuid, entity.gpu_instance), compute))
    shares: dict[EntityKey, float] = {}
    for instances in by_parent.values():
        unique = dict(instances)
        known = [c for c in unique.values() if c is not None]
        whole = sum(known) if len(known) == len(unique) else 0
        for key, compute in unique.items():
            shares[key] = compute / whole if whole and compute is not None else 1.0 / len(unique)
    return set(by_parent), shares


def _order(tracked: Tracked) -> tuple[int, int, str]:
    entity = tracked.fold.entity
    assert entity is not None
    return (entity.gpu, -1 if entity.gpu_instance is None else entity.gpu_instance, entity.uuid)
