"""`ridgeline serve --source scrape` as a real process against a loopback upstream behind basic
auth: the password reaches the upstream and nowhere else (log, /readyz, /classify, /metrics),
and a dripping upstream takes the source down with reason timeout."""

from __future__ import annotations

import base64
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import http_get, http_until, serve_process, stop_process

pytestmark = pytest.mark.slow

PAGE = (Path(__file__).parent / "data" / "dcgm-exporter" / "legacy-h100-pods.txt").read_bytes()
SECRET = "hunter2-Secr3t"


class _Upstream(ThreadingHTTPServer):
    daemon_threads = True
    release: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Upstream

    def do_GET(self) -> None:
        if self.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            try:
                for index in range(len(PAGE)):
                    self.wfile.write(PAGE[index : index + 1])
                    if self.server.release.wait(0.2):
                        return
            except (BrokenPipeError, ConnectionResetError):
                return
        expected = "Basic " + base64.b64encode(f"ridgeline:{SECRET}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = _Upstream(("127.0.0.1", 0), _Handler)
    server.release = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.release.set()
    server.shutdown()
    server.server_close()


def _output(process: subprocess.Popen[str]) -> str:
    stop_process(process)
    return process.stdout.read() if process.stdout else ""


def test_the_password_reaches_the_upstream_and_is_shown_nowhere(upstream: str) -> None:
    with serve_process(
        "--source", "scrape", "--scrape-url", f"http://ridgeline:{SECRET}@{upstream}/metrics"
    ) as (
        base,
        process,
    ):
        assert http_until(base, "/readyz", "ready").strip() == "ready"
        bodies = [
            http_get(base + path)[1] for path in ("/readyz", "/classify", "/classify/0", "/metrics", "/")
        ]
        assert 'ridgeline_source_up{source="scrape"} 1' in bodies[3]
        log = _output(process)
    for text in [*bodies, log]:
        assert SECRET not in text


def test_a_wrong_password_is_reported_redacted_in_readyz_classify_and_the_log(upstream: str) -> None:
    url = f"http://ridgeline:wrong-{SECRET}@{upstream}/metrics"
    with serve_process("--source", "scrape", "--scrape-url", url) as (base, process):
        readyz = http_until(base, "/readyz", "401")
        assert "ridgeline:xxxxx@" in readyz
        classify = http_get(base + "/classify")[1]
        metrics = http_get(base + "/metrics")[1]
        log = _output(process)
    assert 'reason="http_status"' in metrics
    assert "xxxxx" in log
    for text in (readyz, classify, metrics, log):
        assert SECRET not in text


def test_a_dripping_upstream_takes_the_source_down_with_reason_timeout(upstream: str) -> None:
    args = ("--source", "scrape", "--scrape-url", f"http://{upstream}/drip", "--scrape-timeout", "0.5")
    with serve_process(*args) as (base, _process):
        readyz = http_until(base, "/readyz", "timeout")
        metrics = http_until(base, "/metrics", 'ridgeline_sample_errors_total{reason="timeout"')
    assert "did not answer within 0.5 s" in readyz
    assert 'ridgeline_source_up{source="scrape"} 0' in metrics
