"""DCGM source: profiling counters from the DCGM host engine through NVIDIA's Python bindings.

Embedded (the host engine runs inside Ridgeline, DCGM_OPERATION_MODE_AUTO) or remote
(`--dcgm-address host:port` of an nv-hostengine). Ridgeline creates one GPU group (GPUs and,
on MIG GPUs, their GPU instances) and one field group (1001-1015, 100, 203), asks DCGM to
sample them every `--interval`, and hands the sampler every watch tick the engine kept since the
last read (`read_batches`, about once a second), so `--interval 0.1` keeps all ten ticks.
Profiling support is checked per GPU, not only on GPU 0, so a mixed node keeps the GPUs
that can be profiled and says why the others were left out.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter, lt
from pathlib import Path
from typing import Any

from exporter import fields, readings
from exporter.option_specs import OptionSpec
from exporter.sample import Entity, Sample
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable
from exporter.sources.dcgm_bindings import Bindings, load_bindings
from exporter.sources.dcgm_values import (
    ENTITY_CALLBACK,
    FIELD_VALUE_V1,
    FIELD_VALUE_V1_HEADS,
    FIELD_VALUE_V2,
    Columns,
    decode,
    in_place,
    kind_code,
    layout_matches,
    record_heads,
)

log = logging.getLogger(__name__)

PROFILING_FIELDS: tuple[int, ...] = tuple(range(fields.GR_ENGINE_ACTIVE, fields.PIPE_TENSOR_DFMA_ACTIVE + 1))
"""DCGM_FI_PROF_* 1001-1015."""
CLOCK_EVENT_FIELDS: tuple[int, ...] = (
    fields.CLOCKS_EVENT_REASONS,
    fields.POWER_USAGE,
    fields.POWER_MGMT_LIMIT,
)
"""Device fields 112, 155, 160: why the clock is held down (docs/model.md, "At a reduced clock")."""
WATCHED_FIELDS: tuple[int, ...] = (*PROFILING_FIELDS, fields.SM_CLOCK, fields.GPU_UTIL, *CLOCK_EVENT_FIELDS)
CORE_FIELDS: tuple[int, ...] = (
    fields.GR_ENGINE_ACTIVE,
    fields.SM_ACTIVE,
    fields.SM_OCCUPANCY,
    fields.PIPE_TENSOR_ACTIVE,
    fields.DRAM_ACTIVE,
    fields.SM_CLOCK,
    fields.GPU_UTIL,
    *CLOCK_EVENT_FIELDS,
)
"""The fallback watch when a GPU cannot collect every profiling field in one pass."""
REQUIRED_FIELDS = frozenset({fields.PIPE_TENSOR_ACTIVE, fields.DRAM_ACTIVE})
"""Without tensor and DRAM activity there is no roofline position, so such a GPU is skipped."""

_CONNECTION_CODES = ("DCGM_ST_CONNECTION_NOT_VALID", "DCGM_ST_UNINITIALIZED", "DCGM_ST_TIMEOUT")
_FE_GPU_NAME = "DCGM_FE_GPU"
_FE_GPU_I_NAME = "DCGM_FE_GPU_I"


@dataclass
class _Target:
    """One entity DCGM samples: a GPU (group DCGM_FE_GPU) or a MIG GPU instance."""

    entity_group: int
    entity_id: int
    entity: Entity


@dataclass
class _Session:
    """Everything tied to one connection to the host engine; dropped whole when it breaks."""

    handle: Any
    group: Any
    field_group: Any
    field_ids: tuple[int, ...]
    targets: list[_Target] = field(default_factory=list)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").rstrip("\x00")
    return str(value)


class DcgmSource:
    """Reads DCGM's profiling values: every kept watch tick (`read_batches`, which the sampler
    prefers), or the latest values alone (`read`)."""

    name = "dcgm"
    paced = False
    records_skipped = 0

    def __init__(self, options: SourceOptions, settings: DcgmSettings | None = None) -> None:
        self._options = options
        self._settings = settings if settings is not None else DcgmSettings()
        self._bindings: Bindings | None = None
        self._dcgm_handle: Any = None
        self._session: _Session | None = None
        self._since = 0
        """dcgmGetValuesSince_v2's sinceTimestamp for read_since (usec; 0: all the engine kept)."""
        self._fresh = True
        """The next read_batches is the first of this connection: it hands over the newest tick only."""
        self._pending: list[Sample] = []
        """A trailing tick read while the engine was still sampling it, held for the next read."""
        self.skipped: dict[int, str] = {}
        """GPU index -> why it is not sampled (profiling unsupported, paused, ...)."""

    # -- protocol -----------------------------------------------------------------------

    def open(self) -> None:
        self._bindings = load_bindings(self._settings.bindings)
        self._connect()

    def read(self) -> list[Sample]:
        if self._session is None:
            self._connect()  # reconnect after the host engine went away
        assert self._session is not None and self._bindings is not None
        b = self._bindings
        session = self._session
        pairs = []
        for target in session.targets:
            pair = b.dcgm_structs.c_dcgmGroupEntityPair_t()
            pair.entityGroupId = target.entity_group
            pair.entityId = target.entity_id
            pairs.append(pair)
        try:
            values = b.dcgm_agent.dcgmEntitiesGetLatestValues(
                session.handle, pairs, list(session.field_ids), 0
            )
        except b.dcgm_structs.DCGMError as exc:
            raise self._error(exc, "reading the latest values") from exc
        now = time.time()
        by_entity: dict[tuple[int, int], dict[int, float | None]] = {}
        stamps: dict[tuple[int, int], float] = {}
        for key, ts, fid, value in self._latest_rows(values):
            by_entity.setdefault(key, {})[fid] = value
            if ts > 0:
                stamps[key] = max(stamps.get(key, 0.0), ts / 1e6)
        samples = []
        for target in session.targets:
            key = (target.entity_group, target.entity_id)
            samples.append(
                Sample(timestamp=stamps.get(key, now), entity=target.entity, values=by_entity.get(key, {}))
            )
        return samples

    def close(self) -> None:
        self._drop_session()

    def read_batches(self) -> list[list[Sample]]:
        """Every watch tick since the last read, oldest first: one sample per entity per tick.

        The first read of a connection hands over the newest whole tick only: the engine's kept history
        (at least 30 s) lies before this connection, over time the sampler already folded or
        reported as down, and folding it at once would count that half-minute as if live. A last
        tick that lacks an entity seen earlier in the read was caught mid-sampling: it is held
        back and completed by the next read rather than count that entity as missing."""
        since = self.read_since()  # first: a reconnect drops the held tick
        samples, self._pending = [*self._pending, *since], []
        batches = ticks_as_batches(samples)
        seen = {s.entity.key for batch in batches for s in batch}
        if batches and len(batches[-1]) < len(seen):
            self._pending = batches.pop()
        if self._fresh:
            self._fresh = False
            return batches[-1:]
        return batches

    def read_since(self) -> list[Sample]:
        """Every sample the host engine kept since the last call, oldest first, one per entity per
        watch tick: dcgmGetValuesSince_v2 from the sinceTimestamp it last returned.

        DCGM stamps each field value when it collects it, so one tick's fields of one entity
        differ by microseconds: an entity's values are taken in stamp order and a new sample
        starts when a field repeats (`values_as_ticks`, `columns_as_ticks`). DCGM calls back once
        per value: each callback copies the record's first 32 bytes, and each entity's are decoded
        together afterwards (dcgm_values). A first call after a (re)connect returns what the
        engine kept (at least 30 s)."""
        if self._session is None:
            self._connect()
        assert self._session is not None and self._bindings is not None
        b = self._bindings
        session = self._session
        targets = {(t.entity_group, t.entity_id): t.entity for t in session.targets}
        heads: dict[tuple[int, int], list[bytes]] = {}
        rows: dict[tuple[int, int], Columns] = {}

        current: list[Any] = [None, None, []]  # the entity called for last, and its list

        def collect_heads(group: int, entity: int, values: Any, count: int, _user: Any) -> int:
            # DCGM calls once a value and reuses its record: copy the 32 bytes read, decode after
            if entity == current[1] and group == current[0]:
                kept = current[2]
            else:  # DCGM hands one entity's values after another: a dict look-up per entity
                kept = heads.get((group, entity))
                if kept is None:
                    kept = heads[(group, entity)] = []
                current[:] = [group, entity, kept]
            if count == 1:
                kept.append(values.contents.raw)
            elif count > 1:
                kept.append(record_heads(ctypes.addressof(values.contents), count))
            return 0

        def collect(group: int, entity: int, values: Any, count: int, _user: Any) -> int:
            columns = self._columns(values[index] for index in range(count))
            known = rows.get((group, entity))
            if known is None:
                rows[(group, entity)] = columns
            else:
                known.extend(columns)
            return 0

        if layout_matches(FIELD_VALUE_V1, b.dcgm_structs.c_dcgmFieldValue_v1):
            callback = ENTITY_CALLBACK(collect_heads)
        else:  # another layout than dcgm_structs.h's: the bindings' Structure reads each record
            callback = b.dcgm_agent.dcgmFieldValueEntityEnumeration_f(collect)
        try:
            self._since = b.dcgm_agent.dcgmGetValuesSince_v2(
                session.handle, session.group, session.field_group, self._since, callback, None
            )
        except b.dcgm_structs.DCGMError as exc:
            raise self._error(exc, "reading the values since the last read") from exc
        kinds = self._kinds()
        for key, blocks in heads.items():
            rows[key] = decode(memoryview(b"".join(blocks)), FIELD_VALUE_V1_HEADS, *kinds)
        samples = [
            Sample(timestamp=stamp / 1e6, entity=targets[key], values=values)
            for key, kept in rows.items()
            if key in targets
            for stamp, values in columns_as_ticks(kept)
        ]
        samples.sort(key=lambda sample: sample.timestamp)
        return samples

    # -- connection ---------------------------------------------------------------------

    def _connect(self) -> None:
        """Start or connect to the host engine, pick the GPUs that can be profiled, watch them."""
        assert self._bindings is not None
        b = self._bindings
        structs = b.dcgm_structs
        address = self._settings.address
        try:
            if address:
                handle_obj = b.pydcgm.DcgmHandle(ipAddress=address)
            else:
                handle_obj = b.pydcgm.DcgmHandle(opMode=structs.DCGM_OPERATION_MODE_AUTO)
        except structs.DCGMError as exc:
            if exc.value == structs.DCGM_ST_LIBRARY_NOT_FOUND:
                raise SourceUnavailable(
                    "dcgm_not_found",
                    f"the DCGM bindings in {b.path} could not load libdcgm.so.4: {exc}. Install "
                    "DCGM or set LD_LIBRARY_PATH to its lib directory.",
                ) from exc
            where = f"nv-hostengine at {address}" if address else "an embedded DCGM host engine"
            raise SourceError("dcgm_connection", f"cannot start or reach {where}: {exc}") from exc
        self._dcgm_handle = handle_obj
        self._since = 0  # a new session: its engine's timestamps start afresh
        self._fresh = True
        self._pending = []  # a tick of the lost session is not completed by this one
        handle = handle_obj.handle
        try:
            self._session = self._watch(handle)
        except SourceError:
            self._drop_session()
            raise
        except structs.DCGMError as exc:
            self._drop_session()
            raise self._error(exc, "setting up the field watches") from exc

    def _watch(self, handle: Any) -> _Session:
        assert self._bindings is not None
        b = self._bindings
        agent, structs, dcgm_fields = b.dcgm_agent, b.dcgm_structs, b.dcgm_fields
        fe_gpu = getattr(dcgm_fields, _FE_GPU_NAME)
        fe_gpu_i = getattr(dcgm_fields, _FE_GPU_I_NAME)
        gpu_ids = [int(g) for g in agent.dcgmGetAllSupportedDevices(handle)]
        if self._options.gpus is not None:
            gpu_ids = [g for g in gpu_ids if g in self._options.gpus]
        if not gpu_ids:
            raise SourceUnavailable("dcgm_no_gpu", "DCGM reports no supported GPU on this node")
        self.skipped = {}
        targets: list[_Target] = []
        for gpu_id in gpu_ids:
            identifiers = agent.dcgmGetDeviceAttributes(handle, gpu_id).identifiers
            entity = Entity(gpu=gpu_id, uuid=_text(identifiers.uuid), model=_text(identifiers.deviceName))
            reason = self._profiling_problem(handle, gpu_id)
            if reason is not None:
                self.skipped[gpu_id] = reason
                log.warning("DCGM: skipping GPU %d (%s): %s", gpu_id, entity.model, reason)
                continue
            targets.append(_Target(fe_gpu, gpu_id, entity))
        if not targets:
            details = "; ".join(f"GPU {g}: {r}" for g, r in sorted(self.skipped.items()))
            raise SourceUnavailable(
                "dcgm_no_profiling",
                f"no GPU on this node can be profiled through DCGM ({details}). Profiling needs a "
                "data-center GPU from Volta on; on a GPU without it use --source scrape or "
                "--replay.",
            )
        targets.extend(self._mig_targets(handle, {t.entity_id: t.entity for t in targets}, fe_gpu_i))
        group = agent.dcgmGroupCreate(handle, structs.DCGM_GROUP_EMPTY, f"ridgeline-{os.getpid()}")
        for target in targets:
            agent.dcgmGroupAddEntity(handle, group, target.entity_group, target.entity_id)
        update_usec = max(int(self._options.interval_seconds * 1_000_000), 100_000)
        keep_age = max(30.0, 10 * self._options.interval_seconds)
        field_ids = WATCHED_FIELDS
        field_group = agent.dcgmFieldGroupCreate(handle, list(field_ids), f"ridgeline-{os.getpid()}")
        try:
            agent.dcgmWatchFields(handle, group, field_group, update_usec, keep_age, 0)
        except structs.DCGMError as exc:
            if exc.value not in (structs.DCGM_ST_PROFILING_MULTI_PASS, structs.DCGM_ST_NOT_SUPPORTED):
                raise
            log.warning("DCGM cannot watch all profiling fields at once (%s); watching %s", exc, CORE_FIELDS)
            agent.dcgmFieldGroupDestroy(handle, field_group)
            field_ids = CORE_FIELDS
            field_group = agent.dcgmFieldGroupCreate(handle, list(field_ids), f"ridgeline-core-{os.getpid()}")
            agent.dcgmWatchFields(handle, group, field_group, update_usec, keep_age, 0)
        agent.dcgmUpdateAllFields(handle, 1)
        return _Session(handle, group, field_group, field_ids, targets)

    def _profiling_problem(self, handle: Any, gpu_id: int) -> str | None:
        """Why this GPU cannot give tensor and DRAM activity, or None when it can."""
        assert self._bindings is not None
        structs = self._bindings.dcgm_structs
        try:
            groups = self._bindings.dcgm_agent.dcgmProfGetSupportedMetricGroups(handle, gpu_id)
        except structs.DCGMError as exc:
            if exc.value in _codes(structs, _CONNECTION_CODES):
                raise
            hints = {
                structs.DCGM_ST_PAUSED: " (run `dcgmi profile --resume` after the profiler is done)",
                structs.DCGM_ST_MODULE_NOT_LOADED: " (the profiling module is not loaded)",
                structs.DCGM_ST_REQUIRES_ROOT: " (the host engine must run as root)",
            }
            return f"profiling unavailable: {exc}{hints.get(exc.value, '')}"
        supported: set[int] = set()
        for index in range(int(groups.numMetricGroups)):
            info = groups.metricGroups[index]
            supported.update(int(info.fieldIds[i]) for i in range(int(info.numFieldIds)))
        missing = REQUIRED_FIELDS - supported
        if missing:
            names = ", ".join(readings.field_name(f) for f in sorted(missing))
            return f"profiling lacks {names}"
        return None

    def _mig_targets(self, handle: Any, gpus: dict[int, Entity], fe_gpu_i: int) -> list[_Target]:
        """GPU instances of the profiled GPUs; none when MIG is off or the engine cannot tell."""
        assert self._bindings is not None
        try:
            hierarchy = self._bindings.dcgm_agent.dcgmGetGpuInstanceHierarchy(handle)
        except self._bindings.dcgm_structs.DCGMError as exc:
            log.info("DCGM: no MIG hierarchy (%s); sampling whole GPUs only", exc)
            return []
        targets = []
        for index in range(int(hierarchy.count)):
            entry = hierarchy.entityList[index]
            if int(entry.entity.entityGroupId) != fe_gpu_i:
                continue
            parent = gpus.get(int(entry.parent.entityId))
            if parent is None:
                continue
            entity = Entity(
                gpu=parent.gpu,
                uuid=parent.uuid,
                model=parent.model,
                gpu_instance=int(entry.info.nvmlInstanceId),
            )
            targets.append(_Target(fe_gpu_i, int(entry.entity.entityId), entity))
        return targets

    def _drop_session(self) -> None:
        """Forget the connection; shutting down a dead one must not raise."""
        handle_obj, self._dcgm_handle, self._session = self._dcgm_handle, None, None
        if handle_obj is None:
            return
        try:
            handle_obj.Shutdown()
        except Exception as exc:  # the engine may already be gone; nothing left to release
            log.debug("DCGM shutdown after a lost connection: %s", exc)

    def _error(self, exc: Any, doing: str) -> SourceError:
        """A SourceError for a DCGMError; a lost host engine also drops the session."""
        assert self._bindings is not None
        structs = self._bindings.dcgm_structs
        where = f"nv-hostengine at {self._settings.address}" if self._settings.address else "DCGM"
        if exc.value in _codes(structs, _CONNECTION_CODES):
            self._drop_session()
            return SourceError(
                "dcgm_connection", f"lost the connection to {where} while {doing}: {exc}; reconnecting"
            )
        return SourceError("dcgm_error", f"{where} failed while {doing}: {exc}")

    def _kinds(self) -> tuple[int, int]:
        """The bindings' DCGM_FT_DOUBLE and DCGM_FT_INT64 as the numbers a record holds."""
        assert self._bindings is not None
        dcgm_fields = self._bindings.dcgm_fields
        return kind_code(dcgm_fields.DCGM_FT_DOUBLE), kind_code(dcgm_fields.DCGM_FT_INT64)

    def _latest_rows(self, values: Any) -> Iterable[tuple[tuple[int, int], int, int, float | None]]:
        """dcgmEntitiesGetLatestValues' records as (entity, stamp usec, field, value): the whole
        array decoded at once where its layout is DCGM's (dcgm_values), else record by record."""
        if isinstance(values, ctypes.Array) and layout_matches(FIELD_VALUE_V2, values._type_):
            records = in_place(ctypes.addressof(values), len(values), FIELD_VALUE_V2)
            columns = decode(records, FIELD_VALUE_V2, *self._kinds())
            assert columns.entity_groups is not None and columns.entity_ids is not None
            entities = zip(columns.entity_groups, columns.entity_ids, strict=True)
            return zip(entities, columns.ts, columns.field_ids, columns.values, strict=True)
        return (
            ((int(fv.entityGroupId), int(fv.entityId)), int(fv.ts), int(fv.fieldId), self._value(fv))
            for fv in values
        )

    def _columns(self, records: Iterable[Any]) -> Columns:
        """Records read one ctypes value at a time: for bindings whose record layout is not the
        one dcgm_values knows from dcgm_structs.h."""
        columns = Columns(ts=[], field_ids=[], values=[])
        for fv in records:
            columns.ts.append(int(fv.ts))
            columns.field_ids.append(int(fv.fieldId))
            columns.values.append(self._value(fv))
        return columns

    def _value(self, fv: Any) -> float | None:
        """A field value as Ridgeline keeps it: blank sentinels and failed statuses are None."""
        assert self._bindings is not None
        if int(fv.status) != self._bindings.dcgm_structs.DCGM_ST_OK:
            return None
        kind = fv.fieldType
        kind = chr(kind) if isinstance(kind, int) else _text(kind)
        if kind == self._bindings.dcgm_fields.DCGM_FT_DOUBLE:
            raw: float | int = float(fv.value.dbl)
        elif kind == self._bindings.dcgm_fields.DCGM_FT_INT64:
            raw = int(fv.value.i64)
        else:
            return None
        return fields.clean_value(int(fv.fieldId), raw)


