"""Routes that read the sampler's live state: `/metrics`, `/readyz`, `GET /classify[/{gpu}]`.

Every handler reads the current immutable snapshot and nothing else, so a scrape never waits on
a GPU library or on the sampler (docs/design.md, "HTTP API"). What grows with the entities (the
/metrics body, the verdicts' JSON) is built in a worker thread, once per snapshot
(exporter/web/answers.py): the event loop only hands over bytes, so `/healthz` and `/readyz`
are answered while a 1,024-entity snapshot is being encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.background import BackgroundTask

from exporter import clock_events
from exporter.collectors import DEFAULT_COLLECTORS
from exporter.exposition import MetricsEndpoint
from exporter.inference import Estimate
from exporter.state import GpuState, Snapshot
from exporter.verdict import (
    LiveVerdict,
    VerdictAttribution,
    VerdictReducedClock,
    VerdictSmoothing,
    VerdictTotals,
)
from exporter.view.ridge import own_ridge, ridge_note
from exporter.web.answers import SnapshotAnswers
from exporter.web.responses import error_body, json_body_response, json_bytes, json_response

_OWN_FIELDS = frozenset({"card", "unknown_because", "link_utilization"})
"""LiveVerdict fields an Estimate also has that the verdict takes elsewhere: the card from the
GpuState (known through blank readings), unknown_because as [] without a reading,
link_utilization as a {link: load} object ({} without a reading)."""

_ESTIMATE_FIELDS: tuple[str, ...] = tuple(
    name for name in LiveVerdict._fields if name in Estimate._fields and name not in _OWN_FIELDS
)
"""LiveVerdict fields copied from the Estimate by name (null without a reading)."""


NO_READING_HINT = (
    "enable the DCP (profiling) metrics in dcgm-exporter's counters file and load DCGM's profiling "
    "module (docs/runbooks.md#ridgelineprofilingcountersmissing)"
)


MIG_PARENT_REASON = (
    "MIG-partitioned: its MIG instances carry the verdicts, the time and the work "
    '(docs/model.md, "One count per physical GPU")'
)


def reading_state(gpu: GpuState, estimate: Estimate | None) -> tuple[str, str | None]:
    """(`reading`, `no_verdict_reason`) of `gpu` and its `estimate` (read once by the caller): ok,
    partial (a regime from what is present, naming what an unknown one needs) or none (no activity
    field at all: no verdict, and why). A MIG parent has none: its instances carry the verdicts."""
    if gpu.mig_parent:
        return "none", MIG_PARENT_REASON
    if estimate is None:
        lacking = ", ".join(gpu.inference.missing_fields) or "every activity field"
        reason = f"no profiling activity field in the latest sample (lacking {lacking}): "
        return "none", reason + NO_READING_HINT
    if estimate.unknown_because:
        return "partial", None
    return "ok", None


def gpu_verdict(gpu: GpuState, snapshot: Snapshot) -> LiveVerdict:
    """One GPU's live verdict (exporter/verdict.py): the counter form of POST /classify plus
    entity, pod and smoothing; built once per GpuState, which belongs to one snapshot.

    Fields that need a reading (or a known card) are null until there is one; `reading` and
    `no_verdict_reason` say why there is no verdict, `missing_fields` which profiling fields
    the source lacks and `unknown_because` which of them an `unknown` regime needs;
    `own_ridge_flop_per_byte` and `ridge_note` say when the GPU's ridge is not the card's.
    """
    memo = gpu.derived
    if memo is not None and memo.verdict is not None:
        return memo.verdict
    verdict = _build_verdict(gpu, snapshot)
    if memo is not None:
        memo.verdict = verdict
    return verdict


def _build_verdict(gpu: GpuState, snapshot: Snapshot) -> LiveVerdict:
    entity = gpu.entity
    estimate = None if gpu.mig_parent else gpu.estimate  # its instances carry the verdicts
    smoothing = gpu.inference.smoothing
    roof = estimate.roof if estimate is not None else None
    attribution = gpu.attribution
    totals = gpu.totals
    reading, no_verdict_reason = reading_state(gpu, estimate)
    copied = {name: None if estimate is None else getattr(estimate, name) for name in _ESTIMATE_FIELDS}
    verdict = LiveVerdict(
        gpu=entity.gpu,
        uuid=entity.uuid,
        model=entity.model,
        gpu_instance=entity.gpu_instance,
        attribution=(
            None
            if attribution is None
            else VerdictAttribution(
                namespace=attribution.namespace, pod=attribution.pod, container=attribution.container
            )
        ),
        timestamp=gpu.last_sample_timestamp,
        reading=reading,
        no_verdict_reason=no_verdict_reason,
        missing_fields=gpu.inference.missing_fields,
        unknown_because=estimate.unknown_because if estimate is not None else (),
        mig_parent=gpu.mig_parent,
        card=gpu.card,
        peak_flop_per_second=None if roof is None else roof.peak_flop_per_second,
        bandwidth_bytes_per_second=None if roof is None else roof.bandwidth_bytes_per_second,
        ridge_flop_per_byte=None if roof is None else roof.ridge_flop_per_byte,
        smoothing=VerdictSmoothing(
            time_constant_seconds=snapshot.smoothing_seconds,
            dwell_seconds=snapshot.dwell_seconds,
            pending_regime=smoothing.pending_regime if smoothing else None,
            pending_since=smoothing.pending_since if smoothing else None,
        ),
        totals=VerdictTotals(
            regime_seconds=None if totals.regime_seconds is None else dict(totals.regime_seconds),
            flop_total=totals.flop_total,
            dram_bytes_total=totals.dram_bytes_total,
            integrated_seconds=totals.integrated_seconds,
        ),
        reduced_clock=reduced_clock_of(estimate),
        link_utilization={} if estimate is None else dict(estimate.link_utilization),
        **copied,
    )
    return verdict._replace(own_ridge_flop_per_byte=own_ridge(verdict), ridge_note=ridge_note(verdict))


def reduced_clock_of(estimate: Estimate | None) -> VerdictReducedClock | None:
    """The clock marker's facts (clock_events.reduced_clock) with its tooltip; None without one."""
    if estimate is None:
        return None
    marker = clock_events.reduced_clock(
        estimate.regime,
        estimate.pipe,
        estimate.clock_ratio,
        estimate.vector_clock_ratio,
        estimate.clock_causes,
    )
    if marker is None:
        return None
    return VerdictReducedClock(
        clock_ratio=marker.clock_ratio,
        causes=marker.causes,
        cause_text=clock_events.cause_words(marker.causes),
        give_back=marker.give_back,
        note=clock_events.reduced_clock_note(marker),
    )


