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

import json
import signal
import sys
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


def make_server(wsgi_app: Callable[..., Any], *, host: str, port: int, threads: int) -> Any:
    """A bound, not yet running, waitress server."""
    server = create_server(
        wsgi_app,
        host=host,
        port=port,
        threads=threads,
        ident="ltm",
        max_request_body_size=MAX_BODY + CHUNK_FRAMING_ROOM,
        clear_untrusted_proxy_headers=False,
        # Waitress logs a queue-depth warning when all threads are busy; that
        # is normal under a benchmark and says nothing actionable here.
        channel_timeout=60,
        connection_limit=1000,
        asyncore_use_poll=True,
    )
    server.channel_class = _Channel
    return server


def run_forever(server: Any, *, on_stop: Callable[[], None] | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then finish the requests in flight and return."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()  # returns after SystemExit/KeyboardInterrupt, having shut the pool down
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.close()
        if on_stop is not None:
            on_stop()
    sys.stderr.flush()
