"""The one JSON answer the HTTP API writes, success or error alike."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import Response

JSON_MEDIA_TYPE = "application/json"


def json_response(payload: Any, status_code: int = 200) -> Response:
    """Plain json.dumps, ASCII-escaped: every answer is str/float/int/None already, and
    allow_nan=False makes sure no NaN or Infinity (not JSON) can leave."""
    return Response(
        json.dumps(payload, allow_nan=False).encode("ascii"),
        status_code=status_code,
        media_type=JSON_MEDIA_TYPE,
    )
