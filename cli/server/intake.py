"""Read each request whole before a worker thread sees it: slow clients cost sockets, not threads.

cheroot 11 already parks idle keep-alive connections in a selector, off the
worker threads (``cheroot/connections.py``, ``ConnectionManager``; introduced
by https://github.com/cherrypy/cheroot/pull/199). Two holes remain, and the
server has only 4 worker threads per process:

- a newly accepted connection goes straight to a worker thread
  (``ConnectionManager._run``: ``self.server.process_conn(new_conn)``), which
  then blocks reading a request that may never come;
- a worker reads the head and body with blocking reads whose timeout restarts
  with every byte, so a client dribbling a byte a second holds it for ever.

So 8 connections sending half a header stopped the whole server. Here the
selector thread does all the reading instead, without ever blocking: it
collects a connection's bytes until the request is complete (the head, then
the body by Content-Length or chunked framing), and only then queues the
connection for a worker, which parses it from memory. Each request gets
``request_timeout`` seconds in all, from its first byte (from the accept for a
new connection), however it dribbles; after that it gets a JSON 408 and the
connection closes. A connection idle between requests closes after
``idle_timeout``. What is too big or malformed goes to the worker at once, and
cheroot answers it as before (413, 400, 501).

A body may be as big as its route allows (``ltm.limits``: 32 KiB, and 1 MiB for a
batch push). The intake reads the route from the request line, so a request
over its route's bound is refused from its head. What slow clients can make a
process hold stays bounded: the big bodies being received at once share one
budget (``BigBodies``); past it, a request gets the 32 KiB bound every route
takes, and a big body gets time for its bytes past 32 KiB at 32 KiB a second.

The intake and the worker must read a request's framing alike: a head the
intake takes as having no body while cheroot waits for a chunked one held a
worker for the whole timeout. So one reader parses every head
(``StrictHeaders``, cheroot's own with what lets two readers disagree refused
with 400: obsolete line folding, whitespace before a colon, a repeated
Content-Length, Content-Length beside Transfer-Encoding), the intake keeps its
verdict (``Framing``), and the worker serves a request only when cheroot's
reading of the head matches that verdict (``http.py``). A worker never waits
for a byte: a request it gets is whole by that verdict.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from cheroot.connections import ConnectionManager
from cheroot.server import HeaderReader, comma_separated_headers

from ltm import limits

RECV_SIZE = 65_536
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_NOT_HEX = 1024  # a chunk-size line longer than this is malformed: the worker says so


def json_error(protocol: str, status: str, message: str, *, close: bool) -> bytes:
    """A whole HTTP response carrying ``{"error": message}``, as every ltm error looks."""
    body = json.dumps({"error": message}, separators=(",", ":")).encode()
    head = [
        f"{protocol} {status}",
        f"Content-Length: {len(body)}",
        "Content-Type: application/json",
        "Cache-Control: no-store",
    ]
    if close and protocol == "HTTP/1.1":
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


TIMED_OUT = json_error("HTTP/1.1", "408 Request Timeout", "request timeout", close=True)
_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
# Per process, whatever the descriptor limit allows: each may buffer up to a
# 64 KiB head, so this also bounds what slow clients can make it hold (64 MiB).
MAX_CONNECTIONS = 1024
# The bodies past 32 KiB being received at once, per process (64 batches at their bound).
BIG_BODY_BUDGET = 64 * limits.MAX_BATCH_BODY
BIG_BODY_RATE = 32 * 1024  # bytes a second a big body's bytes past 32 KiB get time for


class BigBodies:
    """The budget of a process's big bodies in flight, shared by its connections."""

    def __init__(self, budget: int = BIG_BODY_BUDGET) -> None:
        self.budget = budget
        self.held = 0
        self._lock = threading.Lock()  # readers are judged on the selector and worker threads

    def take(self, size: int) -> bool:
        with self._lock:
            if self.held + size > self.budget:
                return False
            self.held += size
            return True

    def give_back(self, size: int) -> None:
        with self._lock:
            self.held -= size


