"""Sharing one packet with one user, across users of a real ``ltm server run`` (SQLite and
DynamoDB), over HTTP and through the CLI; and the one line a server without sharing gets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from clikit import Cli, Seen, json_reply, stub_server
from serverkit import SERVER_STORES, Server, make_packet, running_server

from ltm.store import Store


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("share"), store=request.param) as srv:
        yield srv


def people(server: Server, *names: str) -> dict[str, tuple[str, httpx.Client]]:
    out = {}
    for name in names:
        uid, token = server.issue(name)
        out[name] = (uid, server.client(token))
    return out


def signed_in_clis(server: Server, tmp_path: Path, *names: str) -> list[tuple[str, str, Cli]]:
    """Each of ``names`` as a new user signed in on a machine of their own: (id, token, cli)."""
    out = []
    for name in names:
        uid, token = server.issue(name)
        cli = Cli(tmp_path / name)
        cli.ok("auth", server.url, "--with-token", stdin=token)
        out.append((uid, token, cli))
    return out


def team_of(server: Server, owner: httpx.Client, member: httpx.Client, name: str) -> None:
    assert owner.post("/v1/teams", json={"name": name}).status_code == 201
    code = owner.post(f"/v1/teams/{name}/invites", json={}).json()["code"]
    assert member.post(f"/v1/invites/{code}/accept", json={}).status_code in (200, 201)


def test_a_share_lets_one_user_read_one_packet_and_nothing_more(server: Server) -> None:
    found = people(server, "ann", "bob", "cat")
    (ann_id, ann), (bob_id, bob), (cat_id, cat) = found["ann"], found["bob"], found["cat"]
    team_of(server, ann, bob, "share-core")
    packet = make_packet(goal="Ann's <b>plan</b>")
    pid = packet["id"]
    assert ann.post("/v1/packets", json=packet).status_code == 201
    assert bob.get(f"/v1/packets/{pid}").status_code == 404

    first = ann.post(f"/v1/packets/{pid}/shares", json={"user": "bob"})  # a teammate, by name
    assert first.status_code == 201, first.text
    assert first.json()["share"]["user"] == {"id": bob_id, "display": "bob"}
    assert first.json()["share"]["shared_by"] == {"id": ann_id, "display": "ann"}
    assert ann.post(f"/v1/packets/{pid}/shares", json={"user": "bob"}).status_code == 200

    # Someone who shares no team with ann, and nobody at all: the same answer.
    unknown = [ann.post(f"/v1/packets/{pid}/shares", json={"user": n}) for n in ("cat", "zed")]
    assert [(r.status_code, r.json()) for r in unknown] == [(404, {"error": "user not found"})] * 2
    assert ann.post(f"/v1/packets/{pid}/shares", json={"user": cat_id}).status_code == 201
    assert ann.post(f"/v1/packets/{pid}/shares", json={"user": "ann"}).status_code == 400

    # The recipient reads it and finds it listed...
    got = bob.get(f"/v1/packets/{pid}")
    assert got.status_code == 200 and got.json()["goal"] == "Ann's <b>plan</b>"
    listed = bob.get("/v1/shared").json()["packets"]
    assert [(p["id"], p["shared_by"]["display"]) for p in listed] == [(pid, "ann")]
    # ...and can do nothing else with it.
    assert bob.delete(f"/v1/packets/{pid}").status_code == 404
    assert bob.post(f"/v1/packets/{pid}/publish", content=b"").status_code == 404
    assert bob.post("/v1/packets", json={**packet, "goal": "changed"}).status_code == 409
    assert bob.post(f"/v1/packets/{pid}/shares", json={"user": cat_id}).status_code == 404
    assert bob.get(f"/v1/packets/{pid}/shares").status_code == 404
    assert ann.get(f"/v1/packets/{pid}").json()["goal"] == "Ann's <b>plan</b>"
    shares = ann.get(f"/v1/packets/{pid}/shares").json()["shares"]
    assert sorted(s["user"]["display"] for s in shares) == ["bob", "cat"]

    # Unsharing ends it at once; a recipient may drop their own share.
    assert ann.delete(f"/v1/packets/{pid}/shares/bob").status_code == 204
    assert bob.get(f"/v1/packets/{pid}").status_code == 404
    assert bob.get("/v1/shared").json()["packets"] == []
    assert ann.delete(f"/v1/packets/{pid}/shares/bob").status_code == 404
    assert cat.delete(f"/v1/packets/{pid}/shares/{cat_id}").status_code == 204
    assert cat.get(f"/v1/packets/{pid}").status_code == 404


def test_shares_end_with_the_packet_and_with_the_sharers_reach(server: Server) -> None:
    found = people(server, "dan", "eve", "fay")
    (_, dan), (_, eve), (fay_id, fay) = found["dan"], found["eve"], found["fay"]
    team_of(server, dan, eve, "share-reach")
    team_packet = make_packet(goal="team work")
    assert eve.post("/v1/packets?team=share-reach", json=team_packet).status_code == 201
    tid = team_packet["id"]
    assert eve.post(f"/v1/packets/{tid}/shares", json={"user": fay_id}).status_code == 201
    assert fay.get(f"/v1/packets/{tid}").status_code == 200
    # eve leaves the team: the packet is out of her reach, and so out of fay's.
    assert eve.post("/v1/teams/share-reach/leave", json={}).status_code == 204
    assert fay.get(f"/v1/packets/{tid}").status_code == 404
    assert fay.get("/v1/shared").json()["packets"] == []

    mine = make_packet(goal="to be deleted")
    assert dan.post("/v1/packets", json=mine).status_code == 201
    assert dan.post(f"/v1/packets/{mine['id']}/shares", json={"user": fay_id}).status_code == 201
    assert dan.delete(f"/v1/packets/{mine['id']}").status_code == 204
    assert dan.post("/v1/packets", json=mine).status_code == 201  # the same id, a new packet
    assert fay.get(f"/v1/packets/{mine['id']}").status_code == 404


def test_shares_out_of_their_sharers_reach_hide_no_live_one(server: Server) -> None:
    found = people(server, "gil", "hux", "ida")
    (_, gil), (_, hux), (ida_id, ida) = found["gil"], found["hux"], found["ida"]
    live = make_packet(goal="still shared")
    assert gil.post("/v1/packets", json=live).status_code == 201
    assert gil.post(f"/v1/packets/{live['id']}/shares", json={"user": ida_id}).status_code == 201
    team_of(server, gil, hux, "share-lost")
    for n in range(3):  # newer shares, by hux, of the team's packets
        packet = make_packet(goal=f"team note {n}")
        assert hux.post("/v1/packets?team=share-lost", json=packet).status_code == 201
        shared = hux.post(f"/v1/packets/{packet['id']}/shares", json={"user": ida_id})
        assert shared.status_code == 201
    assert hux.post("/v1/teams/share-lost/leave", json={}).status_code == 204
    # hux's three shares are out of his reach now; the older live one still lists, also
    # when the listing asks for fewer than they are.
    for limit in ("", "?limit=1", "?limit=2"):
        listed = ida.get(f"/v1/shared{limit}").json()["packets"]
        assert [p["id"] for p in listed] == [live["id"]], limit


def test_share_read_and_unshare_through_the_cli(server: Server, tmp_path: Path) -> None:
    (gus_id, gus_token, gus), (hal_id, _, hal) = signed_in_clis(server, tmp_path, "gus", "hal")
    packet = make_packet(goal="Gus's notes")
    pid = packet["id"]
    assert server.client(gus_token).post("/v1/packets", json=packet).status_code == 201

    assert gus.ok("share", pid[:14], hal_id).strip() == f"shared {pid} with hal ({hal_id})"
    assert f"hal ({hal_id})  shared by gus" in gus.ok("share", pid)
    listed = hal.ok("ls", "--shared")
    assert pid[:12] in listed and "Gus's notes" in listed and "(from gus)" in listed
    assert "Gus's notes" in hal.ok("show", pid)
    # As copied from the listing, or shortened: a prefix is looked up among the shared too.
    assert "Gus's notes" in hal.ok("show", pid[:14])
    assert json.loads(hal.ok("pull", pid[:14]))["id"] == pid
    assert "Gus's notes" in hal.ok("log", pid[:14])
    assert hal.fails("share", pid, gus_id).startswith("ltm: no packet")
    assert hal.fails("unpublish", pid, "--yes")
    # Not Hal's to delete; the line says how he drops it from his list instead.
    refused = hal.fails("rm", pid, "--yes")
    assert "but not delete it" in refused, refused
    drop = refused.partition("alone (")[2].partition(" drops it")[0]
    assert drop == f"ltm unshare {pid} {hal_id}", refused
    assert hal.ok(*drop.split()[1:]).strip() == f"unshared {pid} with {hal_id}"
    assert "nobody has shared" in hal.run("ls", "--shared").stderr
    assert gus.ok("share", pid, hal_id).startswith("shared ")
    for nobody in ("", " "):  # no user: a usage error, not "no packet you can share"
        said = gus.fails("unshare", pid, nobody, code=2)
        assert said == "ltm: unshare: give the user's display name or id (ltm share ID lists them)"
    assert gus.ok("unshare", pid, "hal").strip() == f"unshared {pid} with hal"
    hal.fails("show", pid)
    assert "nobody has shared" in hal.run("ls", "--shared").stderr


def test_the_unshare_printed_after_a_share_runs_as_it_is(server: Server, tmp_path: Path) -> None:
    # A display name may hold a space; -t names the server the share is on.
    import shlex

    ((_, oda_token, oda),) = signed_in_clis(server, tmp_path, "oda")
    _, pat_token = server.issue("pat")
    oda_http, pat = server.client(oda_token), server.client(pat_token)
    assert pat.patch("/v1/whoami", json={"display": "Pat Quinn"}).status_code == 200
    team_of(server, oda_http, pat, "quoting")
    packet = make_packet(goal="For Pat")
    pid = packet["id"]
    assert oda_http.post("/v1/packets", json=packet).status_code == 201

    shared = oda.run("share", pid, "pat quinn", "-t", "quoting")
    assert shared.returncode == 0, shared.stderr
    hint = shared.stderr.strip().rpartition("end it with: ")[2]
    assert hint == f"ltm unshare {pid} 'pat quinn' -t quoting"
    assert oda.ok(*shlex.split(hint)[1:]).strip() == f"unshared {pid} with pat quinn"
    assert pat.get(f"/v1/packets/{pid}").status_code == 404


def test_a_server_without_sharing_is_named_in_one_line(tmp_path: Path) -> None:
    packet = make_packet()

    def reference(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if seen.method == "GET" and seen.path == f"/v1/packets/{packet['id']}":
            return json_reply(200, packet)
        return 404, {"Content-Type": "text/plain"}, b"404 page not found\n"

    cli = Cli(tmp_path)
    with stub_server(reference) as stub:
        env = {"LTM_HOST": stub.url, "LTM_TOKEN": "ltm_" + "a" * 40}
        for args in (["share", packet["id"], "bob"], ["ls", "--shared"]):
            err = cli.fails(*args, **env)
            assert err == f"ltm: this server does not offer sharing ({stub.url})"


def test_a_teammate_is_not_given_a_share_that_outlives_their_removal(server: Server) -> None:
    # A share of a team's packet with one of its members adds nothing while they are in
    # the team, and would be a door back into it once the owner removes them.
    found = people(server, "ida", "jon", "kim")
    (_, ida), (_, jon), (kim_id, kim) = found["ida"], found["jon"], found["kim"]
    team_of(server, ida, jon, "share-kick")
    code = ida.post("/v1/teams/share-kick/invites", json={}).json()["code"]
    assert kim.post(f"/v1/invites/{code}/accept", json={}).status_code == 201
    packet = make_packet(goal="the team's plan")
    pid = packet["id"]
    assert jon.post("/v1/packets?team=share-kick", json=packet).status_code == 201
    refused = jon.post(f"/v1/packets/{pid}/shares", json={"user": "kim"})
    assert refused.status_code == 400, refused.text
    assert refused.json() == {"error": "kim is in team share-kick: they read it already"}
    assert ida.delete(f"/v1/teams/share-kick/members/{kim_id}").status_code == 204
    assert kim.get(f"/v1/packets/{pid}").status_code == 404
    assert kim.get("/v1/shared").json()["packets"] == []


def test_a_recipient_who_joined_the_team_may_still_drop_their_share(server: Server) -> None:
    found = people(server, "lea", "max", "ned")
    (_, lea), (_, max_), (ned_id, ned) = found["lea"], found["max"], found["ned"]
    team_of(server, lea, max_, "share-join")
    packet = make_packet(goal="shared before she joined")
    pid = packet["id"]
    assert max_.post("/v1/packets?team=share-join", json=packet).status_code == 201
    assert max_.post(f"/v1/packets/{pid}/shares", json={"user": ned_id}).status_code == 201
    code = lea.post("/v1/teams/share-join/invites", json={}).json()["code"]
    assert ned.post(f"/v1/invites/{code}/accept", json={}).status_code == 201
    assert [p["id"] for p in ned.get("/v1/shared").json()["packets"]] == [pid]
    # Listed as shared with her, so hers to drop, member or not.
    dropped = ned.delete(f"/v1/packets/{pid}/shares/{ned_id}")
    assert dropped.status_code == 204, dropped.text
    assert ned.get("/v1/shared").json()["packets"] == []
    assert max_.get(f"/v1/packets/{pid}/shares").json()["shares"] == []


def test_a_share_of_a_teams_packet_ends_when_its_recipient_leaves_the_team(
    server: Server,
) -> None:
    # Shared with them before they joined (or their own packet, shared, then moved into the
    # team): once removed, or gone of their own accord, nothing of the team stays theirs.
    found = people(server, "oli", "pia", "quin", "rue")
    (_, oli), (_, pia) = found["oli"], found["pia"]
    (quin_id, quin), (rue_id, rue) = found["quin"], found["rue"]
    team_of(server, oli, pia, "share-out")
    packet, mine = make_packet(goal="the team's plan"), make_packet(goal="kept apart")
    assert pia.post("/v1/packets?team=share-out", json=packet).status_code == 201
    assert pia.post("/v1/packets", json=mine).status_code == 201
    for who in (quin_id, rue_id):
        assert pia.post(f"/v1/packets/{packet['id']}/shares", json={"user": who}).status_code == 201
    assert pia.post(f"/v1/packets/{mine['id']}/shares", json={"user": quin_id}).status_code == 201
    for joiner in (quin, rue):
        code = oli.post("/v1/teams/share-out/invites", json={}).json()["code"]
        assert joiner.post(f"/v1/invites/{code}/accept", json={}).status_code == 201
    assert oli.delete(f"/v1/teams/share-out/members/{quin_id}").status_code == 204
    assert rue.post("/v1/teams/share-out/leave", json={}).status_code == 204
    for gone in (quin, rue):
        assert gone.get(f"/v1/packets/{packet['id']}").status_code == 404
    # A share of another scope's packet is not the team's to end.
    assert [p["id"] for p in quin.get("/v1/shared").json()["packets"]] == [mine["id"]]
    assert rue.get("/v1/shared").json()["packets"] == []
    assert pia.get(f"/v1/packets/{packet['id']}/shares").json()["shares"] == []


def test_the_listing_reads_on_past_pages_of_shares_out_of_reach(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Page after page, and no further than it looks: on each store, in process."""
    from test_store_contract import pkt, put, share, user

    from ltm.service import share as sharing

    monkeypatch.setattr(sharing, "PAGE", 2)
    for uid in ("u1", "u2", "u3"):
        store.create_user(user(uid))
    packets = [pkt(f"01SHAREPAGE{n}", "u1", n=n) for n in range(6)]
    for p in packets:
        put(store, p)
    live = packets[0]
    store.share_packet(share(live.meta.id, "u2"), seen=live.meta)
    for minutes, p in enumerate(packets[1:], start=1):  # newer, by one who never read them
        store.share_packet(share(p.meta.id, "u2", by="u3", minutes=minutes), seen=p.meta)
    recipient = store.get_user("u2")
    assert recipient is not None
    got = sharing.shared_with_me(store, recipient, limit=1)
    assert [r.meta.id for r in got] == [live.meta.id]
    monkeypatch.setattr(sharing, "LOOKED_THROUGH", 5)  # the live one is the sixth
    assert sharing.shared_with_me(store, recipient, limit=1) == []


