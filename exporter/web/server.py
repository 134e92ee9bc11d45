"""How Ridgeline runs uvicorn against hostile clients: its own listening socket, a connection cap,
a deadline for each request, TLS per connection, and a bounded shutdown.

What uvicorn's own settings do, they do here: `timeout_keep_alive` closes idle keep-alive
connections, `timeout_graceful_shutdown` bounds the wait for open requests at shutdown, `backlog`
sizes the accept queue (from the open-file limit). What they cannot do is done by
`GuardedH11Protocol`, a small subclass of uvicorn's h11 protocol:

* uvicorn has no request-head timeout: a connection that never finishes its head is kept
  forever (the issue's ~20,000 such connections exhausted the file descriptors). Here every
  request must arrive whole (head and body) within `request_timeout` of the connection being
  accepted or of its previous answer; a missing head closes the connection, a missing body
  answers 408.
* `limit_concurrency` counts connections but only answers 503 *after* accepting them: the
  descriptors are spent anyway, and 1,000 held connections would turn every scrape into a 503.
  Here connections are counted from accept, capped below the open-file limit, and at the cap the
  connection that has waited longest without sending a request is closed to make room, so a
  scrape (which sends its request at once) is still served while the cap is full of slow ones.
* uvicorn's TLS is one SSLContext for the life of the process, and the handshake is outside any
  deadline. Here the handshake runs on the accepted connection (`loop.start_tls`) with the
  current context from the web config (reloaded when its files change) and within the same
  request deadline.

* uvicorn's main loop wakes ten times a second for housekeeping that it does once a second (the
  Date header) and to notice a request to stop. On an idle node that was most of Ridgeline's
  CPU: `QuietServer` wakes once a second, and a request to stop (a signal, or `should_exit` set
  from another thread) wakes it at once (docs/daemon.md, "Live budget").

Overload and client faults are logged once per kind per minute (exporter/web/ratelog.py).
`bind_listener` binds the socket before anything says "serving on", so a port in use or a
privileged port is one line and exit 2 (docs/daemon.md, "Connections").
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import resource
import socket
import ssl
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from exporter.web.ratelog import ClientFaultFilter, EveryMinute

log = logging.getLogger("exporter.web")

FD_RESERVE = 64
"""Descriptors kept free of connections: the sampler's source, the kubelet socket, log files."""
MAX_ACCEPT_BACKLOG = 1024
"""The listen() queue at most. asyncio also accepts up to this many connections in one go
before the cap sees them, so it is sized from the open-file limit (`accept_backlog`)."""


class ListenError(Exception):
    """The address cannot be listened on; the message says why in one line."""


@dataclass(frozen=True)
class ConnectionLimits:
    """The knobs `ridgeline serve` exposes as flags (docs/daemon.md, "Connections")."""

    max_connections: int = 1024
    """Open connections at most (lowered to fit the open-file limit)."""
    request_timeout: float = 5.0
    """Seconds a client has to send a whole request (TLS handshake, head and body)."""
    keep_alive_seconds: int = 5
    """uvicorn's timeout_keep_alive: an idle keep-alive connection is closed after this."""
    shutdown_timeout: float = 3.0
    """uvicorn's timeout_graceful_shutdown: the longest shutdown waits for requests in flight."""


# -- file descriptors and the listening socket ----------------------------------------------


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (as the Go runtime does for exporters since
    Go 1.19) and return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return int(soft if soft != resource.RLIM_INFINITY else 1 << 20)


