"""The simulated DCGM host engine behind the fake bindings (not part of NVIDIA's API).

Tests configure ENGINE (GPUs, profiling support, MIG instances, values, faults); the fake
dcgm_agent functions answer from it the way a host engine would.
"""

from dataclasses import dataclass, field

ST_OK = 0
ST_CONNECTION_NOT_VALID = -21

FP64_BLANK = 140737488355328.0
INT64_BLANK = 0x7FFFFFFFFFFFFFF0

INT64_FIELDS = frozenset({100, 112, 203})
"""DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_CLOCKS_EVENT_REASONS and DCGM_FI_DEV_GPU_UTIL are int64 fields;
profiling fields and the power fields (155, 160) are doubles."""

ALL_PROF_FIELDS = tuple(range(1001, 1016))


@dataclass
class FakeInstance:
    """A MIG GPU instance: DCGM entity id (DCGM_FE_GPU_I) and the NVML GPU-instance id."""

    entity_id: int
    nvml_instance_id: int
    values: dict[int, float | None] = field(default_factory=dict)


@dataclass
class FakeGpu:
    gpu_id: int
    uuid: str
    name: str
    profiling_status: int = ST_OK
    """DCGM_ST_* code dcgmProfGetSupportedMetricGroups returns for this GPU (0 = supported)."""
    metric_group_fields: tuple[tuple[int, ...], ...] = (
        (1001, 1002, 1003, 1004, 1005),
        (1006, 1007, 1008),
        (1009, 1010, 1011, 1012),
        (1013, 1014, 1015),
    )
    values: dict[int, float | None] = field(default_factory=dict)
    instances: list[FakeInstance] = field(default_factory=list)


@dataclass
class Engine:
    library_present: bool = True
    listening_address: str | None = "127.0.0.1:5555"
    """Address a remote host engine answers on (None: no nv-hostengine running)."""
    gpus: list[FakeGpu] = field(default_factory=list)
    watch_error: int = ST_OK
    """Return code dcgmWatchFields gives when asked for more than 1001-1005, 100, 203."""
    next_handle: int = 1
    live_handles: set[int] = field(default_factory=set)
    groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    field_groups: dict[int, list[int]] = field(default_factory=dict)
    watches: list[tuple[int, int, int, float, int]] = field(default_factory=list)
    """(group, field group, updateFreq usec, maxKeepAge s, maxKeepSamples) per dcgmWatchFields."""
    embedded_starts: int = 0
    connects: list[str] = field(default_factory=list)
    history: list[tuple[int, dict[tuple[int, int], dict[int, float | None]]]] = field(default_factory=list)
    """What the host engine sampled at its watch rate: (timestamp in usec, entity -> values), oldest
    first, as dcgmGetValuesSince_v2 reads it back. Tests add to it with `collect`."""
    stamp_step_usec: int = 3
    """A watch tick collects one value after another, each stamped when collected: the n-th value
    of a tick (entities in group order, fields in field-group order) is stamped n steps later."""
    field_major: bool = True
    """dcgmGetValuesSince_v2 hands an entity's values field by field, each field's samples oldest
    first, as DCGM does (dcgmlib/src/DcgmApi.cpp, helperGetValuesSince: for each entity, for each
    field, the values since the timestamp in ascending order); False: tick by tick."""
    callback_values: int | None = 1
    """At most this many values per callback. DCGM calls back once per value (numValues 1, each
    value converted into the same stack record); dcgm_structs.h allows "one or more times per
    field". None: one callback per entity with all its values. Every callback's values lie in one
    scratch array, overwritten by the next callback, as DCGM reuses its record."""
    statuses: dict[tuple[int, int, int], int] = field(default_factory=dict)
    """(entity group, entity id, field id) -> the DCGM_ST_* a value carries instead of DCGM_ST_OK
    (e.g. -15 DCGM_ST_STALE_DATA, -18 DCGM_ST_GPU_IS_LOST), in every read of it."""

    def new_handle(self) -> int:
        handle = self.next_handle
        self.next_handle += 1
        self.live_handles.add(handle)
        return handle

    def collect(self, ts_usec: int) -> None:
        """The host engine samples every watched entity now (its own timer, at the watch rate):
        the current values of every GPU and instance are kept under `ts_usec`."""
        entities: dict[tuple[int, int], dict[int, float | None]] = {}
        for gpu in self.gpus:
            entities[(1, gpu.gpu_id)] = dict(gpu.values)  # DCGM_FE_GPU
            for inst in gpu.instances:
                entities[(4, inst.entity_id)] = dict(inst.values)  # DCGM_FE_GPU_I
        self.history.append((ts_usec, entities))

    def crash(self) -> None:
        """The host engine went away: every open connection is now invalid."""
        self.live_handles.clear()

    def gpu(self, gpu_id: int) -> FakeGpu:
        return next(g for g in self.gpus if g.gpu_id == gpu_id)

    def value(self, group: int, entity: int, field_id: int) -> float | None:
        if group == 1:
            return self.gpu(entity).values.get(field_id)
        for gpu in self.gpus:
            for inst in gpu.instances:
                if inst.entity_id == entity:
                    return inst.values.get(field_id)
        return None


ENGINE = Engine()


def reset() -> Engine:
    global ENGINE
    ENGINE = Engine()
    return ENGINE
