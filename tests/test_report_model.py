"""The report's model (exporter/report/model.py): GPU-hours, the roofline point, the savings bounds
and the JSON document, from hand-made usage whose every answer is computed here by hand."""

from __future__ import annotations

import json
import math

import pytest

from exporter.catalog import Catalog
from exporter.report.model import (
    Provenance,
    ReportOptions,
    Usage,
    build_report,
    group_name,
    levers,
    merge_usage,
)
from exporter.roofline import Thresholds

H100_PEAK = 989.5e12
H100_BANDWIDTH = 3.35e12


def provenance() -> Provenance:
    return Provenance(
        kind="replay",
        location="t.jsonl",
        start=0.0,
        end=3600.0,
        step_seconds=1.0,
        sample_interval_seconds=1.0,
    )


def usage(name: str, **seconds: float) -> Usage:
    return Usage(
        labels={"namespace": name}, gpu_seconds=seconds, card_gpu_seconds={"h100-sxm": sum(seconds.values())}
    )


def doc(catalog: Catalog, groups: list[Usage], fleet: Usage | None = None, **kw: object) -> dict:
    if fleet is None:
        fleet = Usage(labels={})
        for g in groups:
            fleet = fleet.plus(g)
    return build_report(
        groups=groups,
        fleet=fleet,
        workloads=kw.pop("workloads", []),  # type: ignore[arg-type]
        provenance=provenance(),
        catalog=catalog,
        options=ReportOptions(by=("namespace",)),
    )


def test_schema_has_the_issues_fields_and_is_strict_json(catalog: Catalog) -> None:
    d = doc(catalog, [usage("a", compute_bound=100.0, idle=10.0)])
    assert {"range", "by", "groups", "fleet"} <= set(d)
    assert set(d["range"]) >= {"start", "end"}
    group = d["groups"][0]
    assert set(group["gpu_seconds"]) >= {"compute_bound", "memory_bound", "latency_bound", "idle"}
    for key in (
        "idle_allocated_gpu_seconds",
        "flop",
        "dram_bytes",
        "intensity_flop_per_byte",
        "savings_gpu_seconds",
    ):
        assert key in group and key in d["fleet"]
    json.dumps(d, allow_nan=False)


def test_roofline_point_is_sums_over_busy_time(catalog: Catalog) -> None:
    # 1000 busy GPU-seconds (and 500 idle ones) that did 1e17 FLOP over 1e15 bytes: I = 100
    u = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"memory_bound": 1000.0, "idle": 500.0},
        flop=1e17,
        dram_bytes=1e15,
        card_gpu_seconds={"h100-sxm": 1500.0},
    )
    g = doc(catalog, [u])["groups"][0]
    assert g["intensity_flop_per_byte"] == pytest.approx(100.0)
    assert g["achieved_flop_per_second_per_gpu"] == pytest.approx(1e17 / 1000.0)  # not over idle time
    assert g["attainable_flop_per_second"] == pytest.approx(100.0 * H100_BANDWIDTH)  # under the ridge
    assert g["roofline_efficiency"] == pytest.approx(1e14 / (100.0 * H100_BANDWIDTH))
    assert g["card"] == "h100-sxm"


def test_savings_bounds_follow_their_formulas(catalog: Catalog) -> None:
    thresholds = Thresholds()
    ceiling = thresholds.theta * max(thresholds.tensor_wall, thresholds.dram_wall)
    # efficiency 0.1 (below the ceiling): latency-bound bound is 90 % of that time
    flop = 0.1 * H100_PEAK * 3000.0
    u = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"memory_bound": 1000.0, "latency_bound": 2000.0, "idle": 400.0},
        idle_allocated_gpu_seconds=300.0,
        flop=flop,
        dram_bytes=0.0,
        card_gpu_seconds={"h100-sxm": 3400.0},
    )
    g = doc(catalog, [u])["groups"][0]
    assert g["roofline_efficiency"] == pytest.approx(0.1)
    assert g["savings_gpu_seconds"] == pytest.approx(
        {"idle_allocated": 300.0, "memory_bound": 500.0, "latency_bound": 2000.0 * 0.9, "reduced_clock": 0.0}
    )
    # a group above the ceiling is held to it: latency-bound time can be no more efficient
    fast = Usage(
        labels={"namespace": "b"},
        gpu_seconds={"latency_bound": 1000.0},
        flop=0.9 * H100_PEAK * 1000.0,
        card_gpu_seconds={"h100-sxm": 1000.0},
    )
    g = doc(catalog, [fast])["groups"][0]
    assert g["savings_gpu_seconds"]["latency_bound"] == pytest.approx(1000.0 * (1 - ceiling))
    # no card roof: the whole latency-bound time
    unknown = Usage(
        labels={"namespace": "c"}, gpu_seconds={"latency_bound": 1000.0}, card_gpu_seconds={"unknown": 1.0}
    )
    assert doc(catalog, [unknown])["groups"][0]["savings_gpu_seconds"]["latency_bound"] == 1000.0
    assert [lv.key for lv in levers(thresholds)] == [
        "idle_allocated",
        "memory_bound",
        "latency_bound",
        "reduced_clock",
    ]


