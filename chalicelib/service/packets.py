"""Pushing, reading, listing and deleting packets, with the scope rules.

A packet lives in exactly one scope, chosen at push time: personal (visible
to the user who pushed it) or one team (visible to every member). Anything a
caller may not see is reported as absent, so nobody can probe for ids or team
names they have no business knowing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..store import Conflict as StoreConflict
from ..store import PacketMeta, Page, Scope, Store, StoredPacket, User
from .access import PACKET_ID_LENGTHS, Caller, access
from .errors import BadRequest, Conflict, NotFound, PayloadTooLarge

DEFAULT_LIMIT = 50  # the protocol's default page
MAX_LIMIT = 1000
MAX_THREAD = 1000  # how far ``thread`` walks up parent links (a DAG, but never trust data)


@dataclass(frozen=True, slots=True)
class PushResult:
    id: str
    created: bool  # False when it replaced the caller's own packet with the same id
    conforming: bool


def push(
    store: Store,
    caller: Caller,
    raw: bytes | str | Mapping[str, Any],
    *,
    team: str | None = None,
    lenient: bool = False,
) -> PushResult:
    """Validate a packet and store it in canonical form in the chosen scope."""
    from .. import packet  # pydantic: only the write path pays for it

    who = access(store, caller, team=team)  # the caller first, then their packet

    if isinstance(raw, str):
        raw = raw.encode()
    if isinstance(raw, bytes):
        if len(raw) > packet.MAX_PACKET_BYTES:
            raise PayloadTooLarge(f"packet too large (max {packet.MAX_PACKET_BYTES} bytes)")
        try:
            data = packet.parse(raw)
        except packet.PacketError as exc:
            raise BadRequest(str(exc)) from None
    else:
        data = dict(raw)
    try:
        checked = packet.check(data, lenient=lenient)
    except packet.PacketError as exc:
        raise BadRequest(str(exc)) from None
    packet_id, created_at, goal = _identity(checked.data)
    parent = checked.data.get("parent_id")
    stored = StoredPacket(
        meta=PacketMeta(
            id=packet_id,
            created_at=created_at,
            goal=goal,
            owner_id=who.user.id,
            team_id=who.team.id if who.team else None,
            parent_id=parent if isinstance(parent, str) and parent else None,
        ),
        body=packet.canonical_bytes(checked.data),
        conforming=checked.conforming,
    )
    try:
        created = store.put_packet(stored, sort_key=_sort_key(created_at))
    except StoreConflict:
        # Someone else (or another scope) owns this id: never touch their packet.
        raise Conflict("packet id already exists") from None
    return PushResult(id=packet_id, created=created, conforming=checked.conforming)


def get(store: Store, caller: Caller, packet_id: str) -> StoredPacket:
    who = access(store, caller, packet_id=packet_id)
    found = who.packet
    if found is None or not _can_read(store, who.user, found.meta):
        raise NotFound("not found")
    return found


def list_(
    store: Store, caller: Caller, *, team: str | None = None, limit: int = DEFAULT_LIMIT
) -> list[PacketMeta]:
    """The newest packets of the caller's personal scope or of one of their teams."""
    return page(store, caller, team=team, limit=limit).items


def page(
    store: Store,
    caller: Caller,
    *,
    team: str | None = None,
    limit: int = DEFAULT_LIMIT,
    page_token: str | None = None,
    tag: str | None = None,
    since: str | None = None,
    until: str | None = None,
    author: str | None = None,
    now: datetime | None = None,
) -> Page:
    """One page of a scope's packets, newest first, filtered; reads only.

    ``page_token`` is the previous page's ``Page.cursor`` (given with the same
    filters). ``since``/``until``: an RFC 3339 time, a date (``2026-04-01``,
    midnight UTC) or an age (``3d``, ``12h``, ``2w``: that long before now);
    ``since`` is inclusive, ``until`` exclusive. ``author``: who stored the
    packet, by user id or display name (``me``: the caller); in a team, a
    member of it.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    who = access(store, caller, team=team)
    team_id = who.team.id if who.team else None
    now = now or datetime.now(UTC)
    low = time_bound(since, "since", now) if since is not None else None
    high = time_bound(until, "until", now) if until is not None else None
    author_id = _author(store, who.user, team_id, author) if author is not None else None
    if tag is not None and not _TAG.fullmatch(tag):
        raise BadRequest("tag: lower-case letters, digits and dashes, as in a packet's tags")
    if page_token == "":
        raise BadRequest("page_token: not a token from this listing")
    try:
        return store.list_packets(
            owner_id=who.user.id,
            team_id=team_id,
            limit=limit,
            cursor=page_token,
            tag=tag,
            since=low,
            until=high,
            author=author_id,
        )
    except ValueError:
        raise BadRequest("page_token: not a token from this listing") from None


_TAG = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_AGE = re.compile(r"([0-9]{1,6})([mhdw])")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def time_bound(value: str, name: str, now: datetime) -> str:
    """A ``since``/``until`` value as a listing sort key (UTC, ``...T00:00:00.000000Z``)."""
    age = _AGE.fullmatch(value)
    if age:
        when = now - timedelta(**{_AGE_UNITS[age[2]]: int(age[1])})
    else:
        try:
            when = datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError:
            raise BadRequest(
                f"{name}: give a date (2026-04-01), an RFC 3339 time or an age (3d, 12h, 2w)"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _author(store: Store, user: User, team_id: str | None, author: str) -> str:
    """The user id ``author`` names in this scope (400 when it names nobody there)."""
    if not author:
        raise BadRequest("author: give a user id, a display name or me")
    if author in ("me", user.id, user.display):
        return user.id
    if team_id is None:
        raise BadRequest(f"author: {author!r} has no packets in your personal scope")
    members = store.list_members(team_id)
    named = [m for m in members if m.user_id == author] or [
        m for m in members if m.display == author
    ]
    if not named:
        raise BadRequest(f"author: no member {author!r} in this team")
    if len(named) > 1:
        raise BadRequest(f"author: {author!r} names more than one member; give the user id")
    return named[0].user_id


def readable_scopes(store: Store, user: User) -> list[Scope]:
    """Every scope ``user`` may read: personal first, then their teams (one read)."""
    return [(user.id, None), *((user.id, t.id) for t in store.list_teams(user.id))]


def children(
    store: Store, caller: Caller, packet_id: str, *, limit: int = DEFAULT_LIMIT
) -> list[PacketMeta]:
    """The packets that continue ``packet_id`` and that the caller may read; reads only.

    404 when the packet itself is not readable, like ``get``.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    who = access(store, caller, packet_id=packet_id)
    if who.packet is None or not _can_read(store, who.user, who.packet.meta):
        raise NotFound("not found")
    return store.children(packet_id, scopes=readable_scopes(store, who.user), limit=limit)


