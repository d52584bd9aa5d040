"""Opening a SQLite store an older ltm left: every release's store upgrades, keeps its
packets, tokens, teams and search index, and works for what today's code does with it.

The stores are built here, not by an old checkout: with the migrations of the release
in question, and rows written in that release's layout (``_index_v6`` is the search
index writer of schema 6 to 10).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from serverkit import ltm_server
from timing import scaled

from ltm import packet, search
from ltm.errors import Failure
from ltm.examples import example_bytes
from ltm.service import packets, tokens
from ltm.service import search as searching
from ltm.store.sqlite import SqliteStore
from ltm.store.sqlite_schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Migration,
    _index_v6,
    _migrate_root_user,
    _statements,
)

TOKEN = "ltm_" + "a" * 64
OWNER = "01JS5OWNER0000000000000000"
OLD_ID = "01JS5OLDPACKET000000000001"
NEW_ID = "01JS5NEWPACKET000000000002"


def _run(db: sqlite3.Connection, steps: Sequence[Migration]) -> None:
    for step in steps:
        if callable(step):
            step(db)
        else:
            for statement in _statements(step):
                db.execute(statement)


def released_store(path: Path, steps: Sequence[Migration]) -> None:
    """A store as a release whose migrations were ``steps`` left it (``user_version`` the
    count of them), holding one user with a token and one packet in the search index."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN")
    _run(db, steps)
    db.execute(
        "INSERT INTO users (id, display, created_at) VALUES (?, 'ana', '2026-11-24')", (OWNER,)
    )
    db.execute(
        "INSERT INTO tokens (token_hash, label, user_id, created_at) VALUES (?, 'ana', ?, ?)",
        (tokens.hash_token(TOKEN), OWNER, "2026-11-24T00:00:00Z"),
    )
    data = {**json.loads(example_bytes()), "id": OLD_ID, "goal": "Migrate the billing cron jobs"}
    body = packet.canonical_bytes(data)
    scope, created = f"u:{OWNER}", str(data["created_at"])
    sort_key = packet.created_at_sort_key(created)
    db.execute(
        "INSERT INTO packets (id, scope, owner_id, team_id, sort_key, created_at, goal,"
        " conforming, body, project, parent_id) VALUES (?, ?, ?, NULL, ?, ?, ?, 1, ?, ?, ?)",
        (
            OLD_ID,
            scope,
            OWNER,
            sort_key,
            created,
            data["goal"],
            body,
            search.project_of(data),
            search.parent_of(data),
        ),
    )
    _index_v6(db, OLD_ID, scope, sort_key, data)
    db.execute(f"PRAGMA user_version = {len(steps)}")
    db.execute("COMMIT")
    db.close()


def _root_user(db: sqlite3.Connection) -> None:
    _migrate_root_user(db)


# Two releases of 2026-11-24 numbered their last migration otherwise than every release
# since: the first had 8 give the first user a ULID (today's 10), without the usage
# table (today's 8); the next had the usage table as 8 and that step as 9, without
# OAuth's columns and table (today's 9).
RELEASES: dict[str, Callable[[], list[Migration]]] = {
    "root user as 8": lambda: [*MIGRATIONS[:7], _root_user],
    "root user as 9": lambda: [*MIGRATIONS[:8], _root_user],
    "schema 10": lambda: list(MIGRATIONS[:10]),
}


@pytest.mark.parametrize("release", RELEASES)
def test_a_store_of_every_release_upgrades_and_works(tmp_path: Path, release: str) -> None:
    path = tmp_path / "ltm.db"
    released_store(path, RELEASES[release]())
    store = SqliteStore(path)
    try:
        caller = tokens.credential(f"Bearer {TOKEN}")
        # The token signs in (it reads the columns OAuth added to tokens).
        assert tokens.authenticate(store, f"Bearer {TOKEN}").id == OWNER
        # The old packet lists, reads and is found by its words.
        assert [m.id for m in packets.list_(store, caller)] == [OLD_ID]
        assert packets.get(store, caller, OLD_ID).meta.owner_id == OWNER
        assert [h.meta.id for h in searching.search(store, caller, "billing")] == [OLD_ID]
        # A new packet is stored, and counted with the old one against the owner's bound.
        data = {**json.loads(example_bytes()), "id": NEW_ID, "goal": "Rotate the signing keys"}
        packets.push(store, caller, packet.canonical_bytes(data))
        assert {m.id for m in packets.list_(store, caller)} == {OLD_ID, NEW_ID}
        sizes = sum(len(store.get_packet(i).body) for i in (OLD_ID, NEW_ID))  # type: ignore[union-attr]
        assert store.usage(OWNER) == (2, sizes)
        # OAuth's items are kept (the authorization server in front of /mcp).
        now = datetime.now(UTC)
        store.put_oauth_item("client", "c1", {"name": "x"}, now + timedelta(hours=1), now=now)
        assert store.get_oauth_item("client", "c1", now) == {"name": "x"}
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


BEFORE_REPAIR = 16  # the latest schema before the repair (migration 17, ``_restore_skipped``)


