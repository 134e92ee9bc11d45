"""`./scripts/test --quick` leaves out what needs an image build, a browser or an e2e stack, and
nothing else: every test module that builds the image, drives chromium or starts Prometheus,
Alertmanager or VictoriaMetrics carries its marker (pyproject.toml), so a new one cannot slip
into the quick run (docs/testing.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USES = {
    "image": re.compile(r"build-image"),
    "browser": re.compile(r"^(from browser import|import browser)", re.MULTILINE),
    "e2e": re.compile(r"^from prometheus_stack import|\bPROMETHEUS\b", re.MULTILINE),
}


def quick_markers() -> str:
    match = re.search(r'^QUICK_MARKERS="([^"]+)"', (ROOT / "scripts" / "test").read_text(), re.MULTILINE)
    assert match, "scripts/test names its QUICK_MARKERS"
    return match.group(1)


def collected_files(marker_expression: str) -> set[str]:
    """The test files pytest collects under `-m marker_expression` (in a process of its own)."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-m", marker_expression],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {line.split("::", 1)[0] for line in result.stdout.splitlines() if "::" in line}


def heavy_modules() -> dict[str, set[str]]:
    """marker -> the test files whose source uses what it stands for."""
    found: dict[str, set[str]] = {marker: set() for marker in USES}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        source = path.read_text(encoding="utf-8")
        for marker, pattern in USES.items():
            if pattern.search(source):
                found[marker].add(f"tests/{path.name}")
    return found


def test_the_quick_run_leaves_out_every_module_that_needs_an_image_browser_or_stack() -> None:
    assert quick_markers() == "not image and not browser and not e2e"
    heavy = heavy_modules()
    assert heavy["image"] and heavy["browser"] and heavy["e2e"], heavy  # the patterns still find them
    quick = collected_files(quick_markers())
    assert "tests/test_cli_classify.py" in quick and "tests/test_serve_cli.py" in quick
    slipped = {marker: sorted(files & quick) for marker, files in heavy.items() if files & quick}
    assert not slipped, f"mark these modules (pytestmark) so --quick leaves them out: {slipped}"
