"""One contract for every Store implementation.

Each test runs against every store in ``STORES`` (see conftest.py): what one
backend does, all must do, so the server behaves the same on SQLite and on
DynamoDB. The DynamoDB store runs on two engines: moto and dynalite
(``dynalite_engine.py``, which names what dynalite lacks and so skips).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from storekit import STORES, open_store
from timing import scaled

from ltm.store import (
    Conflict,
    Gone,
    Invite,
    NameTaken,
    NotFound,
    OverQuota,
    PacketMeta,
    PutItem,
    Quota,
    SearchHit,
    Share,
    Store,
    StoredPacket,
    Team,
    Token,
    Usage,
    User,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=[*STORES, "dynalite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from open_store(request, tmp_path)


def user(uid: str, subject: str | None = None) -> User:
    return User(uid, f"display-{uid}", T0, subject)


def token(uid: str, label: str, digest: str, at: datetime = T0) -> Token:
    return Token(label, uid, digest, at)


def pkt(
    pid: str,
    owner: str,
    team: str | None = None,
    *,
    n: int = 0,
    body: bytes = b"{}",
    project: str | None = None,
) -> StoredPacket:
    return StoredPacket(
        PacketMeta(pid, f"2026-01-01T00:00:{n:02d}Z", f"goal {pid}", owner, team, project), body
    )


def put(store: Store, p: StoredPacket) -> bool:
    return store.put_packet(p, sort_key=p.meta.created_at)


def in_team(store: Store, owner: str, *members: str) -> None:
    """Team t1 ("core") of ``owner`` and ``members``: only a member writes into a team."""
    for uid in (owner, *members):
        if store.get_user(uid) is None:
            store.create_user(user(uid))
    make_team(store, owner=owner)
    for uid in members:
        store.add_member("t1", uid)


# -- packets ---------------------------------------------------------------


def test_put_get_roundtrip_is_byte_identical(store: Store) -> None:
    body = '{\n  "goal": "é ✓ \U0001f600"\n}'.encode()
    assert put(store, pkt("01AAAAAAAAAA", "u1", body=body)) is True
    got = store.get_packet("01AAAAAAAAAA")
    assert got is not None
    assert got.body == body
    assert got.meta == PacketMeta("01AAAAAAAAAA", "2026-01-01T00:00:00Z", "goal 01AAAAAAAAAA", "u1")
    assert got.conforming is True
    assert store.get_packet("01MISSING000") is None


def test_get_packets_reads_many_as_get_packet_reads_each(store: Store) -> None:
    in_team(store, "u2")
    bodies = {f"01GETMANY{n:03d}": f'{{\n  "goal": "n{n} é"\n}}'.encode() for n in range(130)}
    for n, (pid, body) in enumerate(bodies.items()):
        owner, team = ("u1", None) if n % 2 else ("u2", "t1")
        put(store, pkt(pid, owner, team, n=n % 60, body=body, project="p" if n % 3 else None))
    # More ids than one request or statement takes, an absent one and a repeat.
    wanted = [*bodies, "01ABSENT0000", "01GETMANY000"]
    found = store.get_packets(wanted)
    assert set(found) == set(bodies)
    for pid in bodies:
        assert found[pid] == store.get_packet(pid)
    assert store.get_packets([]) == {}


def test_lenient_flag_is_kept(store: Store) -> None:
    p = StoredPacket(pkt("01LENIENT000", "u1").meta, b"{}", conforming=False)
    put(store, p)
    got = store.get_packet("01LENIENT000")
    assert got is not None and got.conforming is False


def test_a_lenient_packets_long_project_and_parent_are_stored(store: Store) -> None:
    """A lenient push holds a project name or a parent id to no length: the packet is
    stored, read and listed like any (DynamoDB lists it under neither, as its index
    keys take 2 KB at most)."""
    long = "p" * 2100
    meta = PacketMeta("01LONGKEYS00", "2026-01-01T00:00:00Z", "goal", "u1", None, long, long)
    put(store, StoredPacket(meta, b"{}", conforming=False))
    got = store.get_packet("01LONGKEYS00")
    assert got is not None and got.meta == meta
    assert [m.id for m in store.list_packets(owner_id="u1").items] == ["01LONGKEYS00"]
    assert store.delete_packet("01LONGKEYS00") is True


def test_repush_by_owner_replaces_and_reports_not_created(store: Store) -> None:
    put(store, pkt("01AAAAAAAAAA", "u1", body=b"one"))
    assert put(store, pkt("01AAAAAAAAAA", "u1", body=b"two")) is False
    got = store.get_packet("01AAAAAAAAAA")
    assert got is not None and got.body == b"two"


@pytest.mark.parametrize(("owner", "team"), [("u2", None), ("u2", "t1")])
def test_foreign_id_never_touches_the_existing_packet(
    store: Store, owner: str, team: str | None
) -> None:
    store.create_user(user("u2"))
    make_team(store, owner="u2")  # u2 may write to t1: still not their id
    put(store, pkt("01AAAAAAAAAA", "u1", body=b"mine"))
    with pytest.raises(Conflict):
        put(store, pkt("01AAAAAAAAAA", owner, team, body=b"theirs"))
    got = store.get_packet("01AAAAAAAAAA")
    assert got is not None and got.body == b"mine" and got.meta.owner_id == "u1"


@pytest.mark.parametrize("seen", [False, True], ids=["unseen", "seen"])
def test_owner_moves_a_personal_packet_into_a_team_they_are_in(store: Store, seen: bool) -> None:
    """The reference's flow: ``push`` personally, then ``push -t TEAM``: the packet moves."""
    store.create_user(user("u1"))
    make_team(store)  # u1 owns t1
    put(store, pkt("01MOVEME0000", "u1", body=b"personal"))
    before = store.get_packet("01MOVEME0000") if seen else None
    moved = pkt("01MOVEME0000", "u1", "t1", body=b"in the team")
    assert store.put_packet(moved, sort_key="k", seen=before.meta if before else None) is False
    got = store.get_packet("01MOVEME0000")
    assert got is not None and got.body == b"in the team" and got.meta.team_id == "t1"
    assert store.list_packets(owner_id="u1").items == []
    assert [m.id for m in store.list_packets(owner_id="x", team_id="t1").items] == ["01MOVEME0000"]
    assert store.packet_ids_with_prefix("01MOVE", owner_id="u1") == []
    assert store.packet_ids_with_prefix("01MOVE", owner_id="x", team_id="t1") == ["01MOVEME0000"]
    # Out of the team again (to personal, or to another team) is not a move we make.
    make_team(store, tid="t2", name="other")
    for team in (None, "t2"):
        with pytest.raises(Conflict):
            put(store, pkt("01MOVEME0000", "u1", team, body=b"out"))
    got = store.get_packet("01MOVEME0000")
    assert got is not None and got.body == b"in the team" and got.meta.team_id == "t1"


@pytest.mark.parametrize("repush", [False, True], ids=["new", "repush"])
def test_a_push_racing_its_authors_removal_from_the_team_does_not_land(
    store: Store, repush: bool
) -> None:
    """The service checks the membership before the write, and the write checks it again:
    a removal in between (forced here) refuses the push and changes nothing."""
    from ltm.examples import example_bytes
    from ltm.service import packets, teams, tokens
    from ltm.service.errors import NotFound as Refused

    owner, _ = tokens.issue(store, "owner")
    member, secret = tokens.issue(store, "member")
    caller = tokens.credential(f"Bearer {secret}")
    teams.create(store, owner, "core")
    team = store.get_team("core")
    assert team is not None
    store.add_member(team.id, member.id)
    pid = "01RACEDOUT00"

    def body(goal: str) -> dict[str, object]:
        data = json.loads(example_bytes())
        return {**data, "id": pid, "goal": goal}

    if repush:
        packets.push(store, caller, body("before"), team="core")
    before = store.get_packet(pid), store.usage(member.id)
    real = store.put_packet

    def removed_first(*args: object, **kwargs: object) -> bool:
        store.remove_member(team.id, member.id)  # the owner removes them, just now
        return real(*args, **kwargs)  # type: ignore[arg-type]

    store.put_packet = removed_first  # type: ignore[method-assign]
    with pytest.raises(Refused):
        packets.push(store, caller, body("after"), team="core")
    assert (store.get_packet(pid), store.usage(member.id)) == before


@pytest.mark.parametrize("seen", [False, True], ids=["unseen", "seen"])
def test_no_move_into_a_team_without_membership(store: Store, seen: bool) -> None:
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    make_team(store, owner="u2")  # u1 is not in t1
    put(store, pkt("01MOVEME0000", "u1", body=b"personal"))
    before = store.get_packet("01MOVEME0000") if seen else None
    with pytest.raises(NotFound):
        store.put_packet(
            pkt("01MOVEME0000", "u1", "t1", body=b"sneaked in"),
            sort_key="k",
            seen=before.meta if before else None,
        )
    got = store.get_packet("01MOVEME0000")
    assert got is not None and got.body == b"personal" and got.meta.team_id is None


