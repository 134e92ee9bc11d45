"""The recorded GPU time is exact on series that end or come back, on Prometheus and on
VictoriaMetrics with vmalert evaluating rules/ (docs/rules-and-dashboards.md, "VictoriaMetrics").

A two-GPU node: GPU 1 is in pod `ends` for the first 40 s and then in none (that pod's series
end); GPU 0 is in pod `returns` for 40 s, in none for 11 minutes, then in `returns` again (its
label set comes back with the counters it carried meanwhile). The daemon's own pipeline (replay
source, sampler, /metrics encoder) plays the trace in process, and its counters (per GPU, and the
per-workload sums the rules rate), stamped a second apart as a 1 s scrape stores them, are
backfilled into both backends; the rules of rules/ that
record the rate are evaluated every second over that history, by `promtool tsdb
create-blocks-from rules` for Prometheus and by `vmalert -replay` for VictoriaMetrics. The
history ends a minute before the test starts, so the gap costs no wall-clock time.

A 5-minute recorded rate times 300 must be the GPU-seconds the pod's raw counters gained within
that 5-minute window (their largest minus smallest sample in it, read at the recording's own
timestamp). MetricsQL's rate() is the slope between the window's first and last samples, so it
credited an ended or returned series with the whole window: 300 s where 40 s are true.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from prometheus_stack import (
    PROMETHEUS,
    REQUIRES_PROMETHEUS,
    VICTORIA_METRICS,
    VMALERT,
    Stack,
    running_stack,
)
from replay_lines import write_samples
from source_kit import replay_options

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import EndOfStream, create_source

pytestmark = REQUIRES_PROMETHEUS

ROOT = Path(__file__).resolve().parents[1]
RECORDING_RULES = ROOT / "rules" / "ridgeline-recording.rules.yml"
PROMTOOL = shutil.which("promtool")
H100 = "NVIDIA H100 80GB HBM3"
BUSY = {
    fields.DRAM_ACTIVE: 0.77,
    fields.PIPE_TENSOR_ACTIVE: 0.07,
    fields.GR_ENGINE_ACTIVE: 0.96,
    fields.SM_ACTIVE: 0.8,
    fields.SM_CLOCK: 1980.0,
}
FIRST_STRETCH = 40
GAP = 660
"""Longer than the 5-minute window and the 5 minutes before it in which VictoriaMetrics looks for
the previous sample: a label set back after a shorter gap is credited with it (on Prometheus too
while both sides are in one window: the daemon's counters carry across label changes)."""
SECOND_STRETCH = 60
SECONDS = FIRST_STRETCH + GAP + SECOND_STRETCH + 90
RECORDED = "instance_workload:ridgeline_regime_seconds:rate5m"
RAW = "ridgeline_regime_seconds_total"
READ = "ridgeline_workload_regime_seconds_total"
"""What the rules rate: the daemon's per-workload sums of RAW (exporter/sampling/workloads.py)."""
TARGET = {"instance": "127.0.0.1:10295", "job": "ridgeline", "cluster": "exact", "node": "exact"}
"""The labels Prometheus and VictoriaMetrics add to a scraped series (the target's address and
job, and the static labels the live scrape configuration gave the node)."""
TOLERANCE_SECONDS = 4.0
"""Scrape and evaluation jitter at a 1 s interval: a few samples' worth, against 300 s for the fault."""


def _trace(path: Path, start: float) -> Path:
    def pod(name: str) -> Attribution:
        return Attribution("exact", name, "main")

    samples = []
    for second in range(SECONDS):
        back = second >= FIRST_STRETCH + GAP
        returns = pod("returns") if second < FIRST_STRETCH or back else None
        samples.append(Sample(start + second, Entity(0, "GPU-exact-0", H100), dict(BUSY), returns))
        ends = pod("ends") if second < FIRST_STRETCH else None
        samples.append(Sample(start + second, Entity(1, "GPU-exact-1", H100), dict(BUSY), ends))
    return write_samples(path, samples)


def _scrapes(trace: Path) -> dict[str, list[tuple[float, str]]]:
    """The daemon's RAW and READ series after each batch of the trace, by series (labels as a
    scrape stores them): [(the batch's timestamp, the value as /metrics wrote it)]."""
    options = replay_options(path=str(trace), speed=None)
    source = create_source("replay", options)
    source.open()
    sampler = Sampler("replay", options, load_catalog(), InferenceConfig(), source=source)
    endpoint = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=False)
    added = ",".join(f'{name}="{value}"' for name, value in TARGET.items())
    series: dict[str, list[tuple[float, str]]] = {}
    try:
        while True:
            try:
                batch = source.read()
            except EndOfStream:
                break
            sampler.ingest(batch)
            at = max(sample.timestamp for sample in batch)
            body, _ = endpoint.render(None)
            for line in body.decode().splitlines():
                if line.startswith((RAW + "{", READ + "{")):
                    name_labels, value = line.rsplit(" ", 1)
                    series.setdefault(f"{name_labels[:-1]},{added}}}", []).append((at, value))
    finally:
        source.close()
    return series


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command[:4]} failed: {done.stderr[-2000:]}"


