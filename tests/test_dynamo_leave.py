"""A member's removal on DynamoDB: one bounded request, then a resumable clean-up.

The request removes the membership and writes the departure mark (``TEAM#<id>`` /
``LEFT#<user>``) in one transaction and runs a few pages of the clean-up; the stream
consumer runs the rest, step by step, as it does a deleted team's fan-out. From the
request's answer on, the member has no access, their invites are refused and their
public links are dead; once the stream is drained, nothing of theirs is left. Crashes
(a child process killed between two DynamoDB calls) and redelivered records end the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dynamo_moto import in_process, moto_server
from streamkit import Stream, assert_consistent, crashing, scan, served_store

from ltm.store import (
    Conflict,
    Gone,
    Invite,
    NotFound,
    PacketMeta,
    Publication,
    StoredPacket,
    Team,
    User,
)
from ltm.store.dynamo import TTL_ATTRIBUTE, DynamoStore
from ltm.store.dynamo_repair import repair_index
from ltm.store.dynamo_stream import handle

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WEEK = T0 + timedelta(days=7)


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with in_process("ltm-leave") as client:
        yield DynamoStore("ltm-leave", client=client)


def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    from ltm.store import dynamo_fanout

    monkeypatch.setattr(dynamo_fanout, "INLINE_PAGES", 2)
    monkeypatch.setattr(dynamo_fanout, "STEP_PAGES", 5)
    monkeypatch.setattr(dynamo_fanout, "PACKETS_PER_PAGE", 10)


def team(store: DynamoStore) -> None:
    for uid in ("u1", "u2", "u3"):
        store.create_user(User(uid, uid, T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.add_member("t1", "u2")


def published(store: DynamoStore, by: str, pid: str) -> Publication:
    """A team packet by ``by``, published by them."""
    meta = PacketMeta(pid, "2026-01-01T00:00:00Z", f"goal {pid}", by, "t1")
    store.put_packet(StoredPacket(meta, b"{}"), sort_key=meta.created_at)
    made = Publication(pid, f"secret-{pid}", f"hash-{pid}", by, T0)
    return store.publish_packet(made, seen=meta)


def invite(store: DynamoStore, by: str, code: str) -> None:
    store.create_invite(Invite(code, "t1", by, T0, WEEK))


def legacy(store: DynamoStore, user: str, pids: list[str], codes: list[str]) -> None:
    """Publications and invites recorded as the store did before their own items: in
    string sets on the membership (the invite and publication items are as ever)."""
    for pid in pids:
        store.client.delete_item(
            TableName=store.table,
            Key={"pk": {"S": "TEAM#t1"}, "sk": {"S": f"PUBLISHED#{user}#{pid}"}},
        )
    for code in codes:
        store.client.delete_item(
            TableName=store.table,
            Key={"pk": {"S": "TEAM#t1"}, "sk": {"S": f"MADE#{user}#{code}"}},
        )
    store.client.update_item(
        TableName=store.table,
        Key={"pk": {"S": "TEAM#t1"}, "sk": {"S": f"MEMBER#{user}"}},
        UpdateExpression="ADD published_made :p, invites_made :c",
        ExpressionAttributeValues={":p": {"SS": pids}, ":c": {"SS": codes}},
    )


def theirs(store: DynamoStore, user: str) -> list[tuple[str, str]]:
    """Everything of ``user``'s that a removal must end: their publications, invites, and
    the records of both in the team's partition."""
    made = {"S": user}
    records = (f"PUBLISHED#{user}#", f"MADE#{user}#")
    keys = [(i["pk"]["S"], i["sk"]["S"], i.get("created_by")) for i in scan(store)]
    return [
        (pk, sk)
        for pk, sk, by in keys
        if (pk.startswith(("PUBLIC#", "INVITE#")) and by == made)
        or (pk == "TEAM#t1" and sk.startswith(records))
    ]


def mark(store: DynamoStore, user: str) -> dict[str, Any]:
    key = {"pk": {"S": "TEAM#t1"}, "sk": {"S": f"LEFT#{user}"}}
    return dict(store.client.get_item(TableName=store.table, Key=key, ConsistentRead=True)["Item"])


