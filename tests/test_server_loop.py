"""The server's I/O loop turns for events, not while a worker sends an answer.

waitress's loop polls every connection with pending output for writing. While a
worker sends an answer (under the buffer's lock, the GIL released for the
system call) the loop would find the socket writable, fail to take the lock, and
turn again at once, holding the GIL the worker needs, for as long as the worker
sends. Counted here: the loop's turns for many answers sent in pieces, by clients
in another process on keep-alive connections, against a plain WSGI app on
``ltm.cli.server.http``'s server.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from timing import scaled
from waitress import wasyncore

from ltm.cli.server import http

CONNECTIONS = 8
REQUESTS = 40  # a connection's
PIECES = 32  # an answer's, each a write of its own by the worker
PIECE = b"x" * 2048


def _app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Length", str(PIECES * len(PIECE)))])
    return iter([PIECE] * PIECES)


_CLIENTS = textwrap.dedent(
    """
    import http.client, sys, threading
    port, connections, requests = map(int, sys.argv[1:])
    failed = []

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(requests):
            conn.request("GET", "/")
            answer = conn.getresponse()
            if answer.status != 200 or len(answer.read()) == 0:
                failed.append(answer.status)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(1 if failed else 0)
    """
)


def test_the_loop_turns_a_few_times_an_answer_not_while_workers_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    turns = 0
    poll = wasyncore.poll2

    def counted(*args: Any, **kwargs: Any) -> None:
        nonlocal turns
        turns += 1
        poll(*args, **kwargs)

    monkeypatch.setattr(wasyncore, "poll2", counted)  # the loop looks it up when it starts
    sock = http.bind("127.0.0.1", 0)
    server = http.make_server(_app, sock, threads=4)
    loop = threading.Thread(target=server.run, daemon=True)
    loop.start()
    try:
        port = sock.getsockname()[1]
        argv = [sys.executable, "-c", _CLIENTS, str(port), str(CONNECTIONS), str(REQUESTS)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(60))
        assert done.returncode == 0, done.stderr
    finally:
        server.close()
        server.task_dispatcher.shutdown()
    answers = CONNECTIONS * REQUESTS
    # An answer costs a turn for its request's bytes and one for the worker's wake-up
    # call; a spinning loop took 6 to 50 (measured on 2 cores).
    assert turns <= 4 * answers, f"{turns} turns of the loop for {answers} answers"
