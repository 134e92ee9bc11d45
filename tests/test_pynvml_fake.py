"""The pynvml fake says what the real nvidia-ml-py says: every constant, error class, struct and
function it defines exists in the installed `pynvml` with the same value, layout or parameters.

nvidia-ml-py is a runtime dependency and imports without a GPU (it loads libnvidia-ml only in
nvmlInit), so this runs everywhere the suite does. A fake that drifted from the library would let
the NVML source pass its tests against numbers no driver returns.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

import pytest

FAKE_PATH = Path(__file__).parent / "fakes" / "pynvml_fake" / "pynvml.py"

OPAQUE_STRUCTS = {"struct_c_nvmlGpmSample_t", "struct_c_nvmlDevice_t"}
"""Opaque in NVML (nvidia-ml-py declares no fields); the fake keeps its snapshot id inside the
sample, and its device handles are plain objects."""


@pytest.fixture(scope="module")
def fake() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pynvml_fake_under_test", FAKE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the fake's error-class generator looks itself up here
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


@pytest.fixture
def real(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)  # never the fake another test put there
    module = importlib.import_module("pynvml")
    assert "fakes" not in Path(module.__file__ or "").parts
    return module


def test_every_constant_of_the_fake_has_the_real_value(fake: ModuleType, real: ModuleType) -> None:
    constants = {
        name: value
        for name, value in vars(fake).items()
        if name.startswith("NVML_") and isinstance(value, int)
    }
    assert {"NVML_ERROR_GPU_IS_LOST", "NVML_GPM_METRIC_DRAM_BW_UTIL", "NVML_CLOCK_SM"} <= set(constants)
    differ = {
        name: (value, getattr(real, name, "missing"))
        for name, value in constants.items()
        if getattr(real, name, None) != value
    }
    assert differ == {}, "fake value, real value"
    assert fake._nvmlReturn_t is real._nvmlReturn_t


def test_error_classes_and_messages_match(fake: ModuleType, real: ModuleType) -> None:
    classes = {name for name in vars(fake) if name.startswith("NVMLError_")}
    assert "NVMLError_GpuIsLost" in classes
    for name in sorted(classes):
        fake_code = getattr(fake, name)().value
        assert getattr(real, name)().value == fake_code, name
    for code, message in fake.NVMLError._errcode_to_string.items():
        assert str(real.NVMLError(code)) == message == str(fake.NVMLError(code))


def test_structs_have_the_real_field_layout(fake: ModuleType, real: ModuleType) -> None:
    structs = {
        name: value
        for name, value in vars(fake).items()
        if isinstance(value, type)
        and issubclass(value, ctypes.Structure)
        and value.__module__ == fake.__name__  # not ctypes' own Structure, imported by name
        and name not in OPAQUE_STRUCTS
    }
    assert {"c_nvmlGpmMetricsGet_t", "c_nvmlGpuInstanceInfo_t", "c_nvmlGpuInstanceProfileInfo_v2_t"} <= set(
        structs
    )
    for name, struct in structs.items():
        real_struct = getattr(real, name)
        # ctypes names derived types by what they hold ("LP_struct_c_nvmlGpmSample_t",
        # "c_nvmlGpmMetric_t_Array_477"), so equal names across the two modules mean equal layouts
        layout = [(field[0], field[1].__name__) for field in struct._fields_]
        assert layout == [(field[0], field[1].__name__) for field in real_struct._fields_], name
        assert ctypes.sizeof(struct) == ctypes.sizeof(real_struct), name


def test_functions_take_the_real_parameters(fake: ModuleType, real: ModuleType) -> None:
    functions = {
        name: f for name, f in vars(fake).items() if inspect.isfunction(f) and name.startswith("nvml")
    }
    assert {
        "nvmlGpmMetricsGet",
        "nvmlDeviceGetGpuInstanceById",
        "nvmlGpuInstanceGetInfo",
        "nvmlDeviceGetGpuInstanceProfileInfoById",
    } <= set(functions)
    for name, function in functions.items():
        fake_params = list(inspect.signature(function).parameters)
        assert list(inspect.signature(getattr(real, name)).parameters) == fake_params, name


def test_the_gpu_instance_profile_struct_carries_the_real_version(fake: ModuleType, real: ModuleType) -> None:
    """The v2 profile info is versioned: NVML refuses a struct whose version it does not know."""
    assert fake.nvmlGpuInstanceProfileInfo_v2 == real.nvmlGpuInstanceProfileInfo_v2
    assert (
        fake.c_nvmlGpuInstanceProfileInfo_v2_t().version == real.c_nvmlGpuInstanceProfileInfo_v2_t().version
    )
