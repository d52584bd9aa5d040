"""Slow clients cost ``ltm server run`` a socket each, never a worker thread.

The server (its defaults: 2 processes x 4 worker threads on this box) reads
every request whole in its selector thread before a worker sees it; a request
has ``REQUEST_TIMEOUT`` seconds from its first byte, however it dribbles, and
an idle connection closes after ``IDLE_TIMEOUT``. Here 64 slow clients (silent,
half a header, a header a byte a second, a body a byte a second, idle
keep-alive) must not stop ``/v1/healthz`` answering within 1 s, and must all be
disconnected in the end. Bounded: every wait has a deadline, and every socket
is closed on the way out.
"""

from __future__ import annotations

import contextlib
import io
import json
import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from serverkit import LTM, Server, init_db, packet_id, run_server, running_server

from ltm import limits
from ltm.cli.server.http import IDLE_TIMEOUT, REQUEST_TIMEOUT
from ltm.cli.server.intake import BIG_BODY_RATE, STRICT_HEADERS, BigBodies, Framing, RequestReader
from ltm.cli.server.wsgi import ChaliceWSGI

HEALTHZ = b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n"
SLACK = 6.0  # the expiry runs every 0.5 s; the box is shared and loaded


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("slow")) as server:
        yield server


def address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


@dataclass
class Slow:
    kind: str
    sock: socket.socket
    script: bytes = b""  # what it dribbles, one byte a second
    sent: int = 0
    received: bytearray = field(default_factory=bytearray)
    opened: float = field(default_factory=time.monotonic)
    closed_at: float | None = None