def values_as_ticks(rows: list[tuple[int, int, float | None]]) -> list[tuple[int, dict[int, float | None]]]:
    """One entity's (stamp usec, field, value) rows as watch ticks, oldest first: rows in stamp
    order, a new tick where a field comes again; a tick is stamped with its newest value's stamp.
    Rows without a stamp (0: never collected) are left out."""
    ticks: list[tuple[int, dict[int, float | None]]] = []
    values: dict[int, float | None] = {}
    stamp = 0
    for ts, field_id, value in sorted((row for row in rows if row[0] > 0), key=lambda row: row[0]):
        if field_id in values:
            ticks.append((stamp, values))
            values = {}
        values[field_id] = value
        stamp = ts
    if values:
        ticks.append((stamp, values))
    return ticks


def columns_as_ticks(columns: Columns) -> list[tuple[int, dict[int, float | None]]]:
    """values_as_ticks over one entity's decoded records, a run of records at a time where they
    are regular: in stamp order, the first tick's fields (up to the first one that comes again)
    repeat in that order, so each run of them is one tick, just where values_as_ticks would split.
    A tail shorter than a tick is split by values_as_ticks; any other shape goes through it whole."""
    ts, fids, values = columns.ts, columns.field_ids, columns.values
    if not ts:
        return []
    ordered = sorted(ts)
    if ordered[0] <= 0:  # never collected: values_as_ticks leaves those out
        return values_as_ticks(list(zip(ts, fids, values, strict=True)))
    if ts != ordered and len(ts) > 1:
        pick = _field_by_field(ts, fids)
        if pick is None:
            pick = itemgetter(*sorted(range(len(ts)), key=ts.__getitem__))  # stable, as values_as_ticks
        ts, fids, values = ordered, list(pick(fids)), list(pick(values))
    width = fids.index(fids[0], 1) if fids.count(fids[0]) > 1 else len(fids)  # else: one tick
    head = fids[:width]
    whole = len(fids) - len(fids) % width
    regular = len(set(head)) == width and all(
        fids[start : start + width] == head for start in range(width, whole, width)
    )
    if not regular or (whole < len(fids) and fids[whole] not in head):
        return values_as_ticks(list(zip(ts, fids, values, strict=True)))
    rest = iter(values)  # zip stops at head's end before taking from rest: a tick's values each
    ticks = [(ts[start + width - 1], dict(zip(head, rest, strict=False))) for start in range(0, whole, width)]
    if whole < len(fids):  # a tick the engine had not finished: values_as_ticks splits it
        ticks.extend(values_as_ticks(list(zip(ts[whole:], fids[whole:], values[whole:], strict=True))))
    return ticks


