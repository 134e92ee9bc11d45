"""The one HTTP client configuration (exporter/http_client.py) against a real loopback TLS server
that requires a client certificate: the scrape source, `report`'s query client and `top`'s node
client each with a CA file, a client certificate, a server name, basic auth from a password file
and a bearer token file; the one flag vocabulary of serve/record, top and report; the older flag
names and variables still working, each with one warning."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import closed_port
from test_webconfig import OPENSSL, _make_ca, _make_leaf

from exporter.cli import build_parser
from exporter.commands.options.sources import source_choice
from exporter.http_client import (
    BasicAuth,
    ClientConfigError,
    HTTPClientConfig,
    TLSConfig,
    basic_header,
    config_from,
    split_url_credentials,
)
from exporter.report.prometheus import ClientSettings, PrometheusClient, QueryError
from exporter.sources.base import SourceError, SourceOptions, SourceUnavailable
from exporter.sources.scrape import ScrapeSettings, ScrapeSource
from exporter.top.client import NodeClient
from exporter.verdict import decode_verdict

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "tests" / "data" / "dcgm-exporter" / "legacy-h100-no-pods.txt").read_bytes()
SERVER_NAME = "gpu-node.ridgeline.test"
"""The only name the server's certificate carries: a client must be told it (tls.server-name)."""
PASSWORD = "s3cr:et@p/w"
CLASSIFY = json.dumps({"gpus": [{"gpu": 0, "regime": "idle"}], "ready": True, "source": "replay"}).encode()
VECTOR = json.dumps(
    {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "7"]}]}}
).encode()


@dataclass(frozen=True)
class Files:
    ca: Path
    client_cert: Path
    client_key: Path
    password: Path
    token: Path


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    expected: str
    seen: list[str | None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self) -> None:
        got = self.headers.get("Authorization")
        self.server.seen.append(got)
        if got != self.server.expected:
            body, status, kind = b"Unauthorized\n", 401, "text/plain"
        elif self.path.startswith("/metrics"):
            body, status, kind = PAGE, 200, "text/plain; version=0.0.4"
        elif self.path.startswith("/classify"):
            body, status, kind = CLASSIFY, 200, "application/json"
        else:
            body, status, kind = VECTOR, 200, "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[_Server, str, Files]]:
    assert OPENSSL is not None, "openssl is part of every Debian system; the TLS tests need it"
    directory = tmp_path_factory.mktemp("pki")
    ca = _make_ca(directory, "ridgeline-test-ca")
    server_cert = _make_leaf(
        directory, "server", ca, f"subjectAltName=DNS:{SERVER_NAME}\nextendedKeyUsage=serverAuth\n"
    )
    client = _make_leaf(directory, "laptop", ca, "extendedKeyUsage=clientAuth\n")
    (directory / "password").write_text(PASSWORD + "\n")
    (directory / "token").write_text("abc.def.ghi\n")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(server_cert[0]), str(server_cert[1]))
    context.load_verify_locations(cafile=str(ca[0]))
    context.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no answer
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    httpd.expected, httpd.seen = basic_header("viewer", PASSWORD), []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    files = Files(ca[0], client[0], client[1], directory / "password", directory / "token")
    try:
        yield httpd, f"https://127.0.0.1:{httpd.server_address[1]}", files
    finally:
        httpd.shutdown()
        httpd.server_close()


def full_config(files: Files, **tls: Any) -> HTTPClientConfig:
    """Every part at once: CA file, client certificate, server name, basic auth from a file."""
    settings: dict[str, Any] = {
        "ca_file": files.ca,
        "cert_file": files.client_cert,
        "key_file": files.client_key,
        "server_name": SERVER_NAME,
    }
    settings.update(tls)
    return HTTPClientConfig(
        basic_auth=BasicAuth(username="viewer", password_file=files.password),
        tls_config=TLSConfig(**settings),
    )


# -- the record on its own -----------------------------------------------------------------------


