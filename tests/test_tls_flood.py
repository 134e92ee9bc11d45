"""Floods of idle sockets, partial ClientHellos and reconnecting slow clients against a real
`ridgeline serve` process (issue 20). What must hold are memory bounds and counts: RSS, KiB per
pending connection beyond a plain one, authorised scrapes refused or reset."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from conftest import listening_port, stop_process
from flood_clients import attacking, hold_connections
from forked_serve import ForkedProcess, forkable
from test_webconfig import OPENSSL, _make_ca, _make_leaf

pytestmark = [pytest.mark.slow, pytest.mark.skipif(OPENSSL is None, reason="openssl CLI needed for certs")]

USER, PASSWORD = "prometheus", "scrape-secret"
SOCKETS = 600
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
"""A TLS record header and the start of a ClientHello that promises 512 bytes and sends 11."""
PARTIAL_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: slow"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    directory = tmp_path_factory.mktemp("tls-flood")
    ca = _make_ca(directory, "flood-ca")
    cert, key = _make_leaf(
        directory, "server", ca, "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    return ca[0], cert, key


def _web_config(directory: Path, tls: tuple[Path, Path, Path] | None) -> Path:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    text = f"basic_auth_users:\n  {USER}: '{hashed}'\n"
    if tls is not None:
        text += f"tls_server_config:\n  cert_file: {tls[1]}\n  key_file: {tls[2]}\n"
    path = directory / ("tls.yml" if tls else "plain.yml")
    path.write_text(text)
    return path


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(f"{field}:"))


def scrape(port: int, ca: Path | None = None) -> int:
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=20, context=ssl.create_default_context(cafile=ca)
        )
        if ca is not None
        else http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    )
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@contextmanager
def held(port: int, count: int, payload: bytes) -> Iterator[list[socket.socket]]:
    socks = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            if payload:
                sock.sendall(payload)
            socks.append(sock)
        time.sleep(1.5)  # the server has read what they sent
        yield socks
    finally:
        for sock in socks:
            sock.close()


@contextmanager
def serving(*args: str, ca: Path | None = None) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`ridgeline serve ARGS` until an authorised scrape (over TLS with `ca`) answers 200; its
    output goes to a file, so a process that never comes up cannot block a pipe."""
    with tempfile.TemporaryFile() as log:
        argv = ["serve", "--listen", "127.0.0.1:0", *args]
        process: Any = (  # forked, as conftest.serve_process's are (tests/forked_serve.py)
            ForkedProcess(argv, dict(os.environ), output=log.fileno())
            if forkable(None, None)
            else subprocess.Popen(
                [sys.executable, "-m", "exporter", *argv], stdout=log, stderr=subprocess.STDOUT
            )
        )
        try:
            port = listening_port(process, "serve", timeout=30)
            deadline = time.monotonic() + 30
            while True:
                try:
                    if scrape(port, ca) == 200:
                        break
                except (OSError, http.client.HTTPException):
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    log.seek(0)
                    raise AssertionError(f"serve did not come up:\n{log.read().decode()}")
                time.sleep(0.1)
            yield port, process
        finally:
            stop_process(process)


def _growth_per_socket(config: Path, payload: bytes, ca: Path | None) -> float:
    """KiB of server RSS per held socket, and every scrape in between answered 200."""
    args = ("--replay", "demo", "--loop", "--web-config", str(config), "--request-timeout", "60")
    with serving(*args, ca=ca) as (port, process):
        for _ in range(5):
            assert scrape(port, ca) == 200
        before = rss_kib(process.pid)
        with held(port, SOCKETS, payload):
            during = rss_kib(process.pid)
            assert [scrape(port, ca) for _ in range(5)] == [200] * 5
    return (during - before) / SOCKETS


def test_an_idle_socket_on_a_tls_port_costs_what_a_plain_one_does(
    tmp_path: Path, tls_files: tuple[Path, Path, Path]
) -> None:
    plain = _growth_per_socket(_web_config(tmp_path, None), b"", None)
    tls = _growth_per_socket(_web_config(tmp_path, tls_files), b"", tls_files[0])
    assert tls - plain <= 16, f"{tls:.1f} KiB per idle TLS socket, {plain:.1f} per plain one"  # was ~256


def test_partial_client_hellos_hold_no_tls_state(tmp_path: Path, tls_files: tuple[Path, Path, Path]) -> None:
    plain = _growth_per_socket(_web_config(tmp_path, None), PARTIAL_HELLO, None)
    tls = _growth_per_socket(_web_config(tmp_path, tls_files), PARTIAL_HELLO, tls_files[0])
    assert tls - plain <= 16, f"{tls:.1f} KiB per stalled ClientHello, {plain:.1f} per plain socket"