def accept_backlog(open_file_limit: int) -> int:
    """The listen() queue for this open-file limit: a quarter of the descriptors, 16 to 1,024.

    A short queue makes a burst of connections wait (at 64, 1,000 loopback connects took 10 ms
    each here, at 256 and above 0.1 ms), but asyncio accepts a whole queue's worth before the
    cap sees them, so it must fit below the limit too (`connection_cap`)."""
    return max(16, min(MAX_ACCEPT_BACKLOG, (open_file_limit - FD_RESERVE) // 4))


def connection_cap(requested: int, open_file_limit: int) -> int:
    """The cap in force: `requested`, lowered so connections never take the last descriptors.

    Two accept batches are reserved on top of FD_RESERVE: one accepted but not yet counted, and
    one of evicted connections whose sockets close on the next turn of the loop. Without that
    room accept() hits EMFILE, and asyncio then stops accepting for a whole second."""
    room = open_file_limit - FD_RESERVE - 2 * accept_backlog(open_file_limit)
    return max(1, min(requested, room))


def bind_listener(host: str, port: int, backlog: int = MAX_ACCEPT_BACKLOG) -> socket.socket:
    """A bound, listening socket for host:port; ListenError naming the cause otherwise."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen: {host!r} does not resolve ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen: {_why(exc, port)}") from None
    return sock


def _why(exc: OSError, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the port is in use by another process"
    if exc.errno == errno.EACCES and port < 1024:
        return f"port {port} is privileged: it needs root or CAP_NET_BIND_SERVICE; choose a port >= 1024"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "that address is not on this machine"
    return exc.strerror or str(exc)


# -- the connection guard -------------------------------------------------------------------


class ConnectionGuard:
    """Counts open connections from accept, and knows which ones are waiting for a request."""

    def __init__(
        self,
        limits: ConnectionLimits,
        *,
        cap: int | None = None,
        backlog: int = MAX_ACCEPT_BACKLOG,
        tls_context: Callable[[], ssl.SSLContext | None] | None = None,
        faults: EveryMinute | None = None,
    ) -> None:
        self.limits = limits
        self.cap = cap if cap is not None else limits.max_connections
        self.backlog = backlog
        self.tls_context = tls_context or (lambda: None)
        self.faults = faults or EveryMinute()
        self.open: set[GuardedH11Protocol] = set()
        self._waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        """Open connections with no request in flight, oldest wait first: the ones to evict."""

    def admit(self, protocol: GuardedH11Protocol) -> bool:
        """True when the new connection may stay; at the cap the longest waiter is closed for it."""
        if len(self.open) >= self.cap:
            if not self._waiting:
                self.faults.note(
                    "connection_cap",
                    f"{len(self.open)} connections open (the cap, --max-connections): "
                    "refusing new ones until requests finish",
                )
                return False
            victim, _ = self._waiting.popitem(last=False)
            self.faults.note(
                "connection_cap",
                f"{len(self.open)} connections open (the cap, --max-connections): closing the ones "
                "that waited longest without sending a request",
            )
            victim.evict()
        self.open.add(protocol)
        self._waiting[protocol] = None
        return True

    def waiting(self, protocol: GuardedH11Protocol) -> None:
        if protocol in self.open:
            self._waiting[protocol] = None
            self._waiting.move_to_end(protocol)

    def busy(self, protocol: GuardedH11Protocol) -> None:
        self._waiting.pop(protocol, None)

    def release(self, protocol: GuardedH11Protocol) -> None:
        self.open.discard(protocol)
        self._waiting.pop(protocol, None)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline, the connection cap and per-connection TLS.

    Phases: "tls" (handshake), "head" (waiting for a request), "body" (head in, body not yet),
    "app" (the request is whole; the app answers it). The deadline runs in tls/head/body only.
    """

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._phase = "head"
        self._received_while_waiting = 0
        self._answered = 0
        self._early: list[bytes] = []
        self._released = False
        self._handshake_task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if not self.guard.admit(self):
            self._released = True
            transport.abort()
            return
        self._raw = transport
        self._arm()
        context = self.guard.tls_context()
        if context is None:
            self._made(transport)
        else:
            self._phase = "tls"
            # Held here: the loop keeps only a weak reference to a task.
            self._handshake_task = self.loop.create_task(self._handshake(transport, context))

    async def _handshake(self, raw: asyncio.Transport, context: ssl.SSLContext) -> None:
        timeout = max(0.1, self.guard.limits.request_timeout)
        try:
            tls = await self.loop.start_tls(
                raw, self, context, server_side=True, ssl_handshake_timeout=timeout
            )
        except Exception as exc:  # a client that cannot finish a handshake is its own problem
            self.guard.faults.note("tls_handshake", f"a client's TLS handshake failed ({_reason(exc)})")
            tls = None
        if tls is None or tls.is_closing() or self._released:
            self._release()
            raw.close()
            return
        assert isinstance(tls, asyncio.Transport)
        self._made(tls)

    def _made(self, transport: asyncio.Transport) -> None:
        self._phase = "head"
        super().connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            self.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._release()
        if self.transport is None:  # refused, or lost before the handshake finished
            return
        super().connection_lost(exc)

    def evict(self) -> None:
        """Closed by the guard to make room: this connection sent no request in time."""
        self._release()
        transport = self.transport or self._raw
        if transport is not None and not transport.is_closing():
            transport.close()

    def shutdown(self) -> None:
        """At shutdown, a request the client has not finished sending is not waited for."""
        if self._phase in ("head", "body", "tls"):
            self._cancel_timer()
            transport = self.transport or self._raw
            if transport is not None:
                transport.close()
            return
        super().shutdown()

    # -- the request deadline -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.transport is None:  # TLS data that arrived before the handshake's waiter woke us
            self._early.append(data)
            return
        self._received_while_waiting += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        cycle = self.cycle
        if cycle is None:
            return
        if cycle is not before and self._phase == "head":
            self._phase = "body"
            self.guard.busy(self)
        if self._phase == "body" and not cycle.more_body:
            self._phase = "app"
            self._cancel_timer()

    def on_response_complete(self) -> None:
        self._answered += 1
        if self.transport is not None and not self.transport.is_closing():
            self._phase = "head"
            self._received_while_waiting = 0
            self.guard.waiting(self)
            self._arm()
        super().on_response_complete()

    def _arm(self) -> None:
        self._cancel_timer()
        self._timer = self.loop.call_later(self.guard.limits.request_timeout, self._on_deadline)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_deadline(self) -> None:
        self._timer = None
        transport = self.transport or self._raw
        if transport is None or transport.is_closing():
            return
        seconds = f"{self.guard.limits.request_timeout:g}"
        if self._phase == "body" and self.cycle is not None and not self.cycle.response_started:
            self.guard.faults.note(
                "slow_request",
                f"a client sent a request head but not its body within {seconds} s; answered 408",
            )
            self._send_408()
            return
        if self._phase == "head" and self._answered and not self._received_while_waiting:
            transport.close()  # an idle keep-alive connection: nothing to report
            return
        self.guard.faults.note(
            "slow_request", f"closed a connection that sent no complete request within {seconds} s"
        )
        transport.close()

    def _send_408(self) -> None:
        body = b"request not received in time\n"
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            self.transport.write(
                self.conn.send(h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"))
                or b""
            )
            self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            pass
        if self.cycle is not None:
            # The app is still waiting for the body: it now reads a disconnect, and whatever it
            # answers is dropped (exporter/web/app.py answers a disconnect quietly).
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self.guard.release(self)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    return str(text).splitlines()[0][:120]


def protocol_for(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """A protocol class bound to `guard` (uvicorn builds one instance per connection)."""

    class Bound(GuardedH11Protocol):
        pass

    Bound.guard = guard
    return Bound


# -- running uvicorn ----------------------------------------------------------------------------


class QuietServer(uvicorn.Server):
    """uvicorn's Server with a housekeeping tick of `tick_seconds` instead of 0.1 s.

    uvicorn's `main_loop` sleeps 0.1 s between ticks and refreshes the Date header every tenth;
    here every tick refreshes it and the loop sleeps until the next tick or until `should_exit`
    is set, whichever comes first, so stopping is as prompt as before.
    """

    tick_seconds: ClassVar[float] = 1.0

    def __init__(self, config: uvicorn.Config) -> None:
        self._stop_requested = False
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._wake_lock = threading.Lock()
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._stop_requested

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._stop_requested = value
        with self._wake_lock:
            wake = self._wake
        if value and wake is not None:
            loop, event = wake
            # also safe from a signal handler; RuntimeError: the loop has closed, nothing to wake
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

    async def main_loop(self) -> None:
        stop = asyncio.Event()
        with self._wake_lock:
            self._wake = (asyncio.get_running_loop(), stop)
        try:
            # on_tick(0) is uvicorn's once-a-second tick (Date header, notify) and the exit check
            while not await self.on_tick(0):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.tick_seconds)
        finally:
            with self._wake_lock:
                self._wake = None


def build_server(app: Any, guard: ConnectionGuard, *, access_log: bool = False) -> QuietServer:
    """A QuietServer for `app` behind `guard`, logging through the root logger
    (exporter/logs.py) rather than uvicorn's own handlers."""
    limits = guard.limits
    config = uvicorn.Config(
        app,
        http=protocol_for(guard),
        lifespan="off",
        log_config=None,
        log_level=None,
        access_log=access_log,
        backlog=guard.backlog,
        timeout_keep_alive=limits.keep_alive_seconds,
        timeout_graceful_shutdown=max(1, math.ceil(limits.shutdown_timeout)),
    )
    return QuietServer(config)


def serve(server: Any, sock: socket.socket, guard: ConnectionGuard) -> bool:
    """Run `server` (from build_server) on the bound `sock` until it is told to stop (SIGINT,
    SIGTERM, or `server.should_exit`); True when it had started."""
    fault_filter = ClientFaultFilter(guard.faults)
    loggers = [logging.getLogger("uvicorn.error"), logging.getLogger("asyncio")]
    for logger in loggers:
        logger.addFilter(fault_filter)
    try:
        server.run(sockets=[sock])
    finally:
        for logger in loggers:
            logger.removeFilter(fault_filter)
        guard.faults.close()
    return bool(server.started)
