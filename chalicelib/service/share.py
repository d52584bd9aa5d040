"""Sharing one packet with one user, read-only (an extension: the reference has no sharing).

Who may share: whoever may read the packet in its own scope (its owner for a
personal packet, any member for a team packet), with a token of the full scope
(as for publishing). A share lets its recipient read that one packet, never
change, delete, publish or share it again: every other rule still asks for the
packet's own scope. A share counts only while
its sharer can still read the packet there, so a packet that leaves the
sharer's reach (they left the team) leaves the recipient's at once; deleting
the packet ends its shares in the store, and leaving a team (or being removed)
ends the shares of its packets with whoever left (``end_team_shares``).

Whom: a user named by their exact id, or by the display name (in any case) of
someone the sharer already shares a team with; never, for a team's packet, one of
its members (they read it already).
Anyone else is "user not found", the same answer as for nobody at all, so sharing
reveals no user the sharer's teams do not already show.

Who may end a share: its sharer, whoever may manage the packet (its owner, a
team's owner), and the recipient (to drop it from their list).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import NamedTuple

from ..store import FULL_SCOPE, PacketMeta, Share, Store, StoredPacket, User
from ..store import NotFound as StoreNotFound
from .access import Caller, Need, access
from .errors import BadRequest, NotFound
from .publish import may_manage
from .users import now

MAX_LISTED = 200  # packets ``shared_with_me`` lists at most
MAX_NAME = 128
PAGE = 100  # shares read from the store at a time
# Shares ``shared_with_me`` looks through at most for its live ones: a share whose sharer
# has lost reach to its packet (left the team) is skipped, and many of those must not
# hide the live ones behind them, nor make one listing read without end.
LOOKED_THROUGH = 2_000


class Shared(NamedTuple):
    """One share as its sharer or the packet's manager sees it: with whom, by whom."""

    share: Share
    user: User  # the recipient
    by: User | None  # the sharer (None when that user is gone)


class Received(NamedTuple):
    """One packet shared with the caller."""

    meta: PacketMeta
    share: Share
    by: User | None


def reads_in_scope(store: Store, user_id: str, meta: PacketMeta) -> bool:
    """The protocol's read rule: a personal packet by its owner, a team's by its members."""
    if meta.team_id is None:
        return meta.owner_id == user_id
    return store.get_member(meta.team_id, user_id) is not None


def end_team_shares(store: Store, team_id: str, user_id: str) -> None:
    """End the shares of a team's packets with someone no longer in the team (left or
    removed). Shared with them before they joined, or their own packet shared with them and
    since moved in, such a share would keep a window onto the team open after it closed
    their membership, as a publication of theirs would (``Store.remove_member``)."""
    for item, meta in _shares_with(store, user_id):
        if meta.team_id == team_id:
            store.unshare_packet(item.packet_id, user_id)


def _shares_with(
    store: Store, user_id: str, *, most: int | None = None
) -> Iterator[tuple[Share, PacketMeta]]:
    """The shares with ``user_id``, the newest first, page after page (``most`` at most)."""
    after: Share | None = None
    seen = 0
    while most is None or seen < most:
        page = PAGE if most is None else min(PAGE, most - seen)
        found = store.shared_with(user_id, limit=page, after=after)
        yield from found
        if not found:
            return
        seen += len(found)
        after = found[-1][0]


def readable_by_share(store: Store, user: User, meta: PacketMeta) -> bool:
    """Whether a live share lets ``user`` read this packet (its sharer still reads it)."""
    found = store.get_share(meta.id, user.id)
    return found is not None and reads_in_scope(store, found.shared_by, meta)


def _readable(
    store: Store, caller: Caller, packet_id: str, *, need: Need
) -> tuple[User, StoredPacket]:
    """The caller and a packet they read in its own scope (404 ``not found`` otherwise)."""
    who = access(store, caller, need=need, packet_id=packet_id)
    if who.packet is None or not reads_in_scope(store, who.user.id, who.packet.meta):
        raise NotFound("not found")
    return who.user, who.packet


