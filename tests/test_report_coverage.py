"""Coverage arithmetic (exporter/report/coverage.py) and its place in the report document, with
hand-made readings: which windows a target went unseen in, what was expected there, and what
the JSON and the page say about it. The e2e half is tests/test_report_coverage_e2e.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from exporter.catalog import load_catalog
from exporter.report import coverage
from exporter.report.model import (
    Coverage,
    CoverageStretch,
    Provenance,
    ReportOptions,
    Usage,
    build_report,
)

STEP = 60.0
INTERVAL = 15.0


def test_the_envelope_is_the_lesser_of_the_highest_before_and_after() -> None:
    assert coverage.envelope([240, 240, 0, 120, 240, 240]) == [240, 240, 240, 240, 240, 240]
    # a target that left (or arrived) is not expected where it is not
    assert coverage.envelope([240, 240, 0, 0]) == [240, 240, 0, 0]
    assert coverage.envelope([0, 0, 240, 240]) == [0, 0, 240, 240]


def test_a_window_is_flagged_only_beyond_two_scrape_intervals_per_gpu() -> None:
    # 4 GPUs, 60 s windows, 15 s scrapes: 2 intervals per GPU is 120 GPU-s of 240
    seen = [240.0, 240.0, 121.0, 119.0, 0.0, 240.0]
    assert coverage.flagged_windows(seen, STEP, INTERVAL) == [3, 4]


def test_runs_join_targets_and_close_windows_and_never_touch_the_ends() -> None:
    units = {
        ("c", "", "j", "a:1", "node-a"): [240.0, 0.0, 240.0, 240.0, 0.0, 240.0, 240.0, 0.0, 240.0, 240.0],
        ("c", "", "j", "b:1", "node-b"): [240.0, 240.0, 0.0, 240.0, 240.0, 240.0, 240.0, 240.0, 240.0, 0.0],
    }
    runs = coverage.find_runs(units, STEP, INTERVAL)
    # windows 1 and 2 (two targets) and 4 (two windows on: widened by one window each, they would
    # overlap) are one run; 7 (three on) another; 9 is the last window, never expected
    assert [(r.first, r.last) for r in runs] == [(1, 4), (7, 7)]
    assert runs[0].units == (("c", "", "j", "a:1", "node-a"), ("c", "", "j", "b:1", "node-b"))


def test_expected_is_the_gpus_before_and_after_times_the_length() -> None:
    seen = [240.0, 240.0, 0.0, 0.0, 240.0]
    assert coverage.expected_over(seen, 1, 3) == 720.0
    assert coverage.expected_between(480.0, 240.0, 3) == 720.0  # the lesser side
    assert coverage.expected_between(None, 240.0, 3) == 720.0  # the range's edge: the other side
    assert coverage.expected_between(None, None, 3) == 0.0


def test_what_is_missing_counts_past_the_tolerance_only() -> None:
    assert coverage.missing(720.0, 400.0, 180.0, INTERVAL) == 320.0
    assert coverage.missing(720.0, 700.0, 180.0, INTERVAL) == 0.0  # a label change's worth
    assert coverage.missing(720.0, 800.0, 180.0, INTERVAL) == 0.0  # more than expected: none


def test_a_target_is_named_by_its_cluster_shard_and_node() -> None:
    assert (
        coverage.unit_name(("gpu-east", "b", "ridgeline", "10.0.0.1:9400", "n1"))
        == "cluster=gpu-east shard=b n1"
    )
    assert coverage.unit_name(("", "", "ridgeline", "10.0.0.1:9400", "")) == "10.0.0.1:9400"


def _doc(measured: Coverage | None) -> dict[str, Any]:
    groups = [
        Usage(labels={"namespace": "a"}, gpu_seconds={"idle": 900.0}),
        Usage(labels={"namespace": "b"}, gpu_seconds={"memory_bound": 1000.0}),
    ]
    return build_report(
        groups=groups,
        fleet=Usage(labels={}, gpu_seconds={"idle": 900.0, "memory_bound": 1000.0}),
        workloads=[],
        provenance=Provenance(
            kind="prometheus",
            location="http://p",
            start=0.0,
            end=3600.0,
            step_seconds=60.0,
            sample_interval_seconds=15.0,
            coverage=measured,
        ),
        catalog=load_catalog(),
        options=ReportOptions(by=("namespace",)),
    )


def test_the_document_gives_the_fleet_and_each_group_seen_over_expected() -> None:
    measured = Coverage(
        stretches=(
            CoverageStretch(
                start=600.0,
                end=900.0,
                expected_gpu_seconds=1200.0,
                seen_gpu_seconds=1100.0,
                reconstructed=False,
                targets=("cluster=x n1",),
            ),
        ),
        group_missing={(("namespace", "a"),): 100.0},
    )
    doc = _doc(measured)
    fleet, groups = doc["fleet"], {g["labels"]["namespace"]: g for g in doc["groups"]}
    assert groups["a"]["coverage"] == pytest.approx(900.0 / 1000.0)
    assert groups["b"]["coverage"] == 1.0
    assert fleet["coverage"] == pytest.approx(1900.0 / 2000.0)
    block = doc["coverage"]
    assert block["missing_gpu_seconds"] == 100.0 and block["expected_gpu_seconds"] == 2000.0
    (stretch,) = block["stretches"]
    assert stretch["ratio"] == pytest.approx(1100.0 / 1200.0) and stretch["targets"] == ["cluster=x n1"]
    assert stretch["start"] == "1970-01-01T00:10:00Z" and stretch["seconds"] == 300.0


def test_an_unmeasured_report_says_null_not_full() -> None:
    doc = _doc(None)
    assert doc["coverage"] is None and doc["fleet"]["coverage"] is None
    assert all(g["coverage"] is None for g in doc["groups"])


def test_the_page_shows_coverage_and_shades_the_unseen_stretch() -> None:
    from exporter.report.render import render_html, timeline_figure

    measured = Coverage(
        stretches=(
            CoverageStretch(
                start=600.0,
                end=900.0,
                expected_gpu_seconds=1200.0,
                seen_gpu_seconds=1100.0,
                reconstructed=False,
                targets=("n1",),
            ),
            CoverageStretch(
                start=1800.0,
                end=2100.0,
                expected_gpu_seconds=1200.0,
                seen_gpu_seconds=1200.0,
                reconstructed=True,
                targets=("n2",),
            ),
        ),
    )
    doc = _doc(measured)
    page = render_html(doc)
    assert "Coverage: 95.0 % of the expected GPU-time seen" in page and "<th>coverage</th>" in page
    figure = timeline_figure(doc)
    axes = figure.axes[0]
    red = [p for p in axes.patches if p.get_alpha() == pytest.approx(0.12)]
    hatched = [p for p in axes.patches if p.get_hatch() == "//"]
    assert len(red) == 1 and len(hatched) == 1
    assert "read across a gap" in [t.get_text() for t in figure.legends[0].get_texts()]
    plain = render_html(_doc(Coverage()))
    assert "<th>coverage</th>" not in plain and "Coverage: " not in plain
    assert "100.0 % of the expected GPU-time seen" in plain


def test_a_shards_remainder_is_taken_within_the_shard_before_the_shards_are_summed() -> None:
    """Shard a's pods account for its GPUs but for a rounding's worth (0.9 GPU-s, under the
    remainder's threshold: left out in its own report); shard b has no pods (its whole fleet is
    its remainder). Taken once over the sum, the 0.9 GPU-s would ride along with b's remainder
    and the global view would differ from the shards' reports summed."""
    from exporter.report.prometheus import _with_remainders

    east_a, east_b = {"cluster": "east", "shard": "a"}, {"cluster": "east", "shard": "b"}
    groups = [Usage(labels={"namespace": "llm", **east_a}, gpu_seconds={"memory_bound": 1000.0})]
    fleets = {
        ("east", "a"): Usage(labels=east_a, gpu_seconds={"memory_bound": 1000.9}),
        ("east", "b"): Usage(labels=east_b, gpu_seconds={"idle": 500.0}, idle_allocated_gpu_seconds=500.0),
    }
    rows, fleet = _with_remainders(groups, fleets, ("namespace",))
    by_name = {tuple(sorted(u.labels.items())): u for u in rows}
    assert by_name[(("namespace", "llm"),)].gpu_seconds == {"memory_bound": 1000.0}
    rest = by_name[()]
    assert rest.gpu_seconds.get("memory_bound", 0.0) == 0.0 and rest.gpu_seconds["idle"] == 500.0
    assert rest.idle_allocated_gpu_seconds == 500.0
    assert fleet.total_gpu_seconds == 1500.0  # the rows' sum: nothing left for the model to take again
    doc = build_report(
        groups=rows, fleet=fleet, workloads=[],
        provenance=Provenance(kind="prometheus", location="http://p", start=0.0, end=60.0, step_seconds=60.0,
                              sample_interval_seconds=15.0),
        catalog=load_catalog(), options=ReportOptions(by=("namespace",)),
    )  # fmt: skip
    assert doc["fleet"]["gpu_seconds"]["memory_bound"] == 1000.0


