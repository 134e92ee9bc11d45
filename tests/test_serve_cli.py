"""`ridgeline serve` as a real process: start-up errors, a live replay on loopback, clean shutdown."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import http_get, serve_process
from replay_lines import replay_line

pytestmark = pytest.mark.slow


def ridgeline(*args: str) -> list[str]:
    return [sys.executable, "-m", "exporter", *args]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ridgeline(*args), capture_output=True, text=True, timeout=60, check=False)


def poll(base: str, path: str, want: int, seconds: float = 20.0) -> str:
    deadline = time.monotonic() + seconds
    while True:
        status, body = http_get(base + path)
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
        (("--replay", "demo", "--listen", "nonsense"), "--web.listen-address"),
        (("--source", "scrape"), "--scrape-url"),
        (("--replay", "demo", "--cards", "/nonexistent/cards.yaml"), "/nonexistent/cards.yaml"),
        (("--replay", "demo", "--web-config", "/nonexistent/web.yml"), "/nonexistent/web.yml"),
    ],
)
def test_user_mistakes_fail_at_start_up_with_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    result = run_cli("serve", "--listen", "127.0.0.1:0", *args)  # serve binds before it opens the source
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and " level=INFO " not in line]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


def test_wrong_replay_format_fails_at_start_up(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text("this is not a trace\nat all\n")
    result = run_cli("serve", "--listen", "127.0.0.1:0", "--replay", str(trace))
    assert result.returncode == 2
    assert str(trace) in result.stderr and "Traceback" not in result.stderr


def test_serve_replays_the_demo_and_answers_every_live_route() -> None:
    with serve_process("--replay", "demo", "--speed", "20", "--loop") as (base, _):
        assert "ready" in poll(base, "/readyz", 200)
        answer = json.loads(http_get(base + "/classify")[1])
        assert answer["source"] == "replay" and answer["source_up"] is True
        assert len(answer["gpus"]) >= 1
        first = answer["gpus"][0]
        assert first["regime"] in ("idle", "memory_bound", "compute_bound", "latency_bound")
        status, one = http_get(f"{base}/classify/{first['uuid']}")
        assert status == 200 and json.loads(one)["gpu"] == first["gpu"]
        status, body = http_get(base + "/classify/does-not-exist")
        assert status == 404 and first["uuid"] in body
        status, metrics = http_get(base + "/metrics")
        assert status == 200
        assert 'ridgeline_source_up{source="replay"} 1.0' in metrics
        assert "ridgeline_regime{" in metrics


def test_end_of_a_non_looping_replay_keeps_serving_the_last_state(tmp_path: Path) -> None:
    lines = [replay_line(1000.0 + i, 0, {1005: 0.7, 1004: 0.1}, uuid="GPU-x") for i in range(20)]
    trace = tmp_path / "short.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    with serve_process("--replay", str(trace), "--speed", "max") as (base, _):
        reason = poll(base, "/readyz", 503)
        deadline = time.monotonic() + 20
        while "end_of_replay" not in reason and time.monotonic() < deadline:
            reason = poll(base, "/readyz", 503)
        assert "end_of_replay" in reason
        metrics = http_get(base + "/metrics")[1]
        assert 'ridgeline_source_up{source="replay"} 0.0' in metrics
        assert 'ridgeline_regime_seconds_total{card="h100-sxm",gpu="0"' in metrics
        assert "ridgeline_samples_total 20.0" in metrics


def test_sigterm_shuts_down_cleanly() -> None:
    with serve_process("--replay", "demo", "--loop") as (base, process):
        poll(base, "/readyz", 200)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


BROKEN_LEDGER = """
import sys
from exporter.cli import main
from exporter.sampling import workloads

working = workloads.WorkloadLedger.update

def broken(self, gpus):
    gpus = list(gpus)
    if gpus:  # the start-up snapshot (no GPUs yet) is built before the thread runs
        raise RuntimeError("injected: the ledger broke")
    return working(self, gpus)

