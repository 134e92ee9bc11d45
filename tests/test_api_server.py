"""The API through a real uvicorn server on a loopback port: status codes, headers, body limits."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from conftest import running_server

from exporter.catalog import Catalog
from exporter.web.app import MAX_BODY_BYTES, create_app

pytestmark = pytest.mark.slow

KERNEL = {"card": "h100-sxm", "flops": 4e12, "bytes": 40e9}


@pytest.fixture(scope="module")
def base_url(catalog: Catalog) -> Iterator[str]:
    with running_server(create_app(catalog)) as url:
        yield url


@pytest.fixture()
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10) as client:
        yield client


def raw_exchange(
    base_url: str, head: bytes, chunks: list[bytes] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Send bytes over a plain socket (to control framing) and read one response."""
    parts = urlsplit(base_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head)
        for chunk in chunks or []:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server answered and closed: that is the point
        data = b""
        while b"\r\n\r\n" not in data:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
        head_bytes, _, body = data.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {
            k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
        }
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            piece = sock.recv(65536)
            if not piece:
                break
            body += piece
        return status, headers, body


CHUNKED_HEAD = (
    b"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def test_kernel_answer_is_json(http: httpx.Client) -> None:
    r = http.post("/classify", json=KERNEL)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json()["regime"] == "memory_bound"


def test_declared_length_over_the_limit_is_413_before_any_body_is_sent(base_url: str) -> None:
    head = (
        f"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {10 * 1024 * 1024}\r\n\r\n"
    ).encode()
    status, headers, body = raw_exchange(base_url, head)
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert "limit" in json.loads(body)["error"]


def test_chunked_body_over_the_limit_is_413(base_url: str) -> None:
    head = CHUNKED_HEAD
    piece = b" " * 8192
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    chunks = [chunk] * (MAX_BODY_BYTES // len(piece) + 4) + [b"0\r\n\r\n"]
    status, _, body = raw_exchange(base_url, head, chunks)
    assert status == 413
    assert json.loads(body)["field"] == "(body)"


def test_chunked_body_under_the_limit_is_classified(base_url: str) -> None:
    payload = json.dumps(KERNEL).encode()
    head = CHUNKED_HEAD
    chunks = [f"{len(payload):x}\r\n".encode() + payload + b"\r\n", b"0\r\n\r\n"]
    status, _, body = raw_exchange(base_url, head, chunks)
    assert status == 200
    assert json.loads(body)["card"] == "h100-sxm"


def test_wrong_content_type_is_415(http: httpx.Client) -> None:
    r = http.post("/classify", content=json.dumps(KERNEL), headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert r.json()["field"] == "content-type"


def test_unknown_card_is_404_with_suggestions(http: httpx.Client) -> None:
    r = http.post("/classify", json={**KERNEL, "card": "h100-sxm5x"})
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/json"
    assert "h100-sxm" in r.json()["suggestions"]


def test_bad_field_is_422(http: httpx.Client) -> None:
    r = http.post("/classify", json={**KERNEL, "bytes": -5})
    assert r.status_code == 422
    assert r.json()["field"] == "bytes"


def test_invalid_json_is_400(http: httpx.Client) -> None:
    r = http.post("/classify", content=b'{"card": ', headers={"content-type": "application/json"})
    assert r.status_code == 400


def test_landing_health_and_cards(http: httpx.Client) -> None:
    assert http.get("/").headers["content-type"].startswith("text/html")
    assert http.get("/healthz").text.strip() == "ok"
    assert http.get("/cards/NVIDIA%20H200").json()["key"] == "h200"


def test_server_keeps_serving_after_abuse(base_url: str, http: httpx.Client) -> None:
    for junk in (b"\x00" * 100, b"{" * 10000, b"[" * 60000):
        r = http.post("/classify", content=junk, headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500
    head = CHUNKED_HEAD.replace(b"Transfer-Encoding: chunked", b"Content-Length: 999999")
    assert raw_exchange(base_url, head)[0] == 413
    assert http.post("/classify", json=KERNEL).status_code == 200
