"""Client faults and overload, logged once per kind per minute — never once per socket.

`EveryMinute` writes the first event of a kind at once, counts the rest, and writes one summary
line when the minute is over. `ClientFaultFilter` routes the lines uvicorn and asyncio would
write per connection for a client's fault (an invalid request, an unsupported upgrade, a failed
TLS handshake, accept() out of file descriptors) through it, as one short line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_SECONDS = 60.0

log = logging.getLogger("exporter.web")


@dataclass
class _Kind:
    logged_at: float
    suppressed: int = 0
    last_message: str = ""
    timer: threading.Timer | None = None


class EveryMinute:
    """At most one line per kind per `window` seconds, plus one summary of what it held back."""

    def __init__(
        self,
        logger: logging.Logger = log,
        window: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._window = window
        self._clock = clock
        self._kinds: dict[str, _Kind] = {}
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        """Every event noted, per kind, since start (for tests and the benchmark)."""

    def note(self, kind: str, message: str, level: int = logging.WARNING) -> None:
        now = self._clock()
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            state = self._kinds.get(kind)
            if state is not None and now - state.logged_at < self._window:
                state.suppressed += 1
                state.last_message = message
                if state.timer is None:
                    delay = max(0.0, self._window - (now - state.logged_at))
                    state.timer = threading.Timer(delay, self._summarise, args=(kind, level, state))
                    state.timer.daemon = True
                    state.timer.start()
                return
            held = None
            if state is not None and state.suppressed:
                # the window is over but its timer has not fired yet: summarise here, or the
                # events it held would be lost when the new window replaces them
                if state.timer is not None:
                    state.timer.cancel()
                held = (state.suppressed, state.last_message)
            self._kinds[kind] = _Kind(logged_at=now)
        if held is not None:
            self._log_summary(kind, level, *held)
        self._logger.log(level, "%s (further %s events summarised once a minute)", message, kind)

    def _summarise(self, kind: str, level: int, scheduled_for: _Kind) -> None:
        with self._lock:
            state = self._kinds.get(kind)
            if state is not scheduled_for or state.suppressed == 0:
                return  # summarised already by a note() that came after the window
            count, message = state.suppressed, state.last_message
            self._kinds[kind] = _Kind(logged_at=self._clock())
        self._log_summary(kind, level, count, message)

    def _log_summary(self, kind: str, level: int, count: int, message: str) -> None:
        self._logger.log(
            level, "%s events: %d more in the last %.0f s, the latest: %s", kind, count, self._window, message
        )

    def close(self) -> None:
        """Cancel pending summaries (a server that stopped has nothing more to say)."""
        with self._lock:
            for state in self._kinds.values():
                if state.timer is not None:
                    state.timer.cancel()


_UVICORN_FAULTS: tuple[tuple[str, str, str], ...] = (
    ("Invalid HTTP request received.", "invalid_http", "a client sent an invalid HTTP request; answered 400"),
    ("Unsupported upgrade request.", "upgrade", "a client asked for a protocol upgrade; not offered"),
    ("No supported WebSocket library detected", "upgrade", "a client asked for a WebSocket; not offered"),
)
_ASYNCIO_FAULTS: tuple[tuple[str, str, str], ...] = (
    (
        "socket.accept() out of system resource",
        "accept_failed",
        "accept() failed: out of file descriptors; new connections wait in the kernel's queue",
    ),
    ("SSL handshake failed", "tls_handshake", "a client's TLS handshake failed"),
)


class ClientFaultFilter(logging.Filter):
    """Drops uvicorn's and asyncio's per-connection lines for client faults and notes them instead.

    Attached to the `uvicorn.error` and `asyncio` loggers by exporter/web/server.py while it
    serves. Lines that are not a client's fault pass untouched (a bug still logs its traceback).
    """

    def __init__(self, faults: EveryMinute) -> None:
        super().__init__()
        self._faults = faults

    def filter(self, record: logging.LogRecord) -> bool:
        table = _ASYNCIO_FAULTS if record.name == "asyncio" else _UVICORN_FAULTS
        message = str(record.msg)
        for prefix, kind, text in table:
            if message.startswith(prefix):
                self._faults.note(kind, text)
                return False
        if record.name == "uvicorn.error" and message.startswith("Exception in ASGI application"):
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None and type(exc).__name__ == "CancelledError":
                # The graceful-shutdown timeout cancelled a request the client had not finished.
                self._faults.note("cancelled_at_shutdown", "cancelled an unfinished request at shutdown")
                return False
        return True
