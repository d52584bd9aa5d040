"""Who is asking, and what their request is about: read together, once.

Every packet and team request starts by checking its caller's token and,
depending on the verb, resolving a team name (with the caller's membership)
or fetching a packet. ``access`` asks the store for all of it in one
``Store.load``, so on DynamoDB the token check costs no round trip of its
own: a personal push or list is that read plus the operation, and so is a
team push, list, get or delete (see ``tests/test_dynamo_calls.py``).

A caller is either a ``User`` the code already trusts (the CLI's embedded
store has exactly one) or a ``Credential``: a bearer token parsed from the
request but not yet checked.

Every entry point says what it ``need``s of the token's scope (OAuth,
RFC 6749 §3.3): ``"read"`` for reads, ``"write"`` (the default, so a new
entry point that forgets fails closed) for anything that changes state, and
``store.FULL_SCOPE`` (``"read write"``) for managing tokens and approving devices,
so a read-only token can never mint or revoke others. A token without it is
refused 403 ``insufficient scope`` (``errors.InsufficientScope``, RFC 6750
§3.1) before anything else is revealed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

from ..ids import check_packet_id
from ..store import FULL_SCOPE, Member, Store, StoredPacket, Team, Token, User
from .errors import InsufficientScope, NotFound

Need = Literal["read", "write", "read write"]


class Credential(NamedTuple):
    """A request's bearer token, parsed (``tokens.credential``) but not yet checked."""

    token_hash: str
    user_hint: str | None  # the user id the token names, believed only once checked
    # The resource the request is for (RFC 8707): None for the ltm API, the ``/mcp``
    # URL for the MCP endpoint. A token bound to a resource works there and nowhere else.
    audience: str | None = None

    def __repr__(self) -> str:  # never print even the hash in a traceback
        return f"Credential(user_hint={self.user_hint!r})"


Caller = User | Credential

# Bounds of what can be stored (ids.check_packet_id and teams.check_name enforce them).
# Beyond them nothing can exist, so the store is not asked: DynamoDB refuses oversized keys.
TEAM_NAME_MAX = 40
USER_ID_MAX = 128  # far beyond any id minted (a ULID: 26 characters)


class Access(NamedTuple):
    user: User
    team: Team | None = None  # the team asked for; the user is a member
    member: Member | None = None  # ... and this is their membership
    packet: StoredPacket | None = None  # the packet asked for, if it exists (not yet authorized)
    scope: str = FULL_SCOPE  # what the caller's token was granted (a trusted User: everything)


def grants(scope: str, need: Need) -> bool:
    """Whether a token granted ``scope`` may do what needs ``need``."""
    return set(need.split()) <= set(scope.split())


def check_scope(token: Token, need: Need) -> None:
    """403 ``insufficient scope`` unless the token was granted every scope in ``need``."""
    if not grants(token.scope, need):
        raise InsufficientScope(need)


def storable(packet_id: str) -> bool:
    """Whether a packet could be stored under this id (else it is absent without asking)."""
    try:
        check_packet_id(packet_id)
    except ValueError:
        return False
    return True


def access(
    store: Store,
    caller: Caller,
    *,
    need: Need = "write",
    team: str | None = None,
    packet_id: str | None = None,
    when: datetime | None = None,
) -> Access:
    """The caller's user, the team named ``team`` and the packet ``packet_id``, in one read.

    401 ``invalid token`` for a token the store does not know; 403
    ``insufficient scope`` for a token without ``need``; 404 ``team not
    found`` for a team that does not exist or that the caller is not in (the
    two look the same, so team names cannot be probed). Whether the caller
    may see the packet is the verb's rule, not checked here. An id that no
    packet can have (``ids.check_packet_id``) is not looked up: absent.
    """
    asked_team = team if team is None or len(team) <= TEAM_NAME_MAX else None
    if packet_id is not None and not storable(packet_id):
        packet_id = None
    scope = FULL_SCOPE
    if isinstance(caller, User):
        loaded = store.load(user_id=caller.id, team=asked_team, packet_id=packet_id)
        user = caller
    else:
        from .tokens import checked  # the server's path; the local CLI never needs it

        loaded = store.load(
            token_hash=caller.token_hash,
            user_id=caller.user_hint,
            team=asked_team,
            packet_id=packet_id,
        )
        user = checked(store, loaded.token, when, audience=caller.audience)
        assert loaded.token is not None  # checked answered 401 otherwise
        check_scope(loaded.token[0], need)
        scope = loaded.token[0].scope
    if team is not None and loaded.membership is None:
        raise NotFound("team not found")
    found_team, member = loaded.membership or (None, None)
    return Access(user, found_team, member, loaded.packet, scope)


def in_team(store: Store, caller: Caller, name: str, *, need: Need = "write") -> tuple[User, Team]:
    """The caller's user and their team called ``name`` (404 ``team not found`` otherwise)."""
    who = access(store, caller, need=need, team=name)
    assert who.team is not None  # access answered 404 otherwise
    return who.user, who.team


def user_of(store: Store, caller: Caller, *, need: Need = "write") -> User:
    """Just the caller's user (for requests that read nothing else first)."""
    return caller if isinstance(caller, User) else access(store, caller, need=need).user
