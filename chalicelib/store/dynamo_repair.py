"""Repair what the DynamoDB store derives: the search index, the usage counters and
the display-name claims.

    python -m ltm.store.dynamo_repair index [--scope u:ID|t:ID] [--resume TOKEN]
    python -m ltm.store.dynamo_repair usage [--user ID ...]
    python -m ltm.store.dynamo_repair names [--resume TOKEN]

Both are safe while the service serves, and both are the migration for a table
from before the stream consumer (postings of every word, no revisions, usage
counted outside the packet's transaction): run ``index``, then ``usage``.

``index`` reads the table page by page (a Scan; ``--scope`` keeps one scope's
items) and makes each page right: every packet gets the postings and facets it
derives (puts are idempotent) and loses its pending entry once they are there;
a posting, facet or pending entry no packet derives any more is deleted; a
team whose deletion has not ended (a packet left in it, or its tombstone not
marked done) has its fan-out run to its end, and a member's departure whose
clean-up has not ended is finished (its invites and publications end). Each
team packet gets its team mark (``dynamo_fanout.py``; one stored before marks
has none), and a mark whose packet is gone is deleted. A
concurrent push is never undone: after deleting, the packets concerned are read
again, and any whose revision moved meanwhile gets its index written once more.
After each page it prints a resume token (``--resume``): a run cut short goes on
from there.

``usage`` recounts what each user owns: their packets, and the bytes each
occupies as a push counts it (``DynamoStore.occupied``). A counter carries
``writes``, which every write of the user's packets bumps in the same
transaction; the recount reads the counters, counts the packets (a strongly
consistent Scan), and sets each counter only where ``writes`` did not move
meanwhile. A user written to
during the count is reported; run it again for them.

``names`` is the migration for a table from before display names were claimed
without regard to case (``NAME#`` items, ``name_key``): every user gets the claim
on their name, each in a transaction with a check that the user still goes by
it (a rename meanwhile claimed the new one); a claim no user goes by any more
is deleted the same way. Where two users already go by one name in different
cases (``Sam`` and ``sam``), the first found keeps the claim and the others are
listed (``duplicates``): nobody new can take that name, and each of them can
move to another with ``ltm profile --display NAME``. Resumable like ``index``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

from . import name_key
from .dynamo import (
    DEFAULT_TABLE,
    DynamoStore,
    Item,
    _Cancelled,
    _key,
    _name_item,
    _packet_meta,
    _put_new,
    make_client,
)
from .dynamo_search import image_index, pending_key, scope_name


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _pages(
    store: DynamoStore, start: Item | None, **kwargs: Any
) -> Iterator[tuple[list[Item], Item | None]]:
    """The table's items, a Scan page at a time, with where the next page starts."""
    if start is not None:
        kwargs["ExclusiveStartKey"] = start
    while True:
        resp = store.client.scan(TableName=store.table, ConsistentRead=True, **kwargs)
        last = resp.get("LastEvaluatedKey")
        yield cast("list[Item]", resp.get("Items", [])), cast("Item | None", last)
        if not last:
            return
        kwargs["ExclusiveStartKey"] = last


def _token(key: Item | None) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode() if key else ""


def _untoken(token: str | None) -> Item | None:
    return json.loads(base64.urlsafe_b64decode(token.encode())) if token else None


def _scope_of_key(pk: str) -> str | None:
    """The scope a posting, facet or pending entry belongs to (``u:..``/``t:..``)."""
    for head in ("T#", "TERM#", "FACET#", "PEND#"):  # TERM#: postings of the older design
        if pk.startswith(head):
            return "#".join(pk[len(head) :].split("#")[:1]) or None
    return None


def _packet_of(pk: str, sk: str) -> str:
    return sk.rsplit("#", 1)[-1]


