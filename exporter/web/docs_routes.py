"""`GET /docs` that works without internet: Swagger UI's files come from this server.

FastAPI's own page loads Swagger UI from a CDN, so on a GPU node without internet `/docs` is
blank. The files come instead from the `fastapi-offline` package, which ships Swagger UI 5 as
package data and releases with its updates; this module serves those files itself (it does not
use the package's app factory, so `create_app` stays ours). Swagger UI's online validator badge
is turned off (validatorUrl null), so nothing is fetched from anywhere else.

There is no `/redoc`: ReDoc's bundle (the one fastapi-offline ships too) always loads its
sidebar logo from cdn.redoc.ly, which an air-gapped node cannot reach (tests/test_live_page.py
caught it). `/docs` and `/openapi.json` document the same API.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse

ASSET_PREFIX = "/docs/assets"

ASSETS: dict[str, str] = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}
"""The files fastapi-offline ships under fastapi_offline/static/, and what each is."""


def asset_directory() -> Path:
    """Where fastapi-offline keeps the UI files; a release that moved them fails here, loudly."""
    directory = Path(str(resources.files(fastapi_offline).joinpath("static")))
    missing = [name for name in ASSETS if not (directory / name).is_file()]
    if missing:
        raise RuntimeError(f"fastapi-offline at {directory} lacks {', '.join(missing)}: /docs cannot work")
    return directory


def docs_router(title: str, openapi_url: str = "/openapi.json") -> APIRouter:
    """/docs (Swagger UI), /docs/oauth2-redirect and their assets, all local."""
    router = APIRouter()
    directory = asset_directory()
    oauth2_redirect_url = "/docs/oauth2-redirect"
    favicon = f"{ASSET_PREFIX}/favicon.png"

    @router.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} API",
            swagger_js_url=f"{ASSET_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSET_PREFIX}/swagger-ui.css",
            swagger_favicon_url=favicon,
            oauth2_redirect_url=oauth2_redirect_url,
            swagger_ui_parameters={"validatorUrl": None},
        )

    @router.get(oauth2_redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    def asset_route(name: str, media_type: str) -> None:
        path = directory / name

        async def asset() -> FileResponse:
            return FileResponse(
                path, media_type=media_type, headers={"Cache-Control": "public, max-age=86400"}
            )

        router.add_api_route(f"{ASSET_PREFIX}/{name}", asset, methods=["GET"], include_in_schema=False)

    for name, media_type in ASSETS.items():
        asset_route(name, media_type)
    return router
