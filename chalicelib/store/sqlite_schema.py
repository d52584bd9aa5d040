"""The SQLite store's schema: the migrations that make and upgrade it, in order.

``PRAGMA user_version`` records how many of them a database has had
(``SCHEMA_VERSION`` is all of them); ``SqliteStore`` runs the rest when it
opens one (sqlite.py), inside one write.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable

from . import name_key

# The full-text index's columns (packet_fts, migration 6), as sqlite.py reads and writes them.
_FTS_COLUMNS = (
    "goal, tags, next_step, project, decisions, attempts, methods, success_criteria,"
    " constraints, open_questions"
)

# A packet's vector (``semantic.encode``: 288 bytes) keyed by its ``doc``, as its search
# row is; ``vector_model`` names the model they were made with (a new one refills them).
_VECTORS_SCHEMA = """
    CREATE TABLE IF NOT EXISTS packet_vectors (
        doc     INTEGER PRIMARY KEY,
        vector  BLOB NOT NULL
    );
    CREATE TABLE IF NOT EXISTS vector_model (
        one     INTEGER PRIMARY KEY CHECK (one = 1),
        name    TEXT NOT NULL
    );
    CREATE TRIGGER IF NOT EXISTS vectors_end_with_packet AFTER DELETE ON packets BEGIN
        DELETE FROM packet_vectors WHERE doc = OLD.doc;
    END
