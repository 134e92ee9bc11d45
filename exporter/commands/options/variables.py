"""RIDGELINE_* variables: the name a flag's variable has, and the value it is set to (the
command's own, an alias's, or for serve a deprecated shared one)."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from exporter.commands.options.renames import note_renamed, note_shared_variable

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})

LEGACY_VARIABLE_COMMANDS = frozenset({"serve"})
"""Commands that still read the variables every command once shared (RIDGELINE_<FLAG>): earlier
deployment files and existing environment files set them for serve. Deprecated."""


def env_name(flag: str, command: str | None = None) -> str:
    """serve's --scrape-url -> RIDGELINE_SERVE_SCRAPE_URL; the top-level --log.level ->
    RIDGELINE_LOG_LEVEL. Each command has its own variables, so RIDGELINE_TOP_INTERVAL (polling)
    never changes serve's RIDGELINE_SERVE_INTERVAL (sampling)."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", flag.lstrip("-")).upper()
    return f"RIDGELINE_{command.upper()}_{stem}" if command else f"RIDGELINE_{stem}"


def command_of(parser: argparse.ArgumentParser | Any) -> str | None:
    """The subcommand a parser belongs to ("ridgeline serve" -> "serve"); None at the top level."""
    words = str(getattr(parser, "prog", "")).split()
    return words[1] if len(words) == 2 and words[0] == "ridgeline" else None


def variable_value(
    flag: str, aliases: tuple[str, ...], command: str | None, warn: bool = False
) -> tuple[str, str | None]:
    """(the variable's name, its value or None): the command's own variable, else one of the
    aliases' (noted as deprecated), else (for serve) a deprecated shared one, noted for serve to
    warn about."""
    variable = env_name(flag, command)
    raw = os.environ.get(variable)
    if raw is not None and raw.strip():
        return variable, raw
    if command is not None:
        for alias in aliases:
            old = env_name(alias, command)
            raw = os.environ.get(old)
            if raw is not None and raw.strip():
                if warn:
                    note_renamed(old, variable)
                return old, raw
    if command in LEGACY_VARIABLE_COMMANDS:
        for old in [env_name(alias) for alias in aliases] or [env_name(flag)]:
            raw = os.environ.get(old)
            if raw is not None and raw.strip():
                note_shared_variable(old, variable)
                return old, raw
    return variable, None
