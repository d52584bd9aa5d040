"""The DynamoDB table's stream, read as Lambda would (moto serves DynamoDB Streams), and the
invariants every test of the derived data ends on."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from timing import scaled

from ltm.store.dynamo import DynamoStore
from ltm.store.dynamo_search import image_index
from ltm.store.dynamo_stream import handle


class Stream:
    """The table's stream from its start; ``take`` returns the records not taken yet."""

    def __init__(self, store: DynamoStore) -> None:
        import botocore.session

        self.store = store
        client = store.client
        self.arn = client.describe_table(TableName=store.table)["Table"]["LatestStreamArn"]
        session = botocore.session.get_session()
        local = client.meta.endpoint_url
        # The table client's own credentials: a local engine's client carries them itself,
        # not in the environment (where only in-process moto's are).
        frozen = client._request_signer._credentials.get_frozen_credentials()
        self.streams = session.create_client(
            "dynamodbstreams",
            region_name=client.meta.region_name,
            # A local engine's URL; in-process moto answers AWS's regional name, not the
            # account-based one the SDK derives from the stream's ARN.
            endpoint_url=local
            if local.startswith("http://")
            else f"https://streams.dynamodb.{client.meta.region_name}.amazonaws.com",
            aws_access_key_id=frozen.access_key,
            aws_secret_access_key=frozen.secret_key,
            aws_session_token=frozen.token,
        )
        self.last: dict[str, str] = {}  # shard -> the last sequence number taken

    def take(self) -> list[dict[str, Any]]:
        # A fresh iterator after the last record seen, each time: moto's rollback of a
        # cancelled transaction replaces its shard objects, stranding an older iterator.
        out: list[dict[str, Any]] = []
        shards = self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        for shard in shards:
            sid = shard["ShardId"]
            while True:  # a fresh iterator for each page too (moto's next one can repeat)
                where: dict[str, Any] = {"ShardIteratorType": "TRIM_HORIZON"}
                if (last := self.last.get(sid)) is not None:
                    where = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
                iterator = self.streams.get_shard_iterator(
                    StreamArn=self.arn, ShardId=sid, **where
                )["ShardIterator"]
                records = self.streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
                if not records:
                    break
                out.extend(records)
                self.last[sid] = records[-1]["dynamodb"]["SequenceNumber"]
        return out

    def drain(self, *, twice: bool = False, shuffle_keys: bool = False) -> int:
        """Run the consumer on what is new, until nothing is; return how many records."""
        total = 0
        while records := self.take():
            total += len(records)
            if shuffle_keys:
                records = interleave_keys(records)
            for batch in (records, records) if twice else (records,):
                assert handle(self.store, batch) == []
        return total


def interleave_keys(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records in another order across items, each item's own records still in order."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_key.setdefault(repr(sorted(record["dynamodb"]["Keys"].items())), []).append(record)
    queues = list(by_key.values())
    rng = random.Random(7)
    out = []
    while queues:
        queue = rng.choice(queues)
        out.append(queue.pop(0))
        if not queue:
            queues.remove(queue)
    return out


def scan(store: DynamoStore) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": store.table, "ConsistentRead": True}
    while True:
        resp = store.client.scan(**kwargs)
        items.extend(resp["Items"])
        if "LastEvaluatedKey" not in resp:
            return items
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def assert_consistent(store: DynamoStore, *, drained: bool = True) -> None:
    """Usage equals a recount; the index is exactly what the packets derive; nothing orphaned."""
    items = scan(store)
    keyed = {(i["pk"]["S"], i["sk"]["S"]): i for i in items}
    packets = [i for i in items if i["sk"]["S"] == "PKT" and i["pk"]["S"].startswith("PKT#")]
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    expected: dict[tuple[str, str], Any] = {}
    for packet in packets:
        owner = packet["owner_id"]["S"]
        counts[owner] += 1
        sizes[owner] += store._occupied_item(packet)
        expected.update(image_index(packet))
        if "team_id" in packet:  # a team packet lives only in a team that exists
            team = packet["team_id"]["S"]
            assert (f"TEAM#{team}", "TEAM") in keyed, f"{packet['id']['S']} orphaned in {team}"
    users = {i["pk"]["S"].removeprefix("USAGE#") for i in items if i["sk"]["S"] == "USAGE"}
    for user in users | set(counts):
        usage = store.usage(user)
        assert (usage.packets, usage.bytes) == (counts[user], sizes[user]), user
    index = {key: item for key, item in keyed.items() if key[0].startswith(("T#", "FACET#"))}
    if drained:
        assert set(index) == set(expected), set(index) ^ set(expected)
        for key, item in expected.items():
            assert index[key] == item, key
        pending = [key for key in keyed if key[0].startswith("PEND#")]
        assert pending == [], pending
        # Each team packet has its team mark (how its team's deletion finds it), no other.
        marks = {k for k in keyed if k[0].startswith("TEAM#") and k[1].startswith("PKT#")}
        marked = {
            (f"TEAM#{p['team_id']['S']}", f"PKT#{p['id']['S']}") for p in packets if "team_id" in p
        }
        assert marks == marked, marks ^ marked


# A child process that dies (exit status 17) as its ``die_after``-th DynamoDB call
# returns, as a Lambda timing out between two calls would. Its code runs after this,
# with ``client`` (counted), ``table`` and its further arguments in ``sys.argv[4:]``.
_CRASHING = """
import os, sys
from dynamo_moto import endpoint_client
url, table, die_after = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = endpoint_client(url)
calls = {"n": 0}
def count(**_):
    calls["n"] += 1
    if calls["n"] >= die_after:
        os._exit(17)
client.meta.events.register("after-call.dynamodb", count)
"""


def crashing(code: str, url: str, table: str, die_after: int, *args: str) -> str | None:
    """Run ``code`` in a child killed after ``die_after`` DynamoDB calls: what it printed
    if it finished first, None if it was killed."""
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING + code, url, table, str(die_after), *args],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)},
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    if done.returncode != 0:
        assert done.returncode == 17, done.stderr
        return None
    return done.stdout


def served_store(url: str) -> DynamoStore:
    """A store on a new table of the moto server at ``url`` (a crashing child's too)."""
    from dynamo_moto import endpoint_client, unique_table

    from ltm.store.dynamo import create_tables

    table = unique_table()
    client = endpoint_client(url)
    create_tables(client, table, ttl=False)
    return DynamoStore(table, client=client)
