"""scripts/demo listens where README.md says: localhost, unless told otherwise.

The script is run as it is, from a copy of the repository's layout in which `scripts/bootstrap`
(the install) and `.venv/bin/ridgeline` (the server) only record what they were given: what is
under test is the arguments the script hands to `ridgeline serve`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo", tmp_path / "scripts" / "demo")
    (tmp_path / "scripts" / "bootstrap").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "ridgeline").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    for script in ("scripts/demo", "scripts/bootstrap", ".venv/bin/ridgeline"):
        (tmp_path / script).chmod(0o755)
    return tmp_path


def serve_args(layout: Path, *args: str, **env: str) -> list[str]:
    done = subprocess.run(
        [str(layout / "scripts" / "demo"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**{k: v for k, v in os.environ.items() if not k.endswith("_LISTEN")}, **env},
    )
    return done.stdout.splitlines()


def test_the_demo_listens_on_localhost_by_default(layout: Path) -> None:
    assert serve_args(layout) == [
        "serve", "--listen", "127.0.0.1:10295", "--replay", "demo", "--loop", "--collector.links"
    ]  # fmt: skip
    assert serve_args(layout, "--source", "auto")[:3] == ["serve", "--listen", "127.0.0.1:10295"]


def test_the_address_can_be_overridden(layout: Path) -> None:
    wide = serve_args(layout, RIDGELINE_DEMO_LISTEN="0.0.0.0:10295")
    assert wide[:3] == ["serve", "--listen", "0.0.0.0:10295"]
    own = serve_args(layout, "--replay", "demo", "--listen", "0.0.0.0:9999")
    assert own == ["serve", "--replay", "demo", "--listen", "0.0.0.0:9999"]
    assert serve_args(layout, "--listen=[::1]:10295") == ["serve", "--listen=[::1]:10295"]
    assert serve_args(layout, RIDGELINE_SERVE_LISTEN="0.0.0.0:1") == [
        "serve", "--replay", "demo", "--loop", "--collector.links"
    ]  # fmt: skip
