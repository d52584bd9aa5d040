"""Invite codes: any member invites, anyone holding the code joins, once.

A code is 192 random bits (URL-safe base64), valid for seven days and usable
once; the store keeps only its hex sha256. Accepting with a bearer token adds
the caller to the team; accepting without one mints a new user and their
first token in the same atomic step (so of twenty concurrent accepts exactly
one wins, and the losers leave no orphan user behind).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..store import FULL_SCOPE, Invite, NameTaken, Store, Team, Token, User
from ..store import Conflict as StoreConflict
from ..store import Gone as StoreGone
from ..store import NotFound as StoreNotFound
from .access import Caller, in_team, user_of
from .errors import Conflict, Gone, NotFound
from .tokens import hash_token, new_token
from .users import check_display, new_id, now, taken

INVITE_TTL = timedelta(days=7)
CODE_RE = re.compile(r"[A-Za-z0-9_-]{16,128}")
DEAD = "invite expired or already consumed"  # the reference's text, for every unusable code


@dataclass(frozen=True, slots=True)
class CreatedInvite:
    code: str  # shown once; only its hash is stored
    url: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Accepted:
    user: User
    team: Team
    token: str | None  # set only when a new user was minted


def hash_code(code: str) -> str:
    """What the store keeps of a code: its hex sha256, as for tokens."""
    return hash_token(code)


def invite_url(base_url: str, code: str) -> str:
    return f"{base_url.rstrip('/')}/v1/invites/{code}"


def create(
    store: Store, caller: Caller, team_name: str, *, base_url: str, when: datetime | None = None
) -> CreatedInvite:
    """A new single-use code for a team the caller belongs to (any member may invite).

    Needs a token with the full scope, as publishing does: the code reads every packet
    of the team (accepted without an account it even mints a full token), so a
    write-only token that could invite could read them all.
    """
    user, team = in_team(store, caller, team_name, need=FULL_SCOPE)
    when = when or now()
    code = secrets.token_urlsafe(24)
    invite = Invite(
        code_hash=hash_code(code),
        team_id=team.id,
        created_by=user.id,
        created_at=when,
        expires_at=when + INVITE_TTL,
    )
    try:
        store.create_invite(invite)  # checks the membership again as it writes
    except StoreNotFound:
        raise NotFound("team not found") from None
    return CreatedInvite(code=code, url=invite_url(base_url, code), expires_at=invite.expires_at)


def accept(
    store: Store,
    caller: Caller | None,
    code: str,
    *,
    display: object = None,
    when: datetime | None = None,
) -> Accepted:
    """Join the invite's team: as the caller, or as a new user when there is no caller.

    410 ``invite expired or already consumed`` for any code that cannot be
    used: unknown (or deleted with its maker's membership or its team),
    expired, or used. The reference answers exactly so for all of them
    (``internal/api/api.go`` in dennisdevulder/ltm), and its CLI's ``join``
    recognises the 410 and prints its own line; telling "never existed" from
    "used" would add nothing for the holder of a dead code.
    """
    when = when or now()
    if display is not None and not (isinstance(display, str) and not display.strip()):
        # Judged whoever accepts (a signed-in caller keeps their name): a body the API
        # documents as invalid is refused the same way every time.
        display = check_display(display)
    if not CODE_RE.fullmatch(code):
        raise Gone(DEAD)
    secret: str | None = None
    new: tuple[User, Token] | None = None
    if caller is None:
        user_id = new_id()
        # No display, or an empty one (a client may send "" for "none"): the reference's
        # default, "invited-" and the last six characters of the new ULID, as they are.
        blank = display is None or (isinstance(display, str) and not display.strip())
        name = f"invited-{user_id[-6:]}" if blank else check_display(display)
        user = User(id=user_id, display=name, created_at=when)
        secret, record = new_token(user.id, f"invite-{user.id}", when=when)
        new = (user, record)
    else:
        user = user_of(store, caller, need="write")  # joining changes what the user is in
    try:
        invite, _member = store.accept_invite(hash_code(code), user.id, when, new_user=new)
    except (StoreNotFound, StoreGone):
        raise Gone(DEAD) from None
    except NameTaken:
        raise taken(user.display) from None
    except StoreConflict as exc:
        if new is None:  # the caller left the team moments ago: the store says so
            raise Conflict(str(exc)) from None
        # a freshly minted id or token hash collided: astronomically unlikely
        raise Conflict("could not create the user; try again") from None
    team = next((t for t in store.list_teams(user.id) if t.id == invite.team_id), None)
    if team is None:  # the team was deleted in the instant after the accept
        raise Gone(DEAD)
    return Accepted(user=user, team=team, token=secret)
