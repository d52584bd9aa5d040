"""Serve one HTTP request with an ASGI application, from synchronous code.

The MCP SDK's Streamable HTTP transport and its OAuth endpoints are ASGI
applications (Starlette). Chalice on Lambda, and ``ltm server run`` behind
it, hand ``app.py`` one whole request at a time and want one whole answer
back, so this module turns a request into an ASGI ``http`` scope, runs the
application to completion in a fresh event loop (``anyio.run``), and collects
what it sent. Nothing is streamed: the ``/mcp`` endpoint runs in the
stateless JSON form, one JSON answer per POST, which is what a Lambda can
give. The ASGI message shapes are those of the ASGI HTTP specification
(https://asgi.readthedocs.io/en/latest/specs/www.html).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

AsgiApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class BadHeader(ValueError):
    """A request header an ASGI scope cannot carry: the caller answers 400."""


class Answer(NamedTuple):
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def serve(
    app: AsgiApp,
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    scheme: str = "https",
    client: tuple[str, int] | None = None,
) -> Answer:
    """Run ``app`` on one request and return its whole answer.

    ``path`` is the path the application routes on (without an API Gateway
    stage); ``scheme`` and the ``host`` header say where it was reached, for
    any absolute URL the application builds. A header outside Latin-1 (what
    ASGI's byte strings carry, and all RFC 9110 §5.5 allows) is ``BadHeader``.
    """
    import anyio

    raw_headers = _latin1(headers)
    host = headers.get("host", "localhost")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": scheme,
        "path": path,
        "raw_path": path.encode("utf-8"),
        "query_string": query.encode("latin-1"),
        "root_path": "",
        "headers": raw_headers,
        "server": (host.rsplit(":", 1)[0], 443 if scheme == "https" else 80),
        "client": client,
        "state": {},
    }
    sent = False
    status = 500
    out_headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The whole body was delivered: the next thing the app can hear is the end.
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            out_headers.extend(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])
            )
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    async def run() -> None:
        await app(scope, receive, send)

    anyio.run(run)
    return Answer(status, out_headers, b"".join(chunks))


def _latin1(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """The headers as ASGI carries them: lower-case names, Latin-1 bytes."""
    out = []
    for name, value in headers.items():
        try:
            out.append((name.lower().encode("latin-1"), value.encode("latin-1")))
        except UnicodeEncodeError:  # named, never quoted: the value may be a credential
            shown = name.encode("ascii", "replace").decode()
            raise BadHeader(f"header {shown}: not Latin-1 text") from None
    return out
