"""Token scope: a device gets what it asked for, and the server holds it to that.

Against a real ``ltm server run`` on each store (SQLite, DynamoDB through
moto's server). Tokens come from the real device flow: ``scope=read`` (or
``write``) at ``/oauth/authorize_device``, approved by the root user, redeemed
at ``/oauth/token``. A read-only token lists and fetches; every write, every
team change, token management and device approval is refused with 403
``insufficient scope`` and a ``WWW-Authenticate: Bearer
error="insufficient_scope"`` challenge (RFC 6750 §3.1), and nothing changes.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpkit
import httpx
import pytest
from clikit import Cli
from devicekit import approve, csrf_of, device_server, poll
from serverkit import SERVER_STORES, Server, make_packet


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with device_server(tmp_path_factory.mktemp("scope"), store=request.param) as srv:
        yield srv


def start(server: Server, scope: str | None) -> httpx.Response:
    """``POST /oauth/authorize_device`` asking for ``scope`` (None: no scope parameter)."""
    form = {"client_id": "ltm-cli"}
    if scope is not None:
        form["scope"] = scope
    return httpkit.post(server.url + "/oauth/authorize_device", data=form)


def device_token(server: Server, scope: str | None) -> dict[str, Any]:
    """A token through the whole device flow, approved by the root user."""
    started = start(server, scope)
    assert started.status_code == 200, started.text
    codes = started.json()
    r = approve(server, server.root_token, codes["user_code"])
    assert r.status_code == 200, r.text
    assert r.json()["device"]["scope"] == " ".join(  # as granted, in a stable order
        s for s in ("read", "write") if s in (scope or "read write").split()
    )
    for _ in range(50):
        r = poll(server, codes["device_code"])
        if r.status_code == 200:
            return r.json()
        assert r.json()["error"] in ("authorization_pending", "slow_down"), r.text
        time.sleep(1.1)
    raise AssertionError("the device never got its token")


def refused(r: httpx.Response, need: str) -> None:
    assert r.status_code == 403, (r.status_code, r.text)
    assert r.json() == {"error": "insufficient scope"}
    assert r.headers["WWW-Authenticate"] == (f'Bearer error="insufficient_scope", scope="{need}"')


@pytest.fixture(scope="module")
def read_only(server: Server) -> httpx.Client:
    answer = device_token(server, "read")
    assert answer["scope"] == "read" and answer["token_type"] == "Bearer"
    return server.client(answer["access_token"])


def test_a_read_token_reads(server: Server, read_only: httpx.Client) -> None:
    root = server.client(server.root_token)
    packet = make_packet(goal="readable")
    assert root.post("/v1/packets", json=packet).status_code == 201
    assert root.post("/v1/teams", json={"name": "scope-reads"}).status_code == 201
    assert root.post("/v1/packets?team=scope-reads", json=make_packet()).status_code == 201
    listed = read_only.get("/v1/packets")
    assert listed.status_code == 200 and packet["id"] in listed.text
    assert read_only.get(f"/v1/packets/{packet['id']}").json()["goal"] == "readable"
    assert read_only.get("/v1/packets?team=scope-reads").json()["packets"]
    assert "scope-reads" in read_only.get("/v1/teams").text
    assert read_only.get("/v1/teams/scope-reads/members").status_code == 200
    assert httpkit.get(server.url + "/v1/healthz").status_code == 200  # no token at all


def test_a_read_token_changes_nothing(server: Server, read_only: httpx.Client) -> None:
    root = server.client(server.root_token)
    mine = make_packet(goal="keep me")
    assert root.post("/v1/packets", json=mine).status_code == 201
    assert root.post("/v1/teams", json={"name": "scope-writes"}).status_code == 201
    made = root.post("/v1/teams/scope-writes/invites").json()
    joined = httpkit.post(made["url"] + "/accept", json={"display": "member"}).json()
    before_packets = root.get("/v1/packets?limit=1000").json()
    before_teams = root.get("/v1/teams").json()
    before_tokens = root.get("/v1/tokens").json()

    refused(read_only.post("/v1/packets", json=make_packet()), "write")
    refused(read_only.post("/v1/packets?team=scope-writes", json=make_packet()), "write")
    refused(read_only.post("/v1/packets", json=mine), "write")  # even a re-push of its own
    refused(read_only.delete(f"/v1/packets/{mine['id']}"), "write")
    refused(read_only.post("/v1/teams", json={"name": "scope-new"}), "write")
    refused(read_only.delete("/v1/teams/scope-writes"), "write")
    refused(read_only.post("/v1/teams/scope-writes/invites"), "read write")
    refused(read_only.delete(f"/v1/teams/scope-writes/members/{joined['user']['id']}"), "write")
    refused(read_only.post("/v1/teams/scope-writes/leave"), "write")
    another = root.post("/v1/teams/scope-writes/invites").json()
    refused(read_only.post(f"/v1/invites/{another['code']}/accept"), "write")
    # Token management and device approval need the full scope.
    refused(read_only.get("/v1/tokens"), "read write")
    label = before_tokens["tokens"][0]["label"]
    refused(read_only.delete(f"/v1/tokens/{label}"), "read write")
    pending = start(server, None).json()
    refused(
        read_only.post("/v1/device/approve", json={"user_code": pending["user_code"]}), "read write"
    )
    # Even a look: it names the device the code would sign in as the token's owner.
    refused(
        read_only.get("/v1/device/approve", params={"user_code": pending["user_code"]}),
        "read write",
    )

    # Nothing changed.
    assert root.get("/v1/packets?limit=1000").json() == before_packets
    assert root.get("/v1/teams").json() == before_teams
    after_tokens = root.get("/v1/tokens").json()["tokens"]
    assert [(t["label"], t["scope"]) for t in after_tokens] == [
        (t["label"], t["scope"]) for t in before_tokens["tokens"]
    ]
    assert root.get(f"/v1/packets/{mine['id']}").status_code == 200
    members = root.get("/v1/teams/scope-writes/members").json()["members"]
    assert len(members) == 2
    waiting = poll(server, pending["device_code"])
    assert waiting.json()["error"] in ("authorization_pending", "slow_down")
    assert httpkit.post(another["url"] + "/accept", json={}).status_code == 201  # still unused


def test_a_read_token_cannot_approve_on_the_page(server: Server, read_only: httpx.Client) -> None:
    pending = start(server, "read write").json()
    token = read_only.headers["Authorization"].removeprefix("Bearer ")
    with httpkit.Client(base_url=server.url) as browser:
        csrf = csrf_of(browser.get("/device").text)
        r = browser.post(
            "/device", data={"csrf": csrf, "code": pending["user_code"], "token": token}
        )
    assert r.status_code == 403 and "full access" in r.text and token not in r.text


def test_the_page_and_the_answers_say_the_scope_truthfully(
    server: Server, read_only: httpx.Client
) -> None:
    pending = start(server, "read").json()
    with httpkit.Client(base_url=server.url) as browser:
        csrf = csrf_of(browser.get("/device").text)
        r = browser.post(
            "/device", data={"csrf": csrf, "code": pending["user_code"], "token": server.root_token}
        )
    assert r.status_code == 200 and "read only" in r.text
    # A write-only token pushes but cannot list; the token list says which is which.
    write_only = device_token(server, "write")
    assert write_only["scope"] == "write"
    client = server.client(write_only["access_token"])
    assert client.post("/v1/packets", json=make_packet()).status_code == 201
    refused(client.get("/v1/packets"), "read")
    scopes = {
        t["scope"] for t in server.client(server.root_token).get("/v1/tokens").json()["tokens"]
    }
    assert {"read", "write", "read write"} <= scopes


def test_the_reference_clients_scope_is_full(server: Server) -> None:
    """The Go client posts ``scope=read write``; without a scope, the default is full too."""
    for scope in ("read write", "write read", None):
        answer = device_token(server, scope)
        assert answer["scope"] == "read write"
        client = server.client(answer["access_token"])
        assert client.post("/v1/packets", json=make_packet()).status_code == 201
        assert client.get("/v1/tokens").status_code == 200


@pytest.mark.parametrize("scope", ["admin", "read admin", "READ"])
def test_an_unknown_scope_is_invalid_scope(server: Server, scope: str) -> None:
    r = start(server, scope)
    assert r.status_code == 400 and r.json()["error"] == "invalid_scope"


def test_the_cli_says_what_a_read_only_token_lacks(
    server: Server, read_only: httpx.Client, tmp_path: Path
) -> None:
    """Our CLI, signed in with a read-only token: ls works; a push says why it is refused."""
    token = read_only.headers["Authorization"].removeprefix("Bearer ")
    cli = Cli(tmp_path / "cli")
    cli.ok("auth", server.url, "--with-token", stdin=token)
    cli.ok("ls")
    error = cli.fails("save", "-", stdin=json.dumps(make_packet()))
    assert "may not do that" in error and f"ltm auth {server.url}" in error
    error = cli.fails("tokens")  # managing tokens needs the full scope
    assert "may not do that" in error
    # No sign-in key, so no word of where a loopback server's pages answer: the URL
    # printed is the API's, whose pages say only "wrong address"; ltm open says where.
    opened = cli.run("open", "--no-browser")
    assert opened.returncode == 0 and opened.stdout == f"{server.url}/web\n", opened
    assert "may not sign a browser in (it needs read write)" in opened.stderr
    assert "at the web view address `ltm server run` printed" in opened.stderr
    root = Cli(tmp_path / "root")
    root.ok("auth", server.url, "--with-token", stdin=server.root_token)
    listed = root.ok("tokens")
    assert "SCOPE" in listed.splitlines()[0]
    assert re.search(r"\bread$", listed, re.M)  # the read-only device token (rows are stripped)
    assert re.search(r"read write\s+\(this machine\)", listed)


def test_doctor_names_a_read_only_tokens_scope(
    server: Server, read_only: httpx.Client, tmp_path: Path
) -> None:
    token = read_only.headers["Authorization"].removeprefix("Bearer ")
    cli = Cli(tmp_path / "cli")
    cli.ok("auth", server.url, "--with-token", stdin=token)
    result = cli.run("doctor", "--json")
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["token"]["status"] == "ok"
    assert "scope 'read': reads only" in checks["token"]["detail"]


def test_tokens_from_before_scopes_keep_full_access(tmp_path: Path) -> None:
    """SQLite's migration: every token stored before scopes existed is full, as it was."""
    import sqlite3

    from ltm.service import packets, tokens
    from ltm.store.sqlite import SqliteStore
    from ltm.store.sqlite_schema import MIGRATIONS

    db = tmp_path / "old.db"
    old = sqlite3.connect(db)
    for step in MIGRATIONS[:2]:  # the schema before this change
        old.executescript(step)
    secret = tokens.mint("01JAAAAAAAAAAAAAAAAAAAAAAA")
    old.execute(
        "INSERT INTO users (id, display, created_at)"
        " VALUES (?, 'old', '2026-01-01T00:00:00+00:00')",
        ("01JAAAAAAAAAAAAAAAAAAAAAAA",),
    )
    old.execute(
        "INSERT INTO tokens (token_hash, label, user_id, created_at)"
        " VALUES (?, 'old-laptop', ?, '2026-01-01T00:00:00+00:00')",
        (tokens.hash_token(secret), "01JAAAAAAAAAAAAAAAAAAAAAAA"),
    )
    old.execute("PRAGMA user_version = 2")
    old.commit()
    old.close()
    store = SqliteStore(db)
    try:
        (listed,) = store.list_tokens()
        assert listed.scope == "read write"
        caller = tokens.credential(f"Bearer {secret}")
        assert packets.push(store, caller, make_packet()).created
        assert [t.label for t in tokens.list_own(store, caller)] == ["old-laptop"]
    finally:
        store.close()