def find_user(store: Store, me: User, name: object) -> User:
    """The user ``name`` means to ``me``: an exact user id, or the display name (in any
    case: display names are unique per server without regard to case) of someone who
    shares a team with ``me``. 404 ``user not found`` for anyone else, with the closest
    names among those teams' members when one is near (they are names ``me`` already sees
    in ``teams members``)."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise BadRequest("user: give a user's display name or id")
    name = name.strip()
    exact = store.get_user(name)
    if exact is not None:
        return exact
    wanted = name.casefold()
    named: dict[str, User] = {}
    seen: set[str] = set()
    for team in store.list_teams(me.id):
        for member in store.list_members(team.id):
            if member.user_id == me.id:
                continue
            seen.add(member.display)
            if member.display.casefold() == wanted:
                found = store.get_user(member.user_id)
                if found is not None:
                    named[found.id] = found
    if not named:
        if wanted == me.display.casefold():
            raise BadRequest("that is you: a packet you can read needs no share with yourself")
        raise NotFound("user not found" + _did_you_mean(name, seen))
    if len(named) > 1:
        raise BadRequest(f"user: {name!r} names more than one user in your teams; give the id")
    return next(iter(named.values()))


def _did_you_mean(name: str, names: set[str]) -> str:
    """`` (did you mean 'Sam'?)`` for the nearest of ``names``, else nothing."""
    import difflib

    folded = {n.casefold(): n for n in sorted(names)}
    close = difflib.get_close_matches(name.casefold(), list(folded), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(folded[c]) for c in close) + "?)"


def share(
    store: Store, caller: Caller, packet_id: str, name: object, *, when: datetime | None = None
) -> tuple[Shared, bool]:
    """Share a packet the caller reads in its scope with the user ``name``; True when new.

    Needs a token with the full scope, as publishing does: a write-only token that
    could share could read the packet through another account it shares it with.
    """
    user, found = _readable(store, caller, packet_id, need=FULL_SCOPE)
    recipient = find_user(store, user, name)
    if recipient.id == user.id:
        raise BadRequest("that is you: a packet you can read needs no share with yourself")
    if found.meta.team_id is not None and reads_in_scope(store, recipient.id, found.meta):
        # A teammate reads it already: the share would add nothing while they are in the
        # team, and end when they leave it (``end_team_shares``).
        team = next((t.name for t in store.list_teams(user.id) if t.id == found.meta.team_id), "")
        raise BadRequest(f"{recipient.display} is in team {team}: they read it already")
    try:
        current, created = store.share_packet(
            Share(packet_id, recipient.id, user.id, when or now()), seen=found.meta
        )
    except StoreNotFound:  # deleted (or moved) between the read and the write
        raise NotFound("not found") from None
    by = user if current.shared_by == user.id else store.get_user(current.shared_by)
    return Shared(current, recipient, by), created


def _visible_shares(store: Store, user: User, meta: PacketMeta) -> list[Share]:
    """The packet's shares ``user`` may see: all for its manager, else the ones they made."""
    everything = store.packet_shares(meta.id)
    if may_manage(store, user, meta):
        return everything
    return [s for s in everything if s.shared_by == user.id]


def shares(store: Store, caller: Caller, packet_id: str) -> list[Shared]:
    """Whom the packet is shared with, as far as the caller may know (see ``_visible_shares``)."""
    user, found = _readable(store, caller, packet_id, need="read")
    out = []
    users: dict[str, User | None] = {}
    for item in _visible_shares(store, user, found.meta):
        for uid in (item.user_id, item.shared_by):
            if uid not in users:
                users[uid] = store.get_user(uid)
        recipient = users[item.user_id]
        if recipient is not None:
            out.append(Shared(item, recipient, users[item.shared_by]))
    return out


def unshare(store: Store, caller: Caller, packet_id: str, name: str) -> None:
    """End one share, at once. ``name``: the recipient's id or display name, as listed."""
    who = access(store, caller, need="write", packet_id=packet_id)
    user, found = who.user, who.packet
    if found is None:
        raise NotFound("not found")
    # A recipient may drop their own share (it is in their list even once they read the
    # packet in its scope, having joined its team since).
    own = store.get_share(packet_id, user.id)
    if reads_in_scope(store, user.id, found.meta):
        candidates = _visible_shares(store, user, found.meta)
        if own is not None and own not in candidates:
            candidates.append(own)
    elif own is None:
        raise NotFound("not found")
    else:  # read by the share alone: they learn nothing of the packet's other shares
        candidates = [own]
    matches = [s for s in candidates if s.user_id == name]
    if not matches:
        for item in candidates:
            other = store.get_user(item.user_id)
            if other is not None and other.display.casefold() == name.casefold():
                matches.append(item)
    if not matches:
        raise NotFound("share not found")
    if len(matches) > 1:
        raise BadRequest(f"user: {name!r} names more than one user it is shared with; give the id")
    store.unshare_packet(packet_id, matches[0].user_id)


def shared_with_me(store: Store, caller: Caller, *, limit: int = MAX_LISTED) -> list[Received]:
    """The packets others shared with the caller, the newest share first (live shares only)."""
    if not 1 <= limit <= MAX_LISTED:
        raise BadRequest(f"limit must be between 1 and {MAX_LISTED}")
    who = access(store, caller, need="read")
    out = []
    users: dict[str, User | None] = {}
    reach: dict[tuple[str, str | None, str], bool] = {}
    for item, meta in _shares_with(store, who.user.id, most=LOOKED_THROUGH):
        key = (item.shared_by, meta.team_id, meta.owner_id if meta.team_id is None else "")
        if key not in reach:
            reach[key] = reads_in_scope(store, item.shared_by, meta)
        if not reach[key]:
            continue  # out of the sharer's reach now: out of the recipient's too
        if item.shared_by not in users:
            users[item.shared_by] = store.get_user(item.shared_by)
        out.append(Received(meta, item, users[item.shared_by]))
        if len(out) == limit:
            break
    return out