def _pending_of(packet: Item) -> tuple[str, str]:
    """Where the packet's own pending entry is (another one is an older revision's)."""
    meta = _packet_meta(packet)
    key = pending_key(scope_name(meta.owner_id, meta.team_id), packet["sort_key"]["S"], meta.id)
    return key["pk"]["S"], key["sk"]["S"]


def repair_index(
    store: DynamoStore,
    *,
    scope: str | None = None,
    resume: str | None = None,
    say: Any = print,
    page_size: int | None = None,
) -> dict[str, int]:
    """Make every page of derived items right; returns what it did (counts)."""
    done: Counter[str] = Counter()
    teams_gone: set[str] = set()
    departures: set[tuple[str, str]] = set()
    kwargs: dict[str, Any] = {"Limit": page_size} if page_size else {}
    if scope is not None:
        # One scope's packets (gsi1pk) and its derived items (their partition keys).
        kwargs["FilterExpression"] = (
            "#g = :g OR begins_with(#pk, :t) OR begins_with(#pk, :f) OR #pk = :p"
        )
        kwargs["ExpressionAttributeNames"] = {"#g": "gsi1pk", "#pk": "pk"}
        kwargs["ExpressionAttributeValues"] = {
            ":g": _s(f"SCOPE#{scope}"),
            ":t": _s(f"T#{scope}#"),
            ":f": _s(f"FACET#{scope}#"),
            ":p": _s(f"PEND#{scope}"),
        }
    for items, last in _pages(store, _untoken(resume), **kwargs):
        _repair_page(store, items, done, teams_gone)
        teams_gone.update(_unfinished_deletes(items))
        departures.update(_unfinished_departures(items))
        say(f"page done ({dict(done)}); resume with --resume {_token(last)}" if last else "")
    for team_id in sorted(teams_gone):
        if store.finish_team_delete(team_id):  # runs that team's fan-out to its end
            done["teams resumed"] += 1
    for team_id, user_id in sorted(departures):
        if store.finish_departure(team_id, user_id):
            done["departures resumed"] += 1
    if scope is None:  # the whole table (a resumed run: its first part ran before)
        store.mark_repaired("index")
    return dict(done)


def _unfinished_deletes(items: list[Item]) -> set[str]:
    """The teams whose deletion has not ended (their tombstones), whatever of theirs is
    left: their stream records may be lost, so the repair finishes them."""
    return {
        i["pk"]["S"].removeprefix("TEAM#")
        for i in items
        if i["pk"]["S"].startswith("TEAM#") and i["sk"]["S"] == "GONE" and "done" not in i
    }


def _unfinished_departures(items: list[Item]) -> set[tuple[str, str]]:
    """The departures whose clean-up has not ended (their marks, ``dynamo_fanout.py``):
    their stream records may be lost, so the repair finishes them."""
    return {
        (i["pk"]["S"].removeprefix("TEAM#"), i["sk"]["S"].removeprefix("LEFT#"))
        for i in items
        if i["pk"]["S"].startswith("TEAM#") and i["sk"]["S"].startswith("LEFT#") and "done" not in i
    }


