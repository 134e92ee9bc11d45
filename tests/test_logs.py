"""One log format (exporter/logs.py): one record per line in logfmt and in JSON, uvicorn's included."""

from __future__ import annotations

import io
import json
import logging
import re
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


LOGFMT_PAIR = re.compile(r'([^\s=]+)=("(?:[^"\\]|\\.)*"|[^\s"=]*)(?:\s+|$)')


def parse_logfmt(line: str) -> dict[str, str]:
    """A logfmt line as go-logfmt's decoder reads it: key=value pairs, a quoted value with Go
    string escapes. Fails on anything else (a stray word, an unbalanced quote)."""
    pairs: dict[str, str] = {}
    position = 0
    while position < len(line):
        match = LOGFMT_PAIR.match(line, position)
        assert match, f"not logfmt at {position}: {line[position:]!r}"
        key, value = match.groups()
        pairs[key] = json.loads(value) if value.startswith('"') else value
        position = match.end()
    return pairs


def test_logfmt_is_one_line_of_key_value_pairs_per_record(restore_root: None) -> None:
    lines = emit("logfmt")
    assert len(lines) == 3  # the traceback is escaped onto its record's line
    records = [parse_logfmt(line) for line in lines]
    assert [set(r) for r in records] == [{"time", "level", "logger", "msg"}] * 2 + [
        {"time", "level", "logger", "msg", "exc"}
    ]
    assert records[0]["msg"] == "Started server process [7]" and records[0]["level"] == "INFO"
    assert records[1]["msg"] == "two\nlines" and records[1]["logger"] == "exporter.serve"
    assert lines[1].split(" level=")[0].startswith("time=2") and lines[0].endswith(
        'msg="Started server process [7]"'
    )
    assert "ValueError: a bug" in records[2]["exc"] and records[2]["exc"].count("\n") >= 3
    assert not any("hidden" in line for line in lines)


@pytest.mark.parametrize(
    "value", ["plain", "", "a b", "k=v", 'say "hi"', "back\\slash", "tab\tand\x01", "é ✓"]
)
def test_every_logfmt_value_parses_back_to_itself(restore_root: None, value: str) -> None:
    stream = io.StringIO()
    setup_logging("info", "logfmt", stream=stream)
    logging.getLogger("exporter.test").info("%s", value)
    assert parse_logfmt(stream.getvalue().rstrip("\n"))["msg"] == value


def test_the_old_words_text_and_warning_still_work(restore_root: None) -> None:
    assert [parse_logfmt(line)["level"] for line in emit("text")] == ["INFO", "WARNING", "ERROR"]
    stream = io.StringIO()
    setup_logging("warning", "logfmt", stream=stream)
    logging.getLogger("exporter.test").info("hidden at warn")
    logging.getLogger("exporter.test").warning("shown")
    assert "hidden" not in stream.getvalue() and "shown" in stream.getvalue()


def test_json_is_one_object_per_line(restore_root: None) -> None:
    records = [json.loads(line) for line in emit("json")]
    assert [r["logger"] for r in records] == ["uvicorn.error", "exporter.serve", "exporter.sampler"]
    assert records[1]["msg"] == "two\nlines" and records[1]["level"] == "WARNING"
    assert "ValueError: a bug" in records[2]["exc"]
    assert records[0]["time"].endswith("Z")