def test_the_service_holds_every_entry_point_to_its_scope(store: Any) -> None:
    """The rule lives in the service layer, on both stores (the ``store`` fixture)."""
    from ltm.service import device, invites, packets, publish, share, teams, tokens
    from ltm.service.errors import InsufficientScope
    from ltm.store import Token

    owner, full = tokens.issue(store, "owner")
    team = teams.create(store, tokens.credential(f"Bearer {full}"), "scoped")
    mine = make_packet()
    packets.push(store, owner, mine)

    def token_with(scope: str) -> Any:
        secret = tokens.mint(owner.id)
        store.add_token(
            Token(f"t-{scope}", owner.id, tokens.hash_token(secret), owner.created_at, scope=scope)
        )
        return tokens.credential(f"Bearer {secret}")

    read, write = token_with("read"), token_with("write")
    settings = device.DeviceSettings()
    reads = [
        lambda c: packets.list_(store, c),
        lambda c: packets.get(store, c, mine["id"]),
        lambda c: packets.resolve(store, c, mine["id"][:6]),
        lambda c: teams.list_(store, c),
        lambda c: teams.members(store, c, team.name),
    ]
    writes = [
        lambda c: packets.push(store, c, make_packet()),
        lambda c: packets.delete(store, c, mine["id"]),
        lambda c: teams.create(store, c, "another"),
        lambda c: teams.delete(store, c, team.name),
        lambda c: teams.kick(store, c, team.name, "nobody"),
        lambda c: teams.leave(store, c, team.name),
        lambda c: invites.accept(store, c, "A" * 32),
    ]
    full_only = [
        lambda c: tokens.list_own(store, c),
        lambda c: tokens.revoke_own(store, c, "t-read"),
        lambda c: device.decide(store, settings, c, "BCDF-GHJK", approve=True),
        # Publishing answers a URL that reads the packet: never for a write-only token.
        lambda c: publish.publish(store, c, mine["id"]),
        lambda c: publish.unpublish(store, c, mine["id"]),
        # So does handing reading to someone else: an invite, a share.
        lambda c: invites.create(store, c, team.name, base_url="https://x.test"),
        lambda c: share.share(store, c, mine["id"], "nobody"),
    ]
    for call in reads:
        call(read)
        with pytest.raises(InsufficientScope):
            call(write)
    for call in writes:
        with pytest.raises(InsufficientScope):
            call(read)
    for call in full_only:
        for partial in (read, write):
            with pytest.raises(InsufficientScope) as refused:
                call(partial)
            assert refused.value.headers["WWW-Authenticate"].endswith('scope="read write"')
    # Nothing changed: the packet, the team, the tokens.
    assert packets.get(store, owner, mine["id"]).meta.id == mine["id"]
    assert store.publication(mine["id"]) is None
    assert [t.name for t in teams.list_(store, owner)] == ["scoped"]
    assert {t.label for t in store.list_tokens(user_id=owner.id)} >= {"t-read", "t-write"}