"""

# Each entry moves the schema one version up; never edit a released entry,
# append a new one. PRAGMA user_version records how far a database has come.
# An entry is SQL (statements split on ";") or a function run in the migration's
# transaction, for steps SQL cannot say (a trigger's body, a backfill in Python).
Migration = str | Callable[[sqlite3.Connection], None]
MIGRATIONS: tuple[Migration, ...] = (
    """
    CREATE TABLE packets (
        id          TEXT PRIMARY KEY,
        scope       TEXT NOT NULL,  -- 'u:<owner_id>' or 't:<team_id>'
        owner_id    TEXT NOT NULL,
        team_id     TEXT,
        sort_key    TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        goal        TEXT NOT NULL,
        conforming  INTEGER NOT NULL DEFAULT 1,
        body        BLOB NOT NULL
    );
    CREATE INDEX packets_by_scope ON packets (scope, sort_key DESC, id DESC);
    CREATE TABLE users (
        id          TEXT PRIMARY KEY,
        display     TEXT NOT NULL,
        subject     TEXT UNIQUE,
        created_at  TEXT NOT NULL
    );
    CREATE TABLE tokens (
        token_hash    TEXT PRIMARY KEY,
        label         TEXT NOT NULL UNIQUE,
        user_id       TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        last_used_at  TEXT
    );
    CREATE INDEX tokens_by_user ON tokens (user_id);
    CREATE TABLE teams (
        id          TEXT PRIMARY KEY,
        name        TEXT NOT NULL UNIQUE,
        owner_id    TEXT NOT NULL,
        created_at  TEXT NOT NULL
    );
    CREATE TABLE members (
        team_id     TEXT NOT NULL,
        user_id     TEXT NOT NULL,
        role        TEXT NOT NULL,
        joined_at   TEXT NOT NULL,
        PRIMARY KEY (team_id, user_id)
    );
    CREATE INDEX members_by_user ON members (user_id);
    CREATE TABLE invites (
        code_hash   TEXT PRIMARY KEY,
        team_id     TEXT NOT NULL,
        created_by  TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        expires_at  TEXT NOT NULL,
        used_at     TEXT,
        used_by     TEXT
    );
    CREATE INDEX invites_by_team ON invites (team_id);
    """,
    # 2: device-flow grants (RFC 8628), rate-limit counters, server-generated secrets.
    """
    CREATE TABLE device_grants (
        device_code_hash  TEXT PRIMARY KEY,
        user_code_hash    TEXT NOT NULL UNIQUE,
        client_id         TEXT NOT NULL,
        scope             TEXT NOT NULL,
        device_name       TEXT NOT NULL,
        client_ip         TEXT NOT NULL,
        created_at        TEXT NOT NULL,
        expires_at        TEXT NOT NULL,
        interval_s        INTEGER NOT NULL,
        next_poll_at      TEXT NOT NULL,
        status            TEXT NOT NULL,
        user_id           TEXT,
        decided_at        TEXT
    );
    CREATE INDEX device_grants_by_expiry ON device_grants (expires_at);
    CREATE TABLE counters (
        key         TEXT PRIMARY KEY,
        count       INTEGER NOT NULL,
        expires_at  TEXT NOT NULL
    );
    CREATE INDEX counters_by_expiry ON counters (expires_at);
    CREATE TABLE secrets (
        name        TEXT PRIMARY KEY,
        value       BLOB NOT NULL,
        created_at  TEXT NOT NULL
    );
    """,
    # 3: published packets (public read-only URLs). A trigger ends a publication in the
    # same statement that deletes its packet, whichever path deletes it (rm, a team's
    # deletion); INSERT OR REPLACE (a re-push) fires no delete trigger, so it stays.
    """
    CREATE TABLE publications (
        secret_hash  TEXT PRIMARY KEY,
        packet_id    TEXT NOT NULL UNIQUE,
        secret       TEXT NOT NULL,
        created_by   TEXT NOT NULL,
        created_at   TEXT NOT NULL
    );
    CREATE TRIGGER publications_end_with_packet AFTER DELETE ON packets
    BEGIN
        DELETE FROM publications WHERE packet_id = OLD.id;
    END
    """,
    # 4: each token's OAuth scope (tokens from before were all full); invites found by
    # their creator, so they die with the creator's membership.
    """
    ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'read write';
    CREATE INDEX invites_by_creator ON invites (team_id, created_by);
    """,
    # 5: project scope: each packet's project.name, copied out of the stored body (backfilled
    # here for packets stored before), so a project's listing is one index range.
    """
    ALTER TABLE packets ADD COLUMN project TEXT;
    UPDATE packets SET project = json_extract(CAST(body AS TEXT), '$.project.name')
        WHERE json_valid(CAST(body AS TEXT))
        AND json_type(CAST(body AS TEXT), '$.project.name') = 'text';
    CREATE INDEX packets_by_project ON packets (scope, project, sort_key DESC, id DESC)
        WHERE project IS NOT NULL;
    """,
    # 6: lineage (parent_id), listing filters, full-text search; existing packets indexed.
    lambda db: _migrate_search(db),
    # 7: one packet shared with one user. As for publications, a trigger ends the shares in
    # the statement that deletes the packet; a re-push (INSERT OR REPLACE) keeps them.
    """
    CREATE TABLE shares (
        packet_id   TEXT NOT NULL,
        user_id     TEXT NOT NULL,
        shared_by   TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (packet_id, user_id)
    ) WITHOUT ROWID;
    CREATE INDEX shares_by_user ON shares (user_id, created_at DESC, packet_id DESC);
    CREATE TRIGGER shares_end_with_packet AFTER DELETE ON packets
    BEGIN
        DELETE FROM shares WHERE packet_id = OLD.id;
    END
    """,
    # 8: what each user owns (packets and bytes, personal and authored in teams), for the
    # per-user bound. Triggers keep it in the statement that changes a packet, whichever
    # path changes it (push, rm, a team's deletion). INSERT OR REPLACE fires no delete
    # trigger (recursive_triggers is off), so a BEFORE INSERT one takes the replaced row
    # out first. https://www.sqlite.org/lang_conflict.html (REPLACE)
    """
    CREATE TABLE usage (
        user_id  TEXT PRIMARY KEY,
        packets  INTEGER NOT NULL,
        bytes    INTEGER NOT NULL
    );
    INSERT INTO usage (user_id, packets, bytes)
        SELECT owner_id, count(*), sum(length(body)) FROM packets GROUP BY owner_id;
    CREATE TRIGGER usage_replaced BEFORE INSERT ON packets BEGIN
        UPDATE usage SET packets = packets - 1,
            bytes = bytes - (SELECT length(body) FROM packets WHERE id = NEW.id)
        WHERE user_id = (SELECT owner_id FROM packets WHERE id = NEW.id);
    END;
    CREATE TRIGGER usage_added AFTER INSERT ON packets BEGIN
        INSERT INTO usage (user_id, packets, bytes) VALUES (NEW.owner_id, 1, length(NEW.body))
        ON CONFLICT (user_id) DO UPDATE SET packets = packets + 1,
            bytes = bytes + length(NEW.body);
    END;
    CREATE TRIGGER usage_removed AFTER DELETE ON packets BEGIN
        UPDATE usage SET packets = packets - 1, bytes = bytes - length(OLD.body)
        WHERE user_id = OLD.owner_id;
    END
    """,
    # 9: OAuth for /mcp: access tokens bound to a resource and expiring; the
    # authorization server's clients, pending requests, codes and refresh tokens.
    """
    ALTER TABLE tokens ADD COLUMN resource TEXT;
    ALTER TABLE tokens ADD COLUMN expires_at TEXT;
    CREATE TABLE oauth_items (
        kind        TEXT NOT NULL,
        key         TEXT NOT NULL,
        doc         TEXT NOT NULL,
        expires_at  TEXT,
        PRIMARY KEY (kind, key)
    ) WITHOUT ROWID;
    """,
    # 10: the first user of `ltm server init` was stored under the id "root"; every user
    # id is a ULID now (the reference mints one for every user), so that user gets one.
    lambda db: _migrate_root_user(db),
    # 11: the compact layout: a body stored once, packed against its searchable text;
    # labels as ids; the search ids folded into the packets table (see _migrate_compact).
    lambda db: _migrate_compact(db),
    # 12: the token a device grant was approved with, so that a web view session made
    # from an approved code lasts only as long as that token (``claim_web``).
    lambda db: _add_column(db, "device_grants", "approved_with TEXT"),
    # 13: what each packet means (``ltm.semantic``), beside it; filled at save, or for the
    # packets already stored by ``fill_vectors``.
    _VECTORS_SCHEMA,
    # 14: display names are unique per server in any case: each user's claim on theirs.
    lambda db: _migrate_user_names(db),
    # 15: an id prefix is looked up within its scope by a range of this index; without it
    # the lookup read every id of the scope (a millisecond each at 10,000 packets, for
    # each id ``ltm ls`` and ``ltm search`` shorten).
    "CREATE INDEX IF NOT EXISTS packets_by_scope_id ON packets (scope, id)",
    # 16: how many vectors there are, counted in this index of small rows: counted in
    # the table, or by a look-up for each packet, it read every vector whole, at each
    # search by meaning, to learn whether one was missing.
    "CREATE INDEX IF NOT EXISTS packet_vectors_by_doc ON packet_vectors (doc)",
    # 17: what a store of two short-lived releases lacks: their migrations were numbered
    # otherwise (see _restore_skipped), so opening them skipped one of today's.
    lambda db: _restore_skipped(db),
    # 18: a word inside a run of Chinese, Japanese, Korean or Thai, which packet_fts keeps
    # whole: each such packet's words in pairs of characters (``search._grams``), in a
    # table of their own; the packets already stored are indexed here.
    lambda db: _migrate_grams(db),
)
# What some entries bring a database to (an entry's version is its place, from 1).
ROOT_USER_VERSION = 10
COMPACT_VERSION = 11
VECTORS_VERSION = 13
GRAMS_VERSION = 18

SCHEMA_VERSION = len(MIGRATIONS)

# Where a user id is kept, besides ``users.id`` and the personal scopes ``u:<id>``.
_USER_ID_COLUMNS = (
    ("tokens", "user_id"),
    ("teams", "owner_id"),
    ("members", "user_id"),
    ("packets", "owner_id"),
    ("invites", "created_by"),
    ("invites", "used_by"),
    ("device_grants", "user_id"),
    ("publications", "created_by"),
    ("shares", "user_id"),
    ("shares", "shared_by"),
    ("usage", "user_id"),
)
# The tables of both layouts (before and after the compact one, migration 11): each is
# updated where it exists.
_SCOPE_COLUMNS = (
    ("packets", "scope"),
    ("search_docs", "scope"),
    ("packet_labels", "scope"),
    ("labels", "scope"),
)
LEGACY_ROOT_ID = "root"


def _migrate_root_user(db: sqlite3.Connection) -> None:
    """Give the user stored as "root" a ULID, everywhere its id is kept, in this transaction.

    Its tokens keep working: a token names its user's id only as a hint
    (``service.tokens.credential``), and is looked up by its hash.
    """
    if db.execute("SELECT 1 FROM users WHERE id = ?", (LEGACY_ROOT_ID,)).fetchone() is None:
        return
    from ..ids import new_ulid

    new_id = new_ulid()
    db.execute("UPDATE users SET id = ? WHERE id = ?", (new_id, LEGACY_ROOT_ID))
    for table, column in _USER_ID_COLUMNS:
        db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (new_id, LEGACY_ROOT_ID))
    for table, column in _SCOPE_COLUMNS:
        if not _has_table(db, table):
            continue
        db.execute(
            f"UPDATE {table} SET {column} = ? WHERE {column} = ?",
            (f"u:{new_id}", f"u:{LEGACY_ROOT_ID}"),
        )


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


# The search index (migration 6; migration 11 keeps packet_fts and replaces the
# rest, see _migrate_compact below). ``search_docs`` gave each packet a stable
# integer for the FTS5 row (the packets table's own rowid may change on VACUUM);
# ``packet_labels`` held a packet's tags and project for the ``tag`` filter and
# the ``tag:``/``project:`` qualifiers, ordered like a listing. A trigger drops a
# packet's index rows whenever the packet row goes (rm, team delete), inside the
# same transaction; a put writes the new ones (and drops a replaced packet's).
_SEARCH_SCHEMA = f"""
    ALTER TABLE packets ADD COLUMN parent_id TEXT;
    CREATE INDEX packets_by_parent ON packets (parent_id, sort_key, id)
        WHERE parent_id IS NOT NULL;
    CREATE INDEX packets_by_author ON packets (scope, owner_id, sort_key DESC, id DESC);
    CREATE TABLE search_docs (
        doc     INTEGER PRIMARY KEY,
        id      TEXT NOT NULL UNIQUE,
        scope   TEXT NOT NULL
    );
    CREATE VIRTUAL TABLE packet_fts USING fts5(
        {_FTS_COLUMNS}, tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TABLE packet_labels (
        scope     TEXT NOT NULL,
        kind      TEXT NOT NULL,  -- 'tag' or 'project'
        value     TEXT NOT NULL,
        sort_key  TEXT NOT NULL,
        id        TEXT NOT NULL,
        PRIMARY KEY (scope, kind, value, sort_key, id)
    ) WITHOUT ROWID;
    CREATE INDEX packet_labels_by_id ON packet_labels (id)
"""
_UNINDEX_TRIGGER = """
    CREATE TRIGGER packets_unindex AFTER DELETE ON packets BEGIN
        DELETE FROM packet_fts WHERE rowid IN (SELECT doc FROM search_docs WHERE id = old.id);
        DELETE FROM search_docs WHERE id = old.id;
        DELETE FROM packet_labels WHERE id = old.id;
    END
"""


def _migrate_search(db: sqlite3.Connection) -> None:
    from .. import search

    for statement in _SEARCH_SCHEMA.split(";"):
        db.execute(statement)
    db.execute(_UNINDEX_TRIGGER)
    # A database made before search: index what it holds, once, in this transaction.
    rows = db.execute("SELECT id, scope, sort_key, body FROM packets").fetchall()
    for packet_id, scope, sort_key, body in rows:
        data = search.load(bytes(body))
        db.execute(
            "UPDATE packets SET parent_id = ? WHERE id = ?", (search.parent_of(data), packet_id)
        )
        _index_v6(db, packet_id, scope, sort_key, data)


def _index_v6(
    db: sqlite3.Connection, packet_id: str, scope: str, sort_key: str, data: dict[str, object]
) -> None:
    """A packet's search rows in the layout of migration 6 (what that migration writes)."""
    from .. import search

    doc = db.execute(
        "INSERT INTO search_docs (id, scope) VALUES (?, ?)", (packet_id, scope)
    ).lastrowid
    fields = search.fields_of(data)
    db.execute(
        f"INSERT INTO packet_fts (rowid, {_FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (doc, *(fields[name] for name in search.FIELD_NAMES)),
    )
    labels = [("tag", tag) for tag in search.tags_of(data)]
    project = search.project_of(data)
    if project:
        labels.append(("project", project))
    db.executemany(
        "INSERT OR IGNORE INTO packet_labels (scope, kind, value, sort_key, id)"
        " VALUES (?, ?, ?, ?, ?)",
        [(scope, kind, value, sort_key, packet_id) for kind, value in labels],
    )


# The compact layout (migration 11; sqlite.py says what it keeps where, and why).
_COMPACT_TABLES = """
    CREATE TABLE labels (
        label  INTEGER PRIMARY KEY,
        scope  TEXT NOT NULL,
        kind   TEXT NOT NULL,  -- 'tag' or 'project'
        value  TEXT NOT NULL,
        UNIQUE (scope, kind, value)
    );
    CREATE TABLE label_packets (
        label     INTEGER NOT NULL,
        sort_key  TEXT NOT NULL,
        id        TEXT NOT NULL,
        PRIMARY KEY (label, sort_key, id)
    ) WITHOUT ROWID;
    CREATE TABLE packets_compact (
        doc         INTEGER PRIMARY KEY,  -- its row in packet_fts
        id          TEXT NOT NULL UNIQUE,
        scope       TEXT NOT NULL,  -- 'u:<owner_id>' or 't:<team_id>'
        owner_id    TEXT NOT NULL,
        team_id     TEXT,
        sort_key    TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        goal        TEXT NOT NULL,
        conforming  INTEGER NOT NULL DEFAULT 1,
        project     TEXT,
        parent_id   TEXT,
        labels      TEXT,  -- its label ids, a JSON array (NULL: none)
        size        INTEGER NOT NULL,  -- of the canonical bytes
        body        BLOB NOT NULL  -- the canonical bytes, packed (_pack)
    )
"""
# The old tables go, the new one takes their name, and what hung on the old packets
# table is made again: its indexes (the author's only for teams: in a personal scope
# every packet is its owner's; by doc, each full-text match's scope, for search), and
# its triggers, which now count ``size``.
_COMPACT_SWAP = """
    DROP TABLE packets;
    DROP TABLE search_docs;
    DROP TABLE packet_labels;
    ALTER TABLE packets_compact RENAME TO packets;
    CREATE INDEX packets_by_scope ON packets (scope, sort_key, id);
    CREATE INDEX packets_by_project ON packets (scope, project, sort_key, id)
        WHERE project IS NOT NULL;
    CREATE INDEX packets_by_author ON packets (scope, owner_id, sort_key, id)
        WHERE team_id IS NOT NULL;
    CREATE INDEX packets_by_parent ON packets (parent_id, sort_key, id)
        WHERE parent_id IS NOT NULL;
    CREATE INDEX packets_by_doc ON packets (doc, scope);
    CREATE TRIGGER packets_unindex AFTER DELETE ON packets BEGIN
        DELETE FROM packet_fts WHERE rowid = OLD.doc;
        DELETE FROM label_packets WHERE label IN (SELECT value FROM json_each(OLD.labels))
            AND sort_key = OLD.sort_key AND id = OLD.id;
    END;
    CREATE TRIGGER publications_end_with_packet AFTER DELETE ON packets BEGIN
        DELETE FROM publications WHERE packet_id = OLD.id;
    END;
    CREATE TRIGGER shares_end_with_packet AFTER DELETE ON packets BEGIN
        DELETE FROM shares WHERE packet_id = OLD.id;
    END;
    CREATE TRIGGER usage_replaced BEFORE INSERT ON packets BEGIN
        UPDATE usage SET packets = packets - 1,
            bytes = bytes - (SELECT size FROM packets WHERE id = NEW.id)
        WHERE user_id = (SELECT owner_id FROM packets WHERE id = NEW.id);
    END;
    CREATE TRIGGER usage_added AFTER INSERT ON packets BEGIN
        INSERT INTO usage (user_id, packets, bytes) VALUES (NEW.owner_id, 1, NEW.size)
        ON CONFLICT (user_id) DO UPDATE SET packets = packets + 1, bytes = bytes + NEW.size;
    END;
    CREATE TRIGGER usage_removed AFTER DELETE ON packets BEGIN
        UPDATE usage SET packets = packets - 1, bytes = bytes - OLD.size
        WHERE user_id = OLD.owner_id;
    END
"""


def _migrate_compact(db: sqlite3.Connection) -> None:
    """Move every packet to the compact layout, in this transaction; say so on stderr.

    Each packet keeps its search row (its ``doc``), so the full-text index is not
    rebuilt: only the bodies are packed, against the text that row holds. Rows go
    in in key order, so that each table and index is written packed.
    """
    from .sqlite import _PACKET_COLUMNS, _PACKET_MARKS, _TEXT, _json_ids, _pack

    if _is_compact(db):
        return  # a database this code made, set back a version (tests do)
    count = db.execute("SELECT count(*) FROM packets").fetchone()[0]
    if count:
        path = db.execute("PRAGMA database_list").fetchone()[2]
        sys.stderr.write(f"ltm: {path}: storing its {count:,} packets compactly (once)\n")
    for statement in _statements(_COMPACT_TABLES):
        db.execute(statement)
    db.execute(
        "INSERT INTO labels (scope, kind, value) SELECT DISTINCT p.scope, l.kind, l.value"
        " FROM packet_labels l JOIN packets p ON p.id = l.id ORDER BY 1, 2, 3"
    )
    db.execute(
        "INSERT INTO label_packets (label, sort_key, id)"
        " SELECT DISTINCT n.label, p.sort_key, p.id FROM packet_labels l"
        " JOIN packets p ON p.id = l.id"
        " JOIN labels n ON n.scope = p.scope AND n.kind = l.kind AND n.value = l.value"
        " ORDER BY 1, 2, 3"
    )
    # Every indexed packet, in the order of its search row, with its label ids.
    found = db.execute(
        "SELECT d.doc, p.id, p.scope, p.owner_id, p.team_id, p.sort_key, p.created_at, p.goal,"
        " p.conforming, p.project, p.parent_id,"
        " (SELECT json_group_array(n.label) FROM packet_labels l JOIN labels n"
        "  ON n.scope = p.scope AND n.kind = l.kind AND n.value = l.value WHERE l.id = p.id),"
        f" p.body, {_TEXT} FROM search_docs d JOIN packets p ON p.id = d.id"
        " JOIN packet_fts f ON f.rowid = d.doc ORDER BY d.doc"
    )
    insert = f"INSERT INTO packets_compact ({_PACKET_COLUMNS}) VALUES ({_PACKET_MARKS})"
    moved = 0
    while batch := found.fetchmany(1000):
        db.executemany(
            insert,
            [
                (*row[:11], _json_ids(json.loads(row[11])), len(row[12]), _pack(row[12], row[13]))
                for row in batch
            ],
        )
        moved += len(batch)
    if moved < count:
        _index_lost(db, insert)
    for statement in _statements(_COMPACT_SWAP):
        db.execute(statement)


def _index_lost(db: sqlite3.Connection, insert: str) -> None:
    """Move the packets that had no search row (none is expected), indexed from their body."""
    from .sqlite import _FTS_INSERT, _json_ids, _label_ids, _labels_of, derive

    last = db.execute("SELECT max(doc) FROM search_docs").fetchone()[0] or 0
    lost = db.execute(
        "SELECT id, scope, owner_id, team_id, sort_key, created_at, goal, conforming, project,"
        " parent_id, body FROM packets WHERE id NOT IN (SELECT id FROM packets_compact)"
    ).fetchall()
    for row in lost:
        last += 1
        body = bytes(row[10])
        derived = derive(body)
        db.execute("DELETE FROM packet_fts WHERE rowid = ?", (last,))  # a stray row, if any
        db.execute(_FTS_INSERT, (last, *derived.texts))
        labels = list(_label_ids(db, _labels_of(row[1], derived)).values())
        db.executemany(
            "INSERT OR IGNORE INTO label_packets (label, sort_key, id) VALUES (?, ?, ?)",
            [(label, row[4], row[0]) for label in labels],
        )
        db.execute(insert, (last, *row[:10], _json_ids(labels), len(body), derived.packed))


# Migration 8's table (what each user owns), made where it is missing; its triggers, which
# count ``size``, are the compact layout's (migration 11, which every store has had).
_USAGE_TABLE = """
    CREATE TABLE usage (
        user_id  TEXT PRIMARY KEY,
        packets  INTEGER NOT NULL,
        bytes    INTEGER NOT NULL
    )
"""
# Migration 9's table, as it made it.
_OAUTH_TABLE = """
    CREATE TABLE IF NOT EXISTS oauth_items (
        kind        TEXT NOT NULL,
        key         TEXT NOT NULL,
        doc         TEXT NOT NULL,
        expires_at  TEXT,
        PRIMARY KEY (kind, key)
    ) WITHOUT ROWID
"""


def _restore_skipped(db: sqlite3.Connection) -> None:
    """Make what a store of two releases of 2026-11-24 never got, and no later migration made.

    For a few minutes each, two releases numbered their last migration otherwise: one
    had 8 give the first user a ULID (today's 10), the next 9 (8 was the usage table,
    as today). A store either left is at 8 or 9 with that done, so opening it ran the
    migrations from 9 or 10 on: one never had the usage table (every push then failed,
    ``no such table: main.usage``), the other never had OAuth's columns and table
    (every request with a token failed, ``no such column: t.resource``). Every other
    store has all of it, and this changes nothing there.
    """
    if not _has_table(db, "usage"):
        db.execute(_USAGE_TABLE)
        db.execute(
            "INSERT INTO usage (user_id, packets, bytes)"
            " SELECT owner_id, count(*), sum(size) FROM packets GROUP BY owner_id"
        )
    _add_column(db, "tokens", "resource TEXT")
    _add_column(db, "tokens", "expires_at TEXT")
    db.execute(_OAUTH_TABLE)


def _migrate_user_names(db: sqlite3.Connection) -> None:
    """The name claims (``name_key``), the oldest user first: where earlier versions let two
    users take one name in different cases, the first keeps it and the later ones keep
    theirs unclaimed (nobody new can take it; renaming them frees nothing)."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS user_names ("
        " name_key TEXT PRIMARY KEY, user_id TEXT NOT NULL) WITHOUT ROWID"
    )
    rows = db.execute("SELECT id, display FROM users ORDER BY created_at, id").fetchall()
    db.executemany(
        "INSERT OR IGNORE INTO user_names (name_key, user_id) VALUES (?, ?)",
        [(name_key(display), user_id) for user_id, display in rows],
    )


def _has_column(db: sqlite3.Connection, table: str, name: str) -> bool:
    return any(row[1] == name for row in db.execute(f"PRAGMA table_info({table})"))


def _add_column(db: sqlite3.Connection, table: str, column: str) -> None:
    """``ALTER TABLE table ADD COLUMN column``, unless the table has it already (a store
    whose recorded version is older than its schema: the migration runs again)."""
    if not _has_column(db, table, column.split()[0]):
        db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def _is_compact(db: sqlite3.Connection) -> bool:
    return _has_column(db, "packets", "doc")


def _statements(script: str) -> list[str]:
    """The statements of a migration: split on ``;`` except inside a trigger's BEGIN ... END."""
    out: list[str] = []
    pending = ""
    for part in script.split(";"):
        pending = f"{pending};{part}" if pending else part
        if sqlite3.complete_statement(pending + ";"):
            if pending.strip():
                out.append(pending)
            pending = ""
    if pending.strip():
        out.append(pending)
    return out


# Migration 18: ``packet_grams`` holds, for the packets with text in a script written
# without spaces only, what ``search.gram_texts`` makes of their searchable text,
# keyed by ``doc`` as their packet_fts row is; the trigger that drops a packet's search
# row drops it too. Its words come cut and folded already (one space apart), so its
# tokenizer only splits them again: no diacritic is taken off a second time.
_GRAMS_SCHEMA = f"""
    CREATE VIRTUAL TABLE IF NOT EXISTS packet_grams USING fts5(
        {_FTS_COLUMNS}, tokenize = 'unicode61 remove_diacritics 0'
    );
    DROP TRIGGER IF EXISTS packets_unindex;
    CREATE TRIGGER packets_unindex AFTER DELETE ON packets BEGIN
        DELETE FROM packet_fts WHERE rowid = OLD.doc;
        DELETE FROM packet_grams WHERE rowid = OLD.doc;
        DELETE FROM label_packets WHERE label IN (SELECT value FROM json_each(OLD.labels))
            AND sort_key = OLD.sort_key AND id = OLD.id;
    END
"""
GRAMS_INTO = f"INSERT INTO packet_grams (rowid, {_FTS_COLUMNS})"


def _migrate_grams(db: sqlite3.Connection) -> None:
    """Make ``packet_grams`` and index in it every stored packet that needs it, from its
    packet_fts row (the text it was indexed by), in this transaction."""
    from .. import search
    from .sqlite import _TEXTS, _insert_rows

    for statement in _statements(_GRAMS_SCHEMA):
        db.execute(statement)
    db.execute("DELETE FROM packet_grams")  # a store set back a version: indexed again
    rows = db.execute(f"SELECT f.rowid, {_TEXTS} FROM packet_fts f ORDER BY f.rowid")
    while batch := rows.fetchmany(1000):
        grams = [
            (row[0], *texts) for row in batch if (texts := search.gram_texts(row[1:])) is not None
        ]
        _insert_rows(db, GRAMS_INTO, grams)
