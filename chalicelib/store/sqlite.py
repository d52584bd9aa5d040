"""The SQLite store: the embedded default of the CLI and the self-hosted server.

Safe under concurrent processes and threads: each thread gets its own
connection, the database runs in WAL mode (readers never block the writer),
and every write that checks before it writes does so inside ``BEGIN
IMMEDIATE``, which takes the write lock up front so two writers cannot both
pass the check.

Durability: ``synchronous=FULL`` by default, so a commit returns only once
the WAL is on disk (in WAL mode FULL syncs the WAL at every commit;
https://www.sqlite.org/pragma.html#pragma_synchronous): what was
acknowledged survives a power loss or a kernel crash. ``LTM_SQLITE_SYNC=normal``
trades that for speed: NORMAL syncs only at checkpoints, so a commit is
still safe from a crash of the process (``kill -9``), but a power loss or a
kernel crash can lose the last commits (the database stays consistent).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, overload

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from ..errors import Failure
from . import (
    Conflict,
    DeviceGrant,
    Gone,
    Invite,
    Member,
    NameTaken,
    NotFound,
    OverQuota,
    PacketMeta,
    Page,
    Publication,
    PutItem,
    Quota,
    Role,
    Scope,
    SearchHit,
    Share,
    Store,
    StoredPacket,
    StoreError,
    Team,
    Token,
    Usage,
    User,
    decode_cursor,
    encode_cursor,
    moves_into_team,
    name_key,
)
from .sqlite_schema import (
    _FTS_COLUMNS,
    COMPACT_VERSION,
    GRAMS_INTO,
    MIGRATIONS,
    SCHEMA_VERSION,
    _is_compact,
    _statements,
)

if TYPE_CHECKING:
    from ..search import Query
    from ..semantic import Query as Meaning

# How many of the newest matches are ranked (see search). Scoring a match re-reads
# its ten fields (about 30 µs on a loaded core), so the window is what a common
# word costs: 200 keeps a multi-word search at 10,000 packets near 3 ms
# (bench/bench_search.py), and still ranks ten pages of the caller's recent work.
RANK_WINDOW = 200
MEANING_WINDOW = 2000  # how many of the newest packets ``nearest`` compares
SATURATION = 1.2  # BM25's k1: the tenth match in a field adds little over the second


def _score_sql(table: str = "packet_fts") -> str:
    """SQL for a match's score from its own text alone (see ``SqliteStore.search``).

    ``highlight()`` puts its opening mark (one character here) before each
    matched span, so a column's matches are the length it gains; the spans of
    each field are saturated and weighed by ``search.FIELDS``.
    https://www.sqlite.org/fts5.html#the_highlight_function
    """
    from .. import search

    parts = []
    for i, (name, weight) in enumerate(search.FIELDS):
        hits = f"(length(highlight({table}, {i}, '.', '')) - length({table}.{name}))"
        parts.append(f"{weight!r} * {hits} / ({hits} + {SATURATION!r})")
    return " + ".join(parts)


# The compact layout (migration 11, in sqlite_schema.py). A packet's searchable text
# is kept once: as the content of packet_fts, plain text in SQLite's pages, because
# highlight() scores every ranked match from it (a copy that had to be decoded first
# cost six times as much a match). The body is kept compressed against that text: zlib
# with a preset dictionary made of a packet's skeleton and its searchable text, so a
# body costs about what no field indexes (its JSON structure, ids, dates), a sixth of
# its size, and reading it back is one more row (its text) and an inflate.
# ``packets.doc`` is the packet's row in packet_fts (an INTEGER PRIMARY KEY: kept
# through VACUUM). A packet's tags and project, as its body names them, are ``labels``
# (one row per scope, kind and value) and ``label_packets`` (each label's packets in
# listing order); the packet row keeps its label ids (a JSON array) so that the
# trigger dropping its search rows knows which to drop.
_TEXT_COLUMNS = tuple(name.strip() for name in _FTS_COLUMNS.split(","))
_FTS_INTO = f"INSERT INTO packet_fts (rowid, {_FTS_COLUMNS})"  # a search row's insert
_FTS_INSERT = f"{_FTS_INTO} VALUES (?{', ?' * len(_TEXT_COLUMNS)})"
_TEXTS = ", ".join(f"f.{name}" for name in _TEXT_COLUMNS)  # packet_fts read as f

# The start of every body's preset dictionary. Never edit it: each stored body needs
# these exact bytes to be read back (tests/test_sqlite_compact.py holds its checksum).
_SKELETON = (
    b'{\n  "ltm_version": "0.2",\n  "id": "",\n  "parent_id": "",\n  "created_at": "",\n'
    b'  "project": {\n    "name": "",\n    "ref": ""\n  },\n  "goal": "",\n'
    b'  "success_criteria": [\n    ""\n  ],\n  "constraints": [\n    ""\n  ],\n'
    b'  "decisions": [\n    {\n      "what": "",\n      "why": "",\n'
    b'      "consequences": "",\n      "locked": true\n    }\n  ],\n'
    b'  "methods": [\n    {\n      "name": "",\n      "when_applicable": "",\n'
    b'      "how": ""\n    }\n  ],\n'
    b'  "attempts": [\n    {\n      "tried": "",\n      "outcome": "failed",\n'
    b'      "learned": "",\n      "confidence": "high"\n    }\n  ],\n'
    b'  "open_questions": [\n    ""\n  ],\n  "next_step": "",\n  "tags": [\n    ""\n  ],\n'
    b'  "provenance": {\n    "author_model": "",\n    "author_human": "",\n'
    b'    "source_hash": "",\n    "confidence": "high"\n  }\n}'
)


def _text(texts: Sequence[str]) -> bytes:
    """A packet's searchable text (its fields in ``_TEXT_COLUMNS`` order) as one string:
    what ``_TEXT`` reads back from its search row."""
    return "\n".join(texts).encode()


# The same bytes, read in SQL from the search row (f): one value instead of ten strings.
_TEXT = f"CAST({' || char(10) || '.join(f'f.{name}' for name in _TEXT_COLUMNS)} AS BLOB)"


# Level 3, not zlib's default 6: most of a body is found whole in its dictionary (its
# text), which the fast strategy finds as well; on example packets it packs 2% larger
# in three quarters of the time (bench/bench_portable.py's disk figure stays put).
# Any level reads back with the same decompressobj.
_LEVEL = 3


def _pack(body: bytes, text: bytes) -> bytes:
    """The stored form of ``body``: zlib, with the skeleton and its ``text`` as the preset
    dictionary."""
    packer = zlib.compressobj(_LEVEL, zdict=_SKELETON + text)
    return packer.compress(body) + packer.flush()


class Derived(NamedTuple):
    """What a write stores from a packet's canonical bytes alone (``derive``)."""

    texts: tuple[str, ...]  # its search row: the text of each of ``_TEXT_COLUMNS``
    tags: list[str]  # its labels (with its scope): tags, sorted, and project
    project: str | None
    packed: bytes  # the body as stored (``_pack``)
    vector: bytes | None = None  # what it means (``semantic.packet_vector``), with the extra

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent back by an import's workers for every packet: as a plain tuple, which
        # pickles without the named tuple's Python-level ``__getnewargs__``.
        return (Derived, tuple(self))


def derive(body: bytes, data: dict[str, Any] | None = None) -> Derived:
    """The search row, labels and packed body of the packet whose canonical bytes are
    ``body``: the per-packet work of a write that needs no database, so an import's
    worker processes do it while this one writes (``PutItem.derived``).

    Read from the canonical bytes, not from the dict the packet was checked as: the
    search text follows the order of its keys, which is the canonical order here
    whichever door the packet came through. ``data``: what ``body`` decodes to, key
    order included, where the caller knows it (``Checked.ordered``), which saves
    decoding it again.
    """
    from .. import search

    if data is None:
        data = search.load(body)
    fields = search.fields_of(data)
    texts = tuple(fields[name] for name in _TEXT_COLUMNS)
    packed = _pack(body, _text(texts))
    return Derived(texts, search.tags_of(data), search.project_of(data), packed, _vector(fields))


def _vector(fields: dict[str, str]) -> bytes | None:
    """The packet's vector where the ``semantic`` extra is installed (and not turned off);
    a model that fails to load leaves it to ``fill_vectors``, never fails the write."""
    from .. import semantic

    if not semantic.enabled():
        return None
    try:
        return semantic.packet_vector(fields)
    except (semantic.Unavailable, OSError, ValueError, KeyError):
        return None


def _meaning_text(row: Sequence[Any]) -> str:
    """What ``semantic`` embeds of a packet, from a row of its doc then its ``_TEXTS``."""
    from .. import semantic

    return semantic.text_of(dict(zip(_TEXT_COLUMNS, row[1:], strict=True)))


def _unpack(stored: bytes, text: bytes) -> bytes:
    """The body ``_pack`` stored. Raises ``zlib.error`` if ``text`` is not what it was
    packed with (zlib checks the dictionary's checksum and the body's)."""
    unpacker = zlib.decompressobj(zdict=_SKELETON + text)
    return unpacker.decompress(stored) + unpacker.flush()


_PACKET_COLUMNS = (
    "doc, id, scope, owner_id, team_id, sort_key, created_at, goal, conforming, project,"
    " parent_id, labels, size, body"
)
_PACKET_MARKS = ", ".join("?" * len(_PACKET_COLUMNS.split(",")))
_FILL_BATCH = 500  # packets a transaction of ``fill_vectors``
_CHUNK = 300  # rows per statement with a variable each (old SQLite allows 999 variables)


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# Rows of a bulk write go in as many to a statement as its variables allow, not one
# statement a row (executemany). Inside a transaction SQLite opens a statement journal
# for each statement that may fail halfway (a NOT NULL column, a trigger, a virtual
# table) and copies into it every page the statement changes: one statement a row
# copied the same index and table leaves again for every packet, into a temporary file
# (the commit that made this change gives strace's count). And each such statement
# opens a savepoint, at which FTS5 writes the rows it holds in memory out as a segment
# of their own (its xSavepoint "flushes the contents of the pending-terms table to
# disk", ext/fts5/fts5_main.c in SQLite's source): the search rows of a batch go in one
# statement, so they make one segment, not one for every few dozen packets, which FTS5
# would then merge again.
#
# SQLite allows 32,766 variables a statement by default (999 before 3.32); a build may
# set another limit, which the connection tells. Past 32,766 the cap keeps a statement's
# text far under SQLite's default limit of a million bytes.
_MAX_VARIABLES = 32_766