def _rule_file(path: Path) -> Path:
    """The groups of rules/ that record RECORDED, as shipped (they read READ only)."""
    groups = yaml.safe_load(RECORDING_RULES.read_text())["groups"]
    chosen = [g for g in groups if any(rule.get("record") == RECORDED for rule in g["rules"])]
    assert chosen, f"no group of {RECORDING_RULES.name} records {RECORDED}"
    path.write_text(yaml.safe_dump({"groups": chosen}))
    return path


def _start_prometheus(stack: Stack, tsdb: Path, name: str) -> subprocess.Popen[bytes]:
    """Prometheus on the backfilled TSDB, scraping nothing and evaluating no rules."""
    assert PROMETHEUS is not None
    config = stack.tmp / "prometheus.yml"
    config.write_text("global: {scrape_interval: 15s}\n")
    process = stack.start(
        name,
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
         "--web.listen-address=127.0.0.1:0", "--log.level=error"],
    )  # fmt: skip
    stack.prometheus_url = f"http://127.0.0.1:{stack.port_of(process, name)}"
    stack.wait_ready(f"{stack.prometheus_url}/-/ready", name)
    return process


def _prometheus(stack: Stack, series: dict[str, list[tuple[float, str]]], rules: Path, start: float) -> Stack:
    """Prometheus over the backfilled raw series and the rules' recordings every second."""
    assert PROMTOOL is not None
    raw = stack.tmp / "raw.om"
    with raw.open("w") as out:
        for family in (RAW, READ):  # a family's lines together, as OpenMetrics wants them
            out.write(f"# TYPE {family.removesuffix('_total')} counter\n")
            for labels, points in series.items():
                if labels.startswith(family + "{"):
                    out.writelines(f"{labels} {value} {at:.3f}\n" for at, value in points)
        out.write("# EOF\n")
    tsdb = stack.tmp / "prometheus-tsdb"
    _run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(raw), str(tsdb)])
    backfill = _start_prometheus(stack, tsdb, "prometheus-backfill")
    recorded = stack.tmp / "prometheus-recorded"
    # --end is exclusive: a second past the history's last sample, so the rules evaluate at it
    _run(
        [PROMTOOL, "tsdb", "create-blocks-from", "rules", f"--start={int(start)}",
         f"--end={int(start) + SECONDS + 1}", f"--url={stack.prometheus_url}",
         f"--output-dir={recorded}", "--eval-interval=1s", str(rules)]
    )  # fmt: skip
    backfill.terminate()
    backfill.wait(timeout=20)
    stack.processes = [p for p in stack.processes if p[1] is not backfill]  # stopped on purpose
    for block in recorded.iterdir():
        block.rename(tsdb / block.name)
    _start_prometheus(stack, tsdb, "prometheus")
    return replace(stack)


def _force_flush(url: str) -> None:
    with urllib.request.urlopen(f"{url}/internal/force_flush", timeout=30):
        pass


