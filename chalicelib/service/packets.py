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
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from ..ids import AMBIGUOUS_SHOWN, ambiguous, check_packet_id
from ..store import Conflict as StoreConflict
from ..store import (
    Derive,
    OverQuota,
    PacketMeta,
    Page,
    PutItem,
    Scope,
    Store,
    StoredPacket,
    User,
)
from ..store import NotFound as StoreNotFound
from .access import Caller, access, storable
from .errors import (
    BadRequest,
    Conflict,
    InsufficientStorage,
    NotFound,
    PayloadTooLarge,
    ServiceError,
)

if TYPE_CHECKING:
    from ..packet import Checked  # only the write path imports packet

DEFAULT_LIMIT = 50  # the protocol's default page
MAX_LIMIT = 1000
MAX_PROJECT = 128  # the protocol's limit on project.name
MAX_THREAD = 1000  # how far ``thread`` walks up parent links (a DAG, but never trust data)

# The user's explicit override of the server-side scan: an extension header (a
# reference server ignores it). Our CLI sends it with --allow-unredacted.
OVERRIDE_HEADER = "X-LTM-Allow-Unredacted"
SCAN_ENV = "LTM_SERVER_SCAN"  # "off" (or 0/false/no) turns the scan off
_OFF = frozenset({"off", "0", "false", "no"})
_YES = frozenset({"1", "true", "yes"})
_LISTED = 20  # hits named in the refusal; more are counted


class PushResult(NamedTuple):
    id: str
    created: bool  # False when it replaced the caller's own packet with the same id
    conforming: bool


