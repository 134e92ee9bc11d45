"""`ridgeline serve` as a real process: start-up errors, a live replay on loopback, clean shutdown."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import free_port, stop_process
from replay_lines import replay_line

pytestmark = pytest.mark.slow


def ridgeline(*args: str) -> list[str]:
    return [sys.executable, "-m", "exporter", *args]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ridgeline(*args), capture_output=True, text=True, timeout=60, check=False)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@contextmanager
def serving(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    process = subprocess.Popen(
        ridgeline("serve", "--listen", f"127.0.0.1:{port}", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                get(base + "/healthz")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read() if process.stdout else ""
                    raise AssertionError(f"serve did not come up:\n{output}") from None
                time.sleep(0.05)
        yield base, process
    finally:
        stop_process(process)


def poll(base: str, path: str, want: int, seconds: float = 20.0) -> str:
    deadline = time.monotonic() + seconds
    while True:
        status, body = get(base + path)
        if status == want:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} answered {status} ({body.strip()}), wanted {want}")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--replay", "/nonexistent/trace.jsonl"), "/nonexistent/trace.jsonl"),
        (("--replay", "demo", "--model", "H100 typo"), "--model"),
        (("--replay", "demo", "--listen", "nonsense"), "--listen"),
        (("--source", "scrape"), "--scrape-url"),
        (("--replay", "demo", "--cards", "/nonexistent/cards.yaml"), "/nonexistent/cards.yaml"),
        (("--replay", "demo", "--web-config", "/nonexistent/web.yml"), "/nonexistent/web.yml"),
    ],
)
def test_user_mistakes_fail_at_start_up_with_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    result = run_cli("serve", *args)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and " INFO " not in line]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


def test_wrong_replay_format_fails_at_start_up(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text("this is not a trace\nat all\n")
    result = run_cli("serve", "--replay", str(trace))
    assert result.returncode == 2
    assert str(trace) in result.stderr and "Traceback" not in result.stderr


def test_serve_replays_the_demo_and_answers_every_live_route() -> None:
    with serving("--replay", "demo", "--speed", "20", "--loop") as (base, _):
        assert "ready" in poll(base, "/readyz", 200)
        answer = json.loads(get(base + "/classify")[1])
        assert answer["source"] == "replay" and answer["source_up"] is True
        assert len(answer["gpus"]) >= 1
        first = answer["gpus"][0]
        assert first["regime"] in ("idle", "memory_bound", "compute_bound", "latency_bound")
        status, one = get(f"{base}/classify/{first['uuid']}")
        assert status == 200 and json.loads(one)["gpu"] == first["gpu"]
        status, body = get(base + "/classify/does-not-exist")
        assert status == 404 and first["uuid"] in body
        status, metrics = get(base + "/metrics")
        assert status == 200
        assert 'ridgeline_source_up{source="replay"} 1.0' in metrics
        assert "ridgeline_regime{" in metrics


def test_end_of_a_non_looping_replay_keeps_serving_the_last_state(tmp_path: Path) -> None:
    lines = [replay_line(1000.0 + i, 0, {1005: 0.7, 1004: 0.1}, uuid="GPU-x") for i in range(20)]
    trace = tmp_path / "short.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    with serving("--replay", str(trace), "--speed", "max") as (base, _):
        reason = poll(base, "/readyz", 503)
        deadline = time.monotonic() + 20
        while "end_of_replay" not in reason and time.monotonic() < deadline:
            reason = poll(base, "/readyz", 503)
        assert "end_of_replay" in reason
        metrics = get(base + "/metrics")[1]
        assert 'ridgeline_source_up{source="replay"} 0.0' in metrics
        assert 'ridgeline_regime_seconds_total{card="h100-sxm",gpu="0"' in metrics
        assert "ridgeline_samples_total 20.0" in metrics


def test_sigterm_shuts_down_cleanly() -> None:
    with serving("--replay", "demo", "--loop") as (base, process):
        poll(base, "/readyz", 200)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_record_then_serve_the_recording(tmp_path: Path) -> None:
    out = tmp_path / "rec.jsonl"
    result = run_cli("record", "--replay", "demo", "--speed", "max", "--out", str(out))
    assert result.returncode == 0, result.stderr
    lines = out.read_text().splitlines()
    assert len(lines) > 100
    assert {"ts", "gpu", "uuid", "model", "fields"} <= set(json.loads(lines[0]))
    with serving("--replay", str(out), "--speed", "max") as (base, _):
        deadline = time.monotonic() + 20
        while "end_of_replay" not in poll(base, "/readyz", 503) and time.monotonic() < deadline:
            time.sleep(0.05)
        metrics = get(base + "/metrics")[1]
        batches = len({json.loads(line)["ts"] for line in lines})
        assert f"ridgeline_samples_total {batches}.0" in metrics
        assert "ridgeline_flop_total{" in metrics


def test_record_needs_an_output_file() -> None:
    result = run_cli("record", "--replay", "demo")
    assert result.returncode == 2 and "--out" in result.stderr


def test_web_config_basic_auth_protects_metrics_but_not_healthz(tmp_path: Path) -> None:
    import base64

    import bcrypt

    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n")
    with serving("--replay", "demo", "--loop", "--web-config", str(config)) as (base, _):
        assert get(base + "/healthz")[0] == 200
        assert get(base + "/metrics")[0] == 401
        request = urllib.request.Request(
            base + "/metrics", headers={"Authorization": "Basic " + base64.b64encode(b"prom:s3cret").decode()}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
            assert b"ridgeline_source_up" in response.read()


@pytest.mark.parametrize("kubelet_up_first", [True, False], ids=["kubelet-up", "kubelet-restarting"])
def test_kubelet_socket_attributes_gpus_to_pods(tmp_path: Path, kubelet_up_first: bool) -> None:
    """Attribution works whether the kubelet's socket is there at start-up or only appears later
    (a kubelet restarting while Ridgeline starts)."""
    from concurrent import futures

    import grpc

    from exporter.attribution import podresources_pb2 as pb
    from exporter.attribution import podresources_pb2_grpc as pb_grpc

    uuid = "GPU-8e5c3a1f-2b4d-4c6e-9f80-1a2b3c4d5e6f"

    class Kubelet(pb_grpc.PodResourcesListerServicer):
        def List(self, request: object, context: object) -> pb.ListPodResourcesResponse:
            devices = pb.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[uuid])
            container = pb.ContainerResources(name="server", devices=[devices])
            pod = pb.PodResources(name="decode-7f9", namespace="llm", containers=[container])
            return pb.ListPodResourcesResponse(pod_resources=[pod])

    socket_path = tmp_path / "kubelet.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_PodResourcesListerServicer_to_server(Kubelet(), server)

    def start_kubelet() -> None:
        server.add_insecure_port(f"unix://{socket_path}")  # binding creates the socket file
        server.start()

    if kubelet_up_first:
        start_kubelet()
    lines = [replay_line(1000.0 + i, 0, {1005: 0.7, 1004: 0.1}, uuid=uuid) for i in range(5)]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    try:
        with serving("--replay", str(trace), "--loop", "--kubelet-socket", str(socket_path)) as (base, _):
            if not kubelet_up_first:
                poll(base, "/readyz", 200)
                assert not socket_path.exists()
                start_kubelet()
            deadline = time.monotonic() + 30
            metrics = ""
            while 'namespace="llm"' not in metrics and time.monotonic() < deadline:
                metrics = get(base + "/metrics")[1]
                time.sleep(0.1)
            assert 'namespace="llm",pod="decode-7f9"' in metrics
            verdict = json.loads(get(base + "/classify/0")[1])
            assert verdict["attribution"] == {"namespace": "llm", "pod": "decode-7f9", "container": "server"}
    finally:
        server.stop(grace=None).wait()