class Replies:
    """The responses on one connection, in order (several may come in one recv)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = b""

    def _more(self) -> None:
        chunk = self.sock.recv(4096)
        assert chunk, f"closed before a whole response: {self.pending!r}"
        self.pending += chunk

    def next(self) -> bytes:
        """One whole response with a Content-Length body (or an interim one)."""
        while b"\r\n\r\n" not in self.pending:
            self._more()
        head, _, rest = self.pending.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(rest) < length:
            self._more()
            head, _, rest = self.pending.partition(b"\r\n\r\n")
        self.pending = rest[length:]
        return head + b"\r\n\r\n" + rest[:length]

    def rest(self) -> bytes:
        """Everything else until the server closes the connection."""
        while chunk := self.sock.recv(4096):
            self.pending += chunk
        return self.pending


def read_response(sock: socket.socket) -> bytes:
    return Replies(sock).next()


def open_slow(server: Server, kind: str) -> Slow:
    sock = socket.create_connection(address(server), timeout=10)
    if kind == "partial":  # half a header, then silence
        sock.sendall(b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\nX-Half: ")
        return Slow(kind, sock)
    if kind == "dribble":  # slowloris: an endless head, a byte a second
        sock.sendall(b"GET /v1/healthz HTTP/1.1\r\n")
        return Slow(kind, sock, script=b"X-a: b\r\n" * 100)
    if kind == "slow-body":  # a whole head, then the body a byte a second
        sock.sendall(
            b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400\r\n\r\n"
        )
        return Slow(kind, sock, script=b" " * 400)
    if kind == "idle":  # one request answered, then an idle keep-alive connection
        sock.sendall(HEALTHZ)
        assert read_response(sock).startswith(b"HTTP/1.1 200 ")
        return Slow(kind, sock)
    assert kind == "silent"
    return Slow(kind, sock)


@contextmanager
def slow_clients(server: Server, kinds: list[str]) -> Iterator[list[Slow]]:
    """Open the clients; a thread dribbles their bytes and notes when each is closed."""
    clients: list[Slow] = []
    stop = threading.Event()
    try:
        for kind in kinds:
            clients.append(open_slow(server, kind))
        watcher = selectors.DefaultSelector()
        for client in clients:
            client.sock.setblocking(False)
            watcher.register(client.sock, selectors.EVENT_READ, client)

        def run() -> None:
            next_byte = time.monotonic() + 1
            while not stop.is_set() and watcher.get_map():
                for key, _ in watcher.select(timeout=0.1):
                    client = key.data
                    try:
                        chunk = client.sock.recv(4096)
                    except BlockingIOError:
                        continue
                    except OSError:  # reset: closed too
                        chunk = b""
                    client.received += chunk
                    if not chunk:
                        client.closed_at = time.monotonic()
                        watcher.unregister(client.sock)
                if time.monotonic() >= next_byte:
                    next_byte += 1
                    for client in clients:
                        if client.closed_at is None and client.sent < len(client.script):
                            try:
                                client.sock.send(client.script[client.sent : client.sent + 1])
                                client.sent += 1
                            except OSError:
                                pass  # closed by the server: the watcher sees it

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        yield clients
        stop.set()
        thread.join(timeout=10)
    finally:
        stop.set()
        for client in clients:
            client.sock.close()


def wait_until_closed(clients: list[Slow], deadline: float) -> None:
    while time.monotonic() < deadline and any(c.closed_at is None for c in clients):
        time.sleep(0.1)


def healthz_seconds(server: Server) -> float:
    """One GET /v1/healthz on a new connection: how long until the whole answer was in."""
    started = time.monotonic()
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(HEALTHZ)
        reply = read_response(sock)
    elapsed = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 200 "), reply
    return elapsed


def test_64_slow_clients_neither_stop_healthz_nor_stay(server: Server) -> None:
    kinds = ["silent", "partial", "dribble", "slow-body", "idle"] * 12 + ["dribble"] * 4
    assert len(kinds) == 64
    with slow_clients(server, kinds) as clients:
        started = time.monotonic()
        # Through the whole window in which every slow request is still pending.
        timings = []
        while time.monotonic() < started + REQUEST_TIMEOUT - 0.5:
            timings.append(healthz_seconds(server))
            time.sleep(0.1)
        assert timings and max(timings) < 1.0, timings
        # A normal client on a keep-alive connection is served meanwhile too.
        with httpx.Client(base_url=server.url, timeout=5) as client:
            assert client.get("/v1/healthz").status_code == 200
            assert client.get("/v1/healthz").status_code == 200

        pending = [c for c in clients if c.kind != "idle"]
        wait_until_closed(pending, max(c.opened for c in pending) + REQUEST_TIMEOUT + SLACK)
        for client in pending:
            assert client.closed_at is not None, f"{client.kind} client still open"
            assert client.closed_at - client.opened < REQUEST_TIMEOUT + SLACK
        # Dribbling did not buy time: the slowloris was cut mid-request, a few bytes in.
        for client in (c for c in pending if c.script):
            assert 0 < client.sent < REQUEST_TIMEOUT + SLACK < len(client.script)
        # A half-received request is told why; a silent connection is just closed.
        for client in pending:
            if client.kind == "partial":
                reply = bytes(client.received)
                assert reply.startswith(b"HTTP/1.1 408 "), reply
                assert json.loads(reply.partition(b"\r\n\r\n")[2]) == {"error": "request timeout"}
            elif client.kind == "silent":
                assert client.received == b""

        idle = [c for c in clients if c.kind == "idle"]
        wait_until_closed(idle, max(c.opened for c in idle) + IDLE_TIMEOUT + SLACK)
        for client in idle:
            assert client.closed_at is not None, "an idle keep-alive connection stayed open"
            assert client.received == b""  # closed quietly, as HTTP allows between requests
    assert healthz_seconds(server) < 1.0


# One reader of a head disagreeing with the other: the intake took this as having no body,
# cheroot (joining the folded line) as chunked, and a worker waited the whole timeout.
FOLDED = (
    b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n",
    b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\t10\r\n\r\n",
)


def test_a_flood_of_folded_headers_is_refused_at_once_and_healthz_keeps_answering(
    server: Server,
) -> None:
    """16 folded heads (twice the worker threads), each answered 400 without holding a worker."""
    socks: list[socket.socket] = []
    try:
        for n in range(16):
            sock = socket.create_connection(address(server), timeout=REQUEST_TIMEOUT + SLACK)
            socks.append(sock)
            sock.sendall(FOLDED[n % 2])
        timings = [healthz_seconds(server) for _ in range(5)]
        assert max(timings) < 1.0, timings
        for sock in socks:
            head, _, body = read_response(sock).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in head, head
            message = "bad request: obsolete line folding is not accepted"
            assert json.loads(body) == {"error": message}
    finally:
        for sock in socks:
            sock.close()
    assert healthz_seconds(server) < 1.0


@pytest.mark.parametrize(
    ("request_bytes", "message"),
    [
        (b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n", "obsolete line folding"),
        (b"GET /v1/healthz HTTP/1.1\r\nHost : x\r\n\r\n", "Illegal header line."),
        (
            b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            b"Content-Length: 0\r\n\r\nhi",
            "more than one Content-Length",
        ),
        (
            b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "Content-Length and Transfer-Encoding together",
        ),
    ],
)
def test_heads_two_readers_could_frame_differently_are_400(
    server: Server, request_bytes: bytes, message: str
) -> None:
    with socket.create_connection(address(server), timeout=REQUEST_TIMEOUT + SLACK) as sock:
        sock.sendall(request_bytes)
        head, _, body = read_response(sock).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), head
    assert json.loads(body)["error"].startswith(f"bad request: {message}")


def send_in_pieces(server: Server, request: bytes, size: int) -> bytes:
    """Send ``request`` in ``size``-byte TCP segments, a little apart; the response."""
    with socket.create_connection(address(server), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for at in range(0, len(request), size):
            sock.sendall(request[at : at + size])
            time.sleep(0.005)
        return read_response(sock)


# Run ``ltm server run`` under a descriptor limit of 64, so that it parks 8 connections at most.
UNDER_64_FDS = (
    "import os, resource as r, sys;"
    "r.setrlimit(r.RLIMIT_NOFILE, (64, r.getrlimit(r.RLIMIT_NOFILE)[1]));"
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def test_a_flood_of_connections_past_the_limit_evicts_the_idle_ones(tmp_path: Path) -> None:
    """At its connection limit the server closes the oldest idle connection, not the newest."""
    db = tmp_path / "server.db"
    root = init_db(db)
    command = [sys.executable, "-c", UNDER_64_FDS, LTM, "server", "run", "--db", str(db)]
    server = run_server(db, tmp_path / "server.log", root, "--workers", "1", command=command)
    flood: list[socket.socket] = []
    try:
        for _ in range(40):
            flood.append(socket.create_connection(address(server), timeout=5))
        assert healthz_seconds(server) < 1.0  # long before the 5 s the silent ones may take
        closed = 0
        for sock in flood:
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                closed += sock.recv(1) == b""  # EOF: the server closed it
        assert closed >= 40 - 8, closed  # all but the limit's worth were evicted at once
        assert server.proc.poll() is None
    finally:
        for sock in flood:
            sock.close()
        server.stop()


def test_a_request_split_across_packets_is_served_whole(server: Server) -> None:
    body = json.dumps({"ltm_version": "0.2"}).encode()
    request = (
        b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    reply = send_in_pieces(server, request, 7)
    assert reply.startswith(b"HTTP/1.1 401 "), reply  # parsed whole: no token


def test_pipelined_requests_are_each_answered(server: Server) -> None:
    with socket.create_connection(address(server), timeout=10) as sock:
        sock.sendall(HEALTHZ * 3)
        replies = Replies(sock)
        answers = [replies.next() for _ in range(3)]
    assert all(r.startswith(b"HTTP/1.1 200 ") for r in answers)


def test_a_pipelined_half_request_times_out_after_the_whole_one(server: Server) -> None:
    with socket.create_connection(address(server), timeout=REQUEST_TIMEOUT + SLACK) as sock:
        sock.sendall(HEALTHZ + b"GET /v1/healthz HTTP/1.1\r\nHo")
        replies = Replies(sock)
        assert replies.next().startswith(b"HTTP/1.1 200 ")
        rest = replies.rest()
    assert rest.startswith(b"HTTP/1.1 408 "), rest


def test_expect_100_continue_gets_one_interim_answer_then_the_final_one(server: Server) -> None:
    body = b'{"ltm_version":"0.2"}'
    with socket.create_connection(address(server), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        replies = Replies(sock)
        assert replies.next() == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        reply = replies.next()
    assert reply.startswith(b"HTTP/1.1 401 "), reply
    assert b"100 Continue" not in reply


def test_a_chunked_body_sent_in_pieces_is_served(server: Server) -> None:
    _user, token = server.issue("chunky")
    packet = json.dumps(
        {
            "ltm_version": "0.2",
            "id": packet_id(),
            "created_at": "2026-05-01T12:00:00Z",
            "goal": "Chunks",
            "next_step": "More chunks",
        }
    ).encode()
    chunks = b"".join(
        b"%x\r\n" % len(packet[i : i + 10]) + packet[i : i + 10] + b"\r\n"
        for i in range(0, len(packet), 10)
    )
    request = (
        b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    )
    reply = send_in_pieces(server, request, 25)
    assert reply.startswith(b"HTTP/1.1 201 "), reply


# -- when is a request whole? (the intake's judgement, byte by byte) -------------------------


@contextmanager
def connected_reader() -> Iterator[tuple[RequestReader, socket.socket]]:
    """A reader on one end of a socket pair (limits: 200-byte head, 100-byte body), the peer."""
    left, right = socket.socketpair()
    try:
        yield RequestReader(left, max_head=200, max_body=100, timeout=1), right
    finally:
        left.close()
        right.close()


def judged(data: bytes) -> list[bool]:
    """``complete()`` after each byte of ``data`` is fed, one at a time."""
    with connected_reader() as (reader, _peer):
        answers = []
        for byte in data:
            reader.feed(bytes([byte]))
            answers.append(reader.complete())
        return answers


def whole_only_at_the_end(data: bytes) -> bool:
    return judged(data) == [False] * (len(data) - 1) + [True]


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",  # the empty line cheroot skips
        b"POST / HTTP/1.1\r\ncontent-LENGTH: 5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n",
        # HTTP/1.0: cheroot ignores Transfer-Encoding, so the head is the request
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
)
def test_a_request_is_whole_at_its_last_byte_and_not_before(request_bytes: bytes) -> None:
    assert whole_only_at_the_end(request_bytes)


@pytest.mark.parametrize(
    ("head", "why"),
    [
        (b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", "413 before the body"),
        (b"POST / HTTP/1.1\r\nContent-Length: nope\r\n\r\n", "400"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "501"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", "413"),
        (b"GET / HTTP/1.1\nHost: x\n\n", "400: bare LF"),
    ],
)
def test_a_request_refused_from_what_is_in_goes_to_a_worker_at_once(head: bytes, why: str) -> None:
    assert judged(head)[-1] is True, why


def big_head(path: bytes, length: int) -> bytes:
    return b"POST " + path + b" HTTP/1.1\r\nContent-Length: " + str(length).encode() + b"\r\n\r\n"


@contextmanager
def route_reader(budget: BigBodies) -> Iterator[RequestReader]:
    """A reader with the server's own bounds (cheroot's: the largest route's)."""
    left, right = socket.socketpair()
    try:
        yield RequestReader(
            left, max_head=1024, max_body=limits.LARGEST_BODY, timeout=1, big_bodies=budget
        )
    finally:
        left.close()
        right.close()


