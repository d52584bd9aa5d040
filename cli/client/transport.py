"""Why a request got no HTTP answer: one small hierarchy, mapped once from the
exceptions of ``socket``, ``ssl`` and ``http.client``.

Callers branch on the class, never on a message:

- ``Unreachable``: no connection was made (refused, a name that does not resolve,
  no route, no connection within the timeout). Nothing was sent, so nothing was
  received: a push that meets it can be kept and sent later.
- ``TimedOut``: connected and sent, but no answer in time. The server may have
  acted on the request.
- ``TLSFailed``: the TLS handshake failed (an untrusted certificate, a server that
  does not speak HTTPS). Nothing was sent.
- ``ProtocolError``: the peer answered, but not in HTTP (or closed the connection
  without answering). The server may have acted on the request.

Each is a ``CliError``; its one line is worded in ``ltm.cli.terminal.network``.
"""

from __future__ import annotations

import sys
from typing import Any

from ltm.cli.errors import CliError


class TransportError(CliError):
    """A request to ``host`` got no HTTP answer; ``cause`` says which way it failed."""

    def __init__(
        self, host: str, cause: str, *, detail: str = "", timeout: float = 0, plain_url: str = ""
    ) -> None:
        self.host = host
        self.cause = cause
        self.detail = detail  # the library's reason, or what came back (server text)
        self.timeout = timeout
        self.plain_url = plain_url  # the same server over http://, for a TLS hint
        from ltm.cli.terminal.network import describe

        super().__init__(describe(self))


class Unreachable(TransportError):
    """No connection to the server; nothing was sent.

    ``cause``: ``refused``, ``unresolved`` (``detail``: the name), ``no-connection``
    (none within ``timeout``) or ``network`` (``detail``: the system's reason).
    """


class TimedOut(TransportError):
    """The request went out; no answer within ``timeout`` seconds."""

    def __init__(self, host: str, *, timeout: float) -> None:
        super().__init__(host, "no-answer", timeout=timeout)


class TLSFailed(TransportError):
    """The TLS handshake failed; nothing was sent.

    ``cause``: ``untrusted`` (the certificate), ``no-handshake`` (none within
    ``timeout``, as from a plain HTTP server) or ``handshake`` (``detail``: why).
    """


class ProtocolError(TransportError):
    """The server answered outside HTTP.

    ``cause``: ``closed`` (closed the connection without answering) or ``not-http``
    (``detail``: what was wrong with the reply).
    """


def classify(
    exc: BaseException,
    *,
    host: str,
    hostname: str,
    timeout: float,
    plain_url: str,
    connecting: bool = False,
    handshake: bool = False,
) -> TransportError | None:
    """The ``TransportError`` for an exception a request raised, or None when it is
    not a transport failure (the caller words it).

    ``connecting``: it came from opening the connection; ``handshake``: after the TCP
    connection was made, so in the TLS handshake.
    """
    # ssl and http.client are looked up, not imported: an error of theirs comes only
    # from a connection that loaded them.
    ssl: Any = sys.modules.get("ssl")
    client: Any = sys.modules.get("http.client")
    if ssl and isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or exc.reason or str(exc)
        return TLSFailed(host, "untrusted", detail=str(reason))
    if ssl and isinstance(exc, ssl.SSLError):
        return TLSFailed(host, "handshake", detail=str(exc.reason or exc), plain_url=plain_url)
    if isinstance(exc, TimeoutError) and connecting and handshake:
        return TLSFailed(host, "no-handshake", timeout=timeout, plain_url=plain_url)
    if isinstance(exc, TimeoutError) and connecting:
        return Unreachable(host, "no-connection", timeout=timeout)
    if isinstance(exc, TimeoutError):
        return TimedOut(host, timeout=timeout)
    if isinstance(exc, ConnectionRefusedError):
        return Unreachable(host, "refused")
    import socket

    if isinstance(exc, socket.gaierror):
        return Unreachable(host, "unresolved", detail=hostname)
    if isinstance(exc, ConnectionResetError | BrokenPipeError):  # RemoteDisconnected too
        return ProtocolError(host, "closed")
    if client and isinstance(exc, client.HTTPException):
        return ProtocolError(host, "not-http", detail=_not_http(exc, client))
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        if connecting:
            return Unreachable(host, "network", detail=reason)
        return ProtocolError(host, "closed", detail=reason)
    return None


def _not_http(exc: Any, client: Any) -> str:
    """What was wrong with a reply, from ``http.client``'s exception."""
    if isinstance(exc, client.IncompleteRead):
        if exc.expected is None:  # what http.client raises for a bad chunk size
            return "a malformed chunked body"
        got = len(exc.partial)
        return f"the reply was cut short ({got} of {got + exc.expected} bytes)"
    if isinstance(exc, client.LineTooLong):
        return "a line longer than 64 KiB"
    if isinstance(exc, client.BadStatusLine):
        return f"not an HTTP status line: {exc.line[:40]!r}"
    return str(exc) or type(exc).__name__
