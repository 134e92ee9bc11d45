"""Pod attribution: which Kubernetes container holds each GPU, from the kubelet's PodResources API.

Re-exports only; see kubelet.py (the cached attributor) and devices.py (device-id shapes).
Generated stubs: podresources_pb2.py, podresources_pb2.pyi, podresources_pb2_grpc.py
(regenerate with regenerate.sh).
"""

from exporter.attribution.devices import DeviceKey, MigResolver, is_gpu_resource, parse_device_id
from exporter.attribution.kubelet import DEFAULT_SOCKET_PATH, PodAttributor

__all__ = [
    "DEFAULT_SOCKET_PATH",
    "DeviceKey",
    "MigResolver",
    "PodAttributor",
    "is_gpu_resource",
    "parse_device_id",
]
