"""The live view without a browser: verdicts into charts, the trails, and the routes that serve them.

/live.json must carry exactly GET /classify's verdicts, and its charts must place each GPU at
the numbers in them; /roofline.svg is the same chart standalone; the page and its assets come
from this server under a Content-Security-Policy of 'self'; /docs loads nothing from
the internet. The browser half of this is tests/test_live_page.py.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from exporter import fields
from exporter.catalog import Catalog, load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.state import Snapshot
from exporter.verdict import LiveVerdict, decode_verdict
from exporter.view.node_view import card_roofs, charts_from_verdicts, point_key, trail_key
from exporter.view.trails import Trails
from exporter.web.app import create_app
from exporter.web.docs_routes import ASSETS
from exporter.web.live_routes import build_live_router
from exporter.web.view_routes import PAGE_POLICY, view_router

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"
SVG = "{http://www.w3.org/2000/svg}"


def verdict(gpu: int, **extra: Any) -> LiveVerdict:
    """A verdict as `top` decodes one from a /classify answer."""
    base: dict[str, Any] = {
        "gpu": gpu,
        "uuid": f"GPU-{gpu}",
        "model": H100,
        "gpu_instance": None,
        "card": "h100-sxm",
        "precision": "bf16",
        "peak_flop_per_second": 989.5e12,
        "bandwidth_bytes_per_second": 3.35e12,
        "ridge_flop_per_byte": 295.37,
        "intensity_flop_per_byte": 40.0,
        "achieved_flop_per_second": 1e14,
        "regime": "memory_bound",
        "timestamp": 1000.0,
        "attribution": {"namespace": "ml", "pod": f"pod-{gpu}", "container": "c"},
    }
    base.update(extra)
    return decode_verdict(base)


# -- verdicts into charts ----------------------------------------------------------------------------


def test_one_chart_per_card_with_every_roof_of_the_card(catalog: Catalog) -> None:
    a100 = verdict(9, card="a100", model="NVIDIA A100-SXM4-80GB", peak_flop_per_second=312e12,
                   bandwidth_bytes_per_second=catalog.lookup("a100").bandwidth_bytes_per_second)  # fmt: skip
    specs, unplaced = charts_from_verdicts([verdict(0), verdict(1), a100], catalog=catalog)
    assert [s.key for s in specs] == ["h100-sxm", "a100"] and unplaced == []
    h100 = specs[0]
    assert [p.key for p in h100.points] == ["0", "1"] and h100.title == "NVIDIA H100 SXM5 80GB"
    by_label = {r.label: r for r in h100.roofs}
    assert by_label["bf16 · fp16"].in_use and by_label["bf16 · fp16"].flop_per_second == 989.5e12
    assert by_label["fp8 · int8"].flop_per_second == 1979e12 and not by_label["fp8 · int8"].in_use
    assert "fp16 CUDA cores" in by_label  # the CUDA-core fp16 peak differs from every tensor peak
    assert [r for r in h100.roofs if r.in_use] == [by_label["bf16 · fp16"]]


def test_a_gpu_on_its_cuda_cores_marks_that_pipes_roof(catalog: Catalog) -> None:
    """`pipe` names the wall: fp32 on the CUDA cores is measured against the card's fp32 peak,
    not against the tensor peak of its precision (and the mix's own ceiling is not a card roof)."""
    vector = verdict(1, pipe="fp32", compute_roof_flop_per_second=78e12)
    (spec,), _ = charts_from_verdicts([verdict(0, pipe="tensor"), vector], catalog=catalog)
    assert sorted(r.label for r in spec.roofs if r.in_use) == ["bf16 · fp16", "fp64 tensor · fp32"]
    assert all(r.flop_per_second != 78e12 for r in spec.roofs)


def test_without_a_catalog_the_roofs_are_the_verdicts_own() -> None:
    """`ridgeline top` has only the HTTP answer: each verdict's precision peak, and for a GPU on
    its CUDA cores the ceiling of its pipe mix that the verdict reports."""
    vector = verdict(1, pipe="fp32", compute_roof_flop_per_second=78e12)
    (spec,), _ = charts_from_verdicts([verdict(0), vector])
    assert sorted((r.label, r.flop_per_second, r.in_use) for r in spec.roofs) == [
        ("bf16", 989.5e12, True),
        ("fp32 pipe mix", 78e12, True),
    ]


def test_mig_instances_get_their_own_scaled_roof(catalog: Catalog) -> None:
    card = catalog.lookup("h100-sxm")
    roof = card.instance_roof("bf16", "3g.40gb")
    assert roof is not None
    instance = verdict(2, gpu_instance=1, uuid="MIG-1", peak_flop_per_second=roof.peak_flop_per_second,
                       bandwidth_bytes_per_second=roof.bandwidth_bytes_per_second)  # fmt: skip
    parent = verdict(2, mig_parent=True)
    specs, unplaced = charts_from_verdicts([verdict(0), instance, parent], catalog=catalog)
    assert [s.key for s in specs] == ["h100-sxm", "h100-sxm-instance"]
    assert "MIG instance roof (45% of compute, 50% of bandwidth)" in specs[1].title
    assert specs[1].bandwidth_bytes_per_second == roof.bandwidth_bytes_per_second
    scaled = {r.label: r.flop_per_second for r in specs[1].roofs}
    assert scaled["bf16 · fp16"] == pytest.approx(roof.peak_flop_per_second)
    assert scaled["fp8 · int8"] == pytest.approx(1979e12 * 60 / 132, rel=1e-5)  # its 60 of 132 SMs
    assert [(u.key, u.reason.split(":")[0]) for u in unplaced] == [("2", "MIG-partitioned")]


def test_gpus_without_a_roof_are_named_not_dropped() -> None:
    unknown = verdict(3, card="unknown", model="NVIDIA Future GPU")
    blank = verdict(4, peak_flop_per_second=None, bandwidth_bytes_per_second=None, regime=None)
    specs, unplaced = charts_from_verdicts([unknown, blank])
    assert specs == []
    assert [(u.key, u.reason) for u in unplaced] == [
        ("3", "NVIDIA Future GPU is not in the card catalog: no roof to draw"),
        ("4", "no reading yet"),
    ]


def test_card_roofs_merge_equal_peaks() -> None:
    labels = [r.label for r in card_roofs(CATALOG.lookup("h100-sxm"))]
    assert labels == ["fp64", "fp64 tensor · fp32", "tf32", "bf16 · fp16", "fp8 · int8", "fp16 CUDA cores"]


# -- trails --------------------------------------------------------------------------------------------


def snapshot_of(sampler: Sampler) -> Snapshot:
    return sampler.snapshot


def gpu_batch(
    ts: float, dram: float = 0.7, tensor: float = 0.1, gpus: tuple[int, ...] = (0, 1)
) -> list[Sample]:
    return [
        Sample(
            ts,
            Entity(g, f"GPU-{g}", H100),
            {fields.DRAM_ACTIVE: dram, fields.PIPE_TENSOR_ACTIVE: tensor, fields.GR_ENGINE_ACTIVE: 0.9},
            Attribution("ml", f"pod-{g}", "c"),
        )
        for g in gpus
    ]


def test_trails_keep_a_point_per_step_a_bounded_number_and_only_present_gpus() -> None:
    trails = Trails(points=3, step_seconds=5.0)
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0),
                      observers=(trails.observe,))  # fmt: skip
    for second in range(0, 31):
        sampler.ingest(gpu_batch(1000.0 + second, dram=0.3 + second / 100))
    trail = trails.current()[trail_key("GPU-0", None)]
    assert len(trail) == 3  # bounded: 7 steps of 5 s happened, 3 are kept
    intensities = [p.intensity for p in trail]
    assert intensities == sorted(intensities, reverse=True)  # DRAM rose, so intensity fell: oldest first
    estimate = sampler.snapshot.gpus[0].estimate
    assert estimate is not None and trail[-1].intensity == estimate.intensity_flop_per_byte  # 1030 s
    sampler.ingest(gpu_batch(1031.0, gpus=(0,)))  # GPU 1 missing: still in the snapshot (grace)
    assert trail_key("GPU-1", None) in trails.current()
    for second in range(32, 40):
        sampler.ingest(gpu_batch(1000.0 + second, gpus=(0,)))
    assert set(trails.current()) == {trail_key("GPU-0", None)}  # GPU 1 dropped: its trail too
    before = trails.current()
    trails.observe(sampler.snapshot)  # a generation already seen costs nothing and changes nothing
    assert trails.current() is before
    sampler.ingest(gpu_batch(1040.0))  # GPU 1 is back: a fresh trail, not its old one
    assert len(trails.current()[trail_key("GPU-1", None)]) == 1
    assert len(trails.current()[trail_key("GPU-0", None)]) == 3


