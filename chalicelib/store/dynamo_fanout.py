"""A team's deletion on DynamoDB: one transaction, then a resumable job that finishes.

The request's transaction deletes the team's two items and puts its tombstone
(``TEAM#<id>`` / ``GONE``): from then the name is free, the team cannot be
loaded, and no push lands in it (a team push checks, in its own transaction,
that the tombstone is absent). What hung off the team goes page by page, in
this order, so nobody reads a team packet from the first moment on:

1. memberships (their three copies: under the team's id, its name, the user);
2. invites;
3. packets, 25 per transaction, each conditioned on the revision read, with
   their authors' usage in the same transaction (so usage falls by exactly
   what was deleted, even if two workers race); then their publications and
   shares; their search postings go with the stream consumer (REMOVE records);
4. what is left in the team's partition (the tombstone stays, marked done,
   and TTL removes it a day later).

The request runs ``INLINE_PAGES`` pages (a small team is gone when it answers).
The rest is the stream consumer's: the tombstone's INSERT starts it, and each
step of ``STEP_PAGES`` pages ends by bumping the tombstone's ``step``, whose
MODIFY record starts the next. A step runs only for the record carrying the
tombstone's current step, so a redelivered record starts no second chain; a
crash (a Lambda timeout) retries the record, which resumes from what is left.
Every page reads what is still there, so the job is idempotent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dynamo import Item

INLINE_PAGES = 8  # pages a delete request runs itself (~200 packets: well inside 20 s)
STEP_PAGES = 40  # pages one consumer step runs before handing over to the next
PACKETS_PER_PAGE = 25  # deletes (+ their authors' usage) per transaction: at most 100 actions
TOMBSTONE_TTL = timedelta(days=1)


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _key(pk: str, sk: str) -> dict[str, dict[str, str]]:
    return {"pk": _s(pk), "sk": _s(sk)}


class TeamDeleteMixin:
    """``delete_team`` and its fan-out for ``DynamoStore``."""

    table: str
    client: Any

    if TYPE_CHECKING:
        _exc: Any

        def _get_item(self, key: Item) -> Item | None: ...
        def _query(self, **kwargs: Any) -> Iterator[Item]: ...
        def _batch_get(self, keys: list[Item], *, consistent: bool = True) -> list[Item]: ...
        def _batch_delete(self, keys: list[Item]) -> None: ...
        def _transact(self, actions: list[dict[str, Any]]) -> None: ...
        def _usage_action(
            self, user_id: str, packets: int, size: int, *, hold: bool
        ) -> dict[str, Any] | None: ...
        def _end_shares(self, old: Mapping[str, Mapping[str, Any]] | None) -> None: ...
        def _occupied_item(self, item: Mapping[str, Mapping[str, Any]]) -> int: ...

    def delete_team(self, team_id: str) -> None:
        from .dynamo import _Cancelled, _req

        team_item = self._get_item(_key(f"TEAM#{team_id}", "TEAM"))
        if team_item is not None:
            name = _req(team_item, "team_name")
            tombstone = {
                **_key(f"TEAM#{team_id}", "GONE"),
                "team_name": _s(name),
                "step": {"N": "0"},
            }
            with contextlib.suppress(_Cancelled):  # deleted meanwhile: the other one runs it
                self._transact(
                    [
                        {
                            "Delete": {
                                "Key": _key(f"TEAM#{team_id}", "TEAM"),
                                "ConditionExpression": "attribute_exists(#pk)",
                                "ExpressionAttributeNames": {"#pk": "pk"},
                            }
                        },
                        {
                            "Delete": {
                                "Key": _key(f"TEAMNAME#{name}", "TEAM"),
                                "ConditionExpression": "attribute_not_exists(#pk) OR #t = :t",
                                "ExpressionAttributeNames": {"#pk": "pk", "#t": "team_id"},
                                "ExpressionAttributeValues": {":t": _s(team_id)},
                            }
                        },
                        {"Put": {"Item": tombstone}},
                    ]
                )
        elif self._get_item(_key(f"TEAM#{team_id}", "GONE")) is None:
            return  # no such team, and none being deleted
        self._fan_out(team_id, INLINE_PAGES)

    def team_delete_step(self, team_id: str, step: int) -> None:
        """One step of the fan-out (the stream consumer's, for the tombstone's record)."""
        tombstone = self._get_item(_key(f"TEAM#{team_id}", "GONE"))
        if tombstone is None or "done" in tombstone or int(tombstone["step"]["N"]) != step:
            return  # finished, or a redelivered record of an earlier step
        if self._fan_out(team_id, STEP_PAGES):
            return
        with contextlib.suppress(self._exc.ConditionalCheckFailedException):
            self.client.update_item(
                TableName=self.table,
                Key=_key(f"TEAM#{team_id}", "GONE"),
                UpdateExpression="SET #step = :next",
                ConditionExpression="#step = :step AND attribute_not_exists(#done)",
                ExpressionAttributeNames={"#step": "step", "#done": "done"},
                ExpressionAttributeValues={
                    ":step": {"N": str(step)},
                    ":next": {"N": str(step + 1)},
                },
            )

    def _fan_out(self, team_id: str, pages: int) -> bool:
        """Up to ``pages`` pages of the deletion; whether it is finished (and marked so)."""
        from .dynamo import TTL_ATTRIBUTE, _epoch

        for phase in (self._members_page, self._invites_page, self._packets_page, self._rest_page):
            while phase(team_id):  # a page done; an empty one ends the phase
                pages -= 1
                if pages <= 0:
                    return False
        with contextlib.suppress(self._exc.ConditionalCheckFailedException):
            self.client.update_item(
                TableName=self.table,
                Key=_key(f"TEAM#{team_id}", "GONE"),
                UpdateExpression="SET #done = :t, #ttl = :ttl",
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#done": "done", "#ttl": TTL_ATTRIBUTE, "#pk": "pk"},
                ExpressionAttributeValues={
                    ":t": {"BOOL": True},
                    ":ttl": _epoch(datetime.now(UTC) + TOMBSTONE_TTL),
                },
            )
        return True

    def _page(self, **kwargs: Any) -> list[Item]:
        resp = self.client.query(TableName=self.table, Limit=PACKETS_PER_PAGE, **kwargs)
        return list(resp.get("Items", []))

    def _members_page(self, team_id: str) -> bool:
        """Delete a page of memberships; whether there was one."""
        from .dynamo import _member_keys, _req, _team

        items = self._page(
            KeyConditionExpression="#p = :p AND begins_with(#s, :m)",
            ExpressionAttributeNames={"#p": "pk", "#s": "sk"},
            ExpressionAttributeValues={":p": _s(f"TEAM#{team_id}"), ":m": _s("MEMBER#")},
            ConsistentRead=True,
        )
        keys: list[Item] = []
        for item in items:
            by_id, by_name, by_user = _member_keys(_team(item), _req(item, "user_id"))
            # The name may belong to a new team by now: its copy goes only if ours.
            with contextlib.suppress(self._exc.ConditionalCheckFailedException):
                self.client.delete_item(
                    TableName=self.table,
                    Key=by_name,
                    ConditionExpression="#t = :t",
                    ExpressionAttributeNames={"#t": "team_id"},
                    ExpressionAttributeValues={":t": _s(team_id)},
                )
            keys.extend([by_user, by_id])  # the authoritative copy last: a crash retries
        self._batch_delete(keys)
        return bool(items)

    def _invites_page(self, team_id: str) -> bool:
        from .dynamo import _req

        items = self._page(
            IndexName="gsi2",
            KeyConditionExpression="#p = :p",
            ExpressionAttributeNames={"#p": "gsi2pk"},
            ExpressionAttributeValues={":p": _s(f"INVITES#{team_id}")},
        )
        self._batch_delete([_key(_req(i, "pk"), _req(i, "sk")) for i in items])
        return bool(items)

    def _packets_page(self, team_id: str) -> bool:
        """Delete a page of the team's packets, with their authors' usage, in one transaction."""
        from .dynamo import _Cancelled, _get, _req, _unchanged

        listed = self._page(
            IndexName="gsi1",
            KeyConditionExpression="#p = :p",
            ExpressionAttributeNames={"#p": "gsi1pk"},
            ExpressionAttributeValues={":p": _s(f"SCOPE#t:{team_id}")},
            ScanIndexForward=True,  # oldest first
        )
        if not listed:
            return False
        keys = [_key(_req(i, "pk"), _req(i, "sk")) for i in listed]
        # The index trails the table: read each packet as it is now.
        found = [i for i in self._batch_get(keys) if _get(i, "team_id") == team_id]
        if not found:
            return True  # the index has not caught up with deletes yet: list again
        owed: dict[str, tuple[int, int]] = {}
        actions: list[dict[str, Any]] = []
        for item in found:
            key = _key(_req(item, "pk"), _req(item, "sk"))
            actions.append({"Delete": {"Key": key, **_unchanged(item)}})
            count, size = owed.get(_req(item, "owner_id"), (0, 0))
            owed[_req(item, "owner_id")] = (count + 1, size + self._occupied_item(item))
        for owner, (count, size) in owed.items():
            usage = self._usage_action(owner, -count, -size, hold=False)
            assert usage is not None
            actions.append(usage)
        try:
            self._transact(actions)
        except _Cancelled:
            return True  # one changed meanwhile (or a racing worker): read the page again
        hashes = [_get(i, "public_hash") for i in found]
        public = [_key(f"PUBLIC#{h}", "PUBLIC") for h in hashes if h is not None]
        self._batch_delete(public)
        for item in found:
            self._end_shares(item)
        return True

    def _rest_page(self, team_id: str) -> bool:
        from .dynamo import _req

        items = [
            i
            for i in self._page(
                KeyConditionExpression="#p = :p",
                ExpressionAttributeNames={"#p": "pk"},
                ExpressionAttributeValues={":p": _s(f"TEAM#{team_id}")},
                ConsistentRead=True,
            )
            if _req(i, "sk") != "GONE"
        ]
        self._batch_delete([_key(_req(i, "pk"), _req(i, "sk")) for i in items])
        return bool(items)
