"""`ridgeline record`: copy a source's samples into a JSON Lines file that `serve --replay` plays.

The source flags are `ridgeline serve`'s (one definition: exporter/commands/options/sources.py).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import FrameType
from typing import Any

from exporter.commands.options.errors import UserError
from exporter.commands.options.flags import add_flag
from exporter.commands.options.sources import add_source_flags, source_choice
from exporter.option_specs import positive_seconds

log = logging.getLogger("exporter.record")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "record",
        help="record a source to a replay file (JSON Lines; .gz compresses)",
        description="Record samples from any source into a Ridgeline JSON Lines replay file.",
    )
    add_source_flags(parser)
    add_flag(parser, "--out", required=False, metavar="FILE", help="output file (.jsonl or .jsonl.gz)")
    add_flag(
        parser,
        "--duration",
        type=positive_seconds,
        metavar="S",
        help="stop after this many seconds (default: until Ctrl-C, SIGTERM or the end of a replay)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from exporter.recorder import RecordError, record
    from exporter.sources import open_source

    if not args.out:
        raise UserError("--out FILE is required (where to write the recording)")
    name, options = source_choice(args)
    source = open_source(name, options)
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if source.paced:
            # wakes a replay read that is pacing; a live source may be inside a library call on
            # this very thread (the handler runs between bytecodes), so it is closed below instead
            source.close()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        written = record(source, args.out, args.duration, options.interval_seconds, stop)
    except RecordError as exc:
        raise UserError(str(exc)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        source.close()
    log.info("recorded %d samples from %s into %s", written, source.name, args.out)
    return 0
