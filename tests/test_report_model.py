"""The report's model (exporter/report/model.py): GPU-hours, the roofline point, the savings bounds
and the JSON document, from hand-made usage whose every answer is computed here by hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from exporter.catalog import Catalog
from exporter.report.model import (
    Provenance,
    ReportOptions,
    TimelinePoint,
    Usage,
    Window,
    build_report,
    group_name,
    iso_time,
    levers,
    merge_usage,
)
from exporter.roofline import REGIMES, Thresholds

H100_PEAK = 989.5e12
H100_BANDWIDTH = 3.35e12


def provenance(measured: bool = True) -> Provenance:
    """An hour of replay at 1 s; `measured`: whether the source could tell clock loss."""
    return Provenance(
        kind="replay",
        location="t.jsonl",
        start=0.0,
        end=3600.0,
        step_seconds=1.0,
        sample_interval_seconds=1.0,
        clock_loss_measured=measured,
    )


def every_regime(**seconds: float) -> dict[str, float]:
    """A per-regime figure as the document writes it: every regime, 0 where there was none."""
    return {r: seconds.get(r, 0.0) for r in REGIMES}


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


# -- the arithmetic, field by field: each test below names the line it guards ---------------------


def test_plus_adds_every_field_and_keeps_its_own_labels() -> None:
    a = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"memory_bound": 1.0, "idle": 2.0},
        idle_allocated_gpu_seconds=3.0,
        flop=5.0,
        dram_bytes=7.0,
        card_gpu_seconds={"h100-sxm": 11.0},
    )
    b = Usage(
        labels={"namespace": "b"},
        gpu_seconds={"idle": 20.0, "compute_bound": 40.0},
        idle_allocated_gpu_seconds=30.0,
        flop=50.0,
        dram_bytes=70.0,
        card_gpu_seconds={"h100-sxm": 110.0, "a100-sxm4-80gb": 130.0},
    )
    total = a.plus(b)
    assert total.labels == {"namespace": "a"}
    assert total.gpu_seconds == {"memory_bound": 1.0, "idle": 22.0, "compute_bound": 40.0}
    assert total.idle_allocated_gpu_seconds == 33.0
    assert total.flop == 55.0
    assert total.dram_bytes == 77.0
    assert total.card_gpu_seconds == {"h100-sxm": 121.0, "a100-sxm4-80gb": 130.0}
    # the addends are left as they were (the sums are new mappings)
    assert a.gpu_seconds == {"memory_bound": 1.0, "idle": 2.0} and a.card_gpu_seconds == {"h100-sxm": 11.0}


def test_totals_count_the_regimes_and_busy_time_only_the_placed_ones() -> None:
    u = Usage(
        labels={},
        gpu_seconds={
            "memory_bound": 1.0,
            "compute_bound": 10.0,
            "latency_bound": 100.0,
            "idle": 1000.0,
            "unknown": 10000.0,
            "not_a_regime": 1e9,  # a key no regime has is not time
        },
    )
    assert u.total_gpu_seconds == 11111.0
    assert u.busy_gpu_seconds == 111.0
    assert Usage(labels={}).total_gpu_seconds == 0.0 and Usage(labels={}).busy_gpu_seconds == 0.0


def test_merge_keys_on_the_labels_in_any_order_and_keeps_first_seen_order() -> None:
    merged = merge_usage(
        [
            Usage(labels={"namespace": "b", "pod": "p"}, flop=1.0, gpu_seconds={"idle": 1.0}),
            Usage(labels={"namespace": "a"}, flop=10.0),
            Usage(labels={"pod": "p", "namespace": "b"}, flop=100.0, gpu_seconds={"idle": 2.0}),
        ]
    )
    assert [dict(m.labels) for m in merged] == [{"namespace": "b", "pod": "p"}, {"namespace": "a"}]
    assert [m.flop for m in merged] == [101.0, 10.0]
    assert merged[0].gpu_seconds == {"idle": 3.0}


def test_the_document_carries_the_range_source_resolution_gaps_and_timeline(catalog: Catalog) -> None:
    where = Provenance(
        kind="prometheus",
        location="http://prom:9090",
        start=1_700_000_000.0,
        end=1_700_003_600.5,
        step_seconds=60.0,
        sample_interval_seconds=15.0,
        series={"whole range": "recorded"},
        gaps=(Window(start=1_700_000_100.0, end=1_700_000_400.0),),
        timeline=(TimelinePoint(end=1_700_000_060.0, gpus={"idle": 2.0, "memory_bound": 0.5}),),
        notes=("a note",),
    )
    options = ReportOptions(by=("namespace", "pod"), precision="fp16", thresholds=Thresholds(theta=0.5))
    u = usage("a", idle=10.0)
    d = build_report(groups=[u], fleet=u, workloads=[], provenance=where, catalog=catalog, options=options)
    assert d["schema"] == "ridgeline.report/v1"
    assert d["range"] == {
        "start": "2023-11-14T22:13:20Z",
        "end": "2023-11-14T23:13:20.500000Z",
        "start_timestamp": 1_700_000_000.0,
        "end_timestamp": 1_700_003_600.5,
        "seconds": 3600.5,
    }
    assert d["by"] == ["namespace", "pod"]
    assert d["source"] == {
        "kind": "prometheus",
        "location": "http://prom:9090",
        "series": {"whole range": "recorded"},
    }
    assert d["resolution"] == {"step_seconds": 60.0, "sample_interval_seconds": 15.0}
    assert d["gaps"] == [{"start": "2023-11-14T22:15:00Z", "end": "2023-11-14T22:20:00Z", "seconds": 300.0}]
    assert d["notes"] == ["a note"]
    assert d["precision"] == "fp16"
    assert d["thresholds"] == {"theta": 0.5, "dram_wall": 0.8, "tensor_wall": 0.93}
    formulas = {lv["key"]: lv["formula"] for lv in d["levers"]}
    assert [lv["key"] for lv in d["levers"]][:3] == ["idle_allocated", "memory_bound", "latency_bound"]
    assert formulas["memory_bound"] == "S ≤ T_memory × 0.5"
    assert "= 0.465)" in formulas["latency_bound"]  # θ·max(walls) = 0.5 × 0.93
    # every regime in every timeline point, 0 where the window had none
    assert d["timeline"] == [
        {
            "end": 1_700_000_060.0,
            "gpus": every_regime(memory_bound=0.5, idle=2.0),
        }
    ]
    json.dumps(d, allow_nan=False)


def test_the_cards_table_holds_each_roof_used_at_the_reports_precision(catalog: Catalog) -> None:
    a100 = Usage(
        labels={"namespace": "b"}, gpu_seconds={"idle": 1.0}, card_gpu_seconds={"a100-sxm4-80gb": 1.0}
    )
    d = doc(catalog, [usage("a", idle=1.0), a100])
    assert list(d["cards"]) == ["a100-sxm4-80gb", "h100-sxm"]  # sorted by key
    h100 = d["cards"]["h100-sxm"]
    assert h100["peak_flop_per_second"] == pytest.approx(H100_PEAK)
    assert h100["bandwidth_bytes_per_second"] == pytest.approx(H100_BANDWIDTH)
    assert h100["ridge_flop_per_byte"] == pytest.approx(H100_PEAK / H100_BANDWIDTH)
    fp8 = build_report(
        groups=[usage("a", idle=1.0)],
        fleet=usage("a", idle=1.0),
        workloads=[],
        provenance=provenance(),
        catalog=catalog,
        options=ReportOptions(by=("namespace",), precision="fp8"),
    )
    assert fp8["cards"]["h100-sxm"]["peak_flop_per_second"] == pytest.approx(2 * H100_PEAK)


def test_the_fleet_row_has_the_fleets_work_and_its_groups_time(catalog: Catalog) -> None:
    """Time and savings are the rows' sums; FLOPs and bytes (and so the fleet's roofline point)
    are the separately measured fleet's."""
    a = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"memory_bound": 100.0, "latency_bound": 40.0},
        idle_allocated_gpu_seconds=0.0,
        flop=1e15,
        dram_bytes=1e13,
        card_gpu_seconds={"h100-sxm": 140.0},
    )
    b = Usage(
        labels={"namespace": "b"},
        gpu_seconds={"compute_bound": 60.0, "idle": 20.0},
        idle_allocated_gpu_seconds=15.0,
        flop=3e15,
        dram_bytes=1e13,
        card_gpu_seconds={"h100-sxm": 80.0},
    )
    fleet = a.plus(b)
    d = doc(catalog, [a, b], fleet)
    row = d["fleet"]
    assert row["labels"] == {}
    assert row["flop"] == 4e15 and row["dram_bytes"] == 2e13
    assert row["intensity_flop_per_byte"] == pytest.approx(200.0)
    assert row["busy_gpu_seconds"] == 200.0
    assert row["achieved_flop_per_second_per_gpu"] == pytest.approx(4e15 / 200.0)
    assert row["card"] == "h100-sxm"
    assert row["idle_allocated_gpu_seconds"] == 15.0
    assert row["gpu_seconds"] == every_regime(
        memory_bound=100.0, compute_bound=60.0, latency_bound=40.0, idle=20.0
    )
    assert row["gpu_seconds_total"] == 220.0
    groups = {g["labels"]["namespace"]: g for g in d["groups"]}
    for lever in ("idle_allocated", "memory_bound", "latency_bound"):
        expected = groups["a"]["savings_gpu_seconds"][lever] + groups["b"]["savings_gpu_seconds"][lever]
        assert row["savings_gpu_seconds"][lever] == expected, lever
    assert row["savings_gpu_seconds"]["idle_allocated"] == 15.0
    assert row["savings_gpu_seconds"]["memory_bound"] == 50.0


