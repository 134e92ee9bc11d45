"""What the commands share: the user-error type, flags that also read RIDGELINE_* variables, the
flag value parsers, and the source flags of `serve` and `record`.

Commands import this module and never each other (docs/design.md, "CLI"), so one definition of
each flag serves every command that takes it.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporter.http_client import HTTPClientConfig
from exporter.option_specs import OptionSpec
from exporter.sources import SOURCE_NAMES
from exporter.sources.base import REPLAY_FORMATS, MigProfileHint, SourceOptions

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


# -- flag value parsers ---------------------------------------------------------------------


def parse_speed(text: str) -> float | None:
    """--speed: a positive multiplier, or "max" (None: as fast as possible)."""
    word = str(text).strip().lower()
    if word == "max":
        return None
    try:
        value = float(word)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'max', got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number or 'max', got {text!r}")
    return value


def _finite_number(text: str, accept: Callable[[float], bool], expected: str) -> float:
    """A flag value that must parse as a finite float and pass `accept`; else a usage error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not (math.isfinite(value) and accept(value)):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    return _finite_number(text, lambda v: v > 0, "a positive number of seconds")


def non_negative_seconds(text: str) -> float:
    return _finite_number(text, lambda v: v >= 0, "a number of seconds >= 0")


def positive_int(text: str) -> int:
    word = str(text).strip()
    if not (word.isascii() and word.isdigit()) or int(word) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(word)


def unit_ratio(text: str) -> float:
    return _finite_number(text, lambda v: 0 < v <= 1, "a ratio in (0, 1]")