def test_the_config_refuses_two_ways_to_authenticate_and_a_lone_key(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="one way to authenticate"):
        HTTPClientConfig(basic_auth=BasicAuth(username="u", password="p"), bearer_token_file=tmp_path).check()
    with pytest.raises(ClientConfigError, match="not both"):
        HTTPClientConfig(basic_auth=BasicAuth(username="u", password="p", password_file=tmp_path)).check()
    with pytest.raises(ClientConfigError, match=r"--node.tls.key-file needs --node.tls.cert-file"):
        HTTPClientConfig(tls_config=TLSConfig(key_file=tmp_path), prefix="--node.").check()
    with pytest.raises(ClientConfigError, match=r"user:password@ in the URL and --scrape.bearer-token-file"):
        HTTPClientConfig(bearer_token_file=tmp_path, prefix="--scrape.").with_url_credentials("http://u:p@h/")


def test_credentials_in_a_url_are_split_off_in_one_place() -> None:
    clean, auth = split_url_credentials("https://alice:s%40cret@[::1]:9090/prefix?x=1")
    assert clean == "https://[::1]:9090/prefix?x=1" and auth == BasicAuth(username="alice", password="s@cret")
    assert split_url_credentials("http://host:1/") == ("http://host:1/", None)
    assert "s@cret" not in repr(auth) and "s%40cret" not in repr(HTTPClientConfig(basic_auth=auth))


