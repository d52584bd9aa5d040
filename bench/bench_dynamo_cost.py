"""Benchmark DynamoDB cost: capacity units and storage per operation, and what a month costs.

Run: .venv/bin/python bench/bench_dynamo_cost.py [--sizes 10000,100000]

Every DynamoDB call of the store (moto, in process) is metered by DynamoDB's
billing rules, from the items each call reads or writes as the table holds them
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/
read-write-operations.html; moto's own ConsumedCapacity is a constant):

- a write: one unit per KB of the larger of the item before and after (at least
  one; a failed condition one); a transaction twice that, a ConditionCheck too;
  each global secondary index the item is projected into one more write of its
  projection (two when the index key changes);
- a read: one unit per 4 KB read (a Query: of all the items it returned, a
  BatchGetItem: of each item), half when eventually consistent;
- storage: each item's size plus 100 bytes, and its projection into each index
  plus 100 bytes.

A push is metered through the stream consumer too (``Stream.drain``): what the
consumer writes is part of what a push costs. The operations go through the
service layer, as a route calls them (the token check included).

Targets (a new 3 KB packet): at most 40 write units, at most 3x its bytes
stored; a 2-word search at 100,000 packets in one scope at most 60 read units.
Prices (us-east-1, on-demand, when written): $0.625 per million write request
units, $0.125 per million read request units, $0.25 per GB-month of storage.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import math
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from results import Figure, record

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

WRITE_PRICE = 0.625 / 1e6  # $ per write request unit
READ_PRICE = 0.125 / 1e6  # $ per read request unit
STORAGE_PRICE = 0.25  # $ per GB-month
DAYS = 30
TEAM_PACKETS = 60
TEAM_DELETE = f"team delete ({TEAM_PACKETS} packets)"


# -- sizes and units, by DynamoDB's rules -------------------------------------------------


def item_size(item: dict[str, Any] | None) -> int:
    """An item's size by DynamoDB's rules (the store's own count, which its quota uses)."""
    from ltm.store.dynamo import item_size as size

    return size(item) if item else 0


def _kb(size: int) -> int:
    return max(1, math.ceil(size / 1024))


class Meter:
    """Capacity units of every call a client makes (hooks before and after each call)."""

    def __init__(self, client: Any, table: str) -> None:
        from ltm.store.dynamo import TABLE_SCHEMA

        self.client, self.table = client, table
        self.indexes: list[dict[str, Any]] = TABLE_SCHEMA["GlobalSecondaryIndexes"]
        self.busy = False
        self.before: dict[str, dict[str, Any] | None] = {}
        self.reset()
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def reset(self) -> None:
        self.read = 0.0
        self.write = 0.0
        self.calls: Counter[str] = Counter()

    def _peek(self, key: dict[str, Any]) -> dict[str, Any] | None:
        was, self.busy = self.busy, True
        try:
            resp = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True)
        finally:
            self.busy = was
        return resp.get("Item")

    @staticmethod
    def _keyof(request: dict[str, Any]) -> dict[str, Any]:
        if "Key" in request:
            return dict(request["Key"])
        return {k: request["Item"][k] for k in ("pk", "sk")}

    def _writes(self, model: str, params: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
        """(key, factor) of each item a write call touches."""
        if model in ("PutItem", "UpdateItem", "DeleteItem"):
            return [(self._keyof(params), 1)]
        if model == "BatchWriteItem":
            out = []
            for requests in params["RequestItems"].values():
                for request in requests:
                    (inner,) = request.values()
                    out.append((self._keyof(inner), 1))
            return out
        if model == "TransactWriteItems":
            return [(self._keyof(next(iter(a.values()))), 2) for a in params["TransactItems"]]
        return []

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if self.busy:
            return
        self.before = {
            json.dumps(key, sort_keys=True): self._peek(key)
            for key, _ in self._writes(model.name, params)
        }
        self.params = params

    @staticmethod
    def _projection(item: dict[str, Any] | None, index: dict[str, Any]) -> Any:
        from ltm.store.dynamo import index_projection

        return index_projection(item, index) if item else None

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if self.busy:
            return
        name = model.name
        self.calls[name] += 1
        ok = http_response.status_code < 300
        if name in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"):
            for key, factor in self._writes(name, self.params):
                old = self.before.get(json.dumps(key, sort_keys=True))
                if not ok:
                    self.write += factor
                    continue
                new = self._peek(key)
                self.write += factor * _kb(max(item_size(old), item_size(new)))
                for index in self.indexes:
                    a = self._projection(old, index)
                    b = self._projection(new, index)
                    if a == b:
                        continue
                    keys = [k["AttributeName"] for k in index["KeySchema"]]
                    if a and b and all(a[k] == b[k] for k in keys):
                        self.write += _kb(max(item_size(a), item_size(b)))
                    else:
                        self.write += (_kb(item_size(a)) if a else 0) + (
                            _kb(item_size(b)) if b else 0
                        )
            return
        if not ok:
            return
        if name == "GetItem":
            half = not self.params_consistent(name)
            self.read += max(1, math.ceil(item_size(parsed.get("Item")) / 4096)) * (
                0.5 if half else 1
            )
        elif name == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                half = not self.params["RequestItems"][table].get("ConsistentRead", False)
                for item in items:
                    self.read += max(1, math.ceil(item_size(item) / 4096)) * (0.5 if half else 1)
        elif name in ("Query", "Scan"):
            size = sum(item_size(i) for i in parsed.get("Items", []))
            half = not self.params.get("ConsistentRead", False)
            self.read += max(1, math.ceil(size / 4096)) * (0.5 if half else 1)

    def params_consistent(self, name: str) -> bool:
        return bool(self.params.get("ConsistentRead", False))


def storage(client: Any, table: str, meter: Meter, pk_filter: Any = None) -> int:
    """Billed bytes of the table (or of the items ``pk_filter`` keeps): items and projections."""
    from ltm.store.dynamo import stored_size

    total = 0
    kwargs: dict[str, Any] = {"TableName": table}
    was, meter.busy = meter.busy, True
    try:
        while True:
            resp = client.scan(**kwargs)
            for item in resp["Items"]:
                if pk_filter is not None and not pk_filter(item):
                    continue
                total += stored_size(item)
            if "LastEvaluatedKey" not in resp:
                return total
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
    finally:
        meter.busy = was


# -- the packets --------------------------------------------------------------------------


def three_kb(n: int, packet_id: str) -> dict[str, Any]:
    """A packet of the corpus grown to ~3 KB of canonical JSON (more decisions and attempts)."""
    import corpus

    from ltm.packet import canonical_bytes

    data = corpus.packet(n, packet_id)
    sources = [corpus.packet(n + k * 1_000_003, packet_id) for k in range(1, 8)]
    data["methods"] = []
    for k, src in enumerate(sources):
        if len(canonical_bytes(data)) >= 3072:
            break
        data["decisions"] = [*data["decisions"], *src["decisions"]]  # type: ignore[misc]
        data["attempts"] = [*data["attempts"], *src["attempts"]]  # type: ignore[misc]
        data["methods"].append(
            {"name": f"method-{k}", "when_applicable": src["goal"], "how": src["next_step"]}
        )
    return data


def seed(store: Any, count: int, owner: str, team: str | None = None) -> float:
    """``count`` corpus packets as a push and its consumer leave them (items written direct)."""
    import corpus

    from ltm import packet
    from ltm.store import PacketMeta, StoredPacket
    from ltm.store.dynamo import _packet_item
    from ltm.store.dynamo_search import image_index

    started = time.perf_counter()
    # Millions of small objects make each full collection slower than the last (seeding
    # 100,000 packets took quadratic time): collect none while seeding, and keep what
    # was seeded out of later collections.
    gc.disable()
    puts: list[Any] = []
    for n in range(count):
        pid = f"01COSTBENCH{n:015d}"
        data = corpus.packet(n, pid)
        meta = PacketMeta(
            pid, str(data["created_at"]), str(data["goal"]), owner, team, corpus_project(data)
        )
        sort_key = packet.created_at_sort_key(str(data["created_at"]))
        item = _packet_item(StoredPacket(meta, packet.canonical_bytes(data)), sort_key)
        item["rev"] = {"S": f"{n:016x}"}
        puts.append(item)
        puts.extend(image_index(item).values())
        if len(puts) >= 5000:
            store._batch_write(puts, [])
            puts = []
    store._batch_write(puts, [])
    gc.freeze()
    gc.enable()
    return time.perf_counter() - started


@contextlib.contextmanager
def partition_queries() -> Any:
    """moto answering a Query on the table from the partition it names, not by sorting
    every item of the table first (its way: seconds a call at 100,000 packets, whose
    millions of items made a search take hours). The same items in the same order, so
    the same units: only moto's time changes. Index queries are left as they are."""
    import inspect

    from moto.dynamodb.models.table import Table

    real = Table.query
    signature = inspect.signature(real)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        hash_key = bound.arguments.get("hash_key")
        if bound.arguments.get("index_name") or hash_key is None or not self.range_key_attr:
            return real(self, *args, **kwargs)
        part = sorted(self.items.get(hash_key, {}).values(), key=lambda i: i.range_key)
        self.all_items = lambda: part  # this call's view: the partition alone
        try:
            return real(self, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query = real  # type: ignore[method-assign]


def corpus_project(data: dict[str, Any]) -> str | None:
    project = data.get("project")
    return project.get("name") if isinstance(project, dict) else None


# -- the bench ----------------------------------------------------------------------------


def measure(sizes: list[int]) -> dict[str, Any]:
    import corpus
    from dynamo_moto import in_process
    from streamkit import Stream

    from ltm import search
    from ltm.service import packets, teams, tokens
    from ltm.store.dynamo import DynamoStore

    out: dict[str, Any] = {"ops": {}, "search": {}}
    with in_process("ltm-cost") as client:
        store = DynamoStore("ltm-cost", client=client)
        stream = Stream(store)
        alice_user, alice_secret = tokens.issue(store, "alice")
        bob_user, bob_secret = tokens.issue(store, "bob")
        alice = tokens.credential(f"Bearer {alice_secret}")
        bob = tokens.credential(f"Bearer {bob_secret}")
        tokens.authenticate(store, f"Bearer {alice_secret}")
        tokens.authenticate(store, f"Bearer {bob_secret}")
        meter = Meter(client, "ltm-cost")
        ops = out["ops"]

        meter.busy = True  # metered only inside run(): the setup between is not an operation

        def run(name: str, action: Any, *, drain: bool = False) -> None:
            meter.reset()
            meter.busy = False
            action()
            if drain:
                stream.drain()
            meter.busy = True
            ops[name] = {
                "write_units": meter.write,
                "read_units": meter.read,
                "calls": dict(meter.calls),
            }
            print(f"{name}: {ops[name]}", file=sys.stderr)

        stream.drain()
        first = three_kb(1, "01COSTPUSH0000000000000001")
        run("push (new 3 KB packet)", lambda: packets.push(store, alice, first), drain=True)
        pid = first["id"]
        own = storage(
            client,
            "ltm-cost",
            meter,
            lambda i: pid in i["pk"]["S"] or pid in i["sk"]["S"],
        )
        stored = store.get_packet(pid)
        assert stored is not None
        out["packet_bytes"] = len(stored.body)  # as stored: the canonical bytes
        out["stored_bytes"] = own
        again = copy.deepcopy(first)
        run("push (same packet again)", lambda: packets.push(store, alice, again), drain=True)
        changed = copy.deepcopy(first)
        changed["next_step"] = "Rotate the signing keys of the gateway before the audit."
        run("push (changed text)", lambda: packets.push(store, alice, changed), drain=True)
        run("get", lambda: packets.get(store, alice, pid))
        for n in range(60):
            packets.push(store, alice, three_kb(n + 10, f"01COSTLIST{n:016d}"))
        stream.drain()
        run("list (50)", lambda: packets.list_(store, alice, limit=50))
        run("delete", lambda: packets.delete(store, alice, pid), drain=True)
        teams.create(store, alice_user, "bench")
        team = store.get_team("bench")
        assert team is not None
        store.add_member(team.id, bob_user.id)
        for n in range(TEAM_PACKETS):
            who = alice if n % 2 else bob
            packets.push(store, who, three_kb(n + 500, f"01COSTTEAM{n:016d}"), team="bench")
        stream.drain()
        run(TEAM_DELETE, lambda: teams.delete(store, alice, "bench"), drain=True)
        ops[TEAM_DELETE]["per_packet_write_units"] = ops[TEAM_DELETE]["write_units"] / TEAM_PACKETS
    for size in sizes:
        with in_process(f"ltm-cost-{size}") as client:
            store = DynamoStore(f"ltm-cost-{size}", client=client)
            # Search reads no stream: a table without one, so moto keeps no record of each
            # seeded item (its update_table cannot turn a stream off).
            from ltm.store.dynamo import TABLE_SCHEMA

            client.delete_table(TableName=f"ltm-cost-{size}")
            schema = {k: v for k, v in TABLE_SCHEMA.items() if k != "StreamSpecification"}
            client.create_table(TableName=f"ltm-cost-{size}", **schema)
            seconds = seed(store, size, "u1")
            meter = Meter(client, f"ltm-cost-{size}")
            per_query: dict[str, Any] = {}

            queries = [*corpus.QUERIES, "oauth svc01234", "retry deadlock"]
            with partition_queries():
                for query in queries:
                    meter.reset()
                    hits = store.search(search.parse(query), scopes=[("u1", None)], limit=20)
                    per_query[query] = {"read_units": meter.read, "hits": len(hits)}
            two = [q for q in queries if len(q.split()) == 2 and ":" not in q and "*" not in q]
            out["search"][str(size)] = {
                "seed_seconds": round(seconds, 1),
                "per_query": per_query,
                "two_words_most": max(per_query[q]["read_units"] for q in two),
                "median": statistics.median(v["read_units"] for v in per_query.values()),
                "most": max(v["read_units"] for v in per_query.values()),
            }
            print(f"search at {size}: {out['search'][str(size)]}", file=sys.stderr)
    return out


def monthly(out: dict[str, Any]) -> dict[str, float]:
    """What a month of DynamoDB costs for three shapes of use (pushes and reads a day)."""
    ops = out["ops"]
    push = ops["push (new 3 KB packet)"]
    repush = ops["push (changed text)"]
    get = ops["get"]
    listing = ops["list (50)"]
    found = max(v["median"] for v in out["search"].values())
    shapes = {
        # a person: 10 pushes (half of them new packets), 40 reads a day
        "one user": (1, 10, 40),
        # a team of 50, each as above
        "50-person team": (50, 10, 40),
        # a large deployment: 10,000 users of 50 pushes and 200 reads a day
        "10,000 users": (10_000, 50, 200),
    }
    result: dict[str, float] = {}
    for name, (users, pushes, reads) in shapes.items():
        writes = users * pushes * DAYS * (push["write_units"] + repush["write_units"]) / 2
        read_units = users * pushes * DAYS * (push["read_units"] + repush["read_units"]) / 2
        # reads: a third each of gets, listings and searches
        per_read = (get["read_units"] + listing["read_units"] + found) / 3
        read_units += users * reads * DAYS * per_read
        new_packets = users * pushes * DAYS / 2
        stored_gb = new_packets * out["stored_bytes"] / 1e9  # what one month adds
        result[f"{name}: $/month, requests"] = round(
            writes * WRITE_PRICE + read_units * READ_PRICE, 2
        )
        result[f"{name}: $/month more each month, storage"] = round(stored_gb * STORAGE_PRICE, 2)
    return result


def figures(out: dict[str, Any]) -> list[Figure]:
    """The budgets' figures (BENCHMARKS.md has room for few; the rest is printed as JSON,
    and docs/deploy-aws.md's cost section is written from it)."""
    ratio = out["stored_bytes"] / out["packet_bytes"]
    figs = [
        Figure("new 3 KB packet: its bytes", out["packet_bytes"], "bytes"),
        Figure(
            "new 3 KB packet: write units (the consumer's included)",
            out["ops"]["push (new 3 KB packet)"]["write_units"],
            "WRU",
            target=40,
        ),
        Figure(
            "new 3 KB packet: bytes stored",
            out["stored_bytes"],
            "bytes",
            baseline="new 3 KB packet: its bytes",
            ratio=round(ratio, 2),
            ratio_target=3,
        ),
    ]
    for size, s in out["search"].items():
        figs.append(
            Figure(
                f"2-word search, {int(size):,} packets: read units, most",
                s["two_words_most"],
                "RRU",
                target=60,
            )
        )
    return figs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    out = measure([int(s) for s in args.sizes.split(",") if s])
    out["monthly"] = monthly(out)  # the arithmetic docs/deploy-aws.md shows
    print(json.dumps(out, indent=2))
    record("dynamo_cost", figures(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
