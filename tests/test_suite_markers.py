"""`./scripts/test --quick` leaves out what needs an image build, a browser or an e2e stack, and
nothing else: every test module that builds the image, drives chromium or starts Prometheus,
Alertmanager or VictoriaMetrics carries its marker (pyproject.toml), so a new one cannot slip
into the quick run (docs/testing.md)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USES = {
    "image": re.compile(r'"build-image"'),  # the script named in code, not in a docstring
    "browser": re.compile(r"^(from browser import|import browser)", re.MULTILINE),
    "e2e": re.compile(r"^from prometheus_stack import|\bPROMETHEUS\b", re.MULTILINE),
}


def quick_markers() -> str:
    match = re.search(r'^QUICK_MARKERS="([^"]+)"', (ROOT / "scripts" / "test").read_text(), re.MULTILINE)
    assert match, "scripts/test names its QUICK_MARKERS"
    return match.group(1)


def module_marks(path: Path) -> set[str]:
    """The marker names of a test module's `pytestmark` (every heavy module marks itself whole)."""
    module = importlib.import_module(path.stem)
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    return {getattr(mark, "name", None) or mark.mark.name for mark in marks}


def heavy_modules() -> dict[str, set[Path]]:
    """marker -> the test files whose source uses what it stands for."""
    found: dict[str, set[Path]] = {marker: set() for marker in USES}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        source = path.read_text(encoding="utf-8")
        for marker, pattern in USES.items():
            if pattern.search(source):
                found[marker].add(path)
    return found


def test_the_quick_run_leaves_out_every_module_that_needs_an_image_browser_or_stack() -> None:
    assert quick_markers() == "not image and not browser and not e2e"
    heavy = heavy_modules()
    assert heavy["image"] and heavy["browser"] and heavy["e2e"], heavy  # the patterns still find them
    unmarked = sorted(
        f"tests/{path.name} (needs @{marker})"
        for marker, paths in heavy.items()
        for path in paths
        if marker not in module_marks(path)
    )
    assert not unmarked, f"mark these modules (pytestmark) so --quick leaves them out: {unmarked}"
    assert not module_marks(ROOT / "tests" / "test_cli_classify.py") & set(USES)
