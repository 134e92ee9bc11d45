"""--web-config: validation errors, and real TLS handshakes against a real uvicorn server."""

from __future__ import annotations

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
import uvicorn
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from exporter.web.webconfig import BasicAuthMiddleware, WebConfigError, load_web_config

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
    return Pki(ca[0], server[0], server[1], client[0], client[1], stranger[0], stranger[1])


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
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: Any, **ssl_kwargs: Any) -> Served:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off", **ssl_kwargs)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive(), "uvicorn exited during startup"
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        servers.append((server, thread))
        scheme = "https" if ssl_kwargs else "http"
        return Served(f"{scheme}://127.0.0.1:{port}")

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)


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
    served = serve(BasicAuthMiddleware(_app(), config.basic_auth_users), **config.uvicorn_ssl_kwargs())
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
    served = serve(_app(), **config.uvicorn_ssl_kwargs())
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
    assert config.uvicorn_ssl_kwargs()["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    served = serve(_app(), **config.uvicorn_ssl_kwargs())

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
    served = serve(_app(), **config.uvicorn_ssl_kwargs())
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
    kwargs = load_web_config(path).uvicorn_ssl_kwargs()
    assert Path(kwargs["ssl_certfile"]).resolve() == (tmp_path / pki.server_cert.name).resolve()
    assert Path(kwargs["ssl_keyfile"]).resolve() == (tmp_path / pki.server_key.name).resolve()
    assert Path(kwargs["ssl_ca_certs"]).resolve() == (tmp_path / pki.ca_cert.name).resolve()


def test_empty_file_means_no_tls_and_no_auth(tmp_path: Path) -> None:
    config = load_web_config(_write_config(tmp_path, ""))
    assert config.tls_server_config is None
    assert config.basic_auth_users == {}
    assert config.uvicorn_ssl_kwargs() == {}


def test_basic_auth_only(tmp_path: Path) -> None:
    config = load_web_config(_write_config(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n"))
    assert config.uvicorn_ssl_kwargs() == {}
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
        for _ in range(3):  # failures are never cached: each one pays bcrypt
            assert client.get("/metrics", auth=("prometheus", "nope")).status_code == 401
        assert len(calls) == 4


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


@pytest.mark.parametrize("cost", ["03", "32", "99"])
def test_bcrypt_cost_out_of_range_is_refused_at_load(tmp_path: Path, cost: str) -> None:
    # the regex alone let these through and BasicAuthMiddleware then died on bcrypt's
    # "Invalid rounds" at start-up, a traceback instead of a message naming the user
    path = _write_config(tmp_path, f"basic_auth_users:\n  prometheus: '$2b${cost}${HASH[7:]}'\n")
    with pytest.raises(WebConfigError, match=r"prometheus.*cost") as caught:
        load_web_config(path)
    assert str(path) in str(caught.value)
