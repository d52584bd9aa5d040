"""Our CLI against a server shaped like the Go reference's self-hosted one.

The reference server (``internal/api/api.go`` in dennisdevulder/ltm) has the
protocol's routes only: no ``/v1/packets/{id}/publish``, no ``/v1/tokens``,
no ``/v1/search``. Its router answers any other path with 404 and the text/plain
body ``404 page not found`` (Go's ``net/http`` ``NotFound``); its healthz is
``{"ok": true, "version": ...}`` as ours. Our CLI must then say that the server
does not offer the feature, not that it may not be an ltm server, and find
that out from ``/v1/healthz`` once per command.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import Cli, Seen, Stub, json_reply, stub_server
from serverkit import make_packet

PACKET = make_packet(id="01REFERENCEPUBLISH000000000", goal="on a reference server")
GO_NOT_FOUND = (404, {"Content-Type": "text/plain; charset=utf-8"}, b"404 page not found\n")


def reference(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    path = seen.path.split("?", 1)[0]
    if seen.method == "GET" and path == "/v1/healthz":
        # Go's encoder with SetIndent("", "  "), as the reference writes every answer.
        body = json.dumps({"ok": True, "version": "0.2"}, indent=2).encode() + b"\n"
        return 200, {"Content-Type": "application/json"}, body
    if seen.method == "GET" and path == "/v1/packets":
        return json_reply(200, {"packets": []})
    if seen.method == "GET" and path == f"/v1/packets/{PACKET['id']}":
        return json_reply(200, PACKET)
    return GO_NOT_FOUND


def not_ltm(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    if seen.path.startswith("/v1/packets") and seen.method == "GET":
        return json_reply(200, {"packets": []})
    return GO_NOT_FOUND


@pytest.fixture
def stub() -> Iterator[Stub]:
    with stub_server(reference) as server:
        yield server


def healthz_asked(stub: Stub) -> int:
    return sum(1 for s in stub.seen if s.path.startswith("/v1/healthz"))


@pytest.mark.parametrize(
    ("args", "feature"),
    [
        (("publish", PACKET["id"]), "publishing (public pages)"),
        (("unpublish", PACKET["id"], "--yes"), "publishing (public pages)"),
        (("tokens",), "token management"),
        (("tokens", "revoke", "laptop", "--yes"), "token management"),
        (("search", "anything"), "search"),
    ],
)
def test_a_feature_the_reference_server_lacks_is_not_offered(
    stub: Stub, tmp_path: Path, args: tuple[str, ...], feature: str
) -> None:
    cli = Cli(tmp_path / "home")
    cli.ok("auth", stub.url, "a-token-for-the-reference-server")
    before = healthz_asked(stub)
    message = cli.fails(*args)
    assert message.startswith(f"ltm: {stub.url} does not offer {feature} ("), message
    assert "a reference ltm server?" in message
    assert "not ltm JSON" not in message and "is it an ltm server" not in message
    assert healthz_asked(stub) - before == 1  # asked once for the command, not per request


def test_show_on_a_reference_server_has_no_published_line(stub: Stub, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    cli.ok("auth", stub.url, "a-token-for-the-reference-server")
    shown = cli.ok("show", PACKET["id"])
    assert "on a reference server" in shown and "Published" not in shown


def test_a_server_that_is_not_ltm_is_still_named_so(tmp_path: Path) -> None:
    with stub_server(not_ltm) as stub:
        cli = Cli(tmp_path / "home")
        home = cli.config / "credentials"
        home.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # as ltm makes it
        home.write_text(json.dumps({"default": stub.url, "hosts": {stub.url: {"token": "t"}}}))
        home.chmod(0o600)
        message = cli.fails("publish", PACKET["id"])
        assert "does not offer" not in message
        assert "is it an ltm server" in message, message