def test_list_newest_first_per_scope_with_cursor(store: Store) -> None:
    in_team(store, "u1", "u2")
    for n in range(7):
        put(store, pkt(f"01PERSONAL{n:02d}", "u1", n=n))
    put(store, pkt("01OTHERUSER0", "u2", n=30))
    put(store, pkt("01TEAMPKT000", "u1", "t1", n=31))
    put(store, pkt("01TEAMPKT001", "u2", "t1", n=32))

    page = store.list_packets(owner_id="u1", limit=3)
    assert [m.id for m in page.items] == ["01PERSONAL06", "01PERSONAL05", "01PERSONAL04"]
    assert page.cursor is not None
    seen = [m.id for m in page.items]
    while page.cursor:
        page = store.list_packets(owner_id="u1", limit=3, cursor=page.cursor)
        seen += [m.id for m in page.items]
    assert seen == [f"01PERSONAL{n:02d}" for n in reversed(range(7))]

    team = store.list_packets(owner_id="ignored", team_id="t1", limit=50)
    assert [m.id for m in team.items] == ["01TEAMPKT001", "01TEAMPKT000"]
    assert team.cursor is None
    assert {m.owner_id for m in team.items} == {"u1", "u2"}
    assert [m.id for m in store.list_packets(owner_id="u2").items] == ["01OTHERUSER0"]


@pytest.mark.parametrize("cursor", ["not base64!", "bm90IGpzb24=", "WzEsIDJd", "WyJhIiwgIiJd"])
def test_a_cursor_not_from_a_list_is_refused(store: Store, cursor: str) -> None:
    # garbage, base64 of non-JSON, [1, 2], ["a", ""]
    with pytest.raises(ValueError, match="invalid cursor"):
        store.list_packets(owner_id="u1", cursor=cursor)


def test_list_exact_page_has_no_cursor(store: Store) -> None:
    for n in range(3):
        put(store, pkt(f"01PERSONAL{n:02d}", "u1", n=n))
    assert store.list_packets(owner_id="u1", limit=3).cursor is None


def test_prefix_lookup_is_scoped(store: Store) -> None:
    put(store, pkt("01ABCDEF0001", "u1"))
    put(store, pkt("01ABCDEF0002", "u1"))
    put(store, pkt("01ABCXYZ0003", "u2"))
    assert store.packet_ids_with_prefix("01ABCD", owner_id="u1") == ["01ABCDEF0001", "01ABCDEF0002"]
    assert store.packet_ids_with_prefix("01ABCX", owner_id="u1") == []
    assert store.packet_ids_with_prefix("01ABCX", owner_id="u2") == ["01ABCXYZ0003"]
    assert store.packet_ids_with_prefix("01ABCDEF0002", owner_id="u1", limit=2) == ["01ABCDEF0002"]


def test_list_and_prefix_by_project_per_scope(store: Store) -> None:
    in_team(store, "u1")
    for n in range(5):
        put(store, pkt(f"01PROJA{n:05d}", "u1", n=n, project="acme/app"))
    put(store, pkt("01PROJB00000", "u1", n=10, project="acme/other"))
    put(store, pkt("01NOPROJ0000", "u1", n=11))
    put(store, pkt("01PROJAU2000", "u2", n=12, project="acme/app"))
    put(store, pkt("01PROJATEAM0", "u1", "t1", n=13, project="acme/app"))

    page = store.list_packets(owner_id="u1", limit=2, project="acme/app")
    assert [m.id for m in page.items] == ["01PROJA00004", "01PROJA00003"]
    assert {m.project for m in page.items} == {"acme/app"}
    seen = [m.id for m in page.items]
    while page.cursor:
        page = store.list_packets(owner_id="u1", limit=2, cursor=page.cursor, project="acme/app")
        seen += [m.id for m in page.items]
    assert seen == [f"01PROJA{n:05d}" for n in reversed(range(5))]
    # Unfiltered, every packet of the scope, with or without a project.
    assert len(store.list_packets(owner_id="u1").items) == 7
    assert [m.id for m in store.list_packets(owner_id="u1", project="acme/other").items] == [
        "01PROJB00000"
    ]
    assert store.list_packets(owner_id="u1", project="acme").items == []  # exact names only
    assert [m.id for m in store.list_packets(owner_id="u2", project="acme/app").items] == [
        "01PROJAU2000"
    ]
    team = store.list_packets(owner_id="x", team_id="t1", project="acme/app")
    assert [m.id for m in team.items] == ["01PROJATEAM0"]

    got = store.get_packet("01PROJB00000")
    assert got is not None and got.meta.project == "acme/other"
    assert store.packet_ids_with_prefix("01PROJ", owner_id="u1", project="acme/other") == [
        "01PROJB00000"
    ]
    assert store.packet_ids_with_prefix("01PROJA0000", owner_id="u1", project="acme/app") == [
        "01PROJA00000",
        "01PROJA00001",
    ]
    assert store.packet_ids_with_prefix("01NOPROJ", owner_id="u1", project="acme/app") == []
    # A re-push that moves a packet to another project moves it in the listings too.
    put(store, pkt("01PROJB00000", "u1", n=10, project="acme/app"))
    assert store.list_packets(owner_id="u1", project="acme/other").items == []
    assert store.list_packets(owner_id="u1", project="acme/app", limit=1).items[0].id == (
        "01PROJB00000"
    )


def test_delete_packet(store: Store) -> None:
    put(store, pkt("01AAAAAAAAAA", "u1"))
    assert store.delete_packet("01AAAAAAAAAA") is True
    assert store.get_packet("01AAAAAAAAAA") is None
    assert store.delete_packet("01AAAAAAAAAA") is False


def test_concurrent_puts_lose_nothing(store: Store) -> None:
    def worker(w: int) -> None:
        for n in range(20):
            put(store, pkt(f"01W{w}N{n:02d}XXXXX", f"u{w}", n=n))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in range(4):
        assert len(store.list_packets(owner_id=f"u{w}", limit=100).items) == 20


# -- users and tokens ------------------------------------------------------


def test_users_and_tokens(store: Store) -> None:
    store.create_user(user("u1", subject="sub-1"), token("u1", "root", "h1"))
    store.create_user(user("u2"))
    assert store.get_user("u1") == user("u1", subject="sub-1")
    assert store.get_user_by_subject("sub-1") == user("u1", subject="sub-1")
    assert store.get_user_by_subject("sub-x") is None
    assert store.get_user("nobody") is None

    found = store.token_owner("h1")
    assert found is not None
    assert found[0] == token("u1", "root", "h1") and found[1].id == "u1"
    assert store.token_owner("unknown") is None

    store.add_token(token("u2", "laptop", "h2", T0 + timedelta(seconds=1)))
    with pytest.raises(Conflict):
        store.add_token(token("u2", "laptop", "h3"))  # label taken
    with pytest.raises(Conflict):
        store.add_token(token("u2", "other", "h2"))  # hash taken
    with pytest.raises(Conflict):
        store.create_user(user("u3", subject="sub-1"))  # subject taken

    later = T0 + timedelta(hours=1)
    store.touch_token("h2", later)
    assert [t.label for t in store.list_tokens()] == ["root", "laptop"]
    (mine,) = store.list_tokens(user_id="u2")
    assert mine.last_used_at == later

    assert store.revoke_token("laptop", user_id="u1") is False  # not u1's
    assert store.revoke_token("laptop", user_id="u2") is True
    assert store.token_owner("h2") is None
    assert store.revoke_token("laptop") is False


def test_tokens_keep_their_scope(store: Store) -> None:
    store.create_user(user("u1"), Token("root", "u1", "h1", T0, scope="read"))
    store.add_token(Token("phone", "u1", "h2", T0 + timedelta(seconds=1), scope="write"))
    store.add_token(token("u1", "laptop", "h3", T0 + timedelta(seconds=2)))
    found = store.token_owner("h1")
    assert found is not None and found[0].scope == "read"
    assert store.load(token_hash="h2").token is not None
    assert store.load(token_hash="h2").token[0].scope == "write"  # type: ignore[index]
    assert store.load(token_hash="h3").token[0].scope == "read write"  # type: ignore[index]
    assert [(t.label, t.scope) for t in store.list_tokens(user_id="u1")] == [
        ("root", "read"),
        ("phone", "write"),
        ("laptop", "read write"),
    ]
    assert [t.scope for t in store.list_tokens()] == ["read", "write", "read write"]
    grant_user = user("u9")
    store.create_user(grant_user)
    store.add_token(Token("ro", "u9", "h9", T0, scope="read"))
    assert store.token_owner("h9")[0].scope == "read"  # type: ignore[index]


def test_tokens_keep_their_resource_and_expiry(store: Store) -> None:
    """An OAuth access token is bound to /mcp and expires; both survive every read path."""
    mcp = "https://ltm.example.org/mcp"
    ends = T0 + timedelta(hours=1)
    store.create_user(user("u1"), token("u1", "cli", "h1"))
    store.add_token(
        Token("mcp-claude", "u1", "h2", T0, scope="read", resource=mcp, expires_at=ends)
    )
    found = store.token_owner("h2")
    assert found is not None and (found[0].resource, found[0].expires_at) == (mcp, ends)
    assert store.load(token_hash="h2").token[0].resource == mcp  # type: ignore[index]
    assert store.token_owner("h1")[0][5:] == ("read write", None, None)  # type: ignore[index]
    listed = {t.label: (t.resource, t.expires_at) for t in store.list_tokens(user_id="u1")}
    assert listed == {"cli": (None, None), "mcp-claude": (mcp, ends)}
    assert store.revoke_token("mcp-claude", user_id="u1")
    assert store.token_owner("h2") is None


