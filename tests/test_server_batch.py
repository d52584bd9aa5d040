"""The batch routes: ``POST /v1/packets/batch`` pushes many, ``GET /v1/packets/batch`` reads many.

Against a real ``ltm server run`` on loopback, on SQLite and on DynamoDB. The
rule they are held to: every packet of a batch gets what a single push (or a
single GET) of it gets, status and message, and the store ends the same.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serverkit import (
    SERVER_STORES,
    Server,
    clean_env,
    init_db,
    make_packet,
    run_server,
    running_server,
)

from ltm.limits import MAX_BATCH_BODY
from ltm.service.packets import MAX_BATCH

GHP = "ghp_" + "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8aB3dE5gH7j"[:36]  # assembled: no secret in git
_names = itertools.count()


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("batch"), store=request.param) as srv:
        yield srv


def text(packet: dict[str, Any]) -> str:
    return json.dumps(packet, separators=(",", ":"))


def batch(client: httpx.Client, texts: list[str], **params: str) -> httpx.Response:
    return client.post("/v1/packets/batch", json={"packets": texts}, params=params)


def team_of(server: Server, owner: httpx.Client, *members: httpx.Client) -> str:
    name = f"batch-{next(_names)}"
    assert owner.post("/v1/teams", json={"name": name}).status_code == 201
    for member in members:
        code = owner.post(f"/v1/teams/{name}/invites").json()["code"]
        assert member.post(f"/v1/invites/{code}/accept").status_code == 201
    return name


def test_each_packet_of_a_batch_gets_what_its_single_push_gets(server: Server) -> None:
    theirs = make_packet(goal="someone else's")
    other = server.client(server.issue("batch-other")[1])
    assert other.post("/v1/packets", json=theirs).status_code == 201

    def cases() -> list[str]:
        """A fresh set of bodies (new ids), one of each kind of answer."""
        good, lenient_only = make_packet(goal="fine"), make_packet()
        del lenient_only["goal"]
        return [
            text(good),
            "{not json",
            text(lenient_only),  # schema: refused without lenient=true
            text(make_packet(goal=f"Rotate {GHP} today")),  # the server's scan
            text(make_packet(id="bad id!")),  # the id rules
            text(theirs),  # another user's id: 409
            '{"id":"01DUPLICATE00","id":"01DUPLICATE01"}',  # duplicate keys
            "[]",
            text(make_packet(goal="fine, and not conforming", extra_field=1)),
        ]

    single = server.client(server.issue("batch-single")[1])
    expected = []
    for body in cases():
        r = single.post("/v1/packets", content=body, headers={"Content-Type": "application/json"})
        expected.append((r.status_code, r.json().get("error")))

    batcher = server.client(server.issue("batch-many")[1])
    texts = cases()
    r = batch(batcher, texts)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [(x["status"], x.get("error")) for x in results] == expected
    assert results[0] == {"id": json.loads(texts[0])["id"], "status": 201}
    assert results[1]["id"] is None
    # stored exactly as a single push stores it; refused ones are not there
    for body, result in zip(texts, results, strict=True):
        if result["status"] == 201:
            got = batcher.get(f"/v1/packets/{result['id']}")
            assert got.status_code == 200
            # The same packet under another id (its last character changed, never to itself).
            twin_id = result["id"][:-1] + ("Y" if result["id"].endswith("Z") else "Z")
            again = single.post(
                "/v1/packets",
                content=body.replace(result["id"], twin_id),
                headers={"Content-Type": "application/json"},
            )
            assert again.status_code == 201
            twin = single.get(f"/v1/packets/{twin_id}").content
            assert got.content == twin.replace(twin_id.encode(), result["id"].encode())
    theirs_now = other.get(f"/v1/packets/{theirs['id']}")
    assert json.loads(theirs_now.content)["goal"] == "someone else's"
    # the override header and lenient=true work as on a single push
    leaky = make_packet(goal=f"Rotate {GHP} today")
    r = batcher.post(
        "/v1/packets/batch",
        json={"packets": [text(leaky)]},
        headers={"X-LTM-Allow-Unredacted": "1"},
    )
    assert r.json()["results"] == [{"id": leaky["id"], "status": 201}]
    loose = make_packet()
    del loose["goal"]
    r = batch(batcher, [text(loose)], lenient="true")
    assert r.json()["results"] == [{"id": loose["id"], "status": 201, "conforming": False}]


def test_what_is_the_requests_refuses_the_whole_batch(server: Server) -> None:
    user_id, token = server.issue("batch-refused")
    client = server.client(token)
    packet = text(make_packet())
    r = server.client().post("/v1/packets/batch", json={"packets": [packet]})
    assert r.status_code == 401 and r.json() == {"error": "missing bearer token"}
    r = server.client("ltm_" + "x" * 40).post("/v1/packets/batch", json={"packets": ["{"]})
    assert r.status_code == 401  # the token before anything about the body
    read_only = server.client(_token(server, user_id, "read"))
    r = read_only.post("/v1/packets/batch", json={"packets": [packet]})
    assert r.status_code == 403 and r.json() == {"error": "insufficient scope"}
    r = batch(client, [packet], team="no-such-team")
    assert r.status_code == 404 and r.json() == {"error": "team not found"}
    for body, message in (
        ({"packets": []}, f"packets: 1 to {MAX_BATCH} per batch"),
        ({"packets": ["{}"] * (MAX_BATCH + 1)}, f"packets: 1 to {MAX_BATCH} per batch"),
        ({"packets": [{"id": "01OBJECTNOTTEXT"}]}, None),
        ([packet], None),
    ):
        r = client.post("/v1/packets/batch", json=body)
        assert r.status_code == 400, r.text
        if message:
            assert r.json() == {"error": message}
    r = client.post("/v1/packets/batch", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json() == {"error": "malformed JSON"}
    r = client.post("/v1/packets/batch", content=b"x", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = client.post("/v1/packets/batch", content=b"x" * (MAX_BATCH_BODY + 1))
    assert r.status_code == 413
    assert r.json() == {"error": f"request body too large (max {MAX_BATCH_BODY} bytes)"}
    assert client.get("/v1/packets", params={"limit": 5}).json()["packets"] == []


def test_a_batch_may_be_as_big_as_its_reply_says(server: Server) -> None:
    """A batch body has a bound of its own, past the 32 KiB every other route keeps, and
    the batch reply says it: 100 packets of 3 KiB go in one request."""
    client = server.client(server.issue("batch-big")[1])
    texts = [text(make_packet(constraints=["x" * 1000] * 3)) for _ in range(MAX_BATCH)]
    body = json.dumps({"packets": texts}).encode()
    assert 32_768 * 9 < len(body) < MAX_BATCH_BODY
    r = client.post("/v1/packets/batch", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert [one["status"] for one in r.json()["results"]] == [201] * MAX_BATCH
    assert r.headers["X-LTM-Batch-Bytes"] == str(MAX_BATCH_BODY)
    # Every other route keeps one push's bound: a push as big is refused unread.
    r = client.post("/v1/packets", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json() == {"error": "request body too large (max 32768 bytes)"}


def test_a_batch_into_a_team_follows_the_scope_rules(server: Server) -> None:
    owner = server.client(server.issue("batch-owner")[1])
    member_id, member_token = server.issue("batch-member")
    member = server.client(member_token)
    team = team_of(server, owner, member)
    personal = make_packet(goal="mine, then the team's")
    assert member.post("/v1/packets", json=personal).status_code == 201
    owners = make_packet(goal="the owner's, in the team")
    assert owner.post("/v1/packets", params={"team": team}, json=owners).status_code == 201
    fresh = make_packet(goal="new in the team")
    r = batch(member, [text(personal), text(fresh), text(owners)], team=team)
    assert [x["status"] for x in r.json()["results"]] == [201, 201, 409]
    listed = {p["id"] for p in owner.get("/v1/packets", params={"team": team}).json()["packets"]}
    assert listed == {personal["id"], fresh["id"], owners["id"]}
    mine = {p["id"] for p in member.get("/v1/packets").json()["packets"]}
    assert personal["id"] not in mine  # moved, as `ltm push -t TEAM` moves it
    got = owner.get(f"/v1/packets/{fresh['id']}")
    assert got.headers["x-ltm-created-by"] == member_id


def test_the_per_user_bound_answers_per_packet(server: Server, tmp_path: Path) -> None:
    env = {"LTM_MAX_PACKETS_PER_USER": "2"}
    if server.store == "dynamodb":
        from dynamo_moto import running_dynamo_server

        with running_dynamo_server(tmp_path, env=env) as bounded:
            _bound(bounded)
        return
    db = tmp_path / "server.db"
    bounded = run_server(db, tmp_path / "server.log", init_db(db), env=clean_env(**env))
    try:
        _bound(bounded)
    finally:
        bounded.stop()


def _bound(server: Server) -> None:
    client = server.client(server.issue("batch-hoarder")[1])
    packets = [make_packet(goal=f"goal {n}") for n in range(3)]
    r = batch(client, [text(p) for p in packets])
    results = r.json()["results"]
    assert [x["status"] for x in results] == [201, 201, 507]
    assert results[2]["error"].startswith("storage limit reached: at most 2 packets per user")
    assert client.get(f"/v1/packets/{packets[2]['id']}").status_code == 404
    edited = {**packets[0], "goal": "edited: no growth"}
    assert batch(client, [text(edited)]).json()["results"][0]["status"] == 201


def test_a_batch_read_answers_each_id_as_its_get_does(server: Server) -> None:
    owner_id, owner_token = server.issue("read-owner")
    owner = server.client(owner_token)
    reader_id, reader_token = server.issue("read-reader")
    reader = server.client(reader_token)
    outsider = server.client(server.issue("read-outsider")[1])
    team = team_of(server, owner, reader)
    mine = make_packet(goal="the reader's own")
    in_team = make_packet(goal="the team's")
    private = make_packet(goal="the owner's, personal")
    loose = make_packet()
    del loose["goal"]
    assert reader.post("/v1/packets", json=mine).status_code == 201
    assert reader.post("/v1/packets", params={"lenient": "true"}, json=loose).status_code == 201
    assert owner.post("/v1/packets", params={"team": team}, json=in_team).status_code == 201
    assert owner.post("/v1/packets", json=private).status_code == 201
    ids = [mine["id"], in_team["id"], private["id"], "01ABSENT0000000", "bad id!", loose["id"]]
    r = reader.get("/v1/packets/batch", params=[("id", i) for i in ids])
    assert r.status_code == 200, r.text
    answers = r.json()["packets"]
    assert [a["id"] for a in answers] == ids
    for packet_id, answer in zip(ids, answers, strict=True):
        single = reader.get(f"/v1/packets/{packet_id}") if packet_id != "bad id!" else None
        if answer["status"] == 404:
            assert single is None or single.status_code == 404
            assert set(answer) == {"id", "status"}
            continue
        assert single is not None and single.status_code == 200
        assert answer["body"].encode() == single.content
        assert answer["created_by"] == single.headers["x-ltm-created-by"]
        assert answer.get("conforming", True) == (single.headers.get("x-ltm-conforming") != "false")
    assert [a["status"] for a in answers] == [200, 200, 404, 404, 404, 200]
    assert answers[1]["created_by"] == owner_id and answers[0]["created_by"] == reader_id
    assert answers[5]["conforming"] is False
    # nothing of the team's reaches someone outside it
    r = outsider.get("/v1/packets/batch", params=[("id", i) for i in ids])
    assert [a["status"] for a in r.json()["packets"]] == [404] * len(ids)
    # the request's own faults
    assert reader.get("/v1/packets/batch").status_code == 400
    many = [("id", mine["id"])] * (MAX_BATCH + 1)
    assert reader.get("/v1/packets/batch", params=many).status_code == 400
    assert server.client().get("/v1/packets/batch", params={"id": mine["id"]}).status_code == 401
    write_only = server.client(_token(server, reader_id, "write"))
    r = write_only.get("/v1/packets/batch", params={"id": mine["id"]})
    assert r.status_code == 403


def _token(server: Server, user_id: str, scope: str) -> str:
    from ltm.service.tokens import new_token

    secret, record = new_token(user_id, f"{scope}-{next(_names)}", scope=scope)
    store = server.open_store() if server.open_store else _sqlite(server)
    try:
        store.add_token(record)
    finally:
        store.close()
    return secret


def _sqlite(server: Server) -> Any:
    from ltm.store.sqlite import SqliteStore

    return SqliteStore(server.db)


@pytest.mark.parametrize("team", [None, "some-team"])
def test_an_unknown_token_is_refused_before_a_batch_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: str | None
) -> None:
    """An anonymous 1 MiB batch costs a token check, not a parse, a schema check and a scan
    of every packet in it (many times a plain refusal)."""
    from ltm.service import packets, tokens
    from ltm.service.errors import Unauthorized
    from ltm.store.sqlite import SqliteStore

    read: list[str] = []
    for name in ("_batch_texts", "_prepare", "_parsed"):
        real = getattr(packets, name)
        monkeypatch.setattr(
            packets,
            name,
            lambda *a, _real=real, _name=name, **k: read.append(_name) or _real(*a, **k),
        )
    stranger = tokens.credential("Bearer ltm_" + "0" * 64)
    filler = "x" * (MAX_BATCH_BODY // MAX_BATCH - 200)
    body = json.dumps({"packets": [text(make_packet(context=filler)) for _ in range(MAX_BATCH)]})
    assert len(body) > 1_000_000
    store = SqliteStore(tmp_path / "ltm.db")
    try:
        with pytest.raises(Unauthorized):
            packets.push_batch(store, stranger, body.encode(), team=team)
        with pytest.raises(Unauthorized):
            packets.push(store, stranger, text(make_packet(context=filler[:30000])).encode())
    finally:
        store.close()
    assert read == []
