"""The HTTP server behind ``ltm server run``: cheroot, with JSON errors.

cheroot (CherryPy's server, pure Python) is a production multi-threaded WSGI
server: one thread watches the listening socket and the idle keep-alive
connections, and a pool of worker threads runs and answers each ready request
with plain blocking I/O. Here that one thread also reads every request whole
before a worker sees it (``intake.py``), so slow or idle clients hold a
socket, never a worker thread: a request must arrive within
``REQUEST_TIMEOUT`` seconds of its first byte, and an idle connection closes
after ``IDLE_TIMEOUT``. We measured it against waitress on this
2-core box (BENCHMARKS.md, "Server"): waitress's event loop, shared with the
worker threads under the GIL, intermittently spun at several milliseconds of
CPU per request and pushed p99 latency into the hundreds of milliseconds;
cheroot's did not.

Adjustments so it speaks the protocol:

- the errors cheroot answers itself (malformed HTTP, a body over the limit,
  headers too large) are JSON ``{"error": ...}`` like every other error;
- a Content-Length over 32 KiB is refused from the headers, before a byte of
  the body is read; a chunked body is cut off as soon as it passes 32 KiB;
- several worker processes (``--workers``, POSIX) each accept on their own
  SO_REUSEPORT socket, so the kernel spreads connections across them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from cheroot import wsgi
from cheroot.errors import MaxSizeExceeded
from cheroot.makefile import MakeFile
from cheroot.server import HeaderReader, HTTPConnection, HTTPRequest

from ltm import limits

from .forking import STOP_SIGNALS, Stop, die_with, exit_after, let_stops_in, stop, stops_held
from .intake import STRICT_HEADERS, BigBodies, Intake, RequestReader, StrictHeaders, json_error

if TYPE_CHECKING:
    from .writer import Writer

MAX_HEADER_BYTES = 64 * 1024
# A request's head and body, together, from its first byte (a new connection:
# from the accept). Generous for a 32 KiB body on a slow link; short enough
# that a client dribbling bytes is cut within seconds (a bigger body gets more:
# see intake.py).
REQUEST_TIMEOUT = 5.0
# An idle keep-alive connection closes after this (it costs a socket, not a
# thread); also how long one write of a response may stall.
IDLE_TIMEOUT = 10.0
# More parked connections than this, and answers close theirs instead.
MAX_KEEP_ALIVE = 512


class _ForgetExpect(StrictHeaders):
    """The intake's header reader, dropping an ``Expect: 100-continue`` it already answered."""

    def __call__(self, rfile: Any, hdict: dict[bytes, bytes] | None = None) -> Any:
        headers = super().__call__(rfile, hdict)
        headers.pop(b"Expect", None)
        return headers


_HEADERS_CONTINUED = _ForgetExpect()


class _JsonRequest(HTTPRequest):
    """cheroot's own error answers (``simple_response``), as JSON; the connection then closes.

    Its heads are read by the intake's reader (``StrictHeaders``), and a request
    is served only when cheroot frames its body as the intake did (see intake.py).
    """

    @property  # type: ignore[override]
    def header_reader(self) -> HeaderReader:
        return _HEADERS_CONTINUED if self.conn.rfile.continued else STRICT_HEADERS

    def read_request_headers(self) -> bool:
        if not super().read_request_headers():
            return False
        verdict = self.conn.rfile.framing
        length = 0 if self.chunked_read else int(self.inheaders.get(b"Content-Length", 0))
        if verdict is None or (verdict.chunked, verdict.length) != (self.chunked_read, length):
            # Never expected (one reader, one set of rules), and fatal if it happened: the
            # worker would wait for a body the intake did not see as part of the request.
            self.simple_response("400 Bad Request", "ambiguous request framing")
            return False
        if verdict.too_large:  # within cheroot's bound (the largest route's), past its route's
            self.simple_response("413 Request Entity Too Large")
            return False
        return True

    def simple_response(self, status: Any, msg: Any = "") -> None:
        status = str(status)
        code = int(status[:3])
        detail = msg.decode("latin-1") if isinstance(msg, bytes) else str(msg or "")
        if code == 413:
            too_large = limits.too_large(self.conn.rfile.limit)
            message = "request headers too large" if "header" in detail else too_large
        else:
            reason = status[4:].lower() or "error"
            message = f"{reason}: {detail}" if detail else reason
        if code >= 400:
            self.close_connection = True
        close = code >= 400 and self.response_protocol == "HTTP/1.1"
        data = json_error(self.server.protocol, status, message, close=close)
        with contextlib.suppress(OSError):
            self.conn.wfile.write(data)


class _Connection(HTTPConnection):
    """A connection whose ``rfile`` is the intake's buffer (see intake.py)."""

    RequestHandlerClass = _JsonRequest

    def __init__(self, server: Any, sock: socket.socket, makefile: Any = MakeFile) -> None:
        def files(sock: socket.socket, mode: str = "r", bufsize: int = -1) -> Any:
            if "r" in mode:
                return RequestReader(
                    sock,
                    max_head=server.max_request_header_size,
                    max_body=server.max_request_body_size,
                    timeout=server.timeout,
                    big_bodies=server.big_bodies,
                )
            return makefile(sock, mode, bufsize)

        super().__init__(server, sock, files)


