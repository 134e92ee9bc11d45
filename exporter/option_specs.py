"""A command-line flag as plain data, so that a module below the CLI can declare its own flags.

A source declares the flags it reads (exporter/sources/__init__.py's registry collects them) and
the HTTP client declares its one vocabulary (exporter/http_client.py); the commands turn each
spec into an argparse flag with its RIDGELINE_* variable (exporter/commands/options.py,
add_spec). Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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
        """The keyword arguments of add_argument (and of commands/options.py's add_flag)."""
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
