"""TLS and basic auth for `ridgeline serve --web-config FILE`, in exporter-toolkit's YAML shape.

Keys Python's ssl cannot honour are refused by name, never ignored. Basic auth is an ASGI
middleware whose outcomes are cached as keyed HMACs, so bcrypt runs once per credential; the
checks that must run wait in exporter/web/auth_admission.py. docs/daemon.md, "Attribution and
web config" and "Connections and hostile clients", says what is checked and why.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import os
import random
import re
import ssl
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import bcrypt
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from exporter.web.auth_admission import CheckPool, ClientGone, peer_key

ClientAuthType = Literal["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"]

_CERT_REQS: dict[str, ssl.VerifyMode] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}

_UNSUPPORTED_TLS_KEYS: dict[str, str] = {
    "cert": "inline certificates are not supported; use cert_file",
    "key": "inline keys are not supported; use key_file",
    "client_ca": "inline client CAs are not supported; use client_ca_file",
    "client_allowed_sans": "SAN allow-lists are not supported; issue client certs from a dedicated CA",
    "cipher_suites": "cipher suite selection is not supported (Python's ssl defaults apply)",
    "curve_preferences": "curve selection is not supported (Python's ssl defaults apply)",
    "prefer_server_cipher_suites": "cipher preference is not supported (Python's ssl defaults apply)",
}
_UNSUPPORTED_TOP_KEYS: dict[str, str] = {
    "http_server_config": "http_server_config (HTTP/2, extra headers) is not supported",
    "rate_limit": "rate_limit is not supported",
}

_BCRYPT_HASH = re.compile(r"^\$2[aby]\$(\d{2})\$[./A-Za-z0-9]{53}$")

REALM = "ridgeline"

MAX_BCRYPT_COST = 14
"""The dearest hash accepted: one check at cost 14 is about a second of a core, and each step
doubles it (htpasswd -B writes 5, exporter-toolkit's docs use 10)."""
BCRYPT_MAX_PASSWORD_BYTES = 72
"""bcrypt reads no further; a longer password is refused before it costs a check."""
REJECTED_CACHE = 4096
"""Wrong credentials remembered (least recently used forgotten first)."""
REFUSAL_DELAY_SECONDS = 3.0
"""How long a refused guess is held before its 429, at least (each hold drawn from one to two
times this), so a refused client cannot spin and guesses refused together do not come back
together (docs/daemon.md, "Connections and hostile clients")."""


READ_AHEAD_BYTES = 65536
"""Body bytes read ahead while a password check waits (to see the client leave); beyond them the
rest is left unread for the app."""


class WebConfigError(ValueError):
    """A web config file that cannot be used; the message names the file and the field."""


class TLSServerConfig(BaseModel):
    """The subset of exporter-toolkit's tls_server_config that Python's ssl can honour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    client_auth_type: ClientAuthType = "NoClientCert"
    min_version: Literal["TLS12"] = Field(
        "TLS12", description="Python's ssl already refuses anything older than TLS 1.2"
    )
    max_version: Literal["TLS13"] = "TLS13"

    @model_validator(mode="before")
    @classmethod
    def _refuse_unsupported(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key, why in _UNSUPPORTED_TLS_KEYS.items():
                if key in data:
                    raise ValueError(f"{key}: {why}")
            if data.get("client_auth_type") in ("RequestClientCert", "RequireAnyClientCert"):
                raise ValueError(
                    f"client_auth_type {data['client_auth_type']} accepts unverified client "
                    "certificates and is not supported; use RequireAndVerifyClientCert"
                )
        return data

    @model_validator(mode="after")
    def _ca_and_policy_agree(self) -> TLSServerConfig:
        if self.client_auth_type != "NoClientCert" and self.client_ca_file is None:
            raise ValueError(f"client_auth_type {self.client_auth_type} needs client_ca_file")
        if self.client_ca_file is not None and self.client_auth_type == "NoClientCert":
            raise ValueError(
                "client_ca_file is set but client_auth_type is NoClientCert, so client "
                "certificates would never be checked; set client_auth_type: RequireAndVerifyClientCert"
            )
        return self


class WebConfig(BaseModel):
    """A validated --web-config file: optional TLS, optional basic-auth users."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tls_server_config: TLSServerConfig | None = None
    basic_auth_users: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _refuse_unsupported(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key, why in _UNSUPPORTED_TOP_KEYS.items():
                if key in data:
                    raise ValueError(why)
        return data

    @field_validator("basic_auth_users", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("basic_auth_users")
    @classmethod
    def _hashes_are_bcrypt(cls, users: dict[str, str]) -> dict[str, str]:
        for user, hashed in users.items():
            if not user:
                raise ValueError("empty user name")
            if ":" in user:
                raise ValueError(f"user {user!r}: a basic-auth user name cannot contain ':'")
            match = _BCRYPT_HASH.match(hashed)
            if match is None:
                raise ValueError(
                    f"user {user!r}: expected a bcrypt hash like $2b$10$... (60 characters), "
                    "e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                )
            cost = int(match.group(1))
            if not 4 <= cost <= MAX_BCRYPT_COST:
                raise ValueError(
                    f"user {user!r}: bcrypt cost {cost} is outside 4..{MAX_BCRYPT_COST} (each step "
                    "doubles the CPU a check costs; 10 is usual)"
                )
        return users


def load_web_config(path: str | os.PathLike[str]) -> WebConfig:
    """Read, validate and check a web config file; raises WebConfigError naming file and field.

    Relative file names resolve against the config file's directory (as exporter-toolkit
    does), and the certificate, key and CA are loaded once here so that a wrong file fails at
    startup with its field name rather than as an opaque uvicorn traceback.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise WebConfigError(f"web config {file}: cannot read: {error.strerror or error}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise WebConfigError(f"web config {file}{where}: not valid YAML: {error}") from None
    if raw is None:  # empty, blank or only comments: a truncating editor, `: > web.yml`
        raise WebConfigError(
            f"web config {file}: the file is empty (no tls_server_config, no basic_auth_users); "
            "refused so that a truncated file cannot turn TLS or basic auth off"
        )
    if not isinstance(raw, dict):
        raise WebConfigError(f"web config {file}: expected a mapping at the top level")
    try:
        config = WebConfig.model_validate(raw)
    except ValidationError as error:
        raise WebConfigError(f"web config {file}: {_describe(error)}") from None
    if config.tls_server_config is not None:
        tls = _resolve(config.tls_server_config, file.parent)
        _check_files(tls, file)
        config = config.model_copy(update={"tls_server_config": tls})
        tls_context(config, file)  # a certificate that cannot be loaded fails here, named
    return config


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{field}: {message}" if field else message)
    return "; ".join(problems)


def _resolve(tls: TLSServerConfig, base: Path) -> TLSServerConfig:
    def absolute(p: Path | None) -> Path | None:
        return None if p is None else (p if p.is_absolute() else base / p)

    return tls.model_copy(
        update={
            "cert_file": absolute(tls.cert_file),
            "key_file": absolute(tls.key_file),
            "client_ca_file": absolute(tls.client_ca_file),
        }
    )


def _check_files(tls: TLSServerConfig, file: Path) -> None:
    for field in ("cert_file", "key_file", "client_ca_file"):
        target: Path | None = getattr(tls, field)
        if target is not None and not target.is_file():
            raise WebConfigError(f"web config {file}: tls_server_config.{field}: {target} is not a file")


def tls_context(config: WebConfig, file: str | os.PathLike[str] = "") -> ssl.SSLContext | None:
    """The server SSLContext for a loaded config (None without TLS); WebConfigError naming the
    field when a certificate, key or CA cannot be loaded. TLS 1.2 at least, Python's defaults
    otherwise (the keys that would change them are refused above)."""
    tls = config.tls_server_config
    if tls is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (ssl.SSLError, OSError) as error:
        raise WebConfigError(
            f"web config {file}: tls_server_config.cert_file/key_file: cannot load "
            f"{tls.cert_file} with {tls.key_file}: {error}"
        ) from None
    context.verify_mode = _CERT_REQS[tls.client_auth_type]
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca_file)
        except (ssl.SSLError, OSError) as error:
            raise WebConfigError(
                f"web config {file}: tls_server_config.client_ca_file: cannot load "
                f"{tls.client_ca_file}: {error}"
            ) from None
    return context


class PasswordChecker:
    """bcrypt verification for one set of users, with caches of outcomes kept as keyed HMACs.

    A credential that verified is remembered (never the password: an HMAC under a per-process
    random key), so later requests compare HMACs in constant time and never queue for bcrypt. A
    wrong one is remembered too, at most REJECTED_CACHE of them, so a client repeating a stale
    password costs no bcrypt either. Built from `previous` (a reload), it keeps the outcomes of
    every user whose hash did not change.
    """

    _key: bytes
    _decoy: bytes

    def __init__(self, users: Mapping[str, str], previous: PasswordChecker | None = None) -> None:
        # $2y$ (htpasswd) and $2b$ are the same algorithm; the bcrypt package wants $2b$.
        self._hashes = {user: _as_2b(hashed) for user, hashed in users.items()}
        self._key = previous._key if previous is not None else os.urandom(32)
        self._verified: dict[bytes, str] = {}
        self._rejected: OrderedDict[bytes, str] = OrderedDict()
        cost = max((int(h[4:6]) for h in self._hashes.values()), default=4)
        if previous is not None and int(previous._decoy[4:6]) == cost:
            self._decoy = previous._decoy
        else:  # unknown users are checked against this so they take as long as known ones
            self._decoy = bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(rounds=cost))
        if previous is not None:
            unchanged = {u for u, h in self._hashes.items() if previous._hashes.get(u) == h}
            self._verified = {d: u for d, u in dict(previous._verified).items() if u in unchanged}
            for digest, user in list(previous._rejected.items()):
                if user in unchanged or (user not in self._hashes and user not in previous._hashes):
                    self._rejected[digest] = user

    def digest(self, user: str, password: bytes) -> bytes:
        return hmac.new(self._key, user.encode() + b"\0" + password, hashlib.sha256).digest()

    def cached(self, digest: bytes) -> bool | None:
        """True: verified before; False: rejected before; None: bcrypt has to say."""
        if digest in self._verified:
            return True
        if digest in self._rejected:
            self._rejected.move_to_end(digest)
            return False
        return None

    def verify(self, user: str, password: bytes) -> bool:
        """The slow path: bcrypt. Call it off the event loop; it changes nothing (see `remember`)."""
        hashed = self._hashes.get(user)
        if len(password) > BCRYPT_MAX_PASSWORD_BYTES:
            return False
        try:
            ok = bcrypt.checkpw(password, hashed if hashed is not None else self._decoy)
        except ValueError:
            ok = False
        return ok and hashed is not None

    def remember(self, user: str, digest: bytes, ok: bool) -> None:
        """Record bcrypt's answer for `digest` (on the event loop's thread)."""
        if ok:
            self._verified[digest] = user
            return
        self._rejected[digest] = user
        self._rejected.move_to_end(digest)
        while len(self._rejected) > REJECTED_CACHE:
            self._rejected.popitem(last=False)


def _as_2b(hashed: str) -> bytes:
    return ("$2b$" + hashed[4:] if hashed.startswith("$2y$") else hashed).encode()


class CheckerSource(Protocol):
    """Where the middleware gets the users in force (the web-config watcher reloads them)."""

    def password_checker(self) -> PasswordChecker | None: ...


class _FixedUsers:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._checker = PasswordChecker(users) if users else None

    def password_checker(self) -> PasswordChecker | None:
        return self._checker


class BasicAuthMiddleware:
    """ASGI middleware: HTTP basic auth against bcrypt hashes; exempt paths pass untouched.

    `users` is a fixed mapping (user -> bcrypt hash) or a CheckerSource whose users may change;
    no users means no authentication.
    """

    def __init__(
        self,
        app: ASGIApp,
        users: Mapping[str, str] | CheckerSource,
        exempt_paths: frozenset[str] = frozenset({"/healthz"}),
        *,
        pool: CheckPool | None = None,
        on_refusal: Callable[[str], None] | None = None,
        refusal_delay: float = REFUSAL_DELAY_SECONDS,
        hold_refusals: Callable[[], bool] = lambda: True,
    ) -> None:
        self.app = app
        self.exempt_paths = exempt_paths
        self._source: CheckerSource = _FixedUsers(users) if isinstance(users, Mapping) else users
        self.pool = pool or CheckPool()
        self._on_refusal = on_refusal
        self._refusal_delay = refusal_delay
        self._hold_refusals = hold_refusals
        """False when holding a refused guess would cost more than it saves (serve: when three
        quarters of the connection cap are in use, a held guess is a slot a scrape may need)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        checker = self._source.password_checker()
        if (
            checker is None
            or scope["type"] not in ("http", "websocket")
            or scope.get("path") in self.exempt_paths
        ):
            await self.app(scope, receive, send)
            return
        ahead = _ReadAhead(receive)
        try:
            verdict = await self._authorised(checker, scope, ahead)
        except ClientGone:
            return  # nobody to answer; its check never ran
        if verdict:
            await self.app(scope, ahead.receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if verdict is None:
            if self._on_refusal is not None:
                self._on_refusal(
                    f"no room among the password checks waiting ({self.pool.max_pending} in all, "
                    f"{self.pool.peer_pending} per client address): refusing guesses with 429"
                )
            if self._hold_refusals():
                await asyncio.sleep(self._refusal_delay * random.uniform(1.0, 2.0))
            await _plain(
                send, 429, b"Too many password checks at once; retry later\n", [(b"retry-after", b"1")]
            )
            return
        await _plain(send, 401, b"Unauthorized\n", [(b"www-authenticate", f'Basic realm="{REALM}"'.encode())])

    async def _authorised(self, checker: PasswordChecker, scope: Scope, ahead: _ReadAhead) -> bool | None:
        """True/False, or None when the check was refused unchecked (no room on the bcrypt thread)."""
        credentials = _credentials(scope)
        if credentials is None:
            return False
        user, password = credentials
        digest = checker.digest(user, password)
        known = checker.cached(digest)
        if known is not None:
            return known
        peer = peer_key(scope.get("client"))
        gone = ahead.gone if scope["type"] == "http" else None
        verdict = await self.pool.check(checker.verify, user, password, peer=peer, digest=digest, gone=gone)
        if verdict is not None:
            checker.remember(user, digest, verdict)
        return verdict


class _ReadAhead:
    """The request's receive(), read while its password check waits so that a client that leaves
    (uvicorn answers http.disconnect) takes its check with it; the app gets what was read first."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._read: list[Message] = []

    async def gone(self) -> None:
        """Returns once the client has disconnected; never after READ_AHEAD_BYTES of body."""
        size = 0
        while size <= READ_AHEAD_BYTES:
            message = await self._receive()
            self._read.append(message)
            if message["type"] == "http.disconnect":
                return
            size += len(message.get("body", b""))
        await asyncio.get_running_loop().create_future()  # cancelled when the check is done

    async def receive(self) -> Message:
        if self._read:
            return self._read.pop(0)
        return await self._receive()


async def _plain(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *headers,
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _credentials(scope: Scope) -> tuple[str, bytes] | None:
    """(user, password) from an Authorization: Basic header, or None when absent/malformed."""
    for name, value in scope.get("headers", ()):
        if name.lower() != b"authorization":
            continue
        scheme, _, encoded = value.partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        user, separator, password = decoded.partition(b":")
        if not separator:
            return None
        try:
            return user.decode("utf-8"), password
        except UnicodeDecodeError:
            return None
    return None
