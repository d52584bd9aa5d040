"""The HTTP API against a real ``ltm server run`` subprocess: routes, auth, packets, errors.

Teams and invites have their own suites (test_server_teams.py,
test_server_invites.py); this one covers health, the OpenAPI document,
authentication, the packet routes with their scope rules, and the errors the
server answers for any route (404, 405, 413, 415, bad JSON, bad query values).
"""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpkit
import httpx
import pytest
from serverkit import (
    SERVER_STORES,
    Server,
    example_packet,
    ltm_server,
    make_packet,
    running_server,
)
from timing import scaled

from ltm import packet

AUTHENTICATED = [
    ("POST", "/v1/packets"),
    ("GET", "/v1/packets"),
    ("GET", "/v1/packets/01JS5LTMEXAMPLEPACKET00001A"),
    ("DELETE", "/v1/packets/01JS5LTMEXAMPLEPACKET00001A"),
    ("POST", "/v1/teams"),
    ("GET", "/v1/teams"),
    ("DELETE", "/v1/teams/core"),
    ("GET", "/v1/teams/core/members"),
    ("DELETE", "/v1/teams/core/members/someone"),
    ("POST", "/v1/teams/core/leave"),
    ("POST", "/v1/teams/core/invites"),
    ("POST", "/v1/packets/batch"),
    ("GET", "/v1/packets/batch?id=01JS5LTMEXAMPLEPACKET00001A"),  # no id: a 400, before the token
]


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("http"), store=request.param) as srv:
        yield srv


@pytest.fixture
def alice(server: Server) -> httpx.Client:
    return server.client(server.issue("alice")[1])


@pytest.fixture
def bob(server: Server) -> httpx.Client:
    return server.client(server.issue("bob")[1])


_NAMES = itertools.count()


def push(client: httpx.Client, data: object, **params: str) -> httpx.Response:
    return client.post("/v1/packets", json=data, params=params)


# -- health and the document ---------------------------------------------------------


def test_healthz_needs_no_token(server: Server) -> None:
    r = httpkit.get(server.url + "/v1/healthz")
    assert r.status_code == 200
    assert r.json() == {"ok": True, "version": "0.2"}
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-request-id"]


def test_head_is_get_without_a_body(server: Server) -> None:
    r = httpkit.head(server.url + "/v1/healthz")
    assert r.status_code == 200 and r.content == b""
    assert int(r.headers["content-length"]) == len(b'{"ok":true,"version":"0.2"}')


