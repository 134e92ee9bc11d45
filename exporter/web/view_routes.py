"""The node's live view: `GET /` (the page and its assets), `GET /live.json`, `GET /roofline.svg`.

Two routers. `page_router` is stateless — the page, its script, stylesheet and icon, read from
exporter/web/static/ once — so every app serves `/`. `view_router` reads the sampler's current
snapshot, like the live routes: `/live.json` is `GET /classify`'s answer (built by the same
`gpu_verdict`) plus one roofline SVG per card, which the page polls; `/roofline.svg` is the
same chart standalone. The charts come from exporter/view (geometry, no web code); this module
only serves them. Answers are built in a worker thread and kept per snapshot and trail update
(exporter/web/answers.py), so any number of open pages costs one build per sample, none on the
scrape path, and none on the event loop.

Everything the page loads comes from this server: a Content-Security-Policy of `'self'` makes
the browser refuse anything else, so the page works air-gapped and behind `--web-config`.
"""

from __future__ import annotations

import html
import json
import socket
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib import resources

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from exporter import __version__
from exporter.catalog import Catalog
from exporter.roofline import REGIMES
from exporter.state import GpuState, Snapshot
from exporter.verdict import LiveVerdict
from exporter.view.chart_svg import describe, render_svg, render_svg_document
from exporter.view.node_view import Unplaced, charts_from_verdicts, point_key
from exporter.view.roofline_chart import ChartSpec, TrailPoint, layout
from exporter.view.units import REGIME_LOOKS, REGIME_ORDER, regime_glyph, regime_look, regime_word
from exporter.web.answers import Same, SnapshotAnswers
from exporter.web.live_routes import gpu_verdict
from exporter.web.responses import JSON_MEDIA_TYPE, error_response

PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page may load only from this server, run no inline script, apply no inline style."""

_STATIC_TYPES: dict[str, str] = {
    "live.js": "text/javascript; charset=utf-8",
    "live.css": "text/css; charset=utf-8",
}
_ASSET_TYPES: dict[str, str] = {**_STATIC_TYPES, "regimes.css": "text/css; charset=utf-8"}
LEGEND_REGIMES: tuple[str, ...] = tuple(r for r in REGIME_ORDER if r in REGIMES)
"""The regimes a live verdict can have (exporter.roofline.REGIMES), in the table's sort order."""


def regime_stylesheet() -> str:
    """`/static/regimes.css`: each regime's colour from exporter.view.units.REGIME_LOOKS, so the
    page's legend and table marks are the chart's and the report's colours, written nowhere else."""
    rules = [f".regime-{regime} {{ color: {look.colour}; }}" for regime, look in REGIME_LOOKS.items()]
    rules.append(f".regime-other {{ color: {regime_look(None).colour}; }}")
    head = "/* Generated from exporter/view/units.py (REGIME_LOOKS); do not edit. */"
    return "\n".join([head, *rules]) + "\n"


def legend_html() -> str:
    """The page's legend: every live regime's glyph, coloured by regimes.css, and its word."""
    items = [
        f'<li><span class="mark regime-{regime}" aria-hidden="true">{regime_glyph(regime)}</span> '
        f"{html.escape(regime_word(regime))}</li>"
        for regime in LEGEND_REGIMES
    ]
    return "\n        ".join(items)


def regimes_json() -> list[dict[str, str]]:
    """What /live.json says of every regime, in sort order: live.js takes words and glyphs from it."""
    return [
        {
            "regime": regime,
            "word": look.word,
            "shape": look.shape,
            "glyph": regime_glyph(regime),
            "colour": look.colour,
        }
        for regime, look in REGIME_LOOKS.items()
    ]


def _read_static(name: str) -> bytes:
    return resources.files("exporter.web").joinpath("static", name).read_bytes()


