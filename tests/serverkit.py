"""Helpers for the server suites: a real ``ltm server run`` subprocess on a loopback port.

``start_server`` runs ``ltm server init`` (capturing the root token from
stdout), then ``ltm server run --addr 127.0.0.1:0`` with its stderr in a file,
reads the port it bound and its web view's own address from its first line,
and waits for ``/v1/healthz``. The API answers at ``Server.url``
(127.0.0.1); the web pages at ``Server.web`` (``ltm-<hex>.localhost``), which
``Server.web_client`` reaches as a browser does.
Users are minted straight into the server's SQLite file through the service
layer (WAL lets the test process and the server share it), which is what
``ltm server issue-token`` does, without a subprocess per user.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpkit
import httpx
from timing import scaled

LTM = str(Path(sys.executable).with_name("ltm"))
# The stores the HTTP suites run the server on: its SQLite file (``ltm server
# run``), and DynamoDB (moto's server, over HTTP; see dynamo_moto.py).
SERVER_STORES = ("sqlite", "dynamodb")
EXAMPLE = Path(__file__).resolve().parent.parent / "chalicelib" / "example.json"
LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
WEB_VIEW = re.compile(r"web view at (http://ltm-[0-9a-f]{16}\.localhost:\d+)/web")


class LoopbackTransport(httpx.HTTPTransport):
    """Connects ``*.localhost`` to 127.0.0.1, as browsers do (this machine's resolver does not).

    RFC 6761 section 6.3 (https://www.rfc-editor.org/rfc/rfc6761#section-6.3):
    every ``*.localhost`` name is loopback. The Host header (and the cookie jar)
    keep the name; only the connection changes.
    """

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if not url.host.endswith(".localhost"):
            return super().handle_request(request)
        request.url = url.copy_with(host="127.0.0.1")
        try:
            return super().handle_request(request)
        finally:
            request.url = url


def local_client(**kw: Any) -> httpx.Client:
    """An HTTP client that reaches ``*.localhost`` names (a web view's own) like a browser."""
    kw.setdefault("timeout", scaled(30))
    return httpkit.Client(transport=LoopbackTransport(), **kw)


SERVER = [LTM, "server"]


def clean_env(**extra: str) -> dict[str, str]:
    from clikit import CACHE

    env = {k: v for k, v in os.environ.items() if not k.startswith("LTM_")}
    env["LTM_CACHE_DIR"] = str(CACHE)  # search by meaning's vocabulary: not the real ~/.cache
    env.update(extra)
    return env


def ltm_server(*args: str, env: dict[str, str] | None = None, timeout: float = scaled(60)) -> Any:
    return subprocess.run(
        [*SERVER, *args],
        capture_output=True,
        text=True,
        env=env or clean_env(),
        timeout=timeout,
    )


@dataclass
class Server:
    db: Path
    log: Path
    proc: subprocess.Popen[bytes]
    url: str
    root_token: str
    _users: int = field(default=0)
    # Where the server keeps its data: "sqlite" (the file ``db``) or "dynamodb"
    # (moto's server; see dynamo_moto.py), and how the tests open that store.
    store: str = "sqlite"
    open_store: Callable[[], Any] | None = None
    # Where the web pages answer (a name of their own on loopback), "" if at ``url``.
    web: str = ""

    def web_client(self, **kw: Any) -> httpx.Client:
        """A browser-like client of the web pages: at ``web``, cookies kept per name."""
        return local_client(base_url=self.web or self.url, **kw)

    def client(self, token: str | None = None, **kw: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpkit.Client(base_url=self.url, headers=headers, timeout=scaled(30), **kw)

    def issue(self, name: str | None = None) -> tuple[str, str]:
        """A new user with a token: (user id, token)."""
        from ltm.service import tokens
        from ltm.service.errors import Conflict
        from ltm.store.sqlite import SqliteStore

        self._users += 1
        name = name or f"user{self._users}"
        store = self.open_store() if self.open_store else SqliteStore(self.db)
        try:
            # Display names are unique per server in any case: a name an earlier test of a
            # shared server took gets a number, as two people of one name would choose.
            for n in range(1, 1000):
                shown = name if n == 1 else f"{name}-{n}"
                label = f"{name}-{self._users}-{time.time_ns()}"
                try:
                    user, secret = tokens.issue(store, shown, label=label)
                except Conflict as exc:
                    if not exc.message.startswith("display:"):
                        raise
                    continue
                break
        finally:
            store.close()
        return user.id, secret

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = scaled(15)) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        return self.proc.returncode


def _sqlite(db: Path) -> Any:
    from ltm.store.sqlite import SqliteStore

    return SqliteStore(db)


def init_db(db: Path) -> str:
    result = ltm_server("init", "--db", str(db))
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def run_server(
    db: Path,
    log: Path,
    root_token: str,
    *extra: str,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> Server:
    """Start ``ltm server run`` (or ``command``) on a free loopback port; wait until it answers."""
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*(command or [*SERVER, "run", "--db", str(db)]), "--addr", "127.0.0.1:0", *extra],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env or clean_env(),
        )
    deadline = time.monotonic() + scaled(30)
    port = None
    web: re.Match[str] | None = None
    start = log.stat().st_size if log.exists() else 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()}")
        text = log.read_text(errors="replace")
        lines = (text[start:] if len(text) >= start else text).splitlines()
        found = [(m, line) for line in lines if (m := LISTENING.search(line))]
        if found:
            port = int(found[-1][0].group(1))
            web = WEB_VIEW.search(found[-1][1])
            break
        time.sleep(0.05)
    if port is None:
        proc.kill()
        raise RuntimeError(f"server did not report its port:\n{log.read_text()}")
    server = Server(
        db=db,
        log=log,
        proc=proc,
        url=f"http://127.0.0.1:{port}",
        root_token=root_token,
        web=web.group(1) if web else "",
    )
    server.open_store = lambda: _sqlite(db)
    while time.monotonic() < deadline:
        try:
            if httpkit.get(server.url + "/v1/healthz", timeout=scaled(2)).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    server.stop(signal.SIGKILL)
    raise RuntimeError(f"server never became healthy:\n{log.read_text()}")


@contextmanager
def running_server(directory: Path, *extra: str, store: str = "sqlite") -> Iterator[Server]:
    directory.mkdir(parents=True, exist_ok=True)
    if store == "dynamodb":  # the same app and HTTP server, on DynamoDB (moto's server)
        from dynamo_moto import running_dynamo_server

        with running_dynamo_server(directory, *extra) as server:
            yield server
        return
    db = directory / "server.db"
    root = init_db(db)
    server = run_server(db, directory / "server.log", root, *extra)
    try:
        yield server
    finally:
        server.stop()


def example_packet(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    data.update(changes)
    return data


def packet_id() -> str:
    """A fresh valid packet id (a ULID)."""
    from ulid import ULID

    return str(ULID())


def make_packet(**changes: Any) -> dict[str, Any]:
    base = {
        "ltm_version": "0.2",
        "id": packet_id(),
        "created_at": "2026-05-01T12:00:00Z",
        "goal": "Ship the server",
        "next_step": "Write the HTTP tests",
    }
    base.update(changes)
    return base
