"""One log format for every line the process writes: Ridgeline's, uvicorn's and asyncio's.

`setup_logging` puts a single handler on the root logger, in logfmt or json (the keys of Go's
log/slog, as Prometheus's own components write them); a record never spans lines, a traceback
goes into `exc` (docs/daemon.md, "Logs").
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

LOG_FORMATS: tuple[str, ...] = ("logfmt", "json")
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warn", "error")
"""The Prometheus exporters' --log.level and --log.format words (promslog)."""


def log_level_word(text: str) -> str:
    """A --log.level value: warning (the word Ridgeline used) is warn."""
    word = str(text).strip().lower()
    return "warn" if word == "warning" else word


def log_format_word(text: str) -> str:
    """A --log.format value: text (Ridgeline's old name for its line format) is logfmt."""
    word = str(text).strip().lower()
    return "logfmt" if word == "text" else word


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 UTC with milliseconds: sortable, and the same in both formats."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


def _logfmt_value(value: str) -> str:
    """A logfmt value, quoted (Go's strconv.Quote escapes) when bare would not parse back: empty,
    or holding a space, '=', '"' or a control character."""
    if value and not any(c in ' ="\\' or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    escaped = "".join(c if ord(c) >= 0x20 and ord(c) != 0x7F else f"\\u{ord(c):04x}" for c in escaped)
    return f'"{escaped}"'


class LogfmtFormatter(logging.Formatter):
    """``time=... level=INFO logger=exporter.serve msg="serving on ..."``: one line per record,
    the keys of the JSON format; a traceback goes in ``exc``, escaped onto the same line."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = [
            ("time", _timestamp(record)),
            ("level", record.levelname),
            ("logger", record.name),
            ("msg", record.getMessage()),
        ]
        if record.exc_info:
            pairs.append(("exc", self.formatException(record.exc_info)))
        return " ".join(f"{key}={_logfmt_value(value)}" for key, value in pairs)


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
    log_format = log_format_word(log_format)
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    return JsonFormatter() if log_format == "json" else LogfmtFormatter()


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


def setup_logging(level: str = "info", log_format: str = "logfmt", stream: TextIO | None = None) -> None:
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
    root.setLevel(getattr(logging, log_level_word(level).upper()))  # logging.WARN is WARNING
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "asyncio"):
        named = logging.getLogger(name)
        named.handlers = []
        named.propagate = True
        named.setLevel(logging.NOTSET)


_HANDLER_NAME = "ridgeline"