@pytest.mark.parametrize(
    ("path", "bound"),
    [
        (b"/v1/packets/batch", limits.MAX_BATCH_BODY),
        (b"/v1/packets/batch?team=core&lenient=true", limits.MAX_BATCH_BODY),
        (b"/v1/packets/%62atch", limits.MAX_BATCH_BODY),  # as the app sees the path
        (b"http://x/v1/packets/batch", limits.MAX_BATCH_BODY),  # an absolute-form target
        (b"/mcp", limits.MAX_MCP_BODY),
        (b"/v1/packets", limits.MAX_BODY),
        (b"/v1/packets/batch/x", limits.MAX_BODY),
    ],
)
def test_the_intake_holds_a_body_to_its_routes_bound(path: bytes, bound: int) -> None:
    with route_reader(BigBodies()) as reader:
        reader.feed(big_head(path, bound))
        assert not reader.complete()  # at the bound: the body is waited for
        assert reader.framing is not None and reader.framing.limit == bound
    with route_reader(BigBodies()) as reader:
        reader.feed(big_head(path, bound + 1))
        assert reader.complete()  # past it: refused from the head, at once
        assert reader.framing is not None and reader.framing.too_large


def test_big_bodies_received_at_once_share_one_budget() -> None:
    """What slow clients can make a process hold stays bounded: past the budget, a big
    body gets the 32 KiB every route takes; the budget comes back as each is received
    or its connection closes."""
    size = 100_000
    budget = BigBodies(budget=2 * size)
    with route_reader(budget) as first, route_reader(budget) as second:
        for reader in (first, second):
            reader.deadline = 100.0
            reader.feed(big_head(b"/v1/packets/batch", size))
            assert not reader.complete()
            # time for the bytes past 32 KiB, at 32 KiB a second
            assert reader.deadline == 100.0 + (size - limits.MAX_BODY) / BIG_BODY_RATE
        assert budget.held == 2 * size
        with route_reader(budget) as third:
            third.feed(big_head(b"/v1/packets/batch", size))
            assert third.complete() and third.framing is not None and third.framing.too_large
            assert third.limit == limits.MAX_BODY
        first.feed(b"x" * size)
        assert first.complete()  # received: a worker's now
        second.close()  # went away midway
        assert budget.held == 0
        with route_reader(budget) as fourth:
            fourth.feed(big_head(b"/v1/packets/batch", size))
            assert not fourth.complete() and fourth.limit == limits.MAX_BATCH_BODY


