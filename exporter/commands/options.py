"""What the commands share: the user-error type, flags that also read RIDGELINE_* variables
(and flags declared as data, add_spec), and the flag groups of several commands: the source
flags of `serve` and `record` (each source declares its own: exporter/sources/options.py), the
inference flags, where serve listens, the collectors. The value parsers live beside the specs
(exporter/option_specs.py, exporter/sources/options.py) and are importable from here.

Commands import this module and never each other (docs/design.md, "CLI"), so one definition of
each flag serves every command that takes it.
"""

from __future__ import annotations

import argparse
import os
import re
from typing import TYPE_CHECKING, Any

from exporter.option_specs import OptionError, OptionSpec
from exporter.option_specs import non_negative_seconds as non_negative_seconds
from exporter.option_specs import parse_speed as parse_speed
from exporter.option_specs import positive_int as positive_int
from exporter.option_specs import positive_seconds as positive_seconds
from exporter.option_specs import unit_ratio as unit_ratio
from exporter.sources.base import SourceOptions
from exporter.sources.options import gpu_list as gpu_list
from exporter.sources.options import mig_profiles as mig_profiles

if TYPE_CHECKING:
    from exporter.inference import InferenceConfig


class UserError(Exception):
    """An error caused by input; the message is the whole story (no traceback)."""


TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})

LEGACY_VARIABLE_COMMANDS = frozenset({"serve"})
"""Commands that still read the variables every command once shared (RIDGELINE_<FLAG>): earlier
deployment files and existing environment files set them for serve. Deprecated."""

_deprecated_seen: list[tuple[str, str]] = []
_renamed_seen: list[tuple[str, str]] = []
_renamed_told = False


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


def deprecated_variables() -> list[tuple[str, str]]:
    """(old variable, new variable) for each deprecated name that set a flag in this process."""
    return list(_deprecated_seen)


def note_renamed(old: str, new: str) -> None:
    """Note that a deprecated flag or variable was used: one warning per name, logged by
    tell_renamed() once logging is set up (or at once, after it)."""
    if (old, new) in _renamed_seen:
        return
    _renamed_seen.append((old, new))
    if _renamed_told:
        _warn_renamed(old, new)


def tell_renamed() -> None:
    """Log the deprecated names used so far (the CLI calls it once logging is set up)."""
    global _renamed_told
    _renamed_told = True
    for old, new in _renamed_seen:
        _warn_renamed(old, new)


def renamed_names() -> list[tuple[str, str]]:
    """(old name, what replaces it) for each deprecated flag or variable used in this process."""
    return list(_renamed_seen)


def _warn_renamed(old: str, new: str) -> None:
    import logging

    logging.getLogger("ridgeline").warning("%s is deprecated: use %s", old, new)


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


