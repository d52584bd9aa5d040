"""The SQLite store's compact layout, and the migration that takes older stores to it.

A packet's searchable text is kept once (the full-text index's content) and its
body packed against that text; its labels are ids. A store made before (the
layout every release up to schema 10 wrote) is built here from the migrations
of that time and their own index writer, then opened: it migrates once, says
so, and keeps every packet, share, publication, label and search hit.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ltm import packet, search
from ltm.examples import example_bytes
from ltm.store import (
    Conflict,
    NotFound,
    OverQuota,
    PacketMeta,
    Publication,
    PutItem,
    Quota,
    StoredPacket,
    Team,
)
from ltm.store import sqlite as sqlite_store
from ltm.store.sqlite import (
    _SKELETON,
    _TEXT_COLUMNS,
    FREE_SHARE,
    RANK_WINDOW,
    Derived,
    SqliteStore,
    _insert_rows,
)
from ltm.store.sqlite_schema import (
    COMPACT_VERSION,
    MIGRATIONS,
    SCHEMA_VERSION,
    _index_v6,
    _statements,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BEFORE = COMPACT_VERSION - 1  # the schema version of a store from before the compact layout
EXAMPLE = json.loads(example_bytes())
SECRET_HASH = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def body_of(data: dict[str, object]) -> bytes:
    return packet.canonical_bytes(data)


# id -> (owner, team, created_at, body)
OLD_PACKETS: dict[str, tuple[str, str | None, str, bytes]] = {
    "01ROOT000000": (
        "alice",
        None,
        "2026-01-01T00:00:01Z",
        body_of(
            {
                "id": "01ROOT000000",
                "goal": "Fix the flaky OAuth token refresh in the login flow",
                "next_step": "Retry with backoff",
                "tags": ["auth", "ops"],
                "project": {"name": "webapp"},
            }
        ),
    ),
    "01CHILD00000": (
        "alice",
        None,
        "2026-01-01T00:00:02Z",
        body_of(
            {
                "id": "01CHILD00000",
                "parent_id": "01ROOT000000",
                "goal": "Finish the refresh fix: timers",
                "decisions": [{"what": "Keep é ✓ \U0001f600 as they are", "why": "unicode"}],
                "tags": ["auth"],
            }
        ),
    ),
    "01TEAM000000": (
        "bob",
        "t1",
        "2026-01-01T00:00:03Z",
        body_of(
            {
                "id": "01TEAM000000",
                "goal": "Move the team's cron jobs to the scheduler",
                "tags": ["infra"],
                "project": {"name": "webapp"},
            }
        ),
    ),
    "01NOTJSON000": ("alice", None, "2026-01-01T00:00:04Z", b"not json, a lenient oddity"),
    **{
        f"01EXAMPLE{n:03d}": (
            "alice",
            None,
            f"2026-01-02T00:{n // 60:02d}:{n % 60:02d}Z",
            body_of({**EXAMPLE, "id": f"01EXAMPLE{n:03d}", "goal": f"Example number {n}"}),
        )
        for n in range(120)
    },
}


def old_store(path: Path) -> None:
    """A store as every release before the compact layout left it, built with the
    migrations of that time and the index writer they used."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN")
    for step in MIGRATIONS[:BEFORE]:
        if callable(step):
            step(db)
        else:
            for statement in _statements(step):
                db.execute(statement)
    for uid in ("alice", "bob"):
        db.execute(
            "INSERT INTO users (id, display, created_at) VALUES (?, ?, '2026-01-01')", (uid, uid)
        )
    db.execute("INSERT INTO teams VALUES ('t1', 'core', 'alice', '2026-01-01')")
    for uid, role in (("alice", "owner"), ("bob", "member")):
        db.execute("INSERT INTO members VALUES ('t1', ?, ?, '2026-01-01')", (uid, role))
    for pid, (owner, team, created, body) in OLD_PACKETS.items():
        data = search.load(body)
        scope = f"t:{team}" if team else f"u:{owner}"
        sort_key = packet.created_at_sort_key(created)
        db.execute(
            "INSERT INTO packets (id, scope, owner_id, team_id, sort_key, created_at, goal,"
            " conforming, body, project, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
            (
                pid,
                scope,
                owner,
                team,
                sort_key,
                created,
                str(data.get("goal", "")),
                body,
                search.project_of(data),
                search.parent_of(data),
            ),
        )
        _index_v6(db, pid, scope, sort_key, data)
    db.execute(
        "INSERT INTO publications VALUES (?, '01ROOT000000', 'the-secret', 'alice', '2026-01-03')",
        (SECRET_HASH,),
    )
    db.execute("INSERT INTO shares VALUES ('01CHILD00000', 'bob', 'alice', '2026-01-03')")
    db.execute(f"PRAGMA user_version = {BEFORE}")
    db.execute("COMMIT")
    db.close()


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master")}


