"""`POST /classify`, `GET /cards` and `GET /cards/{key}`: the roofline as a service.

The route reads the raw body itself (the size limit is enforced by the app's middleware before
any parsing), decodes it with the stdlib JSON parser, lets exporter.classify.models decide
the form and validate it, and returns exporter.classify.service's dict as JSON. Doing the body
by hand keeps the error messages ours (field + rule) and the hot path short; the OpenAPI schema
still documents all three forms with examples.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import TypeAdapter

from exporter.catalog import Catalog
from exporter.classify.models import (
    BodyError,
    ClassifyBody,
    CounterBody,
    KernelBody,
    OperationBody,
    parse_classify_body,
)
from exporter.classify.service import card_summary, classify, require_finite
from exporter.roofline import Thresholds
from exporter.web.responses import JSON_MEDIA_TYPE, json_response


def is_json_media_type(content_type: str | None) -> bool:
    """application/json, with or without parameters, or any application/*+json."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == JSON_MEDIA_TYPE or (media.startswith("application/") and media.endswith("+json"))


def decode_json(raw: bytes) -> Any:
    """Decode a request body; BodyError 400 for anything that is not JSON text."""
    if not raw.strip():
        raise BodyError("empty body: send a JSON object", field="(body)", status=400)
    try:
        return json.loads(raw)
    except RecursionError:
        raise BodyError(
            "body is nested too deeply to be a classify request", field="(body)", status=400
        ) from None
    except json.JSONDecodeError as exc:
        raise BodyError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", field="(body)", status=400
        ) from None
    except ValueError as exc:  # undecodable bytes, integers with thousands of digits
        raise BodyError(f"invalid JSON: {exc}", field="(body)", status=400) from None


def _request_body_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The oneOf schema of the three forms and their $defs, plus named examples for /docs."""
    schema = TypeAdapter(ClassifyBody).json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    if "anyOf" in schema:
        schema["oneOf"] = schema.pop("anyOf")
    examples: dict[str, Any] = {}
    for model, label in ((KernelBody, "kernel"), (OperationBody, "operation"), (CounterBody, "counters")):
        extra = model.model_config.get("json_schema_extra")
        listed = extra.get("examples", []) if isinstance(extra, dict) else []
        for index, example in enumerate(listed if isinstance(listed, list) else []):
            name = label if index == 0 else f"{label}_{index + 1}"
            examples[name] = {"summary": f"{label} form", "value": example}
    examples["custom_card"] = {
        "summary": "kernel form on a custom roof",
        "value": {"peak_flops": 5e14, "bandwidth": 2e12, "flops": 1e12, "bytes": 1e10},
    }
    examples["compare"] = {
        "summary": "the same kernel on other cards",
        "value": {"card": "h100-sxm", "flops": 4e12, "bytes": 40e9, "compare": ["h200", "b200", "l40s"]},
    }
    body = {
        "required": True,
        "content": {JSON_MEDIA_TYPE: {"schema": schema, "examples": examples}},
    }
    return body, defs


ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "field": {"type": ["string", "null"]},
        "detail": {"type": "array", "items": {"type": "object"}},
        "suggestions": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["error"],
}


def classify_router(
    catalog: Catalog, *, precision_default: str = "bf16", thresholds: Thresholds | None = None
) -> tuple[APIRouter, dict[str, Any]]:
    """The router, plus what the app merges into its OpenAPI text: schema `defs` and `paths`."""
    router = APIRouter()
    used_thresholds = thresholds or Thresholds()
    request_body, defs = _request_body_schema()
    error_response = {"content": {JSON_MEDIA_TYPE: {"schema": ERROR_SCHEMA}}}
    cards_payload = [card_summary(card) for card in catalog]
    cards_bytes = json.dumps(cards_payload, allow_nan=False).encode("utf-8")
    card_by_key = {entry["key"]: entry for entry in cards_payload}

    async def post_classify(request: Request) -> Response:
        if not is_json_media_type(request.headers.get("content-type")):
            raise BodyError(
                "send the body as JSON with Content-Type: application/json", field="content-type", status=415
            )
        body = parse_classify_body(decode_json(await request.body()))
        answer = classify(
            catalog, body, precision_default=precision_default, thresholds=used_thresholds, check_finite=False
        )
        try:
            return json_response(answer)
        except ValueError:
            require_finite(answer)  # raises BodyError naming the value that overflowed
            raise

    # A plain Starlette route, not a FastAPI one: the body is read, parsed and validated here
    # anyway, so FastAPI's per-request dependency solving would be pure overhead on the hottest
    # route (benchmarks/bench_api.py). Its OpenAPI operation is written out below instead.
    router.add_route("/classify", post_classify, methods=["POST"], include_in_schema=False)
    operation = {
        "tags": ["classify"],
        "summary": "Place a kernel, an operation or a counter reading on a card's roofline",
        "operationId": "post_classify",
        "requestBody": request_body,
        "responses": {
            "200": {
                "description": "The verdict, with the numbers behind it",
                "content": {JSON_MEDIA_TYPE: {"schema": {"type": "object"}}},
            },
            "400": {"description": "Not JSON", **error_response},
            "404": {"description": "Unknown card (with near matches)", **error_response},
            "413": {"description": "Body over the size limit", **error_response},
            "415": {"description": "Not application/json", **error_response},
            "422": {"description": "A field breaks a rule (named)", **error_response},
        },
    }

    @router.get("/cards", tags=["cards"], summary="Every card in the catalog")
    async def get_cards() -> Response:
        return Response(cards_bytes, media_type=JSON_MEDIA_TYPE)

    @router.get(
        "/cards/{key}",
        tags=["cards"],
        summary="One card by key, alias or NVML name",
        responses={404: {"description": "Unknown card (with near matches)", **error_response}},
    )
    async def get_card(key: str) -> Response:
        card = catalog.lookup(key)
        return json_response(card_by_key[card.key])

    return router, {"defs": defs, "paths": {"/classify": {"post": operation}}}