def _repair_page(
    store: DynamoStore, items: list[Item], done: Counter[str], teams_gone: set[str]
) -> None:
    packets = {i["pk"]["S"].removeprefix("PKT#"): i for i in items if i["sk"]["S"] == "PKT"}
    derived = [i for i in items if _scope_of_key(i["pk"]["S"]) is not None]
    # The packets the derived items of this page belong to, as they are now.
    wanted = {_packet_of(i["pk"]["S"], i["sk"]["S"]) for i in derived} - set(packets)
    current = dict(packets)
    keys = [_key(f"PKT#{pid}", "PKT") for pid in sorted(wanted)]
    for start in range(0, len(keys), 100):
        for item in store._batch_get(keys[start : start + 100]):
            current[item["pk"]["S"].removeprefix("PKT#")] = item
    expected: dict[tuple[str, str], Item] = {}
    for item in current.values():
        expected.update(image_index(item))
    # 1. every packet of the page derives all it should (idempotent puts)
    puts: list[Item] = []
    for item in packets.values():
        team = item.get("team_id", {}).get("S")
        if team is not None:
            if store._get_item(_key(f"TEAM#{team}", "TEAM")) is None:
                teams_gone.add(team)
            else:
                # Its team mark (one stored before marks has none): read first, put only
                # if missing, as the consumer does for a change within the team.
                store.keep_in_team(item, item)
        puts.extend(image_index(item).values())
    store._batch_write(puts, [])
    done["index items put"] += len(puts)
    # 2. what no packet derives any more goes; pending entries once indexed
    stale: list[Item] = []
    for item in derived:
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        if pk.startswith("PEND#"):
            packet = current.get(_packet_of(pk, sk))
            if (
                packet is None
                or packet.get("rev") == item.get("rev")
                or _pending_of(packet) != (pk, sk)
            ):
                if packet is not None:
                    store._batch_write(list(image_index(packet).values()), [])
                with contextlib.suppress(store.client.exceptions.ConditionalCheckFailedException):
                    store.client.delete_item(
                        TableName=store.table,
                        Key=_key(pk, sk),
                        ConditionExpression="#r = :r",
                        ExpressionAttributeNames={"#r": "rev"},
                        ExpressionAttributeValues={":r": item.get("rev", _s(""))},
                    )
                done["pending cleared"] += 1
        elif (pk, sk) not in expected:
            stale.append(_key(pk, sk))
    stale.extend(_stale_marks(store, items))
    store._batch_write([], stale)
    done["stale items deleted"] += len(stale)
    # 3. a push that landed meanwhile keeps its index: read those packets again
    touched = {_packet_of(k["pk"]["S"], k["sk"]["S"]) for k in stale}
    keys = [_key(f"PKT#{pid}", "PKT") for pid in sorted(touched)]
    for start in range(0, len(keys), 100):
        for item in store._batch_get(keys[start : start + 100]):
            before = current.get(item["pk"]["S"].removeprefix("PKT#"))
            if before is None or before.get("rev") != item.get("rev"):
                store._batch_write(list(image_index(item).values()), [])
                done["rewritten after a concurrent push"] += 1


def _stale_marks(store: DynamoStore, items: list[Item]) -> list[Item]:
    """The team marks of this page whose packet is gone or in no such team (their REMOVE
    records lost). A packet of that id pushed into that team again as this runs gets its
    mark back from its own record, or from the next run."""
    marks = [
        _key(i["pk"]["S"], i["sk"]["S"])
        for i in items
        if i["pk"]["S"].startswith("TEAM#") and i["sk"]["S"].startswith("PKT#")
    ]
    if not marks:
        return []
    keys = [_key(m["sk"]["S"], "PKT") for m in marks]
    kept: set[tuple[str, str]] = set()
    for start in range(0, len(keys), 100):
        for item in store._batch_get(keys[start : start + 100]):
            if "team_id" in item:
                kept.add((f"TEAM#{item['team_id']['S']}", item["pk"]["S"]))
    return [m for m in marks if (m["pk"]["S"], m["sk"]["S"]) not in kept]


