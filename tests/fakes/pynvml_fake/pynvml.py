"""Fake of nvidia-ml-py's pynvml module: same names, constants, NVMLError classes and structs.

Faithful to nvidia-ml-py 13.x: return codes, the generated NVMLError_* subclasses, GPM metric
ids with their units (utilisations in percent 0..100, bandwidths in MiB/s), and the ctypes
structs c_nvmlGpmMetricsGet_t / c_nvmlGpmSupport_t / c_nvmlUtilization_t with the same field
names; tests/test_pynvml_fake.py checks every name here against the installed pynvml. Instead of calling
libnvidia-ml.so.1, the functions answer from FAKE, which tests configure. A test puts this
module in sys.modules["pynvml"].
"""

import string
import sys
from ctypes import POINTER, Structure, addressof, c_char, c_char_p, c_double, c_uint, c_ulonglong, pointer
from dataclasses import dataclass, field
from typing import ClassVar

_nvmlReturn_t = c_uint
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999

NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2

NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1

NVML_GPM_METRIC_GRAPHICS_UTIL = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_INTEGER_UTIL = 4
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6
NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7
NVML_GPM_METRIC_DMMA_TENSOR_UTIL = 8
NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRIC_FP64_UTIL = 11
NVML_GPM_METRIC_FP32_UTIL = 12
NVML_GPM_METRIC_FP16_UTIL = 13
NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60
NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61
NVML_GPM_METRIC_MAX = 477

NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_SUPPORT_VERSION = 1

NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96
nvmlGpuInstanceProfileInfo_v2 = 0x02000098


class NVMLError(Exception):
    _valClassMapping: ClassVar[dict] = {}
    _errcode_to_string: ClassVar[dict] = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    def __new__(typ, value):
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self):
        return NVMLError._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other):
        return self.value == other.value


def nvmlExceptionClass(nvmlErrorCode):
    if nvmlErrorCode not in NVMLError._valClassMapping:
        raise ValueError(f"nvmlErrorCode {nvmlErrorCode} is not valid")
    return NVMLError._valClassMapping[nvmlErrorCode]


