"""NVML source: GPU Performance Monitoring (GPM) counters through nvidia-ml-py, Hopper and newer.

GPM gives the same activities DCGM's profiling fields do, straight from the driver, without a
DCGM host engine. NVML computes each metric from two samples: the source takes one at open()
(or at the previous read) and one at each read, so every batch covers exactly one sampling
interval. Units follow nvml.h: utilisations are percent 0..100 (read as ratios / 100) and
bandwidths MiB/s (read as bytes/s * 1048576).
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from exporter import fields
from exporter.sample import Entity, Sample
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable

log = logging.getLogger(__name__)

MIB = 1_048_576

GPM_METRICS: tuple[tuple[str, int, float], ...] = (
    ("NVML_GPM_METRIC_GRAPHICS_UTIL", fields.GR_ENGINE_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_SM_UTIL", fields.SM_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", fields.SM_OCCUPANCY, 0.01),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", fields.PIPE_TENSOR_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", fields.DRAM_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_FP64_UTIL", fields.PIPE_FP64_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_FP32_UTIL", fields.PIPE_FP32_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_FP16_UTIL", fields.PIPE_FP16_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", fields.PCIE_TX_BYTES, MIB),
    ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", fields.PCIE_RX_BYTES, MIB),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", fields.NVLINK_TX_BYTES, MIB),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", fields.NVLINK_RX_BYTES, MIB),
    ("NVML_GPM_METRIC_IMMA_TENSOR_UTIL", fields.PIPE_TENSOR_IMMA_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_HMMA_TENSOR_UTIL", fields.PIPE_TENSOR_HMMA_ACTIVE, 0.01),
    ("NVML_GPM_METRIC_DFMA_TENSOR_UTIL", fields.PIPE_TENSOR_DFMA_ACTIVE, 0.01),
)
"""pynvml constant name -> DCGM field id and the factor into DCGM's unit.