def repair_usage(
    store: DynamoStore, *, users: list[str] | None = None, say: Any = print
) -> dict[str, list[str]]:
    """Recount usage; returns the users set, unchanged, and written to during the count."""
    only = set(users) if users else None
    # The counters first (their ``writes``), then the packets, strongly consistent.
    counters: dict[str, Item] = {}
    for items, _ in _pages(
        store,
        None,
        FilterExpression="#sk = :u",
        ExpressionAttributeNames={"#sk": "sk"},
        ExpressionAttributeValues={":u": _s("USAGE")},
    ):
        for item in items:
            user = item["pk"]["S"].removeprefix("USAGE#")
            if only is None or user in only:
                counters[user] = item
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for items, _ in _pages(
        store,
        None,
        FilterExpression="#sk = :p",
        ExpressionAttributeNames={"#sk": "sk"},
        ExpressionAttributeValues={":p": _s("PKT")},
    ):
        for item in items:
            owner = item["owner_id"]["S"]
            if only is None or owner in only:
                counts[owner] += 1
                sizes[owner] += store._occupied_item(item)
    result: dict[str, list[str]] = {"set": [], "unchanged": [], "busy": []}
    for user in sorted(set(counters) | set(counts) | (only or set())):
        old = counters.get(user)
        now = (counts[user], sizes[user])
        if old is not None and (int(old["packets"]["N"]), int(old["bytes"]["N"])) == now:
            result["unchanged"].append(user)
            continue
        if old is None:
            condition = "attribute_not_exists(#pk)"
            values: Item = {}
        elif "writes" in old:
            condition = "#w = :w"
            values = {":w": old["writes"]}
        else:
            condition = "attribute_not_exists(#w) AND #n = :n AND #b = :b"
            values = {":n": old["packets"], ":b": old["bytes"]}
        names = {"#pk": "pk", "#w": "writes", "#n": "packets", "#b": "bytes"}
        used = {k: v for k, v in names.items() if k in condition or k in ("#n", "#b")}
        try:
            store.client.update_item(
                TableName=store.table,
                Key=_key(f"USAGE#{user}", "USAGE"),
                UpdateExpression="SET #n = :cn, #b = :cb",
                ConditionExpression=condition,
                ExpressionAttributeNames=used,
                ExpressionAttributeValues={
                    **values,
                    ":cn": {"N": str(now[0])},
                    ":cb": {"N": str(now[1])},
                },
            )
            result["set"].append(user)
        except store.client.exceptions.ConditionalCheckFailedException:
            result["busy"].append(user)
            say(f"{user}: written to during the count; run again for them (--user {user})")
    if only is None and not result["busy"]:
        # Every counter is right. (A run for the busy users alone, after, does not record
        # it: the record says a whole recount ended clean, so the next one does.)
        store.mark_repaired("usage")
    return result


def repair_names(
    store: DynamoStore,
    *,
    resume: str | None = None,
    say: Any = print,
    page_size: int | None = None,
) -> dict[str, Any]:
    """Claim every user's display name, drop claims nobody goes by; returns the counts
    and the ``duplicates`` (``{"user_id", "display", "held_by"}``: a name another holds)."""
    done: Counter[str] = Counter()
    duplicates: list[dict[str, str]] = []
    kwargs: dict[str, Any] = {
        "FilterExpression": "#sk IN (:u, :n)",
        "ExpressionAttributeNames": {"#sk": "sk"},
        "ExpressionAttributeValues": {":u": _s("USER"), ":n": _s("NAME")},
    }
    if page_size:
        kwargs["Limit"] = page_size
    for items, last in _pages(store, _untoken(resume), **kwargs):
        # The oldest first, within a page, as the SQLite store's migration claims them.
        users = sorted(
            (i for i in items if i["sk"]["S"] == "USER"),
            key=lambda i: (i.get("created_at", _s(""))["S"], i["pk"]["S"]),
        )
        for user in users:
            _claim(store, user, done, duplicates, say)
        for claim in (i for i in items if i["sk"]["S"] == "NAME"):
            _drop_if_stale(store, claim, done)
        say(f"page done ({dict(done)}); resume with --resume {_token(last)}" if last else "")
    return {**done, "duplicates": duplicates}


def _goes_by(user_id: str, display: str | None) -> dict[str, Any]:
    """A transaction's check that the user still goes by ``display`` (None: is still gone)."""
    check: dict[str, Any] = {
        "Key": _key(f"USER#{user_id}", "USER"),
        "ConditionExpression": "attribute_not_exists(#d)",
        "ExpressionAttributeNames": {"#d": "display"},
    }
    if display is not None:
        check["ConditionExpression"] = "#d = :d"
        check["ExpressionAttributeValues"] = {":d": _s(display)}
    return {"ConditionCheck": check}


