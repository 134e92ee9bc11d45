"""One log format (exporter/logs.py): one record per line in text and in JSON, uvicorn's included."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from exporter.logs import setup_logging


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def emit(log_format: str) -> list[str]:
    stream = io.StringIO()
    setup_logging("info", log_format, stream=stream)
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 7)
    logging.getLogger("exporter.serve").warning("two\nlines")
    try:
        raise ValueError("a bug")
    except ValueError:
        logging.getLogger("exporter.sampler").exception("folding failed")
    logging.getLogger("exporter.serve").debug("hidden at info")
    return stream.getvalue().splitlines()


def test_text_is_one_line_per_record_with_tracebacks_indented(restore_root: None) -> None:
    lines = emit("text")
    assert " INFO uvicorn.error: Started server process [7]" in lines[0]
    assert lines[1].endswith("WARNING exporter.serve: two\\nlines")
    assert "ERROR exporter.sampler: folding failed" in lines[2]
    assert all(line.startswith("    ") for line in lines[3:]) and "ValueError: a bug" in lines[-1]
    assert not any("hidden" in line for line in lines)


def test_json_is_one_object_per_line(restore_root: None) -> None:
    records = [json.loads(line) for line in emit("json")]
    assert [r["logger"] for r in records] == ["uvicorn.error", "exporter.serve", "exporter.sampler"]
    assert records[1]["msg"] == "two\nlines" and records[1]["level"] == "WARNING"
    assert "ValueError: a bug" in records[2]["exc"]
    assert records[0]["time"].endswith("Z")