@pytest.mark.parametrize("twice", [False, True])
def test_a_member_with_hundreds_of_publications_and_invites_is_removed_in_a_bounded_request(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch, twice: bool
) -> None:
    small_pages(monkeypatch)
    stream = Stream(store)
    team(store)
    pubs = [published(store, "u2", f"01LEAVE{n:06d}") for n in range(300)]
    for n in range(300):
        invite(store, "u2", f"code-{n:04d}")
    legacy(store, "u2", [p.packet_id for p in pubs[:30]], [f"code-{n:04d}" for n in range(30)])
    kept = published(store, "u1", "01OWNERS0000")
    invite(store, "u1", "owners-code")
    stream.drain()

    calls: list[str] = []
    store.client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )
    assert store.remove_member("t1", "u2") is True
    # The membership and the mark in one transaction, then two pages inline and no more.
    assert len(calls) <= 16, calls
    calls.clear()

    # From the answer on: no access, no new invite or publication, no old one usable.
    assert store.get_member("t1", "u2") is None and store.list_teams("u2") == []
    with pytest.raises(NotFound):
        invite(store, "u2", "late")
    with pytest.raises(NotFound):
        store.publish_packet(
            Publication("01LEAVE000299", "s", "h", "u2", T0),
            seen=PacketMeta(
                "01LEAVE000299", "2026-01-01T00:00:00Z", "goal 01LEAVE000299", "u2", "t1"
            ),
        )
    for code in ("code-0000", "code-0299"):
        with pytest.raises(Gone):
            store.accept_invite(code, "u3", T0)
    assert store.get_member("t1", "u3") is None
    for pub in (pubs[0], pubs[299]):
        assert store.published_packet(pub.secret_hash) is None
        assert store.publication(pub.packet_id) is None
    assert theirs(store, "u2") != []  # not yet: the consumer's part
    # Nobody rejoins a team while their departure is still being cleaned up: what the
    # clean-up finds must all be from before.
    with pytest.raises(Conflict):
        store.add_member("t1", "u2")
    assert store.published_packet(kept.secret_hash) is not None

    stream.drain(twice=twice)
    assert theirs(store, "u2") == []
    assert store.published_packet(kept.secret_hash) is not None
    assert [i.code_hash for i in store.list_invites("t1")] == ["owners-code"]
    done = mark(store, "u2")
    assert done["done"] == {"BOOL": True} and TTL_ATTRIBUTE in done
    assert "published_made" not in done and "invites_made" not in done
    assert_consistent(store)
    # Done: they may be invited back, and what they do then is theirs to keep.
    store.add_member("t1", "u2")
    again = published(store, "u2", "01AGAIN00000")
    assert store.published_packet(again.secret_hash) is not None


