"""The HTTP server behind ``ltm server run``: waitress, with JSON errors.

waitress is a production WSGI server (no C extension, so it runs wherever
Python does): an asyncio-style loop reads and buffers requests, a pool of
worker threads runs the app. Two adjustments make it speak the protocol:

- the errors waitress produces itself (malformed HTTP, a body over the limit,
  headers too large) are JSON ``{"error": ...}`` like every other error;
- a request whose Content-Length is over the 32 KiB limit is refused as soon
  as its headers are read, before a byte of its body; a chunked body is cut
  off once it passes the limit (plus a little room for the chunk framing).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import create_server
from waitress.task import ErrorTask
from waitress.utilities import RequestEntityTooLarge

from .wsgi import MAX_BODY

CHUNK_FRAMING_ROOM = 4096


class _JsonErrorTask(ErrorTask):
    def execute(self) -> None:
        error = self.request.error
        if error.code == 413:
            message = f"request body too large (max {MAX_BODY} bytes)"
        else:
            message = f"{error.reason.lower()}: {error.body}"
        body = json.dumps({"error": message}, separators=(",", ":")).encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.extend(
            [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        )
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _LimitedParser(HTTPRequestParser):
    """Refuse an oversized Content-Length the moment the headers are complete."""

    def received(self, data: bytes) -> int:
        was_reading_headers = not self.headers_finished
        consumed: int = super().received(data)
        if (
            was_reading_headers
            and self.headers_finished
            and not self.error
            and self.content_length > MAX_BODY
        ):
            self.error = RequestEntityTooLarge(f"request body too large (max {MAX_BODY} bytes)")
            self.completed = True
        return consumed


class _Channel(HTTPChannel):
    error_task_class = _JsonErrorTask
    parser_class = _LimitedParser


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
    """A waitress server on ``sock`` (else on ``host:port``); its worker threads start at once."""
    if sock is None:
        sock = bind(host, port)[0]
    server = create_server(
        wsgi_app,
        sockets=[sock],
        threads=threads,
        ident="ltm",
        max_request_body_size=MAX_BODY + CHUNK_FRAMING_ROOM,
        clear_untrusted_proxy_headers=False,
        channel_timeout=60,
        connection_limit=1000,
        asyncore_use_poll=True,
    )
    server.channel_class = _Channel
    return server


class _Stop(SystemExit):
    pass


def serve(
    wsgi_app: Callable[..., Any],
    sockets: list[socket.socket],
    *,
    threads: int,
    on_stop: Callable[[], None] | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; finish the requests in flight; return an exit status.

    One socket: this process serves it. Several (POSIX): one worker process is
    forked per extra socket before any thread starts, and this process serves
    the first; a signal stops them all, and a worker that dies stops the rest
    (exit status 1) so that a supervisor restarts the whole server.
    """
    children: dict[int, int] = {}
    for index, sock in enumerate(sockets[1:], start=1):
        pid = os.fork()
        if pid == 0:  # a worker: serve its own socket, never return into the CLI
            status = 0
            try:
                for other in sockets:
                    if other is not sock:
                        other.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _serve_one(wsgi_app, sock, threads=threads, on_stop=on_stop)
            except _Stop as stop:  # a signal outside the serving loop: still a clean stop
                status = int(stop.code or 0)
            except BaseException:
                traceback.print_exc()
                status = 1
            finally:
                sys.stderr.flush()
                os._exit(status)
        children[pid] = index
    for sock in sockets[1:]:
        sock.close()

    failed: list[int] = []

    def reap(signum: int, frame: FrameType | None) -> None:
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.pop(pid)
                failed.append(status)
                raise _Stop(1)

    if children:
        signal.signal(signal.SIGCHLD, reap)
    try:
        _serve_one(wsgi_app, sockets[0], threads=threads, on_stop=on_stop)
    except _Stop:
        pass  # a signal outside the serving loop; a failed worker is in `failed`
    finally:
        if children:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for pid in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            for pid in children:
                _, status = os.waitpid(pid, 0)
                if status:
                    failed.append(status)
    return 1 if failed else 0


def _serve_one(
    wsgi_app: Callable[..., Any],
    sock: socket.socket,
    *,
    threads: int,
    on_stop: Callable[[], None] | None,
) -> None:
    run_forever(make_server(wsgi_app, sock=sock, threads=threads), on_stop=on_stop)


def run_forever(server: Any, *, on_stop: Callable[[], None] | None = None) -> None:
    """Run one server in this process until SIGTERM or SIGINT; requests in flight finish."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stop(0)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()  # returns after SystemExit, having let the worker threads finish
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.close()
        if on_stop is not None:
            on_stop()
        sys.stderr.flush()
