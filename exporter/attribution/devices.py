"""Turns device-plugin device ids from the kubelet into (GPU UUID, GPU instance id) keys.

The NVIDIA k8s-device-plugin hands the kubelet one id per schedulable device, and the kubelet's
PodResources API reports those ids back per container. Their shapes (NVIDIA/k8s-device-plugin,
internal/rm/devices.go; NVIDIA GPU Operator MIG docs):

- whole GPU (``nvidia.com/gpu``, default ``deviceIDStrategy: uuid``): the GPU UUID, ``GPU-<uuid>``;
- time-slicing / MPS replicas (``nvidia.com/gpu.shared``, or ``nvidia.com/gpu`` when
  ``renameByDefault`` is false): the id annotated with its replica, ``NewAnnotatedID`` =
  ``"%s::%d"``, e.g. ``GPU-<uuid>::3`` — the part before ``::`` is the GPU;
- MIG (``nvidia.com/mig-1g.10gb`` with the mixed strategy, ``nvidia.com/gpu`` with the single
  strategy): the MIG device UUID. Drivers before R470 printed it as
  ``MIG-GPU-<gpu uuid>/<gpu instance>/<compute instance>``, which names the GPU and the GPU
  instance directly; R470 and newer print an opaque ``MIG-<uuid>`` that only NVML/DCGM can map
  back to its parent GPU and GPU instance, so those go to a resolver the sampling source supplies.

Any other shape (``deviceIDStrategy: index`` gives ``"0"`` or ``"0:1"``) also goes to the
resolver; without one it stays unresolved rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

REPLICA_SEPARATOR = "::"
LEGACY_MIG_PREFIX = "MIG-GPU-"
MIG_PREFIX = "MIG-"
GPU_PREFIX = "GPU-"

DeviceKey = tuple[str, int | None]
"""(GPU UUID as NVML prints it, GPU-instance id for MIG or None for the whole GPU)."""

MigResolver = Callable[[str], "tuple[str, int | None] | None"]
"""Maps a device id the parser cannot read (e.g. ``MIG-<uuid>``) to a DeviceKey, or None."""


def is_gpu_resource(resource_name: str) -> bool:
    """True for the extended resources the NVIDIA device plugin advertises for GPUs.

    Covers ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` and every ``nvidia.com/mig-<profile>``
    (including ``.shared`` MIG replicas); other devices (NICs, FPGAs) are ignored.
    """
    return resource_name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or resource_name.startswith(
        MIG_RESOURCE_PREFIX
    )


def strip_replica(device_id: str) -> str:
    """Drop the time-slicing replica annotation: ``GPU-abc::2`` -> ``GPU-abc``."""
    head, _, _ = device_id.partition(REPLICA_SEPARATOR)
    return head


def normalise_uuid(uuid: str) -> str:
    """Case-fold a GPU UUID so kubelet ids and NVML/DCGM labels compare equal."""
    return uuid.strip().lower()


def parse_device_id(device_id: str, resolver: MigResolver | None = None) -> DeviceKey | None:
    """The (GPU UUID, GPU instance) a device id names, or None when it cannot be told.

    The returned UUID is normalised (see normalise_uuid). A resolver that raises is treated as
    not knowing the id: attribution is best effort and must never break a refresh.
    """
    bare = strip_replica(device_id.strip())
    if not bare:
        return None
    upper = bare.upper()
    if upper.startswith(LEGACY_MIG_PREFIX):
        legacy = _parse_legacy_mig(bare)
        if legacy is not None:
            return legacy
    elif upper.startswith(GPU_PREFIX):
        return (normalise_uuid(bare), None)
    if resolver is None:
        return None
    try:
        resolved = resolver(bare)
    except Exception:
        return None
    if resolved is None:
        return None
    uuid, gpu_instance = resolved
    return (normalise_uuid(uuid), gpu_instance)


def _parse_legacy_mig(device_id: str) -> DeviceKey | None:
    """``MIG-GPU-<uuid>/<gi>/<ci>`` -> (``GPU-<uuid>``, gi); None when malformed."""
    parts = device_id[len(MIG_PREFIX) :].split("/")
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        gpu_instance = int(parts[1])
        int(parts[2])
    except ValueError:
        return None
    if gpu_instance < 0:
        return None
    return (normalise_uuid(parts[0]), gpu_instance)
