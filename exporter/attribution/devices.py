"""Turns device-plugin device ids from the kubelet into (GPU UUID, GPU instance id) keys.

The shapes are the NVIDIA k8s-device-plugin's (docs/deployment.md, "Pod attribution", has the
table): ``GPU-<uuid>``, a replica ``GPU-<uuid>::<n>``, a pre-R470 ``MIG-GPU-<uuid>/<gi>/<ci>``.
Anything else (an R470+ ``MIG-<uuid>``, an index id) goes to the resolver the sampling source
supplies; without one it stays unresolved rather than guessed.
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
