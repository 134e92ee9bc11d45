"""add_flag: a command's flag whose default its RIDGELINE_<COMMAND>_<FLAG> variable sets, with
the variable, the default and older spellings named in --help; add_spec for a flag declared as
data below the CLI (exporter/option_specs.py)."""

from __future__ import annotations

import argparse
from typing import Any

from exporter.commands.options.renames import note_renamed
from exporter.commands.options.variables import FALSE_WORDS, TRUE_WORDS, command_of, env_name, variable_value
from exporter.option_specs import OptionSpec


def add_flag(
    parser: argparse.ArgumentParser | Any,
    flag: str,
    *aliases: str,
    help: str,
    replaced_by: str | None = None,
    warn: bool = False,
    **kwargs: Any,
) -> None:
    """add_argument whose default comes from the command's RIDGELINE_<COMMAND>_<FLAG> variable.

    `aliases` are older spellings, kept working ("deprecated" in --help). Boolean flags accept
    1/true/yes/on and 0/false/no/off; an empty variable counts as unset. With `warn`, giving an
    alias (or its variable) logs one warning naming the new name, as does a flag `replaced_by`
    another (--listen and --web-config keep their quiet aliases for older deployments).
    """
    command = command_of(parser)
    variable, raw = variable_value(flag, aliases, command, warn)
    if raw is not None:
        kwargs["default"] = _variable_default(parser, variable, raw, kwargs)
        if replaced_by is not None:
            note_renamed(variable, replaced_by)
    notes = []
    shown = _shown_default(kwargs.get("default"))
    if shown is not None and "default" not in help:
        notes.append(f"default {shown}")
    notes.append(f"env {env_name(flag, command)}")
    if aliases:
        notes.append(f"deprecated: {', '.join(aliases)}")
    if replaced_by is not None:
        notes.append(f"deprecated: use {replaced_by}")
    if aliases and "dest" not in kwargs:
        kwargs["dest"] = aliases[-1].lstrip("-").replace("-", "_").replace(".", "_")
    if (aliases and warn) or replaced_by is not None:
        base = parser._registry_get("action", kwargs.get("action"), kwargs.get("action"))
        kwargs["action"] = _noting(base, flag, replaced_by)
    parser.add_argument(flag, *aliases, help=f"{help} [{'; '.join(notes)}]", **kwargs)


def _variable_default(
    parser: argparse.ArgumentParser | Any, variable: str, raw: str, kwargs: dict[str, Any]
) -> Any:
    """The default a variable's value gives the flag, checked as the command line would be:
    argparse checks `choices` only there, so a variable's value is checked here (after the
    flag's type, which may map an old word to its new one)."""
    choices = kwargs.get("choices")
    if choices is not None:
        convert = kwargs.get("type", str)
        try:
            checked = convert(raw)
        except (argparse.ArgumentTypeError, ValueError):
            checked = None
        if checked not in choices:
            parser.error(f"{variable}={raw!r}: expected one of {', '.join(map(str, choices))}")
    if kwargs.get("action") == "store_true":
        word = raw.strip().lower()
        if word not in TRUE_WORDS | FALSE_WORDS:
            parser.error(f"{variable}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")
        return word in TRUE_WORDS
    if kwargs.get("action") == "append" or kwargs.get("nargs") in ("*", "+"):
        return [item for item in raw.split(",") if item]
    convert = kwargs.get("type")
    if convert is not None:  # else argparse would name the flag, not the variable
        try:
            convert(raw)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            parser.error(f"{variable}={raw!r}: {exc}")
    return raw


def _shown_default(value: Any) -> str | None:
    """A default as --help shows it; None when there is nothing to show."""
    if value is None or value is False or value == argparse.SUPPRESS or value in ([], ()):
        return None
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def _noting(base: type[argparse.Action], flag: str, replaced_by: str | None) -> type[argparse.Action]:
    """`base` (argparse's action class) that notes a deprecated spelling when it is the one given."""

    class Noting(base):  # type: ignore[misc, valid-type]
        def __call__(
            self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
            option_string: str | None = None,
        ) -> None:  # fmt: skip
            if replaced_by is not None:
                note_renamed(flag, replaced_by)
            elif option_string is not None and option_string != flag:
                note_renamed(option_string, flag)
            super().__call__(parser, namespace, values, option_string)

    return Noting


def add_spec(parser: argparse.ArgumentParser | Any, spec: OptionSpec) -> None:
    """A flag that a module below the CLI declared (exporter/option_specs.py), through add_flag;
    its older spellings warn when used."""
    kwargs = spec.argparse_kwargs()
    if kwargs.get("default") is None and spec.action is None:
        del kwargs["default"]
    add_flag(
        parser, spec.flag, *spec.aliases, help=spec.help, replaced_by=spec.replaced_by, warn=True, **kwargs
    )
