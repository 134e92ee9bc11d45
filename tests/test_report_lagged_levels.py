"""The report's groups and fleet against a real Prometheus whose recording-rule levels were
recorded at different instants, as a live Prometheus records them.

Prometheus evaluates every rule group at its own offset within the evaluation interval, and a
rule that reads another group's output sees that group's previous evaluation
(rules/ridgeline-recording.rules.yml, "Layers"): `namespace_pod:*` and `instance:*` read
`instance_workload:*` one hop up, `cluster:*` two hops up, so the fleet's level describes the
GPUs a minute earlier than the pods' under the default 1-minute evaluation interval. A fleet that
shrinks within the range then has more GPU-seconds at its cluster level than its pods have at
theirs, and a remainder taken as their difference was a "(no namespace)" group although every
GPU was in a pod (issue 23, 1.3 % of a 20-minute report).

The history is written here, raw counters and the three recorded levels, and backfilled with
`promtool tsdb create-blocks-from openmetrics`. Each level's reading at its evaluation time τ is
the 5-minute rate of the GPUs at τ − its data's age (pods 5 s, nodes 10 s, cluster 63 s: one
evaluation interval and an offset more), exact from the known activity. Cluster `a`: four GPUs
in two pods that stop halfway through the range. Cluster `b`: the same, and one GPU no pod holds,
busy to the end.
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

from exporter.roofline import REGIMES

pytestmark = REQUIRES_PROMETHEUS

ROOT = Path(__file__).resolve().parents[1]
PROMTOOL = shutil.which("promtool")
SCRAPE = 15
EVALUATION = 60
AGE = {"namespace_pod": 5.0, "instance": 10.0, "cluster": 63.0}
"""How old each level's data is when it is recorded (seconds behind its evaluation time)."""
TOLERANCE = 0.01


@dataclass(frozen=True)
class Gpu:
    cluster: str
    index: int
    pod: tuple[str, str] | None
    regime: str
    start: float
    end: float

    @property
    def node(self) -> str:
        return f"{self.cluster}-node"

    def busy(self, lo: float, hi: float) -> float:
        """Its GPU-seconds in [lo, hi]."""
        return max(0.0, min(hi, self.end) - max(lo, self.start))

    def labels(self) -> dict[str, str]:
        out = {
            "cluster": self.cluster,
            "node": self.node,
            "instance": f"{self.node}:10295",
            "job": "ridgeline",
            "gpu": str(self.index),
            "uuid": f"GPU-{self.cluster}-{self.index}",
            "card": "h100-sxm",
        }
        if self.pod is not None:
            out["namespace"], out["pod"] = self.pod
        return out


