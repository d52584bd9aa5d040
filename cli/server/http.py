"""The HTTP server behind ``ltm server run`` (and ``ltm ui``): waitress, with JSON errors.

waitress reads each request whole, head and body, in its one I/O thread, and
only then hands it to a worker thread; the worker's response goes to the
connection's output buffer, which the I/O thread sends as the client reads
(https://docs.pylonsproject.org/projects/waitress/en/stable/design.html). So a
slow client holds a socket, never a worker thread, whether it sends slowly or
reads slowly. Its parser is strict where framing is at stake (RFC 9112):
Content-Length is digits only, a chunk size hex digits only, lines end in
CRLF, obsolete line folding is refused.

On top of waitress, through the classes it is built to take (its channel's
parser and error task, the server's channel class):

- an HTTP/1.1 request without a Host header, or any request with two, is a 400
  (RFC 9112 §3.2);
- the errors it answers itself (400, 413, 431, 501, 505) are JSON
  ``{"error": ...}`` like every other ltm error;
- a body over its route's bound (``ltm.limits``) is refused with 413 from the
  head, before a byte of it is read (asked ``Expect: 100-continue``, it is the
  413 that answers, never the go-ahead);
- a request must arrive whole within ``REQUEST_TIMEOUT`` seconds of its first
  byte (a new connection: of the accept; a big body gets more, at
  ``BIG_BODY_RATE``), else 408 and the connection closes, so dribbling buys
  nothing; an idle connection closes after ``IDLE_TIMEOUT``;
- at its connection limit (below the descriptor limit) a new connection
  closes the idle one that has waited longest, so a flood of idle
  connections cannot lock newer clients out.
- the I/O loop leaves an answer being sent by its worker to the worker,
  instead of turning for it again and again (``_Channel.writable``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol, cast

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.receiver import ChunkedReceiver
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import BadRequest, Error, RequestEntityTooLarge

from ltm import limits

MAX_HEADER_BYTES = 64 * 1024
# A request's head and body, together, from its first byte (a new connection:
# from the accept). Generous for a 32 KiB body on a slow link; short enough
# that a client dribbling bytes is cut within seconds.
REQUEST_TIMEOUT = 5.0
BIG_BODY_RATE = 32 * 1024  # bytes a second a body's bytes past 32 KiB get time for
# An idle keep-alive connection closes after this (it costs a socket, not a
# thread); so does one whose response has not moved for as long.
IDLE_TIMEOUT = 10
# Connections a process keeps open at most, whatever the descriptor limit allows.
MAX_CONNECTIONS = 1024
# waitress counts a chunked body's framing in its size: room for it past the largest bound.
_BODY_ROOM = limits.LARGEST_BODY + 64 * 1024


class RequestTimeout(Error):
    code = 408
    reason = "Request Timeout"


class _Parser(HTTPRequestParser):
    """waitress's parser, stricter where two readers of a request could frame it apart
    (a proxy in front and this server: request smuggling), and holding each body to its
    route's bound (``ltm.limits``) from the head.

    Refused with 400 at once, where waitress would wait for a CRLF that never
    comes, or take the request as another reader may not: a bare LF ending a
    line of the head or of the chunked framing; obsolete line folding (RFC 9112
    §5.2 lets a server refuse it); Content-Length beside Transfer-Encoding (§6.1).
    A Content-Length over the route's bound, or a chunked body growing past
    it, is a 413 as soon as that is known.
    """

    def received(self, data: bytes) -> int:
        consumed: int = super().received(data)
        if self.completed:
            return consumed
        if not self.headers_finished:
            if _bare_lf(self.header_plus):
                self._refuse(BadRequest("a line ends in a bare LF, not CRLF"))
            return consumed
        body = self.body_rcv
        chunk_lines = (body.control_line, body.trailer) if isinstance(body, ChunkedReceiver) else ()
        if any(_bare_lf(line) for line in chunk_lines):
            self._refuse(BadRequest("a chunk line ends in a bare LF, not CRLF"))
            return consumed
        limit = route_limit(self)
        received = len(body) if self.chunked and body is not None else 0
        if max(self.content_length, received) > limit:
            self._refuse(RequestEntityTooLarge(limits.too_large(limit)))
        return consumed

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)  # first: the answer then speaks the request's version
        # Byte searches, not a split: this runs for every request, in the I/O thread.
        if b"\r\n " in header_plus or b"\r\n\t" in header_plus:
            raise ParsingError("obsolete line folding is not accepted")
        framed = self.chunked or "TRANSFER_ENCODING" in self.headers  # (HTTP/1.0 keeps it)
        if framed and "CONTENT_LENGTH" in self.headers:
            raise ParsingError("Content-Length and Transfer-Encoding together are not accepted")
        # One Host, and one on every HTTP/1.1 request (RFC 9112 §3.2: a MUST for servers).
        # waitress joins repeated headers with ", ", which no host name holds; two Hosts are
        # two answers to where the request goes, and a proxy in front may have read the other.
        host = self.headers.get("HOST")
        if host is None and self.version == "1.1":
            raise ParsingError("an HTTP/1.1 request needs a Host header")
        if host is not None and "," in host:
            raise ParsingError("more than one Host header is not accepted")

    def _refuse(self, error: Error) -> None:
        self.error = error
        self.completed = True


def _bare_lf(data: bytes) -> bool:
    """Whether ``data`` holds an LF that does not end a CRLF."""
    return data.count(b"\n") > data.count(b"\r\n")


# The members of waitress 3.0 this module uses that its stubs (types-waitress 3.0) leave
# undeclared or declare narrower than they are. They are needed because the deadlines,
# the room for a new connection and the JSON errors are seen to inside waitress's own
# I/O loop, where its connections live. Declared once here so every use is checked; a
# waitress release that changes one of them breaks here, and tests/test_server*.py say so.
class _ServerParts(Protocol):
    _map: dict[int, Any]  # wasyncore's socket map (descriptor -> channel), the connections

    # waitress hands a worker a channel (it calls its service()), not only a Task
    def add_task(self, task: HTTPChannel) -> None: ...


class _ChannelParts(Protocol):
    requests_lock: threading.Lock  # held by waitress while it moves parsed requests
    requests: list[HTTPRequestParser]  # parsed, waiting for a worker


class _ErrorTaskParts(Protocol):
    request: HTTPRequestParser  # the stubs say Error; waitress passes the parsed request
    response_headers: list[tuple[str, str]]


def route_limit(request: Any) -> int:
    """The bound of the body of ``request`` (a parsed head): its route's."""
    return limits.body_limit(request.command or "", request.path or "")


