"""One writer process for the pushes of every worker process (``ltm server run``, POSIX).

A push handed to the writer is judged and answered as one written in its own
process (a new packet, a replacement, someone else's id, over the quota), and
only once committed; a writer gone is an error for the push, never a wait;
and the writer, forked as a process of its own, stops with the server and
stops it should it die.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from serverkit import SERVER, clean_env, init_db, make_packet, running_server, server_processes

from ltm.cli.server import writer as writer_module
from ltm.cli.server.writer import PROCESS_NAME, Writer
from ltm.store import Conflict, OverQuota, PacketMeta, Quota, StoredPacket, StoreError
from ltm.store import sqlite as sqlite_store
from ltm.store.sqlite import SqliteStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the writer is forked (POSIX)")


def _packet(pid: str, owner: str, size: int = 0) -> StoredPacket:
    body = json.dumps({"id": pid, "goal": f"goal {pid}", "pad": "x" * size}).encode()
    return StoredPacket(PacketMeta(pid, "2026-01-01T00:00:00Z", f"goal {pid}", owner), body)


def _open(path: Path) -> SqliteStore:
    store = SqliteStore(path)
    store.quota = Quota(packets=3, bytes=1 << 20)
    return store


@pytest.fixture
def handed(tmp_path: Path) -> Iterator[tuple[SqliteStore, Writer]]:
    """This process's store, its pushes handed to a writer forked for it (3 threads)."""
    path = tmp_path / "a.db"
    _open(path).close()  # made (and migrated) before the fork
    writer = Writer.start(path, lambda: _open(path), processes=1, threads=3)
    writer.attach(0)
    store = _open(path)
    try:
        yield store, writer
    finally:
        store.close()
        writer.detach()
        _, status = os.waitpid(writer.pid, 0)
        assert status == 0  # it exits, cleanly, once the last end is closed


def test_a_handed_push_is_answered_as_a_push_written_here(
    handed: tuple[SqliteStore, Writer],
) -> None:
    store, _writer = handed
    assert store.put_packet(_packet("01NEW", "u1"), sort_key="k") is True
    assert store.put_packet(_packet("01NEW", "u1"), sort_key="k") is False  # replaced
    with pytest.raises(Conflict):
        store.put_packet(_packet("01NEW", "u2"), sort_key="k")  # someone else's id
    store.put_packet(_packet("01TWO", "u1"), sort_key="k")
    store.put_packet(_packet("01THREE", "u1"), sort_key="k")
    with pytest.raises(OverQuota) as over:  # the writer's store holds the bound
        store.put_packet(_packet("01FOUR", "u1"), sort_key="k")
    assert over.value.usage.packets == 4 and over.value.quota == Quota(3, 1 << 20)
    got = store.get_packet("01NEW")
    assert got is not None and got.body == _packet("01NEW", "u1").body
    assert store.usage("u1").packets == 3
    # Written by the writer: this process never opened its own write connection.
    assert store._writer is None