def test_a_head_answered_with_an_error_carries_no_body_either(server: Server) -> None:
    """A HEAD answer never has a body (RFC 9110 §9.3.2), also the errors the adapter
    answers itself (an unknown path, a method the route lacks): on a kept-alive
    connection the client would read a body sent anyway as the start of its next answer."""
    host, port = server.url.removeprefix("http://").split(":")
    healthz = b'{"ok":true,"version":"0.2"}'
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as sock:
        sock.sendall(
            b"HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n"
            b"HEAD /v1/teams/core/leave HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        reply = b""
        while chunk := sock.recv(4096):  # closed after the last answer
            reply += chunk
    heads = reply.split(b"\r\n\r\n")
    assert [head.split(b"\r\n", 1)[0] for head in heads[:3]] == [
        b"HTTP/1.1 404 Not Found",
        b"HTTP/1.1 405 Method Not Allowed",
        b"HTTP/1.1 200 OK",
    ]
    assert heads[3:] == [healthz]


def test_openapi_document_lists_every_route(server: Server) -> None:
    r = httpkit.get(server.url + "/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"] == "3.1.0"
    documented = {
        (method.upper(), path)
        for path, item in doc["paths"].items()
        for method in item
        if method != "parameters"
    }
    expected = {
        ("GET", "/v1/healthz"),
        ("GET", "/v1/openapi.json"),
        ("POST", "/v1/packets"),
        ("GET", "/v1/packets"),
        ("GET", "/v1/packets/{id}"),
        ("DELETE", "/v1/packets/{id}"),
        ("POST", "/v1/teams"),
        ("GET", "/v1/teams"),
        ("DELETE", "/v1/teams/{name}"),
        ("GET", "/v1/teams/{name}/members"),
        ("DELETE", "/v1/teams/{name}/members/{user_id}"),
        ("POST", "/v1/teams/{name}/leave"),
        ("POST", "/v1/teams/{name}/invites"),
        ("POST", "/v1/invites/{code}/accept"),
        # the device flow (RFC 8628) and the caller's own tokens
        ("POST", "/oauth/authorize_device"),
        ("POST", "/oauth/token"),
        ("GET", "/device"),
        ("POST", "/device"),
        ("GET", "/device/callback"),
        ("POST", "/device/decide"),
        ("GET", "/v1/device/approve"),  # the waiting sign-in, shown before deciding
        ("POST", "/v1/device/approve"),
        ("GET", "/v1/tokens"),
        ("DELETE", "/v1/tokens/{label}"),
        ("GET", "/v1/whoami"),
        ("PATCH", "/v1/whoami"),  # an extension: ltm profile --display
        # publishing (the reference CLI's publish/unpublish) and the web view's pages
        ("POST", "/v1/packets/{id}/publish"),
        ("DELETE", "/v1/packets/{id}/publish"),
        ("GET", "/"),
        ("GET", "/web"),
        ("GET", "/web/packets/{id}"),
        ("GET", "/web/packets/{id}/delete"),
        ("POST", "/web/packets/{id}/delete"),
        ("GET", "/web/teams/{name}"),
        ("GET", "/web/signin"),
        ("POST", "/web/signin"),
        ("POST", "/web/signin/code"),
        ("POST", "/web/signout"),
        ("GET", "/web/ui"),
        ("POST", "/web/ui"),
        ("GET", "/web/static/{name}"),
        # remote MCP and the OAuth 2.1 endpoints in front of it, and the consent page
        ("POST", "/mcp"),
        ("GET", "/mcp"),
        ("DELETE", "/mcp"),
        ("OPTIONS", "/mcp"),  # the transport's preflight: same Allow as GET's 405
        ("PUT", "/mcp"),  # refused by /mcp itself, as GET and DELETE are
        ("PATCH", "/mcp"),
        *(
            (method, path)
            for path in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-authorization-server",
                "/.well-known/openid-configuration",
            )
            for method in ("GET", "OPTIONS")
        ),
        ("GET", "/authorize"),
        ("POST", "/authorize"),
        *((m, p) for p in ("/token", "/register", "/revoke") for m in ("POST", "OPTIONS")),
        ("GET", "/web/authorize"),
        ("POST", "/web/authorize"),
        # sharing one packet with one person (extensions)
        ("POST", "/v1/packets/{id}/shares"),
        ("GET", "/v1/packets/{id}/shares"),
        ("DELETE", "/v1/packets/{id}/shares/{user}"),
        ("GET", "/v1/shared"),
        # signing in from the CLI: who the token is, a browser key (extensions)
        ("GET", "/v1/whoami"),
        ("POST", "/v1/web/sign-in-key"),
        ("POST", "/web/key"),
        ("GET", "/web/key"),
        ("GET", "/p/{secret}"),
        # search and lineage (extensions the reference does not have)
        ("GET", "/v1/search"),
        ("POST", "/v1/search"),  # the query in a body, out of proxies' and access logs
        ("GET", "/v1/packets/{id}/children"),
        ("GET", "/v1/packets/{id}/thread"),
        # many packets in one request (extensions: ltm import and export use them)
        ("POST", "/v1/packets/batch"),
        ("GET", "/v1/packets/batch"),
        # sharing one packet with one user (extensions)
        ("POST", "/v1/packets/{id}/shares"),
        ("GET", "/v1/packets/{id}/shares"),
        ("DELETE", "/v1/packets/{id}/shares/{user}"),
        ("GET", "/v1/shared"),
    }
    assert documented == expected


def test_the_app_serves_exactly_the_documented_routes() -> None:
    from ltm.cli.server.loader import load_app
    from ltm.openapi import document

    app = load_app().app
    served = {(m, path) for path, entries in app.routes.items() for m in entries}
    documented = {
        (method.upper(), path)
        for path, item in document()["paths"].items()
        for method in item
        if method != "parameters"
    }
    assert served == documented


# -- authentication -----------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), AUTHENTICATED)
def test_missing_bearer_is_401(server: Server, method: str, path: str) -> None:
    r = httpkit.request(method, server.url + path, json={})
    assert r.status_code == 401
    assert r.json() == {"error": "missing bearer token"}
    assert r.headers["WWW-Authenticate"] == "Bearer"  # RFC 6750 §3: no error code


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "token abc", "Bearerltm_x"])
def test_a_header_without_a_bearer_token_is_401_missing(server: Server, header: str) -> None:
    r = httpkit.get(server.url + "/v1/packets", headers={"Authorization": header})
    assert r.status_code == 401
    assert r.json() == {"error": "missing bearer token"}


