"""A real Prometheus scrapes a real `ridgeline serve` and stores its regime and FLOP series."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import listening_port, stop_process

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(
        not Path(PROMETHEUS).exists(), reason="prometheus binary (Debian package prometheus) not installed"
    ),
]


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            answer = json.load(response)
    except OSError:
        return []
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def test_prometheus_scrapes_regime_and_flop_series(tmp_path: Path) -> None:
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "serve",
            "--replay",
            "demo",
            "--loop",
            "--speed",
            "5",
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ridgeline_port = listening_port(serve, "serve")
    except AssertionError:
        stop_process(serve)
        raise
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: ridgeline\n"
        "    scrape_interval: 1s\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{ridgeline_port}']\n"
    )
    prometheus = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            "--web.listen-address=127.0.0.1:0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{listening_port(prometheus, 'prometheus')}"
        deadline = time.monotonic() + 90
        regimes: list[dict[str, Any]] = []
        flops: list[dict[str, Any]] = []
        up: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            up = query(base, 'up{job="ridgeline"} == 1')
            regimes = query(base, "ridgeline_regime == 1")
            flops = query(base, "ridgeline_flop_total")
            if up and regimes and flops:
                break
            time.sleep(0.5)
        assert up, "Prometheus never scraped ridgeline successfully"
        assert regimes, "no ridgeline_regime series in Prometheus"
        assert flops, "no ridgeline_flop_total series in Prometheus"
        labels = regimes[0]["metric"]
        assert {"gpu", "uuid", "model", "card", "regime", "instance", "job"} <= set(labels)
        assert labels["regime"] in ("idle", "memory_bound", "compute_bound", "latency_bound")
        # one debounced regime per GPU
        per_gpu = query(base, "count by (uuid) (ridgeline_regime == 1)")
        assert per_gpu and all(row["value"][1] == "1" for row in per_gpu)
        # the counters let Prometheus compute fleet intensity as a ratio of rates
        deadline = time.monotonic() + 60
        intensity: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not intensity:
            intensity = query(
                base, "sum(rate(ridgeline_flop_total[5s])) / sum(rate(ridgeline_dram_bytes_total[5s]))"
            )
            intensity = [row for row in intensity if row["value"][1] not in ("NaN", "+Inf")]
            if not intensity:
                time.sleep(0.5)
        assert intensity and float(intensity[0]["value"][1]) > 0
    finally:
        stop_process(prometheus)
        stop_process(serve)
