"""The scrape source's own reader of an HTTP answer (http_fetch._Answer): the framings an
upstream may use (Content-Length, chunked, read to close), interim 1xx answers, repeated and
folded headers, and what is not HTTP, each against a loopback socket that sends scripted bytes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from exporter.sources.http_fetch import (
    MAX_HEADERS,
    Deadline,
    FetchError,
    KeptConnection,
    Request,
    Validators,
    get,
)

BODY = b'DCGM_FI_PROF_DRAM_ACTIVE{gpu="0",UUID="GPU-a"} 0.35\n' * 40


@contextmanager
def _answering(*answers: bytes) -> Iterator[tuple[Request, list[bytes]]]:
    """A server on 127.0.0.1 that answers each request on one connection with the next of
    `answers` (closing after the last); it records the requests' heads."""
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            for answer in answers:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(65536)
                    if not data:
                        return
                    head += data
                heads.append(head)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        yield Request(scheme="http", host="127.0.0.1", port=port, target="/metrics"), heads
    finally:
        listener.close()
        thread.join(5)


def _get(request: Request, kept: KeptConnection | None = None, validators: Validators | None = None) -> bytes:
    return b"".join(bytes(piece) for piece in get(request, Deadline(5.0), validators, kept))


def _chunked(body: bytes, size: int) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    framed = b"".join(b"%x;ext=1\r\n" % len(p) + p + b"\r\n" for p in pieces)
    return framed + b"0\r\nX-Trailer: 1\r\n\r\n"


def test_a_content_length_body_is_read_and_the_connection_kept() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    with _answering(answer, answer) as (request, heads):
        kept = KeptConnection()
        assert _get(request, kept) == BODY
        assert _get(request, kept) == BODY
        assert len(heads) == 2  # both on the one connection the server accepted
        kept.close()


@pytest.mark.parametrize("size", [1, 7, 4096, 65536 * 2])
def test_a_chunked_body_is_read_whole_and_the_connection_kept(size: int) -> None:
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n" + _chunked(BODY, size)
    with _answering(answer, answer) as (request, heads):
        kept = KeptConnection()
        assert _get(request, kept) == BODY
        assert _get(request, kept) == BODY
        assert len(heads) == 2
        kept.close()


@pytest.mark.parametrize(
    "framed",
    [
        b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(BODY, 100)[:-40],  # cut mid-chunk
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",  # not a chunk size
        b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc0\r\n\r\n",  # no CRLF after the chunk
    ],
)
def test_a_chunked_body_cut_short_or_misframed_is_a_connection_error(framed: bytes) -> None:
    with _answering(b"HTTP/1.1 200 OK\r\n" + framed) as (request, _), pytest.raises(FetchError) as raised:
        _get(request)
    assert raised.value.reason == "connection"


def test_a_body_without_length_is_read_until_close_and_not_kept() -> None:
    with _answering(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + BODY) as (request, _):
        kept = KeptConnection()
        assert _get(request, kept) == BODY
        assert kept.take(request) is None


def test_interim_answers_are_skipped_and_headers_joined_or_unfolded() -> None:
    answer = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b'HTTP/1.1 200 OK\r\nETag: "a\r\n  b"\r\nLast-Modified: x\r\nlast-modified: y\r\n'
        b"no colon here\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    )
    with _answering(answer) as (request, _):
        validators = Validators()
        assert _get(request, validators=validators) == BODY
    assert validators.etag == '"a b"' and validators.last_modified == "x, y"


def test_a_304_ends_the_body_at_once_and_keeps_the_connection() -> None:
    first = b'HTTP/1.1 200 OK\r\nETag: "v1"\r\nContent-Length: %d\r\n\r\n%s' % (len(BODY), BODY)
    with _answering(first, b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n', first) as (request, heads):
        kept = KeptConnection()
        validators = Validators()
        assert _get(request, kept, validators) == BODY
        conditional = Request(
            scheme=request.scheme,
            host=request.host,
            port=request.port,
            target=request.target,
            headers=validators.conditional_headers(),
        )
        assert _get(conditional, kept, validators) == b"" and validators.not_modified
        assert b'If-None-Match: "v1"' in heads[1]
        assert _get(request, kept) == BODY  # the same connection still answers
        kept.close()


def test_http_1_0_keeps_the_connection_only_when_it_says_so() -> None:
    plain = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    keep = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    with _answering(keep, plain) as (request, _):
        kept = KeptConnection()
        assert _get(request, kept) == BODY
        sock = kept.take(request)
        assert sock is not None
        kept.keep(request, sock)
        assert _get(request, kept) == BODY
        assert kept.take(request) is None


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X-Many: 1\r\n" * (MAX_HEADERS + 1) + b"\r\n",
        b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n",
    ],
    ids=["not_http", "bad_status", "too_many_headers", "header_too_long"],
)
def test_what_is_not_an_http_answer_is_a_parse_error(answer: bytes) -> None:
    with _answering(answer) as (request, _), pytest.raises(FetchError) as raised:
        _get(request)
    assert raised.value.reason == "parse_error"


