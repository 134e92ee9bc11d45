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
* uvicorn's TLS is one SSLContext for the life of the process, the handshake is outside any
  deadline, and asyncio gives every TLS connection a 256 KiB read buffer from accept on (613 idle
  sockets on a TLS port took RSS from 68 to 264 MiB). Here a TLS connection costs what a plain
  one does until the client's first TLS record (its ClientHello) has arrived whole: the bytes
  are kept (at most one record, 16 KiB), and only then is the TLS state made (`LeanSSLProtocol`,
  a 16 KiB buffer) with the web config's current context, fed those bytes, under a handshake
  deadline of its own (`TLS_HANDSHAKE_SECONDS`). A client that stalls inside its ClientHello
  holds no TLS state, so up to `MAX_PENDING_HELLOS` of them stand beside the cap instead of
  counting against it (`hello_room`): closing them to get back under the cap only fed clients
  that reconnect at once, and the loop spent its turns accepting them (3,000 stalled
  ClientHellos: a scrape 37× its idle time). At most `MAX_PENDING_HANDSHAKES` handshakes are in
  progress; a new one closes the oldest, which a real client (milliseconds) never is.
* The accept path evicts nothing that has not had a turn to send its request. asyncio accepts a
  whole backlog in one go, so a batch of newcomers used to evict each other, and a scraper among
  them, before any request was read (slow clients reconnecting at once past the cap: a quarter of
  scrapes reset). Newcomers may now take up to `overflow` places past the cap; two turns of the
  loop later their first reads are in, and the connections that still sent no request are
  closed, longest waiting first, once they have waited `TRIM_AFTER_SECONDS`, until the cap holds
  again (closing at once would only feed a client that reconnects at once). asyncio accepts
  `ACCEPT_BATCH` connections a turn, not a whole backlog, so a scrape's reads come between.

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
import ctypes
import errno
import gc
import logging
import math
import resource
import socket
import ssl
import sys
import threading
import time
from asyncio import sslproto
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
TRIM_AFTER_SECONDS = 0.5
"""Past the cap, how long a connection with no request may stand before it is closed to get back
under the cap (at the cap plus its overflow, sooner)."""
MAX_PENDING_HELLOS = 4096
"""TLS connections whose ClientHello is not whole yet that do not count against the cap (each
holds no TLS state: what a plain connection costs); past them, they count as any other."""
HELLO_BYTES = 16 * 1024 * 1024
"""Bytes of unfinished ClientHellos kept, all connections together (one may keep a record, 18
KiB); past it the one that waited longest after its turn is closed, so 4,096 beside the cap
cannot each keep a record's worth."""
MAX_PENDING_HANDSHAKES = 128
"""TLS handshakes in progress at most (each holds TLS state); a new one closes the oldest."""
TLS_HANDSHAKE_SECONDS = 3.0
"""From a client's first TLS bytes to a finished handshake, at most (and never past the request
deadline)."""
TLS_RECORD_MAX = 16 * 1024 + 2048
"""The longest TLS record a ClientHello may come in (RFC 8446 §5.1: 2^14 plus expansion)."""
TLS_READ_BUFFER = 16 * 1024 + 512
"""One TLS record (16 KiB of plaintext and its framing): the read size of a TLS connection."""
MAX_ACCEPT_BACKLOG = 1024
"""The listen() queue at most, sized from the open-file limit (`accept_backlog`)."""
ACCEPT_BATCH = 16
"""Connections asyncio accepts per turn of the event loop. asyncio accepts as many as the
backlog it was given in one callback (1,024 here) before anything else runs; under a flood of
reconnecting clients each such turn took seconds of a loaded machine's share, and a scrape
waited for every one (`QuietServer.startup` gives asyncio this and the kernel the backlog)."""


GIL_SWITCH_SECONDS = 0.001
"""The interpreter's thread switch interval while serving (Python's default: 5 ms). A thread
waiting for the GIL gets it after this long; the event loop waits for it on every turn while a
worker builds a snapshot's answers (exporter/web/answers.py) or the sampler folds a batch, and
a request takes several turns, so at 5 ms a probe waited tens of milliseconds behind a build."""


