"""A header outside Latin-1 on ``/mcp`` and the OAuth routes is the client's fault: 400
with a JSON error naming the header, never a 500 with a traceback in the server's log.

API Gateway, and ``ltm server run`` after it, read header bytes as UTF-8, so a
``€`` arrives as a character ASGI's Latin-1 byte strings cannot carry.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from serverkit import Server, running_server

EURO = "€".encode()  # U+20AC: outside Latin-1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("headers")) as srv:
        yield srv


ROUTES = [
    ("POST", "/mcp"),
    ("GET", "/mcp"),
    ("POST", "/token"),
    ("POST", "/register"),
    ("GET", "/authorize"),
    ("POST", "/revoke"),
    ("GET", "/.well-known/oauth-authorization-server"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
]


@pytest.mark.parametrize("method, path", ROUTES)
@pytest.mark.parametrize("name", ["User-Agent", "Origin", "X-Anything"])
def test_a_header_outside_latin_1_is_a_400(
    server: Server, method: str, path: str, name: str
) -> None:
    _user, token = server.issue()
    with server.client(token) as client:
        reply = client.request(method, path, headers={name: b"caf" + EURO}, content=b"{}")
    assert reply.status_code == 400, reply.text
    assert reply.json() == {"error": f"header {name.lower()}: not Latin-1 text"}


def test_the_log_has_no_traceback(server: Server) -> None:
    with server.client() as client:
        assert client.post("/mcp", headers={"X-Anything": EURO}).status_code == 400
    log = Path(server.log).read_text(errors="replace")
    assert "Traceback" not in log and "UnicodeEncodeError" not in log
