"""The first user of ``ltm server init`` has a ULID for an id, as every user does.

The Go reference mints a ULID for every user (``store.NewULID`` in
``internal/api/api.go`` of dennisdevulder/ltm), and user ids show in its CLI's
``teams ls`` (OWNER) and ``teams members``. Older ``ltm server init`` stored
its user under the id ``root``; opening such a database gives that user a
ULID without breaking its tokens, teams, memberships, packets or
publications (the SQLite migration in ``chalicelib/store/sqlite.py``).
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import httpkit
from serverkit import init_db, ltm_server, make_packet, run_server

from ltm.service import invites, packets, publish, teams, tokens
from ltm.store.sqlite import SqliteStore
from ltm.store.sqlite_schema import ROOT_USER_VERSION

ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def test_init_mints_a_ulid_and_keeps_root_as_the_display_name(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    token = init_db(db)
    server = run_server(db, tmp_path / "server.log", token)
    try:
        client = server.client(token)
        assert client.post("/v1/teams", json={"name": "first"}).status_code == 201
        members = client.get("/v1/teams/first/members").json()["members"]
        assert len(members) == 1 and members[0]["display"] == "root"
        assert ULID.fullmatch(members[0]["user_id"]), members
        assert client.get("/v1/teams").json()["teams"][0]["owner_id"] == members[0]["user_id"]
    finally:
        server.stop()


def test_init_takes_a_display_name(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    result = ltm_server("init", "--db", str(db), "--name", "Ops team")
    assert result.returncode == 0, result.stderr
    conn = sqlite3.connect(db)
    try:
        ((user_id, display),) = conn.execute("SELECT id, display FROM users").fetchall()
    finally:
        conn.close()
    assert ULID.fullmatch(user_id) and display == "Ops team"
    bad = ltm_server("init", "--db", str(tmp_path / "other.db"), "--name", " ")
    assert bad.returncode == 2 and "--name" in bad.stderr
    assert not (tmp_path / "other.db").exists()


def _made_the_old_way(db: Path) -> dict[str, str]:
    """A database as older ``ltm server init`` left it: its first user's id is ``root``,
    with a team, a member, personal and team packets, an invite and a publication."""
    store = SqliteStore(db)
    try:
        root, root_token = tokens.issue(store, "root", label="root", user_id="root")
        bob, bob_token = tokens.issue(store, "bob", label="bob")
        team = teams.create(store, root, "crew")
        code = invites.create(store, root, "crew", base_url="http://x").code
        invites.accept(store, bob, code)
        mine = make_packet(goal="root's own packet, findable")
        packets.push(store, root, json_bytes(mine))
        shared = make_packet(goal="root's team packet")
        packets.push(store, root, json_bytes(shared), team="crew")
        publication, _ = publish.publish(store, root, mine["id"])
        spare = invites.create(store, root, "crew", base_url="http://x").code
    finally:
        store.close()
    # Back to the schema version before the migration, as such a database would be.
    conn = sqlite3.connect(db)
    try:
        conn.execute(f"PRAGMA user_version = {ROOT_USER_VERSION - 1}")
        conn.commit()
    finally:
        conn.close()
    return {
        "root_token": root_token,
        "bob_token": bob_token,
        "team_id": team.id,
        "mine": mine["id"],
        "shared": shared["id"],
        "secret": publication.secret,
        "spare": spare,
    }


def json_bytes(data: dict[str, object]) -> bytes:
    import json

    return json.dumps(data).encode()


def test_opening_an_old_database_gives_root_a_ulid_and_breaks_nothing(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    old = _made_the_old_way(db)
    store = SqliteStore(db)  # migrates
    try:
        assert store.get_user("root") is None
        root_cred = tokens.credential(f"Bearer {old['root_token']}")
        bob_cred = tokens.credential(f"Bearer {old['bob_token']}")
        assert root_cred.user_hint is None or root_cred.user_hint == "root"
        # The old token still works, and is the same user, now with a ULID.
        root = tokens.authenticate(store, f"Bearer {old['root_token']}")
        assert ULID.fullmatch(root.id) and root.display == "root"
        # Ownership of the team and its membership moved with the user.
        (team,) = teams.list_(store, root_cred)
        assert team.id == old["team_id"] and team.owner_id == root.id
        roles = {m.user_id: m.role for m in teams.members(store, root_cred, "crew")}
        assert roles[root.id] == "owner" and "root" not in roles
        # Personal and team packets, and what search and the public page see.
        listed = [m.id for m in packets.list_(store, root_cred)]
        assert listed == [old["mine"]]
        assert packets.get(store, root_cred, old["mine"]).meta.owner_id == root.id
        assert [m.id for m in packets.list_(store, bob_cred, team="crew")] == [old["shared"]]
        packets.get(store, bob_cred, old["shared"])
        from ltm.service import search

        assert [h.meta.id for h in search.search(store, root_cred, "findable")] == [old["mine"]]
        _found, shown = publish.read(store, root_cred, old["mine"])
        assert shown is not None and shown.secret == old["secret"]
        assert publish.read_public(store, old["secret"]).meta.id == old["mine"]
        # An invite root made still works (it is tied to the maker's membership).
        newcomer = invites.accept(store, None, old["spare"], when=datetime.now(UTC))
        assert newcomer.team.id == old["team_id"]
        # The owner still manages the team: removes bob, deletes the packet.
        teams.kick(
            store, root_cred, "crew", tokens.authenticate(store, f"Bearer {old['bob_token']}").id
        )
        packets.delete(store, root_cred, old["shared"])
    finally:
        store.close()
    # Opening it again changes nothing more.
    again = SqliteStore(db)
    try:
        assert tokens.authenticate(again, f"Bearer {old['root_token']}").id == root.id
    finally:
        again.close()


def test_an_old_database_served_over_http(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    old = _made_the_old_way(db)
    server = run_server(db, tmp_path / "server.log", old["root_token"])
    try:
        client = server.client(old["root_token"])
        (team,) = client.get("/v1/teams").json()["teams"]
        assert ULID.fullmatch(team["owner_id"])
        assert client.get(f"/v1/packets/{old['mine']}").status_code == 200
        assert httpkit.get(f"{server.url}/p/{old['secret']}").status_code == 200
    finally:
        server.stop()
    again = ltm_server("init", "--db", str(db))
    assert again.returncode == 0 and again.stdout == "" and "already initialized" in again.stderr
