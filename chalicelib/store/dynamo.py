"""The DynamoDB store: the same contract as SQLite, for ltm on Lambda.

Key design
==========

One table (on-demand) with two overloaded global secondary indexes. One
table keeps the IAM policy, the CloudFormation template and backups to one
resource, and lets a single TransactWriteItems cover users, tokens, teams and
invites. Every item has ``pk``/``sk``; an item type sets the index keys it
needs and no others (the indexes are sparse)::

    item              pk / sk                     gsi1pk / gsi1sk
    packet            PKT#<id> / PKT              SCOPE#<scope> / <sortkey>#<id>
    user              USER#<id> / USER            -
    subject claim     SUBJECT#<subject> / SUBJECT -
    name claim        NAME#<name key> / NAME      -  (display names: unique in any case)
    token             TOKEN#<hash> / TOKEN        TOKENS#<user> / <created>#<label>
    label claim       LABEL#<label> / LABEL       -
    team (by name)    TEAMNAME#<name> / TEAM      -
    member (by name)  TEAMNAME#<name> / MEMBER#<u> -
    team (by id)      TEAM#<id> / TEAM            -
    member (by id)    TEAM#<id> / MEMBER#<u>      -
    member (by user)  USER#<u> / MEMBEROF#<team created>#<name>
    invite            INVITE#<codehash> / INVITE  -
    invite's maker    TEAM#<id> / MADE#<u>#<codehash> -  (which member made it)
    team publication  TEAM#<id> / PUBLISHED#<u>#<packet id> -  (which member published it)
    publication       PUBLIC#<secrethash> / PUBLIC -
    share             SHARE#<packet id> / TO#<u>  SHARED#<u> / <created>#<packet id>
    usage             USAGE#<user> / USAGE        -  (packets, bytes: what the user owns)
    (device grants, user-code claims, counters and secrets: see dynamo_device.py)

    gsi2pk / gsi2sk: packet SCOPE#<scope> / <id>; token TOKENS#<n> / <created>#<label>
    (n: one of TOKEN_PARTITIONS, from the token's hash);
    invite INVITES#<team> / <codehash>.

    gsi_project_pk / gsi_project_sk (index ``gsi_project``, sparse: only packets
    with a ``project.name``): SCOPE#<scope>#P#<project> / <sortkey>#<id>.

    gsi_parent_pk / gsi_parent_sk (sparse, lineage): a packet with a parent
    PARENT#<parent id> / <sortkey>#<id>.

    (Neither for a lenient packet whose project name or parent id makes a key past
    DynamoDB's 2048 bytes: it is stored, listed in its scope, and in neither index.)

    gsi_author_pk / gsi_author_sk (sparse, team packets only): SCOPE#t:<team>#A#<author>
    / <sortkey>#<id>.

    search index (derived by the stream consumer, see dynamo_search.py):
    posting           T#<scope>#<w[:2]> / <word>#<sortkey>#<id>       (w: weight)
    facet             FACET#<scope>#tag#<tag> / <sortkey>#<id>        (listing fields)
                      FACET#<scope>#project#<name> / <sortkey>#<id>
    pending           PEND#<scope> / <sortkey>#<id>                   (rev; until indexed)
    team mark         TEAM#<id> / PKT#<packet id>                     (a team packet)
    team tombstone    TEAM#<id> / GONE                                (a deleted team)
    departure mark    TEAM#<id> / LEFT#<u>                            (a removed member)

    A token item carries its OAuth ``scope`` ("read", "write", "read write"; absent
    on tokens from before scopes, which are full). An invite's ``MADE#`` item, in
    its team's partition, names the member who made it, and a ``PUBLISHED#`` item
    there the member who published one of the team's packets (each written in a
    transaction that checks the maker's membership), so the invites and
    publications die with the membership without a Scan. Memberships from before
    these items carry ``invites_made`` and ``published_made`` instead (string sets
    of the code hashes and the packet ids, which grew with every invite and every
    publication towards the 400 KB item limit); they are still read, never added
    to, and a departure mark carries them on. The tombstone and the departure mark
    drive the resumable jobs in ``dynamo_fanout.py`` (their ``step``, then ``done``
    and a TTL a day ahead); a team mark, put by the stream consumer, is how a
    team's deletion finds a packet gsi1 does not list yet.

``<scope>`` is ``u:<owner>`` or ``t:<team>``. A published packet's item
carries ``public_hash``, the hash of its public URL's secret; the ``PUBLIC#``
item maps that hash back to the packet id and keeps the secret. The packet
item is the truth: a public read (two GetItems) serves the packet only while
its item names that very hash, so deleting the packet, by any path, ends the
publication at once (the ``PUBLIC#`` item left behind is unreachable). A team
packet's publication is served, and reported, only while its publisher is a
member (a third GetItem), so a removed member's publications end at once,
before their departure's clean-up deletes them. Publishing and unpublishing
write both items in one transaction. A re-push replaces the packet item, and
the publication is put back on it right after, in a transaction that checks
the ``PUBLIC#`` item is still there (between the two the URL answers 404: it
fails closed). A move of the owner's packet into a team (a transaction) does
not carry the publication along: the packet changed scope, so its public URL
ends.

Which request uses what:

- every request starts with ``load``: the token, and whichever of the team
  (by name) with the caller's membership, and the packet, the request is
  about, in one BatchGetItem (one GetItem when it is the token alone). The
  caller's id comes from the token itself (see ``service/tokens.py``), so
  the membership key is known before the token is read; the token item
  carries a copy of its user (users never change), so no read of the user.
  The token's last-used time is written at most every five minutes.
- get a packet: the ``load`` above; for a team packet, one GetItem of the
  reader's membership in the packet's team; for a reader who may manage a
  published packet, one GetItem of its ``PUBLIC#`` item (the packet as loaded
  carries its ``public_hash``: ``publication_of``), and for a team packet one of
  its publisher's membership.
- list a scope: one Query on gsi1, newest first (``ScanIndexForward=False``)
  with ``Limit``; the cursor is the last item's index key, opaque (base64).
  gsi1 projects only the listing fields, never the packet body.
- list a scope's packets of one project: the same Query on ``gsi_project``.
- resolve an id prefix: one Query on gsi2 with ``begins_with`` on the id;
  within a project, a Query of that project's ``gsi_project`` partition with a
  ``begins_with`` filter on the id (it reads the project's packets, never
  the table).
- push: one GetItem of the packet under the id (the cross-user id rule is
  checked on it; its ``rev`` is what a replacement is conditioned on, what it
  occupies what the replacement changes the usage by), then one
  TransactWriteItems: the packet (absent, or still that revision), its
  owner's usage counter (conditioned on the quota), the pending search entry,
  and for a team packet two ConditionChecks: the owner's membership, and the
  team's tombstone absent.
  A lost race reads again.
- invites: create is one transaction that puts the invite and its ``MADE#``
  item and checks the maker's membership; accepting checks, in its
  transaction, that the maker is still a member (and, for a new membership,
  that the user's own departure from the team, if any, is done).
- removing a member (kicked or left): one BatchGetItem (the membership and any
  earlier departure mark), one transaction that deletes the membership's three
  copies and puts the departure mark, then at most ``INLINE_PAGES`` pages of the
  clean-up (each a Query of the member's ``PUBLISHED#`` or ``MADE#`` items, the
  packets and publications they name in BatchGetItems, one transaction or two
  BatchWriteItems), however many invites and publications the member made; the
  stream consumer runs the rest (``dynamo_fanout.py``). Their invites are refused
  and their public links dead from the transaction on (a team packet's public
  read checks its publisher's membership).
- delete a packet: one GetItem (its revision and what it occupies), then one
  TransactWriteItems: the delete conditioned on that revision, the owner's usage,
  and for a team packet a ConditionCheck of the caller's membership (and the owner
  role, for someone else's packet).
- a user's teams: one Query of the ``MEMBEROF#`` items in the user's
  partition (strongly consistent, so a team shows at once after joining).
- team by name + the caller's membership: the two items under
  ``TEAMNAME#<name>``; the member copy there carries the team id and is
  only believed when it matches the team item (a deleted team's leftovers
  never grant anything to a new team of the same name).

- list with filters: ``since``/``until`` are a range on gsi1's sort key;
  ``tag`` reads the tag's facet partition instead (already newest first,
  carrying the listing fields); ``author`` in a team reads that author's
  partition of ``gsi_author``; with a tag or a project it is a FilterExpression
  (it costs the items it skips; the packets of one scope, never the table).
- children: one Query on gsi_parent, keeping the children of readable scopes.
- shares: a share (one packet, one reader) is one item in its packet's ``SHARE#``
  partition, so a packet's shares are one Query and every delete path (the
  packet's, its team's) finds and deletes them; a share is put in a transaction
  that checks the packet's owner and scope. What is shared with a user is one
  Query on gsi1 (newest first) and one BatchGetItem of the shares and their
  packets, so a share whose packet is gone is never listed.

So a get or list costs at most two requests, token check included, in
personal and team scope (``tests/test_dynamo_calls.py``), and one more for a
published packet's manager, told its publication; a push or delete
costs three: the token, the packet's revision, one transaction. What a packet
derives (its search postings and facets) is written by the stream consumer.

Search without a full-text engine, and without a Scan
-----------------------------------------------------
DynamoDB has no full-text search, and reading a scope's packets per query costs
read units in proportion to the scope. So a packet's heaviest words get postings
that a query joins, with a cost bounded by the query, not by the scope's size;
the postings are derived by the table's stream consumer, and a packet is
searchable from its push's 201 on (its pending entry). ``dynamo_search.py`` says
how, what is indexed and what it costs.

What a user owns (``usage``, for the per-user bound ``quota``) is a counter
item per user, never a count of their packets. It changes in the packet's own
transaction (a new packet adds one and the bytes it occupies, only while the
result stays within the bound, so concurrent pushes cannot pass it together; a
replacement adds the change; a delete takes the packet off), so the counter
equals a recount at every instant and no crash can leave it off. It is not
derived by the stream consumer because a push over the quota must be refused
before its 201. The bytes a packet occupies (``occupied``) are every item it
makes, as the table bills them: its own item, its copies in the listing indexes,
its postings and facets, each with DynamoDB's 100 bytes of overhead (a 3 KB
packet some 2.7 times its body, a small one more: the overhead is per item).
They are computed from the packet alone, with the very
functions that make those items, so the push, the delete and the recount
(``dynamo_repair.py``) agree; the consumer writing the postings later, or twice,
changes nothing. A change of what a packet derives (the words indexed) changes
what the packets stored before occupy: run the recount after it.

Uniqueness and single use are conditional writes in transactions: team names
(``TEAMNAME#`` item), token hashes and labels (``TOKEN#`` + ``LABEL#``),
subjects (``SUBJECT#``), user + first token together, and an invite's use
(an Update conditioned on ``used_at`` absent and not expired, in the same
transaction as the membership and an optional new user + token).
Transactions that lose a race to another transaction (``TransactionConflict``),
or that DynamoDB throttled (``ThrottlingError``, ``ProvisionedThroughputExceeded``:
a cancelled transaction, which the SDK does not retry), are re-read and retried,
so a lost race ends as Gone/Conflict, never as a 500, and a throttled create never
as "already taken".

Copies (user display on members and tokens, team fields on members, each
membership under the team's id, its name and the user) are written in the
same transaction as the original. Teams are immutable; a user's display name
changes only by ``rename_user``, which moves the name claim and the user item
in one transaction and then rewrites the copies (a reader may see the old name
on a membership for that moment).

Invites carry ``ttl_epoch`` (epoch seconds) for DynamoDB TTL, set a grace
period after expiry so an expired code still answers 410 for a while; the
code checks ``expires_at`` itself and never relies on TTL (which is lazy).
The device flow's expiring items do the same (``dynamo_device.py``).

Reads of items by key are strongly consistent; index Queries (listings) are
eventually consistent, as every GSI is: a packet pushed a moment ago may
take a fraction of a second to show in ``ls``.

Tested on two engines: moto, and dynalite (an implementation of DynamoDB's
API that shares no code with the SDK; ``tests/dynalite_engine.py`` says
what it lacks: TransactWriteItems, UpdateTimeToLive).

Development: ``python -m ltm.store.dynamo create-tables [--table NAME]``
creates the table (and its TTL) against ``AWS_ENDPOINT_URL_DYNAMODB`` (moto
server, DynamoDB Local) or a real account. ``TABLE_SCHEMA`` below is the one
definition of the table; ``infra/ltm.yaml`` is checked against it by
``tests/test_infra.py``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import sys
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from . import (
    FULL_SCOPE,
    Conflict,
    Gone,
    Invite,
    Loaded,
    Member,
    NameTaken,
    NotFound,
    OverQuota,
    PacketMeta,
    Page,
    Publication,
    Role,
    Scope,
    Share,
    Store,
    StoredPacket,
    Team,
    Token,
    Usage,
    User,
    decode_cursor,
    encode_cursor,
    moves_into_team,
    name_key,
)
from .dynamo_device import DeviceGrantsMixin
from .dynamo_fanout import (
    DepartureMixin,
    TeamDeleteMixin,
    departure_key,
    ours,
    update_existing,
)
from .dynamo_search import SearchMixin, fits_key, index_items, pending_key, scope_name

if TYPE_CHECKING:  # botocore is imported only when a DynamoStore is built
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef, WriteRequestTypeDef

logger = logging.getLogger("ltm.store")

# An item as the low-level client reads and writes it. The client's stubs spell it with
# TypedDicts (AttributeValueTypeDef); the helpers below are where one becomes the other.
Item = dict[str, dict[str, Any]]

DEFAULT_TABLE = "ltm"
TTL_ATTRIBUTE = "ttl_epoch"
INVITE_TTL_GRACE = timedelta(days=30)
OAUTH_TTL_GRACE = timedelta(days=1)  # OAuth items and expiring tokens: TTL tidies up after
# On a membership (by team id), from before the ``MADE#`` items: the code hashes of the
# invites the member made (read, never added to); a departure mark carries them on.
INVITES_MADE = "invites_made"
SHARED = "shared"  # on a packet item once it was shared: its delete looks for shares to end
# On a membership, from before the ``PUBLISHED#`` items: ids of the team's packets the
# member published (read, never added to); a departure mark carries them on.
PUBLISHED_MADE = "published_made"
# Every token in one index partition would put a hot key under each sign-in; spread
# over these (an operator's listing of all tokens reads each).
TOKEN_PARTITIONS = 8
TRANSACTION_ATTEMPTS = 6
# The table's record of its derived data, written by ``dynamo_repair.py``: for each of
# ``REPAIRS``, the generation of what this code derives (search postings, facets, team
# marks; what a packet occupies in its owner's usage) that the repair last brought the
# whole table to. A table from before the stream consumer or the usage counters has no
# record and needs both; a change of what a packet derives moves DERIVED_GENERATION on.
# The service reads it once per process (a Lambda container) and says what is owed.
DERIVED_GENERATION = 1
REPAIRS = ("index", "usage")
DERIVED_KEY = {"pk": {"S": "META#DERIVED"}, "sk": {"S": "META"}}

# What a listing shows of a packet (PacketMeta), projected into the indexes that list.
_LISTING = ["id", "created_at", "goal", "owner_id", "team_id", "project", "parent_id"]


def _listing_index(name: str) -> dict[str, Any]:
    """A sparse index keyed ``<name>_pk``/``<name>_sk`` that projects the listing fields
    only, never the body."""
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": f"{name}_pk", "KeyType": "HASH"},
            {"AttributeName": f"{name}_sk", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": _LISTING},
    }


# The one definition of the table: create_tables() uses it as is, and
# tests/test_infra.py checks that infra/ltm.yaml declares exactly this.
TABLE_SCHEMA: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": name, "AttributeType": "S"}
        for name in (
            "pk",
            "sk",
            "gsi1pk",
            "gsi1sk",
            "gsi2pk",
            "gsi2sk",
            "gsi_project_pk",
            "gsi_project_sk",
            "gsi_parent_pk",
            "gsi_parent_sk",
            "gsi_author_pk",
            "gsi_author_sk",
        )
    ],
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": "gsi1",
            "KeySchema": [
                {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
            ],
            "Projection": {
                "ProjectionType": "INCLUDE",
                "NonKeyAttributes": [
                    # packet listings
                    "id",
                    "created_at",
                    "goal",
                    "owner_id",
                    "team_id",
                    "project",
                    "parent_id",
                    # a user's tokens
                    "label",
                    "user_id",
                    "token_hash",
                    "last_used_at",
                ],
            },
        },
        {
            "IndexName": "gsi2",
            "KeySchema": [
                {"AttributeName": "gsi2pk", "KeyType": "HASH"},
                {"AttributeName": "gsi2sk", "KeyType": "RANGE"},
            ],
            "Projection": {
                "ProjectionType": "INCLUDE",
                # all tokens (packet prefixes and team invites need only the keys)
                "NonKeyAttributes": [
                    "label",
                    "user_id",
                    "token_hash",
                    "created_at",
                    "last_used_at",
                ],
            },
        },
        # A scope's packets of one project, newest first (sparse: packets with a
        # project.name only). Projects only the listing fields, never the body.
        _listing_index("gsi_project"),
        # Sparse: only packets with a parent carry its keys (lineage).
        _listing_index("gsi_parent"),
        # Sparse: team packets only, by author (``ls --author`` in a team).
        _listing_index("gsi_author"),
    ],
    "BillingMode": "PAY_PER_REQUEST",
    # The search index is derived from the packets' changes (dynamo_stream.py).
    "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
}


# -- attribute values -------------------------------------------------------


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _get(item: Mapping[str, Mapping[str, Any]], name: str) -> str | None:
    value = item.get(name)
    return None if value is None else value.get("S")


def _req(item: Mapping[str, Mapping[str, Any]], name: str) -> str:
    value = _get(item, name)
    if value is None:
        raise KeyError(name)
    return value


def _epoch(value: datetime) -> dict[str, str]:
    return {"N": str(int(value.timestamp()))}


def _key(pk: str, sk: str) -> Item:
    return {"pk": _s(pk), "sk": _s(sk)}


def _scope(owner_id: str, team_id: str | None) -> str:
    return f"SCOPE#t:{team_id}" if team_id else f"SCOPE#u:{owner_id}"


# -- item <-> record --------------------------------------------------------


def _packet_item(packet: StoredPacket, sort_key: str) -> Item:
    meta = packet.meta
    scope = _scope(meta.owner_id, meta.team_id)
    item: Item = {
        **_key(f"PKT#{meta.id}", "PKT"),
        "id": _s(meta.id),
        "created_at": _s(meta.created_at),
        "goal": _s(meta.goal),
        "owner_id": _s(meta.owner_id),
        "sort_key": _s(sort_key),
        "conforming": {"BOOL": packet.conforming},
        "body": {"B": packet.body},
        "gsi1pk": _s(scope),
        "gsi1sk": _s(f"{sort_key}#{meta.id}"),
        "gsi2pk": _s(scope),
        "gsi2sk": _s(meta.id),
    }
    if meta.team_id is not None:
        item["team_id"] = _s(meta.team_id)
    # A lenient packet's project name or parent id may be longer than an index's partition
    # key holds (DynamoDB would refuse the write): such a packet is left out of that index.
    if meta.project is not None:
        item["project"] = _s(meta.project)
        if fits_key(project := _project_scope(scope, meta.project)):
            item["gsi_project_pk"] = _s(project)
            item["gsi_project_sk"] = _s(f"{sort_key}#{meta.id}")
    if meta.parent_id is not None:
        item["parent_id"] = _s(meta.parent_id)
        if fits_key(parent := f"PARENT#{meta.parent_id}"):
            item["gsi_parent_pk"] = _s(parent)
            item["gsi_parent_sk"] = _s(f"{sort_key}#{meta.id}")
    if meta.team_id is not None:
        item["gsi_author_pk"] = _s(_author_scope(scope, meta.owner_id))
        item["gsi_author_sk"] = _s(f"{sort_key}#{meta.id}")
    return item


# DynamoDB bills each item it stores, and each projection of an item into an index, at
# the item's size plus this many bytes.
ITEM_OVERHEAD = 100


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size by DynamoDB's rules: each attribute's name and its value (a string's
    UTF-8 bytes, a binary's bytes, a number one byte per two digits and one more)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, held),) = value.items()
    if kind == "S":
        return len(held.encode())
    if kind == "B":
        return len(held)
    if kind == "N":
        return -(-len(str(held).lstrip("-").replace(".", "")) // 2) + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("L", "M"):
        return 3 + sum(1 + _value_size(x) for x in (held if kind == "L" else held.values()))
    return sum(len(str(x)) for x in held)  # sets


def index_projection(
    item: Mapping[str, Mapping[str, Any]], index: Mapping[str, Any]
) -> dict[str, Any] | None:
    """What of ``item`` the index (one of ``TABLE_SCHEMA``'s) holds; None when it is not in
    it (the indexes are sparse)."""
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    if not all(k in item for k in keys):
        return None
    names = {"pk", "sk", *keys, *index["Projection"].get("NonKeyAttributes", [])}
    return {k: v for k, v in item.items() if k in names}


def stored_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """The bytes an item occupies: itself and its projection into each index it is in,
    each with DynamoDB's overhead."""
    held = [item]
    for index in TABLE_SCHEMA["GlobalSecondaryIndexes"]:
        if (projection := index_projection(item, index)) is not None:
            held.append(projection)
    return sum(item_size(i) + ITEM_OVERHEAD for i in held)


def _author_scope(scope: str, author: str) -> str:
    return f"{scope}#A#{author}"


def _listing_fields(meta: PacketMeta) -> Item:
    fields: Item = {
        "id": _s(meta.id),
        "created_at": _s(meta.created_at),
        "goal": _s(meta.goal),
        "owner_id": _s(meta.owner_id),
    }
    if meta.team_id is not None:
        fields["team_id"] = _s(meta.team_id)
    if meta.project is not None:
        fields["project"] = _s(meta.project)
    if meta.parent_id is not None:
        fields["parent_id"] = _s(meta.parent_id)
    return fields


def _project_scope(scope: str, project: str) -> str:
    return f"{scope}#P#{project}"


def _packet_meta(item: Mapping[str, Mapping[str, Any]]) -> PacketMeta:
    return PacketMeta(
        id=_req(item, "id"),
        created_at=_get(item, "created_at") or "",
        goal=_get(item, "goal") or "",
        owner_id=_req(item, "owner_id"),
        team_id=_get(item, "team_id"),
        project=_get(item, "project"),
        parent_id=_get(item, "parent_id"),
    )


def _stored_packet(item: Mapping[str, Mapping[str, Any]]) -> StoredPacket:
    conforming = item.get("conforming", {}).get("BOOL", True)
    return StoredPacket(
        _packet_meta(item),
        bytes(item["body"]["B"]),
        bool(conforming),
        _get(item, "public_hash"),
    )


def _user_fields(user: User, prefix: str = "") -> Item:
    fields: Item = {
        f"{prefix}id" if prefix else "user_id": _s(user.id),
        f"{prefix}display": _s(user.display),
        f"{prefix}created_at": _s(_ts(user.created_at)),
    }
    if user.subject is not None:
        fields[f"{prefix}subject"] = _s(user.subject)
    return fields


def _user_item(user: User) -> Item:
    return {**_key(f"USER#{user.id}", "USER"), **_user_fields(user)}


def _subject_item(user: User) -> Item:
    assert user.subject is not None
    return {**_key(f"SUBJECT#{user.subject}", "SUBJECT"), **_user_fields(user)}


def _user(item: Mapping[str, Mapping[str, Any]], prefix: str = "") -> User:
    return User(
        id=_req(item, f"{prefix}id" if prefix else "user_id"),
        display=_get(item, f"{prefix}display") or "",
        created_at=_dt(_req(item, f"{prefix}created_at")),
        subject=_get(item, f"{prefix}subject"),
    )


def _token_items(token: Token, user: User) -> list[Item]:
    order = f"{_ts(token.created_at)}#{token.label}"
    item: Item = {
        **_key(f"TOKEN#{token.token_hash}", "TOKEN"),
        "label": _s(token.label),
        "user_id": _s(token.user_id),
        "token_hash": _s(token.token_hash),
        "created_at": _s(_ts(token.created_at)),
        "scope": _s(token.scope),
        **_user_fields(user, prefix="user_"),
        "gsi1pk": _s(f"TOKENS#{token.user_id}"),
        "gsi1sk": _s(order),
        "gsi2pk": _s(_tokens_partition(token.token_hash)),
        "gsi2sk": _s(order),
    }
    if token.last_used_at is not None:
        item["last_used_at"] = _s(_ts(token.last_used_at))
    if token.resource is not None:
        item["resource"] = _s(token.resource)
    if token.expires_at is not None:
        item["expires_at"] = _s(_ts(token.expires_at))
        item[TTL_ATTRIBUTE] = _epoch(token.expires_at + OAUTH_TTL_GRACE)
    label: Item = {
        **_key(f"LABEL#{token.label}", "LABEL"),
        "token_hash": _s(token.token_hash),
        "user_id": _s(token.user_id),
    }
    return [item, label]


def _tokens_partition(token_hash: str) -> str:
    return f"TOKENS#{zlib.crc32(token_hash.encode()) % TOKEN_PARTITIONS}"


def _token(item: Mapping[str, Mapping[str, Any]]) -> Token:
    last = _get(item, "last_used_at")
    return Token(
        label=_req(item, "label"),
        user_id=_req(item, "user_id"),
        token_hash=_req(item, "token_hash"),
        created_at=_dt(_req(item, "created_at")),
        last_used_at=_dt(last) if last else None,
        # Tokens stored before scopes existed were all full.
        scope=_get(item, "scope") or FULL_SCOPE,
        resource=_get(item, "resource"),
        expires_at=_dt(expires) if (expires := _get(item, "expires_at")) else None,
    )


def _oauth_doc(
    item: Mapping[str, Mapping[str, Any]] | None, now: datetime
) -> dict[str, Any] | None:
    """An OAuth item's document, unless absent or expired (TTL deletes lazily, if at all)."""
    if item is None:
        return None
    expires = _get(item, "expires_at")
    if expires is not None and _dt(expires) <= now:
        return None
    return json.loads(_req(item, "doc"))


def _team_fields(team: Team) -> Item:
    return {
        "team_id": _s(team.id),
        "team_name": _s(team.name),
        "team_owner_id": _s(team.owner_id),
        "team_created_at": _s(_ts(team.created_at)),
    }


def _team(item: Mapping[str, Mapping[str, Any]]) -> Team:
    return Team(
        id=_req(item, "team_id"),
        name=_req(item, "team_name"),
        owner_id=_req(item, "team_owner_id"),
        created_at=_dt(_req(item, "team_created_at")),
    )


def _member_keys(team: Team, user_id: str) -> list[Item]:
    """Where a membership lives: under the team's id (authoritative), its name, and the user."""
    return [
        _key(f"TEAM#{team.id}", f"MEMBER#{user_id}"),
        _key(f"TEAMNAME#{team.name}", f"MEMBER#{user_id}"),
        _key(f"USER#{user_id}", f"MEMBEROF#{_ts(team.created_at)}#{team.name}"),
    ]


def _member_puts(
    team: Team, user_id: str, display: str, role: Role, when: datetime
) -> list[dict[str, Any]]:
    """Transaction actions writing a new membership; the first fails if it exists."""
    fields: Item = {
        **_team_fields(team),
        "user_id": _s(user_id),
        "display": _s(display),
        "role": _s(role),
        "joined_at": _s(_ts(when)),
    }
    by_id, by_name, by_user = ({**key, **fields} for key in _member_keys(team, user_id))
    # The copies are overwritten, not checked: a leftover of a deleted team of
    # the same name must not block the new one (and is never believed anyway).
    return [_put_new(by_id), {"Put": {"Item": by_name}}, {"Put": {"Item": by_user}}]


def _membership(
    team_item: Mapping[str, Mapping[str, Any]] | None,
    member_item: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[Team, Member] | None:
    """A team (by name) and the membership copy under its name, if both are there and agree."""
    if team_item is None or member_item is None:
        return None
    team = _team(team_item)
    if _get(member_item, "team_id") != team.id:
        return None  # a leftover of an older team of the same name
    return team, _member(member_item)


def _member(item: Mapping[str, Mapping[str, Any]]) -> Member:
    role = _req(item, "role")
    assert role in ("owner", "member")
    return Member(
        user_id=_req(item, "user_id"),
        display=_get(item, "display") or "",
        role=role,  # type: ignore[arg-type]
        joined_at=_dt(_req(item, "joined_at")),
    )


def _invite(item: Mapping[str, Mapping[str, Any]]) -> Invite:
    used_at = _get(item, "used_at")
    return Invite(
        code_hash=_req(item, "code_hash"),
        team_id=_req(item, "team_id"),
        created_by=_req(item, "created_by"),
        created_at=_dt(_req(item, "created_at")),
        expires_at=_dt(_req(item, "expires_at")),
        used_at=_dt(used_at) if used_at else None,
        used_by=_get(item, "used_by"),
    )


# -- the store --------------------------------------------------------------


class _Cancelled(Exception):
    """A transaction was cancelled; ``codes`` holds one reason code per action."""

    def __init__(self, codes: list[str]) -> None:
        super().__init__(codes)
        self.codes = codes

    def failed(self, index: int) -> bool:
        return index < len(self.codes) and self.codes[index] == "ConditionalCheckFailed"

    @property
    def conflict(self) -> bool:
        """Whether trying again may succeed: a lost race, or DynamoDB throttled the
        transaction (the SDK retries a throttled call, never a cancelled transaction)."""
        return not RETRYABLE.isdisjoint(self.codes)


# The reasons a transaction is cancelled with that say nothing about its items.
RETRYABLE = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


def _unpublish_ops(key: Item, secret_hash: str) -> list[dict[str, Any]]:
    """The transaction that ends a publication: the packet's ``public_hash`` goes (if
    it is still this one) with the public link's item."""
    return [
        {
            "Update": {
                "Key": key,
                "UpdateExpression": "REMOVE #h",
                "ConditionExpression": "#h = :h",
                "ExpressionAttributeNames": {"#h": "public_hash"},
                "ExpressionAttributeValues": {":h": _s(secret_hash)},
            }
        },
        {"Delete": {"Key": _key(f"PUBLIC#{secret_hash}", "PUBLIC")}},
    ]


class DynamoStore(SearchMixin, TeamDeleteMixin, DepartureMixin, DeviceGrantsMixin, Store):
    """A ``Store`` in one DynamoDB table. Thread-safe (botocore clients are)."""

    def __init__(
        self,
        table: str = DEFAULT_TABLE,
        *,
        client: DynamoDBClient | None = None,
        region: str | None = None,
    ) -> None:
        self.table = table
        self._client = client if client is not None else make_client(region)
        self._exc = self._client.exceptions
        self._owed: list[str] | None = None  # repairs_owed's answer, once read

    @property
    def client(self) -> DynamoDBClient:
        return self._client

    # -- low-level helpers ----------------------------------------------

    def _get_item(self, key: Item) -> Item | None:
        resp = self._client.get_item(TableName=self.table, Key=key, ConsistentRead=True)
        return cast("Item | None", resp.get("Item"))

    def _batch_get(self, keys: Sequence[Item], *, consistent: bool = True) -> list[Item]:
        """Several items by key in one round trip (more only if DynamoDB defers some)."""
        found: list[Item] = []
        pending: list[Item] = list(keys)
        for attempt in range(8):
            resp = self._client.batch_get_item(
                RequestItems={self.table: {"Keys": pending, "ConsistentRead": consistent}}
            )
            found.extend(cast("list[Item]", resp.get("Responses", {}).get(self.table, [])))
            unprocessed = resp.get("UnprocessedKeys", {}).get(self.table)
            pending = cast("list[Item]", unprocessed["Keys"] if unprocessed else [])
            if not pending:
                return found
            _backoff(attempt)
        raise RuntimeError("DynamoDB kept deferring a BatchGetItem")

    def _read(self, keys: Sequence[Item]) -> dict[tuple[str, str], Item]:
        """Items by key, in one GetItem or one BatchGetItem; keyed by (pk, sk)."""
        if len(keys) == 1:
            item = self._get_item(keys[0])
            items = [item] if item is not None else []
        else:
            items = self._batch_get(keys)
        return {(_req(item, "pk"), _req(item, "sk")): item for item in items}

    def _query(self, **kwargs: Any) -> Iterator[Item]:
        """Every item of a Query, page after page."""
        while True:
            resp = self._client.query(TableName=self.table, **kwargs)
            yield from cast("list[Item]", resp.get("Items", []))
            last = resp.get("LastEvaluatedKey")
            if not last:
                return
            kwargs["ExclusiveStartKey"] = last

    def _transact(self, actions: list[dict[str, Any]]) -> None:
        for action in actions:
            next(iter(action.values()))["TableName"] = self.table
        try:
            self._client.transact_write_items(
                TransactItems=cast("list[TransactWriteItemTypeDef]", actions)
            )
        except self._exc.TransactionCanceledException as exc:
            reasons = exc.response.get("CancellationReasons") or []
            raise _Cancelled([str(r.get("Code", "None")) for r in reasons]) from None

    def _batch_delete(self, keys: Sequence[Item]) -> None:
        self._batch_write([], keys)

    def _batch_write(self, puts: Sequence[Item], deletes: Sequence[Item]) -> None:
        requests = cast(
            "list[WriteRequestTypeDef]",
            [{"PutRequest": {"Item": item}} for item in puts]
            + [{"DeleteRequest": {"Key": key}} for key in deletes],
        )
        for start in range(0, len(requests), 25):
            pending = requests[start : start + 25]
            for attempt in range(8):
                resp = self._client.batch_write_item(RequestItems={self.table: pending})
                pending = cast(
                    "list[WriteRequestTypeDef]",
                    resp.get("UnprocessedItems", {}).get(self.table, []),
                )
                if not pending:
                    break
                _backoff(attempt)
            else:
                raise RuntimeError("DynamoDB kept deferring a BatchWriteItem")

    # -- the table's record of its derived data -------------------------

    def repairs_owed(self, *, again: bool = False) -> list[str]:
        """The repairs (``REPAIRS``) the table's derived data waits for: those never run on
        it (a table from before them) or run by older code. Read once per store, so no
        request pays for it but a process's first; ``again``: read again while some are
        owed (the health route, so it tells a repair's end at once). None owed if it
        could not be read (said in the log)."""
        if self._owed is None or (again and self._owed):
            from botocore.exceptions import BotoCoreError, ClientError

            try:
                record = self._get_item(DERIVED_KEY) or {}
            except (BotoCoreError, ClientError) as exc:
                logger.warning("the table's repair record could not be read: %s", exc)
                return []
            self._owed = [
                r for r in REPAIRS if int(record.get(r, {}).get("N", "0")) < DERIVED_GENERATION
            ]
        return list(self._owed)

    def mark_repaired(self, repair: str) -> None:
        """Record that ``repair`` ran over the whole table with this code (a newer
        code's record stays)."""
        assert repair in REPAIRS
        with contextlib.suppress(self._exc.ConditionalCheckFailedException):
            self._client.update_item(
                TableName=self.table,
                Key=DERIVED_KEY,
                UpdateExpression="SET #r = :g, #at = :at",
                ConditionExpression="attribute_not_exists(#r) OR #r <= :g",
                ExpressionAttributeNames={"#r": repair, "#at": f"{repair}_at"},
                ExpressionAttributeValues={
                    ":g": {"N": str(DERIVED_GENERATION)},
                    ":at": _s(_ts(datetime.now(UTC))),
                },
            )
        self._owed = None

    # -- the reads a request starts with --------------------------------

    def load(
        self,
        *,
        token_hash: str | None = None,
        user_id: str | None = None,
        team: str | None = None,
        packet_id: str | None = None,
    ) -> Loaded:
        token_key = ("TOKEN#" + (token_hash or ""), "TOKEN")
        team_key = (f"TEAMNAME#{team}", "TEAM")
        member_key = (f"TEAMNAME#{team}", f"MEMBER#{user_id}")
        packet_key = (f"PKT#{packet_id}", "PKT")
        wanted = [
            key
            for key, asked in (
                (token_key, token_hash is not None),
                (team_key, team is not None),
                (member_key, team is not None and user_id is not None),
                (packet_key, packet_id is not None),
            )
            if asked
        ]
        if not wanted:
            return Loaded()
        items = self._read([_key(*key) for key in wanted])
        token = None
        if token_hash is not None:
            token_item = items.get(token_key)
            if token_item is None:
                return Loaded()
            token = _token(token_item), _user(token_item, prefix="user_")
            if token[1].id != user_id:  # no hint, or not this token's user
                user_id = None
        membership = None
        if team is not None:
            if user_id is not None:
                membership = _membership(items.get(team_key), items.get(member_key))
            elif token is not None:  # the token named no user: one more read
                membership = self.team_membership(team, token[1].id)
        packet = None
        if packet_id is not None and (item := items.get(packet_key)) is not None:
            packet = _stored_packet(item)
        return Loaded(token, membership, packet)

    # -- packets ---------------------------------------------------------

    def put_packet(
        self,
        packet: StoredPacket,
        *,
        sort_key: str,
        seen: PacketMeta | None = None,
        derived: Any = None,  # DynamoDB derives nothing (``Store.derive`` is None here)
    ) -> bool:
        """One transaction: the packet, its owner's usage and the pending index entry.

        The usage counter changes in the packet's own transaction, not in the stream
        consumer: a push past the quota must be refused before it is stored, and a
        consumer runs after the 201. So usage equals a recount at every instant; a
        crash between two calls leaves nothing to correct. The search postings are
        derived later by the consumer (``dynamo_search.py``); the pending item keeps
        the packet searchable until then. A replacement is conditioned on the
        revision it read (what the two occupy is the usage's delta). A team push
        checks the team's tombstone in the same transaction, so a push racing the
        team's delete never lands in a deleted team, and the author's membership, so
        a push racing their removal from the team (or a move of their personal packet
        into it) does not land either.
        """
        meta = packet.meta
        key = _key(f"PKT#{meta.id}", "PKT")
        scope = scope_name(meta.owner_id, meta.team_id)
        size = self.occupied(packet, sort_key)
        for attempt in range(TRANSACTION_ATTEMPTS):
            old = self._get_item(key)
            item = _packet_item(packet, sort_key)
            rev = _new_rev()
            item["rev"] = _s(rev)
            moving = False
            if old is None:
                put: dict[str, Any] = {
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": "pk"},
                }
                delta = (1, size)
            else:
                was = _packet_meta(old)
                moving = moves_into_team(was, meta)
                if was.owner_id != meta.owner_id or (was.team_id != meta.team_id and not moving):
                    raise Conflict(f"packet {meta.id} belongs to another owner or scope")
                put = {"Item": item, **_unchanged(old)}
                # A move ends the publication (its scope changed); a re-push keeps it.
                if not moving and (public_hash := _get(old, "public_hash")) is not None:
                    item["public_hash"] = _s(public_hash)
                if _get(old, SHARED) is not None:
                    item[SHARED] = _s("1")
                delta = (0, size - self._occupied_item(old))
            actions: list[dict[str, Any]] = [{"Put": put}]
            usage = self._usage_action(meta.owner_id, *delta, hold=True)
            if usage is not None:
                actions.append(usage)
            pending = {**pending_key(scope, sort_key, meta.id), "rev": _s(rev)}
            actions.append({"Put": {"Item": pending}})
            checks = len(actions)
            if meta.team_id is not None:
                # Only a member writes into a team: checked here, as the packet is written,
                # so a push racing its author's removal does not land. And a team being
                # deleted takes no packet: its tombstone is written in the delete's first
                # transaction, before the fan-out lists the packets (or its members).
                actions.append(_exists(_key(f"TEAM#{meta.team_id}", f"MEMBER#{meta.owner_id}")))
                actions.append(_absent(_tombstone_key(meta.team_id)))
            try:
                self._transact(actions)
            except _Cancelled as cancelled:
                if any(cancelled.failed(i) for i in range(checks, len(actions))):
                    raise NotFound(f"not a member of team {meta.team_id}") from None
                if usage is not None and cancelled.failed(1):
                    assert self.quota is not None
                    now = self.usage(meta.owner_id)
                    grown = Usage(now.packets + delta[0], now.bytes + delta[1])
                    raise OverQuota(grown, self.quota) from None
                _backoff(attempt)  # changed meanwhile, or a lost race: read again
                continue
            return old is None
        raise Conflict(f"packet {meta.id} could not be stored (concurrent writes); try again")

    def occupied(self, packet: StoredPacket, sort_key: str) -> int:
        """Every item the packet makes, as stored: its own (with a revision; a publication
        or a share adds nothing), its projections into the listing indexes, and the
        search postings and facets the stream consumer derives from it (its pending
        entry lasts only until then). Each with DynamoDB's 100 bytes of overhead: the
        storage the table bills for the packet (a 3 KB packet's: 2.7 times its body)."""
        item = _packet_item(packet, sort_key)
        item["rev"] = _s("0" * (2 * REV_BYTES))
        derived = index_items(packet.meta, sort_key, packet.body).values()
        return sum(stored_size(i) for i in (item, *derived))

    def _occupied_item(self, item: Mapping[str, Mapping[str, Any]]) -> int:
        """``occupied`` of a stored packet's item."""
        return self.occupied(_stored_packet(item), _get(item, "sort_key") or "")

    def usage(self, user_id: str) -> Usage:
        item = self._get_item(_key(f"USAGE#{user_id}", "USAGE"))
        if item is None:
            return Usage()
        return Usage(int(item["packets"]["N"]), int(item["bytes"]["N"]))

    def _usage_action(
        self, user_id: str, packets: int, size: int, *, hold: bool
    ) -> dict[str, Any] | None:
        """The transaction action adding to what ``user_id`` owns; held, only within ``quota``.

        ADD creates the counter at zero. Held, a growth that would pass the bound
        fails its condition (the caller raises ``OverQuota``).
        """
        if packets == 0 and size == 0:
            return None
        # ``writes`` moves with every change: a recount (dynamo_repair.py) sets the counter
        # only if it did not move while counting.
        values: Item = {":n": {"N": str(packets)}, ":b": {"N": str(size)}, ":one": {"N": "1"}}
        update: dict[str, Any] = {
            "Key": _key(f"USAGE#{user_id}", "USAGE"),
            "UpdateExpression": "ADD #n :n, #b :b, #w :one",
            "ExpressionAttributeNames": {"#n": "packets", "#b": "bytes", "#w": "writes"},
        }
        quota = self.quota if hold else None
        if quota is not None and (packets > 0 or size > 0):
            if packets > quota.packets or size > quota.bytes:
                raise OverQuota(Usage(packets, size), quota)
            conditions = []
            for name, added, most in (("#n", packets, quota.packets), ("#b", size, quota.bytes)):
                if added > 0:
                    mark = f":most{name[1:]}"
                    conditions.append(f"(attribute_not_exists({name}) OR {name} <= {mark})")
                    values[mark] = {"N": str(most - added)}
            update["ConditionExpression"] = " AND ".join(conditions)
        update["ExpressionAttributeValues"] = values
        return {"Update": update}

    def _count(self, user_id: str, packets: int, size: int) -> None:
        """Take off what ``user_id`` owns (a fan-out deleted it): one UpdateItem."""
        action = self._usage_action(user_id, packets, size, hold=False)
        if action is not None:
            self._client.update_item(TableName=self.table, **action["Update"])

    def get_packet(self, packet_id: str) -> StoredPacket | None:
        item = self._get_item(_key(f"PKT#{packet_id}", "PKT"))
        return None if item is None else _stored_packet(item)

    def get_packets(self, packet_ids: Sequence[str]) -> dict[str, StoredPacket]:
        """One BatchGetItem for each 100 ids (its bound)."""
        found: dict[str, StoredPacket] = {}
        wanted = list(dict.fromkeys(packet_ids))
        for start in range(0, len(wanted), 100):
            keys = [_key(f"PKT#{packet_id}", "PKT") for packet_id in wanted[start : start + 100]]
            for (pk, _), item in self._read(keys).items():
                found[pk.removeprefix("PKT#")] = _stored_packet(item)
        return found

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
        if limit < 1:
            raise ValueError("limit must be at least 1")
        scope = _scope(owner_id, team_id)
        if tag is not None:  # the tag's facet items, in listing order, with the listing fields
            pk_name, sk_name = "pk", "sk"
            partition = f"FACET#{scope.removeprefix('SCOPE#')}#tag#{tag}"
            kwargs: dict[str, Any] = {}
        elif project is not None:  # the project's packets on gsi_project (sparse)
            pk_name, sk_name = "gsi_project_pk", "gsi_project_sk"
            partition = _project_scope(scope, project)
            kwargs = {"IndexName": "gsi_project"}
        elif author is not None and team_id is not None:
            # One author's packets in a team on gsi_author (sparse: team packets only), so
            # the listing reads what it shows, not the whole team's packets.
            pk_name, sk_name = "gsi_author_pk", "gsi_author_sk"
            partition = _author_scope(scope, author)
            kwargs = {"IndexName": "gsi_author"}
            author = None  # the partition is the filter
        else:  # the scope's listing on gsi1
            pk_name, sk_name = "gsi1pk", "gsi1sk"
            partition = scope
            kwargs = {"IndexName": "gsi1"}
        names = {"#p": pk_name}
        values: Item = {":p": _s(partition)}
        condition = "#p = :p"
        # Sort keys are "<sort key>#<id>": ">= since" keeps a packet at ``since``,
        # "< until" leaves out one at ``until`` (its key is longer than ``until``).
        if since is not None and until is not None:
            condition += " AND #s BETWEEN :since AND :until"
        elif since is not None:
            condition += " AND #s >= :since"
        elif until is not None:
            condition += " AND #s < :until"
        if since is not None or until is not None:
            names["#s"] = sk_name
        if since is not None:
            values[":since"] = _s(since)
        if until is not None:
            values[":until"] = _s(until)
        # Evaluated after the read: each costs what it skips (author; a project
        # within a tag's facet, which carries the packet's project).
        filters = []
        if author is not None:
            filters.append("#o = :o")
            names["#o"] = "owner_id"
            values[":o"] = _s(author)
        if tag is not None and project is not None:
            filters.append("#pr = :pr")
            names["#pr"] = "project"
            values[":pr"] = _s(project)
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
        kwargs.update(
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ScanIndexForward=False,
            # One more than a page tells whether another page exists, so an
            # exact last page carries no cursor.
            Limit=limit + 1,
        )
        if cursor:
            index_sk, packet_id = decode_cursor(cursor)
            if tag is None:
                kwargs["ExclusiveStartKey"] = {
                    **_key(f"PKT#{packet_id}", "PKT"),
                    pk_name: _s(partition),
                    sk_name: _s(index_sk),
                }
            else:
                kwargs["ExclusiveStartKey"] = _key(partition, index_sk)
        items: list[Item] = []
        # One Query unless a page of large listings crosses DynamoDB's 1 MB per call
        # (or the author filter skips items).
        for item in self._query(**kwargs):
            items.append(item)
            if len(items) > limit:
                break
        if tag is not None:
            wanted = (scope, tag, project, author, since, until, cursor)
            items = self._with_pending_tagged(items, *wanted)[: limit + 1]
        page = [_packet_meta(item) for item in items[:limit]]
        more = len(items) > limit
        last = items[limit - 1] if more else None
        next_cursor = encode_cursor(_req(last, sk_name), _req(last, "id")) if last else None
        return Page(page, next_cursor)

    def _with_pending_tagged(
        self,
        items: list[Item],
        scope: str,
        tag: str,
        project: str | None,
        author: str | None,
        since: str | None,
        until: str | None,
        cursor: str | None,
    ) -> list[Item]:
        """A tag's facet items and the scope's packets with that tag the consumer has not
        indexed yet (read-your-writes), merged in listing order."""
        from .. import search

        pending = self._pending(scope.removeprefix("SCOPE#"))
        after = decode_cursor(cursor)[0] if cursor else None
        orders = {
            pid: order
            for pid, order in pending.items()
            if (after is None or order < after)
            and (since is None or order >= since)
            and (until is None or order < until)
        }
        if not orders:
            return items
        keys = [_key(f"PKT#{pid}", "PKT") for pid in orders]
        fresh: dict[str, Item] = {}
        for start in range(0, len(keys), 100):
            for item in self._batch_get(keys[start : start + 100]):
                meta = _packet_meta(item)
                data = search.load(bytes(item["body"]["B"]))
                if (
                    _scope(meta.owner_id, meta.team_id) != scope
                    or tag not in search.tags_of(data)
                    or (project is not None and meta.project != project)
                    or (author is not None and meta.owner_id != author)
                    or orders[meta.id] != f"{_get(item, 'sort_key') or ''}#{meta.id}"
                ):
                    continue
                fresh[meta.id] = {**_listing_fields(meta), "sk": _s(orders[meta.id])}
        merged = [item for item in items if _req(item, "id") not in fresh]
        merged.extend(fresh.values())
        return sorted(merged, key=lambda item: _req(item, "sk"), reverse=True)

    def children(
        self, packet_id: str, *, scopes: list[Scope], limit: int = 100
    ) -> list[PacketMeta]:
        readable = {_scope(owner, team) for owner, team in scopes}
        found: list[PacketMeta] = []
        if not readable:
            return found
        for item in self._query(
            IndexName="gsi_parent",
            KeyConditionExpression="#p = :p",
            ExpressionAttributeNames={"#p": "gsi_parent_pk"},
            ExpressionAttributeValues={":p": _s(f"PARENT#{packet_id}")},
        ):
            meta = _packet_meta(item)
            if _scope(meta.owner_id, meta.team_id) in readable:
                found.append(meta)
                if len(found) >= limit:
                    break
        return found

    def packet_ids_with_prefix(
        self,
        prefix: str,
        *,
        owner_id: str,
        team_id: str | None = None,
        limit: int = 2,
        project: str | None = None,
    ) -> list[str]:
        if project is not None:
            return self._project_ids_with_prefix(
                prefix, _project_scope(_scope(owner_id, team_id), project), limit
            )
        condition = "#p = :p"
        values: Item = {":p": _s(_scope(owner_id, team_id))}
        if prefix:
            condition += " AND begins_with(#s, :prefix)"
            values[":prefix"] = _s(prefix)
        resp = self._client.query(
            TableName=self.table,
            IndexName="gsi2",
            KeyConditionExpression=condition,
            ExpressionAttributeNames={"#p": "gsi2pk", "#s": "gsi2sk"}
            if prefix
            else {"#p": "gsi2pk"},
            ExpressionAttributeValues=values,
            Limit=limit,
        )
        return [_req(item, "gsi2sk") for item in resp.get("Items", [])]

    def _project_ids_with_prefix(self, prefix: str, partition: str, limit: int) -> list[str]:
        """Ids in one project's partition of ``gsi_project`` that start with ``prefix``."""
        kwargs: dict[str, Any] = {
            "IndexName": "gsi_project",
            "KeyConditionExpression": "#p = :p",
            "ExpressionAttributeNames": {"#p": "gsi_project_pk", "#id": "id"},
            "ExpressionAttributeValues": {":p": _s(partition)},
            "ProjectionExpression": "#id",
        }
        if prefix:
            kwargs["FilterExpression"] = "begins_with(#id, :prefix)"
            kwargs["ExpressionAttributeValues"][":prefix"] = _s(prefix)
        ids = sorted(_req(item, "id") for item in self._query(**kwargs))
        return ids[:limit]

    def delete_packet(self, packet_id: str) -> bool:
        return self._delete_packet(packet_id, None, None)

    def delete_packet_as(
        self, packet_id: str, user_id: str, *, seen: PacketMeta | None = None
    ) -> bool:
        return self._delete_packet(packet_id, user_id, seen)

    def _delete_packet(self, packet_id: str, user_id: str | None, seen: PacketMeta | None) -> bool:
        """One transaction: the packet (as read: its revision) and its owner's usage.

        For a team packet the caller's right is checked in it too: its creator while
        still a member, or the team's owner. The postings go with the consumer.
        """
        key = _key(f"PKT#{packet_id}", "PKT")
        if seen is not None and seen.team_id is None and seen.owner_id != user_id:
            return False  # someone else's personal packet: refused without a read
        for attempt in range(TRANSACTION_ATTEMPTS):
            old = self._get_item(key)
            if old is None:
                return False
            was = _packet_meta(old)
            if seen is not None and (seen.owner_id, seen.team_id) != (was.owner_id, was.team_id):
                return False  # no longer the packet the caller was allowed to delete
            actions: list[dict[str, Any]] = [{"Delete": {"Key": key, **_unchanged(old)}}]
            usage = self._usage_action(was.owner_id, -1, -self._occupied_item(old), hold=False)
            assert usage is not None
            actions.append(usage)
            if user_id is not None:
                if was.team_id is None:
                    if was.owner_id != user_id:
                        return False
                else:
                    check: dict[str, Any] = {
                        "Key": _key(f"TEAM#{was.team_id}", f"MEMBER#{user_id}"),
                        "ConditionExpression": "attribute_exists(#pk)",
                        "ExpressionAttributeNames": {"#pk": "pk"},
                    }
                    if was.owner_id != user_id:
                        check["ConditionExpression"] += " AND #role = :owner"
                        check["ExpressionAttributeNames"]["#role"] = "role"
                        check["ExpressionAttributeValues"] = {":owner": _s("owner")}
                    actions.append({"ConditionCheck": check})
            try:
                self._transact(actions)
            except _Cancelled as cancelled:
                if len(actions) > 2 and cancelled.failed(2):
                    return False
                _backoff(attempt)  # changed meanwhile, or a lost race: read again
                continue
            self._end_shares(old)
            return True
        raise Conflict(f"packet {packet_id} could not be deleted (concurrent writes); try again")

    # -- publishing ------------------------------------------------------

    def _publication_item(self, public_hash: str) -> Publication | None:
        item = self._get_item(_key(f"PUBLIC#{public_hash}", "PUBLIC"))
        if item is None:
            return None
        return Publication(
            packet_id=_req(item, "packet_id"),
            secret=_req(item, "secret"),
            secret_hash=public_hash,
            created_by=_req(item, "created_by"),
            created_at=_dt(_req(item, "created_at")),
        )

    def publish_packet(self, publication: Publication, *, seen: PacketMeta) -> Publication:
        key = _key(f"PKT#{publication.packet_id}", "PKT")
        for attempt in range(TRANSACTION_ATTEMPTS):
            item = self._get_item(key)
            if item is None or (_get(item, "owner_id"), _get(item, "team_id")) != (
                seen.owner_id,
                seen.team_id,
            ):
                raise NotFound(f"packet {publication.packet_id} does not exist")
            current = _get(item, "public_hash")
            if current is not None:
                existing = self._publication_item(current)
                if existing is not None and not self._publisher_left(seen.team_id, existing):
                    return existing
            condition = _exact(key, seen.owner_id, seen.team_id)
            names = {**condition["ExpressionAttributeNames"], "#h": "public_hash", "#pk": "pk"}
            values = {**condition["ExpressionAttributeValues"], ":h": _s(publication.secret_hash)}
            record: list[dict[str, Any]] = []
            if current is None:
                guard, values_extra = "attribute_not_exists(#h)", {}
            else:  # a dangling hash (its PUBLIC# item gone, or its publisher left the team):
                # replace exactly that one, and its item with it
                guard, values_extra = "#h = :old", {":old": _s(current)}
                if current != publication.secret_hash:
                    record.append({"Delete": {"Key": _key(f"PUBLIC#{current}", "PUBLIC")}})
            # A team packet's publication is recorded in a ``PUBLISHED#`` item of its own, in
            # a transaction that checks its publisher is still a member: their departure's
            # clean-up ends it from there. Nothing on the membership grows with the packets
            # a member publishes.
            if seen.team_id is not None:
                published = _published_key(
                    seen.team_id, publication.created_by, publication.packet_id
                )
                record[:0] = [
                    _exists(_key(f"TEAM#{seen.team_id}", f"MEMBER#{publication.created_by}")),
                    {"Put": {"Item": {**published, "packet_id": _s(publication.packet_id)}}},
                ]
            try:
                self._transact(
                    [
                        *record,
                        _put_new(
                            {
                                **_key(f"PUBLIC#{publication.secret_hash}", "PUBLIC"),
                                "packet_id": _s(publication.packet_id),
                                "secret": _s(publication.secret),
                                "created_by": _s(publication.created_by),
                                "created_at": _s(_ts(publication.created_at)),
                            }
                        ),
                        {
                            "Update": {
                                "Key": key,
                                "UpdateExpression": "SET #h = :h",
                                "ConditionExpression": (
                                    f"attribute_exists(#pk) AND {condition['ConditionExpression']}"
                                    f" AND {guard}"
                                ),
                                "ExpressionAttributeNames": names,
                                "ExpressionAttributeValues": {**values, **values_extra},
                            }
                        },
                    ]
                )
                return publication
            except _Cancelled as cancelled:
                if seen.team_id is not None and cancelled.failed(0):
                    raise NotFound(f"{publication.created_by} is not in the team") from None
                _backoff(attempt)  # published or deleted meanwhile: read again
        raise Conflict("packet could not be published (concurrent writes); try again")

    def unpublish_packet(self, packet_id: str) -> bool:
        key = _key(f"PKT#{packet_id}", "PKT")
        for attempt in range(TRANSACTION_ATTEMPTS):
            item = self._get_item(key)
            current = _get(item, "public_hash") if item is not None else None
            if current is None:
                return False
            try:
                self._transact(_unpublish_ops(key, current))
                return True
            except _Cancelled:
                _backoff(attempt)  # unpublished or published again meanwhile: read again
        # Not "nothing to end": the caller answers that the URL is dead.
        raise Conflict("the packet could not be unpublished (concurrent writes); try again")

    def publication(self, packet_id: str) -> Publication | None:
        found = self.get_packet(packet_id)
        return None if found is None else self.publication_of(found)

    def publication_of(self, packet: StoredPacket) -> Publication | None:
        """The packet item read carries its ``public_hash``: only the ``PUBLIC#`` item
        is left to read (and, for a team packet, its publisher's membership), and
        nothing at all for an unpublished packet."""
        if packet.public_hash is None:
            return None
        found = self._publication_item(packet.public_hash)
        if found is None or found.packet_id != packet.meta.id:
            return None
        return None if self._publisher_left(packet.meta.team_id, found) else found

    def published_packet(self, secret_hash: str) -> StoredPacket | None:
        found = self._publication_item(secret_hash)
        if found is None:
            return None
        item = self._get_item(_key(f"PKT#{found.packet_id}", "PKT"))
        if item is None or _get(item, "public_hash") != secret_hash:
            return None  # deleted or unpublished: the URL is dead
        if self._publisher_left(_get(item, "team_id"), found):
            return None
        return _stored_packet(item)

    def _publisher_left(self, team_id: str | None, publication: Publication) -> bool:
        """Whether a team packet's publication outlived its publisher's membership.

        A departure ends the member's publications in its clean-up, after the request
        (``dynamo_fanout.py``); until then this check is what ends them at once, so a
        former member keeps no public window onto the team. Rejoining waits for the
        clean-up, so a membership found here is never a later one than the publication's.
        """
        if team_id is None:
            return False
        key = _key(f"TEAM#{team_id}", f"MEMBER#{publication.created_by}")
        return self._get_item(key) is None

    # -- sharing ---------------------------------------------------------

    @staticmethod
    def _share_item(share: Share) -> Item:
        created = _ts(share.created_at)
        return {
            **_key(f"SHARE#{share.packet_id}", f"TO#{share.user_id}"),
            "packet_id": _s(share.packet_id),
            "user_id": _s(share.user_id),
            "shared_by": _s(share.shared_by),
            "created_at": _s(created),
            "gsi1pk": _s(f"SHARED#{share.user_id}"),
            "gsi1sk": _s(f"{created}#{share.packet_id}"),
        }

    @staticmethod
    def _share(item: Mapping[str, Mapping[str, Any]]) -> Share:
        return Share(
            _req(item, "packet_id"),
            _req(item, "user_id"),
            _req(item, "shared_by"),
            _dt(_req(item, "created_at")),
        )

    def share_packet(self, share: Share, *, seen: PacketMeta) -> tuple[Share, bool]:
        key = _key(f"PKT#{share.packet_id}", "PKT")
        # The packet is marked as shared in the same transaction (only while it has the
        # owner and scope seen), so deleting it knows to look for shares to end.
        mark = _owned(seen.owner_id, seen.team_id)
        mark["ConditionExpression"] = f"attribute_exists(#pk) AND {mark['ConditionExpression']}"
        mark["ExpressionAttributeNames"].update({"#pk": "pk", "#sh": SHARED})
        mark["ExpressionAttributeValues"][":sh"] = _s("1")
        update = {"Key": key, "UpdateExpression": "SET #sh = :sh", **mark}
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._transact([{"Update": update}, _put_new(self._share_item(share))])
                return share, True
            except _Cancelled as exc:
                if exc.failed(0):
                    raise NotFound(f"packet {share.packet_id} does not exist") from None
                if exc.failed(1):
                    existing = self.get_share(share.packet_id, share.user_id)
                    if existing is not None:
                        return existing, False
                _backoff(attempt)  # a concurrent write (or an unshare) in between: again
        raise Conflict("packet could not be shared (concurrent writes); try again")

    def unshare_packet(self, packet_id: str, user_id: str) -> bool:
        resp = self._client.delete_item(
            TableName=self.table,
            Key=_key(f"SHARE#{packet_id}", f"TO#{user_id}"),
            ReturnValues="ALL_OLD",
        )
        return "Attributes" in resp

    def get_share(self, packet_id: str, user_id: str) -> Share | None:
        item = self._get_item(_key(f"SHARE#{packet_id}", f"TO#{user_id}"))
        return None if item is None else self._share(item)

    def _share_items(self, packet_id: str) -> list[Item]:
        return list(
            self._query(
                KeyConditionExpression="#p = :p",
                ExpressionAttributeNames={"#p": "pk"},
                ExpressionAttributeValues={":p": _s(f"SHARE#{packet_id}")},
                ConsistentRead=True,
            )
        )

    def _end_shares(self, old: Mapping[str, Mapping[str, Any]] | None) -> None:
        """Delete the shares of a deleted packet (its old item), if it was ever shared.

        One Query for a packet marked as shared, none for the others, so a delete
        costs what it did. A crash in between leaves shares of a packet that is gone
        (``shared_with`` never lists them) until the stream consumer ends them from the
        packet's REMOVE record (``dynamo_stream.py``).
        """
        if old is None or _get(old, SHARED) is None:
            return
        keys = [_key(_req(i, "pk"), _req(i, "sk")) for i in self._share_items(_req(old, "id"))]
        if keys:
            self._batch_delete(keys)

    def packet_shares(self, packet_id: str) -> list[Share]:
        shares = [self._share(item) for item in self._share_items(packet_id)]
        return sorted(shares, key=lambda s: (s.created_at, s.user_id))

    def shared_with(
        self, user_id: str, *, limit: int = 100, after: Share | None = None
    ) -> list[tuple[Share, PacketMeta]]:
        if limit < 1:
            return []
        keys = []
        names = {"#p": "gsi1pk"}
        values = {":p": _s(f"SHARED#{user_id}")}
        condition = "#p = :p"
        if after is not None:  # the sort key is "<created>#<packet id>", its time fixed-width
            names["#s"] = "gsi1sk"
            values[":s"] = _s(f"{_ts(after.created_at)}#{after.packet_id}")
            condition += " AND #s < :s"
        for item in self._query(
            IndexName="gsi1",
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ScanIndexForward=False,
            Limit=limit,
        ):
            keys.append(_key(_req(item, "pk"), _req(item, "sk")))
            if len(keys) == limit:
                break
        if not keys:
            return []
        packet_ids = [_req(key, "pk").removeprefix("SHARE#") for key in keys]
        wanted = [*keys, *(_key(f"PKT#{pid}", "PKT") for pid in dict.fromkeys(packet_ids))]
        found: dict[tuple[str, str], Item] = {}
        for start in range(0, len(wanted), 100):  # BatchGetItem takes 100 keys at most
            found.update(self._read(wanted[start : start + 100]))
        out = []
        for key, packet_id in zip(keys, packet_ids, strict=True):
            share_item = found.get((_req(key, "pk"), _req(key, "sk")))
            packet_item = found.get((f"PKT#{packet_id}", "PKT"))
            if share_item is not None and packet_item is not None:
                out.append((self._share(share_item), _packet_meta(packet_item)))
        return out

    # -- users and tokens -----------------------------------------------

    def _new_user_actions(self, user: User, token: Token | None) -> list[dict[str, Any]]:
        """The puts of a new user; the last one claims its display name."""
        items = [_user_item(user)]
        if user.subject is not None:
            items.append(_subject_item(user))
        if token is not None:
            items.extend(_token_items(token, user))
        items.append(_name_item(user.display, user.id))
        return [_put_new(item) for item in items]

    def create_user(self, user: User, token: Token | None = None) -> None:
        actions = self._new_user_actions(user, token)
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._transact(actions)
                return
            except _Cancelled as cancelled:
                if cancelled.failed(len(actions) - 1):
                    raise NameTaken(f"the display name {user.display!r} is taken") from None
                if not cancelled.conflict:
                    raise Conflict("user, subject or token already exists") from None
                _backoff(attempt)
        raise Conflict("user could not be created (concurrent writes); try again")

    def rename_user(self, user_id: str, display: str) -> User:
        # Whether the old name's claim is this user's to drop: not where another user held
        # it before claims were made in any case ("Sam" and "sam", the table's repair).
        drop_old = True
        for attempt in range(TRANSACTION_ATTEMPTS):
            user = self.get_user(user_id)
            if user is None:
                raise NotFound(f"user {user_id} does not exist")
            old, new = name_key(user.display), name_key(display)
            keys = [_key(f"USER#{user_id}", "USER")]
            if user.subject is not None:
                keys.append(_key(f"SUBJECT#{user.subject}", "SUBJECT"))
            actions: list[dict[str, Any]] = [_set_display(key, "display", display) for key in keys]
            # Nobody renamed the user since it was read.
            actions[0]["Update"]["ConditionExpression"] = "attribute_exists(#pk) AND #f = :old"
            actions[0]["Update"]["ExpressionAttributeValues"][":old"] = _s(user.display)
            claim = len(actions)
            if new != old:
                actions.append(_put_new(_name_item(display, user_id)))
            if new != old and drop_old:
                actions.append(
                    {
                        "Delete": {
                            "Key": _key(f"NAME#{old}", "NAME"),
                            "ConditionExpression": "attribute_not_exists(#pk) OR #u = :u",
                            "ExpressionAttributeNames": {"#pk": "pk", "#u": "user_id"},
                            "ExpressionAttributeValues": {":u": _s(user_id)},
                        }
                    }
                )
            try:
                self._transact(actions)
            except _Cancelled as cancelled:
                if new != old and cancelled.failed(claim):
                    raise NameTaken(f"the display name {display!r} is taken") from None
                if new != old and cancelled.failed(claim + 1):
                    drop_old = False  # another user's claim: theirs stays
                    continue
                _backoff(attempt)  # renamed or deleted meanwhile, or a lost race: read again
                continue
            self._rename_copies(user_id, display)
            return User(user.id, display, user.created_at, user.subject)
        raise Conflict("the user could not be renamed (concurrent writes); try again")

    def _rename_copies(self, user_id: str, display: str) -> None:
        """The display name where it is copied: each token of the user, each membership."""
        keys = [_key(f"TOKEN#{t.token_hash}", "TOKEN") for t in self.list_tokens(user_id=user_id)]
        fields = ["user_display"] * len(keys)
        for team in self.list_teams(user_id):
            for key in _member_keys(team, user_id):
                keys.append(key)
                fields.append("display")
        for key, field in zip(keys, fields, strict=True):
            update = _set_display(key, field, display)["Update"]
            for attempt in range(TRANSACTION_ATTEMPTS):
                try:
                    self._client.update_item(TableName=self.table, **update)
                except self._exc.ConditionalCheckFailedException:
                    pass  # gone meanwhile: a token revoked, a membership ended
                except self._exc.TransactionConflictException:
                    # A transaction is writing the same item (a token's revoke, a team's
                    # change): the SDK retries no such conflict, and the rename itself has
                    # taken effect, so its copy is written once that transaction is done.
                    _backoff(attempt)
                    continue
                break
            else:
                raise Conflict(
                    "the name changed, but a copy of it could not be written (concurrent"
                    " writes); set it again to finish"
                )

    def get_user(self, user_id: str) -> User | None:
        item = self._get_item(_key(f"USER#{user_id}", "USER"))
        return _user(item) if item else None

    def get_user_by_subject(self, subject: str) -> User | None:
        item = self._get_item(_key(f"SUBJECT#{subject}", "SUBJECT"))
        return _user(item) if item else None

    def user_named(self, display: str) -> User | None:
        claim = self._get_item(_key(f"NAME#{name_key(display)}", "NAME"))
        return self.get_user(_req(claim, "user_id")) if claim else None

    def add_token(self, token: Token) -> None:
        user = self.get_user(token.user_id)
        if user is None:
            raise NotFound(f"user {token.user_id} does not exist")
        actions = [_put_new(item) for item in _token_items(token, user)]
        actions.append(_exists(_key(f"USER#{user.id}", "USER")))
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._transact(actions)
                return
            except _Cancelled as cancelled:
                if cancelled.failed(2):
                    raise NotFound(f"user {token.user_id} does not exist") from None
                if not cancelled.conflict:
                    raise Conflict(f"token label {token.label!r} or hash is taken") from None
                _backoff(attempt)
        raise Conflict("token could not be added (concurrent writes); try again")

    def token_owner(self, token_hash: str) -> tuple[Token, User] | None:
        item = self._get_item(_key(f"TOKEN#{token_hash}", "TOKEN"))
        if item is None:
            return None
        return _token(item), _user(item, prefix="user_")

    def touch_token(self, token_hash: str, when: datetime) -> None:
        with contextlib.suppress(self._exc.ConditionalCheckFailedException):
            self._client.update_item(
                TableName=self.table,
                Key=_key(f"TOKEN#{token_hash}", "TOKEN"),
                UpdateExpression="SET #last = :when",
                # Never recreate a revoked token as a stub.
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#last": "last_used_at", "#pk": "pk"},
                ExpressionAttributeValues={":when": _s(_ts(when))},
            )

    def list_tokens(self, *, user_id: str | None = None) -> list[Token]:
        if user_id is None:
            # Every token: each of the index's token partitions (and the single one
            # tokens minted before the spread still sit in), merged in creation order.
            index = "gsi2"
            partitions = ["TOKENS", *(f"TOKENS#{n}" for n in range(TOKEN_PARTITIONS))]
        else:
            index, partitions = "gsi1", [f"TOKENS#{user_id}"]
        items = [
            item
            for partition in partitions
            for item in self._query(
                IndexName=index,
                KeyConditionExpression="#p = :p",
                ExpressionAttributeNames={"#p": f"{index}pk"},
                ExpressionAttributeValues={":p": _s(partition)},
            )
        ]
        items.sort(key=lambda item: _req(item, f"{index}sk"))
        listed = [_token(item) for item in items]
        # The indexes do not project a token's scope, resource or expiry (a projection
        # cannot change on a live index), so they are read from the token items:
        # BatchGetItem, 100 at a time.
        full: dict[str, Token] = {}
        for start in range(0, len(listed), 100):
            keys = [_key(f"TOKEN#{t.token_hash}", "TOKEN") for t in listed[start : start + 100]]
            for item in self._batch_get(keys):
                full[_req(item, "token_hash")] = _token(item)
        return [full.get(t.token_hash, t) for t in listed]

    def revoke_token(self, label: str, *, user_id: str | None = None) -> bool:
        claim = self._get_item(_key(f"LABEL#{label}", "LABEL"))
        if claim is None or (user_id is not None and _get(claim, "user_id") != user_id):
            return False
        token_hash = _req(claim, "token_hash")
        actions: list[dict[str, Any]] = [
            {
                "Delete": {
                    "Key": _key(f"LABEL#{label}", "LABEL"),
                    "ConditionExpression": "#h = :h",
                    "ExpressionAttributeNames": {"#h": "token_hash"},
                    "ExpressionAttributeValues": {":h": _s(token_hash)},
                }
            },
            {"Delete": {"Key": _key(f"TOKEN#{token_hash}", "TOKEN")}},
        ]
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._transact(actions)
                return True
            except _Cancelled as cancelled:
                if not cancelled.conflict:
                    return False  # revoked meanwhile (the label gone, or another token's)
                _backoff(attempt)  # a token that still works must not pass as revoked
        raise Conflict(f"token {label!r} could not be revoked (concurrent writes); try again")

    # -- OAuth ------------------------------------------------------------

    def put_oauth_item(
        self,
        kind: str,
        key: str,
        doc: Mapping[str, Any],
        expires_at: datetime | None,
        *,
        now: datetime | None = None,  # expired items: the TTL attribute drops them
    ) -> None:
        item: Item = {**_key(f"OAUTH#{kind}#{key}", "OAUTH"), "doc": _s(json.dumps(doc))}
        if expires_at is not None:
            item["expires_at"] = _s(_ts(expires_at))
            item[TTL_ATTRIBUTE] = _epoch(expires_at + OAUTH_TTL_GRACE)
        self._client.put_item(TableName=self.table, Item=item)

    def get_oauth_item(self, kind: str, key: str, now: datetime) -> dict[str, Any] | None:
        return _oauth_doc(self._get_item(_key(f"OAUTH#{kind}#{key}", "OAUTH")), now)

    def take_oauth_item(self, kind: str, key: str, now: datetime) -> dict[str, Any] | None:
        # One conditional-free DeleteItem with ALL_OLD: of concurrent takers, exactly
        # one sees the old item (DynamoDB serializes writes to one item).
        resp = self._client.delete_item(
            TableName=self.table, Key=_key(f"OAUTH#{kind}#{key}", "OAUTH"), ReturnValues="ALL_OLD"
        )
        return _oauth_doc(resp.get("Attributes"), now)

    # -- teams ----------------------------------------------------------

    def create_team(self, team: Team) -> None:
        owner = self.get_user(team.owner_id)
        display = owner.display if owner else ""
        fields = _team_fields(team)
        by_name, by_id = (
            {**_key(f"TEAMNAME#{team.name}", "TEAM"), **fields},
            {
                **_key(f"TEAM#{team.id}", "TEAM"),
                **fields,
            },
        )
        actions = [
            _put_new(by_name),
            _put_new(by_id),
            *_member_puts(team, team.owner_id, display, "owner", team.created_at),
        ]
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._transact(actions)
                return
            except _Cancelled as cancelled:
                if not cancelled.conflict:
                    raise Conflict(f"team name {team.name!r} is taken") from None
                _backoff(attempt)
        raise Conflict(f"team {team.name!r} could not be created (concurrent writes); try again")

    def get_team(self, name: str) -> Team | None:
        item = self._get_item(_key(f"TEAMNAME#{name}", "TEAM"))
        return _team(item) if item else None

    def team_membership(self, name: str, user_id: str) -> tuple[Team, Member] | None:
        team_key, member_key = (
            (f"TEAMNAME#{name}", "TEAM"),
            (f"TEAMNAME#{name}", f"MEMBER#{user_id}"),
        )
        items = self._read([_key(*team_key), _key(*member_key)])
        return _membership(items.get(team_key), items.get(member_key))

    def list_teams(self, user_id: str) -> list[Team]:
        items = self._query(
            KeyConditionExpression="#p = :p AND begins_with(#s, :m)",
            ExpressionAttributeNames={"#p": "pk", "#s": "sk"},
            ExpressionAttributeValues={":p": _s(f"USER#{user_id}"), ":m": _s("MEMBEROF#")},
            ConsistentRead=True,
        )
        return [_team(item) for item in items]

    def get_member(self, team_id: str, user_id: str) -> Member | None:
        item = self._get_item(_key(f"TEAM#{team_id}", f"MEMBER#{user_id}"))
        return _member(item) if item else None

    def list_members(self, team_id: str) -> list[Member]:
        items = self._query(
            KeyConditionExpression="#p = :p AND begins_with(#s, :m)",
            ExpressionAttributeNames={"#p": "pk", "#s": "sk"},
            ExpressionAttributeValues={":p": _s(f"TEAM#{team_id}"), ":m": _s("MEMBER#")},
            ConsistentRead=True,
        )
        members = [_member(item) for item in items]
        return sorted(members, key=lambda m: (m.role != "owner", m.joined_at, m.user_id))

    def add_member(self, team_id: str, user_id: str, role: Role = "member") -> Member:
        for attempt in range(TRANSACTION_ATTEMPTS):
            items = self._batch_get(
                [
                    _key(f"TEAM#{team_id}", "TEAM"),
                    _key(f"TEAM#{team_id}", f"MEMBER#{user_id}"),
                    _key(f"USER#{user_id}", "USER"),
                ]
            )
            by_pk_sk = {(_req(i, "pk"), _req(i, "sk")): i for i in items}
            existing = by_pk_sk.get((f"TEAM#{team_id}", f"MEMBER#{user_id}"))
            if existing is not None:
                return _member(existing)
            team_item = by_pk_sk.get((f"TEAM#{team_id}", "TEAM"))
            if team_item is None:
                raise NotFound(f"team {team_id} does not exist")
            user_item = by_pk_sk.get((f"USER#{user_id}", "USER"))
            display = _get(user_item, "display") or "" if user_item else ""
            puts = _member_puts(_team(team_item), user_id, display, role, datetime.now(UTC))
            try:
                self._transact(
                    [
                        *puts,
                        _exists(_key(f"TEAM#{team_id}", "TEAM")),
                        _not_leaving(team_id, user_id),
                    ]
                )
                return _member(puts[0]["Put"]["Item"])
            except _Cancelled as cancelled:
                if cancelled.failed(len(puts)):
                    raise NotFound(f"team {team_id} does not exist") from None
                if cancelled.failed(len(puts) + 1):
                    raise Conflict(STILL_LEAVING) from None
                _backoff(attempt)  # joined concurrently, or a conflict: read again
        raise Conflict("membership could not be added (concurrent writes); try again")

    def remove_member(self, team_id: str, user_id: str) -> bool:
        """One transaction takes the membership away (its three copies; the name's copy
        only while it is this team's, not a newer namesake's) and puts the departure
        mark; then at most ``INLINE_PAGES`` pages of the clean-up, the stream consumer
        the rest (``dynamo_fanout.py``). From the answer on the member has no access,
        their invites are refused and their public links are dead; their invites and
        publications are deleted by the clean-up, so a read of the table (not through
        the store) may still find some until the stream has run."""
        member_key = _key(f"TEAM#{team_id}", f"MEMBER#{user_id}")
        mark_key = departure_key(team_id, user_id)
        for attempt in range(TRANSACTION_ATTEMPTS):
            found = self._read([member_key, mark_key])
            item = found.get((f"TEAM#{team_id}", f"MEMBER#{user_id}"))
            if item is None:
                return False
            old = found.get((f"TEAM#{team_id}", f"LEFT#{user_id}"))
            # The step goes on from an earlier departure's, so its late records stay no-ops.
            step = 0 if old is None else int(old["step"]["N"]) + 1
            mark: Item = {**mark_key, "user_id": _s(user_id), "step": {"N": str(step)}}
            # An older membership's records (string sets, never added to; unbounded, so not
            # ended here) go to the mark, with any an earlier departure left unfinished.
            for field in (PUBLISHED_MADE, INVITES_MADE):
                held = {
                    *item.get(field, {}).get("SS", []),
                    *(old or {}).get(field, {}).get("SS", []),
                }
                if held:
                    mark[field] = {"SS": sorted(held)}
            same_mark: dict[str, Any] = {
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": "pk"},
            }
            if old is not None:
                same_mark = {
                    "ConditionExpression": "#step = :step",
                    "ExpressionAttributeNames": {"#step": "step"},
                    "ExpressionAttributeValues": {":step": old["step"]},
                }
            by_id, by_name, by_user = _member_keys(_team(item), user_id)
            try:
                self._transact(
                    [
                        {
                            "Delete": {
                                "Key": by_id,
                                "ConditionExpression": "attribute_exists(#pk)",
                                "ExpressionAttributeNames": {"#pk": "pk"},
                            }
                        },
                        {"Delete": {"Key": by_name, **ours(team_id)}},
                        {"Delete": {"Key": by_user}},
                        {"Put": {"Item": mark, **same_mark}},
                    ]
                )
            except _Cancelled:
                _backoff(attempt)  # removed or left meanwhile, or a conflict: read again
                continue
            self._depart(team_id, user_id, step)
            return True
        raise Conflict("membership could not be removed (concurrent writes); try again")

    # -- invites --------------------------------------------------------

    def create_invite(self, invite: Invite) -> None:
        ttl = _epoch(invite.expires_at + INVITE_TTL_GRACE)
        item: Item = {
            **_key(f"INVITE#{invite.code_hash}", "INVITE"),
            "code_hash": _s(invite.code_hash),
            "team_id": _s(invite.team_id),
            "created_by": _s(invite.created_by),
            "created_at": _s(_ts(invite.created_at)),
            "expires_at": _s(_ts(invite.expires_at)),
            TTL_ATTRIBUTE: ttl,
            "gsi2pk": _s(f"INVITES#{invite.team_id}"),
            "gsi2sk": _s(invite.code_hash),
        }
        # Its maker is recorded in an item of its own (TTL tidies it up with the invite),
        # in a transaction that checks they are a member: their departure's clean-up
        # finds it there. Nothing on the membership grows with the invites a member makes.
        made: Item = {
            **_invite_keys(invite.team_id, invite.created_by, invite.code_hash)[1],
            "code_hash": _s(invite.code_hash),
            TTL_ATTRIBUTE: ttl,
        }
        record = _exists(_key(f"TEAM#{invite.team_id}", f"MEMBER#{invite.created_by}"))
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._transact([_put_new(item), {"Put": {"Item": made}}, record])
                return
            except _Cancelled as cancelled:
                if cancelled.failed(2):
                    raise NotFound(f"{invite.created_by} is not a member of the team") from None
                if not cancelled.conflict:
                    raise Conflict("invite code already exists") from None
                _backoff(attempt)
        raise Conflict("invite could not be created (concurrent writes); try again")

    def list_invites(self, team_id: str) -> list[Invite]:
        keys = [
            _key(_req(item, "pk"), _req(item, "sk"))
            for item in self._query(
                IndexName="gsi2",
                KeyConditionExpression="#p = :p",
                ExpressionAttributeNames={"#p": "gsi2pk"},
                ExpressionAttributeValues={":p": _s(f"INVITES#{team_id}")},
            )
        ]
        found: list[Item] = []
        for start in range(0, len(keys), 100):  # BatchGetItem takes 100 keys at most
            found.extend(self._batch_get(keys[start : start + 100]))
        return sorted((_invite(item) for item in found), key=lambda i: (i.created_at, i.code_hash))

    def accept_invite(
        self,
        code_hash: str,
        user_id: str,
        now: datetime,
        *,
        new_user: tuple[User, Token] | None = None,
    ) -> tuple[Invite, Member]:
        invite_key = _key(f"INVITE#{code_hash}", "INVITE")
        for attempt in range(TRANSACTION_ATTEMPTS):
            item = self._get_item(invite_key)
            if item is None:
                raise NotFound("invite not found")
            invite = _invite(item)
            # Expiry is enforced here and in the condition below, never left to TTL.
            if invite.used_at is not None or invite.expires_at <= now:
                raise Gone("invite already used or expired")
            team_key = _key(f"TEAM#{invite.team_id}", "TEAM")
            member_key = _key(f"TEAM#{invite.team_id}", f"MEMBER#{user_id}")
            creator_key = _key(f"TEAM#{invite.team_id}", f"MEMBER#{invite.created_by}")
            wanted = [team_key, member_key]
            if invite.created_by != user_id:
                wanted.append(creator_key)
            if new_user is None:
                wanted.append(_key(f"USER#{user_id}", "USER"))
            found = {(_req(i, "pk"), _req(i, "sk")): i for i in self._batch_get(wanted)}
            team_item = found.get((f"TEAM#{invite.team_id}", "TEAM"))
            if team_item is None:
                raise Gone("the team of this invite no longer exists")
            if (f"TEAM#{invite.team_id}", f"MEMBER#{invite.created_by}") not in found:
                raise Gone("the member who made this invite has left the team")
            team = _team(team_item)
            member_item = found.get((f"TEAM#{invite.team_id}", f"MEMBER#{user_id}"))
            if member_item is not None and new_user is None:
                # Already in: nothing to join, and the code stays good for the one it was
                # made for (its maker trying the link must not spend it).
                return invite, _member(member_item)
            actions: list[dict[str, Any]] = [
                {
                    "Update": {
                        "Key": invite_key,
                        "UpdateExpression": "SET #used_at = :now, #used_by = :user",
                        "ConditionExpression": (
                            "attribute_exists(#pk) AND attribute_not_exists(#used_at)"
                            " AND #expires_at > :now"
                        ),
                        "ExpressionAttributeNames": {
                            "#pk": "pk",
                            "#used_at": "used_at",
                            "#used_by": "used_by",
                            "#expires_at": "expires_at",
                        },
                        "ExpressionAttributeValues": {":now": _s(_ts(now)), ":user": _s(user_id)},
                    }
                },
                _exists(team_key),
                _exists(creator_key),  # an invite lives only as long as its maker's membership
            ]
            if new_user is not None:
                user, token = new_user
                display = user.display
                actions.extend(self._new_user_actions(user, token))
            else:
                user_item = found.get((f"USER#{user_id}", "USER"))
                display = (_get(user_item, "display") or "") if user_item else ""
            member_index = len(actions)
            if member_item is None:
                puts = _member_puts(team, user_id, display, "member", now)
                actions.extend([*puts, _not_leaving(invite.team_id, user_id)])
                member = _member(puts[0]["Put"]["Item"])
            else:
                member = _member(member_item)  # already a member: keeps their role
            try:
                self._transact(actions)
            except _Cancelled as cancelled:
                if any(cancelled.failed(i) for i in range(3)):
                    raise Gone("invite already used or expired") from None
                if member_item is None and cancelled.failed(len(actions) - 1):
                    raise Conflict(STILL_LEAVING) from None
                if new_user is not None and cancelled.failed(member_index - 1):
                    raise NameTaken(f"the display name {new_user[0].display!r} is taken") from None
                if any(cancelled.failed(i) for i in range(3, member_index)):
                    raise Conflict("user or token already exists") from None
                # Lost a race to another transaction, or joined meanwhile: read again.
                _backoff(attempt)
                continue
            used = Invite(
                invite.code_hash,
                invite.team_id,
                invite.created_by,
                invite.created_at,
                invite.expires_at,
                now,
                user_id,
            )
            return used, member
        raise Gone("invite could not be used (concurrent accepts); it is probably used")


def _name_item(display: str, user_id: str) -> Item:
    """The claim on a display name (``name_key``): one user per name, in any case."""
    return {**_key(f"NAME#{name_key(display)}", "NAME"), "user_id": _s(user_id)}


def _set_display(key: Item, field: str, display: str) -> dict[str, Any]:
    """A transactional Update setting an existing item's copy of a display name."""
    return update_existing(key, "SET #f = :v", field, _s(display))


def _invite_keys(team_id: str, user_id: str, code_hash: str) -> tuple[Item, Item]:
    """An invite's item and the ``MADE#`` item that names its maker in the team."""
    return (
        _key(f"INVITE#{code_hash}", "INVITE"),
        _key(f"TEAM#{team_id}", f"MADE#{user_id}#{code_hash}"),
    )


def _published_key(team_id: str, user_id: str, packet_id: str) -> Item:
    """The item that records ``user_id``'s publication of a packet of the team."""
    return _key(f"TEAM#{team_id}", f"PUBLISHED#{user_id}#{packet_id}")


def _put_new(item: Item) -> dict[str, Any]:
    """A transactional Put that fails when the item already exists."""
    return {
        "Put": {
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": "pk"},
        }
    }


def _owned(owner_id: str, team_id: str | None) -> dict[str, Any]:
    """The condition that a packet item has this owner and scope."""
    names = {"#owner": "owner_id", "#team": "team_id"}
    values: Item = {":owner": _s(owner_id)}
    if team_id is None:
        condition = "#owner = :owner AND attribute_not_exists(#team)"
    else:
        condition = "#owner = :owner AND #team = :team"
        values[":team"] = _s(team_id)
    return {
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _exact(key: Item, owner_id: str, team_id: str | None) -> dict[str, Any]:
    """A delete of the packet at ``key`` only while it has this owner and scope."""
    return {"Key": key, **_owned(owner_id, team_id)}


def _unchanged(old: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The condition that a packet item is still the revision ``old`` (owner, scope, text,
    publication): a write computed from ``old`` (a usage delta, a carried publication)."""
    names = {
        "#owner": "owner_id",
        "#team": "team_id",
        "#rev": "rev",
        "#h": "public_hash",
        "#sh": SHARED,
    }
    values: dict[str, Mapping[str, Any]] = {":owner": old["owner_id"]}
    parts = ["#owner = :owner"]
    if "team_id" in old:
        parts.append("#team = :team")
        values[":team"] = old["team_id"]
    else:
        parts.append("attribute_not_exists(#team)")
    if "rev" in old:
        parts.append("#rev = :rev")
        values[":rev"] = old["rev"]
    else:  # stored before revisions: the first write gives it one
        parts.append("attribute_not_exists(#rev)")
    if "public_hash" in old:
        parts.append("#h = :h")
        values[":h"] = old["public_hash"]
    else:
        parts.append("attribute_not_exists(#h)")
    parts.append(f"attribute_{'exists' if SHARED in old else 'not_exists'}(#sh)")
    return {
        "ConditionExpression": " AND ".join(parts),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


REV_BYTES = 8  # a packet's revision: this many random bytes, in hex


def _new_rev() -> str:
    return os.urandom(REV_BYTES).hex()


def _tombstone_key(team_id: str) -> Item:
    """A deleted team's mark: written with the team's deletion, kept until its fan-out ends."""
    return _key(f"TEAM#{team_id}", "GONE")


def _absent(key: Item) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "Key": key,
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": "pk"},
        }
    }


def _exists(key: Item) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "Key": key,
            "ConditionExpression": "attribute_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": "pk"},
        }
    }


STILL_LEAVING = (
    "you left this team moments ago and what you made in it is still being cleaned up;"
    " try again in a minute"
)


def _not_leaving(team_id: str, user_id: str) -> dict[str, Any]:
    """The check that joining waits for the user's earlier departure's clean-up: it ends
    what the member made before, and must never find (and end) what they make after."""
    return {
        "ConditionCheck": {
            "Key": departure_key(team_id, user_id),
            "ConditionExpression": "attribute_not_exists(#pk) OR attribute_exists(#done)",
            "ExpressionAttributeNames": {"#pk": "pk", "#done": "done"},
        }
    }


def _backoff(attempt: int) -> None:
    time.sleep(min(0.5, 0.01 * 2**attempt) * (0.5 + random.random()))


# -- clients and tables -----------------------------------------------------

_client_lock = threading.Lock()


def make_client(region: str | None = None) -> DynamoDBClient:
    """A DynamoDB client; the SDK itself reads ``AWS_ENDPOINT_URL_DYNAMODB`` (a local endpoint).

    Made with botocore directly: boto3's own import (s3transfer and friends,
    about 60 ms) buys nothing for one low-level client, and a Lambda cold
    start pays for every import. Timeouts stay well inside a Lambda
    invocation, and the SDK's standard retry mode retries throttling and
    transient errors with backoff.
    """
    import botocore.session
    from botocore.config import Config

    config = Config(
        connect_timeout=3,
        read_timeout=5,
        retries={"mode": "standard", "max_attempts": 3},
        tcp_keepalive=True,
    )
    with _client_lock:  # botocore sessions are not thread-safe
        session = botocore.session.get_session()
        client = session.create_client("dynamodb", region_name=region, config=config)
        return cast("DynamoDBClient", client)


def create_tables(
    client: DynamoDBClient, table: str = DEFAULT_TABLE, *, wait: bool = True, ttl: bool = True
) -> dict[str, Any]:
    """Create the table (from ``TABLE_SCHEMA``) and turn on TTL; for development and tests.

    In an AWS account the table comes from ``infra/ltm.yaml`` instead, which
    also turns on point-in-time recovery and deletion protection. ``ttl=False``
    is for local engines without UpdateTimeToLive (dynalite): the store never
    relies on TTL, which only tidies up expired items.
    """
    resp = client.create_table(TableName=table, **TABLE_SCHEMA)
    if wait:
        client.get_waiter("table_exists").wait(
            TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
    if ttl:
        client.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )
    # A new table owes no repair: nothing in it was derived by older code.
    record = {r: {"N": str(DERIVED_GENERATION)} for r in REPAIRS}
    client.put_item(TableName=table, Item={**DERIVED_KEY, **record})
    return dict(resp["TableDescription"])


def repairs_owed_line(owed: Sequence[str]) -> str:
    """What the log says, at a process's start, of a table whose derived data waits
    for ``owed`` (``DynamoStore.repairs_owed``)."""
    commands = " and ".join(f"python -m ltm.store.dynamo_repair {r}" for r in owed)
    harm = {
        "index": "search may miss packets stored before the upgrade",
        "usage": "usage counters (the storage bound) may be wrong",
    }
    return (
        f"the table's derived data was not repaired after an upgrade: run {commands}"
        f" (docs/deploy-aws.md, Upgrades); until then {' and '.join(harm[r] for r in owed)}"
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m ltm.store.dynamo",
        description="Development commands for the DynamoDB store.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser(
        "create-tables",
        help="create the ltm table against AWS_ENDPOINT_URL_DYNAMODB (moto, DynamoDB Local)",
    )
    create.add_argument(
        "--table", default=os.environ.get("LTM_DYNAMODB_TABLE", DEFAULT_TABLE), help="table name"
    )
    create.add_argument("--region", default=None, help="AWS region (default: from the environment)")
    args = parser.parse_args(argv)
    client = make_client(args.region or os.environ.get("AWS_REGION") or None)
    try:
        create_tables(client, args.table)
    except client.exceptions.ResourceInUseException:
        print(f"table {args.table} already exists", file=sys.stderr)
        return 0
    print(f"created table {args.table}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