def push(
    store: Store,
    caller: Caller,
    raw: bytes | str | Mapping[str, Any] | Checked,
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
    # The caller is checked before the body is judged (its schema and its scan cost
    # many times a refusal), so an unknown token (401), a read-only one (403) or a team
    # the caller is not in (404) comes before anything about the body, and costs little.
    if team is None:
        who = access(store, caller, need="write")
        ready = _prepare(raw, lenient=lenient, scan=scan, derive=store.derive)
    else:
        # In team scope the packet is read with the caller and the team (one request on
        # DynamoDB), so a move of the caller's personal packet is known before the write:
        # its id is needed first, and only the JSON is parsed for it (at most 32 KiB).
        fault: ServiceError | None = None
        data: Any = None
        try:
            data = _parsed(raw)
        except ServiceError as exc:
            fault = exc
        fields = data.data if hasattr(data, "data") else data  # a Checked, or a mapping
        wanted = fields.get("id") if isinstance(fields, Mapping) else None
        who = access(
            store,
            caller,
            need="write",
            team=team,
            packet_id=wanted if isinstance(wanted, str) else None,
        )
        if fault is not None:
            raise fault
        ready = _prepare(
            data,
            lenient=lenient,
            scan=scan,
            derive=store.derive,
            parsed=isinstance(raw, str | bytes),
        )
    stored = ready.packet
    stored = stored._replace(
        meta=stored.meta._replace(owner_id=who.user.id, team_id=who.team.id if who.team else None),
    )
    try:
        created = store.put_packet(
            stored,
            sort_key=ready.sort_key,
            seen=who.packet.meta if who.packet else None,
            derived=ready.derived,
        )
    except StoreConflict:
        # Someone else owns this id, or it is the caller's in a team: never touch it.
        raise Conflict("packet id already exists") from None
    except StoreNotFound:  # left (or was removed from) the team as the packet moved
        raise NotFound("team not found") from None
    except OverQuota as exc:
        raise InsufficientStorage(_over_quota(exc)) from None
    return PushResult(id=stored.meta.id, created=created, conforming=stored.conforming)


class Prepared(NamedTuple):
    """A checked packet made ready to store ahead of its push (``prepare``)."""

    packet: StoredPacket  # its owner is the one ``prepare`` was given, its scope personal
    errors: tuple[str, ...]  # the schema's (a lenient push alone may store it)
    sort_key: str
    derived: Any  # the store's ``derive`` of its body, or None

    def __reduce__(self) -> tuple[Any, ...]:
        # An import's workers send one back for every packet: pickled flat, not as four
        # nested named tuples, each of which costs a Python-level call to pickle.
        stored = self.packet
        flat = (*stored.meta, stored.body, stored.conforming, self.errors, self.sort_key)
        return (_prepared, (*flat, self.derived))


def _prepared(*flat: Any) -> Prepared:
    """A ``Prepared`` from what its ``__reduce__`` gives."""
    n = len(PacketMeta._fields)
    meta = PacketMeta(*flat[:n])
    body, conforming, errors, sort_key, derived = flat[n:]
    return Prepared(StoredPacket(meta, body, conforming), errors, sort_key, derived)


def prepare(
    checked: Checked, *, owner_id: str = "", derive: Derive | None = None, scan: bool = False
) -> Prepared:
    """What ``push_many`` does to a checked packet before the store sees it, done ahead:
    its identity read (the id rule: ``BadRequest``), scanned if ``scan``, encoded, its
    sort key, and the store's own work on its bytes (``Store.derive``, from the checked
    data when its bytes decode to it: not decoded again). Needs no store, so ``ltm
    import`` runs it in the processes that judge the packets; ``push_many`` still holds
    a prepared packet to the lenient rule, and gives it the caller as its owner."""
    stored = _stored(checked, scan=scan)
    if owner_id:
        stored = stored._replace(meta=stored.meta._replace(owner_id=owner_id))
    derived = None
    if derive is not None:
        derived = derive(stored.body, checked.data if checked.ordered else None)
    return Prepared(stored, checked.errors, _sort_key(stored.meta.created_at), derived)


def push_many(
    store: Store,
    caller: Caller,
    packets: Sequence[Prepared | Checked | Mapping[str, Any]],
    *,
    lenient: bool = False,
) -> list[PushResult | ServiceError]:
    """Many personal pushes of checked packets (``ltm import``): one outcome per packet.

    Each packet gets what ``push`` gives it (its id rule, the lenient rule, the
    owner rule, the per-user bound), judged alone; the store writes the lot in
    one transaction where it can (``Store.put_many``). No secret scan:
    the callers are the CLI's, whose pre-flight scanned each packet already.
    """
    who = access(store, caller, need="write")
    outcomes: list[PushResult | ServiceError | None] = []
    batch: list[PutItem] = []
    for item in packets:
        derived = None
        try:
            if isinstance(item, Prepared):
                if item.errors and not lenient:
                    raise BadRequest("; ".join(item.errors))
                stored, sort_key, derived = item.packet, item.sort_key, item.derived
            else:
                ready = _prepare(item, lenient=lenient, scan=False, derive=store.derive)
                stored, sort_key, derived = ready.packet, ready.sort_key, ready.derived
        except ServiceError as exc:
            outcomes.append(exc)
            continue
        meta = stored.meta
        if meta.owner_id != who.user.id or meta.team_id is not None:
            stored = stored._replace(meta=meta._replace(owner_id=who.user.id, team_id=None))
        batch.append(PutItem(stored, sort_key, derived=derived))
        outcomes.append(None)
    written = iter(zip(batch, store.put_many(batch), strict=True))
    results: list[PushResult | ServiceError] = []
    for outcome in outcomes:
        if outcome is not None:
            results.append(outcome)
            continue
        (stored, *_), put = next(written)
        if isinstance(put, StoreConflict):
            results.append(Conflict("packet id already exists"))
        elif isinstance(put, OverQuota):
            results.append(InsufficientStorage(_over_quota(put)))
        elif isinstance(put, Exception):  # NotFound: no team is named, so never expected
            results.append(NotFound("not found"))
        else:
            results.append(PushResult(stored.meta.id, put, stored.conforming))
    return results


# A batch is the bodies of single pushes, carried in one request of its own bound
# (``limits.MAX_BATCH_BODY``), and is held to this many packets.
MAX_BATCH = 100


class BatchResult(NamedTuple):
    """One packet of a batch, answered as a single push of it would be."""

    id: str | None  # None when the packet did not get as far as a usable id
    status: int  # 201 stored; else the single push's error status
    error: str | None = None
    conforming: bool = True


def push_batch(
    store: Store,
    caller: Caller,
    body: bytes,
    *,
    team: str | None = None,
    lenient: bool = False,
    scan: bool = True,
) -> list[BatchResult]:
    """Push every packet of a batch body, each judged exactly as ``push`` judges one.

    The body is ``{"packets": [TEXT, ...]}``: each TEXT is the body a single push
    would send, so it is parsed, checked and scanned on its own and a fault in
    one answers that packet alone. What is the request's, not a packet's (the
    token, its scope, the team) refuses the whole batch, in ``push``'s order:
    401, 403 and 404 before anything about the body. The packets that pass are
    written together (``Store.put_many``: one commit on SQLite), each held to
    the id rules and the per-user bound as a single push is.
    """
    who = access(store, caller, need="write", team=team)  # before a byte of the body is read
    prepared: list[Prepared | ServiceError] = []
    for text in _batch_texts(body):
        try:
            prepared.append(_prepare(text, lenient=lenient, scan=scan, derive=store.derive))
        except ServiceError as exc:
            prepared.append(exc)
    owner, team_id = who.user.id, who.team.id if who.team else None
    writes = [
        PutItem(
            p.packet._replace(meta=p.packet.meta._replace(owner_id=owner, team_id=team_id)),
            p.sort_key,
            derived=p.derived,
        )
        for p in prepared
        if isinstance(p, Prepared)
    ]
    written = iter(store.put_many(writes))
    results: list[BatchResult] = []
    for ready in prepared:
        if isinstance(ready, ServiceError):
            # Refused before its id was known to be usable: its position in the batch names it.
            results.append(BatchResult(None, ready.status, ready.message))
            continue
        one = ready.packet
        outcome = next(written)
        if isinstance(outcome, StoreConflict):
            refused: ServiceError = Conflict("packet id already exists")
        elif isinstance(outcome, StoreNotFound):
            refused = NotFound("team not found")
        elif isinstance(outcome, OverQuota):
            refused = InsufficientStorage(_over_quota(outcome))
        else:
            results.append(BatchResult(one.meta.id, 201, None, one.conforming))
            continue
        results.append(BatchResult(one.meta.id, refused.status, refused.message))
    return results


def _batch_texts(body: bytes) -> list[str]:
    """The packet texts of a batch body (400 with why when it is not one)."""
    import json

    try:
        data = json.loads(body) if body.strip() else None
    except (ValueError, RecursionError):
        raise BadRequest("malformed JSON") from None
    texts = data.get("packets") if isinstance(data, dict) else None
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise BadRequest('body: {"packets": [...]}, each packet as the JSON text of one push')
    if not 1 <= len(texts) <= MAX_BATCH:
        raise BadRequest(f"packets: 1 to {MAX_BATCH} per batch")
    return texts


def get_many(store: Store, caller: Caller, ids: list[str]) -> list[StoredPacket | None]:
    """Each packet of ``ids`` the caller may read (as ``get`` reads one), else None; reads only.

    One token check for all of them; a team's membership is read once per team.
    """
    if not 1 <= len(ids) <= MAX_BATCH:
        raise BadRequest(f"id: 1 to {MAX_BATCH} ids")
    who = access(store, caller, need="read")
    member_of: dict[str, bool] = {}
    found: list[StoredPacket | None] = []
    held_by_id = store.get_packets([packet_id for packet_id in ids if storable(packet_id)])
    for packet_id in ids:
        # An id no packet can have was not asked for: absent, as ``get`` answers.
        held = held_by_id.get(packet_id)
        if held is not None:
            meta = held.meta
            if meta.team_id is None:
                readable = meta.owner_id == who.user.id
            else:
                if meta.team_id not in member_of:
                    member_of[meta.team_id] = _can_read(store, who.user, meta)
                readable = member_of[meta.team_id]
            if not readable and not _shared(store, who.user, meta):
                held = None
        found.append(held)
    return found


def _over_quota(exc: OverQuota) -> str:
    """The one line a push past the per-user bound gets: which bound, and the way out."""
    if exc.which == "packets":
        bound = f"{exc.quota.packets:,} packets"
    else:
        size = f"{exc.quota.bytes:,} bytes"
        for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if exc.quota.bytes >= scale:
                size = f"{exc.quota.bytes / scale:,.1f}".removesuffix(".0") + f" {unit}"
                break
        bound = f"{size} of packets"
    return (
        f"storage limit reached: at most {bound} per user on this server;"
        " delete packets you no longer need, or ask the operator for more"
    )


def _prepare(
    raw: bytes | str | Mapping[str, Any] | Checked,
    *,
    lenient: bool,
    scan: bool,
    derive: Derive | None = None,
    parsed: bool = False,
) -> Prepared:
    """The packet as it will be stored (canonical bytes), not yet given an owner or scope,
    with its sort key and the store's ``derive`` of it (``prepare``). ``parsed``: ``raw``
    is what ``_parsed`` decoded from bytes, taken as it is."""
    from .. import packet  # only the write path imports it

    if isinstance(raw, packet.Checked):
        # Checked already (the CLI's pre-flight): judged once, not again here.
        if raw.errors and not lenient:
            raise BadRequest("; ".join(raw.errors))
        return prepare(raw, derive=derive, scan=scan)
    if isinstance(raw, str | bytes):
        data, parsed = _parsed(raw), True
    else:
        data = raw if parsed else dict(raw)
    try:
        checked = packet.check(data, lenient=lenient, parsed=parsed)
    except packet.PacketError as exc:
        raise BadRequest(str(exc)) from None
    return prepare(checked, derive=derive, scan=scan)


def _parsed(raw: bytes | str | Mapping[str, Any] | Checked) -> Any:
    """A packet's bytes decoded (``packet.parse``: 413 or 400 with why); anything else as is."""
    from .. import packet

    if isinstance(raw, str):
        raw = raw.encode()
    if not isinstance(raw, bytes):
        return raw
    if len(raw) > packet.MAX_PACKET_BYTES:
        raise PayloadTooLarge(f"packet too large (max {packet.MAX_PACKET_BYTES} bytes)")
    try:
        return packet.parse(raw)
    except packet.PacketError as exc:
        raise BadRequest(str(exc)) from None


def _stored(checked: Checked, *, scan: bool) -> StoredPacket:
    """A checked packet as it will be stored: its identity read, scanned, encoded once."""

    packet_id, created_at, goal = _identity(checked.data)
    if scan:
        _refuse_secrets(checked.data)  # CPU only: no store call
    parent = checked.data.get("parent_id")
    return StoredPacket(
        meta=PacketMeta(
            id=packet_id,
            created_at=created_at,
            goal=goal,
            owner_id="",
            project=_project(checked.data),
            parent_id=parent if isinstance(parent, str) and parent else None,
        ),
        body=checked.body(),
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
    """A packet the caller reads in its scope, or one shared with them (``share``)."""
    who = access(store, caller, need="read", packet_id=packet_id)
    found = who.packet
    if found is None or not _reads(store, who.user, found.meta):
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
    return page(store, caller, team=team, limit=limit, project=project).items


def page(
    store: Store,
    caller: Caller,
    *,
    team: str | None = None,
    limit: int = DEFAULT_LIMIT,
    page_token: str | None = None,
    project: str | None = None,
    tag: str | None = None,
    since: str | None = None,
    until: str | None = None,
    author: str | None = None,
    now: datetime | None = None,
) -> Page:
    """One page of a scope's packets, newest first, filtered; reads only.

    ``page_token`` is the previous page's ``Page.cursor`` (given with the same
    filters). ``project``: only packets whose ``project.name`` is exactly that.
    ``since``/``until``: an RFC 3339 time, a date (``2026-04-01``,
    midnight UTC) or an age (``3d``, ``12h``, ``2w``: that long before now);
    ``since`` is inclusive, ``until`` exclusive. ``author``: who stored the
    packet, by user id or display name (``me``: the caller); in a team, a
    member of it.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    if project is not None and not 1 <= len(project) <= MAX_PROJECT:
        raise BadRequest(f"project must be 1 to {MAX_PROJECT} characters")
    who = access(store, caller, need="read", team=team)
    team_id = who.team.id if who.team else None
    now = now or datetime.now(UTC)
    low = time_bound(since, "since", now) if since is not None else None
    high = time_bound(until, "until", now) if until is not None else None
    author_id = _author(store, who.user, team_id, author) if author is not None else None
    if tag is not None and not _TAG.fullmatch(tag):
        raise BadRequest("tag: lower-case letters, digits and dashes, as in a packet's tags")
    if page_token == "":
        raise BadRequest("page_token: not a token from this listing")
    try:
        return store.list_packets(
            owner_id=who.user.id,
            team_id=team_id,
            limit=limit,
            cursor=page_token,
            project=project,
            tag=tag,
            since=low,
            until=high,
            author=author_id,
        )
    except ValueError:
        raise BadRequest("page_token: not a token from this listing") from None


_TAG = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")


def time_bound(value: str, name: str, now: datetime) -> str:
    """A ``since``/``until`` value as a listing sort key (see ``ltm.times``); 400 with why."""
    from ..times import TimeError, sort_key

    try:
        return sort_key(value, now)
    except TimeError as exc:
        raise BadRequest(f"{name}: {exc}") from None


def _author(store: Store, user: User, team_id: str | None, author: str) -> str:
    """The user id ``author`` names in this scope (400 when it names nobody there)."""
    if not author:
        raise BadRequest("author: give a user id, a display name or me")
    if author in ("me", user.id, user.display):
        return user.id
    if team_id is None:
        raise BadRequest(f"author: {author!r} has no packets in your personal scope")
    members = store.list_members(team_id)
    named = [m for m in members if m.user_id == author] or [
        m for m in members if m.display == author
    ]
    if not named:
        raise BadRequest(f"author: no member {author!r} in this team")
    if len(named) > 1:
        raise BadRequest(f"author: {author!r} names more than one member; give the user id")
    return named[0].user_id


def readable_scopes(store: Store, user: User) -> list[Scope]:
    """Every scope ``user`` may read: personal first, then their teams (one read)."""
    return [(user.id, None), *((user.id, t.id) for t in store.list_teams(user.id))]


def children(
    store: Store, caller: Caller, packet_id: str, *, limit: int = DEFAULT_LIMIT
) -> list[PacketMeta]:
    """The packets that continue ``packet_id`` and that the caller may read; reads only.

    404 when the packet itself is not readable, as ``get`` reads it (a packet shared with
    the caller too: their own packets continuing it are listed).
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    who = access(store, caller, need="read", packet_id=packet_id)
    if who.packet is None or not _reads(store, who.user, who.packet.meta):
        raise NotFound("not found")
    return store.children(packet_id, scopes=readable_scopes(store, who.user), limit=limit)


class Thread(NamedTuple):
    packets: list[StoredPacket]  # from the oldest readable ancestor to the packet asked for
    complete: bool  # False when the walk stops before the root (``thread`` says why)


def thread(store: Store, caller: Caller, packet_id: str) -> Thread:
    """The work thread that ends at ``packet_id``, root first, as far as the caller may read.

    Reads only: one read per packet, walking ``parent_id`` up (a cycle or a
    thread longer than ``MAX_THREAD`` stops the walk). 404 when the packet
    itself is not readable. Readable is as ``get`` reads it: a packet shared with
    the caller is in their thread (``ltm show`` shows it them); the walk stops at
    the first packet they could not ``get``.
    """
    who = access(store, caller, need="read", packet_id=packet_id)
    if who.packet is None or not _reads(store, who.user, who.packet.meta):
        raise NotFound("not found")
    chain = [who.packet]
    seen = {packet_id}
    complete = True
    teams_ok: dict[str, bool] = {}
    while (parent := chain[-1].meta.parent_id) is not None:
        found = store.get_packet(parent) if parent not in seen else None
        if found is None or len(chain) >= MAX_THREAD:
            complete = False
            break
        meta = found.meta
        if meta.team_id is not None and meta.team_id not in teams_ok:
            teams_ok[meta.team_id] = _can_read(store, who.user, meta)
        readable = teams_ok[meta.team_id] if meta.team_id else meta.owner_id == who.user.id
        if not readable and not _shared(store, who.user, meta):
            complete = False
            break
        seen.add(parent)
        chain.append(found)
    chain.reverse()
    return Thread(chain, complete)


def resolve(store: Store, caller: Caller, prefix: str, *, team: str | None = None) -> str:
    """The one id in the caller's scope that starts with ``prefix`` (used by the local CLI)."""
    who = access(store, caller, need="read", team=team)
    team_id = who.team.id if who.team else None
    matches = store.packet_ids_with_prefix(
        prefix, owner_id=who.user.id, team_id=team_id, limit=AMBIGUOUS_SHOWN + 1
    )
    if not matches:
        raise NotFound(f"no packet matches {prefix!r}")
    if len(matches) > 1:
        raise BadRequest(ambiguous(prefix, matches))
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


def _reads(store: Store, user: User, meta: PacketMeta) -> bool:
    """Whether ``user`` may read the packet: in its own scope, or by a share of it."""
    return _can_read(store, user, meta) or _shared(store, user, meta)


def _shared(store: Store, user: User, meta: PacketMeta) -> bool:
    """Whether a live share lets ``user`` read a packet they cannot read in its scope."""
    from .share import readable_by_share  # only a refused read pays for the import

    return readable_by_share(store, user, meta)


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