def _extractNVMLErrorsAsClasses():
    """NVML_ERROR_GPU_IS_LOST -> NVMLError_GpuIsLost, as in nvidia-ml-py."""
    this_module = sys.modules[__name__]
    for err_name in [x for x in dir(this_module) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        err_val = getattr(this_module, err_name)

        def gen_new(val):
            def new(typ, *args):
                return NVMLError.__new__(typ, val)

            return new

        new_error_class = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        new_error_class.__module__ = __name__
        setattr(this_module, class_name, new_error_class)
        NVMLError._valClassMapping[err_val] = new_error_class


_extractNVMLErrorsAsClasses()


def _nvmlCheckReturn(ret):
    if ret != NVML_SUCCESS:
        raise NVMLError(ret)
    return ret


class c_nvmlUtilization_t(Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class struct_c_nvmlGpmSample_t(Structure):
    """Opaque in NVML; the fake keeps its snapshot id inside."""

    _fields_ = [("_fake_id", c_uint)]


c_nvmlGpmSample_t = POINTER(struct_c_nvmlGpmSample_t)


class c_metricInfo_t(Structure):
    _fields_ = [("shortName", c_char_p), ("longName", c_char_p), ("unit", c_char_p)]


class c_nvmlGpmMetric_t(Structure):
    _fields_ = [
        ("metricId", c_uint),
        ("nvmlReturn", _nvmlReturn_t),
        ("value", c_double),
        ("metricInfo", c_metricInfo_t),
    ]


class c_nvmlGpmMetricsGet_t(Structure):
    _fields_ = [
        ("version", c_uint),
        ("numMetrics", c_uint),
        ("sample1", c_nvmlGpmSample_t),
        ("sample2", c_nvmlGpmSample_t),
        ("metrics", c_nvmlGpmMetric_t * NVML_GPM_METRIC_MAX),
    ]


class c_nvmlGpmSupport_t(Structure):
    _fields_ = [("version", c_uint), ("isSupportedDevice", c_uint)]


class struct_c_nvmlDevice_t(Structure):
    pass  # opaque handle, as in nvidia-ml-py (the fake's handles are _Handle objects)


c_nvmlDevice_t = POINTER(struct_c_nvmlDevice_t)


class c_nvmlGpuInstancePlacement_t(Structure):
    _fields_ = [("start", c_uint), ("size", c_uint)]


class c_nvmlGpuInstanceInfo_t(Structure):
    _fields_ = [
        ("device", c_nvmlDevice_t),
        ("id", c_uint),
        ("profileId", c_uint),
        ("placement", c_nvmlGpuInstancePlacement_t),
    ]


class c_nvmlGpuInstanceProfileInfo_v2_t(Structure):
    _fields_ = [
        ("version", c_uint),
        ("id", c_uint),
        ("isP2pSupported", c_uint),
        ("sliceCount", c_uint),
        ("instanceCount", c_uint),
        ("multiprocessorCount", c_uint),
        ("copyEngineCount", c_uint),
        ("decoderCount", c_uint),
        ("encoderCount", c_uint),
        ("jpegCount", c_uint),
        ("ofaCount", c_uint),
        ("memorySizeMB", c_ulonglong),
        ("name", c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE),
    ]

    def __init__(self):
        super().__init__(version=nvmlGpuInstanceProfileInfo_v2)


# -- the simulated driver -------------------------------------------------------------------


@dataclass
class FakeGpuInstanceProfile:
    """What nvmlDeviceGetGpuInstanceProfileInfoById answers for a GPU instance's profile."""

    profile_id: int
    name: str
    """As NVML names it, e.g. "MIG 3g.40gb"."""
    slices: int
    sms: int
    memory_mb: int


@dataclass
class FakeMigInstance:
    gpu_instance_id: int
    metrics: dict[int, float] = field(default_factory=dict)
    profile: FakeGpuInstanceProfile | None = None
    """None: nvmlDeviceGetGpuInstanceById answers NVML_ERROR_NO_PERMISSION (the fake's default)."""


@dataclass
class FakeDevice:
    name: str
    uuid: str
    gpm_supported: bool = True
    sm_clock_mhz: int = 1980
    gpu_util_percent: int = 0
    clocks_event_reasons: int | None = None
    """nvmlClocksEventReason* bits; None: NVML_ERROR_NOT_SUPPORTED (the fake's default)."""
    power_usage_mw: int | None = None
    """nvmlDeviceGetPowerUsage, milliwatts; None: not supported."""
    power_limit_mw: int | None = None
    """nvmlDeviceGetPowerManagementLimit, milliwatts; None: not supported."""
    metrics: dict[int, float] = field(default_factory=dict)
    """GPM metric id -> value in NVML's unit (percent 0..100, MiB/s) over the last interval."""
    lost: bool = False
    mig_instances: list[FakeMigInstance] = field(default_factory=list)


@dataclass
class _Handle:
    index: int
    gpu_instance_id: int | None = None


@dataclass
class FakeNvml:
    library_present: bool = True
    devices: list[FakeDevice] = field(default_factory=list)
    initialized: int = 0
    sequence: int = 0
    snapshots: dict[int, tuple[int, int, int | None, dict[int, float]]] = field(default_factory=dict)
    """sample id -> (sequence, device index, GPU instance or None, metrics at that time)."""
    samples_taken: list[tuple[int, int | None]] = field(default_factory=list)
    freed: int = 0


FAKE = FakeNvml()


def reset():
    global FAKE
    FAKE = FakeNvml()
    return FAKE


def _device(handle):
    if not FAKE.initialized:
        _nvmlCheckReturn(NVML_ERROR_UNINITIALIZED)
    device = FAKE.devices[handle.index]
    if device.lost:
        _nvmlCheckReturn(NVML_ERROR_GPU_IS_LOST)
    return device


# -- functions --------------------------------------------------------------------------------


def nvmlInit():
    if not FAKE.library_present:
        _nvmlCheckReturn(NVML_ERROR_LIBRARY_NOT_FOUND)
    FAKE.initialized += 1


def nvmlShutdown():
    if not FAKE.initialized:
        _nvmlCheckReturn(NVML_ERROR_UNINITIALIZED)
    FAKE.initialized -= 1


def nvmlDeviceGetCount():
    if not FAKE.initialized:
        _nvmlCheckReturn(NVML_ERROR_UNINITIALIZED)
    return len(FAKE.devices)


def nvmlDeviceGetHandleByIndex(index):
    if not FAKE.initialized:
        _nvmlCheckReturn(NVML_ERROR_UNINITIALIZED)
    if index >= len(FAKE.devices):
        _nvmlCheckReturn(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(index)


def nvmlDeviceGetName(handle):
    return _device(handle).name


def nvmlDeviceGetUUID(handle):
    return _device(handle).uuid


def nvmlDeviceGetClockInfo(handle, type):
    device = _device(handle)
    if type != NVML_CLOCK_SM:
        _nvmlCheckReturn(NVML_ERROR_NOT_SUPPORTED)
    return device.sm_clock_mhz


def _supported(value):
    if value is None:
        _nvmlCheckReturn(NVML_ERROR_NOT_SUPPORTED)
    return value


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    return _supported(_device(handle).clocks_event_reasons)


def nvmlDeviceGetPowerUsage(handle):
    return _supported(_device(handle).power_usage_mw)


def nvmlDeviceGetPowerManagementLimit(handle):
    return _supported(_device(handle).power_limit_mw)


def nvmlDeviceGetUtilizationRates(handle):
    device = _device(handle)
    if device.mig_instances:
        _nvmlCheckReturn(NVML_ERROR_NOT_SUPPORTED)  # as NVML does with MIG enabled
    util = c_nvmlUtilization_t()
    util.gpu = device.gpu_util_percent
    return util


def nvmlDeviceGetMigMode(device):
    dev = _device(device)
    mode = NVML_DEVICE_MIG_ENABLE if dev.mig_instances else NVML_DEVICE_MIG_DISABLE
    return [mode, mode]


def nvmlDeviceGetMaxMigDeviceCount(device):
    dev = _device(device)
    return 7 if dev.mig_instances else 0


def nvmlDeviceGetMigDeviceHandleByIndex(device, index):
    dev = _device(device)
    if index >= len(dev.mig_instances):
        _nvmlCheckReturn(NVML_ERROR_NOT_FOUND)
    return _Handle(device.index, dev.mig_instances[index].gpu_instance_id)


def nvmlDeviceGetGpuInstanceId(device):
    if device.gpu_instance_id is None:
        _nvmlCheckReturn(NVML_ERROR_INVALID_ARGUMENT)
    return device.gpu_instance_id


def nvmlGpmQueryDeviceSupport(device):
    dev = _device(device)
    support = c_nvmlGpmSupport_t()
    support.version = NVML_GPM_SUPPORT_VERSION
    support.isSupportedDevice = 1 if dev.gpm_supported else 0
    return support


def nvmlGpmSampleAlloc():
    return pointer(struct_c_nvmlGpmSample_t())


def nvmlGpmSampleFree(gpmSample):
    FAKE.snapshots.pop(addressof(gpmSample.contents), None)
    FAKE.freed += 1


def _take(device, gpu_instance_id, gpmSample):
    dev = _device(device)
    if not dev.gpm_supported:
        _nvmlCheckReturn(NVML_ERROR_NOT_SUPPORTED)
    if gpu_instance_id is None:
        metrics = dict(dev.metrics)
    else:
        instance = next((m for m in dev.mig_instances if m.gpu_instance_id == gpu_instance_id), None)
        if instance is None:
            _nvmlCheckReturn(NVML_ERROR_NOT_FOUND)
        metrics = dict(instance.metrics)
    FAKE.sequence += 1
    FAKE.snapshots[addressof(gpmSample.contents)] = (FAKE.sequence, device.index, gpu_instance_id, metrics)
    FAKE.samples_taken.append((device.index, gpu_instance_id))
    return gpmSample


def nvmlGpmSampleGet(device, gpmSample):
    return _take(device, None, gpmSample)


def nvmlGpmMigSampleGet(device, gpuInstanceId, gpmSample):
    return _take(device, gpuInstanceId, gpmSample)


def nvmlGpmMetricsGet(metricsGet):
    if metricsGet.version != NVML_GPM_METRICS_GET_VERSION:
        _nvmlCheckReturn(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    first = FAKE.snapshots.get(addressof(metricsGet.sample1.contents))
    second = FAKE.snapshots.get(addressof(metricsGet.sample2.contents))
    # NVML computes rates from two samples of the same device, the second one newer.
    if first is None or second is None or second[0] <= first[0] or first[1:3] != second[1:3]:
        _nvmlCheckReturn(NVML_ERROR_INVALID_ARGUMENT)
    values = second[3]
    for index in range(metricsGet.numMetrics):
        metric = metricsGet.metrics[index]
        if metric.metricId in values:
            metric.value = values[metric.metricId]
            metric.nvmlReturn = NVML_SUCCESS
        else:
            metric.value = 0.0
            metric.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
    return metricsGet


def _mig_instance(device, gpu_instance_id):
    dev = _device(device)
    instance = next((m for m in dev.mig_instances if m.gpu_instance_id == gpu_instance_id), None)
    if instance is None:
        _nvmlCheckReturn(NVML_ERROR_NOT_FOUND)
    return instance


def nvmlDeviceGetGpuInstanceById(device, gpuInstanceId):
    if _mig_instance(device, gpuInstanceId).profile is None:
        _nvmlCheckReturn(NVML_ERROR_NO_PERMISSION)
    return _Handle(device.index, gpuInstanceId)


def nvmlGpuInstanceGetInfo(gpuInstance):
    instance = _mig_instance(gpuInstance, gpuInstance.gpu_instance_id)
    info = c_nvmlGpuInstanceInfo_t()
    info.id = instance.gpu_instance_id
    info.profileId = instance.profile.profile_id
    return info


def nvmlDeviceGetGpuInstanceProfileInfoById(device, profileId):
    dev = _device(device)
    profile = next(
        (m.profile for m in dev.mig_instances if m.profile is not None and m.profile.profile_id == profileId),
        None,
    )
    if profile is None:
        _nvmlCheckReturn(NVML_ERROR_INVALID_ARGUMENT)
    info = c_nvmlGpuInstanceProfileInfo_v2_t()
    info.id = profile.profile_id
    info.sliceCount = profile.slices
    info.multiprocessorCount = profile.sms
    info.memorySizeMB = profile.memory_mb
    info.name = profile.name.encode()
    return info
