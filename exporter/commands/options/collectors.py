"""Which metric families serve exports: node_exporter's --collector.X / --no-collector.X."""

from __future__ import annotations

import argparse
import os

from exporter.commands.options.variables import FALSE_WORDS, TRUE_WORDS


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