def verdict(data: bytes) -> Framing | None:
    """The intake's framing of a request fed whole (a head past the limit has none)."""
    with connected_reader() as (reader, _peer):
        reader.feed(data)
        assert reader.complete()
        return reader.framing


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Framing()),
        (b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\nhi", Framing(length=2)),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", Framing(True)),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", Framing(True)),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: a\r\nTransfer-Encoding: b\r\n\r\n", None),  # 501
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Framing()),  # 1.0: ignored
        (b"POST / HTTP/1.01\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", Framing(True)),
        (b"POST / HTTP/2.0\r\nContent-Length: 1\r\n\r\n", None),  # 505
        (b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", Framing()),
    ],
)
def test_the_intake_frames_a_head_as_cheroot_does(head: bytes, expected: Framing | None) -> None:
    assert verdict(head) == expected


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        # obsolete line folding, with a space or a tab: 400 (RFC 9112 section 5.2)
        (b"Transfer-Encoding:\r\n chunked\r\n", "obsolete line folding"),
        (b"Content-Length:\r\n\t10\r\n", "obsolete line folding"),
        (b"X-A: b\r\n\tTransfer-Encoding: chunked\r\n", "obsolete line folding"),
        (b" Transfer-Encoding: chunked\r\n", "obsolete line folding"),
        # whitespace before the colon, no name, no colon
        (b"Transfer-Encoding : chunked\r\n", "Illegal header line"),
        (b"Transfer-Encoding\t: chunked\r\n", "Illegal header line"),
        (b": chunked\r\n", "Illegal header line"),
        (b"Transfer-Encoding chunked\r\n", "Illegal header line"),
        # two framings: a repeated Content-Length, or Content-Length beside Transfer-Encoding
        (b"Content-Length: 1\r\nContent-Length: 1\r\n", "more than one Content-Length"),
        (b"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n", "Content-Length and Transfer"),
        (b"X: y\nTransfer-Encoding: chunked\r\n", "HTTP requires CRLF terminators"),
    ],
)
def test_heads_two_readers_could_frame_differently_are_refused(
    headers: bytes, message: str
) -> None:
    """The one header reader (the intake's and the worker's) refuses them: 400 at once."""
    with pytest.raises(ValueError, match=message):
        STRICT_HEADERS(io.BytesIO(headers + b"\r\n"))
    assert verdict(b"POST / HTTP/1.1\r\n" + headers + b"\r\n") is None