def _plan(windows: int) -> Any:
    """A global server's plan: 5-minute windows, pods recorded, the fleet from cluster:*."""
    from exporter.report.prometheus import _Plan
    from exporter.report.series import CLUSTER, NAMESPACE_POD

    end = 300.0 * windows
    return _Plan(
        dialect="promql", sample_interval=None, step=300, wanted_start=0.0, wanted_end=end, start=0.0,
        end=end, raw_present=False, level=NAMESPACE_POD, workload_level=NAMESPACE_POD,
        fleet_level=CLUSTER, covered=set(), lookback=90.0,
    )  # fmt: skip


def _recorded(plan: Any) -> Any:
    from exporter.report.prometheus import _Stretch
    from exporter.report.series import CLUSTER, NAMESPACE_POD

    return _Stretch(start=plan.start, end=plan.end, level=NAMESPACE_POD, fleet_level=CLUSTER)


def test_a_shards_remainder_is_taken_over_the_windows_its_fleet_was_read_in() -> None:
    """Shard b's cluster:* reading is missing in three windows and short in a fourth (one GPU's of
    three: a late rule evaluation) while its node-level readings are whole: taken over the range,
    its remainder would lose its pods' GPU-seconds there too. Its fleet there is its groups'
    instead, the remainder the other windows', and coverage counts the ungrouped GPU-seconds not
    seen (the end-to-end half, against a real Prometheus: tests/test_report_fleet_gaps.py)."""
    from exporter.report import prometheus as p
    from exporter.report.series import CLUSTER

    plan = _plan(12)
    stretch = _recorded(plan)
    a, b = ("east", "a"), ("east", "b")
    units = {(*a, "ridgeline", "na:1", "na"): [900.0] * 12, (*b, "ridgeline", "nb:1", "nb"): [900.0] * 12}
    ends = [300.0 * (i + 1) for i in range(12)]
    busy = {"compute_bound": 600.0, "latency_bound": 300.0}
    readings = {
        a: {t: Usage(labels={}, gpu_seconds=busy) for t in ends},
        b: {
            t: Usage(labels={}, gpu_seconds={"memory_bound": 900.0})
            for t in ends
            if t not in (2100, 2400, 3300)
        },
    }
    readings[b][3000.0] = Usage(labels={}, gpu_seconds={"memory_bound": 300.0})
    read = p._GroupReads(stretches=[stretch], jobs=[[]], by=("namespace", "cluster", "shard"))
    found = p._fleet_holes(plan, read, [stretch], p._part_units(units), readings, 60.0)
    want = [(b, 1800.0, 2400.0, 1800.0), (b, 2700.0, 3300.0, 1800.0)]
    assert [(h.part, h.start, h.end, h.expected) for h in found] == want
    # b's pod holds two of its three GPUs: its groups there are b's fleet there
    pod = [Usage(labels={}, gpu_seconds={"memory_bound": 2 * (h.end - h.start)}) for h in found]
    holes = [replace(h, groups=g) for h, g in zip(found, pod, strict=True)]
    fleets = {part: p._sum_of(list(windows.values())) for part, windows in readings.items()}
    pods = {"train": ("compute_bound", a), "serve": ("memory_bound", b)}
    groups = [
        Usage(labels={"namespace": name, "cluster": part[0], "shard": part[1]}, gpu_seconds={regime: 7200.0})
        for name, (regime, part) in pods.items()
    ]
    rows, fleet = p._with_remainders(groups, p._patched(fleets, readings, holes), ("namespace",))
    rest = next(u for u in rows if not u.labels)
    # a's ungrouped GPU throughout; b's over the eight windows its fleet was read in, not those less
    # its pods' GPU-seconds in the other four (8 x 900 + 300 - 7200 = 300)
    assert rest.gpu_seconds["latency_bound"] == 3600.0 and rest.gpu_seconds["memory_bound"] == 8 * 300.0
    assert fleet.total_gpu_seconds == 3 * 3600.0 + 2 * 3600.0 + 8 * 300.0
    spans = p._joined(holes, 60.0)
    assert [(s.start, s.end, s.missing) for s in spans] == [(1800.0, 2400.0, 600.0), (2700.0, 3300.0, 600.0)]
    measured = p._with_holes(Coverage(), spans, ("namespace",))
    assert measured.missing_gpu_seconds == 1200.0 and measured.group_missing == {(): 1200.0}
    assert [s.targets for s in measured.stretches] == [("cluster=east shard=b fleet totals",)] * 2
    (note,) = p._hole_notes(spans, CLUSTER)
    assert note.startswith("cluster=east shard=b: fleet totals (cluster:*) missing or short for 20 min"), note
    assert "0.333 of the 1 GPU-hours its targets reported there" in note


