"""The node daemon without the client tools (issue 18.7): `serve` never loads textual, matplotlib
or grpc unless kubelet attribution runs, nor a websocket library (it serves no websocket), and a
client command whose extra is missing says which in one line, exit 2, no traceback.

Each test runs the real command in its own process with a directory of stand-in packages first
on PYTHONPATH. A "tripwire" stand-in ends the process with TRIPPED the moment it is imported, so
an import anywhere on the path (even one whose ImportError some caller would swallow) fails the
test; a "missing" stand-in raises ImportError, as an environment without the extra would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import closed_port, http_get, serve_process

TRIPPED = 86
TRIPWIRE = "import os, sys\nsys.stderr.write('tripwire: imported PACKAGE\\n')\nos._exit(86)\n"
MISSING = "raise ImportError(\"No module named 'PACKAGE' (stand-in)\")\n"
CLIENT_ONLY = ("textual", "rich", "matplotlib")
"""The extras' packages (rich comes with textual); the daemon must not import them."""


def stand_ins(root: Path, body: str, *packages: str) -> dict[str, str]:
    """PYTHONPATH for a process in which each of `packages` is the stand-in `body`."""
    for name in packages:
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(body.replace("PACKAGE", name), encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def ridgeline(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=timeout,
        check=False,
    )


def test_serve_runs_without_grpc_websockets_textual_or_matplotlib(tmp_path: Path) -> None:
    """The replay demo with an HPC job directory and no kubelet: every import of the extras, of
    grpc/protobuf or of the websocket libraries uvicorn's ws="auto" loads would end the process,
    so a /metrics with verdicts proves none happened."""
    env = stand_ins(tmp_path / "site", TRIPWIRE, *CLIENT_ONLY, "grpc", "google", "websockets", "wsproto")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "0").write_text("412\n", encoding="utf-8")
    args = ("--replay", "demo", "--loop", "--kubelet-socket", str(tmp_path / "no-kubelet" / "kubelet.sock"))
    with serve_process(*args, "--hpc-job-mapping-dir", str(jobs), env=env) as (base, process):
        status, body = http_get(base + "/metrics")
        assert status == 200
        assert 'hpc_job="412"' in body
        assert process.poll() is None


def test_kubelet_attribution_is_what_loads_grpc(tmp_path: Path) -> None:
    """The other side of the test above: once the kubelet's directory exists, the attributor
    starts and imports grpc (here, the tripwire)."""
    env = stand_ins(tmp_path / "site", TRIPWIRE, "grpc")
    kubelet = tmp_path / "pod-resources"
    kubelet.mkdir()
    socket_path = str(kubelet / "kubelet.sock")
    done = ridgeline(
        "serve", "--replay", "demo", "--listen", "127.0.0.1:0", "--kubelet-socket", socket_path, env=env
    )
    assert done.returncode == TRIPPED, done.stderr
    assert "tripwire: imported grpc" in done.stderr


def _one_line_error(done: subprocess.CompletedProcess[str], command: str, extra: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"ridgeline {command}: error: ")
    assert f"needs the '{extra}' extra" in lines[0]
    assert f"pip install '.[{extra}]'" in lines[0]


def test_top_without_textual_names_the_top_extra(tmp_path: Path) -> None:
    env = stand_ins(tmp_path / "site", MISSING, "textual", "rich")
    done = ridgeline("top", "--url", "http://127.0.0.1:9", env=env)
    _one_line_error(done, "top", "top")


def test_top_once_needs_no_extra(tmp_path: Path) -> None:
    """The plain table is the daemon image's own `top`: it must not touch textual at all."""
    env = stand_ins(tmp_path / "site", TRIPWIRE, "textual", "rich")
    with closed_port() as port:  # nothing answers there
        done = ridgeline("top", "--once", "--url", f"http://127.0.0.1:{port}", "--timeout", "1", env=env)
    assert done.returncode == 1, done.stderr  # the node does not answer: that is all it says
    assert "not answering" in done.stderr
    assert "tripwire" not in done.stderr


@pytest.mark.parametrize("json_too", [False, True])
def test_report_out_without_matplotlib_names_the_report_extra(tmp_path: Path, json_too: bool) -> None:
    """Refused before any work: nothing is written, not even the JSON asked for beside it."""
    env = stand_ins(tmp_path / "site", MISSING, "matplotlib")
    out, json_out = tmp_path / "report.html", tmp_path / "report.json"
    extra_args = ("--json", str(json_out)) if json_too else ()
    done = ridgeline("report", "--replay", "demo", "--out", str(out), *extra_args, env=env)
    _one_line_error(done, "report", "report")
    assert not out.exists()
    assert not json_out.exists()


def test_report_json_needs_no_extra(tmp_path: Path) -> None:
    env = stand_ins(tmp_path / "site", TRIPWIRE, "matplotlib")
    out = tmp_path / "report.json"
    done = ridgeline("report", "--replay", "demo", "--json", str(out), env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
