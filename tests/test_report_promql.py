"""The Prometheus input's text and transport: the PromQL it writes (exporter/report/promql.py), the
recorded names it reads (exporter/report/series.py) against the rules file, the step and range
arithmetic, and the client's auth, headers and errors against a real HTTP server on loopback."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from conftest import closed_port

from exporter.http_client import BasicAuth, HTTPClientConfig
from exporter.report import promql
from exporter.report.prometheus import (
    ClientSettings,
    PrometheusClient,
    QueryError,
    aligned_range,
    choose_step,
    level_for,
)
from exporter.report.series import CLUSTER, HPC_JOB, INSTANCE, NAMESPACE_POD, recorded_names

ROOT = Path(__file__).resolve().parents[1]


def test_the_recorded_names_the_report_reads_are_the_rules_own() -> None:
    """A rename in rules/ridgeline-recording.rules.yml must land in exporter/report/series.py."""
    rules = yaml.safe_load((ROOT / "rules" / "ridgeline-recording.rules.yml").read_text())
    recorded = {rule["record"] for group in rules["groups"] for rule in group["rules"] if "record" in rule}
    assert set(recorded_names()) - recorded == set()


def test_raw_window_sums_the_counters_increase() -> None:
    assert promql.window_expr("regime", ("namespace",), 3600, level=None) == (
        "sum by (namespace, regime) (increase(ridgeline_regime_seconds_total[3600s]))"
    )
    matcher = promql.parse_matcher('cluster="prod"')
    assert promql.window_expr("flop", ("card",), 60, level=None, matchers=[matcher]) == (
        'sum by (card) (increase(ridgeline_flop_total{cluster="prod"}[60s]))'
    )
    idle = promql.window_expr("idle_allocated", ("node",), 60, level=None)
    assert 'pod!=""' in idle and 'pod="",hpc_job!=""' in idle and " or " in idle


def test_metricsql_windows_reach_back_one_sample_interval() -> None:
    expr = promql.window_expr("regime", ("node",), 300, level=None, dialect="metricsql", sample_interval=15.0)
    assert expr == "sum by (node, regime) (increase_prometheus(ridgeline_regime_seconds_total[314999ms]))"


def test_recorded_window_reads_the_rate_every_five_minutes() -> None:
    expr = promql.window_expr("regime", ("namespace",), 3600, level=NAMESPACE_POD, lookback=90.0)
    assert expr == (
        "sum by (namespace, regime) (sum_over_time(last_over_time("
        "namespace_pod:ridgeline_regime_seconds:rate5m[90000ms])[3599999ms:300s])) * 300"
    )
    # the node level records idle-while-allocated time of its own; a level that does not, refuses
    assert promql.window_expr("idle_allocated", ("node",), 3600, level=INSTANCE) == (
        "sum by (node) (sum_over_time("
        "instance:ridgeline_idle_allocated_seconds:rate5m[3599999ms:300s])) * 300"
    )
    with pytest.raises(ValueError, match="allocated"):
        promql.window_expr("idle_allocated", ("node",), 3600, level=replace(INSTANCE, idle_allocated=None))


def test_stretch_total_and_open_ranges() -> None:
    assert promql.open_range(600) == "599999ms"
    assert promql.stretch_total("X", 7200, 3600) == "sum_over_time((X)[7199999ms:3600s])"
    with pytest.raises(ValueError):
        promql.duration(1.5)


def test_matchers_and_labels_are_checked() -> None:
    assert promql.parse_matcher('namespace=~"ml-.*"').text() == 'namespace=~"ml-.*"'
    for bad in ("cluster=prod", '__name__="x"', 'a b="c"', ""):
        with pytest.raises(promql.PromQLInputError):
            promql.parse_matcher(bad)
    assert promql.check_label("hpc_job") == "hpc_job"
    for bad in ("9x", "a-b", "__name__"):
        with pytest.raises(promql.PromQLInputError):
            promql.check_label(bad)


def test_steps_are_sized_to_the_range() -> None:
    assert choose_step(7 * 86400, 15.0) == 3600  # a week: 168 one-hour windows
    assert choose_step(60, 1.0) == 5  # a minute at 1 s scrapes: 4 samples per window at least
    assert choose_step(12 * 3600, 15.0) == 300
    assert aligned_range(1000.0, 7250.0, 3600) == (0.0, 7200.0)
    assert level_for(("namespace",), []) is NAMESPACE_POD
    assert level_for(("node",), []) is INSTANCE
    assert level_for(("card",), []) is None
    assert level_for(("hpc_job",), []) is None  # raw counters where they are: exact to the scrape
    assert level_for(("hpc_job",), [], raw_present=False) is HPC_JOB  # a global server
    assert level_for(("cluster",), []) is CLUSTER
    assert level_for(("namespace",), [promql.parse_matcher('node="n1"')]) is None


def test_credentials_in_the_url_are_used_and_never_shown() -> None:
    client = PrometheusClient(ClientSettings(url="https://alice:s%40cret@prom.example:9090/prometheus/"))
    assert client.url == "https://prom.example:9090/prometheus"
    assert client._client.basic_auth == BasicAuth(username="alice", password="s@cret")
    with pytest.raises(QueryError, match="http"):
        PrometheusClient(ClientSettings(url="prom:9090"))


class _Recorder(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, tuple[int, bytes]]] = {}
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode()
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.seen.append({"path": self.path, "headers": headers, "body": body})
        status, payload = self.answers.get(self.path, (404, b"not found"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Recorder.seen = []
    _Recorder.answers = {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


VECTOR = json.dumps(
    {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"namespace": "ml"}, "value": [1, "42.5"]},
        {"metric": {"namespace": "nan"}, "value": [1, "NaN"]},
    ]}}
).encode()  # fmt: skip


def test_bearer_token_and_headers_are_sent(server: str) -> None:
    _Recorder.answers["/api/v1/query"] = (200, VECTOR)
    client = PrometheusClient(
        ClientSettings(
            url=server, client=HTTPClientConfig(bearer_token="tok\n"), headers={"X-Scope-OrgID": "team-a"}
        )
    )
    assert client.query("up", 100.0) == [({"namespace": "ml"}, 42.5)]  # NaN dropped
    headers = _Recorder.seen[0]["headers"]
    assert headers["authorization"] == "Bearer tok"
    assert headers["x-scope-orgid"] == "team-a"
    assert "query=up" in _Recorder.seen[0]["body"] and "time=100.000" in _Recorder.seen[0]["body"]


def test_basic_auth_from_the_url(server: str) -> None:
    _Recorder.answers["/prefix/api/v1/query"] = (200, VECTOR)
    host = server.removeprefix("http://")
    client = PrometheusClient(ClientSettings(url=f"http://bob:pw@{host}/prefix"))
    client.query("up", 1.0)
    token = _Recorder.seen[0]["headers"]["authorization"].removeprefix("Basic ")
    assert base64.b64decode(token) == b"bob:pw"
    assert "bob" not in client.url


def test_errors_name_the_problem(server: str) -> None:
    client = PrometheusClient(ClientSettings(url=server))
    _Recorder.answers["/api/v1/query"] = (401, b"{}")
    with pytest.raises(QueryError, match=r"401.*--prometheus.basic-auth.username"):
        client.query("up", 1.0)
    _Recorder.answers["/api/v1/query"] = (
        400,
        json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode(),
    )
    with pytest.raises(QueryError, match="bad_data: parse error"):
        client.query("up(", 1.0)
    _Recorder.answers["/api/v1/query"] = (200, b"<html>grafana</html>")
    with pytest.raises(QueryError, match="did not answer JSON"):
        client.query("up", 1.0)
    del _Recorder.answers["/api/v1/query"]
    with pytest.raises(QueryError, match="404"):
        client.query("up", 1.0)
    with closed_port() as port:
        closed = PrometheusClient(ClientSettings(url=f"http://127.0.0.1:{port}"))
        with pytest.raises(QueryError, match="cannot reach"):
            closed.query("up", 1.0)
    with pytest.raises(QueryError, match="one way to authenticate"):
        both = HTTPClientConfig(basic_auth=BasicAuth(username="a", password="p"), bearer_token="b")
        PrometheusClient(ClientSettings(url=server, client=both))


def test_long_ranges_are_summed_a_day_per_query() -> None:
    """A week in one subquery costs the server the week's matrix at once (bench_report.py)."""
    from exporter.report.prometheus import MAX_STRETCH_SECONDS, _stretches

    week = _stretches(0.0, 7 * 86400.0, 3600, set(), None, None)
    assert len(week) == 7 and all(s.end - s.start == MAX_STRETCH_SECONDS for s in week)
    covered = {float(t) for t in range(3600 * 49, 7 * 86400 + 1, 3600)}  # rules from hour 48 on
    mixed = _stretches(0.0, 7 * 86400.0, 3600, covered, NAMESPACE_POD, None)
    assert [s.level for s in mixed[:3]] == [None, None, NAMESPACE_POD]
    assert mixed[1].end == mixed[2].start == 48 * 3600.0
