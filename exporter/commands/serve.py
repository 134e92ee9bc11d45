"""`ridgeline serve`: the daemon — a sampler thread, an in-memory state and one HTTP app.

This module only wires things: it parses flags, binds the listening socket and opens the source
once in the foreground (so a port in use, a privileged port, a missing replay file, a wrong
format, an unknown --model or "no GPU source" fails at start-up with one line and exit 2, before
anything says "serving on"), then hands the open source to the sampler and serves the app
through exporter/web/server.py (connection cap, request deadline, bounded shutdown).
The source flags are shared with `ridgeline record` (exporter/commands/options/sources.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from exporter.commands.options.collectors import add_collector_flags, collector_choice
from exporter.commands.options.errors import UserError
from exporter.commands.options.flags import add_flag
from exporter.commands.options.inference import add_inference_flags, inference_config
from exporter.commands.options.listen import add_listen_flags, parse_listen
from exporter.commands.options.renames import deprecated_variables
from exporter.commands.options.sources import add_source_flags, source_choice
from exporter.option_specs import positive_int, positive_seconds

log = logging.getLogger("exporter.serve")

# -- flags ----------------------------------------------------------------------------------


HPC_JOB_MAPPING_DIR_ENV = "DCGM_HPC_JOB_MAPPING_DIR"
"""dcgm-exporter's variable for the same directory: a node set up for it needs no new setting."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run the exporter daemon (Prometheus /metrics, /classify, /readyz)",
        description="Sample GPU profiling counters, place each GPU on its roofline, serve the verdicts.",
        epilog="Each flag also reads RIDGELINE_SERVE_<FLAG> (named below); the names every command "
        "once shared, RIDGELINE_<FLAG> (RIDGELINE_LISTEN, RIDGELINE_WEB_CONFIG for the two renamed "
        "flags), still work for serve, deprecated: it logs a warning naming the new ones.",
    )
    add_source_flags(parser)
    add_listen_flags(parser)
    add_inference_flags(parser)
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
        help="dcgm-exporter's HPC job mapping directory (files <gpu> and <gpu>.<instance> listing "
        "job ids, written by a Slurm prolog): adds an hpc_job label; dcgm-exporter's "
        f"{HPC_JOB_MAPPING_DIR_ENV} when neither this flag nor its variable is set",
    )
    add_flag(
        parser,
        "--access-log",
        action="store_true",
        default=False,
        help="log every HTTP request (off by default: Prometheus scrapes would fill the log)",
    )
    add_flag(
        parser,
        "--max-connections",
        type=positive_int,
        default=1024,
        metavar="N",
        help="open HTTP connections at most (lowered to fit the open-file limit); past it, the ones "
        "that sent no request are closed, longest waiting first, once they have had their turn",
    )
    add_flag(
        parser,
        "--request-timeout",
        type=positive_seconds,
        default=5.0,
        metavar="S",
        help="seconds a client has to send a whole request (TLS handshake, head, body)",
    )
    add_flag(
        parser,
        "--shutdown-timeout",
        type=positive_seconds,
        default=3.0,
        metavar="S",
        help="on SIGTERM, seconds to wait for requests in flight",
    )
    add_collector_flags(parser)
    parser.set_defaults(func=run)


