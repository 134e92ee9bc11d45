"""A report over more time than the Prometheus holds: the scrape interval is still the scrape's.

A Prometheus up for half a minute, scraping `serve --replay demo` every 2 s, asked for
`--since 20m`: the old probe divided its 600 s window by the ~15 samples the young series had
in it and printed "samples every 40 s" (issue 23's "7.06 s" where the scrape was 5 s), which
also widened the query windows. Every GPU of the demo is in a pod: no "(no namespace)" group.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_stack import PROMETHEUS, REQUIRES_PROMETHEUS, running_stack

pytestmark = REQUIRES_PROMETHEUS

SCRAPE_SECONDS = 2


def test_a_young_prometheus_gives_its_scrape_interval(tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    with running_stack(tmp_path) as stack:
        target = stack.start_ridgeline("demo", "--replay", "demo", "--loop")
        stack.wait_ready(f"http://{target}/readyz", "ridgeline serve")
        stack.prometheus_url = stack.start_prometheus_with(
            "prometheus",
            {
                "global": {"scrape_interval": f"{SCRAPE_SECONDS}s"},
                "scrape_configs": [{"job_name": "ridgeline", "static_configs": [{"targets": [target]}]}],
            },
        )
        deadline = time.monotonic() + 90
        expr = 'min(count_over_time(ridgeline_regime_seconds_total{regime="idle"}[5m]))'
        while not ((found := stack.query(expr)) and float(found[0]["value"][1]) >= 12):
            assert time.monotonic() < deadline, stack.logs()
            time.sleep(1)
        out = tmp_path / "r.json"
        done = subprocess.run(
            [sys.executable, "-m", "exporter", "report", "--prometheus", stack.prometheus_url,
             "--since", "20m", "--json", str(out), "--out", str(tmp_path / "r.html")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        document = json.loads(out.read_text())
    assert document["resolution"]["sample_interval_seconds"] == pytest.approx(SCRAPE_SECONDS, rel=0.1)
    assert all(group["labels"].get("namespace") for group in document["groups"]), document["groups"]
    page = (tmp_path / "r.html").read_text()
    assert f"samples every {SCRAPE_SECONDS:g} s" in page