def _variable_value(
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
                if (old, variable) not in _deprecated_seen:
                    _deprecated_seen.append((old, variable))
                return old, raw
    return variable, None


def _shown_default(value: Any) -> str | None:
    """A default as --help shows it; None when there is nothing to show."""
    if value is None or value is False or value == argparse.SUPPRESS or value in ([], ()):
        return None
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


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

    `aliases` are older spellings of the flag, kept working ("deprecated" in --help). The help
    text names the variable and the default, so `--help` documents both. Boolean flags
    (action="store_true") accept 1/true/yes/on and 0/false/no/off. With `warn`, giving an alias
    (or its variable) logs one warning naming the new name (note_renamed), as does a flag that is
    `replaced_by` another (--listen and --web-config keep their quiet aliases: deployments and
    scripts written before the rename use them). An empty variable counts as
    unset (as kingpin-based exporters treat it). argparse checks `choices` only on the command
    line, so a variable's value is checked against them here (after the flag's type, which may
    map an old word to its new one).
    """
    command = command_of(parser)
    variable, raw = _variable_value(flag, aliases, command, warn)
    if raw is not None:
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
            kwargs["default"] = word in TRUE_WORDS
        elif kwargs.get("action") == "append" or kwargs.get("nargs") in ("*", "+"):
            kwargs["default"] = [item for item in raw.split(",") if item]
        else:
            convert = kwargs.get("type")
            if convert is not None:  # else argparse would name the flag, not the variable
                try:
                    convert(raw)
                except (argparse.ArgumentTypeError, ValueError) as exc:
                    parser.error(f"{variable}={raw!r}: {exc}")
            kwargs["default"] = raw
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


def add_spec(parser: argparse.ArgumentParser | Any, spec: OptionSpec) -> None:
    """A flag that a module below the CLI declared (exporter/option_specs.py), through add_flag;
    its older spellings warn when used."""
    kwargs = spec.argparse_kwargs()
    if kwargs.get("default") is None and spec.action is None:
        del kwargs["default"]
    add_flag(
        parser, spec.flag, *spec.aliases, help=spec.help, replaced_by=spec.replaced_by, warn=True, **kwargs
    )


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


# -- the source flags of serve and record --------------------------------------------------


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


# -- the inference flags of serve and report --------------------------------------------------


def add_inference_flags(parser: argparse.ArgumentParser) -> None:
    """The card catalog, the roofs' precision and the inference settings: `serve`'s, which
    `report --replay` runs the same inference with."""
    from exporter.roofline import PRECISIONS, Thresholds

    add_flag(parser, "--cards", action="append", default=[], metavar="FILE", help="extra card catalog file")
    add_flag(
        parser,
        "--precision",
        choices=PRECISIONS,
        help="precision of the roof (default: the dominant tensor pipe when reported, else bf16)",
    )
    add_flag(
        parser,
        "--smoothing-seconds",
        type=non_negative_seconds,
        default=10.0,
        metavar="S",
        help="time constant of the exponential smoothing (0: none)",
    )
    add_flag(
        parser,
        "--dwell-seconds",
        type=non_negative_seconds,
        default=5.0,
        metavar="S",
        help="how long a new regime must hold before the exported regime switches",
    )
    defaults = Thresholds()
    add_flag(
        parser, "--theta", type=unit_ratio, default=defaults.theta, help="how near a wall counts as at it"
    )
    add_flag(
        parser, "--dram-wall", type=unit_ratio, default=defaults.dram_wall, help="practical max DRAM_ACTIVE"
    )
    add_flag(
        parser,
        "--tensor-wall",
        type=unit_ratio,
        default=defaults.tensor_wall,
        help="practical max tensor activity",
    )


def inference_config(args: argparse.Namespace) -> InferenceConfig:
    """The InferenceConfig the inference flags describe."""
    from exporter.inference import InferenceConfig
    from exporter.roofline import Thresholds

    thresholds = Thresholds(theta=args.theta, dram_wall=args.dram_wall, tensor_wall=args.tensor_wall)
    return InferenceConfig(
        precision=args.precision,
        smoothing_seconds=args.smoothing_seconds,
        dwell_seconds=args.dwell_seconds,
        thresholds=thresholds,
        expected_interval_seconds=args.interval,
    )


def source_choice(args: argparse.Namespace) -> tuple[str, SourceOptions]:
    """(source name, SourceOptions) from the source flags; UserError names a wrong one."""
    from exporter.sources import source_options

    name: str = args.source or ("replay" if args.replay else "auto")
    try:
        return name, source_options(name, args)
    except OptionError as exc:
        raise UserError(str(exc)) from None


# -- where serve listens (serve, and the healthcheck that finds it) ---------------------------

DEFAULT_LISTEN = ":10295"
"""All interfaces, port 10295 (docs/design.md, "HTTP API": 9100-9999 is allocated; 295 is the
H100's ridge)."""


def add_listen_flags(parser: argparse.ArgumentParser) -> None:
    """--web.listen-address and --web.config.file (the exporter-toolkit names; --listen and
    --web-config still work): serve takes them, and the healthcheck re-reads them off serve's
    command line to find it."""
    add_flag(parser, "--web.listen-address", "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
             help="address to serve on (:PORT: every interface)")  # fmt: skip
    add_flag(parser, "--web.config.file", "--web-config", metavar="FILE",
             help="exporter-toolkit web config (TLS, basic auth)")  # fmt: skip


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT or :PORT (all interfaces) -> (host, port). Port 0 lets the kernel
    pick a free port (serve logs the one it got): how tests run beside a serve on the default."""
    raw = text.strip()
    host, sep, port_text = raw.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise UserError(
            f"--web.listen-address {text!r}: expected HOST:PORT or :PORT, e.g. :10295 or 127.0.0.1:10295"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host or "0.0.0.0"), int(port_text)


# -- which metric families serve exports (node_exporter's --collector.X / --no-collector.X) ----


def collector_env_name(name: str) -> str:
    """--collector.activity -> RIDGELINE_COLLECTOR_ACTIVITY (a dot is not valid in a variable)."""
    return "RIDGELINE_COLLECTOR_" + name.replace("-", "_").upper()


def add_collector_flags(parser: argparse.ArgumentParser) -> None:
    """--collector.NAME / --no-collector.NAME per collector of exporter/collectors.py, and
    --collector.disable-defaults; each also read from RIDGELINE_COLLECTOR_NAME (1/0, true/false)."""
    from exporter.collectors import COLLECTORS

    group = parser.add_argument_group(
        "collectors", "metric families to export (docs/rules-and-dashboards.md, "
        '"Series budget", says what reads each)',
    )  # fmt: skip
    for spec in (*COLLECTORS, None):
        name = "disable-defaults" if spec is None else spec.name
        variable = collector_env_name(name)
        raw = os.environ.get(variable, "").strip().lower()
        if raw and raw not in TRUE_WORDS | FALSE_WORDS:
            parser.error(f"{variable}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")
        default = (raw in TRUE_WORDS) if raw else None
        if spec is None:
            group.add_argument(
                "--collector.disable-defaults",
                dest="collector_disable_defaults",
                action="store_true",
                default=bool(default),
                help=f"start from no collector; enable each with --collector.NAME [env {variable}]",
            )
        else:
            group.add_argument(
                f"--collector.{name}",
                dest=f"collector_{name}",
                action=argparse.BooleanOptionalAction,
                default=default,
                help=f"{spec.help} [env {variable}]",
            )


def collector_choice(args: argparse.Namespace) -> frozenset[str]:
    """The enabled collectors from the flags add_collector_flags defined."""
    from exporter.collectors import BY_NAME, collectors_from_flags

    choices = {name: getattr(args, f"collector_{name}", None) for name in BY_NAME}
    return collectors_from_flags(
        choices, disable_defaults=bool(getattr(args, "collector_disable_defaults", False))
    )
