"""The global report when one shard's fleet totals (`cluster:*`) are missing in some windows while
its pods' and nodes' series are there: its rules ran late, or the federation missed that level.

On a server without raw counters the GPUs no pod holds are each shard's `cluster:*` GPU-seconds
beyond its groups' (docs/report.md, "Shards"). Taken over windows where the shard's fleet has no
reading, that difference loses the pods' GPU-seconds there too: a silent minus (issue 24). The
shard's remainder is taken from the windows it has, and the notes and the coverage say which
shard and for how long.

The history is written here as a global server holds it — recorded levels only, each series
with its `cluster` and `shard` — and backfilled with `promtool tsdb create-blocks-from
openmetrics`. Cluster `east`, shard `a`: two GPUs in a pod, one no pod holds; shard `b` the same,
its ungrouped GPU memory-bound like its pod (so the lost pod-seconds cannot hide in another
regime). Every GPU busy throughout at constant rates, so every reading is exact. Shard b's
cluster level skips the evaluations in (HOLE_START, HOLE_END] of the range.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pytest
from prometheus_stack import PROMETHEUS, REQUIRES_PROMETHEUS, backfilled_prometheus

pytestmark = REQUIRES_PROMETHEUS

ROOT = Path(__file__).resolve().parents[1]
PROMTOOL = shutil.which("promtool")
EVALUATION = 60
HOLE_START, HOLE_END = 1800, 2400
"""Shard b's cluster:* readings are missing for the windows ending in (1800 s, 2400 s]."""
FLOP_RATE, BYTE_RATE = 1e12, 4e11


@dataclass(frozen=True)
class Gpu:
    shard: str
    index: int
    pod: tuple[str, str] | None
    regime: str

    def labels(self, level: str) -> dict[str, str] | None:
        """What the level keeps of this GPU's series (None: the level leaves it out)."""
        where = {"cluster": "east", "shard": self.shard}
        if level == "namespace_pod":
            return None if self.pod is None else {**where, "namespace": self.pod[0], "pod": self.pod[1]}
        if level == "instance":
            node = f"east-{self.shard}-node"
            return {**where, "job": "ridgeline", "instance": f"{node}:10295", "node": node}
        return where


GPUS = [
    Gpu("a", 0, ("train", "trainer-0"), "compute_bound"),
    Gpu("a", 1, ("train", "trainer-0"), "compute_bound"),
    Gpu("a", 2, None, "latency_bound"),
    Gpu("b", 0, ("serve", "decode-0"), "memory_bound"),
    Gpu("b", 1, ("serve", "decode-0"), "memory_bound"),
    Gpu("b", 2, None, "memory_bound"),
]