# -- run ------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Open everything that can fail because of the user first, then serve until signalled."""
    old_variables = deprecated_variables()
    if old_variables:
        log.warning(
            "deprecated environment variables (every command once read them): %s",
            ", ".join(f"{old} (now {new})" for old, new in old_variables),
        )
    host, port = parse_listen(args.listen)  # a typo here costs no import below

    from exporter.catalog import load_catalog
    from exporter.sources import open_source
    from exporter.web.server import (
        ConnectionGuard,
        ConnectionLimits,
        ListenError,
        accept_backlog,
        bind_listener,
        build_server,
        connection_cap,
        hello_room,
        probation_room,
        raise_open_file_limit,
        serve,
    )

    catalog = load_catalog(args.cards)
    if args.model:
        from exporter.catalog import UnknownCard

        try:
            catalog.lookup(args.model)  # a typo fails here with near matches, not as card="unknown"
        except UnknownCard as exc:
            raise UserError(f"--model: {exc}") from None
    config = inference_config(args)
    thresholds = config.thresholds
    watcher = None
    if args.web_config:
        from exporter.web.webconfig import WebConfigError, load_web_config
        from exporter.web.webconfig_watch import WebConfigWatcher

        try:
            watcher = WebConfigWatcher(args.web_config, load_web_config(args.web_config))
        except WebConfigError as exc:
            raise UserError(str(exc)) from None

    collectors = collector_choice(args)
    limits = ConnectionLimits(
        max_connections=args.max_connections,
        request_timeout=args.request_timeout,
        shutdown_timeout=args.shutdown_timeout,
    )
    open_files = raise_open_file_limit()
    cap, backlog = connection_cap(limits.max_connections, open_files), accept_backlog(open_files)
    if cap < limits.max_connections:
        log.warning(
            "--max-connections %d lowered to %d: the open-file limit is %d",
            limits.max_connections,
            cap,
            open_files,
        )
    try:
        listener = bind_listener(host, port, backlog)
    except ListenError as exc:
        raise UserError(f"--web.listen-address {args.listen}: {exc}") from None

    try:
        name, options = source_choice(args)
        source = open_source(name, options)  # SourceError: one line, exit 2
    except BaseException:
        listener.close()
        raise
    # FastAPI and the sampler only now: a mistake above ends without paying for their imports
    from exporter.sampler import Sampler
    from exporter.view.trails import Trails
    from exporter.web.answers import SnapshotAnswers
    from exporter.web.app import AUTH_EXEMPT, create_app
    from exporter.web.live_routes import build_live_router
    from exporter.web.view_routes import view_router

    enrichers, attribution_threads = _start_enrichers(args)
    trails = Trails()  # the live page's trails: fed as snapshots are published, not per scrape
    servers: list[Any] = []  # the HTTP server, once built: a sampler that dies stops it

    def stop_serving(_error: BaseException) -> None:
        for server in servers:
            server.should_exit = True

    sampler = Sampler(
        name,
        options,
        catalog,
        config,
        source=source,
        enrichers=enrichers,
        observers=(trails.observe,),
        on_failure=stop_serving,
    )
    try:
        # a reader's request wakes the sampler to fold what came since (it never waits for it)
        answers = SnapshotAnswers()  # one worker and one per-snapshot memo for every route
        live_router = build_live_router(sampler.current, collectors=collectors, answers=answers)
        live_router.include_router(view_router(sampler.current, catalog, trails.current, answers=answers))
        app: Any = create_app(
            catalog,
            live_router=live_router,
            precision_default=args.precision or "bf16",
            thresholds=thresholds,
        )
        guard = ConnectionGuard(
            limits,
            cap=cap,
            backlog=backlog,
            tls_context=watcher.tls_context if watcher is not None else None,
            overflow=probation_room(cap, open_files),
            hellos=hello_room(cap, open_files),
        )
        if watcher is not None:
            from exporter.web.webconfig import BasicAuthMiddleware

            # Installed whenever there is a web config: a reload may add users. Probes carry no
            # credentials: /healthz and /readyz say only "alive" and "ready".
            app = BasicAuthMiddleware(
                app,
                watcher,
                exempt_paths=AUTH_EXEMPT,
                on_refusal=lambda message: guard.faults.note("auth_flood", message),
                hold_refusals=lambda: len(guard.open) < guard.cap * 3 // 4,
            )
            watcher.start()
        servers.append(build_server(app, guard, access_log=bool(args.access_log)))
        sampler.start()
        log.info(
            "serving on %s:%d (source %s, interval %g s)%s%s",
            host,
            listener.getsockname()[1],  # the kernel's pick for --listen HOST:0
            source.name,
            args.interval,
            ", TLS" if watcher is not None and watcher.tls else "",
            _collectors_note(collectors),
        )
        # uvicorn handles SIGTERM itself, then re-raises it once it has shut down; a no-op handler
        # here turns that into a normal return, so the sampler and attribution threads are stopped below
        # and the exit status is 0.
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
        desk = SignalDesk(watcher.request_reload if watcher is not None else None)
        desk.install()  # SIGHUP reloads the web config; the other fatal-by-default ones are logged
        try:
            started = serve(servers[0], listener, guard)
        finally:
            desk.restore()
            signal.signal(signal.SIGTERM, previous)
        if not started:
            raise UserError(f"could not serve on {args.listen} (see the log above)")
    finally:
        listener.close()
        if watcher is not None:
            watcher.stop()
        sampler.stop(timeout=args.shutdown_timeout)
        for thread in attribution_threads:
            thread.stop()
    if sampler.failure is not None:
        log.error(
            "exiting 1: the sampler failed (%s), so that the supervisor restarts serve", sampler.failure
        )
        return 1
    return 0