def connection_limit() -> int:
    """How many connections a process keeps open at most: below its descriptor limit.

    Past it, a new connection closes the parked connection that matters least
    (see ``Intake._evict``), so a flood of idle connections cannot lock newer
    clients out; half the limit (at least 256 descriptors) stays free for the
    database, the log and the connections the workers hold.
    """
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 512
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 2, soft - 256))


class StrictHeaders(HeaderReader):
    """cheroot's header reader (its key case, its comma-joined headers), stricter where it matters.

    Refused with 400 (a ``ValueError``, which cheroot answers as such), each
    a way for two readers of one head to frame its body differently:

    - obsolete line folding, a line starting with a space or a tab: RFC 9112
      §5.2 lets a server refuse it with 400, and cheroot would otherwise join
      it to the header before (``Transfer-Encoding:`` then `` chunked``);
    - whitespace between a header's name and its colon (RFC 9112 §5.1: MUST
      be refused with 400), and a line with no name or no colon;
    - a repeated Content-Length, and Content-Length beside Transfer-Encoding
      (RFC 9112 §6.3: "ought to be handled as an error"; request smuggling).

    https://www.rfc-editor.org/rfc/rfc9112#section-5.2
    """

    def __call__(self, rfile: Any, hdict: dict[bytes, bytes] | None = None) -> dict[bytes, bytes]:
        headers: dict[bytes, bytes] = {} if hdict is None else hdict
        while True:
            line = rfile.readline()
            if not line:
                raise ValueError("Illegal end of headers.")
            if line == b"\r\n":
                break
            if not line.endswith(b"\r\n"):
                raise ValueError("HTTP requires CRLF terminators")
            if line[:1] in (b" ", b"\t"):
                raise ValueError("obsolete line folding is not accepted")
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise ValueError("Illegal header line.")
            key = self._transform_key(name)
            value = value.strip()
            if not self._allow_header(key):
                continue
            if key == b"Content-Length" and key in headers:
                raise ValueError("more than one Content-Length")
            if key in comma_separated_headers and headers.get(key):
                value = b", ".join((headers[key], value))
            headers[key] = value
        if b"Content-Length" in headers and b"Transfer-Encoding" in headers:
            raise ValueError("Content-Length and Transfer-Encoding together")
        return headers


STRICT_HEADERS = StrictHeaders()


@dataclass(frozen=True, slots=True)
class Framing:
    """Where a request's body ends, as read from its head: the intake's verdict."""

    chunked: bool = False
    length: int = 0  # the Content-Length (0 when chunked or absent)
    expect: bool = False  # the client waits for "100 Continue" before sending the body
    limit: int = field(default=0, compare=False)  # the route's bound on the body
    too_large: bool = False  # over the route's bound (within cheroot's): the worker says 413


def framing(head: bytes, *, max_body: int) -> Framing | None:
    """The framing of ``head`` (request line through the empty line) as cheroot reads it.

    None when cheroot refuses the head by itself (400, 413, 501, 505): the
    worker answers it at once, from the head alone. The request line's
    version is read as cheroot 11 reads it (``HTTPRequest.read_request_line``:
    Transfer-Encoding counts for HTTP/1.1 only), and the checks run in
    ``read_request_headers``'s order: Content-Length first, then the codings.
    ``max_body`` is cheroot's bound, the largest any route takes; ``limit`` is
    the route's (no more than ``max_body``).
    """
    stream = io.BytesIO(head)
    line = stream.readline()
    try:
        method, target, protocol = line.strip().split(b" ", 2)
        if not line.endswith(b"\r\n") or not protocol.startswith(b"HTTP/"):
            return None
        major, minor = protocol[5:].split(b".", 1)
        version = (int(major), int(minor))
        headers = STRICT_HEADERS(stream)
        length = int(headers.get(b"Content-Length", 0))
    except ValueError:
        return None
    if version > (1, 1) or version[0] != 1 or length < 0:
        return None
    codings: list[bytes] = []
    if version == (1, 1) and (te := headers.get(b"Transfer-Encoding")):
        codings = [c.strip().lower() for c in te.split(b",") if c.strip()]
    expect = headers.get(b"Expect", b"") == b"100-continue"
    limit = min(max_body, limits.MAX_BODY)  # what every route takes (a route: no less)
    if codings or length > limit:
        limit = min(max_body, limits.body_limit(method.decode("latin-1"), _route_path(target)))
    if codings:
        if any(c != b"chunked" for c in codings):
            return None  # 501
        return Framing(chunked=True, expect=expect, limit=limit)
    return Framing(length=length, expect=expect and length > 0, limit=limit)


