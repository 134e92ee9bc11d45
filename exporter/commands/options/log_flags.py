"""--log.level and --log.format, on the top-level parser and again on every command."""

from __future__ import annotations

import argparse
from typing import Any

from exporter.commands.options.flags import add_flag


def add_log_flags(parser: argparse.ArgumentParser | Any, *, top: bool) -> None:
    """--log.level and --log.format (the Prometheus exporters' names; --log-level and
    --log-format still work), on the top-level parser (with their RIDGELINE_LOG_* defaults)
    and again on every command, so `ridgeline serve --log.level debug` works as well as
    `ridgeline --log.level debug serve`. On a command they default to SUPPRESS: a command that
    is not given the flag keeps the top-level value instead of overwriting it."""
    from exporter.logs import LOG_FORMATS, LOG_LEVELS, log_format_word, log_level_word

    level_help = "log verbosity (warning: the same as warn)"
    format_help = "logfmt (key=value, one line per record) or json (one object per line); text: logfmt"
    if top:
        add_flag(parser, "--log.level", "--log-level", default="info", type=log_level_word,
                 choices=LOG_LEVELS, help=level_help)  # fmt: skip
        add_flag(parser, "--log.format", "--log-format", default="logfmt", type=log_format_word,
                 choices=LOG_FORMATS, help=format_help)  # fmt: skip
        return

    def notes(default: str, variable: str, old: str) -> str:
        return f"[default {default}, or as given before the command; env {variable}; deprecated: {old}]"

    level = f"{level_help} {notes('info', 'RIDGELINE_LOG_LEVEL', '--log-level')}"
    shape = f"{format_help} {notes('logfmt', 'RIDGELINE_LOG_FORMAT', '--log-format')}"
    parser.add_argument(
        "--log.level", "--log-level", dest="log_level", type=log_level_word, choices=LOG_LEVELS,
        default=argparse.SUPPRESS, help=level,
    )  # fmt: skip
    parser.add_argument(
        "--log.format", "--log-format", dest="log_format", type=log_format_word, choices=LOG_FORMATS,
        default=argparse.SUPPRESS, help=shape,
    )  # fmt: skip
