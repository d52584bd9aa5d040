"""What the web view shows: a scope's packets, one packet with its thread, a team.

Read-only, framework-free, and built on the same rules as the API (``access``
for scopes and teams, ``packets.get`` for visibility, the delete rule for
what a reader may delete), so a page never shows what ``GET /v1/...`` would
refuse. Nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..store import Invite, Member, PacketMeta, Publication, Store, StoredPacket, Team, User
from .access import Caller, access, in_team
from .errors import BadRequest, NotFound
from .publish import may_manage
from .search import Found, search
from .share import Received, Shared, reads_in_scope, shares
from .users import now

PAGE = 50  # packets per page, the protocol's default listing
CHILDREN = 50  # children shown on a packet's page


@dataclass(frozen=True, slots=True)
class Listing:
    rows: list[PacketMeta]
    teams: list[Team]  # the reader's teams, oldest first
    team: Team | None  # the scope shown (None: personal, or every scope with ``everywhere``)
    owns_team: bool
    older: str | None  # cursor of the next page
    details: dict[str, Details]  # each row's tags and next step, by packet id
    everywhere: bool = False  # the newest of every scope of the reader, merged
    scopes: dict[str, str] | None = None  # with ``everywhere``: each row's team name ("": yours)


@dataclass(frozen=True, slots=True)
class Details:
    tags: list[str]
    next_step: str
    author: str = ""  # a team packet's: who stored it (display name); "" for personal ones


def details(store: Store, rows: list[PacketMeta]) -> dict[str, Details]:
    """What a listing row shows beyond its meta: tags and next step, from the packet bodies,
    and for a team's packet who stored it (a personal packet is always the reader's own).

    One read per row (a page is 50 at most); a packet gone meanwhile shows none.
    """
    out = {}
    names: dict[str, str] = {}
    for meta in rows:
        found = store.get_packet(meta.id)
        data = parse(found.body) if found is not None else {}
        tags = data.get("tags")
        step = data.get("next_step")
        author = ""
        if meta.team_id is not None:
            author = names.get(meta.owner_id) or author_name(store, meta.owner_id)
            names[meta.owner_id] = author
        out[meta.id] = Details(
            [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
            step if isinstance(step, str) else "",
            author,
        )
    return out


def author_name(store: Store, user_id: str) -> str:
    """Who stored a packet, as people know them: their display name (a gone user: so)."""
    user = store.get_user(user_id)
    return user.display if user is not None else "a former member"


def parse(body: bytes) -> dict[str, Any]:
    """A stored packet as a dict; ``{}`` for one that is not a JSON object (lenient mode)."""
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def listing(
    store: Store,
    caller: Caller,
    *,
    team: str | None = None,
    tag: str = "",
    project: str = "",
    after: str | None = None,
    everywhere: bool = False,
) -> Listing:
    """One page of a scope, newest first; ``after`` is the cursor of the page before.

    The tag and project filters are the API's listing filters (``packets.page``,
    answered by the store's indexes), so they reach every packet of the scope
    and the next page keeps them. ``everywhere`` (no scope chosen, no filter): a
    reader with teams sees the newest of all their scopes (``_everywhere``).
    """
    from .packets import page

    who = access(store, caller, need="read", team=team)
    teams = store.list_teams(who.user.id)
    if everywhere and teams and team is None and not (tag or project or after):
        return _everywhere(store, who.user, teams)
    found = page(
        store,
        who.user,
        team=team,
        limit=PAGE,
        page_token=after,
        project=project or None,
        tag=tag or None,
    )
    return Listing(
        rows=found.items,
        teams=teams,
        team=who.team,
        owns_team=who.team is not None and who.team.owner_id == who.user.id,
        older=found.cursor,
        details=details(store, found.items),
    )


def _everywhere(store: Store, user: User, teams: list[Team]) -> Listing:
    """The newest packets of the reader's personal scope and teams, merged, newest first.

    What a reader with teams lands on: their teammates' work shows at once, not
    only their own. Each scope's own listing pages further back.
    """
    from .packets import _sort_key

    named: dict[str | None, str] = {None: "", **{t.id: t.name for t in teams}}
    rows: list[PacketMeta] = []
    for team_id in named:
        rows += store.list_packets(owner_id=user.id, team_id=team_id, limit=PAGE).items
    rows.sort(key=lambda m: (_sort_key(m.created_at), m.id), reverse=True)
    rows = rows[:PAGE]
    return Listing(
        rows=rows,
        teams=teams,
        team=None,
        owns_team=False,
        older=None,
        details=details(store, rows),
        everywhere=True,
        scopes={m.id: named.get(m.team_id, "") for m in rows},
    )


@dataclass(frozen=True, slots=True)
class SharedListing:
    received: list[Received]
    details: dict[str, Details]


def shared_listing(store: Store, caller: Caller) -> SharedListing:
    """The packets others shared with the reader (``share.shared_with_me``)."""
    from .share import shared_with_me

    received = shared_with_me(store, caller, limit=PAGE)
    return SharedListing(received, details(store, [r.meta for r in received]))


@dataclass(frozen=True, slots=True)
class Results:
    found: list[Found]
    teams: list[Team]  # the reader's teams, for the search form
    error: str  # why the query could not run ("" when it ran)


def results(
    store: Store, caller: Caller, q: str, *, team: str | None = None, all_scopes: bool = False
) -> Results:
    """A search (``search.search``: the caller's scopes only); a bad query is an error to show.

    A team the reader is not in stays a 404, as everywhere.
    """
    who = access(store, caller, need="read", team=team)
    teams = store.list_teams(who.user.id)
    try:
        found = search(store, who.user, q, team=team, all_scopes=all_scopes and team is None)
    except BadRequest as exc:
        return Results([], teams, exc.message.removeprefix("q: "))
    return Results(found, teams, "")


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
    children: list[PacketMeta]  # the packets continuing this one that the reader may read
    can_delete: bool
    publication: Publication | None  # shown to those who may manage it
    shares: list[Shared]  # whom it is shared with (all for its manager; a sharer's own)
    shared_by: User | None = None  # who shared it, when the reader reads it by a share
    author: str = ""  # a team packet's: who stored it (display name)


def packet_view(store: Store, caller: Caller, packet_id: str) -> PacketView:
    """A packet the caller may read, with its parent and children (those they may read too)."""
    from .packets import children, get

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
    if not reads_in_scope(store, user.id, stored.meta):
        # Read by a share: the packet alone, nothing of its scope (its thread, its shares).
        found = store.get_share(packet_id, user.id)
        by = store.get_user(found.shared_by) if found is not None else None
        return PacketView(stored, data, None, None, [], False, None, [], by)
    return PacketView(
        stored=stored,
        data=data,
        team=team,
        parent=parent,
        children=children(store, user, packet_id, limit=CHILDREN),
        can_delete=manage,
        publication=store.publication_of(stored) if manage else None,
        shares=shares(store, user, packet_id),
        author=author_name(store, stored.meta.owner_id) if team is not None else "",
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
