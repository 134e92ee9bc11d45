"""GPU-hours lost to a reduced clock in `ridgeline report` (docs/report.md, "The levers").

The figure is the increase of ridgeline_clock_lost_seconds_total: Σ (1 − k) of each compute-bound
GPU-second whose binding pipe ran below 97 % of its peak's clock, by cause. Checked in the model
with hand-made usage, on the replay path against a real `serve`'s counters, and on the Prometheus
path against a real Prometheus scraping a real `serve`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import http_get, serve_process
from prometheus_client.parser import text_string_to_metric_families
from prometheus_stack import PROMETHEUS, rebased_trace, running_stack
from replay_lines import replay_line
from test_report_model import provenance
from test_serve_cli import poll

from exporter import fields
from exporter.catalog import Catalog
from exporter.report.model import ReportOptions, Usage, build_report
from exporter.report.render import render_html
from exporter.sample import Attribution

ROOT = Path(__file__).resolve().parents[1]
H100_TENSOR_MHZ = 1830.0
"""The clock the H100 SXM's tensor peaks are quoted at (cards.yaml clock_basis)."""
GPUS = {
    # gpu: (SM clock, field 112, namespace): a power-capped GEMM, a hot one, one at full clock
    0: (1185.0, 0x4, "train"),
    1: (1410.0, 0x20, "train"),
    2: (1980.0, 0, "serve"),
}


def report(catalog: Catalog, groups: list[Usage], measured: bool = True) -> dict:
    fleet = Usage(labels={})
    for g in groups:
        fleet = fleet.plus(g)
    return build_report(
        groups=groups,
        fleet=fleet,
        workloads=[],
        provenance=provenance(measured),
        catalog=catalog,
        options=ReportOptions(by=("namespace",)),
    )


def test_the_lost_gpu_hours_are_the_counters_by_cause_and_the_fleet_is_their_sum(catalog: Catalog) -> None:
    train = Usage(
        labels={"namespace": "train"},
        gpu_seconds={"compute_bound": 7200.0},
        card_gpu_seconds={"h100-sxm": 7200.0},
        clock_lost_gpu_seconds={"power_cap": 1800.0, "thermal": 360.0, "sync_boost": 0.0},
    )
    serve = Usage(
        labels={"namespace": "serve"},
        gpu_seconds={"compute_bound": 3600.0},
        card_gpu_seconds={"h100-sxm": 3600.0},
        clock_lost_gpu_seconds={"power_cap": 90.0},
    )
    idle = Usage(labels={"namespace": "idle"}, gpu_seconds={"idle": 100.0})
    doc = report(catalog, [train, serve, idle])
    groups = {g["labels"]["namespace"]: g for g in doc["groups"]}
    assert groups["train"]["clock_lost_gpu_seconds"] == 2160.0
    assert groups["train"]["clock_lost_by_cause"] == {"power_cap": 1800.0, "thermal": 360.0}  # no zeros
    assert groups["train"]["savings_gpu_seconds"]["reduced_clock"] == 2160.0
    assert groups["idle"]["clock_lost_gpu_seconds"] == 0.0 and groups["idle"]["clock_lost_by_cause"] == {}
    assert doc["fleet"]["clock_lost_gpu_seconds"] == 2250.0
    assert doc["fleet"]["clock_lost_by_cause"] == {"power_cap": 1890.0, "thermal": 360.0}
    assert doc["fleet"]["savings_gpu_seconds"]["reduced_clock"] == 2250.0
    assert "reduced_clock" in [lever["key"] for lever in doc["levers"]]
    json.dumps(doc, allow_nan=False)
    page = render_html(doc)
    assert "A reduced clock cost 0.625 GPU-hours of compute-bound work." in page
    section = page.split("<h2>GPU-hours lost to a reduced clock</h2>")[1].split("<h2>")[0]
    assert "<th>power cap</th><th>thermal</th>" in section and "sync boost" not in section
    # train: 0.6 GPU-hours of 2, 30 % of its compute-bound time; the fleet's row last
    assert '<td class="name">train</td><td>0.6</td><td>0.5</td><td>0.1</td><td>30.0 %</td>' in section
    assert section.index(">train<") < section.index(">serve<") < section.index("<b>fleet</b>")
    assert ">idle<" not in section


def test_without_the_counter_the_figures_are_unknown_not_zero(catalog: Catalog) -> None:
    doc = report(
        catalog, [Usage(labels={"namespace": "a"}, gpu_seconds={"compute_bound": 10.0})], measured=False
    )
    for row in (doc["groups"][0], doc["fleet"]):
        assert row["clock_lost_gpu_seconds"] is None and row["clock_lost_by_cause"] is None
        assert row["savings_gpu_seconds"]["reduced_clock"] is None
    page = render_html(doc)
    assert "Not measured: the GPU-seconds lost to a reduced clock" in page
    json.dumps(doc, allow_nan=False)


def test_no_reduced_clock_is_said_in_words(catalog: Catalog) -> None:
    page = render_html(
        report(catalog, [Usage(labels={"namespace": "a"}, gpu_seconds={"compute_bound": 10.0})])
    )
    assert "No compute-bound GPU ran below its peak's clock in this range." in page


