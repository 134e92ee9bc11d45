"""`ridgeline`: the command line. It parses flags and hands off to one command module each.

Any error a user can cause (a bad flag, an unknown card, a missing file, a source that is not
there) ends in one line on stderr and exit status 2 — never a traceback, never a screen of usage:
`ridgeline report: error: --since: expected a duration ..., got '7x'`; an unknown flag is named
with the command's nearest one. A reader that leaves early (`ridgeline cards --json | head -1`)
ends the command quietly.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn

from exporter import __version__
from exporter.commands.options.errors import UserError
from exporter.commands.options.log_flags import add_log_flags
from exporter.commands.options.output import reader_left
from exporter.commands.options.renames import tell_renamed
from exporter.logs import JsonFormatter, setup_logging
from exporter.redaction import redact_credentials

COMMANDS: tuple[str, ...] = ("serve", "top", "classify", "record", "report", "cards", "healthcheck")
"""Subcommand modules under exporter/commands/, in the order `--help` lists them."""


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, without breaking lines at hyphens: `--web-config` and a variable's name stay
    whole in --help."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error that names the flag, `PROG: error: --FLAG: MESSAGE`, exit
    2 (argparse's own prints the whole usage first: 22 lines for `report`). Subcommand parsers
    are of this class too (add_subparsers makes them of their parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # "argument --since: ..." -> "--since: ..."; of a flag's spellings, the first (documented) one
        message = re.sub(r"^argument ([^ :/]+)(?:/[^ :]+)?: ", r"\1: ", message)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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


USER_ERRORS: dict[str, tuple[str, ...]] = {
    "exporter.catalog": ("CatalogError", "UnknownCard", "UnknownPrecision"),
    "exporter.roofline": ("RooflineInputError",),
    "exporter.sources.base": ("SourceError",),
}
"""Exceptions that mean "the input was wrong", besides UserError, by the module defining them."""


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the input was wrong": reported in one line, exit 2. Only those of
    modules already loaded (none other can have been raised), so that a mistake found early
    (`--listen nonsense`) does not import the catalog's pydantic to be reported."""
    types: list[type[BaseException]] = [UserError]
    for module_name, names in USER_ERRORS.items():
        module = sys.modules.get(module_name)
        if module is not None:
            types.extend(getattr(module, name) for name in names)
    return tuple(types)


def command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unrecognized(extras: Sequence[str], command: argparse.ArgumentParser) -> str:
    """`unrecognized arguments: --lisen (did you mean --listen?)`, from the command's own flags."""
    known = [option for option in command._option_string_actions if option.startswith("--")]
    words = []
    for extra in extras:
        name = extra.split("=", 1)[0]
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6) if name.startswith("-") else []
        words.append(f"{extra} (did you mean {near[0]}?)" if near else extra)
    plural = "s" if len(extras) > 1 else ""
    return f"unrecognized argument{plural}: {' '.join(words)}; `{command.prog} --help` lists them"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # argparse would name them with the top-level usage; the command's own flags help more
        command_parsers(parser)[args.command].error(
            unrecognized(extras, command_parsers(parser)[args.command])
        )
    setup_logging(args.log_level, args.log_format)
    tell_renamed()
    try:
        status: int = args.func(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
    except BrokenPipeError:
        reader_left()
        return 0
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
