"""What the wheel built from this checkout carries (issue 18.8 and 18.7): the Apache-2.0 LICENSE,
the license metadata, and runtime dependencies without the client tools' extras.

The wheel is built by pip with the checkout's own setuptools (--no-build-isolation: no index is
reached), from a copy of exactly the files deploy/Dockerfile copies, so a file the image build
would miss is missing here too.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
"""sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the canonical text."""
CLIENT_EXTRAS = {"top": "textual", "report": "matplotlib"}


def dockerfile_copies() -> list[str]:
    """The checkout paths deploy/Dockerfile's build stage copies."""
    text = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    build_stage = text.split("FROM ", 2)[1]
    names: list[str] = []
    for line in build_stage.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            names += line.split()[1:-1]
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in dockerfile_copies():
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("wheel")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    build = subprocess.run(
        [*pip_wheel, "-w", str(out), str(src)], capture_output=True, text=True, timeout=300, check=False
    )
    assert build.returncode == 0, build.stderr
    (built,) = out.glob("ridgeline-*.whl")
    return zipfile.ZipFile(built)


def _metadata(wheel: zipfile.ZipFile) -> list[tuple[str, str]]:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    header = wheel.read(name).decode().split("\n\n", 1)[0]
    return [(key, value) for key, _, value in (line.partition(": ") for line in header.splitlines())]


def test_the_checkout_license_is_the_apache_2_text() -> None:
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256


def test_the_wheel_carries_the_license(wheel: zipfile.ZipFile) -> None:
    (name,) = [n for n in wheel.namelist() if re.fullmatch(r"ridgeline-[^/]+\.dist-info/licenses/LICENSE", n)]
    assert wheel.read(name) == (ROOT / "LICENSE").read_bytes()
    metadata = _metadata(wheel)
    assert ("License-Expression", "Apache-2.0") in metadata
    assert ("License-File", "LICENSE") in metadata


def test_the_wheel_leaves_the_client_tools_to_their_extras(wheel: zipfile.ZipFile) -> None:
    """`serve` (and the image) install the plain wheel: textual and matplotlib only with an extra."""
    requires = [value for key, value in _metadata(wheel) if key == "Requires-Dist"]
    for extra, package in CLIENT_EXTRAS.items():
        with_package = [r for r in requires if re.match(rf"{package}\b", r, re.IGNORECASE)]
        assert with_package, f"{package} is not in any extra"
        assert all("; extra ==" in r for r in with_package), with_package
        assert any(f'extra == "{extra}"' in r for r in with_package), with_package


def test_the_image_build_gets_the_license_and_the_version() -> None:
    """The Dockerfile copies LICENSE, .dockerignore lets it through, and the version label's
    default is pyproject's (scripts/build-image passes it anyway; a plain `docker build` doesn't)."""
    assert "LICENSE" in dockerfile_copies()
    assert "!LICENSE" in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    assert f"ARG VERSION={version}\n" in dockerfile