def classify_gpus_json(snapshot: Snapshot) -> bytes:
    """The `gpus` list of GET /classify as JSON: every GPU's verdict (the slow part, kept per
    snapshot; readiness, which ages with the wall clock, is put around it per request)."""
    return json_bytes([gpu_verdict(g, snapshot).to_json() for g in snapshot.gpus])


def classify_answer(snapshot: Snapshot, gpus_json: bytes) -> bytes:
    """GET /classify's answer: `gpus_json` (classify_gpus_json) inside the snapshot's readiness,
    byte for byte what json_bytes writes of the whole object."""
    ready, reason = snapshot.readiness()
    head = json_bytes(
        {
            "source": snapshot.source.name,
            "source_up": snapshot.source.up,
            "ready": ready,
            "reason": reason,
            "gpus": None,
        }
    )
    return head.removesuffix(b"null}") + gpus_json + b"}"


def classify_found_json(found: list[GpuState], snapshot: Snapshot, key: str) -> bytes:
    """GET /classify/{key}'s answer for the GPUs `key` found: one verdict, or a MIG GPU's
    instances."""
    if len(found) == 1:
        return json_bytes(gpu_verdict(found[0], snapshot).to_json())
    return json_bytes({"gpu": key, "instances": [gpu_verdict(g, snapshot).to_json() for g in found]})


