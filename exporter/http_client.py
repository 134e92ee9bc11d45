"""The one configuration of Ridgeline's HTTP clients: the scrape source, `top` and `report`.

Shaped like prometheus/common's HTTPClientConfig (config/http_config.go): `basic_auth`
{username, password, password_file}, `bearer_token` / `bearer_token_file`, `tls_config` {ca_file,
cert_file, key_file, server_name, insecure_skip_verify}, with its rule that one way to
authenticate is given at most. Credentials written in a URL are split off here and nowhere else;
files are read again for every request, so a rotated secret applies without a restart. Errors
name the flag that gave the value (`prefix`). Standard library only.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from exporter.option_specs import OptionError, OptionSpec

SCRAPE_FLAGS, NODE_FLAGS, PROMETHEUS_FLAGS = "scrape", "node", "prometheus"
"""The three clients' flag prefixes: the scrape source's (serve, record), top's towards its nodes,
report's towards the query API. Here, so that a command's parser never imports its client."""

MAX_SECRET_BYTES = 4096
"""A password or token file is read up to this much of its first line."""


class ClientConfigError(OptionError):
    """A credential or TLS setting that cannot be used; the message names the flag and the file."""


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """prometheus/common's basic_auth: a user name and a password, given inline or in a file."""

    username: str
    password: str | None = field(default=None, repr=False)
    password_file: Path | None = None


@dataclass(frozen=True, slots=True)
class TLSConfig:
    """prometheus/common's tls_config (the fields Ridgeline's clients use)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str | None = None
    """The name the server's certificate is checked against (and sent as SNI), when it is not
    the URL's host: a node reached by IP address whose certificate names it."""
    insecure_skip_verify: bool = False