@dataclass(frozen=True, slots=True)
class Thread:
    packets: list[StoredPacket]  # from the oldest readable ancestor to the packet asked for
    complete: bool  # False when an earlier packet exists but is missing or not readable


def thread(store: Store, caller: Caller, packet_id: str) -> Thread:
    """The work thread that ends at ``packet_id``, root first, as far as the caller may read.

    Reads only: one read per packet, walking ``parent_id`` up (a cycle or a
    thread longer than ``MAX_THREAD`` stops the walk). 404 when the packet
    itself is not readable.
    """
    who = access(store, caller, packet_id=packet_id)
    if who.packet is None or not _can_read(store, who.user, who.packet.meta):
        raise NotFound("not found")
    chain = [who.packet]
    seen = {packet_id}
    complete = True
    teams_ok: dict[str, bool] = {}
    while (parent := chain[-1].meta.parent_id) is not None:
        found = store.get_packet(parent) if parent not in seen else None
        if found is None or len(chain) >= MAX_THREAD:
            complete = False
            break
        meta = found.meta
        if meta.team_id is not None and meta.team_id not in teams_ok:
            teams_ok[meta.team_id] = _can_read(store, who.user, meta)
        readable = teams_ok[meta.team_id] if meta.team_id else meta.owner_id == who.user.id
        if not readable:
            complete = False
            break
        seen.add(parent)
        chain.append(found)
    chain.reverse()
    return Thread(chain, complete)


def resolve(store: Store, caller: Caller, prefix: str, *, team: str | None = None) -> str:
    """The one id in the caller's scope that starts with ``prefix`` (used by the local CLI)."""
    who = access(store, caller, team=team)
    team_id = who.team.id if who.team else None
    matches = store.packet_ids_with_prefix(prefix, owner_id=who.user.id, team_id=team_id, limit=2)
    if not matches:
        raise NotFound(f"no packet matches {prefix!r}")
    if len(matches) > 1:
        raise BadRequest(f"{prefix!r} matches more than one packet; give more of the id")
    return matches[0]


def delete(store: Store, caller: Caller, packet_id: str) -> None:
    """Personal packets: the owner. Team packets: their creator or the team's owner.

    The rule is ``Store.delete_packet_as``, which checks again as it writes
    (one conditional request, or one transaction, on DynamoDB).
    """
    who = access(store, caller, packet_id=packet_id)
    if who.packet is None or not store.delete_packet_as(
        packet_id, who.user.id, seen=who.packet.meta
    ):
        raise NotFound("not found")


def _can_read(store: Store, user: User, meta: PacketMeta) -> bool:
    if meta.team_id is None:
        return meta.owner_id == user.id
    return store.get_member(meta.team_id, user.id) is not None


def _identity(data: Mapping[str, Any]) -> tuple[str, str, str]:
    """Id, created_at and goal; a lenient packet must still carry a usable id."""
    packet_id = data.get("id")
    if not isinstance(packet_id, str) or len(packet_id) not in PACKET_ID_LENGTHS:
        raise BadRequest("id: required, a string of 10 to 64 characters (even in lenient mode)")
    created_at = data.get("created_at")
    goal = data.get("goal")
    return (
        packet_id,
        created_at if isinstance(created_at, str) else "",
        goal if isinstance(goal, str) else "",
    )


def _sort_key(created_at: str) -> str:
    from .. import packet

    try:
        return packet.created_at_sort_key(created_at)
    except ValueError:
        return ""  # a lenient packet with an unreadable timestamp sorts oldest
