"""The report's replay as an observer of the daemon's sampler: its gaps are the tracker's rule,
and a failure while observing fails the report instead of being logged away."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from source_kit import replay_options

from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.report import replay
from exporter.report.replay import collect_replay

CATALOG = load_catalog()
DEMO = Path(replay.__file__).resolve().parent.parent / "data" / "demo.jsonl.gz"


def gapped_demo(tmp_path: Path) -> Path:
    """The demo trace with two holes (42 s and 21 s between batches) and a stretch sampled every
    3 s that ends in a 12 s pause: under 5 x 3 s, so no gap."""
    start = None
    kept = []
    with gzip.open(DEMO, "rt", encoding="utf-8") as lines:
        for line in lines:
            ts = json.loads(line)["ts"]
            start = ts if start is None else start
            r = ts - start
            if 100 <= r < 141 or (300 <= r < 400 and int(r) % 3) or 400 <= r < 412 or 450 <= r < 470:
                continue
            kept.append(line)
    path = tmp_path / "gapped.jsonl"
    path.write_text("".join(kept), encoding="utf-8")
    return path


def gap_seconds(path: Path, config: InferenceConfig) -> list[float]:
    collected = collect_replay(replay_options(path=str(path)), CATALOG, config, by=("pod",), workload_by=())
    return [window.end - window.start for window in collected.provenance.gaps]


def test_the_reports_gaps_follow_the_daemons_gap_rule(tmp_path: Path) -> None:
    path = gapped_demo(tmp_path)
    assert gap_seconds(path, InferenceConfig()) == [42.0, 21.0]
    assert gap_seconds(path, InferenceConfig(gap_factor=30.0)) == [42.0]  # the one config, both sides


def test_a_failure_while_observing_fails_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, gpu: object, ts: float) -> None:
        raise RuntimeError("observer bug")

    monkeypatch.setattr(replay._Collector, "_credit", broken)
    with pytest.raises(RuntimeError, match="observer bug"):
        collect_replay(replay_options(path="demo"), CATALOG, InferenceConfig(), by=("pod",), workload_by=())