def test_fleet_savings_are_the_groups_sum(catalog: Catalog) -> None:
    d = doc(catalog, [usage("a", memory_bound=100.0), usage("b", latency_bound=50.0, memory_bound=10.0)])
    assert d["fleet"]["savings_gpu_seconds"]["memory_bound"] == pytest.approx(55.0)
    assert d["fleet"]["gpu_seconds_total"] == pytest.approx(160.0)
    assert [g["labels"]["namespace"] for g in d["groups"]] == ["a", "b"]  # largest first


def test_the_fleet_beyond_its_groups_becomes_an_unlabelled_group(catalog: Catalog) -> None:
    groups = [usage("a", compute_bound=1000.0)]
    fleet = Usage(labels={}, gpu_seconds={"compute_bound": 1000.0, "idle": 500.0})
    d = doc(catalog, groups, fleet)
    rest = [g for g in d["groups"] if not g["labels"]]
    assert len(rest) == 1 and rest[0]["gpu_seconds"]["idle"] == pytest.approx(500.0)
    assert rest[0]["idle_allocated_gpu_seconds"] == 0.0  # nobody holds those GPUs
    # within rounding (0.1 %) of the groups: no extra group
    close = Usage(labels={}, gpu_seconds={"compute_bound": 1000.5})
    assert all(g["labels"] for g in doc(catalog, groups, close)["groups"])


def test_top_workloads_rank_by_regime_time(catalog: Catalog) -> None:
    workloads = [
        Usage(
            labels={"namespace": "x", "pod": "p1"}, gpu_seconds={"memory_bound": 10.0, "latency_bound": 90.0}
        ),
        Usage(labels={"namespace": "x", "pod": "p2"}, gpu_seconds={"memory_bound": 50.0}),
        Usage(labels={}, gpu_seconds={"memory_bound": 500.0}),  # no pod: not a workload
    ]
    d = doc(catalog, [usage("x", memory_bound=60.0, latency_bound=90.0)], workloads=workloads)
    assert [w["labels"]["pod"] for w in d["workloads"]["memory_bound"]] == ["p2", "p1"]
    assert [w["labels"]["pod"] for w in d["workloads"]["latency_bound"]] == ["p1"]
    assert d["workloads"]["latency_bound"][0]["share_of_own_time"] == pytest.approx(0.9)


def test_merge_and_names() -> None:
    merged = merge_usage(
        [Usage(labels={"a": "1"}, flop=1.0), Usage(labels={"a": "1"}, flop=2.0), Usage(labels={})]
    )
    assert [m.flop for m in merged] == [3.0, 0.0]
    assert group_name({"namespace": "ml", "pod": "p"}, ("namespace", "pod")) == "ml/p"
    assert group_name({}, ("namespace",)) == "(no namespace)"
    assert group_name({"pod": "p"}, ("namespace", "pod")) == "-/p"


def test_an_idle_only_group_has_no_roofline_point(catalog: Catalog) -> None:
    g = doc(catalog, [usage("idle", idle=100.0)])["groups"][0]
    assert g["achieved_flop_per_second_per_gpu"] is None and g["roofline_efficiency"] is None
    assert not math.isnan(g["savings_gpu_seconds"]["latency_bound"])


def test_the_fleet_row_is_its_groups_sum_to_the_last_digit(catalog: Catalog) -> None:
    """Measured apart (two queries), the fleet's total differs from its groups' in the last
    digits; the row printed under the groups is their sum, in their order, exactly."""
    groups = [usage("a", memory_bound=0.1, idle=0.7), usage("b", compute_bound=0.2), usage("c", idle=0.3)]
    fleet = Usage(labels={}, gpu_seconds={"memory_bound": 0.1, "compute_bound": 0.2, "idle": 1.0000000000001})
    d = doc(catalog, groups, fleet)
    rows = d["groups"]
    assert d["fleet"]["gpu_seconds_total"] == sum(g["gpu_seconds_total"] for g in rows)
    for regime, seconds in d["fleet"]["gpu_seconds"].items():
        assert seconds == sum(g["gpu_seconds"][regime] for g in rows), regime
    assert all(g["labels"] for g in rows)  # within rounding: no remainder group