@pytest.mark.parametrize("job", ["removal", "team delete"])
def test_a_throttled_clean_up_page_leaves_the_answer_and_the_rest_to_the_stream(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    """The membership (or the team) is gone once the first transaction lands; the pages
    after it are the stream consumer's too, so their failure is not the request's."""
    from botocore.exceptions import ClientError

    small_pages(monkeypatch)
    stream = Stream(store)
    team(store)
    pubs = [published(store, "u2", f"01THROTTLE{n:03d}") for n in range(30)]
    stream.drain()
    real = store.client.query
    throttled = {"query": 0}

    def query(**kwargs: Any) -> Any:
        if kwargs.get("Limit") is not None and throttled["query"] == 0:
            throttled["query"] += 1
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
            raise ClientError({"Error": error}, "Query")
        return real(**kwargs)

    monkeypatch.setattr(store.client, "query", query)
    if job == "removal":
        assert store.remove_member("t1", "u2") is True
        assert store.get_member("t1", "u2") is None
    else:
        store.delete_team("t1")
        assert store.get_team("core") is None
    assert throttled["query"] == 1
    monkeypatch.setattr(store.client, "query", real)
    stream.drain()
    for pub in pubs:
        assert store.published_packet(pub.secret_hash) is None
    assert theirs(store, "u2") == []
    assert_consistent(store)


def test_records_redelivered_after_a_rejoin_change_nothing(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record of a finished departure, delivered again (or late, after a second
    departure began): each is a no-op, so a rejoined member keeps what they made since."""
    small_pages(monkeypatch)
    stream = Stream(store)
    team(store)
    for n in range(40):
        published(store, "u2", f"01FIRST{n:05d}")
        invite(store, "u2", f"first-{n}")
    stream.drain()
    store.remove_member("t1", "u2")
    records = stream.take()
    assert handle(store, records) == []
    stream.drain()
    assert theirs(store, "u2") == []
    store.add_member("t1", "u2")
    again = published(store, "u2", "01SECOND0000")
    invite(store, "u2", "second")
    assert handle(store, records) == []  # the first departure's records, once more
    assert store.published_packet(again.secret_hash) is not None
    assert [i.code_hash for i in store.list_invites("t1")] == ["second"]
    # A second departure: its mark's step moves on, so the first's records stay no-ops.
    store.remove_member("t1", "u2")
    assert handle(store, records) == []
    stream.drain(twice=True, shuffle_keys=True)
    assert theirs(store, "u2") == []
    assert_consistent(store)


def test_repair_finishes_a_departure_the_stream_never_ran(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's records lost (past their retention, or the consumer disabled): the
    repair tool finds the unfinished mark and finishes it."""
    small_pages(monkeypatch)
    team(store)
    for n in range(50):
        published(store, "u2", f"01REPAIR{n:04d}")
        invite(store, "u2", f"repair-{n}")
    store.remove_member("t1", "u2")
    assert theirs(store, "u2") != [] and "done" not in mark(store, "u2")
    done = repair_index(store, say=lambda _: None)
    assert done["departures resumed"] == 1
    assert theirs(store, "u2") == [] and mark(store, "u2")["done"] == {"BOOL": True}


def test_rejoining_during_the_clean_up_is_a_409_that_says_why(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the service, as the routes call it: a kicked member given a new invite at
    once is told to try again in a minute, and can once the clean-up ran."""
    from ltm.service import invites, teams, tokens
    from ltm.service.errors import ServiceError

    small_pages(monkeypatch)
    stream = Stream(store)
    owner, _ = tokens.issue(store, "owner")
    member, _ = tokens.issue(store, "member")
    teams.create(store, owner, "core")
    made = invites.create(store, owner, "core", base_url="https://ltm.example")
    invites.accept(store, member, made.code)
    for _ in range(30):
        invites.create(store, member, "core", base_url="https://ltm.example")
    teams.kick(store, owner, "core", member.id)
    again = invites.create(store, owner, "core", base_url="https://ltm.example")
    with pytest.raises(ServiceError) as refused:
        invites.accept(store, member, again.code)
    assert refused.value.status == 409 and "try again in a minute" in refused.value.message
    stream.drain()
    invites.accept(store, member, again.code)
    assert [m.user_id for m in teams.members(store, owner, "core")] == [owner.id, member.id]


# -- crashes: a child process killed between two DynamoDB calls ------------------

_CHILD = """
from ltm.store import dynamo_fanout
from ltm.store.dynamo import DynamoStore
dynamo_fanout.PACKETS_PER_PAGE = 2
dynamo_fanout.INLINE_PAGES = 100  # every page inline: a crash point in each
print(DynamoStore(table, client=client).remove_member("t1", "u2"))
"""


def test_a_crash_between_any_two_calls_of_a_removal_ends_consistent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The member rejoins and makes more between the runs: each run is a new departure,
    each crash point ends with nothing of theirs once the stream is drained."""
    from ltm.store import dynamo_fanout

    monkeypatch.setattr(dynamo_fanout, "PACKETS_PER_PAGE", 2)
    with moto_server() as url:
        store = served_store(url)
        stream = Stream(store)
        team(store)
        kept = published(store, "u1", "01OWNERS0000")
        die_after = 1
        while True:
            if store.get_member("t1", "u2") is None:
                store.add_member("t1", "u2")
            pubs = [published(store, "u2", f"01CRASH{die_after:03d}{n}") for n in range(3)]
            for n in range(3):
                invite(store, "u2", f"crash-{die_after}-{n}")
            legacy(store, "u2", [pubs[0].packet_id], [f"crash-{die_after}-0"])
            printed = crashing(_CHILD, url, store.table, die_after)
            stream.drain()
            assert_consistent(store)
            if store.get_member("t1", "u2") is None:
                assert theirs(store, "u2") == [], die_after  # the consumer finished it
            assert store.published_packet(kept.secret_hash) is not None
            if printed is not None:
                assert printed.strip() == "True"
                break
            die_after += 1
        assert die_after > 5
