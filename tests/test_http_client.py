"""``ltm.cli.client.remote.Http``: the HTTP/1.1 the CLI speaks to a server.

A scripted server on loopback (a real socket) sends raw replies, byte for byte:
the request sent, keep-alive, the retry on a stale connection, and every
malformed or cut-short reply are checked through ``Http``, as the CLI meets
them, down to the one line the user sees and the class a caller branches on.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

import pytest
from timing import scaled

from ltm.cli.client import remote
from ltm.cli.client.remote import Http
from ltm.cli.client.transport import (
    ProtocolError,
    TimedOut,
    TLSFailed,
    TransportError,
    Unreachable,
)
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


# -- well-formed replies ----------------------------------------------------------------

WELL_FORMED = {
    "content-length": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b'Content-Length: 11\r\n\r\n{"ok":true}',
        200,
        b'{"ok":true}',
    ),
    "chunked, extensions, trailer": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;name=value\r\n{"ok\r\n7\r\n":true}\r\n0\r\nX-Trailer: t\r\n\r\n',
        200,
        b'{"ok":true}',
    ),
    "an interim 100 first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
        201,
        b"{}",
    ),
    "no content": (b"HTTP/1.1 204 No Content\r\nX-Id: 1\r\n\r\n", 204, b""),
    "until the close (HTTP/1.0)": (
        b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>hi</p>",
        200,
        b"<p>hi</p>",
    ),
    "an empty reason phrase": (b"HTTP/1.1 500 \r\nContent-Length: 0\r\n\r\n", 500, b""),
}


@pytest.mark.parametrize("raw, status, body", WELL_FORMED.values(), ids=WELL_FORMED.keys())
def test_a_well_formed_reply(raw: bytes, status: int, body: bytes) -> None:
    with scripted(always(raw), hang_up=b"HTTP/1.0" in raw) as server:
        http = Http(server.url, timeout=scaled(5))
        for _ in range(2):  # and the connection is fit for the next request
            reply = http.request("GET", "/v1/packets")
            assert (reply.status, reply.body) == (status, body)


def test_the_request_it_sends() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    with scripted(always(ok)) as server:
        http = Http(server.url + "/base", timeout=scaled(5))
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
        assert Http(server.url, timeout=scaled(5)).request("GET", "/v1/healthz").body == b"{}"
    assert f"\r\nHost: {server.url.removeprefix('http://')}\r\n".encode() in server.requests[0]
    assert server.url.startswith("http://[::1]:")


# -- connections --------------------------------------------------------------------------


def test_keep_alive_and_a_reply_that_ends_with_the_connection() -> None:
    def script(n: int, request: bytes) -> bytes:
        if n == 2:
            return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    with scripted(script) as server:
        http = Http(server.url, timeout=scaled(5))
        for _ in range(4):
            assert http.request("GET", "/v1/healthz").body == b"{}"
    assert server.connections == 2  # requests 1-2 on one, 3-4 on the next


def test_a_stale_connection_is_retried_for_a_get_but_never_for_a_post() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    def closes_after_each(n: int, request: bytes) -> bytes | None:
        return ok if n % 2 == 1 else None  # every second request meets a closed connection

    with scripted(closes_after_each) as server:
        http = Http(server.url, timeout=scaled(5))
        assert http.request("GET", "/v1/a").status == 200
        assert http.request("GET", "/v1/b").status == 200  # retried on a fresh connection
        assert len(server.requests) == 3 and server.connections == 2
    with scripted(lambda n, request: None) as server:
        line = fails(Http(server.url, timeout=scaled(5)), "POST")
    assert line == (
        f"{server.url} closed the connection without answering — is it an ltm server, and is"
        " the scheme (http/https) right?"
    )


# -- replies that are not HTTP, one clear line each ----------------------------------------

OK = b"HTTP/1.1 200 OK\r\n"
BROKEN = {
    "not http": (
        b"SSH-2.0-OpenSSH_9.6\r\n",
        "not an HTTP status line: 'SSH-2.0-OpenSSH_9.6\\r\\n'",
    ),
    "cut short": (
        OK + b'Content-Length: 100\r\n\r\n{"partial"',
        "the reply was cut short (10 of 100 bytes)",
    ),
    "a bad chunk": (
        OK + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        "a malformed chunked body",
    ),
    "too many headers": (OK + b"X: y\r\n" * 101 + b"\r\n", "got more than 100 headers"),
    "a line too long": (OK + b"X: " + b"y" * 70000 + b"\r\n\r\n", "a line longer than 64 KiB"),
    "escapes in the status line": (
        b"\x1b[2J\x1b]0;owned\x07 200 OK\r\n\r\n",
        "not an HTTP status line: '\\x1b[2J\\x1b]0;owned\\x07 200 OK\\r\\n'",
    ),
}


@pytest.mark.parametrize("raw, reason", BROKEN.values(), ids=BROKEN.keys())
def test_a_reply_that_is_not_http_is_one_line(raw: bytes, reason: str) -> None:
    with scripted(always(raw), hang_up=True) as server:
        http = Http(server.url, timeout=scaled(5))
        with pytest.raises(ProtocolError) as caught:
            http.request("GET", "/v1/packets")
        assert str(caught.value) == (
            f"{server.url} did not answer in HTTP ({reason}) — check the URL and the scheme"
            " (http/https)"
        )
        assert "\x1b" not in str(caught.value)
        assert http._conn is None  # the connection is not used again


def test_a_closed_port_is_unreachable_and_nothing_was_sent() -> None:
    # Bound, never listening: refused, and the port stays this test's (a port closed
    # and let go may be another process's by the time the client connects).
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        with pytest.raises(Unreachable) as caught:
            Http(url, timeout=scaled(5)).request("POST", "/v1/packets", body=b"{}")
    assert caught.value.cause == "refused" and caught.value.host == url
    assert isinstance(caught.value, TransportError)


def test_a_server_that_never_answers_timed_out_after_the_request_went_out() -> None:
    from clikit import silent_server

    with silent_server() as url, pytest.raises(TimedOut) as caught:
        Http(url, timeout=0.5).request("GET", "/v1/packets")  # not a budget: under test
    assert caught.value.cause == "no-answer" and not isinstance(caught.value, Unreachable)


def test_https_to_a_plain_server_is_a_tls_failure() -> None:
    reply = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
    with scripted(always(reply)) as server, pytest.raises(TLSFailed) as caught:
        Http(server.url.replace("http://", "https://"), timeout=scaled(5)).request("GET", "/v1/x")
    assert caught.value.plain_url == server.url
    assert str(caught.value).endswith(f"if not, use {server.url}")


def test_a_reply_over_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "MAX_REPLY_BYTES", 1000)
    body = b"x" * 1001
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n" + body + b"\r\n0\r\n\r\n"
    )
    for raw in (b"HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n" + body, chunked):
        with scripted(always(raw)) as server:
            assert fails(Http(server.url, timeout=scaled(5))) == (
                f"{server.url} sent more than 1000 bytes; stopped"
            )


def test_no_header_injection() -> None:
    with scripted(always(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) as server:
        http = Http(server.url, timeout=scaled(5))
        with pytest.raises(CliError) as caught:
            http.request("GET", "/v1/packets", token="ltm_x\r\nX-Evil: 1")
        assert (
            str(caught.value) == f"request to {server.url} failed: invalid header 'Authorization'"
        )
        assert "ltm_x" not in str(caught.value)  # never the token
        with pytest.raises(CliError):
            http.request("GET", "/v1/packets x")
    assert server.requests == []  # nothing was sent
