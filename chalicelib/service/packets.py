"""Pushing, reading, listing and deleting packets, with the scope rules.

A packet lives in exactly one scope, chosen at push time: personal (visible
to the user who pushed it) or one team (visible to every member). Anything a
caller may not see is reported as absent, so nobody can probe for ids or team
names they have no business knowing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..store import Conflict as StoreConflict
from ..store import PacketMeta, Store, StoredPacket, User
from .access import PACKET_ID_LENGTHS, Caller, access
from .errors import BadRequest, Conflict, NotFound, PayloadTooLarge

DEFAULT_LIMIT = 50  # the protocol's default page
MAX_LIMIT = 1000
MAX_PROJECT = 128  # the protocol's limit on project.name


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
    stored = StoredPacket(
        meta=PacketMeta(
            id=packet_id,
            created_at=created_at,
            goal=goal,
            owner_id=who.user.id,
            team_id=who.team.id if who.team else None,
            project=_project(checked.data),
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
    store: Store,
    caller: Caller,
    *,
    team: str | None = None,
    limit: int = DEFAULT_LIMIT,
    project: str | None = None,
) -> list[PacketMeta]:
    """The newest packets of the caller's personal scope or of one of their teams.

    With ``project``, only the packets whose ``project.name`` is exactly that.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    if project is not None and not 1 <= len(project) <= MAX_PROJECT:
        raise BadRequest(f"project must be 1 to {MAX_PROJECT} characters")
    who = access(store, caller, team=team)
    team_id = who.team.id if who.team else None
    page = store.list_packets(owner_id=who.user.id, team_id=team_id, limit=limit, project=project)
    return page.items


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


def _project(data: Mapping[str, Any]) -> str | None:
    """The packet's ``project.name``: what project listings filter on."""
    project = data.get("project")
    name = project.get("name") if isinstance(project, Mapping) else None
    return name if isinstance(name, str) and name else None


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