class _JsonErrorTask(ErrorTask):
    """waitress's error answer, as JSON; the connection then closes."""

    def execute(self) -> None:
        parts = cast(_ErrorTaskParts, self)
        error = parts.request.error
        assert error is not None  # waitress makes an error task only for a request in error
        if error.code == 413:
            message = limits.too_large(route_limit(self.request))
        elif error.code == 431:
            message = "request headers too large"
        elif error.code == 408:
            message = "request timeout"
        else:
            reason = error.reason.lower()
            message = f"{reason}: {error.body}" if error.body else reason
        body = json.dumps({"error": message}, separators=(",", ":")).encode()
        self.status = f"{error.code} {error.reason}"
        parts.response_headers.extend(
            [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        )
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Channel(HTTPChannel):
    """A connection, with the time its pending request (or, new, its first) started."""

    parser_class = _Parser
    error_task_class = _JsonErrorTask

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.started: float | None = time.monotonic()  # its first request is due

    def received(self, data: bytes) -> bool:
        before = self.request
        done: bool = super().received(data)
        if self.request is None:
            self.started = None  # every request in is whole: idle (or being served)
        elif self.request is not before and (before is not None or self.started is None):
            self.started = time.monotonic()  # a new request began (a new connection's: at accept)
        return done

    def send_continue(self) -> None:
        """``100 Continue`` only to a request still waiting for its body (RFC 9110 §10.1.1).

        waitress sends it as soon as a head asking for it is in, and then marks the
        request incomplete again, to wait for the body: a request already complete at
        its head (no body, or refused from it: the 413 of a body over its bound) would
        wait for a body that never comes, answered only by its deadline (408).
        """
        request = self.request
        if request is not None and request.completed:
            request.expect_continue = False
            return
        super().send_continue()

    def writable(self) -> bool:
        """Whether the I/O loop should send this connection's output now.

        waitress says yes whenever the output buffer holds bytes, also while the worker
        serving a request is sending them itself (it adds them to the buffer, then sends
        under the buffer's lock). The loop then wakes at once, cannot take the lock,
        and wakes again for as long as the worker sends, holding the GIL the worker
        needs (tests/test_server_loop.py counts the loop's turns an answer).
        So while a request is served its worker sends, and the loop only past the
        high-water mark (where the worker waits for it) or once the request is done
        (the worker then wakes the loop: ``HTTPChannel.service`` pulls its trigger).
        """
        if self.will_close or self.close_when_flushed:
            return True
        pending = self.total_outbufs_len
        if not pending:
            return False
        return not self.requests or pending >= self.adj.outbuf_high_watermark

    def due(self) -> float | None:
        """When its pending request must be in by (None: nothing pending)."""
        if self.started is None:
            return None
        request = self.request
        extra = 0.0
        if request is not None and request.headers_finished:
            extra = max(0, request.content_length - limits.MAX_BODY) / BIG_BODY_RATE
        return self.started + REQUEST_TIMEOUT + extra


class _Server(TcpWSGIServer):
    """waitress's server on a socket bound beforehand, with ltm's deadlines and room.

    waitress asks its listening socket whether to accept at every turn of its
    loop (``readable``, at least once a second): the deadlines and the room for a
    new connection are seen to there, in the I/O thread that owns the connections.
    """

    channel_class = _Channel

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.room = connection_limit()
        self._next_expiry = 0.0
        super().__init__(*args, **kw)

    def readable(self) -> bool:
        now = time.monotonic()
        if now >= self._next_expiry:  # a few times a second, whatever the traffic
            self._next_expiry = now + 0.25
            self._expire(now)
        if len(cast(_ServerParts, self)._map) >= self.room:
            self._make_room()
        return bool(super().readable())

    def _channels(self) -> list[_Channel]:
        connections = cast(_ServerParts, self)._map
        return [c for c in list(connections.values()) if isinstance(c, _Channel)]

    def _expire(self, now: float) -> None:
        """A request not in by its due time: 408 when any of it came, else just closed."""
        for channel in self._channels():
            due = channel.due()
            if due is None or due > now or channel.requests or channel.will_close:
                continue
            channel.started = None
            parts = cast(_ChannelParts, channel)
            with parts.requests_lock:
                request = channel.request
                if request is None:  # a new connection that never sent a byte
                    channel.will_close = True
                    continue
                request.error = RequestTimeout("request timeout")
                request.completed = True
                if not request.headers_finished:  # its version unread: answered in ours
                    request.version = "1.1"
                channel.request = None
                parts.requests.append(request)
            # a worker answers it, as waitress's own errors
            cast(_ServerParts, self).add_task(channel)

    def _make_room(self) -> None:
        """Below the limit, counting a new connection: close the idle connections that have
        waited longest (none idle: the new one is taken all the same, under waitress's own
        hard limit, and the next turn tries again).

        Closed by waitress in this turn's events (``will_close``), never here: a socket
        closed while the loop gathers what to poll would leave its number polled, and a
        connection accepted in the same turn may be given that number.
        """
        channels = self._channels()
        connections = cast(_ServerParts, self)._map
        over = len(connections) - sum(c.will_close for c in channels) - self.room + 1
        if over <= 0:
            return
        idle = [
            c
            for c in channels
            if not (c.will_close or c.requests or c.request or c.total_outbufs_len)
        ]
        for channel in sorted(idle, key=lambda c: c.last_activity)[:over]:
            channel.will_close = True


def connection_limit() -> int:
    """How many connections the process keeps open at most: below its descriptor limit.

    Half the limit (at least 256 descriptors) stays free for the database, its
    threads' connections, the log and the bodies waitress spills to files.
    """
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 512
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 2, soft - 256))


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free port).

    SO_REUSEADDR only (a restart may bind while old connections linger in
    TIME_WAIT), never SO_REUSEPORT: a second server on an address in use fails
    here, where it would otherwise silently take part of the traffic.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        if sys.platform != "win32":  # Windows' SO_REUSEADDR would let two servers share it
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


