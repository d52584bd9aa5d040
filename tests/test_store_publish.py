"""The publishing part of the Store contract (and a team's invites), on every store.

Runs against every store in conftest's ``STORES``: publishing is idempotent,
a publication ends at once when the packet is unpublished or deleted by any
path (its team's deletion too), survives a re-push of the same id, and never
follows a packet id to a new packet.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from ltm.store import Invite, NotFound, PacketMeta, Publication, Store, StoredPacket, Team, User

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pkt(pid: str, owner: str, team: str | None = None, body: bytes = b"{}") -> StoredPacket:
    return StoredPacket(PacketMeta(pid, "2026-01-01T00:00:00Z", f"goal {pid}", owner, team), body)


def put(store: Store, p: StoredPacket) -> None:
    store.put_packet(p, sort_key=p.meta.created_at)


def pub(pid: str, secret: str, by: str = "u1") -> Publication:
    digest = hashlib.sha256(secret.encode()).hexdigest()
    return Publication(pid, secret, digest, by, T0)


def test_publish_read_and_unpublish(store: Store) -> None:
    p = pkt("01PUBLISHED0", "u1", body=b'{"goal":"x"}')
    put(store, p)
    first = pub(p.meta.id, "secret-one")
    assert store.publish_packet(first, seen=p.meta) == first
    # Publishing again keeps the first secret: the same URL.
    assert store.publish_packet(pub(p.meta.id, "secret-two"), seen=p.meta) == first
    assert store.publication(p.meta.id) == first
    found = store.published_packet(first.secret_hash)
    assert found is not None and found.body == b'{"goal":"x"}' and found.meta == p.meta
    assert store.published_packet(pub(p.meta.id, "secret-two").secret_hash) is None

    assert store.unpublish_packet(p.meta.id) is True
    assert store.published_packet(first.secret_hash) is None
    assert store.publication(p.meta.id) is None
    assert store.unpublish_packet(p.meta.id) is False
    # Published again: a new secret, the old URL stays dead.
    again = pub(p.meta.id, "secret-three")
    assert store.publish_packet(again, seen=p.meta) == again
    assert store.published_packet(first.secret_hash) is None
    assert store.published_packet(again.secret_hash) is not None


def test_the_publication_of_a_packet_as_read(store: Store) -> None:
    """``publication_of`` a packet the store just read answers as ``publication`` does."""
    p = pkt("01PUBLISHOF0", "u1")
    put(store, p)

    def of() -> Publication | None:
        found = store.get_packet(p.meta.id)
        assert found is not None
        return store.publication_of(found)

    assert of() is None
    first = store.publish_packet(pub(p.meta.id, "secret-of"), seen=p.meta)
    assert of() == first == store.publication(p.meta.id)
    put(store, pkt(p.meta.id, "u1", body=b"again"))  # a re-push keeps it
    assert of() == first
    store.unpublish_packet(p.meta.id)
    assert of() is None


def test_publish_needs_the_packet_as_seen(store: Store) -> None:
    with pytest.raises(NotFound):
        store.publish_packet(pub("01MISSING000", "s"), seen=pkt("01MISSING000", "u1").meta)
    p = pkt("01SEENAS0000", "u1")
    put(store, p)
    with pytest.raises(NotFound):  # someone else's view of it
        store.publish_packet(pub(p.meta.id, "s"), seen=pkt(p.meta.id, "u2").meta)
    with pytest.raises(NotFound):  # another scope
        store.publish_packet(pub(p.meta.id, "s"), seen=pkt(p.meta.id, "u1", "t1").meta)
    assert store.publication(p.meta.id) is None


def test_a_repush_keeps_the_publication(store: Store) -> None:
    p = pkt("01REPUSHED00", "u1", body=b"one")
    put(store, p)
    first = store.publish_packet(pub(p.meta.id, "s1"), seen=p.meta)
    put(store, pkt(p.meta.id, "u1", body=b"two"))
    found = store.published_packet(first.secret_hash)
    assert found is not None and found.body == b"two"
    assert store.publication(p.meta.id) == first


def test_a_move_into_a_team_ends_the_publication(store: Store) -> None:
    store.create_user(User("u1", "one", T0))
    store.create_team(Team("t1", "crew", "u1", T0))
    p = pkt("01MOVEDPUB00", "u1")
    put(store, p)
    first = store.publish_packet(pub(p.meta.id, "s1"), seen=p.meta)
    moved = pkt(p.meta.id, "u1", "t1")
    store.put_packet(moved, sort_key=moved.meta.created_at, seen=p.meta)
    assert store.get_packet(p.meta.id).meta.team_id == "t1"
    assert store.published_packet(first.secret_hash) is None
    assert store.publication(p.meta.id) is None


@pytest.mark.parametrize("how", ["delete_packet", "delete_packet_as"])
def test_deleting_the_packet_ends_the_publication(store: Store, how: str) -> None:
    p = pkt("01DELETED000", "u1")
    put(store, p)
    first = store.publish_packet(pub(p.meta.id, "s1"), seen=p.meta)
    if how == "delete_packet":
        assert store.delete_packet(p.meta.id)
    else:
        assert store.delete_packet_as(p.meta.id, "u1", seen=p.meta)
    assert store.published_packet(first.secret_hash) is None
    assert store.publication(p.meta.id) is None
    # The same id pushed again (a new packet) is not published by the old URL.
    put(store, pkt(p.meta.id, "u1", body=b"new"))
    assert store.published_packet(first.secret_hash) is None
    assert store.publication(p.meta.id) is None


def test_deleting_the_team_ends_its_publications(store: Store) -> None:
    store.create_user(User("u1", "one", T0))
    store.create_team(Team("t1", "team-one", "u1", T0))
    p = pkt("01TEAMPUB000", "u1", "t1")
    put(store, p)
    first = store.publish_packet(pub(p.meta.id, "s1"), seen=p.meta)
    assert store.published_packet(first.secret_hash) is not None
    store.delete_team("t1")
    assert store.published_packet(first.secret_hash) is None


def test_a_members_publications_end_with_their_membership(store: Store) -> None:
    """As their invites do: a former member keeps no public window onto the team."""
    for uid in ("u1", "u2", "u3"):
        store.create_user(User(uid, uid, T0))
    store.create_team(Team("t1", "team-one", "u1", T0))
    store.add_member("t1", "u2")
    store.add_member("t1", "u3")
    theirs, owners, others = (pkt(f"01MEMBERPUB{n}", "u2", "t1") for n in range(3))
    personal = pkt("01MEMBERPUB9", "u2")
    for p in (theirs, owners, others, personal):
        put(store, p)
    by_them = store.publish_packet(pub(theirs.meta.id, "s-them", by="u2"), seen=theirs.meta)
    by_owner = store.publish_packet(pub(owners.meta.id, "s-owner", by="u1"), seen=owners.meta)
    by_u3 = store.publish_packet(pub(others.meta.id, "s-u3", by="u3"), seen=others.meta)
    own = store.publish_packet(pub(personal.meta.id, "s-own", by="u2"), seen=personal.meta)

    assert store.remove_member("t1", "u2") is True  # kicked or left: the same store call
    assert store.published_packet(by_them.secret_hash) is None
    assert store.publication(theirs.meta.id) is None
    # Others' publications of the team's packets, and the member's personal one, stay.
    for kept in (by_owner, by_u3, own):
        assert store.published_packet(kept.secret_hash) is not None
    # A former member cannot publish a team packet any more (checked with the write).
    with pytest.raises(NotFound):
        store.publish_packet(pub(theirs.meta.id, "s-again", by="u2"), seen=theirs.meta)
    assert store.publication(theirs.meta.id) is None


def test_list_invites_of_a_team(store: Store) -> None:
    store.create_user(User("u1", "one", T0))
    store.create_user(User("u2", "two", T0))
    store.create_team(Team("t1", "team-one", "u1", T0))
    store.create_team(Team("t2", "team-two", "u1", T0))
    made = [
        Invite(f"{n:064x}", "t1", "u1", T0 + timedelta(minutes=n), T0 + timedelta(days=7))
        for n in range(3)
    ]
    for invite in made:
        store.create_invite(invite)
    store.create_invite(Invite("f" * 64, "t2", "u1", T0, T0 + timedelta(days=7)))
    assert store.list_invites("t1") == made
    store.accept_invite(made[1].code_hash, "u2", T0 + timedelta(hours=1))
    listed = store.list_invites("t1")
    assert [i.code_hash for i in listed] == [i.code_hash for i in made]
    assert listed[1].used_by == "u2" and listed[0].used_at is None
    assert store.list_invites("t-none") == []
