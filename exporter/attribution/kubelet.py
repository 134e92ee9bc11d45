"""Attributes GPUs to Kubernetes pods from the kubelet's PodResources API, off the scrape path.

A background thread calls ``v1.PodResourcesLister/List`` on the kubelet's unix socket every
``refresh_seconds`` and swaps in an immutable map (GPU UUID, GPU instance) -> holders; a sample
or a scrape only reads that map. A failed refresh reopens the channel next time, the last good
map is kept for ``keep_last_seconds``, and a GPU several containers share is credited to none
(``lookup`` returns None, ``holders`` lists them): docs/deployment.md, "Pod attribution".
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import grpc

from exporter.attribution import podresources_pb2, podresources_pb2_grpc
from exporter.attribution.devices import DeviceKey, MigResolver, is_gpu_resource, parse_device_id
from exporter.attribution.refresh import RefreshThread
from exporter.sample import Attribution

log = logging.getLogger(__name__)

DEFAULT_SOCKET_PATH = "/var/lib/kubelet/pod-resources/kubelet.sock"
MAX_RECEIVE_MESSAGE_BYTES = 16 * 1024 * 1024
"""A List answer on a dense node can pass gRPC's 4 MiB default; dcgm-exporter raised it too."""

# The generated gRPC stub is untyped; binding it to a typed name keeps mypy strict here.
_new_stub: Callable[[grpc.Channel], Any] = podresources_pb2_grpc.PodResourcesListerStub

_EMPTY: Mapping[DeviceKey, tuple[Attribution, ...]] = MappingProxyType({})


@dataclass(frozen=True)
class _Snapshot:
    """One consistent view; replaced whole, never mutated, so readers need no lock."""

    holders: Mapping[DeviceKey, tuple[Attribution, ...]] = field(default_factory=lambda: _EMPTY)
    unresolved: frozenset[str] = frozenset()


def build_holders(
    response: podresources_pb2.ListPodResourcesResponse, resolver: MigResolver | None
) -> tuple[Mapping[DeviceKey, tuple[Attribution, ...]], frozenset[str]]:
    """Index a List answer by GPU: every container holding each (uuid, gpu instance).

    Returns the map and the device ids that could not be resolved (for diagnostics). A
    container holding several replicas of one GPU is listed once.
    """
    collected: dict[DeviceKey, list[Attribution]] = {}
    unresolved: set[str] = set()
    for pod in response.pod_resources:
        for container in pod.containers:
            attribution = Attribution(namespace=pod.namespace, pod=pod.name, container=container.name)
            for devices in container.devices:
                if not is_gpu_resource(devices.resource_name):
                    continue
                for device_id in devices.device_ids:
                    key = parse_device_id(device_id, resolver)
                    if key is None:
                        unresolved.add(device_id)
                        continue
                    holders = collected.setdefault(key, [])
                    if attribution not in holders:
                        holders.append(attribution)
    frozen = {key: tuple(holders) for key, holders in collected.items()}
    return MappingProxyType(frozen), frozenset(unresolved)


