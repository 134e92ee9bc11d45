"""Take the README's screenshots from the demo: the live page in Chromium, `ridgeline top` in Textual.

    .venv/bin/python scripts/screenshots.py      # writes docs/img/live-page.png, docs/img/top.png

Starts `ridgeline serve --replay demo --loop --speed 5` on a free loopback port, lets the replay run
long enough for the trails to show, then photographs the page with headless Chromium (Debian's,
as the tests use it: scripts/bootstrap --test installs it) and the terminal view through
Textual's own screenshot (SVG, turned into a PNG by the same Chromium).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
WARM_UP_SECONDS = 24.0
"""At --speed 5, two minutes of the demo: the trails have most of their points."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def chromium_screenshot(url: str, target: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
             "--virtual-time-budget=3000", f"--screenshot={target}", url],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip


async def top_svg(base: str, target: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from exporter.top.client import NodeClient
    from exporter.top.tui import TopApp

    app = TopApp([NodeClient(base)], interval=1.0, sort="regime")
    async with app.run_test(size=(132, 34)) as pilot:
        while app.polls < 1:
            await pilot.pause(0.1)
        await pilot.press("down", "down", "down", "down")
        await pilot.pause(0.3)
        app.save_screenshot(target.name, path=str(target.parent))


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--replay", "demo", "--loop", "--speed", "5",
         "--listen", f"127.0.0.1:{port}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("serve did not come up") from None
                time.sleep(0.2)
        time.sleep(WARM_UP_SECONDS)
        chromium_screenshot(base + "/", OUT / "live-page.png", 1366, 1180)
        with tempfile.TemporaryDirectory() as tmp:
            svg = Path(tmp) / "top.svg"
            asyncio.run(top_svg(base, svg))
            chromium_screenshot(svg.as_uri(), OUT / "top.png", 1240, 800)
    finally:
        serve.terminate()
        serve.wait(timeout=20)
    for name in ("live-page.png", "top.png"):
        print(f"{OUT / name}: {(OUT / name).stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