def test_a_flood_of_partial_hellos_past_the_cap_stays_under_128_mib(
    tmp_path: Path, tls_files: tuple[Path, Path, Path]
) -> None:
    """Twice the cap of stalled ClientHellos: evictions, reconnects; RSS bounded, scrapes served."""
    args = ("--replay", "demo", "--loop", "--web-config", str(_web_config(tmp_path, tls_files)),
            "--max-connections", "300", "--request-timeout", "60")  # fmt: skip
    with serving(*args, ca=tls_files[0]) as (port, process), flooding(port, 600, PARTIAL_HELLO):
        statuses = [scrape(port, tls_files[0]) for _ in range(20)]
        peak = rss_kib(process.pid, "VmHWM")
    assert statuses == [200] * 20
    assert peak <= 128 * 1024, f"peak RSS {peak / 1024:.0f} MiB"


def flooding(port: int, count: int, payload: bytes) -> AbstractContextManager[None]:
    """`count` connections sending `payload`, each reopened at once when the server closes it."""
    return attacking(hold_connections, (port, count, payload), warmup=1.0)


def test_slow_clients_reconnecting_at_once_past_the_cap_reset_no_scrape(tmp_path: Path) -> None:
    args = ("--replay", "demo", "--loop", "--web-config", str(_web_config(tmp_path, None)),
            "--max-connections", "20")  # fmt: skip
    with serving(*args) as (port, _), flooding(port, 80, PARTIAL_HEAD):
        statuses: list[object] = []
        for _ in range(40):
            try:
                statuses.append(scrape(port))
            except (ConnectionError, http.client.HTTPException) as exc:
                statuses.append(type(exc).__name__)
    assert statuses == [200] * 40  # was a quarter reset


def _closed_by_server(socks: list[socket.socket]) -> int:
    """How many of `socks` the server has closed (a read returns end-of-file, not 'would block')."""
    closed = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            if sock.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def test_stalled_client_hellos_stand_beside_the_cap_and_are_not_closed(
    tmp_path: Path, tls_files: tuple[Path, Path, Path]
) -> None:
    """Four times the cap of ClientHellos stalled halfway: they hold no TLS state, so they wait
    beside the cap (`hello_room`) rather than being closed to get back under it, which fed a
    client that reconnects at once (the loop then spent its turns accepting, a scrape waited 37×
    its idle time); and scrapes are still answered."""
    args = ("--replay", "demo", "--loop", "--web-config", str(_web_config(tmp_path, tls_files)),
            "--max-connections", "50", "--request-timeout", "60")  # fmt: skip
    with serving(*args, ca=tls_files[0]) as (port, _), held(port, 200, PARTIAL_HELLO) as socks:
        time.sleep(1.0)  # past TRIM_AFTER_SECONDS twice: anything trimmed is closed by now
        statuses = [scrape(port, tls_files[0]) for _ in range(10)]
        closed = _closed_by_server(socks)
    assert statuses == [200] * 10
    assert closed == 0, f"{closed} of 200 stalled ClientHellos closed"


FAT_HELLO = b"\x16\x03\x01\x46\x50" + b"\x01" * 16000
"""A TLS record header promising 18,000 bytes (within one record's bound) and 16,000 of them."""


def test_the_bytes_of_unfinished_client_hellos_are_bounded_all_together(
    tmp_path: Path, tls_files: tuple[Path, Path, Path]
) -> None:
    """1,300 ClientHellos each stalled 2,000 bytes short of its record: 21 MB kept if nothing
    bounded them together (HELLO_BYTES is 16 MiB), since they wait beside the cap. The ones that
    waited longest are closed; RSS stays bounded and scrapes are answered."""
    args = ("--replay", "demo", "--loop", "--web-config", str(_web_config(tmp_path, tls_files)),
            "--request-timeout", "60")  # fmt: skip
    with serving(*args, ca=tls_files[0]) as (port, process), held(port, 1300, FAT_HELLO) as socks:
        statuses = [scrape(port, tls_files[0]) for _ in range(5)]
        closed = _closed_by_server(socks)
        peak = rss_kib(process.pid, "VmHWM")
    assert statuses == [200] * 5
    assert 0 < closed < 1300, f"{closed} of 1,300 fat ClientHellos closed"
    assert peak <= 128 * 1024, f"peak RSS {peak / 1024:.0f} MiB"
