"""The operator's repair of the derived data: the index from the packets, usage by recount,
the display-name claims of users made before names were claimed in any case."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from dynamo_moto import app_env, endpoint_client, in_process, moto_server, unique_table
from streamkit import Stream, assert_consistent, scan
from test_dynamo_stream import ME, found, packet, put
from timing import scaled

from ltm.store import NameTaken, User
from ltm.store.dynamo import DynamoStore, _user_item, create_tables
from ltm.store.dynamo_repair import repair_index, repair_names, repair_usage


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with in_process("ltm-repair") as client:
        yield DynamoStore("ltm-repair", client=client)


def damage(store: DynamoStore) -> None:
    """What an older table, or a consumer that lost records, leaves: postings missing,
    orphaned and pending, and usage counters off."""
    for n in range(12):
        put(store, packet(f"01REPAIR{n:04d}", "u1", words=f"avocet item{n}", n=n))
    put(store, packet("01OTHERUSER0", "u2", words="avocet theirs"))
    client = store.client
    orphan = {"pk": {"S": "T#u:u1#st"}, "sk": {"S": "stale#2026#01GONE000000"}, "w": {"N": "5"}}
    client.put_item(TableName=store.table, Item=orphan)
    client.update_item(
        TableName=store.table,
        Key={"pk": {"S": "USAGE#u1"}, "sk": {"S": "USAGE"}},
        UpdateExpression="SET packets = :n",
        ExpressionAttributeValues={":n": {"N": "40"}},
    )
    client.delete_item(TableName=store.table, Key={"pk": {"S": "USAGE#u2"}, "sk": {"S": "USAGE"}})


def cut_short(run: Callable[[Callable[[str], None]], object], pages: int) -> str:
    """Run a repair (``run(say)``) and stop it after ``pages`` pages: the token it gave
    last, to resume from."""
    tokens: list[str] = []

    class Cut(Exception):
        pass

    def say(line: str) -> None:
        tokens.append(line.rsplit(" ", 1)[-1])
        if len(tokens) == pages:
            raise Cut

    with pytest.raises(Cut):
        run(say)
    return tokens[-1]


def unclaimed(store: DynamoStore) -> None:
    """What a table from before name claims holds: users and no claim for them ("Sam"
    and "sam", made then, both), and claims nobody goes by (a user gone, a user renamed
    by hand)."""
    people = [("uold", "Sam", 1), ("unew", "sam", 2), ("uolive", "Olive", 3)]
    for user_id, display, month in people:
        user = User(user_id, display, datetime(2026, month, 1, tzinfo=UTC))
        store.client.put_item(TableName=store.table, Item=_user_item(user))
    for name, user_id in (("ghost", "ugone"), ("olivia", "uolive")):
        claim = {"pk": {"S": f"NAME#{name}"}, "sk": {"S": "NAME"}, "user_id": {"S": user_id}}
        store.client.put_item(TableName=store.table, Item=claim)


def claims(store: DynamoStore) -> dict[str, str]:
    return {
        i["pk"]["S"].removeprefix("NAME#"): i["user_id"]["S"]
        for i in scan(store)
        if i["sk"]["S"] == "NAME"
    }


def test_names_claims_every_users_name_and_lists_a_name_two_go_by(
    store: DynamoStore,
) -> None:
    unclaimed(store)
    said: list[str] = []
    done = repair_names(store, say=said.append)
    assert claims(store) == {"sam": "uold", "olive": "uolive"}  # the oldest keeps "Sam"
    assert done["duplicates"] == [{"user_id": "unew", "display": "sam", "held_by": "uold"}]
    assert done["claimed"] == 2 and done["stale claims deleted"] == 2
    assert any("unew" in line and "ltm profile --display" in line for line in said)
    # The name is taken now in every case; a freed one can be taken again.
    with pytest.raises(NameTaken):
        store.create_user(User("uthird", "SAM", datetime.now(UTC)))
    with pytest.raises(NameTaken):
        store.rename_user("uolive", "sAm")
    assert store.rename_user("uolive", "Olivia").display == "Olivia"
    assert store.rename_user("unew", "Samuel").display == "Samuel"  # the way out
    again = repair_names(store, say=lambda _: None)
    assert again["duplicates"] == [] and again["claimed already"] == 3
    assert claims(store) == {"sam": "uold", "olivia": "uolive", "samuel": "unew"}


def test_names_resumes_from_its_token_and_leaves_a_rename_that_raced_it(
    store: DynamoStore,
) -> None:
    from ltm.store.dynamo import DERIVED_KEY

    # The pages cut below are of the users and claims alone: the new table's record of
    # its repairs would take a place in the first.
    store.client.delete_item(TableName=store.table, Key=DERIVED_KEY)
    unclaimed(store)
    token = cut_short(lambda say: repair_names(store, say=say, page_size=2), pages=1)
    real = store.client.transact_write_items
    state = {"raced": False}

    def renamed_first(**kwargs: Any) -> Any:
        if not state["raced"]:  # the user renames between the page's read and its claim
            state["raced"] = True
            store.client.transact_write_items = real  # type: ignore[method-assign]
            store.rename_user("uolive", "Olga")
            store.client.transact_write_items = renamed_first  # type: ignore[method-assign]
        return real(**kwargs)

    store.client.transact_write_items = renamed_first  # type: ignore[method-assign]
    repair_names(store, resume=token, say=lambda _: None, page_size=2)
    store.client.transact_write_items = real  # type: ignore[method-assign]
    assert state["raced"]
    assert claims(store) == {"sam": "uold", "olga": "uolive"}


def test_repair_rebuilds_the_index_and_recounts_usage(store: DynamoStore) -> None:
    damage(store)
    with pytest.raises(AssertionError):
        assert_consistent(store)
    done = repair_index(store, say=lambda _: None)
    assert done["stale items deleted"] == 1 and done["pending cleared"] == 13
    result = repair_usage(store, say=lambda _: None)
    assert result["set"] == ["u1", "u2"] and result["busy"] == []
    assert_consistent(store)
    assert len(found(store, "avocet", ME)) == 12
    assert repair_usage(store, say=lambda _: None)["unchanged"] == ["u1", "u2"]


def test_a_cut_short_run_resumes_from_its_token(store: DynamoStore) -> None:
    damage(store)
    token = cut_short(lambda say: repair_index(store, say=say, page_size=7), pages=2)
    repair_index(store, resume=token, say=lambda _: None, page_size=7)
    # Pages before the cut were already right: the resumed run finished the rest.
    repair_usage(store, say=lambda _: None)
    assert_consistent(store)


def test_one_scope_is_repaired_alone(store: DynamoStore) -> None:
    damage(store)
    repair_index(store, scope="u:u2", say=lambda _: None)
    pending = [i for i in scan(store) if i["pk"]["S"].startswith("PEND#")]
    assert {i["pk"]["S"] for i in pending} == {"PEND#u:u1"}  # u1's left as they were


def test_a_push_during_the_repair_keeps_its_index(store: DynamoStore) -> None:
    """The repair deletes what the packet it read no longer derives; a re-push landing
    between that read and the delete gets its postings written again."""
    stream = Stream(store)
    put(store, packet("01RACE000000", "u1", words="stint first"))
    stream.drain()
    # An orphan of this very packet, as a lost REMOVE would leave it; the packet is
    # re-pushed with that word just before the repair deletes the orphan.
    store.client.put_item(
        TableName=store.table,
        Item={"pk": {"S": "T#u:u1#kn"}, "sk": {"S": "knot#2026-01-01T00:00:00Z#01RACE000000"}},
    )
    real = store.client.batch_write_item
    state = {"raced": False}

    def racing(**kwargs: Any) -> Any:
        requests = next(iter(kwargs["RequestItems"].values()))
        if not state["raced"] and any("DeleteRequest" in r for r in requests):
            state["raced"] = True
            put(store, packet("01RACE000000", "u1", words="knot second"))
            stream.drain()
        return real(**kwargs)

    store.client.batch_write_item = racing  # type: ignore[method-assign]
    repair_index(store, say=lambda _: None)
    assert state["raced"]
    stream.drain()
    assert found(store, "knot", ME) == ["01RACE000000"]
    assert_consistent(store)


def test_a_user_written_to_during_the_count_is_left_and_reported(store: DynamoStore) -> None:
    damage(store)
    real = store.client.scan
    calls = {"n": 0}

    def scan_then_push(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # the packets' count starts: a push lands
            put(store, packet("01DURING0000", "u1", words="late"))
        return real(**kwargs)

    store.client.scan = scan_then_push  # type: ignore[method-assign]
    result = repair_usage(store, say=lambda _: None)
    assert result["busy"] == ["u1"] and "u2" in result["set"]
    store.client.scan = real  # type: ignore[method-assign]
    assert repair_usage(store, users=["u1"], say=lambda _: None)["set"] == ["u1"]
    repair_index(store, say=lambda _: None)
    assert_consistent(store)


def test_the_documented_command_runs() -> None:
    with moto_server() as url:
        table = unique_table()
        client = endpoint_client(url)
        create_tables(client, table, ttl=False)
        store = DynamoStore(table, client=client)
        damage(store)
        unclaimed(store)
        env = app_env(url, table)
        for command in (["index"], ["usage"], ["names"]):
            done = subprocess.run(
                [sys.executable, "-m", "ltm.store.dynamo_repair", *command],
                env=env,
                capture_output=True,
                text=True,
                timeout=scaled(120),
            )
            assert done.returncode == 0, done.stderr
            json.loads(done.stdout)
        assert_consistent(store)
        assert claims(store) == {"sam": "uold", "olive": "uolive"}


def test_repair_indexes_a_run_written_without_spaces_in_pairs(
    store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table indexed before runs of Chinese, Japanese, Korean or Thai were cut into
    pairs of characters holds such a run as one word: the repair (the upgrade's step,
    deploy-aws.md) indexes it in pairs, and a word inside the run finds it."""
    import re

    from ltm import search

    def whole_runs(fields: dict[str, str]) -> dict[str, float]:  # the words of before
        return {
            search.fold(word): 5.0
            for text in fields.values()
            for word in re.findall(r"[^\W_]+", text)
        }

    monkeypatch.setattr(search, "term_weights", whole_runs)
    put(store, packet("01RUN0000000", "u1", words="検索テストを直す"))
    Stream(store).drain()
    monkeypatch.undo()
    assert found(store, "テスト", ME) == []
    repair_index(store, say=lambda _: None)
    assert found(store, "テスト", ME) == ["01RUN0000000"]
    assert found(store, "検索", ME) == ["01RUN0000000"]


