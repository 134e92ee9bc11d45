"""The container image, for real: deploy/Dockerfile built with buildah (scripts/build-image) and run
with podman the way a hardened node runs it — read-only root, every capability dropped, no new
privileges, the image's own non-root user — on loopback. /metrics answers and promtool finds
nothing to say about it; the image's HEALTHCHECK passes and follows --listen / RIDGELINE_LISTEN.
It carries the daemon without the client tools' extras, the LICENSE and its OCI labels.

Container storage lives in a temporary --root/--runroot, removed afterwards. Each build step's
time is printed in pytest's summary ("image steps").
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import closed_port, http_get, record_step_time

pytestmark = [pytest.mark.slow, pytest.mark.image]

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {name: shutil.which(name) for name in ("buildah", "podman", "debootstrap", "runc", "promtool")}
missing = [name for name, path in TOOLS.items() if path is None]
if missing:
    pytestmark = [
        *pytestmark,
        pytest.mark.skip(reason=f"not installed: {', '.join(missing)} (scripts/bootstrap --test)"),
    ]

IMAGE = "localhost/ridgeline:test"
# crun fails on these machines' rlimits and hybrid cgroups; runc works. No systemd: cgroupfs,
# file events, and no healthcheck timer (the test runs the check itself).
RUN_FLAGS = [
    "--network",
    "host",
    "--read-only",
    "--cap-drop=ALL",
    "--security-opt",
    "no-new-privileges",
    "--ulimit",
    "nofile=20000:20000",
    "--ulimit",
    "nproc=4096:4096",
    "--health-interval",
    "disable",
]


class Podman:
    """podman with its storage in one temporary directory."""

    def __init__(self, storage: Path) -> None:
        self.base = [
            str(TOOLS["podman"]),
            "--root",
            str(storage / "root"),
            "--runroot",
            str(storage / "run"),
            "--storage-driver",
            "vfs",
            "--runtime",
            str(TOOLS["runc"]),
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "file",
            # libpod's state, events and network configs too, or they would land in /run
            "--tmpdir",
            str(storage / "run" / "libpod"),  # as scripts/build-image: libpod's database records it
            "--network-config-dir",
            str(storage / "networks"),
        ]
        self.storage = storage

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def start(self, *args: str, env: dict[str, str] | None = None) -> str:
        env_flags = [flag for name, value in (env or {}).items() for flag in ("--env", f"{name}={value}")]
        return self("run", "--detach", *RUN_FLAGS, *env_flags, IMAGE, *args).stdout.strip()


@pytest.fixture(scope="module")
def podman() -> Iterator[Podman]:
    # Not tmp_path_factory: under pytest-xdist its paths gain a popen-gwN level, and podman
    # refuses a runroot longer than 50 characters.
    storage = Path(tempfile.mkdtemp(prefix="ridgeline-podman-"))
    build = subprocess.run(
        [
            str(ROOT / "scripts" / "build-image"),
            "--root",
            str(storage / "root"),
            "--runroot",
            str(storage / "run"),
            "--tag",
            IMAGE,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    for step, seconds in re.findall(r"^build-image: (\w+) ([\d.]+) s$", build.stderr, flags=re.MULTILINE):
        record_step_time(f"image {step}: {seconds} s")
    assert build.returncode == 0, f"scripts/build-image failed:\n{build.stderr[-4000:]}"
    runner = Podman(storage)
    try:
        yield runner
    finally:
        runner("rm", "--all", "--force", "--time", "1", check=False)
        runner("rmi", "--all", "--force", check=False)
        shutil.rmtree(storage, ignore_errors=True)


def _wait_ready(podman: Podman, container: str, base: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if http_get(base + "/readyz")[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            logs = podman("logs", container, check=False)
            raise AssertionError(f"container {container[:12]} never got ready:\n{logs.stdout}{logs.stderr}")
        time.sleep(0.2)


def _start_on_a_free_port(podman: Podman, *args: str, by_variable: bool = False) -> tuple[str, int]:
    """Start serve on a loopback port it is told, as --listen (or RIDGELINE_LISTEN): the
    HEALTHCHECK reads the port off serve's command line, so port 0 will not do. The port is
    picked before serve binds it, so another process may take it first: serve then stops at
    once with "in use", and a fresh port is tried (serve logs "serving on" only once bound)."""
    for _ in range(5):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        listen = f"127.0.0.1:{port}"
        if by_variable:
            container = podman.start(*args, env={"RIDGELINE_LISTEN": listen})
        else:
            container = podman.start(*args, "--listen", listen)
        deadline = time.monotonic() + 60
        while True:
            logs = podman("logs", container, check=False)
            text = logs.stdout + logs.stderr
            if "serving on" in text:
                return container, port
            if "in use" in text:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"container {container[:12]} never served:\n{text}")
            time.sleep(0.2)
    raise AssertionError("five loopback ports in a row were taken before serve could bind them")


def _healthcheck(podman: Podman, container: str) -> subprocess.CompletedProcess[str]:
    return podman("healthcheck", "run", container, check=False, timeout=30)


def test_image_metadata_keeps_healthcheck_user_and_entrypoint(podman: Podman) -> None:
    (image,) = json.loads(podman("image", "inspect", IMAGE).stdout)
    config = image["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["ridgeline", "serve"]
    assert image["Healthcheck"]["Test"] == ["CMD", "ridgeline", "healthcheck"], "--format docker keeps it"
    assert "10295/tcp" in config["ExposedPorts"]


def test_hardened_container_serves_clean_metrics_and_passes_its_healthcheck(podman: Podman) -> None:
    container, port = _start_on_a_free_port(podman, "--replay", "demo", "--loop")
    base = f"http://127.0.0.1:{port}"
    _wait_ready(podman, container, base)

    status, body = http_get(base + "/metrics")
    assert status == 200
    assert "ridgeline_regime{" in body and "ridgeline_build_info{" in body
    lint = subprocess.run(
        [str(TOOLS["promtool"]), "check", "metrics"],
        input=body,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout + lint.stderr

    health = _healthcheck(podman, container)
    assert health.returncode == 0, (
        f"HEALTHCHECK failed on --listen 127.0.0.1:{port}: {health.stdout}{health.stderr}"
    )

    # The posture the flags asked for, seen from inside: uid 65532, no capabilities, no writes to /.
    assert podman("exec", container, "id", "-u").stdout.strip() == "65532"
    status_text = podman("exec", container, "cat", "/proc/1/status").stdout
    assert re.search(r"^CapEff:\s+0+$", status_text, flags=re.MULTILINE), status_text
    assert re.search(r"^NoNewPrivs:\s+1$", status_text, flags=re.MULTILINE), status_text
    write = podman("exec", container, "python", "-c", "open('/probe', 'w')", check=False)
    assert write.returncode != 0 and "Read-only file system" in write.stderr


def test_healthcheck_follows_ridgeline_listen_and_reports_a_dead_endpoint(podman: Podman) -> None:
    container, port = _start_on_a_free_port(podman, "--replay", "demo", "--loop", by_variable=True)
    _wait_ready(podman, container, f"http://127.0.0.1:{port}")
    health = _healthcheck(podman, container)
    assert health.returncode == 0, f"HEALTHCHECK failed on RIDGELINE_LISTEN: {health.stdout}{health.stderr}"

    # The same check pointed at a port nothing listens on fails and says why.
    with closed_port() as dead:
        failed = podman(
            "exec",
            "--env",
            f"RIDGELINE_HEALTHCHECK_URL=http://127.0.0.1:{dead}/healthz",
            container,
            "ridgeline",
            "healthcheck",
            check=False,
        )
        assert failed.returncode == 1
        assert f"127.0.0.1:{dead}" in failed.stderr and "refused" in failed.stderr.lower()


def _in_image(podman: Podman, *command: str) -> subprocess.CompletedProcess[str]:
    """Run one command in a throwaway container of the image, hardened like the others."""
    entrypoint, *args = command
    return podman("run", "--rm", *RUN_FLAGS, "--entrypoint", entrypoint, IMAGE, *args)


def test_image_has_the_daemon_without_the_client_tools(podman: Podman) -> None:
    """Issue 18.7: the node image installs neither extra (`top`'s textual, `report`'s matplotlib),
    and keeps grpc, which kubelet attribution needs."""
    names = "('textual', 'rich', 'matplotlib', 'grpc')"
    probe = f"import importlib.util as u; print(*[m for m in {names} if u.find_spec(m)])"
    assert _in_image(podman, "python", "-c", probe).stdout.split() == ["grpc"]
    refused = podman("run", "--rm", *RUN_FLAGS, "--entrypoint", "ridgeline", IMAGE, "top", check=False)
    # `top` without a terminal would say so too: the extra is checked first, so this line is it
    assert refused.returncode == 2
    assert "needs the 'top' extra" in refused.stderr and "Traceback" not in refused.stderr


def test_image_ships_the_license_and_its_oci_labels(podman: Podman) -> None:
    """Issue 18.8: Apache-2.0 section 4(a) wants the License with every copy; the labels say what
    the image is, from which commit (scripts/build-image's build args)."""
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert _in_image(podman, "cat", "/usr/share/licenses/ridgeline/LICENSE").stdout == license_text
    wheel_copy = (
        "import importlib.metadata as m; "
        "print(m.distribution('ridgeline').read_text('licenses/LICENSE'), end='')"
    )
    assert _in_image(podman, "python", "-c", wheel_copy).stdout == license_text

    (image,) = json.loads(podman("image", "inspect", IMAGE).stdout)
    labels = image["Labels"]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    revision = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    oci = "org.opencontainers.image."
    assert labels[oci + "title"] == "ridgeline"
    assert labels[oci + "licenses"] == "Apache-2.0"
    assert labels[oci + "description"]
    assert labels[oci + "version"] == version
    assert labels[oci + "revision"] == revision.strip()
    created = datetime.fromisoformat(labels[oci + "created"])
    assert created.tzinfo is not None and created.utcoffset() == timedelta(0), labels[oci + "created"]
