"""Fake of DCGM's dcgm_structs.py: return codes, DCGMError and its generated subclasses, structs.

Names, values and struct field names follow NVIDIA's bindings (DCGM 4.x,
testing/python3/dcgm_structs.py); only what Ridgeline touches is here. Instead of loading
libdcgm.so.4, _dcgmInit() asks the simulated host engine in _fake_dcgm_engine.
"""

import string
import sys
from ctypes import (
    Structure,
    Union,
    c_char,
    c_double,
    c_int16,
    c_int32,
    c_int64,
    c_uint,
    c_uint16,
    c_uint32,
    c_ushort,
    sizeof,
)
from typing import ClassVar

import _fake_dcgm_engine
import dcgmvalue  # noqa: F401 - the real module imports it too

DCGM_MAX_STR_LENGTH = 256
DCGM_MAX_NUM_DEVICES = 32
DCGM_MAX_BLOB_LENGTH = 4096

DCGM_OPERATION_MODE_AUTO = 1
DCGM_OPERATION_MODE_MANUAL = 2

DCGM_ST_OK = 0
DCGM_ST_BADPARAM = -1
DCGM_ST_GENERIC_ERROR = -3
DCGM_ST_MEMORY = -4
DCGM_ST_NOT_CONFIGURED = -5
DCGM_ST_NOT_SUPPORTED = -6
DCGM_ST_INIT_ERROR = -7
DCGM_ST_NVML_ERROR = -8
DCGM_ST_PENDING = -9
DCGM_ST_UNINITIALIZED = -10
DCGM_ST_TIMEOUT = -11
DCGM_ST_VER_MISMATCH = -12
DCGM_ST_UNKNOWN_FIELD = -13
DCGM_ST_NO_DATA = -14
DCGM_ST_STALE_DATA = -15
DCGM_ST_NOT_WATCHED = -16
DCGM_ST_NO_PERMISSION = -17
DCGM_ST_GPU_IS_LOST = -18
DCGM_ST_RESET_REQUIRED = -19
DCGM_ST_FUNCTION_NOT_FOUND = -20
DCGM_ST_CONNECTION_NOT_VALID = -21
DCGM_ST_GPU_NOT_SUPPORTED = -22
DCGM_ST_GROUP_INCOMPATIBLE = -23
DCGM_ST_MAX_LIMIT = -24
DCGM_ST_LIBRARY_NOT_FOUND = -25
DCGM_ST_REQUIRES_ROOT = -29
DCGM_ST_MODULE_NOT_LOADED = -33
DCGM_ST_IN_USE = -34
DCGM_ST_GROUP_IS_EMPTY = -35
DCGM_ST_PROFILING_NOT_SUPPORTED = -36
DCGM_ST_PROFILING_LIBRARY_ERROR = -37
DCGM_ST_PROFILING_MULTI_PASS = -38
DCGM_ST_INSUFFICIENT_DRIVER_VERSION = -44
DCGM_ST_INSTANCE_NOT_FOUND = -45
DCGM_ST_PAUSED = -54
DCGM_ST_NVML_NOT_LOADED = -56

DCGM_GROUP_DEFAULT = 0
DCGM_GROUP_EMPTY = 1

DCGM_FV_FLAG_LIVE_DATA = 0x00000001