@pytest.mark.parametrize(("method", "path"), AUTHENTICATED)
def test_unknown_token_is_401_invalid(server: Server, method: str, path: str) -> None:
    headers = {"Authorization": "Bearer ltm_" + "0" * 64}
    r = httpkit.request(method, server.url + path, json={}, headers=headers)
    assert r.status_code == 401
    assert r.json() == {"error": "invalid token"}
    assert r.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'  # RFC 6750 §3


def test_bearer_scheme_is_case_insensitive(server: Server) -> None:
    r = httpkit.get(
        server.url + "/v1/teams", headers={"Authorization": f"bearer {server.root_token}"}
    )
    assert r.status_code == 200


def test_a_revoked_token_stops_working_at_once(server: Server) -> None:
    _, token = server.issue("short-lived")
    client = server.client(token)
    assert client.get("/v1/packets").status_code == 200
    store = server.open_store()
    try:
        label = next(t.label for t in store.list_tokens() if t.label.startswith("short-lived"))
        assert store.revoke_token(label)
    finally:
        store.close()
    r = client.get("/v1/packets")
    assert r.status_code == 401 and r.json() == {"error": "invalid token"}


def test_the_root_token_from_init_works(server: Server) -> None:
    r = server.client(server.root_token).get("/v1/teams")
    assert r.status_code == 200


# -- packets --------------------------------------------------------------------------


def test_push_get_round_trip_is_canonical(alice: httpx.Client) -> None:
    data = example_packet(id=make_packet()["id"])
    # Send it pretty-printed with the keys reversed: the server stores the canonical form.
    raw = json.dumps(dict(reversed(list(data.items()))), indent=4).encode()
    r = alice.post("/v1/packets", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    assert r.json() == {"id": data["id"]}
    got = alice.get(f"/v1/packets/{data['id']}")
    assert got.status_code == 200
    assert got.headers["content-type"] == "application/json"
    assert got.content == packet.canonical_bytes(data)
    assert "x-ltm-conforming" not in got.headers


def test_push_accepts_json_content_type_variants(alice: httpx.Client) -> None:
    for content_type in ("application/json; charset=utf-8", "Application/JSON", None):
        data = make_packet()
        headers = {"Content-Type": content_type} if content_type else {}
        r = alice.post("/v1/packets", content=json.dumps(data).encode(), headers=headers)
        assert r.status_code == 201, (content_type, r.text)


def test_list_is_newest_first_with_default_limit_50(alice: httpx.Client) -> None:
    ids = []
    for day in range(1, 56):
        data = make_packet(created_at=f"2025-01-{(day - 1) % 28 + 1:02d}T{day % 24:02d}:00:00Z")
        ids.append((data["created_at"], data["id"]))
        assert push(alice, data).status_code == 201
    r = alice.get("/v1/packets")
    assert r.status_code == 200
    listed = r.json()["packets"]
    assert len(listed) == 50
    assert set(listed[0]) == {"id", "created_at", "goal"}
    expected = [i for _, i in sorted(ids, reverse=True)][:50]
    assert [p["id"] for p in listed] == expected
    r = alice.get("/v1/packets", params={"limit": 3})
    assert [p["id"] for p in r.json()["packets"]] == expected[:3]
    r = alice.get("/v1/packets", params={"limit": 1000})
    assert len(r.json()["packets"]) == 55


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=-1",
        "limit=abc",
        "limit=1001",
        "limit=1.5",
        "limit=",
        "limit=1&limit=2",
        "team=",
        "lenient=maybe",
        "lenient=1",
        "team=a&team=b",
    ],
)
def test_bad_query_values_are_400(alice: httpx.Client, query: str) -> None:
    method = "POST" if query.startswith("lenient") else "GET"
    r = alice.request(method, "/v1/packets?" + query, json=make_packet())
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error"}


def test_unknown_query_parameters_are_ignored(alice: httpx.Client) -> None:
    assert alice.get("/v1/packets?foo=bar").status_code == 200