def test_a_shared_packet_is_in_its_recipients_thread(server: Server, tmp_path: Path) -> None:
    """``ltm log`` reads as ``ltm show`` does: the packet shared with you, and your packet
    continuing it, show it in the thread; the sharer's packets before it stay theirs."""
    (_, ivy_token, ivy), (jon_id, jon_token, jon) = signed_in_clis(server, tmp_path, "ivy", "jon")
    root = make_packet(goal="Ivy's start")
    shared = make_packet(goal="Ivy's plan", parent_id=root["id"])
    for packet in (root, shared):
        assert server.client(ivy_token).post("/v1/packets", json=packet).status_code == 201
    ivy.ok("share", shared["id"], jon_id)

    def thread(ref: str) -> tuple[list[str], bool]:
        found = json.loads(jon.ok("log", ref, "--json"))
        return [row["id"] for row in found["packets"]], found["complete"]

    assert json.loads(jon.ok("pull", shared["id"]))["goal"] == "Ivy's plan"
    assert thread(shared["id"]) == ([shared["id"]], False)
    mine = make_packet(goal="Jon's take")
    del mine["id"]
    own = jon.ok("save", "-", "--continues", shared["id"], stdin=json.dumps(mine)).strip()
    assert thread(own) == ([shared["id"], own], False)
    assert "Ivy's plan" in jon.ok("log", own)
    # and ltm show of the shared packet names his packet continuing it, as for his own
    children = server.client(jon_token).get(f"/v1/packets/{shared['id']}/children")
    assert children.status_code == 200, children.text
    assert [row["id"] for row in children.json()["packets"]] == [own]
    assert own in jon.ok("show", shared["id"])

    ivy.ok("unshare", shared["id"], jon_id)
    assert thread(own) == ([own], False)
    assert jon.fails("log", shared["id"]).startswith("ltm: no packet")