def counts(path: Path) -> tuple[int, ...]:
    db = sqlite3.connect(path)
    try:
        return tuple(
            db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("packets", "packet_fts", "labels", "label_packets", "usage")
        )
    finally:
        db.close()


def ids(hits: list[object]) -> list[str]:
    return [hit.meta.id for hit in hits]  # type: ignore[attr-defined]


def test_an_old_store_migrates_on_open_once_and_keeps_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ltm.db"
    old_store(path)
    with sqlite3.connect(path) as db:
        usage_before = db.execute("SELECT * FROM usage ORDER BY user_id").fetchall()
    size_before = sum(p.stat().st_size for p in tmp_path.iterdir())

    store = SqliteStore(path)
    said = capsys.readouterr().err
    assert f"storing its {len(OLD_PACKETS)} packets compactly (once)" in said
    assert "packets stored compactly" in said  # and how much smaller the file is
    assert {"search_docs", "packet_labels"}.isdisjoint(tables(path))
    # The freed pages went back to the file system (VACUUM).
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) < size_before * 0.7

    # Every packet, byte for byte, with what listings show.
    for pid, (owner, team, created, body) in OLD_PACKETS.items():
        got = store.get_packet(pid)
        assert got is not None and got.body == body
        assert (got.meta.owner_id, got.meta.team_id, got.meta.created_at) == (owner, team, created)
    root = store.get_packet("01ROOT000000")
    assert root is not None and root.meta.project == "webapp"
    child = store.get_packet("01CHILD00000")
    assert child is not None and child.meta.parent_id == "01ROOT000000"
    mine = [("alice", None)]
    assert [m.id for m in store.children("01ROOT000000", scopes=mine)] == ["01CHILD00000"]

    # Listings: the scope, by tag and project, by author in the team.
    listed = store.list_packets(owner_id="alice", limit=500).items
    assert len(listed) == len(OLD_PACKETS) - 1  # bob's team packet is not alice's
    tagged = store.list_packets(owner_id="alice", tag="auth").items
    assert [m.id for m in tagged] == ["01CHILD00000", "01ROOT000000"]
    assert [m.id for m in store.list_packets(owner_id="alice", project="webapp").items] == [
        "01ROOT000000"
    ]
    team = store.list_packets(owner_id="x", team_id="t1", author="bob", tag="infra").items
    assert [m.id for m in team] == ["01TEAM000000"]

    # Search: words, qualifiers, snippets, in each scope.
    found = store.search(search.parse("oauth"), scopes=mine)
    assert ids(found) == ["01ROOT000000"] and found[0].snippet.field == "goal"
    assert ids(store.search(search.parse("tag:auth"), scopes=mine)) == [
        "01CHILD00000",
        "01ROOT000000",
    ]
    assert ids(store.search(search.parse("refresh project:webapp"), scopes=mine)) == [
        "01ROOT000000"
    ]
    assert ids(store.search(search.parse("cron tag:infra"), scopes=[("bob", "t1")])) == [
        "01TEAM000000"
    ]
    assert len(store.search(search.parse("stumbling"), scopes=mine, limit=200)) == 120
    assert store.search(search.parse("cron"), scopes=mine) == []

    # Publications, shares and what each user owns.
    published = store.published_packet(SECRET_HASH)
    assert published is not None and published.body == OLD_PACKETS["01ROOT000000"][3]
    assert [meta.id for _, meta in store.shared_with("bob")] == ["01CHILD00000"]
    with sqlite3.connect(path) as db:
        # FTS5's own check: its index agrees with the text it holds, row for row.
        db.execute("INSERT INTO packet_fts (packet_fts) VALUES ('integrity-check')")
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT * FROM usage ORDER BY user_id").fetchall() == usage_before
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental, as new
    kept = counts(path)
    store.close()

    # Opened again: nothing to migrate, nothing said, nothing changed.
    store = SqliteStore(path)
    assert capsys.readouterr().err == ""
    assert counts(path) == kept
    # Writes go on in the new layout: a re-push, a delete, a team's deletion.
    owner, team_id, created, _ = OLD_PACKETS["01ROOT000000"]
    body = body_of({"id": "01ROOT000000", "goal": "Fix the OAuth refresh", "tags": ["ops"]})
    meta = PacketMeta("01ROOT000000", created, "Fix the OAuth refresh", owner, team_id)
    assert store.put_packet(StoredPacket(meta, body), sort_key="2026-01-05") is False
    assert [m.id for m in store.list_packets(owner_id="alice", tag="auth").items] == [
        "01CHILD00000"
    ]
    assert store.publication("01ROOT000000") is not None  # a re-push keeps its public URL
    assert store.delete_packet_as("01CHILD00000", "alice") is True
    assert store.list_packets(owner_id="alice", tag="auth").items == []
    assert store.search(search.parse("timers"), scopes=mine) == []
    store.delete_team("t1")
    assert store.search(search.parse("cron"), scopes=[("bob", "t1")]) == []
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO packet_fts (packet_fts) VALUES ('integrity-check')")
        assert db.execute("SELECT count(*) FROM labels WHERE scope = 't:t1'").fetchone() == (0,)
        # the re-pushed packet's one tag, the examples' four tags and project each
        assert db.execute("SELECT count(*) FROM label_packets").fetchone()[0] == 1 + 120 * 5
    store.close()


