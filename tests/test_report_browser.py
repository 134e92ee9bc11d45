"""The HTML report in a real browser: Debian's headless Chromium, driven by npm's playwright-core
(tests/browser/open_report.mjs), opens the page from disk with every request other than the page
itself intercepted. It must render its charts and tables with no console error, no page error
and no request to any other host — it has to open offline, mailed as it is.

The same checker is shown a copy of the page with one remote image and one console error, and
must report both, so a pass means the page is clean rather than the checker blind.
RIDGELINE_UPDATE_SCREENSHOT=1 also writes docs/report-screenshot.png.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BROWSER_DIR = ROOT / "tests" / "browser"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or NODE is None or not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir(),
        reason="chromium, node or tests/browser's playwright-core missing: run scripts/bootstrap --test",
    ),
]


def open_in_chromium(page: Path, screenshot: Path | None = None) -> dict[str, Any]:
    assert NODE is not None and CHROMIUM is not None
    command = [NODE, str(BROWSER_DIR / "open_report.mjs"), str(page)]
    if screenshot is not None:
        command.append(str(screenshot))
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "CHROMIUM": CHROMIUM}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report-browser") / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "report", "--replay", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_the_report_opens_offline_without_errors(report_page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    result = open_in_chromium(report_page, shot)
    assert result["console_errors"] == []
    assert result["page_errors"] == []
    assert result["requests"] == []
    assert result["svgs"] == 3  # regime bars, roofline, timeline
    assert result["tables"] >= 6
    assert result["title"].startswith("Ridgeline fleet report")
    assert shot.stat().st_size > 50_000  # a page was drawn, not a blank
    if os.environ.get("RIDGELINE_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, ROOT / "docs" / "report-screenshot.png")


def test_the_checker_sees_a_remote_request_and_a_console_error(report_page: Path, tmp_path: Path) -> None:
    spoiled = tmp_path / "spoiled.html"
    spoiled.write_text(
        report_page.read_text().replace(
            "</body>",
            '<img src="http://203.0.113.7/pixel.png"><script>console.error("boom")</script></body>',
        )
    )
    result = open_in_chromium(spoiled)
    assert result["requests"] == ["http://203.0.113.7/pixel.png"]
    assert "boom" in result["console_errors"]