# -- every route, every kind of credential -------------------------------------------------
# The matrix is the API's own description: GET /v1/openapi.json names each route's scope
# (``openapi._with_scopes``), and test_server_http checks that it describes every route the
# app serves. Each route is walked here with each kind of credential, so a route added
# without its check (or with one its description does not say) fails.

# The routes that take no ltm bearer token, and why: each must be named, so that a new
# route is a decision, not an accident. (Their own rules are tested where they live.)
PUBLIC = {
    ("GET", "/v1/healthz"): "liveness",
    ("GET", "/v1/openapi.json"): "the API's description",
    ("POST", "/oauth/authorize_device"): "device flow start: anonymous by RFC 8628",
    ("POST", "/oauth/token"): "device flow: the device code is the credential",
    ("GET", "/device"): "approval page: a full-scope token typed in, or a web session",
    ("POST", "/device"): "approval page: a full-scope token typed in, or a web session",
    ("GET", "/device/callback"): "Cognito's return: a signed state",
    ("POST", "/device/decide"): "approval by a web session, with CSRF",
    ("GET", "/"): "redirect to /web",
    ("GET", "/web"): "web session",
    ("GET", "/web/packets/{id}"): "web session",
    ("GET", "/web/packets/{id}/delete"): "web session",
    ("POST", "/web/packets/{id}/delete"): "web session, with CSRF",
    ("GET", "/web/teams/{name}"): "web session",
    ("GET", "/web/authorize"): "MCP consent: web session or a full-scope token typed in",
    ("POST", "/web/authorize"): "MCP consent: web session or a full-scope token typed in",
    ("GET", "/web/signin"): "sign-in page",
    ("POST", "/web/signin"): "sign-in with a full-scope token",
    ("POST", "/web/signin/code"): "sign-in by a device code",
    ("POST", "/web/signout"): "web session, with CSRF",
    ("GET", "/web/ui"): "the local web view's own sign-in",
    ("POST", "/web/ui"): "the local web view's own sign-in",
    ("POST", "/web/key"): "a single-use key made with a full-scope token",
    ("GET", "/web/key"): "the same key, kept in a cookie by the POST",
    ("GET", "/web/static/{name}"): "static files",
    ("GET", "/p/{secret}"): "a published packet: the secret is the credential",
    ("GET", "/.well-known/oauth-protected-resource/mcp"): "RFC 9728 metadata",
    ("OPTIONS", "/.well-known/oauth-protected-resource/mcp"): "CORS",
    ("GET", "/.well-known/oauth-protected-resource"): "RFC 9728 metadata",
    ("OPTIONS", "/.well-known/oauth-protected-resource"): "CORS",
    ("GET", "/.well-known/oauth-authorization-server"): "RFC 8414 metadata",
    ("OPTIONS", "/.well-known/oauth-authorization-server"): "CORS",
    ("GET", "/.well-known/openid-configuration"): "RFC 8414 metadata",
    ("OPTIONS", "/.well-known/openid-configuration"): "CORS",
    ("GET", "/authorize"): "OAuth: on to the consent page",
    ("POST", "/authorize"): "OAuth: on to the consent page",
    ("POST", "/token"): "OAuth: a code or refresh token, with PKCE or the client's secret",
    ("OPTIONS", "/token"): "CORS",
    ("POST", "/register"): "OAuth dynamic client registration (rate-limited)",
    ("OPTIONS", "/register"): "CORS",
    ("POST", "/revoke"): "OAuth revocation: the client and its token",
    ("OPTIONS", "/revoke"): "CORS",
}
# /mcp takes any token of this server (or an OAuth one for it); each tool asks its own
# scope (test_remote_mcp.py walks the tools).
MCP = {(method, "/mcp") for method in ("POST", "GET", "DELETE", "OPTIONS", "PUT", "PATCH")}
# What the walk needs in a query to get past the request's own checks to the token's.
QUERIES = {
    ("GET", "/v1/search"): {"q": "walk"},
    ("GET", "/v1/packets/batch"): {"id": "01JS5LTMEXAMPLEPACKET00001A"},
    ("GET", "/v1/device/approve"): {"user_code": "BCDF-GHJK"},
}