def test_an_idle_gpu_adds_no_trail_point() -> None:
    trails = Trails(points=10, step_seconds=1.0)
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0),
                      observers=(trails.observe,))  # fmt: skip
    for second in range(5):
        sampler.ingest(gpu_batch(1000.0 + second, dram=0.0, tensor=0.0, gpus=(0,)))
    assert trails.current().get(trail_key("GPU-0", None), ()) == ()


def test_a_failing_observer_is_logged_once_and_sampling_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def broken(snapshot: Snapshot) -> None:
        calls.append(snapshot.generation)
        raise RuntimeError("view bug")

    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(), observers=(broken,))
    with caplog.at_level(logging.ERROR, logger="exporter.sampler"):
        for second in range(3):
            sampler.ingest(gpu_batch(1000.0 + second))
    assert len(calls) == 3 and sampler.snapshot.gpus
    logged = [r.getMessage() for r in caplog.records]
    assert logged.count(f"snapshot observer {broken!r} failed (logged once)") == 1


# -- the routes ------------------------------------------------------------------------------------------


@pytest.fixture
def rig() -> Iterator[tuple[Sampler, TestClient]]:
    trails = Trails(points=5, step_seconds=1.0)
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0),
                      observers=(trails.observe,))  # fmt: skip
    live = build_live_router(lambda: sampler.snapshot)
    live.include_router(view_router(lambda: sampler.snapshot, CATALOG, trails.current))
    with TestClient(create_app(CATALOG, live_router=live)) as client:
        yield sampler, client


