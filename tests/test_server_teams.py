"""Teams over HTTP against a real server: roles, the 404 posture, team packets.

Owner-only operations (delete, remove a member) are 403 for a member and 404
for anyone outside the team; a missing team and a team you are not in are
indistinguishable (404 ``team not found``). Team packets are visible to every
member; they may be deleted by the member who pushed them or by the owner.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import httpkit
import httpx
import pytest
from serverkit import SERVER_STORES, Server, make_packet, running_server

_names = itertools.count()


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("teams"), store=request.param) as srv:
        yield srv


@dataclass
class Who:
    id: str
    http: httpx.Client


def person(server: Server, name: str) -> Who:
    user_id, token = server.issue(name)
    return Who(user_id, server.client(token))


@dataclass
class Crew:
    team: str
    owner: Who
    member: Who
    other_member: Who
    outsider: Who


@pytest.fixture
def crew(server: Server) -> Crew:
    """A team with an owner and two members, and someone outside it."""
    name = f"crew-{next(_names)}"
    owner, member, other, outsider = (
        person(server, n) for n in ("owner", "member", "other", "outsider")
    )
    assert owner.http.post("/v1/teams", json={"name": name}).status_code == 201
    for who in (member, other):
        code = owner.http.post(f"/v1/teams/{name}/invites").json()["code"]
        assert who.http.post(f"/v1/invites/{code}/accept").status_code == 201
    return Crew(name, owner, member, other, outsider)


def err(r: httpx.Response, status: int, message: str | None = None) -> None:
    assert r.status_code == status, r.text
    if message is not None:
        assert r.json() == {"error": message}


# -- creating and listing ----------------------------------------------------------------


def test_create_team(server: Server) -> None:
    alice = person(server, "alice")
    r = alice.http.post("/v1/teams", json={"name": "platform"})
    assert r.status_code == 201
    team = r.json()["team"]
    assert set(team) == {"id", "name", "owner_id"}
    assert team["name"] == "platform" and team["owner_id"] == alice.id
    listed = alice.http.get("/v1/teams").json()["teams"]
    assert [t["name"] for t in listed] == ["platform"]
    assert set(listed[0]) == {"id", "name", "owner_id", "created_at"}
    assert listed[0]["created_at"].endswith("Z")


def test_team_names_are_unique(server: Server) -> None:
    a, b = person(server, "a"), person(server, "b")
    assert a.http.post("/v1/teams", json={"name": "unique-name"}).status_code == 201
    # The reference: 409 "team name already taken" (internal/api/api.go, createTeam).
    err(b.http.post("/v1/teams", json={"name": "unique-name"}), 409, "team name already taken")
    err(a.http.post("/v1/teams", json={"name": "unique-name"}), 409, "team name already taken")


@pytest.mark.parametrize(
    "body",
    [
        {"name": "Upper"},
        {"name": "-leading"},
        {"name": "_leading"},
        {"name": ""},
        {"name": "a" * 41},
        {"name": "has space"},
        {"name": "dot.ted"},
        {"name": "trailing\n"},
        {"name": 7},
        {"name": None},
        {},
        {"team": "x"},
    ],
)
def test_invalid_team_names_are_400(server: Server, body: dict[str, object]) -> None:
    a = person(server, "a")
    r = a.http.post("/v1/teams", json=body)
    # The reference: 400 with this text (internal/api/api.go, createTeam); its CLI prints it.
    err(r, 400, "team name must match ^[a-z0-9][a-z0-9_-]{0,39}$")


def test_longest_and_shortest_valid_names(server: Server) -> None:
    a = person(server, "a")
    for name in ("z", "0" + "a_b-" * 9 + "xyz"):
        assert len(name) <= 40
        assert a.http.post("/v1/teams", json={"name": name}).status_code == 201


@pytest.mark.parametrize("body", [b"{", b"[]", b'"x"', b""])
def test_malformed_team_bodies_are_400(server: Server, body: bytes) -> None:
    a = person(server, "a")
    r = a.http.post("/v1/teams", content=body, headers={"Content-Type": "application/json"})
    err(r, 400)


def test_malformed_json_names_line_and_column(server: Server) -> None:
    """As the packet route does: where the JSON breaks, not a bare "malformed JSON"."""
    a = person(server, "a")
    body = b'{\n  "name": "core",\n  oops\n}'
    r = a.http.post("/v1/teams", content=body, headers={"Content-Type": "application/json"})
    err(
        r,
        400,
        "malformed JSON (line 3, column 3: Expecting property name enclosed in double quotes)",
    )
    a.http.post("/v1/teams", json={"name": "lines"})
    code = a.http.post("/v1/teams/lines/invites").json()["code"]
    r = httpkit.post(
        f"{server.url}/v1/invites/{code}/accept",
        content=b'{"x": }',
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400 and "line 1, column 7" in r.json()["error"], r.text


def test_team_body_with_wrong_content_type_is_415(server: Server) -> None:
    a = person(server, "a")
    r = a.http.post("/v1/teams", content=b"name=x", headers={"Content-Type": "text/plain"})
    err(r, 415, "content type must be application/json")


def test_teams_list_only_the_callers_teams(crew: Crew) -> None:
    assert crew.team in [t["name"] for t in crew.member.http.get("/v1/teams").json()["teams"]]
    assert crew.team not in [t["name"] for t in crew.outsider.http.get("/v1/teams").json()["teams"]]


# -- members ------------------------------------------------------------------------------


def test_members_owner_first_with_roles(crew: Crew) -> None:
    r = crew.member.http.get(f"/v1/teams/{crew.team}/members")
    assert r.status_code == 200
    members = r.json()["members"]
    assert [(m["user_id"], m["role"]) for m in members] == [
        (crew.owner.id, "owner"),
        (crew.member.id, "member"),
        (crew.other_member.id, "member"),
    ]
    assert set(members[0]) == {"user_id", "display", "role", "joined_at"}
    # "owner", or "owner-N" when an earlier test's owner holds the name (unique per server)
    assert members[0]["display"].split("-")[0] == "owner"


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "/members", None),
        ("DELETE", "", None),
        ("DELETE", "/members/{member}", None),
        ("POST", "/leave", None),
        ("POST", "/invites", None),
    ],
)
def test_non_members_and_missing_teams_look_the_same(
    crew: Crew, method: str, suffix: str, body: object
) -> None:
    path = suffix.replace("{member}", crew.member.id)
    for team in (crew.team, "no-such-team"):
        r = crew.outsider.http.request(method, f"/v1/teams/{team}{path}")
        err(r, 404, "team not found")
    # Nothing changed for the members.
    assert len(crew.owner.http.get(f"/v1/teams/{crew.team}/members").json()["members"]) == 3


def test_only_the_owner_deletes_the_team(crew: Crew) -> None:
    # The reference: 403 with this text (internal/api/api.go, deleteTeam).
    err(
        crew.member.http.delete(f"/v1/teams/{crew.team}"),
        403,
        "only the team owner can delete a team",
    )
    assert crew.member.http.get(f"/v1/teams/{crew.team}/members").status_code == 200
    r = crew.owner.http.delete(f"/v1/teams/{crew.team}")
    assert r.status_code == 204 and r.content == b""
    for who in (crew.owner, crew.member):
        err(who.http.get(f"/v1/teams/{crew.team}/members"), 404, "team not found")
        assert crew.team not in [t["name"] for t in who.http.get("/v1/teams").json()["teams"]]
    err(crew.owner.http.delete(f"/v1/teams/{crew.team}"), 404, "team not found")


def test_deleting_a_team_deletes_its_packets_and_frees_the_name(crew: Crew) -> None:
    data = make_packet()
    assert (
        crew.member.http.post("/v1/packets", json=data, params={"team": crew.team}).status_code
        == 201
    )
    assert crew.owner.http.delete(f"/v1/teams/{crew.team}").status_code == 204
    err(crew.member.http.get(f"/v1/packets/{data['id']}"), 404, "not found")
    assert crew.outsider.http.post("/v1/teams", json={"name": crew.team}).status_code == 201


def test_only_the_owner_removes_members(crew: Crew) -> None:
    path = f"/v1/teams/{crew.team}/members"
    # The reference: 403 with this text (internal/api/api.go, removeTeamMember).
    only = "only the team owner can remove members"
    err(crew.member.http.delete(f"{path}/{crew.other_member.id}"), 403, only)
    err(crew.member.http.delete(f"{path}/{crew.owner.id}"), 403, only)
    r = crew.owner.http.delete(f"{path}/{crew.other_member.id}")
    assert r.status_code == 204
    ids = [m["user_id"] for m in crew.owner.http.get(path).json()["members"]]
    assert crew.other_member.id not in ids
    err(crew.other_member.http.get(path), 404, "team not found")
    # The reference: 404 "not a member" (internal/api/api.go, removeTeamMember).
    err(crew.owner.http.delete(f"{path}/{crew.other_member.id}"), 404, "not a member")
    err(crew.owner.http.delete(f"{path}/{crew.outsider.id}"), 404, "not a member")


def test_the_owner_cannot_be_removed(crew: Crew) -> None:
    r = crew.owner.http.delete(f"/v1/teams/{crew.team}/members/{crew.owner.id}")
    # The reference: 400, this text (internal/api/api.go, removeTeamMember).
    err(r, 400, "owner cannot be removed; transfer ownership or delete the team")


def test_members_leave_but_the_owner_cannot(crew: Crew) -> None:
    # The reference: 400, this text (internal/api/api.go, leaveTeam).
    err(
        crew.owner.http.post(f"/v1/teams/{crew.team}/leave"),
        400,
        "owner cannot leave; transfer ownership or delete the team",
    )
    r = crew.member.http.post(f"/v1/teams/{crew.team}/leave")
    assert r.status_code == 204 and r.content == b""
    err(crew.member.http.get(f"/v1/teams/{crew.team}/members"), 404, "team not found")
    err(crew.member.http.post(f"/v1/teams/{crew.team}/leave"), 404, "team not found")


# -- team packets -------------------------------------------------------------------------


def test_team_packets_are_visible_to_every_member_only(crew: Crew) -> None:
    data = make_packet(goal="Team goal")
    r = crew.member.http.post("/v1/packets", json=data, params={"team": crew.team})
    assert r.status_code == 201 and r.json() == {"id": data["id"]}
    for who in (crew.owner, crew.member, crew.other_member):
        got = who.http.get(f"/v1/packets/{data['id']}")
        assert got.status_code == 200 and got.json()["goal"] == "Team goal"
        listed = who.http.get("/v1/packets", params={"team": crew.team}).json()["packets"]
        assert data["id"] in [p["id"] for p in listed]
    # Not in anyone's personal scope, the pusher's included.
    personal = crew.member.http.get("/v1/packets").json()["packets"]
    assert data["id"] not in [p["id"] for p in personal]
    # Outsiders see nothing and cannot use the team.
    err(crew.outsider.http.get(f"/v1/packets/{data['id']}"), 404, "not found")
    err(crew.outsider.http.get("/v1/packets", params={"team": crew.team}), 404, "team not found")
    r = crew.outsider.http.post("/v1/packets", json=make_packet(), params={"team": crew.team})
    err(r, 404, "team not found")
    err(crew.outsider.http.get("/v1/packets", params={"team": "nope"}), 404, "team not found")


def test_team_packet_deletion_rules(crew: Crew) -> None:
    by_member = make_packet()
    by_other = make_packet()
    for who, data in ((crew.member, by_member), (crew.other_member, by_other)):
        r = who.http.post("/v1/packets", json=data, params={"team": crew.team})
        assert r.status_code == 201
    # Another member may not delete it; an outsider gets the same 404.
    err(crew.other_member.http.delete(f"/v1/packets/{by_member['id']}"), 404, "not found")
    err(crew.outsider.http.delete(f"/v1/packets/{by_member['id']}"), 404, "not found")
    assert crew.member.http.get(f"/v1/packets/{by_member['id']}").status_code == 200
    # The member who pushed it may, and so may the team owner.
    assert crew.member.http.delete(f"/v1/packets/{by_member['id']}").status_code == 204
    assert crew.owner.http.delete(f"/v1/packets/{by_other['id']}").status_code == 204
    for data in (by_member, by_other):
        err(crew.owner.http.get(f"/v1/packets/{data['id']}"), 404, "not found")


def test_a_removed_member_loses_access_to_team_packets(crew: Crew) -> None:
    data = make_packet()
    assert (
        crew.member.http.post("/v1/packets", json=data, params={"team": crew.team}).status_code
        == 201
    )
    r = crew.owner.http.delete(f"/v1/teams/{crew.team}/members/{crew.member.id}")
    assert r.status_code == 204
    err(crew.member.http.get(f"/v1/packets/{data['id']}"), 404, "not found")
    err(crew.member.http.delete(f"/v1/packets/{data['id']}"), 404, "not found")
    # The packet stays with the team.
    assert crew.other_member.http.get(f"/v1/packets/{data['id']}").status_code == 200


def test_team_repush_by_another_member_is_409(crew: Crew) -> None:
    data = make_packet()
    assert (
        crew.member.http.post("/v1/packets", json=data, params={"team": crew.team}).status_code
        == 201
    )
    r = crew.other_member.http.post(
        "/v1/packets", json=dict(data, goal="overwritten"), params={"team": crew.team}
    )
    err(r, 409, "packet id already exists")
    assert crew.owner.http.get(f"/v1/packets/{data['id']}").json()["goal"] == data["goal"]
