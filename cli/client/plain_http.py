"""Plain HTTP/1.1 over a socket: how ``Http`` talks to an ``http://`` server with no proxy.

Why not ``http.client`` there: importing it adds 24-31 ms to a fresh process
(bench/bench_imports.py; it loads ``ssl``, whose ``_ssl`` loads OpenSSL, and the
``email`` header parser), a third of the 100 ms a session-start hook may take
against a self-hosted server, for nothing a plain exchange with an
ltm server uses. ``https://`` and proxies stay on ``http.client``: TLS needs
``ssl`` anyway, and there the network's round trips dwarf an import.

The subset of HTTP/1.1 (RFC 9112) a JSON API needs, with ``http.client``'s
interface where ``Http`` uses it (``connect``, ``request``, ``getresponse``,
``read``, ``getheaders``, ``will_close``) so one request loop serves both: one
request at a time on a kept-alive connection; a reply framed by
Content-Length, by chunked transfer coding or by the connection's close
(RFC 9112 §6.3); interim 1xx replies skipped. A reply outside that is
``NotHttp``; a server that closes before answering is ``Disconnected``, a
``ConnectionResetError`` as ``http.client.RemoteDisconnected`` is, so the
caller's retry on a stale kept-alive connection treats both alike.
"""

from __future__ import annotations

import contextlib
import socket
from typing import BinaryIO

MAX_LINE = 65536  # bytes in a status or header line (http.client's _MAXLINE)
MAX_HEADERS = 100  # header lines in one reply (http.client's _MAXHEADERS)
NO_BODY = (204, 304)  # and every 1xx, and any reply to HEAD (RFC 9112 §6.3)


class NotHttp(ValueError):
    """The peer's answer is not an HTTP/1.x reply (or breaks off in the middle of one)."""


class Disconnected(ConnectionResetError):
    """The server closed the connection without a status line."""