def test_a_store_upgraded_by_the_release_before_the_repair_is_repaired(tmp_path: Path) -> None:
    """A store of those two releases that today's code opened before it knew of them is at
    the schema before the repair, still without the tables: the repair makes them."""
    path = tmp_path / "ltm.db"
    released_store(path, [*MIGRATIONS[:7], _root_user])
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("BEGIN")
        _run(db, MIGRATIONS[8:BEFORE_REPAIR])
        db.execute(f"PRAGMA user_version = {BEFORE_REPAIR}")
        db.execute("COMMIT")
    store = SqliteStore(path)
    try:
        caller = tokens.credential(f"Bearer {TOKEN}")
        data = {**json.loads(example_bytes()), "id": NEW_ID, "goal": "Rotate the signing keys"}
        packets.push(store, caller, packet.canonical_bytes(data))
        assert store.usage(OWNER).packets == 2
    finally:
        store.close()


def test_a_store_a_newer_ltm_wrote_is_refused_in_one_line_and_left_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "server.db"
    SqliteStore(path).close()
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("PRAGMA journal_mode = DELETE")  # as a newer ltm may keep it
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()

    with pytest.raises(Failure, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        SqliteStore(path)
    assert path.read_bytes() == before  # not switched to WAL, not migrated, not written

    for verb in (("tokens",), ("run", "--addr", "127.0.0.1:0")):
        result = ltm_server(*verb, "--db", str(path))
        assert result.returncode == 1, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("ltm: ") and "unexpected" not in line, line
        assert line.endswith(
            f"{path} has schema version {SCHEMA_VERSION + 1}, newer than this ltm"
            f" understands ({SCHEMA_VERSION}); upgrade ltm"
        )
    assert path.read_bytes() == before


def test_a_migration_killed_before_its_commit_is_run_again_by_the_next_open(
    tmp_path: Path,
) -> None:
    """Killed (``kill -9``, a power cut) at the worst moment, every step done and the
    commit not yet: the store is as the old release left it, and the next open migrates."""
    path = tmp_path / "ltm.db"
    released_store(path, RELEASES["schema 10"]())
    # Every migration runs, then the process kills itself where the commit would come.
    killer = (
        "import os, sys\n"
        "from ltm.store import sqlite\n"
        "sqlite.MIGRATIONS = (*sqlite.MIGRATIONS, lambda db: os.kill(os.getpid(), 9))\n"
        "sqlite.SqliteStore(sys.argv[1])\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", killer, str(path)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "compactly (once)" in killed.stderr  # it was under way
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA user_version").fetchone()[0] == 10
        assert db.execute("SELECT count(*) FROM search_docs").fetchone()[0] == 1

    store = SqliteStore(path)
    try:
        caller = tokens.credential(f"Bearer {TOKEN}")
        assert [h.meta.id for h in searching.search(store, caller, "billing")] == [OLD_ID]
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


# A word in each script written without spaces, inside a run of its packet's goal.
RUNS = {
    "01JS5JAPANESE000000000003": ("検索テストを直す", "テスト"),
    "01JS5CHINESE0000000000004": ("修复搜索功能的错误", "功能"),
    "01JS5KOREAN00000000000005": ("검색어자동완성오류", "자동완성"),
}


def _before_grams(path: Path) -> None:
    """Set the store at ``path`` back to the schema before ``packet_grams`` (17): its
    full-text index alone, where a run of those scripts is one word, and the trigger
    of that schema (the compact layout's)."""
    from ltm.store.sqlite_schema import _COMPACT_SWAP, GRAMS_VERSION

    (trigger,) = [
        sql
        for sql in _statements(_COMPACT_SWAP)
        if sql.strip().startswith("CREATE TRIGGER packets_unindex")
    ]
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("BEGIN")
        db.execute("DROP TABLE packet_grams")
        db.execute("DROP TRIGGER packets_unindex")
        db.execute(trigger)
        db.execute(f"PRAGMA user_version = {GRAMS_VERSION - 1}")
        db.execute("COMMIT")


def test_a_store_indexed_before_pairs_finds_a_word_inside_a_run_once_upgraded(
    tmp_path: Path,
) -> None:
    """Packets in Japanese, Chinese and Korean saved before search cut such runs into
    pairs are indexed in pairs by the migration (a hook leaves it to a process of its
    own: it is pending), and then found by a word inside a run."""
    from ltm.store.sqlite import pending_migration

    path = tmp_path / "ltm.db"
    released_store(path, RELEASES["schema 10"]())
    caller = tokens.credential(f"Bearer {TOKEN}")
    store = SqliteStore(path)
    try:
        for pid, (goal, _word) in RUNS.items():
            data = {**json.loads(example_bytes()), "id": pid, "goal": goal}
            packets.push(store, caller, packet.canonical_bytes(data))
    finally:
        store.close()
    _before_grams(path)
    assert pending_migration(path)
    with sqlite3.connect(path) as db:  # the old index: the run is one word
        old = db.execute("SELECT rowid FROM packet_fts WHERE packet_fts MATCH 'テスト'")
        assert old.fetchall() == []

    store = SqliteStore(path)
    try:
        for pid, (_goal, word) in RUNS.items():
            assert [h.meta.id for h in searching.search(store, caller, word)] == [pid], word
        assert [h.meta.id for h in searching.search(store, caller, "billing")] == [OLD_ID]
        # The trigger the migration made again drops a deleted packet's pairs too.
        store.delete_packet("01JS5JAPANESE000000000003")
        assert searching.search(store, caller, "テスト") == []
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM packet_grams").fetchone()[0] == 2
    finally:
        store.close()
    assert not pending_migration(path)
