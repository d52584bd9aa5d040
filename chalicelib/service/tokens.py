"""Bearer tokens: minting, hashing, checking, listing and revoking.

A token is ``ltm_``, the id of its user, ``_`` and 64 hex digits (256 random
bits): ``ltm_01JC...Z_3f0c...``. The prefix makes it easy to recognise in a
leak scan and in a credentials file. The store only ever sees its hex sha256
(as the reference does), so a copy of the database does not let anyone sign
in.

Why the user id is in the token: a team request must read the token, the
team and the caller's membership before it acts. Knowing the user from the
token itself lets a store fetch all three in one round trip (one
BatchGetItem on DynamoDB) instead of two, one after the other. The id is only
a hint: it is believed once the token's hash is found *and* the stored token
belongs to that user, and the hash covers the whole token, so editing the id
makes the token invalid. User ids are not secret (team members see them).
Tokens without the id (``ltm_`` + 64 hex, minted before, or for user ids
that are not ULIDs) stay valid; their team requests cost one read more.

Checking a token costs no read of its own: ``Credential`` is the parsed
header, and the check rides on the request's first store read
(``access.access``). The last-used time is written at most once per
``TOUCH_INTERVAL`` per token, not on every request.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from datetime import datetime, timedelta
from typing import NamedTuple

from ..store import FULL_SCOPE, NameTaken, Store, Token, User
from ..store import Conflict as StoreConflict
from .access import Caller, Credential, Need, access, check_scope, user_of
from .errors import BadRequest, Conflict, NotFound, Unauthorized
from .users import end_sessions, new_user, now, taken

TOKEN_PREFIX = "ltm_"
_ULID = r"[0-9A-HJKMNP-TV-Z]{26}"  # Crockford base32: what users.new_id mints
_ULID_RE = re.compile(_ULID)
# The user-id part is optional (tokens minted before it, or for non-ULID ids).
TOKEN_RE = re.compile(rf"ltm_(?:({_ULID})_)?[0-9a-f]{{64}}")
TOUCH_INTERVAL = timedelta(minutes=5)
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:+-]{0,63}")
MAX_TOKEN_CHARS = 512  # anything longer is not one of ours; don't bother hashing it

log = logging.getLogger(__name__)


def mint(user_id: str | None = None) -> str:
    """A new bearer token for ``user_id`` (shown once, never stored).

    The user id goes into the token when it is a ULID (every id we mint is);
    anything else gets the plain form, which works the same at one read more.
    """
    secret = secrets.token_hex(32)
    if user_id is not None and _ULID_RE.fullmatch(user_id):
        return f"{TOKEN_PREFIX}{user_id}_{secret}"
    return TOKEN_PREFIX + secret


def credential(authorization: str | None) -> Credential:
    """The request's token, ready to check: 401 without one (no store read spent)."""
    token = bearer(authorization)
    if len(token) > MAX_TOKEN_CHARS:
        raise Unauthorized("invalid token", token_given=True)
    named = TOKEN_RE.fullmatch(token)
    return Credential(hash_token(token), named.group(1) if named else None)


def hash_token(token: str) -> str:
    """Hex sha256 of the token: what the store keeps."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def check_label(label: object) -> str:
    if not isinstance(label, str) or not LABEL_RE.fullmatch(label):
        raise BadRequest(
            "label: 1 to 64 characters, letters, digits and . _ @ : + -, starting with a letter"
            " or digit"
        )
    return label


def new_token(
    user_id: str, label: str, *, when: datetime | None = None, scope: str = FULL_SCOPE
) -> tuple[str, Token]:
    """A fresh token for ``user_id``: the secret, and the record the store keeps.

    Full scope unless the device flow granted less (``scope``, as it was granted).
    """
    secret = mint(user_id)
    record = Token(
        label=check_label(label),
        user_id=user_id,
        token_hash=hash_token(secret),
        created_at=when or now(),
        scope=scope,
    )
    return secret, record


def bearer(authorization: str | None) -> str:
    """The token in an ``Authorization: Bearer ...`` header; 401 when there is none."""
    if not authorization:
        raise Unauthorized("missing bearer token")
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials:
        raise Unauthorized("missing bearer token")
    return credentials


def authenticate(
    store: Store,
    authorization: str | None,
    when: datetime | None = None,
    *,
    need: Need = "write",
) -> User:
    """The user behind the request's bearer token (for requests that read nothing else).

    401 ``missing bearer token`` without one, 401 ``invalid token`` for a
    token the store does not know (never issued, or revoked), 403
    ``insufficient scope`` for a token without ``need``.
    """
    return access(store, credential(authorization), need=need, when=when).user


def expired(record: Token, when: datetime) -> bool:
    """Whether the token's lifetime (a device token's, an OAuth access token's) is over."""
    return record.expires_at is not None and when >= record.expires_at


