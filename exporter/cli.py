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
from exporter.commands.options import UserError

COMMANDS: tuple[str, ...] = ("serve", "top", "classify", "record", "report", "cards", "healthcheck")
"""Subcommand modules under exporter/commands/, in the order `--help` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ridgeline",
        description="Places each GPU on its card's roofline and tells Prometheus which wall it hits.",
    )
    parser.add_argument("--version", action="version", version=f"ridgeline {__version__}")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="log verbosity"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        module = importlib.import_module(f"exporter.commands.{name}")
        module.register(subparsers)
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
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        status: int = args.func(args)
    except user_error_types() as exc:
        print(f"ridgeline {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