Units from nvml.h (as copied into nvidia-ml-py's pynvml.py): "Percentage of ... 0.0 - 100.0"
for the utilisations, "PCIe traffic from this GPU in MiB/sec" and "NvLink ... bandwidth for
all links in MiB/sec" for the rates. DCGM's 1009-1012 are bytes per second.
"""


@dataclass
class _Target:
    """One GPM sampling point: a whole GPU, or one GPU instance of a MIG GPU."""

    handle: Any
    entity: Entity
    previous: Any
    current: Any


class NvmlSource:
    """Reads NVML GPM once per interval (the sampler paces it)."""

    name = "nvml"
    paced = False
    records_skipped = 0

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._nvml: ModuleType | None = None
        self._targets: list[_Target] = []
        self._metric_ids: list[tuple[int, int, float]] = []
        self.dropped: dict[int, str] = {}
        """GPU index -> why it left the batch (fell off the bus, ...)."""

    def open(self) -> None:
        nvml = self._load()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise SourceUnavailable(
                "nvml_not_found",
                f"NVML could not start ({exc}): is the NVIDIA driver installed and "
                "libnvidia-ml.so.1 visible to this process?",
            ) from exc
        self._nvml = nvml
        try:
            self._open_targets(nvml)
        except nvml.NVMLError as exc:
            self.close()
            raise SourceUnavailable("nvml_error", f"NVML failed while listing the GPUs: {exc}") from exc
        except BaseException:
            self.close()
            raise

    def read(self) -> list[Sample]:
        nvml = self._nvml
        if nvml is None:
            raise SourceError("nvml_closed", "the NVML source is not open")
        now = time.time()
        samples: list[Sample] = []
        for target in list(self._targets):
            if target not in self._targets:
                continue  # its GPU fell off the bus earlier in this batch
            try:
                values = self._gpm_values(nvml, target)
                if target.entity.gpu_instance is None:
                    values.update(self._device_values(nvml, target.handle))
            except nvml.NVMLError as exc:
                if exc.value == nvml.NVML_ERROR_GPU_IS_LOST:
                    self._drop(target, f"fell off the bus ({exc})")
                    continue
                raise SourceError(
                    "nvml_error", f"NVML failed on GPU {target.entity.gpu} ({target.entity.model}): {exc}"
                ) from exc
            samples.append(Sample(timestamp=now, entity=target.entity, values=values))
        if not self._targets:
            lost = "; ".join(f"GPU {g}: {why}" for g, why in sorted(self.dropped.items()))
            raise SourceError("gpu_lost", f"no GPU left to sample ({lost})")
        return samples

    def close(self) -> None:
        nvml, self._nvml = self._nvml, None
        if nvml is None:
            return
        for target in self._targets:
            for sample in (target.previous, target.current):
                try:
                    nvml.nvmlGpmSampleFree(sample)
                except nvml.NVMLError as exc:
                    log.debug("freeing a GPM sample: %s", exc)
        self._targets = []
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError as exc:
            log.debug("nvmlShutdown: %s", exc)

    # -- setup ----------------------------------------------------------------------------

    def _load(self) -> ModuleType:
        try:
            return importlib.import_module("pynvml")
        except ImportError as exc:
            raise SourceUnavailable(
                "nvml_not_found", f"nvidia-ml-py (import pynvml) is not installed: {exc}"
            ) from exc

    def _open_targets(self, nvml: ModuleType) -> None:
        self._metric_ids = _gpm_metric_ids(nvml)
        unsupported: list[str] = []
        count = int(nvml.nvmlDeviceGetCount())
        for index in range(count):
            if self._options.gpus is not None and index not in self._options.gpus:
                continue
            try:
                targets = self._gpu_targets(nvml, index, unsupported)
            except nvml.NVMLError as exc:
                if exc.value != nvml.NVML_ERROR_GPU_IS_LOST:
                    raise SourceUnavailable("nvml_error", f"NVML failed on GPU {index}: {exc}") from exc
                # Still counted by nvmlDeviceGetCount after it fell off the bus (a reopen after
                # "gpu_lost" meets it again): sample the others.
                self.dropped[index] = f"fell off the bus ({exc})"
                log.error("NVML: GPU %d fell off the bus (%s); it is not sampled", index, exc)
                continue
            self._targets.extend(targets)
        if unsupported:
            log.warning("NVML GPM is not supported on %s; those GPUs are not sampled", ", ".join(unsupported))
        self._check_any_target(unsupported)

    def _gpu_targets(self, nvml: ModuleType, index: int, unsupported: list[str]) -> list[_Target]:
        """GPU `index`'s targets: the whole GPU, then each of its MIG GPU instances; none (and the
        GPU named in `unsupported`) where GPM does not support it."""
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        entity = Entity(
            gpu=index,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            model=_text(nvml.nvmlDeviceGetName(handle)),
        )
        if not nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
            unsupported.append(f"GPU {index} ({entity.model})")
            return []
        targets = [self._target(nvml, handle, entity)]
        for gi in self._gpu_instances(nvml, handle):
            profile, sms = self._instance_profile(nvml, handle, gi)
            mig_entity = Entity(
                gpu=index,
                uuid=entity.uuid,
                model=entity.model,
                gpu_instance=gi,
                profile=profile,
                sm_count=sms,
            )
            targets.append(self._target(nvml, handle, mig_entity))
        return targets

    def _check_any_target(self, unsupported: list[str]) -> None:
        """Refuse to open with nothing to sample, saying whether GPUs were lost or unsupported."""
        if not self._targets and self.dropped and not unsupported:
            lost = "; ".join(f"GPU {g}: {why}" for g, why in sorted(self.dropped.items()))
            raise SourceUnavailable("gpu_lost", f"no GPU left to sample ({lost})")
        if not self._targets:
            which = ", ".join(unsupported) if unsupported else "no NVIDIA GPU found"
            raise SourceUnavailable(
                "gpm_unsupported",
                f"NVML GPM needs a Hopper or newer data-center GPU ({which}). For older GPUs use "
                "--source dcgm (DCGM profiling counters) or --source scrape against a dcgm-exporter.",
            )

    def _gpu_instances(self, nvml: ModuleType, handle: Any) -> list[int]:
        """GPU-instance ids of a MIG-enabled GPU; empty when MIG is off or unsupported."""
        try:
            current_mode = nvml.nvmlDeviceGetMigMode(handle)[0]
        except nvml.NVMLError:
            return []
        if current_mode != nvml.NVML_DEVICE_MIG_ENABLE:
            return []
        instances: list[int] = []
        for index in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
            try:
                mig_handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
            except nvml.NVMLError:
                continue  # NVML_ERROR_NOT_FOUND: an empty slot
            gi = int(nvml.nvmlDeviceGetGpuInstanceId(mig_handle))
            if gi not in instances:
                instances.append(gi)
        return instances

    def _instance_profile(self, nvml: ModuleType, handle: Any, gi: int) -> tuple[str | None, int | None]:
        """(profile name, SMs) of GPU instance `gi` from NVML's GPU instance profile info, which
        carries both: the name ("3g.40gb") gives the memory slices, multiprocessorCount the SMs
        GPM samples over (docs/model.md, "MIG roofs"). (None, None) where this nvidia-ml-py or
        driver lacks the calls or refuses them: the instance then has ratios and a regime but no
        roof, as without this."""
        try:
            instance = nvml.nvmlDeviceGetGpuInstanceById(handle, gi)
            info = nvml.nvmlGpuInstanceGetInfo(instance)
            profile = nvml.nvmlDeviceGetGpuInstanceProfileInfoById(handle, int(info.profileId))
        except AttributeError as exc:  # an nvidia-ml-py older than these calls
            log.info("NVML: no GPU instance profile info in this nvidia-ml-py (%s)", exc)
            return None, None
        except nvml.NVMLError as exc:
            if exc.value == nvml.NVML_ERROR_GPU_IS_LOST:
                raise
            log.info("NVML: GPU instance %d's profile is unknown (%s); it gets no roof", gi, exc)
            return None, None
        name = _text(profile.name).strip().removeprefix("MIG ").strip() or None
        sms = int(profile.multiprocessorCount)
        return name, sms if sms > 0 else None

    def _target(self, nvml: ModuleType, handle: Any, entity: Entity) -> _Target:
        """Allocate the sample pair and take the first sample, so the first read covers an interval."""
        target = _Target(handle, entity, nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc())
        self._take(nvml, target, target.previous)
        return target

    # -- sampling -------------------------------------------------------------------------

    def _take(self, nvml: ModuleType, target: _Target, sample: Any) -> None:
        if target.entity.gpu_instance is None:
            nvml.nvmlGpmSampleGet(target.handle, sample)
        else:
            nvml.nvmlGpmMigSampleGet(target.handle, target.entity.gpu_instance, sample)

    def _gpm_values(self, nvml: ModuleType, target: _Target) -> dict[int, float | None]:
        self._take(nvml, target, target.current)
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self._metric_ids)
        request.sample1 = target.previous
        request.sample2 = target.current
        for slot, (metric_id, _, _) in enumerate(self._metric_ids):
            request.metrics[slot].metricId = metric_id
        nvml.nvmlGpmMetricsGet(request)
        target.previous, target.current = target.current, target.previous
        values: dict[int, float | None] = {}
        for slot, (_, fid, factor) in enumerate(self._metric_ids):
            metric = request.metrics[slot]
            if int(metric.nvmlReturn) != nvml.NVML_SUCCESS:
                values[fid] = None
                continue
            values[fid] = fields.clean_value(fid, float(metric.value) * factor)
        return values

    def _device_values(self, nvml: ModuleType, handle: Any) -> dict[int, float | None]:
        """SM clock (MHz) and GPU utilisation (percent), None where NVML does not support them; the
        clocks-event reasons (field 112), power draw and limit (155, 160, W) where it does."""
        values: dict[int, float | None] = {}
        try:
            values[fields.SM_CLOCK] = fields.clean_value(
                fields.SM_CLOCK, nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
            )
        except nvml.NVMLError as exc:
            if exc.value == nvml.NVML_ERROR_GPU_IS_LOST:
                raise
            values[fields.SM_CLOCK] = None
        try:
            values[fields.GPU_UTIL] = fields.clean_value(
                fields.GPU_UTIL, nvml.nvmlDeviceGetUtilizationRates(handle).gpu
            )
        except nvml.NVMLError as exc:
            if exc.value == nvml.NVML_ERROR_GPU_IS_LOST:
                raise
            values[fields.GPU_UTIL] = None
        for fid, read, scale in (
            (fields.CLOCKS_EVENT_REASONS, nvml.nvmlDeviceGetCurrentClocksEventReasons, 1.0),
            (fields.POWER_USAGE, nvml.nvmlDeviceGetPowerUsage, 1e-3),  # NVML reports milliwatts
            (fields.POWER_MGMT_LIMIT, nvml.nvmlDeviceGetPowerManagementLimit, 1e-3),
        ):
            try:
                values[fid] = fields.clean_value(fid, read(handle) * scale)
            except nvml.NVMLError as exc:
                if exc.value == nvml.NVML_ERROR_GPU_IS_LOST:
                    raise
                # not supported on this GPU: left out, the clock-event verdict says what it lacks
        return values

    def _drop(self, target: _Target, reason: str) -> None:
        """A GPU that fell off the bus leaves the batch (with its MIG instances) until reopen."""
        gpu = target.entity.gpu
        if gpu not in self.dropped:
            log.error("NVML: GPU %d (%s) %s; it is no longer sampled", gpu, target.entity.model, reason)
            self.dropped[gpu] = reason
        for gone in [t for t in self._targets if t.entity.gpu == gpu]:
            self._targets.remove(gone)
            for sample in (gone.previous, gone.current):
                try:
                    nvml_free = self._nvml.nvmlGpmSampleFree if self._nvml is not None else None
                    if nvml_free is not None:
                        nvml_free(sample)
                except Exception as exc:  # the device is gone; freeing host memory may still fail
                    log.debug("freeing a GPM sample of a lost GPU: %s", exc)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _gpm_metric_ids(nvml: ModuleType) -> list[tuple[int, int, float]]:
    """(NVML GPM metric id, field, factor) of each GPM_METRICS entry; refused where this
    nvidia-ml-py has no GPM API."""
    missing = [name for name, _, _ in GPM_METRICS if not hasattr(nvml, name)]
    if missing or not hasattr(nvml, "nvmlGpmMetricsGet"):
        raise SourceUnavailable(
            "gpm_unsupported",
            f"this nvidia-ml-py has no GPM API ({', '.join(missing) or 'nvmlGpmMetricsGet'} "
            "missing); upgrade nvidia-ml-py, or use --source dcgm or --source scrape",
        )
    return [(int(getattr(nvml, name)), fid, factor) for name, fid, factor in GPM_METRICS]
