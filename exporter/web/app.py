"""The FastAPI app: the live page, health, `POST /classify`, the card catalog, offline /docs, and
the live routes.

`create_app` takes what it serves (the catalog, and the live router another module builds over
the sampler state) rather than reaching for globals, so tests hand it exactly what they need.

Every JSON answer that is not a success has one shape — {"error", "field", "detail"}
(+ "suggestions" for an unknown card) — and bad input never gets a 5xx: body size is checked
before the body is read into memory (413, chunked bodies included), malformed bodies get
400/415/422, an unknown card 404. A client that disconnects mid-body gets nothing and costs no
log line. A handler for anything unexpected answers 500 as a last resort and the server keeps
serving; the fuzz test holds the API to never reaching it.

HTTP as RFC 9110 has it: HEAD works wherever GET does (`HeadAsGet`), a 405 names in `Allow`
every method the path answers (all routes on that path, not the first one found), and no
redirect is built from the Host header — a trailing slash is a 404 that names the path without
it (Starlette's slash redirect takes its Location from Host).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from exporter import __version__
from exporter.catalog import Catalog, UnknownCard, UnknownPrecision
from exporter.classify.models import BodyError
from exporter.roofline import PRECISIONS, RooflineInputError, Thresholds
from exporter.web.classify_routes import ERROR_SCHEMA, classify_router
from exporter.web.docs_routes import docs_router
from exporter.web.responses import error_body, json_response
from exporter.web.view_routes import page_router

MAX_BODY_BYTES = 64 * 1024
"""Largest request body accepted (413 above it). A classify body is a few hundred bytes; even a
`compare` list of every card fits in a few KiB."""


class BodyTooLarge(Exception):
    """Raised from the wrapped `receive` when a streamed (chunked) body passes the limit."""


class BodyLimitMiddleware:
    """413 for a body over `max_bytes`, decided before the app parses anything.

    A Content-Length over the limit is refused without reading a byte. A body without one
    (chunked transfer) is counted as it arrives; the request is cut off at the first chunk that
    passes the limit. Plain ASGI rather than BaseHTTPMiddleware: it costs one function call per
    message, which keeps `POST /classify` near a bare endpoint's speed.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, send: Send) -> None:
        response = json_response(
            error_body(f"request body over the {self.max_bytes} byte limit", field="(body)"), 413
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [*response.raw_headers, (b"connection", b"close")],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    too_large = int(value) > self.max_bytes
                except ValueError:
                    too_large = False  # the server itself rejects a malformed length
                if too_large:
                    await self._refuse(send)
                    return
                break
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)


