"""One process that writes the pushes of every worker process (``ltm server run``, POSIX).

SQLite commits one transaction at a time, and with ``synchronous=FULL`` each
commit waits for an fsync. Within one process, pushes that arrive together
share a commit (``SqliteStore._put_together``). Across worker processes they
could not: each process took the writers' lock in turn for the two or three
pushes its own threads held, and under load that lock was held most of the
time, much of it by a holder waiting for a core its process's other threads
were using. So, with several workers, one more process is forked first and
writes every worker's pushes: it takes what all of them sent, writes it in one
transaction (``SqliteStore.write_pushes``, the same judging and writing as a
process's own pushes) and answers each push once committed. A push is still
acknowledged only once on disk, and answered exactly as before; every other
write (tokens, teams, deletes, batch pushes) stays in its worker process,
under the same lock.

The channels are socket pairs made before the fork, one per worker thread (up
to ``MAX_CHANNELS`` a worker), so nothing outside the server's own processes
can reach them. The writer ignores
SIGTERM and SIGINT: it exits once every worker has closed its ends (a worker's
requests in flight finish first). Should it die, the main process stops the
server, as for a worker that dies, and a push waiting for it gets an error.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import socket
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from ltm.store import StoreError
from ltm.store import sqlite as sqlite_store

from .forking import exit_after, let_stops_in, stops_held

STOPPED = "the server's writer process stopped before answering: the push is not acknowledged"
PROCESS_NAME = "ltm-writer"  # what ps and top show for it (Linux)
# Connections to the writer a worker: one per thread, up to this many (past it, a push
# waits for a connection its process's other pushes hold for a round trip). Each is a
# socket pair, both ends open in the main process until the workers are forked.
MAX_CHANNELS = 16


def _dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


class Writer:
    """The writer process, seen from the main process and its workers."""

    def __init__(self, pid: int, path: Path, ends: list[socket.socket], per: int) -> None:
        self.pid = pid
        self._path = path
        self._ends = ends  # the workers' ends, ``per`` a worker, in worker order
        self._per = per
        self._channel: _Channel | None = None

    @classmethod
    def start(
        cls,
        path: Path,
        open_store: Callable[[], Any],
        *,
        processes: int,
        threads: int,
        close: Sequence[socket.socket] = (),
    ) -> Writer:
        """Fork the writer for ``processes`` workers of ``threads`` threads each, before any
        worker is forked. In it: ``close`` (the listening sockets) is closed, and
        ``open_store()`` opens the store it writes (a ``SqliteStore`` at ``path``).
        Raises OSError if it cannot (out of descriptors or processes), leaving nothing open.
        """
        per = min(threads, MAX_CHANNELS)
        pairs: list[tuple[socket.socket, socket.socket]] = []

        def write() -> None:
            let_stops_in(signal.SIG_IGN)  # from its first instant: it stops last, on its own
            _name(PROCESS_NAME)
            for sock in close:
                sock.close()
            for theirs, _ in pairs:
                theirs.close()
            serve_writes(open_store(), [Connection(ours.detach()) for _, ours in pairs])

        try:
            for _ in range(processes * per):
                pairs.append(socket.socketpair())
            with stops_held():
                pid = os.fork()
                if pid == 0:
                    exit_after(write)
        except OSError:
            for theirs, ours in pairs:
                theirs.close()
                ours.close()
            raise
        for _, ours in pairs:
            ours.close()
        return cls(pid, path, [theirs for theirs, _ in pairs], per)

    def attach(self, index: int) -> None:
        """In worker ``index`` (0: the main process), after the workers are forked: hand
        this process's pushes to the writer; close the other workers' ends."""
        mine: list[Connection] = []
        for number, end in enumerate(self._ends):
            if number // self._per == index:
                mine.append(Connection(end.detach()))
            else:
                end.close()
        self._ends = []
        self._channel = _Channel(mine)
        sqlite_store.hand_pushes(self._path, self._channel)

    def detach(self) -> None:
        """This process is done serving: write here again, and close its ends (the writer
        exits once every process has)."""
        sqlite_store.hand_pushes(self._path, None)
        for end in self._ends:
            end.close()
        self._ends = []
        if self._channel is not None:
            self._channel.close()


class _Channel:
    """A worker's ends: one connection per thread, lent to a push for its round trip."""

    def __init__(self, connections: list[Connection]) -> None:
        self._free: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        for connection in connections:
            self._free.put(connection)
        self._all = connections
        self._broken = False

    def __call__(self, push: Any) -> bool | BaseException:
        if self._broken:
            return StoreError(STOPPED)
        connection = self._free.get()
        try:
            connection.send_bytes(_dumps(push))
            outcome: bool | BaseException = pickle.loads(connection.recv_bytes())
        except (EOFError, OSError):
            self._broken = True
            return StoreError(STOPPED)
        except BaseException:
            # Cut short between the request and its answer: this connection's next
            # answer would be this push's. Nothing more goes through the channel.
            self._broken = True
            raise
        finally:
            self._free.put(connection)
        return outcome

    def close(self) -> None:
        self._broken = True
        for connection in self._all:
            connection.close()


def serve_writes(store: Any, connections: list[Connection]) -> None:
    """The writer's loop: write the pushes that arrived together in one write, answer each;
    return once every connection is closed."""
    try:
        live = list(connections)
        while live:
            pushes: list[Any] = []
            asking: list[Connection] = []
            for connection in wait(live):
                assert isinstance(connection, Connection)
                try:
                    pushes.append(pickle.loads(connection.recv_bytes()))
                except (EOFError, OSError):  # that worker thread's process is gone
                    live.remove(connection)
                    connection.close()
                    continue
                asking.append(connection)
            if not pushes:
                continue
            for connection, outcome in zip(asking, store.write_pushes(pushes), strict=True):
                with contextlib.suppress(OSError):  # its process died meanwhile
                    connection.send_bytes(_answer(outcome))
    finally:
        store.close()


def _name(name: str) -> None:
    """This process's name, where the system lets a process set it (Linux: PR_SET_NAME)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)


def _answer(outcome: bool | BaseException) -> bytes:
    """``outcome`` pickled; an exception that does not pickle, as a ``StoreError`` saying it."""
    try:
        return _dumps(outcome)
    except Exception:
        return _dumps(StoreError(f"{type(outcome).__name__}: {outcome}"))
