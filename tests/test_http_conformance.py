"""HTTP as RFC 9110 has it, through a real uvicorn: HEAD, Allow, no Host-built redirect, the one
error shape, and an OpenAPI text that says what the server really answers."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import Guarded, guarded_server

from exporter import fields
from exporter.catalog import Catalog
from exporter.collectors import DEFAULT_COLLECTORS
from exporter.inference import InferenceConfig
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.web.app import create_app
from exporter.web.live_routes import build_live_router

pytestmark = pytest.mark.slow

GPU0 = Entity(0, "GPU-0a", "NVIDIA H100 80GB HBM3")


@pytest.fixture(scope="module")
def server(catalog: Catalog) -> Iterator[Guarded]:
    sampler = Sampler("replay", SourceOptions(), catalog, InferenceConfig())
    sampler.ingest([Sample(1000.0, GPU0, {fields.DRAM_ACTIVE: 0.7, fields.PIPE_TENSOR_ACTIVE: 0.1})])
    # No process_* series: they change between two requests, and HEAD must give GET's length.
    live = build_live_router(lambda: sampler.snapshot, collectors=DEFAULT_COLLECTORS - {"process"})
    with guarded_server(create_app(catalog, live_router=live)) as s:
        yield s


@pytest.fixture(scope="module")
def openapi(server: Guarded) -> dict[str, Any]:
    document: dict[str, Any] = httpx.get(f"{server.url}/openapi.json").json()
    return document


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", lambda m: "0" if m.group(0) == "{gpu}" else "h100-sxm", path)


GET_PATHS = ["/", "/docs", "/openapi.json", "/healthz", "/readyz", "/metrics", "/classify", "/cards"]


def test_head_works_wherever_get_does(server: Guarded, openapi: dict[str, Any]) -> None:
    paths = GET_PATHS + [concrete(p) for p, ops in openapi["paths"].items() if "get" in ops]
    with httpx.Client(base_url=server.url) as client:
        for path in sorted(set(paths)):
            got, head = client.get(path), client.head(path)
            assert head.status_code == got.status_code, path
            assert head.content == b"", path
            assert head.headers["content-type"] == got.headers["content-type"], path
            if "content-length" in got.headers and path != "/readyz":
                assert head.headers["content-length"] == got.headers["content-length"], path


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/classify", "GET, HEAD, POST"),
        ("DELETE", "/metrics", "GET, HEAD"),
        ("POST", "/cards/h100-sxm", "GET, HEAD"),
        ("PATCH", "/healthz", "GET, HEAD"),
    ],
)
def test_405_names_every_method_of_the_path_in_allow(
    server: Guarded, method: str, path: str, allow: str
) -> None:
    answer = httpx.request(method, f"{server.url}{path}")
    assert answer.status_code == 405
    assert answer.headers["allow"] == allow
    assert_error_shape(answer)


def test_a_trailing_slash_is_a_404_not_a_redirect_built_from_host(server: Guarded) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /metrics/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 404"), head
    assert b"location" not in head.lower() and b"evil.example" not in answer
    assert b"/metrics (no trailing slash)" in body


def assert_error_shape(answer: httpx.Response) -> None:
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert set(body) >= {"error", "field", "detail"} and isinstance(body["error"], str)
    assert isinstance(body["detail"], list) and body["detail"]


@pytest.mark.parametrize(
    "path", ["/classify/7", "/classify/²", "/classify/" + "9" * 5000, "/cards/nope", "/nope", "/classify/"]
)
def test_every_json_error_has_the_one_shape(server: Guarded, path: str) -> None:
    answer = httpx.get(f"{server.url}{path}")
    assert answer.status_code == 404, answer.text
    assert_error_shape(answer)


def test_openapi_says_metrics_and_readyz_are_text(openapi: dict[str, Any]) -> None:
    metrics = openapi["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert set(metrics) == {"text/plain", "application/openmetrics-text"}
    readyz = openapi["paths"]["/readyz"]["get"]["responses"]
    assert set(readyz["200"]["content"]) == {"text/plain"} and set(readyz["503"]["content"]) == {"text/plain"}


def test_openapi_documents_every_error_answer_in_the_one_shape(openapi: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in openapi["components"]["schemas"]
    expected = {
        ("/classify/{gpu}", "get"): {"404", "401", "429"},
        ("/cards/{key}", "get"): {"404", "401", "429"},
        ("/readyz", "get"): {"503"},
        ("/classify", "post"): {"400", "404", "413", "415", "422", "401", "429"},
    }
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            errors = {code for code in operation["responses"] if code[0] in "45"}
            want = expected.get((path, method), set() if path == "/healthz" else {"401", "429"})
            assert errors == want, (path, method)
            for code in errors:
                content = operation["responses"][code]["content"]
                if "application/json" in content:
                    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
                else:
                    assert set(content) == {"text/plain"}, (path, method, code)
