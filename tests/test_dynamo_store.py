"""What only the DynamoDB store has: real DynamoDB's transaction conflicts, cursors, item shapes.

moto never answers ``TransactionConflict`` (real DynamoDB does when two
transactions touch one item at once, as 20 concurrent accepts of one invite
do); these tests inject it, to show a lost race ends as the contract says
(Gone for the invite, success on retry otherwise), never as an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dynamo_moto import in_process
from streamkit import Stream, assert_consistent

from ltm.store import (
    Gone,
    Invite,
    NotFound,
    PacketMeta,
    Publication,
    StoredPacket,
    Team,
    Token,
    User,
)
from ltm.store.dynamo import TTL_ATTRIBUTE, DynamoStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with in_process("ltm-store") as client:
        yield DynamoStore("ltm-store", client=client)


def conflict_first(
    store: DynamoStore, times: int, *, then: Any = None, code: str = "TransactionConflict"
) -> list[int]:
    """Make the next ``times`` transactions fail as a lost race (or as ``code`` says);
    ``then`` runs at the first."""
    client = store.client
    real = client.transact_write_items
    calls: list[int] = []

    def flaky(**kwargs: Any) -> Any:
        calls.append(len(kwargs["TransactItems"]))
        if len(calls) <= times:
            if then is not None and len(calls) == 1:
                then()
            raise client.exceptions.TransactionCanceledException(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": [{"Code": code} for _ in kwargs["TransactItems"]],
                },
                "TransactWriteItems",
            )
        return real(**kwargs)

    client.transact_write_items = flaky  # type: ignore[method-assign]
    return calls


def setup_team(store: DynamoStore) -> None:
    store.create_user(User("u1", "one", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.create_invite(Invite("c1", "t1", "u1", T0, T0 + timedelta(days=7)))


def test_accept_retries_a_transaction_conflict(store: DynamoStore) -> None:
    setup_team(store)
    calls = conflict_first(store, 2)
    _, member = store.accept_invite(
        "c1", "u9", T0, new_user=(User("u9", "nine", T0), Token("j", "u9", "h9", T0))
    )
    assert member.user_id == "u9" and len(calls) == 3
    assert store.token_owner("h9") is not None


def test_losing_an_accept_race_to_a_conflict_is_gone(store: DynamoStore) -> None:
    """The other accept commits while ours is cancelled: our retry finds the invite used."""
    setup_team(store)
    store.create_user(User("u2", "two", T0))  # the rival: a newcomer (a member spends nothing)

    def rival_wins() -> None:
        store.client.transact_write_items = real  # type: ignore[method-assign]
        store.accept_invite("c1", "u2", T0)

    real = store.client.transact_write_items
    conflict_first(store, 1, then=rival_wins)
    with pytest.raises(Gone):
        store.accept_invite(
            "c1", "u9", T0, new_user=(User("u9", "nine", T0), Token("j", "u9", "h9", T0))
        )
    assert store.get_user("u9") is None and store.token_owner("h9") is None


def test_a_rename_writes_a_copy_a_transaction_held_for_a_moment(store: DynamoStore) -> None:
    """A copy of the name (on a token, a membership) written while a transaction holds
    that item meets TransactionConflict, which the SDK does not retry: the rename, done
    by then, must still write every copy, not end in an error."""
    store.create_user(User("u1", "one", T0), Token("laptop", "u1", "h1", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    client = store.client
    real = client.update_item
    calls: list[str] = []

    def held(**kwargs: Any) -> Any:
        calls.append(kwargs["Key"]["pk"]["S"])
        if len(calls) == 1:
            raise client.exceptions.TransactionConflictException(
                {"Error": {"Code": "TransactionConflictException", "Message": "in flight"}},
                "UpdateItem",
            )
        return real(**kwargs)

    client.update_item = held  # type: ignore[method-assign]
    assert store.rename_user("u1", "uno").display == "uno"
    client.update_item = real  # type: ignore[method-assign]
    assert calls[0] == calls[1]  # the copy met the conflict, and was written again
    found = store.token_owner("h1")
    assert found is not None and found[1].display == "uno"
    assert [m.display for m in store.list_members("t1")] == ["uno"]


def test_create_user_retries_a_conflict(store: DynamoStore) -> None:
    conflict_first(store, 1)
    store.create_user(User("u1", "one", T0), Token("root", "u1", "h1", T0))
    assert store.get_user("u1") is not None


@pytest.mark.parametrize("code", ["ThrottlingError", "ProvisionedThroughputExceeded"])
def test_a_throttled_create_is_retried_not_answered_as_taken(store: DynamoStore, code: str) -> None:
    """DynamoDB cancels a transaction it throttles, with one of these reasons: a create
    tries again, as after a lost race, and never answers that the name is taken."""
    store.create_user(User("u1", "one", T0))
    calls = conflict_first(store, 1, code=code)
    store.create_team(Team("t1", "core", "u1", T0))
    assert store.get_team("core") is not None and len(calls) == 2


@pytest.mark.parametrize("code", ["TransactionConflict", "ThrottlingError"])
def test_a_revoke_cancelled_by_a_race_or_throttling_is_retried(
    store: DynamoStore, code: str
) -> None:
    """Revoking every token of someone who left must not skip one quietly: a revoke
    whose transaction was cancelled for no fault of its items tries again."""
    store.create_user(User("u1", "one", T0), Token("laptop", "u1", "h1", T0))
    calls = conflict_first(store, 1, code=code)
    assert store.revoke_token("laptop", user_id="u1") is True
    assert store.token_owner("h1") is None and len(calls) == 2


@pytest.mark.parametrize("code", ["TransactionConflict", "ThrottlingError"])
def test_a_team_delete_whose_first_transaction_is_cancelled_tries_again(
    store: DynamoStore, code: str
) -> None:
    """A push into the team checks its tombstone in a transaction, so deleting a busy
    team can lose a race: the deletion tries again, and never clears the team's members
    and packets with no tombstone written (its name held for good, the rest undone)."""
    stream = Stream(store)
    store.create_user(User("u1", "one", T0))
    store.create_user(User("u2", "two", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.add_member("t1", "u2")
    meta = PacketMeta("01TEAMPKT000", "2026-01-01T00:00:00Z", "goal", "u2", "t1")
    store.put_packet(StoredPacket(meta, b'{"goal": "goal"}'), sort_key=meta.created_at)
    calls = conflict_first(store, 1, code=code)
    store.delete_team("t1")
    assert calls[0] == 3 and calls[1] == 3  # the team's transaction, twice
    assert store.get_team("core") is None and store.get_packet("01TEAMPKT000") is None
    tombstone = store._get_item({"pk": {"S": "TEAM#t1"}, "sk": {"S": "GONE"}})
    assert tombstone is not None and "done" in tombstone
    store.create_team(Team("t2", "core", "u2", T0))  # the name is free again
    stream.drain()
    assert_consistent(store)


def test_invites_carry_a_ttl_after_their_expiry(store: DynamoStore) -> None:
    setup_team(store)
    item = store.client.get_item(
        TableName="ltm-store", Key={"pk": {"S": "INVITE#c1"}, "sk": {"S": "INVITE"}}
    )["Item"]
    ttl = int(item[TTL_ATTRIBUTE]["N"])
    assert ttl >= int((T0 + timedelta(days=7)).timestamp())  # never before it expires


def test_packet_bodies_stay_out_of_the_listing_index(store: DynamoStore) -> None:
    meta = PacketMeta("01BODYLESS00", "2026-01-01T00:00:00Z", "goal", "u1")
    store.put_packet(StoredPacket(meta, b'{"big": "body"}'), sort_key=meta.created_at)
    items = store.client.query(
        TableName="ltm-store",
        IndexName="gsi1",
        KeyConditionExpression="gsi1pk = :p",
        ExpressionAttributeValues={":p": {"S": "SCOPE#u:u1"}},
    )["Items"]
    assert len(items) == 1 and "body" not in items[0]


@pytest.mark.parametrize("cursor", ["!!!", "W10=", "WyJhIl0=", "WzEsIDJd"])
def test_a_bad_cursor_is_a_value_error(store: DynamoStore, cursor: str) -> None:
    with pytest.raises(ValueError):
        store.list_packets(owner_id="u1", cursor=cursor)


def test_a_late_team_cleanup_spares_a_new_team_of_the_same_name(store: DynamoStore) -> None:
    """delete_team removes the team items first (and leaves its tombstone), then the rest: a
    namesake may appear between."""
    for uid in ("u1", "u2"):
        store.create_user(User(uid, uid, T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.add_member("t1", "u2")
    # The first step of delete_team("t1") happened; a new "core" is made before the cleanup.
    for pk in ("TEAM#t1", "TEAMNAME#core"):
        store.client.delete_item(TableName="ltm-store", Key={"pk": {"S": pk}, "sk": {"S": "TEAM"}})
    tombstone = {"pk": {"S": "TEAM#t1"}, "sk": {"S": "GONE"}, "step": {"N": "0"}}
    store.client.put_item(TableName="ltm-store", Item=tombstone)
    store.create_team(Team("t2", "core", "u1", T0 + timedelta(hours=1)))
    store.add_member("t2", "u2")
    store.delete_team("t1")  # the cleanup
    found = store.team_membership("core", "u2")
    assert found is not None and found[0].id == "t2"
    assert [t.id for t in store.list_teams("u2")] == ["t2"]
    assert store.get_member("t1", "u2") is None


def test_requests_are_held_to_dynamodbs_expression_rules(store: DynamoStore) -> None:
    """The harness refuses unused placeholders, as DynamoDB does (moto accepts unused values)."""
    with pytest.raises(ValueError, match="ExpressionAttributeValues unused"):
        store.client.get_item(
            TableName="ltm-store",
            Key={"pk": {"S": "x"}, "sk": {"S": "y"}},
            ProjectionExpression="#a",
            ExpressionAttributeNames={"#a": "a"},
            ExpressionAttributeValues={":unused": {"S": "v"}},
        )


def test_a_member_with_many_invites_is_removed_with_all_of_them(store: DynamoStore) -> None:
    """However many invites: the membership goes with the departure mark in one transaction,
    the invites in pages after it (``test_dynamo_leave.py``: hundreds of them)."""
    setup_team(store)
    store.create_user(User("u2", "two", T0))
    store.add_member("t1", "u2")
    codes = [f"code-{n}" for n in range(5)]
    for code in codes:
        store.create_invite(Invite(code, "t1", "u2", T0, T0 + timedelta(days=7)))
    calls = conflict_first(store, 0)
    assert store.remove_member("t1", "u2") is True
    # the membership's three items and the departure mark; the invites in a batch after
    assert calls == [3 + 1]
    for code in codes:
        item = store.client.get_item(
            TableName="ltm-store", Key={"pk": {"S": f"INVITE#{code}"}, "sk": {"S": "INVITE"}}
        )
        assert "Item" not in item
    # u2's MADE# items went with them (their mark stays, done, until its TTL); u1's
    # invite stays
    assert team_partition(store, "t1") == ["LEFT#u2", "MADE#u1#c1", "MEMBER#u1", "TEAM"]


def team_partition(store: DynamoStore, team_id: str) -> list[str]:
    """The sort keys of the items under ``TEAM#<team_id>``."""
    items = store.client.query(
        TableName=store.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": f"TEAM#{team_id}"}},
    )["Items"]
    return sorted(i["sk"]["S"] for i in items)