def test_oauth_items_expire_and_are_taken_once(store: Store) -> None:
    later = T0 + timedelta(minutes=10)
    store.put_oauth_item("client", "c1", {"name": "Claude", "uris": ["http://127.0.0.1/cb"]}, None)
    store.put_oauth_item("code", "k1", {"user": "u1"}, later)
    assert store.get_oauth_item("client", "c1", T0) == {
        "name": "Claude",
        "uris": ["http://127.0.0.1/cb"],
    }
    assert store.get_oauth_item("client", "nope", T0) is None
    assert store.get_oauth_item("code", "k1", later) is None  # expired at its time
    assert store.get_oauth_item("code", "k1", T0) == {"user": "u1"}
    assert store.take_oauth_item("code", "k1", T0) == {"user": "u1"}
    assert store.take_oauth_item("code", "k1", T0) is None  # single use
    store.put_oauth_item("code", "k2", {"user": "u2"}, later)
    assert store.take_oauth_item("code", "k2", later + timedelta(seconds=1)) is None
    store.put_oauth_item("client", "c1", {"name": "renamed"}, None)  # replaces
    assert store.get_oauth_item("client", "c1", later)["name"] == "renamed"  # type: ignore[index]


def test_an_oauth_item_is_taken_by_exactly_one_of_concurrent_takers(store: Store) -> None:
    store.put_oauth_item("refresh", "r1", {"user": "u1"}, T0 + timedelta(days=1))
    got: list[object] = []
    threads = [
        threading.Thread(target=lambda: got.append(store.take_oauth_item("refresh", "r1", T0)))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [g for g in got if g is not None] == [{"user": "u1"}]


def test_create_user_with_token_is_atomic(store: Store) -> None:
    store.create_user(user("u1"), token("u1", "taken", "h1"))
    with pytest.raises(Conflict):
        store.create_user(user("u2"), token("u2", "taken", "h2"))
    assert store.get_user("u2") is None


def test_display_names_are_unique_in_any_case(store: Store) -> None:
    """One user per display name on a server, in any case: creating, joining by an invite
    and renaming all refuse another user's name; a user may recase their own; the new name
    shows wherever the user does (members, the token's owner)."""
    store.create_user(User("u1", "Sam", T0), token("u1", "sam-1", "h1"))
    with pytest.raises(NameTaken):
        store.create_user(User("u2", "sam", T0))
    with pytest.raises(NameTaken):
        store.create_user(User("u2", "ＳＡＭ", T0))  # the same name, full-width
    assert store.get_user("u2") is None
    store.create_user(User("u2", "Cat", T0), token("u2", "cat-1", "h2"))

    make_team(store)
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))
    with pytest.raises(NameTaken):
        store.accept_invite(
            "c1", "u3", T0, new_user=(User("u3", "CAT", T0), token("u3", "inv-u3", "h3"))
        )
    assert store.get_user("u3") is None
    store.accept_invite("c1", "u2", T0)  # the invite was not used up by the refusal

    with pytest.raises(NameTaken):
        store.rename_user("u2", "sAm")
    assert store.rename_user("u1", "SAM").display == "SAM"  # one's own name, recased
    renamed = store.rename_user("u2", "Catherine")
    assert renamed.display == "Catherine" and store.get_user("u2") == renamed
    assert {m.user_id: m.display for m in store.list_members("t1")} == {
        "u1": "SAM",
        "u2": "Catherine",
    }
    owner = store.token_owner("h2")
    assert owner is not None and owner[1].display == "Catherine"
    store.create_user(User("u4", "cat", T0))  # the old name is free again
    with pytest.raises(NotFound):
        store.rename_user("nobody", "Someone")
    # the user a name is taken by, in any case (a user with no token left included)
    found = {name: store.user_named(name) for name in ("ＳＡＭ", "catherine", "CAT", "Nobody")}
    assert {name: u.id if u else None for name, u in found.items()} == {
        "ＳＡＭ": "u1",
        "catherine": "u2",
        "CAT": "u4",
        "Nobody": None,
    }


# -- teams -----------------------------------------------------------------


def make_team(store: Store, tid: str = "t1", name: str = "core", owner: str = "u1") -> Team:
    team = Team(tid, name, owner, T0)
    store.create_team(team)
    return team


def test_teams_and_members(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    team = make_team(store)
    assert store.get_team("core") == team
    assert store.get_team("nope") is None
    with pytest.raises(Conflict):
        make_team(store, tid="t2", name="core", owner="u2")

    owner = store.get_member("t1", "u1")
    assert owner is not None and owner.role == "owner" and owner.display == "display-u1"
    assert store.get_member("t1", "u2") is None

    added = store.add_member("t1", "u2")
    assert added.role == "member" and added.user_id == "u2"
    assert store.add_member("t1", "u2", "owner").role == "member"  # existing membership unchanged
    assert [m.user_id for m in store.list_members("t1")] == ["u1", "u2"]
    assert [t.name for t in store.list_teams("u2")] == ["core"]
    assert store.list_teams("u3") == []

    assert store.remove_member("t1", "u2") is True
    assert store.remove_member("t1", "u2") is False
    assert store.list_teams("u2") == []


def test_delete_team_removes_its_packets_members_and_invites(store: Store) -> None:
    store.create_user(user("u1"))
    make_team(store)
    put(store, pkt("01TEAMPKT000", "u1", "t1"))
    put(store, pkt("01PERSONAL00", "u1"))
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))
    store.delete_team("t1")
    assert store.get_team("core") is None
    assert store.get_packet("01TEAMPKT000") is None
    assert store.get_packet("01PERSONAL00") is not None
    assert store.list_members("t1") == []
    with pytest.raises((NotFound, Gone)):
        store.accept_invite("c1", "u1", T0)


# -- sharing one packet with one user ----------------------------------------


def share(pid: str, to: str, by: str = "u1", minutes: int = 0) -> Share:
    return Share(pid, to, by, T0 + timedelta(minutes=minutes))


def test_share_list_and_unshare(store: Store) -> None:
    a, b = pkt("01SHARED0001", "u1", n=1), pkt("01SHARED0002", "u1", n=2)
    put(store, a)
    put(store, b)
    first, created = store.share_packet(share(a.meta.id, "u2"), seen=a.meta)
    assert created is True and first == share(a.meta.id, "u2")
    # Sharing again answers the share in force, unchanged.
    again, created = store.share_packet(share(a.meta.id, "u2", minutes=5), seen=a.meta)
    assert created is False and again == first
    store.share_packet(share(b.meta.id, "u2", minutes=1), seen=b.meta)
    store.share_packet(share(a.meta.id, "u3", minutes=2), seen=a.meta)

    assert store.get_share(a.meta.id, "u2") == first
    assert store.get_share(a.meta.id, "u4") is None
    assert [s.user_id for s in store.packet_shares(a.meta.id)] == ["u2", "u3"]
    listed = store.shared_with("u2")
    assert [(s.packet_id, m.id, m.goal) for s, m in listed] == [
        (b.meta.id, b.meta.id, b.meta.goal),  # the newest share first
        (a.meta.id, a.meta.id, a.meta.goal),
    ]
    assert [m.id for _, m in store.shared_with("u2", limit=1)] == [b.meta.id]
    assert store.shared_with("u9") == []
    # Page after page: the shares after the last one of the page before.
    assert [m.id for _, m in store.shared_with("u2", after=listed[0][0])] == [a.meta.id]
    assert store.shared_with("u2", after=listed[1][0]) == []

    assert store.unshare_packet(a.meta.id, "u2") is True
    assert store.unshare_packet(a.meta.id, "u2") is False
    assert store.get_share(a.meta.id, "u2") is None
    assert [m.id for _, m in store.shared_with("u2")] == [b.meta.id]


def test_shares_made_at_once_page_by_packet_id(store: Store) -> None:
    packets = [pkt(f"01SHAREDAT0{n}", "u1", n=n) for n in range(3)]
    for p in packets:
        put(store, p)
        store.share_packet(share(p.meta.id, "u2"), seen=p.meta)  # the same instant
    newest_id_first = [p.meta.id for p in reversed(packets)]
    first = store.shared_with("u2", limit=2)
    assert [m.id for _, m in first] == newest_id_first[:2]
    rest = store.shared_with("u2", limit=2, after=first[-1][0])
    assert [m.id for _, m in rest] == newest_id_first[2:]


def test_share_checks_the_packet_as_seen(store: Store) -> None:
    p = pkt("01SHARED0003", "u1")
    with pytest.raises(NotFound):  # no such packet
        store.share_packet(share(p.meta.id, "u2"), seen=p.meta)
    put(store, p)
    with pytest.raises(NotFound):  # not the owner or scope it has
        store.share_packet(share(p.meta.id, "u2"), seen=p.meta._replace(owner_id="u9"))
    assert store.get_share(p.meta.id, "u2") is None


