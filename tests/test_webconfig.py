"""--web-config: validation errors, and real TLS handshakes against a real uvicorn server."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import httpx
import pytest
from conftest import guarded_server
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from exporter.web.webconfig import BasicAuthMiddleware, WebConfigError, load_web_config, tls_context

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(
    OPENSSL is None, reason="openssl CLI not installed: cannot make test certs"
)

PASSWORD = "s3cret-scrape"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


# -- throwaway PKI ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # a client cert from a CA the server does not trust
    stranger_key: Path
    ca_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


def _make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return cert, key


def _make_leaf(directory: Path, name: str, ca: tuple[Path, Path], extensions: str) -> tuple[Path, Path]:
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.crt"
    ext = directory / f"{name}.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n" + extensions
    )
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
        "-out", str(cert), "-days", "2", "-extfile", str(ext),
        cwd=directory,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if OPENSSL is None:
        pytest.skip("openssl CLI not installed: cannot make test certs")
    directory = tmp_path_factory.mktemp("pki")
    ca = _make_ca(directory, "ridgeline-test-ca")
    other_ca = _make_ca(directory, "untrusted-ca")
    server = _make_leaf(
        directory, "server", ca, "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    client = _make_leaf(directory, "prometheus", ca, "extendedKeyUsage=clientAuth\n")
    stranger = _make_leaf(directory, "stranger", other_ca, "extendedKeyUsage=clientAuth\n")
    return Pki(ca[0], server[0], server[1], client[0], client[1], stranger[0], stranger[1], ca[1])


# -- a real uvicorn server ---------------------------------------------------------------------


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> str:
        return "ridgeline_build_info 1\n"

    @app.get("/healthz", response_class=PlainTextResponse)
    def healthz() -> str:
        return "ok\n"

    return app


@dataclass
class Served:
    base_url: str


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """Serve an app the way `ridgeline serve` does (exporter/web/server.py), TLS per connection."""
    managers: list[Any] = []

    def start(app: Any, tls: ssl.SSLContext | Callable[[], ssl.SSLContext | None] | None = None) -> Served:
        provider = tls if callable(tls) or tls is None else (lambda: tls)
        manager = guarded_server(app, tls_context=provider)
        managers.append(manager)
        guarded = manager.__enter__()
        scheme = "https" if provider is not None and provider() is not None else "http"
        return Served(f"{scheme}://127.0.0.1:{guarded.port}")

    yield start
    for manager in reversed(managers):
        manager.__exit__(None, None, None)


def _client_context(pki: Pki, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context


def _write_config(directory: Path, text: str) -> Path:
    path = directory / "web-config.yml"
    path.write_text(text)
    return path


# -- end to end over TLS -----------------------------------------------------------------------


@needs_openssl
def test_basic_auth_over_tls(pki: Pki, tmp_path: Path, serve: Callable[..., Served]) -> None:
    config = load_web_config(
        _write_config(
            tmp_path,
            f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
            f"basic_auth_users:\n  prometheus: '{HASH}'\n",
        )
    )
    served = serve(BasicAuthMiddleware(_app(), config.basic_auth_users), tls_context(config))
    with httpx.Client(base_url=served.base_url, verify=_client_context(pki)) as client:
        right = client.get("/metrics", auth=("prometheus", PASSWORD))
        assert right.status_code == 200 and "ridgeline_build_info" in right.text
        again = client.get("/metrics", auth=("prometheus", PASSWORD))
        assert again.status_code == 200

        wrong = client.get("/metrics", auth=("prometheus", "guess"))
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"] == 'Basic realm="ridgeline"'

        unknown = client.get("/metrics", auth=("mallory", PASSWORD))
        assert unknown.status_code == 401

        missing = client.get("/metrics")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == 'Basic realm="ridgeline"'

        garbled = client.get("/metrics", headers={"Authorization": "Basic !!!not-base64"})
        assert garbled.status_code == 401

        assert client.get("/healthz").status_code == 200


@needs_openssl
def test_plain_http_client_cannot_talk_to_tls_server(
    pki: Pki, tmp_path: Path, serve: Callable[..., Served]
) -> None:
    config = load_web_config(
        _write_config(
            tmp_path, f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        )
    )
    served = serve(_app(), tls_context(config))
    plain = served.base_url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{plain}/healthz", timeout=5)
    assert httpx.get(f"{served.base_url}/healthz", verify=_client_context(pki)).status_code == 200


@needs_openssl
def test_client_certificate_required(pki: Pki, tmp_path: Path, serve: Callable[..., Served]) -> None:
    config = load_web_config(
        _write_config(
            tmp_path,
            "tls_server_config:\n"
            f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
            f"  client_ca_file: {pki.ca_cert}\n  client_auth_type: RequireAndVerifyClientCert\n",
        )
    )
    context = tls_context(config)
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    served = serve(_app(), tls_context(config))

    trusted = _client_context(pki, (pki.client_cert, pki.client_key))
    with httpx.Client(base_url=served.base_url, verify=trusted) as client:
        assert client.get("/metrics").status_code == 200

    for context in (_client_context(pki), _client_context(pki, (pki.stranger_cert, pki.stranger_key))):
        with (
            httpx.Client(base_url=served.base_url, verify=context, timeout=5) as client,
            pytest.raises(httpx.TransportError),
        ):
            client.get("/metrics")


@needs_openssl
def test_client_certificate_optional_when_verify_if_given(
    pki: Pki, tmp_path: Path, serve: Callable[..., Served]
) -> None:
    config = load_web_config(
        _write_config(
            tmp_path,
            "tls_server_config:\n"
            f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
            f"  client_ca_file: {pki.ca_cert}\n  client_auth_type: VerifyClientCertIfGiven\n",
        )
    )
    served = serve(_app(), tls_context(config))
    assert httpx.get(f"{served.base_url}/metrics", verify=_client_context(pki)).status_code == 200
    stranger = _client_context(pki, (pki.stranger_cert, pki.stranger_key))
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{served.base_url}/metrics", verify=stranger, timeout=5)


# -- loading and validation --------------------------------------------------------------------


@needs_openssl
def test_relative_paths_resolve_against_the_config_file(pki: Pki, tmp_path: Path) -> None:
    for source in (pki.server_cert, pki.server_key, pki.ca_cert):
        shutil.copy(source, tmp_path / source.name)
    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    path = _write_config(
        elsewhere,
        "tls_server_config:\n"
        f"  cert_file: ../{pki.server_cert.name}\n  key_file: ../{pki.server_key.name}\n"
        f"  client_ca_file: ../{pki.ca_cert.name}\n  client_auth_type: RequireAndVerifyClientCert\n",
    )
    tls = load_web_config(path).tls_server_config
    assert tls is not None
    assert tls.cert_file.resolve() == (tmp_path / pki.server_cert.name).resolve()
    assert tls.key_file.resolve() == (tmp_path / pki.server_key.name).resolve()
    assert tls.client_ca_file is not None
    assert tls.client_ca_file.resolve() == (tmp_path / pki.ca_cert.name).resolve()


@pytest.mark.parametrize("text", ["", "\n\n  \n", "# basic_auth_users:\n#   prometheus: x\n", "---\n", "~\n"])
def test_an_empty_or_comment_only_file_is_refused_not_read_as_no_auth(tmp_path: Path, text: str) -> None:
    # `: > web.yml` or a truncating editor used to serve without TLS and without auth
    path = _write_config(tmp_path, text)
    with pytest.raises(WebConfigError, match="empty") as caught:
        load_web_config(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_basic_auth_only(tmp_path: Path) -> None:
    config = load_web_config(_write_config(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n"))
    assert tls_context(config) is None
    assert config.basic_auth_users == {"prometheus": HASH}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("basic_auth_users:\n  prometheus: hunter2\n", r"basic_auth_users: user 'prometheus'.*bcrypt"),
        ("tls_server_config:\n  key_file: k.pem\n", r"tls_server_config\.cert_file: Field required"),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n"
            "  client_auth_type: RequireAndVerifyClientCert\n",
            r"needs client_ca_file",
        ),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n",
            r"client_auth_type is NoClientCert",
        ),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAnyClientCert\n",
            r"unverified client certificates",
        ),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: [X]\n", r"cipher_suites"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n", r"min_version"),
        ("http_server_config:\n  http2: false\n", r"http_server_config"),
        ("basic_auth_user:\n  a: b\n", r"basic_auth_user: Extra inputs are not permitted"),
        ("- just\n- a list\n", r"expected a mapping"),
        ("tls_server_config: [\n", r"line \d+: not valid YAML"),
    ],
)
def test_bad_config_names_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = _write_config(tmp_path, text)
    with pytest.raises(WebConfigError, match=expected) as caught:
        load_web_config(path)
    assert str(path) in str(caught.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(WebConfigError, match="cannot read"):
        load_web_config(tmp_path / "absent.yml")


def test_missing_certificate_names_the_field(tmp_path: Path) -> None:
    path = _write_config(tmp_path, "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n")
    with pytest.raises(WebConfigError, match=r"tls_server_config\.cert_file: .*nope\.crt is not a file"):
        load_web_config(path)


@needs_openssl
def test_key_that_does_not_match_the_certificate(pki: Pki, tmp_path: Path) -> None:
    path = _write_config(
        tmp_path, f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.client_key}\n"
    )
    with pytest.raises(WebConfigError, match=r"cert_file/key_file: cannot load"):
        load_web_config(path)


# -- the middleware on its own ---------------------------------------------------------------


def test_successful_login_is_checked_with_bcrypt_once(
    monkeypatch: pytest.MonkeyPatch, serve: Callable[..., Served]
) -> None:
    calls: list[bytes] = []
    real_checkpw = bcrypt.checkpw

    def counting_checkpw(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        return real_checkpw(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counting_checkpw)
    served = serve(BasicAuthMiddleware(_app(), {"prometheus": HASH}))
    with httpx.Client(base_url=served.base_url) as client:
        for _ in range(5):
            assert client.get("/metrics", auth=("prometheus", PASSWORD)).status_code == 200
        assert len(calls) == 1
        for _ in range(3):  # a wrong password pays bcrypt once too, then is answered from the cache
            assert client.get("/metrics", auth=("prometheus", "nope")).status_code == 401
        assert len(calls) == 2
        assert client.get("/metrics", auth=("prometheus", "other")).status_code == 401
        assert len(calls) == 3  # a new guess is checked


def test_htpasswd_2y_hashes_are_accepted(serve: Callable[..., Served]) -> None:
    hash_2y = "$2y$" + HASH[4:]
    served = serve(BasicAuthMiddleware(_app(), {"prometheus": hash_2y}))
    assert httpx.get(f"{served.base_url}/metrics", auth=("prometheus", PASSWORD)).status_code == 200
    assert httpx.get(f"{served.base_url}/metrics", auth=("prometheus", "x")).status_code == 401


def test_password_with_colon_and_custom_exempt_paths(serve: Callable[..., Served]) -> None:
    password = "a:b:c"
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    served = serve(
        BasicAuthMiddleware(_app(), {"prom": hashed}, exempt_paths=frozenset({"/healthz", "/readyz"}))
    )
    assert httpx.get(f"{served.base_url}/metrics", auth=("prom", password)).status_code == 200
    assert httpx.get(f"{served.base_url}/readyz").status_code == 404  # exempt, reaches the app
    assert httpx.get(f"{served.base_url}/metrics", headers={"Authorization": "Bearer x"}).status_code == 401


def test_no_users_means_no_auth(serve: Callable[..., Served]) -> None:
    served = serve(BasicAuthMiddleware(_app(), {}))
    assert httpx.get(f"{served.base_url}/metrics").status_code == 200


@pytest.mark.parametrize("cost", ["03", "15", "31", "32", "99"])
def test_bcrypt_cost_out_of_range_is_refused_at_load(tmp_path: Path, cost: str) -> None:
    # the regex alone let these through and BasicAuthMiddleware then died on bcrypt's
    # "Invalid rounds" at start-up, a traceback instead of a message naming the user
    path = _write_config(tmp_path, f"basic_auth_users:\n  prometheus: '$2b${cost}${HASH[7:]}'\n")
    with pytest.raises(WebConfigError, match=r"prometheus.*cost") as caught:
        load_web_config(path)
    assert str(path) in str(caught.value)


# -- reloading while serving -------------------------------------------------------------------


def _peer_common_name(port: int, pki: Pki) -> str:
    context = _client_context(pki)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        cert = tls.getpeercert()
    assert cert is not None
    return next(value for rdn in cert["subject"] for key, value in rdn if key == "commonName")


def _wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@needs_openssl
def test_certificate_rotation_needs_no_restart(pki: Pki, tmp_path: Path) -> None:
    """The files named by the web config are replaced while serving; new handshakes present the
    new certificate within a few polls (exporter-toolkit re-reads them per connection)."""
    from exporter.web.webconfig_watch import WebConfigWatcher

    ca = (pki.ca_cert, pki.ca_key)
    rotated = _make_leaf(
        tmp_path, "rotated", ca, "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki.server_cert, cert)
    shutil.copy(pki.server_key, key)
    path = _write_config(tmp_path, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n")
    watcher = WebConfigWatcher(path, load_web_config(path), poll_seconds=0.1)
    watcher.start()
    try:
        with guarded_server(_app(), tls_context=watcher.tls_context) as server:
            assert _peer_common_name(server.port, pki) == "server"
            for source, target in ((rotated[1], key), (rotated[0], cert)):  # key first: a torn pair
                staged = target.with_suffix(".new")
                shutil.copy(source, staged)
                os.replace(staged, target)
            assert _wait_for(lambda: _peer_common_name(server.port, pki) == "rotated")
            assert watcher.reloads >= 1
            with httpx.Client(base_url=server.url, verify=_client_context(pki)) as client:
                assert client.get("/healthz").status_code == 200
    finally:
        watcher.stop()


def test_new_users_apply_and_a_broken_edit_keeps_the_old_ones(
    tmp_path: Path, serve: Callable[..., Served], caplog: pytest.LogCaptureFixture
) -> None:
    from exporter.web.webconfig_watch import WebConfigWatcher

    new_hash = bcrypt.hashpw(b"rotated-pass", bcrypt.gensalt(rounds=4)).decode()
    path = _write_config(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    watcher = WebConfigWatcher(path, load_web_config(path), poll_seconds=3600)  # checked by hand
    served = serve(BasicAuthMiddleware(_app(), watcher))

    def status(password: str) -> int:
        return httpx.get(f"{served.base_url}/metrics", auth=("prometheus", password)).status_code

    assert status(PASSWORD) == 200 and status("rotated-pass") == 401
    path.write_text("basic_auth_users:\n  prometheus: hunter2\n")  # not a bcrypt hash
    with caplog.at_level(logging.WARNING, logger="exporter.web"):
        assert watcher.check() is False
    assert "keeping the previous one" in caplog.text and "bcrypt" in caplog.text
    assert status(PASSWORD) == 200  # still the old users
    path.write_text(f"basic_auth_users:\n  prometheus: '{new_hash}'\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert watcher.check() is True
    assert status("rotated-pass") == 200 and status(PASSWORD) == 401  # the success cache went too


def test_turning_tls_on_by_reload_is_refused_with_a_reason(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from exporter.web.webconfig_watch import WebConfigWatcher

    path = _write_config(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    watcher = WebConfigWatcher(path, load_web_config(path), poll_seconds=3600)
    path.write_text(f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n")
    with caplog.at_level(logging.WARNING, logger="exporter.web"):
        assert watcher.check() is False
    assert "needs a restart" in caplog.text
    assert watcher.tls_context() is None and watcher.password_checker() is not None


@needs_openssl
def test_a_handshake_that_never_happens_is_closed_by_the_request_deadline(pki: Pki, tmp_path: Path) -> None:
    from exporter.web.server import ConnectionLimits

    config = load_web_config(
        _write_config(
            tmp_path, f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        )
    )
    context = tls_context(config)
    with guarded_server(_app(), ConnectionLimits(request_timeout=1.0), tls_context=lambda: context) as server:
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        assert _wait_for(lambda: len(server.guard.open) == 1)  # counted while still in the handshake
        silent.settimeout(15)
        assert silent.recv(100) == b""  # closed by the server
        assert _wait_for(lambda: not server.guard.open)
        assert httpx.get(f"{server.url}/healthz", verify=_client_context(pki)).status_code == 200


# -- password guessing ------------------------------------------------------------------------


def test_a_guessing_flood_runs_one_bcrypt_at_a_time_and_refuses_the_excess(
    monkeypatch: pytest.MonkeyPatch, serve: Callable[..., Served]
) -> None:
    """50 concurrent wrong passwords: bcrypt never runs on more than one thread, at most
    `max_pending` guesses wait (the rest get 429 + Retry-After), and the authorised scrape,
    already verified once, is answered throughout."""
    import asyncio

    from exporter.web.auth_admission import CheckPool

    running = 0
    most = 0
    lock = threading.Lock()
    real_checkpw = bcrypt.checkpw

    def tracking_checkpw(password: bytes, hashed: bytes) -> bool:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            time.sleep(0.02)  # long enough for overlap to show if it could happen
            return real_checkpw(password, hashed)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(bcrypt, "checkpw", tracking_checkpw)
    middleware = BasicAuthMiddleware(
        _app(), {"prometheus": HASH}, pool=CheckPool(workers=1, max_pending=8), refusal_delay=0.05
    )
    served = serve(middleware)
    assert httpx.get(f"{served.base_url}/metrics", auth=("prometheus", PASSWORD)).status_code == 200

    async def flood() -> tuple[list[int], list[int]]:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as client:
            guesses = [client.get("/metrics", auth=("prometheus", f"guess-{i}")) for i in range(50)]
            scrapes = [client.get("/metrics", auth=("prometheus", PASSWORD)) for _ in range(5)]
            answers = await asyncio.gather(*guesses, *scrapes)
        codes = [a.status_code for a in answers]
        assert all(a.headers.get("retry-after") == "1" for a in answers if a.status_code == 429)
        return codes[:50], codes[50:]

    guesses, scrapes = asyncio.run(flood())
    assert most == 1
    assert set(guesses) <= {401, 429} and 429 in guesses and 401 in guesses
    assert scrapes == [200] * 5


# -- reloads never fail open, and keep what was verified ----------------------------------------


def _counting_bcrypt(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    calls: list[bytes] = []
    real_checkpw = bcrypt.checkpw

    def counting_checkpw(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        return real_checkpw(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counting_checkpw)
    return calls


def _touch(path: Path) -> None:
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))


@pytest.mark.parametrize(
    "text",
    ["", "# commented out\n", "basic_auth_users:\n", "basic_auth_users: {}\n", "basic_auth_users:\n  prom"],
)
def test_a_truncated_or_emptied_file_while_serving_keeps_auth_on_and_warns(
    tmp_path: Path, serve: Callable[..., Served], caplog: pytest.LogCaptureFixture, text: str
) -> None:
    from exporter.web.webconfig_watch import WebConfigWatcher

    path = _write_config(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")
    watcher = WebConfigWatcher(path, load_web_config(path), poll_seconds=3600)  # checked by hand
    served = serve(BasicAuthMiddleware(_app(), watcher))
    path.write_text(text)
    _touch(path)
    with caplog.at_level(logging.INFO, logger="exporter.web"):
        assert watcher.check() is False
    # The watcher's records only: the served uvicorn may log its start-up meanwhile.
    mine = [r.levelno for r in caplog.records if r.name.startswith("exporter.web")]
    assert mine == [logging.WARNING], caplog.text
    assert "keeping the previous" in caplog.text
    assert httpx.get(f"{served.base_url}/metrics").status_code == 401  # auth still on
    assert httpx.get(f"{served.base_url}/metrics", auth=("prometheus", PASSWORD)).status_code == 200


def test_a_reload_keeps_verified_credentials_whose_hash_did_not_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serve: Callable[..., Served]
) -> None:
    from exporter.web.webconfig_watch import WebConfigWatcher

    other = bcrypt.hashpw(b"other-pass", bcrypt.gensalt(rounds=4)).decode()
    path = _write_config(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n  grafana: '{other}'\n")
    watcher = WebConfigWatcher(path, load_web_config(path), poll_seconds=3600)
    served = serve(BasicAuthMiddleware(_app(), watcher))
    calls = _counting_bcrypt(monkeypatch)

    def status(user: str, password: str) -> int:
        return httpx.get(f"{served.base_url}/metrics", auth=(user, password)).status_code

    assert status("prometheus", PASSWORD) == 200 and status("grafana", "other-pass") == 200
    assert len(calls) == 2
    renewed = bcrypt.hashpw(b"renewed-pass", bcrypt.gensalt(rounds=4)).decode()
    path.write_text(f"basic_auth_users:\n  prometheus: '{HASH}'\n  grafana: '{renewed}'\n  new: '{other}'\n")
    _touch(path)
    assert watcher.check() is True
    assert status("prometheus", PASSWORD) == 200
    assert len(calls) == 2  # still verified: its hash is the same
    assert status("grafana", "other-pass") == 401 and status("grafana", "renewed-pass") == 200
    assert len(calls) == 4  # grafana's hash changed, so both of its passwords were checked again


def test_bcrypt_refuses_passwords_it_would_not_read_without_checking(
    monkeypatch: pytest.MonkeyPatch, serve: Callable[..., Served]
) -> None:
    calls = _counting_bcrypt(monkeypatch)
    served = serve(BasicAuthMiddleware(_app(), {"prometheus": HASH}))
    assert httpx.get(f"{served.base_url}/metrics", auth=("prometheus", "x" * 73)).status_code == 401
    assert calls == []
