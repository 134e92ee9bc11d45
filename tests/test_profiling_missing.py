"""A dcgm-exporter without the profiling (DCP) counters, end to end: a real `ridgeline serve
--source scrape` against a loopback page, read back through /metrics and GET /classify.

Before issue 9 every GPU of such a node vanished from /metrics without a word; now each stays,
naming the fields it lacks, and /classify says why there is no verdict.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_serve_cli import poll, serving

PAGE = Path(__file__).parent / "data" / "dcgm-exporter" / "no-dcp-h100.txt"
PROFILING = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_OCCUPANCY",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
}

pytestmark = pytest.mark.slow


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGE.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the daemon, not this server."""


@pytest.fixture
def exporter_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def test_gpus_without_profiling_counters_stay_and_say_why(exporter_url: str) -> None:
    with serving("--source", "scrape", "--scrape-url", exporter_url) as (base, _):
        poll(base, "/readyz", 200)
        text = poll(base, "/metrics", 200)
        missing: dict[str, set[str]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "ridgeline_profiling_field_missing":
                    missing.setdefault(sample.labels["gpu"], set()).add(sample.labels["field"])
                elif sample.name.startswith("ridgeline_") and "gpu" in sample.labels:
                    pytest.fail(f"{sample.name} for a GPU with no profiling reading: {sample.labels}")
        assert missing == {"0": PROFILING, "1": PROFILING}

        answer = json.loads(poll(base, "/classify", 200))
        assert [g["gpu"] for g in answer["gpus"]] == [0, 1]
        for gpu in answer["gpus"]:
            assert gpu["reading"] == "none" and gpu["regime"] is None
            assert set(gpu["missing_fields"]) == PROFILING
            assert "DCP" in gpu["no_verdict_reason"]
            assert "runbooks.md#ridgelineprofilingcountersmissing" in gpu["no_verdict_reason"]
