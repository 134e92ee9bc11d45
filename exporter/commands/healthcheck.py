"""`ridgeline healthcheck`: the image's HEALTHCHECK, GET /healthz of the `serve` running beside it.

It finds serve in /proc and resolves serve's listen address and web config from that process's
argv and environment with serve's own flags, so it finds serve wherever it listens
(docs/deployment.md); RIDGELINE_HEALTHCHECK_URL overrides it. Exit 0 on 200, else 1 and a line.
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from exporter.commands.options.flags import add_flag
from exporter.commands.options.listen import add_listen_flags, parse_listen

PROC = Path("/proc")
URL_VARIABLE = "RIDGELINE_HEALTHCHECK_URL"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "healthcheck",
        help="exit 0 when the local `serve` answers /healthz (the image's HEALTHCHECK)",
        description="Finds the running `ridgeline serve`, resolves its --listen and --web-config as it "
        "did, and fetches /healthz over loopback.",
    )
    add_flag(
        parser,
        "--timeout",
        type=float,
        default=4.0,
        metavar="S",
        help="seconds to wait for the answer (the Dockerfile's HEALTHCHECK allows 5)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        url = os.environ.get(URL_VARIABLE, "").strip() or healthz_url()
    except LookupError as exc:
        print(f"ridgeline healthcheck: {exc}", file=sys.stderr)
        return 1
    context = ssl._create_unverified_context()  # loopback liveness: any certificate will do
    try:
        with urllib.request.urlopen(url, timeout=args.timeout, context=context) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        status = exc.code
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"ridgeline healthcheck: {url}: {reason}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"ridgeline healthcheck: {url} answered HTTP {status}", file=sys.stderr)
        return 1
    return 0


# -- finding serve and its address ------------------------------------------------------------


def serve_argv(cmdline: Sequence[str]) -> list[str] | None:
    """The ridgeline arguments of a process running `ridgeline ... serve ...`, else None.

    A console script runs as `python /venv/bin/ridgeline serve ...`, `python -m exporter serve`
    as itself; the arguments after the program are returned.
    """
    for i, arg in enumerate(cmdline):
        if os.path.basename(arg) == "ridgeline":
            rest = list(cmdline[i + 1 :])
            break
        if arg == "-m" and i + 1 < len(cmdline) and cmdline[i + 1] in ("exporter", "exporter.cli"):
            rest = list(cmdline[i + 2 :])
            break
    else:
        return None
    return rest if "serve" in rest else None


def _processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, argv) of every readable process, PID 1 first."""
    pids = sorted(int(p.name) for p in PROC.iterdir() if p.name.isdigit())
    own = os.getpid()
    for pid in sorted(pids, key=lambda p: p != 1):
        if pid == own:
            continue
        try:
            raw = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            yield pid, [part.decode("utf-8", "replace") for part in raw.rstrip(b"\0").split(b"\0")]


def _environment(pid: int) -> dict[str, str] | None:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def _working_directory(pid: int) -> str:
    try:
        return os.readlink(PROC / str(pid) / "cwd")
    except OSError:
        return os.getcwd()


def healthz_url() -> str:
    """The /healthz URL of the local serve; LookupError (with the reason) when there is none."""
    for pid, cmdline in _processes():
        argv = serve_argv(cmdline)
        if argv is not None:
            return url_for(argv, _environment(pid), _working_directory(pid))
    raise LookupError(f"no `ridgeline serve` process found in {PROC}")


def url_for(argv: Sequence[str], environment: dict[str, str] | None, cwd: str) -> str:
    """Parse serve's --listen and --web-config (serve's own flag definitions, so RIDGELINE_*
    defaults resolve as they did for serve) under its environment, and build the URL."""
    saved = dict(os.environ)
    if environment is not None:
        os.environ.clear()
        os.environ.update(environment)
    try:
        parser = argparse.ArgumentParser(prog="ridgeline serve", add_help=False, exit_on_error=False)
        add_listen_flags(parser)
        args, _ = parser.parse_known_args(list(argv))
    except (SystemExit, argparse.ArgumentError):
        raise LookupError(f"cannot parse the serve command line {' '.join(argv)!r}") from None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    host, port = parse_listen(args.listen)
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    scheme = "https" if _serves_tls(args.web_config, cwd) else "http"
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{scheme}://{netloc}/healthz"


def _serves_tls(web_config: str | None, cwd: str) -> bool:
    if not web_config:
        return False
    import yaml

    path = Path(cwd, web_config)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise LookupError(f"cannot read serve's --web-config {path}: {exc}") from None
    return isinstance(document, dict) and bool(document.get("tls_server_config"))
