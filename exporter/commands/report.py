"""`ridgeline report`: where a range's GPU-hours went, as HTML (--out) and JSON (--json).

This module only wires: it parses flags, asks one input for the usage (exporter/report/
prometheus.py over a query API, or exporter/report/replay.py over a trace), builds the document
(exporter/report/model.py) and writes it (exporter/report/render.py). The replay flags are the
source flags' replay part and `serve`'s inference flags (exporter/commands/options/).
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporter.commands.extras import require_extra
from exporter.commands.options.errors import UserError
from exporter.commands.options.flags import add_flag, add_spec
from exporter.commands.options.inference import add_inference_flags, inference_config
from exporter.commands.options.sources import add_replay_flags, replay_choice

if TYPE_CHECKING:
    from exporter.catalog import Catalog
    from exporter.inference import InferenceConfig
    from exporter.report.model import Collected

log = logging.getLogger("exporter.report")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}

DEFAULT_BY = ("namespace",)
"""--by's default: a fleet without pods (Slurm only) lacks it, and gets one ungrouped group."""


def parse_duration(text: str) -> float:
    """A Prometheus duration: 7d, 90m, 1h30m, 1w, 45s (a bare number is seconds)."""
    raw = str(text).strip()
    try:
        value = float(raw)
    except ValueError:
        pass
    else:
        if math.isfinite(value) and value > 0:
            return value
        raise argparse.ArgumentTypeError(f"expected a positive duration like 7d or 90m, got {text!r}")
    pos, total = 0, 0.0
    for match in _DURATION.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or total <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration like 7d, 12h, 90m or 1h30m, got {text!r}")
    return total


