"""The storage interface every backend implements.

One interface, several implementations side by side (``sqlite.py`` for the
embedded store and self-hosting, ``dynamo.py`` for AWS), all held to one
contract test suite (``tests/test_store_contract.py``). The interface stores
facts and enforces only what must be atomic (unique names, single-use invites,
who owns a packet id); the rules about *who may do what* live in
``chalicelib.service``.

Times are timezone-aware UTC ``datetime`` objects; tokens, invite codes and
device codes are stored only as hashes, never in the clear.

The records are ``NamedTuple``s rather than dataclasses: every CLI verb, hook and
Lambda cold start imports this module, and on Python 3.11 importing dataclasses
(it loads ``inspect``) adds 12-15 ms before the first one is made, each with several
``exec()`` calls (bench/bench_imports.py; BENCHMARKS.md, "Hooks"). Change one with
``record._replace(field=value)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, NamedTuple, Protocol

if TYPE_CHECKING:  # the query language loads only where a search runs
    from collections.abc import Mapping

    from ..search import Query, Snippet
    from ..semantic import Query as Meaning

Role = Literal["owner", "member"]

# OAuth scopes (RFC 6749 §3.3: space-separated). A token holds "read", "write" or both;
# FULL_SCOPE is what every token had before scopes were stored, and what tokens minted
# outside the device flow get.
FULL_SCOPE: Final = "read write"


class StoreError(Exception):
    """Base class for the errors a store raises on purpose."""


class Conflict(StoreError):
    """A unique name, label or id is already taken by someone else."""


class NameTaken(Conflict):
    """A display name another user goes by (names are unique per server in any case)."""


def name_key(display: str) -> str:
    """What makes two display names the same name: Unicode-compatible, without case
    (``Sam``, ``sam`` and ``ＳＡＭ`` are one name)."""
    import unicodedata

    return unicodedata.normalize("NFKC", display).casefold()


class NotFound(StoreError):
    """The thing the operation needs does not exist."""


class Gone(StoreError):
    """The thing existed but can no longer be used (an invite used or expired)."""


# What DynamoDB answers, past the SDK's own retries, when it will not serve a call just
# now (throttled, or failing on its side), whatever the call asked: the same request may
# well succeed a moment later.
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html
_BUSY_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)

# SQLite's result codes for the same: SQLITE_BUSY, SQLITE_LOCKED, SQLITE_FULL; once the
# lock is released or room is made, the same write succeeds.
# https://www.sqlite.org/rescode.html
_SQLITE_BUSY_CODES = frozenset({5, 6, 13})


BUSY_MESSAGE: Final = "the server's database is busy; try again shortly"


def busy(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot serve the request for the moment (DynamoDB
    throttled it or is out of reach), not that the request or the code is wrong: the
    server then answers 503 with Retry-After, which a client keeps its push for.

    Read without importing botocore: if it was never loaded, no exception is its.
    """
    import sys

    errors = sys.modules.get("botocore.exceptions")
    if errors is None:
        return False
    if isinstance(exc, errors.ClientError):
        return exc.response.get("Error", {}).get("Code") in _BUSY_CODES
    # No connection, or no answer in time: the call may have been made or not; pushing
    # the same packet again is still one packet.
    return isinstance(exc, errors.ConnectionError | errors.HTTPClientError)


