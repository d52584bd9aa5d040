"""Crash safety: kill -9 the server in the middle of a burst of pushes, then restart it.

Every push that got its 201 must be there afterwards, byte-identical, and the
database must pass ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpkit
import httpx
from serverkit import init_db, make_packet, run_server
from timing import scaled

from ltm import packet


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_kill_9_mid_burst_keeps_every_acknowledged_packet(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    root = init_db(db)
    server = run_server(db, tmp_path / "server.log", root)
    tokens = [server.issue(f"writer{i}")[1] for i in range(4)]
    owner = server.client(tokens[0])
    assert owner.post("/v1/teams", json={"name": "crash"}).status_code == 201

    acknowledged: dict[str, tuple[str, bytes]] = {}  # id -> (token, canonical bytes)
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[str] = []

    def writer(token: str, team: str | None) -> None:
        with httpkit.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as c:
            while not stop.is_set():
                data = make_packet(goal=f"crash test {time.time_ns()}", tags=["crash"])
                try:
                    r = c.post("/v1/packets", json=data, params={"team": team} if team else {})
                except httpx.HTTPError:
                    continue  # the server died under this request: not acknowledged
                if r.status_code == 201:
                    with lock:
                        acknowledged[data["id"]] = (token, packet.canonical_bytes(data))
                elif r.status_code < 500:
                    errors.append(r.text)

    threads = [
        threading.Thread(target=writer, args=(tokens[i % 4], "crash" if i == 0 else None))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + scaled(30)
    while len(acknowledged) < 400 and time.monotonic() < deadline:
        time.sleep(0.01)
    # Mid-burst, writers still sending: SIGKILL every server process at once
    # (the main one and its forked workers), so none gets to finish anything.
    workers = _children(server.proc.pid)
    for pid in [server.proc.pid, *workers]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    server.proc.wait(timeout=scaled(10))
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=scaled(30))
    assert not errors, errors[:3]
    assert len(acknowledged) >= 400

    db_conn = sqlite3.connect(db)
    try:
        assert db_conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db_conn.close()

    restarted = run_server(db, tmp_path / "server.log", root)
    try:
        clients = {t: restarted.client(t) for t in tokens}
        for packet_id, (token, body) in acknowledged.items():
            r = clients[token].get(f"/v1/packets/{packet_id}")
            assert r.status_code == 200, packet_id
            assert r.content == body
        r = clients[tokens[0]].get("/v1/packets", params={"team": "crash", "limit": 1000})
        assert r.status_code == 200
    finally:
        assert restarted.stop() == 0
    db_conn = sqlite3.connect(db)
    try:
        assert db_conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db_conn.close()