def _insert_rows(db: sqlite3.Connection, head: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """``head VALUES (...), (...), ...`` over ``rows`` (each of the same width), in order."""
    if not rows:
        return
    width = len(rows[0])
    variables = min(db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER), _MAX_VARIABLES)
    per = max(1, variables // width)
    one = f"({', '.join('?' * width)})"
    full = len(rows) - len(rows) % per
    flat = chain.from_iterable
    if full:
        values = ", ".join([one] * per)
        db.executemany(
            f"{head} VALUES {values}", [list(flat(rows[i : i + per])) for i in range(0, full, per)]
        )
    if full < len(rows):
        rest = rows[full:]
        db.execute(f"{head} VALUES {', '.join([one] * len(rest))}", list(flat(rest)))


def _labels_of(scope: str, derived: Derived) -> list[tuple[str, str, str]]:
    """The labels a packet's body gives it: (scope, kind, value), its tags then its project."""
    labels = [(scope, "tag", tag) for tag in derived.tags]
    if derived.project:
        labels.append((scope, "project", derived.project))
    return labels


def _label_ids(
    db: sqlite3.Connection, names: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], int]:
    """The id of each label (scope, kind, value), made for those that have none yet.

    Called inside a write, which no other writer can interleave with."""
    wanted = sorted(set(names))
    found = _find_labels(db, wanted)
    missing = [name for name in wanted if name not in found]
    if missing:
        db.executemany("INSERT INTO labels (scope, kind, value) VALUES (?, ?, ?)", missing)
        found.update(_find_labels(db, missing))
    return found