def test_pushes_from_many_threads_are_each_committed_when_answered(
    handed: tuple[SqliteStore, Writer], tmp_path: Path
) -> None:
    store, _writer = handed
    answers: dict[str, object] = {}
    seen: dict[str, bool] = {}

    def push(n: int) -> None:
        for i in range(6):  # two users a thread, three packets each: within the bound
            pid = f"01T{n}N{i}"
            answers[pid] = store.put_packet(_packet(pid, f"u{n}{i % 2}"), sort_key="k")
            other = sqlite3.connect(tmp_path / "a.db")  # another connection sees it at once
            seen[pid] = bool(other.execute("SELECT 1 FROM packets WHERE id = ?", (pid,)).fetchone())
            other.close()

    threads = [threading.Thread(target=push, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 18 and all(answer is True for answer in answers.values()), answers
    assert all(seen.values())
    assert {store.usage(f"u{n}{k}").packets for n in range(3) for k in range(2)} == {3}


def test_a_push_gets_an_error_when_the_writer_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    _open(path).close()
    writer = Writer.start(path, lambda: _open(path), processes=1, threads=2)
    writer.attach(0)
    store = _open(path)
    try:
        os.kill(writer.pid, signal.SIGKILL)
        os.waitpid(writer.pid, 0)
        for _ in range(2):  # the first finds it gone; the next is refused at once
            with pytest.raises(StoreError, match="writer process stopped"):
                store.put_packet(_packet("01LOST", "u1"), sort_key="k")
        assert store.get_packet("01LOST") is None
    finally:
        writer.detach()
        store.close()
    # Detached, the process writes its pushes itself again.
    store = _open(path)
    assert store.put_packet(_packet("01HERE", "u1"), sort_key="k") is True
    store.close()


def test_more_threads_than_connections_each_wait_for_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "MAX_CHANNELS", 2)
    path = tmp_path / "a.db"
    SqliteStore(path).close()
    writer = Writer.start(path, lambda: SqliteStore(path), processes=1, threads=6)
    writer.attach(0)
    store = SqliteStore(path)
    answers: list[object] = []
    try:
        threads = [
            threading.Thread(
                target=lambda n=n: answers.append(
                    store.put_packet(_packet(f"01W{n}", "u1"), sort_key="k")
                )
            )
            for n in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert answers == [True] * 6
    finally:
        writer.detach()
        store.close()
    assert os.waitpid(writer.pid, 0)[1] == 0


def test_a_writer_that_cannot_start_leaves_nothing_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    before = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").exists() else None
    monkeypatch.setattr(os, "fork", no_fork)
    with pytest.raises(OSError):
        Writer.start(tmp_path / "a.db", lambda: None, processes=2, threads=4)
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before
    assert not sqlite_store._HANDED


def test_an_answer_that_does_not_pickle_comes_back_as_a_store_error() -> None:
    class Odd(Exception):
        def __reduce__(self) -> tuple[object, ...]:
            raise TypeError("not this one")

    answer = writer_module._answer(Odd("disk on fire"))
    back = writer_module.pickle.loads(answer)
    assert isinstance(back, StoreError) and "Odd: disk on fire" in str(back)


def test_pushes_are_written_here_again_once_detached(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    _open(path).close()
    writer = Writer.start(path, lambda: _open(path), processes=1, threads=1)
    writer.attach(0)
    assert sqlite_store._HANDED
    writer.detach()
    assert not sqlite_store._HANDED
    _, status = os.waitpid(writer.pid, 0)
    assert status == 0


# -- the server ---------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "zombie" in status.read_text()


linux = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")


@linux
def test_a_server_of_several_processes_pushes_through_one_writer_and_stops_it_last(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path, "--workers", "2", "--threads", "2") as server:
        children = server_processes(server.proc.pid)
        assert sorted(children.values()) == sorted(["ltm", PROCESS_NAME])  # a worker, the writer
        clients = [server.client(server.root_token) for _ in range(12)]  # over both processes
        ids = []
        for i, client in enumerate(clients):
            packet = make_packet(goal=f"writer test {i}")
            assert client.post("/v1/packets", json=packet).status_code == 201
            ids.append(packet["id"])
        again = clients[3].post("/v1/packets", json=make_packet(id=ids[0], goal="replaced"))
        assert again.status_code == 201
        for client, pid in zip(clients, ids, strict=True):  # each process reads every push
            assert client.get(f"/v1/packets/{pid}").status_code == 200
        assert clients[0].get(f"/v1/packets/{ids[0]}").json()["goal"] == "replaced"
        assert server.stop() == 0
    assert all(_gone(pid) for pid in children)
    assert "stopped" in server.logs() and "Traceback" not in server.logs()


@linux
def test_a_dead_writer_stops_the_server(tmp_path: Path) -> None:
    with running_server(tmp_path, "--workers", "2") as server:
        names = server_processes(server.proc.pid)
        (writer,) = [pid for pid, name in names.items() if name == PROCESS_NAME]
        os.kill(writer, signal.SIGKILL)
        assert server.proc.wait(timeout=20) == 1
        logs = server.logs()
        assert "ltm server: the writer process died (killed by SIGKILL); stopping" in logs
        assert "ltm server: a process died; stopped" in logs


@linux
def test_a_server_whose_writer_cannot_start_says_so_in_one_line_and_never_listens(
    tmp_path: Path,
) -> None:
    # 8 processes of 16 threads want 128 socket pairs for the writer: 256 descriptors,
    # past this limit (the listening sockets and the interpreter's own fit under it).
    # The limit is set by a shell in the child: no preexec_fn in a process with threads.
    db = tmp_path / "server.db"
    init_db(db)
    argv = [*SERVER, "run", "--db", str(db), "--addr", "127.0.0.1:0", "--workers", "8"]
    done = subprocess.run(
        ["sh", "-c", 'ulimit -n 200 && exec "$@"', "sh", *argv, "--threads", "16"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert done.returncode == 1
    assert "cannot start the writer process" in done.stderr
    assert "listening" not in done.stderr and "Traceback" not in done.stderr