def _text(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def _write_level(level: str, first: float, last: float, start: float, out: TextIO) -> None:
    """The level's regime, FLOP and byte rates at every evaluation (GPUs summed per label set)."""
    for name, rate in (("regime_seconds", 1.0), ("flop", FLOP_RATE), ("dram_bytes", BYTE_RATE)):
        if level == "instance" and name != "regime_seconds":
            continue  # the report reads the node level's GPU-seconds only here
        sums: dict[str, float] = {}
        for gpu in GPUS:
            labels = gpu.labels(level)
            if labels is not None:
                key = _text({**labels, "regime": gpu.regime} if name == "regime_seconds" else labels)
                sums[key] = sums.get(key, 0.0) + rate
        out.write(f"# TYPE {level}:ridgeline_{name}:rate5m gauge\n")
        for key, value in sums.items():
            at = first
            while at <= last:
                late = level == "cluster" and 'shard="b"' in key
                if not (late and start + HOLE_START < at <= start + HOLE_END):
                    out.write(f"{level}:ridgeline_{name}:rate5m{{{key}}} {value!r} {at:.3f}\n")
                at += EVALUATION


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    assert PROMETHEUS is not None and PROMTOOL is not None
    tmp = tmp_path_factory.mktemp("fleet-gaps")
    start = (time.time() // 3600 - 3) * 3600  # ends at least an hour ago
    data = tmp / "history.om"
    with data.open("w") as out:
        for level in ("namespace_pod", "instance", "cluster"):
            _write_level(level, start - 1800, start + 3600 + 600, start, out)
        out.write("# EOF\n")
    with backfilled_prometheus(
        tmp, data, scrape_interval="15s", evaluation_interval=f"{EVALUATION}s"
    ) as stack:
        yield {"url": stack.prometheus_url, "start": start, "tmp": tmp}


def _report(server: dict[str, Any], lo: float, hi: float, step: str, *args: str) -> dict[str, Any]:
    out = server["tmp"] / "report.json"
    start = server["start"]
    command = [
        sys.executable, "-m", "exporter", "report", "--prometheus", server["url"],
        "--start", str(int(start + lo)), "--end", str(int(start + hi)), "--step", step,
        "--json", str(out), *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def _overlap(lo: float, hi: float) -> float:
    return max(0.0, min(hi, HOLE_END) - max(lo, HOLE_START))


@pytest.mark.parametrize(
    ("lo", "hi", "step", "in_windows"),
    [
        (0, 3600, "5m", True),  # the hole inside the range: two whole windows
        (HOLE_START, HOLE_END, "5m", True),  # the range inside the hole: no fleet reading of b at all
        (0, 2100, "10m", False),  # the hole at the range's end: its partial last window (an edge)
    ],
)
def test_a_shards_missing_fleet_totals_are_a_named_gap_not_a_silent_minus(
    server: dict[str, Any], lo: float, hi: float, step: str, in_windows: bool
) -> None:
    document = _report(server, lo, hi, step)
    groups = {g["labels"].get("namespace", ""): g for g in document["groups"]}
    assert set(groups) == {"train", "serve", ""}, groups
    length, hole = hi - lo, _overlap(lo, hi)
    # the pods are read whole; the ungrouped GPUs are a's throughout and b's where b's fleet is read
    assert groups["serve"]["gpu_seconds"]["memory_bound"] == pytest.approx(2 * length)
    rest = groups[""]
    assert rest["gpu_seconds"]["latency_bound"] == pytest.approx(length)
    assert rest["gpu_seconds"]["memory_bound"] == pytest.approx(length - hole), rest["gpu_seconds"]
    assert rest["flop"] == pytest.approx(FLOP_RATE * (2 * length - hole))
    fleet = document["fleet"]
    assert fleet["gpu_seconds_total"] == pytest.approx(6 * length - hole)
    assert fleet["flop"] == pytest.approx(FLOP_RATE * (6 * length - hole))
    assert fleet["dram_bytes"] == pytest.approx(BYTE_RATE * (6 * length - hole))
    # said, not silent: which shard, how long, and (in whole windows) in the coverage
    said = [n for n in document["notes"] if "cluster=east shard=b" in n and "fleet totals" in n]
    assert len(said) == 1, document["notes"]
    assert f"{hole / 60:g} min" in said[0], said[0]
    stretches = [
        s for s in document["coverage"]["stretches"] if "cluster=east shard=b" in " ".join(s["targets"])
    ]
    if in_windows:
        (stretch,) = stretches
        assert stretch["seconds"] == hole and stretch["expected_gpu_seconds"] == pytest.approx(3 * hole)
        assert stretch["seen_gpu_seconds"] == pytest.approx(2 * hole)
        assert document["coverage"]["missing_gpu_seconds"] == pytest.approx(hole)
        assert fleet["coverage"] == pytest.approx((6 * length - hole) / (6 * length))
        assert rest["coverage"] == pytest.approx((2 * length - hole) / (2 * length))
        assert groups["serve"]["coverage"] == 1.0
    else:  # the range's partial windows are not measured (docs/report.md, "Coverage")
        assert stretches == [] and fleet["coverage"] == 1.0


def test_where_the_groups_hold_every_gpu_a_shards_missing_fleet_readings_cost_the_timeline_only(
    server: dict[str, Any],
) -> None:
    """By node the groups are the node level, which holds every GPU: the fleet is their sum and no
    remainder is taken, but the timeline is drawn from cluster:*, so it lacks shard b's GPUs in the
    hole; a note says so (the numbers and the coverage are whole)."""
    document = _report(server, 0, 3600, "5m", "--by", "node")
    nodes = {g["labels"]["node"]: g["gpu_seconds_total"] for g in document["groups"]}
    assert nodes == {"east-a-node": pytest.approx(3 * 3600.0), "east-b-node": pytest.approx(3 * 3600.0)}
    assert document["fleet"]["gpu_seconds_total"] == pytest.approx(6 * 3600.0)
    assert document["fleet"]["coverage"] == 1.0 and document["coverage"]["stretches"] == []
    said = [n for n in document["notes"] if "cluster=east shard=b" in n and "fleet totals" in n]
    assert len(said) == 1 and "timeline lacks" in said[0] and "10 min" in said[0], document["notes"]
    gpus = {p["end"]: sum(p["gpus"].values()) for p in document["timeline"]}
    lacking = [end for end, count in gpus.items() if count == pytest.approx(3.0)]
    assert lacking == [server["start"] + t for t in (HOLE_START + 300, HOLE_END)], gpus
    assert len(gpus) == 12 and all(gpus[t] == pytest.approx(6.0) for t in gpus if t not in lacking), gpus
