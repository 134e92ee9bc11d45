"""A real headless Chromium for tests: Debian's chromium driven by Debian's chromedriver (selenium).

scripts/bootstrap --test installs both; a machine without them fails here with what to run,
rather than skipping (a skipped browser test is a browser test that never runs). The flags keep
Chromium off the network it would otherwise try on its own (component updates, sync, QUIC):
the only requests left are the page's, which `requests()` reads from the performance log.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--window-size=1366,768",
)
"""Headless, no sandbox (root in CI), nothing fetched for Chromium itself, a laptop's screen."""


def require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        raise AssertionError(
            f"{', '.join(missing)} missing: run scripts/bootstrap --test (Debian chromium, chromium-driver)"
        )


@contextmanager
def chromium() -> Iterator[Any]:
    """A selenium WebDriver on a throwaway profile, with browser and performance logs on."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="ridgeline-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: Any) -> list[str]:
    """Console messages at error level (script errors, failed loads, CSP refusals) since last asked."""
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def requested_urls(driver: Any) -> list[str]:
    """Every URL the page asked the network for since last asked (the DevTools Network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


NETWORK_SCHEMES = ("http", "https", "ws", "wss", "ftp")
"""What reaches the network; data:, blob: and the browser's own chrome:// pages do not."""


def foreign_requests(urls: list[str], base: str) -> list[str]:
    """The network requests that went anywhere but `base`'s host and port."""
    origin = urlsplit(base)
    return [
        url
        for url in urls
        if urlsplit(url).scheme in NETWORK_SCHEMES
        and (urlsplit(url).hostname, urlsplit(url).port) != (origin.hostname, origin.port)
    ]
