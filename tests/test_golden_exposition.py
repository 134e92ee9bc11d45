"""/metrics byte for byte against readable golden files, one per fixture and format.

Each file in tests/golden/ is what `MetricsEndpoint` serves for one fixture (the demo trace at
fixed points, dcgm-exporter pages with MIG instances, pods or no profiling fields), in text format
0.0.4 (`.prom`) and OpenMetrics 1.0.0 (`.om.txt`). A change to any byte of the output fails here
with a diff a reviewer can read. What depends on the process is held still: no process_*
collector, a fixed wall clock, a timer that stands still (every collector's duration is 0), and
the version label of ridgeline_build_info written as VERSION.

To change the output on purpose (a named, intended change: docs/testing.md, "Golden exposition
files"), regenerate and commit the diff with the change:

    RIDGELINE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_golden_exposition.py
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from source_kit import replay_options

from exporter import __version__
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.sources.base import EndOfStream
from exporter.sources.replay import ReplaySettings, ReplaySource
from exporter.sources.scrape import parse_page
from exporter.state import Snapshot

GOLDEN = Path(__file__).resolve().parent / "golden"
PAGES = Path(__file__).resolve().parent / "data" / "dcgm-exporter"
UPDATE = os.environ.get("RIDGELINE_UPDATE_GOLDEN") == "1"
WALL_CLOCK = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the arrival time every fixture reports
FORMATS = {"prom": None, "om.txt": "application/openmetrics-text; version=1.0.0"}
DEMO_POINTS = (30, 200, 400)
"""Batches of the demo trace after which /metrics is pinned: early, mid-run and late, so that
every GPU has passed its warm-up and the counters have grown."""


def _sampler() -> Sampler:
    return Sampler(
        "scrape", SourceOptions(), load_catalog(), InferenceConfig(), wall_clock=lambda: WALL_CLOCK
    )


def _demo_snapshots() -> dict[str, Snapshot]:
    source = ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=None))
    source.open()
    sampler = Sampler(
        "replay",
        replay_options(path="demo"),
        load_catalog(),
        InferenceConfig(),
        source=source,
        wall_clock=lambda: WALL_CLOCK,
    )
    found: dict[str, Snapshot] = {}
    batches = 0
    while len(found) < len(DEMO_POINTS):
        try:
            sampler.ingest(source.read())
        except EndOfStream:
            break
        batches += 1
        if batches in DEMO_POINTS:
            found[f"demo-batch-{batches:03d}"] = sampler.snapshot
    source.close()
    assert len(found) == len(DEMO_POINTS), "the demo trace is shorter than DEMO_POINTS"
    return found


def _page(name: str, scrapes: int = 3) -> Callable[[], Snapshot]:
    """A dcgm-exporter fixture page scraped `scrapes` times, a second apart."""

    def build() -> Snapshot:
        text = (PAGES / f"{name}.txt").read_text(encoding="utf-8")
        sampler = _sampler()
        for i in range(scrapes):
            sampler.ingest(parse_page(text, 1000.0 + i))
        return sampler.snapshot

    return build


PAGE_FIXTURES = {
    "mig-a100": _page("mig-a100"),
    "mig-a100-profiles": _page("mig-a100-profiles"),
    "legacy-h100-pods": _page("legacy-h100-pods"),
    "no-dcp-h100-2gpus": _page("no-dcp-h100-2gpus"),
}


@pytest.fixture(scope="module")
def snapshots() -> dict[str, Snapshot]:
    return {**_demo_snapshots(), **{name: build() for name, build in PAGE_FIXTURES.items()}}


FIXTURES = [*(f"demo-batch-{n:03d}" for n in DEMO_POINTS), *PAGE_FIXTURES]
CASES = [(fixture, ext) for fixture in FIXTURES for ext in FORMATS]


def normalised(body: bytes) -> bytes:
    """The served bytes with the one process-dependent value, the version, written as VERSION."""
    label = f'version="{__version__}"'.encode()
    assert body.count(label) == 1, "ridgeline_build_info's version label is not in the body once"
    return body.replace(label, b'version="VERSION"')


def _still() -> float:
    """A clock that stands still: every collector's duration reads 0."""
    return 0.0


def render(snapshot: Snapshot, accept: str | None) -> bytes:
    body, _ = MetricsEndpoint(lambda: snapshot, process_metrics=False, clock=_still).render(accept)
    return normalised(body)


def mismatch(expected: bytes, actual: bytes, path: Path) -> str:
    diff = difflib.unified_diff(
        expected.decode().splitlines(keepends=True),
        actual.decode().splitlines(keepends=True),
        fromfile=f"{path.relative_to(GOLDEN.parent.parent)} (golden)",
        tofile="served now",
        n=1,
    )
    shown = "".join(list(diff)[:60])
    return (
        f"/metrics differs from {path.name}; if the change is intended, regenerate with "
        f"RIDGELINE_UPDATE_GOLDEN=1 (docs/testing.md):\n{shown}"
    )


@pytest.mark.parametrize(("fixture", "ext"), CASES)
def test_metrics_match_the_golden_file(snapshots: dict[str, Snapshot], fixture: str, ext: str) -> None:
    actual = render(snapshots[fixture], FORMATS[ext])
    path = GOLDEN / f"{fixture}.{ext}"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(actual)
    assert path.exists(), f"{path.name} is missing: write it with RIDGELINE_UPDATE_GOLDEN=1"
    expected = path.read_bytes()
    assert actual == expected, mismatch(expected, actual, path)


def test_every_golden_file_belongs_to_a_fixture() -> None:
    """A file no case reads would pin nothing: a renamed fixture must take its file with it."""
    named = {f"{fixture}.{ext}" for fixture, ext in CASES}
    assert sorted(p.name for p in GOLDEN.iterdir() if p.name not in named) == []


def test_a_one_byte_change_is_caught(snapshots: dict[str, Snapshot]) -> None:
    """The comparison is exact: one changed digit of a value is a difference, and it is shown."""
    path = GOLDEN / "mig-a100.prom"
    expected = path.read_bytes()
    at = expected.index(b"\nridgeline_dram_active_ratio{") + 1
    end = expected.index(b"\n", at)
    changed = expected[: end - 1] + (b"8" if expected[end - 1 : end] != b"8" else b"7") + expected[end:]
    assert changed != expected and len(changed) == len(expected)
    assert render(snapshots["mig-a100"], None) == expected
    assert "ridgeline_dram_active_ratio" in mismatch(expected, changed, path)


def test_the_normalisation_is_only_the_version() -> None:
    body = b'ridgeline_build_info{source="scrape",version="' + __version__.encode() + b'"} 1.0\n'
    assert normalised(body) == b'ridgeline_build_info{source="scrape",version="VERSION"} 1.0\n'
