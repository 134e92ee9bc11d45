"""What a command prints for its answer: the `--json` form or its text, one format for every command;
and how a command ends quietly when its reader leaves early (`| head`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TypeVar

Answer = TypeVar("Answer")


def write_answer(answer: Answer, *, as_json: bool, text: Callable[[Answer], str]) -> None:
    """`answer` on stdout: as JSON (two-space indent, UTF-8 unescaped, never NaN), else `text(answer)`."""
    if as_json:
        json.dump(answer, sys.stdout, indent=2, allow_nan=False, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text(answer))


def reader_left() -> None:
    """After a BrokenPipeError on stdout: the reader left (`| head`) with what it wanted. Point
    stdout at /dev/null so the interpreter's own flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
