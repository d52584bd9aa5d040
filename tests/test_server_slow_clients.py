"""Slow clients cost ``ltm server run`` a socket each, never a worker thread.

The server (waitress: one I/O thread, 8 worker threads) reads every request
whole in its I/O thread before a worker sees it, and sends answers from it; a request
has ``REQUEST_TIMEOUT`` seconds from its first byte, however it dribbles, and
an idle connection closes after ``IDLE_TIMEOUT``. Here 64 slow clients (silent,
half a header, a header a byte a second, a body a byte a second, idle
keep-alive) must not stop ``/v1/healthz`` answering within 1 s, and must all be
disconnected in the end. Bounded: every wait has a deadline, and every socket
is closed on the way out.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpkit
import pytest
from serverkit import LTM, Server, init_db, packet_id, run_server, running_server
from timing import scaled

from ltm.cli.server.http import IDLE_TIMEOUT, REQUEST_TIMEOUT

HEALTHZ = b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n"
SLACK = scaled(6.0)  # the expiry runs a few times a second; the box is shared and loaded
HEALTHZ_BUDGET = scaled(1.0)  # a health check's whole answer, on a loaded box


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
    sock = socket.create_connection(address(server), timeout=scaled(10))
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
            next_byte = time.monotonic() + 1  # not a budget: the pace, a byte a second
            while not stop.is_set() and watcher.get_map():
                for key, _ in watcher.select(timeout=0.1):  # not a budget: a tick
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
        thread.join(timeout=scaled(10))
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
    with socket.create_connection(address(server), timeout=HEALTHZ_BUDGET + scaled(5)) as sock:
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
        assert timings and max(timings) < HEALTHZ_BUDGET, timings
        # A normal client on a keep-alive connection is served meanwhile too.
        with httpkit.Client(base_url=server.url, timeout=scaled(5)) as client:
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
    assert healthz_seconds(server) < HEALTHZ_BUDGET


def _big_packet(server: Server) -> tuple[str, str]:
    """A user's token and the id of their packet of 32 KiB (a big answer to a GET)."""
    from ltm.limits import MAX_BODY

    _user, token = server.issue("big")
    data = {
        "ltm_version": "0.2",
        "id": packet_id(),
        "created_at": "2026-05-01T12:00:00Z",
        "goal": "Read it slowly",
        "next_step": "Read it slowly",
        "constraints": ["x" * 1000] * (MAX_BODY // 1010),
    }
    with server.client(token) as client:
        assert client.post("/v1/packets", json=data).status_code == 201
    return token, str(data["id"])


def _sockets(server: Server) -> int:
    """How many sockets the server process holds open (Linux /proc)."""
    count = 0
    for fd in Path(f"/proc/{server.proc.pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # closed since the listing: not held
            count += os.readlink(fd).startswith("socket:")
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs Linux /proc")
def test_pipelining_connections_that_never_read_do_not_stop_healthz(server: Server) -> None:
    """An answer waits in the server's buffer for its reader, never in a worker thread.

    24 connections (three times the worker threads of the server that wrote
    answers from its workers, and lost most health checks to 88 such) each
    pipeline GETs of a 32 KiB packet and never read: their answers fill the
    client's receive buffer and the server's send buffer (about 2 MiB on
    loopback), and then wait. Health checks keep answering all along; once
    the readers go, nothing of them stays.
    """
    token, big = _big_packet(server)
    baseline = _sockets(server)
    request = (
        f"GET /v1/packets/{big} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()
    readers: list[socket.socket] = []
    try:
        pending: dict[socket.socket, bytes] = {}
        for _ in range(24):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(address(server))
            sock.setblocking(False)
            readers.append(sock)
            pending[sock] = request * 80  # ~2.5 MiB of answers: more than the buffers take
        started = time.monotonic()
        timings = []
        while time.monotonic() < started + REQUEST_TIMEOUT:
            for sock, rest in list(pending.items()):
                with contextlib.suppress(BlockingIOError):
                    rest = rest[sock.send(rest) :]
                if rest:
                    pending[sock] = rest
                else:
                    del pending[sock]
            timings.append(healthz_seconds(server))
            time.sleep(0.1)
        assert timings and max(timings) < HEALTHZ_BUDGET, timings
    finally:
        for sock in readers:
            sock.close()
    deadline = time.monotonic() + IDLE_TIMEOUT + SLACK
    while _sockets(server) > baseline + 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sockets(server) <= baseline + 2
    assert healthz_seconds(server) < HEALTHZ_BUDGET


# Heads a proxy in front could frame apart from the server (one joining the folded line
# into a chunked request, the other seeing no body): refused, never waited on.
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
        assert max(timings) < HEALTHZ_BUDGET, timings
        for sock in socks:
            head, _, body = read_response(sock).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in head, head
            message = "bad request: obsolete line folding is not accepted"
            assert json.loads(body) == {"error": message}
            assert sock.recv(1) == b""  # and the connection closed
    finally:
        for sock in socks:
            sock.close()
    assert healthz_seconds(server) < HEALTHZ_BUDGET


HEAD = b"POST /v1/packets HTTP/1.1\r\nHost: x\r\n"
CHUNKED = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("request_bytes", "message"),
    [
        # obsolete line folding, with a space or a tab (RFC 9112 section 5.2)
        (HEAD + b"X-A: b\r\n c\r\n\r\n", "obsolete line folding"),
        (HEAD + b"Content-Length:\r\n\t10\r\n\r\n", "obsolete line folding"),
        (HEAD + b"X-A: b\r\n\tTransfer-Encoding: chunked\r\n\r\n", "obsolete line folding"),
        # whitespace before the colon, no name, no colon
        (HEAD + b"Transfer-Encoding : chunked\r\n\r\n", "Invalid header"),
        (HEAD + b"Transfer-Encoding\t: chunked\r\n\r\n", "Invalid header"),
        (HEAD + b": chunked\r\n\r\n", "Invalid header"),
        (HEAD + b"Transfer-Encoding chunked\r\n\r\n", "Invalid header"),
        # two framings: a repeated Content-Length, or Content-Length beside Transfer-Encoding
        (HEAD + b"Content-Length: 2\r\nContent-Length: 0\r\n\r\nhi", "Content-Length is"),
        (
            HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "Content-Length and Transfer-Encoding together",
        ),
        # no Host on an HTTP/1.1 request, or two (RFC 9112 section 3.2)
        (b"GET /v1/healthz HTTP/1.1\r\n\r\n", "an HTTP/1.1 request needs a Host header"),
        (HEAD + b"Host: y\r\n\r\n", "more than one Host header"),
        (b"GET /v1/healthz HTTP/1.0\r\nHost: x\r\nhost: y\r\n\r\n", "more than one Host"),
        # a bare LF ending a line of the head, the head not yet whole: refused, not waited on
        (b"GET /v1/healthz HTTP/1.1\nHost: x\n\n", "a line ends in a bare LF"),
        (HEAD + b"X: y\nTransfer-Encoding: chunked\r\n\r\n", "Bare CR or LF"),
        # Content-Length is digits only, a chunk size hex digits only, each line ends in
        # CRLF (RFC 9112 sections 6.3 and 7.1): what a proxy in front may read otherwise
        (HEAD + b"Content-Length: +5\r\n\r\nhello", "Content-Length is invalid"),
        (HEAD + b"Content-Length: 1_0\r\n\r\n0123456789", "Content-Length is invalid"),
        (HEAD + b"Content-Length: 0x5\r\n\r\nhello", "Content-Length is invalid"),
        (CHUNKED + b"0x5\r\nhello\r\n0\r\n\r\n", "Invalid chunk size"),
        (CHUNKED + b"+5\r\nhello\r\n0\r\n\r\n", "Invalid chunk size"),
        (CHUNKED + b"5\nhello\r\n0\r\n\r\n", "Invalid chunk size"),
        (CHUNKED + b"5\nhello\n0\n\n", "a chunk line ends in a bare LF"),
        (CHUNKED + b"5\r\nhello\n0\r\n\r\n", "Chunk not properly terminated"),
    ],
)
def test_heads_two_readers_could_frame_differently_are_400_at_once(
    server: Server, request_bytes: bytes, message: str
) -> None:
    started = time.monotonic()
    with socket.create_connection(address(server), timeout=REQUEST_TIMEOUT + SLACK) as sock:
        sock.sendall(request_bytes)
        head, _, body = read_response(sock).partition(b"\r\n\r\n")
    assert head.startswith((b"HTTP/1.1 400 ", b"HTTP/1.0 400 ")), head
    assert json.loads(body)["error"].startswith(f"bad request: {message}")
    assert time.monotonic() - started < REQUEST_TIMEOUT  # refused, not timed out


def send_in_pieces(server: Server, request: bytes, size: int) -> bytes:
    """Send ``request`` in ``size``-byte TCP segments, a little apart; the response."""
    with socket.create_connection(address(server), timeout=scaled(10)) as sock:
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
    server = run_server(db, tmp_path / "server.log", root, command=command)
    flood: list[socket.socket] = []
    try:
        for _ in range(40):
            flood.append(socket.create_connection(address(server), timeout=scaled(5)))
        # long before the 5 s the silent ones may take: the oldest made room for it
        assert healthz_seconds(server) < min(HEALTHZ_BUDGET, REQUEST_TIMEOUT / 2)
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
    with socket.create_connection(address(server), timeout=scaled(10)) as sock:
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
    with socket.create_connection(address(server), timeout=scaled(10)) as sock:
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


def test_expect_100_continue_on_a_request_answered_from_its_head_gets_that_answer(
    server: Server,
) -> None:
    """No interim answer where the final one is known from the head (RFC 9110 §10.1.1):
    a request without a body is served (not held until its deadline, a 408), and a body
    over its route's bound is refused at once with 413, never asked for."""
    with socket.create_connection(address(server), timeout=scaled(10)) as sock:
        sock.sendall(b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n")
        served = Replies(sock).next()
    assert served.startswith(b"HTTP/1.1 200 "), served
    with socket.create_connection(address(server), timeout=scaled(10)) as sock:
        sock.sendall(
            b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: 1000000000\r\n\r\n"
        )
        refused = Replies(sock).next()
    assert refused.startswith(b"HTTP/1.1 413 "), refused


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
