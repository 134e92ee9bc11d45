"""`./scripts/test --quick` leaves out what needs an image build, a browser or an e2e stack, and
nothing else: every test module that builds the image, drives chromium or starts Prometheus,
Alertmanager or VictoriaMetrics carries its marker (pyproject.toml), so a new one cannot slip
into the quick run (docs/testing.md)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USES = {
    "image": re.compile(r'"build-image"'),  # the script named in code, not in a docstring
    "browser": re.compile(r"^(from browser import|import browser)", re.MULTILINE),
    "e2e": re.compile(r"^from prometheus_stack import|\bPROMETHEUS\b|\brunning_stack\(", re.MULTILINE),
}


def quick_markers() -> str:
    match = re.search(r'^QUICK_MARKERS="([^"]+)"', (ROOT / "scripts" / "test").read_text(), re.MULTILINE)
    assert match, "scripts/test names its QUICK_MARKERS"
    return match.group(1)


def _names(marks: object) -> set[str]:
    listed = marks if isinstance(marks, list) else [marks]
    return {getattr(mark, "name", None) or mark.mark.name for mark in listed}


def module_marks(path: Path) -> set[str]:
    """The marker names of a test module's `pytestmark`."""
    return _names(getattr(importlib.import_module(path.stem), "pytestmark", []))


def unmarked(path: Path, marker: str) -> list[str]:
    """What in a module that uses what `marker` stands for lacks the marker: nothing when the
    module is marked whole; else its tests whose own source (decorators included) uses it and that
    are not marked; the module itself when no test does (a fixture or helper uses it: only a
    whole-module mark will do). A module may mark just its heavy tests."""
    module = importlib.import_module(path.stem)
    if marker in module_marks(path):
        return []
    using = [
        (name, test)
        for name, test in vars(module).items()
        if name.startswith("test_") and callable(test) and USES[marker].search(inspect.getsource(test))
    ]
    if not using:
        return [f"tests/{path.name}"]
    return [
        f"tests/{path.name}::{name}"
        for name, test in using
        if marker not in _names(getattr(test, "pytestmark", []))
    ]


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
    missing = sorted(
        f"{where} (needs @{marker})"
        for marker, paths in heavy.items()
        for path in paths
        for where in unmarked(path, marker)
    )
    assert not missing, f"mark these modules (pytestmark) or tests so --quick leaves them out: {missing}"
    assert not module_marks(ROOT / "tests" / "test_cli_classify.py") & set(USES)