def test_a_fleet_without_cards_takes_its_groups_cards(catalog: Catalog) -> None:
    a = Usage(
        labels={"namespace": "a"}, gpu_seconds={"idle": 10.0}, card_gpu_seconds={"a100-sxm4-80gb": 10.0}
    )
    b = Usage(labels={"namespace": "b"}, gpu_seconds={"idle": 1.0}, card_gpu_seconds={"h100-sxm": 1.0})
    bare = Usage(labels={}, gpu_seconds={"idle": 11.0})
    row = doc(catalog, [a, b], bare)["fleet"]
    assert row["cards_gpu_seconds"] == {"a100-sxm4-80gb": 10.0, "h100-sxm": 1.0}
    assert row["card"] == "a100-sxm4-80gb"
    # a fleet with its own card time keeps it
    own = Usage(labels={}, gpu_seconds={"idle": 11.0}, card_gpu_seconds={"h100-sxm": 11.0})
    assert doc(catalog, [a, b], own)["fleet"]["cards_gpu_seconds"] == {"h100-sxm": 11.0}


def test_groups_sort_by_time_then_by_labels(catalog: Catalog) -> None:
    rows = doc(catalog, [usage("b", idle=5.0), usage("c", idle=9.0), usage("a", idle=5.0)])["groups"]
    assert [g["labels"]["namespace"] for g in rows] == ["c", "a", "b"]