# Where a browser sends a ``*.localhost`` name: ::1 first, then 127.0.0.1 (the Fetch
# standard's "resolve an origin": https://fetch.spec.whatwg.org/#resolve-an-origin).
BROWSER_LOOPBACK = ("::1", "127.0.0.1")
_FREE_PORT_TRIES = 8


def bind_for_browsers(host: str, port: int) -> tuple[socket.socket, list[socket.socket]]:
    """``bind(host, port)`` for a web view at a ``*.localhost`` name, with the other
    address browsers send that name to held on the same port (port 0: a port free on both).

    Listening on 127.0.0.1 alone left [::1] on that port to anyone: another user of the
    machine listening there would be sent the browser's sign-in key, then its session
    cookie, since browsers try ::1 first. Held (bound, never listening), a connection
    there is refused at once and the browser goes on to this server. Keep the held
    sockets open while serving. OSError when another program has that address.
    """
    for _ in range(_FREE_PORT_TRIES if port == 0 else 1):
        sock = bind(host, port)
        bound, at = sock.getsockname()[:2]
        if bound not in BROWSER_LOOPBACK:  # e.g. 127.0.0.2: browsers never come here
            return sock, []
        try:
            held = [_hold(other, at) for other in BROWSER_LOOPBACK if other != bound]
            return sock, [h for h in held if h is not None]
        except OSError:
            sock.close()
            if port:
                raise
    raise OSError(f"no port free on both {' and '.join(BROWSER_LOOPBACK)}")


