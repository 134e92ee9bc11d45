"""Pod attribution against a real gRPC PodResourcesLister served on a unix socket."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.attribution import podresources_pb2 as pb
from exporter.attribution import podresources_pb2_grpc as pb_grpc
from exporter.attribution.devices import is_gpu_resource, parse_device_id
from exporter.attribution.kubelet import PodAttributor
from exporter.sample import Attribution

GPU_A = "GPU-8e5c3a1f-2b4d-4c6e-9f80-1a2b3c4d5e6f"
GPU_B = "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
GPU_C = "GPU-77aa88bb-99cc-4dd0-8ee1-ff2233445566"

# The generated servicer registration is untyped; a typed name keeps this file mypy-strict.
_register: Callable[[object, grpc.Server], None] = pb_grpc.add_PodResourcesListerServicer_to_server

# (namespace, pod, container, resource, device ids)
Assignment = Sequence[tuple[str, str, str, str, Sequence[str]]]


def _response(assignment: Assignment) -> pb.ListPodResourcesResponse:
    pods: dict[tuple[str, str], pb.PodResources] = {}
    for namespace, pod, container, resource, ids in assignment:
        message = pods.setdefault((namespace, pod), pb.PodResources(name=pod, namespace=namespace))
        message.containers.append(
            pb.ContainerResources(
                name=container,
                devices=[pb.ContainerDevices(resource_name=resource, device_ids=list(ids))],
                cpu_ids=[2, 3],
            )
        )
    return pb.ListPodResourcesResponse(pod_resources=list(pods.values()))


class FakeKubelet(pb_grpc.PodResourcesListerServicer):
    """The kubelet's PodResourcesLister, serving whatever assignment the test sets."""

    def __init__(self, assignment: Assignment) -> None:
        self.assignment = assignment
        self.calls = 0

    def List(self, request: pb.ListPodResourcesRequest, context: grpc.ServicerContext) -> object:
        self.calls += 1
        return _response(self.assignment)