def test_the_remainder_holds_what_the_groups_miss_regime_by_regime(catalog: Catalog) -> None:
    group = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"memory_bound": 100.0, "idle": 100.0},
        idle_allocated_gpu_seconds=40.0,
        flop=1e15,
        dram_bytes=1e13,
        card_gpu_seconds={"h100-sxm": 200.0},
    )
    fleet = Usage(
        labels={},
        # 0.0001 s more memory-bound time: below 0.1 % of the remainder, rounding, so 0
        gpu_seconds={"memory_bound": 100.0001, "idle": 300.0, "latency_bound": 50.0},
        idle_allocated_gpu_seconds=90.0,
        flop=3e15,
        dram_bytes=0.5e13,  # fewer bytes than the groups: never a negative remainder
    )
    d = doc(catalog, [group], fleet)
    rest = next(g for g in d["groups"] if not g["labels"])
    assert rest["gpu_seconds"] == every_regime(latency_bound=50.0, idle=200.0)
    assert rest["idle_allocated_gpu_seconds"] == 50.0  # the fleet's 90 less the group's 40
    assert rest["flop"] == 2e15
    assert rest["dram_bytes"] == 0.0
    assert rest["card"] is None  # no card time of its own
    assert d["fleet"]["gpu_seconds_total"] == pytest.approx(450.0)
    # allocated idle time beyond the remainder's idle time is held to it
    more = fleet.plus(Usage(labels={}, idle_allocated_gpu_seconds=1000.0))
    rest = next(g for g in doc(catalog, [group], more)["groups"] if not g["labels"])
    assert rest["idle_allocated_gpu_seconds"] == 200.0
    # and the groups holding more allocated idle time than the fleet leave the remainder none
    fewer = Usage(labels={}, gpu_seconds=fleet.gpu_seconds, idle_allocated_gpu_seconds=10.0)
    rest = next(g for g in doc(catalog, [group], fewer)["groups"] if not g["labels"])
    assert rest["idle_allocated_gpu_seconds"] == 0.0