@dataclass(frozen=True, slots=True)
class HTTPClientConfig:
    """How one client authenticates and checks TLS; built by the flag helper of
    exporter/commands/http_flags.py, or directly (tests, tools)."""

    basic_auth: BasicAuth | None = None
    bearer_token: str | None = field(default=None, repr=False)
    bearer_token_file: Path | None = None
    basic_auth_file: Path | None = None
    """A file whose first line is `user:password`: the older `serve --scrape-auth-file`
    (deprecated; basic_auth with a password_file says the same)."""
    tls_config: TLSConfig = field(default_factory=TLSConfig)
    prefix: str = ""
    """The flags' family (`--scrape.`, `--node.`, `--prometheus.`): errors name the flag."""

    def flag(self, name: str) -> str:
        """The flag that sets `name` (a prometheus/common path such as tls_config.ca_file)."""
        if not self.prefix:
            return name
        if name == "basic_auth_file":  # the older flag is --scrape-auth-file, not --scrape.auth-file
            return self.prefix.rstrip(".") + "-auth-file"
        return self.prefix + FLAG_WORDS[name]

    def check(self) -> None:
        """prometheus/common's Validate, for the fields here: one way to authenticate at most,
        a password inline or in a file, a key only with its certificate."""
        given = self._ways_given()
        if len(given) > 1:
            raise ClientConfigError(f"give one way to authenticate, not {' and '.join(given)}")
        auth = self.basic_auth
        if auth is not None and auth.password is not None and auth.password_file is not None:
            raise ClientConfigError(
                f"give the password in {self.flag('basic_auth.password_file')} or with the user, not both"
            )
        tls = self.tls_config
        if tls.key_file is not None and tls.cert_file is None:
            key, cert = self.flag("tls_config.key_file"), self.flag("tls_config.cert_file")
            raise ClientConfigError(f"{key} needs {cert}")

    def with_url_credentials(self, url: str) -> tuple[str, HTTPClientConfig]:
        """(the URL without its user:password@, this config with them as basic_auth). A URL with
        credentials beside another way to authenticate is refused, as check() refuses two."""
        clean, from_url = split_url_credentials(url)
        return (clean, self.with_credentials(from_url)) if from_url is not None else (url, self)

    def with_credentials(self, from_url: BasicAuth | None) -> HTTPClientConfig:
        """This config with a URL's user:password@ as basic_auth (see with_url_credentials)."""
        if from_url is None:
            return self
        given = self._ways_given()
        if given:
            raise ClientConfigError(
                f"give one way to authenticate, not user:password@ in the URL and {' and '.join(given)}"
            )
        return replace(self, basic_auth=from_url)

    def authorization(self) -> str | None:
        """The Authorization header's value, its files read now; None without credentials."""
        auth = self.basic_auth
        if auth is not None:
            password = auth.password
            if auth.password_file is not None:
                password = read_secret(auth.password_file, self.flag("basic_auth.password_file"))
            return basic_header(auth.username, password or "")
        if self.basic_auth_file is not None:
            pair = read_secret(self.basic_auth_file, self.flag("basic_auth_file"))
            user, colon, password = pair.partition(":")
            if not colon or not user:
                raise ClientConfigError(
                    f"{self.flag('basic_auth_file')} {self.basic_auth_file}: expected user:password"
                )
            return basic_header(user, password)
        token = self.bearer_token.strip() if self.bearer_token is not None else None
        if self.bearer_token_file is not None:
            token = read_secret(self.bearer_token_file, self.flag("bearer_token_file"))
            if not token:
                raise ClientConfigError(f"{self.flag('bearer_token_file')} {self.bearer_token_file} is empty")
        return None if token is None else f"Bearer {token}"

    def _ways_given(self) -> list[str]:
        """The flags of each way to authenticate that is set."""
        return [
            self.flag(name)
            for name, present in (
                ("basic_auth", self.basic_auth is not None),
                ("bearer_token", self.bearer_token is not None),
                ("bearer_token_file", self.bearer_token_file is not None),
                ("basic_auth_file", self.basic_auth_file is not None),
            )
            if present
        ]

    def context_for(self, url: str) -> ssl.SSLContext | None:
        """The TLS context for a GET of `url`, the one rule of every client: ssl_context() for
        https; None for http, where a TLS setting is refused (naming its flag) rather than
        silently unused: a CA or certificate given for an http:// URL most likely means the
        URL lacks its s."""
        if urlsplit(url).scheme == "https":
            return self.ssl_context()
        given = self._tls_given()
        if given:
            verb, flags = ("is", "flag") if len(given) == 1 else ("are", "flags")
            raise ClientConfigError(
                f"{' and '.join(given)} {verb} set, but the URL is plain http://: "
                f"give an https:// URL, or drop the TLS {flags}"
            )
        return None

    def _tls_given(self) -> list[str]:
        """The flags of each TLS setting that is set."""
        tls = self.tls_config
        return [
            self.flag(f"tls_config.{name}")
            for name, present in (
                ("ca_file", tls.ca_file is not None),
                ("cert_file", tls.cert_file is not None),
                ("key_file", tls.key_file is not None),
                ("server_name", tls.server_name is not None),
                ("insecure_skip_verify", tls.insecure_skip_verify),
            )
            if present
        ]

    def ssl_context(self) -> ssl.SSLContext:
        """The system's CAs (or ca_file), the client certificate when one is given, the server's
        name checked against server_name when set, and no verification at all with
        insecure_skip_verify (which therefore reads no ca_file)."""
        tls = self.tls_config
        context = _NamedServerContext(ssl.PROTOCOL_TLS_CLIENT)
        context.server_name = tls.server_name
        which = self.flag("tls_config.ca_file")
        try:
            if tls.ca_file is not None and not tls.insecure_skip_verify:
                context.load_verify_locations(cafile=str(tls.ca_file))
            else:
                context.load_default_certs()
            if tls.cert_file is not None:
                which = self.flag("tls_config.cert_file")
                key = str(tls.key_file) if tls.key_file is not None else None
                context.load_cert_chain(str(tls.cert_file), key)
        except (OSError, ssl.SSLError) as exc:
            path = tls.cert_file if which == self.flag("tls_config.cert_file") else tls.ca_file
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ClientConfigError(f"{which} {path}: {reason}") from None
        if tls.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


FLAG_WORDS: dict[str, str] = {
    "basic_auth": "basic-auth.username",
    "basic_auth.username": "basic-auth.username",
    "basic_auth.password_file": "basic-auth.password-file",
    "bearer_token": "bearer-token-file",
    "bearer_token_file": "bearer-token-file",
    "tls_config.ca_file": "tls.ca-file",
    "tls_config.cert_file": "tls.cert-file",
    "tls_config.key_file": "tls.key-file",
    "tls_config.server_name": "tls.server-name",
    "tls_config.insecure_skip_verify": "tls.insecure-skip-verify",
}
"""prometheus/common's field path -> the flag's words after the prefix (one vocabulary)."""


