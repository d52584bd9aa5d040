"""Pushing, reading, listing and deleting packets, with the scope rules.

A packet lives in exactly one scope, chosen at push time: personal (visible
to the user who pushed it) or one team (visible to every member). Anything a
caller may not see is reported as absent, so nobody can probe for ids or team
names they have no business knowing.

A push is also scanned for secrets, as defense in depth behind the writer's
own redaction pre-flight (the protocol allows a server-side scan): a packet
with a key, token, private key or credential in it is refused with 400 and
the ``field/kind`` list, unless the request carries the user's explicit
override (``X-LTM-Allow-Unredacted: 1``, which ``--allow-unredacted`` sends).
Paths and local URLs are the writer's business and pass. The operator can
turn the scan off with ``LTM_SERVER_SCAN=off``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..ids import check_packet_id
from ..store import Conflict as StoreConflict
from ..store import NotFound as StoreNotFound
from ..store import PacketMeta, Page, Store, StoredPacket, User
from .access import Caller, access
from .errors import BadRequest, Conflict, NotFound, PayloadTooLarge, ServiceError

DEFAULT_LIMIT = 50  # the protocol's default page
MAX_LIMIT = 1000
MAX_PROJECT = 128  # the protocol's limit on project.name

# The user's explicit override of the server-side scan: an extension header (a
# reference server ignores it). Our CLI sends it with --allow-unredacted.
OVERRIDE_HEADER = "X-LTM-Allow-Unredacted"
SCAN_ENV = "LTM_SERVER_SCAN"  # "off" (or 0/false/no) turns the scan off
_OFF = frozenset({"off", "0", "false", "no"})
_YES = frozenset({"1", "true", "yes"})
_LISTED = 20  # hits named in the refusal; more are counted


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
    scan: bool = True,
) -> PushResult:
    """Validate a packet, scan it for secrets and store it in canonical form.

    ``scan=False`` skips the secret scan: for a request with the user's
    override or a server whose operator turned it off (``scan_wanted``), and
    for the CLI's own embedded store, which the pre-flight guards already.

    The owner of a personal packet may push it into a team they belong to: it
    moves there (the reference's documented ``push -t TEAM`` flow). Any other
    id that exists elsewhere is refused with 409 and nothing changes.
    """
    # The body is checked first (no I/O) but its faults are reported only once the
    # caller is known, so an unknown token (401), a read-only one (403) or a team the
    # caller is not in (404) comes before anything about the body.
    fault: ServiceError | None = None
    try:
        stored = _prepare(raw, lenient=lenient, scan=scan)
    except ServiceError as exc:
        fault, stored = exc, None
    # In team scope the packet is read with the caller and the team (one request on
    # DynamoDB): a move of the caller's personal packet is then known before the write.
    wanted = stored.meta.id if stored is not None and team is not None else None
    who = access(store, caller, need="write", team=team, packet_id=wanted)
    if fault is not None:
        raise fault
    assert stored is not None
    stored = replace(
        stored,
        meta=replace(stored.meta, owner_id=who.user.id, team_id=who.team.id if who.team else None),
    )
    try:
        created = store.put_packet(
            stored,
            sort_key=_sort_key(stored.meta.created_at),
            seen=who.packet.meta if who.packet else None,
        )
    except StoreConflict:
        # Someone else owns this id, or it is the caller's in a team: never touch it.
        raise Conflict("packet id already exists") from None
    except StoreNotFound:  # left (or was removed from) the team as the packet moved
        raise NotFound("team not found") from None
    return PushResult(id=stored.meta.id, created=created, conforming=stored.conforming)


def _prepare(raw: bytes | str | Mapping[str, Any], *, lenient: bool, scan: bool) -> StoredPacket:
    """The packet as it will be stored (canonical bytes), not yet given an owner or scope."""
    from .. import packet  # pydantic: only the write path pays for it

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
    if scan:
        _refuse_secrets(checked.data)  # CPU only: no store call
    return StoredPacket(
        meta=PacketMeta(
            id=packet_id,
            created_at=created_at,
            goal=goal,
            owner_id="",
            project=_project(checked.data),
        ),
        body=packet.canonical_bytes(checked.data),
        conforming=checked.conforming,
    )


def scan_wanted(override: str | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to scan a push: on, unless the operator turned it off or the user overrides.

    ``override`` is the request's ``X-LTM-Allow-Unredacted`` header (None if absent).
    """
    if environ.get(SCAN_ENV, "").strip().lower() in _OFF:
        return False
    return override is None or override.strip().lower() not in _YES


def _refuse_secrets(data: Mapping[str, Any]) -> None:
    from .. import redact  # the write path alone pays for it

    hits = redact.scan_packet(data, secrets_only=True)
    if not hits:
        return
    listed = ", ".join(f"{h.field}/{h.kind}" for h in hits[:_LISTED])
    more = f" and {len(hits) - _LISTED} more" if len(hits) > _LISTED else ""
    # Field paths and kinds only: the secret itself is not echoed (nor logged).
    raise BadRequest(
        f"the server's redaction scan refused the packet ({len(hits)} "
        f"{'hit' if len(hits) == 1 else 'hits'}: {listed}{more}); remove the secrets, or"
        f" send the header {OVERRIDE_HEADER}: 1 (ltm push --allow-unredacted) to store it"
        " anyway"
    )


def get(store: Store, caller: Caller, packet_id: str) -> StoredPacket:
    who = access(store, caller, need="read", packet_id=packet_id)
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
    return list_page(store, caller, team=team, limit=limit, project=project).items


def list_page(
    store: Store,
    caller: Caller,
    *,
    team: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    project: str | None = None,
) -> Page:
    """One page of a scope, newest first; ``Page.cursor`` continues it (None: the last page).

    Reads only. A cursor is opaque and comes from a previous page of the same
    listing; anything else is refused (400 ``invalid page_token``). With
    ``project``, only the packets whose ``project.name`` is exactly that.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    if project is not None and not 1 <= len(project) <= MAX_PROJECT:
        raise BadRequest(f"project must be 1 to {MAX_PROJECT} characters")
    who = access(store, caller, need="read", team=team)
    team_id = who.team.id if who.team else None
    try:
        return store.list_packets(
            owner_id=who.user.id, team_id=team_id, limit=limit, cursor=cursor, project=project
        )
    except ValueError:
        raise BadRequest("invalid page_token") from None


def resolve(store: Store, caller: Caller, prefix: str, *, team: str | None = None) -> str:
    """The one id in the caller's scope that starts with ``prefix`` (used by the local CLI)."""
    who = access(store, caller, need="read", team=team)
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
    who = access(store, caller, need="write", packet_id=packet_id)
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
    if not isinstance(packet_id, str):
        raise BadRequest("id: required, a string of 10 to 64 characters (even in lenient mode)")
    try:
        check_packet_id(packet_id)  # even in lenient mode: the id is a URL path segment
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
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
