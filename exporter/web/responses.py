"""The one JSON answer the HTTP API writes, success or error alike, and the one error shape."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import Response

JSON_MEDIA_TYPE = "application/json"


def json_bytes(payload: Any) -> bytes:
    """Plain json.dumps, ASCII-escaped: every answer is str/float/int/None already, and
    allow_nan=False makes sure no NaN or Infinity (not JSON) can leave."""
    return json.dumps(payload, allow_nan=False).encode("ascii")


def json_response(payload: Any, status_code: int = 200) -> Response:
    """`payload` as the JSON answer (json_bytes)."""
    return json_body_response(json_bytes(payload), status_code)


def json_body_response(body: bytes, status_code: int = 200) -> Response:
    """An answer whose JSON is written already (json_bytes), e.g. one kept per snapshot."""
    return Response(body, status_code=status_code, media_type=JSON_MEDIA_TYPE)


def error_body(
    message: str,
    field: str | None = None,
    detail: list[dict[str, Any]] | None = None,
    suggestions: list[str] | None = None,
) -> dict[str, Any]:
    """The one error shape every non-2xx JSON answer uses: {"error", "field", "detail"}
    (+ "suggestions" for an unknown name). docs/api.md, "Errors"."""
    body: dict[str, Any] = {
        "error": message,
        "field": field,
        "detail": detail if detail is not None else [{"field": field, "message": message}],
    }
    if suggestions is not None:
        body["suggestions"] = suggestions
    return body


def error_response(message: str, status_code: int, field: str | None = None) -> Response:
    return json_response(error_body(message, field), status_code)