workloads.WorkloadLedger.update = broken
sys.exit(main(sys.argv[1:]))
"""
"""`python -m exporter` with one bug put in: the sampler thread raises on its first publish."""


def test_a_sampler_that_dies_stops_serve_with_exit_1_and_the_traceback() -> None:
    """A bug in the sampler thread ends the daemon (a supervisor restarts it) rather than leaving
    it up with a snapshot that no longer moves and a /healthz that says ok."""
    process = subprocess.Popen(
        [sys.executable, "-c", BROKEN_LEDGER, "serve", "--replay", "demo", "--loop",
         "--web.listen-address", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    try:
        assert process.wait(timeout=60) == 1
    finally:
        process.kill()
    output = output_of(process)
    assert "the sampler stopped on an unexpected error" in output, output
    assert "RuntimeError: injected: the ledger broke" in output, output
    assert "exiting 1: the sampler failed (injected: the ledger broke)" in output, output


def test_record_then_serve_the_recording(tmp_path: Path) -> None:
    out = tmp_path / "rec.jsonl"
    result = run_cli("record", "--replay", "demo", "--speed", "max", "--out", str(out))
    assert result.returncode == 0, result.stderr
    lines = out.read_text().splitlines()
    assert len(lines) > 100
    assert {"ts", "gpu", "uuid", "model", "fields"} <= set(json.loads(lines[0]))
    with serve_process("--replay", str(out), "--speed", "max") as (base, _):
        deadline = time.monotonic() + 20
        while "end_of_replay" not in poll(base, "/readyz", 503) and time.monotonic() < deadline:
            time.sleep(0.05)
        metrics = http_get(base + "/metrics")[1]
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
    with serve_process("--replay", "demo", "--loop", "--web-config", str(config)) as (base, _):
        assert http_get(base + "/healthz")[0] == 200
        assert http_get(base + "/metrics")[0] == 401
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
        with serve_process("--replay", str(trace), "--loop", "--kubelet-socket", str(socket_path)) as (
            base,
            _,
        ):
            if not kubelet_up_first:
                poll(base, "/readyz", 200)
                assert not socket_path.exists()
                start_kubelet()
            deadline = time.monotonic() + 30
            metrics = ""
            while 'namespace="llm"' not in metrics and time.monotonic() < deadline:
                metrics = http_get(base + "/metrics")[1]
                time.sleep(0.1)
            assert 'namespace="llm",pod="decode-7f9"' in metrics
            verdict = json.loads(http_get(base + "/classify/0")[1])
            assert verdict["attribution"] == {"namespace": "llm", "pod": "decode-7f9", "container": "server"}
    finally:
        server.stop(grace=None).wait()


# -- hostile clients and honest exits (issue 10) -------------------------------------------------


def output_of(process: subprocess.Popen[str]) -> str:
    """Everything the stopped process wrote (stdout and stderr are one pipe here)."""
    assert process.poll() is not None
    return process.stdout.read() if process.stdout else ""


def test_a_port_in_use_is_one_line_and_exit_2_before_serving_on() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--replay", "demo", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "in use" in lines[0] and f":{port}" in lines[0], result.stderr
    assert "serving on" not in result.stderr + result.stdout and "Traceback" not in result.stderr


def privileged_port() -> int:
    start = int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    if start <= 1:
        pytest.skip("this kernel lets anyone bind any port (ip_unprivileged_port_start <= 1)")
    return start - 1


def test_a_privileged_port_is_one_line_and_exit_2() -> None:
    port = privileged_port()
    command = ridgeline("serve", "--replay", "demo", "--listen", f"127.0.0.1:{port}")
    if os.geteuid() == 0:  # root may bind it: take the capability away, as a non-root pod lacks it
        command = ["setpriv", "--bounding-set", "-net_bind_service", *command]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "privileged" in lines[0] and "CAP_NET_BIND_SERVICE" in lines[0], result.stderr
    assert "serving on" not in result.stderr


def test_sigterm_with_a_half_sent_body_exits_within_the_shutdown_timeout() -> None:
    with serve_process(
        "--replay", "demo", "--loop", "--shutdown-timeout", "2", "--request-timeout", "120"
    ) as (
        base,
        process,
    ):
        port = int(base.rsplit(":", 1)[1])
        holders = []
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(
                b"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"card": '
            )
            holders.append(sock)
        assert http_get(base + "/healthz")[0] == 200
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=30) == 0  # generous; without a bound it never exits
        finally:
            for sock in holders:
                sock.close()
    assert "Traceback" not in output_of(process)


def test_a_flood_past_the_descriptor_limit_keeps_metrics_answering_and_the_log_short() -> None:
    """The issue's fd exhaustion, scaled: 256 descriptors, 1,000 connections that never send a
    head. The cap sits below the limit, so accept() never fails and /metrics keeps answering."""

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    with serve_process(
        "--replay", "demo", "--loop", "--request-timeout", "30", preexec_fn=few_descriptors
    ) as (
        base,
        process,
    ):
        port = int(base.rsplit(":", 1)[1])
        held = []
        try:
            for i in range(1000):
                held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
                held[-1].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                if i % 200 == 199:
                    assert http_get(base + "/metrics")[0] == 200
            statuses = [http_get(base + "/metrics")[0] for _ in range(5)]
        finally:
            for sock in held:
                sock.close()
        assert statuses == [200] * 5
        assert poll(base, "/readyz", 200)
    log = output_of(process)
    assert "Traceback" not in log and "out of system resource" not in log and "accept() failed" not in log
    assert "--max-connections 1024 lowered to" in log
    assert len(log.splitlines()) < 25, log


def test_one_log_format_for_every_line_json_and_logfmt() -> None:
    with serve_process("--replay", "demo", "--loop", env={"RIDGELINE_LOG_FORMAT": "json"}) as (base, process):
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # a uvicorn line too
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
            sock.recv(100)
    lines = [line for line in output_of(process).splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert {"time", "level", "logger", "msg"} <= set(records[0])
    loggers = {r["logger"] for r in records}
    assert "exporter.serve" in loggers and "uvicorn.error" in loggers and "exporter.web" in loggers

    with serve_process("--replay", "demo", "--loop", "--log.format", "logfmt") as (_, process):
        pass
    text = [line for line in output_of(process).splitlines() if line.strip()]
    pattern = (
        r"^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=(DEBUG|INFO|WARNING|ERROR) logger=[\w.]+ msg="
    )
    assert text and all(re.match(pattern, line) for line in text), text
    assert any(" logger=uvicorn.error " in line for line in text)


def test_log_level_flag_and_variable() -> None:
    with serve_process("--replay", "demo", "--loop", "--log-level", "warning") as (_, process):
        pass
    assert "serving on" not in output_of(process)
    with serve_process("--replay", "demo", "--loop", env={"RIDGELINE_LOG_LEVEL": "debug"}) as (_, process):
        pass
    assert " level=DEBUG " in output_of(process)
    with serve_process("--replay", "demo", "--loop", "--log.level", "warn") as (_, process):
        pass
    assert "serving on" not in output_of(process)


# -- where serve listens: the default, and a port of the kernel's choosing (issue 23) ----------------

DEFAULT_PORT_CHECK = textwrap.dedent(
    """
    import subprocess, sys, time, urllib.request
    serve = subprocess.Popen([sys.executable, "-m", "exporter", "serve", "--replay", "demo", "--loop"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:10295/healthz", timeout=2) as answer:
                    print("healthz", answer.status)
                    break
            except OSError:
                if serve.poll() is not None or time.monotonic() > deadline:
                    serve.kill()
                    print(serve.communicate()[0])
                    sys.exit(1)
                time.sleep(0.05)
        for line in open(f"/proc/{serve.pid}/net/tcp").read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                print("listening", fields[1])
    finally:
        serve.terminate()
        serve.wait(20)
    """
)


def test_without_listen_serve_listens_on_all_interfaces_port_10295() -> None:
    """The default address, for real, in a network namespace of its own: a `./scripts/demo` (or
    anything else) holding 10295 on the machine cannot make it fail, and it holds nothing there."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) not installed")
    namespace = [unshare, "--net"] if os.geteuid() == 0 else [unshare, "--map-root-user", "--net"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIDGELINE_")}
    command = [
        *namespace,
        "sh",
        "-c",
        'ip link set lo up && exec "$0" -c "$1"',
        sys.executable,
        DEFAULT_PORT_CHECK,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False, env=env)
    if result.returncode != 0 and "healthz" not in result.stdout and "unshare" in result.stderr:
        pytest.skip(f"no network namespace here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "healthz 200" in result.stdout
    assert result.stdout.split("listening ")[1:] == [f"00000000:{10295:04X}\n"], result.stdout  # 0.0.0.0


def test_listen_on_port_0_serves_on_the_port_the_kernel_picked_and_logs_it() -> None:
    with serve_process("--replay", "demo", "--loop") as (base, process):  # --listen 127.0.0.1:0
        port = int(base.rsplit(":", 1)[1])
        assert port != 0 and http_get(base + "/healthz")[0] == 200
    assert f"serving on 127.0.0.1:{port} " in output_of(process)