def test_the_remainder_threshold_is_a_thousandth_of_the_fleet(catalog: Catalog) -> None:
    groups = [usage("a", idle=999.0)]
    at = Usage(labels={}, gpu_seconds={"idle": 1000.0})  # 1 of 1000: exactly the share, rounding
    assert all(g["labels"] for g in doc(catalog, groups, at)["groups"])
    above = Usage(labels={}, gpu_seconds={"idle": 1000.01})
    rest = [g for g in doc(catalog, groups, above)["groups"] if not g["labels"]]
    assert len(rest) == 1 and rest[0]["gpu_seconds"]["idle"] == pytest.approx(1.01)
    # an empty fleet has no remainder, whatever the groups hold
    assert all(g["labels"] for g in doc(catalog, groups, Usage(labels={}))["groups"])


def test_the_dominant_card_is_the_one_with_most_time_ties_to_the_first_key(catalog: Catalog) -> None:
    def card_of(cards: dict[str, float]) -> object:
        u = Usage(labels={"namespace": "a"}, gpu_seconds={"idle": 1.0}, card_gpu_seconds=cards)
        return doc(catalog, [u])["groups"][0]["card"]

    assert card_of({"h100-sxm": 1.0, "a100-sxm4-80gb": 2.0}) == "a100-sxm4-80gb"
    assert card_of({"h100-sxm": 2.0, "a100-sxm4-80gb": 2.0}) == "a100-sxm4-80gb"
    assert card_of({"h100-sxm": 0.0}) is None  # no time on it: no card
    assert card_of({}) is None


def test_a_reference_only_or_unknown_card_gives_no_roof(catalog: Catalog) -> None:
    for key in ("mi300x", "no-such-card"):
        u = Usage(
            labels={"namespace": "a"},
            gpu_seconds={"memory_bound": 10.0},
            flop=1e12,
            dram_bytes=1e10,
            card_gpu_seconds={key: 10.0},
        )
        d = doc(catalog, [u])
        g = d["groups"][0]
        assert g["card"] == key and d["cards"] == {}, key
        assert g["attainable_flop_per_second"] is None and g["roofline_efficiency"] is None
        assert g["intensity_flop_per_byte"] == pytest.approx(100.0)  # the point needs no roof