def parse_time(text: str) -> float:
    """RFC 3339 / ISO 8601 (UTC unless it says otherwise), epoch seconds, or now."""
    raw = str(text).strip()
    if raw.lower() == "now":
        return time.time()
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a time like 2026-11-30T00:00:00Z, epoch seconds or now, got {text!r}"
        ) from None
    if parsed.tzinfo is None:
        from datetime import UTC

        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def parse_labels(text: str) -> tuple[str, ...]:
    labels = tuple(part.strip() for part in str(text).split(",") if part.strip())
    if not labels:
        raise argparse.ArgumentTypeError(
            f"expected label names like namespace or namespace,pod, got {text!r}"
        )
    return labels


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="a fleet report over a range: GPU-hours by regime, the roofline, what the levers save",
        description=(
            "Where the GPU-hours went, which wall each group hit and an upper bound of what each "
            "lever would give back: from a Prometheus-compatible query API (--prometheus) or one "
            "recorded trace (--replay). Writes HTML (--out) and JSON (--json); docs/report.md."
        ),
    )
    add_flag(
        parser,
        "--prometheus",
        metavar="URL",
        help="query API base URL (Prometheus, Thanos, Mimir, VictoriaMetrics)",
    )
    add_flag(
        parser,
        "--since",
        type=parse_duration,
        metavar="DURATION",
        help="the range: this long up to --end (default 7d)",
    )
    add_flag(
        parser,
        "--start",
        type=parse_time,
        metavar="TIME",
        help="the range's start (RFC 3339 or epoch seconds)",
    )
    add_flag(parser, "--end", type=parse_time, metavar="TIME", help="the range's end (default: now)")
    add_flag(
        parser,
        "--by",
        type=parse_labels,
        default=DEFAULT_BY,
        metavar="LABEL[,LABEL]",
        help="group by these labels: namespace (default), pod, card, node, hpc_job or any label",
    )
    add_flag(
        parser,
        "--match",
        action="append",
        default=[],
        metavar="MATCHER",
        help='only series matching this PromQL label matcher, e.g. cluster="prod" (repeatable)',
    )
    add_flag(
        parser,
        "--step",
        type=parse_duration,
        metavar="DURATION",
        help="query window (default: sized to the range)",
    )
    add_flag(
        parser,
        "--raw-counters-only",
        action="store_true",
        default=False,
        help="read the raw counters even where recorded series exist",
    )
    for spec in prometheus_client_flags():
        add_spec(parser, spec)
    add_flag(
        parser,
        "--prometheus-header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="extra request header, e.g. X-Scope-OrgID:tenant (repeatable)",
    )
    add_flag(
        parser,
        "--prometheus-timeout",
        type=parse_duration,
        default=120.0,
        metavar="DURATION",
        help="per-query timeout (default 2m)",
    )
    add_replay_flags(parser)
    add_inference_flags(parser)
    add_flag(
        parser, "--top", type=int, default=10, metavar="N", help="workloads in each top list (default 10)"
    )
    add_flag(parser, "--out", metavar="FILE", help="write the HTML report here")
    add_flag(parser, "--json", metavar="FILE", help="write the JSON document here (- for standard output)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from exporter.catalog import load_catalog
    from exporter.report.model import ReportOptions, build_report
    from exporter.report.promql import PromQLInputError, check_label

    if bool(args.prometheus) == bool(args.replay):
        raise UserError("give --prometheus URL (a query API) or --replay FILE (one trace), one of the two")
    if not args.out and not args.json:
        raise UserError("nothing to write: give --out report.html and/or --json report.json")
    if args.top < 1:
        raise UserError(f"--top {args.top}: expected at least 1")
    try:
        by = tuple(check_label(label) for label in args.by)
    except PromQLInputError as exc:
        raise UserError(f"--by: {exc}") from None
    catalog = load_catalog(args.cards)
    config = inference_config(args)
    html_path = _writable(args.out, "--out")
    if html_path is not None:
        require_extra("report", "matplotlib", "--out (the HTML report's charts)")
    json_path = None if args.json in (None, "-") else _writable(args.json, "--json")
    started = time.monotonic()
    collected = _from_prometheus(args, by) if args.prometheus else _from_replay(args, by, catalog, config)
    options = ReportOptions(
        by=by, precision=args.precision or "bf16", thresholds=config.thresholds, top=args.top
    )
    doc = build_report(
        groups=collected.groups,
        fleet=collected.fleet,
        workloads=collected.workloads,
        provenance=collected.provenance,
        catalog=catalog,
        options=options,
    )
    if args.json:
        import json

        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
        if json_path is None:
            sys.stdout.write(text)
        else:
            json_path.write_text(text, encoding="utf-8")
    if html_path is not None:
        from exporter.report.render import render_html

        html_path.write_text(render_html(doc), encoding="utf-8")
    log.info(
        "report over %s to %s by %s: %d groups, %.1f GPU-hours, written in %.1f s",
        doc["range"]["start"],
        doc["range"]["end"],
        ",".join(by),
        len(doc["groups"]),
        doc["fleet"]["gpu_seconds_total"] / 3600.0,
        time.monotonic() - started,
    )
    return 0


def _writable(name: str | None, flag: str) -> Path | None:
    """The output path, checked before any query runs (a typo should not cost a week's queries)."""
    if name is None:
        return None
    path = Path(name)
    if path.is_dir():
        raise UserError(f"{flag} {name}: is a directory")
    if not path.parent.exists():
        raise UserError(f"{flag} {name}: directory {path.parent} does not exist")
    return path


def prometheus_client_flags() -> tuple[Any, ...]:
    """The HTTP client flags towards the query API (--prometheus.*); the older names are aliases."""
    from exporter.http_client import PROMETHEUS_FLAGS, client_flags

    renamed = {
        "basic-auth.username": ("--prometheus-user",),
        "basic-auth.password-file": ("--prometheus-password-file",),
        "bearer-token-file": ("--prometheus-bearer-token-file",),
        "tls.ca-file": ("--prometheus-ca-file",),
        "tls.cert-file": ("--prometheus-cert-file",),
        "tls.key-file": ("--prometheus-key-file",),
        "tls.insecure-skip-verify": ("--prometheus-insecure-skip-verify",),
    }
    return client_flags(PROMETHEUS_FLAGS, "the query API", renamed)


def _from_prometheus(args: argparse.Namespace, by: tuple[str, ...]) -> Collected:
    from exporter.http_client import ClientConfigError, config_from
    from exporter.report import promql
    from exporter.report.prometheus import (
        CLIENT_PREFIX,
        ClientSettings,
        PrometheusClient,
        QueryError,
        collect,
    )

    if args.replay_format or args.model or args.mig_profile:
        raise UserError(
            "--replay-format, --model and --mig-profile read a trace; they do not go with --prometheus"
        )
    end = args.end if args.end is not None else time.time()
    if args.start is not None and args.since is not None:
        raise UserError("give --start or --since, not both")
    start = args.start if args.start is not None else end - (args.since or 7 * 86400.0)
    if start >= end:
        raise UserError("the range is empty: --start must come before --end")
    step: int | None = None
    if args.step is not None:
        step = round(args.step)
        if step < 1 or abs(step - args.step) > 1e-9:
            raise UserError(f"--step: expected whole seconds, got {args.step:g} s")
    try:
        matchers = [promql.parse_matcher(text) for text in args.match]
    except promql.PromQLInputError as exc:
        raise UserError(f"--match: {exc}") from None
    headers: dict[str, str] = {}
    for item in args.prometheus_header:
        name, sep, value = str(item).partition(":")
        if not sep or not name.strip():
            raise UserError(f"--prometheus-header {item!r}: expected NAME:VALUE")
        headers[name.strip()] = value.strip()
    try:
        client_config = config_from(args, CLIENT_PREFIX)
    except ClientConfigError as exc:
        raise UserError(str(exc)) from None
    settings = ClientSettings(
        url=args.prometheus, client=client_config, headers=headers, timeout_seconds=args.prometheus_timeout
    )
    started = time.monotonic()
    try:
        client = PrometheusClient(settings)
        collected = collect(
            client,
            by=by,
            start=start,
            end=end,
            step=step,
            matchers=matchers,
            use_recorded=not args.raw_counters_only,
            require_by=tuple(args.by) != DEFAULT_BY,  # a fleet without pods has no namespace
        )
    except QueryError as exc:
        raise UserError(str(exc)) from None
    log.info("%d queries to %s in %.2f s", collected.queries, client.url, time.monotonic() - started)
    return collected


def _from_replay(
    args: argparse.Namespace, by: tuple[str, ...], catalog: Catalog, config: InferenceConfig
) -> Collected:
    from exporter.catalog import UnknownCard
    from exporter.report.prometheus import workload_labels
    from exporter.report.replay import ReplayReportError, collect_replay

    for flag, value in (
        ("--since", args.since),
        ("--start", args.start),
        ("--end", args.end),
        ("--step", args.step),
    ):
        if value is not None:
            raise UserError(
                f"{flag} selects a range of a query API; a --replay report covers the whole trace"
            )
    if args.match or args.raw_counters_only:
        raise UserError("--match and --raw-counters-only go with --prometheus")
    if args.model:
        try:
            catalog.lookup(args.model)
        except UnknownCard as exc:
            raise UserError(f"--model: {exc}") from None
    try:
        collected = collect_replay(
            replay_choice(args),
            catalog,
            config,
            by=by,
            workload_by=workload_labels(by),
            require_by=by != DEFAULT_BY,  # a trace without pods has no namespace
            progress=lambda n: log.info("%d batches read", n),
        )
    except ReplayReportError as exc:
        raise UserError(str(exc)) from None
    return collected