def test_a_header_block_of_exactly_the_limit_is_read() -> None:
    answer = b"HTTP/1.1 200 OK\r\n" + b"X-Many: 1\r\n" * (MAX_HEADERS - 1) + b"Content-Length: 2\r\n\r\nok"
    with _answering(answer) as (request, _):
        assert _get(request) == b"ok"


# -- a kept connection's GET: one buffer, one request's bytes, no timeout set per call ----------


def test_a_kept_connection_receives_each_answer_into_the_same_buffer() -> None:
    """An unchanged page on a kept connection costs no allocation the body's size: each GET's
    piece is a view into the one receive buffer the connection keeps."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    with _answering(answer, answer) as (request, _):
        kept = KeptConnection()
        first = list(get(request, Deadline(5.0), None, kept))
        assert len(first) == 1 and isinstance(first[0], memoryview) and first[0] == BODY
        buffer = first[0].obj
        second = list(get(request, Deadline(5.0), None, kept))
        assert isinstance(second[0], memoryview) and second[0].obj is buffer and second[0] == BODY
        kept.close()


def test_the_request_bytes_are_built_once_per_request() -> None:
    """The same Request sends the bytes built for it the first time; another one (rotated
    credentials, conditional headers) has its own."""
    kept = KeptConnection()
    request = Request(scheme="http", host="127.0.0.1", port=9400, target="/metrics")
    sent = kept.request_bytes(request, True)
    assert kept.request_bytes(request, True) is sent
    rotated = Request(**{**{f: getattr(request, f) for f in ("scheme", "host", "port", "target")}},
                      authorization="Bearer new")  # fmt: skip
    assert b"Authorization: Bearer new\r\n" in kept.request_bytes(rotated, True)
    assert b"Authorization" not in kept.request_bytes(request, True)
    assert b"Connection: close" in kept.request_bytes(request, False)


def test_a_kept_socket_is_non_blocking_and_a_slow_answer_still_ends_by_the_deadline() -> None:
    """The timeout is set once (non-blocking) when connecting, not before every send and recv;
    the deadline still bounds the whole GET: an answer that stops coming times out."""
    listener = socket.create_server(("127.0.0.1", 0))
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer)
            conn.recv(65536)
            conn.sendall(answer[:-10])  # then silence, the connection open
            conn.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    request = Request(scheme="http", host="127.0.0.1", port=listener.getsockname()[1], target="/metrics")
    kept = KeptConnection()
    try:
        assert _get(request, kept) == BODY
        sock = kept.take(request)
        assert sock is not None and sock.gettimeout() == 0.0
        kept.keep(request, sock)
        with pytest.raises(TimeoutError):
            _get_by(request, kept, Deadline(0.3))
    finally:
        kept.close()
        listener.close()
        thread.join(5)


def _get_by(request: Request, kept: KeptConnection, deadline: Deadline) -> bytes:
    return b"".join(bytes(piece) for piece in get(request, deadline, None, kept))


@pytest.mark.parametrize("chunk", [7000, 300 * 1024])
def test_a_body_bigger_than_the_buffer_reads_whole_twice_on_one_connection(chunk: int) -> None:
    """A 600 KiB body, chunked in small or large pieces, read past the first buffer's end (the
    buffer grows, pending bytes move to its front): each GET's pieces, copied, are the body."""
    body = b"".join(b'DCGM_FI_DEV_GPU_UTIL{gpu="%d"} %d\n' % (n % 8, n) for n in range(20000))
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(body, chunk)
    with _answering(answer, answer) as (request, _):
        kept = KeptConnection()
        assert _get(request, kept) == body
        assert _get(request, kept) == body
        kept.close()


def test_a_header_line_across_the_buffers_end_is_read_whole() -> None:
    """Header lines that straddle the receive buffer's end (it grows mid-line) read as sent."""
    first, second = b"a" * 40000, b"b" * 40000
    answer = b"HTTP/1.1 200 OK\r\nX-One: %s\r\nX-Two: %s\r\nETag: %s\r\nContent-Length: 2\r\n\r\nok" % (
        first,
        second,
        b'"v"',
    )
    with _answering(answer) as (request, _):
        validators = Validators()
        assert _get(request, validators=validators) == b"ok"
    assert validators.etag == '"v"'