class PodAttributor:
    """Keeps a cached GPU -> pod map fresh from the kubelet; lookups never touch gRPC."""

    def __init__(
        self,
        socket_path: str,
        refresh_seconds: float = 10.0,
        timeout_seconds: float = 2.0,
        mig_resolver: Callable[[str], tuple[str, int | None] | None] | None = None,
        *,
        keep_last_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if refresh_seconds <= 0:
            raise ValueError(f"refresh_seconds must be > 0, got {refresh_seconds}")
        if timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be > 0, got {timeout_seconds}")
        self.socket_path = socket_path
        self.refresh_seconds = refresh_seconds
        self.timeout_seconds = timeout_seconds
        self.keep_last_seconds = 2 * refresh_seconds if keep_last_seconds is None else keep_last_seconds
        self._resolver = mig_resolver
        self._clock = clock
        self._snapshot = _Snapshot()
        self._last_success: float | None = None
        self._channel: grpc.Channel | None = None
        self._channel_lock = threading.Lock()
        self._refresher = RefreshThread("ridgeline-pod-attribution", refresh_seconds, self.refresh_once)
        self.healthy: bool = False
        self.last_error: str | None = None

    # -- read side (scrape path) -------------------------------------------------------------

    def lookup(self, uuid: str, gpu_instance: int | None) -> Attribution | None:
        """The one container holding this GPU (or MIG GPU instance), else None.

        None also when several containers share it (time-slicing): counters cannot be split.
        """
        holders = self._snapshot.holders.get((uuid.strip().lower(), gpu_instance))
        if holders is not None and len(holders) == 1:
            return holders[0]
        return None

    def holders(self, uuid: str, gpu_instance: int | None) -> tuple[Attribution, ...]:
        """Every container holding this GPU or GPU instance (several when shared)."""
        return self._snapshot.holders.get((uuid.strip().lower(), gpu_instance), ())

    @property
    def unresolved_device_ids(self) -> frozenset[str]:
        """GPU device ids from the last good refresh that no parser or resolver could place."""
        return self._snapshot.unresolved

    # -- refresh side ------------------------------------------------------------------------

    def refresh_once(self) -> None:
        """Fetch the kubelet's List once and swap in the new map; records, never raises."""
        try:
            response = self._list()
            holders, unresolved = build_holders(response, self._resolver)
        except Exception as error:  # one bad refresh must never take the sampler down
            self._record_failure(_describe(error, self.socket_path))
            return
        self._snapshot = _Snapshot(holders=holders, unresolved=unresolved)
        self._last_success = self._clock()
        if not self.healthy:
            log.info("kubelet pod-resources at %s: %d GPU assignment(s)", self.socket_path, len(holders))
        self.healthy = True
        self.last_error = None

    def start(self) -> None:
        """Refresh once now (so the first samples are attributed), then on a daemon thread."""
        self._refresher.start()

    def stop(self) -> None:
        """Stop the refresh thread and close the channel; the cached map stays readable."""
        self._refresher.stop(join_seconds=self.timeout_seconds + 1.0)
        self._close_channel()

    def _list(self) -> podresources_pb2.ListPodResourcesResponse:
        try:
            mode = os.stat(self.socket_path).st_mode
        except FileNotFoundError:
            raise _SocketMissing(self.socket_path) from None
        if not stat.S_ISSOCK(mode):
            raise _SocketMissing(self.socket_path, "exists but is not a unix socket")
        with self._channel_lock:
            if self._channel is None:
                self._channel = grpc.insecure_channel(
                    f"unix://{self.socket_path}",
                    options=[("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES)],
                )
            channel = self._channel
        stub = _new_stub(channel)
        response: podresources_pb2.ListPodResourcesResponse = stub.List(
            podresources_pb2.ListPodResourcesRequest(), timeout=self.timeout_seconds
        )
        return response

    def _record_failure(self, message: str) -> None:
        # A fresh channel next time: the kubelet recreates its socket file on restart.
        self._close_channel()
        if self.healthy or self.last_error != message:
            log.warning("kubelet pod-resources refresh failed: %s", message)
        self.healthy = False
        self.last_error = message
        now = self._clock()
        expired = self._last_success is None or now - self._last_success >= self.keep_last_seconds
        if expired and self._snapshot.holders:
            log.warning("dropping pod attribution: no good kubelet answer for %.0f s", self.keep_last_seconds)
            self._snapshot = _Snapshot()

    def _close_channel(self) -> None:
        with self._channel_lock:
            channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()


class _SocketMissing(Exception):
    def __init__(self, path: str, why: str = "does not exist") -> None:
        super().__init__(f"kubelet socket {path} {why} (is /var/lib/kubelet/pod-resources mounted?)")


def _describe(error: Exception, socket_path: str) -> str:
    """One line an operator can act on, naming the socket."""
    if isinstance(error, grpc.RpcError):
        code = error.code() if hasattr(error, "code") else None
        details = error.details() if hasattr(error, "details") else str(error)
        name = code.name if code is not None else "UNKNOWN"
        return f"kubelet List on {socket_path} failed: {name}: {details}"
    if isinstance(error, _SocketMissing):
        return str(error)
    return f"kubelet List on {socket_path} failed: {type(error).__name__}: {error}"
