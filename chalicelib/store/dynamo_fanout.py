"""What outgrows one request on DynamoDB: one transaction, then a resumable job.

Two jobs, one mechanism: a team's deletion and a member's departure. Each starts
with one transaction that takes the access away and writes the job's mark; then
pages of clean-up, each of which reads what is still there, so any page may run
twice, or two workers at once.

**A team's deletion.** The request's transaction deletes the team's two items and
puts its tombstone (``TEAM#<id>`` / ``GONE``): from then the name is free, the team
cannot be loaded, and no push lands in it (a team push checks, in its own
transaction, that the tombstone is absent). What hung off the team goes page by
page, in this order, so nobody reads a team packet from the first moment on:

1. memberships (their three copies: under the team's id, its name, the user);
2. invites;
3. packets, 25 per transaction, each conditioned on the revision read, with
   their authors' usage in the same transaction (so usage falls by exactly
   what was deleted, even if two workers race); then their publications and
   shares; their search postings go with the stream consumer (REMOVE records).
   They are listed twice over: on gsi1 (every packet, but the index trails the
   table), then by their *team marks* (``TEAM#<id>`` / ``PKT#<packet id>``, read
   strongly consistent), which the stream consumer puts for each team packet;
4. what is left in the team's partition (the tombstone stays, marked done,
   and TTL removes it a day later).

**A push the instant before the deletion.** The push's transaction checks the
tombstone absent, so it commits before the deletion's transaction or not at all
(both touch the tombstone: DynamoDB serializes them). A packet that did commit
first is found by one of two paths, whichever order the rest happens in
(``keep_in_team``, run by the consumer for every team packet's INSERT and MODIFY):

- the consumer's record comes before the deletion: its mark is put in a
  transaction that checks the team item exists, which the deletion's transaction
  deletes, so the mark is committed before the deletion's transaction and the
  fan-out's strongly consistent read of the marks (which starts after it) finds it,
  however far gsi1 trails;
- the record comes after: that check fails, and the consumer deletes the packet
  itself (its current item, conditioned on its revision, with its author's usage:
  the fan-out racing it deletes it once, whichever wins). A record redelivered or
  late finds the packet gone and does nothing.

So no ordering of push, deletion, fan-out page, gsi1 and consumer leaves a packet
in a deleted team; packets from before the marks (none of them that recent) are
listed on gsi1, and the repair (``dynamo_repair.py``) still finds any whose team
is gone. A mark is the team's bookkeeping, not counted in what the packet occupies
(``DynamoStore.occupied``): some 170 bytes per team packet; a packet's REMOVE
record deletes it.

**A member's departure** (``remove_member``: kicked or left). The request's
transaction deletes the membership's three copies and puts the departure mark
(``TEAM#<id>`` / ``LEFT#<user>``), which carries what older memberships recorded in
string sets (``published_made``, ``invites_made``: unbounded, so not ended in the
request). From then the member has no access, publishes and invites nothing (both
check the membership in their own transaction), their invites are refused
(accepting checks the maker's membership in its transaction) and their public
links are dead (a team packet's public read checks its publisher's membership).
Rejoining waits until the mark is done (joining checks it in its transaction), so
all the job finds is from before the departure. Page by page:

1. the publications in the mark's ``published_made``, each page ending those the
   member made and taking their ids off the mark, in one transaction;
2. the invites in its ``invites_made``, likewise;
3. the member's ``PUBLISHED#`` items: each page ends those publications (only if
   the member made them: another's publication of the packet stays) and deletes
   the items in one transaction, so a retry never starts over;
4. the member's ``MADE#`` items, with their invites (the invites first).

**How either runs.** The request runs ``INLINE_PAGES`` pages (a small team, or a
member with a few hundred publications and invites, is done when it answers).
The rest is the stream consumer's: the mark's INSERT starts it, and each step of
``STEP_PAGES`` pages ends by bumping the mark's ``step``, whose MODIFY record starts
the next. A step runs only for the record that moved the mark's ``step`` to the
value it still has, so a redelivered record, or one of an earlier step, starts no
second chain; a crash (a Lambda timeout) retries the record, which resumes from
what is left. A departure's ``step`` goes on counting across departures of the
same member, so a late record of an earlier one is a no-op too. When nothing is
left the mark is marked ``done`` with a TTL a day ahead.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dynamo import Item

INLINE_PAGES = 8  # pages a request runs itself (~200 packets: well inside 20 s)
STEP_PAGES = 40  # pages one consumer step runs before handing over to the next
PACKETS_PER_PAGE = 25  # deletes (+ their authors' usage) per transaction: at most 100 actions
TOMBSTONE_TTL = timedelta(days=1)

Phase = Callable[[], bool]  # runs one page; whether there was one (an empty page ends it)

logger = logging.getLogger("ltm.store")


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _key(pk: str, sk: str) -> dict[str, dict[str, str]]:
    return {"pk": _s(pk), "sk": _s(sk)}


def team_mark(team_id: str, packet_id: str) -> dict[str, dict[str, str]]:
    """A team packet's mark in its team's partition (put by the stream consumer)."""
    return _key(f"TEAM#{team_id}", f"PKT#{packet_id}")


def departure_key(team_id: str, user_id: str) -> dict[str, dict[str, str]]:
    """A member's departure mark, in the team's partition."""
    return _key(f"TEAM#{team_id}", f"LEFT#{user_id}")


def ours(team_id: str) -> dict[str, Any]:
    """The condition on an item under a team's name: absent, or this team's (the name
    may belong to a newer team by now, whose items stay)."""
    return {
        "ConditionExpression": "attribute_not_exists(#pk) OR #t = :t",
        "ExpressionAttributeNames": {"#pk": "pk", "#t": "team_id"},
        "ExpressionAttributeValues": {":t": _s(team_id)},
    }


def update_existing(key: Item, expression: str, field: str, value: Any) -> dict[str, Any]:
    """A transactional Update of one attribute (``#f``, by ``:v``) of an item that must
    exist (an Update alone would create it)."""
    return {
        "Update": {
            "Key": key,
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(#pk)",
            "ExpressionAttributeNames": {"#f": field, "#pk": "pk"},
            "ExpressionAttributeValues": {":v": value},
        }
    }


class _Jobs:
    """Running a job's phases against its mark (a tombstone, a departure mark)."""

    table: str
    client: Any

    if TYPE_CHECKING:
        _exc: Any

        def _get_item(self, key: Item) -> Item | None: ...
        def _batch_get(self, keys: list[Item], *, consistent: bool = True) -> list[Item]: ...
        def _batch_delete(self, keys: list[Item]) -> None: ...
        def _transact(self, actions: list[dict[str, Any]]) -> None: ...

    def _job_step(self, mark: Item, step: int, phases: Sequence[Phase]) -> None:
        """One step of a job (the stream consumer's, for its mark's record)."""
        item = self._get_item(mark)
        if item is None or "done" in item or int(item["step"]["N"]) != step:
            return  # finished, or a redelivered record of an earlier step
        if self._run_job(mark, phases, STEP_PAGES, step):
            return
        with contextlib.suppress(self._exc.ConditionalCheckFailedException):
            self.client.update_item(
                TableName=self.table,
                Key=mark,
                UpdateExpression="SET #step = :next",
                ConditionExpression="#step = :step AND attribute_not_exists(#done)",
                ExpressionAttributeNames={"#step": "step", "#done": "done"},
                ExpressionAttributeValues={
                    ":step": {"N": str(step)},
                    ":next": {"N": str(step + 1)},
                },
            )

    def _inline(self, mark: Item, phases: Sequence[Phase], step: int | None = None) -> None:
        """A request's own pages of the job it started. The stream consumer runs the job
        from the mark's record whatever happens here, and what the request answers for
        (the team gone, the member out) is done already: a failure of these pages
        (throttled past the SDK's retries, say) is logged, never the request's answer."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._run_job(mark, phases, INLINE_PAGES, step)
        except (BotoCoreError, ClientError) as exc:
            logger.warning("clean-up left to the stream consumer: %s", type(exc).__name__)

    def _finish(self, mark: Item, phases: Sequence[Phase], *, again: bool = False) -> bool:
        """Run an unfinished job to its end (the repair tool's, where its stream records
        were lost); whether there was one. ``again``: a job marked done too, for what it
        left behind."""
        item = self._get_item(mark)
        if item is None or ("done" in item and not again):
            return False
        while not self._run_job(mark, phases, STEP_PAGES, int(item["step"]["N"])):
            pass
        return True

    def _run_job(
        self, mark: Item, phases: Sequence[Phase], pages: int, step: int | None = None
    ) -> bool:
        """Up to ``pages`` pages of a job; whether it is finished (and marked so). With
        ``step``, the mark is marked done only while it is still at that step."""
        from .dynamo import TTL_ATTRIBUTE, _epoch

        for phase in phases:
            while phase():  # a page done; an empty one ends the phase
                pages -= 1
                if pages <= 0:
                    return False
        condition = "attribute_exists(#pk)"
        names = {"#done": "done", "#ttl": TTL_ATTRIBUTE, "#pk": "pk"}
        values: dict[str, Any] = {
            ":t": {"BOOL": True},
            ":ttl": _epoch(datetime.now(UTC) + TOMBSTONE_TTL),
        }
        if step is not None:
            condition += " AND #step = :step"
            names["#step"] = "step"
            values[":step"] = {"N": str(step)}
        with contextlib.suppress(self._exc.ConditionalCheckFailedException):
            self.client.update_item(
                TableName=self.table,
                Key=mark,
                UpdateExpression="SET #done = :t, #ttl = :ttl",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        return True

    def _page(self, **kwargs: Any) -> list[Item]:
        resp = self.client.query(TableName=self.table, Limit=PACKETS_PER_PAGE, **kwargs)
        return list(resp.get("Items", []))


class TeamDeleteMixin(_Jobs):
    """``delete_team`` and its fan-out for ``DynamoStore``."""

    if TYPE_CHECKING:

        def _usage_action(
            self, user_id: str, packets: int, size: int, *, hold: bool
        ) -> dict[str, Any] | None: ...
        def _end_shares(self, old: Mapping[str, Mapping[str, Any]] | None) -> None: ...
        def _occupied_item(self, item: Mapping[str, Mapping[str, Any]]) -> int: ...

    def delete_team(self, team_id: str) -> None:
        from . import Conflict
        from .dynamo import TRANSACTION_ATTEMPTS, _backoff, _Cancelled, _req

        # The phases run only once the tombstone is there: without it they would take the
        # team's members and packets and leave its name, and no stream record to finish.
        for attempt in range(TRANSACTION_ATTEMPTS):
            team_item = self._get_item(_key(f"TEAM#{team_id}", "TEAM"))
            if team_item is None:
                if self._get_item(_key(f"TEAM#{team_id}", "GONE")) is None:
                    return  # no such team, and none being deleted
                break
            name = _req(team_item, "team_name")
            tombstone = {
                **_key(f"TEAM#{team_id}", "GONE"),
                "team_name": _s(name),
                "step": {"N": "0"},
            }
            try:
                self._transact(
                    [
                        {
                            "Delete": {
                                "Key": _key(f"TEAM#{team_id}", "TEAM"),
                                "ConditionExpression": "attribute_exists(#pk)",
                                "ExpressionAttributeNames": {"#pk": "pk"},
                            }
                        },
                        {"Delete": {"Key": _key(f"TEAMNAME#{name}", "TEAM"), **ours(team_id)}},
                        {"Put": {"Item": tombstone}},
                    ]
                )
                break
            except _Cancelled:
                # Deleted meanwhile (read again: the other one's tombstone), or a race with
                # a transaction that checks the team (a push into it, a join) or throttled.
                _backoff(attempt)
        else:
            raise Conflict("the team could not be deleted (concurrent writes); try again")
        self._inline(_key(f"TEAM#{team_id}", "GONE"), self._team_phases(team_id))

    def finish_team_delete(self, team_id: str) -> bool:
        """Run an unfinished team deletion to its end (the repair tool's, where its stream
        records were lost: ``delete_team`` again runs only a request's pages); whether
        there was one. A team whose item is gone but whose packets are left without a
        tombstone (a deletion cut short before deletions had one) gets one first. One
        marked done runs again: the repair comes here for a packet left in the team, which
        the fan-out did not list (one stored before team marks, which gsi1 did not show
        yet when the packets were listed)."""
        mark = _key(f"TEAM#{team_id}", "GONE")
        if self._get_item(_key(f"TEAM#{team_id}", "TEAM")) is not None:
            return False  # not deleted
        with contextlib.suppress(self._exc.ConditionalCheckFailedException):
            self.client.put_item(
                TableName=self.table,
                Item={**mark, "step": {"N": "0"}},
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": "pk"},
            )
        return self._finish(mark, self._team_phases(team_id), again=True)

    def team_delete_step(self, team_id: str, step: int) -> None:
        """One step of the fan-out (the stream consumer's, for the tombstone's record)."""
        self._job_step(_key(f"TEAM#{team_id}", "GONE"), step, self._team_phases(team_id))

    def _team_phases(self, team_id: str) -> list[Phase]:
        return [
            partial(page, team_id)
            for page in (
                self._members_page,
                self._invites_page,
                self._packets_page,
                self._marked_page,
                self._rest_page,
            )
        ]

    def keep_in_team(
        self,
        old: Mapping[str, Mapping[str, Any]] | None,
        new: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """A team packet's INSERT or MODIFY record (the stream consumer's): put its team
        mark while the team exists, or delete the packet if the team is gone (the
        module's docstring says why that covers every ordering of a push racing its
        team's deletion). Idempotent: run twice, or late, it changes nothing more."""
        from .dynamo import _Cancelled, _exists, _get, _req

        team_id = _get(new, "team_id")
        if team_id is None:
            return
        mark = team_mark(team_id, _req(new, "id"))
        if old is not None and _get(old, "team_id") == team_id and self._get_item(mark):
            # Marked already (a re-push, a publication): while the mark exists, a deletion
            # of the team finds the packet by it. One read, not a transaction, per change.
            return
        try:
            self._transact([{"Put": {"Item": mark}}, _exists(_key(f"TEAM#{team_id}", "TEAM"))])
            return
        except _Cancelled as cancelled:
            if not cancelled.failed(1):
                raise  # a lost race or throttled: the record is retried
        logger.warning("a packet pushed into team %s as it was deleted: deleting it", team_id)
        if not self._delete_team_packets(team_id, [_key(f"PKT#{_req(new, 'id')}", "PKT")]):
            # Changed between the read and the delete: the record is retried, and reads again.
            raise RuntimeError(f"packet in deleted team {team_id} changed meanwhile")

    def forget_in_team(self, old: Mapping[str, Mapping[str, Any]]) -> None:
        """A team packet's REMOVE record: its team mark goes too."""
        from .dynamo import _get, _req

        if (team_id := _get(old, "team_id")) is not None:
            self._batch_delete([team_mark(team_id, _req(old, "id"))])

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
        """Delete a page of the team's packets as gsi1 lists them; whether there was one."""
        from .dynamo import _req

        listed = self._page(
            IndexName="gsi1",
            KeyConditionExpression="#p = :p",
            ExpressionAttributeNames={"#p": "gsi1pk"},
            ExpressionAttributeValues={":p": _s(f"SCOPE#t:{team_id}")},
            ScanIndexForward=True,  # oldest first
        )
        if listed:
            # The index trails the table (a packet deleted already may still be listed):
            # a page with nothing left to delete, or one that changed, is listed again.
            self._delete_team_packets(team_id, [_key(_req(i, "pk"), _req(i, "sk")) for i in listed])
        return bool(listed)

    def _marked_page(self, team_id: str) -> bool:
        """Delete a page of the team's packets by their team marks (strongly consistent:
        what gsi1 did not list yet), then the marks; whether there was one."""
        from .dynamo import _req

        marks = self._page(
            KeyConditionExpression="#p = :p AND begins_with(#s, :m)",
            ExpressionAttributeNames={"#p": "pk", "#s": "sk"},
            ExpressionAttributeValues={":p": _s(f"TEAM#{team_id}"), ":m": _s("PKT#")},
            ConsistentRead=True,
        )
        keys = [_key(_req(m, "sk"), "PKT") for m in marks]
        if keys and self._delete_team_packets(team_id, keys):
            self._batch_delete([_key(_req(m, "pk"), _req(m, "sk")) for m in marks])
        return bool(marks)

    def _delete_team_packets(self, team_id: str, keys: list[Item]) -> bool:
        """Delete those of these packets still in the team, with their authors' usage, in
        one transaction, then their publications and shares; whether it was done (not
        cancelled: one changed meanwhile, or a racing worker)."""
        from .dynamo import _Cancelled, _get, _req, _unchanged

        # Read each packet as it is now: the usage taken off is what it occupies.
        found = [i for i in self._batch_get(keys) if _get(i, "team_id") == team_id]
        if not found:
            return True
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
            return False
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


class DepartureMixin(_Jobs):
    """A member's departure's clean-up for ``DynamoStore`` (``remove_member`` starts it)."""

    def departure_step(self, team_id: str, user_id: str, step: int) -> None:
        """One step of a departure's clean-up (the stream consumer's, for its mark's record)."""
        self._job_step(
            departure_key(team_id, user_id), step, self._departure_phases(team_id, user_id)
        )

    def _depart(self, team_id: str, user_id: str, step: int) -> None:
        """The request's pages of a departure's clean-up."""
        phases = self._departure_phases(team_id, user_id)
        self._inline(departure_key(team_id, user_id), phases, step)

    def finish_departure(self, team_id: str, user_id: str) -> bool:
        """Run an unfinished departure's clean-up to its end (the repair tool's, where
        its stream records were lost); whether there was one."""
        return self._finish(
            departure_key(team_id, user_id), self._departure_phases(team_id, user_id)
        )

    def _departure_phases(self, team_id: str, user_id: str) -> list[Phase]:
        return [
            partial(page, team_id, user_id)
            for page in (self._legacy_page, self._published_page, self._made_page)
        ]

    def _mine(self, team_id: str, kind: str, user_id: str) -> list[Item]:
        """A page of the member's ``<kind>#<user>#`` items in the team's partition."""
        return self._page(
            KeyConditionExpression="#p = :p AND begins_with(#s, :m)",
            ExpressionAttributeNames={"#p": "pk", "#s": "sk"},
            ExpressionAttributeValues={
                ":p": _s(f"TEAM#{team_id}"),
                ":m": _s(f"{kind}#{user_id}#"),
            },
            ConsistentRead=True,
        )

    def _end_publications(
        self, user_id: str, packet_ids: Sequence[str], also: list[dict[str, Any]]
    ) -> None:
        """End the publications of these packets that ``user_id`` made (another's stays),
        with ``also`` in the same transaction. A change meanwhile cancels it: the caller's
        page is read again."""
        from .dynamo import _Cancelled, _get, _req, _unpublish_ops

        packets = self._batch_get([_key(f"PKT#{pid}", "PKT") for pid in packet_ids])
        hashes = {_req(p, "id"): h for p in packets if (h := _get(p, "public_hash")) is not None}
        publics = [_key(f"PUBLIC#{h}", "PUBLIC") for h in hashes.values()]
        if publics:
            publics = self._batch_get(publics)
        actions = list(also)
        for public in publics:
            pid = _req(public, "packet_id")
            secret_hash = _req(public, "pk").removeprefix("PUBLIC#")
            if _get(public, "created_by") == user_id and hashes.get(pid) == secret_hash:
                actions.extend(_unpublish_ops(_key(f"PKT#{pid}", "PKT"), secret_hash))
        if actions:
            with contextlib.suppress(_Cancelled):
                self._transact(actions)

    def _legacy_page(self, team_id: str, user_id: str) -> bool:
        """A page of what the mark carries from an older membership's string sets: each
        page's ids leave the mark in the transaction that ends them."""
        from .dynamo import INVITES_MADE, PUBLISHED_MADE, _invite_keys

        mark = departure_key(team_id, user_id)
        item = self._get_item(mark)
        if item is None:
            return False

        def taken(field: str, ids: list[str]) -> dict[str, Any]:
            return update_existing(mark, "DELETE #f :v", field, {"SS": ids})

        if pids := sorted(item.get(PUBLISHED_MADE, {}).get("SS", []))[:PACKETS_PER_PAGE]:
            self._end_publications(user_id, pids, [taken(PUBLISHED_MADE, pids)])
            return True
        if codes := sorted(item.get(INVITES_MADE, {}).get("SS", []))[:PACKETS_PER_PAGE]:
            from .dynamo import _Cancelled

            deletes = [
                {"Delete": {"Key": key}} for c in codes for key in _invite_keys(team_id, user_id, c)
            ]
            with contextlib.suppress(_Cancelled):  # a conflict: the page is read again
                self._transact([*deletes, taken(INVITES_MADE, codes)])
            return True
        return False

    def _published_page(self, team_id: str, user_id: str) -> bool:
        """End a page of the member's publications, their records in the same transaction."""
        from .dynamo import _req

        items = self._mine(team_id, "PUBLISHED", user_id)
        if not items:
            return False
        records = [{"Delete": {"Key": _key(_req(i, "pk"), _req(i, "sk"))}} for i in items]
        self._end_publications(user_id, [_req(i, "packet_id") for i in items], records)
        return True

    def _made_page(self, team_id: str, user_id: str) -> bool:
        """Delete a page of the member's invites, then their ``MADE#`` records (so a crash
        between the two leaves records to find, never an invite without one)."""
        from .dynamo import _invite_keys, _req

        items = self._mine(team_id, "MADE", user_id)
        pairs = [_invite_keys(team_id, user_id, _req(i, "code_hash")) for i in items]
        self._batch_delete([invite for invite, _ in pairs])
        self._batch_delete([made for _, made in pairs])
        return bool(items)