def test_a_shards_fleet_within_tolerance_of_its_targets_is_no_hole() -> None:
    """The cluster level is recorded an evaluation after the node level: a fleet a little short of
    its targets (up to two evaluation intervals per GPU) is the levels' lag, not a missing reading;
    a window read raw (not covered by the recorded levels) is no hole either (a gap, if empty)."""
    from exporter.report import prometheus as p

    plan = _plan(2)
    units = p._part_units({("east", "b", "ridgeline", "nb:1", "nb"): [900.0, 900.0]})
    lagged, late = 900.0 - 3 * 119.0, 900.0 - 3 * 121.0  # 3 GPUs, 119 and 121 GPU-s each short
    readings = {("east", "b"): {300.0: Usage(labels={}, gpu_seconds={"idle": lagged}),
                                600.0: Usage(labels={}, gpu_seconds={"idle": late})}}  # fmt: skip
    assert p._short_windows(plan, [_recorded(plan)], units, readings, 60.0) == {("east", "b"): [600.0]}
    raw = replace(_recorded(plan), level=None, fleet_level=None)
    assert p._short_windows(plan, [raw], units, readings, 60.0) == {}


def test_a_shard_with_groups_and_no_fleet_reading_anywhere_is_named() -> None:
    """Without node-level readings of shard c (no hole can be measured) and without a single
    cluster:* reading of it, its groups are all there is: no remainder, and a note says so; a
    shard read in some window, or whose holes were found, needs none."""
    from exporter.report import prometheus as p
    from exporter.report.series import CLUSTER

    groups = [
        Usage(labels={"namespace": "x", "cluster": "east", "shard": "a"}, gpu_seconds={"idle": 60.0}),
        Usage(labels={"namespace": "y", "cluster": "west"}, gpu_seconds={"idle": 60.0}),
    ]
    readings = {("east", "a"): {300.0: Usage(labels={}, gpu_seconds={"idle": 90.0})}}
    (note,) = p._unread_notes(groups, readings, [], CLUSTER)
    assert note.startswith("cluster=west: no fleet totals (cluster:*) in the range"), note
    hole = p._Hole(part=("west", ""), start=0.0, end=300.0, stretch=0, expected=60.0)
    assert p._unread_notes(groups, readings, [hole], CLUSTER) == []