def page_router() -> APIRouter:
    """`/`, `/static/live.js`, `/static/live.css`, `/static/regimes.css` (generated), `/favicon.svg`:
    read (or built) once, served from memory."""
    router = APIRouter()
    page = (
        _read_static("live.html")
        .decode("utf-8")
        .replace("{{version}}", __version__)
        .replace("{{legend}}", legend_html())
        .encode("utf-8")
    )
    assets = {name: _read_static(name) for name in _STATIC_TYPES}
    assets["regimes.css"] = regime_stylesheet().encode("utf-8")
    icon = _read_static("favicon.svg")
    page_headers = {
        "Content-Security-Policy": PAGE_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    asset_headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "public, max-age=3600"}

    @router.get("/", include_in_schema=False)
    async def get_page() -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=page_headers)

    def asset_route(name: str) -> None:
        body, media_type = assets[name], _ASSET_TYPES[name]

        async def get_asset() -> Response:
            return Response(body, media_type=media_type, headers=asset_headers)

        router.add_api_route(f"/static/{name}", get_asset, methods=["GET"], include_in_schema=False)

    for name in assets:
        asset_route(name)

    @router.get("/favicon.svg", include_in_schema=False)
    async def get_icon() -> Response:
        return Response(icon, media_type="image/svg+xml", headers=asset_headers)

    return router


