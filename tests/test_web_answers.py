"""Derived on read, once (issue 22.2): a snapshot's answers are built in a worker thread, once
per snapshot however many ask, only the current snapshot's are kept, and the bytes are what
they were when each request built its own."""

from __future__ import annotations

import asyncio
import gc
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from exporter import fields
from exporter.catalog import load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.state import Snapshot, SourceHealth
from exporter.view.trails import Trails
from exporter.web.answers import Same, SnapshotAnswers
from exporter.web.app import create_app
from exporter.web.live_routes import build_live_router, classify_answer, classify_gpus_json, gpu_verdict
from exporter.web.responses import json_bytes
from exporter.web.server import GIL_SWITCH_SECONDS, ConnectionGuard, ConnectionLimits, serve
from exporter.web.view_routes import ViewBuilder, view_router

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"
WAIT = 10.0
"""A bound on waits that only a bug reaches (no timing is asserted)."""


def snapshot(generation: int) -> Snapshot:
    return Snapshot(generation=generation, source=SourceHealth("replay"))


def batch(ts: float, gpus: int = 3) -> list[Sample]:
    return [
        Sample(
            ts,
            Entity(g, f"GPU-{g}", H100, gpu_instance=None),
            {fields.DRAM_ACTIVE: 0.5, fields.PIPE_TENSOR_ACTIVE: 0.1 + g / 10, fields.GR_ENGINE_ACTIVE: 0.9},
            Attribution("ml", f"pod-{g}", "c"),
        )
        for g in range(gpus)
    ]


def test_concurrent_askers_share_one_build_and_a_newer_snapshot_drops_the_old() -> None:
    answers = SnapshotAnswers(inline_entities=-1)
    release = threading.Event()
    first, second = snapshot(1), snapshot(2)

    def slow() -> str:
        assert release.wait(WAIT)
        return "built"

    a = answers.future(first, ("x",), slow)
    b = answers.future(first, ("x",), lambda: "another build")
    assert a is b  # the second asker waits for the first one's build
    release.set()
    assert a.result(WAIT) == "built" and answers.builds == 1
    assert answers.future(first, ("x",), lambda: "again").result(WAIT) == "built"  # kept
    assert answers.future(second, ("x",), lambda: "new").result(WAIT) == "new"  # a new snapshot
    # an older snapshot's answer is built, not kept: the current one's stay
    assert answers.future(first, ("x",), lambda: "old").result(WAIT) == "old"
    assert answers.future(second, ("x",), lambda: "not built").result(WAIT) == "new"
    assert answers.builds == 3
    answers.close()


def test_answers_kept_per_snapshot_are_bounded() -> None:
    answers = SnapshotAnswers(max_answers=2, inline_entities=-1)
    now = snapshot(1)
    for key in range(5):
        answers.future(now, (key,), lambda key=key: key).result(WAIT)  # type: ignore[misc]
    assert answers.future(now, (0,), lambda: -1).result(WAIT) == 0  # kept
    assert answers.future(now, (4,), lambda: -1).result(WAIT) == -1  # past the bound: rebuilt
    assert len(answers._answers) == 2
    answers.close()


def test_same_matches_by_identity_only() -> None:
    one, other = {"a": 1}, {"a": 1}
    assert Same(one) == Same(one) and hash(Same(one)) == hash(Same(one))
    assert Same(one) != Same(other)


def test_the_build_runs_off_the_event_loop() -> None:
    """The build waits for the loop to run a coroutine: built on the loop, it never would."""
    answers = SnapshotAnswers(inline_entities=-1)
    loop_ran = threading.Event()
    builder_thread: list[threading.Thread] = []

    def build() -> str:
        builder_thread.append(threading.current_thread())
        return "built" if loop_ran.wait(WAIT) else "the loop was held"

    async def main() -> str:
        asked = asyncio.ensure_future(answers.get(snapshot(1), ("x",), build))
        await asyncio.sleep(0)  # the request is in; the loop goes on to answer others
        loop_ran.set()
        return await asked

    assert asyncio.run(main()) == "built"
    assert builder_thread[0] is not threading.main_thread()
    answers.close()


def test_a_request_that_goes_away_leaves_the_build_to_the_others() -> None:
    answers = SnapshotAnswers(inline_entities=-1)
    release = threading.Event()

    async def main() -> str:
        now = snapshot(1)
        busy = asyncio.ensure_future(answers.run(lambda: release.wait(WAIT), 1))  # the worker is taken
        leaving = asyncio.ensure_future(answers.get(now, ("x",), lambda: "built"))  # so this waits
        staying = asyncio.ensure_future(answers.get(now, ("x",), lambda: "another build"))
        await asyncio.sleep(0)
        leaving.cancel()
        release.set()
        await busy
        return await staying

    assert asyncio.run(main()) == "built"
    assert answers.builds == 1
    answers.close()


def test_get_classify_is_the_whole_object_byte_for_byte() -> None:
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0))
    sampler.ingest(batch(1000.0))
    now = sampler.snapshot
    ready, reason = now.readiness()
    whole = json_bytes(
        {
            "source": now.source.name,
            "source_up": now.source.up,
            "ready": ready,
            "reason": reason,
            "gpus": [gpu_verdict(g, now).to_json() for g in now.gpus],
        }
    )
    assert classify_answer(now, classify_gpus_json(now)) == whole


@dataclass
class Served:
    sampler: Sampler
    trails: Trails
    client: TestClient
    live: SnapshotAnswers
    view: SnapshotAnswers


