"""`ridgeline healthcheck` (the image's HEALTHCHECK) off the container: how it reads serve's
command line and environment, and a real check against a real serve. tests/test_image.py runs
it inside the built image."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import closed_port, serve_process

from exporter.commands.healthcheck import serve_argv, url_for


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        (["/opt/venv/bin/python3", "/opt/venv/bin/ridgeline", "serve", "--listen", ":9000"],
         ["serve", "--listen", ":9000"]),
        (["ridgeline", "--log-level", "debug", "serve"], ["--log-level", "debug", "serve"]),
        (["python", "-m", "exporter", "serve", "--replay", "demo"], ["serve", "--replay", "demo"]),
        (["/opt/venv/bin/python3", "/opt/venv/bin/ridgeline", "healthcheck"], None),
        (["/sbin/tini", "--", "sleep", "1"], None),
    ],
)  # fmt: skip
def test_serve_argv_finds_a_serve_command_line(cmdline: list[str], expected: list[str] | None) -> None:
    assert serve_argv(cmdline) == expected


def test_url_follows_flag_then_environment_then_default(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    assert url_for(["serve"], {}, cwd) == "http://127.0.0.1:10295/healthz"
    assert url_for(["serve"], {"RIDGELINE_LISTEN": "127.0.0.2:9000"}, cwd) == "http://127.0.0.2:9000/healthz"
    new = {"RIDGELINE_SERVE_WEB_LISTEN_ADDRESS": "127.0.0.3:9000", "RIDGELINE_LISTEN": "127.0.0.2:9000"}
    assert url_for(["serve"], new, cwd) == "http://127.0.0.3:9000/healthz"  # the new name wins
    assert url_for(["serve", "--web.listen-address", ":9300"], {}, cwd) == "http://127.0.0.1:9300/healthz"
    flagged = url_for(["serve", "--listen", ":9100"], {"RIDGELINE_LISTEN": "127.0.0.2:9000"}, cwd)
    assert flagged == "http://127.0.0.1:9100/healthz", "the flag wins, and all interfaces mean loopback"
    assert url_for(["serve", "--listen=[::]:9200"], {}, cwd) == "http://[::1]:9200/healthz"


def test_url_uses_https_when_the_web_config_serves_tls(tmp_path: Path) -> None:
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n")
    (tmp_path / "auth.yml").write_text("basic_auth_users:\n  p: $2b$10$x\n")
    assert url_for(["serve", "--web-config", "web.yml"], {}, str(tmp_path)).startswith("https://")
    assert url_for(["serve"], {"RIDGELINE_WEB_CONFIG": "auth.yml"}, str(tmp_path)).startswith("http://")
    with pytest.raises(LookupError, match=r"missing\.yml"):
        url_for(["serve", "--web-config", "missing.yml"], {}, str(tmp_path))


@pytest.mark.slow
def test_healthcheck_against_a_real_serve_and_a_dead_port() -> None:
    command = [sys.executable, "-m", "exporter", "healthcheck"]
    with serve_process("--replay", "demo", "--loop") as (base, _):
        ok = subprocess.run(command, env={"RIDGELINE_HEALTHCHECK_URL": base + "/healthz"},
                            capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        assert ok.returncode == 0, ok.stderr
    with closed_port() as port:
        dead = f"http://127.0.0.1:{port}/healthz"
        failed = subprocess.run(command, env={"RIDGELINE_HEALTHCHECK_URL": dead}, capture_output=True,
                                text=True, timeout=30, check=False)  # fmt: skip
    assert failed.returncode == 1 and dead in failed.stderr
