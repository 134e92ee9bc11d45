"""Signals against a real `ridgeline serve` process: SIGHUP reloads the web config, the other
signals whose default would kill it are logged and ignored (`SignalDesk` in exporter/commands/serve.py)."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest
from conftest import OutputSoFar, serve_process

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _status(base: str, user: str, password: str) -> int:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def _wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _config(password: str) -> str:
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    return f"basic_auth_users:\n  prometheus: '{hashed}'\n"


def test_sighup_reloads_the_web_config_and_other_signals_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(_config("first-password"))
    with serve_process("--replay", "demo", "--loop", "--web-config", str(path)) as (base, process):
        log = OutputSoFar(process)
        assert _status(base, "prometheus", "first-password") == 200
        # A change the once-a-second poll cannot see: same inode, size and mtime.
        before = os.stat(path)
        path.write_text(_config("other-password"))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        time.sleep(2.5)
        assert _status(base, "prometheus", "other-password") == 401  # the poll did not reload it
        process.send_signal(signal.SIGHUP)
        assert _wait_for(lambda: _status(base, "prometheus", "other-password") == 200)
        for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGHUP):
            process.send_signal(signum)
        log.until(  # each one handled: the three ignored, the second reload
            lambda text: (
                text.count("SIGHUP: reloading the web config") == 2
                and all(f"{name} received: ignored" in text for name in ("SIGUSR1", "SIGUSR2", "SIGALRM"))
            )
        )
        assert process.poll() is None, "a signal killed the daemon"
        assert _status(base, "prometheus", "other-password") == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        output = log.rest()
    assert output.count("SIGHUP: reloading the web config") == 2, output
    assert "reloaded on request (SIGHUP)" in output
    assert "SIGUSR1 received: ignored" in output and "SIGUSR2 received: ignored" in output
    assert "Traceback" not in output


def test_sighup_without_a_web_config_is_logged_not_fatal() -> None:
    with serve_process("--replay", "demo", "--loop") as (base, process):
        log = OutputSoFar(process)
        process.send_signal(signal.SIGHUP)
        process.send_signal(signal.SIGUSR1)
        log.until(lambda text: "SIGHUP: no --web-config" in text and "SIGUSR1 received: ignored" in text)
        assert process.poll() is None
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        output = log.rest()
    assert "SIGHUP: no --web-config to reload" in output, output


@pytest.mark.parametrize("text", ["", "# basic_auth_users:\n"])
def test_an_empty_web_config_at_start_up_is_exit_2_with_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    listen = "127.0.0.1:0"
    command = [sys.executable, "-m", "exporter", "serve", "--replay", "demo", "--listen", listen]
    result = subprocess.run([*command, "--web-config", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "empty" in lines[0] and str(path) in lines[0], result.stderr


def test_the_systemd_unit_reloads_with_sighup() -> None:
    unit = (ROOT / "deploy" / "systemd" / "ridgeline.service").read_text()
    assert "\nExecReload=/bin/kill -HUP $MAINPID\n" in unit


def test_a_web_config_truncated_while_serving_keeps_basic_auth_on(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(_config("first-password"))
    with serve_process("--replay", "demo", "--loop", "--web-config", str(path)) as (base, process):
        log = OutputSoFar(process)
        assert _status(base, "prometheus", "first-password") == 200
        path.write_text("")  # `: > web.yml`, or an editor that truncates before it writes
        log.until(lambda text: "the file is empty" in text)  # the watcher's poll has seen it
        process.send_signal(signal.SIGHUP)  # and a reload asked for on top
        log.until(lambda text: text.count("the file is empty") == 2)
        assert _status(base, "nobody", "") == 401  # was: auth off, every page open
        assert _status(base, "prometheus", "first-password") == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        output = log.rest()
    warnings = [line for line in output.splitlines() if "the file is empty" in line]
    assert warnings and all("WARNING" in line for line in warnings), output
