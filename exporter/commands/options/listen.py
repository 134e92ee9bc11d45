"""Where serve listens: its flags and their parser (the healthcheck re-reads them to find it)."""

from __future__ import annotations

import argparse

from exporter.commands.options.errors import UserError
from exporter.commands.options.flags import add_flag

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