def bearer_routes() -> dict[tuple[str, str], tuple[str, bool]]:
    """Each bearer route's (method, path): its scope and whether the token is optional."""
    from ltm.openapi import document

    doc = document()
    routes: dict[tuple[str, str], tuple[str, bool]] = {}
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method == "parameters" or (method.upper(), path) in MCP:
                continue
            security = operation.get("security", doc["security"])
            needs = [r["bearer"] for r in security if "bearer" in r]
            if needs:
                routes[(method.upper(), path)] = (" ".join(needs[0]), {} in security)
    return routes


def test_every_route_is_a_bearer_route_or_named_public() -> None:
    from ltm.cli.server.loader import load_app

    served = {(m, path) for path, entries in load_app().app.routes.items() for m in entries}
    assert served == set(bearer_routes()) | set(PUBLIC) | MCP


@pytest.fixture(scope="module")
def walker(server: Server) -> dict[str, Any]:
    """A user with one token of each kind: its scopes, and tokens that must never work on
    the API (revoked, expired, an OAuth token bound to /mcp)."""
    from datetime import UTC, datetime, timedelta

    from ltm.service import tokens
    from ltm.store import Token

    user_id, full = server.issue("walker")
    store = server.open_store()  # type: ignore[misc]
    made: dict[str, str] = {"full": full}
    now = datetime.now(UTC)
    kinds: dict[str, dict[str, Any]] = {
        "read": {"scope": "read"},
        "write": {"scope": "write"},
        "revoked": {},
        "expired": {"expires_at": now - timedelta(minutes=1)},
        # What /token issues an MCP client: full scope, but for /mcp alone (RFC 8707).
        "oauth": {"resource": server.url + "/mcp", "expires_at": now + timedelta(hours=1)},
    }
    try:
        for kind, fields in kinds.items():
            secret = tokens.mint(user_id)
            label = f"walk-{kind}-{secrets.token_hex(4)}"
            store.add_token(Token(label, user_id, tokens.hash_token(secret), now, **fields))
            if kind == "revoked":
                assert store.revoke_token(label, user_id=user_id)
            made[kind] = secret
    finally:
        store.close()
    display = server.client(full).get("/v1/whoami").json()["user"]["display"]
    return {"id": user_id, "display": display, **made}