def _hold(address: str, port: int) -> socket.socket | None:
    """``address:port`` bound and never listening (no SO_REUSEADDR: no one binds beside it);
    None where the machine has no such address (IPv6 off): no browser reaches it either."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    shown = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError:  # no such family on this machine
        return None
    try:
        exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)  # Windows: else others may bind
        if exclusive is not None:
            sock.setsockopt(socket.SOL_SOCKET, exclusive, 1)
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            return None
        raise OSError(
            exc.errno,
            f"{shown}, where browsers also send the web view's name, is in use by another"
            " program (its pages would be sent your sign-in there)",
        ) from None
    return sock


def make_server(wsgi_app: Callable[..., Any], sock: socket.socket, *, threads: int) -> _Server:
    """A waitress server on the listening ``sock``, its ``threads`` worker threads started."""
    adjustments = Adjustments(
        sockets=[sock],
        threads=threads,
        ident="ltm",
        max_request_header_size=MAX_HEADER_BYTES,
        max_request_body_size=_BODY_ROOM,
        # A body past this waits in a temporary file: what a connection holds in memory
        # stays small however many clients send big bodies at once.
        inbuf_overflow=128 * 1024,
        channel_timeout=IDLE_TIMEOUT,
        cleanup_interval=1,  # how often waitress looks for idle connections (seconds)
        connection_limit=MAX_CONNECTIONS + 2,  # ours applies first (see _Server)
        asyncore_use_poll=True,  # select() stops at descriptor 1024
        # The app reads X-Forwarded-* itself (and decides nothing on them alone).
        clear_untrusted_proxy_headers=False,
        expose_tracebacks=False,
    )
    # Under load, requests waiting for a thread are the normal case, not a warning.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    # As waitress's create_server builds it for a socket of its own (``sockets=``).
    sockinfo = (sock.family, sock.type, sock.proto, sock.getsockname())
    return _Server(wsgi_app, {}, True, sock, adj=adjustments, bind_socket=False, sockinfo=sockinfo)


class Stop(SystemExit):
    """SIGTERM or SIGINT: waitress's loop ends on SystemExit and stops its threads."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(0)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve(
    wsgi_app: Callable[..., Any],
    sock: socket.socket,
    *,
    threads: int,
    on_stop: Callable[[], None] | None = None,
) -> int:
    """Serve on ``sock`` until SIGTERM or SIGINT; return an exit status.

    On a stop, the requests being served finish (waitress gives them 5 s) and
    their answers are sent; those still queued are dropped with their connections.
    ``on_stop`` (closing the database) runs once no worker is left in a request:
    one still in one past the 5 s (waiting for a lock another program holds) is
    left to end with the process, unanswered, its write not made. Closing a
    SQLite connection waits for the statement running on it, and a write waiting
    for a lock runs until the 30 s busy timeout: the stop took that long.
    """
    previous = {sig: signal.signal(sig, _stop) for sig in STOP_SIGNALS}
    server = None
    try:
        server = make_server(wsgi_app, sock, threads=threads)
        server.run()  # returns once a stop signal ended its loop and its threads
    except Stop:
        pass  # a signal before the loop ran
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            _finish(server)
        if on_stop is not None and not (server and server.task_dispatcher.threads):
            on_stop()
        sys.stderr.flush()
    return 0


def _finish(server: _Server) -> None:
    """Send what finished requests left in their buffers (a second at most), then close all."""
    connections = cast(_ServerParts, server)._map  # the channels stay in it after the server closes
    server.close()  # no more connections taken
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and any(
        getattr(c, "total_outbufs_len", 0) for c in list(connections.values())
    ):
        wasyncore.loop(timeout=0.05, map=connections, use_poll=True, count=1)
    for channel in list(connections.values()):
        with contextlib.suppress(OSError):
            channel.close()
