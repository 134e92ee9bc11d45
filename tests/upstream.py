"""A loopback dcgm-exporter for the hardening tests: serves whatever page the test sets, stamped
as the test says, and can also cut a body short of its Content-Length.

The fixture page is tests/data/dcgm-exporter/legacy-h100-no-pods.txt (one H100, GPU 0); the
stamp is appended to each DCGM_FI_* line in milliseconds, as the text format writes it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PAGE = (Path(__file__).parent / "data" / "dcgm-exporter" / "legacy-h100-no-pods.txt").read_bytes()
DRAM = "0.712663"
"""GPU 0's DCGM_FI_PROF_DRAM_ACTIVE on the fixture page."""


def stamped(stamp: str | None, page: bytes = PAGE, dram: str | None = None) -> bytes:
    """The page with `stamp` (milliseconds as text: "1764432000000", "NaN", "+Inf") after each
    DCGM_FI_* value, and DRAM_ACTIVE replaced by `dram` when given."""
    lines = []
    for line in page.split(b"\n"):
        if dram is not None and line.startswith(b"DCGM_FI_PROF_DRAM_ACTIVE{"):
            line = line.rsplit(b" ", 1)[0] + b" " + dram.encode()
        if stamp is not None and line.startswith(b"DCGM_FI_"):
            line += b" " + stamp.encode()
        lines.append(line)
    return b"\n".join(lines)


def millis(seconds: float) -> str:
    return str(round(seconds * 1000))


class Upstream(ThreadingHTTPServer):
    daemon_threads = True
    page: Callable[[], bytes]
    """The body of the next answer (called per request)."""
    cut_at: int | None
    """Send only this many bytes of the body (Content-Length says all), then close."""
    requests: int


class _Handler(BaseHTTPRequestHandler):
    server: Upstream
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.requests += 1
        body = self.server.page()
        cut = self.server.cut_at
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body if cut is None else body[:cut])
            self.wfile.flush()
            if cut is not None:
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@contextmanager
def upstream(page: Callable[[], bytes] = lambda: PAGE) -> Iterator[Upstream]:
    """A running upstream on 127.0.0.1 (its URL: url_of)."""
    server = Upstream(("127.0.0.1", 0), _Handler)
    server.page = page
    server.cut_at = None
    server.requests = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url_of(server: Upstream, path: str = "/metrics") -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}{path}"
