"""``ltm.cli.client.plain_http``: the HTTP/1.1 the CLI speaks to an ``http://`` server
with no proxy.

A scripted server on loopback (a real socket) sends raw replies, byte for byte:
each well-formed one must read exactly as the standard library's ``http.client``
reads it; keep-alive, the retry on a stale connection, and every malformed or
cut-short reply are checked through ``Http``, as the CLI meets them, down to the
one line the user sees.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

import pytest

from ltm.cli.client import remote
from ltm.cli.client.plain_http import Connection
from ltm.cli.client.remote import Http
from ltm.cli.errors import CliError

# A reply script: what the server sends for the Nth request it reads (None: close instead).
Script = Callable[[int, bytes], bytes | None]


class Scripted:
    """Replies from ``script``; with ``hang_up``, the connection is closed after each one."""

    def __init__(self, script: Script, *, hang_up: bool = False, host: str = "127.0.0.1") -> None:
        self.script = script
        self.hang_up = hang_up
        self.requests: list[bytes] = []
        self.connections = 0
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_server((host, 0), family=family)
        netloc = f"[{host}]" if ":" in host else host
        self.url = f"http://{netloc}:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn, conn.makefile("rb") as reader:  # both, or the socket stays open
                while request := _read_request(reader):
                    self.requests.append(request)
                    reply = self.script(len(self.requests), request)
                    if reply is None:
                        break
                    conn.sendall(reply)
                    if self.hang_up:
                        break

    def close(self) -> None:
        self.sock.close()


def _read_request(reader: BinaryIO) -> bytes:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline()
        if not line:
            return b""
        head += line
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + reader.read(length)


@contextmanager
def scripted(
    script: Script, *, hang_up: bool = False, host: str = "127.0.0.1"
) -> Iterator[Scripted]:
    server = Scripted(script, hang_up=hang_up, host=host)
    try:
        yield server
    finally:
        server.close()


def always(raw: bytes) -> Script:
    return lambda n, request: raw


def fails(http: Http, method: str = "GET") -> str:
    with pytest.raises(CliError) as caught:
        http.request(method, "/v1/packets", body=b"{}" if method == "POST" else None)
    return str(caught.value)


# -- replies read as http.client reads them ----------------------------------------------

WELL_FORMED = {
    "content-length": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b'Content-Length: 11\r\n\r\n{"ok":true}',
    "chunked, extensions, trailer": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'4;name=value\r\n{"ok\r\n7\r\n":true}\r\n0\r\nX-Trailer: t\r\n\r\n',
    "an interim 100 first": b"HTTP/1.1 100 Continue\r\n\r\n"
    b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
    "no content": b"HTTP/1.1 204 No Content\r\nX-Id: 1\r\n\r\n",
    "until the close (HTTP/1.0)": b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>hi</p>",
    "a folded header": b"HTTP/1.1 404 Not Found\r\nX-Long: a\r\n b\r\nContent-Length: 2\r\n\r\n{}",
    "an empty reason phrase": b"HTTP/1.1 500 \r\nContent-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("raw", WELL_FORMED.values(), ids=WELL_FORMED.keys())
def test_a_well_formed_reply_reads_as_http_client_reads_it(raw: bytes) -> None:
    def read(conn: Connection | http.client.HTTPConnection) -> tuple[int, list, bytes, bool]:
        conn.request("GET", "/v1/x", headers={"Accept": "application/json"})
        response = conn.getresponse()
        body = response.read(1 << 20)
        return (
            response.status,
            [(k.lower(), v) for k, v in response.getheaders()],
            body,
            bool(response.will_close),
        )

    with scripted(always(raw), hang_up=b"HTTP/1.0" in raw) as server:
        port = int(server.url.rsplit(":", 1)[1])
        ours = read(Connection("127.0.0.1", port, timeout=5))
        theirs = read(http.client.HTTPConnection("127.0.0.1", port, timeout=5))
    assert ours[0] == theirs[0] and ours[2] == theirs[2] and ours[3] == theirs[3]
    # http.client joins a folded line with its line break kept; the value is the same
    assert ours[1] == [(k, " ".join(v.split())) for k, v in theirs[1]]


def test_more_than_http_client_reads() -> None:
    # RFC 9110 §15.2: any number of 1xx replies may precede the final one (http.client
    # skips only 100); RFC 9112 §6.3: a list of one repeated length is that length.
    raw = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nContent-Length: 2, 2\r\n\r\n{}"
    )
    with scripted(always(raw)) as server:
        reply = Http(server.url, timeout=5).request("GET", "/v1/packets")
    assert (reply.status, reply.body) == (201, b"{}")


def test_the_request_it_sends() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    with scripted(always(ok)) as server:
        http = Http(server.url + "/base", timeout=5)
        http.request("POST", "/v1/packets", body=b'{"a":1}', token="ltm_secret")
        http.request("GET", "/v1/packets", query={"project": "acme/app", "limit": 5})
    post, get = server.requests
    head, body = post.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /base/v1/packets HTTP/1.1" and body == b'{"a":1}'
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert fields["Host"] == server.url.removeprefix("http://")
    assert fields["Content-Length"] == "7" and fields["Content-Type"] == "application/json"
    assert fields["Authorization"] == "Bearer ltm_secret"
    assert fields["Accept-Encoding"] == "identity"
    assert get.startswith(b"GET /base/v1/packets?project=acme%2Fapp&limit=5 HTTP/1.1\r\n")
    assert b"Content-Length" not in get
    assert server.connections == 1  # kept alive


def test_an_ipv6_literal() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    with scripted(always(ok), host="::1") as server:
        assert Http(server.url, timeout=5).request("GET", "/v1/healthz").body == b"{}"
    assert f"\r\nHost: {server.url.removeprefix('http://')}\r\n".encode() in server.requests[0]
    assert server.url.startswith("http://[::1]:")


# -- connections --------------------------------------------------------------------------


def test_keep_alive_and_a_reply_that_ends_with_the_connection() -> None:
    def script(n: int, request: bytes) -> bytes:
        if n == 2:
            return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    with scripted(script) as server:
        http = Http(server.url, timeout=5)
        for _ in range(4):
            assert http.request("GET", "/v1/healthz").body == b"{}"
    assert server.connections == 2  # requests 1-2 on one, 3-4 on the next


def test_a_stale_connection_is_retried_for_a_get_but_never_for_a_post() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    def closes_after_each(n: int, request: bytes) -> bytes | None:
        return ok if n % 2 == 1 else None  # every second request meets a closed connection

    with scripted(closes_after_each) as server:
        http = Http(server.url, timeout=5)
        assert http.request("GET", "/v1/a").status == 200
        assert http.request("GET", "/v1/b").status == 200  # retried on a fresh connection
        assert len(server.requests) == 3 and server.connections == 2
    with scripted(lambda n, request: None) as server:
        line = fails(Http(server.url, timeout=5), "POST")
    assert line == (
        f"{server.url} closed the connection without answering — is it an ltm server, and is"
        " the scheme (http/https) right?"
    )


# -- replies that are not HTTP, one clear line each ----------------------------------------

OK = b"HTTP/1.1 200 OK\r\n"
BROKEN = {
    "not http": (
        b"SSH-2.0-OpenSSH_9.6\r\n",
        "not an HTTP status line: b'SSH-2.0-OpenSSH_9.6\\r\\n'",
    ),
    "cut short": (
        OK + b'Content-Length: 100\r\n\r\n{"partial"',
        "the reply was cut short (10 of 100 bytes)",
    ),
    "ends in the headers": (OK + b"Content-Le", "the reply ended inside its headers"),
    "two lengths": (
        OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "a bad Content-Length",
    ),
    "a signed length": (OK + b"Content-Length: +2\r\n\r\n{}", "a bad Content-Length"),
    "a bad chunk": (
        OK + b"Transfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
        "a bad chunk size: b'0x2'",
    ),
    "a header without colon": (
        OK + b"nonsense\r\n\r\n",
        "a malformed header line: 'nonsense\\r\\n'",
    ),
    "too many headers": (OK + b"X: y\r\n" * 101 + b"\r\n", "more than 100 header lines"),
    "a line too long": (
        OK + b"X: " + b"y" * 70000 + b"\r\n\r\n",
        "a header line longer than 64 KiB",
    ),
}


@pytest.mark.parametrize("raw, reason", BROKEN.values(), ids=BROKEN.keys())
def test_a_reply_that_is_not_http_is_one_line(raw: bytes, reason: str) -> None:
    with scripted(always(raw), hang_up=True) as server:
        http = Http(server.url, timeout=5)
        assert fails(http) == (
            f"{server.url} did not answer in HTTP ({reason}) — check the URL and the scheme"
            " (http/https)"
        )
        assert http._conn is None  # the connection is not used again


def test_a_reply_over_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "MAX_REPLY_BYTES", 1000)
    body = b"x" * 1001
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n" + body + b"\r\n0\r\n\r\n"
    )
    for raw in (b"HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n" + body, chunked):
        with scripted(always(raw)) as server:
            assert fails(Http(server.url, timeout=5)) == (
                f"{server.url} sent more than 1000 bytes; stopped"
            )


def test_no_header_injection() -> None:
    with scripted(always(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) as server:
        http = Http(server.url, timeout=5)
        with pytest.raises(CliError) as caught:
            http.request("GET", "/v1/packets", token="ltm_x\r\nX-Evil: 1")
        assert (
            str(caught.value) == f"request to {server.url} failed: invalid header 'Authorization'"
        )
        with pytest.raises(CliError):
            http.request("GET", "/v1/packets x")
    assert server.requests == []  # nothing was sent