def _find_labels(
    db: sqlite3.Connection, names: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str, str], int]:
    found: dict[tuple[str, str, str], int] = {}
    for chunk in _chunks(names, _CHUNK // 3):
        # A join from the values: a row-value IN over them would scan the table.
        rows = db.execute(
            "WITH wanted (scope, kind, value) AS (VALUES"
            f" {', '.join(['(?, ?, ?)'] * len(chunk))})"
            " SELECT n.label, n.scope, n.kind, n.value FROM wanted w JOIN labels n"
            " ON n.scope = w.scope AND n.kind = w.kind AND n.value = w.value",
            [part for name in chunk for part in name],
        )
        found.update(((scope, kind, value), label) for label, scope, kind, value in rows)
    return found


# A write of this many packets or more is a bulk load (an import: 500 a write locally).
BULK = 100
# A bulk write gives the file system back the pages left free once they pass this share
# of the file (1/32), and a store that wrote in bulk gives back the rest as it closes.
FREE_SHARE = 32
# Checkpoints copy the WAL's pages into the database and sync it, which takes long on a
# busy disk. SQLite runs one inside the COMMIT that takes the WAL past its threshold,
# here inside the writers' lock, where every writer of every process waits for it. So
# the writer connection's threshold is only a bound (for bulk writes), and a thread of
# the process checkpoints every CHECKPOINT_EVERY commits instead, outside the lock,
# while the others write.
CHECKPOINT_EVERY = 32
AUTOCHECKPOINT_PAGES = 4000
# A leader of pushes written together (SqliteStore._lead) takes more while fewer than
# this are in its write: the other processes' pushes wait meanwhile.
COMBINED_MAX = 64


def _return_free(db: sqlite3.Connection, *, share: int = 0) -> None:
    """Give the file system the pages bulk writes left free, in the write's transaction;
    with ``share``, only once more than that share of the file (1/share) is free.

    FTS5 merges its segments as it writes them out, which frees the pages of the
    segments merged: bulk writes leave some pages free, about a twentieth of the
    file at the end of an import, which later writes would reuse but the file keeps
    until then. A savepoint makes FTS5 write out what it holds now (it does at each
    savepoint), and an incremental vacuum then truncates the file by the pages free.
    Each step of that pragma moves a page from the end of the file into a free one,
    and Python's sqlite3 steps a statement that has no columns once: one execute a
    page. Done after every bulk write, it moved pages that the next write would have
    reused, at a cost to every import; the share bounds what is free meanwhile.
    """
    db.execute("SAVEPOINT flush")
    db.execute("RELEASE flush")
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    if share and free * share <= db.execute("PRAGMA page_count").fetchone()[0]:
        return
    for _ in range(free):
        db.execute("PRAGMA incremental_vacuum")


def _user_conflict(exc: sqlite3.IntegrityError, user: User | None) -> Conflict:
    """What a failed user insert ran into: another user's name, or a taken id or token."""
    if user is not None and "user_names" in str(exc):
        return NameTaken(f"the display name {user.display!r} is taken")
    return Conflict(f"user or token already exists: {exc}")


def _json_ids(ids: list[int] | None) -> str | None:
    """Label ids as a JSON array (what ``json.dumps`` gives for ints, without its machinery:
    one call a packet written)."""
    return f"[{','.join(map(str, sorted(ids)))}]" if ids else None


BUSY_TIMEOUT_MS = 30_000

# The operator's durability setting (see the module docstring): its values,
# each a PRAGMA synchronous level.
SYNC_ENV = "LTM_SQLITE_SYNC"
SYNC_LEVELS = {"full": "FULL", "normal": "NORMAL"}


def sync_level(value: str | None = None) -> str:
    """The PRAGMA synchronous level for ``value`` (default: ``$LTM_SQLITE_SYNC``, else full)."""
    if value is None:
        value = os.environ.get(SYNC_ENV) or "full"
    level = SYNC_LEVELS.get(value.strip().lower())
    if level is None:
        raise ValueError(f"{SYNC_ENV} must be full or normal, got {value!r}")
    return level


# Expired device grants are kept this long (so a late poll still gets ``expired_token``).
DEVICE_GRANT_KEEP = timedelta(days=1)
_GRANT_COLUMNS = (
    "device_code_hash, user_code_hash, client_id, scope, device_name, client_ip, created_at,"
    " expires_at, interval_s, next_poll_at, status, user_id, decided_at, approved_with"
)


_TOKEN_COLUMNS = (
    "t.label, t.user_id, t.token_hash, t.created_at, t.last_used_at, t.scope, t.resource,"
    " t.expires_at"
)


def _token(row: tuple[Any, ...]) -> Token:
    """A ``Token`` from the first eight columns of a ``_TOKEN_COLUMNS`` select."""
    return Token(row[0], row[1], row[2], _dt(row[3]), _dt(row[4]), row[5], row[6], _dt(row[7]))


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


@overload
def _dt(value: str) -> datetime: ...
@overload
def _dt(value: str | None) -> datetime | None: ...
def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _scope(owner_id: str, team_id: str | None) -> str:
    return f"t:{team_id}" if team_id else f"u:{owner_id}"


def _marks(values: Sized) -> str:
    return ", ".join("?" * len(values))


_META = "p.id, p.created_at, p.goal, p.owner_id, p.team_id, p.project, p.parent_id"
# A whole packet (p), with the text of its search row (f, to join) to unpack its body with.
_READ = f"SELECT {_META}, p.conforming, p.body, {_TEXT} FROM packets p"


class _Row(NamedTuple):
    """A stored packet as a write finds it."""

    id: str
    doc: int
    owner_id: str
    team_id: str | None
    sort_key: str
    labels: str | None
    size: int


# A packet to write: its sort key and what ``derive`` made of its body.
_Parsed = tuple[StoredPacket, str, Derived]


class _Waiting:
    """A ``put_packet`` waiting for a leader to write it (``SqliteStore._put_together``)."""

    __slots__ = ("_woken", "outcome", "parsed")

    def __init__(self, packet: StoredPacket, sort_key: str, derived: Derived) -> None:
        self.parsed: _Parsed = (packet, sort_key, derived)
        self.outcome: bool | BaseException | None = None  # set once its write committed
        # Its own lock, held until ``wake``: each waiting thread is woken on its own, all
        # at once, where threads queued on one lock would wake one after another.
        self._woken = threading.Lock()
        self._woken.acquire()

    def wait(self) -> None:
        """Until it has its outcome, or its thread is to lead."""
        self._woken.acquire()

    def wake(self) -> None:
        self._woken.release()


class _Accepted(NamedTuple):
    """An item of a write that will be stored: the last of its id in the batch."""

    packet: StoredPacket
    sort_key: str
    derived: Derived
    moved: bool  # it, or an item of its id before it, changed the packet's scope


def _qualifiers(db: sqlite3.Connection, query: Query, names: list[str]) -> list[list[int]] | None:
    """Per qualifier of ``query``, the ids of its label in each scope of ``names``; None
    when a qualifier's label is in none of them (no packet searched carries it)."""
    labels = []
    for kind, values in (("tag", query.tags), ("project", query.projects)):
        for value in values:
            ids = [
                row[0]
                for row in db.execute(
                    f"SELECT label FROM labels WHERE scope IN ({_marks(names)})"
                    " AND kind = ? AND value = ?",
                    (*names, kind, value),
                )
            ]
            if not ids:
                return None
            labels.append(ids)
    return labels


def _hits(db: sqlite3.Connection, ranked: Sequence[Any], query: Query) -> list[SearchHit]:
    """The hits of ``ranked`` (doc, score), in its order, with their metadata and snippet."""
    from .. import search

    if not ranked:
        return []
    docs = [row[0] for row in ranked]
    rows = db.execute(
        f"SELECT p.doc, {_META}, {_TEXTS} FROM packets p JOIN packet_fts f ON f.rowid = p.doc"
        f" WHERE p.doc IN ({_marks(docs)})",
        docs,
    ).fetchall()
    found = {
        row[0]: (PacketMeta(*row[1:8]), dict(zip(_TEXT_COLUMNS, row[8:], strict=True)))
        for row in rows
    }
    hits = []
    for doc, rank in ranked:
        if doc in found:
            meta, fields = found[doc]
            hits.append(SearchHit(meta, float(rank), search.snippet(fields, query)))
    return hits


def _has_labels(row: str, labels: list[list[int]], args: list[object]) -> str:
    """SQL requiring the packet of ``row`` (sort_key, id) to carry one label of each list of
    ids (a label of the same name in each scope searched); adds the args."""
    sql = ""
    for ids in labels:
        sql += (
            f" AND EXISTS (SELECT 1 FROM label_packets o WHERE o.label IN ({_marks(ids)})"
            f" AND o.sort_key = {row}.sort_key AND o.id = {row}.id)"
        )
        args.extend(ids)
    return sql


PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# The files of one store: the database, SQLite's WAL and shared memory, the writers' lock.
PRIVATE_SUFFIXES = ("", "-wal", "-shm", ".writelock")


def pending_migration(path: str | Path) -> bool:
    """Whether the store at ``path`` has an older schema than this ltm's, so that opening
    it migrates it first; read without writing (False when there is no such store)."""
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return bool(0 < version < SCHEMA_VERSION)


class NewerSchema(Failure, RuntimeError):
    """A store a newer ltm made or migrated: refused whole, said in one line (``ltm server
    run`` showed it as an unexpected error), never migrated down or written to."""


class SqliteStore(Store):
    """A ``Store`` in one SQLite file. Open it once per process and share it across threads."""

    derive = staticmethod(derive)

    def __init__(self, path: str | Path, *, sync: str | None = None) -> None:
        self.path = Path(path)
        self.synchronous = sync_level(sync)  # before anything opens a connection
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # Group commit (see _write): the one connection this process writes on,
        # the transaction open on it (its number; 0: none), the last one ended.
        self._ops = threading.Lock()  # one write at a time on the writer connection
        self._committing = threading.Lock()  # one commit at a time
        self._writer: sqlite3.Connection | None = None
        self._writer_pid = 0
        self._open = 0
        self._ended = 0
        self._failed: dict[int, str] = {}  # transactions whose COMMIT failed: why
        # Combined pushes (see _put_together): the puts waiting for a leader, and
        # whether a thread leads (both under _waiting_lock).
        self._waiting: list[_Waiting] = []
        self._waiting_lock = threading.Lock()
        self._led = False
        # The checkpoints (see CHECKPOINT_EVERY): commits since the last one asked for,
        # and the process's checkpointer thread with its two events (due, stop).
        self._commits = 0
        self._checkpointer: tuple[threading.Thread, threading.Event, threading.Event] | None = None
        self._checkpointer_pid = 0
        self._lock_fd: int | None = None
        self._lock_pid = 0
        self._migrate()
        # Whether a bulk write can give back the pages it leaves free (see _return_free).
        self._incremental = self._conn().execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        self._bulk_pid = 0  # the process that wrote in bulk (it gives back the rest on close)

    # -- connections and transactions -----------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        with self._lock:
            self._all.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection; inside a write, the writer's (it sees the write so far)."""
        conn: sqlite3.Connection | None = getattr(self._local, "writing", None) or getattr(
            self._local, "conn", None
        )
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write, committed before this returns; writes that arrive together share the commit.

        Under ``synchronous=FULL`` every commit waits for an fsync of the WAL
        (milliseconds), and SQLite has one writer at a time, so one commit per
        write would cap the store at a few hundred writes a second. Instead the
        threads of a process write through one connection, one at a time, each
        write in a SAVEPOINT of a shared transaction: the first opens it
        (``BEGIN IMMEDIATE``), the writes that arrive meanwhile join it, and
        the next thread to commit commits them all with one fsync (group
        commit). A write that raises is rolled back to its savepoint alone.
        The first write of a transaction takes no savepoint: should it raise,
        the transaction, which holds nothing else yet, is rolled back whole.
        A savepoint copies the original of every page its write changes into
        SQLite's sub-journal, and a write alone in its transaction is the
        common case (a leader's combined pushes, an import's chunk), where
        those copies were most of what a write wrote.
        Nobody returns before the transaction holding their write committed,
        so acknowledged still means on disk, and a write still sees every
        write before it (the same connection, in order).

        Across processes, a process holds an ``flock`` on ``<db>.writelock``
        from ``BEGIN`` to ``COMMIT``: a blocked ``flock`` wakes the moment it
        is released, where SQLite's busy handler polls with growing sleeps
        (measured: push p99 halves with 16 concurrent writers).
        """
        failure: BaseException | None = None
        with self._ops:
            first = not self._open
            conn = self._begin()
            number = self._open
            if not first:
                conn.execute("SAVEPOINT write")
            self._local.writing = conn
            try:
                yield conn
            except BaseException as exc:
                failure = exc
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK" if first else "ROLLBACK TO write")
            finally:
                self._local.writing = None
                if conn.in_transaction:
                    if not first:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("RELEASE write")
                else:  # rolled back (above, or by SQLite: disk full, I/O error)
                    self._end(number, "the transaction was rolled back")
        try:
            self._commit(number)  # even after a failure: the writes that joined it wait
        except sqlite3.Error:
            if failure is None:
                raise
        if failure is not None:
            raise failure

    def _writer_conn(self) -> sqlite3.Connection:
        """The connection this process writes on. Holds _ops."""
        if self._writer is None or self._writer_pid != os.getpid():
            self._writer = self._connect()  # a fork's child gets its own
            self._writer.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
            self._writer_pid = os.getpid()
        return self._writer

    def _begin(self) -> sqlite3.Connection:
        """The writer connection, in an open transaction (opened here if none is). Holds _ops."""
        writer = self._writer_conn()
        if not self._open:
            self._lock_file()
            try:
                writer.execute("BEGIN IMMEDIATE")
            except BaseException:
                self._unlock_file()
                raise
            self._open = self._ended + 1
        return writer

    def _end(self, number: int, failure: str | None) -> None:
        """Transaction ``number`` is over (committed, or failed for ``failure``). Holds _ops."""
        if failure is not None:
            self._failed[number] = failure
            for old in [n for n in self._failed if n < number - 100]:
                del self._failed[old]
        self._open = 0
        self._ended = number
        self._unlock_file()

    def _commit(self, number: int) -> None:
        """Return once transaction ``number`` committed: commit it, unless another thread did.

        Raises if it failed, whoever tried: no write is acknowledged unless committed.
        """
        with self._committing:
            if self._ended < number:
                with self._ops:
                    if self._open == number:
                        assert self._writer is not None
                        try:
                            self._writer.execute("COMMIT")
                        except sqlite3.Error as exc:
                            with contextlib.suppress(sqlite3.Error):
                                self._writer.execute("ROLLBACK")
                            self._end(number, str(exc))
                            raise
                        self._end(number, None)
                        self._commits += 1
                        if self._commits >= CHECKPOINT_EVERY:
                            self._commits = 0
                            self._ask_checkpoint()
                        return
        if number in self._failed:
            raise sqlite3.OperationalError(f"the write was not committed: {self._failed[number]}")

    def _ask_checkpoint(self) -> None:
        """Wake the process's checkpointer, started on first need (a fork's child: its own)."""
        if self._checkpointer is None or self._checkpointer_pid != os.getpid():
            due, stop = threading.Event(), threading.Event()
            thread = threading.Thread(
                target=self._checkpoints,
                args=(due, stop),
                name="ltm-sqlite-checkpoint",
                daemon=True,  # a checkpoint cut short is harmless: the next one completes it
            )
            self._checkpointer, self._checkpointer_pid = (thread, due, stop), os.getpid()
            thread.start()
        self._checkpointer[1].set()

    def _checkpoints(self, due: threading.Event, stop: threading.Event) -> None:
        """The checkpointer: a PASSIVE checkpoint each time it is due, on its own connection.

        PASSIVE waits for nobody (readers and writers go on; what they still need
        stays in the WAL for the next one) and never holds the writers' lock.
        """
        conn = self._connect()
        while True:
            due.wait()
            due.clear()
            if stop.is_set():
                return
            self._checkpoint(conn)

    @staticmethod
    def _checkpoint(conn: sqlite3.Connection) -> None:
        with contextlib.suppress(sqlite3.Error):  # e.g. another process's checkpoint running
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _stop_checkpointer(self) -> None:
        if self._checkpointer is not None and self._checkpointer_pid == os.getpid():
            thread, due, stop = self._checkpointer
            stop.set()
            due.set()
            thread.join()
        self._checkpointer = None

    def _lock_file(self) -> None:
        if fcntl is None:  # no flock (Windows): SQLite's busy timeout alone
            return
        if self._lock_fd is None or self._lock_pid != os.getpid():
            # One descriptor per process: a descriptor inherited across fork
            # would share its lock with the parent instead of excluding it.
            self._lock_fd = os.open(
                f"{self.path}.writelock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
            self._lock_pid = os.getpid()
            if os.geteuid() == 0:
                # Root (`sudo ltm server issue-token` beside a server run by a user of its
                # own) leaves the lock the database owner's, as SQLite its -wal and -shm
                # (os_unix.c, robustFchown): a lock of root's, mode 0600, refused that
                # user's server every write.
                owner = os.stat(self.path)
                os.fchown(self._lock_fd, owner.st_uid, owner.st_gid)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)

    def _unlock_file(self) -> None:
        if fcntl is not None and self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _private(self) -> None:
        """The store is readable by its owner alone: its folder, when the store makes it,
        0700; the database 0600, made before SQLite opens it, because SQLite gives the
        ``-wal`` and ``-shm`` files it creates the database file's permissions (os_unix.c,
        robustFchown/findCreateFileMode). An existing store made before this rule (0644
        in a 0755 folder) has its files' modes repaired here, said once on stderr: once
        repaired, there is nothing to say the next time. The folder of a store elsewhere
        (``ltm server run --db PATH``) is the user's: it is made private only when made
        here (ltm's own data folder is repaired by the CLI).
        """
        folder = self.path.parent
        # Each missing folder on the way made 0700 here, not the last alone: mkdir's
        # parents get 0777 less the umask, so under umask 000 anyone could rename the
        # store's folder away and put their own in its place.
        if not folder.exists():
            missing = [folder, *(p for p in folder.parents if not p.exists())]
            for made in reversed(missing):
                made.mkdir(exist_ok=True, mode=PRIVATE_DIR)
        if os.name != "posix":
            return  # Windows: a user's profile folder is private by its ACL already
        with contextlib.suppress(FileExistsError):
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(self.path, flags, PRIVATE_FILE))
        repaired = []
        for suffix in PRIVATE_SUFFIXES:
            name = f"{self.path}{suffix}"
            try:
                info = os.lstat(name)
            except FileNotFoundError:
                continue
            mode = info.st_mode & 0o777
            # A regular file only: a folder given as the database (--db DIR) made 0600
            # could no longer be entered, and a link is not the store's own file.
            if mode & 0o077 and info.st_uid == os.getuid() and stat.S_ISREG(info.st_mode):
                os.chmod(name, PRIVATE_FILE)
                repaired.append(f"{os.path.basename(name)} ({mode:o})")
        if repaired:
            import sys

            sys.stderr.write(
                f"ltm: {folder}: {', '.join(repaired)} could be read by other users of this "
                "machine; made private (600)\n"
            )

    def _migrate(self) -> None:
        self._private()
        conn = self._conn()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            # A new store: pages can be given back while it is in use (_return_free);
            # this is only set before its first table (VACUUM sets it on an older one).
            # Under the writers' lock: another handle may be creating the store right
            # now, and this pragma, met by its write, fails at once ("database is
            # locked") instead of waiting as a plain read would.
            with self._ops:
                self._lock_file()
                try:
                    if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                finally:
                    self._unlock_file()
        if version > SCHEMA_VERSION:
            # Before anything is changed, the journal mode included: the file is the
            # newer ltm's, as it left it.
            raise NewerSchema(
                f"{self.path} has schema version {version}, newer than this ltm "
                f"understands ({SCHEMA_VERSION}); upgrade ltm"
            )
        # WAL is a property of the file; switching needs no transaction and is idempotent.
        conn.execute("PRAGMA journal_mode = WAL")
        if version == SCHEMA_VERSION:
            return
        before = _file_size(self.path)
        with self._write() as db:
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = db.execute("PRAGMA user_version").fetchone()[0]
            compacting = 0 < version < COMPACT_VERSION and not _is_compact(db)
            for step in MIGRATIONS[version:]:
                if callable(step):
                    step(db)
                    continue
                for statement in _statements(step):
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        if compacting:
            self._vacuum(before)

    def _vacuum(self, before: int) -> None:
        """Give the file system the pages the compact layout freed (VACUUM), said on stderr
        with the store's size ``before`` its migration.

        Best effort: the store is migrated already, and pages left free are reused by
        later writes; a VACUUM that cannot run now (a disk without room for the copy
        it writes) only leaves the file its old size. Readers of other processes do
        not stop it (WAL); while one reads, the WAL cannot shrink back yet.
        """
        count = self._conn().execute("SELECT count(*) FROM packets").fetchone()[0]
        with self._ops:
            conn = self._writer_conn()
            self._lock_file()  # writers of other processes wait on the lock, not time out
            try:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # VACUUM makes it so
                conn.execute("VACUUM")
                # VACUUM wrote the whole file to the WAL: move it back, and shrink the WAL.
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                if count:
                    sys.stderr.write(f"ltm: {self.path}: not compacted now ({exc})\n")
                return
            finally:
                self._unlock_file()
        if count:
            sys.stderr.write(
                f"ltm: {self.path}: packets stored compactly:"
                f" {before / 2**20:,.1f} MiB -> {_file_size(self.path) / 2**20:,.1f} MiB\n"
            )

    def close(self) -> None:
        if self._bulk_pid == os.getpid():
            self._bulk_pid = 0
            with contextlib.suppress(sqlite3.Error), self._write() as db:
                _return_free(db)  # what bulk writes left free, a few hundred pages at most
        self._stop_checkpointer()  # before its connection closes under it
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
        self._writer = None
        self._open = 0
        if self._lock_fd is not None and self._lock_pid == os.getpid():
            os.close(self._lock_fd)
        self._lock_fd = None

    # -- packets ---------------------------------------------------------

    def put_packet(
        self,
        packet: StoredPacket,
        *,
        sort_key: str,
        seen: PacketMeta | None = None,
        derived: Derived | None = None,
    ) -> bool:
        done = self._put_together(packet, sort_key, derived)
        if isinstance(done, BaseException):
            raise done
        return done

    def _put_together(
        self, packet: StoredPacket, sort_key: str, derived: Derived | None = None
    ) -> bool | BaseException:
        """One ``put_packet``, written together with those of other threads waiting meanwhile.

        Every push is a write of a dozen statements, and the store writes one at a time
        across processes: written one by one, concurrent pushes queue on the writers'
        lock, each paying its statements, its savepoint and a commit. Instead a push
        waits in ``_waiting`` and one thread at a time leads: it takes every push
        waiting once it holds the write, and writes them as ``put_many`` writes a batch
        (each judged in turn, as if alone: the same answers as one by one, in arrival
        order), so a batch costs little more than one push. Each push gets its own
        answer, and only once the write holding it committed. Should the combined write
        fail, each push is written again alone, so a fault of one is its own alone.
        """
        if derived is None:
            derived = derive(packet.body)  # outside the write lock
        mine = _Waiting(packet, sort_key, derived)
        with self._waiting_lock:
            self._waiting.append(mine)
            follows, self._led = self._led, True
        if follows:
            mine.wait()  # until a leader answered it, or handed it the lead
        if mine.outcome is None:
            try:
                self._lead()
            finally:
                self._hand_over(mine)
        assert mine.outcome is not None
        return mine.outcome

    def _hand_over(self, mine: _Waiting) -> None:
        """The leader is done: the first push waiting leads next, else nobody leads."""
        with self._waiting_lock:
            if mine.outcome is None and mine in self._waiting:  # interrupted before taken
                self._waiting.remove(mine)
            if self._waiting:
                self._waiting[0].wake()  # not taken yet: its thread leads
            else:
                self._led = False

    def _take_waiting(self) -> list[_Waiting]:
        with self._waiting_lock:
            taken, self._waiting = self._waiting, []
        return taken

    def _lead(self) -> None:
        """Write every push waiting, in one write, and wake their threads. Run by the leader."""
        batch: list[_Waiting] = []

        def take() -> list[_Parsed]:
            more = self._take_waiting()
            batch.extend(more)
            return [w.parsed for w in more]

        try:
            for one, outcome in zip(batch, self._write_taken(take), strict=True):
                one.outcome = outcome
        finally:  # never leave a push without an answer (KeyboardInterrupt, a bug)
            for one in batch:
                if one.outcome is None:
                    one.outcome = StoreError("the write was interrupted")
                one.wake()

    def _write_taken(self, take: Callable[[], list[_Parsed]]) -> list[bool | BaseException]:
        """Write the pushes ``take`` gives, in one write: each push's outcome, in order.

        Taken only with the write held: the pushes that arrived while this thread
        waited for another process's write come too; then, until none is waiting,
        those that arrived while it wrote (they would otherwise wait for the next
        write, after the other process's). Should the write fail, each push is
        written again alone: the fault may be one push's.
        """
        taken: list[_Parsed] = []
        outcomes: list[bool | BaseException] = []
        try:
            with self._write() as db:
                while len(taken) < COMBINED_MAX and (more := take()):
                    taken += more
                    outcomes += self._put_in(db, more)
            return outcomes
        except Exception as exc:
            taken = taken or take()
            if len(taken) == 1:
                return [exc]
            outcomes = []
            outcome: bool | BaseException
            for one in taken:
                try:
                    (outcome,) = self._put_in_write([one])
                except Exception as alone:
                    outcome = alone
                outcomes.append(outcome)
            return outcomes

    def put_many(self, items: Sequence[PutItem]) -> list[bool | StoreError]:
        """All in one write: one commit (one fsync), and each statement once for the batch."""
        return self._put_many([(item.packet, item.sort_key, item.derived) for item in items])

    def put_packets(self, packets: list[tuple[StoredPacket, str]]) -> None:
        """Many ``put_packet`` (packet, sort key) in one transaction: all or none.

        Not part of ``Store``: for bulk loads into a SQLite file (benchmarks),
        where a transaction per packet would dominate.
        """
        for done in self._put_many([(packet, key, None) for packet, key in packets]):
            if isinstance(done, StoreError):
                raise done

    def _put_many(
        self, items: Sequence[tuple[StoredPacket, str, Derived | None]]
    ) -> list[bool | StoreError]:
        # Outside the write lock: what needs no database (unless derived ahead).
        parsed = [
            (packet, key, derived if derived is not None else derive(packet.body))
            for packet, key, derived in items
        ]
        return self._put_in_write(parsed)

    def _put_in_write(self, parsed: list[_Parsed]) -> list[bool | StoreError]:
        if not parsed:
            return []
        with self._write() as db:
            return self._put_in(db, parsed)

    def _put_in(self, db: sqlite3.Connection, parsed: list[_Parsed]) -> list[bool | StoreError]:
        """Judge and write ``parsed`` inside a write (``_write``)."""
        done, accepted, stored = self._judge(db, parsed)
        if accepted:
            self._write_packets(db, accepted, stored)
            if len(accepted) >= BULK and self._incremental:
                self._bulk_pid = os.getpid()
                _return_free(db, share=FREE_SHARE)
        return done

    def _judge(
        self, db: sqlite3.Connection, items: list[_Parsed]
    ) -> tuple[list[bool | StoreError], dict[str, _Accepted], dict[str, _Row]]:
        """Each item judged in turn as ``put_packet`` judges one, against what is stored and
        what the items before it did: its answer, the last accepted item of each id, and
        the rows they replace. Reads what every judgement needs once for the batch."""
        ids = list(dict.fromkeys(packet.meta.id for packet, _, _ in items))
        stored: dict[str, _Row] = {}
        for chunk in _chunks(ids):
            rows = db.execute(
                "SELECT id, doc, owner_id, team_id, sort_key, labels, size FROM packets"
                f" WHERE id IN ({_marks(chunk)})",
                chunk,
            )
            stored.update((row[0], _Row(*row)) for row in rows)
        usage: dict[str, Usage] = {}
        if self.quota is not None:
            owners = list({packet.meta.owner_id for packet, _, _ in items})
            for chunk in _chunks(owners):
                rows = db.execute(
                    f"SELECT user_id, packets, bytes FROM usage WHERE user_id IN ({_marks(chunk)})",
                    chunk,
                )
                usage.update((row[0], Usage(row[1], row[2])) for row in rows)
        # What each id is as the batch goes: (owner, team, size), None if absent.
        now: dict[str, tuple[str, str | None, int] | None] = {
            pid: (row.owner_id, row.team_id, row.size) for pid, row in stored.items()
        }
        members: dict[tuple[str | None, str], bool] = {}
        done: list[bool | StoreError] = []
        accepted: dict[str, _Accepted] = {}
        for packet, sort_key, derived in items:
            meta = packet.meta
            current = now.get(meta.id)
            moves = False
            if current is not None and current[:2] != (meta.owner_id, meta.team_id):
                if not moves_into_team(PacketMeta(meta.id, "", "", *current[:2]), meta):
                    done.append(Conflict(f"packet {meta.id} belongs to another owner or scope"))
                    continue
                moves = True
            if meta.team_id is not None:
                # Only a member writes into a team, checked in the write itself: the
                # service's check before it does not stop a push racing the author's
                # removal, nor a move of their personal packet.
                key = (meta.team_id, meta.owner_id)
                if key not in members:
                    members[key] = self._is_member(db, *key)
                if not members[key]:
                    done.append(NotFound(f"{meta.owner_id} is not a member of team {meta.team_id}"))
                    continue
            size = len(packet.body)
            if self.quota is not None:
                # What the usage triggers will count (a replaced packet is its owner's).
                before = usage.get(meta.owner_id, Usage())
                after = Usage(
                    before.packets + (current is None),
                    before.bytes + size - (current[2] if current is not None else 0),
                )
                try:
                    _hold_to(self.quota, before, after)
                except OverQuota as exc:
                    done.append(exc)
                    continue
                usage[meta.owner_id] = after
            now[meta.id] = (meta.owner_id, meta.team_id, size)
            # A packet that changes scope leaves its public URL behind (as on DynamoDB).
            moved = moves or (meta.id in accepted and accepted[meta.id].moved)
            accepted[meta.id] = _Accepted(packet, sort_key, derived, moved)
            done.append(current is None)
        return done, accepted, stored

    @staticmethod
    def _write_packets(
        db: sqlite3.Connection, accepted: dict[str, _Accepted], stored: dict[str, _Row]
    ) -> None:
        """Write the packets ``_judge`` accepted, each statement once over the batch.

        A replaced packet's search rows go here, not through a DELETE of the packet
        (whose triggers would also end a publication and its shares): INSERT OR
        REPLACE fires no delete trigger. Its usage is counted by the triggers.
        """
        from .. import search

        replaced = [stored[pid] for pid in accepted if pid in stored]
        if replaced:
            db.executemany(
                "DELETE FROM packet_fts WHERE rowid = ?", [(row.doc,) for row in replaced]
            )
            db.executemany(
                "DELETE FROM packet_grams WHERE rowid = ?", [(row.doc,) for row in replaced]
            )
            db.executemany(
                "DELETE FROM packet_vectors WHERE doc = ?", [(row.doc,) for row in replaced]
            )
            db.executemany(
                "DELETE FROM label_packets WHERE label = ? AND sort_key = ? AND id = ?",
                [
                    (label, row.sort_key, row.id)
                    for row in replaced
                    for label in json.loads(row.labels or "[]")
                ],
            )
        moved = [(pid,) for pid, item in accepted.items() if item.moved]
        if moved:
            db.executemany("DELETE FROM publications WHERE packet_id = ?", moved)
        scopes = {
            pid: _scope(a.packet.meta.owner_id, a.packet.meta.team_id)
            for pid, a in accepted.items()
        }
        labels = {pid: _labels_of(scopes[pid], a.derived) for pid, a in accepted.items()}
        ids = _label_ids(db, (name for names in labels.values() for name in names))
        # New search rows after the last one (search ranks the highest, the newest), in
        # listing order: each index, ascending, then takes the batch as one run, which
        # packs its pages full, whether the batches come oldest first (pushes) or newest
        # first (an import of an export). Written in any order, the batch ends the same.
        last = db.execute("SELECT coalesce(max(doc), 0) FROM packets").fetchone()[0]
        ordered = sorted(accepted.items(), key=lambda pair: (pair[1].sort_key, pair[0]))
        rows: list[tuple[Any, ...]] = []
        texts: list[tuple[Any, ...]] = []
        labelled: list[tuple[int, str, str]] = []
        vectors: list[tuple[Any, ...]] = []
        grams: list[tuple[Any, ...]] = []  # the few with a script written without spaces
        for doc, (pid, item) in enumerate(ordered, start=last + 1):
            meta = item.packet.meta
            mine = [ids[name] for name in labels[pid]]
            rows.append(
                (
                    doc,
                    pid,
                    scopes[pid],
                    meta.owner_id,
                    meta.team_id,
                    item.sort_key,
                    meta.created_at,
                    meta.goal,
                    int(item.packet.conforming),
                    meta.project,
                    meta.parent_id,
                    _json_ids(mine),
                    len(item.packet.body),
                    item.derived.packed,
                )
            )
            texts.append((doc, *item.derived.texts))
            if (found := search.gram_texts(item.derived.texts)) is not None:
                grams.append((doc, *found))
            if item.derived.vector is not None:
                vectors.append((doc, item.derived.vector))
            labelled.extend((label, item.sort_key, pid) for label in mine)
        _insert_rows(db, f"INSERT OR REPLACE INTO packets ({_PACKET_COLUMNS})", rows)
        _insert_rows(db, _FTS_INTO, texts)
        _insert_rows(db, GRAMS_INTO, grams)
        if vectors:
            _insert_rows(db, "INSERT OR REPLACE INTO packet_vectors (doc, vector)", vectors)
            from .. import semantic

            db.execute(
                "INSERT OR IGNORE INTO vector_model (one, name) VALUES (1, ?)", (semantic.MODEL,)
            )
        _insert_rows(db, "INSERT OR IGNORE INTO label_packets (label, sort_key, id)", labelled)

    def usage(self, user_id: str) -> Usage:
        return self._usage(self._conn(), user_id)

    @staticmethod
    def _usage(db: sqlite3.Connection, user_id: str) -> Usage:
        row = db.execute(
            "SELECT packets, bytes FROM usage WHERE user_id = ?", (user_id,)
        ).fetchone()
        return Usage(*row) if row else Usage()

    def get_packet(self, packet_id: str) -> StoredPacket | None:
        return self._read_packet("p.id = ?", packet_id)

    def get_packets(self, packet_ids: Sequence[str]) -> dict[str, StoredPacket]:
        """One query for each ``_CHUNK`` ids (an import asks for a batch of lines at once)."""
        found: dict[str, StoredPacket] = {}
        wanted = list(dict.fromkeys(packet_ids))
        db = self._conn()
        for chunk in _chunks(wanted):
            rows = db.execute(
                f"{_READ} LEFT JOIN packet_fts f ON f.rowid = p.doc"
                f" WHERE p.id IN ({_marks(chunk)})",
                chunk,
            )
            for row in rows:
                found[row[0]] = self._held(row)
        return found

    @staticmethod
    def _held(row: tuple[Any, ...]) -> StoredPacket:
        """A packet read by ``_READ``, its body unpacked."""
        if row[9] is None:  # every packet has its search row; this one lost it
            raise sqlite3.DatabaseError(f"packet {row[0]}: its search row is missing")
        return StoredPacket(PacketMeta(*row[:7]), _unpack(row[8], row[9]), bool(row[7]))

    def _read_packet(self, where: str, value: str, *, join: str = "") -> StoredPacket | None:
        """The packet of ``where``, its body unpacked with the text its search row holds."""
        row = (
            self._conn()
            .execute(
                f"{_READ}{join} LEFT JOIN packet_fts f ON f.rowid = p.doc WHERE {where}",
                (value,),
            )
            .fetchone()
        )
        return None if row is None else self._held(row)

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
        scope = _scope(owner_id, team_id)
        if author is not None and team_id is None:
            # Every packet of a personal scope is its owner's (no index needed to say so).
            if author != owner_id:
                return Page([], None)
            author = None
        if tag is None:
            sql = f"SELECT {_META}, p.sort_key FROM packets p WHERE p.scope = ?"
            args: list[object] = [scope]
            k = "p"
        else:  # walk the tag's own index, already in listing order
            sql = (
                f"SELECT {_META}, p.sort_key FROM label_packets l JOIN packets p ON p.id = l.id"
                " WHERE l.label = (SELECT label FROM labels"
                " WHERE scope = ? AND kind = 'tag' AND value = ?)"
            )
            args = [scope, tag]
            k = "l"
        if project is not None:
            sql += " AND p.project = ?"  # packets_by_project: one index range
            args.append(project)
        if author is not None:
            sql += " AND p.owner_id = ? AND p.team_id IS NOT NULL"  # packets_by_author
            args.append(author)
        if since is not None:
            sql += f" AND {k}.sort_key >= ?"
            args.append(since)
        if until is not None:
            sql += f" AND {k}.sort_key < ?"
            args.append(until)
        if cursor:
            sql += f" AND ({k}.sort_key, {k}.id) < (?, ?)"
            args.extend(decode_cursor(cursor))
        sql += f" ORDER BY {k}.sort_key DESC, {k}.id DESC LIMIT ?"
        args.append(limit + 1)
        rows = self._conn().execute(sql, args).fetchall()
        items = [PacketMeta(*row[:7]) for row in rows[:limit]]
        more = len(rows) > limit
        next_cursor = encode_cursor(rows[limit - 1][7], rows[limit - 1][0]) if more else None
        return Page(items, next_cursor)

    def children(
        self, packet_id: str, *, scopes: list[Scope], limit: int = 100
    ) -> list[PacketMeta]:
        names = [_scope(owner, team) for owner, team in scopes]
        if not names:
            return []
        rows = (
            self._conn()
            .execute(
                f"SELECT {_META} FROM packets p WHERE p.parent_id = ?"
                f" AND p.scope IN ({_marks(names)}) ORDER BY p.sort_key, p.id LIMIT ?",
                (packet_id, *names, limit),
            )
            .fetchall()
        )
        return [PacketMeta(*row) for row in rows]

    def search(self, query: Query, *, scopes: list[Scope], limit: int = 20) -> list[SearchHit]:
        """The best matches in ``scopes``: a ranking that uses no corpus statistics.

        Everything returned (which packets, their order, their score and
        snippet) depends on the packets of ``scopes`` alone, so packets the
        caller cannot read leave no trace in it. FTS5's ``bm25()`` cannot give
        that: its inverse document frequencies and average length are counted
        over the whole table, every user's packets, and a caller who compares
        the scores of prefixes (``qu<c>*``) against their own probe packets
        can spell out a word that exists only in another user's packet. FTS5
        has no statistics per scope (one table holds every scope), and
        counting a query's matches per scope is the full walk of a common
        word's postings the window below avoids. So each match is scored from
        its own text only: per field, its matched spans saturated (BM25's
        term-frequency curve) and weighted as ``search.FIELDS`` says. With
        every term required, an inverse document frequency would mostly
        reorder the terms of a query, not the packets. Ties go to the newest.
        DynamoDB ranks with statistics of the caller's own scopes (its postings
        are partitioned by scope), which holds the same property.
        """
        from .. import search

        names = [_scope(owner, team) for owner, team in scopes]
        if not names or limit < 1:
            return []
        db = self._conn()
        labels = _qualifiers(db, query, names)
        if labels is None:
            return []  # no packet searched carries one of them
        if query.terms:
            # Rank first, on the index; read text for snippets only for the page shown.
            # Scoring re-reads each match's fields (highlight(): some microseconds a
            # match), so only the newest RANK_WINDOW matches in the caller's scopes
            # are ranked, and a word in half of 100,000 packets costs what a rarer
            # one does (as DynamoDB's POSTINGS_CAP bounds its reads). Which matches
            # are the newest is the order the caller's own packets were written in.
            # Each match's scope is read from packets_by_doc, a narrow index, rather
            # than from the packet's row: a connection whose cache has not seen those
            # rows yet (the server has one per thread) reads a few pages, not a page a
            # match. A label's check reads the row anyway (its sort key and id).
            packets = "packets p" if labels else "packets p INDEXED BY packets_by_doc"
            # A word of a script written without spaces is matched in packet_grams, its
            # pairs of characters (``search.grams_expression``); other words, as always.
            table, expression = "packet_grams", search.grams_expression(query)
            if expression is None:
                table, expression = "packet_fts", search.fts_expression(query)
            sql = (
                f"SELECT {table}.rowid AS doc, {_score_sql(table)} AS score"
                f" FROM {table} JOIN {packets} ON p.doc = {table}.rowid"
                f" WHERE {table} MATCH ? AND p.scope IN ({_marks(names)})"
            )
            args: list[object] = [expression, *names]
            sql += _has_labels("p", labels, args)
            sql = (
                f"SELECT doc, score FROM ({sql} ORDER BY {table}.rowid DESC LIMIT ?)"
                " ORDER BY score DESC, doc DESC LIMIT ?"
            )
            ranked = db.execute(sql, [*args, RANK_WINDOW, limit]).fetchall()
        else:  # qualifiers only: the newest packets carrying them
            first, rest = labels[0], labels[1:]
            sql = (
                "SELECT p.doc, 0.0 FROM label_packets l JOIN packets p ON p.id = l.id"
                f" WHERE l.label IN ({_marks(first)})"
            )
            args = [*first]
            sql += _has_labels("l", rest, args)
            sql += " ORDER BY l.sort_key DESC, l.id DESC LIMIT ?"
            ranked = db.execute(sql, [*args, limit]).fetchall()
        return _hits(db, ranked, query)

    def nearest(
        self, meaning: Meaning, query: Query, *, scopes: list[Scope], limit: int = 20
    ) -> list[SearchHit]:
        """The packets of ``scopes`` nearest in meaning, best first (score: the cosine),
        holding ``query``'s qualifiers (its words play no part here): by the cosine,
        then the nearest few ordered again by their words (``semantic.rerank``, which
        reads their texts). Reads each candidate's stored vector and text only: nothing
        outside ``scopes``, and no statistic of any set of packets, goes into it."""
        from .. import semantic

        names = [_scope(owner, team) for owner, team in scopes]
        if not names or limit < 1:
            return []
        db = self._conn()
        model = db.execute("SELECT name FROM vector_model").fetchone()
        if model is not None and model[0] != semantic.MODEL:
            return []  # another model's vectors mean nothing to this one's (until filled)
        labels = _qualifiers(db, query, names)
        if labels is None:
            return []
        # The sign bits of every candidate first (a slice of each vector, read in SQL),
        # then the whole vectors of the nearest few only.
        # Bounded as a lexical search is: the newest MEANING_WINDOW packets of the
        # caller's scopes (each row read costs microseconds), walked from an index in
        # that order: a qualifier's label list, else the doc index (docs grow with writes).
        bits = f"substr(v.vector, 1, {semantic.BITS_BYTES})"
        args: list[object]
        if labels:
            first, rest = labels[0], labels[1:]
            sql = (
                f"SELECT p.doc, {bits} FROM label_packets l JOIN packets p ON p.id = l.id"
                " JOIN packet_vectors v ON v.doc = p.doc"
                f" WHERE l.label IN ({_marks(first)}) AND length(v.vector) = ?"
            )
            args = [*first, semantic.STORED_BYTES]
            sql += _has_labels("l", rest, args)
            sql += " ORDER BY l.sort_key DESC, l.id DESC LIMIT ?"
        else:
            sql = (
                f"SELECT p.doc, {bits} FROM packets p INDEXED BY packets_by_doc"
                " JOIN packet_vectors v ON v.doc = p.doc"
                f" WHERE p.scope IN ({_marks(names)}) AND length(v.vector) = ?"
                " ORDER BY p.doc DESC LIMIT ?"
            )
            args = [*names, semantic.STORED_BYTES]
        args.append(MEANING_WINDOW)
        docs = semantic.candidates(meaning, db.execute(sql, args).fetchall())
        if not docs:
            return []
        vectors = db.execute(
            f"SELECT doc, vector FROM packet_vectors WHERE doc IN ({_marks(docs)})", docs
        )
        ranked = semantic.rank(meaning, vectors, limit=limit)
        if meaning.words and ranked:
            # The nearest few ordered again by their words (``semantic.rerank``).
            head = [doc for doc, _cos in ranked[: semantic.RERANK_DEPTH]]
            rows = db.execute(
                f"SELECT f.rowid, {_TEXTS} FROM packet_fts f WHERE f.rowid IN ({_marks(head)})",
                head,
            )
            texts = {row[0]: _meaning_text(row) for row in rows}
            ranked = semantic.rerank(meaning, ranked, texts)
        return _hits(db, ranked, query)

    def vectors_missing(self) -> int:
        """How many packets have no vector of the current model (``fill_vectors``)."""
        return self.vectors_missing_in(self._conn())

    @staticmethod
    def vectors_missing_in(db: sqlite3.Connection) -> int:
        """``vectors_missing`` of an open database (doctor's, opened read-only)."""
        from .. import semantic

        model = db.execute("SELECT name FROM vector_model").fetchone()
        if model is not None and model[0] != semantic.MODEL:
            return int(db.execute("SELECT count(*) FROM packets").fetchone()[0])
        # Every vector is a packet's: the write that replaces a packet deletes its old
        # vector, a trigger deletes a deleted packet's, and a new model starts over. So
        # the packets without one are the difference of two counts, each made in an
        # index of small rows (packet_vectors_by_doc), not in the table of whole vectors.
        found = db.execute(
            "SELECT (SELECT count(*) FROM packets) - (SELECT count(*) FROM packet_vectors)"
        ).fetchone()
        return max(0, int(found[0]))

    def fill_vectors(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Give every packet without one its vector (a store saved to before the extra
        was installed, or with another model), a batch a transaction; ``progress(done,
        total)`` after each. Returns how many were filled."""
        from .. import semantic

        model = semantic.model()
        total = self.vectors_missing()
        done = 0
        while done < total:
            with self._write() as db:
                held = db.execute("SELECT name FROM vector_model").fetchone()
                if held is not None and held[0] != semantic.MODEL:
                    db.execute("DELETE FROM packet_vectors")
                db.execute(
                    "INSERT OR REPLACE INTO vector_model (one, name) VALUES (1, ?)",
                    (semantic.MODEL,),
                )
                rows = db.execute(
                    f"SELECT p.doc, {_TEXTS} FROM packets p JOIN packet_fts f ON f.rowid = p.doc"
                    " WHERE NOT EXISTS (SELECT 1 FROM packet_vectors v WHERE v.doc = p.doc)"
                    " LIMIT ?",
                    (_FILL_BATCH,),
                ).fetchall()
                if not rows:
                    break
                texts = [_meaning_text(row) for row in rows]
                vectors = model.vectors(texts)
                # A packet without a word gets an empty vector: it is done, and ranks nowhere.
                _insert_rows(
                    db,
                    "INSERT OR REPLACE INTO packet_vectors (doc, vector)",
                    [
                        (row[0], semantic.encode(vector) if vector is not None else b"")
                        for row, vector in zip(rows, vectors, strict=True)
                    ],
                )
            done += len(rows)
            if progress is not None:
                progress(min(done, total), total)
        return done

    def packet_ids_with_prefix(
        self,
        prefix: str,
        *,
        owner_id: str,
        team_id: str | None = None,
        limit: int = 2,
        project: str | None = None,
    ) -> list[str]:
        # A range on the ids of the scope (packets_by_scope_id) instead of LIKE: no escaping,
        # and it reads only the ids that start with the prefix.
        sql = "SELECT id FROM packets WHERE id >= ? AND id < ? AND scope = ?"
        args: list[object] = [prefix, prefix + "\U0010ffff", _scope(owner_id, team_id)]
        if project is not None:
            sql += " AND project = ?"
            args.append(project)
        rows = self._conn().execute(sql + " ORDER BY id LIMIT ?", (*args, limit)).fetchall()
        return [row[0] for row in rows]

    def delete_packet(self, packet_id: str) -> bool:
        with self._write() as db:
            return db.execute("DELETE FROM packets WHERE id = ?", (packet_id,)).rowcount > 0

    def delete_packet_as(
        self, packet_id: str, user_id: str, *, seen: PacketMeta | None = None
    ) -> bool:
        sql = (
            "DELETE FROM packets WHERE id = :id AND ("
            " (team_id IS NULL AND owner_id = :me)"
            " OR EXISTS (SELECT 1 FROM members m WHERE m.team_id = packets.team_id"
            "  AND m.user_id = :me AND (packets.owner_id = :me OR m.role = 'owner')))"
        )
        args: dict[str, str | None] = {"id": packet_id, "me": user_id}
        if seen is not None:
            sql += " AND owner_id = :owner AND team_id IS :team"
            args.update(owner=seen.owner_id, team=seen.team_id)
        with self._write() as db:
            return db.execute(sql, args).rowcount > 0

    # -- publishing ------------------------------------------------------

    _PUBLICATION = "packet_id, secret, secret_hash, created_by, created_at"

    @staticmethod
    def _publication(row: tuple[str, ...] | None) -> Publication | None:
        if row is None:
            return None
        return Publication(row[0], row[1], row[2], row[3], _dt(row[4]))

    def publish_packet(self, publication: Publication, *, seen: PacketMeta) -> Publication:
        with self._write() as db:
            if (
                db.execute(
                    "SELECT 1 FROM packets WHERE id = ? AND owner_id = ? AND team_id IS ?",
                    (publication.packet_id, seen.owner_id, seen.team_id),
                ).fetchone()
                is None
            ):
                raise NotFound(f"packet {publication.packet_id} does not exist")
            # A team packet is published only by a member still in the team, checked in the
            # same transaction: a publish racing the publisher's removal cannot outlive it.
            if seen.team_id is not None and not self._is_member(
                db, seen.team_id, publication.created_by
            ):
                raise NotFound(f"{publication.created_by} is not a member of the team")
            existing = db.execute(
                f"SELECT {self._PUBLICATION} FROM publications WHERE packet_id = ?",
                (publication.packet_id,),
            ).fetchone()
            if existing is not None:
                return self._publication(existing)  # type: ignore[return-value]
            db.execute(
                f"INSERT INTO publications ({self._PUBLICATION}) VALUES (?, ?, ?, ?, ?)",
                (
                    publication.packet_id,
                    publication.secret,
                    publication.secret_hash,
                    publication.created_by,
                    _ts(publication.created_at),
                ),
            )
        return publication

    def unpublish_packet(self, packet_id: str) -> bool:
        with self._write() as db:
            return (
                db.execute("DELETE FROM publications WHERE packet_id = ?", (packet_id,)).rowcount
                > 0
            )

    def publication(self, packet_id: str) -> Publication | None:
        row = (
            self._conn()
            .execute(
                f"SELECT {self._PUBLICATION} FROM publications WHERE packet_id = ?", (packet_id,)
            )
            .fetchone()
        )
        return self._publication(row)

    def published_packet(self, secret_hash: str) -> StoredPacket | None:
        return self._read_packet(
            "pub.secret_hash = ?",
            secret_hash,
            join=" JOIN publications pub ON pub.packet_id = p.id",
        )

    # -- sharing ---------------------------------------------------------

    _SHARE = "packet_id, user_id, shared_by, created_at"

    @staticmethod
    def _share(row: tuple[str, ...]) -> Share:
        return Share(row[0], row[1], row[2], _dt(row[3]))

    def share_packet(self, share: Share, *, seen: PacketMeta) -> tuple[Share, bool]:
        with self._write() as db:
            if (
                db.execute(
                    "SELECT 1 FROM packets WHERE id = ? AND owner_id = ? AND team_id IS ?",
                    (share.packet_id, seen.owner_id, seen.team_id),
                ).fetchone()
                is None
            ):
                raise NotFound(f"packet {share.packet_id} does not exist")
            existing = db.execute(
                f"SELECT {self._SHARE} FROM shares WHERE packet_id = ? AND user_id = ?",
                (share.packet_id, share.user_id),
            ).fetchone()
            if existing is not None:
                return self._share(existing), False
            db.execute(
                f"INSERT INTO shares ({self._SHARE}) VALUES (?, ?, ?, ?)",
                (share.packet_id, share.user_id, share.shared_by, _ts(share.created_at)),
            )
        return share, True

    def unshare_packet(self, packet_id: str, user_id: str) -> bool:
        with self._write() as db:
            return (
                db.execute(
                    "DELETE FROM shares WHERE packet_id = ? AND user_id = ?", (packet_id, user_id)
                ).rowcount
                > 0
            )

    def get_share(self, packet_id: str, user_id: str) -> Share | None:
        row = (
            self._conn()
            .execute(
                f"SELECT {self._SHARE} FROM shares WHERE packet_id = ? AND user_id = ?",
                (packet_id, user_id),
            )
            .fetchone()
        )
        return None if row is None else self._share(row)

    def packet_shares(self, packet_id: str) -> list[Share]:
        rows = (
            self._conn()
            .execute(
                f"SELECT {self._SHARE} FROM shares WHERE packet_id = ?"
                " ORDER BY created_at, user_id",
                (packet_id,),
            )
            .fetchall()
        )
        return [self._share(row) for row in rows]

    def shared_with(
        self, user_id: str, *, limit: int = 100, after: Share | None = None
    ) -> list[tuple[Share, PacketMeta]]:
        since = "" if after is None else " AND (s.created_at, s.packet_id) < (?, ?)"
        cursor = () if after is None else (_ts(after.created_at), after.packet_id)
        rows = (
            self._conn()
            .execute(
                f"SELECT s.packet_id, s.user_id, s.shared_by, s.created_at, {_META}"
                f" FROM shares s JOIN packets p ON p.id = s.packet_id WHERE s.user_id = ?{since}"
                " ORDER BY s.created_at DESC, s.packet_id DESC LIMIT ?",
                (user_id, *cursor, limit),
            )
            .fetchall()
        )
        return [(self._share(row[:4]), PacketMeta(*row[4:])) for row in rows]

    # -- users and tokens -----------------------------------------------

    def create_user(self, user: User, token: Token | None = None) -> None:
        try:
            with self._write() as db:
                self._insert_user(db, user)
                if token is not None:
                    self._insert_token(db, token)
        except sqlite3.IntegrityError as exc:
            raise _user_conflict(exc, user) from None

    @staticmethod
    def _insert_user(db: sqlite3.Connection, user: User) -> None:
        db.execute(
            "INSERT INTO users (id, display, subject, created_at) VALUES (?, ?, ?, ?)",
            (user.id, user.display, user.subject, _ts(user.created_at)),
        )
        db.execute(
            "INSERT INTO user_names (name_key, user_id) VALUES (?, ?)",
            (name_key(user.display), user.id),
        )

    def rename_user(self, user_id: str, display: str) -> User:
        try:
            with self._write() as db:
                row = db.execute("SELECT display FROM users WHERE id = ?", (user_id,)).fetchone()
                if row is None:
                    raise NotFound(f"user {user_id} does not exist")
                old, new = name_key(row[0]), name_key(display)
                if new != old:
                    db.execute(
                        "INSERT INTO user_names (name_key, user_id) VALUES (?, ?)", (new, user_id)
                    )
                    db.execute(
                        "DELETE FROM user_names WHERE name_key = ? AND user_id = ?", (old, user_id)
                    )
                db.execute("UPDATE users SET display = ? WHERE id = ?", (display, user_id))
        except sqlite3.IntegrityError:
            raise NameTaken(f"the display name {display!r} is taken") from None
        found = self.get_user(user_id)
        assert found is not None
        return found

    def get_user(self, user_id: str) -> User | None:
        return self._user_where("id", user_id)

    def get_user_by_subject(self, subject: str) -> User | None:
        return self._user_where("subject", subject)

    def has_users(self) -> bool:
        """Whether anyone is a user here: what ``ltm server init`` calls initialized (the
        root token may be revoked since, every token even), not a part of ``Store``."""
        return self._conn().execute("SELECT EXISTS (SELECT 1 FROM users)").fetchone()[0] == 1

    def user_named(self, display: str) -> User | None:
        row = (
            self._conn()
            .execute("SELECT user_id FROM user_names WHERE name_key = ?", (name_key(display),))
            .fetchone()
        )
        return self.get_user(row[0]) if row else None

    def _user_where(self, column: str, value: str) -> User | None:
        row = (
            self._conn()
            .execute(
                f"SELECT id, display, created_at, subject FROM users WHERE {column} = ?", (value,)
            )
            .fetchone()
        )
        return User(row[0], row[1], _dt(row[2]), row[3]) if row else None

    def add_token(self, token: Token) -> None:
        try:
            with self._write() as db:
                self._insert_token(db, token)
        except sqlite3.IntegrityError:
            raise Conflict(f"token label {token.label!r} is taken") from None

    @staticmethod
    def _insert_token(db: sqlite3.Connection, token: Token) -> None:
        db.execute(
            "INSERT INTO tokens (token_hash, label, user_id, created_at, last_used_at, scope,"
            " resource, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                token.token_hash,
                token.label,
                token.user_id,
                _ts(token.created_at),
                _ts(token.last_used_at) if token.last_used_at else None,
                token.scope,
                token.resource,
                _ts(token.expires_at) if token.expires_at else None,
            ),
        )

    def token_owner(self, token_hash: str) -> tuple[Token, User] | None:
        row = (
            self._conn()
            .execute(
                f"SELECT {_TOKEN_COLUMNS}, u.id, u.display, u.created_at, u.subject"
                " FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?",
                (token_hash,),
            )
            .fetchone()
        )
        if row is None:
            return None
        return _token(row), User(row[8], row[9], _dt(row[10]), row[11])

    def touch_token(self, token_hash: str, when: datetime) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE tokens SET last_used_at = ? WHERE token_hash = ?", (_ts(when), token_hash)
            )

    def list_tokens(self, *, user_id: str | None = None) -> list[Token]:
        sql = f"SELECT {_TOKEN_COLUMNS} FROM tokens t"
        args: tuple[str, ...] = ()
        if user_id is not None:
            sql += " WHERE user_id = ?"
            args = (user_id,)
        rows = self._conn().execute(sql + " ORDER BY created_at, label", args).fetchall()
        return [_token(r) for r in rows]

    def revoke_token(self, label: str, *, user_id: str | None = None) -> bool:
        sql, args = "DELETE FROM tokens WHERE label = ?", [label]
        if user_id is not None:
            sql += " AND user_id = ?"
            args.append(user_id)
        with self._write() as db:
            return db.execute(sql, args).rowcount > 0

    # -- OAuth ------------------------------------------------------------

    def put_oauth_item(
        self,
        kind: str,
        key: str,
        doc: Mapping[str, Any],
        expires_at: datetime | None,
        *,
        now: datetime | None = None,
    ) -> None:
        with self._write() as db:
            if now is not None:
                db.execute("DELETE FROM oauth_items WHERE expires_at <= ?", (_ts(now),))
            db.execute(
                "INSERT OR REPLACE INTO oauth_items (kind, key, doc, expires_at)"
                " VALUES (?, ?, ?, ?)",
                (kind, key, json.dumps(doc), _ts(expires_at) if expires_at else None),
            )

    def get_oauth_item(self, kind: str, key: str, now: datetime) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute(
                "SELECT doc, expires_at FROM oauth_items WHERE kind = ? AND key = ?", (kind, key)
            )
            .fetchone()
        )
        if row is None or (row[1] is not None and row[1] <= _ts(now)):
            return None
        return json.loads(row[0])

    def take_oauth_item(self, kind: str, key: str, now: datetime) -> dict[str, Any] | None:
        with self._write() as db:
            row = db.execute(
                "DELETE FROM oauth_items WHERE kind = ? AND key = ? RETURNING doc, expires_at",
                (kind, key),
            ).fetchone()
            # Expired items of any kind go too, so the table never outgrows what is live.
            db.execute("DELETE FROM oauth_items WHERE expires_at <= ?", (_ts(now),))
        if row is None or (row[1] is not None and row[1] <= _ts(now)):
            return None
        return json.loads(row[0])

    # -- teams ----------------------------------------------------------

    def create_team(self, team: Team) -> None:
        try:
            with self._write() as db:
                db.execute(
                    "INSERT INTO teams (id, name, owner_id, created_at) VALUES (?, ?, ?, ?)",
                    (team.id, team.name, team.owner_id, _ts(team.created_at)),
                )
                db.execute(
                    "INSERT INTO members (team_id, user_id, role, joined_at)"
                    " VALUES (?, ?, 'owner', ?)",
                    (team.id, team.owner_id, _ts(team.created_at)),
                )
        except sqlite3.IntegrityError:
            raise Conflict(f"team name {team.name!r} is taken") from None

    def get_team(self, name: str) -> Team | None:
        row = (
            self._conn()
            .execute("SELECT id, name, owner_id, created_at FROM teams WHERE name = ?", (name,))
            .fetchone()
        )
        return Team(row[0], row[1], row[2], _dt(row[3])) if row else None

    def list_teams(self, user_id: str) -> list[Team]:
        rows = (
            self._conn()
            .execute(
                "SELECT t.id, t.name, t.owner_id, t.created_at FROM teams t"
                " JOIN members m ON m.team_id = t.id WHERE m.user_id = ?"
                " ORDER BY t.created_at, t.name",
                (user_id,),
            )
            .fetchall()
        )
        return [Team(r[0], r[1], r[2], _dt(r[3])) for r in rows]

    def delete_team(self, team_id: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM packets WHERE scope = ?", (_scope("", team_id),))
            db.execute("DELETE FROM labels WHERE scope = ?", (_scope("", team_id),))
            db.execute("DELETE FROM invites WHERE team_id = ?", (team_id,))
            db.execute("DELETE FROM members WHERE team_id = ?", (team_id,))
            db.execute("DELETE FROM teams WHERE id = ?", (team_id,))

    def get_member(self, team_id: str, user_id: str) -> Member | None:
        row = (
            self._conn()
            .execute(
                "SELECT m.user_id, u.display, m.role, m.joined_at FROM members m"
                " LEFT JOIN users u ON u.id = m.user_id WHERE m.team_id = ? AND m.user_id = ?",
                (team_id, user_id),
            )
            .fetchone()
        )
        return self._member(row) if row else None

    def list_members(self, team_id: str) -> list[Member]:
        rows = (
            self._conn()
            .execute(
                "SELECT m.user_id, u.display, m.role, m.joined_at FROM members m"
                " LEFT JOIN users u ON u.id = m.user_id WHERE m.team_id = ?"
                " ORDER BY m.role = 'owner' DESC, m.joined_at, m.user_id",
                (team_id,),
            )
            .fetchall()
        )
        return [self._member(row) for row in rows]

    @staticmethod
    def _member(row: tuple[str, str | None, str, str]) -> Member:
        return Member(row[0], row[1] or "", row[2], _dt(row[3]))  # type: ignore[arg-type]

    def add_member(self, team_id: str, user_id: str, role: Role = "member") -> Member:
        with self._write() as db:
            self._insert_member(db, team_id, user_id, role, datetime.now(UTC))
        member = self.get_member(team_id, user_id)
        assert member is not None
        return member

    @staticmethod
    def _insert_member(
        db: sqlite3.Connection, team_id: str, user_id: str, role: Role, when: datetime
    ) -> None:
        db.execute(
            "INSERT INTO members (team_id, user_id, role, joined_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (team_id, user_id) DO NOTHING",
            (team_id, user_id, role, _ts(when)),
        )

    @staticmethod
    def _is_member(db: sqlite3.Connection, team_id: str | None, user_id: str) -> bool:
        row = db.execute(
            "SELECT 1 FROM members WHERE team_id = ? AND user_id = ?", (team_id, user_id)
        ).fetchone()
        return row is not None

    def remove_member(self, team_id: str, user_id: str) -> bool:
        with self._write() as db:
            removed = db.execute(
                "DELETE FROM members WHERE team_id = ? AND user_id = ?", (team_id, user_id)
            ).rowcount
            # The invites they made die with their membership, in the same transaction.
            db.execute(
                "DELETE FROM invites WHERE team_id = ? AND created_by = ?", (team_id, user_id)
            )
            # So do their publications of the team's packets (the team's owner may publish
            # any packet of the team; those are the owner's and stay).
            db.execute(
                "DELETE FROM publications WHERE created_by = ?"
                " AND packet_id IN (SELECT id FROM packets WHERE team_id = ?)",
                (user_id, team_id),
            )
        return removed > 0

    # -- invites --------------------------------------------------------

    def create_invite(self, invite: Invite) -> None:
        try:
            with self._write() as db:
                if not self._is_member(db, invite.team_id, invite.created_by):
                    raise NotFound(f"{invite.created_by} is not a member of team {invite.team_id}")
                db.execute(
                    "INSERT INTO invites (code_hash, team_id, created_by, created_at, expires_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        invite.code_hash,
                        invite.team_id,
                        invite.created_by,
                        _ts(invite.created_at),
                        _ts(invite.expires_at),
                    ),
                )
        except sqlite3.IntegrityError:
            raise Conflict("invite code already exists") from None

    def list_invites(self, team_id: str) -> list[Invite]:
        rows = (
            self._conn()
            .execute(
                "SELECT code_hash, team_id, created_by, created_at, expires_at, used_at, used_by"
                " FROM invites WHERE team_id = ? ORDER BY created_at, code_hash",
                (team_id,),
            )
            .fetchall()
        )
        return [Invite(r[0], r[1], r[2], _dt(r[3]), _dt(r[4]), _dt(r[5]), r[6]) for r in rows]

    def accept_invite(
        self,
        code_hash: str,
        user_id: str,
        now: datetime,
        *,
        new_user: tuple[User, Token] | None = None,
    ) -> tuple[Invite, Member]:
        try:
            with self._write() as db:
                row = db.execute(
                    "SELECT code_hash, team_id, created_by, created_at, expires_at, used_at,"
                    " used_by FROM invites WHERE code_hash = ?",
                    (code_hash,),
                ).fetchone()
                if row is None:
                    raise NotFound("invite not found")
                invite = Invite(
                    row[0],
                    row[1],
                    row[2],
                    _dt(row[3]),
                    _dt(row[4]),
                    _dt(row[5]),
                    row[6],
                )
                if invite.used_at is not None or invite.expires_at <= now:
                    raise Gone("invite already used or expired")
                if (
                    db.execute("SELECT 1 FROM teams WHERE id = ?", (invite.team_id,)).fetchone()
                    is None
                ):
                    raise Gone("the team of this invite no longer exists")
                if not self._is_member(db, invite.team_id, invite.created_by):
                    raise Gone("the member who made this invite has left the team")
                # Already in: nothing to join, and the code stays good for the one it was
                # made for (its maker trying the link must not spend it).
                joined = new_user is not None or not self._is_member(db, invite.team_id, user_id)
                if new_user is not None:
                    user, token = new_user
                    self._insert_user(db, user)
                    self._insert_token(db, token)
                if joined:
                    db.execute(
                        "UPDATE invites SET used_at = ?, used_by = ? WHERE code_hash = ?",
                        (_ts(now), user_id, code_hash),
                    )
                    self._insert_member(db, invite.team_id, user_id, "member", now)
        except sqlite3.IntegrityError as exc:
            raise _user_conflict(exc, new_user[0] if new_user else None) from None
        member = self.get_member(invite.team_id, user_id)
        assert member is not None
        if not joined:
            return invite, member
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

    # -- device grants, counters, secrets ---------------------------------

    @staticmethod
    def _grant(row: tuple[Any, ...] | None) -> DeviceGrant | None:
        if row is None:
            return None
        return DeviceGrant(
            device_code_hash=str(row[0]),
            user_code_hash=str(row[1]),
            client_id=str(row[2]),
            scope=str(row[3]),
            device_name=str(row[4]),
            client_ip=str(row[5]),
            created_at=_dt(row[6]),
            expires_at=_dt(row[7]),
            interval=int(row[8]),
            next_poll_at=_dt(row[9]),
            status=row[10],
            user_id=row[11],
            decided_at=_dt(row[12]),
            approved_with=row[13],
        )

    @staticmethod
    def _grant_where(db: sqlite3.Connection, column: str, value: str) -> DeviceGrant | None:
        row = db.execute(
            f"SELECT {_GRANT_COLUMNS} FROM device_grants WHERE {column} = ?", (value,)
        ).fetchone()
        return SqliteStore._grant(row)

    def create_device_grant(self, grant: DeviceGrant, now: datetime) -> None:
        try:
            with self._write() as db:
                # Housekeeping rides on grant creation: both deletes use an index.
                db.execute(
                    "DELETE FROM device_grants WHERE expires_at < ?",
                    (_ts(now - DEVICE_GRANT_KEEP),),
                )
                db.execute("DELETE FROM counters WHERE expires_at <= ?", (_ts(now),))
                # A dead grant's user code may be drawn again.
                db.execute(
                    "DELETE FROM device_grants WHERE user_code_hash = ? AND expires_at <= ?",
                    (grant.user_code_hash, _ts(now)),
                )
                db.execute(
                    f"INSERT INTO device_grants ({_GRANT_COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        grant.device_code_hash,
                        grant.user_code_hash,
                        grant.client_id,
                        grant.scope,
                        grant.device_name,
                        grant.client_ip,
                        _ts(grant.created_at),
                        _ts(grant.expires_at),
                        grant.interval,
                        _ts(grant.next_poll_at),
                        grant.status,
                        grant.user_id,
                        _ts(grant.decided_at) if grant.decided_at else None,
                        grant.approved_with,
                    ),
                )
        except sqlite3.IntegrityError:
            raise Conflict("device code or user code already in use") from None

    def get_device_grant(self, device_code_hash: str) -> DeviceGrant | None:
        return self._grant_where(self._conn(), "device_code_hash", device_code_hash)

    def get_device_grant_by_user_code(
        self, user_code_hash: str, now: datetime
    ) -> DeviceGrant | None:
        grant = self._grant_where(self._conn(), "user_code_hash", user_code_hash)
        return grant if grant is not None and grant.expires_at > now else None

    def poll_device_grant(
        self,
        device_code_hash: str,
        now: datetime,
        *,
        slow_down_step: int,
        leeway: timedelta = timedelta(0),
    ) -> tuple[DeviceGrant, bool] | None:
        with self._write() as db:
            grant = self._grant_where(db, "device_code_hash", device_code_hash)
            if grant is None:
                return None
            too_fast = now < grant.next_poll_at - leeway
            interval = grant.interval + (slow_down_step if too_fast else 0)
            next_poll = now + timedelta(seconds=interval)
            db.execute(
                "UPDATE device_grants SET interval_s = ?, next_poll_at = ?"
                " WHERE device_code_hash = ?",
                (interval, _ts(next_poll), device_code_hash),
            )
        return _replace_grant(grant, interval=interval, next_poll_at=next_poll), too_fast

    def decide_device_grant(
        self,
        user_code_hash: str,
        now: datetime,
        *,
        approve: bool,
        user_id: str,
        approved_with: str | None = None,
    ) -> DeviceGrant:
        with self._write() as db:
            grant = self._grant_where(db, "user_code_hash", user_code_hash)
            if grant is None or grant.expires_at <= now:
                raise NotFound("no such device code, or it expired")
            if grant.status != "pending":
                raise Gone("this device code was already decided")
            status = "approved" if approve else "denied"
            db.execute(
                "UPDATE device_grants SET status = ?, user_id = ?, decided_at = ?,"
                " approved_with = ? WHERE device_code_hash = ?",
                (status, user_id, _ts(now), approved_with, grant.device_code_hash),
            )
        return _replace_grant(
            grant, status=status, user_id=user_id, decided_at=now, approved_with=approved_with
        )

    def redeem_device_grant(
        self, device_code_hash: str, now: datetime, token: Token
    ) -> DeviceGrant:
        try:
            with self._write() as db:
                grant = self._grant_where(db, "device_code_hash", device_code_hash)
                if grant is None:
                    raise NotFound("no such device code")
                if (
                    grant.status != "approved"
                    or grant.expires_at <= now
                    or grant.user_id != token.user_id
                ):
                    raise Gone("this device code is not approved, already used, or expired")
                db.execute(
                    "UPDATE device_grants SET status = 'used' WHERE device_code_hash = ?",
                    (device_code_hash,),
                )
                self._insert_token(db, token)
        except sqlite3.IntegrityError:
            raise Conflict(f"token label {token.label!r} is taken") from None
        return _replace_grant(grant, status="used")

    def add_to_counter(self, key: str, now: datetime, expires_at: datetime) -> int:
        with self._write() as db:
            # Every window of every rate limit is a key of its own: the ended ones go here.
            db.execute("DELETE FROM counters WHERE expires_at <= ? AND key != ?", (_ts(now), key))
            row = db.execute(
                "INSERT INTO counters (key, count, expires_at) VALUES (?, 1, ?)"
                " ON CONFLICT (key) DO UPDATE SET"
                " count = CASE WHEN counters.expires_at <= ? THEN 1 ELSE counters.count + 1 END,"
                " expires_at = CASE WHEN counters.expires_at <= ? THEN excluded.expires_at"
                " ELSE counters.expires_at END"
                " RETURNING count",
                (key, _ts(expires_at), _ts(now), _ts(now)),
            ).fetchone()
        return int(row[0])

    def read_counter(self, key: str, now: datetime) -> int:
        row = (
            self._conn()
            .execute("SELECT count FROM counters WHERE key = ? AND expires_at > ?", (key, _ts(now)))
            .fetchone()
        )
        return int(row[0]) if row else 0

    def ensure_secret(self, name: str, candidate: bytes) -> bytes:
        with self._write() as db:
            db.execute(
                "INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (name, candidate, _ts(datetime.now(UTC))),
            )
            row = db.execute("SELECT value FROM secrets WHERE name = ?", (name,)).fetchone()
        return bytes(row[0])


def _file_size(path: Path) -> int:
    """The bytes of a database: its file and its WAL."""
    return sum(os.stat(name).st_size for name in (path, f"{path}-wal") if os.path.exists(name))


def _hold_to(quota: Quota, before: Usage, after: Usage) -> None:
    """``OverQuota`` when a write took its owner past ``quota`` and grew what they own."""
    if (after.packets > quota.packets and after.packets > before.packets) or (
        after.bytes > quota.bytes and after.bytes > before.bytes
    ):
        raise OverQuota(after, quota)


def _replace_grant(grant: DeviceGrant, **changes: Any) -> DeviceGrant:
    return grant._replace(**changes)
