"""The source flags of `serve` and `record` (each source declares its own: exporter/sources/
options.py), the replay part `report --replay` takes, and the source and settings they choose
(through the registry alone)."""

from __future__ import annotations

import argparse

from exporter.commands.options.errors import UserError
from exporter.commands.options.flags import add_flag, add_spec
from exporter.option_specs import OptionError
from exporter.sources.base import SourceOptions


def add_source_flags(parser: argparse.ArgumentParser) -> None:
    """--source and the flags every registered source declares (exporter/sources/options.py);
    shared by `serve` and `record`."""
    from exporter.sources import option_specs, source_names

    add_flag(
        parser,
        "--source",
        choices=source_names(),
        default=None,
        help="where samples come from (default: replay when --replay is given, else auto: dcgm, then nvml)",
    )
    for spec in option_specs():
        add_spec(parser, spec)


def add_replay_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that name and read a replay file, all of the source flags that `report
    --replay` takes."""
    from exporter.sources.options import INTERVAL, MIG_PROFILE
    from exporter.sources.replay import FILE_OPTIONS

    for spec in (*FILE_OPTIONS, INTERVAL, MIG_PROFILE):
        add_spec(parser, spec)


def source_choice(args: argparse.Namespace) -> tuple[str, SourceOptions]:
    """(source name, SourceOptions) from the source flags; UserError names a wrong one."""
    name: str = args.source or ("replay" if args.replay else "auto")
    return name, _options(name, args)


def replay_choice(args: argparse.Namespace) -> SourceOptions:
    """The replay's SourceOptions from add_replay_flags' flags (`report --replay`), through the
    registry as `serve` builds them; the flags it does not take read as their defaults."""
    return _options("replay", args)


def _options(name: str, args: argparse.Namespace) -> SourceOptions:
    from exporter.sources import source_options

    try:
        return source_options(name, args)
    except OptionError as exc:
        raise UserError(str(exc)) from None
