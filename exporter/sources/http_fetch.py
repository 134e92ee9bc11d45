"""One HTTP(S) GET under one deadline for all of it: name lookup, connect, TLS, request, headers, body.

A socket timeout bounds each read, not the answer: an upstream that drips one byte every two
seconds never trips a 5 s timeout. Here every blocking call gets the time *left* as its timeout
(CPython bounds one recv, sendall or TLS handshake by its timeout as a whole), so the GET as a
whole ends by the deadline. Standard library only: socket, ssl, select, and a small reader of
the answer (`_Answer`: status line, headers, chunked, Content-Length and read-to-close bodies)
over a receive buffer that applies the deadline (once connected the socket is non-blocking, and
each wait is a poll for the time left). The body is handed out piece by piece so the caller can
parse it as it streams.
A caller that reads one upstream over and over keeps its connection open (KeptConnection), and
with it one receive buffer and the request's bytes: a GET of an unchanged page then allocates
nothing the page's size, builds no request and sets no socket timeout (_Receiver).
"""

from __future__ import annotations

import concurrent.futures
import http.client
import ipaddress
import math
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

CHUNK_BYTES = 65536
"""The socket stream's buffer: status and header lines are read through it."""
BODY_PIECE_BYTES = 1024 * 1024
"""The most body handed out at once: a page of a few hundred KiB is one or two pieces (fewer
reads, each a recv and its poll) while a 64 MiB one still streams."""
MAX_HEADER_LINE = 65536
"""A status or header line longer than this is not HTTP (as http.client's limit)."""
MAX_HEADERS = 100
"""More header lines than this in one answer are not HTTP (as http.client's limit)."""


class FetchError(Exception):
    """The GET failed; `reason` is the label for ridgeline_sample_errors_total."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Deadline:
    """A point in time every step of one GET must finish by."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        """Seconds left; raises TimeoutError once none are."""
        left = self._end - self._clock()
        if left <= 0:
            raise TimeoutError(f"deadline of {self.seconds:g} s passed")
        return left


@dataclass(frozen=True, slots=True)
class Request:
    """Where to GET and with which headers; `authorization` is never logged or shown."""

    scheme: str
    host: str
    port: int
    target: str
    """Path and query, as sent on the request line."""
    headers: tuple[tuple[str, str], ...] = ()
    authorization: str | None = None
    context: ssl.SSLContext | None = None
    """The TLS context of an https GET (exporter/http_client.py builds it); None: the system's CAs."""


@dataclass(slots=True)
class Validators:
    """The answer's caching headers (ETag, Last-Modified), filled in by get(), and whether the
    upstream said 304 Not Modified to the conditional GET the caller sent with them."""

    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False

    def conditional_headers(self) -> tuple[tuple[str, str], ...]:
        """If-None-Match / If-Modified-Since for the next GET of the same page."""
        headers: list[tuple[str, str]] = []
        if self.etag is not None:
            headers.append(("If-None-Match", self.etag))
        if self.last_modified is not None:
            headers.append(("If-Modified-Since", self.last_modified))
        return tuple(headers)