def test_shares_survive_a_repush_and_end_with_the_packet(store: Store) -> None:
    store.create_user(user("u1"))
    make_team(store)
    mine, theirs = pkt("01SHARED0004", "u1"), pkt("01SHARED0005", "u1", "t1")
    for p in (mine, theirs):
        put(store, p)
        store.share_packet(share(p.meta.id, "u2"), seen=p.meta)
    put(store, mine)  # re-pushed: still shared
    assert store.get_share(mine.meta.id, "u2") is not None
    assert store.delete_packet_as(mine.meta.id, "u1", seen=mine.meta) is True
    assert store.get_share(mine.meta.id, "u2") is None
    assert store.packet_shares(mine.meta.id) == []
    put(store, mine)  # the same id again is a new packet: not shared
    assert store.get_share(mine.meta.id, "u2") is None
    assert [m.id for _, m in store.shared_with("u2")] == [theirs.meta.id]
    store.delete_team("t1")  # a team's deletion ends its packets' shares
    assert store.get_share(theirs.meta.id, "u2") is None
    assert store.shared_with("u2") == []


# -- invites ---------------------------------------------------------------


def test_invites_die_with_their_makers_membership(store: Store) -> None:
    for uid in ("u1", "u2", "u3", "u4"):
        store.create_user(user(uid))
    make_team(store)  # u1 owns t1
    store.add_member("t1", "u2")
    store.add_member("t1", "u3")
    week = T0 + timedelta(days=7)
    store.create_invite(Invite("by-u2-a", "t1", "u2", T0, week))
    store.create_invite(Invite("by-u2-b", "t1", "u2", T0, week))
    store.create_invite(Invite("by-u3", "t1", "u3", T0, week))
    store.create_invite(Invite("by-u1", "t1", "u1", T0, week))
    assert store.remove_member("t1", "u2") is True  # kicked
    assert store.remove_member("t1", "u3") is True  # left
    for code in ("by-u2-a", "by-u2-b", "by-u3"):
        with pytest.raises((NotFound, Gone)):
            store.accept_invite(code, "u4", T0)
    assert store.get_member("t1", "u4") is None
    assert store.get_member("t1", "u2") is None
    # The owner's invite is untouched; a rejoined member's old invites stay dead.
    store.accept_invite("by-u1", "u2", T0)
    with pytest.raises((NotFound, Gone)):
        store.accept_invite("by-u2-b", "u4", T0)
    assert store.get_member("t1", "u4") is None


def test_a_removed_members_invites_and_links_die_at_once_however_many(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More than a removal ends in its own request (DynamoDB leaves the rest to a job,
    ``dynamo_fanout.py``; here its pages are made tiny): from the answer on, none of
    the member's invites is accepted and none of their public links answers."""
    from ltm.store import Publication, dynamo_fanout

    monkeypatch.setattr(dynamo_fanout, "INLINE_PAGES", 1)
    monkeypatch.setattr(dynamo_fanout, "PACKETS_PER_PAGE", 2)
    for uid in ("u1", "u2", "u3"):
        store.create_user(user(uid))
    make_team(store)
    store.add_member("t1", "u2")
    week = T0 + timedelta(days=7)
    links = []
    for n in range(6):
        p = pkt(f"01GOING{n:05d}", "u2", "t1")
        put(store, p)
        links.append(
            store.publish_packet(Publication(p.meta.id, f"s{n}", f"h{n}", "u2", T0), seen=p.meta)
        )
        store.create_invite(Invite(f"going-{n}", "t1", "u2", T0, week))
    owners = pkt("01OWNERS0000", "u1", "t1")
    put(store, owners)
    kept = store.publish_packet(Publication(owners.meta.id, "so", "ho", "u1", T0), seen=owners.meta)

    assert store.remove_member("t1", "u2") is True
    for link in links:
        assert store.published_packet(link.secret_hash) is None
        assert store.publication(link.packet_id) is None
    for n in range(6):
        with pytest.raises((NotFound, Gone)):
            store.accept_invite(f"going-{n}", "u3", T0)
    assert store.get_member("t1", "u3") is None
    assert store.published_packet(kept.secret_hash) is not None
    # The team's owner may publish a packet the former member had published: anew.
    again = store.publish_packet(
        Publication(links[5].packet_id, "s-new", "h-new", "u1", T0),
        seen=pkt(links[5].packet_id, "u2", "t1").meta,
    )
    assert again.secret_hash == "h-new"
    assert store.published_packet("h-new") is not None
    assert store.published_packet(links[5].secret_hash) is None


def test_only_members_make_invites(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    make_team(store)
    with pytest.raises(NotFound):
        store.create_invite(Invite("c9", "t1", "u2", T0, T0 + timedelta(days=7)))
    with pytest.raises(NotFound):
        store.accept_invite("c9", "u2", T0)


def test_invite_single_use_and_expiry(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    store.create_user(user("u3"))
    make_team(store)
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))
    store.create_invite(Invite("c2", "t1", "u1", T0, T0 + timedelta(days=7)))

    invite, member = store.accept_invite("c1", "u2", T0 + timedelta(days=1))
    assert invite.used_by == "u2" and invite.used_at == T0 + timedelta(days=1)
    assert member.user_id == "u2" and member.role == "member"
    with pytest.raises(Gone):
        store.accept_invite("c1", "u3", T0 + timedelta(days=1))
    with pytest.raises(Gone):
        store.accept_invite("c2", "u3", T0 + timedelta(days=7))  # expired at exactly expires_at
    with pytest.raises(NotFound):
        store.accept_invite("nope", "u3", T0)
    assert store.get_member("t1", "u3") is None


def test_an_invite_tried_by_a_member_stays_good_for_its_newcomer(store: Store) -> None:
    """Its maker (or any member) opening the link joins nothing and spends nothing."""
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    make_team(store)
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))
    invite, member = store.accept_invite("c1", "u1", T0)
    assert invite.used_at is None and invite.used_by is None
    assert member.user_id == "u1" and member.role == "owner"  # their role kept
    invite, member = store.accept_invite("c1", "u2", T0 + timedelta(hours=1))
    assert invite.used_by == "u2" and member.role == "member"
    with pytest.raises(Gone):
        store.accept_invite("c1", "u2", T0 + timedelta(hours=2))  # now it is spent


def test_invite_for_new_user_creates_user_and_token(store: Store) -> None:
    store.create_user(user("u1"))
    make_team(store)
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))
    _, member = store.accept_invite(
        "c1", "u9", T0, new_user=(user("u9"), token("u9", "join", "h9"))
    )
    assert member.user_id == "u9" and member.display == "display-u9"
    found = store.token_owner("h9")
    assert found is not None and found[1].id == "u9"


def test_lost_invite_race_leaves_no_orphan_user(store: Store) -> None:
    store.create_user(user("u1"))
    make_team(store)
    store.create_user(user("u2"))
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))
    store.accept_invite("c1", "u2", T0)
    with pytest.raises(Gone):
        store.accept_invite("c1", "u9", T0, new_user=(user("u9"), token("u9", "join", "h9")))
    assert store.get_user("u9") is None
    assert store.token_owner("h9") is None