class _Server(wsgi.Server):
    """A cheroot WSGI server on a socket bound beforehand (see ``bind``)."""

    ConnectionClass = _Connection

    def __init__(self, app: Callable[..., Any], sock: socket.socket, *, threads: int) -> None:
        self._bound = sock
        super().__init__(
            sock.getsockname()[:2],
            app,
            numthreads=threads,
            server_name="ltm",
            request_queue_size=1024,
            timeout=IDLE_TIMEOUT,  # cheroot's name; also the Keep-Alive: timeout= it announces
            shutdown_timeout=10,  # requests in flight get this long to finish on stop
        )
        self.max_request_body_size = limits.LARGEST_BODY  # each route's own: the intake's
        self.big_bodies = BigBodies()
        self.max_request_header_size = MAX_HEADER_BYTES
        # cheroot's default is 10: past that many parked connections every answer
        # closes its connection; parked connections are cheap (a socket each).
        self.keep_alive_conn_limit = MAX_KEEP_ALIVE

    def prepare(self) -> None:
        super().prepare()
        # cheroot's own manager is built but never run: the intake takes its place.
        self._connections._selector.close()
        self._connections = Intake(self, request_timeout=REQUEST_TIMEOUT, idle_timeout=IDLE_TIMEOUT)

    def bind(self, family: int, type: int, proto: int = 0) -> socket.socket:
        self.socket = self._bound
        self.bind_addr = self._bound.getsockname()[:2]
        return self._bound


def bind(host: str, port: int, count: int = 1) -> list[socket.socket]:
    """``count`` listening sockets on one address (SO_REUSEPORT when more than one).

    With several, the kernel spreads new connections across them, one per
    worker process. Port 0 picks a free port for the first; the rest share it.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            if os.name != "nt":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if count > 1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(address)
            sock.listen(1024)
            address = sock.getsockname()  # port 0 resolved: the others join it
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def make_server(
    wsgi_app: Callable[..., Any],
    *,
    threads: int,
    sock: socket.socket | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> Any:
    """A server listening on ``sock`` (else on ``host:port``), its worker threads started."""
    if sock is None:
        sock = bind(host, port)[0]
    server = _Server(wsgi_app, sock, threads=threads)
    server.prepare()
    return server


def run_forever(server: Any, *, on_stop: Callable[[], None] | None = None) -> None:
    """Serve until SIGTERM or SIGINT in this process; requests in flight finish."""
    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        server.serve()
    except Stop:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
        if on_stop is not None:
            on_stop()
        sys.stderr.flush()


def serve(
    wsgi_app: Callable[..., Any],
    sockets: list[socket.socket],
    *,
    threads: int,
    on_stop: Callable[[], None] | None = None,
    writer: Writer | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; finish the requests in flight; return an exit status.

    One socket: this process serves it. Several (POSIX): one worker process is
    forked per extra socket before any thread starts, and this process serves
    the first; a signal stops them all, and a worker that dies stops the rest
    (exit status 1) so that a supervisor restarts the whole server (a worker
    stopped cleanly, by a signal of its own, leaves the rest serving). ``writer``
    (forked already, see writer.py): every process hands it its pushes, and it
    stops last, once every process serving has.
    """
    children: dict[int, int] = {}
    if writer is not None:
        children[writer.pid] = -1
    parent = os.getpid()
    failed: list[int] = []
    died: list[str] = []

    def reap(signum: int, frame: FrameType | None) -> None:
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.pop(pid)
                if status == 0:
                    # A clean stop, on SIGTERM or SIGINT: those reach every process at
                    # once when a supervisor stops the whole group (systemd signals every
                    # process of the unit's cgroup), and this process may see the worker
                    # gone before it handles its own. Its own signal stops it.
                    continue
                failed.append(status)
                who = "the writer process" if writer and pid == writer.pid else "a worker process"
                died.append(f"{who} died ({_how(status)})")  # said outside this handler
                raise Stop(1)

    # From here, a stop signal is a clean stop, even before this process serves.
    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        for index, sock in enumerate(sockets[1:], start=1):

            def work(sock: socket.socket = sock, index: int = index) -> None:
                let_stops_in(stop)  # a stop before it serves: a clean stop all the same
                die_with(parent)
                if writer is not None:
                    writer.attach(index)
                for other in sockets:
                    if other is not sock:
                        other.close()
                run_forever(make_server(wsgi_app, sock=sock, threads=threads), on_stop=on_stop)

            with stops_held():
                pid = os.fork()
                if pid == 0:  # a worker: serves its own socket
                    exit_after(work)
                children[pid] = index
        for sock in sockets[1:]:
            sock.close()
        if writer is not None:
            writer.attach(0)
        if children:
            signal.signal(signal.SIGCHLD, reap)
        run_forever(make_server(wsgi_app, sock=sockets[0], threads=threads), on_stop=on_stop)
    except Stop:
        pass  # a signal outside the serving loop; a failed worker is in `failed`
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if children:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for death in died:  # said here, never from inside the handler (stderr may be mid-write)
            sys.stderr.write(f"ltm server: {death}; stopping\n")
        if children:
            workers = [pid for pid in children if writer is None or pid != writer.pid]
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            for pid in workers:
                _, status = os.waitpid(pid, 0)
                if status:
                    failed.append(status)
        if writer is not None:  # it exits once every process serving closed its ends
            writer.detach()
            if writer.pid in children:
                _, status = os.waitpid(writer.pid, 0)
                if status:
                    failed.append(status)
    return 1 if failed else 0


def _how(status: int) -> str:
    """How a child ended, from its wait status: ``killed by SIGKILL``, ``exit status 1``."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit status {code}"


# The adapter turns these, raised while it reads a chunked body, into its own 413.
BODY_TOO_LARGE_ERRORS: tuple[type[BaseException], ...] = (MaxSizeExceeded,)
