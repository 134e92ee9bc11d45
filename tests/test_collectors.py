"""Collectors as objects: what each declares is what it writes, and the encoder reports on each."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter import fields
from exporter.catalog import load_catalog
from exporter.collectors import (
    COLLECTORS,
    PROFILING_FROZEN,
    SCRAPE_DURATION,
    SCRAPE_SUCCESS,
    SOURCE_HEALTH,
    WRITE_ORDER,
    Family,
    Labelled,
)
from exporter.exposition import MetricsEndpoint, build_families
from exporter.inference import FROZEN_HOLD_SECONDS, InferenceConfig
from exporter.sample import Entity, Sample
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


SERIES_BUDGET = 17
"""Ridgeline series per GPU beside dcgm-exporter's default counters: 20 by issue 22, 17 since
issue 24.9 left out the GR-engine contradiction's and the two rare regimes' 0 series."""


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


# -- the families written only where they hold (issue 24.9) --------------------------------------

H100 = "NVIDIA H100 80GB HBM3"
FROZEN: dict[int, float | None] = {
    fields.DRAM_ACTIVE: 0.0,
    fields.PIPE_TENSOR_ACTIVE: 0.0,
    fields.GR_ENGINE_ACTIVE: 0.9,
}
"""A busy GPU whose DRAM and tensor counters a profiler holds at 0."""


def _played(readings: dict[int, list[dict[int, float | None]]]) -> list[dict[str, dict[str, float]]]:
    """Each second's /metrics of GPUs (by index) playing their readings, one per second: per
    second, {family sample name: {gpu index (+ regime): value}} of the per-GPU series."""
    sampler = Sampler("scrape", SourceOptions(), load_catalog(), InferenceConfig())
    pages = []
    for second in range(max(len(r) for r in readings.values())):
        sampler.ingest(
            [
                Sample(1000.0 + second, Entity(gpu, f"GPU-{gpu}", H100), values[second])
                for gpu, values in readings.items()
                if second < len(values)
            ]
        )
        body, _ = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=False).render(None)
        page: dict[str, dict[str, float]] = {}
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                if "uuid" in sample.labels:
                    key = sample.labels["gpu"] + "/" + sample.labels.get("regime", "")
                    page.setdefault(sample.name, {})[key.rstrip("/")] = sample.value
        pages.append(page)
    return pages


def test_profiling_frozen_is_written_once_its_readings_held_and_only_while_they_hold() -> None:
    hold = int(FROZEN_HOLD_SECONDS)
    unfrozen = {**FROZEN, fields.DRAM_ACTIVE: 0.3}
    pages = _played(
        {
            0: [FROZEN] * (hold + 5) + [unfrozen] + [FROZEN] * 5,  # frozen, a DRAM reading, frozen again
            # the profiling GR engine frozen too: GPU_UTIL (a device field) says busy
            1: [{**FROZEN, fields.GR_ENGINE_ACTIVE: 0.0, fields.GPU_UTIL: 95.0}] * (hold + 5),
            # near-misses: truly idle; busy without tensor work but moving bytes; no GPU_UTIL nor GR
            2: [{**FROZEN, fields.GR_ENGINE_ACTIVE: 0.01, fields.GPU_UTIL: 0.0}] * (hold + 5),
            3: [{**FROZEN, fields.DRAM_ACTIVE: 0.2}] * (hold + 5),
            4: [{**FROZEN, fields.GR_ENGINE_ACTIVE: None, fields.SM_ACTIVE: 0.9}] * (hold + 5),
        }
    )
    frozen = [page.get(PROFILING_FROZEN.name, {}) for page in pages]
    assert frozen[hold - 1] == {}  # held for hold - 1 seconds
    assert frozen[hold] == {"0": 1.0, "1": 1.0}
    assert "0" not in frozen[hold + 5]  # the DRAM reading: not frozen, and the hold starts again
    assert "0" not in frozen[-1]


def test_an_idle_gpu_that_gets_busy_is_not_frozen() -> None:
    """Its GR engine can rise a sample or two before its DRAM and tensor activity (issue 24.7)."""
    idle = {**FROZEN, fields.GR_ENGINE_ACTIVE: 0.01}
    busy = {fields.DRAM_ACTIVE: 0.6, fields.PIPE_TENSOR_ACTIVE: 0.4, fields.GR_ENGINE_ACTIVE: 0.95}
    pages = _played({0: [idle] * 40 + [FROZEN] * 2 + [busy] * 40})
    assert not any(PROFILING_FROZEN.name in page for page in pages)


def test_gr_engine_contradicted_is_written_only_on_the_gpus_it_holds_for() -> None:
    stuck = {fields.DRAM_ACTIVE: 0.7, fields.PIPE_TENSOR_ACTIVE: 0.1, fields.GR_ENGINE_ACTIVE: 0.0,
             fields.SM_ACTIVE: 0.9}  # fmt: skip
    sound = {**stuck, fields.GR_ENGINE_ACTIVE: 0.9}
    pages = _played({0: [stuck] * 3, 1: [sound] * 3})
    assert pages[-1]["ridgeline_gr_engine_contradicted"] == {"0": 1.0}
    assert set(pages[-1]["ridgeline_gr_engine_active_ratio"]) == {"0", "1"}


def test_a_rare_regimes_counter_is_born_with_the_first_interval_spent_in_it() -> None:
    """unknown and interconnect_bound have no series on a GPU that never was in them; the common
    four are born at 0 with the first reading."""
    compute = {fields.DRAM_ACTIVE: 0.3, fields.PIPE_TENSOR_ACTIVE: 0.9, fields.GR_ENGINE_ACTIVE: 0.95}
    unknown = {fields.GR_ENGINE_ACTIVE: 0.9, fields.SM_ACTIVE: 0.9}  # no DRAM or tensor field
    pages = _played({0: [compute] * 3 + [unknown] * 3})
    regimes = [set(page["ridgeline_regime_seconds_total"]) for page in pages]
    common = {"0/idle", "0/memory_bound", "0/compute_bound", "0/latency_bound"}
    assert regimes[0] == regimes[2] == common
    assert regimes[3] == common | {"0/unknown"}
    assert pages[3]["ridgeline_regime_seconds_total"]["0/unknown"] == 1.0
    assert pages[5]["ridgeline_regime_seconds_total"]["0/unknown"] == 3.0


def test_the_frozen_familys_help_states_the_exporters_hold_and_threshold() -> None:
    """The HELP text retypes two figures of exporter/inference.py (collectors import no inference
    at run time): this keeps them the same."""
    from exporter.inference import FROZEN_BUSY

    assert f"for {FROZEN_HOLD_SECONDS:g} s or more" in PROFILING_FROZEN.help
    assert f"above {FROZEN_BUSY:g}:" in PROFILING_FROZEN.help
