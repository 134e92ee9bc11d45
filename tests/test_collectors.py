"""Collectors as objects: what each declares is what it writes, and the encoder reports on each."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.catalog import load_catalog
from exporter.collectors import (
    COLLECTORS,
    SCRAPE_DURATION,
    SCRAPE_SUCCESS,
    SOURCE_HEALTH,
    WRITE_ORDER,
    Family,
    Labelled,
)
from exporter.exposition import MetricsEndpoint, build_families
from exporter.inference import InferenceConfig
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.sources.scrape import parse_page
from exporter.state import Snapshot

PAGES = Path(__file__).resolve().parent / "data" / "dcgm-exporter"
FIXTURES = (
    "default-counters-h100-2gpus",
    "mig-a100-profiles",
    "legacy-h100-pods",
    "throttled-h100",
    "links-h100",
    "no-dcp-h100-2gpus",
)
DECLARED = {spec.name: spec for c in (*COLLECTORS, SOURCE_HEALTH) for spec in c.families}


def scraped(name: str) -> Snapshot:
    sampler = Sampler("scrape", SourceOptions(), load_catalog(), InferenceConfig())
    text = (PAGES / f"{name}.txt").read_text(encoding="utf-8")
    for i in range(3):
        sampler.ingest(parse_page(text, 1000.0 + i))
    return sampler.snapshot


@pytest.fixture(scope="module")
def snapshots() -> dict[str, Snapshot]:
    return {name: scraped(name) for name in FIXTURES}


def test_every_family_is_written_in_one_place_in_the_order() -> None:
    """WRITE_ORDER names each declared family once, the scrape_collector pair last; no family
    is declared by two collectors."""
    declared = [spec for c in (*COLLECTORS, SOURCE_HEALTH) for spec in c.families]
    assert len(declared) == len(DECLARED)
    assert sorted(s.name for s in WRITE_ORDER) == sorted(
        [*DECLARED, SCRAPE_SUCCESS.name, SCRAPE_DURATION.name]
    )
    assert WRITE_ORDER[-2:] == (SCRAPE_SUCCESS, SCRAPE_DURATION)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_each_series_has_its_declared_type_and_label_names(
    snapshots: dict[str, Snapshot], fixture: str
) -> None:
    body, _ = MetricsEndpoint(lambda: snapshots[fixture], process_metrics=False).render(None)
    seen = set()
    for family in text_string_to_metric_families(body.decode()):
        spec = DECLARED.get(family.name) or {s.name: s for s in WRITE_ORDER}[family.name]
        assert family.type == spec.type, family.name
        assert family.documentation == spec.help, family.name
        for sample in family.samples:
            assert set(sample.labels) <= set(spec.labels), (sample.name, sample.labels)
            seen.add(family.name)
    assert "ridgeline_source_up" in seen


def test_a_collector_that_writes_an_undeclared_family_fails() -> None:
    sneaky = dataclasses.replace(COLLECTORS[0], families=COLLECTORS[0].families[:1])
    with pytest.raises(ValueError, match="undeclared family"):
        sneaky.collect(scraped("legacy-h100-pods"), [])


def _boom(snapshot: Snapshot, labelled: Sequence[Labelled]) -> Iterator[Family]:
    raise RuntimeError("a bug in a reader")
    yield  # pragma: no cover


def test_a_failing_collector_reports_0_and_the_others_are_still_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = [dataclasses.replace(c, read=_boom) if c.name == "engine" else c for c in COLLECTORS]
    with caplog.at_level(logging.ERROR, logger="exporter.exposition"):
        found = build_families(scraped("legacy-h100-pods"), registry=[*registry, SOURCE_HEALTH])
    names = {f.name for f in found}
    assert "ridgeline_gr_engine_active_ratio" not in names and "ridgeline_regime" in names
    success = {r.labels["collector"]: r.value for f in found if f.name == SCRAPE_SUCCESS.name for r in f.rows}
    assert success["engine"] == 0.0
    assert {v for k, v in success.items() if k != "engine"} == {1.0}
    assert "process" not in success and success["source"] == 1.0
    assert any("engine" in r.getMessage() for r in caplog.records)


def test_each_collector_is_timed_on_its_own() -> None:
    """A clock that advances one second per reading: each collector's duration is exactly one
    start-to-end interval, not the time since the scrape began."""
    ticks = iter(range(1000))
    found = build_families(scraped("legacy-h100-pods"), clock=lambda: float(next(ticks)))
    durations = {
        r.labels["collector"]: r.value for f in found if f.name == SCRAPE_DURATION.name for r in f.rows
    }
    assert set(durations) == {c.name for c in COLLECTORS if c.read is not None and c.default} | {"source"}
    assert set(durations.values()) == {1.0}


def test_switched_off_collectors_are_not_reported() -> None:
    found = build_families(scraped("legacy-h100-pods"), collectors={"totals"})
    (success,) = [f for f in found if f.name == SCRAPE_SUCCESS.name]
    assert [r.labels["collector"] for r in success.rows] == ["totals", "source"]


def test_both_formats_report_one_reading_of_the_snapshot() -> None:
    """The families are read once per snapshot: the text format and OpenMetrics carry the same
    durations (a second reading, on a clock that speeds up, would give others)."""
    ticks = iter(float(k * k) for k in range(1000))
    snapshot = scraped("legacy-h100-pods")
    endpoint = MetricsEndpoint(lambda: snapshot, process_metrics=False, clock=lambda: next(ticks))
    bodies = [endpoint.render(None)[0], endpoint.render("application/openmetrics-text; version=1.0.0")[0]]
    text, om = (
        [line for line in body.decode().splitlines() if line.startswith(SCRAPE_DURATION.name + "{")]
        for body in bodies
    )
    assert text == om and len(set(text)) == len(text) > 2


SERIES_BUDGET = 20
"""Ridgeline series per GPU beside dcgm-exporter's default counters (issue 22)."""


def test_the_default_collectors_fit_the_series_budget_beside_dcgm_exporters_defaults(
    snapshots: dict[str, Snapshot],
) -> None:
    """dcgm-exporter's etc/default-counters.csv (DCP rows 1001, 1004, 1005, 1009, 1010): a busy
    and an idle H100, each with a verdict, through the collectors `serve` runs by default."""
    snapshot = snapshots["default-counters-h100-2gpus"]
    body, _ = MetricsEndpoint(lambda: snapshot, process_metrics=False).render(None)
    per_gpu: Counter[str] = Counter()
    regimes = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if "uuid" in sample.labels:
                per_gpu[sample.labels["gpu"]] += 1
            if sample.name == "ridgeline_regime":
                regimes[sample.labels["gpu"]] = sample.labels["regime"]
    assert regimes == {"0": "compute_bound", "1": "idle"}
    assert set(per_gpu) == {"0", "1"}
    assert max(per_gpu.values()) <= SERIES_BUDGET, per_gpu
