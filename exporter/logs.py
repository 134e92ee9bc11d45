"""One log format for every line the process writes: Ridgeline's, uvicorn's and asyncio's.

`setup_logging` puts a single handler on the root logger; uvicorn runs with `log_config=None`
(exporter/web/server.py) so its loggers propagate here instead of installing their own
formatters. Two formats:

* text: ``2026-01-31T12:00:00.123Z INFO exporter.serve: serving on ...`` — one line per record;
* json: one object per line, keyed as Go's log/slog JSONHandler writes them (`time`, `level`,
  `msg`; the format Prometheus's own promslog emits) plus `logger`, so the same log pipeline
  parses Ridgeline and the Prometheus components beside it.

A record's message never spans lines: newlines inside it are escaped in text, and a traceback
(only ever a bug, never a client's fault: docs/daemon.md, "Logs") goes into `exc` in JSON and
is indented under its line in text.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

LOG_FORMATS: tuple[str, ...] = ("text", "json")
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warning", "error")


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 UTC with milliseconds: sortable, and the same in both formats."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER: MESSAGE`` on one line; a traceback indented below it."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage().replace("\r", "\\r").replace("\n", "\\n")
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {message}"
        if record.exc_info:
            trace = self.formatException(record.exc_info)
            line += "\n" + "\n".join("    " + part for part in trace.splitlines())
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg (+ exc for a traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def formatter_for(log_format: str) -> logging.Formatter:
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    return JsonFormatter() if log_format == "json" else TextFormatter()


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is at the time of the record (not the one at set-up), so a
    caller that swaps stderr — a test harness capturing it — never leaves a closed stream here."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def setup_logging(level: str = "info", log_format: str = "text", stream: TextIO | None = None) -> None:
    """Route every logger through one handler in `log_format` at `level` (stderr by default).

    A handler an earlier call installed is replaced, so calling it twice does not print twice;
    handlers uvicorn installs on its own loggers are removed so nothing is printed in a second
    format. Handlers others put on the root logger (a test harness's) are left alone.
    """
    handler: logging.Handler = _StderrHandler() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(formatter_for(log_format))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "asyncio"):
        named = logging.getLogger(name)
        named.handlers = []
        named.propagate = True
        named.setLevel(logging.NOTSET)


_HANDLER_NAME = "ridgeline"