def test_concurrent_accepts_exactly_one_wins(store: Store) -> None:
    store.create_user(user("u1"))
    make_team(store)
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))
    outcomes: list[str] = []
    barrier = threading.Barrier(20)

    def accept(n: int) -> None:
        barrier.wait()
        try:
            store.accept_invite("c1", f"x{n}", T0)
            outcomes.append("won")
        except Gone:
            outcomes.append("gone")

    threads = [threading.Thread(target=accept, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["gone"] * 19 + ["won"]
    assert len(store.list_members("t1")) == 2


# -- one-round-trip helpers (portable defaults in Store, overridden by DynamoDB) --


def test_team_membership(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    team = make_team(store)
    found = store.team_membership("core", "u1")
    assert found is not None and found[0] == team and found[1].role == "owner"
    assert store.team_membership("core", "u2") is None  # not a member
    assert store.team_membership("nope", "u1") is None  # no such team
    store.add_member("t1", "u2")
    found = store.team_membership("core", "u2")
    assert found is not None and found[1].role == "member"
    store.remove_member("t1", "u2")
    assert store.team_membership("core", "u2") is None
    # A new team with a deleted team's name: nothing of the old one carries over.
    store.add_member("t1", "u2")
    store.delete_team("t1")
    make_team(store, tid="t2", name="core", owner="u1")
    assert store.team_membership("core", "u2") is None
    found = store.team_membership("core", "u1")
    assert found is not None and found[0].id == "t2"


@pytest.mark.parametrize("seen", [False, True], ids=["unseen", "seen"])
def test_delete_packet_as_follows_the_scope_rules(store: Store, seen: bool) -> None:
    """With ``seen`` the caller read the packet first (as the service does); the rule holds."""

    def delete_as(pid: str, uid: str) -> bool:
        found = store.get_packet(pid) if seen else None
        return store.delete_packet_as(pid, uid, seen=found.meta if found else None)

    for uid in ("u1", "u2", "u3"):
        store.create_user(user(uid))
    make_team(store)  # u1 owns t1
    store.add_member("t1", "u2")
    put(store, pkt("01PERSONAL01", "u1"))
    put(store, pkt("01TEAMBYU2A0", "u2", "t1"))
    put(store, pkt("01TEAMBYU2B0", "u2", "t1"))
    put(store, pkt("01TEAMBYU1A0", "u1", "t1"))

    assert delete_as("01PERSONAL01", "u2") is False  # someone else's
    assert delete_as("01MISSING000", "u1") is False
    assert delete_as("01PERSONAL01", "u1") is True
    assert store.get_packet("01PERSONAL01") is None

    assert delete_as("01TEAMBYU1A0", "u2") is False  # a member, not creator/owner
    assert delete_as("01TEAMBYU2A0", "u3") is False  # not a member
    assert delete_as("01TEAMBYU2A0", "u2") is True  # creator
    assert delete_as("01TEAMBYU2B0", "u1") is True  # team owner
    put(store, pkt("01TEAMBYU2C0", "u2", "t1"))
    store.remove_member("t1", "u2")
    assert delete_as("01TEAMBYU2C0", "u2") is False  # creator, no longer a member
    assert store.get_packet("01TEAMBYU2C0") is not None


def test_delete_packet_as_rechecks_what_was_seen(store: Store) -> None:
    """The packet under an id changed after the caller read it: the write notices."""
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    put(store, pkt("01CHANGED000", "u1"))
    seen = store.get_packet("01CHANGED000")
    assert seen is not None
    store.delete_packet("01CHANGED000")
    put(store, pkt("01CHANGED000", "u2"))  # the id now belongs to someone else
    assert store.delete_packet_as("01CHANGED000", "u1", seen=seen.meta) is False
    got = store.get_packet("01CHANGED000")
    assert got is not None and got.meta.owner_id == "u2"


def test_load_reads_what_a_request_needs(store: Store) -> None:
    store.create_user(user("u1"), token("u1", "u1-laptop", "h1"))
    store.create_user(user("u2"), token("u2", "u2-laptop", "h2"))
    make_team(store)  # u1 owns t1 ("core"); u2 is not a member
    put(store, pkt("01LOADME0000", "u1", "t1"))

    empty = store.load()
    assert (empty.token, empty.membership, empty.packet) == (None, None, None)
    # the token alone, and with the hint of its own user or none
    for hint in (None, "u1"):
        got = store.load(token_hash="h1", user_id=hint, team="core", packet_id="01LOADME0000")
        assert got.token is not None and got.token[1].id == "u1"
        assert got.token[0].label == "u1-laptop"
        assert got.membership is not None and got.membership[0].id == "t1"
        assert got.membership[1].role == "owner"
        assert got.packet is not None and got.packet.meta.team_id == "t1"
    # A hint is never believed over the token: u2's token naming u1 gets u2's view.
    got = store.load(token_hash="h2", user_id="u1", team="core", packet_id="01LOADME0000")
    assert got.token is not None and got.token[1].id == "u2"
    assert got.membership is None
    assert got.packet is not None  # fetched; whether u2 may read it is the service's rule
    # An unknown token reveals nothing else.
    got = store.load(token_hash="nope", user_id="u1", team="core", packet_id="01LOADME0000")
    assert (got.token, got.membership, got.packet) == (None, None, None)
    # A trusted user (no token): their membership; absent things are None.
    got = store.load(user_id="u1", team="core", packet_id="01LOADME0000")
    assert got.token is None and got.membership is not None and got.packet is not None
    got = store.load(user_id="u1", team="nope", packet_id="01MISSING000")
    assert got.membership is None and got.packet is None
    got = store.load(token_hash="h1", packet_id="01MISSING000")
    assert got.token is not None and got.packet is None and got.membership is None


# -- device grants (RFC 8628), counters, secrets -------------------------------

from ltm.store import DeviceGrant  # noqa: E402 - this section's own import


def grant(
    dc: str = "dc1", uc: str = "uc1", *, at: datetime = T0, minutes: int = 10, interval: int = 5
) -> DeviceGrant:
    return DeviceGrant(
        device_code_hash=dc,
        user_code_hash=uc,
        client_id="ltm-cli",
        scope="read write",
        device_name="ltm-python/0.1.0",
        client_ip="192.0.2.7",
        created_at=at,
        expires_at=at + timedelta(minutes=minutes),
        interval=interval,
        next_poll_at=at,
    )


def test_device_grant_roundtrip_and_lookup_by_user_code(store: Store) -> None:
    g = grant()
    store.create_device_grant(g, T0)
    assert store.get_device_grant("dc1") == g
    assert store.get_device_grant("nope") is None
    assert store.get_device_grant_by_user_code("uc1", T0 + timedelta(minutes=9)) == g
    assert store.get_device_grant_by_user_code("uc2", T0) is None
    # Expired: gone by user code; by device code the caller sees expires_at itself.
    assert store.get_device_grant_by_user_code("uc1", T0 + timedelta(minutes=10)) is None
    late = store.get_device_grant("dc1")
    assert late is None or late.expires_at == g.expires_at


def test_device_grant_codes_are_unique_while_alive(store: Store) -> None:
    store.create_device_grant(grant("dc1", "uc1"), T0)
    with pytest.raises(Conflict):
        store.create_device_grant(grant("dc1", "uc9"), T0)  # same device code
    with pytest.raises(Conflict):
        store.create_device_grant(grant("dc2", "uc1"), T0 + timedelta(minutes=5))  # live user code
    # Once the first grant has expired its user code may be drawn again.
    later = T0 + timedelta(minutes=11)
    store.create_device_grant(grant("dc3", "uc1", at=later), later)
    found = store.get_device_grant_by_user_code("uc1", later)
    assert found is not None and found.device_code_hash == "dc3"


def test_poll_in_time_and_too_fast(store: Store) -> None:
    store.create_device_grant(grant(interval=5), T0)
    polled = store.poll_device_grant("dc1", T0 + timedelta(seconds=1), slow_down_step=5)
    assert polled is not None
    g, too_fast = polled
    assert too_fast is False and g.interval == 5
    assert g.next_poll_at == T0 + timedelta(seconds=6)
    # 2 s later: too fast; the interval grows by 5 and the next poll moves out.
    g, too_fast = store.poll_device_grant("dc1", T0 + timedelta(seconds=3), slow_down_step=5)  # type: ignore[misc]
    assert too_fast is True and g.interval == 10
    assert g.next_poll_at == T0 + timedelta(seconds=13)
    again = store.get_device_grant("dc1")
    assert again is not None and again.interval == 10 and again.next_poll_at == g.next_poll_at
    # Within the leeway counts as in time.
    g, too_fast = store.poll_device_grant(  # type: ignore[misc]
        "dc1",
        T0 + timedelta(seconds=12, milliseconds=800),
        slow_down_step=5,
        leeway=timedelta(milliseconds=500),
    )
    assert too_fast is False and g.interval == 10
    assert store.poll_device_grant("nope", T0, slow_down_step=5) is None
    assert store.get_device_grant("nope") is None  # a poll never creates a grant


def test_decide_once(store: Store) -> None:
    store.create_device_grant(grant(), T0)
    store.create_device_grant(grant("dc2", "uc2"), T0)
    now = T0 + timedelta(minutes=1)
    approved = store.decide_device_grant(
        "uc1", now, approve=True, user_id="u1", approved_with="tokenhash1"
    )
    assert (approved.status, approved.user_id, approved.decided_at) == ("approved", "u1", now)
    assert approved.approved_with == "tokenhash1"  # the web session it starts depends on it
    assert store.get_device_grant("dc1") == approved
    with pytest.raises(Gone):
        store.decide_device_grant("uc1", now, approve=False, user_id="u2")
    denied = store.decide_device_grant("uc2", now, approve=False, user_id="u2")
    assert denied.status == "denied" and denied.user_id == "u2"
    assert denied.approved_with is None and store.get_device_grant("dc2") == denied
    with pytest.raises(NotFound):
        store.decide_device_grant("uc-unknown", now, approve=True, user_id="u1")
    store.create_device_grant(grant("dc3", "uc3"), T0)
    with pytest.raises(NotFound):  # expired
        store.decide_device_grant("uc3", T0 + timedelta(minutes=10), approve=True, user_id="u1")


def test_concurrent_decisions_exactly_one_wins(store: Store) -> None:
    store.create_device_grant(grant(), T0)
    results: list[str] = []
    lock = threading.Lock()

    def decide(i: int) -> None:
        try:
            store.decide_device_grant("uc1", T0, approve=i % 2 == 0, user_id=f"u{i}")
            outcome = "won"
        except Gone:
            outcome = "gone"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["gone"] * 7 + ["won"]


def test_redeem_hands_out_one_token_once(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    store.create_device_grant(grant(), T0)
    now = T0 + timedelta(minutes=1)
    t = token("u1", "laptop-1a2b3c", "h-device")
    with pytest.raises(Gone):  # still pending
        store.redeem_device_grant("dc1", now, t)
    store.decide_device_grant("uc1", now, approve=True, user_id="u1")
    with pytest.raises(Gone):  # a token for someone else than the approver
        store.redeem_device_grant("dc1", now, token("u2", "other-label", "h-other"))
    store.add_token(token("u1", "taken-label", "h-taken"))
    with pytest.raises(Conflict):  # label taken: nothing changes
        store.redeem_device_grant("dc1", now, token("u1", "taken-label", "h-new"))
    still = store.get_device_grant("dc1")
    assert still is not None and still.status == "approved"
    used = store.redeem_device_grant("dc1", now, t)
    assert used.status == "used"
    owner = store.token_owner("h-device")
    assert owner is not None and owner[1].id == "u1" and owner[0].label == "laptop-1a2b3c"
    with pytest.raises(Gone):
        store.redeem_device_grant("dc1", now, token("u1", "again", "h-again"))
    assert store.token_owner("h-again") is None
    with pytest.raises(NotFound):
        store.redeem_device_grant("nope", now, token("u1", "x", "h-x"))


def test_redeem_after_expiry_or_denial_is_gone(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_device_grant(grant("dc1", "uc1"), T0)
    store.create_device_grant(grant("dc2", "uc2"), T0)
    store.decide_device_grant("uc1", T0, approve=True, user_id="u1")
    store.decide_device_grant("uc2", T0, approve=False, user_id="u1")
    with pytest.raises(Gone):
        store.redeem_device_grant("dc1", T0 + timedelta(minutes=10), token("u1", "a", "h-a"))
    with pytest.raises(Gone):
        store.redeem_device_grant("dc2", T0, token("u1", "b", "h-b"))
    assert store.list_tokens(user_id="u1") == []


def test_concurrent_redeems_exactly_one_wins(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_device_grant(grant(), T0)
    store.decide_device_grant("uc1", T0, approve=True, user_id="u1")
    results: list[str] = []
    lock = threading.Lock()

    def redeem(i: int) -> None:
        try:
            store.redeem_device_grant("dc1", T0, token("u1", f"dev-{i}", f"h-{i}"))
            outcome = "won"
        except (Gone, Conflict):
            outcome = "lost"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=redeem, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["lost"] * 7 + ["won"]
    assert len(store.list_tokens(user_id="u1")) == 1


def test_counters_count_and_expire(store: Store) -> None:
    end = T0 + timedelta(minutes=15)
    assert store.read_counter("k", T0) == 0
    assert [store.add_to_counter("k", T0, end) for _ in range(3)] == [1, 2, 3]
    assert store.read_counter("k", T0 + timedelta(minutes=14)) == 3
    assert store.read_counter("other", T0) == 0
    # A later expiry passed to a live counter does not extend it.
    assert store.add_to_counter("k", T0, end + timedelta(hours=1)) == 4
    assert store.read_counter("k", end) == 0
    # Expired: starts again at 1 with the new expiry.
    assert store.add_to_counter("k", end, end + timedelta(minutes=15)) == 1
    assert store.read_counter("k", end + timedelta(minutes=1)) == 1


def test_counter_adds_are_not_lost_under_concurrency(store: Store) -> None:
    end = T0 + timedelta(minutes=15)

    def add() -> None:
        for _ in range(5):
            store.add_to_counter("burst", T0, end)

    threads = [threading.Thread(target=add) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.read_counter("burst", T0) == 30


def test_ensure_secret_keeps_the_first(store: Store) -> None:
    first = store.ensure_secret("signing", b"\x00first" * 4)
    assert first == b"\x00first" * 4
    assert store.ensure_secret("signing", b"second" * 4) == first
    assert store.ensure_secret("other", b"x" * 32) == b"x" * 32


# -- search, filters, cursors and lineage ------------------------------------


def doc(
    pid: str,
    owner: str,
    team: str | None = None,
    *,
    n: int = 0,
    goal: str = "",
    parent: str | None = None,
    **fields: object,
) -> StoredPacket:
    """A packet with a real JSON body (what search indexes) and its listing fields."""
    import json

    body = {"id": pid, "goal": goal or f"goal {pid}", "next_step": "continue", **fields}
    if parent:
        body["parent_id"] = parent
    created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
    meta = PacketMeta(pid, created, str(body["goal"]), owner, team, parent_id=parent)
    return StoredPacket(meta, json.dumps(body).encode())


def ids(hits: list[SearchHit]) -> list[str]:
    return [h.meta.id for h in hits]


def search(
    store: Store, text: str, scopes: list[tuple[str, str | None]], limit: int = 20
) -> list[SearchHit]:
    from ltm.search import parse

    return store.search(parse(text), scopes=scopes, limit=limit)


def test_parent_id_is_kept_and_listed(store: Store) -> None:
    put(store, doc("01ROOT000000", "u1", n=1))
    put(store, doc("01CHILD00000", "u1", n=2, parent="01ROOT000000"))
    got = store.get_packet("01CHILD00000")
    assert got is not None and got.meta.parent_id == "01ROOT000000"
    listed = store.list_packets(owner_id="u1").items
    assert [(m.id, m.parent_id) for m in listed] == [
        ("01CHILD00000", "01ROOT000000"),
        ("01ROOT000000", None),
    ]


def test_children_oldest_first_and_only_from_readable_scopes(store: Store) -> None:
    in_team(store, "u1", "u2")
    put(store, doc("01ROOT000000", "u1", "t1", n=1))
    put(store, doc("01KIDB000000", "u2", "t1", n=3, parent="01ROOT000000"))
    put(store, doc("01KIDA000000", "u1", "t1", n=2, parent="01ROOT000000"))
    put(store, doc("01KIDSECRET0", "u2", n=4, parent="01ROOT000000"))  # u2's personal
    put(store, doc("01UNRELATED0", "u1", "t1", n=5))
    t1 = [("u1", None), ("u1", "t1")]
    kids = store.children("01ROOT000000", scopes=t1)
    assert [m.id for m in kids] == ["01KIDA000000", "01KIDB000000"]
    assert kids[0].parent_id == "01ROOT000000"
    both = store.children("01ROOT000000", scopes=[("u2", None), ("u2", "t1")])
    assert [m.id for m in both] == ["01KIDA000000", "01KIDB000000", "01KIDSECRET0"]
    assert store.children("01ROOT000000", scopes=[("u3", None)]) == []
    assert store.children("01ROOT000000", scopes=[]) == []
    assert [m.id for m in store.children("01ROOT000000", scopes=t1, limit=1)] == ["01KIDA000000"]
    store.delete_packet("01KIDA000000")
    assert [m.id for m in store.children("01ROOT000000", scopes=t1)] == ["01KIDB000000"]


def test_list_filters_by_tag_time_and_author_with_cursor(store: Store) -> None:
    in_team(store, "u1", "u2")
    for n in range(6):
        owner = "u1" if n % 2 == 0 else "u2"
        tags = ["auth"] if n < 4 else ["ui"]
        put(store, doc(f"01TEAMPKT{n:03d}", owner, "t1", n=n, tags=tags))
    put(store, doc("01PERSONAL00", "u1", n=9, tags=["auth"]))

    def listing(**kw: object) -> list[str]:
        seen: list[str] = []
        cursor = None
        while True:
            page = store.list_packets(
                owner_id="u1",
                team_id="t1",
                limit=1,
                cursor=cursor,
                **kw,  # type: ignore[arg-type]
            )
            seen += [m.id for m in page.items]
            cursor = page.cursor
            if cursor is None:
                return seen

    every = [f"01TEAMPKT{n:03d}" for n in reversed(range(6))]
    assert listing() == every
    assert listing(tag="auth") == every[2:]
    assert listing(tag="ui") == every[:2]
    assert listing(tag="none") == []
    assert listing(author="u2") == ["01TEAMPKT005", "01TEAMPKT003", "01TEAMPKT001"]
    assert listing(author="u2", tag="auth") == ["01TEAMPKT003", "01TEAMPKT001"]
    since, until = "2026-01-01T00:00:02Z", "2026-01-01T00:00:04Z"
    assert listing(since=since) == every[:4]
    assert listing(until=until) == every[2:]  # until is exclusive
    assert listing(since=since, until=until) == ["01TEAMPKT003", "01TEAMPKT002"]
    assert listing(since=since, until=until, tag="auth", author="u1") == ["01TEAMPKT002"]
    # the personal scope is another scope
    assert [m.id for m in store.list_packets(owner_id="u1", tag="auth").items] == ["01PERSONAL00"]


def test_search_finds_ranks_and_snippets(store: Store) -> None:
    put(
        store,
        doc(
            "01TARGET0000",
            "u1",
            n=1,
            goal="Fix the flaky OAuth token refresh in the login flow",
            tags=["auth"],
            project={"name": "webapp"},
        ),
    )
    put(
        store,
        doc(
            "01DISTRACT00",
            "u1",
            n=2,
            goal="Tidy the README",
            attempts=[{"tried": "mention oauth once", "outcome": "failed", "learned": "nope"}],
        ),
    )
    put(store, doc("01OTHERPROJ0", "u1", n=3, goal="Rotate the refresh keys", tags=["ops"]))
    me = [("u1", None)]
    # the known answer ranks first: "oauth" is in its goal, only in an attempt elsewhere
    assert ids(search(store, "oauth", me)) == ["01TARGET0000", "01DISTRACT00"]
    hit = search(store, "oauth", me)[0]
    assert hit.snippet.field == "goal"
    start, end = hit.snippet.highlights[0]
    assert hit.snippet.text[start:end] == "OAuth"
    other = search(store, "oauth", me)[1]
    assert other.snippet.field == "attempts" and "mention oauth once" in other.snippet.text
    # phrases, prefixes, qualifiers
    assert ids(search(store, '"token refresh"', me)) == ["01TARGET0000"]
    assert ids(search(store, '"refresh token"', me)) == []
    assert set(ids(search(store, "refr*", me))) == {"01TARGET0000", "01OTHERPROJ0"}
    assert ids(search(store, "refresh tag:auth", me)) == ["01TARGET0000"]
    assert ids(search(store, "refresh project:webapp", me)) == ["01TARGET0000"]
    assert ids(search(store, "refresh project:other", me)) == []
    assert ids(search(store, "tag:ops", me)) == ["01OTHERPROJ0"]  # qualifiers alone list
    assert ids(search(store, "logi* flaky", me)) == ["01TARGET0000"]  # every term required
    assert ids(search(store, "oauth", me, limit=1)) == ["01TARGET0000"]
    # diacritics and case fold as FTS5's unicode61 does
    assert ids(search(store, "FLÄKY", me)) == ["01TARGET0000"]


@pytest.mark.parametrize(
    ("goal", "project"),
    [
        ("Исправить мой новый тест", "мой-проект"),  # й is a letter, not и with a breve
        ("Διόρθωση δοκιμή σύνδεσης", "έργο"),  # Greek accents are not Latin diacritics
        ("한국어 번역 수정", "프로젝트"),  # Hangul syllables, not their jamo
        ("हिन्दी परीक्षण ठीक करें", "परियोजना"),  # vowel signs and the virama split words
        ("बड\u093c\u093e \u095eाइल \u095cा", "फ़ाइल"),  # nukta letters, composed and not
        ("תקן את הקוֹד", "קוֹד"),  # a vowel point (niqqud)
    ],
    ids=["cyrillic", "greek", "hangul", "devanagari", "nukta", "hebrew"],
)
def test_every_word_of_a_packet_in_any_script_finds_it(
    store: Store, goal: str, project: str
) -> None:
    """A word copied from a packet finds it, however its script is written: the query is
    cut and folded as the packet's text was (FTS5's unicode61 on SQLite)."""
    put(store, doc("01SCRIPT0000", "u1", goal=goal, project={"name": project}))
    me = [("u1", None)]
    for word in goal.split():
        assert ids(search(store, word, me)) == ["01SCRIPT0000"], word
    assert ids(search(store, goal, me)) == ["01SCRIPT0000"]
    assert ids(search(store, f'"{goal}"', me)) == ["01SCRIPT0000"]
    assert ids(search(store, f"{goal.split()[0]} project:{project}", me)) == ["01SCRIPT0000"]


def test_a_query_typed_in_full_width_finds_the_packets_words(store: Store) -> None:
    """An input method's full-width letters, or a ligature, mean the plain letters."""
    put(store, doc("01WIDTH00000", "u1", goal="Fix the API cache"))
    me = [("u1", None)]
    for query in ("ＡＰＩ", "ﬁx", "ＣＡＣ*"):
        assert ids(search(store, query, me)) == ["01WIDTH00000"], query


@pytest.mark.parametrize(
    ("goal", "words"),
    [
        ("検索テストを直す", ["検索", "テスト", "直す", "検索テスト"]),
        ("修复搜索功能的错误", ["搜索", "功能", "错误", "修复"]),
        ("검색어자동완성오류", ["자동완성", "검색어", "오류"]),  # one compound
        ("แก้ไขการค้นหา", ["ค้นหา", "การ", "แก้ไข"]),  # Thai, its marks and all
    ],
    ids=["japanese", "chinese", "korean", "thai"],
)
def test_a_word_inside_a_run_written_without_spaces_finds_the_packet(
    store: Store, goal: str, words: list[str]
) -> None:
    """Chinese, Japanese and Thai put no space between words (Korean joins compounds):
    each is indexed and asked in pairs of characters, so a word inside a run finds
    its packet, with a word of another script too, and is marked in the snippet."""
    put(store, doc("01RUN0000000", "u1", n=1, goal=goal))
    put(store, doc("01OTHERRUN00", "u1", n=2, goal="東京、京都の旅"))
    me = [("u1", None)]
    for word in words:
        hits = search(store, word, me)
        assert ids(hits) == ["01RUN0000000"], word
        start, end = hits[0].snippet.highlights[0]
        assert hits[0].snippet.text[start:end] == word
    assert ids(search(store, f"{words[0]} continue", me)) == ["01RUN0000000"]
    assert ids(search(store, f"{words[0]} nowhere", me)) == []
    assert ids(search(store, f'"{goal}"', me)) == ["01RUN0000000"]
    assert ids(search(store, f"{words[0]}{words[0]}", me)) == []  # its pairs, not in a row


def test_runs_apart_make_no_word_and_one_character_is_a_word_alone(store: Store) -> None:
    """Pairs of two runs never make a phrase across what separates them; a query of
    one character finds it where it stands alone, not inside a longer run; a packet
    rewritten or deleted leaves no pair behind."""
    put(store, doc("01CITIES0000", "u1", n=1, goal="東京、京都 猫 と 犬のテスト"))
    me = [("u1", None)]
    assert ids(search(store, "京都", me)) == ["01CITIES0000"]
    assert ids(search(store, "東京都", me)) == []  # 東京 then 京都: no 東京都
    assert ids(search(store, "猫", me)) == ["01CITIES0000"]
    assert ids(search(store, "犬", me)) == []  # inside 犬のテスト
    put(store, doc("01CITIES0000", "u1", n=1, goal="大阪の旅"))
    assert ids(search(store, "京都", me)) == []
    assert ids(search(store, "大阪", me)) == ["01CITIES0000"]
    assert store.delete_packet_as("01CITIES0000", "u1") is True
    assert ids(search(store, "大阪", me)) == []


def test_search_follows_writes_replace_and_delete(store: Store) -> None:
    me = [("u1", None)]
    put(store, doc("01CHANGING00", "u1", goal="migrate the database to postgres"))
    assert ids(search(store, "postgres", me)) == ["01CHANGING00"]
    put(store, doc("01CHANGING00", "u1", goal="migrate the database to sqlite"))
    assert ids(search(store, "postgres", me)) == []
    assert ids(search(store, "sqlite", me)) == ["01CHANGING00"]
    assert store.delete_packet_as("01CHANGING00", "u1") is True
    assert ids(search(store, "sqlite", me)) == []
    assert ids(search(store, "migrate", me)) == []


def test_search_never_shows_what_the_caller_cannot_read(store: Store) -> None:
    """Two users and a team: results, snippets and ranking stay inside readable scopes."""
    store.create_user(user("alice"))
    store.create_user(user("bob"))
    make_team(store, "t1", "core", owner="alice")
    put(store, doc("01ALICEOWN00", "alice", n=1, goal="alice private kestrel notes"))
    put(store, doc("01BOBOWN0000", "bob", n=2, goal="bob private kestrel notes"))
    put(store, doc("01TEAMONLY00", "alice", "t1", n=3, goal="team kestrel plan"))
    alice = [("alice", None), ("alice", "t1")]
    bob = [("bob", None)]  # bob is not in the team
    assert set(ids(search(store, "kestrel", alice))) == {"01ALICEOWN00", "01TEAMONLY00"}
    found = search(store, "kestrel", bob)
    assert ids(found) == ["01BOBOWN0000"]
    assert all("alice" not in h.snippet.text and "team" not in h.snippet.text for h in found)
    assert search(store, "alice", bob) == []
    assert search(store, "team plan", bob) == []
    assert search(store, "kestrel", []) == []
    store.add_member("t1", "bob")
    assert set(ids(search(store, "kestrel", [("bob", None), ("bob", "t1")]))) == {
        "01BOBOWN0000",
        "01TEAMONLY00",
    }
    store.delete_team("t1")
    assert ids(search(store, "kestrel", alice)) == ["01ALICEOWN00"]


def test_search_answers_depend_on_readable_packets_alone(store: Store) -> None:
    """Which packets, their order, score and snippet: nothing outside the caller's scopes.

    The attack this closes: on a shared server, a caller stores probe words in
    their own packets and compares the scores of prefix searches (``qu<c>*``);
    a ranking with statistics over every packet (FTS5's bm25) scores the
    prefix of a word that exists only in another user's packet differently.
    """
    store.create_user(user("alice"))
    store.create_user(user("bob"))
    make_team(store, "t1", "hidden", owner="alice")  # bob is not in it
    make_team(store, "t2", "pair", owner="alice")
    store.add_member("t2", "bob")
    for n, c in enumerate("abeiorx"):
        words = " ".join(f"qu{c}{k}probe" for k in range(n + 1))  # counts differ per probe
        put(
            store, doc(f"01BOBPROBE{c.upper()}0", "bob", n=n, goal=f"probe {words}", tags=["probe"])
        )
    put(store, doc("01BOBLONG000", "bob", n=10, goal="quay", decisions=["quay " * 40 + "quorum"]))
    put(store, doc("01PAIRSHARED", "alice", "t2", n=11, goal="shared quorum quay notes"))
    personal, every = [("bob", None)], [("bob", None), ("bob", "t2")]
    queries = ["qu*", *(f"qu{c}*" for c in "abcdeiorxz"), "quay", "quorum quay", "qu* tag:probe"]

    def answers() -> list[list[SearchHit]]:
        return [search(store, q, scopes) for q in queries for scopes in (personal, every)]

    before = answers()
    assert ids(search(store, "quorum", every)) == ["01PAIRSHARED", "01BOBLONG000"]
    secret = "quixotically quartermaster quorum quay " * 3
    # another user's packets: private, in a team bob is not in, then changed and deleted
    for n in range(12):
        put(store, doc(f"01ALICE{n:05d}", "alice", n=n, goal=secret, decisions=[secret] * n))
        put(store, doc(f"01HIDDEN{n:04d}", "alice", "t1", n=n, goal=f"quay {'quip ' * n}"))
    assert answers() == before
    put(store, doc("01ALICE00003", "alice", n=3, goal="quay quay quay"))
    store.create_user(user("carol"))
    put(store, doc("01CAROL00000", "carol", n=20, goal="quorum " * 200, tags=["probe"]))
    assert answers() == before
    for n in range(0, 12, 2):
        assert store.delete_packet_as(f"01ALICE{n:05d}", "alice") is True
    store.delete_team("t1")
    assert answers() == before


def test_put_many_judges_every_packet_alone_under_the_bound(store: Store) -> None:
    store.create_user(user("u1"))
    store.create_user(user("u2"))
    make_team(store)  # u1 owns t1
    put(store, pkt("01EACH000001", "u1", body=b"old"))
    put(store, pkt("01EACH000002", "u2", body=b"theirs"))
    store.quota = Quota(packets=3, bytes=1 << 20)
    outcomes = store.put_many(
        [
            PutItem(pkt("01EACH000003", "u1", body=b"new"), "k3"),  # created
            PutItem(pkt("01EACH000001", "u1", body=b"newer"), "k1"),  # replaced
            PutItem(pkt("01EACH000002", "u1", body=b"mine?"), "k2"),  # another owner's id
            PutItem(
                pkt("01EACH000001", "u1", "t9", body=b"x"), "k4"
            ),  # a move into no team of theirs
            PutItem(pkt("01EACH000005", "u1", body=b"x"), "k5"),  # the third packet: fits the bound
            PutItem(pkt("01EACH000006", "u1", body=b"x"), "k6"),  # the fourth: past it
        ]
    )
    assert outcomes[:2] == [True, False] and outcomes[4] is True
    assert isinstance(outcomes[2], Conflict) and isinstance(outcomes[5], OverQuota)
    assert isinstance(outcomes[3], NotFound)
    got = store.get_packet("01EACH000001")
    assert got is not None and got.body == b"newer"
    theirs = store.get_packet("01EACH000002")
    assert theirs is not None and theirs.body == b"theirs" and theirs.meta.owner_id == "u2"
    assert store.get_packet("01EACH000006") is None
    assert store.put_many([]) == []


# -- what each user owns, and the per-user bound ---------------------------------


def test_usage_counts_what_a_user_owns_and_the_quota_bounds_it(store: Store) -> None:
    """Usage bytes are what the store says each packet occupies (``Store.occupied``: the
    body on SQLite, every item it makes on DynamoDB), counted by every write and delete."""

    def size(*packets: StoredPacket, sort_key: str | None = None) -> int:
        return sum(store.occupied(p, sort_key or p.meta.created_at) for p in packets)

    store.create_user(user("u1"))
    make_team(store)  # u1 owns t1
    store.add_member("t1", "u2")
    assert store.usage("u1") == Usage() == store.usage("nobody")
    mine, in_team = (
        pkt("01OWNED00001", "u1", body=b"x" * 10),
        pkt("01OWNED00002", "u1", "t1", body=b"y" * 20),
    )
    teammates = pkt("01OTHERS0001", "u2", "t1", body=b"z" * 5)
    put(store, mine)
    put(store, in_team)  # authored in a team: theirs
    put(store, teammates)  # a teammate's: not theirs
    assert store.usage("u1") == Usage(2, size(mine, in_team))
    assert store.usage("u2") == Usage(1, size(teammates))
    assert size(mine) >= 10 and size(in_team) >= 20  # at least the body
    shorter = pkt("01OWNED00001", "u1", body=b"x" * 4)
    put(store, shorter)  # a replacement: its new size
    assert store.usage("u1") == Usage(2, size(shorter, in_team))

    at_bound = pkt("01OWNED00001", "u1", body=b"x" * 50)
    past = pkt("01OWNED00001", "u1", body=b"x" * 90)
    bound = size(in_team, at_bound) + 20  # 40 more bytes of body pass it
    assert size(past) - size(at_bound) == 40  # the same packet but for its body
    store.quota = Quota(packets=2, bytes=bound)
    with pytest.raises(OverQuota) as refused:
        put(store, pkt("01OWNED00003", "u1", body=b"a"))
    assert refused.value.which == "packets"
    assert store.get_packet("01OWNED00003") is None
    assert store.usage("u1") == Usage(2, size(shorter, in_team))
    put(store, at_bound)  # within the bound, a replacement fits
    with pytest.raises(OverQuota) as refused:
        put(store, past)
    assert refused.value.which == "bytes"
    got = store.get_packet("01OWNED00001")
    assert got is not None and got.body == b"x" * 50
    assert store.usage("u1") == Usage(2, size(in_team, at_bound))
    theirs = pkt("01OTHERS0002", "u2", body=b"z" * 60)
    assert size(teammates, theirs) <= bound < size(in_team, at_bound, theirs)
    put(store, theirs)  # the bound is each user's own
    # moving the personal packet into the team keeps it theirs (on DynamoDB a team
    # packet occupies more: its copy in the authors' index)
    store.quota = Quota(packets=2, bytes=1 << 20)
    moved = pkt("01OWNED00001", "u1", "t1", body=b"x" * 50)
    assert store.put_packet(moved, sort_key="k") is False
    assert store.usage("u1") == Usage(2, size(in_team) + size(moved, sort_key="k"))
    # a bound lowered below what is owned: nothing grows, shrinking still works
    store.quota = Quota(packets=1, bytes=10)
    shrunk = pkt("01OWNED00001", "u1", "t1", body=b"x" * 30)
    assert store.put_packet(shrunk, sort_key="k") is False
    assert store.usage("u1") == Usage(2, size(in_team) + size(shrunk, sort_key="k"))
    # deletes, by each path, give the room back
    assert store.delete_packet_as("01OWNED00001", "u1") is True
    assert store.usage("u1") == Usage(1, size(in_team))
    one = pkt("01OWNED00003", "u1", body=b"a")
    store.quota = Quota(packets=2, bytes=size(in_team, one))
    put(store, one)
    assert store.delete_packet("01OWNED00003") is True
    assert store.usage("u1") == Usage(1, size(in_team))
    store.delete_team("t1")
    assert store.usage("u1") == Usage() and store.usage("u2") == Usage(1, size(theirs))


def test_concurrent_puts_never_pass_the_quota_together(store: Store) -> None:
    store.quota = Quota(packets=3, bytes=10_000)
    outcomes: list[str] = []

    def push(n: int) -> None:
        try:
            put(store, pkt(f"01RACE{n:06d}", "u1", body=b"r" * 10))
            outcomes.append("stored")
        except OverQuota:
            outcomes.append("refused")

    threads = [threading.Thread(target=push, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=scaled(60))
    assert sorted(outcomes) == ["refused"] * 5 + ["stored"] * 3
    stored = store.get_packets([m.id for m in store.list_packets(owner_id="u1").items])
    assert len(stored) == 3
    held = sum(store.occupied(p, p.meta.created_at) for p in stored.values())
    assert store.usage("u1") == Usage(3, held)


# -- many puts at once ------------------------------------------------------------------


def test_put_many_judges_each_item_as_put_packet_does(store: Store) -> None:
    store.create_user(user("u1"))
    make_team(store)  # u1 owns t1
    put(store, pkt("01THEIRS0001", "u2", body=b"t" * 5))  # another owner's id
    put(store, pkt("01MINE000001", "u1", body=b"m" * 5))  # u1's, to replace
    store.quota = Quota(packets=3, bytes=1 << 20)
    items = [
        PutItem(pkt("01NEW0000001", "u1", body=b"a" * 10), "k1"),
        PutItem(pkt("01THEIRS0001", "u1", body=b"b" * 10), "k2"),  # Conflict: u2's
        PutItem(pkt("01MINE000001", "u1", body=b"c" * 10), "k3"),  # replaced
        PutItem(pkt("01NEW0000002", "u1", "t1", body=b"d" * 10), "k4"),  # authored in t1
        PutItem(pkt("01NEW0000003", "u1", body=b"e" * 10), "k5"),  # a 4th: past the bound
        PutItem(pkt("01MINE000001", "u1", "t9", body=b"f" * 10), "k6"),  # no such team
    ]
    done = store.put_many(items)
    assert done[0] is True and done[2] is False and done[3] is True
    assert isinstance(done[1], Conflict)
    assert isinstance(done[4], OverQuota) and done[4].which == "packets"
    assert isinstance(done[5], NotFound | Conflict)  # moving into a team u1 is not in
    assert len(done) == len(items)
    # what succeeded is stored, what failed changed nothing
    theirs = store.get_packet("01THEIRS0001")
    assert theirs is not None and theirs.body == b"t" * 5 and theirs.meta.owner_id == "u2"
    mine = store.get_packet("01MINE000001")
    assert mine is not None and mine.body == b"c" * 10 and mine.meta.team_id is None
    assert store.get_packet("01NEW0000003") is None
    got = store.get_packet("01NEW0000002")
    assert got is not None and got.meta.team_id == "t1"
    owned = [(items[0].packet, "k1"), (items[2].packet, "k3"), (items[3].packet, "k4")]
    assert store.usage("u1") == Usage(3, sum(store.occupied(p, k) for p, k in owned))
    assert store.put_many([]) == []
