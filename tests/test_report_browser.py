"""The HTML report in a real browser: Debian's headless Chromium (tests/browser.py: chromedriver and
selenium, the same harness as the live page's test) opens the page from disk. It must render its
charts and tables with no console error and no network request at all — it has to open offline,
mailed as it is.

The same checks are run on a copy of the page with one image from a loopback port where nothing
listens and one console error, and must see both, so a pass means the page is clean rather than
the checks blind. RIDGELINE_UPDATE_SCREENSHOT=1 also writes docs/report-screenshot.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import NETWORK_SCHEMES, chromium, console_errors, requested_urls
from conftest import closed_port

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]


def open_page(page: Path, screenshot: Path | None = None) -> dict[str, Any]:
    """What the browser did with the page: its console errors, its network requests, what it drew."""
    from selenium.webdriver.common.by import By

    with chromium() as driver:
        driver.get(page.as_uri())
        result: dict[str, Any] = {
            "title": driver.title,
            "svgs": len(driver.find_elements(By.TAG_NAME, "svg")),
            "tables": len(driver.find_elements(By.TAG_NAME, "table")),
        }
        if screenshot is not None:
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1280, int(height) + 100)
            driver.save_screenshot(str(screenshot))
        result["console_errors"] = console_errors(driver)
        result["requests"] = [u for u in requested_urls(driver) if u.split(":", 1)[0] in NETWORK_SCHEMES]
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
    result = open_page(report_page, shot)
    assert result["console_errors"] == []
    assert result["requests"] == []
    assert result["svgs"] == 3  # regime bars, roofline, timeline
    assert result["tables"] >= 6
    assert result["title"].startswith("Ridgeline fleet report")
    assert shot.stat().st_size > 50_000  # a page was drawn, not a blank
    if os.environ.get("RIDGELINE_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, ROOT / "docs" / "report-screenshot.png")


def test_the_checks_see_a_request_and_a_console_error(report_page: Path, tmp_path: Path) -> None:
    with closed_port() as port:
        pixel = f"http://127.0.0.1:{port}/pixel.png"  # loopback, nothing listens
        _spoiled_page_is_caught(report_page, tmp_path, pixel)


def _spoiled_page_is_caught(report_page: Path, tmp_path: Path, pixel: str) -> None:
    spoiled = tmp_path / "spoiled.html"
    spoiled.write_text(
        report_page.read_text().replace(
            "</body>", f'<img src="{pixel}"><script>console.error("boom")</script></body>'
        )
    )
    result = open_page(spoiled)
    assert pixel in result["requests"]
    assert any("boom" in message for message in result["console_errors"])