def test_the_roofline_point_above_the_ridge_and_without_bytes(catalog: Catalog) -> None:
    # I = 1000 FLOP/byte, above the H100's ridge (295): attainable is the peak
    above = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"compute_bound": 100.0},
        flop=0.5 * H100_PEAK * 100.0,
        dram_bytes=0.5 * H100_PEAK * 100.0 / 1000.0,
        card_gpu_seconds={"h100-sxm": 100.0},
    )
    g = doc(catalog, [above])["groups"][0]
    assert g["attainable_flop_per_second"] == pytest.approx(H100_PEAK)
    assert g["roofline_efficiency"] == pytest.approx(0.5)
    # FLOPs and no bytes: an infinite intensity, written null, measured against the peak
    no_bytes = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"compute_bound": 100.0},
        flop=0.25 * H100_PEAK * 100.0,
        card_gpu_seconds={"h100-sxm": 100.0},
    )
    g = doc(catalog, [no_bytes])["groups"][0]
    assert g["intensity_flop_per_byte"] is None
    assert g["attainable_flop_per_second"] == pytest.approx(H100_PEAK)
    assert g["roofline_efficiency"] == pytest.approx(0.25)
    # bytes and no FLOPs: intensity 0, achieved 0, and the roof at I = 0 is 0: no efficiency
    no_flop = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"memory_bound": 100.0},
        dram_bytes=1e12,
        card_gpu_seconds={"h100-sxm": 100.0},
    )
    g = doc(catalog, [no_flop])["groups"][0]
    assert g["intensity_flop_per_byte"] == 0.0
    assert g["achieved_flop_per_second_per_gpu"] == 0.0
    assert g["attainable_flop_per_second"] == 0.0 and g["roofline_efficiency"] is None
    # more achieved than attainable (a sum over mixed intervals): efficiency is held to 1
    over = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"compute_bound": 100.0},
        flop=2 * H100_PEAK * 100.0,
        card_gpu_seconds={"h100-sxm": 100.0},
    )
    assert doc(catalog, [over])["groups"][0]["roofline_efficiency"] == 1.0


def test_a_group_row_carries_its_inputs(catalog: Catalog) -> None:
    u = Usage(
        labels={"pod": "p", "namespace": "a"},
        gpu_seconds={"memory_bound": 3.0, "unknown": 4.0},
        idle_allocated_gpu_seconds=2.0,
        flop=5.0,
        dram_bytes=6.0,
        card_gpu_seconds={"h100-sxm": 6.0, "a100-sxm4-80gb": 1.0},
    )
    g = doc(catalog, [u])["groups"][0]
    assert list(g["labels"]) == ["namespace", "pod"]  # sorted
    assert g["cards_gpu_seconds"] == {"a100-sxm4-80gb": 1.0, "h100-sxm": 6.0}
    assert list(g["cards_gpu_seconds"]) == ["a100-sxm4-80gb", "h100-sxm"]
    assert g["gpu_seconds"] == every_regime(memory_bound=3.0, unknown=4.0)
    assert g["gpu_seconds_total"] == 7.0 and g["busy_gpu_seconds"] == 3.0
    assert g["idle_allocated_gpu_seconds"] == 2.0 and g["flop"] == 5.0 and g["dram_bytes"] == 6.0
    assert g["savings_gpu_seconds"]["idle_allocated"] == 2.0
    assert g["savings_gpu_seconds"]["memory_bound"] == 1.5


def test_a_latency_bound_group_without_work_saves_all_its_latency_time(catalog: Catalog) -> None:
    u = usage("a", latency_bound=80.0)
    g = doc(catalog, [u])["groups"][0]
    assert g["achieved_flop_per_second_per_gpu"] is None and g["roofline_efficiency"] is None
    assert g["savings_gpu_seconds"]["latency_bound"] == 80.0


def test_top_lists_are_cut_at_n_and_rank_ties_by_labels(catalog: Catalog) -> None:
    workloads = [
        Usage(labels={"namespace": "x", "pod": f"p{i}"}, gpu_seconds={"memory_bound": s, "idle": 10.0})
        for i, s in enumerate([5.0, 7.0, 7.0, 0.0, 1.0])
    ]
    d = build_report(
        groups=[usage("x", idle=1.0)],
        fleet=usage("x", idle=1.0),
        workloads=workloads,
        provenance=provenance(),
        catalog=catalog,
        options=ReportOptions(by=("namespace",), top=3),
    )
    ranked = d["workloads"]["memory_bound"]
    assert [w["labels"]["pod"] for w in ranked] == ["p1", "p2", "p0"]
    first = ranked[0]
    assert first["labels"] == {"namespace": "x", "pod": "p1"}
    assert first["gpu_seconds"] == 7.0
    assert first["gpu_seconds_total"] == 17.0
    assert first["share_of_own_time"] == pytest.approx(7.0 / 17.0)
    assert first["savings_gpu_seconds"] == 3.5
    assert first["card"] is None and first["intensity_flop_per_byte"] is None
    assert d["workloads"]["latency_bound"] == []  # none had any: zero is not a place on the list


