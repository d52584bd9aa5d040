"""Acknowledged means durable: SQLite syncs the WAL at every commit unless the operator opts out.

``PRAGMA synchronous`` reads 2 (FULL) by default on every connection the
store opens, in every thread; ``LTM_SQLITE_SYNC=normal`` (or ``ltm server run
--sqlite-sync normal``) makes it 1 (NORMAL). The CLI's embedded store follows
the same default and the same variable. Concurrent writes share commits
(group commit), yet each returns only once its own write is committed, and a
write that fails takes nobody else's with it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from serverkit import clean_env, init_db, ltm_server, run_server
from timing import scaled

from ltm import search
from ltm.store import Conflict, PacketMeta, PutItem, StoredPacket, User
from ltm.store import sqlite as sqlite_store
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
        thread.join(timeout=scaled(120))
    store.close()
    assert not problems, problems[:5]
    assert len(refused) == 16 * 7 and len(done) == 16 * 13
    with sqlite3.connect(db) as check:
        ids = {row[0] for row in check.execute("SELECT id FROM users")}
        displays = dict(check.execute("SELECT id, display FROM users").fetchall())
    assert ids == {"taken", *done}
    assert displays["taken"] == "taken"  # the colliding writes changed nothing


def test_a_write_alone_in_its_transaction_that_fails_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first write of a transaction has no savepoint to roll back to (it would copy
    every page it changes into the sub-journal): a failure rolls the transaction back
    whole, which holds that write alone, and the next write starts a new one."""
    store = SqliteStore(tmp_path / "a.db")
    store.put_many([PutItem(_packet("01KEPT", "u1"), "k")])
    real = store._write_packets

    def write_then_fail(db: sqlite3.Connection, *args: Any) -> None:
        real(db, *args)  # every row written, then a failure before the commit
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_write_packets", write_then_fail)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        store.put_many([PutItem(_packet(f"01LOST{n}", "u1"), "k") for n in range(3)])
    monkeypatch.undo()
    assert store.get_packet("01LOST0") is None and store.usage("u1").packets == 1
    hits = store.search(search.parse("goal"), scopes=[("u1", None)])
    assert [hit.meta.id for hit in hits] == ["01KEPT"]
    assert store.put_many([PutItem(_packet("01AFTER", "u1"), "k")]) == [True]
    store.close()
    with sqlite3.connect(tmp_path / "a.db") as check:
        ids = sorted(row[0] for row in check.execute("SELECT id FROM packets"))
        assert ids == ["01AFTER", "01KEPT"]
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# -- pushes written together (SqliteStore._put_together) --------------------------------


def _packet(pid: str, owner: str) -> StoredPacket:
    body = json.dumps({"id": pid, "goal": f"goal {pid}", "tags": ["combined"]}).encode()
    return StoredPacket(PacketMeta(pid, "2026-01-01T00:00:00Z", f"goal {pid}", owner), body)