def test_a_packet_missing_its_search_rows_is_indexed_by_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "ltm.db"
    old_store(path)
    with sqlite3.connect(path) as db:  # a packet that lost its search rows somehow
        doc = db.execute("SELECT doc FROM search_docs WHERE id = '01TEAM000000'").fetchone()[0]
        db.execute("DELETE FROM packet_fts WHERE rowid = ?", (doc,))
        db.execute("DELETE FROM search_docs WHERE doc = ?", (doc,))
        db.execute("DELETE FROM packet_labels WHERE id = '01TEAM000000'")
    store = SqliteStore(path)
    try:
        got = store.get_packet("01TEAM000000")
        assert got is not None and got.body == OLD_PACKETS["01TEAM000000"][3]
        team = [("bob", "t1")]
        assert ids(store.search(search.parse("cron tag:infra"), scopes=team)) == ["01TEAM000000"]
        assert len(store.search(search.parse("stumbling"), scopes=[("alice", None)])) == 20
    finally:
        store.close()


def test_a_body_is_stored_packed_against_its_text(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ltm.db")
    try:
        body = body_of(EXAMPLE)
        meta = PacketMeta(EXAMPLE["id"], EXAMPLE["created_at"], EXAMPLE["goal"], "u1")
        store.put_packet(StoredPacket(meta, body), sort_key="k")
        db = store._conn()
        stored, size = db.execute("SELECT body, size FROM packets").fetchone()
        assert size == len(body) and len(stored) < len(body) / 4
        got = store.get_packet(meta.id)
        assert got is not None and got.body == body
        # Text SQLite and Python could disagree on: a NUL, a surrogate pair, CRLF.
        odd = body_of({"id": "01ODD0000000", "goal": "a\x00b \U0001f600 e\u0301", "tags": ["\r\n"]})
        store.put_packet(StoredPacket(meta._replace(id="01ODD0000000"), odd), sort_key="k")
        got = store.get_packet("01ODD0000000")
        assert got is not None and got.body == odd
        # The body reads back only with the very text it was packed with.
        db.execute("UPDATE packet_fts SET goal = 'another goal' WHERE goal = ?", (EXAMPLE["goal"],))
        with pytest.raises(zlib.error):
            store.get_packet(meta.id)
    finally:
        store.close()


def test_a_body_packed_at_any_zlib_level_reads_back(tmp_path: Path) -> None:
    """Bodies stored before the level changed (zlib's default), or by a later one, read."""
    store = SqliteStore(tmp_path / "ltm.db")
    try:
        body = body_of(EXAMPLE)
        meta = PacketMeta(EXAMPLE["id"], EXAMPLE["created_at"], EXAMPLE["goal"], "u1")
        store.put_packet(StoredPacket(meta, body), sort_key="k")
        text = SqliteStore.derive(body).texts
        dictionary = _SKELETON + "\n".join(text).encode()
        db = store._conn()
        for level in (-1, 1, 9):
            packer = zlib.compressobj(level, zdict=dictionary)
            db.execute("UPDATE packets SET body = ?", (packer.compress(body) + packer.flush(),))
            got = store.get_packet(meta.id)
            assert got is not None and got.body == body
    finally:
        store.close()


def test_bulk_writes_give_the_pages_they_free_back(tmp_path: Path) -> None:
    """The pages the full-text index frees as it merges go back to the file system:
    while the store is open, once they pass a share of the file; the rest (here: what
    deletes freed) as a store that wrote in bulk closes."""

    def free_and_pages() -> tuple[int, int]:
        with contextlib.closing(sqlite3.connect(tmp_path / "ltm.db")) as db:
            return (
                db.execute("PRAGMA freelist_count").fetchone()[0],
                db.execute("PRAGMA page_count").fetchone()[0],
            )

    store = SqliteStore(tmp_path / "ltm.db")
    try:
        for start in range(0, 2400, 300):  # enough for FTS5 to merge, and free pages
            items = []
            for n in range(start, start + 300):
                pid = f"01BULK{n:06d}"
                body = body_of({**EXAMPLE, "id": pid, "goal": f"Bulk number {n}"})
                meta = PacketMeta(pid, EXAMPLE["created_at"], f"Bulk number {n}", "u1")
                items.append(PutItem(StoredPacket(meta, body), f"k{n:06d}"))
            assert store.put_many(items) == [True] * 300
            free, pages = free_and_pages()
            assert free * FREE_SHARE <= pages
        assert store._conn().execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        assert len(store.search(search.parse("stumbling"), scopes=[("u1", None)], limit=50)) == 50
        for n in range(0, 2400, 3):
            assert store.delete_packet(f"01BULK{n:06d}")
        assert free_and_pages()[0] > 0
    finally:
        store.close()
    assert free_and_pages()[0] == 0


def test_the_dictionary_of_stored_bodies_never_changes() -> None:
    # Every stored body needs these bytes to be read: an edit would make them unreadable.
    assert (len(_SKELETON), zlib.adler32(_SKELETON)) == (742, 0xE0DBB673)


def test_put_many_ends_as_the_same_puts_one_by_one(tmp_path: Path) -> None:
    """A batch is judged item by item, against what the items before it did."""

    def item(pid: str, owner: str, team: str | None, n: int, **fields: object) -> PutItem:
        data = {"id": pid, "goal": f"goal {pid} {n}", "tags": [f"t{n % 3}"], **fields}
        meta = PacketMeta(pid, f"2026-01-01T00:00:{n:02d}Z", str(data["goal"]), owner, team)
        return PutItem(StoredPacket(meta, body_of(data)), f"2026-01-01T00:00:{n:02d}Z")

    items = [
        item("01A", "u1", None, 1),
        item("01B", "u1", None, 2, project={"name": "p"}),
        item("01A", "u1", None, 3),  # replaces the one before it in the batch
        item("01C", "u1", None, 4),  # another owner's id (stored before the batch)
        item("01B", "u1", "t1", 5),  # moves into u1's team: its publication ends
        item("01B", "u1", None, 6),  # out of the team again: refused
        item("01D", "u1", "t1", 7),  # a new packet in u1's team
        item("01E", "u1", None, 8),  # past the bound of three packets
        item("01A", "u1", None, 9, next_step="x" * 1000),  # past the bound of bytes
        item("01A", "u1", None, 10),  # a replacement that fits
        item("01F", "u1", "t9", 11),  # into a team u1 is not in: refused
    ]
    results = []
    for name in ("one-by-one", "batch"):
        store = SqliteStore(tmp_path / f"{name}.db")
        store.create_team(Team("t1", "core", "u1", T0))
        store.put_packet(item("01C", "u2", None, 0).packet, sort_key="k")
        store.put_packet(item("01B", "u1", None, 0).packet, sort_key="k")
        stored = store.get_packet("01B")
        assert stored is not None
        store.publish_packet(Publication("01B", "s", "h", "u1", T0), seen=stored.meta)
        store.quota = Quota(packets=3, bytes=600)
        if name == "batch":
            done = store.put_many(items)
        else:
            done = []
            for it in items:
                try:
                    done.append(store.put_packet(it.packet, sort_key=it.sort_key))
                except (Conflict, NotFound, OverQuota) as exc:
                    done.append(exc)
        state = (
            [d if isinstance(d, bool) else (type(d).__name__, str(d)) for d in done],
            {pid: store.get_packet(pid) for pid in ("01A", "01B", "01C", "01D", "01E", "01F")},
            store.usage("u1"),
            store.publication("01B"),
            [m.id for m in store.list_packets(owner_id="u1", tag="t0").items],
            sorted(ids(store.search(search.parse("goal"), scopes=[("u1", None), ("u1", "t1")]))),
        )
        results.append(state)
        store.close()
    one, batch = results
    assert batch == one
    outcomes = batch[0]
    assert outcomes[:3] == [True, False, False] and outcomes[6] is True
    assert [o[0] for o in outcomes if not isinstance(o, bool)] == [
        "Conflict",
        "Conflict",
        "OverQuota",
        "OverQuota",
        "NotFound",
    ]
    assert batch[1]["01F"] is None
    assert batch[3] is None  # the move ended the publication


@pytest.mark.parametrize("variables", [999, None])
def test_a_bulk_write_stores_what_puts_one_by_one_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variables: int | None
) -> None:
    """A bulk write's rows go in many to a statement (``_insert_rows``) and store what
    single puts store: with SQLite's old limit of 999 variables, the count fills several
    statements of every table and ends with a partial one; with this SQLite's own, every
    table's rows go in one statement."""
    if variables is not None:
        monkeypatch.setattr(sqlite_store, "_MAX_VARIABLES", variables)
    count = 160  # at 999 variables: 71 packet rows, 90 search rows, 333 label rows a statement

    def item(n: int) -> PutItem:
        pid = f"01BULK{n:04d}"
        created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
        data = {"id": pid, "goal": f"bulk goal {n}", "tags": [f"t{n % 3}", "all"]}
        meta = PacketMeta(pid, created, str(data["goal"]), "u1")
        return PutItem(StoredPacket(meta, body_of(data)), packet.created_at_sort_key(created))

    items = [item(n) for n in range(count)]
    states = []
    for name in ("one-by-one", "bulk"):
        store = SqliteStore(tmp_path / f"{name}.db")
        if name == "bulk":
            assert store.put_many(items) == [True] * count
        else:
            for it in items:
                store.put_packet(it.packet, sort_key=it.sort_key)
        states.append(
            (
                {it.packet.meta.id: store.get_packet(it.packet.meta.id) for it in items},
                [m.id for m in store.list_packets(owner_id="u1", tag="t1", limit=200).items],
                sorted(ids(store.search(search.parse("bulk"), scopes=[("u1", None)], limit=200))),
                store.usage("u1"),
            )
        )
        store.close()
        with sqlite3.connect(tmp_path / f"{name}.db") as check:
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    one, bulk = states
    assert bulk == one
    assert len(bulk[0]) == count and None not in bulk[0].values()
    assert len(bulk[1]) == len([n for n in range(count) if n % 3 == 1])
    assert len(bulk[2]) == count


