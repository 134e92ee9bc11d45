"""What `ridgeline serve` does with the signals whose default would kill it without a word.

SIGTERM and SIGINT stop it gracefully (uvicorn's handlers, exporter/commands/serve.py). SIGHUP
reloads the web config, as it does for Prometheus and its exporters and as systemd's
`ExecReload=/bin/kill -HUP $MAINPID` expects. SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
SIGIO and SIGPWR mean nothing to Ridgeline: each is logged (once a minute per signal) and
otherwise ignored, so a stray `kill -USR1` (log rotation scripts send it) is visible and harmless.
SIGQUIT keeps its default (quit with a core dump: the deliberate "stop now"); SIGPIPE and SIGXFSZ
are already ignored by Python.

A handler runs between two bytecodes of the main thread, which is serving HTTP; it only queues
the signal number (`queue.SimpleQueue` is safe there) and one daemon thread does the rest.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("exporter.serve")

IGNORED = tuple(
    getattr(signal, name)
    for name in ("SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPWR")
    if hasattr(signal, name)
)
"""Signals whose default action is to terminate and that Ridgeline gives no meaning."""
LOG_EVERY_SECONDS = 60.0


class SignalDesk:
    """Installs the handlers; a thread reloads on SIGHUP and logs the ignored ones."""

    def __init__(self, reload: Callable[[], None] | None) -> None:
        self._reload = reload
        self._inbox: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._previous: dict[int, object] = {}
        self._logged_at: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, name="ridgeline-signals", daemon=True)

    def install(self) -> None:
        """Call from the main thread (Python delivers signals there only)."""
        self._thread.start()
        for signum in (signal.SIGHUP, *IGNORED):
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous.clear()
        self._inbox.put(None)
        self._thread.join(timeout=5)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._inbox.put(signum)

    def _run(self) -> None:
        while (signum := self._inbox.get()) is not None:
            try:
                self._act(signum)
            except Exception:  # a bug here must not end signal handling for the life of the process
                log.exception("handling signal %d failed", signum)

    def _act(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            if self._reload is None:
                log.info("SIGHUP: no --web-config to reload; nothing else to do")
            else:
                log.info("SIGHUP: reloading the web config")
                self._reload()
            return
        now = time.monotonic()
        if now - self._logged_at.get(signum, -LOG_EVERY_SECONDS) >= LOG_EVERY_SECONDS:
            self._logged_at[signum] = now
            log.info("%s received: ignored (SIGHUP reloads the web config, SIGTERM stops)", name)