def _collectors_note(collectors: frozenset[str]) -> str:
    from exporter.collectors import DEFAULT_COLLECTORS

    off = sorted(DEFAULT_COLLECTORS - collectors)
    return f", collectors off: {', '.join(off)}" if off else ""


def _start_enrichers(args: argparse.Namespace) -> tuple[tuple[Any, ...], list[Any]]:
    """The sampler's enrichers (the kubelet's pods, then Slurm's jobs, each only when configured)
    and the attribution threads started for them, to stop on the way out."""
    from exporter.attribution.hpc import start_job_map
    from exporter.sampling.enrichers import build_enrichers

    attributor = _start_attributor(args.kubelet_socket)
    job_map = start_job_map(args.hpc_job_mapping_dir or os.environ.get(HPC_JOB_MAPPING_DIR_ENV))
    threads = [t for t in (attributor, job_map) if t is not None]
    return build_enrichers(attributor, job_map), threads


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
    from exporter.attribution.kubelet import PodAttributor

    attributor = PodAttributor(socket_path)
    attributor.start()
    log.info("pod attribution from %s", socket_path)
    return attributor


# -- signals --------------------------------------------------------------------------------
# What `ridgeline serve` does with the signals whose default would kill it without a word.
#
# SIGTERM and SIGINT stop it gracefully (uvicorn's handlers, `run` above). SIGHUP
# reloads the web config, as it does for Prometheus and its exporters and as systemd's
# `ExecReload=/bin/kill -HUP $MAINPID` expects. SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
# SIGIO and SIGPWR mean nothing to Ridgeline: each is logged (once a minute per signal) and
# otherwise ignored, so a stray `kill -USR1` (log rotation scripts send it) is visible and harmless.
# SIGQUIT keeps its default (quit with a core dump: the deliberate "stop now"); SIGPIPE and SIGXFSZ
# are already ignored by Python.
#
# A handler runs between two bytecodes of the main thread, which is serving HTTP; it only queues
# the signal number (`queue.SimpleQueue` is safe there) and one daemon thread does the rest.

IGNORED = tuple(
    getattr(signal, name)
    for name in ("SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPWR")
    if hasattr(signal, name)
)
"""Signals whose default action is to terminate and that Ridgeline gives no meaning."""
LOG_EVERY_SECONDS = 60.0


class SignalDesk:
    """Installs the handlers; a thread reloads on SIGHUP and logs the ignored ones."""

    def __init__(self, reload: Callable[[], None] | None) -> None:
        self._reload = reload
        self._inbox: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._previous: dict[int, object] = {}
        self._logged_at: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, name="ridgeline-signals", daemon=True)

    def install(self) -> None:
        """Call from the main thread (Python delivers signals there only)."""
        self._thread.start()
        for signum in (signal.SIGHUP, *IGNORED):
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous.clear()
        self._inbox.put(None)
        self._thread.join(timeout=5)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._inbox.put(signum)

    def _run(self) -> None:
        while (signum := self._inbox.get()) is not None:
            try:
                self._act(signum)
            except Exception:  # a bug here must not end signal handling for the life of the process
                log.exception("handling signal %d failed", signum)

    def _act(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            if self._reload is None:
                log.info("SIGHUP: no --web-config to reload; nothing else to do")
            else:
                log.info("SIGHUP: reloading the web config")
                self._reload()
            return
        now = time.monotonic()
        if now - self._logged_at.get(signum, -LOG_EVERY_SECONDS) >= LOG_EVERY_SECONDS:
            self._logged_at[signum] = now
            log.info("%s received: ignored (SIGHUP reloads the web config, SIGTERM stops)", name)