def test_the_repair_record_says_what_a_table_owes() -> None:
    """A new table owes nothing; one from before the record owes both repairs; a repair
    records itself only when it went over the whole table (not one scope, not a recount
    of some users, not one that found a user busy)."""
    from ltm.store.dynamo import DERIVED_GENERATION, DERIVED_KEY

    with in_process("ltm-owed") as client:
        assert DynamoStore("ltm-owed", client=client).repairs_owed() == []
        client.delete_item(TableName="ltm-owed", Key=DERIVED_KEY)
        store = DynamoStore("ltm-owed", client=client)
        assert store.repairs_owed() == ["index", "usage"]
        repair_index(store, scope="u:nobody", say=lambda _: None)
        repair_usage(store, users=["nobody"], say=lambda _: None)
        assert DynamoStore("ltm-owed", client=client).repairs_owed() == ["index", "usage"]
        repair_index(store, say=lambda _: None)
        assert store.repairs_owed() == ["usage"]
        repair_usage(store, say=lambda _: None)
        assert DynamoStore("ltm-owed", client=client).repairs_owed() == []
        # Newer code's record stays when an older repair runs after it.
        client.put_item(
            TableName="ltm-owed",
            Item={**DERIVED_KEY, "index": {"N": str(DERIVED_GENERATION + 1)}},
        )
        repair_index(store, say=lambda _: None)
        record = client.get_item(TableName="ltm-owed", Key=DERIVED_KEY)["Item"]
        assert record["index"] == {"N": str(DERIVED_GENERATION + 1)}