def walk(server: Server, token: str | None, method: str, path: str, display: str) -> Any:
    """One request to ``path`` with every parameter naming nothing that exists, and a body
    each route takes far enough to reach its token check."""
    concrete = (
        path.replace("{id}", "01JS5LTMWALKNOSUCHPACKET01")
        .replace("{name}", "no-such-team")
        .replace("{user_id}", "nobody")
        .replace("{user}", "nobody")
        .replace("{label}", "no-such-label")
        .replace("{code}", "A" * 32)
    )
    body = {"q": "walk", "name": f"walk-{secrets.token_hex(4)}", "display": display}
    body |= {"user": "nobody", "user_code": "BCDF-GHJK", "approve": False}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpkit.request(
        method,
        server.url + concrete,
        params=QUERIES.get((method, path)),
        json=body if method in ("POST", "PATCH") else None,
        headers=headers,
    )


def answered(r: httpx.Response) -> str:
    """What a walk's answer says of the credential: refused (and how), or let through."""
    if r.status_code == 401:
        return "401"
    if r.status_code == 403 and "insufficient" in r.headers.get("WWW-Authenticate", ""):
        return "403 " + r.headers["WWW-Authenticate"]
    return "through"


def test_every_bearer_route_holds_each_credential_to_its_scope(
    server: Server, walker: dict[str, Any]
) -> None:
    from ltm.service.access import grants

    wrong: list[str] = []
    for (method, path), (need, optional) in sorted(bearer_routes().items()):
        refused = f'403 Bearer error="insufficient_scope", scope="{need}"'
        # Never let through: no token (unless optional), and tokens that are no key here.
        expected = {kind: "401" for kind in ("revoked", "expired", "oauth")}
        if not optional:
            expected["none"] = "401"
        for kind, scope in (("read", "read"), ("write", "write"), ("full", "read write")):
            expected[kind] = "through" if grants(scope, need) else refused
        for kind, wanted in expected.items():
            token = None if kind == "none" else walker[kind]
            r = walk(server, token, method, path, walker["display"])
            if answered(r) != wanted:
                wrong.append(f"{method} {path} with {kind}: {r.status_code} {r.text[:80]}")
    assert not wrong, "\n".join(wrong)