def test_live_json_is_get_classify_plus_the_charts(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    for second in range(4):
        sampler.ingest(gpu_batch(1000.0 + second, dram=0.5 + second / 20))
    live = client.get("/live.json")
    assert live.status_code == 200 and live.headers["cache-control"] == "no-store"
    body = live.json()
    assert body["gpus"] == client.get("/classify").json()["gpus"]
    assert body["ready"] is True and body["generation"] == sampler.snapshot.generation
    (chart,) = body["charts"]
    assert chart["key"] == "h100-sxm" and chart["gpus"] == ["0", "1"]
    root = ET.fromstring(chart["svg"].replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))
    dots = {g.get("data-gpu"): g for g in root.iter(f"{SVG}g") if g.get("class") == "rl-dot"}
    for gpu in body["gpus"]:
        dot = dots[str(gpu["gpu"])]
        assert float(dot.get("data-intensity", "nan")) == gpu["intensity_flop_per_byte"]
        assert float(dot.get("data-flops", "nan")) == gpu["achieved_flop_per_second"]
        assert float(dot.get("data-timestamp", "nan")) == gpu["timestamp"]
    trails = [p for p in root.iter(f"{SVG}polyline") if p.get("class") == "rl-trail"]
    assert {t.get("data-gpu") for t in trails} == {"0", "1"}
    assert client.get("/live.json").content == live.content  # same generation: the cached answer