class Connection:
    """One TCP connection to ``host:port``, one request at a time."""

    def __init__(self, host: str, port: int, *, timeout: float) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self._fp: BinaryIO | None = None
        self._method = "GET"
        bracketed = f"[{host}]" if ":" in host else host  # an IPv6 literal
        self._host_header = bracketed if port == 80 else f"{bracketed}:{port}"

    def connect(self) -> None:
        # An ASCII name goes to getaddrinfo as bytes: a str is run through the "idna"
        # codec first, which imports encodings.idna, stringprep and unicodedata.
        name: str | bytes = self.host.encode("ascii") if self.host.isascii() else self.host
        self.sock = socket.create_connection((name, self.port), self.timeout)
        with contextlib.suppress(OSError):  # one request, one write: no waiting for ACKs
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._fp = self.sock.makefile("rb")

    def close(self) -> None:
        if self._fp is not None:
            self._fp.close()
            self._fp = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if any(c <= " " or c == "\x7f" for c in method + target):
            raise ValueError(f"control character or space in the request line: {target!r}")
        fields = {"Host": self._host_header, "Accept-Encoding": "identity", **(headers or {})}
        if body is not None or method in ("POST", "PUT", "PATCH"):
            fields["Content-Length"] = str(len(body or b""))
        lines = [f"{method} {target} HTTP/1.1"]
        for name, value in fields.items():
            if any(c in "\r\n\0" for c in name + value) or not name or ":" in name:
                raise ValueError(f"invalid header {name!r}")  # no header injection
            lines.append(f"{name}: {value}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        self.sock.sendall(head + (body or b""))
        self._method = method

    def getresponse(self) -> Response:
        assert self._fp is not None
        return Response(self._fp, self._method)


class Response:
    """A reply's status and headers, read at once; its body, read by ``read``."""

    def __init__(self, fp: BinaryIO, method: str) -> None:
        self._fp = fp
        while True:
            version, self.status = self._status_line()
            headers = self._headers()
            if not 100 <= self.status < 200:
                break  # an interim reply (100 Continue, 103 Early Hints) is skipped
        self.headers = headers
        tokens = {t.strip().lower() for t in self._field("connection").split(",")}
        keep_alive = "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens
        self.will_close = not keep_alive
        self._chunked = False
        self._left: int | None = None  # body bytes still to read; None: until the close
        codings = [c.strip().lower() for c in self._field("transfer-encoding").split(",")]
        if method == "HEAD" or self.status in NO_BODY:
            self._left = 0
        elif codings != [""]:
            # RFC 9112 §6.3: with a transfer coding, Content-Length is ignored; unless
            # chunked comes last, the body runs to the connection's close.
            self._chunked = codings[-1] == "chunked"
        elif lengths := {v.strip() for v in self._field("content-length").split(",") if v.strip()}:
            if len(lengths) != 1 or not _digits(length := lengths.pop()):
                raise NotHttp("a bad Content-Length")
            self._left = int(length)
        if self._left is None and not self._chunked:
            self.will_close = True

    def getheaders(self) -> list[tuple[str, str]]:
        return self.headers

    def read(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body; a body left unread closes the connection."""
        if self._chunked:
            data = self._chunks(limit)
        elif self._left is None:
            data = self._fp.read(limit)
            self.will_close = True
        else:
            data = self._exactly(min(self._left, limit))
            self._left -= len(data)
            if self._left:
                self.will_close = True
        return data

    # -- parsing -------------------------------------------------------------------

    def _line(self) -> bytes:
        line = self._fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise NotHttp("a header line longer than 64 KiB")
        return line

    def _status_line(self) -> tuple[str, int]:
        line = self._line()
        if not line:
            raise Disconnected("the server closed the connection without answering")
        parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        version, code = parts[0], parts[1] if len(parts) > 1 else ""
        if not version.startswith("HTTP/1.") or not _digits(code) or len(code) != 3:
            raise NotHttp(f"not an HTTP status line: {line[:40]!r}")
        return version, int(code)

    def _headers(self) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        while (line := self._line().decode("latin-1")) not in ("\r\n", "\n"):
            if not line.endswith("\n"):  # the connection closed mid-line, or before it
                raise NotHttp("the reply ended inside its headers")
            if line[0] in " \t" and headers:  # an obsolete folded line continues the last
                name, value = headers.pop()
                headers.append((name, f"{value} {line.strip()}"))
                continue
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise NotHttp(f"a malformed header line: {line[:40]!r}")
            headers.append((name, value.strip()))
            if len(headers) > MAX_HEADERS:
                raise NotHttp(f"more than {MAX_HEADERS} header lines")
        return headers

    def _field(self, name: str) -> str:
        """Every value of one header, comma-joined (RFC 9110 §5.3)."""
        return ", ".join(v for n, v in self.headers if n.lower() == name)

    def _exactly(self, size: int) -> bytes:
        data = self._fp.read(size)
        if len(data) < size:
            raise NotHttp(f"the reply was cut short ({len(data)} of {size} bytes)")
        return data

    def _chunks(self, limit: int) -> bytes:
        parts: list[bytes] = []
        size_read = 0
        while True:
            size_text = self._line().split(b";", 1)[0].strip()  # ";..." : chunk extensions
            if not size_text or size_text.strip(b"0123456789abcdefABCDEF"):
                raise NotHttp(f"a bad chunk size: {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                while self._line() not in (b"\r\n", b"\n", b""):
                    pass  # trailer fields: ltm uses none
                self._chunked = False
                self._left = 0
                return b"".join(parts)
            if size_read + size > limit:
                parts.append(self._exactly(limit - size_read))
                self.will_close = True  # the rest stays unread
                return b"".join(parts)
            parts.append(self._exactly(size))
            size_read += size
            if self._line() not in (b"\r\n", b"\n"):
                raise NotHttp("a chunk without its line end")


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()  # str.isdigit alone takes "²" and "٣"