def svg_caption(host: str | None, snapshot: Snapshot) -> str:
    """ "node gpu-node-1:10295 · samples as of 2026-12-01 21:30:05 UTC": the node as the reader
    addressed it (the page names it the same way) and the newest sample's time (the source's clock)."""
    node = host or socket.gethostname()
    newest = snapshot.last_sample_timestamp
    when = (
        "no sample yet"
        if newest is None
        else "samples as of " + datetime.fromtimestamp(newest, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    )
    return f"Ridgeline · node {node} · {when}"


def _unplaced_json(items: list[Unplaced]) -> list[dict[str, str]]:
    return [{"gpu": u.key, "reason": u.reason} for u in items]


class ViewBuilder:
    """/live.json and the charts over one snapshot, rebuilt only when the snapshot or trails change."""

    def __init__(
        self,
        state_provider: Callable[[], Snapshot],
        catalog: Catalog,
        trails_provider: Callable[[], Mapping[str, tuple[TrailPoint, ...]]] | None = None,
    ) -> None:
        self._state = state_provider
        self._catalog = catalog
        self._trails = trails_provider or (lambda: {})
        self._cached: tuple[int, object, bytes] | None = None
        """(generation, trails mapping, body without readiness) of the last answer built."""

    def charts(
        self,
        snapshot: Snapshot,
        gpus: tuple[GpuState, ...] | None = None,
        trails: Mapping[str, tuple[TrailPoint, ...]] | None = None,
    ) -> tuple[list[ChartSpec], list[Unplaced], list[LiveVerdict]]:
        """The verdicts (as GET /classify has them) of `gpus` (default: all), and their charts."""
        verdicts = [gpu_verdict(g, snapshot) for g in (snapshot.gpus if gpus is None else gpus)]
        specs, unplaced = charts_from_verdicts(
            verdicts, catalog=self._catalog, trails=self._trails() if trails is None else trails
        )
        return specs, unplaced, verdicts

    def live_json(self) -> bytes:
        """The answer: built once per (snapshot, trails), with readiness (which ages with the wall
        clock) put in front per request, so a stalled source costs no rebuild either."""
        snapshot = self._state()
        trails = self._trails()
        cached = self._cached
        if cached is not None and cached[0] == snapshot.generation and cached[1] is trails:
            body = cached[2]
        else:
            body = self.live_body(snapshot, trails)
            self._cached = (snapshot.generation, trails, body)
        return with_readiness(snapshot, body)

    def live_body(self, snapshot: Snapshot, trails: Mapping[str, tuple[TrailPoint, ...]]) -> bytes:
        """/live.json without readiness: the part built once per (snapshot, trails)."""
        return self._build(snapshot, trails)

    def svg(
        self,
        snapshot: Snapshot,
        gpus: tuple[GpuState, ...] | None,
        caption: str,
        legend: bool,
        trails: Mapping[str, tuple[TrailPoint, ...]] | None = None,
    ) -> bytes:
        """/roofline.svg of `gpus` (default: all) with this caption ("" for none) and legend."""
        specs, unplaced, _ = self.charts(snapshot, gpus, trails)
        note = "; ".join(f"GPU {u.key}: {u.reason}" for u in unplaced)
        document = render_svg_document(
            [layout(spec) for spec in specs],
            note=note,
            caption=caption,
            legend=LEGEND_REGIMES if legend else (),
        )
        return document.encode("utf-8")

    def _build(self, snapshot: Snapshot, trails: Mapping[str, tuple[TrailPoint, ...]]) -> bytes:
        specs, unplaced, verdicts = self.charts(snapshot, trails=trails)
        charts = []
        for spec in specs:
            scene = layout(spec)
            charts.append(
                {
                    "key": spec.key,
                    "title": spec.title,
                    "svg": render_svg(scene, id_prefix="chart"),
                    "description": describe(scene),
                    "gpus": [p.key for p in spec.points],
                    "off_chart": [{"gpu": p.key, "reason": why} for p, why in scene.off_chart],
                }
            )
        body = {
            "version": snapshot.version or __version__,
            "generation": snapshot.generation,
            "interval_seconds": snapshot.interval_seconds,
            "source": snapshot.source.name,
            "source_up": snapshot.source.up,
            "gpus": [v.to_json() for v in verdicts],
            "charts": charts,
            "unplaced": _unplaced_json(unplaced),
            "regimes": regimes_json(),
        }
        return json.dumps(body, allow_nan=False).encode("ascii")


def with_readiness(snapshot: Snapshot, body: bytes) -> bytes:
    """/live.json: the snapshot's readiness now, in front of the `body` kept for it."""
    ready, reason = snapshot.readiness()
    head = json.dumps({"ready": ready, "reason": reason}, allow_nan=False).encode("ascii")
    return head[:-1] + b", " + body[1:]


def view_router(
    state_provider: Callable[[], Snapshot],
    catalog: Catalog,
    trails_provider: Callable[[], Mapping[str, tuple[TrailPoint, ...]]] | None = None,
    *,
    answers: SnapshotAnswers | None = None,
) -> APIRouter:
    """`GET /live.json` and `GET /roofline.svg` over the live state; `answers` builds and keeps
    them per snapshot (a worker thread of its own when not given)."""
    router = APIRouter()
    builder = ViewBuilder(state_provider, catalog, trails_provider)
    trails_of = trails_provider or (lambda: {})
    memo = answers if answers is not None else SnapshotAnswers()

    @router.get(
        "/live.json",
        tags=["live"],
        summary="What the live page shows: GET /classify's answer plus a roofline SVG per card",
    )
    async def get_live() -> Response:
        snapshot, trails = state_provider(), trails_of()
        body = await memo.get(snapshot, ("live", Same(trails)), lambda: builder.live_body(snapshot, trails))
        return Response(
            with_readiness(snapshot, body), media_type=JSON_MEDIA_TYPE, headers={"Cache-Control": "no-store"}
        )

    @router.get(
        "/roofline.svg",
        tags=["live"],
        summary="The node's rooflines as a standalone SVG (one card per chart); ?gpu= for one GPU",
        response_class=Response,
        responses={200: {"content": {"image/svg+xml": {}}}, 404: {"description": "No such GPU"}},
    )
    async def get_roofline_svg(
        request: Request,
        gpu: str | None = Query(
            default=None, description="a GPU index, UUID or index/instance: only its chart and its dot"
        ),
        caption: bool = Query(
            default=True, description="the node and the newest sample's time on top; false leaves it out"
        ),
        legend: bool = Query(
            default=True, description="the regimes' markers at the bottom; false leaves it out"
        ),
    ) -> Response:
        snapshot = state_provider()
        chosen: tuple[GpuState, ...] | None = None
        if gpu is not None:
            found = snapshot.find(gpu)
            if not found:
                present = ", ".join(point_key(g.entity.gpu, g.entity.gpu_instance) for g in snapshot.gpus)
                return error_response(
                    f"no GPU {gpu!r} on this node; present: {present or 'none yet'}", 404, "gpu"
                )
            chosen = tuple(found)
        text = svg_caption(request.headers.get("host"), snapshot) if caption else ""
        # Keyed by the GPUs found (bounded by the entities) and the caption's text (the Host a
        # client names: SnapshotAnswers keeps a bounded number of answers per snapshot).
        which = None if chosen is None else tuple((g.entity.uuid, g.entity.gpu_instance) for g in chosen)
        trails = trails_of()
        key = ("svg", which, text, legend, Same(trails))
        svg = await memo.get(snapshot, key, lambda: builder.svg(snapshot, chosen, text, legend, trails))
        return Response(
            svg,
            media_type="image/svg+xml",
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )

    return router