def _claim(
    store: DynamoStore,
    user: Item,
    done: Counter[str],
    duplicates: list[dict[str, str]],
    say: Any,
) -> None:
    user_id, display = user["user_id"]["S"], user.get("display", _s(""))["S"]
    try:
        store._transact([_put_new(_name_item(display, user_id)), _goes_by(user_id, display)])
        done["claimed"] += 1
        return
    except _Cancelled as cancelled:
        if not cancelled.failed(0):
            done["renamed meanwhile"] += 1  # the rename claimed the new name itself
            return
    held = store._get_item(_key(f"NAME#{name_key(display)}", "NAME"))
    holder = held["user_id"]["S"] if held is not None else ""
    if holder == user_id:
        done["claimed already"] += 1
        return
    duplicates.append({"user_id": user_id, "display": display, "held_by": holder})
    say(
        f"user {user_id} goes by {display!r}, a name user {holder} holds (in another case);"
        " one of them can take another: ltm profile --display NAME"
    )


def _drop_if_stale(store: DynamoStore, claim: Item, done: Counter[str]) -> None:
    """Delete a claim whose user is gone or goes by another name now."""
    key, user_id = claim["pk"]["S"].removeprefix("NAME#"), claim["user_id"]["S"]
    user = store._get_item(_key(f"USER#{user_id}", "USER"))
    display = user.get("display", _s(""))["S"] if user is not None else None
    if display is not None and name_key(display) == key:
        return
    delete: dict[str, Any] = {
        "Delete": {
            "Key": _key(claim["pk"]["S"], "NAME"),
            "ConditionExpression": "#u = :u",
            "ExpressionAttributeNames": {"#u": "user_id"},
            "ExpressionAttributeValues": {":u": _s(user_id)},
        }
    }
    with contextlib.suppress(_Cancelled):  # changed meanwhile: that change is right
        store._transact([delete, _goes_by(user_id, display)])
        done["stale claims deleted"] += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ltm.store.dynamo_repair",
        description=(
            "Repair the search index, usage counters and display-name claims of the ltm"
            " DynamoDB table."
        ),
    )
    parser.add_argument(
        "--table", default=os.environ.get("LTM_DYNAMODB_TABLE", DEFAULT_TABLE), help="table name"
    )
    parser.add_argument("--region", default=None, help="AWS region (default: the environment)")
    sub = parser.add_subparsers(dest="command", required=True)
    index = sub.add_parser("index", help="rewrite the search index from the packets")
    index.add_argument("--scope", help="one scope only: u:<user id> or t:<team id>")
    index.add_argument("--resume", help="the token a cut-short run printed last")
    usage = sub.add_parser("usage", help="recount what each user owns")
    usage.add_argument("--user", action="append", help="only this user (repeatable)")
    names = sub.add_parser("names", help="claim every user's display name (in any case)")
    names.add_argument("--resume", help="the token a cut-short run printed last")
    args = parser.parse_args(argv)
    store = DynamoStore(args.table, client=make_client(args.region or os.environ.get("AWS_REGION")))

    def say(line: str) -> None:
        if line:
            print(line, file=sys.stderr)

    if args.command == "index":
        if args.scope is not None and not args.scope.startswith(("u:", "t:")):
            parser.error("--scope is u:<user id> or t:<team id>")
        done = repair_index(store, scope=args.scope, resume=args.resume, say=say)
        print(json.dumps(done, sort_keys=True))
    elif args.command == "names":
        print(json.dumps(repair_names(store, resume=args.resume, say=say), sort_keys=True))
    else:
        result = repair_usage(store, users=args.user, say=say)
        print(json.dumps(result, sort_keys=True))
        if result["busy"]:
            return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
