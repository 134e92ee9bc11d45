"""The refresh thread both attribution maps run: one refresh now, then one every few seconds.

The kubelet's pod map and the HPC job map differ in what one refresh reads, not in how it is
scheduled, so the schedule lives here once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class RefreshThread:
    """Calls `refresh` once on start, then every `interval_seconds` on a daemon thread, until
    stopped. `refresh` must not raise: each map records its own failures."""

    def __init__(self, name: str, interval_seconds: float, refresh: Callable[[], None]) -> None:
        self.name = name
        self.interval_seconds = interval_seconds
        self._refresh = refresh
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Refresh once now (so the first samples see the map), then on the thread; a second
        start while the thread runs does nothing."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._refresh()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, join_seconds: float) -> None:
        """Ask the thread to end and wait up to `join_seconds` for a refresh in flight."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=join_seconds)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            self._refresh()