def present_gpus(snapshot: Snapshot) -> str:
    """The GPUs on this node as a 404 names them: "0 (GPU-…), 0/1 (GPU-…)"; "none yet"."""
    present = [
        f"{g.entity.gpu}"
        + (f"/{g.entity.gpu_instance}" if g.entity.gpu_instance is not None else "")
        + f" ({g.entity.uuid})"
        for g in snapshot.gpus
    ]
    return ", ".join(present) if present else "none yet"


def build_live_router(
    state_provider: Callable[[], Snapshot],
    *,
    collectors: Collection[str] = DEFAULT_COLLECTORS,
    answers: SnapshotAnswers | None = None,
) -> APIRouter:
    """The live routes over `state_provider` (normally `lambda: sampler.snapshot`); /metrics writes
    the families of `collectors` (exporter/collectors.py). `answers` builds and keeps what is
    derived per snapshot (a worker thread of its own when not given)."""
    router = APIRouter()
    metrics = MetricsEndpoint(state_provider, collectors=collectors)
    memo = answers if answers is not None else SnapshotAnswers()

    @router.get(
        "/metrics",
        summary="Prometheus metrics (text; OpenMetrics on request)",
        response_class=PlainTextResponse,
        responses={
            200: {
                "description": "The exposition: Prometheus text 0.0.4, or OpenMetrics when the Accept "
                "header asks for application/openmetrics-text",
                "content": {"application/openmetrics-text": {"schema": {"type": "string"}}},
            }
        },
    )
    async def get_metrics(request: Request) -> Response:
        accept = request.headers.get("accept")
        # MetricsEndpoint keeps each snapshot's bytes; the process metrics are read per scrape.
        # One worker thread: a second scrape of a new snapshot waits for the first one's bytes.
        entities = len(state_provider().gpus)
        body, content_type = await memo.run(lambda: metrics.render(accept), entities)
        # the last snapshot is freed once this response is sent, in the worker (MetricsEndpoint.release)
        release = BackgroundTask(memo.run, metrics.release, entities) if metrics.retired else None
        return Response(body, media_type=None, headers={"Content-Type": content_type}, background=release)

    @router.get(
        "/readyz",
        summary="200 once a fresh sample exists and the source is up, else 503",
        response_class=PlainTextResponse,
        responses={
            200: {"description": "ready"},
            503: {
                "description": "Not ready: the reason, in one line",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
        },
    )
    async def get_readyz() -> Response:
        ready, reason = state_provider().readiness()
        return Response(
            (reason + "\n").encode(),
            status_code=200 if ready else 503,
            media_type="text/plain; charset=utf-8",
        )

    @router.get("/classify", summary="The live verdict of every GPU on this node")
    async def get_classify() -> Response:
        snapshot = state_provider()
        gpus_json = await memo.get(snapshot, ("classify",), lambda: classify_gpus_json(snapshot))
        return json_body_response(classify_answer(snapshot, gpus_json))

    @router.get(
        "/classify/{gpu}",
        summary="The live verdict of one GPU, by index or UUID",
        responses={404: {"description": "No such GPU on this node (the answer lists those present)"}},
    )
    async def get_classify_one(gpu: str) -> Response:
        snapshot = state_provider()
        found = snapshot.find(gpu)
        if not found:
            listing = await memo.get(snapshot, ("present",), lambda: present_gpus(snapshot))
            detail = f"no GPU {gpu!r} on this node; present: {listing}"
            return json_response(error_body(detail, "gpu"), status_code=404)
        # Keyed by what was found, not by the text asked ("0", "00" and " 0" find the same GPU),
        # so the answers kept are bounded by the entities; a MIG GPU's answer names the text.
        key: tuple[Any, ...] = ("one", *((g.entity.uuid, g.entity.gpu_instance) for g in found))
        if len(found) > 1:
            key = (*key, gpu)
        body = await memo.get(snapshot, key, lambda: classify_found_json(found, snapshot, gpu))
        return json_body_response(body)

    return router