def test_a_write_only_token_hands_out_no_reading(server: Server, walker: dict[str, Any]) -> None:
    """Publishing needs the full scope because its URL reads the packet; an invite's URL
    reads the whole team (accepted without an account, it mints a full token), and a share
    lets another account read the packet. A write-only token may do none of them."""
    owner = server.client(walker["full"])
    team = f"walk-{secrets.token_hex(4)}"
    assert owner.post("/v1/teams", json={"name": team}).status_code == 201
    secret = make_packet(goal="the team's plans, not for a pusher to read")
    assert owner.post(f"/v1/packets?team={team}", json=secret).status_code == 201
    other_id, _ = server.issue("reader")
    write_only = server.client(walker["write"])

    refused(write_only.post(f"/v1/teams/{team}/invites"), "read write")
    refused(
        write_only.post(f"/v1/packets/{secret['id']}/shares", json={"user": other_id}), "read write"
    )
    assert owner.get(f"/v1/teams/{team}/members").json()["members"][0]["user_id"] == walker["id"]
    assert len(owner.get(f"/v1/teams/{team}/members").json()["members"]) == 1
    assert owner.get(f"/v1/packets/{secret['id']}/shares").json()["shares"] == []
    # The full scope still does both.
    made = owner.post(f"/v1/teams/{team}/invites")
    assert made.status_code == 201, made.text
    shared = owner.post(f"/v1/packets/{secret['id']}/shares", json={"user": other_id})
    assert shared.status_code == 201, shared.text


# -- every route, someone else's things ---------------------------------------------------
# Each bearer route walked by a full token of someone with no right to the victim's
# things, every parameter naming them: their packets (personal and team), team, member,
# token label, share; and the team asked for in the query (theirs, or one of the
# stranger's own into which their packet would move). Nothing of theirs may come back
# and nothing of theirs may change, whatever the status.