def _route_path(target: bytes) -> str:
    """The path a request line's target names, percent-decoded as cheroot gives it to the
    app (an absolute-form target too); only compared with the routes' paths."""
    path = target.split(b"?", 1)[0]
    if not path.startswith(b"/"):
        path = urlsplit(path).path
    return unquote_to_bytes(path).decode("latin-1")


class RequestReader:
    """A connection's ``rfile``: the bytes received so far, and whether a whole request is in.

    The selector thread ``feed``s it and asks ``complete()``; the worker thread
    then reads the request with ``readline``/``read`` (what cheroot calls),
    served from memory, and never waits on the socket (see ``_fill``).
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        max_head: int,
        max_body: int,
        timeout: float,
        big_bodies: BigBodies | None = None,
    ):
        self._sock = sock
        self._buf = bytearray()
        self.max_head = max_head
        self.max_body = max_body  # cheroot's: the largest body any route takes
        self.big_bodies = big_bodies or BigBodies()
        self._big = 0  # what the current request holds of ``big_bodies``
        self.timeout = timeout  # the socket's timeout while a worker owns it (for writes)
        self.bytes_read = 0
        self.closed = False
        self.deadline = 0.0  # time.monotonic() by which the current request must be in
        self.idle = False  # between requests: no byte of the next one yet
        self.continued = False  # "100 Continue" was sent for the current request
        self.reset()

    # -- the selector thread's side --------------------------------------

    def reset(self) -> None:
        """Start judging a new request: the one at the front of the buffer."""
        self._release()
        self._scan = 0  # where to resume looking for the end of the head
        self._head_end: int | None = None
        self._need: int | None = None  # the request's total size, when known
        self._chunked = False
        self._chunk_pos = 0
        self._chunk_data = 0
        self._trailer = False
        self._ready = False
        self.framing: Framing | None = None  # the verdict on the current request's head
        self.continued = False

    def feed(self, data: bytes) -> None:
        self._buf += data

    def started(self) -> bool:
        """Whether a byte of the next request is in, beyond the line ends cheroot leaves.

        cheroot reads a chunked body up to its last chunk and leaves the final
        empty line, skipping it before the next request (RFC 9112 §2.2).
        """
        return len(self._buf) > 2 or bool(self._buf.lstrip(b"\r\n"))  # never copies much

    def wants_continue(self) -> bool:
        """The client waits for "100 Continue" before it sends the body, and has none yet."""
        return self.framing is not None and self.framing.expect and not self.continued

    def complete(self) -> bool:
        """Whether a worker can take the request now: whole, or bad enough to refuse as it is."""
        if not self._ready:
            self._ready = self._judge()
            if self._ready:
                self._release()  # received: what a worker holds, the workers bound
        return self._ready

    @property
    def limit(self) -> int:
        """The current request's bound on its body: its route's, within the budget."""
        return self.framing.limit if self.framing is not None else limits.MAX_BODY

    def _release(self) -> None:
        if self._big:
            self.big_bodies.give_back(self._big)
            self._big = 0

    def _bounded(self, verdict: Framing) -> Framing:
        """``verdict`` held to its route's bound, and to the budget of big bodies: one past
        32 KiB takes its share (a chunked one: its route's whole bound), or gets 32 KiB."""
        limit = verdict.limit
        if verdict.length > limit:
            return replace(verdict, too_large=True)
        wanted = limit if verdict.chunked else verdict.length
        if wanted <= limits.MAX_BODY:
            return verdict  # most requests: within what every route takes
        if self.big_bodies.take(wanted):
            self._big = wanted
            self.deadline += (wanted - limits.MAX_BODY) / BIG_BODY_RATE
            return verdict
        return replace(verdict, limit=limits.MAX_BODY, too_large=verdict.length > limits.MAX_BODY)

    def _judge(self) -> bool:
        buf = self._buf
        if self._head_end is None:
            # cheroot skips one empty line where a request line is expected (RFC 9112 §2.2).
            start = 2 if buf[:2] == b"\r\n" else 1 if buf[:1] == b"\n" else 0
            scan = max(self._scan, start)
            # A bare-LF end of head is malformed; it ends the head too, for cheroot to refuse.
            found = [i for i in (buf.find(b"\r\n\r\n", scan), buf.find(b"\n\n", scan)) if i >= 0]
            if not found:
                self._scan = max(start, len(buf) - 3)
                # Past the header limit: cheroot refuses it from what is here (413).
                return len(buf) > self.max_head
            end = min(found)
            self._head_end = end + (4 if buf[end : end + 4] == b"\r\n\r\n" else 2)
            verdict = framing(bytes(buf[start : self._head_end]), max_body=self.max_body)
            if verdict is None:
                return True  # refused from the head alone: the worker says why, at once
            self.framing = verdict = self._bounded(verdict)
            if verdict.too_large:
                return True  # 413 from the head alone (the worker sees ``too_large``)
            if verdict.chunked:
                self._chunked = True
                self._chunk_pos = self._head_end
            else:
                self._need = self._head_end + verdict.length
        if self._chunked:
            return self._chunks_complete()
        return self._need is not None and len(buf) >= self._need

    def _chunks_complete(self) -> bool:
        buf = self._buf
        if len(buf) > self.max_head + 4 * self.limit:
            return True  # framing out of all proportion (chunk extensions): the worker decides
        while True:
            line_end = buf.find(b"\n", self._chunk_pos)
            if line_end < 0:
                return len(buf) - self._chunk_pos > _NOT_HEX
            line = bytes(buf[self._chunk_pos : line_end])
            if self._trailer:
                self._chunk_pos = line_end + 1
                if line in (b"", b"\r"):
                    return True  # the empty line after the last chunk (and any trailers)
                continue
            try:
                size = int(line.split(b";", 1)[0], 16)  # as cheroot's ChunkedRFile parses it
            except ValueError:
                return True  # 400 from cheroot
            if size == 0:
                self._trailer = True
                self._chunk_pos = line_end + 1
                continue
            if size < 0:
                return True  # 400 from cheroot
            if self._chunk_data + size > self.limit:
                assert self.framing is not None
                self.framing = replace(self.framing, too_large=True)
                return True  # 413 from the worker
            end = line_end + 1 + size + 2
            if len(buf) < end:
                return False
            self._chunk_data += size
            self._chunk_pos = end

    # -- the worker thread's side (what cheroot's parser calls) -----------

    def _fill(self) -> bool:
        """Take in what more has arrived, never waiting for it; False at EOF.

        A worker gets the connection once the request is whole by the intake's
        verdict, which the worker checks it shares, so it needs no byte more.
        Should it ask for one all the same, waiting would hold a worker thread
        on a client's whim: it gets a ``TimeoutError`` at once (what cheroot
        and the adapter answer 408 to), and the connection closes.
        """
        self._sock.settimeout(0.0)
        try:
            data = self._sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            raise TimeoutError("timed out") from None
        finally:
            self._sock.settimeout(self.timeout)
        self._buf += data
        return bool(data)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:  # all there is: what has arrived, up to EOF
            with contextlib.suppress(TimeoutError):
                while self._fill():
                    pass
            size = len(self._buf)
        while len(self._buf) < size and self._fill():
            pass
        data = bytes(self._buf[:size])
        del self._buf[:size]
        self.bytes_read += len(data)
        return data

    def readline(self, size: int | None = -1) -> bytes:
        limit = size if size is not None and size >= 0 else None
        scanned = 0
        while True:
            end = self._buf.find(b"\n", scanned, limit)
            if end >= 0:
                return self.read(end + 1)
            if limit is not None and len(self._buf) >= limit:
                return self.read(limit)
            scanned = len(self._buf)
            if not self._fill():
                return self.read(len(self._buf))

    def close(self) -> None:
        self.closed = True
        self._release()


class Intake(ConnectionManager):
    """cheroot's connection manager, reading requests in its selector thread (see the module)."""

    def __init__(
        self,
        server: Any,
        *,
        request_timeout: float,
        idle_timeout: float,
        max_connections: int | None = None,
    ) -> None:
        super().__init__(server)
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections or connection_limit()

    # The worker hands back a connection it kept open after a response.
    def put(self, conn: Any) -> None:
        conn.last_used = time.time()
        reader: RequestReader = conn.rfile
        reader.reset()
        now = time.monotonic()
        reader.idle = not reader.started()
        if reader.idle:
            reader.deadline = now + self.idle_timeout
        else:  # the client sent its next request already (pipelining)
            reader.deadline = now + self.request_timeout
            if reader.complete():
                self.server.process_conn(conn)
                return
        conn.socket.settimeout(0.0)
        self._selector.register(conn.socket.fileno(), selectors.EVENT_READ, data=conn)

    def _run(self, expiration_interval: float) -> None:
        """cheroot's ``ConnectionManager._run``, but new and readable connections are read here."""
        last_check = time.monotonic()
        while not self._stop_requested:
            try:
                ready = list(self._selector.select(timeout=expiration_interval))
            except OSError:
                self._remove_invalid_sockets()
                continue
            for fd, conn in ready:
                if conn is self.server:
                    self._accept()
                else:
                    self._receive(fd, conn)
            now = time.monotonic()
            if now - last_check >= expiration_interval:
                self._expire_due(now)
                last_check = now

    def _accept(self) -> None:
        """Take a new connection; at the limit, make room by closing the least useful one."""
        try:
            conn = self._from_server_socket(self.server.socket)
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS:
                raise
            # cheroot would raise out of its loop, retry at once, and never get to
            # expire anything: the server would spin until the clients left.
            if not self._evict():
                time.sleep(0.01)  # every descriptor is with a worker: they free soon
            return
        if conn is None:
            return
        if self._num_connections >= self.max_connections:
            self._evict()
        self._admit(conn)

    def _evict(self) -> bool:
        """Close the parked connection that matters least: idle ones first, soonest due first."""
        parked = [
            (conn.rfile.started(), conn.rfile.deadline, fd, conn)
            for fd, conn in self._selector.connections
            if conn is not self.server
        ]
        if not parked:
            return False
        _started, _deadline, fd, conn = min(parked, key=lambda p: (p[0], p[1]))
        self._selector.unregister(fd)
        with contextlib.suppress(OSError):
            conn.close()
        return True

    def _admit(self, conn: Any) -> None:
        conn.last_used = time.time()
        conn.rfile.deadline = time.monotonic() + self.request_timeout
        conn.socket.settimeout(0.0)  # the selector thread must never block on it
        self._selector.register(conn.socket.fileno(), selectors.EVENT_READ, data=conn)

    def _receive(self, fd: int, conn: Any) -> None:
        reader: RequestReader = conn.rfile
        try:
            data = conn.socket.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return  # woken for nothing: stay registered
        except OSError:
            data = b""
        if not data:  # the client went away
            self._selector.unregister(fd)
            conn.close()
            return
        if reader.idle:  # the first byte of the next request: its time starts now
            reader.idle = False
            reader.deadline = time.monotonic() + self.request_timeout
        reader.feed(data)
        if reader.complete():
            self._selector.unregister(fd)
            conn.socket.settimeout(reader.timeout)
            self.server.process_conn(conn)
        elif reader.wants_continue():
            reader.continued = True
            with contextlib.suppress(OSError):
                conn.socket.send(CONTINUE)

    def _expire_due(self, now: float) -> None:
        """Close connections past their deadline; a half-received request first gets a 408."""
        due = [
            (fd, conn)
            for fd, conn in self._selector.connections
            if conn is not self.server and conn.rfile.deadline <= now
        ]
        for fd, conn in due:
            self._selector.unregister(fd)
            if conn.rfile.started():
                with contextlib.suppress(OSError):
                    conn.socket.send(TIMED_OUT)
            with contextlib.suppress(OSError):
                conn.close()