class HeadAsGet:
    """HEAD is answered as GET without the body (RFC 9110 section 9.3.2), on every route.

    FastAPI's routes accept only the methods they declare, so without this every GET route
    answered HEAD with 405. The headers, Content-Length included, are the GET's.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_headers_only)


METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(app: Any, scope: Scope) -> list[str]:
    """Every method some route on this path answers, HEAD included wherever GET is.

    Asked of each top-level route through Starlette's `matches` (FULL: path and method match),
    one method at a time, so routes inside included routers count without walking FastAPI's
    internals.
    """
    allowed = {
        method
        for method in METHOD_ORDER
        for route in app.router.routes
        if route.matches({**scope, "method": method})[0] is Match.FULL
    }
    if "GET" in allowed:
        allowed.add("HEAD")
    return [method for method in METHOD_ORDER if method in allowed]


def _install_error_handlers(app: FastAPI) -> None:
    async def on_body_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BodyError)
        return json_response(error_body(exc.message, exc.field, exc.detail, exc.suggestions), exc.status)

    async def on_unknown_card(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UnknownCard)
        field = "key" if request.url.path.startswith("/cards/") else "card"
        return json_response(error_body(str(exc), field, suggestions=exc.suggestions), 404)

    async def on_unknown_precision(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UnknownPrecision)
        body = error_body(str(exc), "precision")
        body["available"] = exc.available
        return json_response(body, 422)

    async def on_roofline_input(request: Request, exc: Exception) -> Response:
        return json_response(error_body(str(exc)), 422)

    async def on_request_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        detail = [
            {"field": ".".join(str(p) for p in err.get("loc", ())), "message": str(err.get("msg", ""))}
            for err in exc.errors()
        ]
        first = detail[0] if detail else {"field": None, "message": "invalid request"}
        return json_response(error_body(f"{first['field']}: {first['message']}", first["field"], detail), 422)

    async def on_http_exception(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        path = request.url.path
        headers = dict(exc.headers or {})
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {path}; see / for what this server offers"
            bare = path.rstrip("/")
            if bare and bare != path and allowed_methods(request.app, {**request.scope, "path": bare}):
                message = f"no route {path}; did you mean {bare} (no trailing slash)?"
        elif exc.status_code == 405:
            allow = allowed_methods(request.app, request.scope)
            headers["Allow"] = ", ".join(allow)
            message = f"{request.method} is not allowed on {path}; allowed: {', '.join(allow)}"
        response = json_response(error_body(message), exc.status_code)
        for name, value in headers.items():
            response.headers[name] = value
        return response

    async def on_client_disconnect(request: Request, exc: Exception) -> Response:
        # The client went away mid-body (or was cut off by the request deadline): nobody reads
        # an answer, and it is not our fault, so no log line either.
        return Response(status_code=400)

    async def on_anything_else(request: Request, exc: Exception) -> Response:
        # Last resort: a bug, not bad input. Answer in the same shape; uvicorn logs the traceback.
        return json_response(error_body(f"internal error ({type(exc).__name__}); this is a bug"), 500)

    app.add_exception_handler(BodyError, on_body_error)
    app.add_exception_handler(UnknownCard, on_unknown_card)
    app.add_exception_handler(UnknownPrecision, on_unknown_precision)
    app.add_exception_handler(RooflineInputError, on_roofline_input)
    app.add_exception_handler(RequestValidationError, on_request_validation)
    app.add_exception_handler(StarletteHTTPException, on_http_exception)
    app.add_exception_handler(ClientDisconnect, on_client_disconnect)
    app.add_exception_handler(Exception, on_anything_else)


AUTH_EXEMPT = frozenset({"/healthz", "/readyz"})
"""Paths basic auth never guards (probes carry no credentials); exporter/commands/serve.py."""

_AUTH_ERRORS = {
    "401": "Missing or wrong credentials (only when --web-config sets basic_auth_users)",
    "429": "Too many password checks waiting (only with basic_auth_users); retry after Retry-After",
}


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Make the OpenAPI text say what the server really answers when something is wrong.

    Every JSON error is the one `Error` schema (FastAPI would document its own `{"detail"}`
    shape for 422); 422 is dropped from GET operations, whose parameters are plain strings that
    cannot fail validation; and the basic-auth answers are listed on every guarded operation.
    """
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    error_content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    text_content = {"text/plain": {"schema": {"type": "string"}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            if method == "get":
                responses.pop("422", None)
            for code, response in responses.items():
                if code.startswith(("4", "5")) and "text/plain" not in response.get("content", {}):
                    response["content"] = error_content
            if path not in AUTH_EXEMPT:
                for code, description in _AUTH_ERRORS.items():
                    responses.setdefault(code, {"description": description, "content": text_content})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return schema


def create_app(
    catalog: Catalog,
    *,
    live_router: APIRouter | None = None,
    precision_default: str = "bf16",
    thresholds: Thresholds | None = None,
) -> FastAPI:
    """The app. `live_router` (GET /classify, /classify/{gpu}, /metrics, /readyz, and the live
    view's /live.json and /roofline.svg) is mounted as is; `/` is the page that polls them."""
    if precision_default not in PRECISIONS:
        raise ValueError(f"precision_default {precision_default!r} is not one of {', '.join(PRECISIONS)}")
    app = FastAPI(
        title="Ridgeline",
        version=__version__,
        description="Places GPUs, kernels and operations on a card's roofline: which wall binds, "
        "the numbers behind the verdict, and the lever that would move it.",
        docs_url=None,  # FastAPI's pages load their UI from a CDN; docs_router serves it locally
        redoc_url=None,
        redirect_slashes=False,
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(HeadAsGet)
    _install_error_handlers(app)
    app.include_router(page_router())
    app.include_router(docs_router(app.title))

    @app.get("/healthz", response_class=PlainTextResponse, tags=["health"], summary="Process alive")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok\n")

    router, openapi_extra = classify_router(
        catalog, precision_default=precision_default, thresholds=thresholds
    )
    app.include_router(router)
    if live_router is not None:
        app.include_router(live_router)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(openapi_extra["defs"])
            for path, operations in openapi_extra["paths"].items():
                schema.setdefault("paths", {}).setdefault(path, {}).update(operations)
            app.openapi_schema = document_errors(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