def test_get_missing_or_foreign_packet_is_404_not_found(
    alice: httpx.Client, bob: httpx.Client
) -> None:
    data = make_packet()
    assert push(alice, data).status_code == 201
    for client, packet_id in ((alice, make_packet()["id"]), (bob, data["id"])):
        r = client.get(f"/v1/packets/{packet_id}")
        assert r.status_code == 404
        assert r.json() == {"error": "not found"}
    assert data["id"] not in [p["id"] for p in bob.get("/v1/packets").json()["packets"]]


def test_delete_own_packet_then_it_is_gone(alice: httpx.Client) -> None:
    data = make_packet()
    assert push(alice, data).status_code == 201
    r = alice.delete(f"/v1/packets/{data['id']}")
    assert r.status_code == 204 and r.content == b""
    assert alice.get(f"/v1/packets/{data['id']}").status_code == 404
    r = alice.delete(f"/v1/packets/{data['id']}")
    assert r.status_code == 404 and r.json() == {"error": "not found"}


def test_nobody_else_can_delete_a_personal_packet(alice: httpx.Client, bob: httpx.Client) -> None:
    data = make_packet()
    assert push(alice, data).status_code == 201
    r = bob.delete(f"/v1/packets/{data['id']}")
    assert r.status_code == 404 and r.json() == {"error": "not found"}
    assert alice.get(f"/v1/packets/{data['id']}").status_code == 200


def test_repush_of_own_packet_is_idempotent(alice: httpx.Client) -> None:
    data = make_packet()
    first = push(alice, data)
    again = push(alice, data)
    assert first.status_code == again.status_code == 201
    assert again.json() == {"id": data["id"]}
    listed = [p["id"] for p in alice.get("/v1/packets", params={"limit": 1000}).json()["packets"]]
    assert listed.count(data["id"]) == 1
    # A changed re-push replaces the owner's own packet.
    changed = dict(data, goal="A sharper goal")
    assert push(alice, changed).status_code == 201
    assert alice.get(f"/v1/packets/{data['id']}").json()["goal"] == "A sharper goal"


def test_pushing_someone_elses_id_is_409_and_leaves_their_packet_alone(
    alice: httpx.Client, bob: httpx.Client
) -> None:
    data = make_packet(goal="Alice's real goal")
    assert push(alice, data).status_code == 201
    before = alice.get(f"/v1/packets/{data['id']}").content
    hijack = dict(data, goal="Bob was here")
    r = push(bob, hijack)
    assert r.status_code == 409
    assert r.json() == {"error": "packet id already exists"}
    assert alice.get(f"/v1/packets/{data['id']}").content == before
    assert bob.get(f"/v1/packets/{data['id']}").status_code == 404
    r = bob.delete(f"/v1/packets/{data['id']}")
    assert r.status_code == 404


def test_an_owner_moves_their_packet_into_a_team(
    server: Server, alice: httpx.Client, bob: httpx.Client
) -> None:
    """``push`` then ``push -t TEAM`` (the reference's documented flow) moves
    the packet into the team; out of a team again, or someone else's id, stays 409."""
    team, other = f"move-{next(_NAMES)}", f"move-{next(_NAMES)}"
    for name in (team, other):
        assert alice.post("/v1/teams", json={"name": name}).status_code == 201
    joined = httpkit.post(
        alice.post(f"/v1/teams/{team}/invites").json()["url"] + "/accept",
        headers=bob.headers,
    )
    assert joined.status_code == 201
    data = make_packet(goal="personal first")
    assert push(alice, data).status_code == 201
    # Bob is in the team too, but the id is Alice's: refused, nothing changes.
    r = push(bob, {**data, "goal": "bob's"}, team=team)
    assert r.status_code == 409 and r.json() == {"error": "packet id already exists"}
    assert alice.get(f"/v1/packets/{data['id']}").json()["goal"] == "personal first"
    # Alice moves it into the team: gone from her own list, in the team's, Bob reads it.
    r = push(alice, {**data, "goal": "now the team's"}, team=team)
    assert r.status_code == 201 and r.json() == {"id": data["id"]}
    assert data["id"] not in alice.get("/v1/packets?limit=1000").text
    assert data["id"] in alice.get(f"/v1/packets?team={team}").text
    assert bob.get(f"/v1/packets/{data['id']}").json()["goal"] == "now the team's"
    # Pushed again into the same team: replaced, as any re-push.
    assert push(alice, {**data, "goal": "again"}, team=team).status_code == 201
    # Out of the team (to her own scope or another team) is not a move: 409.
    for params in ({}, {"team": other}):
        r = push(alice, {**data, "goal": "out"}, **params)
        assert r.status_code == 409 and r.json() == {"error": "packet id already exists"}
    assert bob.get(f"/v1/packets/{data['id']}").json()["goal"] == "again"


