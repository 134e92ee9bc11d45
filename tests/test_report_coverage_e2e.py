"""Coverage, for real: a generated fleet history with two outages (tests/fleet_history.py),
backfilled into a real Prometheus, and `ridgeline report` over it.

* Two nodes' exporters unreachable for 8 minutes while their daemons keep counting: the report
  names both nodes and the stretch, reads the raw counters across it, and every number equals the
  known history within 1 % (without the reading across, the affected namespaces lose minutes).
* One node's daemon down for 6 minutes (its counters start again at 0): that time is in no
  counter, so the report counts what was there, names the node and says how many GPU-seconds it
  expected and did not see — 4 GPUs × 6 minutes, within 1 % — and each group's coverage is its
  known seen time over its seen plus lost time.

The outages are placed where no GPU changes workload within 15 minutes of them, so that "the
GPUs seen before and after × the gap's length" is the exact truth of what was expected.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fleet_history
import pytest
from prometheus_stack import PROMETHEUS, REQUIRES_PROMETHEUS, running_stack
from test_report_e2e import _run, _start_prometheus, assert_matches_truth, report

pytestmark = REQUIRES_PROMETHEUS

PROMTOOL = shutil.which("promtool")
HOURS = 4
QUIET_SECONDS = 900.0
"""No GPU changes workload this close to an outage."""
UNREACHABLE = (frozenset({"node-0000", "node-0001"}), 480.0)
RESTARTED = (frozenset({"node-0002"}), 360.0)


def _quiet_start(fleet: fleet_history.Fleet, after: float, length: float) -> float:
    """The first time on the scrape grid from `after` on (mid-window: 7.5 minutes past a 5-minute
    mark) such that no segment boundary lies within QUIET_SECONDS of [t, t + length]."""
    boundaries = sorted(
        {s.start for g in fleet.gpus for s in g.segments} | {s.end for g in fleet.gpus for s in g.segments}
    )
    t = after
    while t + length + QUIET_SECONDS < fleet.end:
        if not any(t - QUIET_SECONDS < b < t + length + QUIET_SECONDS for b in boundaries):
            return t
        t += 300.0
    raise AssertionError("no quiet stretch for an outage: change the seed")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    assert PROMETHEUS is not None and PROMTOOL is not None
    tmp = tmp_path_factory.mktemp("report-coverage")
    start = (time.time() // 3600 - HOURS - 1) * 3600
    plain = fleet_history.make_fleet(nodes=3, gpus_per_node=4, start=start, hours=HOURS, seed=21)
    first = _quiet_start(plain, start + 3600 + 450, UNREACHABLE[1])
    second = _quiet_start(plain, first + 3600, RESTARTED[1])
    outages = (
        fleet_history.Outage(nodes=UNREACHABLE[0], start=first, end=first + UNREACHABLE[1]),
        fleet_history.Outage(nodes=RESTARTED[0], start=second, end=second + RESTARTED[1], restart=True),
    )
    fleet = fleet_history.Fleet(
        start=plain.start,
        end=plain.end,
        scrape_seconds=plain.scrape_seconds,
        gpus=plain.gpus,
        outages=outages,
    )
    raw = tmp / "raw.om"
    with raw.open("w") as out:
        fleet_history.write_raw(fleet, out)
        out.write("# EOF\n")
    tsdb = tmp / "tsdb"
    _run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(raw), str(tsdb)])
    with running_stack(tmp) as stack:
        _start_prometheus(stack, tmp, tsdb, "prometheus")  # raw blocks only: none overlap
        yield {"url": stack.prometheus_url, "fleet": fleet}


@pytest.mark.parametrize("by", ["namespace", "node"])
def test_outages_are_named_read_across_or_counted_as_missing(
    history: dict[str, Any], by: str, tmp_path: Path
) -> None:
    fleet: fleet_history.Fleet = history["fleet"]
    document = report(history["url"], fleet, tmp_path, "--by", by)
    # every number equals what the counters hold: the unreachable stretch read across
    assert_matches_truth(document, fleet, (by,))
    coverage = document["coverage"]
    across, lost = coverage["stretches"]
    unreachable, restarted = fleet.outages
    for stretch, outage in ((across, unreachable), (lost, restarted)):
        assert stretch["reconstructed"] is True
        assert sorted(stretch["targets"]) == sorted(
            f"cluster={fleet.cluster} {node}" for node in outage.nodes
        )
        assert _epoch(stretch["start"]) <= outage.start and outage.end <= _epoch(stretch["end"])
        assert any(
            f"{len(outage.nodes)} target(s) unseen" in n and n.startswith(stretch["start"])
            for n in document["notes"]
        )
    assert (
        across["expected_gpu_seconds"] - across["seen_gpu_seconds"] <= 0.01 * across["expected_gpu_seconds"]
    )
    known_lost = fleet_history.truth(fleet, (), lost=True)[()].total
    assert known_lost == 4 * RESTARTED[1]
    assert coverage["missing_gpu_seconds"] == pytest.approx(known_lost, rel=0.01)
    seen = fleet_history.truth(fleet, ())[()].total
    assert coverage["ratio"] == pytest.approx(seen / (seen + known_lost), rel=1e-4)
    assert document["fleet"]["coverage"] == pytest.approx(coverage["ratio"], rel=1e-9)
    # each group: seen over seen + lost, its lost time the restarted node's GPUs it held
    missing_by_group = fleet_history.truth(fleet, (by,), lost=True)
    for group in document["groups"]:
        key = (group["labels"].get(by, ""),)
        group_lost = missing_by_group[key].total if key in missing_by_group else 0.0
        group_seen = group["gpu_seconds_total"]
        implied = group_seen * (1.0 / group["coverage"] - 1.0)
        assert implied == pytest.approx(group_lost, abs=0.01 * max(group_lost, RESTARTED[1])), key


def test_the_chart_shades_and_the_page_says_the_coverage(history: dict[str, Any], tmp_path: Path) -> None:
    fleet: fleet_history.Fleet = history["fleet"]
    page = tmp_path / "report.html"
    report(history["url"], fleet, tmp_path, "--by", "namespace", "--out", str(page))
    text = page.read_text()
    assert "Coverage: " in text and "of the expected GPU-time seen" in text
    assert "read across a gap" in text  # the chart's legend: both stretches were read across
    assert "<th>coverage</th>" in text


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
