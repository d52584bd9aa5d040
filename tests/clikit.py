"""Helpers for the CLI-against-a-server suites: the real ``ltm`` in subprocesses, a
config dir per person, and small stdlib HTTP servers that play *other* servers
(an OAuth device-flow endpoint, a proxy answering 502, a TLS endpoint).

Our own server is never faked: those suites run ``ltm server run`` through
``serverkit``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from timing import SCALE, scaled

LTM = str(Path(sys.executable).with_name("ltm"))
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
# Where a harness's own folder is moved to (ltm writes its hooks and MCP entries there).
HARNESS_HOMES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME")
# The vocabulary of search by meaning, read once for the whole run (ltm caches it under
# ~/.cache, and each person's home here is new): shared by every person, as by a user's runs.
_UID = getattr(os, "getuid", lambda: 0)()
CACHE = Path(tempfile.gettempdir()) / f"ltm-tests-cache-{_UID}"


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment for one person: their own home, config and data dirs, no browser.

    ``HOME`` is ``home``, and the XDG and harness folder variables are dropped: what ltm
    writes under a home (a harness's settings, its hooks, caches) lands in the test's
    folder, never in the home of the machine's user, whose own hooks would in turn
    change what the tests see. ``CI`` is dropped too: the CLI never opens a browser
    under CI, and these tests play a person at a terminal whether or not CI runs them.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LTM_", "XDG_"))
        and k.lower() not in PROXY_VARS
        and k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER", "SSL_CERT_FILE", "CI")
        and k not in HARNESS_HOMES
    }
    env["HOME"] = str(home)
    env["LTM_CACHE_DIR"] = str(CACHE)
    env["LTM_CONFIG_DIR"] = str(home / "config")
    env["LTM_DATA_DIR"] = str(home / "data")
    env["LTM_NO_BROWSER"] = "1"
    # ltm's own limits (the hooks' watchdog, doctor's timeouts) stretch as the tests' do
    env["LTM_TIME_SCALE"] = str(SCALE)
    env.update(extra)
    return env


@dataclass
class Cli:
    """``ltm`` as one person runs it (their config dir, their data dir)."""

    home: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None  # where the commands run (a project's checkout); None: inherited

    def at(self, cwd: Path) -> Cli:
        """The same person, running commands in ``cwd``."""
        return Cli(self.home, self.env, cwd)

    def __post_init__(self) -> None:
        if not self.env:
            self.env = base_env(self.home)

    @property
    def config(self) -> Path:
        return Path(self.env["LTM_CONFIG_DIR"])

    def run(
        self,
        *args: str,
        stdin: str | bytes = b"",
        timeout: float = scaled(60),
        cwd: Path | None = None,
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run(
            [LTM, *args],
            input=data,
            env={**self.env, **env},
            capture_output=True,
            timeout=timeout,
            cwd=cwd if cwd is not None else self.cwd,
        )
        return subprocess.CompletedProcess(
            proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
        )

    def ok(self, *args: str, stdin: str | bytes = b"", **env: str) -> str:
        result = self.run(*args, stdin=stdin, **env)
        assert result.returncode == 0, f"ltm {' '.join(args)}: {result.stderr}"
        return result.stdout

    def fails(self, *args: str, code: int = 1, stdin: str | bytes = b"", **env: str) -> str:
        """Run a command that must fail with one ``ltm: ...`` line and no traceback."""
        result = self.run(*args, stdin=stdin, **env)
        assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ltm: "), result.stderr
        return lines[0]

    def imports(self, *args: str) -> set[str]:
        """Every module ``ltm ARGS`` imports (full dotted names), from ``-X importtime``."""
        out = subprocess.run(
            [sys.executable, "-X", "importtime", LTM, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert out.returncode == 0, out.stderr
        return {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}

    def credentials(self) -> dict[str, Any]:
        """The sign-in as the files hold it, checked to agree: ``default`` (config.toml's
        host, as the reference reads it), ``token`` (the credentials file, as the reference
        reads it) and ``hosts`` (hosts.json: one entry per server, with via/user)."""
        import tomllib

        def text(name: str) -> str | None:
            path = self.config / name
            return path.read_text() if path.exists() else None

        config = tomllib.loads(text("config.toml") or "")
        raw = text("credentials")
        token = raw.strip() if raw is not None else None
        hosts = json.loads(text("hosts.json") or '{"hosts": {}}')["hosts"]
        default = config.get("host")
        if default is not None and token is not None:
            assert raw == token + "\n", "credentials is the bare token and a newline"
            assert hosts[default]["token"] == token, "hosts.json contradicts credentials"
        return {"default": default, "token": token, "hosts": hosts}


def wl_clipboard(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in ``wl-copy``/``wl-paste`` (pyperclip's real Wayland path) keeping what it
    is given in a file: (the folder to put first on PATH, that file). Set
    ``WAYLAND_DISPLAY`` too."""
    bin_dir, clip = tmp_path / "bin", tmp_path / "clipboard.txt"
    bin_dir.mkdir()
    for name, body in (("wl-copy", f"cat > {clip}"), ("wl-paste", f"cat {clip}")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir, clip


def answered(cli: Cli, args: list[str], answer: str) -> tuple[str, str, int | None]:
    """``ltm ARGS`` on a terminal (a pseudo-terminal), answering its yes/no question with
    ``answer``: (the question as drawn, what it printed after, its exit status)."""
    import pexpect

    child = pexpect.spawn(LTM, args, env=cli.env, timeout=scaled(30))
    child.expect(r"\[y/N\]: ")
    asked = child.before.decode()
    child.sendline(answer)
    child.expect(pexpect.EOF)
    child.close()
    return asked, child.before.decode(), child.exitstatus


class Issuer(Protocol):
    """A server the tests can mint tokens on (``serverkit.Server`` and friends)."""

    url: str

    def issue(self, name: str) -> tuple[str, str]: ...


def signed_in(server: Issuer, home: Path, name: str) -> Cli:
    """A machine where ``name`` signed in with a fresh token (``ltm auth HOST --with-token``)."""
    _user_id, token = server.issue(name)
    cli = Cli(home)
    cli.ok("auth", server.url, "--with-token", stdin=token)
    return cli


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


Handler = Callable[[Seen], tuple[int, dict[str, str], bytes]]


@dataclass
class Stub:
    url: str
    seen: list[Seen]


def json_reply(status: int, data: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(data).encode()


@contextmanager
def stub_server(handler: Handler, *, tls: Any = None) -> Iterator[Stub]:
    """A loopback HTTP(S) server answering every request with ``handler``."""
    import time

    seen: list[Seen] = []

    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = Seen(
                self.command,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                time.monotonic(),
            )
            seen.append(request)
            status, headers, payload = handler(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            # A client that stops reading (a reply over its cap) is its test's point.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = do_PUT = _any

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    scheme = "http"
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Stub(f"{scheme}://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_server() -> Iterator[str]:
    """A port that accepts connections and never answers (for timeouts)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@contextmanager
def trickling_server(gap: float) -> Iterator[str]:
    """A server that reads a request and answers it one byte every ``gap`` seconds: each
    read of the client's gets a byte well within any per-read timeout, the whole answer
    (a 1 MB body) never within any sane one."""
    import time

    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000\r\n\r\n" + b" " * 1_000_000
    )
    stop = threading.Event()

    def trickle(conn: socket.socket) -> None:
        with conn:
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                received += chunk
            for byte in answer:
                if stop.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up
                time.sleep(gap)

    def accept(listener: socket.socket) -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    threading.Thread(target=accept, args=(listener,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def shell_env(tmp_path: Path, *, with_ltm: bool) -> dict[str, str]:
    """A PATH with the basic tools and, when asked, a folder holding only ``ltm``."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    for name in ("sh", "env"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).unlink(missing_ok=True)
        (tools / name).symlink_to(found)
    path = [str(tools)]
    if with_ltm:
        bin_dir = tmp_path / "ltm-bin"
        bin_dir.mkdir(exist_ok=True)
        if not (bin_dir / "ltm").exists():
            (bin_dir / "ltm").symlink_to(LTM)
        path.insert(0, str(bin_dir))
    env = Cli(tmp_path / "person").env
    return {
        **env,
        "PATH": os.pathsep.join(path),
        "LTM_STATE_DIR": str(tmp_path / "state"),
    }
