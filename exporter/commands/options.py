"""Flags that also read from RIDGELINE_* environment variables, as DESIGN.md asks of every flag."""

from __future__ import annotations

import argparse
import os
from typing import Any

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


def env_name(flag: str) -> str:
    """--scrape-url -> RIDGELINE_SCRAPE_URL."""
    return "RIDGELINE_" + flag.lstrip("-").replace("-", "_").upper()


def add_flag(parser: argparse.ArgumentParser | Any, flag: str, *, help: str, **kwargs: Any) -> None:
    """add_argument whose default comes from RIDGELINE_<FLAG> when that variable is set.

    The help text names the variable, so `--help` documents both spellings. Boolean flags
    (action="store_true") accept 1/true/yes/on and 0/false/no/off. An empty variable counts as
    unset (as kingpin-based exporters treat it). argparse checks `choices` only on the command
    line, so a variable's value is checked against them here.
    """
    variable = env_name(flag)
    raw = os.environ.get(variable)
    if raw is not None and raw.strip():
        choices = kwargs.get("choices")
        if choices is not None and raw not in choices:
            parser.error(f"{variable}={raw!r}: expected one of {', '.join(map(str, choices))}")
        if kwargs.get("action") == "store_true":
            word = raw.strip().lower()
            if word not in TRUE_WORDS | FALSE_WORDS:
                parser.error(f"{variable}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")
            kwargs["default"] = word in TRUE_WORDS
        elif kwargs.get("action") == "append" or kwargs.get("nargs") in ("*", "+"):
            kwargs["default"] = [item for item in raw.split(",") if item]
        else:
            kwargs["default"] = raw
    parser.add_argument(flag, help=f"{help} [env {variable}]", **kwargs)