class KubeletSocket:
    """Starts and stops real gRPC servers on one unix socket path, like a restarting kubelet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server: grpc.Server | None = None
        self.servicer: FakeKubelet | None = None

    def start(self, assignment: Assignment) -> FakeKubelet:
        servicer = FakeKubelet(assignment)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        _register(servicer, server)
        server.add_insecure_port(f"unix://{self.path}")
        server.start()
        self.server, self.servicer = server, servicer
        return servicer

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace=None).wait()
            self.server = None
        self.path.unlink(missing_ok=True)


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[KubeletSocket]:
    socket = KubeletSocket(tmp_path / "kubelet.sock")
    yield socket
    socket.stop()


def _attributor(kubelet: KubeletSocket, **kwargs: object) -> PodAttributor:
    return PodAttributor(str(kubelet.path), refresh_seconds=5.0, timeout_seconds=2.0, **kwargs)  # type: ignore[arg-type]


def test_whole_gpu_is_attributed_to_its_container(kubelet: KubeletSocket) -> None:
    kubelet.start(
        [
            ("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_A]),
            ("train", "bert-0", "trainer", "nvidia.com/gpu", [GPU_B]),
        ]
    )
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.healthy and attributor.last_error is None
    assert attributor.lookup(GPU_A, None) == Attribution("llm", "decode-7f9", "server")
    assert attributor.lookup(GPU_B, None) == Attribution("train", "bert-0", "trainer")
    assert attributor.lookup(GPU_C, None) is None
    # A whole GPU is not a MIG instance of itself.
    assert attributor.lookup(GPU_A, 0) is None


def test_lookup_ignores_uuid_case(kubelet: KubeletSocket) -> None:
    kubelet.start([("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_A.upper()])])
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.lookup(GPU_A, None) == Attribution("llm", "decode-7f9", "server")


def test_legacy_mig_uuid_names_gpu_and_instance(kubelet: KubeletSocket) -> None:
    bare = GPU_A.removeprefix("GPU-")
    kubelet.start(
        [
            ("llm", "small-0", "server", "nvidia.com/mig-1g.10gb", [f"MIG-GPU-{bare}/7/0"]),
            ("llm", "big-0", "server", "nvidia.com/mig-3g.40gb", [f"MIG-GPU-{bare}/2/0"]),
        ]
    )
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.lookup(GPU_A, 7) == Attribution("llm", "small-0", "server")
    assert attributor.lookup(GPU_A, 2) == Attribution("llm", "big-0", "server")
    assert attributor.lookup(GPU_A, None) is None
    assert attributor.lookup(GPU_A, 1) is None


def test_opaque_mig_uuid_is_resolved_by_callback(kubelet: KubeletSocket) -> None:
    mig_small = "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"
    mig_unknown = "MIG-11111111-2222-3333-4444-555555555555"
    kubelet.start(
        [
            ("llm", "small-0", "server", "nvidia.com/mig-1g.10gb", [mig_small]),
            ("llm", "lost-0", "server", "nvidia.com/mig-1g.10gb", [mig_unknown]),
        ]
    )
    known = {mig_small: (GPU_B, 9)}
    attributor = _attributor(kubelet, mig_resolver=known.get)
    attributor.refresh_once()
    assert attributor.lookup(GPU_B, 9) == Attribution("llm", "small-0", "server")
    assert attributor.unresolved_device_ids == frozenset({mig_unknown})


def test_opaque_mig_uuid_without_resolver_stays_unattributed(kubelet: KubeletSocket) -> None:
    mig = "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"
    kubelet.start([("llm", "small-0", "server", "nvidia.com/mig-1g.10gb", [mig])])
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.healthy
    assert attributor.unresolved_device_ids == frozenset({mig})


def test_resolver_that_raises_does_not_break_refresh(kubelet: KubeletSocket) -> None:
    def broken(device_id: str) -> tuple[str, int | None] | None:
        raise RuntimeError("NVML went away")

    kubelet.start(
        [
            ("llm", "small-0", "server", "nvidia.com/mig-1g.10gb", ["MIG-aaaa"]),
            ("llm", "whole-0", "server", "nvidia.com/gpu", [GPU_C]),
        ]
    )
    attributor = _attributor(kubelet, mig_resolver=broken)
    attributor.refresh_once()
    assert attributor.healthy
    assert attributor.lookup(GPU_C, None) == Attribution("llm", "whole-0", "server")
    assert attributor.unresolved_device_ids == frozenset({"MIG-aaaa"})


def test_time_sliced_replica_is_attributed_to_its_only_holder(kubelet: KubeletSocket) -> None:
    kubelet.start(
        [("notebooks", "alice-0", "jupyter", "nvidia.com/gpu.shared", [f"{GPU_C}::1", f"{GPU_C}::3"])]
    )
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.lookup(GPU_C, None) == Attribution("notebooks", "alice-0", "jupyter")
    assert attributor.holders(GPU_C, None) == (Attribution("notebooks", "alice-0", "jupyter"),)


def test_gpu_shared_by_two_pods_has_no_single_owner(kubelet: KubeletSocket) -> None:
    kubelet.start(
        [
            ("notebooks", "alice-0", "jupyter", "nvidia.com/gpu.shared", [f"{GPU_C}::0"]),
            ("notebooks", "bob-0", "jupyter", "nvidia.com/gpu.shared", [f"{GPU_C}::1"]),
        ]
    )
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.lookup(GPU_C, None) is None
    assert set(attributor.holders(GPU_C, None)) == {
        Attribution("notebooks", "alice-0", "jupyter"),
        Attribution("notebooks", "bob-0", "jupyter"),
    }


def test_devices_of_other_resources_are_ignored(kubelet: KubeletSocket) -> None:
    kubelet.start(
        [
            ("net", "router-0", "dp", "intel.com/sriov_netdevice", [GPU_A]),
            ("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_B]),
        ]
    )
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.lookup(GPU_A, None) is None
    assert attributor.lookup(GPU_B, None) == Attribution("llm", "decode-7f9", "server")


def test_kubelet_restart_is_followed(kubelet: KubeletSocket) -> None:
    kubelet.start([("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_A])])
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    assert attributor.lookup(GPU_A, None) == Attribution("llm", "decode-7f9", "server")

    kubelet.stop()  # socket file gone, as when the kubelet restarts
    attributor.refresh_once()
    assert not attributor.healthy
    assert attributor.last_error is not None and str(kubelet.path) in attributor.last_error
    # Within the keep window the last known mapping still answers.
    assert attributor.lookup(GPU_A, None) == Attribution("llm", "decode-7f9", "server")

    kubelet.start([("llm", "decode-8a0", "server", "nvidia.com/gpu", [GPU_B])])
    attributor.refresh_once()
    assert attributor.healthy and attributor.last_error is None
    assert attributor.lookup(GPU_A, None) is None
    assert attributor.lookup(GPU_B, None) == Attribution("llm", "decode-8a0", "server")


def test_last_mapping_is_dropped_once_kubelet_stays_away(kubelet: KubeletSocket) -> None:
    now = [1000.0]
    kubelet.start([("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_A])])
    attributor = PodAttributor(str(kubelet.path), refresh_seconds=10.0, clock=lambda: now[0])
    attributor.refresh_once()
    kubelet.stop()

    now[0] += 10.0  # one missed refresh: kept
    attributor.refresh_once()
    assert attributor.lookup(GPU_A, None) is not None

    now[0] += 10.0  # two refresh periods without a good answer: dropped
    attributor.refresh_once()
    assert attributor.lookup(GPU_A, None) is None
    assert not attributor.healthy


def test_missing_socket_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "absent.sock"
    attributor = PodAttributor(str(path))
    attributor.refresh_once()
    assert not attributor.healthy
    assert attributor.last_error is not None
    assert str(path) in attributor.last_error and "does not exist" in attributor.last_error
    assert attributor.lookup(GPU_A, None) is None


def test_non_socket_path_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "plain-file"
    path.write_text("not a socket")
    attributor = PodAttributor(str(path))
    attributor.refresh_once()
    assert attributor.last_error is not None and "not a unix socket" in attributor.last_error


def test_background_thread_follows_changes_without_caller_refresh(kubelet: KubeletSocket) -> None:
    servicer = kubelet.start([("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_A])])
    attributor = PodAttributor(str(kubelet.path), refresh_seconds=0.05, timeout_seconds=1.0)
    attributor.start()
    try:
        assert attributor.lookup(GPU_A, None) == Attribution("llm", "decode-7f9", "server")
        servicer.assignment = [("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_B])]
        deadline = time.monotonic() + 20.0
        while attributor.lookup(GPU_B, None) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert attributor.lookup(GPU_B, None) == Attribution("llm", "decode-7f9", "server")
        assert attributor.lookup(GPU_A, None) is None
    finally:
        attributor.stop()
    assert not any(t.name == "ridgeline-pod-attribution" for t in threading.enumerate())


def test_lookup_never_calls_the_kubelet(kubelet: KubeletSocket) -> None:
    servicer = kubelet.start([("llm", "decode-7f9", "server", "nvidia.com/gpu", [GPU_A])])
    attributor = _attributor(kubelet)
    attributor.refresh_once()
    calls = servicer.calls
    for _ in range(100):
        attributor.lookup(GPU_A, None)
    assert servicer.calls == calls == 1


def test_bad_intervals_are_rejected() -> None:
    with pytest.raises(ValueError, match="refresh_seconds"):
        PodAttributor("/x", refresh_seconds=0)
    with pytest.raises(ValueError, match="timeout_seconds"):
        PodAttributor("/x", timeout_seconds=-1)


# -- device-id shapes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device_id", "expected"),
    [
        (GPU_A, (GPU_A.lower(), None)),
        (f"{GPU_A}::0", (GPU_A.lower(), None)),
        (f"{GPU_A}::12", (GPU_A.lower(), None)),
        (f"MIG-{GPU_B}/3/0", (GPU_B.lower(), 3)),
        (f"MIG-{GPU_B}/13/1::2", (GPU_B.lower(), 13)),
        (f"MIG-{GPU_B}/x/0", None),
        (f"MIG-{GPU_B}/3", None),
        ("MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f", None),
        ("0", None),
        ("0:1", None),
        ("", None),
    ],
)
def test_device_id_shapes(device_id: str, expected: tuple[str, int | None] | None) -> None:
    assert parse_device_id(device_id) == expected


def test_index_ids_go_to_the_resolver() -> None:
    assert parse_device_id("0:1", {"0:1": (GPU_A, 5)}.get) == (GPU_A.lower(), 5)


@pytest.mark.parametrize(
    ("resource", "is_gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-1g.10gb", True),
        ("nvidia.com/mig-3g.40gb.shared", True),
        ("nvidia.com/gpus", False),
        ("amd.com/gpu", False),
    ],
)
def test_gpu_resource_names(resource: str, is_gpu: bool) -> None:
    assert is_gpu_resource(resource) is is_gpu


@given(
    hexdigits=st.text(alphabet="0123456789abcdefABCDEF-", min_size=1, max_size=40),
    replica=st.integers(min_value=0, max_value=10_000),
)
def test_replica_suffix_never_changes_the_gpu(hexdigits: str, replica: int) -> None:
    uuid = f"GPU-{hexdigits}"
    assert parse_device_id(f"{uuid}::{replica}") == parse_device_id(uuid) == (uuid.lower(), None)


def test_stubs_speak_the_kubelet_wire_contract() -> None:
    """Field numbers and the method path must equal upstream's, or the kubelet answers garbage."""
    service = pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    assert {m.name for m in service.methods} == {"List", "GetAllocatableResources", "Get"}
    numbers = {
        (message, f.name): f.number
        for message in ("ListPodResourcesResponse", "PodResources", "ContainerResources", "ContainerDevices")
        for f in pb.DESCRIPTOR.message_types_by_name[message].fields
    }
    assert numbers == {
        ("ListPodResourcesResponse", "pod_resources"): 1,
        ("PodResources", "name"): 1,
        ("PodResources", "namespace"): 2,
        ("PodResources", "containers"): 3,
        ("ContainerResources", "name"): 1,
        ("ContainerResources", "devices"): 2,
        ("ContainerResources", "cpu_ids"): 3,
        ("ContainerResources", "memory"): 4,
        ("ContainerResources", "dynamic_resources"): 5,
        ("ContainerDevices", "resource_name"): 1,
        ("ContainerDevices", "device_ids"): 2,
        ("ContainerDevices", "topology"): 3,
    }