def test_no_move_into_a_team_the_owner_is_not_in(alice: httpx.Client, bob: httpx.Client) -> None:
    name = f"move-{next(_NAMES)}"
    assert bob.post("/v1/teams", json={"name": name}).status_code == 201
    data = make_packet()
    assert push(alice, data).status_code == 201
    r = push(alice, data, team=name)
    assert r.status_code == 404 and r.json() == {"error": "team not found"}
    assert data["id"] in alice.get("/v1/packets?limit=1000").text


def test_invalid_packets_are_400_with_the_reason(alice: httpx.Client) -> None:
    r = push(alice, make_packet(goal=""))
    assert r.status_code == 400 and "goal" in r.json()["error"]
    r = push(alice, make_packet(tags=["Not A Tag"]))
    assert r.status_code == 400 and "tags" in r.json()["error"]
    r = push(alice, make_packet(ltm_version="0.3"))
    assert r.status_code == 400
    assert "0.1" in r.json()["error"] and "0.2" in r.json()["error"]
    r = push(alice, make_packet(surprise=True))
    assert r.status_code == 400 and "surprise" in r.json()["error"]
    missing = make_packet()
    del missing["next_step"]
    r = push(alice, missing)
    assert r.status_code == 400 and "next_step" in r.json()["error"]


