"""The live check: a real Prometheus, behind TLS and basic auth, scrapes `ridgeline serve --replay
demo` every second for a minute; `ridgeline report --since 1m` against it then gives the
GPU-seconds the daemon itself counted over that minute.

The truth is the daemon's own: its per-GPU totals are read from `GET /classify` every second
while Prometheus scrapes, and the expected increase over the report's (aligned) range is taken
between the readings nearest the range's ends. Both sides see the same counters one second
apart at most, so they agree within a few percent. About 80 s of wall time.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml
from prometheus_stack import PROMETHEUS, REQUIRES_PROMETHEUS, running_stack
from test_webconfig import OPENSSL, _make_ca, _make_leaf

from exporter.roofline import REGIMES

pytestmark = [
    *REQUIRES_PROMETHEUS,
    pytest.mark.skipif(OPENSSL is None, reason="openssl CLI not installed: cannot make test certs"),
]

ROOT = Path(__file__).resolve().parents[1]
SCRAPE_SECONDS = 70.0
"""Scraping starts about 10 s before the report's minute, so that minute is covered from its start."""
USER, PASSWORD = "reporter", "a report's password"


def _get_json(url: str, context: ssl.SSLContext | None = None, auth: str | None = None) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
    with urllib.request.urlopen(request, timeout=5, context=context) as response:
        return json.load(response)


def test_report_over_the_last_minute_of_a_live_prometheus(tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    ca = _make_ca(tmp_path, "report-ca")
    cert, key = _make_leaf(
        tmp_path, "prometheus", ca, "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump(
            {
                "tls_server_config": {"cert_file": str(cert), "key_file": str(key)},
                "basic_auth_users": {USER: hashed},
            }
        )
    )
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    context = ssl.create_default_context(cafile=str(ca[0]))
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with running_stack(tmp_path) as stack:
        target = stack.start_ridgeline("demo", "--replay", "demo", "--loop")
        stack.wait_ready(f"http://{target}/readyz", "ridgeline serve")
        config = tmp_path / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {
                        "scrape_interval": "1s",
                        "scrape_timeout": "900ms",
                        "evaluation_interval": "1s",
                    },
                    "scrape_configs": [
                        {
                            "job_name": "ridgeline",
                            "static_configs": [{"targets": [target], "labels": {"node": "demo"}}],
                        }
                    ],
                }
            )
        )
        url = stack.start_listening(
            "prometheus",
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             "--web.listen-address=127.0.0.1:0", f"--web.config.file={web}", "--log.level=warn"],
        ).replace("http://", "https://")  # fmt: skip
        readings: list[tuple[float, dict[str, tuple[str, dict[str, float]]]]] = []
        deadline = time.monotonic() + 30
        while True:  # Prometheus ready (through TLS and basic auth)
            try:
                request = urllib.request.Request(f"{url}/-/ready", headers={"Authorization": auth})
                with urllib.request.urlopen(request, timeout=2, context=context):
                    break
            except OSError:
                assert time.monotonic() < deadline, stack.logs()
                time.sleep(0.2)
        started = time.time()
        while time.time() - started < SCRAPE_SECONDS:
            answer = _get_json(f"http://{target}/classify")
            readings.append(
                (
                    time.time(),
                    {
                        g["uuid"]: (
                            (g["attribution"] or {}).get("namespace", ""),
                            g["totals"]["regime_seconds"] or dict.fromkeys(REGIMES, 0.0),  # null: not born
                        )
                        for g in answer["gpus"]
                    },
                )
            )
            time.sleep(1.0 - (time.time() - started) % 1.0)
        out, html = tmp_path / "report.json", tmp_path / "report.html"
        command = [
            sys.executable, "-m", "exporter", "report", "--prometheus", url, "--since", "1m",
            "--prometheus-ca-file", str(ca[0]), "--prometheus-user", USER,
            "--prometheus-password-file", str(password_file), "--json", str(out), "--out", str(html),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        refused = subprocess.run(
            [
                c
                for c in command
                if c not in ("--prometheus-user", USER, "--prometheus-password-file", str(password_file))
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert refused.returncode == 2 and "401" in refused.stderr, refused.stderr
    document = json.loads(out.read_text())
    start, end = document["range"]["start_timestamp"], document["range"]["end_timestamp"]
    assert 50 <= end - start <= 60
    assert document["resolution"]["sample_interval_seconds"] == pytest.approx(1.0, rel=0.2)

    def nearest(t: float) -> dict[str, tuple[str, dict[str, float]]]:
        return min(readings, key=lambda r: abs(r[0] - t))[1]

    before, after = nearest(start), nearest(end)
    expected: dict[str, dict[str, float]] = {}
    for uuid, (namespace, seconds) in after.items():
        was = before.get(uuid, (namespace, dict.fromkeys(REGIMES, 0.0)))[1]
        into = expected.setdefault(namespace, dict.fromkeys(REGIMES, 0.0))
        for regime in REGIMES:
            into[regime] += seconds[regime] - was[regime]
    groups = {g["labels"].get("namespace", ""): g for g in document["groups"]}
    assert set(groups) == {ns for ns, seconds in expected.items() if sum(seconds.values()) > 0}
    for namespace, want in expected.items():
        total = sum(want.values())
        got = groups[namespace]
        assert got["gpu_seconds_total"] == pytest.approx(total, rel=0.05), namespace
        for regime in REGIMES:
            assert abs(got["gpu_seconds"][regime] - want[regime]) <= 0.05 * total, (namespace, regime)
    assert "raw counters" in " ".join(document["source"]["series"].values())  # a minute: no 5-minute rates
    assert html.read_text().count("<svg") == 3