def _victoriametrics(
    stack: Stack, series: dict[str, list[tuple[float, str]]], rules: Path, start: float
) -> Stack:
    """VictoriaMetrics over the imported raw series, vmalert's replay of the rules every second
    written back to it."""
    if VICTORIA_METRICS is None or VMALERT is None:
        pytest.fail("victoria-metrics/vmalert not found (Debian package victoria-metrics): "
                    "run scripts/bootstrap --test")  # fmt: skip
    url = stack.start_listening(
        "victoria-metrics",
        [VICTORIA_METRICS, f"-storageDataPath={stack.tmp / 'victoriametrics'}",
         "-httpListenAddr=127.0.0.1:0", "-search.disableCache", "-search.latencyOffset=1s",
         "-loggerLevel=ERROR"],
    )  # fmt: skip
    stack.wait_ready(f"{url}/health", "VictoriaMetrics")
    body = "".join(
        f"{labels} {value} {round(at * 1000)}\n" for labels, points in series.items() for at, value in points
    ).encode()
    request = urllib.request.Request(f"{url}/api/v1/import/prometheus", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 204
    _force_flush(url)

    def rfc3339(at: float) -> str:
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    _run(
        [VMALERT, f"-rule={rules}", f"-datasource.url={url}", f"-remoteWrite.url={url}",
         f"-replay.timeFrom={rfc3339(start)}", f"-replay.timeTo={rfc3339(start + SECONDS)}",
         # One evaluation per query, as live: over a longer query_range VictoriaMetrics finds the
         # previous sample further back than an instant query does (the returning pod's counter
         # from before the gap). The step is -datasource.queryStep (default 5m), not the interval.
         "-evaluationInterval=1s", "-replay.maxDatapointsPerQuery=1", "-datasource.queryStep=1s",
         "-replay.disableProgressBar", "-replay.rulesDelay=0s",
         "-loggerLevel=ERROR"]
    )  # fmt: skip
    _force_flush(url)
    return replace(stack, prometheus_url=url)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Stack], float]]:
    """Both backends over the daemon's history; yields them with the trace's start."""
    tmp = tmp_path_factory.mktemp("rules-vm-exact")
    start = float(int(time.time()) - SECONDS - 60)
    series = _scrapes(_trace(tmp / "exact.jsonl", start))
    rules = _rule_file(tmp / "rate.rules.yml")
    with running_stack(tmp) as stack:
        prometheus = _prometheus(stack, series, rules, start)
        victoriametrics = _victoriametrics(stack, series, rules, start)
        yield {"prometheus": prometheus, "victoriametrics": victoriametrics}, start


def _recorded_and_raw(stack: Stack, pod: str, when: float) -> tuple[float, float] | None:
    """(recorded rate x 300, the raw counters' gain in the same window) for `pod` at the last
    recording up to `when`, or None."""
    last = f'max(timestamp({RECORDED}{{pod="{pod}"}}))'
    latest = stack.api("/api/v1/query", query=last, time=f"{when:.3f}")
    if not latest["result"]:
        return None
    at = float(latest["result"][0]["value"][1])
    value = stack.api("/api/v1/query", query=f'sum({RECORDED}{{pod="{pod}"}}) * 300', time=f"{at:.3f}")
    # the 5 minutes up to the recording's evaluation, 1 ms short (a window is open at its start)
    gain = (
        f'sum(max_over_time({RAW}{{pod="{pod}"}}[299999ms]) - min_over_time({RAW}{{pod="{pod}"}}[299999ms]))'
    )
    truth = stack.api("/api/v1/query", query=gain, time=f"{at:.3f}")
    if not value["result"] or not truth["result"]:
        return None
    return float(value["result"][0]["value"][1]), float(truth["result"][0]["value"][1])


BACKENDS = ("prometheus", "victoriametrics")


def _check(stacks: dict[str, Stack], pod: str, when: float, expected_seconds: float) -> None:
    problems = []
    for backend in BACKENDS:
        found = _recorded_and_raw(stacks[backend], pod, when)
        if found is None:
            problems.append(f"{backend}: no recorded or raw series for pod {pod}")
            continue
        recorded, raw = found
        if abs(raw - expected_seconds) > 15:  # the daemon's start is known to a few seconds
            problems.append(f"{backend}: raw gain {raw:.1f} s, the trace says about {expected_seconds:.0f} s")
        if abs(recorded - raw) > TOLERANCE_SECONDS:
            problems.append(f"{backend}: pod {pod} recorded {recorded:.1f} GPU-s in 5 min, raw {raw:.1f}")
    assert not problems, "\n".join(problems)


def test_a_series_that_ended_is_counted_for_the_time_it_lived(
    stacks: tuple[dict[str, Stack], float],
) -> None:
    backends, start = stacks
    _check(backends, "ends", start + FIRST_STRETCH + 20, FIRST_STRETCH)


def test_a_label_set_that_returns_after_a_gap_is_not_credited_with_it(
    stacks: tuple[dict[str, Stack], float],
) -> None:
    backends, start = stacks
    back = start + FIRST_STRETCH + GAP
    _check(backends, "returns", back + SECOND_STRETCH - 20, SECOND_STRETCH - 20)