@pytest.mark.parametrize("count", [0, 1, 332, 333, 334, 667])
def test_rows_go_in_many_to_a_statement_in_order(count: int) -> None:
    """SQLite copies each page a statement changes into a statement journal, so a bulk
    write's rows go in as many to a statement as the connection's variables allow (999
    here, the limit of SQLite before 3.32: 333 rows of three), not one statement a row;
    every row lands, in order."""
    db = sqlite3.connect(":memory:")
    db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    db.execute("CREATE TABLE t (n INTEGER NOT NULL, a TEXT NOT NULL, b BLOB)")
    statements: list[int] = []

    class Counted:
        def getlimit(self, category: int) -> int:
            return db.getlimit(category)

        def execute(self, sql: str, values: list[object]) -> None:
            statements.append(len(values) // 3)
            db.execute(sql, values)

        def executemany(self, sql: str, batches: list[list[object]]) -> None:
            statements.extend(len(values) // 3 for values in batches)
            db.executemany(sql, batches)

    rows = [(n, f"row {n}", bytes([n % 256])) for n in range(count)]
    _insert_rows(Counted(), "INSERT INTO t (n, a, b)", rows)  # type: ignore[arg-type]
    assert db.execute("SELECT n, a, b FROM t ORDER BY rowid").fetchall() == rows
    assert sum(statements) == count
    assert all(0 < size <= 333 for size in statements)
    assert len(statements) == -(-count // 333)


def test_the_search_rows_of_a_bulk_write_go_in_one_statement(tmp_path: Path) -> None:
    """FTS5 writes the search rows it holds in memory out as a segment of their own at
    every statement's savepoint: a chunk of an import (500 packets) puts its search rows
    in one statement, so they make one segment, not one for every 90 packets (the rows of
    a statement at 999 variables), which FTS5 then merges again. The limit is SQLite's
    default since 3.32, capped there where a build sets it higher."""
    count = 500
    statements: list[str] = []

    class Traced(SqliteStore):
        def _connect(self) -> sqlite3.Connection:
            conn = super()._connect()
            conn.set_trace_callback(statements.append)
            return conn

    def item(n: int) -> PutItem:
        pid = f"01ONE{n:05d}"
        data = {"id": pid, "goal": f"one statement {n}", "tags": ["x"]}
        meta = PacketMeta(pid, "2026-01-01T00:00:00Z", str(data["goal"]), "u1")
        return PutItem(StoredPacket(meta, body_of(data)), f"k{n:05d}")

    store = Traced(tmp_path / "ltm.db")
    statements.clear()
    assert store.put_many([item(n) for n in range(count)]) == [True] * count
    # (The trace repeats a statement's text for each run of a trigger it fires.)
    search_rows = {sql for sql in statements if sql.startswith("INSERT INTO packet_fts")}
    packet_rows = {sql for sql in statements if sql.startswith("INSERT OR REPLACE INTO packets")}
    assert len(search_rows) == 1 and len(packet_rows) == 1
    # Every row is searchable: the newest ranked for a common word, the oldest by its own.
    found = ids(store.search(search.parse("statement"), scopes=[("u1", None)], limit=600))
    assert len(found) == min(count, RANK_WINDOW)
    assert ids(store.search(search.parse('"statement 0"'), scopes=[("u1", None)])) == ["01ONE00000"]
    store.close()


def test_a_write_with_its_derived_parts_made_ahead_stores_the_same_rows(tmp_path: Path) -> None:
    """``PutItem.derived`` (``SqliteStore.derive``, run in an import's workers) spares the
    write its own work on the bytes, and changes nothing it stores: the search row, the
    labels and the packed body are those a plain write makes."""
    bodies = [
        body_of(EXAMPLE),
        body_of({**EXAMPLE, "id": "01DERIVED001", "tags": ["b", "a", "b"], "project": {}}),
        # Odd text (a NUL, a surrogate pair, CRLF) and no fields but an id and a goal.
        body_of({"id": "01DERIVED002", "goal": "a\x00b \U0001f600 e\u0301", "tags": ["\r\n"]}),
        b"not a packet at all",  # a lenient oddity: no search text
    ]
    rows = []
    for ahead in (None, "bytes", "decoded"):
        store = SqliteStore(tmp_path / f"{ahead}.db")
        items = []
        for n, body in enumerate(bodies):
            meta = PacketMeta(f"01DERIVED{n:03d}", f"2026-01-01T00:00:0{n}Z", f"goal {n}", "u1")
            derived = None
            if ahead == "bytes":
                derived = SqliteStore.derive(body)
            elif ahead == "decoded":  # what the bytes decode to, given (Checked.ordered)
                derived = SqliteStore.derive(body, search.load(body))
            items.append(PutItem(StoredPacket(meta, body), f"k{n}", derived=derived))
        assert store.put_many(items) == [True] * len(bodies)
        db = store._conn()
        rows.append(
            (
                db.execute("SELECT * FROM packets ORDER BY doc").fetchall(),
                db.execute("SELECT rowid, * FROM packet_fts ORDER BY rowid").fetchall(),
                db.execute("SELECT * FROM labels ORDER BY label").fetchall(),
                db.execute("SELECT * FROM label_packets ORDER BY 1, 2, 3").fetchall(),
                [store.get_packet(f"01DERIVED{n:03d}") for n in range(len(bodies))],
            )
        )
        store.close()
    assert rows[0] == rows[1] == rows[2]
    assert [held.body for held in rows[1][4]] == bodies  # type: ignore[union-attr]
    # Each search row holds the fields of the canonical bytes, in the index's column order.
    for (_rowid, *texts), body in zip(rows[1][1], bodies, strict=True):
        fields = search.fields_of(search.load(body))
        assert texts == [fields[name] for name in _TEXT_COLUMNS]


def test_a_prepared_packet_is_derived_from_its_data_only_when_that_is_what_its_bytes_decode_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``prepare`` hands ``derive`` the checked dict instead of the bytes to decode only
    when the dict is in canonical order (``Checked.ordered``): the search text follows
    the order of the keys, so a dict in another order must be read from its bytes."""
    from ltm.service import packets

    given: list[bool] = []
    real = SqliteStore.derive

    def spy(body: bytes, data: dict[str, object] | None = None) -> object:
        given.append(data is not None)
        return real(body, data)

    decision = {"what": "w", "why": "y", "consequences": "c", "locked": True}
    ordered = {**EXAMPLE, "decisions": [decision]}
    scrambled = {**EXAMPLE, "decisions": [dict(reversed(list(decision.items())))]}
    monkeypatch.setattr(SqliteStore, "derive", staticmethod(spy))
    made = [
        packets.prepare(packet.check(data, lenient=True), derive=SqliteStore.derive).derived
        for data in (ordered, scrambled)
    ]
    assert given == [True, False]
    assert made[0] == made[1] == real(body_of(ordered))


@pytest.mark.parametrize("door", ["push", "batch", "push_many"])
def test_every_write_door_hands_the_store_rows_derived_from_the_checked_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, door: str
) -> None:
    """A push, a batch and ``push_many`` derive a packet's rows from the dict they checked
    (its bytes decode to it), ahead of the write: the store is not left to decode the
    bytes again, and what it stores is what a write from the bytes stores."""
    from ltm.service import packets, tokens
    from ltm.store import sqlite as sqlite_store

    store = SqliteStore(tmp_path / "doors.db")
    user, _secret = tokens.issue(store, "dora", label="dora")
    decoded: list[bytes] = []
    real_load = search.load

    def load(body: bytes) -> object:
        decoded.append(body)
        return real_load(body)

    monkeypatch.setattr(search, "load", load)
    given: list[object] = []
    real_put = SqliteStore._put_together

    def put_together(
        self: SqliteStore, stored: StoredPacket, key: str, derived: Derived | None = None
    ) -> bool | BaseException:
        given.append(derived)
        return real_put(self, stored, key, derived)

    monkeypatch.setattr(SqliteStore, "_put_together", put_together)
    text = json.dumps(EXAMPLE)
    expected = sqlite_store.derive(body_of(EXAMPLE), EXAMPLE)
    try:
        if door == "push":
            packets.push(store, user, text.encode())
            assert given == [expected]
        elif door == "batch":
            (result,) = packets.push_batch(store, user, json.dumps({"packets": [text]}).encode())
            assert result.status == 201
        else:
            (result,) = packets.push_many(store, user, [EXAMPLE])
            assert isinstance(result, packets.PushResult)
        assert decoded == []  # the data was at hand: no decode of the canonical bytes
        stored = store._conn().execute("SELECT rowid, * FROM packet_fts").fetchall()
        assert len(stored) == 1
        fields = search.fields_of(EXAMPLE)
        assert list(stored[0][1:]) == [fields[name] for name in _TEXT_COLUMNS]
    finally:
        store.close()


@pytest.mark.parametrize("made", ["new", "migrated"])
def test_an_id_prefix_is_looked_up_by_a_range_of_its_scopes_ids(tmp_path: Path, made: str) -> None:
    """Not by reading every id of the scope: ``ltm ls`` and ``ltm search`` look up a prefix
    for each id they shorten, and a scope holds thousands."""
    path = tmp_path / "ltm.db"
    if made == "migrated":
        old_store(path)
    store = SqliteStore(path)
    try:
        for n in range(3):
            meta = PacketMeta(f"01PREFIX{n:04d}", "2026-01-01T00:00:00Z", "g", "u1", None, "p")
            store.put_packet(StoredPacket(meta, b"{}"), sort_key=meta.created_at)
        conn = store._conn()
        for project in (None, "p"):
            statements: list[str] = []
            conn.set_trace_callback(statements.append)
            found = store.packet_ids_with_prefix("01PREFIX", owner_id="u1", project=project)
            conn.set_trace_callback(None)
            assert found == ["01PREFIX0000", "01PREFIX0001"]
            (select,) = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
            plan = " ".join(str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + select))
            assert "packets_by_scope_id (scope=? AND id>? AND id<?)" in plan, plan
    finally:
        store.close()