def test_a_top_entry_carries_its_rows_point(catalog: Catalog) -> None:
    u = Usage(
        labels={"namespace": "x", "pod": "p"},
        gpu_seconds={"latency_bound": 100.0},
        flop=0.1 * H100_PEAK * 100.0,
        dram_bytes=0.1 * H100_PEAK * 100.0 / 1000.0,
        card_gpu_seconds={"h100-sxm": 100.0},
    )
    entry = doc(catalog, [usage("x", idle=1.0)], workloads=[u])["workloads"]["latency_bound"][0]
    assert entry["card"] == "h100-sxm"
    assert entry["intensity_flop_per_byte"] == pytest.approx(1000.0)
    assert entry["roofline_efficiency"] == pytest.approx(0.1)
    assert entry["savings_gpu_seconds"] == pytest.approx(90.0)
    assert entry["share_of_own_time"] == 1.0


def test_times_are_rfc3339_utc_and_names_mark_missing_labels() -> None:
    assert iso_time(0.0) == "1970-01-01T00:00:00Z"
    assert iso_time(1.25) == "1970-01-01T00:00:01.250000Z"
    assert group_name({"namespace": "", "pod": "p"}, ("namespace", "pod")) == "-/p"
    assert group_name({"namespace": ""}, ("namespace", "pod")) == "(no namespace/pod)"
    assert group_name({"other": "x"}, ("namespace",)) == "(no namespace)"


def test_the_levers_ceiling_follows_the_thresholds() -> None:
    def latency(thresholds: Thresholds) -> str:
        return next(lv.formula for lv in levers(thresholds) if lv.key == "latency_bound")

    assert latency(Thresholds(theta=0.5, dram_wall=1.0, tensor_wall=0.9)).endswith(
        "= 0.5)"
    )  # θ × max(0.9, 1)
    assert latency(Thresholds(theta=0.5, dram_wall=0.5, tensor_wall=0.9)).endswith("= 0.45)")


