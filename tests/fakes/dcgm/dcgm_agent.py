"""Fake of DCGM's dcgm_agent.py: the same function names, arguments and return shapes.

Each function answers from the simulated host engine (_fake_dcgm_engine) and reports errors
the way NVIDIA's wrapper does: a non-zero dcgmReturn_t raised through
dcgm_structs._dcgmCheckReturn as the matching DCGMError_* subclass.
"""

import time
from ctypes import CFUNCTYPE, POINTER, addressof, c_int32, c_uint32, c_void_p, cast, memmove, sizeof
from typing import Any

import _fake_dcgm_engine
import dcgm_fields
import dcgm_structs

CORE_FIELDS = frozenset({100, 112, 155, 160, 203, 1001, 1002, 1003, 1004, 1005})
"""What a host engine that cannot collect every profiling group at once still watches: the
first profiling group and any device field (clocks, utilisation, clock-event reasons, power)."""


def _engine():
    return _fake_dcgm_engine.ENGINE


def _check_handle(dcgm_handle):
    value = dcgm_handle.value if isinstance(dcgm_handle, c_void_p) else dcgm_handle
    if value not in _engine().live_handles:
        dcgm_structs._dcgmCheckReturn(dcgm_structs.DCGM_ST_CONNECTION_NOT_VALID)


def dcgmInit():
    return dcgm_structs.DCGM_ST_OK


def dcgmShutdown():
    return dcgm_structs.DCGM_ST_OK


def dcgmStartEmbedded(opMode):
    engine = _engine()
    engine.embedded_starts += 1
    return c_void_p(engine.new_handle())


def dcgmStopEmbedded(dcgm_handle):
    _engine().live_handles.discard(dcgm_handle.value)
    return dcgm_structs.DCGM_ST_OK


def dcgmConnect_v2(ip_address, connectParams, version=dcgm_structs.c_dcgmConnectV2Params_version):
    engine = _engine()
    address = ip_address.decode() if isinstance(ip_address, bytes) else ip_address
    engine.connects.append(address)
    if engine.listening_address is None or address != engine.listening_address:
        dcgm_structs._dcgmCheckReturn(dcgm_structs.DCGM_ST_CONNECTION_NOT_VALID)
    return c_void_p(engine.new_handle())


def dcgmDisconnect(dcgm_handle):
    _check_handle(dcgm_handle)
    _engine().live_handles.discard(dcgm_handle.value)
    return dcgm_structs.DCGM_ST_OK


def dcgmGetAllSupportedDevices(dcgm_handle):
    _check_handle(dcgm_handle)
    return [gpu.gpu_id for gpu in _engine().gpus]


def dcgmGetDeviceAttributes(dcgm_handle, gpuId, version=dcgm_structs.dcgmDeviceAttributes_version3):
    _check_handle(dcgm_handle)
    gpu = _engine().gpu(gpuId)
    attributes = dcgm_structs.c_dcgmDeviceAttributes_v3()
    attributes.version = version
    attributes.identifiers.deviceName = gpu.name.encode()
    attributes.identifiers.uuid = gpu.uuid.encode()
    return attributes


def dcgmGetGpuInstanceHierarchy(dcgm_handle):
    _check_handle(dcgm_handle)
    hierarchy = dcgm_structs.c_dcgmMigHierarchy_v2()
    hierarchy.version = dcgm_structs.c_dcgmMigHierarchy_version2
    count = 0
    for gpu in _engine().gpus:
        for inst in gpu.instances:
            entry = hierarchy.entityList[count]
            entry.entity.entityGroupId = dcgm_fields.DCGM_FE_GPU_I
            entry.entity.entityId = inst.entity_id
            entry.parent.entityGroupId = dcgm_fields.DCGM_FE_GPU
            entry.parent.entityId = gpu.gpu_id
            entry.info.gpuUuid = gpu.uuid.encode()
            entry.info.nvmlGpuIndex = gpu.gpu_id
            entry.info.nvmlInstanceId = inst.nvml_instance_id
            count += 1
    hierarchy.count = count
    return hierarchy