def unavailable(exc: BaseException) -> bool:
    """Whether the HTTP API answers ``exc`` with 503 and Retry-After, which a client keeps
    its push for: ``busy``, or SQLite's disk is full, or another program held its write
    lock past the busy timeout. (An MCP tool says SQLite's own words instead: on the
    user's machine, the disk that is full is theirs to see.)

    Read without importing sqlite3: if it was never loaded, no exception is its.
    """
    import sys

    sqlite = sys.modules.get("sqlite3")
    if sqlite is not None and isinstance(exc, sqlite.OperationalError):
        # The primary result code is the low byte of an extended one (SQLITE_BUSY_SNAPSHOT...).
        code = getattr(exc, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in _SQLITE_BUSY_CODES
    return busy(exc)


class Quota(NamedTuple):
    """The most one user may own: packets (personal, and authored in teams) and their bytes."""

    packets: int
    bytes: int


class Usage(NamedTuple):
    """What one user owns: packets (personal, and authored in teams) and their stored bytes."""

    packets: int = 0
    bytes: int = 0


class OverQuota(StoreError):
    """A write would take its owner past ``Store.quota``; nothing was written."""

    def __init__(self, usage: Usage, quota: Quota) -> None:
        which = "packets" if usage.packets > quota.packets else "bytes"
        super().__init__(f"{usage} would pass {quota} ({which})")
        self.usage = usage
        self.quota = quota
        self.which = which


class PacketMeta(NamedTuple):
    """What a listing shows: enough to pick a packet without fetching it."""

    id: str
    created_at: str  # as written in the packet (RFC 3339)
    goal: str
    owner_id: str
    team_id: str | None = None
    project: str | None = None  # the packet's ``project.name`` (listed and filtered by)
    parent_id: str | None = None  # the packet's ``parent_id``: the previous one of its thread


def moves_into_team(existing: PacketMeta | None, new: PacketMeta) -> bool:
    """Whether putting ``new`` over ``existing`` is its owner moving a personal packet to a team.

    The one change of scope ``Store.put_packet`` allows (besides none at all).
    """
    return (
        existing is not None
        and new.team_id is not None
        and existing.owner_id == new.owner_id
        and existing.team_id is None
    )


# A scope a caller may read: (owner_id, None) for personal, (anything, team_id) for a team.
Scope = tuple[str, str | None]


class SearchHit(NamedTuple):
    meta: PacketMeta
    score: float  # higher is better; comparable only within one result list
    snippet: Snippet


class StoredPacket(NamedTuple):
    meta: PacketMeta
    body: bytes  # the canonical bytes, exactly as stored
    conforming: bool = True  # False only for packets accepted in lenient mode
    # The hash of the secret it is published under, for a store that keeps it on the
    # packet itself and so reads it with the packet (DynamoDB); None otherwise. Only
    # ``Store.publication_of`` reads it, on a packet that store has just read.
    public_hash: str | None = None


class Page(NamedTuple):
    items: list[PacketMeta]
    cursor: str | None = None  # opaque; pass back to get the next page, None when done


def encode_cursor(sort_key: str, packet_id: str) -> str:
    """A page's cursor: the last listed packet's sort position, opaque to callers."""
    import base64
    import json

    return base64.urlsafe_b64encode(json.dumps([sort_key, packet_id]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The (sort key, packet id) of ``encode_cursor``; ValueError for anything else."""
    import base64
    import json

    try:
        sort_key, packet_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError) as exc:  # binascii.Error is a ValueError
        raise ValueError("invalid cursor") from exc
    if not isinstance(sort_key, str) or not isinstance(packet_id, str) or not packet_id:
        raise ValueError("invalid cursor")
    return sort_key, packet_id


class User(NamedTuple):
    id: str
    display: str
    created_at: datetime
    subject: str | None = None  # external identity (the Cognito ``sub``), when there is one


class Token(NamedTuple):
    label: str  # unique per store; what people see and revoke by
    user_id: str
    token_hash: str  # hex sha256 of the bearer token
    created_at: datetime
    last_used_at: datetime | None = None
    scope: str = FULL_SCOPE  # what the token may do: "read", "write" or "read write"
    # An OAuth access token is bound to the resource it was issued for (RFC 8707: the
    # ``/mcp`` URL) and expires; a token minted by ltm itself has neither and works
    # everywhere until revoked.
    resource: str | None = None
    expires_at: datetime | None = None


class Team(NamedTuple):
    id: str
    name: str
    owner_id: str
    created_at: datetime


class Member(NamedTuple):
    user_id: str
    display: str
    role: Role
    joined_at: datetime


class Invite(NamedTuple):
    code_hash: str
    team_id: str
    created_by: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None
    used_by: str | None = None


class Publication(NamedTuple):
    """A packet published at a public, read-only URL (``/p/<secret>``).

    ``secret`` is 192 random bits, the only thing the URL carries (never the
    packet id). The store looks publications up by ``secret_hash`` (hex
    sha256) and keeps the secret too, so publishing twice answers the same URL
    and the owner can see it again: a copy of the database already holds the
    packet itself, so the secret reveals nothing more (unlike a bearer token,
    which would grant writes, and is therefore kept only as a hash).
    """

    packet_id: str
    secret: str
    secret_hash: str
    created_by: str
    created_at: datetime


class Share(NamedTuple):
    """One packet shared, read-only, by one user with another (an extension of the protocol).

    ``shared_by`` could read the packet in its own scope when they shared it;
    the share counts only while they still can (``service.share`` checks it at
    each read), so a packet that leaves the sharer's reach leaves the
    recipient's too. Deleting the packet, by any path, ends its shares.
    """

    packet_id: str
    user_id: str  # who may read it
    shared_by: str
    created_at: datetime


DeviceStatus = Literal["pending", "approved", "denied", "used"]


class DeviceGrant(NamedTuple):
    """One device-flow sign-in (RFC 8628), from ``POST /oauth/authorize_device`` to its end.

    Both codes are stored only as hex sha256 hashes: the device code is the
    device's secret, the user code what a person types on the verification
    page. ``status`` moves ``pending`` -> ``approved`` | ``denied`` (a user
    decided, ``user_id`` is who approved, ``approved_with`` the hash of the
    token they decided with, if any) and ``approved`` -> ``used`` (the
    device got its token). ``next_poll_at`` is the earliest time the device may
    poll again without being told to slow down; ``interval`` (seconds) grows
    each time it is.
    """

    device_code_hash: str
    user_code_hash: str
    client_id: str
    scope: str
    device_name: str  # what the device said it is (User-Agent or a name it sent)
    client_ip: str  # where the authorization request came from
    created_at: datetime
    expires_at: datetime
    interval: int
    next_poll_at: datetime
    status: DeviceStatus = "pending"
    user_id: str | None = None
    decided_at: datetime | None = None
    approved_with: str | None = None


class Derive(Protocol):
    """``Store.derive``: (the canonical bytes, what they decode to if the caller has it).

    A protocol, not a ``Callable`` alias: a class attribute of a callable type reads as
    a method to a type checker, bound to the store, where this is a plain function."""

    def __call__(self, body: bytes, data: dict[str, Any] | None, /) -> Any: ...


class PutItem(NamedTuple):
    """One write of ``Store.put_many``: ``put_packet``'s arguments."""

    packet: StoredPacket
    sort_key: str
    seen: PacketMeta | None = None
    # ``Store.derive`` of this packet's body, computed ahead (None: the store derives it).
    derived: Any = None


class Loaded(NamedTuple):
    """What a request reads before it acts, fetched together by ``Store.load``."""

    token: tuple[Token, User] | None = None  # the token asked for and its user
    membership: tuple[Team, Member] | None = None  # the team asked for + the user's membership
    packet: StoredPacket | None = None  # the packet asked for


class Store(ABC):
    """Storage for packets, users, tokens, teams and invites."""

    # The per-user bound ``put_packet`` enforces (None: none), set by whoever opens
    # the store for a server (``select.open_store``, from the operator's settings).
    quota: Quota | None = None

    # What a write of this store computes from a packet's canonical bytes alone (its
    # search text, its packed form), as a function of the bytes that needs no store:
    # a bulk load calls it in other processes and hands the result to ``put_many``
    # (``PutItem.derived``). None: the store has nothing to compute ahead.
    derive: ClassVar[Derive | None] = None

    def repairs_owed(self, *, again: bool = False) -> list[str]:
        """The repairs this store's derived data waits for after an upgrade, by name (a
        DynamoDB table's ``dynamo_repair`` runs, ``again``: read afresh while some are
        owed); none where a write derives its data in its own transaction (SQLite)."""
        return []

    # -- the reads a request starts with --------------------------------

    def load(
        self,
        *,
        token_hash: str | None = None,
        user_id: str | None = None,
        team: str | None = None,
        packet_id: str | None = None,
    ) -> Loaded:
        """Whichever of a token, a team with the user's membership and a packet are asked for.

        The user is the token's, or ``user_id`` when no token is asked for.
        Given with a token, ``user_id`` is only a hint (the id a token names)
        and counts only if the token turns out to be that user's; a wrong or
        missing hint costs a read, never a wrong answer. An unknown token
        returns an empty ``Loaded`` (nothing else is revealed).

        Every request starts here, so a backend with round trips to pay for
        answers in as few as it can (DynamoDB: one BatchGetItem when the user
        is known up front). This default reads one thing after the other.
        """
        token = self.token_owner(token_hash) if token_hash is not None else None
        if token_hash is not None:
            if token is None:
                return Loaded()
            user_id = token[1].id
        membership = None
        if team is not None and user_id is not None:
            membership = self.team_membership(team, user_id)
        packet = self.get_packet(packet_id) if packet_id is not None else None
        return Loaded(token, membership, packet)

    # -- packets ---------------------------------------------------------

    @abstractmethod
    def put_packet(
        self,
        packet: StoredPacket,
        *,
        sort_key: str,
        seen: PacketMeta | None = None,
        derived: Any = None,
    ) -> bool:
        """Store a packet; return True when created, False when it replaced one.

        ``sort_key`` orders listings (newest first); it is the packet's
        ``created_at`` normalized to UTC. A packet id is owned by whoever
        stored it first: a put whose id exists with another owner raises
        ``Conflict`` and leaves the existing packet untouched (the reference
        upserts blindly; we must not). A team packet is written (created,
        replaced, or moved in) only while its owner is a member of that team:
        ``NotFound`` otherwise. The owner may replace it in its scope, and may
        move their *personal* packet into a team (the reference's documented
        ``push -t TEAM`` after a personal push). Any other change of
        scope (out of a team) is a ``Conflict``. The checks and the write are
        one atomic step. ``seen`` is the packet under this id as the caller
        already read it, if it read one; it spares a backend a round trip, and
        the write still checks what is stored when it lands. With a ``quota``,
        a put that would take the owner past it raises ``OverQuota`` (see
        ``usage``), checked in the same atomic step. ``derived``: this store's
        ``derive`` of the body, made ahead (as ``PutItem.derived``), or None.
        """

    def put_many(self, items: Sequence[PutItem]) -> list[bool | StoreError]:
        """Many ``put_packet``, each judged alone: per item, created (bool) or the error it got.

        An item's ``Conflict``, ``NotFound`` or ``OverQuota`` is its answer and
        never stops the others; any other error stops the call. Every item that
        succeeded is durable when this returns. This default puts them one by one,
        each exactly as ``put_packet`` (on DynamoDB: its conditional writes, which
        ``BatchWriteItem`` cannot carry); a backend whose commits are the cost
        (SQLite under ``synchronous=FULL``) writes them all in one transaction.
        """
        done: list[bool | StoreError] = []
        for item in items:
            try:
                done.append(
                    self.put_packet(
                        item.packet, sort_key=item.sort_key, seen=item.seen, derived=item.derived
                    )
                )
            except (Conflict, NotFound, OverQuota) as exc:
                done.append(exc)
        return done

    @abstractmethod
    def get_packet(self, packet_id: str) -> StoredPacket | None: ...

    def get_packets(self, packet_ids: Sequence[str]) -> dict[str, StoredPacket]:
        """``get_packet`` for each id: the packets found, by id (an absent id is left out).

        This default reads one after the other; a backend that can read many in one
        request (SQLite: one query for a batch of ids) overrides it.
        """
        found: dict[str, StoredPacket] = {}
        for packet_id in packet_ids:
            held = self.get_packet(packet_id)
            if held is not None:
                found[packet_id] = held
        return found

    @abstractmethod
    def usage(self, user_id: str) -> Usage:
        """What ``user_id`` owns: their personal packets and those they authored in teams.

        Kept as a count the writes update (never a count of the packets per
        write), so ``put_packet`` can hold each user to ``quota``: a put that
        would take its owner past either bound, and grows what they own,
        raises ``OverQuota`` and writes nothing. A replacement that does not
        grow is always allowed (an owner over a lowered bound can still edit).
        Its bytes are the sum of ``occupied`` over the packets.
        """

    def occupied(self, packet: StoredPacket, sort_key: str) -> int:
        """The bytes ``packet``, stored under ``sort_key``, counts in its owner's ``usage``.

        A function of the packet alone (its body and what the store derives from
        it), so the write that adds it, the one that takes it off and a recount
        always agree. This default, SQLite's: the body's bytes.
        """
        return len(packet.body)

    @abstractmethod
    def list_packets(
        self,
        *,
        owner_id: str,
        team_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        project: str | None = None,
        tag: str | None = None,
        since: str | None = None,
        until: str | None = None,
        author: str | None = None,
    ) -> Page:
        """Packets of one scope, newest first, a page at a time.

        Personal scope (``team_id`` None): the packets ``owner_id`` stored with
        no team. Team scope: every packet of ``team_id``, whoever stored it
        (``owner_id`` is then ignored). Filters, all optional and combined:
        ``project`` (the packet's ``project.name`` is exactly that),
        ``tag`` (the packet carries it), ``since`` <= sort key < ``until``
        (sort keys: ``created_at`` normalized to UTC, compared as strings),
        ``author`` (the user id that stored the packet, its ``owner_id``).
        ``cursor`` is a page's ``Page.cursor``, given with the same filters.
        Filters are served by an index (no read of every packet of the scope)
        except ``author`` on DynamoDB, which filters the scope's listing.
        """

    @abstractmethod
    def children(
        self, packet_id: str, *, scopes: list[Scope], limit: int = 100
    ) -> list[PacketMeta]:
        """The packets whose ``parent_id`` is ``packet_id``, oldest first, from ``scopes`` only.

        Found through an index on the parent (never by reading every packet);
        children in scopes not listed are left out, so nobody learns of them.
        """

    @abstractmethod
    def search(self, query: Query, *, scopes: list[Scope], limit: int = 20) -> list[SearchHit]:
        """Packets of ``scopes`` matching ``query``, best first, each with its snippet.

        Nothing outside ``scopes`` is read into the ranking, the snippets or the
        result. A query of qualifiers only (``tag:``/``project:``) lists the
        matching packets newest first. The cost of a query is bounded, not
        proportional to the scope: a backend ranks the newest matches only
        (SQLite: the newest 200 matches; DynamoDB: the newest 1,000 postings of
        each word), so a query matching more than that finds the best of the
        recent ones; more words narrow it.
        """

    def nearest(
        self, meaning: Meaning, query: Query, *, scopes: list[Scope], limit: int = 20
    ) -> list[SearchHit]:
        """Packets of ``scopes`` nearest to ``meaning`` (``ltm.semantic``), best first (the
        nearest few ordered again by their words: ``semantic.rerank``), the score their
        cosine, holding ``query``'s qualifiers; the same rule as ``search``:
        nothing outside ``scopes`` goes in. A store that keeps no vectors (DynamoDB: the
        model is not in the Lambda package) finds none, and search stays lexical."""
        return []

    def vectors_missing(self) -> int:
        """How many packets still need a vector (``fill_vectors``); 0 where none are kept."""
        return 0

    def fill_vectors(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Compute the vectors ``vectors_missing`` counts; how many were filled."""
        return 0

    @abstractmethod
    def packet_ids_with_prefix(
        self,
        prefix: str,
        *,
        owner_id: str,
        team_id: str | None = None,
        limit: int = 2,
        project: str | None = None,
    ) -> list[str]:
        """Ids in the scope (and ``project``, as for ``list_packets``) starting with ``prefix``."""

    @abstractmethod
    def delete_packet(self, packet_id: str) -> bool:
        """Delete a packet; True when it existed."""

    @abstractmethod
    def delete_packet_as(
        self, packet_id: str, user_id: str, *, seen: PacketMeta | None = None
    ) -> bool:
        """Delete a packet if ``user_id`` may; True when deleted.

        The protocol's rule: a personal packet by its owner; a team packet by a
        member who created it, or by the team's owner. Absent and not allowed
        both return False (the caller answers 404 for both). The check and the
        delete are one atomic step (one statement on SQLite, one conditional
        request or transaction on DynamoDB). ``seen`` is the packet as the
        caller already read it, which spares a backend a read; the delete
        happens only while the packet still has that owner and scope.
        """

    # -- publishing ------------------------------------------------------

    @abstractmethod
    def publish_packet(self, publication: Publication, *, seen: PacketMeta) -> Publication:
        """Publish a packet; return the publication in force.

        When the packet is already published, the existing publication is
        returned unchanged (same secret, same URL). NotFound when the packet is
        gone or no longer has ``seen``'s owner and scope, or (a team packet)
        when ``publication.created_by`` is not a member of the team. The checks
        and the write are one atomic step.
        """

    @abstractmethod
    def unpublish_packet(self, packet_id: str) -> bool:
        """End a packet's publication; True when it was published. Its URL is dead at once."""

    @abstractmethod
    def publication(self, packet_id: str) -> Publication | None:
        """The packet's publication, or None."""

    def publication_of(self, packet: StoredPacket) -> Publication | None:
        """``publication`` of a packet this store has just read (and handed back as read).

        A store whose packet read already carries what the publication is found
        by (``StoredPacket.public_hash``) need not read the packet again. This
        default looks it up by the packet's id.
        """
        return self.publication(packet.meta.id)

    @abstractmethod
    def published_packet(self, secret_hash: str) -> StoredPacket | None:
        """The packet published under this secret hash, only while it is published and exists.

        Deleting a packet (by any path, its team's deletion included) ends its
        publication at once; re-pushing the same id keeps it published.
        """

    # -- sharing one packet with one user ---------------------------------

    @abstractmethod
    def share_packet(self, share: Share, *, seen: PacketMeta) -> tuple[Share, bool]:
        """Record a share; return the share in force and True when it is new.

        Sharing again with the same user returns the existing share unchanged.
        NotFound when the packet is gone or no longer has ``seen``'s owner and
        scope. The check and the write are one atomic step.
        """

    @abstractmethod
    def unshare_packet(self, packet_id: str, user_id: str) -> bool:
        """End the packet's share with ``user_id``; True when there was one. At once."""

    @abstractmethod
    def get_share(self, packet_id: str, user_id: str) -> Share | None:
        """The packet's share with ``user_id``, or None."""

    @abstractmethod
    def packet_shares(self, packet_id: str) -> list[Share]:
        """Every share of one packet, oldest first."""

    @abstractmethod
    def shared_with(
        self, user_id: str, *, limit: int = 100, after: Share | None = None
    ) -> list[tuple[Share, PacketMeta]]:
        """The packets shared with ``user_id``, the newest share first, with each packet's
        listing fields; only packets that still exist. Deleting a packet (by any path, its
        team's deletion included) ends its shares; a re-push or a move into a team keeps them.
        ``after``: the last share of the page before; this page holds the shares after it
        in that order (older, or as old with a smaller packet id).
        """

    # -- users and tokens -----------------------------------------------

    @abstractmethod
    def create_user(self, user: User, token: Token | None = None) -> None:
        """Store a new user (and its first token, in the same atomic step).

        Ids are minted by the caller. Conflict when the id, the ``subject``
        (an external identity), or the token's label or hash is taken; NameTaken
        (a Conflict) when another user goes by the display name in any case.
        """

    @abstractmethod
    def get_user(self, user_id: str) -> User | None: ...

    @abstractmethod
    def user_named(self, display: str) -> User | None:
        """The user who goes by ``display`` (in any case: ``name_key``), or None."""

    @abstractmethod
    def rename_user(self, user_id: str, display: str) -> User:
        """Give a user another display name (already checked); the user as renamed.

        Display names are unique per server without regard to case (``name_key``):
        NameTaken when another user goes by it (``create_user`` and ``accept_invite``
        refuse a taken one the same way); a user may change the case of their own.
        NotFound for no such user. Everywhere the name shows (members, token owners)
        shows the new one.
        """

    @abstractmethod
    def get_user_by_subject(self, subject: str) -> User | None: ...

    @abstractmethod
    def add_token(self, token: Token) -> None:
        """Record a token hash for an existing user. Conflict when the label or hash is taken."""

    @abstractmethod
    def token_owner(self, token_hash: str) -> tuple[Token, User] | None:
        """The token with this hash and its user, or None (unknown or revoked)."""

    @abstractmethod
    def touch_token(self, token_hash: str, when: datetime) -> None:
        """Record a use of the token (callers throttle how often they call this)."""

    @abstractmethod
    def list_tokens(self, *, user_id: str | None = None) -> list[Token]:
        """Tokens, oldest first; only ``user_id``'s when given."""

    @abstractmethod
    def revoke_token(self, label: str, *, user_id: str | None = None) -> bool:
        """Delete the token with this label (only if it is ``user_id``'s, when given)."""

    # -- teams ----------------------------------------------------------

    @abstractmethod
    def create_team(self, team: Team) -> None:
        """Store a team and its owner's membership atomically. Conflict when the name is taken."""

    @abstractmethod
    def get_team(self, name: str) -> Team | None: ...

    @abstractmethod
    def list_teams(self, user_id: str) -> list[Team]:
        """The teams ``user_id`` belongs to, oldest first."""

    @abstractmethod
    def delete_team(self, team_id: str) -> None:
        """Delete a team with its memberships, invites and packets."""

    def team_membership(self, name: str, user_id: str) -> tuple[Team, Member] | None:
        """The team called ``name`` and ``user_id``'s membership in it; None if either is missing.

        What every team-scoped request checks first; a backend may answer it in
        one round trip (DynamoDB does).
        """
        team = self.get_team(name)
        if team is None:
            return None
        member = self.get_member(team.id, user_id)
        return None if member is None else (team, member)

    @abstractmethod
    def get_member(self, team_id: str, user_id: str) -> Member | None: ...

    @abstractmethod
    def list_members(self, team_id: str) -> list[Member]:
        """Members, oldest first (the owner first)."""

    @abstractmethod
    def add_member(self, team_id: str, user_id: str, role: Role = "member") -> Member:
        """Add a membership; adding an existing member returns it unchanged.

        Conflict while the user's earlier departure from the team is still being
        cleaned up (see ``remove_member``).
        """

    @abstractmethod
    def remove_member(self, team_id: str, user_id: str) -> bool:
        """Remove a membership; True when there was one.

        The invites the member created for this team die with it, so nobody can
        rejoin with an invite they minted before they left or were removed. The
        publications they made of the team's packets end with it too: a former
        member keeps no public window onto the team. From the return on, none of
        those invites is accepted and none of those publications is served or
        reported (``published_packet``, ``publication``); on SQLite they are
        deleted in the same transaction. On DynamoDB a request ends only a few
        pages of them; a resumable job deletes the rest (``dynamo_fanout.py``),
        and until it has, rejoining the team (``add_member``, ``accept_invite``)
        is refused with Conflict, so the job never ends what they make after.
        """

    # -- invites --------------------------------------------------------

    @abstractmethod
    def create_invite(self, invite: Invite) -> None:
        """Store an invite; NotFound unless its creator is a member of its team.

        The membership is checked in the same atomic step as the write.
        Conflict when the code hash exists.
        """

    @abstractmethod
    def list_invites(self, team_id: str) -> list[Invite]:
        """Every invite of a team still on record (used and expired ones too), oldest first."""

    @abstractmethod
    def accept_invite(
        self,
        code_hash: str,
        user_id: str,
        now: datetime,
        *,
        new_user: tuple[User, Token] | None = None,
    ) -> tuple[Invite, Member]:
        """Use an invite: mark it used by ``user_id`` and add the membership, atomically, once.

        With ``new_user`` the user (and its first token) is created in the same
        step, so a lost race leaves no orphan user behind. NotFound for an
        unknown code; Gone when already used or expired at ``now``, or when
        its creator is no longer a member of the team. Of any
        number of concurrent accepts of one code exactly one succeeds. A user
        who is already a member keeps their role, and the invite stays unused
        (returned as it is). Conflict while the user's
        earlier departure from the team is still being cleaned up.
        """

    # -- device grants (RFC 8628), rate-limit counters, server secrets --------

    @abstractmethod
    def create_device_grant(self, grant: DeviceGrant, now: datetime) -> None:
        """Store a new pending grant.

        Conflict when the device code hash exists, or when the user code hash
        belongs to a grant that has not expired at ``now`` (the caller draws a
        new code and tries again). The user code of an expired grant may be
        given to a new grant; the old grant then no longer answers to it. A
        backend may drop grants (and counters) that expired long ago here.
        """

    @abstractmethod
    def get_device_grant(self, device_code_hash: str) -> DeviceGrant | None:
        """The grant with this device code hash, or None.

        An expired grant may still be returned for a while (DynamoDB TTL is
        lazy; SQLite keeps it a day): callers compare ``expires_at`` themselves.
        """

    @abstractmethod
    def get_device_grant_by_user_code(
        self, user_code_hash: str, now: datetime
    ) -> DeviceGrant | None:
        """The grant this user code belongs to, only when it has not expired at ``now``."""

    @abstractmethod
    def poll_device_grant(
        self,
        device_code_hash: str,
        now: datetime,
        *,
        slow_down_step: int,
        leeway: timedelta = timedelta(0),
    ) -> tuple[DeviceGrant, bool] | None:
        """Record a poll by the device, atomically; None when there is no such grant.

        A poll at or after ``next_poll_at - leeway`` is in time: ``next_poll_at``
        becomes ``now + interval``. An earlier one is too fast: ``interval``
        grows by ``slow_down_step`` seconds and ``next_poll_at`` becomes ``now +``
        the new interval. Returns the grant as updated and whether the poll was
        too fast. Recorded whatever the grant's status or expiry (the caller
        decides what to answer); concurrent polls each see their own update.
        """

    @abstractmethod
    def decide_device_grant(
        self,
        user_code_hash: str,
        now: datetime,
        *,
        approve: bool,
        user_id: str,
        approved_with: str | None = None,
    ) -> DeviceGrant:
        """Approve (or deny) the pending grant of this user code on behalf of ``user_id``, once.

        Sets ``status`` to ``approved`` or ``denied``, ``user_id``,
        ``decided_at`` and ``approved_with`` (the hash of the token it was
        decided with, or None), atomically, and returns the updated grant. NotFound
        when no grant unexpired at ``now`` has this user code; Gone when it was
        already decided (of concurrent decisions exactly one wins).
        """

    @abstractmethod
    def redeem_device_grant(
        self, device_code_hash: str, now: datetime, token: Token
    ) -> DeviceGrant:
        """Give out an approved grant's token: mark it ``used``, store ``token``; atomic, once.

        ``token.user_id`` must be the approving user (``grant.user_id``).
        NotFound for an unknown device code; Gone when the grant is not
        approved, already used, expired at ``now`` or approved by another user
        (of concurrent redeems exactly one wins); Conflict when the token's
        label or hash is taken, or the write could not be made for the moment
        (DynamoDB throttled it past every retry): then nothing changed and the
        grant is still approved.
        """

    @abstractmethod
    def add_to_counter(self, key: str, now: datetime, expires_at: datetime) -> int:
        """Add one to the counter ``key`` and return its new value, atomically.

        A counter that does not exist, or whose expiry has passed at ``now``,
        starts again at 1 and lives until ``expires_at``; adding to a live
        counter keeps its expiry. Counters back rate limits that must hold
        across processes (Lambda instances, server threads).
        """

    @abstractmethod
    def read_counter(self, key: str, now: datetime) -> int:
        """The counter's value, 0 when it does not exist or has expired at ``now``."""

    @abstractmethod
    def ensure_secret(self, name: str, candidate: bytes) -> bytes:
        """The server secret called ``name``; stores ``candidate`` first if there is none.

        Atomic: of concurrent first calls with different candidates, all get
        the one value that was stored. Used for keys the server itself
        generates (the signing key of the device-flow pages).
        """

    # -- OAuth (the authorization server in front of /mcp) -------------

    @abstractmethod
    def put_oauth_item(
        self,
        kind: str,
        key: str,
        doc: Mapping[str, Any],
        expires_at: datetime | None,
        *,
        now: datetime | None = None,
    ) -> None:
        """Store ``doc`` (JSON-able) as the OAuth item ``kind``/``key``, replacing any.

        Kinds are the authorization server's records: registered clients (until
        unused for a while), pending authorization requests, authorization codes,
        spent codes, refresh tokens and grants (short-lived; codes and refresh tokens
        are keyed by their hash). With ``now``, items expired at ``now`` may be dropped in the
        same write (SQLite does; DynamoDB's TTL drops them by itself), so anonymous
        writes never pile up.
        """

    @abstractmethod
    def get_oauth_item(self, kind: str, key: str, now: datetime) -> dict[str, Any] | None:
        """The item's document, or None when absent or expired at ``now``."""

    @abstractmethod
    def take_oauth_item(self, kind: str, key: str, now: datetime) -> dict[str, Any] | None:
        """Delete the item and return its document, atomically: of concurrent takers
        exactly one gets it (a code or refresh token is single use). None when absent
        or expired at ``now`` (an expired item is deleted all the same)."""

    def close(self) -> None:  # noqa: B027 - optional hook, most stores hold nothing
        """Release connections; the store is not used afterwards."""