def test_secret_files_are_read_for_every_request(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    config = HTTPClientConfig(bearer_token_file=token)
    assert config.authorization() == "Bearer one"
    token.write_text("two\n")
    assert config.authorization() == "Bearer two"
    token.write_text("\n")
    with pytest.raises(ClientConfigError, match="is empty"):
        config.authorization()


# -- the three clients against the TLS server -----------------------------------------------------


def test_the_scrape_source_with_ca_file_client_certificate_server_name_and_basic_auth(
    tls_server: tuple[_Server, str, Files],
) -> None:
    server, base, files = tls_server
    source = ScrapeSource(SourceOptions(), ScrapeSettings(url=f"{base}/metrics", client=full_config(files)))
    source.open()
    assert len(source.read()) == 1
    assert server.seen[-1] == basic_header("viewer", PASSWORD)
    for tls, needle in (
        ({"ca_file": None}, "CERTIFICATE_VERIFY_FAILED"),  # the system's CAs do not know ours
        ({"server_name": None}, "CERTIFICATE_VERIFY_FAILED"),  # 127.0.0.1 is not the certificate's name
        ({"cert_file": None, "key_file": None}, "cannot reach"),  # the server wants a client certificate
    ):
        failing = ScrapeSource(
            SourceOptions(), ScrapeSettings(url=f"{base}/metrics", client=full_config(files, **tls))
        )
        failing.open()
        with pytest.raises(SourceError, match=needle):
            failing.read()


def test_the_scrape_source_sends_the_bearer_token_file(tls_server: tuple[_Server, str, Files]) -> None:
    server, base, files = tls_server
    config = replace(full_config(files), basic_auth=None, bearer_token_file=files.token)
    source = ScrapeSource(SourceOptions(), ScrapeSettings(url=f"{base}/metrics", client=config))
    source.open()
    with pytest.raises(SourceError, match="401"):
        source.read()
    assert server.seen[-1] == "Bearer abc.def.ghi"


def test_the_report_client_with_the_same_config(tls_server: tuple[_Server, str, Files]) -> None:
    server, base, files = tls_server
    client = PrometheusClient(ClientSettings(url=base, client=full_config(files)))
    assert client.query("up", 1.0) == [({}, 7.0)]
    assert server.seen[-1] == basic_header("viewer", PASSWORD)
    unverified = PrometheusClient(ClientSettings(url=base, client=full_config(files, server_name=None)))
    with pytest.raises(QueryError, match=r"TLS .* failed"):
        unverified.query("up", 1.0)


def test_the_top_client_with_the_same_config(tls_server: tuple[_Server, str, Files]) -> None:
    _, base, files = tls_server
    reading = NodeClient(base, client=full_config(files)).fetch()
    assert reading.answered and reading.ready
    assert reading.verdicts == (decode_verdict({"gpu": 0, "regime": "idle"}),)
    skipping = full_config(files, ca_file=None, server_name=None, insecure_skip_verify=True)
    assert NodeClient(base, client=skipping).fetch().answered
    no_cert = NodeClient(base, client=full_config(files, cert_file=None, key_file=None)).fetch()
    assert not no_cert.answered


def test_one_tls_rule_for_every_client(tmp_path: Path) -> None:
    """context_for(): TLS settings apply to an https URL; for an http one they are refused, the
    flag named, never read and silently unused."""
    ca = tmp_path / "missing-ca.crt"  # never read for http: the URL is the mistake there
    node = HTTPClientConfig(tls_config=TLSConfig(ca_file=ca), prefix="--node.")
    with pytest.raises(ClientConfigError, match=r"^--node.tls.ca-file is set, but the URL is plain http://"):
        node.context_for("http://gpu-node-1:10295/classify")
    both = HTTPClientConfig(tls_config=TLSConfig(server_name="n", insecure_skip_verify=True), prefix="--p.")
    with pytest.raises(ClientConfigError, match=r"^--p.tls.server-name and --p.tls.insecure-skip-verify are"):
        both.context_for("http://h:1")
    assert HTTPClientConfig(prefix="--node.").context_for("http://h:1") is None
    with pytest.raises(ClientConfigError, match=r"--node.tls.ca-file .*missing-ca.crt"):
        node.context_for("https://h:1")  # read for https: a missing file is named
    skipping = HTTPClientConfig(tls_config=TLSConfig(insecure_skip_verify=True)).context_for("https://h:1")
    assert skipping is not None and skipping.verify_mode == ssl.CERT_NONE


def test_tls_flags_for_an_http_url_are_one_line_exit_2_in_top_and_report(tmp_path: Path) -> None:
    """Both clients, from the command line: one line naming the flag, exit 2, before any request
    (the URLs point at a port nothing listens on)."""
    ca = tmp_path / "ca.crt"
    ca.write_text("not read\n")
    with closed_port() as port:
        for args, flag in (
            (("top", "--once", "--url", f"http://127.0.0.1:{port}", "--node.tls.ca-file", str(ca)),
             "--node.tls.ca-file"),
            (("report", "--prometheus", f"http://127.0.0.1:{port}", "--json", "-",
              "--prometheus.tls.cert-file", str(ca)), "--prometheus.tls.cert-file"),
        ):  # fmt: skip
            done = ridgeline(*args)
            assert done.returncode == 2, done.stderr
            assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
            assert f"{flag} is set, but the URL is plain http://" in done.stderr, done.stderr


# -- one flag vocabulary ---------------------------------------------------------------------------


def test_each_commands_flags_build_the_same_config(tls_server: tuple[_Server, str, Files]) -> None:
    _, base, files = tls_server
    parser = build_parser()
    words = [
        "basic-auth.username", "viewer", "basic-auth.password-file", str(files.password),
        "tls.ca-file", str(files.ca), "tls.cert-file", str(files.client_cert),
        "tls.key-file", str(files.client_key), "tls.server-name", SERVER_NAME,
    ]  # fmt: skip

    def flags(prefix: str) -> list[str]:
        return [f"--{prefix}.{w}" if i % 2 == 0 else w for i, w in enumerate(words)]

    expected = full_config(files)
    serve = parser.parse_args(
        ["serve", "--source", "scrape", "--scrape-url", f"{base}/metrics", *flags("scrape")]
    )
    record = parser.parse_args(
        ["record", "--source", "scrape", "--scrape-url", f"{base}/metrics", *flags("scrape")]
    )
    for args in (serve, record):
        settings = source_choice(args)[1].settings["scrape"]
        assert isinstance(settings, ScrapeSettings) and replace(settings.client, prefix="") == expected
    top = parser.parse_args(["top", "--url", base, *flags("node")])
    report = parser.parse_args(["report", "--prometheus", base, *flags("prometheus")])
    assert replace(config_from(top, "node"), prefix="") == expected
    assert replace(config_from(report, "prometheus"), prefix="") == expected
    insecure = parser.parse_args(
        ["top", "--node.tls.insecure-skip-verify", "--node.bearer-token-file", str(files.token)]
    )
    built = config_from(insecure, "node")
    assert built.tls_config.insecure_skip_verify and built.authorization() == "Bearer abc.def.ghi"
    both = parser.parse_args(
        ["top", "--node.basic-auth.username", "u:p", "--node.basic-auth.password-file", "f"]
    )
    with pytest.raises(ClientConfigError, match="or with the user, not both"):
        config_from(both, "node")


def ridgeline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
        env={**os.environ, "NO_COLOR": "", **(env or {})},
    )  # fmt: skip