def checked(
    store: Store,
    found: tuple[Token, User] | None,
    when: datetime | None = None,
    *,
    audience: str | None = None,
) -> User:
    """The user of a token the store looked up; records its use now and then.

    401 ``invalid token`` when the lookup found nothing, when the token has
    expired, or when it was issued for another resource than ``audience``
    (RFC 8707: an OAuth token for ``/mcp`` is not a key to the ltm API, nor
    to another server's ``/mcp``). Tokens ltm mints itself carry no resource
    and work everywhere.
    """
    if found is None:
        raise Unauthorized("invalid token", token_given=True)
    record, user = found
    when = when or now()
    if expired(record, when):
        raise Unauthorized("invalid token", token_given=True)
    if record.resource is not None and record.resource != audience:
        raise Unauthorized("invalid token", token_given=True)
    if record.last_used_at is None or when - record.last_used_at >= TOUCH_INTERVAL:
        try:
            store.touch_token(record.token_hash, when)
        except Exception:  # last-used is advisory: never fail a request over it
            log.warning("could not record the use of token %s", record.label, exc_info=True)
    return user


def issue(
    store: Store,
    display: str,
    *,
    label: str | None = None,
    user_id: str | None = None,
    when: datetime | None = None,
    scope: str = FULL_SCOPE,
) -> tuple[User, str]:
    """A new user with its first token, in one atomic step; returns the user and the secret.

    ``label`` defaults to the display name. 409 when the label (or the user
    id, when given) is taken.
    """
    when = when or now()
    user = new_user(display, when=when)
    if user_id is not None:
        user = User(id=user_id, display=user.display, created_at=when)
    chosen = label if label is not None else user.display
    secret, record = new_token(user.id, chosen, when=when, scope=scope)
    try:
        store.create_user(user, record)
    except NameTaken:
        raise taken(user.display) from None
    except StoreConflict:
        raise Conflict(f"a token labelled {record.label!r} (or this user) already exists") from None
    return user, secret


def add(
    store: Store,
    user_id: str,
    label: str,
    *,
    when: datetime | None = None,
    scope: str = FULL_SCOPE,
) -> str:
    """Another token for an existing user (one per device); returns the secret."""
    secret, record = new_token(user_id, label, when=when, scope=scope)
    try:
        store.add_token(record)
    except StoreConflict:
        raise Conflict(f"a token labelled {record.label!r} already exists") from None
    return secret


class Issued(NamedTuple):
    user: User
    secret: str  # shown once, never stored
    label: str
    created: bool  # a new user


ROOT = "root"  # the first user's token label (ltm server init), and a name for that user


def find_user(store: Store, name: str) -> User | None:
    """The user ``name`` names for an operator (``ltm server issue-token``): an id, else the
    one display name among users holding a token (exactly, else in another case). 409
    when several users share it.

    Display names are searched through the token list, the one listing of users
    every store has; a user whose every token was revoked is named by id.
    """
    found = store.get_user(name)
    if found is not None:
        return found
    listed = store.list_tokens()
    owners = {token.user_id for token in listed}
    users = [u for u in (store.get_user(i) for i in sorted(owners)) if u]
    # Names are unique per server without regard to case: "sam" is Sam, never a second user.
    named = [u for u in users if u.display == name] or [
        u for u in users if u.display.casefold() == name.casefold()
    ]
    if len(named) > 1:
        ids = ", ".join(user.id for user in named)
        raise Conflict(f"{len(named)} users are called {name!r} ({ids}); give the id")
    if not named and name == ROOT:
        # "root" also names the first user, whatever `ltm server init --name` called them:
        # the holder of the token labelled root (how a lost root token is replaced).
        holder = next((token.user_id for token in listed if token.label == ROOT), None)
        root = store.get_user(holder) if holder else None
        return root
    return named[0] if named else None