M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's mallopt parameters (malloc.h)."""
MALLOC_MMAP_BYTES = 32 * 1024 * 1024
"""Allocations from this size up get their own mapping (glibc's most for its own threshold)."""
MALLOC_TRIM_BYTES = 64 * 1024 * 1024
"""Free memory a heap keeps at its top before giving it back to the kernel."""


def keep_freed_memory() -> bool:
    """Let glibc's malloc keep freed memory for the next snapshot instead of handing it back.

    A new snapshot's /metrics at 1,024 entities allocates a few buffers of its 4.4 MB body (the
    text, its bytes, the process metrics appended) and frees those of the last one; by default
    each comes from fresh pages, about 3,500 page faults (14 MB) per encode, a third of its CPU
    time (docs/daemon.md, "A new snapshot's /metrics at 1,024 entities"). False where the C
    library has no mallopt (musl's does nothing, macOS has none): nothing is changed there."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_BYTES) and mallopt(M_TRIM_THRESHOLD, MALLOC_TRIM_BYTES))


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


def probation_room(cap: int, open_file_limit: int) -> int:
    """How many newcomers may stand past the cap until their first reads are in: one accept
    batch, where the open-file limit has room for it beside what `connection_cap` reserves."""
    room = open_file_limit - FD_RESERVE - 2 * accept_backlog(open_file_limit)
    return max(0, min(accept_backlog(open_file_limit), room - cap))


def hello_room(cap: int, open_file_limit: int) -> int:
    """How many TLS connections waiting for their ClientHello may stand beside the cap: at most
    MAX_PENDING_HELLOS, where the open-file limit has room for them beside the cap and its
    overflow (none at a limit of 1,024: they count against the cap there)."""
    room = open_file_limit - FD_RESERVE - 2 * accept_backlog(open_file_limit)
    return max(0, min(MAX_PENDING_HELLOS, room - cap - probation_room(cap, open_file_limit)))


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
        overflow: int = 0,
        hellos: int = 0,
    ) -> None:
        self.limits = limits
        self.cap = cap if cap is not None else limits.max_connections
        self.overflow = overflow
        """Newcomers allowed past the cap until they have had their turn (`probation_room`)."""
        self.hello_room = hellos
        """TLS connections still waiting for their ClientHello that the cap does not count
        (`hello_room`)."""
        self.hellos: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        """Open TLS connections whose ClientHello is not whole yet, oldest first."""
        self._waiting_hellos: OrderedDict[GuardedH11Protocol, float] = OrderedDict()
        """Those of them that have had their turn, oldest first (evicted only past hello_room)."""
        self.hello_bytes = 0
        """Bytes of unfinished ClientHellos kept (at most HELLO_BYTES, but for the newest one)."""
        self.backlog = backlog
        self.tls_context = tls_context or (lambda: None)
        self.faults = faults or EveryMinute()
        self.open: set[GuardedH11Protocol] = set()
        self._waiting: OrderedDict[GuardedH11Protocol, float] = OrderedDict()
        """Open connections with no request in flight, oldest wait first: the ones to evict."""
        self.max_handshakes = MAX_PENDING_HANDSHAKES
        self.handshakes: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        """Connections whose TLS handshake is in progress, oldest first."""
        self._fresh: list[GuardedH11Protocol] = []
        self._turn_scheduled = False
        self._trim_scheduled = False

    @property
    def counted(self) -> int:
        """Open connections the cap counts: all but the TLS ones waiting for their ClientHello
        within `hello_room`."""
        return len(self.open) - min(len(self.hellos), self.hello_room)

    def admit(self, protocol: GuardedH11Protocol, *, hello: bool = False) -> bool:
        """True when the new connection may stay. A TLS one (`hello`) stands beside the cap while
        `hello_room` lasts. Past the cap and its overflow, the longest waiter that has had its
        turn is closed for it; with none, it is refused."""
        if hello and len(self.hellos) < self.hello_room:
            self.open.add(protocol)
            self.hellos[protocol] = None
            self.fresh(protocol)
            return True
        if not self._make_room(newcomer=True):
            return False
        self.open.add(protocol)
        if hello:
            self.hellos[protocol] = None
        self.fresh(protocol)
        return True

    def hello_kept(self, size: int) -> None:
        """`size` more bytes of unfinished ClientHellos are kept (fewer, when negative); past
        HELLO_BYTES, the ones that waited longest after their turn are closed."""
        self.hello_bytes += size
        while self.hello_bytes > HELLO_BYTES and self._waiting_hellos:
            victim, _ = self._waiting_hellos.popitem(last=False)
            self.faults.note(
                "tls_hellos",
                f"{self.hello_bytes} bytes of unfinished TLS ClientHellos kept (the bound): "
                "closing the oldest",
            )
            victim.evict()

    def hello_over(self, protocol: GuardedH11Protocol) -> bool:
        """`protocol`'s ClientHello is whole: from now on the cap counts it. False when it does not
        fit and nothing that has had its turn can make room (the caller closes it)."""
        self._waiting_hellos.pop(protocol, None)
        if protocol not in self.hellos:
            return True
        within = len(self.hellos) <= self.hello_room
        del self.hellos[protocol]
        if within and not self._make_room(newcomer=False):
            self.release(protocol)
            return False
        return True

    def _make_room(self, *, newcomer: bool) -> bool:
        """Within the cap and its overflow (with a `newcomer` not counted yet), or a waiter closed
        to get there; False when none can be."""
        if self.counted + (1 if newcomer else 0) <= self.cap + self.overflow:
            return True
        victim = self._victim()
        if victim is None:
            self.faults.note(
                "connection_cap",
                f"{self.counted} connections open (the cap, --max-connections): "
                "refusing new ones until requests finish",
            )
            return False
        self.faults.note(
            "connection_cap",
            f"{self.counted} connections open (the cap, --max-connections): closing the ones "
            "that waited longest without sending a request",
        )
        victim.evict()
        return True

    def _evictable(self) -> list[OrderedDict[GuardedH11Protocol, float]]:
        """The waiting lists whose closing lowers the count (ClientHello waiters only past
        hello_room), those not empty."""
        candidates = [self._waiting]
        if len(self.hellos) > self.hello_room:
            candidates.append(self._waiting_hellos)
        return [queue for queue in candidates if queue]

    def _victim(self, older_than: float | None = None) -> GuardedH11Protocol | None:
        """The longest waiter whose closing lowers the count, if it has waited since before
        `older_than`; it leaves its waiting list."""
        queues = self._evictable()
        if not queues:
            return None
        queue = min(queues, key=lambda q: next(iter(q.values())))
        victim, since = next(iter(queue.items()))
        if older_than is not None and since > older_than:
            return None
        del queue[victim]
        return victim

    def fresh(self, protocol: GuardedH11Protocol) -> None:
        """`protocol` can send a request now (accepted, or its TLS handshake is done): it may be
        evicted only after two turns of the loop, so that a turn's reads have reached it."""
        self._fresh.append(protocol)
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._first_turn)

    def _first_turn(self) -> None:
        batch, self._fresh, self._turn_scheduled = self._fresh, [], False
        asyncio.get_running_loop().call_soon(self._second_turn, batch)

    def _second_turn(self, batch: list[GuardedH11Protocol]) -> None:
        now = time.monotonic()
        for protocol in batch:
            if protocol in self.open and protocol.awaiting_request:
                (self._waiting_hellos if protocol in self.hellos else self._waiting)[protocol] = now
        if not self._trim_scheduled:
            self._trim()

    def _trim(self) -> None:
        """Back to the cap: close the connections that waited longest without a request, once
        they have waited `TRIM_AFTER_SECONDS` (each one closed is a reconnect, if it is a flood)."""
        self._trim_scheduled = False
        while self.counted > self.cap:
            now = time.monotonic()
            victim = self._victim(older_than=now - TRIM_AFTER_SECONDS)
            if victim is None:
                oldest = [next(iter(queue.values())) for queue in self._evictable()]
                if oldest:
                    self._trim_scheduled = True
                    asyncio.get_running_loop().call_later(
                        max(0.01, min(oldest) + TRIM_AFTER_SECONDS - now), self._trim
                    )
                return
            self.faults.note(
                "connection_cap",
                f"{self.counted} connections open (the cap, --max-connections): closing the ones "
                "that waited longest without sending a request",
            )
            victim.evict()

    def waiting(self, protocol: GuardedH11Protocol) -> None:
        if protocol in self.open:
            self._waiting[protocol] = time.monotonic()
            self._waiting.move_to_end(protocol)
            if not self._trim_scheduled:
                self._trim()

    def busy(self, protocol: GuardedH11Protocol) -> None:
        self._waiting.pop(protocol, None)
        self._waiting_hellos.pop(protocol, None)

    def handshaking(self, protocol: GuardedH11Protocol) -> None:
        """`protocol` starts a TLS handshake; past the bound the oldest one in progress is closed."""
        while len(self.handshakes) >= self.max_handshakes:
            victim, _ = self.handshakes.popitem(last=False)
            self.faults.note(
                "tls_handshakes",
                f"{len(self.handshakes) + 1} TLS handshakes in progress (the bound): closing the oldest",
            )
            victim.evict()
        self.handshakes[protocol] = None

    def handshake_over(self, protocol: GuardedH11Protocol) -> None:
        self.handshakes.pop(protocol, None)

    def release(self, protocol: GuardedH11Protocol) -> None:
        self.open.discard(protocol)
        self._waiting.pop(protocol, None)
        self.hellos.pop(protocol, None)
        self._waiting_hellos.pop(protocol, None)
        self.handshakes.pop(protocol, None)


class LeanSSLProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a read buffer of one TLS record instead of 256 KiB."""

    max_size = TLS_READ_BUFFER


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline, the connection cap and per-connection TLS.

    Phases: "hello" (TLS, nothing received yet: no TLS state), "tls" (handshake), "head" (waiting
    for a request), "body" (head in, body not yet), "app" (the request is whole; the app answers
    it). The deadline runs in hello/tls/head/body only.
    """

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._phase = "head"
        self._received_while_waiting = 0
        self._answered = 0
        self._released = False
        self._hello = bytearray()
        self._hello_counted = 0
        """Bytes of `_hello` the guard counts (ConnectionGuard.hello_kept)."""

    # -- lifecycle ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self._phase == "tls":  # the TLS transport: LeanSSLProtocol finished the handshake
            self.guard.handshake_over(self)
            self._made(transport)
            self.guard.fresh(self)
            return
        tls = self.guard.tls_context() is not None
        if not self.guard.admit(self, hello=tls):
            self._released = True
            transport.abort()
            return
        self._raw = transport
        self._arm()
        if tls:
            self._phase = "hello"  # TLS state is made when the ClientHello has arrived whole
        else:
            self._made(transport)

    @property
    def awaiting_request(self) -> bool:
        """Nothing of a request is in yet (the connections the cap may evict)."""
        return self._phase in ("hello", "head")

    def _hello_received(self, data: bytes) -> None:
        """Keep the client's first bytes until its first TLS record is whole (or cannot be one)."""
        self._hello += data
        hello = self._hello
        length = int.from_bytes(hello[3:5], "big") if len(hello) >= 5 else 0
        if hello[0] == 0x16 and (len(hello) < 5 or (length <= TLS_RECORD_MAX and len(hello) < 5 + length)):
            self._keep_hello()
            return
        self._drop_hello()
        self._start_handshake(bytes(hello))  # whole, or not TLS at all: the TLS state says which

    def _start_handshake(self, hello: bytes) -> None:
        """The ClientHello is in: make the TLS state, hand it the socket and the bytes."""
        raw, context = self._raw, self.guard.tls_context()
        assert raw is not None
        if context is None:  # turning TLS off needs a restart (webconfig_watch), so never here
            self._release()
            raw.close()
            return
        if not self.guard.hello_over(self):  # no room under the cap, and none to make
            self._released = True
            raw.close()
            return
        self._phase = "tls"
        self.guard.busy(self)
        self.guard.handshaking(self)
        waiter: asyncio.Future[None] = self.loop.create_future()
        waiter.add_done_callback(self._handshake_ended)
        timeout = max(0.1, min(TLS_HANDSHAKE_SECONDS, self.guard.limits.request_timeout))
        tls = LeanSSLProtocol(  # typeshed has the timeout an int; asyncio takes float seconds
            self.loop,
            self,
            context,
            waiter,
            server_side=True,
            ssl_handshake_timeout=timeout,  # type: ignore[arg-type]
        )
        raw.set_protocol(tls)
        tls.connection_made(raw)
        view = memoryview(hello)
        while view and not raw.is_closing():
            buffer = tls.get_buffer(len(view))
            size = min(len(buffer), len(view))
            buffer[:size] = view[:size]
            tls.buffer_updated(size)
            view = view[size:]

    def _handshake_ended(self, waiter: asyncio.Future[None]) -> None:
        self.guard.handshake_over(self)
        error = waiter.exception() if not waiter.cancelled() else asyncio.CancelledError()
        if error is None and self.transport is not None:
            return
        if not self._released:  # not closed by the guard: the client could not finish a handshake
            reason = _reason(error) if error is not None else "closed"
            self.guard.faults.note("tls_handshake", f"a client's TLS handshake failed ({reason})")
        self._release()
        if self._raw is not None:
            self._raw.close()

    def _made(self, transport: asyncio.Transport) -> None:
        self._phase = "head"
        super().connection_made(transport)

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
        if self._phase in ("head", "body", "tls", "hello"):
            self._cancel_timer()
            transport = self.transport or self._raw
            if transport is not None:
                transport.close()
            return
        super().shutdown()

    # -- the request deadline -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._phase == "hello":
            self._hello_received(data)
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

    def _keep_hello(self) -> None:
        """Tell the guard how many bytes of an unfinished ClientHello this connection keeps (it may
        close the connection that waited longest after its turn, this one too)."""
        grown, self._hello_counted = len(self._hello) - self._hello_counted, len(self._hello)
        self.guard.hello_kept(grown)

    def _drop_hello(self) -> None:
        """Forget the unfinished ClientHello's bytes, and tell the guard."""
        kept, self._hello_counted, self._hello = self._hello_counted, 0, bytearray()
        if kept:
            self.guard.hello_kept(-kept)

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._drop_hello()
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

    def __init__(self, config: uvicorn.Config, listen_backlog: int = MAX_ACCEPT_BACKLOG) -> None:
        self._listen_backlog = listen_backlog
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

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's startup, with asyncio accepting `config.backlog` (ACCEPT_BATCH) connections a
        turn; the kernel's queue is then set back to the listen backlog (asyncio's own listen()
        set it to the batch)."""
        await super().startup(sockets)
        for sock in sockets or []:
            sock.listen(self._listen_backlog)

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
        ws="none",  # no websocket route: "auto" would import wsproto or websockets at start
        lifespan="off",
        log_config=None,
        log_level=None,
        access_log=access_log,
        backlog=min(ACCEPT_BATCH, guard.backlog),
        timeout_keep_alive=limits.keep_alive_seconds,
        timeout_graceful_shutdown=max(1, math.ceil(limits.shutdown_timeout)),
    )
    return QuietServer(config, listen_backlog=guard.backlog)


def serve(server: Any, sock: socket.socket, guard: ConnectionGuard) -> bool:
    """Run `server` (from build_server) on the bound `sock` until it is told to stop (SIGINT,
    SIGTERM, or `server.should_exit`); True when it had started."""
    fault_filter = ClientFaultFilter(guard.faults)
    loggers = [logging.getLogger("uvicorn.error"), logging.getLogger("asyncio")]
    for logger in loggers:
        logger.addFilter(fault_filter)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, GIL_SWITCH_SECONDS))
    # What start-up made (modules, the app, the catalog) lives as long as the process: out of the
    # collector's sight, a full collection walks only the snapshots' objects. Each one holds the
    # GIL; over start-up's objects they held a 1,024-entity node's event loop for tens of ms.
    gc.freeze()
    keep_freed_memory()
    try:
        server.run(sockets=[sock])
    finally:
        gc.unfreeze()
        sys.setswitchinterval(switch)
        for logger in loggers:
            logger.removeFilter(fault_filter)
        guard.faults.close()
    return bool(server.started)