def test_a_head_past_the_limit_goes_to_a_worker_for_its_413() -> None:
    answers = judged(b"GET / HTTP/1.1\r\nX-Big: " + b"x" * 300)
    assert answers.index(True) == 200  # the byte after the 200-byte limit


def test_a_pipelined_request_is_whole_when_the_first_is() -> None:
    first = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
    assert judged(first + b"GET /b HT")[len(first) - 1] is True


def test_expect_100_continue_is_wanted_only_while_the_body_is_missing() -> None:
    with connected_reader() as (reader, _peer):
        reader.feed(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        assert not reader.complete() and reader.wants_continue()
        reader.continued = True
        assert not reader.wants_continue()
        reader.feed(b"ok")
        assert reader.complete()


def test_the_line_end_left_after_a_chunked_body_is_not_a_new_request() -> None:
    with connected_reader() as (reader, _peer):
        reader.feed(b"\r\n")  # what cheroot leaves after reading the last chunk
        assert not reader.started()  # so the connection is idle, not a request timing out
        reader.feed(b"G")
        assert reader.started()


def test_the_worker_reads_from_memory_and_never_waits_for_the_socket() -> None:
    with connected_reader() as (reader, peer):
        reader.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest")
        assert reader.readline() == b"GET / HTTP/1.1\r\n"
        assert reader.readline(4) == b"Host"
        assert reader.readline() == b": x\r\n"
        assert reader.read(2) == b"\r\n"
        assert reader.read(4) == b"rest"
        reader.deadline = time.monotonic() + 60  # time left, yet nothing more is waited for
        with pytest.raises(TimeoutError, match="timed out"):  # what cheroot answers 408 to
            reader.read(1)
        with pytest.raises(TimeoutError, match="timed out"):
            reader.readline()
        peer.sendall(b"more\n")
        assert reader.readline() == b"more\n"  # what has arrived is taken
        assert reader.read() == b""  # all there is, without waiting


class _StalledInput:
    """A ``wsgi.input`` whose body never comes: the server's stream gives up at once."""

    def read(self, size: int = -1) -> bytes:
        raise TimeoutError("timed out")


@pytest.mark.parametrize(
    "headers",
    [{"CONTENT_LENGTH": "10"}, {"HTTP_TRANSFER_ENCODING": "chunked"}],
    ids=["content-length", "chunked"],
)
def test_a_body_read_that_times_out_is_a_408_not_a_traceback(headers: dict[str, str]) -> None:
    # The adapter reads the body before it calls the app: a route table is all it needs.
    adapter = ChaliceWSGI(SimpleNamespace(routes={"/v1/packets": {"POST": None}}))
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/v1/packets",
        "wsgi.input": _StalledInput(),
        **headers,
    }
    answered: list[str] = []
    body = adapter(environ, lambda status, _headers: answered.append(status))
    assert answered == ["408 Request Timeout"]
    assert json.loads(b"".join(body)) == {"error": "request timeout"}
