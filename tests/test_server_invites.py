"""Invites over HTTP against a real server: create, accept with and without a token, 410.

Concurrent accepts of one code are in test_server_concurrency.py.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpkit
import httpx
import pytest
from serverkit import SERVER_STORES, Server, running_server


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("invites"), store=request.param) as srv:
        yield srv


@pytest.fixture
def owner(server: Server, request: pytest.FixtureRequest) -> tuple[httpx.Client, str]:
    """A user owning a fresh team: (client, team name)."""
    _, token = server.issue("owner")
    client = server.client(token)
    name = "t-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:12]
    assert client.post("/v1/teams", json={"name": name}).status_code == 201
    return client, name


def invite(client: httpx.Client, team: str, **headers: str) -> dict[str, str]:
    r = client.post(f"/v1/teams/{team}/invites", headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def test_invite_shape_and_expiry(server: Server, owner: tuple[httpx.Client, str]) -> None:
    client, team = owner
    before = datetime.now(UTC).replace(microsecond=0)
    body = invite(client, team)
    assert set(body) == {"code", "url", "expires_at"}
    assert len(body["code"]) >= 32
    assert body["url"] == f"{server.url}/v1/invites/{body['code']}"
    expires = datetime.strptime(body["expires_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before + timedelta(days=7) <= expires <= before + timedelta(days=7, seconds=60)


def test_codes_are_stored_only_as_hashes(server: Server, owner: tuple[httpx.Client, str]) -> None:
    if server.store != "sqlite":
        pytest.skip("reads the SQLite file; the DynamoDB store gets only the hash by interface")
    client, team = owner
    code = invite(client, team)["code"]
    assert code.encode() not in server.db.read_bytes()
    wal = Path(f"{server.db}-wal")
    if wal.exists():
        assert code.encode() not in wal.read_bytes()


def test_invite_url_honours_forwarded_headers(owner: tuple[httpx.Client, str]) -> None:
    client, team = owner
    body = invite(
        client, team, **{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "ltm.example.org"}
    )
    assert body["url"] == f"https://ltm.example.org/v1/invites/{body['code']}"
    body = invite(client, team, **{"X-Forwarded-Host": "a.example.org, proxy.internal"})
    assert body["url"] == f"http://a.example.org/v1/invites/{body['code']}"
    # A forwarded host that is not a host name is ignored, never echoed into the URL.
    body = invite(client, team, **{"X-Forwarded-Host": "evil.example/<script>"})
    assert "<script>" not in body["url"]


def test_invite_url_uses_external_url_when_configured(tmp_path: Path) -> None:
    with running_server(tmp_path, "--external-url", "https://memory.example.com/") as srv:
        client = srv.client(srv.root_token)
        assert client.post("/v1/teams", json={"name": "ext"}).status_code == 201
        body = invite(client, "ext", **{"X-Forwarded-Host": "ignored.example.org"})
        assert body["url"] == f"https://memory.example.com/v1/invites/{body['code']}"


def test_any_member_may_invite(server: Server, owner: tuple[httpx.Client, str]) -> None:
    client, team = owner
    _member_id, token = server.issue("member")
    member = server.client(token)
    assert member.post(f"/v1/invites/{invite(client, team)['code']}/accept").status_code == 201
    code = invite(member, team)["code"]
    assert httpkit.post(f"{server.url}/v1/invites/{code}/accept").status_code == 201


def test_accept_with_a_bearer_joins_the_caller(
    server: Server, owner: tuple[httpx.Client, str]
) -> None:
    client, team = owner
    user_id, token = server.issue("joiner")
    code = invite(client, team)["code"]
    r = server.client(token).post(f"/v1/invites/{code}/accept", json={"display": "ignored"})
    assert r.status_code == 201
    body = r.json()
    assert set(body) == {"user", "team"}
    assert body["user"] == {"id": user_id, "display": "joiner"}
    assert body["team"]["name"] == team and set(body["team"]) == {"id", "name"}
    members = client.get(f"/v1/teams/{team}/members").json()["members"]
    assert (user_id, "member") in [(m["user_id"], m["role"]) for m in members]


def test_accept_without_a_bearer_mints_a_user_and_token(
    server: Server, owner: tuple[httpx.Client, str]
) -> None:
    client, team = owner
    code = invite(client, team)["code"]
    r = httpkit.post(f"{server.url}/v1/invites/{code}/accept", json={"display": "New Person"})
    assert r.status_code == 201
    body = r.json()
    assert set(body) == {"user", "team", "token"}
    assert body["user"]["display"] == "New Person"
    assert body["token"].startswith(f"ltm_{body['user']['id']}_") and len(body["token"]) == 95
    newcomer = server.client(body["token"])
    teams = newcomer.get("/v1/teams").json()["teams"]
    assert [t["name"] for t in teams] == [team]
    assert newcomer.get(f"/v1/teams/{team}/members").status_code == 200


def test_accept_without_body_or_display(server: Server, owner: tuple[httpx.Client, str]) -> None:
    client, team = owner
    r = httpkit.post(f"{server.url}/v1/invites/{invite(client, team)['code']}/accept")
    assert r.status_code == 201
    # The reference names such a user "invited-" + the last six characters of its new ULID,
    # as they are (internal/api/api.go, acceptInvite).
    user = r.json()["user"]
    assert user["display"] == f"invited-{user['id'][-6:]}"
    assert re.fullmatch(r"invited-[0-9A-HJKMNP-TV-Z]{6}", user["display"])
    for body in ({"display": ""}, {"display": None}, {}):
        code = invite(client, team)["code"]
        r = httpkit.post(f"{server.url}/v1/invites/{code}/accept", json=body)
        assert r.status_code == 201, body
        user = r.json()["user"]
        assert user["display"] == f"invited-{user['id'][-6:]}"


def test_a_used_code_is_410(server: Server, owner: tuple[httpx.Client, str]) -> None:
    client, team = owner
    code = invite(client, team)["code"]
    assert httpkit.post(f"{server.url}/v1/invites/{code}/accept").status_code == 201
    for headers in ({}, {"Authorization": f"Bearer {server.issue('late')[1]}"}):
        r = httpkit.post(f"{server.url}/v1/invites/{code}/accept", headers=headers)
        # The reference: 410 "invite expired or already consumed" (internal/api/api.go).
        assert r.status_code == 410
        assert r.json() == {"error": "invite expired or already consumed"}


def test_an_expired_code_is_410(server: Server, owner: tuple[httpx.Client, str]) -> None:
    from ltm.service.invites import hash_code
    from ltm.store import Invite

    _client, team = owner
    code = "expired-code-" + "x" * 24
    store = server.open_store()
    try:
        found = store.get_team(team)
        assert found is not None
        now = datetime.now(UTC)
        store.create_invite(
            Invite(
                hash_code(code),
                found.id,
                found.owner_id,
                now - timedelta(days=8),
                now - timedelta(seconds=1),
            )
        )
    finally:
        store.close()
    r = httpkit.post(f"{server.url}/v1/invites/{code}/accept")
    # The reference: 410, this text (internal/api/api.go, acceptInvite).
    assert r.status_code == 410 and r.json() == {"error": "invite expired or already consumed"}


@pytest.mark.parametrize("code", ["nope", "x" * 40, "A" * 200, "%00"])
def test_an_unknown_code_is_410_as_on_the_reference(server: Server, code: str) -> None:
    # The reference answers an unknown code as a used one: 410 "invite expired or already
    # consumed" (internal/api/api.go, acceptInvite: CheckInviteRedeemable / ConsumeInvite).
    for headers in ({}, {"Authorization": f"Bearer {server.issue('someone')[1]}"}):
        r = httpkit.post(f"{server.url}/v1/invites/{code}/accept", headers=headers)
        assert r.status_code == 410
        assert r.json() == {"error": "invite expired or already consumed"}


def test_an_invalid_bearer_is_401_not_a_new_user(
    server: Server, owner: tuple[httpx.Client, str]
) -> None:
    client, team = owner
    code = invite(client, team)["code"]
    r = httpkit.post(
        f"{server.url}/v1/invites/{code}/accept", headers={"Authorization": "Bearer ltm_nope"}
    )
    assert r.status_code == 401 and r.json() == {"error": "invalid token"}
    # The code was not used up by the refused request.
    assert httpkit.post(f"{server.url}/v1/invites/{code}/accept").status_code == 201


@pytest.mark.parametrize(
    "body", [{"display": 5}, {"display": "x" * 65}, {"display": "a\u0000b"}, {"display": []}]
)
def test_a_bad_display_is_400(
    server: Server, owner: tuple[httpx.Client, str], body: dict[str, object]
) -> None:
    client, team = owner
    code = invite(client, team)["code"]
    r = httpkit.post(f"{server.url}/v1/invites/{code}/accept", json=body)
    assert r.status_code == 400 and "display" in r.json()["error"]
    assert httpkit.post(f"{server.url}/v1/invites/{code}/accept").status_code == 201


@pytest.mark.parametrize("body", [b"{", b"[1]", b"12"])
def test_a_malformed_accept_body_is_400(
    server: Server, owner: tuple[httpx.Client, str], body: bytes
) -> None:
    client, team = owner
    code = invite(client, team)["code"]
    r = httpkit.post(
        f"{server.url}/v1/invites/{code}/accept",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400


def test_an_existing_member_keeps_their_role(
    server: Server, owner: tuple[httpx.Client, str]
) -> None:
    client, team = owner
    code = invite(client, team)["code"]
    r = client.post(f"/v1/invites/{code}/accept")
    assert r.status_code == 201
    members = client.get(f"/v1/teams/{team}/members").json()["members"]
    assert [m["role"] for m in members] == ["owner"]


def test_invites_die_with_their_team(server: Server, owner: tuple[httpx.Client, str]) -> None:
    client, team = owner
    code = invite(client, team)["code"]
    assert client.delete(f"/v1/teams/{team}").status_code == 204
    r = httpkit.post(f"{server.url}/v1/invites/{code}/accept")
    assert r.status_code == 410
    assert r.json() == {"error": "invite expired or already consumed"}


def test_an_invite_dies_with_its_makers_membership(
    server: Server, owner: tuple[httpx.Client, str]
) -> None:
    """A kicked member cannot rejoin with an invite minted before the kick."""
    client, team = owner
    joined = httpkit.post(invite(client, team)["url"] + "/accept", json={"display": "mallory"})
    assert joined.status_code == 201
    mallory_id, mallory = joined.json()["user"]["id"], joined.json()["token"]
    made_before = [invite(server.client(mallory), team) for _ in range(2)]
    owners_own = invite(client, team)
    assert client.delete(f"/v1/teams/{team}/members/{mallory_id}").status_code == 204
    for made in made_before:
        # As herself: refused, and she is not back in.
        r = server.client(mallory).post(f"/v1/invites/{made['code']}/accept")
        assert r.status_code in (404, 410), r.text
    assert server.client(mallory).get(f"/v1/teams/{team}/members").status_code == 404
    # Passed to a friend: refused too, and no user is minted.
    r = httpkit.post(made_before[1]["url"] + "/accept", json={"display": "friend"})
    assert r.status_code in (404, 410) and "token" not in r.text
    members = client.get(f"/v1/teams/{team}/members").json()["members"]
    assert [m["role"] for m in members] == ["owner"]
    # The owner's invite was not touched.
    assert httpkit.post(owners_own["url"] + "/accept", json={}).status_code == 201


def test_a_member_who_leaves_takes_their_invites_along(
    server: Server, owner: tuple[httpx.Client, str]
) -> None:
    client, team = owner
    joined = httpkit.post(invite(client, team)["url"] + "/accept", json={"display": "leaver"})
    leaver = server.client(joined.json()["token"])
    made = invite(leaver, team)
    assert leaver.post(f"/v1/teams/{team}/leave").status_code == 204
    r = httpkit.post(made["url"] + "/accept", json={})
    assert r.status_code in (404, 410)


def test_a_deleted_teams_invites_are_gone(server: Server, owner: tuple[httpx.Client, str]) -> None:
    client, team = owner
    made = invite(client, team)
    assert client.delete(f"/v1/teams/{team}").status_code == 204
    assert client.post("/v1/teams", json={"name": team}).status_code == 201  # same name, new team
    r = httpkit.post(made["url"] + "/accept", json={})
    assert r.status_code in (404, 410)
    assert [m["role"] for m in client.get(f"/v1/teams/{team}/members").json()["members"]] == [
        "owner"
    ]