def gpu_list(text: str) -> tuple[int, ...]:
    try:
        indexes = tuple(int(part) for part in str(text).split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU indexes like 0,1,3, got {text!r}") from None
    if not indexes or any(i < 0 for i in indexes):
        raise argparse.ArgumentTypeError(f"expected GPU indexes like 0,1,3, got {text!r}")
    return indexes


def mig_profiles(text: str) -> tuple[MigProfileHint, ...]:
    """--mig-profile: comma-separated [GPU:]GI=PROFILE, e.g. 1=3g.40gb,0:2=2g.20gb."""
    hints: list[MigProfileHint] = []
    expected = "[GPU:]GI=PROFILE pairs like 1=3g.40gb,0:2=2g.20gb"
    for item in str(text).split(","):
        if not item.strip():
            continue
        where, equals, profile = item.strip().partition("=")
        gpu_text, colon, instance_text = where.strip().rpartition(":")
        profile = profile.strip()
        indexes = [instance_text, gpu_text] if colon else [instance_text]
        if (
            not equals
            or not all(t.strip().isascii() and t.strip().isdigit() and len(t.strip()) <= 5 for t in indexes)
            or not profile
            or not profile.isascii()
            or not all(c.isalnum() or c in ".+_-" for c in profile)
            or len(profile) > 64
        ):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {item.strip()!r}")
        hints.append(
            MigProfileHint(
                gpu_instance=int(instance_text),
                profile=profile,
                gpu=int(gpu_text) if colon else None,
            )
        )
    if not hints:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return tuple(hints)


# -- the source flags of serve and record --------------------------------------------------


def add_source_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that choose and configure a source; shared by `serve` and `record`."""
    add_flag(
        parser,
        "--source",
        choices=SOURCE_NAMES,
        default=None,
        help="where samples come from (default: replay when --replay is given, else auto: dcgm, then nvml)",
    )
    add_replay_flags(parser)
    add_flag(
        parser,
        "--speed",
        type=parse_speed,
        default=1.0,
        metavar="N|max",
        help="replay speed multiplier or max",
    )
    add_flag(parser, "--loop", action="store_true", default=False, help="replay the file over and over")
    add_flag(
        parser,
        "--scrape-url",
        metavar="URL",
        help="dcgm-exporter /metrics URL for --source scrape (user:password@ allowed; shown redacted)",
    )
    add_flag(
        parser,
        "--scrape-timeout",
        type=positive_seconds,
        default=5.0,
        metavar="S",
        help="one deadline for a whole scrape: lookup, connect, TLS, headers and body (default 5)",
    )
    for spec in scrape_client_flags():
        add_spec(parser, spec)
    add_flag(
        parser, "--dcgm-address", metavar="HOST:PORT", help="remote DCGM host engine (default: embedded)"
    )
    add_flag(parser, "--dcgm-bindings", metavar="DIR", help="directory holding DCGM's Python bindings")
    add_flag(parser, "--gpus", type=gpu_list, metavar="0,1,...", help="sample only these GPU indexes")


def scrape_client_flags() -> tuple[OptionSpec, ...]:
    """The scrape source's HTTP client flags (--scrape.*), and the older --scrape-auth-file."""
    from exporter.http_client import client_flags

    renamed = {"bearer-token-file": ("--scrape-bearer-token-file",)}
    older = OptionSpec(
        flag="--scrape-auth-file",
        dest="scrape_auth_file",
        metavar="PATH",
        help="file whose first line is user:password, for basic auth to the scraped exporter",
        replaced_by="--scrape.basic-auth.username and --scrape.basic-auth.password-file",
    )
    return (*client_flags("scrape", "the scraped exporter", renamed), older)


def scrape_client_config(args: argparse.Namespace) -> HTTPClientConfig:
    """The scrape source's HTTPClientConfig from its flags; UserError names a bad one."""
    from exporter.http_client import ClientConfigError, config_from

    try:
        config = config_from(args, "scrape")
        if args.scrape_auth_file:
            config = replace(config, basic_auth_file=Path(args.scrape_auth_file))
            config.check()
    except ClientConfigError as exc:
        raise UserError(str(exc)) from None
    return config


def add_replay_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that name and read a replay file: part of the source flags, and all of them
    that `report --replay` takes."""
    add_flag(
        parser, "--replay", metavar="PATH|demo", help="replay a recorded file, or the bundled demo trace"
    )
    add_flag(
        parser,
        "--replay-format",
        choices=REPLAY_FORMATS,
        help="format of the --replay file (detected from its content when omitted)",
    )
    add_flag(
        parser, "--model", metavar="NAME", help="NVML model name, for replay formats that lack it (dmon)"
    )
    add_flag(
        parser,
        "--interval",
        type=positive_seconds,
        default=1.0,
        metavar="S",
        help="seconds between samples of a live source (default 1); dmon/CSV sample spacing",
    )
    add_flag(
        parser,
        "--mig-profile",
        type=mig_profiles,
        default=(),
        metavar="[GPU:]GI=PROFILE,...",
        help="MIG profile of GPU instances the input does not name (dcgmi dmon), e.g. 1=3g.40gb,0:2=2g.20gb;"
        " GPU: also names the instance's parent GPU",
    )


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
    """(source name, SourceOptions) from the shared source flags."""
    name: str | None = args.source
    if name is None:
        name = "replay" if args.replay else "auto"
    if name == "replay" and not args.replay:
        raise UserError("--source replay needs --replay PATH (or --replay demo)")
    if name == "scrape" and not args.scrape_url:
        raise UserError("--source scrape needs --scrape-url URL (a dcgm-exporter /metrics page)")
    if args.replay and name != "replay":
        raise UserError(f"--replay is only used with --source replay, not --source {name}")
    options = SourceOptions(
        interval_seconds=args.interval,
        replay=args.replay,
        replay_format=args.replay_format,
        model=args.model,
        speed=args.speed,
        loop=bool(args.loop),
        scrape_url=args.scrape_url,
        scrape_timeout_seconds=args.scrape_timeout,
        scrape_client=scrape_client_config(args) if name == "scrape" else HTTPClientConfig(),
        dcgm_address=args.dcgm_address,
        dcgm_bindings=Path(args.dcgm_bindings) if args.dcgm_bindings else None,
        gpus=args.gpus,
        mig_profiles=args.mig_profile,
    )
    return name, options


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
        "collectors", "metric families to export (all on by default; docs/rules-and-dashboards.md, "
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
            series = f"{spec.per_gpu} series per GPU" if spec.per_gpu else "per node"
            group.add_argument(
                f"--collector.{name}",
                dest=f"collector_{name}",
                action=argparse.BooleanOptionalAction,
                default=default,
                help=f"{spec.summary} ({series}) [env {variable}]",
            )


def collector_choice(args: argparse.Namespace) -> frozenset[str]:
    """The enabled collectors from the flags add_collector_flags defined."""
    from exporter.collectors import BY_NAME, collectors_from_flags

    choices = {name: getattr(args, f"collector_{name}", None) for name in BY_NAME}
    return collectors_from_flags(
        choices, disable_defaults=bool(getattr(args, "collector_disable_defaults", False))
    )
