"""Live routes over a sampler driven by hand: /readyz, GET /classify and GET /classify/{gpu}."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import COMMON_FIELDS, COUNTER_FIELDS
from fastapi.testclient import TestClient

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.web.app import create_app
from exporter.web.live_routes import build_live_router

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"
GPU0 = Entity(0, "GPU-0a", H100)
GPU1 = Entity(1, "GPU-1b", H100)
POD = Attribution("llm", "decode-0", "server")

COUNTER_FORM_FIELDS = COMMON_FIELDS | COUNTER_FIELDS


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def rig() -> Iterator[tuple[Sampler, TestClient]]:
    sampler = Sampler(
        "scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=10, dwell_seconds=5)
    )
    app = create_app(CATALOG, live_router=build_live_router(lambda: sampler.snapshot))
    with TestClient(app) as client:
        yield sampler, client


def batch(ts: float) -> list[Sample]:
    return [
        Sample(
            ts, GPU0, {fields.DRAM_ACTIVE: 0.7, fields.PIPE_TENSOR_ACTIVE: 0.1, fields.GR_ENGINE_ACTIVE: 0.9}
        ),
        Sample(ts, GPU1, {fields.DRAM_ACTIVE: 0.2, fields.PIPE_TENSOR_ACTIVE: 0.85}, POD),
    ]


def test_readyz_is_503_until_a_sample_arrives_then_200(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    first = client.get("/readyz")
    assert first.status_code == 503
    assert "starting" in first.text
    sampler.ingest(batch(1000.0))
    assert client.get("/readyz").status_code == 200


def test_readyz_is_503_when_the_newest_batch_is_stale() -> None:
    clock = Clock()
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(), wall_clock=clock)
    sampler.ingest(batch(1000.0))
    snapshot = sampler.snapshot
    assert snapshot.readiness(now=clock.now + 4.0)[0]
    ready, reason = snapshot.readiness(now=clock.now + snapshot.freshness_seconds + 1)
    assert not ready and "old" in reason


def test_get_classify_lists_every_gpu_with_the_counter_form_fields(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    sampler.ingest(batch(1000.0))
    sampler.ingest(batch(1001.0))
    answer = client.get("/classify").json()
    assert answer["source"] == "scrape" and answer["ready"] is True
    gpus = answer["gpus"]
    assert [g["uuid"] for g in gpus] == [GPU0.uuid, GPU1.uuid]
    for gpu in gpus:
        assert set(gpu) >= COUNTER_FORM_FIELDS
        assert {"gpu", "uuid", "model", "gpu_instance", "attribution", "raw_regime", "smoothing"} <= set(gpu)
    assert gpus[0]["regime"] == "memory_bound"
    assert gpus[0]["card"] == "h100-sxm" and gpus[0]["precision"] == "bf16"
    assert gpus[0]["ridge_flop_per_byte"] == pytest.approx(
        gpus[0]["peak_flop_per_second"] / gpus[0]["bandwidth_bytes_per_second"]
    )
    assert gpus[1]["attribution"] == {"namespace": "llm", "pod": "decode-0", "container": "server"}
    assert gpus[1]["smoothing"]["time_constant_seconds"] == 10
    assert gpus[1]["smoothing"]["dwell_seconds"] == 5


def test_pending_regime_and_since_are_reported(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    sampler.ingest(batch(1000.0))
    compute = [
        Sample(1001.0 + i, GPU0, {fields.DRAM_ACTIVE: 0.05, fields.PIPE_TENSOR_ACTIVE: 0.95})
        for i in range(30)
    ]
    for s in compute:
        sampler.ingest([s])
        verdict = client.get("/classify/0").json()
        if verdict["smoothing"]["pending_regime"] is not None:
            break
    else:
        pytest.fail("the debouncer never reported a pending regime")
    assert verdict["regime"] == "memory_bound"
    assert verdict["raw_regime"] == "compute_bound"
    assert verdict["smoothing"]["pending_regime"] != "memory_bound"
    assert verdict["smoothing"]["pending_since"] >= 1001.0


def test_get_classify_one_by_index_and_uuid(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    sampler.ingest(batch(1000.0))
    by_index = client.get("/classify/1").json()
    by_uuid = client.get(f"/classify/{GPU1.uuid.lower()}").json()
    assert by_index == by_uuid
    assert by_index["uuid"] == GPU1.uuid


def test_get_classify_unknown_gpu_is_404_naming_the_gpus_present(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    sampler.ingest(batch(1000.0))
    answer = client.get("/classify/7")
    assert answer.status_code == 404
    body = answer.json()
    assert body["field"] == "gpu"  # the one error shape, as every other non-2xx JSON answer
    message = body["error"]
    assert "'7'" in message and GPU0.uuid in message and GPU1.uuid in message


@pytest.mark.parametrize("key", ["²", "٣", "9" * 5000, "¹²", "0" * 12])
def test_get_classify_odd_digits_are_404_not_500(rig: tuple[Sampler, TestClient], key: str) -> None:
    """str.isdigit() accepts Unicode digits int() refuses, and int() refuses 5,000 digits."""
    sampler, client = rig
    sampler.ingest(batch(1000.0))
    answer = client.get(f"/classify/{key}")
    assert answer.status_code == 404, answer.text
    assert answer.json()["field"] == "gpu"
    assert sampler.snapshot.find("0/²") == [] and sampler.snapshot.find("0/" + "1" * 5000) == []
    assert len(sampler.snapshot.find("0")) == 1  # an ASCII index still finds its GPU


def test_blank_gpu_shows_nulls_and_the_missing_field(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    sampler.ingest([Sample(1000.0, GPU0, {fields.DRAM_ACTIVE: None, fields.PIPE_TENSOR_ACTIVE: 0.5})])
    verdict = client.get("/classify/0").json()
    # a partial reading: the regime its fields allow, the missing field named, no DRAM number
    assert verdict["regime"] == "unknown" and verdict["dram_active"] is None
    assert verdict["reading"] == "partial"
    assert verdict["unknown_because"] == ["DCGM_FI_PROF_DRAM_ACTIVE"]
    assert "DCGM_FI_PROF_DRAM_ACTIVE" in verdict["missing_fields"]
    assert verdict["no_verdict_reason"] is None


def test_a_gpu_without_profiling_counters_says_why_there_is_no_verdict(
    rig: tuple[Sampler, TestClient],
) -> None:
    sampler, client = rig
    sampler.ingest([Sample(1000.0, GPU0, {fields.GPU_UTIL: 97.0, fields.SM_CLOCK: 1980.0})])
    verdict = client.get("/classify/0").json()
    assert verdict["reading"] == "none" and verdict["regime"] is None
    assert (
        "DCP" in verdict["no_verdict_reason"] and "DCGM_FI_PROF_DRAM_ACTIVE" in verdict["no_verdict_reason"]
    )
    assert len(verdict["missing_fields"]) == 8


FREED: list[str] = []


class _Marked(str):
    """A version string that notes when it is freed (so, when the snapshot holding it is)."""

    def __del__(self) -> None:
        FREED.append(str(self))


def test_metrics_frees_the_last_snapshot_once_its_response_is_sent() -> None:
    """A scrape of a new snapshot leaves the last one to be freed after its response
    (MetricsEndpoint.release, run as the response's background task)."""
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    sampler.ingest(batch(1000.0))
    current = [sampler.snapshot._replace(version=_Marked("v1"))]
    app = create_app(CATALOG, live_router=build_live_router(lambda: current[0]))
    with TestClient(app) as client:
        assert 'version="v1"' in client.get("/metrics").text
        current[0] = current[0]._replace(version=_Marked("v2"))
        assert 'version="v2"' in client.get("/metrics").text
        assert "v1" in FREED and "v2" not in FREED