def free_label(store: Store, name: str) -> str:
    """A label made from ``name``, or it ``-2``, ``-3``...: the first no token has (labels
    are unique).

    ``name`` is a display name, which may hold what a label may not (a space, an accent,
    64 characters with no room for a number): those become a label, "Jo Smith" Jo-Smith
    and "Zoë" Zoe, so that naming a user never needs a ``--label`` as well.
    """
    import unicodedata

    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    shaped = re.sub(r"[^A-Za-z0-9._@:+-]+", "-", ascii_name).lstrip("._@:+-")
    base = shaped[:56].rstrip("-") or "token"  # room for "-NNNNNNN" within 64
    taken = {token.label for token in store.list_tokens()}
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def issue_for(
    store: Store,
    name: str,
    *,
    label: str | None = None,
    new_user: bool = False,
    when: datetime | None = None,
    scope: str = FULL_SCOPE,
) -> Issued:
    """A token for the user ``name`` names (``find_user``), made a new user when there is none
    (or when ``new_user``).

    Without ``label``, the user's name, numbered when taken: a second token for an
    existing user (another device, a lost token) needs no label of its own.
    """
    name = name.strip()  # as a display name is stored
    found = None if new_user else find_user(store, name)
    if found is not None:
        chosen = label or free_label(store, found.display)
        secret = add(store, found.id, chosen, when=when, scope=scope)
        return Issued(found, secret, chosen, False)
    if not new_user and _ULID_RE.fullmatch(name):
        # An id mistyped, or of a user since deleted: a new user whose name is that id
        # was made, and named by it from then on.
        raise NotFound(
            f"no user has the id {name}: `ltm server tokens` lists the users holding a"
            " token; a new user is named by a display name (--new-user for this one)"
        )
    if name == ROOT and not new_user and store.user_named(ROOT) is None:
        # "root" named the first user through the token labelled root, now revoked: a
        # new user called root here would take the root label, and with it the name,
        # while the first user (their packets, their teams) holds no token.
        raise Conflict(
            "no token is labelled root any more, so 'root' names nobody: name the first"
            " user by their id (`ltm whoami` on their machine shows it), or give"
            " --new-user for a new user called root"
        )
    chosen = label or free_label(store, name)
    try:
        user, secret = issue(store, name, label=chosen, when=when, scope=scope)
    except Conflict:
        # Named by no token (every one revoked: someone who left), and never taken as
        # them from the name alone, which would give a newcomer their packets: the id
        # does that, and the message names it.
        holder = None if new_user else store.user_named(name)
        if holder is None:
            raise
        raise Conflict(
            f"{holder.display!r} is user {holder.id}, whose tokens are all revoked: name"
            f" them by that id to give them a token again, or choose another name for a"
            " new user"
        ) from None
    return Issued(user, secret, chosen, True)


def list_(store: Store, *, user_id: str | None = None) -> list[Token]:
    return store.list_tokens(user_id=user_id)


def revoke(store: Store, label: str, *, user_id: str | None = None) -> None:
    """Revoke by label (only the caller's own when ``user_id`` is given); 404 when absent."""
    if not store.revoke_token(label, user_id=user_id):
        raise NotFound("token not found")


def revoke_all(store: Store, user_id: str, *, when: datetime | None = None) -> list[str]:
    """Revoke every token of the user (someone who left: every device and OAuth sign-in
    stops at once, their refresh tokens with them) and end their web view sessions,
    those signed in without a token (Cognito) too; the labels revoked.

    A token added meanwhile is not seen; running it again takes that one too.
    """
    labels = [
        token.label
        for token in store.list_tokens(user_id=user_id)
        if store.revoke_token(token.label, user_id=user_id)
    ]
    end_sessions(store, user_id, when or now())
    return labels


def whoami(store: Store, caller: Caller) -> tuple[User, Token | None]:
    """The caller's user and the token they call with (``GET /v1/whoami``, an extension).

    Needs ``read``, like any lookup; the token the CLI's embedded store acts
    without is None. 401 ``invalid token`` for a revoked or unknown token, which
    is how ``ltm whoami`` learns that its sign-in no longer works.
    """
    if isinstance(caller, User):
        return caller, None
    loaded = store.load(token_hash=caller.token_hash, user_id=caller.user_hint)
    user = checked(store, loaded.token)
    assert loaded.token is not None  # checked answered 401 otherwise
    check_scope(loaded.token[0], "read")
    return user, loaded.token[0]


def list_own(store: Store, caller: Caller) -> list[Token]:
    """The caller's tokens (``GET /v1/tokens``); managing tokens needs the full scope."""
    return list_(store, user_id=user_of(store, caller, need=FULL_SCOPE).id)


def revoke_own(store: Store, caller: Caller, label: str) -> None:
    """Revoke one of the caller's tokens (``DELETE /v1/tokens/{label}``); needs the full scope."""
    revoke(store, label, user_id=user_of(store, caller, need=FULL_SCOPE).id)