def dcgmGroupCreate(dcgm_handle, type, groupName):
    _check_handle(dcgm_handle)
    engine = _engine()
    group_id = len(engine.groups) + 100
    engine.groups[group_id] = []
    return c_void_p(group_id)


def dcgmGroupDestroy(dcgm_handle, group_id):
    _check_handle(dcgm_handle)
    _engine().groups.pop(group_id.value, None)
    return dcgm_structs.DCGM_ST_OK


def dcgmGroupAddEntity(dcgm_handle, group_id, entityGroupId, entityId):
    _check_handle(dcgm_handle)
    _engine().groups[group_id.value].append((entityGroupId, entityId))
    return dcgm_structs.DCGM_ST_OK


def dcgmFieldGroupCreate(dcgm_handle, fieldIds, fieldGroupName):
    _check_handle(dcgm_handle)
    engine = _engine()
    field_group_id = len(engine.field_groups) + 200
    engine.field_groups[field_group_id] = list(fieldIds)
    return c_void_p(field_group_id)


def dcgmFieldGroupDestroy(dcgm_handle, fieldGroupId):
    _check_handle(dcgm_handle)
    _engine().field_groups.pop(fieldGroupId.value, None)
    return dcgm_structs.DCGM_ST_OK


def dcgmWatchFields(dcgm_handle, groupId, fieldGroupId, updateFreq, maxKeepAge, maxKeepSamples):
    _check_handle(dcgm_handle)
    engine = _engine()
    requested = set(engine.field_groups[fieldGroupId.value])
    if engine.watch_error != dcgm_structs.DCGM_ST_OK and not requested <= CORE_FIELDS:
        dcgm_structs._dcgmCheckReturn(engine.watch_error)
    engine.watches.append((groupId.value, fieldGroupId.value, updateFreq, maxKeepAge, maxKeepSamples))
    return dcgm_structs.DCGM_ST_OK


def dcgmUnwatchFields(dcgm_handle, groupId, fieldGroupId):
    _check_handle(dcgm_handle)
    return dcgm_structs.DCGM_ST_OK


def dcgmUpdateAllFields(dcgm_handle, waitForUpdate):
    _check_handle(dcgm_handle)
    return dcgm_structs.DCGM_ST_OK


def dcgmEntitiesGetLatestValues(dcgmHandle, entities, fieldIds, flags):
    _check_handle(dcgmHandle)
    engine = _engine()
    field_values = (dcgm_structs.c_dcgmFieldValue_v2 * (len(fieldIds) * len(entities)))()
    now_usec = int(time.time() * 1e6)
    index = 0
    for pair in entities:
        for field_id in fieldIds:
            fv = field_values[index]
            index += 1
            fv.version = dcgm_structs.dcgmFieldValue_version2
            fv.entityGroupId = pair.entityGroupId
            fv.entityId = pair.entityId
            fv.fieldId = field_id
            fv.status = engine.statuses.get(
                (pair.entityGroupId, pair.entityId, field_id), dcgm_structs.DCGM_ST_OK
            )
            fv.ts = now_usec
            value = engine.value(pair.entityGroupId, pair.entityId, field_id)
            _set_value(fv, field_id, value)
    return field_values


def dcgmProfGetSupportedMetricGroups(dcgmHandle, gpuId):
    _check_handle(dcgmHandle)
    gpu = _engine().gpu(gpuId)
    dcgm_structs._dcgmCheckReturn(gpu.profiling_status)
    msg = dcgm_structs.c_dcgmProfGetMetricGroups_v3()
    msg.version = dcgm_structs.dcgmProfGetMetricGroups_version3
    msg.gpuId = gpuId
    msg.numMetricGroups = len(gpu.metric_group_fields)
    for index, group_fields in enumerate(gpu.metric_group_fields):
        info = msg.metricGroups[index]
        info.majorId = index
        info.numFieldIds = len(group_fields)
        for slot, field_id in enumerate(group_fields):
            info.fieldIds[slot] = field_id
    return msg


