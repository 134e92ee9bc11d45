"""The `ridgeline` subcommands: one module each, registered in exporter/cli.py.

Each module exposes `register(subparsers) -> None` (adds its parser and sets `func`) and its
`run(args) -> int`. Commands only wire things together; the work happens in the layers below.
"""