class DCGMError(Exception):
    """Class to return error values for DCGM (same shape as NVIDIA's)."""

    _valClassMapping: ClassVar[dict] = {}
    _error_code_to_string: ClassVar[dict] = {
        DCGM_ST_CONNECTION_NOT_VALID: "The connection to the host engine is not valid any longer",
        DCGM_ST_LIBRARY_NOT_FOUND: "DCGM library could not be found",
        DCGM_ST_PROFILING_NOT_SUPPORTED: "Profiling is not supported for this group of GPUs or GPU",
        DCGM_ST_PROFILING_MULTI_PASS: "The requested profiling metrics cannot be collected in a single pass",
        DCGM_ST_MODULE_NOT_LOADED: (
            "This request is serviced by a module of DCGM that is not currently loaded"
        ),
        DCGM_ST_PAUSED: "The hostengine and all modules are paused",
        DCGM_ST_NOT_SUPPORTED: "Feature not supported",
        DCGM_ST_REQUIRES_ROOT: "This operation is not supported when the host engine is running as non root",
        DCGM_ST_GPU_IS_LOST: "GPU is unreachable",
        DCGM_ST_TIMEOUT: "Timeout",
    }

    def __new__(typ, value):
        if typ == DCGMError:
            typ = DCGMError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.info = None
        obj.value = value
        return obj

    def __str__(self):
        msg = DCGMError._error_code_to_string.get(self.value, f"DCGM Error with code {self.value}")
        if self.info is not None:
            msg += f": '{self.info}'"
        return msg

    def __eq__(self, other):
        return self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def SetAdditionalInfo(self, msg):
        self.info = msg


def dcgmExceptionClass(error_code):
    return DCGMError._valClassMapping.get(error_code)


def _extractDCGMErrorsAsClasses():
    """DCGM_ST_CONNECTION_NOT_VALID -> DCGMError_ConnectionNotValid, as in NVIDIA's bindings."""
    this_module = sys.modules[__name__]
    for err_name in [x for x in dir(this_module) if x.startswith("DCGM_ST_")]:
        class_name = "DCGMError_" + string.capwords(err_name.replace("DCGM_ST_", ""), "_").replace("_", "")
        err_val = getattr(this_module, err_name)

        def gen_new(val):
            def new(typ):
                return DCGMError.__new__(typ, val)

            return new

        new_error_class = type(class_name, (DCGMError,), {"__new__": gen_new(err_val)})
        new_error_class.__module__ = __name__
        setattr(this_module, class_name, new_error_class)
        DCGMError._valClassMapping[err_val] = new_error_class


_extractDCGMErrorsAsClasses()


def _dcgmCheckReturn(ret):
    if ret != DCGM_ST_OK:
        raise DCGMError(ret)
    return ret


def _dcgmInit(libDcgmPath=None):
    """The real one loads libdcgm.so.4 and raises DCGM_ST_LIBRARY_NOT_FOUND when it cannot."""
    if not _fake_dcgm_engine.ENGINE.library_present:
        _dcgmCheckReturn(DCGM_ST_LIBRARY_NOT_FOUND)


def make_dcgm_version(struct, ver):
    return sizeof(struct) | (ver << 24)


class c_dcgmConnectV2Params_v2(Structure):
    _fields_ = [
        ("version", c_uint),
        ("persistAfterDisconnect", c_uint),
        ("timeoutMs", c_uint),
        ("addressIsUnixSocket", c_uint),
    ]


c_dcgmConnectV2Params_version2 = make_dcgm_version(c_dcgmConnectV2Params_v2, 2)
c_dcgmConnectV2Params_version = c_dcgmConnectV2Params_version2


class c_dcgmGroupEntityPair_t(Structure):
    _fields_ = [("entityGroupId", c_uint32), ("entityId", c_uint32)]


class c_dcgmDeviceIdentifiers_v1(Structure):
    _fields_ = [
        ("version", c_uint),
        ("brandName", c_char * DCGM_MAX_STR_LENGTH),
        ("deviceName", c_char * DCGM_MAX_STR_LENGTH),
        ("pciBusId", c_char * DCGM_MAX_STR_LENGTH),
        ("serial", c_char * DCGM_MAX_STR_LENGTH),
        ("uuid", c_char * DCGM_MAX_STR_LENGTH),
        ("vbios", c_char * DCGM_MAX_STR_LENGTH),
        ("inforomImageVersion", c_char * DCGM_MAX_STR_LENGTH),
        ("pciDeviceId", c_uint32),
        ("pciSubSystemId", c_uint32),
        ("driverVersion", c_char * DCGM_MAX_STR_LENGTH),
        ("virtualizationMode", c_uint32),
    ]


