"""Teams: creating, listing and deleting them, their members, kicking and leaving.

Roles follow the protocol table: any member may see the members and invite;
only the owner may delete the team or remove a member; the owner can be
neither removed nor leave (delete the team instead). A team the caller does
not belong to is reported exactly like a team that does not exist (404
``team not found``), so team names cannot be probed.

The refusal texts are the Go reference's own (``internal/api/api.go`` in
dennisdevulder/ltm): its CLI prints them verbatim after "server returned
NNN:", so a user of either CLI reads the same sentence from either server.
"""

from __future__ import annotations

import re
from datetime import datetime

from ..store import Conflict as StoreConflict
from ..store import Member, Store, Team
from .access import TEAM_NAME_MAX, USER_ID_MAX, Caller, in_team, user_of
from .errors import BadRequest, Conflict, Forbidden, NotFound
from .users import new_id, now

TEAM_NAME_PATTERN = f"^[a-z0-9][a-z0-9_-]{{0,{TEAM_NAME_MAX - 1}}}$"  # the protocol's
TEAM_NAME_RE = re.compile(TEAM_NAME_PATTERN)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not TEAM_NAME_RE.fullmatch(name):
        raise BadRequest(f"team name must match {TEAM_NAME_PATTERN}")
    return name


def create(store: Store, caller: Caller, name: object, *, when: datetime | None = None) -> Team:
    """A new team owned by the caller; 409 ``team name already taken`` when the name is in use."""
    owner = user_of(store, caller, need="write")
    team = Team(id=new_id(), name=check_name(name), owner_id=owner.id, created_at=when or now())
    try:
        store.create_team(team)
    except StoreConflict:
        raise Conflict("team name already taken") from None
    return team


def list_(store: Store, caller: Caller) -> list[Team]:
    """The caller's teams, oldest first."""
    return store.list_teams(user_of(store, caller, need="read").id)


def delete(store: Store, caller: Caller, name: str) -> None:
    """Delete a team with its members, invites and packets: the owner only."""
    user, team = in_team(store, caller, name, need="write")
    if team.owner_id != user.id:
        raise Forbidden("only the team owner can delete a team")
    store.delete_team(team.id)


def members(store: Store, caller: Caller, name: str) -> list[Member]:
    """The members of a team the caller belongs to, the owner first."""
    return store.list_members(in_team(store, caller, name, need="read")[1].id)


def kick(store: Store, caller: Caller, name: str, user_id: str) -> None:
    """Remove a member: the owner only, and never the owner themself.

    The invites the member made, and their publications of the team's packets, die with
    the membership (``Store.remove_member``); so do the shares of the team's packets with
    them (``share.end_team_shares``).
    """
    user, team = in_team(store, caller, name, need="write")
    if team.owner_id != user.id:
        raise Forbidden("only the team owner can remove members")
    if user_id == team.owner_id:
        raise BadRequest("owner cannot be removed; transfer ownership or delete the team")
    if len(user_id) > USER_ID_MAX or not _remove(store, team.id, user_id):
        raise NotFound("not a member")  # no user has an id that long: the store is not asked


def leave(store: Store, caller: Caller, name: str) -> None:
    """Leave a team; the owner cannot (they delete the team instead). Their invites die too,
    and the shares of the team's packets with them."""
    user, team = in_team(store, caller, name, need="write")
    if team.owner_id == user.id:
        raise BadRequest("owner cannot leave; transfer ownership or delete the team")
    _remove(store, team.id, user.id)


def _remove(store: Store, team_id: str, user_id: str) -> bool:
    """``Store.remove_member``, then the shares of the team's packets with whoever left
    (only then: an outsider's shares are theirs to keep); True when they were a member."""
    if not store.remove_member(team_id, user_id):
        return False
    from .share import end_team_shares  # only a departure pays for the import

    end_team_shares(store, team_id, user_id)
    return True
