"""The report document against its JSON schema (docs/report.schema.json): every document the model
writes validates, and the schema refuses one that lost a field, a type or a bound, so the shape
readers rely on is pinned by a unit test rather than by the Prometheus e2e."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from source_kit import replay_options

from exporter.catalog import Catalog, load_catalog
from exporter.inference import InferenceConfig
from exporter.report import document
from exporter.report.model import (
    SCHEMA,
    Provenance,
    ReportOptions,
    TimelinePoint,
    Usage,
    Window,
    build_report,
    levers,
)
from exporter.report.replay import collect_replay
from exporter.roofline import REGIMES, Thresholds

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "docs" / "report.schema.json"
H100_PEAK = 989.5e12


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator: jsonschema.protocols.Validator, document: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def rich_document(catalog: Catalog) -> dict[str, Any]:
    """A document with every part present: a remainder group, both top lists, an unknown card,
    a gap, a timeline and nulls where a value is undefined."""
    a = Usage(
        labels={"namespace": "a"},
        gpu_seconds={"memory_bound": 600.0, "latency_bound": 300.0, "idle": 100.0},
        idle_allocated_gpu_seconds=80.0,
        flop=0.1 * H100_PEAK * 900.0,
        dram_bytes=1e15,
        card_gpu_seconds={"h100-sxm": 1000.0},
    )
    b = Usage(
        labels={"namespace": "b"},
        gpu_seconds={"compute_bound": 500.0, "unknown": 10.0},
        flop=0.5 * H100_PEAK * 500.0,
        card_gpu_seconds={"no-such-card": 510.0},
    )
    fleet = a.plus(b).plus(Usage(labels={}, gpu_seconds={"idle": 400.0}))
    workloads = [
        Usage(
            labels={"namespace": "a", "pod": "p"}, gpu_seconds={"memory_bound": 600.0, "latency_bound": 300.0}
        ),
        Usage(labels={"namespace": "a", "pod": "q"}, gpu_seconds={"latency_bound": 10.0}),
    ]
    provenance = Provenance(
        kind="prometheus",
        location="https://prom.example:9090",
        start=1_700_000_000.0,
        end=1_700_003_600.0,
        step_seconds=60.0,
        sample_interval_seconds=None,
        series={"whole range": "ridgeline:regime_seconds:increase"},
        gaps=(Window(1_700_000_600.0, 1_700_000_900.5),),
        timeline=(TimelinePoint(end=1_700_000_060.0, gpus={"idle": 1.0}),),
        notes=("one note",),
    )
    return build_report(
        groups=[a, b],
        fleet=fleet,
        workloads=workloads,
        provenance=provenance,
        catalog=catalog,
        options=ReportOptions(by=("namespace",)),
    )


def test_the_schema_names_the_models_version_regimes_and_levers(
    validator: jsonschema.protocols.Validator,
) -> None:
    schema = validator.schema
    assert schema["properties"]["schema"] == {"const": SCHEMA}
    assert schema["$id"] == SCHEMA
    assert set(schema["$defs"]["per_regime"]["required"]) <= set(REGIMES)
    keys = [lever.key for lever in levers(Thresholds())]
    assert set(schema["$defs"]["savings"]["required"]) <= set(keys)


TYPED_OBJECTS: dict[str, type] = {
    "": document.ReportDoc,
    "properties/range": document.RangeDoc,
    "properties/source": document.SourceDoc,
    "properties/resolution": document.ResolutionDoc,
    "properties/gaps/items": document.GapDoc,
    "properties/thresholds": document.ThresholdsDoc,
    "properties/levers/items": document.LeverDoc,
    "properties/cards/additionalProperties": document.CardDoc,
    "properties/workloads": document.WorkloadsDoc,
    "properties/timeline/items": document.TimelineDoc,
    "$defs/row": document.RowDoc,
    "$defs/top_entry": document.TopEntryDoc,
    "$defs/coverage": document.CoverageDoc,
    "$defs/stretch": document.StretchDoc,
}
"""Each object of the schema that names its properties -> the TypedDict of exporter/report/document.py."""


def objects_with_properties(node: Any, path: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    if isinstance(node, dict):
        if "properties" in node:
            found[path] = node
        for key, value in node.items():
            found.update(objects_with_properties(value, f"{path}/{key}".lstrip("/")))
    return found


def test_the_typed_document_and_the_schema_name_the_same_keys(
    validator: jsonschema.protocols.Validator,
) -> None:
    """mypy checks the TypedDicts; this holds them to the schema, so the two cannot drift: each
    schema object with properties has its TypedDict, whose keys are its properties and required."""
    objects = objects_with_properties(validator.schema)
    assert sorted(objects) == sorted(TYPED_OBJECTS)
    for path, typed in TYPED_OBJECTS.items():
        keys = set(typed.__annotations__)
        assert keys == set(objects[path]["properties"]), path
        assert keys == set(objects[path]["required"]), path
        assert typed.__required_keys__ == keys, path


def test_a_rich_document_validates(catalog: Catalog, validator: jsonschema.protocols.Validator) -> None:
    document = rich_document(catalog)
    assert [g["labels"] for g in document["groups"]] == [{"namespace": "a"}, {"namespace": "b"}, {}]
    assert document["workloads"]["latency_bound"] and document["gaps"]
    assert errors(validator, json.loads(json.dumps(document, allow_nan=False))) == []


def test_an_empty_fleet_validates(catalog: Catalog, validator: jsonschema.protocols.Validator) -> None:
    empty = Usage(labels={})
    document = build_report(
        groups=[],
        fleet=empty,
        workloads=[],
        provenance=Provenance(
            kind="replay",
            location="t.jsonl",
            start=0.0,
            end=0.0,
            step_seconds=1.0,
            sample_interval_seconds=1.0,
        ),
        catalog=catalog,
        options=ReportOptions(by=("namespace", "pod")),
    )
    assert errors(validator, document) == []


def test_the_demo_traces_report_validates(validator: jsonschema.protocols.Validator) -> None:
    """The replay input end to end (the daemon's own sampler over the bundled trace)."""
    catalog = load_catalog()
    collected = collect_replay(
        replay_options(path="demo"),
        catalog,
        InferenceConfig(),
        by=("namespace",),
        workload_by=("namespace", "pod"),
    )
    document = build_report(
        groups=collected.groups,
        fleet=collected.fleet,
        workloads=collected.workloads,
        provenance=collected.provenance,
        catalog=catalog,
        options=ReportOptions(by=("namespace",)),
    )
    assert document["fleet"]["gpu_seconds_total"] > 0
    assert errors(validator, document) == []


@pytest.mark.parametrize(
    ("where", "change", "complaint"),
    [
        (("fleet",), lambda d: d.pop("flop"), "'flop' is a required property"),
        (("groups", 0, "gpu_seconds"), lambda d: d.pop("idle"), "'idle' is a required property"),
        (
            ("groups", 0),
            lambda d: d.update(roofline_efficiency=1.5),
            "is not valid under any of the given schemas",
        ),
        (("groups", 0), lambda d: d.update(idle_allocated_gpu_seconds=-1.0), "is less than the minimum of 0"),
        (
            ("groups", 0, "savings_gpu_seconds"),
            lambda d: d.update(memory_bound="5"),
            "'5' is not valid under any",
        ),
        (("range",), lambda d: d.update(start="2023-11-14 22:13:20"), "does not match"),
        ((), lambda d: d.update(schema="ridgeline.report/v2"), "'ridgeline.report/v1' was expected"),
        (("workloads", "latency_bound", 0), lambda d: d.update(labels={}), "should be non-empty"),
        (("levers", 0), lambda d: d.update(key="free lunch"), "does not match"),
        (
            ("groups", 1, "savings_gpu_seconds"),
            lambda d: d.update(latency_bound=-1.0),
            "-1.0 is not valid under any",
        ),
        (("source",), lambda d: d.update(kind="csv"), "is not one of"),
        ((), lambda d: d.pop("timeline"), "'timeline' is a required property"),
    ],
)
def test_the_schema_refuses_a_document_that_lost_its_shape(
    catalog: Catalog,
    validator: jsonschema.protocols.Validator,
    where: tuple[str | int, ...],
    change: Any,
    complaint: str,
) -> None:
    document = copy.deepcopy(rich_document(catalog))
    target: Any = document
    for step in where:
        target = target[step]
    change(target)
    found = errors(validator, document)
    assert found and any(complaint in e for e in found), found