@pytest.mark.parametrize(
    "body", [b"{", b"[]", b'"a packet"', b"null", b"", b"\xff\xfe{}", b"[" * 20000, b"{} {}"]
)
def test_malformed_bodies_are_400(alice: httpx.Client, body: bytes) -> None:
    r = alice.post("/v1/packets", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error"}


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_wrong_content_type_is_415(alice: httpx.Client, content_type: str) -> None:
    r = alice.post(
        "/v1/packets",
        content=json.dumps(make_packet()).encode(),
        headers={"Content-Type": content_type},
    )
    assert r.status_code == 415
    assert r.json() == {"error": "content type must be application/json"}


def test_lenient_push_is_flagged(alice: httpx.Client) -> None:
    data = make_packet(tags=["Not A Tag"])
    assert push(alice, data).status_code == 400
    r = push(alice, data, lenient="true")
    assert r.status_code == 201
    assert r.json() == {"id": data["id"], "conforming": False}
    got = alice.get(f"/v1/packets/{data['id']}")
    assert got.status_code == 200 and got.headers["x-ltm-conforming"] == "false"
    # A conforming packet pushed leniently is just a packet.
    good = make_packet()
    assert push(alice, good, lenient="true").json() == {"id": good["id"]}


def _padded_packet(size: int) -> bytes:
    data = make_packet()
    base = len(json.dumps(data, separators=(",", ":")).encode())
    data["constraints"] = []
    while True:
        raw = json.dumps(data, separators=(",", ":")).encode()
        if len(raw) >= size - 1100:
            break
        data["constraints"].append("x" * 1000)
    raw = json.dumps(data, separators=(",", ":")).encode()
    pad = size - len(raw)
    assert base < size and pad >= 0
    return raw[:-1] + b" " * pad + b"}"


def test_a_packet_of_exactly_32_kib_is_accepted(alice: httpx.Client) -> None:
    raw = _padded_packet(32768)
    assert len(raw) == 32768
    r = alice.post("/v1/packets", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text


def test_a_body_over_32_kib_is_413(alice: httpx.Client) -> None:
    raw = _padded_packet(32769)
    r = alice.post("/v1/packets", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json() == {"error": "request body too large (max 32768 bytes)"}


def test_a_chunked_body_over_32_kib_is_413(alice: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b" " * 1024

    r = alice.post("/v1/packets", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json() == {"error": "request body too large (max 32768 bytes)"}


def test_an_oversized_content_length_is_refused_before_the_body_is_sent(server: Server) -> None:
    """The server answers 413 from the headers alone: it never waits for the 1 GB body."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as sock:
        sock.sendall(
            b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + server.root_token.encode() + b"\r\n"
            b"Content-Length: 1000000000\r\n\r\n"
        )
        reply = b""
        while chunk := sock.recv(4096):  # the server closes the connection after a 413
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert b'{"error":"request body too large (max 32768 bytes)"}' in reply


def _head_only_reply(server: Server, request_line: bytes, length: int) -> bytes:
    """What the server answers a head declaring ``length`` bytes, the body never sent."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as sock:
        sock.sendall(
            request_line + b"\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + server.root_token.encode() + b"\r\n"
            b"Content-Length: " + str(length).encode() + b"\r\n\r\n"
        )
        reply = b""
        while chunk := sock.recv(4096):  # the server closes the connection after a 413
            reply += chunk
    return reply


def test_a_batch_body_has_its_own_bound_refused_from_the_head(server: Server) -> None:
    """The batch route takes up to 1 MiB; past it, 413 from the head, naming that bound.
    Between the two bounds, any other route is refused from the head, never waited on."""
    from ltm.limits import MAX_BATCH_BODY

    reply = _head_only_reply(server, b"POST /v1/packets/batch HTTP/1.1", MAX_BATCH_BODY + 1)
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert b'{"error":"request body too large (max 1048576 bytes)"}' in reply
    for line in (
        b"POST /v1/packets HTTP/1.1",
        b"GET /v1/packets/batch HTTP/1.1",
        b"POST /mcp2 HTTP/1.1",
    ):
        reply = _head_only_reply(server, line, 100_000)
        assert reply.startswith(b"HTTP/1.1 413 "), line
        assert b'{"error":"request body too large (max 32768 bytes)"}' in reply


def test_a_chunked_batch_body_past_its_bound_is_413(alice: httpx.Client) -> None:
    from ltm.limits import MAX_BATCH_BODY

    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BATCH_BODY // 4096 + 1):
            yield b" " * 4096

    r = alice.post(
        "/v1/packets/batch", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413
    assert r.json() == {"error": f"request body too large (max {MAX_BATCH_BODY} bytes)"}
    # Under the bound, the body is read whole and judged: not a batch.
    r = alice.post(
        "/v1/packets/batch",
        content=iter([b"x" * 40_000]),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json() == {"error": "malformed JSON"}


# -- errors of any route ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/nope", "/v1", "/v1/nope", "/v1/packets/", "/v2/packets", "/v1/invites/abc", "/%ff"]
)
def test_unknown_routes_are_json_404(server: Server, path: str) -> None:
    r = httpkit.get(server.url + path)
    assert r.status_code == 404
    assert r.json() == {"error": "not found"}


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v1/packets", "GET, HEAD, POST"),
        ("PATCH", "/v1/packets/abc", "DELETE, GET, HEAD"),
        ("GET", "/v1/teams/core/leave", "POST"),
        ("DELETE", "/v1/healthz", "GET, HEAD"),
        ("GET", "/v1/invites/abc/accept", "POST"),
    ],
)
def test_wrong_methods_are_json_405(server: Server, method: str, path: str, allow: str) -> None:
    r = httpkit.request(method, server.url + path)
    assert r.status_code == 405
    assert r.json() == {"error": "method not allowed"}
    assert r.headers["allow"] == allow


def test_malformed_http_is_a_json_400(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as sock:
        sock.sendall(b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):  # the server closes the connection after an error
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert b"application/json" in reply and b'{"error":' in reply


def test_logs_are_structured_and_keep_secrets_out(server: Server, tmp_path: Path) -> None:
    _user_id, token = server.issue("logger")
    client = server.client(token)
    secret_goal = "goal-that-must-not-be-logged-7f3a"
    data = make_packet(goal=secret_goal)
    assert push(client, data).status_code == 201
    assert client.post("/v1/teams", json={"name": "log-team"}).status_code == 201
    invite = client.post("/v1/teams/log-team/invites").json()
    assert httpkit.post(f"{server.url}/v1/invites/{invite['code']}/accept").status_code == 201
    client.get("/v1/nope")
    lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("message") == "request"]
    assert requests
    for line in requests:
        assert {"method", "path", "status", "latency_ms", "request_id"} <= set(line)
    assert any(r["path"] == "/v1/invites/{code}/accept" and r["status"] == 201 for r in requests)
    text = server.logs()
    for secret in (token, server.root_token, secret_goal, invite["code"], "Bearer"):
        assert secret not in text
    assert "authorization" not in text.lower()


def test_the_access_log_masks_a_public_links_secret(server: Server) -> None:
    """``/p/<secret>`` reads a published packet: the log shows ``/p/{secret}``, as invites."""
    client = server.client(server.issue("publisher")[1])
    data = make_packet(goal="published and logged")
    assert push(client, data).status_code == 201
    url = client.post(f"/v1/packets/{data['id']}/publish").json()["public_url"]
    secret = url.rsplit("/p/", 1)[1]
    assert httpkit.get(url).status_code == 200
    assert httpkit.head(url).status_code == 200
    assert httpkit.get(f"{url}/more").status_code == 404  # answered by the adapter, not a route
    assert httpkit.get(f"{server.url}/v1/invites/{secret}x/nope").status_code == 404
    lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    paths = [line["path"] for line in lines if line.get("message") == "request"]
    assert paths.count("/p/{secret}") >= 2 and "/p/{secret}/more" in paths
    assert "/v1/invites/{code}/nope" in paths
    assert secret not in server.logs()


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        ("/p/s3cr3t", "/p/{secret}"),
        ("/p/s3cr3t/", "/p/{secret}/"),
        ("/dev/p/s3cr3t", "/dev/p/{secret}"),  # behind a stage prefix
        ("/v1/invites/c0de/accept", "/v1/invites/{code}/accept"),
        ("/v1/packets/01ABC", "/v1/packets/01ABC"),
        ("/web/packets/01ABC", "/web/packets/01ABC"),
    ],
)
def test_loggable_path_masks_the_secrets_in_a_path(path: str, logged: str) -> None:
    from ltm.logs import loggable_path

    assert loggable_path(path) == logged


def test_the_per_user_storage_bound_is_a_507_with_one_line(tmp_path: Path) -> None:
    """``LTM_MAX_PACKETS_PER_USER``/``LTM_MAX_BYTES_PER_USER``: what one account may own."""
    from clikit import signed_in
    from serverkit import clean_env, init_db, run_server

    db = tmp_path / "server.db"
    env = clean_env(LTM_MAX_PACKETS_PER_USER="2", LTM_MAX_BYTES_PER_USER="4000")
    server = run_server(db, tmp_path / "server.log", init_db(db), env=env)
    try:
        client = server.client(server.issue("hoarder")[1])
        first, second = make_packet(goal="one"), make_packet(goal="two")
        assert push(client, first).status_code == 201
        assert push(client, second).status_code == 201
        refused = push(client, make_packet(goal="three"))
        message = (
            "storage limit reached: at most 2 packets per user on this server;"
            " delete packets you no longer need, or ask the operator for more"
        )
        assert refused.status_code == 507 and refused.json() == {"error": message}
        assert push(client, {**first, "goal": "one, edited"}).status_code == 201  # no growth
        big = push(client, {**first, "constraints": ["x" * 1000] * 4})
        assert big.status_code == 507
        assert "at most 3.9 KiB of packets per user" in big.json()["error"]
        other = server.client(server.issue("neighbour")[1])
        assert push(other, make_packet(goal="theirs")).status_code == 201  # each user's own
        assert client.delete(f"/v1/packets/{second['id']}").status_code == 204
        assert push(client, make_packet(goal="three")).status_code == 201  # room again
        # the CLI says it in one line
        cli = signed_in(server, tmp_path / "home", "hoarder-cli")
        for n in range(2):
            cli.ok("save", "-", stdin=json.dumps({"goal": f"g{n}", "next_step": "s"}))
        line = cli.fails("save", "-", stdin=json.dumps({"goal": "g2", "next_step": "s"}))
        assert line.endswith(f"refused: {message} (HTTP 507) — list them with: ltm ls --all")
    finally:
        server.stop()
    bad = clean_env(LTM_MAX_BYTES_PER_USER="lots")
    result = ltm_server("run", "--db", str(db), "--addr", "127.0.0.1:0", env=bad)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "LTM_MAX_BYTES_PER_USER must be a whole number above 0, got 'lots'" in result.stderr


def test_a_malformed_chunked_body_is_a_json_400(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as sock:
        sock.sendall(
            b"POST /v1/packets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + server.root_token.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
        )
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
            if b"\r\n\r\n" in reply and reply.endswith(b"}"):
                break
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert b"application/json" in reply and b'{"error":' in reply


def test_huge_headers_are_a_json_error(server: Server) -> None:
    r = httpkit.get(server.url + "/v1/healthz", headers={"X-Big": "x" * 70_000})
    assert r.status_code in (413, 431)
    assert r.json() == {"error": "request headers too large"}