def test_roofline_svg_alone_and_for_one_gpu(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    sampler.ingest(gpu_batch(1000.0))
    whole = client.get("/roofline.svg")
    assert whole.status_code == 200 and whole.headers["content-type"] == "image/svg+xml"
    root = ET.fromstring(whole.text)
    assert (
        root.get("width") == "660"
        and len([g for g in root.iter(f"{SVG}g") if g.get("class") == "rl-dot"]) == 2
    )
    one = ET.fromstring(client.get("/roofline.svg", params={"gpu": "1"}).text)
    assert [g.get("data-gpu") for g in one.iter(f"{SVG}g") if g.get("class") == "rl-dot"] == ["1"]
    by_uuid = ET.fromstring(client.get("/roofline.svg", params={"gpu": "gpu-1"}).text)
    assert [g.get("data-gpu") for g in by_uuid.iter(f"{SVG}g") if g.get("class") == "rl-dot"] == ["1"]
    missing = client.get("/roofline.svg", params={"gpu": "7"})
    assert missing.status_code == 404
    assert missing.json()["field"] == "gpu" and "present: 0, 1" in missing.json()["error"]
    assert missing.json()["detail"] == [{"field": "gpu", "message": missing.json()["error"]}]  # the one shape


def test_roofline_svg_before_any_sample_says_so(rig: tuple[Sampler, TestClient]) -> None:
    _, client = rig
    text = client.get("/roofline.svg").text
    assert "no GPU with a known card on this node yet" in "".join(ET.fromstring(text).itertext())


def test_the_page_loads_only_from_this_server(rig: tuple[Sampler, TestClient]) -> None:
    _, client = rig
    page = client.get("/")
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == PAGE_POLICY
    assert "default-src 'none'" in PAGE_POLICY and "'unsafe-inline'" not in PAGE_POLICY
    references = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert references and all(
        ref.startswith("#") or (ref.startswith("/") and not ref.startswith("//")) for ref in references
    )
    assert "<script>" not in page.text and " style=" not in page.text
    for ref in references:
        if ref.startswith(("/static/", "/favicon")):
            asset = client.get(ref)
            assert asset.status_code == 200 and asset.headers["x-content-type-options"] == "nosniff", ref
    script = client.get("/static/live.js").text
    assert "http://" not in script and "https://" not in script
    assert "/live.json" in script and "window.location.origin" in script


def test_docs_reference_only_local_assets(rig: tuple[Sampler, TestClient]) -> None:
    _, client = rig
    page = client.get("/docs")
    assert page.status_code == 200
    references = re.findall(r'(?:src|href)="([^"]+)"', page.text) + re.findall(r"url: '([^']+)'", page.text)
    assert len(references) >= 4 and all(ref.startswith("/") for ref in references), references
    assert "cdn.jsdelivr" not in page.text and "fastapi.tiangolo.com" not in page.text
    assert client.get("/redoc").status_code == 404  # ReDoc fetches its logo from its CDN: not served
    assert '"validatorUrl": null' in client.get("/docs").text
    for name, media_type in ASSETS.items():
        asset = client.get(f"/docs/assets/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"] == media_type, name
        assert len(asset.content) > 1000
    assert client.get("/docs/oauth2-redirect").status_code == 200
    assert client.get("/openapi.json").json()["paths"]["/live.json"]["get"]["tags"] == ["live"]


# -- MIG through the real scrape source ---------------------------------------------------------------


MIG_PAGE = (Path(__file__).parent / "data" / "dcgm-exporter" / "mig-a100-profiles.txt").read_bytes()


class _PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(MIG_PAGE)))
        self.end_headers()
        self.wfile.write(MIG_PAGE)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.mark.slow
