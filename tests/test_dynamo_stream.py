"""The search index derived from the table's stream, under races, crashes and redelivery.

Each race is forced at a named point (a store method wrapped so a second
request runs there); each crash kills a child process between two DynamoDB
calls, as a Lambda timeout would. Then the stream is drained through the
consumer and the final state checked (``streamkit.assert_consistent``): every
packet readable and found by search, usage equal to a recount, nothing orphaned.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from dynamo_moto import in_process, moto_server
from streamkit import Stream, assert_consistent, crashing, scan, served_store

from ltm.search import parse
from ltm.store import NotFound, PacketMeta, Quota, Share, StoredPacket, Team, Usage, User
from ltm.store.dynamo import DynamoStore, stored_size
from ltm.store.dynamo_repair import repair_usage
from ltm.store.dynamo_stream import handle

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with in_process("ltm-stream") as client:
        yield DynamoStore("ltm-stream", client=client)


def packet(
    pid: str, owner: str, team: str | None = None, *, words: str, n: int = 0
) -> StoredPacket:
    body = json.dumps({"id": pid, "goal": words, "next_step": "continue"}).encode()
    created = f"2026-01-01T00:00:{n:02d}Z"
    return StoredPacket(PacketMeta(pid, created, words, owner, team), body)


def put(store: DynamoStore, p: StoredPacket) -> bool:
    return store.put_packet(p, sort_key=p.meta.created_at)


def found(store: DynamoStore, text: str, scopes: list[tuple[str, str | None]]) -> list[str]:
    return [h.meta.id for h in store.search(parse(text), scopes=scopes)]


ME = [("u1", None)]


def test_a_push_is_found_at_once_and_after_the_consumer_ran(store: DynamoStore) -> None:
    stream = Stream(store)
    put(store, packet("01FRESH00000", "u1", words="kestrel migration"))
    assert found(store, "kestrel", ME) == ["01FRESH00000"]  # before the consumer ran
    assert stream.drain() > 0
    assert found(store, "kestrel migration", ME) == ["01FRESH00000"]
    assert_consistent(store)
    put(store, packet("01FRESH00000", "u1", words="osprey rollout"))
    assert found(store, "osprey", ME) == ["01FRESH00000"]
    stream.drain()
    assert found(store, "osprey", ME) == ["01FRESH00000"] and found(store, "kestrel", ME) == []
    assert store.delete_packet("01FRESH00000") is True
    stream.drain()
    assert found(store, "osprey", ME) == []
    assert_consistent(store)


@pytest.mark.parametrize("twice", [False, True])
def test_redelivery_and_any_order_across_keys_end_in_the_same_index(
    store: DynamoStore, twice: bool
) -> None:
    stream = Stream(store)
    for n in range(12):
        put(store, packet(f"01MANY{n:06d}", "u1", words=f"heron batch{n % 3} word{n}", n=n))
    for n in range(0, 12, 3):
        put(store, packet(f"01MANY{n:06d}", "u1", words=f"heron changed{n}", n=n))
    store.delete_packet("01MANY000001")
    stream.drain(twice=twice, shuffle_keys=True)
    assert_consistent(store)
    assert len(found(store, "heron", ME)) == 11
    assert found(store, "changed3", ME) == ["01MANY000003"] and found(store, "word3", ME) == []


def test_a_failed_record_is_reported_and_the_retry_completes(store: DynamoStore) -> None:
    """A throttled index write: the packet is stored (201) and stays found; the retry ends it."""
    stream = Stream(store)
    stream.take()  # the new table's record of its repairs
    put(store, packet("01THROTTLE00", "u1", words="plover throttled"))
    records = stream.take()
    real = store.client.batch_write_item
    calls = {"n": 0}

    def throttled(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise store.client.exceptions.ProvisionedThroughputExceededException(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "x"}},
                "BatchWriteItem",
            )
        return real(**kwargs)

    store.client.batch_write_item = throttled  # type: ignore[method-assign]
    failed = handle(store, records)
    assert failed == [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]
    assert found(store, "plover", ME) == ["01THROTTLE00"]  # still pending, still found
    assert handle(store, records) == []
    assert found(store, "plover throttled", ME) == ["01THROTTLE00"]
    assert_consistent(store)


def test_every_word_pair_is_found_whatever_the_age(store: DynamoStore) -> None:
    """A rare word with a common one finds the old packet (no cap by age)."""
    stream = Stream(store)
    put(store, packet("01OLDEST0000", "u1", words="oauth svc02980 rotation", n=0))
    for n in range(1, 60):
        put(store, packet(f"01NEWER{n:05d}", "u1", words=f"oauth refresh svc{n:05d}", n=n % 60))
    stream.drain()
    assert found(store, "oauth svc02980", ME) == ["01OLDEST0000"]
    assert found(store, "svc02980", ME) == ["01OLDEST0000"]
    assert len(found(store, "oauth", ME)) == 20


def _race(store: DynamoStore, method: str, at: int, then: Any) -> None:
    """Run ``then`` just before the ``at``-th call of the client's ``method`` goes out."""
    real = getattr(store.client, method)
    calls = {"n": 0}

    def wrapped(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == at:
            then()
        return real(**kwargs)

    setattr(store.client, method, wrapped)


def test_two_pushes_of_one_id_racing_leave_the_last_text_found(store: DynamoStore) -> None:
    stream = Stream(store)
    put(store, packet("01RACING0000", "u1", words="first text alpha"))
    # The second push lands between the first's read and its write.
    _race(
        store,
        "transact_write_items",
        1,
        lambda: put(store, packet("01RACING0000", "u1", words="second text beta")),
    )
    put(store, packet("01RACING0000", "u1", words="third text gamma"))
    stream.drain()
    assert found(store, "gamma", ME) == ["01RACING0000"]
    assert found(store, "alpha", ME) == [] and found(store, "beta", ME) == []
    assert_consistent(store)


def test_a_delete_racing_a_repush_leaves_no_unsearchable_packet(store: DynamoStore) -> None:
    stream = Stream(store)
    put(store, packet("01DELRACE000", "u1", words="curlew original"))
    _race(store, "transact_write_items", 1, lambda: store.delete_packet("01DELRACE000"))
    put(store, packet("01DELRACE000", "u1", words="curlew again"))
    stream.drain()
    assert found(store, "curlew", ME) == ["01DELRACE000"]
    assert_consistent(store)


def test_a_push_racing_its_teams_delete_is_refused(store: DynamoStore) -> None:
    """The team's tombstone is checked in the push's own transaction."""
    stream = Stream(store)
    store.create_user(User("u1", "one", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    put(store, packet("01TEAMFIRST0", "u1", "t1", words="godwit"))
    _race(store, "transact_write_items", 1, lambda: store.delete_team("t1"))
    with pytest.raises(NotFound):
        put(store, packet("01TEAMLATE00", "u1", "t1", words="godwit late"))
    stream.drain()
    assert store.get_packet("01TEAMLATE00") is None and store.get_packet("01TEAMFIRST0") is None
    assert_consistent(store)


def test_usage_is_exact_across_replacements_and_quota(store: DynamoStore) -> None:
    store.quota = Quota(packets=2, bytes=10_000)
    stream = Stream(store)
    put(store, packet("01USAGE00001", "u1", words="a b c"))
    put(store, packet("01USAGE00001", "u1", words="a much longer text"))
    put(store, packet("01USAGE00002", "u1", words="other"))
    from ltm.store import OverQuota

    with pytest.raises(OverQuota):
        put(store, packet("01USAGE00003", "u1", words="over"))
    stream.drain()
    assert store.usage("u1").packets == 2
    assert_consistent(store)


def rich(pid: str, owner: str, team: str | None = None, *, words: str) -> StoredPacket:
    """A packet with tags and a project: every kind of item a packet makes."""
    data = {
        "id": pid,
        "goal": words,
        "next_step": "continue the rollout",
        "tags": ["infra", "aws"],
        "project": {"name": "ltm"},
        "decisions": [{"what": f"{words} decided", "why": "measured"}],
    }
    meta = PacketMeta(pid, "2026-01-01T00:00:00Z", words, owner, team, "ltm")
    return StoredPacket(meta, json.dumps(data).encode())


def held_by(store: DynamoStore, ids: set[str]) -> int:
    """The bytes the table holds for these packets, item by item: each packet's own item
    with its index projections, and its postings and facets."""
    total = 0
    for item in scan(store):
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        if (pk.removeprefix("PKT#") in ids and sk == "PKT") or (
            pk.startswith(("T#", "FACET#")) and sk.rsplit("#", 1)[-1] in ids
        ):
            total += stored_size(item)
    return total


def test_usage_counts_every_item_a_packet_makes(store: DynamoStore) -> None:
    """A user's bytes are what their packets occupy in the table once indexed (their
    items, index copies, search postings and facets, each with DynamoDB's overhead),
    not only their bodies; a recount agrees, and deleting gives all of it back."""
    store.create_user(User("u1", "one", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.quota = Quota(packets=10, bytes=1 << 20)
    stream = Stream(store)
    mine = rich("01OCCUPY0001", "u1", words="kestrel migration plan")
    theirs = rich("01OCCUPY0002", "u1", "t1", words="osprey gateway deploy")
    for p in (mine, theirs):
        put(store, p)
    ids = {mine.meta.id, theirs.meta.id}
    stream.drain()
    held = held_by(store, ids)
    assert store.usage("u1") == Usage(2, held)
    assert held == sum(store.occupied(p, p.meta.created_at) for p in (mine, theirs))
    assert held > 2.5 * (len(mine.body) + len(theirs.body))
    assert repair_usage(store, say=lambda _: None)["unchanged"] == ["u1"]

    put(store, rich(mine.meta.id, "u1", words="kestrel migration plan, longer and changed"))
    stream.drain()
    assert store.usage("u1") == Usage(2, held_by(store, ids))
    assert repair_usage(store, say=lambda _: None)["unchanged"] == ["u1"]

    assert store.delete_packet_as(mine.meta.id, "u1") is True
    store.delete_team("t1")
    stream.drain()
    assert store.usage("u1") == Usage() and held_by(store, ids) == 0
    assert_consistent(store)


def _team_with_packets(store: DynamoStore, count: int) -> None:
    store.create_user(User("u1", "one", T0))
    store.create_user(User("u2", "two", T0))
    store.create_team(Team("t1", "core", "u1", T0))
    store.add_member("t1", "u2")
    for n in range(count):
        put(store, packet(f"01TEAM{n:06d}", f"u{1 + n % 2}", "t1", words=f"dunlin {n}", n=n % 60))
    put(store, packet("01MINE000000", "u2", words="dunlin mine"))


@pytest.mark.parametrize("twice", [False, True])
def test_a_large_team_delete_finishes_step_by_step(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch, twice: bool
) -> None:
    """The request runs a page; the stream consumer runs the rest, step after step."""
    from ltm.store import dynamo_fanout

    monkeypatch.setattr(dynamo_fanout, "INLINE_PAGES", 1)
    monkeypatch.setattr(dynamo_fanout, "STEP_PAGES", 1)
    monkeypatch.setattr(dynamo_fanout, "PACKETS_PER_PAGE", 4)
    stream = Stream(store)
    _team_with_packets(store, 18)
    stream.drain()
    store.delete_team("t1")
    # From the first moment: no team, no member, no push into it.
    assert store.get_team("core") is None and store.get_member("t1", "u2") is None
    with pytest.raises(NotFound):
        put(store, packet("01TEAMLATE00", "u2", "t1", words="late"))
    assert store.get_packet("01TEAM000017") is not None  # not yet: the consumer's part
    stream.drain(twice=twice)
    left = [n for n in range(18) if store.get_packet(f"01TEAM{n:06d}") is not None]
    assert left == []
    assert found(store, "dunlin", [("u2", None)]) == ["01MINE000000"]
    assert store.usage("u2").packets == 1
    assert_consistent(store)


@pytest.mark.parametrize(
    ("inline", "per_page"), [(1, 4), (2, 25)], ids=["packets left", "only its tombstone"]
)
def test_a_team_delete_whose_stream_records_were_lost_is_finished_by_the_repair(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch, inline: int, per_page: int
) -> None:
    """The repair runs the fan-out to its end, not only the pages of one request, and
    finds it by its tombstone when none of the team's packets is left to lead there."""
    from ltm.store import dynamo_fanout
    from ltm.store.dynamo_repair import repair_index

    monkeypatch.setattr(dynamo_fanout, "INLINE_PAGES", inline)
    monkeypatch.setattr(dynamo_fanout, "STEP_PAGES", 1)
    monkeypatch.setattr(dynamo_fanout, "PACKETS_PER_PAGE", per_page)
    stream = Stream(store)
    _team_with_packets(store, 18)
    stream.drain()
    store.delete_team("t1")
    stream.take()  # lost: the consumer never sees them
    done = repair_index(store, say=lambda _: None)
    assert done["teams resumed"] == 1
    assert [n for n in range(18) if store.get_packet(f"01TEAM{n:06d}") is not None] == []
    tombstone = store._get_item({"pk": {"S": "TEAM#t1"}, "sk": {"S": "GONE"}})
    assert tombstone is not None and "done" in tombstone
    stream.drain()
    assert_consistent(store)


def test_a_team_deleted_before_tombstones_with_its_packets_left_is_finished_by_the_repair(
    store: DynamoStore,
) -> None:
    """A deletion cut short by the code before the fan-out (the team's items gone, its
    packets left, no tombstone) is finished too: the migration runs this repair."""
    from ltm.store.dynamo_repair import repair_index

    stream = Stream(store)
    _team_with_packets(store, 6)
    stream.drain()
    for sk in ("TEAM", "MEMBER#u1", "MEMBER#u2"):
        store.client.delete_item(
            TableName=store.table, Key={"pk": {"S": "TEAM#t1"}, "sk": {"S": sk}}
        )
    store.client.delete_item(
        TableName=store.table, Key={"pk": {"S": "TEAMNAME#core"}, "sk": {"S": "TEAM"}}
    )
    stream.take()  # as the code of then: no consumer ran for it
    assert repair_index(store, say=lambda _: None)["teams resumed"] == 1
    assert [n for n in range(6) if store.get_packet(f"01TEAM{n:06d}") is not None] == []
    assert store.usage("u2").packets == 1  # their personal packet stays
    stream.drain()
    assert_consistent(store)


def _gsi1_trailing(store: DynamoStore, monkeypatch: pytest.MonkeyPatch, hidden: str) -> None:
    """gsi1 trails the table: the fan-out's listing of it does not show ``hidden`` yet."""
    real = store._page

    def trailing(**kwargs: Any) -> list[Any]:
        if kwargs.get("IndexName") == "gsi1":
            return [i for i in real(**kwargs) if i["id"]["S"] != hidden]
        return real(**kwargs)

    monkeypatch.setattr(store, "_page", trailing)


def _tombstone_done(store: DynamoStore) -> bool:
    tombstone = store._get_item({"pk": {"S": "TEAM#t1"}, "sk": {"S": "GONE"}})
    return tombstone is not None and "done" in tombstone


def test_a_team_packet_gsi1_did_not_list_yet_is_deleted_by_its_team_mark(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consumer ran for the packet before the team's deletion (its team mark put),
    and gsi1 still trails when the fan-out lists the packets: the fan-out's strongly
    consistent read of the marks finds it."""
    stream = Stream(store)
    _team_with_packets(store, 3)
    stream.drain()
    _gsi1_trailing(store, monkeypatch, "01TEAM000002")
    store.delete_team("t1")
    stream.drain()
    monkeypatch.undo()
    assert _tombstone_done(store)
    assert store.get_packet("01TEAM000002") is None
    assert store.usage("u1").packets == 0
    assert_consistent(store)


@pytest.mark.parametrize("twice", [False, True], ids=["once", "redelivered"])
def test_a_team_packet_pushed_the_instant_before_its_teams_delete_is_deleted_by_the_consumer(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch, twice: bool
) -> None:
    """The push commits just before the deletion's transaction (it checked the tombstone
    absent); the deletion's fan-out runs before gsi1 lists the packet and before the
    consumer saw it (no team mark yet). The consumer, finding the team gone, deletes it,
    with its author's usage, its index and its shares; redelivered, it changes nothing."""
    stream = Stream(store)
    _team_with_packets(store, 2)
    stream.drain()
    late = packet("01TEAMLAST00", "u2", "t1", words="dunlin last")
    put(store, late)
    assert store.share_packet(Share("01TEAMLAST00", "u1", "u2", T0), seen=late.meta)[1]
    _gsi1_trailing(store, monkeypatch, "01TEAMLAST00")
    store.delete_team("t1")
    stream.drain(twice=twice)  # the delete's fan-out steps run here too
    monkeypatch.undo()
    assert _tombstone_done(store)
    assert store.get_packet("01TEAMLAST00") is None
    assert store.packet_shares("01TEAMLAST00") == []
    assert store.usage("u2") == Usage(1, store.usage("u2").bytes)  # their personal packet
    assert found(store, "dunlin", [("u2", None), ("u2", "t1")]) == ["01MINE000000"]
    assert_consistent(store)


def test_a_team_packet_from_before_team_marks_the_fan_out_missed_is_deleted_by_the_repair(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A packet stored before the consumer put team marks, which gsi1 did not list yet
    when its team was deleted, is left by the deletion: the repair finds it (its team
    is gone) and deletes it, done tombstone or not."""
    from ltm.store.dynamo_fanout import team_mark
    from ltm.store.dynamo_repair import repair_index

    stream = Stream(store)
    _team_with_packets(store, 3)
    stream.drain()
    store.client.delete_item(TableName=store.table, Key=team_mark("t1", "01TEAM000002"))
    stream.take()  # that delete's record: the consumer reads no team mark records
    _gsi1_trailing(store, monkeypatch, "01TEAM000002")
    store.delete_team("t1")
    stream.drain()
    monkeypatch.undo()
    assert _tombstone_done(store)
    assert store.get_packet("01TEAM000002") is not None  # what the index did not list yet
    assert repair_index(store, say=lambda _: None)["teams resumed"] == 1
    assert store.get_packet("01TEAM000002") is None
    stream.drain()
    assert_consistent(store)


def test_shares_a_delete_left_behind_end_from_the_stream(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete's shares go after its transaction: a request cut short there (throttled
    past the SDK's retries, a Lambda timeout) leaves them. The packet's REMOVE record
    ends them, so the same id pushed again is not shared with the old reader."""
    from botocore.exceptions import ClientError

    from ltm.store import Share

    stream = Stream(store)
    mine = packet("01SHARED0000", "u1", words="sanderling notes")
    put(store, mine)
    store.share_packet(Share(mine.meta.id, "u2", "u1", T0), seen=mine.meta)
    stream.drain()

    def throttled(packet_id: str) -> list[Any]:
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
        raise ClientError({"Error": error}, "Query")

    monkeypatch.setattr(store, "_share_items", throttled)
    with pytest.raises(ClientError):
        store.delete_packet_as(mine.meta.id, "u1")
    monkeypatch.undo()
    assert store.get_packet(mine.meta.id) is None
    stream.drain()
    put(store, mine)  # the same id again, from the owner's own copy
    assert store.get_share(mine.meta.id, "u2") is None
    assert store.packet_shares(mine.meta.id) == []
    stream.drain()
    assert_consistent(store)


def test_a_lenient_packets_tag_too_long_for_a_key_does_not_stop_the_stream(
    store: DynamoStore,
) -> None:
    """A lenient push may carry a tag (or project name) of any length, and DynamoDB
    refuses a partition key past 2048 bytes: its facet is left out, so the record is
    applied, not failed at every retry (holding up the records behind it on its shard
    and then dropped), and the repair gets past it too."""
    from ltm.store.dynamo_repair import repair_index

    stream = Stream(store)
    data = {"goal": "turnstone lenient", "next_step": "go", "tags": ["x" * 2100, "short"]}
    meta = PacketMeta("01LONGTAG000", "2026-01-01T00:00:00Z", "turnstone lenient", "u1")
    put(store, StoredPacket(meta, json.dumps(data).encode(), conforming=False))
    assert handle(store, stream.take()) == []
    assert found(store, "turnstone", ME) == ["01LONGTAG000"]
    assert [p.id for p in store.list_packets(owner_id="u1", tag="short").items] == [meta.id]
    repair_index(store, say=lambda _: None)
    assert store.delete_packet("01LONGTAG000") is True
    assert handle(store, stream.take()) == []
    assert_consistent(store)


# -- crashes: a child process killed between two DynamoDB calls ------------------

_CHILD = """
import json
from ltm.store.dynamo import DynamoStore
from ltm.store import PacketMeta, StoredPacket
op = sys.argv[4]
store = DynamoStore(table, client=client)
body = json.dumps({"goal": "crash " + op, "next_step": "sandpiper"}).encode()
meta = PacketMeta("01CRASH00000", "2026-01-01T00:00:00Z", "crash", "u1")
if op == "delete":
    store.delete_packet("01CRASH00000")
elif op == "team-delete":
    store.delete_team("t1")
else:
    store.put_packet(StoredPacket(meta, body), sort_key=meta.created_at)
print("done")
"""


@pytest.mark.parametrize("op", ["push", "repush", "delete", "team-delete"])
def test_a_crash_between_any_two_calls_leaves_a_consistent_table(op: str) -> None:
    with moto_server() as url:
        store = served_store(url)
        stream = Stream(store)
        if op in ("repush", "delete"):
            put(store, packet("01CRASH00000", "u1", words="sandpiper before"))
        if op == "team-delete":
            _team_with_packets(store, 6)
        die_after = 1
        while True:
            printed = crashing(_CHILD, url, store.table, die_after, op)
            stream.drain()
            assert_consistent(store)
            got = store.get_packet("01CRASH00000")
            if got is not None:
                assert found(store, "sandpiper", ME) == ["01CRASH00000"]
            if op == "team-delete" and store.get_team("core") is None:
                assert store.get_packet("01TEAM000000") is None  # the consumer finished it
            if printed is not None:
                break
            die_after += 1
        assert die_after > 1


def test_the_repair_marks_team_packets_from_before_marks_and_drops_stale_marks(
    store: DynamoStore,
) -> None:
    """A table from before team marks has none on its team packets, and a mark whose
    packet's REMOVE record was lost outlives it: the repair puts the one, deletes the other."""
    from ltm.store.dynamo_fanout import team_mark
    from ltm.store.dynamo_repair import repair_index

    stream = Stream(store)
    _team_with_packets(store, 2)
    stream.drain()
    store.client.delete_item(TableName=store.table, Key=team_mark("t1", "01TEAM000000"))
    store.client.put_item(TableName=store.table, Item=team_mark("t1", "01GONE000000"))
    stream.take()  # the consumer reads no team mark records
    repair_index(store, say=lambda _: None)
    assert store._get_item(team_mark("t1", "01TEAM000000")) is not None
    assert store._get_item(team_mark("t1", "01GONE000000")) is None
    stream.drain()
    assert_consistent(store)
