"""The recorded GPU time is exact on series that end or come back, on Prometheus and on
VictoriaMetrics with vmalert evaluating rules/ live (docs/rules-and-dashboards.md, "VictoriaMetrics").

One `ridgeline serve --replay` daemon at wall-clock pace plays a two-GPU node: GPU 1 is in pod
`ends` for the first 40 s and then in none (that pod's series end); GPU 0 is in pod `returns` for
40 s, in none for 11 minutes, then in `returns` again (its label set comes back with the counters
it carried meanwhile). Both backends scrape it and evaluate the rules every second; the module
takes about 13 minutes.

A 5-minute recorded rate times 300 must be the GPU-seconds the pod's raw counters gained within
that 5-minute window (their largest minus smallest sample in it, read at the recording's own
timestamp). MetricsQL's rate() is the slope between the window's first and last samples, so it
credited an ended or returned series with the whole window: 300 s where 40 s are true.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_stack import REQUIRES_PROMETHEUS, Stack, running_stack, wait_for
from replay_lines import write_samples

from exporter import fields
from exporter.sample import Attribution, Entity, Sample

pytestmark = REQUIRES_PROMETHEUS

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
RECORDED = "instance_workload:ridgeline_regime_seconds:rate5m"
RAW = "ridgeline_regime_seconds_total"
TOLERANCE_SECONDS = 4.0
"""Scrape and evaluation jitter at a 1 s interval: a few samples' worth, against 300 s for the fault."""


def _trace(path: Path, start: float) -> Path:
    def pod(name: str) -> Attribution:
        return Attribution("exact", name, "main")

    samples = []
    for second in range(FIRST_STRETCH + GAP + SECOND_STRETCH + 90):
        back = second >= FIRST_STRETCH + GAP
        returns = pod("returns") if second < FIRST_STRETCH or back else None
        samples.append(Sample(start + second, Entity(0, "GPU-exact-0", H100), dict(BUSY), returns))
        ends = pod("ends") if second < FIRST_STRETCH else None
        samples.append(Sample(start + second, Entity(1, "GPU-exact-1", H100), dict(BUSY), ends))
    return write_samples(path, samples)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Stack], float]]:
    """Both backends over the daemon; yields them with the trace's start (wall clock)."""
    tmp = tmp_path_factory.mktemp("rules-vm-exact")
    start = time.time() + 2
    trace = _trace(tmp / "exact.jsonl", start)
    with running_stack(tmp) as stack:
        address = stack.start_ridgeline("exact", "--source", "replay", "--replay", str(trace), "--speed", "1")
        static_configs = [{"targets": [address], "labels": {"cluster": "exact", "node": "exact"}}]
        stack.start_prometheus(static_configs)
        victoriametrics = stack.start_victoriametrics(static_configs)
        yield {"prometheus": stack, "victoriametrics": victoriametrics}, start


def _recorded_and_raw(stack: Stack, pod: str) -> tuple[float, float] | None:
    """(recorded rate x 300, the raw counters' gain in the same window) for `pod`, or None."""
    recorded = stack.query(f'max(timestamp({RECORDED}{{pod="{pod}"}}))')
    if not recorded:
        return None
    at = float(recorded[0]["value"][1])
    value = stack.api("/api/v1/query", query=f'sum({RECORDED}{{pod="{pod}"}}) * 300', time=f"{at:.3f}")
    # the 5 minutes up to the recording's evaluation, 1 ms short (a window is open at its start)
    gain = (
        f'sum(max_over_time({RAW}{{pod="{pod}"}}[299999ms]) - min_over_time({RAW}{{pod="{pod}"}}[299999ms]))'
    )
    truth = stack.api("/api/v1/query", query=gain, time=f"{at:.3f}")
    if not value["result"] or not truth["result"]:
        return None
    return float(value["result"][0]["value"][1]), float(truth["result"][0]["value"][1])


def _wait_until(stack: Stack, wall_clock: float) -> None:
    def reached() -> str | None:
        return None if time.time() >= wall_clock else f"{wall_clock - time.time():.0f} s to go"

    wait_for(reached, stack, "the trace's next stretch", GAP + FIRST_STRETCH + SECOND_STRETCH + 60.0)


BACKENDS = ("prometheus", "victoriametrics")


def _check(stacks: dict[str, Stack], pod: str, expected_seconds: float) -> None:
    problems = []
    for backend in BACKENDS:
        found = _recorded_and_raw(stacks[backend], pod)
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
    _wait_until(backends["prometheus"], start + FIRST_STRETCH + 20)
    _check(backends, "ends", FIRST_STRETCH)


def test_a_label_set_that_returns_after_a_gap_is_not_credited_with_it(
    stacks: tuple[dict[str, Stack], float],
) -> None:
    backends, start = stacks
    back = start + FIRST_STRETCH + GAP
    _wait_until(backends["prometheus"], back + SECOND_STRETCH - 20)
    _check(backends, "returns", SECOND_STRETCH - 20)
