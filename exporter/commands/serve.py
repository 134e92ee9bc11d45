"""`ridgeline serve`: the daemon — a sampler thread, an in-memory state and one HTTP app.

This module only wires things: it parses flags, opens the source once in the foreground (so a
missing replay file, a wrong format, an unknown --model or "no GPU source" fails at start-up
with one line and exit 2), then hands the open source to the sampler and runs uvicorn.
The source flags are shared with `ridgeline record` through `add_source_flags`.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
from collections.abc import Callable
from typing import Any

from exporter.commands.options import add_flag
from exporter.roofline import PRECISIONS, Thresholds

log = logging.getLogger("exporter.serve")

DEFAULT_LISTEN = ":10295"
"""All interfaces, port 10295 (DESIGN.md: 9100-9999 is allocated; 295 is the H100's ridge)."""


# -- flag parsing helpers -------------------------------------------------------------------


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


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT or :PORT (all interfaces) -> (host, port)."""
    from exporter.cli import UserError

    raw = text.strip()
    host, sep, port_text = raw.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UserError(f"--listen {text!r}: expected HOST:PORT or :PORT, e.g. :10295 or 127.0.0.1:10295")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host or "0.0.0.0"), int(port_text)


# -- flags ----------------------------------------------------------------------------------


def add_source_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that choose and configure a source; shared by `serve` and `record`."""
    from exporter.sources import SOURCE_NAMES

    add_flag(
        parser,
        "--source",
        choices=SOURCE_NAMES,
        default=None,
        help="where samples come from (default: replay when --replay is given, else auto: dcgm, then nvml)",
    )
    add_flag(
        parser, "--replay", metavar="PATH|demo", help="replay a recorded file, or the bundled demo trace"
    )
    add_flag(
        parser,
        "--replay-format",
        choices=("jsonl", "csv", "dmon"),
        help="format of the --replay file (detected from its content when omitted)",
    )
    add_flag(
        parser, "--model", metavar="NAME", help="NVML model name, for replay formats that lack it (dmon)"
    )
    add_flag(
        parser,
        "--speed",
        type=parse_speed,
        default=1.0,
        metavar="N|max",
        help="replay speed multiplier or max",
    )
    add_flag(parser, "--loop", action="store_true", default=False, help="replay the file over and over")
    add_flag(parser, "--scrape-url", metavar="URL", help="dcgm-exporter /metrics URL for --source scrape")
    add_flag(
        parser,
        "--interval",
        type=positive_seconds,
        default=1.0,
        metavar="S",
        help="seconds between samples of a live source (default 1)",
    )
    add_flag(
        parser, "--dcgm-address", metavar="HOST:PORT", help="remote DCGM host engine (default: embedded)"
    )
    add_flag(parser, "--dcgm-bindings", metavar="DIR", help="directory holding DCGM's Python bindings")
    add_flag(parser, "--gpus", type=gpu_list, metavar="0,1,...", help="sample only these GPU indexes")


def source_choice(args: argparse.Namespace) -> tuple[str, Any]:
    """(source name, SourceOptions) from the shared source flags."""
    from pathlib import Path

    from exporter.cli import UserError
    from exporter.sources import SourceOptions

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
        dcgm_address=args.dcgm_address,
        dcgm_bindings=Path(args.dcgm_bindings) if args.dcgm_bindings else None,
        gpus=args.gpus,
    )
    return name, options


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run the exporter daemon (Prometheus /metrics, /classify, /readyz)",
        description="Sample GPU profiling counters, place each GPU on its roofline, serve the verdicts.",
    )
    add_source_flags(parser)
    add_flag(parser, "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="address to serve on")
    add_flag(parser, "--cards", action="append", default=[], metavar="FILE", help="extra card catalog file")
    add_flag(
        parser,
        "--precision",
        choices=PRECISIONS,
        help="precision of the roof (default: the dominant tensor pipe when reported, else bf16)",
    )
    add_flag(parser, "--web-config", metavar="FILE", help="exporter-toolkit web config (TLS, basic auth)")
    add_flag(
        parser,
        "--kubelet-socket",
        default="/var/lib/kubelet/pod-resources/kubelet.sock",
        metavar="PATH",
        help="kubelet PodResources socket; pod attribution is on when it exists",
    )
    add_flag(
        parser,
        "--hpc-job-mapping-dir",
        metavar="DIR",
        help="dcgm-exporter's HPC job mapping directory (one file per GPU index listing its job ids, "
        "written by a Slurm prolog): adds an hpc_job label",
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
    add_flag(
        parser,
        "--access-log",
        action="store_true",
        default=False,
        help="log every HTTP request (off by default: Prometheus scrapes would fill the log)",
    )
    parser.set_defaults(func=run)


# -- run ------------------------------------------------------------------------------------


def _log_level(args: argparse.Namespace) -> str:
    return str(getattr(args, "log_level", "info") or "info").lower()


def run(args: argparse.Namespace) -> int:
    """Open everything that can fail because of the user first, then serve until signalled."""
    import uvicorn

    from exporter.catalog import load_catalog
    from exporter.cli import UserError
    from exporter.inference import InferenceConfig
    from exporter.sampler import Sampler
    from exporter.sources import open_source
    from exporter.web.app import create_app
    from exporter.web.live_routes import build_live_router

    host, port = parse_listen(args.listen)
    catalog = load_catalog(args.cards)
    if args.model:
        from exporter.catalog import UnknownCard

        try:
            catalog.lookup(args.model)  # a typo fails here with near matches, not as card="unknown"
        except UnknownCard as exc:
            raise UserError(f"--model: {exc}") from None
    thresholds = Thresholds(theta=args.theta, dram_wall=args.dram_wall, tensor_wall=args.tensor_wall)
    config = InferenceConfig(
        precision=args.precision,
        smoothing_seconds=args.smoothing_seconds,
        dwell_seconds=args.dwell_seconds,
        thresholds=thresholds,
        expected_interval_seconds=args.interval,
    )
    ssl_kwargs: dict[str, Any] = {}
    web_config = None
    if args.web_config:
        from exporter.webconfig import WebConfigError, load_web_config

        try:
            web_config = load_web_config(args.web_config)
        except WebConfigError as exc:
            raise UserError(str(exc)) from None
        ssl_kwargs = web_config.uvicorn_ssl_kwargs()

    name, options = source_choice(args)
    source = open_source(name, options)  # SourceError: one line, exit 2
    attributor = _start_attributor(args.kubelet_socket)
    from exporter.attribution.hpc import start_job_map

    job_map = start_job_map(args.hpc_job_mapping_dir)
    sampler = Sampler(
        name, options, catalog, config, source=source, attributor=attributor, job_mapper=job_map
    )
    try:
        app: Any = create_app(
            catalog,
            live_router=build_live_router(lambda: sampler.snapshot),
            precision_default=args.precision or "bf16",
            thresholds=thresholds,
        )
        if web_config is not None and web_config.basic_auth_users:
            from exporter.webconfig import BasicAuthMiddleware

            # Probes carry no credentials: /healthz and /readyz say only "alive" and "ready".
            app = BasicAuthMiddleware(
                app, web_config.basic_auth_users, exempt_paths=frozenset({"/healthz", "/readyz"})
            )
        sampler.start()
        log.info(
            "serving on %s:%d (source %s, interval %g s)%s",
            host,
            port,
            source.name,
            args.interval,
            ", TLS" if ssl_kwargs else "",
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level=_log_level(args),
                access_log=bool(args.access_log),
                lifespan="off",
                **ssl_kwargs,
            )
        )
        # uvicorn handles SIGTERM itself, then re-raises it once it has shut down; a no-op handler
        # here turns that into a normal return, so the sampler and attributor are stopped below
        # and the exit status is 0.
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
        try:
            server.run()
        finally:
            signal.signal(signal.SIGTERM, previous)
        if not server.started:
            raise UserError(f"could not listen on {args.listen} (see the log above: address in use?)")
    finally:
        sampler.stop()
        if attributor is not None:
            attributor.stop()
        if job_map is not None:
            job_map.stop()
    return 0


def _start_attributor(socket_path: str | None) -> Any:
    """A running PodAttributor when the kubelet socket (or its directory) exists, else None.

    A missing socket in an existing directory is a kubelet that is restarting: the attributor
    starts anyway and connects once the socket is back, instead of staying off until the next
    restart of Ridgeline.
    """
    if not socket_path or not os.path.isdir(os.path.dirname(os.path.abspath(socket_path))):
        log.debug("kubelet socket %s not found; pod attribution off", socket_path)
        return None
    if os.path.exists(socket_path) and not os.access(socket_path, os.W_OK):
        # Connecting to a unix socket needs write permission; the kubelet's is root-only.
        log.warning(
            "kubelet socket %s is not writable by uid %d; pod attribution from the kubelet is off "
            "(pod labels still come from dcgm-exporter or the replay file; see docs/deployment.md)",
            socket_path,
            os.getuid(),
        )
        return None
    from exporter.attribution import PodAttributor

    attributor = PodAttributor(socket_path)
    attributor.start()
    log.info("pod attribution from %s", socket_path)
    return attributor
