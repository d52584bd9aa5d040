"""What the web view shows: a scope's packets, one packet with its thread, a team.

Read-only, framework-free, and built on the same rules as the API (``access``
for scopes and teams, ``packets.get`` for visibility, the delete rule for
what a reader may delete), so a page never shows what ``GET /v1/...`` would
refuse. Nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..store import Invite, Member, PacketMeta, Publication, Store, StoredPacket, Team
from .access import Caller, access, in_team
from .errors import BadRequest, NotFound
from .publish import may_manage
from .users import now

PAGE = 50  # packets per page, the protocol's default listing
MAX_FILTER_TEXT = 128


@dataclass(frozen=True, slots=True)
class Listing:
    rows: list[PacketMeta]
    teams: list[Team]  # the reader's teams, oldest first
    team: Team | None  # the scope shown (None: personal)
    owns_team: bool
    scanned: int | None  # with a tag/project filter: how many packets were looked at
    older: str | None  # cursor of the next page


def parse(body: bytes) -> dict[str, Any]:
    """A stored packet as a dict; ``{}`` for one that is not a JSON object (lenient mode)."""
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _matches(stored: StoredPacket | None, tag: str, project: str) -> bool:
    if stored is None:
        return False
    data = parse(stored.body)
    if tag:
        tags = data.get("tags")
        if not isinstance(tags, list) or tag not in tags:
            return False
    if project:
        info = data.get("project")
        if not isinstance(info, Mapping) or info.get("name") != project:
            return False
    return True


def listing(
    store: Store,
    caller: Caller,
    *,
    team: str | None = None,
    tag: str = "",
    project: str = "",
    after: str | None = None,
) -> Listing:
    """One page of a scope, newest first; ``after`` is the cursor of the page before.

    A tag or project filter looks at the bodies of one page (the newest
    ``PAGE`` packets after the cursor) and keeps those that match, so a page
    costs the same whatever the scope holds; ``scanned`` says how many were
    looked at. (Filters over a whole scope come with the store's own index.)
    """
    if len(tag) > MAX_FILTER_TEXT or len(project) > MAX_FILTER_TEXT:
        raise BadRequest(f"filters are at most {MAX_FILTER_TEXT} characters")
    who = access(store, caller, need="read", team=team)
    team_id = who.team.id if who.team else None
    try:
        page = store.list_packets(owner_id=who.user.id, team_id=team_id, limit=PAGE, cursor=after)
    except ValueError:
        raise BadRequest("after: not a position in this listing") from None
    rows = page.items
    scanned = None
    if tag or project:
        scanned = len(rows)
        rows = [m for m in rows if _matches(store.get_packet(m.id), tag, project)]
    return Listing(
        rows=rows,
        teams=store.list_teams(who.user.id),
        team=who.team,
        owns_team=who.team is not None and who.team.owner_id == who.user.id,
        scanned=scanned,
        older=page.cursor,
    )


@dataclass(frozen=True, slots=True)
class ParentLink:
    id: str
    meta: PacketMeta | None  # None: the reader cannot see it, or it is gone


@dataclass(frozen=True, slots=True)
class PacketView:
    stored: StoredPacket
    data: dict[str, Any]  # the parsed packet ({} if it does not parse: lenient packets)
    team: Team | None
    parent: ParentLink | None
    can_delete: bool
    publication: Publication | None  # shown to those who may manage it


def packet_view(store: Store, caller: Caller, packet_id: str) -> PacketView:
    """A packet the caller may read, with its parent (when they may read that too)."""
    from .packets import get

    stored = get(store, caller, packet_id)
    who = access(store, caller, need="read")
    user = who.user
    data = parse(stored.body)
    team = None
    if stored.meta.team_id is not None:
        team = next((t for t in store.list_teams(user.id) if t.id == stored.meta.team_id), None)
    parent = None
    parent_id = data.get("parent_id")
    if isinstance(parent_id, str) and parent_id:
        try:
            parent = ParentLink(parent_id, get(store, user, parent_id).meta)
        except NotFound:
            parent = ParentLink(parent_id, None)
    manage = may_manage(store, user, stored.meta)
    return PacketView(
        stored=stored,
        data=data,
        team=team,
        parent=parent,
        can_delete=manage,
        publication=store.publication(packet_id) if manage else None,
    )


@dataclass(frozen=True, slots=True)
class TeamView:
    team: Team
    members: list[Member]
    invites: list[Invite] | None  # pending invites, for the team's owner only


def team_view(store: Store, caller: Caller, name: str, *, when: datetime | None = None) -> TeamView:
    """A team the caller belongs to (404 ``team not found`` otherwise, as in the API)."""
    user, team = in_team(store, caller, name, need="read")
    invites = None
    if team.owner_id == user.id:
        when = when or now()
        invites = [
            i for i in store.list_invites(team.id) if i.used_at is None and i.expires_at > when
        ]
    return TeamView(team, store.list_members(team.id), invites)