_TRANSPOSES: dict[tuple[int, int], itemgetter[Any]] = {}


def _field_by_field(ts: list[int], fids: list[int]) -> itemgetter[Any] | None:
    """The stamp order of records DCGM hands field by field (each field's values oldest first,
    the first field's count of them per field), when taking them tick by tick gives it: their
    stamps then rise strictly, so no other order (stable or not) sorts them. None otherwise."""
    run = fids.count(fids[0])
    if run < 2 or len(fids) % run:
        return None
    shape = (len(fids), run)
    pick = _TRANSPOSES.get(shape)
    if pick is None:
        fields_ = len(fids) // run
        order = [field * run + tick for tick in range(run) for field in range(fields_)]
        pick = _TRANSPOSES[shape] = itemgetter(*order)
    stamps = pick(ts)
    return pick if all(map(lt, stamps, stamps[1:])) else None


def ticks_as_batches(samples: list[Sample]) -> list[list[Sample]]:
    """Samples in stamp order as the sampler's batches: a new batch where an entity comes again,
    so each batch holds one watch tick, one sample per entity."""
    batches: list[list[Sample]] = []
    seen: set[tuple[int, int | None]] = set()
    for sample in samples:
        key = sample.entity.key
        if not batches or key in seen:
            batches.append([])
            seen = set()
        batches[-1].append(sample)
        seen.add(key)
    return batches


def _codes(structs: Any, names: tuple[str, ...]) -> set[int]:
    return {int(getattr(structs, n)) for n in names if hasattr(structs, n)}


# -- the flags this source reads (exporter/sources/options.py) ------------------------------

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        flag="--dcgm-address",
        dest="dcgm_address",
        metavar="HOST:PORT",
        help="remote DCGM host engine (default: embedded)",
    ),
    OptionSpec(
        flag="--dcgm-bindings",
        dest="dcgm_bindings",
        metavar="DIR",
        help="directory holding DCGM's Python bindings",
    ),
)


@dataclass(frozen=True, slots=True)
class DcgmSettings:
    """What --dcgm-address and --dcgm-bindings say."""

    address: str | None = None
    """HOST:PORT of an nv-hostengine; None: an embedded host engine."""
    bindings: Path | None = None
    """The directory of DCGM's Python bindings; None: the usual places (dcgm_bindings.py)."""


def options_from(values: Any, chosen: bool) -> DcgmSettings:
    """Where the host engine is and where its bindings are."""
    return DcgmSettings(
        address=values.dcgm_address,
        bindings=Path(values.dcgm_bindings) if values.dcgm_bindings else None,
    )
