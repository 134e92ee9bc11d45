"""MIG parents (docs/model.md, "One count per physical GPU"): an 8-GPU node with two MIG cards is
8 GPUs and 8 GPU-seconds per second on every path: /metrics, the live verdicts, `report --replay`.

The node: GPUs 0-5 whole; GPU 6 cut 3g.40gb + 4g.40gb (shares 3/7 and 4/7) under a parent line
with device fields only; GPU 7 cut into two 3g.40gb (1/2 each) under a parent whose own line
carries GR_ENGINE_ACTIVE and GPU_UTIL (a parent that would otherwise get a verdict and time).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from source_kit import replay_options

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.report.replay import collect_replay
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.web.live_routes import gpu_verdict

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"
SECONDS = 60
START = 1_800_000_000.0
WHOLE = [Entity(g, f"GPU-{g}", H100) for g in range(6)]
PARENTS = [Entity(6, "GPU-6", H100), Entity(7, "GPU-7", H100)]
INSTANCES = [
    (Entity(6, "GPU-6", H100, gpu_instance=1, profile="3g.40gb"), 3 / 7),
    (Entity(6, "GPU-6", H100, gpu_instance=2, profile="4g.40gb"), 4 / 7),
    (Entity(7, "GPU-7", H100, gpu_instance=1, profile="3g.40gb"), 1 / 2),
    (Entity(7, "GPU-7", H100, gpu_instance=2, profile="3g.40gb"), 1 / 2),
]
BUSY = {fields.DRAM_ACTIVE: 0.7, fields.PIPE_TENSOR_ACTIVE: 0.1, fields.GR_ENGINE_ACTIVE: 0.9}
DEVICE_ONLY = {fields.SM_CLOCK: 1980.0}
PARENT_ACTIVITY = {fields.SM_CLOCK: 1980.0, fields.GR_ENGINE_ACTIVE: 0.6, fields.GPU_UTIL: 80.0}


def node_batch(ts: float) -> list[Sample]:
    out = [Sample(ts, e, dict(BUSY)) for e in WHOLE]
    out.append(Sample(ts, PARENTS[0], dict(DEVICE_ONLY)))
    out.append(Sample(ts, PARENTS[1], dict(PARENT_ACTIVITY)))
    out.extend(Sample(ts, e, dict(BUSY)) for e, _ in INSTANCES)
    return out


@pytest.fixture(scope="module")
def sampler() -> Sampler:
    s = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    for i in range(SECONDS + 1):
        s.ingest(node_batch(START + i))
    return s


@pytest.fixture(scope="module")
def metrics(sampler: Sampler) -> dict[str, list[tuple[dict[str, str], float]]]:
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


def is_parent(labels: dict[str, str]) -> bool:
    return labels.get("uuid") in {"GPU-6", "GPU-7"} and "gpu_instance" not in labels


def test_a_mig_parent_is_in_no_per_gpu_family(metrics: dict[str, list[tuple[dict[str, str], float]]]) -> None:
    per_gpu = [name for name, rows in metrics.items() if any("uuid" in labels for labels, _ in rows)]
    assert "ridgeline_regime" in per_gpu and "ridgeline_profiling_fields_missing" in per_gpu
    for name in per_gpu:
        assert not [labels for labels, _ in metrics[name] if is_parent(labels)], name


def test_the_node_counts_8_gpus_and_8_gpu_seconds_per_second(
    metrics: dict[str, list[tuple[dict[str, str], float]]],
) -> None:
    seconds = sum(v for _, v in metrics["ridgeline_regime_seconds_total"])
    assert seconds == pytest.approx(8 * SECONDS, rel=0.01)
    shares = {
        labels["uuid"] + "/" + labels["gpu_instance"]: v for labels, v in metrics["ridgeline_gpu_share_ratio"]
    }
    assert shares == pytest.approx({"GPU-6/1": 3 / 7, "GPU-6/2": 4 / 7, "GPU-7/1": 0.5, "GPU-7/2": 0.5})
    now = [labels for labels, v in metrics["ridgeline_regime"] if v == 1]
    whole = sum(1 for labels in now if "gpu_instance" not in labels)
    assert whole + sum(shares.values()) == pytest.approx(8)


def test_an_instance_counts_its_share_of_the_gpu_in_gpu_seconds(
    metrics: dict[str, list[tuple[dict[str, str], float]]],
) -> None:
    by_instance: dict[str, float] = {}
    for labels, v in metrics["ridgeline_regime_seconds_total"]:
        if "gpu_instance" in labels:
            key = labels["uuid"] + "/" + labels["gpu_instance"]
            by_instance[key] = by_instance.get(key, 0.0) + v
    expected = {f"{e.uuid}/{e.gpu_instance}": share * SECONDS for e, share in INSTANCES}
    assert by_instance == pytest.approx(expected, rel=0.01)


def test_a_mig_parent_has_no_verdict(sampler: Sampler) -> None:
    snapshot = sampler.snapshot
    parents = [g for g in snapshot.gpus if g.mig_parent]
    assert {g.entity.uuid for g in parents} == {"GPU-6", "GPU-7"}
    for gpu in parents:
        answer = gpu_verdict(gpu, snapshot)
        assert answer.reading == "none" and "MIG" in (answer.no_verdict_reason or "")
        assert answer.regime is None


def test_report_replay_counts_8_gpu_hours_per_hour(tmp_path: Path) -> None:
    trace = tmp_path / "mig.csv"
    with trace.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            [
                "timestamp",
                "gpu",
                "uuid",
                "model",
                "gpu_instance",
                "gpu_instance_profile",
                "1001",
                "1004",
                "1005",
                "100",
            ]
        )
        for i in range(SECONDS + 1):
            for sample in node_batch(START + i):
                e, v = sample.entity, sample.values
                writer.writerow(
                    [
                        sample.timestamp,
                        e.gpu,
                        e.uuid,
                        e.model,
                        "" if e.gpu_instance is None else e.gpu_instance,
                        e.profile or "",
                        *("" if v.get(f) is None else v[f] for f in (1001, 1004, 1005, fields.SM_CLOCK)),
                    ]
                )
    collected = collect_replay(
        replay_options(path=str(trace)),
        CATALOG,
        InferenceConfig(),
        by=("namespace",),
        workload_by=("namespace", "pod"),
        require_by=False,  # the CLI's default grouping: this node's GPUs have no pod
    )
    assert collected.fleet.total_gpu_seconds == pytest.approx(8 * SECONDS, rel=0.01)
    assert sum(collected.fleet.card_gpu_seconds.values()) == pytest.approx(8 * SECONDS, rel=0.01)
    assert not any("not integrated" in note for note in collected.provenance.notes)