def test_the_loss_is_read_from_the_raw_counter_by_cause_in_either_dialect() -> None:
    from exporter.report import promql
    from exporter.report.series import NAMESPACE_POD

    matcher = [promql.parse_matcher('cluster="a"')]
    assert promql.window_expr("clock_lost", ("namespace",), 300, level=None, matchers=matcher) == (
        'sum by (namespace, cause) (increase(ridgeline_clock_lost_seconds_total{cluster="a"}[300s]))'
    )
    metricsql = promql.window_expr(
        "clock_lost", ("pod",), 300, level=None, dialect="metricsql", sample_interval=15
    )
    assert (
        metricsql == "sum by (pod, cause) (increase_prometheus(ridgeline_clock_lost_seconds_total[314999ms]))"
    )
    with pytest.raises(ValueError, match="raw counter only"):
        promql.window_expr("clock_lost", ("namespace",), 300, level=NAMESPACE_POD)


def throttled_trace(path: Path, seconds: int) -> Path:
    """GPUS for `seconds` at 1 s: a GEMM (tensor 0.9, DRAM 0.3) at each GPU's clock; GPU 0 moves
    from pod train-0 to train-1 halfway."""
    lines = []
    for i in range(seconds):
        for gpu, (clock, reasons, namespace) in GPUS.items():
            values: dict[int, float | None] = {
                fields.DRAM_ACTIVE: 0.3,
                fields.PIPE_TENSOR_ACTIVE: 0.9,
                fields.GR_ENGINE_ACTIVE: 0.99,
                fields.SM_CLOCK: clock,
                fields.CLOCKS_EVENT_REASONS: float(reasons),
            }
            pod = Attribution(namespace, f"{namespace}-{int(gpu == 0 and 2 * i >= seconds)}", "main")
            lines.append(replay_line(1_800_000_000.0 + i, gpu, values, attribution=pod))
    path.write_text("\n".join(lines) + "\n")
    return path


def lost_by_gpu(text: str) -> dict[tuple[str, str], float]:
    return {
        (s.labels["gpu"], s.labels["cause"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "ridgeline_clock_lost_seconds_total"
    }


def run_report(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "report", *args, "--json", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_on_the_replay_path_the_report_equals_the_daemons_counter(tmp_path: Path) -> None:
    trace = throttled_trace(tmp_path / "t.jsonl", 120)
    with serve_process("--replay", str(trace), "--speed", "max") as (base, _):
        deadline = time.monotonic() + 60
        while "end_of_replay" not in poll(base, "/readyz", 503):
            assert time.monotonic() < deadline, "the replay did not end"
            time.sleep(0.1)
        daemon = lost_by_gpu(http_get(base + "/metrics")[1])
    # 119 integrated seconds each, (1 − k) of them lost; GPU 2 at full clock has no counter at all
    assert daemon[("0", "power_cap")] == pytest.approx(119 * (1 - 1185 / H100_TENSOR_MHZ))
    assert daemon[("1", "thermal")] == pytest.approx(119 * (1 - 1410 / H100_TENSOR_MHZ))
    assert not [key for key in daemon if key[0] == "2"]
    doc = run_report("--replay", str(trace), "--by", "namespace")
    groups = {g["labels"]["namespace"]: g for g in doc["groups"]}
    assert groups["train"]["clock_lost_by_cause"] == pytest.approx(
        {"power_cap": daemon[("0", "power_cap")], "thermal": daemon[("1", "thermal")]}, rel=1e-12
    )
    assert groups["serve"]["clock_lost_gpu_seconds"] == 0.0
    assert doc["fleet"]["savings_gpu_seconds"]["reduced_clock"] == pytest.approx(sum(daemon.values()))
    # GPU 0's counter carries across its pod change: each pod gets what grew while it held it
    pods = {g["labels"]["pod"]: g for g in run_report("--replay", str(trace), "--by", "pod")["groups"]}
    first, second = pods["train-0"]["clock_lost_by_cause"], pods["train-1"]["clock_lost_by_cause"]
    assert first["power_cap"] + second["power_cap"] == pytest.approx(daemon[("0", "power_cap")])
    assert first["power_cap"] == pytest.approx(59 * (1 - 1185 / H100_TENSOR_MHZ))
    assert second["power_cap"] == pytest.approx(60 * (1 - 1185 / H100_TENSOR_MHZ))


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus binary not found (Debian package `prometheus`)")
def test_on_the_prometheus_path_the_loss_is_one_minus_k_of_the_compute_bound_time(tmp_path: Path) -> None:
    """A real Prometheus scrapes `serve` replaying the trace in real time; over the last 30 s,
    each GPU's lost GPU-seconds are (1 − k) of its compute-bound GPU-seconds: both counters grow
    together, so the report's two increases keep that ratio whatever the extrapolation."""
    trace = throttled_trace(tmp_path / "t.jsonl", 120)
    live = tmp_path / "live.jsonl"
    rebased_trace(trace, live, time.time())
    with running_stack(tmp_path) as stack:
        target = stack.start_ridgeline("throttled", "--replay", str(live))
        stack.start_prometheus([{"targets": [target]}], rule_files=[])
        time.sleep(45)
        doc = run_report("--prometheus", stack.prometheus_url, "--since", "30s", "--by", "gpu")
    groups = {g["labels"]["gpu"]: g for g in doc["groups"]}
    for gpu, cause in (("0", "power_cap"), ("1", "thermal")):
        clock = GPUS[int(gpu)][0]
        compute = groups[gpu]["gpu_seconds"]["compute_bound"]
        assert compute > 20, groups[gpu]
        assert groups[gpu]["clock_lost_by_cause"] == pytest.approx(
            {cause: compute * (1 - clock / H100_TENSOR_MHZ)}, rel=1e-3
        )
    assert groups["2"]["clock_lost_gpu_seconds"] == 0.0
    assert doc["fleet"]["clock_lost_gpu_seconds"] == pytest.approx(
        sum(g["clock_lost_gpu_seconds"] for g in groups.values())
    )
