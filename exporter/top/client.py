"""`ridgeline top`'s HTTP client: `GET /classify` from each node, as any client would do it.

Only the HTTP API, never the daemon's state (tests/test_layers.py); the one client configuration
of exporter/http_client.py (`--node.*`). A node that fails gives a `NodeReading` with `error`
set, and nothing raises.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from exporter.http_client import (
    NODE_FLAGS,
    BasicAuth,
    ClientConfigError,
    HTTPClientConfig,
    split_url_credentials,
)
from exporter.verdict import LiveVerdict, decode_verdict

CLIENT_PREFIX = NODE_FLAGS
"""`top`'s HTTP client flags: --node.basic-auth.username, --node.tls.ca-file, ..."""

CREDENTIAL_FLAGS = (
    f"--{CLIENT_PREFIX}.basic-auth.username, --{CLIENT_PREFIX}.basic-auth.password-file "
    f"or --{CLIENT_PREFIX}.bearer-token-file"
)


class ClientSetupError(ValueError):
    """A URL, certificate or password file that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class NodeReading:
    """One node's answer to one poll: its GPUs' verdicts, or why there are none."""

    name: str
    """The URL as shown (scheme, host, port; never a password)."""
    verdicts: tuple[LiveVerdict, ...] = ()
    source: str | None = None
    ready: bool = False
    reason: str | None = None
    error: str | None = None
    """Set when the node did not answer usefully: refused, timed out, 401, not JSON, ..."""
    http_status: int | None = None
    """The HTTP status of an error answer (401, 503, ...): the node is up but said no."""
    fetched_at: float = field(default_factory=time.time)

    @property
    def answered(self) -> bool:
        return self.error is None

    @property
    def trouble(self) -> str:
        """What went wrong, as the status line and `--once` say it: a node that answered an
        error status is not "not answering"."""
        if self.http_status is not None:
            return f"answered {self.error}"
        return f"not answering: {self.error}"


def display_name(url: str) -> str:
    """scheme://host:port[/path] without user:password@ and without /classify."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    path = parts.path.removesuffix("/classify").rstrip("/")
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def classify_url(url: str) -> tuple[str, BasicAuth | None]:
    """The GET /classify address for a node URL (`host:port` means http://), and any
    user:password in it; ClientSetupError for one that is not an http(s) URL."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ClientSetupError(f"--url {url!r}: expected http(s)://HOST:PORT, e.g. http://gpu-node-1:10295")
    try:
        port = parts.port
    except ValueError:
        raise ClientSetupError(f"--url {url!r}: the port is not a number in 1-65535") from None
    _, credentials = split_url_credentials(text)
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    path = parts.path.rstrip("/")
    if not path.endswith("/classify"):
        path += "/classify"
    return urlunsplit((parts.scheme, netloc, path, "", "")), credentials


class NodeClient:
    """Polls one node's GET /classify."""

    def __init__(
        self,
        url: str,
        *,
        client: HTTPClientConfig | None = None,
        timeout: float = 3.0,
    ) -> None:
        self.url, from_url = classify_url(url)
        self.name = display_name(self.url)
        try:
            self._client = (client or HTTPClientConfig()).with_credentials(from_url)
            self._context = self._client.context_for(self.url)
        except ClientConfigError as exc:
            raise ClientSetupError(f"--url {self.name}: {exc}") from None
        self._timeout = timeout

    def fetch(self) -> NodeReading:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        try:
            authorization = self._client.authorization()
        except ClientConfigError as exc:
            return NodeReading(self.name, error=str(exc))
        if authorization is not None:
            request.add_header("Authorization", authorization)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as response:
                raw = response.read(32 * 1024 * 1024)
        except urllib.error.HTTPError as exc:
            exc.close()
            hint = f" (wrong or missing credentials: {CREDENTIAL_FLAGS})" if exc.code == 401 else ""
            return NodeReading(self.name, error=f"HTTP {exc.code} {exc.reason}{hint}", http_status=exc.code)
        except (OSError, ValueError) as exc:  # refused, timed out, TLS, DNS, a malformed answer
            reason = getattr(exc, "reason", None) or exc
            return NodeReading(self.name, error=_reason_text(reason) + self._tls_hint(reason))
        return parse_answer(self.name, raw)

    def _tls_hint(self, reason: object) -> str:
        """A TLS port hangs up on plain HTTP without a word: say so when an http:// URL meets that."""
        dropped = isinstance(
            reason, http.client.RemoteDisconnected | ConnectionResetError | http.client.BadStatusLine
        )
        if self.url.startswith("http:") and dropped:
            https = "https:" + self.url.removeprefix("http:").removesuffix("/classify")
            return f" (the port closed a plain-HTTP request: if it serves TLS, use {https})"
        return ""


def _reason_text(reason: object) -> str:
    if isinstance(reason, TimeoutError | ssl.SSLError | ConnectionError):
        text = str(reason) or type(reason).__name__
        return text if not isinstance(reason, TimeoutError) else "timed out"
    return str(reason)


def parse_answer(name: str, raw: bytes) -> NodeReading:
    """A GET /classify body into a reading; anything else is an error reading, not an exception."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return NodeReading(name, error="the answer is not JSON: is this a Ridgeline exporter?")
    gpus = body.get("gpus") if isinstance(body, dict) else None
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        return NodeReading(name, error="the answer has no GPU list: is this a Ridgeline exporter?")
    return NodeReading(
        name,
        verdicts=tuple(decode_verdict(g) for g in gpus),
        source=str(body.get("source")) if body.get("source") is not None else None,
        ready=bool(body.get("ready")),
        reason=str(body.get("reason")) if body.get("reason") is not None else None,
    )


def fetch_all(clients: Sequence[NodeClient]) -> list[NodeReading]:
    """Every node at once (a slow node costs its own timeout, not the sum), in the given order."""
    if len(clients) == 1:
        return [clients[0].fetch()]
    with ThreadPoolExecutor(max_workers=min(16, len(clients))) as pool:
        return list(pool.map(lambda c: c.fetch(), clients))
