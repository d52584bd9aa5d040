"""Acknowledged means durable: SQLite syncs the WAL at every commit unless the operator opts out.

``PRAGMA synchronous`` reads 2 (FULL) by default on every connection the
store opens, in every thread; ``LTM_SQLITE_SYNC=normal`` (or ``ltm server run
--sqlite-sync normal``) makes it 1 (NORMAL). The CLI's embedded store follows
the same default and the same variable. Concurrent writes share commits
(group commit), yet each returns only once its own write is committed, and a
write that fails takes nobody else's with it.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from serverkit import clean_env, init_db, ltm_server, run_server

from ltm.store import Conflict, User
from ltm.store.sqlite import SqliteStore

FULL, NORMAL = 2, 1


def levels(store: SqliteStore) -> set[int]:
    """PRAGMA synchronous on this thread's connection and on a second thread's."""
    seen = {store._conn().execute("PRAGMA synchronous").fetchone()[0]}

    def other() -> None:
        seen.add(store._conn().execute("PRAGMA synchronous").fetchone()[0])

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    return seen


def test_full_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LTM_SQLITE_SYNC", raising=False)
    store = SqliteStore(tmp_path / "a.db")
    try:
        assert levels(store) == {FULL}
    finally:
        store.close()


@pytest.mark.parametrize(
    ("value", "level"), [("normal", NORMAL), ("NORMAL", NORMAL), ("full", FULL)]
)
def test_the_environment_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, level: int
) -> None:
    monkeypatch.setenv("LTM_SQLITE_SYNC", value)
    store = SqliteStore(tmp_path / "a.db")
    try:
        assert levels(store) == {level}
    finally:
        store.close()


def test_an_explicit_setting_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LTM_SQLITE_SYNC", "full")
    store = SqliteStore(tmp_path / "a.db", sync="normal")
    try:
        assert levels(store) == {NORMAL}
    finally:
        store.close()


def test_an_unknown_value_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LTM_SQLITE_SYNC", "off")
    with pytest.raises(ValueError, match="LTM_SQLITE_SYNC must be full or normal, got 'off'"):
        SqliteStore(tmp_path / "a.db")
    assert not (tmp_path / "a.db").exists()  # refused before anything was opened


def test_the_cli_embedded_store_is_full_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ltm save`` says "saved" only once the packet would survive a power loss."""
    from ltm.cli.client.backend import LocalBackend

    monkeypatch.delenv("LTM_SQLITE_SYNC", raising=False)
    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path / "data"))
    backend = LocalBackend.open()
    try:
        assert isinstance(backend.store, SqliteStore)
        assert levels(backend.store) == {FULL}
    finally:
        backend.store.close()


@pytest.mark.parametrize(
    ("args", "env", "shown"),
    [
        ((), {}, "full"),
        (("--sqlite-sync", "normal"), {}, "normal"),
        ((), {"LTM_SQLITE_SYNC": "normal"}, "normal"),
    ],
)
def test_server_run_says_which_it_applies(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], shown: str
) -> None:
    db = tmp_path / "server.db"
    root = init_db(db)
    server = run_server(db, tmp_path / "server.log", root, *args, env=clean_env(**env))
    try:
        first = server.logs().splitlines()[0]
        assert f"sqlite sync {shown})" in first, first
    finally:
        server.stop()


def test_server_run_refuses_an_unknown_setting_before_listening(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    init_db(db)
    result = ltm_server("run", "--db", str(db), "--addr", "127.0.0.1:0", "--sqlite-sync", "off")
    assert result.returncode != 0
    assert result.stderr.strip() == "ltm: --sqlite-sync must be full or normal, got 'off'"


def test_concurrent_writes_are_each_committed_before_they_return(tmp_path: Path) -> None:
    """16 threads write at once; every third write collides with an existing user and fails."""
    db = tmp_path / "a.db"
    store = SqliteStore(db)
    now = datetime.now(UTC)
    store.create_user(User("taken", "taken", now))
    done: list[str] = []
    refused: list[str] = []
    problems: list[str] = []

    def writer(t: int) -> None:
        observer = sqlite3.connect(db)  # another connection: it sees only what is committed
        try:
            for n in range(20):
                user_id = "taken" if n % 3 == 0 else f"u{t}-{n}"
                try:
                    store.create_user(User(user_id, f"{t}/{n}", now))
                except Conflict:
                    refused.append(f"{t}/{n}")
                    continue
                row = observer.execute("SELECT display FROM users WHERE id = ?", (user_id,))
                if row.fetchone() != (f"{t}/{n}",):
                    problems.append(f"{user_id} returned before it was committed")
                done.append(user_id)
        except Exception as exc:  # anything else is a failure of the test
            problems.append(repr(exc))
        finally:
            observer.close()

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    store.close()
    assert not problems, problems[:5]
    assert len(refused) == 16 * 7 and len(done) == 16 * 13
    with sqlite3.connect(db) as check:
        ids = {row[0] for row in check.execute("SELECT id FROM users")}
        displays = dict(check.execute("SELECT id, display FROM users").fetchall())
    assert ids == {"taken", *done}
    assert displays["taken"] == "taken"  # the colliding writes changed nothing