def _fleet(start: float) -> list[Gpu]:
    """The range is [start, start + 3600]: the pods run from 30 minutes before it to its middle."""
    pods = [(("train", "trainer-0"), "compute_bound"), (("serve", "decode-0"), "memory_bound")]
    gpus = []
    for cluster in ("a", "b"):
        for index in range(4):
            pod, regime = pods[index // 2]
            gpus.append(Gpu(cluster, index, pod, regime, start - 1800, start + 1800))
    gpus.append(Gpu("b", 4, None, "latency_bound", start - 1800, start + 3600))
    return gpus


def _text(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def _write_raw(gpus: list[Gpu], out: TextIO) -> None:
    out.write("# TYPE ridgeline_regime_seconds counter\n")
    for gpu in gpus:
        for regime in REGIMES:
            series = "ridgeline_regime_seconds_total{" + _text({**gpu.labels(), "regime": regime}) + "}"
            t = gpu.start
            while t <= gpu.end:
                value = t - gpu.start if regime == gpu.regime else 0.0
                out.write(f"{series} {value} {t:.3f}\n")
                t += SCRAPE


def _level_labels(gpu: Gpu, level: str) -> dict[str, str] | None:
    """The labels a level keeps of this GPU's series (None: the level leaves it out)."""
    labels = gpu.labels()
    if level == "namespace_pod":
        if gpu.pod is None:
            return None
        return {k: labels[k] for k in ("cluster", "namespace", "pod")}
    keep = ("cluster", "job", "instance", "node") if level == "instance" else ("cluster",)
    return {k: labels[k] for k in keep}


def _write_recorded(gpus: list[Gpu], first: float, last: float, out: TextIO) -> None:
    """Each level's regime-seconds rate, evaluated every EVALUATION seconds at its own offset and
    recorded from data AGE[level] old; absent while 0, as the rules' `> 0` makes it."""
    for level, age in AGE.items():
        out.write(f"# TYPE {level}:ridgeline_regime_seconds:rate5m gauge\n")
        series: dict[str, list[tuple[float, float]]] = {}
        offset = age % EVALUATION
        at = first + offset
        while at <= last:
            sums: dict[str, float] = {}
            for gpu in gpus:
                labels = _level_labels(gpu, level)
                if labels is None:
                    continue
                key = _text({**labels, "regime": gpu.regime})
                seen = at - age
                sums[key] = sums.get(key, 0.0) + gpu.busy(seen - 300, seen) / 300
            for key, rate in sums.items():
                if rate > 0:
                    series.setdefault(key, []).append((at, rate))
            at += EVALUATION
        for key, points in series.items():
            for t, rate in points:
                out.write(f"{level}:ridgeline_regime_seconds:rate5m{{{key}}} {rate!r} {t:.3f}\n")


@pytest.fixture(scope="module")
def lagged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    assert PROMETHEUS is not None and PROMTOOL is not None
    tmp = tmp_path_factory.mktemp("lagged")
    start = (time.time() // 3600 - 3) * 3600 + 1800  # ends at least half an hour ago
    gpus = _fleet(start)
    data = tmp / "history.om"
    with data.open("w") as out:
        _write_raw(gpus, out)
        _write_recorded(gpus, start - 1800, start + 3600 + 600, out)
        out.write("# EOF\n")
    with backfilled_prometheus(
        tmp, data, scrape_interval=f"{SCRAPE}s", evaluation_interval=f"{EVALUATION}s"
    ) as stack:
        yield {"url": stack.prometheus_url, "start": start, "gpus": gpus, "tmp": tmp}


def _report(lagged: dict[str, Any], *args: str) -> dict[str, Any]:
    out = lagged["tmp"] / "report.json"
    start = lagged["start"]
    command = [
        sys.executable, "-m", "exporter", "report", "--prometheus", lagged["url"],
        "--start", str(int(start)), "--end", str(int(start + 3600)), "--step", "5m",
        "--json", str(out), *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def _truth(gpus: list[Gpu], start: float, key: str) -> dict[str, tuple[float, int]]:
    """(GPU-seconds over the range, GPUs) per value of `key` ("" for a GPU without it)."""
    out: dict[str, tuple[float, int]] = {}
    for gpu in gpus:
        name = gpu.labels().get(key, "")
        seconds, count = out.get(name, (0.0, 0))
        out[name] = (seconds + gpu.busy(start, start + 3600), count + 1)
    return out


@pytest.mark.parametrize(("cluster", "by"), [("a", "namespace"), ("b", "namespace"), ("b", "node")])
def test_groups_hold_only_their_own_gpus_and_add_up_to_the_fleet(
    lagged: dict[str, Any], cluster: str, by: str
) -> None:
    document = _report(lagged, "--match", f'cluster="{cluster}"', "--by", by)
    series = " ".join(document["source"]["series"].values())
    level = "namespace_pod" if by == "namespace" else "instance"
    assert f"{level}:* recorded series" in series, document["source"]["series"]
    gpus = [g for g in lagged["gpus"] if g.cluster == cluster]
    truth = _truth(gpus, lagged["start"], by)
    found = {g["labels"].get(by, ""): g["gpu_seconds_total"] for g in document["groups"]}
    assert set(found) == set(truth), f"groups {found}, known {truth}"  # "" only for b's podless GPU
    for name, (want, count) in truth.items():
        if name == "":  # the GPU no pod holds: read from the raw counters, exact to the scrape
            assert found[name] == pytest.approx(want, rel=TOLERANCE), (found, truth)
        else:  # a recorded reading describes its GPUs up to an interval and its data's age late
            late = EVALUATION + AGE[level]
            assert abs(found[name] - want) <= TOLERANCE * want + late * count, (name, found, truth)
    fleet = document["fleet"]
    assert fleet["gpu_seconds_total"] == sum(g["gpu_seconds_total"] for g in document["groups"])
    for regime in REGIMES:
        assert fleet["gpu_seconds"][regime] == sum(g["gpu_seconds"][regime] for g in document["groups"])