class _NamedServerContext(ssl.SSLContext):
    """An SSLContext that checks the server's certificate against `server_name` instead of the
    host the caller connects to, for urllib's clients as for the scrape source's own socket."""

    server_name: str | None = None

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        if self.server_name:
            kwargs["server_hostname"] = self.server_name
        return super().wrap_socket(*args, **kwargs)


def split_url_credentials(url: str) -> tuple[str, BasicAuth | None]:
    """(the URL without user:password@, the credentials it held, percent-decoded). The URL must
    already parse (a port that is a number): each caller names its own flag in that error."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, BasicAuth(username=unquote(parts.username), password=unquote(parts.password or ""))


def basic_header(username: str, password: str) -> str:
    """RFC 7617's `Basic base64(user:password)`."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def read_secret(path: Path, flag: str) -> str:
    """The first line of a password or token file, stripped; the error names the flag."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline(MAX_SECRET_BYTES).strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ClientConfigError(f"cannot read {flag} {path}: {reason}") from None


# -- the one flag vocabulary ---------------------------------------------------------------


def client_flags(
    prefix: str, server: str, old: Mapping[str, tuple[str, ...]] | None = None
) -> tuple[OptionSpec, ...]:
    """The flags of one client, `--PREFIX.basic-auth.username` and the rest (FLAG_WORDS), for
    talking to `server` (a phrase: "the scraped exporter"). `old` maps a flag's words to its
    older spellings, kept as deprecated aliases."""
    old = old or {}

    def spec(words: str, help: str, **kwargs: Any) -> OptionSpec:
        return OptionSpec(
            flag=f"--{prefix}.{words}",
            dest=_dest(prefix, words),
            aliases=old.get(words, ()),
            help=help,
            **kwargs,
        )

    return (
        spec(
            "basic-auth.username",
            f"basic auth user for {server}; USER:PASSWORD works too, but shows in ps",
            metavar="USER[:PASSWORD]",
        ),
        spec(
            "basic-auth.password-file",
            "file whose first line is the basic auth password (read again for every request)",
            metavar="FILE",
        ),
        spec(
            "bearer-token-file",
            f"file whose first line is a bearer token for {server} (read again for every request)",
            metavar="FILE",
        ),
        spec(
            "tls.ca-file",
            f"CA certificate(s) to verify {server} against (default: the system's)",
            metavar="FILE",
        ),
        spec("tls.cert-file", "client certificate (PEM), for a server that requires one", metavar="FILE"),
        spec("tls.key-file", "the client certificate's key, when not in its file", metavar="FILE"),
        spec(
            "tls.server-name",
            "name the server's certificate must carry (default: the URL's host)",
            metavar="NAME",
        ),
        spec(
            "tls.insecure-skip-verify",
            "do not verify the server's certificate (a test server with a self-signed one)",
            action="store_true",
            default=False,
        ),
    )


def config_from(values: Any, prefix: str) -> HTTPClientConfig:
    """The HTTPClientConfig that client_flags(prefix) parsed into `values` (an argparse
    namespace), checked, its files read once so a missing one fails at start-up."""
    flag = f"--{prefix}."

    def value(words: str) -> Any:
        return getattr(values, _dest(prefix, words), None)

    def path(words: str) -> Path | None:
        given = value(words)
        return Path(given) if given else None

    user, password_file = value("basic-auth.username"), path("basic-auth.password-file")
    basic = None
    if password_file is not None and not user:
        raise ClientConfigError(
            f"{flag}basic-auth.password-file {password_file} needs {flag}basic-auth.username"
        )
    if user:
        name, colon, password = str(user).partition(":")
        if not colon and password_file is None:
            raise ClientConfigError(
                f"{flag}basic-auth.username USER needs a password: USER:PASSWORD or "
                f"{flag}basic-auth.password-file FILE"
            )
        basic = BasicAuth(username=name, password=password if colon else None, password_file=password_file)
    config = HTTPClientConfig(
        basic_auth=basic,
        bearer_token_file=path("bearer-token-file"),
        tls_config=TLSConfig(
            ca_file=path("tls.ca-file"),
            cert_file=path("tls.cert-file"),
            key_file=path("tls.key-file"),
            server_name=value("tls.server-name") or None,
            insecure_skip_verify=bool(value("tls.insecure-skip-verify")),
        ),
        prefix=flag,
    )
    config.check()
    config.authorization()
    return config


def _dest(prefix: str, words: str) -> str:
    return f"{prefix}_{words}".replace(".", "_").replace("-", "_")