@pytest.fixture
def served() -> Iterator[Served]:
    trails = Trails(points=5, step_seconds=1.0)
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0),
                      observers=(trails.observe,))  # fmt: skip
    live_answers, view_answers = SnapshotAnswers(inline_entities=-1), SnapshotAnswers(inline_entities=-1)
    live = build_live_router(lambda: sampler.snapshot, answers=live_answers)
    live.include_router(view_router(lambda: sampler.snapshot, CATALOG, trails.current, answers=view_answers))
    with TestClient(create_app(CATALOG, live_router=live)) as client:
        yield Served(sampler, trails, client, live_answers, view_answers)
    live_answers.close()
    view_answers.close()


def test_each_answer_is_built_once_per_snapshot(served: Served) -> None:
    client = served.client
    served.sampler.ingest(batch(1000.0))
    for _ in range(3):
        assert client.get("/classify").status_code == 200
        assert client.get("/classify/1").status_code == 200
        assert client.get("/live.json").status_code == 200
        assert client.get("/roofline.svg").status_code == 200
    assert served.live.builds == 2 and served.view.builds == 2
    classify = client.get("/classify").json()
    assert [g["gpu"] for g in classify["gpus"]] == [0, 1, 2] and classify["ready"] is True
    served.sampler.ingest(batch(1001.0))
    assert client.get("/classify").json()["gpus"][0]["timestamp"] == 1001.0  # a new snapshot: rebuilt
    assert served.live.builds == 3
    for host in ("a.example", "b.example"):  # the caption names the Host: one answer each
        assert f"node {host}" in client.get("/roofline.svg", headers={"host": host}).text
    assert served.view.builds == 4


def test_answers_are_the_bytes_built_per_request(served: Served) -> None:
    """/live.json as ViewBuilder builds it on its own, /metrics as MetricsEndpoint renders it."""
    served.sampler.ingest(batch(1000.0))
    builder = ViewBuilder(lambda: served.sampler.snapshot, CATALOG, served.trails.current)
    assert served.client.get("/live.json").content == builder.live_json()
    assert served.client.get("/live.json").content == builder.live_json()  # kept, same bytes
    endpoint = MetricsEndpoint(lambda: served.sampler.snapshot, process_metrics=False)
    own, _ = endpoint.render(None)
    scraped = served.client.get("/metrics").content
    # Each render times its collectors afresh: those values alone may differ.
    own, scraped = untimed(own), untimed(scraped)
    assert scraped.startswith(own) and b"ridgeline_" in own  # the process metrics follow it


def untimed(body: bytes) -> bytes:
    """`body` without its ridgeline_scrape_collector_duration_seconds samples."""
    timed = b"ridgeline_scrape_collector_duration_seconds{"
    return b"".join(line for line in body.splitlines(keepends=True) if not line.startswith(timed))


def test_healthz_is_answered_while_a_metrics_body_is_being_built() -> None:
    """The /metrics build is held inside the worker until /healthz has been answered: on the
    event loop, /healthz would wait for it (and the build would time out)."""
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0))
    sampler.ingest(batch(1000.0))
    entered, release = threading.Event(), threading.Event()
    held: list[bool] = []

    def provider() -> Snapshot:
        if threading.current_thread().name.startswith("ridgeline-answers") and not held:
            entered.set()
            held.append(release.wait(WAIT))
        return sampler.snapshot

    answers = SnapshotAnswers(inline_entities=-1)
    app = create_app(CATALOG, live_router=build_live_router(provider, answers=answers))
    with TestClient(app) as client:
        scraped: list[int] = []
        scrape = threading.Thread(target=lambda: scraped.append(client.get("/metrics").status_code))
        scrape.start()
        assert entered.wait(WAIT)
        assert client.get("/healthz").text == "ok\n"
        release.set()
        scrape.join(WAIT)
    answers.close()
    assert held == [True] and scraped == [200]


def test_serving_shortens_the_thread_switch_interval_and_freezes_start_up() -> None:
    """While a worker builds, the event loop waits this long for the GIL on every turn, and a full
    collection walks only what was made since start-up."""
    seen: list[float] = []
    frozen: list[int] = []

    class Recording:
        started = True

        def run(self, sockets: list[socket.socket]) -> None:
            seen.append(sys.getswitchinterval())
            frozen.append(gc.get_freeze_count())

    before = sys.getswitchinterval()
    guard = ConnectionGuard(ConnectionLimits())
    with socket.socket() as sock:
        assert serve(Recording(), sock, guard)
    assert seen == [min(before, GIL_SWITCH_SECONDS)] and GIL_SWITCH_SECONDS < 0.005
    assert sys.getswitchinterval() == before
    assert frozen[0] > 0 and gc.get_freeze_count() == 0  # start-up's objects, out of collections


def test_a_small_snapshot_is_built_where_it_is_asked() -> None:
    """A few whole GPUs: built on the asking thread (no wake-ups), kept all the same."""
    answers = SnapshotAnswers(inline_entities=4)
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(smoothing_seconds=0))
    sampler.ingest(batch(1000.0, gpus=4))
    threads: list[threading.Thread] = []

    def build() -> str:
        threads.append(threading.current_thread())
        return "built"

    made = answers.future(sampler.snapshot, ("x",), build)
    assert made.done() and made.result() == "built" and threads == [threading.current_thread()]
    assert answers.future(sampler.snapshot, ("x",), build) is made and answers.builds == 1
    sampler.ingest(batch(1001.0, gpus=5))
    answers.future(sampler.snapshot, ("x",), build).result(WAIT)
    assert threads[-1] is not threading.current_thread()  # five: the worker's
    answers.close()
