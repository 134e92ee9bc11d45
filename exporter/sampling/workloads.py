"""The per-workload counters: each GPU's gains since the last publish, added to the workload
that holds it now.

A recording rule that sums per-GPU counters reads one series per GPU every evaluation; the same
sums kept here are one series per workload (a node's 8-GPU training pod is one), which is what
the rules read instead (docs/rules-and-dashboards.md, "Recording rules"). A sum of GPU counters
would jump when a GPU changes pods (its whole past would move with it), so the ledger adds only
what each GPU gained while it was the workload's: a workload's counters only grow while it
exists, and a GPU that moves adds to its new workload from then on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

from exporter.inference import Totals
from exporter.sampling.tracker import DEPARTED_RETENTION_SECONDS, MAX_DEPARTED, EntityKey
from exporter.state import GpuState, WorkloadKey, WorkloadTotals

WORKLOAD_RETENTION_SECONDS = 600.0
"""How long a workload no GPU holds keeps its series: longer than a 5-minute rate window, so its
last increase is read whole, and past a pod's restart onto the same GPUs."""
MAX_IDLE_WORKLOADS = 1024
"""Workloads no GPU holds that are kept at most (the longest unheld first forgotten): pods that
churn by the thousand must not grow the node's series without bound."""
GPU_MEMORY_SECONDS = 2 * DEPARTED_RETENTION_SECONDS
"""How long a departed GPU's last counters are remembered: longer than the tracker keeps its
totals for its return, so a GPU that comes back adds what it gained, not its whole counter."""
MAX_GPUS_REMEMBERED = 2 * MAX_DEPARTED
"""Departed GPUs remembered at most, beside the present ones (the oldest forgotten first)."""


@dataclass
class _Account:
    """One workload's running sums and when a GPU last held it."""

    regime_seconds: dict[str, float] = field(default_factory=dict)
    """Born with the regimes of its first GPU's counter, at what that GPU gained."""
    flop_total: float | None = None
    dram_bytes_total: float | None = None
    held_at: float = 0.0
    record: WorkloadTotals | None = None
    """Its record as last published; None once it changed."""

    def add(self, totals: Totals, before: Totals | None) -> None:
        seconds = totals.regime_seconds
        if seconds is not None:
            was = None if before is None else before.regime_seconds
            mine = self.regime_seconds
            for regime, value in seconds.items():
                mine[regime] = mine.get(regime, 0.0) + _gain(value, None if was is None else was.get(regime))
        if totals.flop_total is not None:
            gained = _gain(totals.flop_total, None if before is None else before.flop_total)
            self.flop_total = (self.flop_total or 0.0) + gained
        if totals.dram_bytes_total is not None:
            gained = _gain(totals.dram_bytes_total, None if before is None else before.dram_bytes_total)
            self.dram_bytes_total = (self.dram_bytes_total or 0.0) + gained
        self.record = None

    def as_record(self, key: WorkloadKey) -> WorkloadTotals:
        if self.record is None:
            self.record = WorkloadTotals(
                key=key,
                regime_seconds=dict(self.regime_seconds),
                flop_total=self.flop_total,
                dram_bytes_total=self.dram_bytes_total,
            )
        return self.record


def _gain(value: float, before: float | None) -> float:
    """What a GPU counter gained: all of it when first seen or when it went back (the GPU's
    counters started over), else the difference."""
    if before is None or value < before:
        return value
    return value - before


class WorkloadLedger:
    """Each workload's counters across snapshots; `update` is called once per snapshot built."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._accounts: dict[WorkloadKey, _Account] = {}
        self._seen: dict[EntityKey, tuple[Totals, float]] = {}
        """Each GPU's totals as last added, and when; oldest-refreshed first (insertion order)."""
        self._published: tuple[WorkloadTotals, ...] = ()

    @property
    def gpus_kept(self) -> int:
        """GPUs whose last counters are remembered (present and departed)."""
        return len(self._seen)

    def update(self, gpus: Iterable[GpuState]) -> tuple[WorkloadTotals, ...]:
        """Adds each GPU's gains to the workload holding it; the workloads' records, in key order.
        A MIG parent whose instances report is left out: they carry its time and work."""
        now = self._clock()
        accounts, seen = self._accounts, self._seen
        present = 0
        changed = False
        for gpu in gpus:
            totals = gpu.inference.totals
            if gpu.mig_parent or totals.regime_seconds is None:
                continue
            present += 1
            key = gpu.workload
            account = accounts.get(key)
            born = account is None
            if account is None:
                account = accounts[key] = _Account()
            account.held_at = now
            entity = (gpu.entity.uuid, gpu.entity.gpu_instance)
            before = seen.pop(entity, None)
            if born or before is None or before[0] is not totals:  # born: its counters at 0 at least
                account.add(totals, None if before is None else before[0])
                changed = True
            seen[entity] = (totals, now)
        changed |= self._forget_workloads(now)
        self._forget_gpus(now, present)
        if changed or len(self._published) != len(accounts):
            self._published = tuple(
                accounts[key].as_record(key) for key in sorted(accounts, key=attrgetter("order"))
            )
        return self._published

    def _forget_workloads(self, now: float) -> bool:
        """Drops the workloads no GPU held for WORKLOAD_RETENTION_SECONDS, then the longest
        unheld beyond MAX_IDLE_WORKLOADS; True if any went."""
        accounts = self._accounts
        # by time alone: keys hold None beside names, which do not compare (ties keep dict order)
        unheld = sorted(((a.held_at, k) for k, a in accounts.items() if a.held_at < now), key=itemgetter(0))
        gone = [k for held, k in unheld if now - held > WORKLOAD_RETENTION_SECONDS]
        kept = [k for held, k in unheld if now - held <= WORKLOAD_RETENTION_SECONDS]
        gone += kept[: max(0, len(kept) - MAX_IDLE_WORKLOADS)]
        for key in gone:
            del accounts[key]
        return bool(gone)

    def _forget_gpus(self, now: float, present: int) -> None:
        seen = self._seen
        while seen:
            entity, (_, at) = next(iter(seen.items()))
            if now - at <= GPU_MEMORY_SECONDS and len(seen) <= present + MAX_GPUS_REMEMBERED:
                break
            del seen[entity]