def test_record_scrapes_over_tls_with_the_new_flags(
    tls_server: tuple[_Server, str, Files], tmp_path: Path
) -> None:
    _, base, files = tls_server
    out = tmp_path / "scraped.jsonl"
    done = ridgeline(
        "record", "--source", "scrape", "--scrape-url", f"{base}/metrics", "--out", str(out),
        "--duration", "1.5",
        "--scrape.basic-auth.username", "viewer", "--scrape.basic-auth.password-file", str(files.password),
        "--scrape.tls.ca-file", str(files.ca), "--scrape.tls.cert-file", str(files.client_cert),
        "--scrape.tls.key-file", str(files.client_key), "--scrape.tls.server-name", SERVER_NAME,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.read_text().count('"gpu":0,"uuid":"GPU-8e5c3a1f') >= 1 and "deprecated" not in done.stderr


def test_old_names_work_and_each_warns_once(tls_server: tuple[_Server, str, Files]) -> None:
    _, base, files = tls_server
    tls = ("--ca-file", str(files.ca), "--cert", str(files.client_cert), "--key", str(files.client_key))
    top = ridgeline(
        "top", "--once", "--url", base, *tls, "--user", "viewer", "--password-file", str(files.password),
        "--node.tls.server-name", SERVER_NAME,
    )  # fmt: skip
    assert top.returncode == 0, top.stderr
    for old, new in (("--ca-file", "--node.tls.ca-file"), ("--user", "--node.basic-auth.username"),
                     ("--password-file", "--node.basic-auth.password-file"),
                     ("--cert", "--node.tls.cert-file"), ("--key", "--node.tls.key-file")):  # fmt: skip
        assert top.stderr.count(f"{old} is deprecated: use {new}") == 1, top.stderr
    with closed_port() as port:
        report = ridgeline(
            "report", "--prometheus", f"https://127.0.0.1:{port}", "--json", "-",
            "--prometheus-user", "viewer", "--prometheus-password-file", str(files.password),
            env={"RIDGELINE_REPORT_PROMETHEUS_CA_FILE": str(files.ca)},
        )  # fmt: skip
    assert report.returncode == 2 and "cannot reach" in report.stderr
    assert report.stderr.count("--prometheus-user is deprecated: use --prometheus.basic-auth.username") == 1
    assert (
        "--prometheus-password-file is deprecated: use --prometheus.basic-auth.password-file" in report.stderr
    )
    assert (
        "RIDGELINE_REPORT_PROMETHEUS_CA_FILE is deprecated: use RIDGELINE_REPORT_PROMETHEUS_TLS_CA_FILE"
        in report.stderr
    )
    serve = ridgeline(
        "record", "--source", "scrape", "--scrape-url", f"{base}/metrics", "--out", os.devnull,
        "--scrape-bearer-token-file", str(files.token), "--scrape-auth-file", str(files.password),
    )  # fmt: skip
    assert serve.returncode == 2 and "give one way to authenticate" in serve.stderr
    assert "--scrape-bearer-token-file is deprecated: use --scrape.bearer-token-file" in serve.stderr
    assert "--scrape-auth-file is deprecated: use --scrape.basic-auth.username and" in serve.stderr


def test_a_bad_file_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    for args, needle in (
        (("top", "--once", "--node.bearer-token-file", str(missing)), "--node.bearer-token-file"),
        (("top", "--once", "--url", "https://127.0.0.1:1", "--node.tls.ca-file", str(missing)),
         "--node.tls.ca-file"),
        (("report", "--prometheus", "https://x", "--json", "-", "--prometheus.tls.cert-file", str(missing)),
         "--prometheus.tls.cert-file"),
    ):  # fmt: skip
        done = ridgeline(*args)
        assert done.returncode == 2 and needle in done.stderr and str(missing) in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    source = ScrapeSource(
        SourceOptions(),
        ScrapeSettings(url="https://h/metrics", client=HTTPClientConfig(bearer_token_file=missing)),
    )
    with pytest.raises(SourceUnavailable, match=r"--scrape.bearer-token-file"):
        source.open()