class _Receiver:
    """A connection's answer as it arrives, received into one buffer a KeptConnection keeps across
    GETs (recv_into: no allocation the body's size a GET, no page faults to fill it afresh).

    The socket is non-blocking (set once, when connected): a recv that would block waits in
    poll() for the time the deadline leaves, so the GET as a whole ends by it without a timeout
    set on the socket before every call. The status and header lines are handed out as bytes;
    body pieces as views into the buffer, valid until the next read (the caller copies what it
    keeps).
    """

    def __init__(self) -> None:
        self._buffer = bytearray(CHUNK_BYTES)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._sock: socket.socket | None = None
        self._deadline: Deadline | None = None
        self._poll = select.poll()
        self._polled: socket.socket | None = None

    def attach(self, sock: socket.socket, deadline: Deadline) -> _Receiver:
        """Read this GET's answer off `sock` (whatever was left of an earlier one is dropped)."""
        if sock is not self._polled:
            if self._polled is not None and self._polled.fileno() >= 0:
                self._poll.unregister(self._polled)
            self._poll = select.poll()
            self._poll.register(sock, select.POLLIN)
            self._polled = sock
        self._sock, self._deadline = sock, deadline
        self._start = self._end = 0
        return self

    def _wait(self) -> None:
        """Until the socket is readable; TimeoutError once the deadline passed."""
        deadline = self._deadline
        assert deadline is not None
        while not self._poll.poll(math.ceil(deadline.remaining() * 1000)):
            pass

    def _room(self, wanted: int) -> None:
        """Free space after the pending bytes for `wanted` of them in all: they are moved to the
        front (over pieces already handed out) or into a bigger buffer."""
        pending = self._end - self._start
        if self._start + wanted <= len(self._buffer):
            return
        if wanted > len(self._buffer):
            size = -(-(wanted + wanted // 8) // CHUNK_BYTES) * CHUNK_BYTES
            buffer = bytearray(size)  # a new one: views handed out keep the old one alive
            buffer[:pending] = self._view[self._start : self._end]
            self._buffer, self._view = buffer, memoryview(buffer)
        elif pending:
            self._buffer[:pending] = bytes(self._view[self._start : self._end])
        self._start, self._end = 0, pending

    def _recv(self) -> int:
        """One recv into the free space (made when there is none); 0 when the upstream closed."""
        if self._end == len(self._buffer):
            self._room(self._end - self._start + CHUNK_BYTES)
        sock = self._sock
        assert sock is not None
        while True:
            try:
                got = sock.recv_into(self._view[self._end :])
            except (BlockingIOError, ssl.SSLWantReadError):
                self._wait()
                continue
            except ssl.SSLWantWriteError:  # TLS wants to send first (a key update)
                assert self._deadline is not None
                _writable(sock, self._deadline)
                continue
            self._end += got
            return got

    def _take(self, count: int) -> memoryview:
        piece = self._view[self._start : self._start + count]
        self._start += count
        return piece

    def readline(self, limit: int) -> bytes:
        """One line with its newline, at most `limit` bytes; what is left at the close."""
        scanned = 0  # bytes after the start already searched (a recv may move them)
        while True:
            newline = self._buffer.find(b"\n", self._start + scanned, self._end)
            if 0 <= newline < self._start + limit:
                return bytes(self._take(newline + 1 - self._start))
            if self._end - self._start >= limit:
                return bytes(self._take(limit))
            scanned = self._end - self._start
            if not self._recv():
                return bytes(self._take(self._end - self._start))

    def read(self, amount: int) -> memoryview:
        """`amount` bytes as one piece; fewer only when the upstream closed first."""
        self._room(amount)
        while self._end - self._start < amount and self._recv():
            pass
        return self._take(min(amount, self._end - self._start))

    def read1(self, amount: int) -> memoryview:
        """What has arrived, up to `amount` bytes (one recv when nothing has); empty at the close."""
        if self._end == self._start:
            self._start = self._end = 0
            self._recv()
        return self._take(min(amount, self._end - self._start))


class _Answer:
    """One HTTP/1.x answer read off the buffered socket: status, headers, and its body by framing.

    In place of http.client.HTTPResponse, whose header block goes through the email package: at
    ten GETs a second of a kept-alive loopback page that parse was a third of the GET's CPU. It
    raises http.client's exceptions (HTTPException and its kinds), so callers treat both alike.
    A 1xx interim answer is skipped; a body is framed by Transfer-Encoding: chunked, else by
    Content-Length, else read until the upstream closes (and the connection is not kept).
    """

    def __init__(self, fp: _Receiver) -> None:
        self._fp = fp
        while True:
            version, status, reason = self._status_line()
            headers = self._header_block()
            if not 100 <= status < 200:
                break
        self.status = status
        self.reason = reason
        self._headers = headers
        connection = (headers.get("connection") or "").lower()
        if version == "HTTP/1.1" or (version.startswith("HTTP/1.") and version != "HTTP/1.0"):
            self.will_close = "close" in connection
        else:  # HTTP/1.0 keeps the connection only when it says so
            self.will_close = "keep-alive" not in connection
        self.chunked = (headers.get("transfer-encoding") or "").strip().lower() == "chunked"
        self._chunk_left = 0
        self._done = False
        self.length: int | None = None
        """Body bytes still to come by Content-Length (None: framed otherwise)."""
        if status in (204, 304):
            self.length = 0
        elif not self.chunked:
            declared = (headers.get("content-length") or "").strip()
            if declared.isdigit():
                self.length = int(declared)
            else:
                self.will_close = True  # read until it closes: the connection cannot be kept

    def getheader(self, name: str) -> str | None:
        """The header's value (several joined by ', '), or None."""
        return self._headers.get(name.lower())

    def _line(self, what: str) -> bytes:
        line = self._fp.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            raise http.client.LineTooLong(what)
        return line

    def _status_line(self) -> tuple[str, int, str]:
        line = self._line("status line")
        if not line:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        version, _, rest = line.decode("iso-8859-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise http.client.BadStatusLine(line[:80].decode("iso-8859-1"))
        return version, int(code), reason.strip()

    def _header_block(self) -> dict[str, str]:
        """The headers by lower-cased name; a repeated one joined with ', ', a folded line (an
        obsolete continuation) added to the one before, a line without a colon ignored."""
        headers: dict[str, str] = {}
        last: str | None = None
        for _ in range(MAX_HEADERS + 1):
            line = self._line("header line")
            if line in (b"\r\n", b"\n", b""):
                return headers
            text = line.decode("iso-8859-1").rstrip("\r\n")
            if text[:1] in (" ", "\t") and last is not None:
                headers[last] = f"{headers[last]} {text.strip()}".strip()
                continue
            name, colon, value = text.partition(":")
            if not colon:
                continue
            last = name.strip().lower()
            value = value.strip()
            headers[last] = f"{headers[last]}, {value}" if last in headers else value
        raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")

    def read(self, amount: int = CHUNK_BYTES) -> memoryview | bytes:
        """Up to `amount` bytes of the body (a view, valid until the next read); empty at its end.
        A chunked body cut short raises IncompleteRead; one short of its Content-Length ends
        early, `length` left above 0."""
        if self._done:
            return b""
        if self.chunked:
            return self._read_chunked(amount)
        if self.length is None:  # until the upstream closes
            data = self._fp.read1(amount)
            self._done = not data
            return data
        if self.length <= 0:
            self._done = True
            return b""
        data = self._fp.read(min(amount, self.length))
        self.length -= len(data)
        self._done = not data
        return data

    def _read_chunked(self, amount: int) -> memoryview | bytes:
        if self._chunk_left == 0:
            size_line = self._line("chunk size")
            size_text = size_line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise http.client.IncompleteRead(b"") from None
            if size < 0:
                raise http.client.IncompleteRead(b"")
            if size == 0:
                while self._line("trailer line") not in (b"\r\n", b"\n", b""):
                    pass
                self._done = True
                return b""
            self._chunk_left = size
        want = min(amount, self._chunk_left)
        ends = want == self._chunk_left  # the chunk's CRLF is read with it: one piece, one view
        data = self._fp.read(want + 2 if ends else want)
        self._chunk_left -= min(len(data), want)
        if len(data) < want:
            raise http.client.IncompleteRead(bytes(data), self._chunk_left)
        if ends:
            if data[want:].tobytes() != b"\r\n":
                raise http.client.IncompleteRead(bytes(data[:want]))
            data = data[:want]
        return data

    def drain(self) -> None:
        """Read what is left of the body (nothing, for a 304)."""
        while self.read():
            pass


_resolver: concurrent.futures.ThreadPoolExecutor | None = None
_resolver_lock = threading.Lock()


def _resolve(host: str, port: int, deadline: Deadline) -> list[tuple[int, tuple[str, int]]]:
    """(family, address) pairs for host, within the deadline.

    getaddrinfo takes no timeout, so a name (not an IP literal) is looked up on a small worker
    pool and waited for only as long as the deadline allows; a hung resolver costs a worker,
    not the sampler.
    """
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        return [(family, (host, port))]
    global _resolver
    with _resolver_lock:
        if _resolver is None:
            _resolver = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="ridgeline-resolve")
        future = _resolver.submit(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    try:
        infos = future.result(timeout=deadline.remaining())
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"looking up {host} took longer than the deadline") from None
    except socket.gaierror as exc:
        raise FetchError("connection", f"cannot resolve {host}: {exc.strerror}") from None
    return [(info[0], (str(info[4][0]), int(info[4][1]))) for info in infos]


def _connect(request: Request, deadline: Deadline) -> socket.socket:
    errors: list[str] = []
    for family, address in _resolve(request.host, request.port, deadline):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(deadline.remaining())
            sock.connect(address)
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            errors.append(exc.strerror or str(exc))
            continue
        if request.scheme == "https":
            sock = _start_tls(sock, request, deadline)
        sock.settimeout(0.0)  # non-blocking from here: each wait is a poll for the time left
        return sock
    raise FetchError("connection", f"cannot connect: {'; '.join(errors) or 'no address'}")


def _start_tls(sock: socket.socket, request: Request, deadline: Deadline) -> socket.socket:
    context = request.context if request.context is not None else ssl.create_default_context()
    tls = context.wrap_socket(sock, server_hostname=request.host, do_handshake_on_connect=False)
    try:
        tls.settimeout(deadline.remaining())
        tls.do_handshake()
    except ssl.SSLError as exc:
        tls.close()
        raise FetchError("connection", f"TLS handshake failed: {exc.reason or exc}") from None
    except BaseException:
        tls.close()
        raise
    return tls


class KeptConnection:
    """The one connection a source keeps open between GETs of its upstream (HTTP/1.1 keep-alive):
    a GET then costs no connect, TLS handshake or close. It is kept only after a whole answer
    the upstream did not mark `Connection: close`, and dropped on any error."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._key: tuple[str, str, int] | None = None
        self.receiver = _Receiver()
        """The answers' buffer, kept across GETs and connections."""
        self._sent_for: tuple[Request, bool] | None = None
        self._sent = b""

    def request_bytes(self, request: Request, keep_alive: bool) -> bytes:
        """The GET's bytes, built again only for another request (the caller keeps its Request
        while the URL, the credentials and the conditional headers stay the same)."""
        sent_for = self._sent_for
        if sent_for is None or sent_for[0] is not request or sent_for[1] is not keep_alive:
            self._sent = _request_bytes(request, keep_alive=keep_alive)
            self._sent_for = (request, keep_alive)
        return self._sent

    def take(self, request: Request) -> socket.socket | None:
        sock, self._sock = self._sock, None
        if sock is not None and self._key != (request.scheme, request.host, request.port):
            sock.close()
            return None
        return sock

    def keep(self, request: Request, sock: socket.socket) -> None:
        self.close()
        self._sock, self._key = sock, (request.scheme, request.host, request.port)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _request_bytes(request: Request, *, keep_alive: bool = False) -> bytes:
    host = f"[{request.host}]" if ":" in request.host else request.host
    default_port = 443 if request.scheme == "https" else 80
    if request.port != default_port:
        host = f"{host}:{request.port}"
    lines = [f"GET {request.target} HTTP/1.1", f"Host: {host}"]
    if not keep_alive:
        lines.append("Connection: close")
    lines.append("Accept-Encoding: identity")
    lines += [f"{name}: {value}" for name, value in request.headers]
    if request.authorization is not None:
        lines.append(f"Authorization: {request.authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _writable(sock: socket.socket, deadline: Deadline) -> None:
    """Until `sock` takes more bytes; TimeoutError once the deadline passed."""
    while not select.select([], [sock], [], deadline.remaining())[1]:
        pass


def _send(sock: socket.socket, data: bytes, deadline: Deadline) -> None:
    """All of `data` on the non-blocking socket, by the deadline."""
    view = memoryview(data)
    sent = 0
    while sent < len(data):
        try:
            sent += sock.send(view[sent:])
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            _writable(sock, deadline)


def _begin(
    sock: socket.socket, request: Request, deadline: Deadline, keep_alive: bool, kept: KeptConnection | None
) -> _Answer:
    if kept is None:
        _send(sock, _request_bytes(request, keep_alive=keep_alive), deadline)
        return _Answer(_Receiver().attach(sock, deadline))
    _send(sock, kept.request_bytes(request, keep_alive), deadline)
    return _Answer(kept.receiver.attach(sock, deadline))


def _open_and_begin(
    request: Request, deadline: Deadline, kept: KeptConnection | None
) -> tuple[socket.socket, _Answer]:
    """A socket with the answer's status and headers read: on the kept connection when there is
    one (and again on a new one if the upstream had closed it meanwhile), else on a new one."""
    sock = kept.take(request) if kept is not None else None
    if sock is not None:
        try:
            return sock, _begin(sock, request, deadline, True, kept)
        except TimeoutError:
            sock.close()
            raise
        except (OSError, http.client.HTTPException):  # closed while idle: once more, afresh
            sock.close()
    try:
        sock = _connect(request, deadline)
    except (TimeoutError, FetchError):
        raise
    except OSError as exc:
        raise FetchError("connection", f"cannot connect: {exc.strerror or exc}") from None
    try:
        return sock, _begin(sock, request, deadline, kept is not None, kept)
    except BaseException:
        sock.close()
        raise


def get(
    request: Request,
    deadline: Deadline,
    validators: Validators | None = None,
    kept: KeptConnection | None = None,
) -> Iterator[memoryview | bytes]:
    """The body of a 200 answer, piece by piece, all by the deadline. Each piece is a view into
    the connection's receive buffer, valid until the next piece is asked for: a caller that
    keeps one copies it (bytes(piece)); one that compares it with the last page need not.

    Raises TimeoutError when the deadline passes (at any step), FetchError otherwise (reasons
    `connection`, `http_status`, `parse_error`). A generator: the socket is closed when it is
    exhausted or closed, unless `kept` holds it for the next GET (a whole answer, kept alive).
    With `validators`, the answer's ETag and Last-Modified are stored in it, and a 304 (to a
    conditional GET whose headers the caller sent) ends the body at once with `not_modified` set.
    """
    sock, response = _opened(request, deadline, kept)
    whole = False
    try:
        if validators is not None and _not_modified(request, response, validators):
            response.drain()  # no body, by definition; the connection may be kept
            whole = True
            return
        _check_answer(response)
        yield from _body(response)
        whole = True
    except TimeoutError:
        raise
    except OSError as exc:  # reset, broken pipe, TLS error mid-read
        raise FetchError("connection", f"connection failed: {exc.strerror or exc}") from None
    finally:
        if whole and kept is not None and not response.will_close:
            kept.keep(request, sock)
        else:
            sock.close()


def _opened(
    request: Request, deadline: Deadline, kept: KeptConnection | None
) -> tuple[socket.socket, _Answer]:
    """A connection with the answer's status line and headers read, failures as FetchError."""
    try:
        return _open_and_begin(request, deadline, kept)
    except http.client.HTTPException as exc:
        raise FetchError("parse_error", f"did not answer HTTP ({type(exc).__name__}: {exc})") from None
    except (TimeoutError, FetchError):
        raise
    except OSError as exc:
        raise FetchError("connection", f"connection failed: {exc.strerror or exc}") from None


def _not_modified(request: Request, response: _Answer, validators: Validators) -> bool:
    """Whether the answer is a 304 to a conditional GET; else its validators are stored."""
    conditional = any(name.startswith("If-") for name, _ in request.headers)
    if response.status == 304 and conditional:
        validators.not_modified = True
        return True
    validators.not_modified = False
    validators.etag = response.getheader("ETag")
    validators.last_modified = response.getheader("Last-Modified")
    return False


def _check_answer(response: _Answer) -> None:
    """A 200 with a plain-text body, or the FetchError that says what it was instead."""
    if response.status != 200:
        hint = " (check the scrape credentials)" if response.status in (401, 403) else ""
        raise FetchError("http_status", f"answered HTTP {response.status} {response.reason}{hint}")
    encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
    if encoding != "identity":
        raise FetchError("parse_error", f"answered with Content-Encoding {encoding}, not plain text")


def _body(response: _Answer) -> Iterator[memoryview | bytes]:
    """The body chunk by chunk; one cut short of its Content-Length is a `connection` error."""
    while True:
        try:
            chunk = response.read(BODY_PIECE_BYTES)
        except http.client.IncompleteRead as exc:
            raise FetchError("connection", f"the connection closed mid-body ({exc})") from None
        except http.client.HTTPException as exc:
            raise FetchError("parse_error", f"sent a malformed body ({type(exc).__name__})") from None
        if not chunk:
            missing = response.length
            if missing:
                # a page cut mid-number must not pass for a whole one
                raise FetchError(
                    "connection", f"the connection closed {missing} bytes short of the Content-Length"
                )
            return
        yield chunk