def test_the_levers_formulas_are_docs_reports_and_their_titles_as_printed() -> None:
    """docs/report.md's levers table states each bound; the document carries the same formula
    (the latency lever adds the ceiling's value at the thresholds in use)."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "report.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `(\w+)` \| (S [^|]+?) \|", docs, flags=re.MULTILINE))
    found = levers(Thresholds())
    assert [lv.key for lv in found] == list(table)
    for lever in found:
        formula = re.sub(r" = [\d.]+\)$", ")", lever.formula)
        assert " ".join(formula.split()) == table[lever.key], lever.key
    latency = next(lv for lv in found if lv.key == "latency_bound")
    assert latency.formula.endswith(f"= {Thresholds().theta * 0.93:.3g})")
    titles = {lv.key: lv.title for lv in found}
    assert titles["idle_allocated"] == "Give back GPUs that sit idle while allocated"
    assert titles["memory_bound"] == "Move half the bytes (fp8 weights, kernel fusion, a quantized KV cache)"
    assert titles["latency_bound"] == (
        "Reach the roofline (bigger batches, CUDA graphs, fewer launches, a faster input path)"
    )
    assert all(lv.assumptions for lv in found)


def test_the_document_prints_each_lever_whole(catalog: Catalog) -> None:
    d = doc(catalog, [usage("a", idle=1.0)])
    expected = [
        {"key": lv.key, "title": lv.title, "formula": lv.formula, "assumptions": lv.assumptions}
        for lv in levers(Thresholds())
    ]
    assert d["levers"] == expected


def test_small_figures_are_figures(catalog: Catalog) -> None:
    """Values under 1 (a fraction of a second, of a FLOP, of a byte) count like any other: no
    comparison against 1 where 0 is meant."""

    def row(**kw: object) -> dict:
        u = Usage(labels={"namespace": "a"}, card_gpu_seconds={"h100-sxm": 1.0}, **kw)  # type: ignore[arg-type]
        return doc(catalog, [u])["groups"][0]

    # half a byte: an intensity, not None
    g = row(gpu_seconds={"memory_bound": 100.0}, flop=50.0, dram_bytes=0.5)
    assert g["intensity_flop_per_byte"] == 100.0
    # half a FLOP and no bytes: infinite intensity, measured against the peak
    g = row(gpu_seconds={"compute_bound": 100.0}, flop=0.5)
    assert g["achieved_flop_per_second_per_gpu"] == 0.005
    assert g["attainable_flop_per_second"] == pytest.approx(H100_PEAK)
    # half a byte and no FLOPs: achieved 0, not None
    g = row(gpu_seconds={"memory_bound": 100.0}, dram_bytes=0.5)
    assert g["achieved_flop_per_second_per_gpu"] == 0.0
    # an attainable under 1 FLOP/s still gives an efficiency
    g = row(gpu_seconds={"memory_bound": 100.0}, flop=1.0, dram_bytes=1e13)
    assert g["attainable_flop_per_second"] == pytest.approx(0.335)
    assert g["roofline_efficiency"] == pytest.approx(0.01 / 0.335)
    # a fleet under one GPU-second still has its remainder
    tiny = Usage(labels={}, gpu_seconds={"idle": 0.5})
    rest = [g for g in doc(catalog, [usage("a", idle=0.1)], tiny)["groups"] if not g["labels"]]
    assert len(rest) == 1 and rest[0]["gpu_seconds"]["idle"] == pytest.approx(0.4)
    # half a second in a regime puts a workload on its top list
    workloads = [Usage(labels={"namespace": "a", "pod": "p"}, gpu_seconds={"memory_bound": 0.5})]
    d = doc(catalog, [usage("a", memory_bound=0.5)], workloads=workloads)
    assert [(w["gpu_seconds"], w["share_of_own_time"]) for w in d["workloads"]["memory_bound"]] == [
        (0.5, 1.0)
    ]


def test_the_remainder_keeps_its_own_work_and_drops_rounding_at_the_threshold(catalog: Catalog) -> None:
    group = Usage(labels={"namespace": "a"}, gpu_seconds={"idle": 1000.0}, flop=10.0, dram_bytes=10.0)
    # the remainder is 1000 GPU-seconds: 999 idle and exactly 0.1 % (1 s) memory-bound, rounding
    fleet = Usage(labels={}, gpu_seconds={"idle": 1999.0, "memory_bound": 1.0}, flop=10.0, dram_bytes=30.0)
    rest = next(g for g in doc(catalog, [group], fleet)["groups"] if not g["labels"])
    assert rest["gpu_seconds"]["memory_bound"] == 0.0 and rest["gpu_seconds"]["idle"] == 999.0
    assert rest["flop"] == 0.0  # the fleet did no more work than its groups
    assert rest["dram_bytes"] == 20.0


def test_both_top_lists_are_cut_at_n(catalog: Catalog) -> None:
    workloads = [
        Usage(labels={"namespace": "x", "pod": f"p{i}"}, gpu_seconds={"latency_bound": 1.0 + i})
        for i in range(4)
    ]
    d = build_report(
        groups=[usage("x", idle=1.0)],
        fleet=usage("x", idle=1.0),
        workloads=workloads,
        provenance=provenance(),
        catalog=catalog,
        options=ReportOptions(by=("namespace",), top=2),
    )
    assert [w["labels"]["pod"] for w in d["workloads"]["latency_bound"]] == ["p3", "p2"]