def item_size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it toward its 400 KB limit: every attribute's
    name and value (a set's elements, a number's digits), near enough to see growth."""

    def value(v: dict[str, Any]) -> int:
        ((kind, held),) = v.items()
        if kind in ("SS", "NS", "BS"):
            return sum(len(e) for e in held)
        if kind == "B":
            return len(held)
        return len(str(held))

    return sum(len(name) + value(v) for name, v in item.items())


def test_a_members_invites_do_not_grow_their_membership(store: DynamoStore) -> None:
    """A member who makes many invites: their membership stays the size it was (the
    400 KB item limit would end their invites, then their removal, at a few thousand)."""
    setup_team(store)  # u1 has made one invite
    key = {"pk": {"S": "TEAM#t1"}, "sk": {"S": "MEMBER#u1"}}

    def size() -> int:
        return item_size(store.client.get_item(TableName=store.table, Key=key)["Item"])

    for n in range(2, 11):
        store.create_invite(Invite(f"{n:064x}", "t1", "u1", T0, T0 + timedelta(days=7)))
    before = size()
    for n in range(11, 100):
        store.create_invite(Invite(f"{n:064x}", "t1", "u1", T0, T0 + timedelta(days=7)))
    assert size() == before  # only the count moved, 10 to 99: as many digits
    assert len(store.list_invites("t1")) == 99
    store.create_user(User("u3", "three", T0))
    invite, _ = store.accept_invite(f"{50:064x}", "u3", T0)
    assert invite.created_by == "u1" and store.get_member("t1", "u3") is not None


def test_invites_recorded_on_the_membership_before_still_work(store: DynamoStore) -> None:
    """A table from before the MADE# items: the membership lists its member's invites.
    They are listed and accepted as before, and still die with the membership."""
    store.create_user(User("u1", "one", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.create_user(User("u2", "two", T0))
    store.add_member("t1", "u2")
    old = [f"old-{n}" for n in range(3)]
    for code in old:  # the invite items as the store wrote them before
        store.client.put_item(
            TableName=store.table,
            Item={
                "pk": {"S": f"INVITE#{code}"},
                "sk": {"S": "INVITE"},
                "code_hash": {"S": code},
                "team_id": {"S": "t1"},
                "created_by": {"S": "u2"},
                "created_at": {"S": T0.isoformat()},
                "expires_at": {"S": (T0 + timedelta(days=7)).isoformat()},
                "gsi2pk": {"S": "INVITES#t1"},
                "gsi2sk": {"S": code},
            },
        )
    store.client.update_item(  # and their record on the membership
        TableName=store.table,
        Key={"pk": {"S": "TEAM#t1"}, "sk": {"S": "MEMBER#u2"}},
        UpdateExpression="ADD invites_made :codes, invite_count :n",
        ExpressionAttributeValues={":codes": {"SS": old}, ":n": {"N": str(len(old))}},
    )
    store.create_invite(Invite("new", "t1", "u2", T0, T0 + timedelta(days=7)))
    assert {i.code_hash for i in store.list_invites("t1")} == {*old, "new"}
    store.create_user(User("u3", "three", T0))
    invite, _ = store.accept_invite("old-0", "u3", T0)
    assert invite.created_by == "u2" and store.get_member("t1", "u3") is not None

    assert store.remove_member("t1", "u2") is True
    assert store.list_invites("t1") == []  # the old and the new, with their maker
    store.create_user(User("u4", "four", T0))
    for code in ("old-1", "new"):
        with pytest.raises((Gone, NotFound)):
            store.accept_invite(code, "u4", T0)
    assert store.get_member("t1", "u4") is None


def team_packets(store: DynamoStore, owner: str, ids: list[str]) -> list[StoredPacket]:
    """Packets of team t1 stored by ``owner``, one a id."""
    made = []
    for pid in ids:
        packet = StoredPacket(PacketMeta(pid, "2026-01-01T00:00:00Z", "g", owner, "t1"), b"{}")
        store.put_packet(packet, sort_key=packet.meta.created_at)
        made.append(packet)
    return made


def publish(store: DynamoStore, packet: StoredPacket, by: str) -> Publication:
    secret = f"secret-{packet.meta.id}"
    return store.publish_packet(
        Publication(packet.meta.id, secret, f"hash-{packet.meta.id}", by, T0), seen=packet.meta
    )


def test_a_members_publications_do_not_grow_their_membership(store: DynamoStore) -> None:
    """A member who publishes many of the team's packets: their membership stays the size
    it was (at some 13,000 publications it would reach the 400 KB item limit, and from
    then they could publish nothing more nor be removed from the team)."""
    setup_team(store)
    key = {"pk": {"S": "TEAM#t1"}, "sk": {"S": "MEMBER#u1"}}

    def size() -> int:
        return item_size(store.client.get_item(TableName=store.table, Key=key)["Item"])

    packets = team_packets(store, "u1", [f"01PUB{n:07d}" for n in range(60)])
    for packet in packets[:10]:
        publish(store, packet, "u1")
    before = size()
    for packet in packets[10:]:
        publish(store, packet, "u1")
    assert size() == before  # only the count moved, 11 to 61: as many digits
    store.unpublish_packet(packets[0].meta.id)
    store.create_user(User("u2", "two", T0))
    store.add_member("t1", "u2")
    by_u2 = publish(store, team_packets(store, "u2", ["01PUBBYU2"])[0], "u2")

    assert store.remove_member("t1", "u1") is True
    for packet in packets:
        assert store.publication(packet.meta.id) is None
    # their records went with them; u2's publication and its record stay
    assert store.published_packet(by_u2.secret_hash) is not None
    assert [k for k in team_partition(store, "t1") if k.startswith("PUBLISHED#")] == [
        "PUBLISHED#u2#01PUBBYU2"
    ]


def test_publications_recorded_on_the_membership_before_still_end_with_it(
    store: DynamoStore,
) -> None:
    """A table from before the PUBLISHED# items: the membership lists its member's
    publications, which still end when the member leaves, with those made since."""
    setup_team(store)
    store.create_user(User("u2", "two", T0))
    store.add_member("t1", "u2")
    old, new = team_packets(store, "u2", ["01OLDPUB", "01NEWPUB"])
    old_pub = publish(store, old, "u2")
    # as the store recorded it before: on the membership, with no item of its own
    store.client.delete_item(
        TableName=store.table,
        Key={"pk": {"S": "TEAM#t1"}, "sk": {"S": "PUBLISHED#u2#01OLDPUB"}},
    )
    store.client.update_item(
        TableName=store.table,
        Key={"pk": {"S": "TEAM#t1"}, "sk": {"S": "MEMBER#u2"}},
        UpdateExpression="ADD published_made :ids",
        ExpressionAttributeValues={":ids": {"SS": ["01OLDPUB"]}},
    )
    new_pub = publish(store, new, "u2")
    assert store.remove_member("t1", "u2") is True
    assert store.published_packet(old_pub.secret_hash) is None
    assert store.published_packet(new_pub.secret_hash) is None


def test_an_invite_made_during_a_removal_dies_too(store: DynamoStore) -> None:
    """An invite added between the removal's read and its write: its record is there
    before the membership goes, so the clean-up after the write finds it."""
    setup_team(store)
    store.create_user(User("u2", "two", T0))
    store.add_member("t1", "u2")
    store.create_invite(Invite("early", "t1", "u2", T0, T0 + timedelta(days=7)))
    real = store._read
    raced: list[bool] = []

    def read_then_invite(keys: Any) -> Any:
        items = real(keys)
        if not raced and ("TEAM#t1", "MEMBER#u2") in items:
            raced.append(True)
            store.create_invite(Invite("late", "t1", "u2", T0, T0 + timedelta(days=7)))
        return items

    store._read = read_then_invite  # type: ignore[method-assign]
    assert store.remove_member("t1", "u2") is True
    store._read = real  # type: ignore[method-assign]
    assert raced
    assert {i.created_by for i in store.list_invites("t1")} == {"u1"}
    store.create_user(User("u3", "three", T0))
    for code in ("early", "late"):
        with pytest.raises((Gone, NotFound)):
            store.accept_invite(code, "u3", T0)
    assert store.get_member("t1", "u3") is None


def test_an_invite_from_before_the_record_still_dies_with_its_maker(store: DynamoStore) -> None:
    """Invites stored before they were recorded on the membership: refused once the maker left."""
    setup_team(store)
    store.create_user(User("u2", "two", T0))
    store.add_member("t1", "u2")
    store.client.put_item(  # an invite item as the store wrote it before
        TableName="ltm-store",
        Item={
            "pk": {"S": "INVITE#legacy"},
            "sk": {"S": "INVITE"},
            "code_hash": {"S": "legacy"},
            "team_id": {"S": "t1"},
            "created_by": {"S": "u2"},
            "created_at": {"S": T0.isoformat()},
            "expires_at": {"S": (T0 + timedelta(days=7)).isoformat()},
            "gsi2pk": {"S": "INVITES#t1"},
            "gsi2sk": {"S": "legacy"},
        },
    )
    store.remove_member("t1", "u2")
    store.create_user(User("u3", "three", T0))
    with pytest.raises(Gone):
        store.accept_invite("legacy", "u3", T0)
    with pytest.raises(Gone):
        store.accept_invite("legacy", "u2", T0)  # nor the maker themself
    assert store.get_member("t1", "u3") is None and store.get_member("t1", "u2") is None


def test_tokens_spread_over_index_partitions_and_all_are_listed(store: DynamoStore) -> None:
    """No single index key takes every token's write; a listing of all still finds each,
    those minted before the spread (one shared partition) included."""
    store.create_user(User("u1", "one", T0))
    for n in range(24):
        store.add_token(Token(f"t{n:02d}", "u1", f"{n:064x}", T0 + timedelta(minutes=n)))
    legacy = store.client.get_item(
        TableName=store.table, Key={"pk": {"S": f"TOKEN#{0:064x}"}, "sk": {"S": "TOKEN"}}
    )["Item"]
    store.client.put_item(TableName=store.table, Item={**legacy, "gsi2pk": {"S": "TOKENS"}})
    items = store.client.scan(TableName=store.table)["Items"]
    partitions = {i["gsi2pk"]["S"] for i in items if i["sk"]["S"] == "TOKEN"}
    assert len(partitions) >= 4
    assert [t.label for t in store.list_tokens()] == [f"t{n:02d}" for n in range(24)]


def test_a_team_listing_by_author_reads_that_authors_packets_alone(store: DynamoStore) -> None:
    """A sparse index by author: one Query, whatever the rest of the team holds."""
    for uid in ("u1", "u2"):
        store.create_user(User(uid, uid, T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.add_member("t1", "u2")
    for n in range(120):
        owner = "u2" if n % 40 == 0 else "u1"
        meta = PacketMeta(
            f"01AUTHOR{n:04d}", f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z", "g", owner, "t1"
        )
        store.put_packet(StoredPacket(meta, b"{}"), sort_key=meta.created_at)
    calls: list[int] = []
    real = store.client.query

    def counted(**kwargs: Any) -> Any:
        resp = real(**kwargs)
        calls.append(resp["ScannedCount"])
        return resp

    store.client.query = counted  # type: ignore[method-assign]
    page = store.list_packets(owner_id="x", team_id="t1", author="u2", limit=10)
    assert [m.id for m in page.items] == ["01AUTHOR0080", "01AUTHOR0040", "01AUTHOR0000"]
    assert calls == [3] and page.cursor is None


def test_a_transaction_the_sdk_repeats_is_applied_once(store: DynamoStore) -> None:
    """botocore gives every transaction a ``ClientRequestToken`` and keeps it across its retries,
    so when an applied transaction answers after the client's read timeout, the retry is a no-op
    on DynamoDB: creating a team then still succeeds, never "name taken" by itself."""
    sent: list[dict[str, Any]] = []
    store.client.meta.events.register(
        "before-call.dynamodb.TransactWriteItems",
        lambda params, **_: sent.append(json.loads(params["body"])),
    )
    store.create_user(User("u1", "one", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    body = sent[-1]
    assert body["ClientRequestToken"]
    # The SDK's retry: the same request, the same token, after it was applied.
    store.client.transact_write_items(
        TransactItems=body["TransactItems"], ClientRequestToken=body["ClientRequestToken"]
    )
    assert store.get_team("core") == Team("t1", "core", "u1", T0)
    with pytest.raises(store.client.exceptions.TransactionCanceledException):
        store.client.transact_write_items(TransactItems=body["TransactItems"])


def test_a_cancelled_transaction_leaves_items_and_stream_as_they_were(store: DynamoStore) -> None:
    """The tests' moto keeps a transaction's backup small (the items it names, the stream's
    length); a cancelled one must still undo every action before the failed one, the
    stream records they wrote included, as DynamoDB's all-or-nothing does."""
    table = store.table
    key = {"pk": {"S": "X#1"}, "sk": {"S": "A"}}
    store.client.put_item(TableName=table, Item={**key, "n": {"N": "1"}})
    stream = Stream(store)
    assert stream.take()  # the put's record: the stream is on
    before_items = store.client.scan(TableName=table)["Items"]
    with pytest.raises(store.client.exceptions.TransactionCanceledException):
        store.client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"S": "X#2"}, "sk": {"S": "B"}}}},
                {
                    "Update": {
                        "TableName": table,
                        "Key": key,
                        "UpdateExpression": "SET n = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}},
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": {"pk": {"S": "X#3"}, "sk": {"S": "C"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert store.client.scan(TableName=table)["Items"] == before_items
    assert stream.take() == []


def test_an_unpublish_that_cannot_commit_says_so(store: DynamoStore) -> None:
    """The service answers an unpublish as done, the URL dead at once: a store that could
    not end the publication (its transaction throttled at every try) must raise, never
    return as though there was nothing to end while the URL still serves the packet."""
    from ltm.store import Conflict

    setup_team(store)
    (packet,) = team_packets(store, "u1", ["01UNPUBLISH0"])
    publish(store, packet, "u1")
    conflict_first(store, 100, code="ThrottlingError")
    with pytest.raises(Conflict):
        store.unpublish_packet(packet.meta.id)
    assert store.published_packet(f"hash-{packet.meta.id}") is not None


def test_a_device_token_throttled_past_every_retry_is_handed_out_later(
    store: DynamoStore,
) -> None:
    """The redeeming transaction cancelled by throttling every time: the device is told
    to try again (503; ``ltm auth`` polls on), not that its code was used, and the grant
    stays approved for its next poll."""
    from ltm.service import device, tokens

    settings = device.DeviceSettings()
    alice, _ = tokens.issue(store, "alice", when=T0)
    auth = device.authorize(
        store, settings, {"client_id": ["ltm-cli"]}, base_url="https://x", client_ip="192.0.2.1",
        when=T0,
    )  # fmt: skip
    device.decide(store, settings, alice, auth.user_code, approve=True, when=T0)
    form = {
        "grant_type": [device.GRANT_TYPE],
        "device_code": [auth.device_code],
        "client_id": ["ltm-cli"],
    }
    real = store.client.transact_write_items
    conflict_first(store, 10**6, code="ThrottlingError")
    with pytest.raises(device.OAuthError) as refused:
        device.token(store, settings, form, when=T0 + timedelta(seconds=5))
    assert (refused.value.code, refused.value.status) == ("temporarily_unavailable", 503)
    grant = store.get_device_grant(device.hash_code(auth.device_code))
    assert grant is not None and grant.status == "approved"
    store.client.transact_write_items = real  # type: ignore[method-assign]
    issued = device.token(store, settings, form, when=T0 + timedelta(seconds=10))
    assert tokens.authenticate(store, f"Bearer {issued.access_token}").id == alice.id
