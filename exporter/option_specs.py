"""A command-line flag as plain data, so that a module below the CLI can declare its own flags.

A source declares the flags it reads (exporter/sources/__init__.py's registry collects them) and
the HTTP client declares its one vocabulary (exporter/http_client.py); the commands turn each
spec into an argparse flag with its RIDGELINE_* variable (exporter/commands/options/flags.py,
add_spec), and the value parsers they share. Standard library only.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class OptionError(ValueError):
    """Flags that do not go together, or a value no parser could check; the message names the
    flag (the CLI prints it as one line, exit 2)."""


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One flag: what argparse needs, and where its value lands (`dest` on the namespace)."""

    flag: str
    help: str
    dest: str
    aliases: tuple[str, ...] = ()
    """Older spellings, kept working: --help marks them deprecated, and using one warns."""
    type: Callable[[str], Any] | None = None
    default: Any = None
    metavar: str | None = None
    choices: tuple[Any, ...] | None = None
    action: str | None = None
    """None (store a value), "store_true" or "append"."""
    replaced_by: str | None = None
    """For a deprecated flag that is no alias of one new flag: what to use instead."""

    def argparse_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of add_argument (and of commands/options/flags.py's add_flag)."""
        kwargs: dict[str, Any] = {"dest": self.dest, "default": self.default}
        if self.action is not None:
            kwargs["action"] = self.action
        if self.type is not None:
            kwargs["type"] = self.type
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        if self.choices is not None:
            kwargs["choices"] = self.choices
        return kwargs


# -- value parsers (argparse `type=`) -------------------------------------------------------


def parse_speed(text: str) -> float | None:
    """--speed: a positive multiplier, or "max" (None: as fast as possible)."""
    word = str(text).strip().lower()
    if word == "max":
        return None
    try:
        value = float(word)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'max', got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number or 'max', got {text!r}")
    return value


def _finite_number(text: str, accept: Callable[[float], bool], expected: str) -> float:
    """A flag value that must parse as a finite float and pass `accept`; else a usage error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not (math.isfinite(value) and accept(value)):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    return _finite_number(text, lambda v: v > 0, "a positive number of seconds")


def non_negative_seconds(text: str) -> float:
    return _finite_number(text, lambda v: v >= 0, "a number of seconds >= 0")


def positive_int(text: str) -> int:
    word = str(text).strip()
    if not (word.isascii() and word.isdigit()) or int(word) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(word)


def unit_ratio(text: str) -> float:
    return _finite_number(text, lambda v: 0 < v <= 1, "a ratio in (0, 1]")