def victim_state(client: httpx.Client, things: dict[str, Any]) -> Any:
    return (
        [client.get(f"/v1/packets/{p}").text for p in (things["packet"], things["team_packet"])],
        client.get(f"/v1/teams/{things['team']}/members").json(),
        client.get(f"/v1/packets/{things['packet']}/shares").json(),
        httpkit.get(things["public_url"]).status_code,
        sorted(t["label"] for t in client.get("/v1/tokens").json()["tokens"]),
        client.get("/v1/whoami").json()["user"],
    )


@pytest.mark.parametrize("stranger_is", ["outsider", "removed member"])
def test_no_route_reaches_another_users_things(server: Server, stranger_is: str) -> None:
    victim_id, victim_token = server.issue("victim")
    victim = server.client(victim_token)
    member_id, member_token = server.issue("member")
    team = f"victims-{secrets.token_hex(4)}"
    assert victim.post("/v1/teams", json={"name": team}).status_code == 201
    code = victim.post(f"/v1/teams/{team}/invites").json()["code"]
    assert server.client(member_token).post(f"/v1/invites/{code}/accept").status_code == 201
    mine = make_packet(goal="victim-secret personal")
    theirs = make_packet(goal="victim-secret of the team", parent_id=mine["id"])
    assert victim.post("/v1/packets", json=mine).status_code == 201
    assert victim.post(f"/v1/packets?team={team}", json=theirs).status_code == 201
    third_id, _ = server.issue("third")  # whom the victim shares their packet with
    shared = victim.post(f"/v1/packets/{mine['id']}/shares", json={"user": third_id})
    assert shared.status_code == 201
    public_url = victim.post(f"/v1/packets/{mine['id']}/publish").json()["public_url"]
    label = victim.get("/v1/tokens").json()["tokens"][0]["label"]
    if stranger_is == "outsider":
        stranger_id, stranger_token = server.issue("stranger")
    else:  # a member the owner removed: their token stands, their membership does not
        stranger_id, stranger_token = member_id, member_token
        assert victim.delete(f"/v1/teams/{team}/members/{member_id}").status_code == 204
    stranger = server.client(stranger_token)
    own_team = f"strangers-{secrets.token_hex(4)}"
    assert stranger.post("/v1/teams", json={"name": own_team}).status_code == 201
    display = stranger.get("/v1/whoami").json()["user"]["display"]
    things = {
        "packet": mine["id"],
        "team_packet": theirs["id"],
        "team": team,
        "public_url": public_url,
    }
    before = victim_state(victim, things)
    secret_part = public_url.rsplit("/", 1)[1]

    leaks: list[str] = []
    for (method, path), _ in sorted(bearer_routes().items()):
        for packet in (mine["id"], theirs["id"]):
            for asked_team in (None, team, own_team):
                concrete = (
                    path.replace("{id}", packet)
                    .replace("{name}", team)
                    .replace("{user_id}", victim_id)
                    .replace("{user}", third_id)
                    .replace("{label}", label)
                    .replace("{code}", code)  # used already: a dead code, as any other
                )
                params: list[tuple[str, str]] = [("q", "victim-secret")]
                if asked_team is not None:
                    params.append(("team", asked_team))
                if path == "/v1/packets/batch":
                    params += [("id", mine["id"]), ("id", theirs["id"])]
                body: Any = {"user": stranger_id, "name": team, "display": display, "q": "victim"}
                if path == "/v1/packets":
                    body = make_packet(id=packet, goal="overwritten")
                elif path == "/v1/packets/batch":
                    body = {"packets": [json.dumps(make_packet(id=packet, goal="overwritten"))]}
                r = httpkit.request(
                    method,
                    server.url + concrete,
                    params=params,
                    json=body if method in ("POST", "PATCH") else None,
                    headers={"Authorization": f"Bearer {stranger_token}"},
                )
                said = f"{method} {concrete}?{params}: {r.status_code} {r.text[:120]}"
                if "victim-secret" in r.text or secret_part in r.text or label in r.text:
                    leaks.append("told: " + said)
                elif "{" in path and r.status_code < 400:
                    leaks.append("let through: " + said)
                elif (method, path) == ("GET", "/v1/packets/batch") and any(
                    p["status"] != 404 for p in r.json()["packets"]
                ):
                    leaks.append("read: " + said)
    assert not leaks, "\n".join(leaks)
    assert victim_state(victim, things) == before
