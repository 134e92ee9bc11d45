"""`ridgeline top`: every GPU of one or more nodes in a terminal, from their GET /classify.

Interactive by default (exporter/top/tui.py, on Textual): refreshes every --interval, sorts
(`s`, `r`, or a click on a header), colours the regime, and draws the highlighted node's
roofline in text. `--once` prints one plain table and exits, for scripts and pipes: no escape
codes unless stdout is a terminal, and a reader that goes away early (`| head`) ends it quietly.
A node that does not answer is reported (on stderr with --once, exit status 1) and never
crashes the view.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from exporter.commands.extras import require_extra
from exporter.commands.options.errors import UserError
from exporter.commands.options.flags import add_flag, add_spec
from exporter.commands.options.output import reader_left
from exporter.option_specs import positive_seconds

DEFAULT_URL = "http://127.0.0.1:10295"


def register(subparsers: Any) -> None:
    from exporter.top.sort_keys import SORT_KEYS

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "top",
        help="watch the GPUs of one or more nodes in the terminal (a client of their /classify)",
        description="Polls GET /classify of each --url and shows every GPU: regime, activity, "
        "intensity against the ridge, efficiency, the lever, and a text roofline.",
    )
    add_flag(
        parser,
        "--url",
        action="append",
        default=[],
        metavar="URL",
        help=f"a node's exporter, e.g. http://gpu-node-1:10295 (repeat for more; default {DEFAULT_URL}); "
        "user:password@ in the URL is used for basic auth",
    )
    add_flag(
        parser, "--interval", type=positive_seconds, default=2.0, metavar="S", help="seconds between polls"
    )
    add_flag(parser, "--sort", choices=list(SORT_KEYS), default="node", help="initial sort order")
    add_flag(parser, "--once", action="store_true", default=False, help="print one plain table and exit")
    add_flag(parser, "--timeout", type=positive_seconds, default=3.0, metavar="S", help="seconds per request")
    for spec in node_client_flags():
        add_spec(parser, spec)
    parser.set_defaults(func=run)


def node_client_flags() -> tuple[Any, ...]:
    """The HTTP client flags towards the nodes (--node.*); top's older names are aliases."""
    from exporter.http_client import NODE_FLAGS, client_flags

    renamed = {
        "basic-auth.username": ("--user",),
        "basic-auth.password-file": ("--password-file",),
        "tls.ca-file": ("--ca-file",),
        "tls.cert-file": ("--cert",),
        "tls.key-file": ("--key",),
        "tls.insecure-skip-verify": ("--insecure",),
    }
    return client_flags(NODE_FLAGS, "the nodes", renamed)


def clients_for(args: argparse.Namespace) -> list[Any]:
    from exporter.http_client import ClientConfigError, config_from
    from exporter.top.client import CLIENT_PREFIX, ClientSetupError, NodeClient

    try:
        client = config_from(args, CLIENT_PREFIX)
    except ClientConfigError as exc:
        raise UserError(str(exc)) from None
    urls = list(dict.fromkeys(args.url or [DEFAULT_URL]))
    try:
        return [NodeClient(url, client=client, timeout=args.timeout) for url in urls]
    except ClientSetupError as exc:
        raise UserError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    clients = clients_for(args)
    if args.once:
        return print_once(clients, args.sort)
    require_extra("top", "textual", "the interactive view")
    if not sys.stdout.isatty():
        raise UserError("the interactive view needs a terminal; use --once for a pipe or a file")
    from exporter.top.tui import TopApp

    TopApp(clients, interval=args.interval, sort=args.sort).run()
    return 0


def use_colour(stream: Any) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (no-color.org)."""
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def print_once(clients: list[Any], sort: str) -> int:
    """One table of every answering node's GPUs on stdout; each silent node one line on stderr."""
    from exporter.top.client import fetch_all
    from exporter.top.table import plain_table, rows_of, sort_rows

    readings = fetch_all(clients)
    rows = sort_rows(rows_of(readings), sort)
    lines = plain_table(rows, with_node=len(clients) > 1, colour=use_colour(sys.stdout))
    failed = [r for r in readings if not r.answered]
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")  # a Latin-1 terminal gets "?" for "—", not a crash
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        reader_left()
    for reading in failed:
        print(f"ridgeline top: {reading.name}: {reading.trouble}", file=sys.stderr)
    return 1 if failed else 0