# The callback dcgmGetValuesSince_v2 calls once per entity: (entityGroupId, entityId, values,
# numValues, userData) -> int, as in NVIDIA's dcgm_agent.py.
dcgmFieldValueEntityEnumeration_f = CFUNCTYPE(
    c_int32, c_uint32, c_uint32, POINTER(dcgm_structs.c_dcgmFieldValue_v1), c_int32, c_void_p
)


_CALLED_FROM_C = CFUNCTYPE(c_int32, c_uint32, c_uint32, c_void_p, c_int32, c_void_p)
"""The callback as the C library sees it: `values` a bare pointer, whatever ctypes type the
caller's CFUNCTYPE gives it (the real wrapper hands enumCB to libdcgm without checking)."""


def dcgmGetValuesSince_v2(dcgm_handle, groupId, fieldGroupId, sinceTimestamp, enumCB, userData):
    """Every value the host engine kept for the group's entities and the field group's fields
    with a timestamp at or after sinceTimestamp (usec; 0: all it kept), handed to enumCB one entity
    at a time, oldest first; returns the sinceTimestamp for the next call (dcgm_agent.h)."""
    _check_handle(dcgm_handle)
    engine = _engine()
    entities = engine.groups[groupId.value]
    field_ids = engine.field_groups[fieldGroupId.value]
    next_since = sinceTimestamp
    step = engine.stamp_step_usec
    stamped = []  # (usec, entity, field id, value): each value stamped when the tick collected it
    for ts, values in engine.history:
        position = 0
        for group, entity in entities:
            for field_id in field_ids:
                if (group, entity) in values:
                    stamped.append((ts + position * step, (group, entity), field_id, values[(group, entity)]))
                position += 1
    stamped = [row for row in stamped if row[0] >= sinceTimestamp]
    if engine.field_major:
        stamped.sort(key=lambda row: field_ids.index(row[2]))  # stable: each field oldest first
    for group, entity in entities:
        rows = [row for row in stamped if row[1] == (group, entity)]
        if not rows:
            continue
        array = (dcgm_structs.c_dcgmFieldValue_v1 * len(rows))()
        for index, (ts, _key, field_id, values) in enumerate(rows):
            fv = array[index]
            fv.version = dcgm_structs.dcgmFieldValue_version1
            fv.fieldId = field_id
            fv.status = engine.statuses.get((group, entity, field_id), dcgm_structs.DCGM_ST_OK)
            fv.ts = ts
            value = values.get(field_id)
            _set_value(fv, field_id, value)
            next_since = max(next_since, ts + 1)
        # userData travels as the PyObject pointer the real wrapper passes (py_object(userData))
        step = engine.callback_values or len(rows)
        record = sizeof(dcgm_structs.c_dcgmFieldValue_v1)
        scratch = (dcgm_structs.c_dcgmFieldValue_v1 * step)()  # reused by every callback, as DCGM's
        as_from_c = cast(enumCB, _CALLED_FROM_C)  # libdcgm calls a C function pointer, unchecked
        for first in range(0, len(rows), step):
            count = min(step, len(rows) - first)
            memmove(scratch, addressof(array) + first * record, count * record)
            as_from_c(group, entity, addressof(scratch), count, id(userData))
    return next_since


def _set_value(fv: Any, field_id: int, value: float | None) -> None:
    """A field value's type and value as DCGM writes them: int64 or double, blank when None."""
    if field_id in _fake_dcgm_engine.INT64_FIELDS:
        fv.fieldType = ord(dcgm_fields.DCGM_FT_INT64)
        fv.value.i64 = _fake_dcgm_engine.INT64_BLANK if value is None else int(value)
    else:
        fv.fieldType = ord(dcgm_fields.DCGM_FT_DOUBLE)
        fv.value.dbl = _fake_dcgm_engine.FP64_BLANK if value is None else float(value)
