"""`ridgeline`: the command line. It parses flags and hands off to one command module each.

Any error a user can cause (a bad flag, an unknown card, a missing file, a source that is not
there) ends in one line on stderr and exit status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from exporter import __version__
from exporter.commands.options import UserError, add_log_flags
from exporter.logs import JsonFormatter, setup_logging
from exporter.redaction import redact_credentials

COMMANDS: tuple[str, ...] = ("serve", "top", "classify", "record", "report", "cards", "healthcheck")
"""Subcommand modules under exporter/commands/, in the order `--help` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ridgeline",
        description="Places each GPU on its card's roofline and tells Prometheus which wall it hits.",
    )
    parser.add_argument("--version", action="version", version=f"ridgeline {__version__}")
    add_log_flags(parser, top=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        module = importlib.import_module(f"exporter.commands.{name}")
        module.register(subparsers)
    for command in subparsers.choices.values():
        add_log_flags(command, top=False)
    return parser


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the input was wrong": reported in one line, exit 2."""
    from exporter.catalog import CatalogError, UnknownCard, UnknownPrecision
    from exporter.roofline import RooflineInputError
    from exporter.sources.base import SourceError

    return (UserError, CatalogError, UnknownCard, UnknownPrecision, RooflineInputError, SourceError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        status: int = args.func(args)
    except user_error_types() as exc:
        message = f"ridgeline {args.command}: error: {redact_credentials(str(exc))}"
        if args.log_format == "json":  # the log pipeline parses every line of stderr as JSON
            message = JsonFormatter().format(
                logging.makeLogRecord({"msg": message, "levelname": "ERROR", "name": "ridgeline"})
            )
        print(message, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