class c_dcgmDeviceAttributes_v3(Structure):
    """Only the identifiers member is modelled (the real struct also has clocks, power, ...)."""

    _fields_ = [("version", c_uint), ("identifiers", c_dcgmDeviceIdentifiers_v1)]


dcgmDeviceAttributes_version3 = make_dcgm_version(c_dcgmDeviceAttributes_v3, 3)


class c_dcgmFieldValue_v1_value(Union):
    _fields_ = [
        ("i64", c_int64),
        ("dbl", c_double),
        ("str", c_char * DCGM_MAX_STR_LENGTH),
        ("blob", c_char * DCGM_MAX_BLOB_LENGTH),
    ]


class c_dcgmFieldValue_v1(Structure):
    """What dcgmGetValuesSince_v2 hands its callback: no entity fields (the callback's arguments
    name the entity)."""

    _fields_ = [
        ("version", c_uint),
        ("fieldId", c_uint16),
        ("fieldType", c_int16),
        ("status", c_int32),
        ("ts", c_int64),
        ("value", c_dcgmFieldValue_v1_value),
    ]


dcgmFieldValue_version1 = make_dcgm_version(c_dcgmFieldValue_v1, 1)


class c_dcgmFieldValue_v2(Structure):
    _fields_ = [
        ("version", c_uint),
        ("entityGroupId", c_uint),
        ("entityId", c_uint),
        ("fieldId", c_uint16),
        ("fieldType", c_uint16),
        ("status", c_int32),
        ("unused", c_uint),
        ("ts", c_int64),
        ("value", c_dcgmFieldValue_v1_value),
    ]


dcgmFieldValue_version2 = make_dcgm_version(c_dcgmFieldValue_v2, 2)

DCGM_PROF_MAX_NUM_GROUPS_V2 = 10
DCGM_PROF_MAX_FIELD_IDS_PER_GROUP_V2 = 64


class c_dcgmProfMetricGroupInfo_v2(Structure):
    _fields_ = [
        ("majorId", c_ushort),
        ("minorId", c_ushort),
        ("numFieldIds", c_uint),
        ("fieldIds", c_ushort * DCGM_PROF_MAX_FIELD_IDS_PER_GROUP_V2),
    ]


class c_dcgmProfGetMetricGroups_v3(Structure):
    _fields_ = [
        ("version", c_uint),
        ("unused", c_uint),
        ("gpuId", c_uint),
        ("numMetricGroups", c_uint),
        ("metricGroups", c_dcgmProfMetricGroupInfo_v2 * DCGM_PROF_MAX_NUM_GROUPS_V2),
    ]


dcgmProfGetMetricGroups_version3 = make_dcgm_version(c_dcgmProfGetMetricGroups_v3, 3)


class c_dcgmMigEntityInfo_t(Structure):
    _fields_ = [
        ("gpuUuid", c_char * 128),
        ("nvmlGpuIndex", c_uint),
        ("nvmlInstanceId", c_uint),
        ("nvmlComputeInstanceId", c_uint),
        ("nvmlMigProfileId", c_uint),
        ("nvmlProfileSlices", c_uint),
    ]


class c_dcgmMigHierarchyInfo_v2(Structure):
    _fields_ = [
        ("entity", c_dcgmGroupEntityPair_t),
        ("parent", c_dcgmGroupEntityPair_t),
        ("info", c_dcgmMigEntityInfo_t),
    ]


DCGM_MAX_TOTAL_INSTANCES = 14
DCGM_MAX_HIERARCHY_INFO = DCGM_MAX_NUM_DEVICES * DCGM_MAX_TOTAL_INSTANCES


class c_dcgmMigHierarchy_v2(Structure):
    _fields_ = [
        ("version", c_uint),
        ("count", c_uint),
        ("entityList", c_dcgmMigHierarchyInfo_v2 * DCGM_MAX_HIERARCHY_INFO),
    ]


c_dcgmMigHierarchy_version2 = make_dcgm_version(c_dcgmMigHierarchy_v2, 2)