class _Pushes:
    """Pushes on threads into a store whose first write is held open until ``release``.

    The pushes started while it is held wait for the next leader, which writes them
    together: each batch written is recorded (the ids, in order), and each push's
    answer (or exception) once it returns, with whether another connection saw the
    packet committed at that moment.
    """

    def __init__(self, store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self.batches: list[list[str]] = []
        self.answers: dict[str, object] = {}
        self.committed: dict[str, bool] = {}
        self.threads: list[threading.Thread] = []
        self._entered = threading.Event()
        self._release = threading.Event()
        real = store._put_in

        def put_in(db: sqlite3.Connection, parsed: list[Any]) -> list[Any]:
            self.batches.append([p.meta.id for p, _, _ in parsed])
            if len(self.batches) == 1:
                self._entered.set()
                self._release.wait(scaled(60))
            return real(db, parsed)

        monkeypatch.setattr(store, "_put_in", put_in)

    def start(self, packet: StoredPacket, key: str | None = None) -> None:
        """Push ``packet`` on a thread; return once it is written or waiting for a leader."""
        key = key or f"{packet.meta.id}/{packet.meta.owner_id}/{len(self.threads)}"
        waiting = len(self.store._waiting)

        def push() -> None:
            observer = sqlite3.connect(self.store.path)
            try:
                self.answers[key] = self.store.put_packet(packet, sort_key="k")
                row = observer.execute(
                    "SELECT owner_id FROM packets WHERE id = ?", (packet.meta.id,)
                ).fetchone()
                self.committed[key] = row == (packet.meta.owner_id,)
            except Exception as exc:
                self.answers[key] = exc
            finally:
                observer.close()

        thread = threading.Thread(target=push)
        thread.start()
        self.threads.append(thread)
        if len(self.threads) == 1:
            assert self._entered.wait(scaled(60)), "the first push never started its write"
        else:  # in the queue, in this order
            for _ in range(6000):
                if len(self.store._waiting) > waiting:
                    break
                threading.Event().wait(0.01)  # not a budget: a pause
            assert len(self.store._waiting) > waiting, "the push never queued"

    def finish(self) -> None:
        self._release.set()
        for thread in self.threads:
            thread.join(scaled(60))
        assert not any(thread.is_alive() for thread in self.threads)


def test_pushes_waiting_together_are_written_in_one_commit_each_committed_on_return(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(tmp_path / "a.db")
    pushes = _Pushes(store, monkeypatch)
    transactions = store._ended
    pushes.start(_packet("01FIRST", "u1"))
    for n in range(5):
        pushes.start(_packet(f"01NEXT{n}", "u1"))
    pushes.finish()
    assert pushes.batches == [["01FIRST"], [f"01NEXT{n}" for n in range(5)]]
    # Those that arrived while the first was written joined its write: one commit.
    assert store._ended == transactions + 1
    assert all(answer is True for answer in pushes.answers.values()), pushes.answers
    assert all(pushes.committed.values()) and len(pushes.committed) == 6
    assert store.usage("u1").packets == 6
    store.close()


def test_a_leader_done_hands_the_lead_to_the_first_push_still_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader that takes no more once it wrote one push leaves the rest to the next."""
    monkeypatch.setattr(sqlite_store, "COMBINED_MAX", 1)
    store = SqliteStore(tmp_path / "a.db")
    pushes = _Pushes(store, monkeypatch)
    transactions = store._ended
    pushes.start(_packet("01FIRST", "u1"))
    for n in range(4):
        pushes.start(_packet(f"01NEXT{n}", "u1"))
    pushes.finish()
    assert pushes.batches == [["01FIRST"], [f"01NEXT{n}" for n in range(4)]]
    assert store._ended == transactions + 2
    assert all(answer is True for answer in pushes.answers.values()), pushes.answers
    assert all(pushes.committed.values()) and len(pushes.committed) == 5
    assert not store._waiting and not store._led  # the last leader left nobody leading
    pushes = _Pushes(store, monkeypatch)  # and the next push leads at once
    pushes.start(_packet("01LATER", "u1"))
    pushes.finish()
    assert pushes.answers and all(pushes.committed.values())
    store.close()


def test_pushes_written_together_are_judged_each_as_if_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(tmp_path / "a.db")
    pushes = _Pushes(store, monkeypatch)
    pushes.start(_packet("01FIRST", "u1"))
    pushes.start(_packet("01SAME", "u1"), "new")
    pushes.start(_packet("01SAME", "u2"), "someone else's")
    pushes.start(_packet("01SAME", "u1"), "replaced")
    pushes.start(_packet("01FIRST", "u2"), "taken before")
    pushes.finish()
    assert len(pushes.batches) == 2 and len(pushes.batches[1]) == 4
    assert pushes.answers["new"] is True
    assert isinstance(pushes.answers["someone else's"], Conflict)
    assert pushes.answers["replaced"] is False
    assert isinstance(pushes.answers["taken before"], Conflict)
    held = store.get_packet("01SAME")
    assert held is not None and held.meta.owner_id == "u1"
    assert store.usage("u1").packets == 2 and store.usage("u2").packets == 0
    store.close()


def test_a_push_that_fails_a_combined_write_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(tmp_path / "a.db")
    real = SqliteStore._write_packets

    def write_packets(db: sqlite3.Connection, accepted: dict[str, Any], stored: Any) -> None:
        if "01BAD" in accepted:
            raise RuntimeError("this packet cannot be written")
        real(db, accepted, stored)

    monkeypatch.setattr(SqliteStore, "_write_packets", staticmethod(write_packets))
    pushes = _Pushes(store, monkeypatch)
    pushes.start(_packet("01FIRST", "u1"))
    pushes.start(_packet("01GOOD1", "u1"))
    pushes.start(_packet("01BAD", "u1"))
    pushes.start(_packet("01GOOD2", "u1"))
    pushes.finish()
    assert pushes.batches[1] == ["01GOOD1", "01BAD", "01GOOD2"]  # then each alone
    answers = {key.split("/")[0]: answer for key, answer in pushes.answers.items()}
    assert answers["01GOOD1"] is True and answers["01GOOD2"] is True
    assert isinstance(answers["01BAD"], RuntimeError)
    assert all(pushes.committed.values()) and len(pushes.committed) == 3  # not the bad one
    assert store.get_packet("01BAD") is None
    assert {store.get_packet(p) is not None for p in ("01FIRST", "01GOOD1", "01GOOD2")} == {True}
    assert store.usage("u1").packets == 3
    store.close()


@pytest.mark.parametrize("always", [False, True])
def test_pushes_whose_combined_commit_fails_are_not_acknowledged_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, always: bool
) -> None:
    """The commit of a combined write fails (as on an I/O error): nothing of it is stored,
    and each push is written again alone, answered by its own commit (or its failure)."""
    store = SqliteStore(tmp_path / "a.db")
    real_commit = store._commit
    failed: list[int] = []

    def commit(number: int) -> None:
        if always or not failed:
            failed.append(number)
            with store._ops:  # what a failed COMMIT leaves: rolled back, the transaction over
                assert store._writer is not None
                store._writer.execute("ROLLBACK")
                store._end(number, "disk I/O error")
            raise sqlite3.OperationalError("disk I/O error")
        real_commit(number)

    monkeypatch.setattr(store, "_commit", commit)
    pushes = _Pushes(store, monkeypatch)
    pushes.start(_packet("01FIRST", "u1"))
    pushes.start(_packet("01SECOND", "u1"))
    pushes.start(_packet("01THIRD", "u2"))
    pushes.finish()
    assert failed and pushes.batches[:2] == [["01FIRST"], ["01SECOND", "01THIRD"]]
    assert pushes.batches[2:] == [["01FIRST"], ["01SECOND"], ["01THIRD"]]  # each alone
    if always:
        assert all(isinstance(a, sqlite3.OperationalError) for a in pushes.answers.values())
        assert not pushes.committed and len(pushes.answers) == 3
        assert store.usage("u1").packets == 0 and store.get_packet("01FIRST") is None
    else:
        assert all(answer is True for answer in pushes.answers.values()), pushes.answers
        assert all(pushes.committed.values()) and len(pushes.committed) == 3
        assert store.usage("u1").packets == 2 and store.usage("u2").packets == 1
    store.close()


def test_checkpoints_are_left_to_a_thread_of_the_process_outside_the_writers_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite would checkpoint inside a COMMIT, in the writers' lock, where every writer
    waits for it: the writer connection only keeps it as a bound for bulk writes."""
    store = SqliteStore(tmp_path / "a.db")
    autocheckpoint = store._writer_conn().execute("PRAGMA wal_autocheckpoint").fetchone()
    assert autocheckpoint == (sqlite_store.AUTOCHECKPOINT_PAGES,)
    ran = threading.Event()
    seen: list[tuple[str, int]] = []
    real = SqliteStore._checkpoint

    def checkpoint(conn: sqlite3.Connection) -> None:
        seen.append((threading.current_thread().name, store._open))
        real(conn)
        ran.set()

    monkeypatch.setattr(SqliteStore, "_checkpoint", staticmethod(checkpoint))
    store._commits = 0
    for n in range(sqlite_store.CHECKPOINT_EVERY - 1):
        store.put_packet(_packet(f"01CK{n}", "u1"), sort_key="k")
    assert store._checkpointer is None  # not due yet
    store.put_packet(_packet("01CKLAST", "u1"), sort_key="k")
    assert ran.wait(scaled(60)), "the checkpointer never ran"
    assert seen == [("ltm-sqlite-checkpoint", 0)]  # its own thread, no write open
    assert store._checkpointer is not None
    thread = store._checkpointer[0]
    store.close()
    assert not thread.is_alive()  # stopped before its connection closed
    reopened = SqliteStore(tmp_path / "a.db")
    assert reopened.usage("u1").packets == sqlite_store.CHECKPOINT_EVERY
    reopened.close()


# -- a database that cannot take a write just now ----------------------------------------


def test_a_full_disk_is_a_503_the_cli_keeps_its_push_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk with no room left (SQLite's "database or disk is full") is the server's
    state for the moment, not the caller's fault: 503 with Retry-After, as for DynamoDB
    throttling, so a client's outbox keeps the push (a 500 loses one piped on stdin);
    once there is room again, pushes are stored. The server's own store, through the
    WSGI adapter ``ltm server run`` serves; the disk's limit is SQLite's own
    (``max_page_count``), met as a full disk is."""
    import io

    from serverkit import make_packet

    from ltm.cli.server.loader import load_app
    from ltm.cli.server.wsgi import ChaliceWSGI
    from ltm.service import tokens

    monkeypatch.setenv("LTM_STORE", "sqlite")
    monkeypatch.setenv("LTM_DB", str(tmp_path / "server.db"))
    module = load_app()
    module.close_store()  # another test may have opened a store in this process
    try:
        store = module.get_store()
        assert isinstance(store, SqliteStore)
        _, token = tokens.issue(store, "alice")
        app = ChaliceWSGI(module.app)

        def push() -> tuple[str, dict[str, str], bytes]:
            notes = [{"what": f"note {n}: " + "y" * 900, "why": "room"} for n in range(20)]
            body = json.dumps(make_packet(decisions=notes)).encode()
            environ = {
                "REQUEST_METHOD": "POST",
                "PATH_INFO": "/v1/packets",
                "CONTENT_TYPE": "application/json",
                "CONTENT_LENGTH": str(len(body)),
                "HTTP_AUTHORIZATION": f"Bearer {token}",
                "wsgi.input": io.BytesIO(body),
            }
            answer: list[Any] = []
            out = b"".join(app(environ, lambda status, headers: answer.extend([status, headers])))
            return answer[0], dict(answer[1]), out

        first = push()
        assert first[0].startswith("201"), first
        writer = store._writer_conn()
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {pages}")  # not one page more
        status, headers, out = push()
        assert (status[:3], headers.get("Retry-After"), json.loads(out)) == (
            "503",
            "1",
            {"error": "the server's database is busy; try again shortly"},
        )
        writer.execute(f"PRAGMA max_page_count = {pages * 100}")  # room again
        assert push()[0].startswith("201")
    finally:
        module.close_store()


def test_a_database_full_or_locked_past_its_wait_is_unavailable_not_a_fault(tmp_path: Path) -> None:
    """What the server answers 503 for, in SQLite's own errors: a full disk, and a write
    lock another program (``sqlite3`` at a prompt, say) held past the busy timeout."""
    from ltm.store import unavailable

    path = tmp_path / "a.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("CREATE TABLE t (x BLOB)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)  # not a budget: no wait
    with pytest.raises(sqlite3.OperationalError) as locked:
        other.execute("BEGIN IMMEDIATE")
    holder.execute("ROLLBACK")
    pages = other.execute("PRAGMA page_count").fetchone()[0]
    other.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.OperationalError) as full:
        other.execute("INSERT INTO t VALUES (zeroblob(100000))")
    with pytest.raises(sqlite3.OperationalError) as wrong:
        other.execute("SELECT * FROM no_such_table")
    holder.close()
    other.close()
    found = (unavailable(locked.value), unavailable(full.value), unavailable(wrong.value))
    assert found == (True, True, False)