def test_mig_instances_are_drawn_on_their_own_roofs_from_a_real_scrape() -> None:
    """A dcgm-exporter page of MIG instances, scraped by `serve`: one chart per instance roof,
    each on its slice of the bandwidth, each dot at the numbers GET /classify gives."""
    from conftest import http_get, serve_process

    server = ThreadingHTTPServer(("127.0.0.1", 0), _PageHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with serve_process("--source", "scrape", "--scrape-url", url, "--interval", "0.5") as (base, _):
            deadline = time.monotonic() + 20
            while True:
                live = json.loads(http_get(base + "/live.json")[1])
                if live["gpus"] and all(g["timestamp"] for g in live["gpus"]) and live["charts"]:
                    break
                assert time.monotonic() < deadline, live
                time.sleep(0.2)
            classify = json.loads(http_get(base + "/classify")[1])["gpus"]
    finally:
        server.shutdown()
        server.server_close()
    instances = [g for g in classify if g["gpu_instance"] is not None]
    assert len(instances) >= 4
    titles = [c["title"] for c in live["charts"]]
    assert all("MIG instance roof" in t for t in titles), titles
    a100 = CATALOG.lookup("NVIDIA A100-SXM4-40GB")
    for gpu in instances:
        chart = next(c for c in live["charts"] if point_key(gpu["gpu"], gpu["gpu_instance"]) in c["gpus"])
        root = ET.fromstring(chart["svg"].replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))
        bandwidth = next(e for e in root.iter(f"{SVG}line") if e.get("class") == "rl-roof rl-roof-bandwidth")
        assert float(bandwidth.get("data-bandwidth", "nan")) == pytest.approx(
            gpu["bandwidth_bytes_per_second"]
        )
        assert gpu["bandwidth_bytes_per_second"] < a100.bandwidth_bytes_per_second  # a slice of it
        dot = [
            g
            for g in root.iter(f"{SVG}g")
            if g.get("class") == "rl-dot" and g.get("data-gpu") == point_key(gpu["gpu"], gpu["gpu_instance"])
        ]
        if gpu["intensity_flop_per_byte"] and gpu["achieved_flop_per_second"]:
            assert float(dot[0].get("data-intensity", "nan")) == gpu["intensity_flop_per_byte"]
    assert live["unplaced"] == []  # every instance has its roof (the page lists no whole GPUs)
    roofs = {(g["peak_flop_per_second"], g["bandwidth_bytes_per_second"]) for g in instances}
    assert len(live["charts"]) == len(roofs) >= 3  # one chart per distinct instance roof


# -- which ridge (issue 23) --------------------------------------------------------------------------


def test_ridge_note_says_when_the_gpus_ridge_is_its_own() -> None:
    from exporter.view.ridge import own_ridge, ridge_note

    mixed = verdict(0, compute_roof_flop_per_second=1.06e15, pipe="tensor")
    assert own_ridge(mixed) == pytest.approx(1.06e15 / 3.35e12)
    note = ridge_note(mixed)
    assert note is not None and note.startswith("own ridge 316 FLOP/byte, not the card's bf16 ridge 295")
    assert "compute roof is 1.06 PFLOP/s" in note and "tensor peak of 989.5 TFLOP/s" in note
    assert ridge_note(verdict(0, compute_roof_flop_per_second=989.5e12)) is None  # the same ridge
    instance = verdict(0, gpu_instance=1, compute_roof_flop_per_second=1.06e15, pipe="tensor")
    assert "not this MIG instance's bf16 ridge" in (ridge_note(instance) or "")
    assert ridge_note(verdict(0)) is None  # no compute roof yet: nothing to say


def test_get_classify_carries_the_own_ridge_and_its_note(rig: tuple[Sampler, TestClient]) -> None:
    sampler, client = rig
    batch = gpu_batch(1000.0, dram=0.3, tensor=0.8)
    for sample in batch[:1]:  # GPU 0 also runs FP32 CUDA-core work: its ceiling passes the tensor peak
        sample.values[fields.PIPE_FP32_ACTIVE] = 0.5
    sampler.ingest(batch)
    gpus = {g["gpu"]: g for g in client.get("/classify").json()["gpus"]}
    mixed, tensor = gpus[0], gpus[1]
    assert mixed["own_ridge_flop_per_byte"] == pytest.approx(
        mixed["compute_roof_flop_per_second"] / mixed["bandwidth_bytes_per_second"]
    )
    assert mixed["own_ridge_flop_per_byte"] > mixed["ridge_flop_per_byte"]
    assert (mixed["ridge_note"] or "").startswith("own ridge ")
    assert tensor["ridge_note"] is None
    assert tensor["own_ridge_flop_per_byte"] == pytest.approx(tensor["ridge_flop_per_byte"])
