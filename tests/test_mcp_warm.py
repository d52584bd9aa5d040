"""The warm ``ltm mcp`` (on by default): the first session starts a warm process, the
next ones are handed to it, each with its own working directory and environment.

Real ``ltm mcp`` subprocesses driven by the SDK client (tests/test_mcp.py); the
warm process this test starts is ended by its pid at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from timing import scaled

pytest.importorskip("mcp")
if sys.platform == "win32":
    pytest.skip("the warm process is POSIX only", allow_module_level=True)

import contextlib

from test_mcp import Shim, clean_env, data
from test_project import needs_git, repo


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "state"
    yield folder
    for pid_file in folder.glob("mcp-*.pid"):
        text = pid_file.read_text().strip()
        if text:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text), signal.SIGTERM)


def default_env(home: Path, state: Path) -> dict[str, str]:
    """A shim's environment with no LTM_MCP_WARM at all: the default."""
    return clean_env(home, LTM_STATE_DIR=str(state))


def wait_for(folder: Path, pattern: str) -> Path:
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline:
        found = list(folder.glob(pattern))
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no {pattern} in {folder}")


@needs_git
def test_sessions_after_the_first_are_served_warm_with_their_own_cwd_and_env(
    tmp_path: Path, state: Path
) -> None:
    first = default_env(tmp_path / "one", state)
    with Shim(first, tmp_path / "one.log", warm=True) as shim:
        shim.alive()
    sock = wait_for(state, "mcp-*.sock")
    assert sock.stat().st_mode & 0o777 == 0o600
    pid = int(wait_for(state, "mcp-*.pid").read_text())
    os.kill(pid, 0)  # the warm process is there

    app = repo(tmp_path / "app", "https://github.com/acme/app.git")
    second = default_env(tmp_path / "two", state)
    with Shim(second, tmp_path / "two.log", cwd=app, warm=True) as shim:
        saved = shim.ok("save", {"packet": {"goal": "warm goal", "next_step": "go on"}})
        assert "saved packet" in saved
        listed = data(shim.call("ls", {"here": True}))
        assert [p["goal"] for p in listed["packets"]] == ["warm goal"]
        assert listed["project"] == "acme/app"  # the session runs in this cwd
        assert str(tmp_path / "two" / "data") in shim.ok("whoami")  # and with this env
    assert (tmp_path / "two" / "data" / "ltm.db").exists()
    assert not (tmp_path / "one" / "data" / "ltm.db").exists()
    os.kill(pid, 0)  # still serving the next one

    # The next warm session, in the same project under another account: nothing of the
    # last one's (its store, kept open between its calls) reaches it.
    third = default_env(tmp_path / "three", state)
    with Shim(third, tmp_path / "three.log", cwd=app, warm=True) as shim:
        assert data(shim.call("ls", {"here": True}))["packets"] == []
        whoami = shim.ok("whoami")
        assert str(tmp_path / "three" / "data") in whoami
        assert str(tmp_path / "two") not in whoami


@pytest.mark.parametrize("off", ["0", "off", "false", "no"])
def test_turned_off_nothing_stays_behind(tmp_path: Path, off: str) -> None:
    env = clean_env(tmp_path, LTM_MCP_WARM=off, LTM_STATE_DIR=str(tmp_path / "state"))
    with Shim(env, tmp_path / "shim.log", warm=True) as shim:
        assert json.loads(shim.ok("example"))["ltm_version"] == "0.2"
    assert not (tmp_path / "state").exists()


def test_other_code_gets_another_warm_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket's name follows ltm's code: an edited, added or upgraded module is never
    served by a warm process that loaded the old one (here on a copy of the layout an
    installed ltm has, ltm/cli inside ltm/)."""
    import ltm
    import ltm.cli
    from ltm.cli.agents.mcp import warm

    package = tmp_path / "ltm"
    (package / "cli" / "agents" / "mcp").mkdir(parents=True)
    for name in ("__init__.py", "packet.py", "cli/__init__.py", "cli/agents/mcp/server.py"):
        (package / name).write_text("# a module\n")
    monkeypatch.setattr(ltm, "__file__", str(package / "__init__.py"))
    monkeypatch.setattr(ltm.cli, "__file__", str(package / "cli" / "__init__.py"))
    monkeypatch.setenv("LTM_STATE_DIR", str(tmp_path / "state"))

    before = warm.socket_path()
    assert before.parent == tmp_path / "state"
    assert len(warm._sources()) == 4 + 1  # each module once, and the SDK's folder
    assert warm.socket_path() == before  # the same code: the same warm process

    (package / "cli" / "agents" / "mcp" / "server.py").write_text("# an edit\n")
    edited = warm.socket_path()
    assert edited != before
    (package / "cli" / "new.py").write_text("")
    assert warm.socket_path() not in (before, edited)


def socket_path_of(python: str, state: Path, **env: str) -> str:
    """The socket ``ltm mcp`` would look for, computed by ``python`` in a process of its own
    (PYTHONPATH from ``env`` only: the one the tests run with would blur the comparison)."""
    import subprocess

    code = "from ltm.cli.agents.mcp import warm; print(warm.socket_path())"
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [python, "-c", code],
        env={**base, "LTM_STATE_DIR": str(state), **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=state.parent,
        timeout=scaled(60),
    ).stdout


def test_python_and_python3_of_one_environment_share_the_warm_process(tmp_path: Path) -> None:
    """The console scripts start ``python3``; a test or a user may start ``python``: one
    interpreter of one environment, so one warm process."""
    folder = Path(sys.executable).parent
    names = [n for n in ("python", "python3") if (folder / n).exists()]
    if len(names) < 2:
        pytest.skip("this environment has no python and python3 side by side")
    paths = {socket_path_of(str(folder / name), tmp_path / "state") for name in names}
    assert len(paths) == 1, paths


def test_another_import_path_gets_another_warm_process(tmp_path: Path) -> None:
    """A session whose PYTHONPATH (or user site-packages) finds other modules
    is never served by a warm process that imported the modules of another path: here a
    folder that holds another pydantic, which the SDK imports."""
    shadow = tmp_path / "shadow"
    (shadow / "pydantic").mkdir(parents=True)
    (shadow / "pydantic" / "__init__.py").write_text("# another pydantic\n")
    state = tmp_path / "state"
    plain = socket_path_of(sys.executable, state)
    assert socket_path_of(sys.executable, state) == plain  # one path: one warm process
    assert socket_path_of(sys.executable, state, PYTHONPATH=str(shadow)) != plain


def test_the_warm_process_rehearses_a_session_start_for_every_handshake_version() -> None:
    """What the warm process plays before it forks must really run (``rehearse`` only
    logs a failure, so a broken rehearsal would otherwise go unnoticed)."""
    import anyio
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from ltm.cli.agents.mcp import server

    server.load_sdk()
    built = server.build_server()
    assert HANDSHAKE_PROTOCOL_VERSIONS
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        anyio.run(server._rehearsal, built, version)  # raises on any failure or a hang


@pytest.mark.parametrize(
    ("platform", "setting", "on"),
    [
        ("linux", None, True),
        ("linux", "1", True),
        ("linux", "0", False),
        ("linux", " OFF ", False),
        ("darwin", None, False),  # no Linux ucred to check the peer with: cold starts
        ("openbsd7", None, False),  # SO_PEERCRED there, but uid in another place
    ],
)
def test_on_by_default_on_linux_only(
    monkeypatch: pytest.MonkeyPatch, platform: str, setting: str | None, on: bool
) -> None:
    from ltm.cli.agents.mcp import warm

    monkeypatch.setattr(sys, "platform", platform)
    if setting is None:
        monkeypatch.delenv("LTM_MCP_WARM", raising=False)
    else:
        monkeypatch.setenv("LTM_MCP_WARM", setting)
    assert warm.enabled() is on


# -- a socket that is not the user's own warm process gets nothing ---------------------


class Impostor:
    """A listener that records whatever a client sends it (an attacker's stand-in)."""

    def __init__(self, path: Path) -> None:
        import socket
        import threading

        self.received = b""
        self.connected = False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.sock.settimeout(0.2)  # not a budget: how often it looks at _stop
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connected = True
            conn.settimeout(scaled(2))
            with contextlib.suppress(OSError):
                self.received += conn.recv(1 << 20)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm is Linux only")
@pytest.mark.parametrize("planted", ["open to all", "symlink", "another user's"])
def test_a_socket_that_is_not_the_users_own_gets_nothing(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    from ltm.cli.agents.mcp import warm

    if planted == "another user's" and os.getuid() != 0:
        pytest.skip("making a file another user's needs root")
    monkeypatch.setenv("LTM_STATE_DIR", str(state))
    path = warm.socket_path()  # the very path the shim computes: same ltm, same interpreter
    state.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    impostor = Impostor(elsewhere / "evil.sock" if planted == "symlink" else path)
    try:
        if planted == "open to all":
            os.chmod(path, 0o666)
        elif planted == "symlink":
            os.chmod(elsewhere / "evil.sock", 0o600)
            path.symlink_to(elsewhere / "evil.sock")
        else:
            os.chmod(path, 0o600)
            os.chown(path, 65534, 65534)
        env = default_env(tmp_path / "home", state)
        env["LTM_SECRET_PROBE"] = "hunter2-never-sent"
        with Shim(env, tmp_path / "shim.log", warm=True) as shim:
            shim.alive()  # served here, by the shim itself
    finally:
        impostor.close()
    assert not impostor.connected and impostor.received == b""
    assert not list(state.glob("mcp-*.pid"))  # nothing started over a path not ours


IMPOSTOR = """
import os, socket, sys
path = sys.argv[1]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(path)  # as root: the file is root's, mode 0600, as a real warm socket is
os.chmod(path, 0o600)
os.setuid(65534)  # SO_PEERCRED names whoever called listen(): now another user
sock.listen(4)
print("ready", flush=True)
while True:
    conn, _ = sock.accept()
    conn.settimeout(float(sys.argv[2]))
    try:
        data = conn.recv(1 << 20)
    except OSError:
        data = b""
    print("connected", len(data), flush=True)
    conn.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm is Linux only")
def test_a_listener_of_another_user_behind_a_good_looking_socket_gets_nothing(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from ltm.cli.agents.mcp import warm

    if os.getuid() != 0:
        pytest.skip("listening as another user needs root")
    monkeypatch.setenv("LTM_STATE_DIR", str(state))
    path = warm.socket_path()
    state.mkdir(mode=0o700)
    spy = subprocess.Popen(
        [sys.executable, "-c", IMPOSTOR, str(path), str(scaled(2))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert spy.stdout is not None and spy.stdout.readline().strip() == "ready"
        assert path.stat().st_uid == 0 and path.stat().st_mode & 0o777 == 0o600
        env = default_env(tmp_path / "home", state)
        with Shim(env, tmp_path / "shim.log", warm=True) as shim:
            shim.alive()
    finally:
        spy.kill()
        rest = spy.communicate()[0]
    # It may see a connect (the peer is only known once connected), never a byte.
    assert all(line == "connected 0" for line in rest.splitlines()), rest


def running(pid: int) -> bool:
    """``pid`` is a live process (a killed one its parent has not reaped yet is not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")


def warm_pid(state: Path, *, other_than: int | None = None) -> int:
    """The pid the warm process wrote, once it is a live one (and not ``other_than``)."""
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline:
        for pid_file in state.glob("mcp-*.pid"):
            text = pid_file.read_text().strip()
            if text and int(text) != other_than and running(int(text)):
                return int(text)
        time.sleep(0.1)
    raise AssertionError(f"no live warm process (other than {other_than}) in {state}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm is Linux only")
def test_a_killed_warm_process_is_replaced_while_its_sessions_still_run(
    tmp_path: Path, state: Path
) -> None:
    """A session outlives the warm process that forked it (SIGTERM, idle exit): it goes on
    serving, and the next ``ltm mcp`` starts a new warm process at once, not only once
    every session of the old one has ended."""
    env = default_env(tmp_path / "home", state)
    with Shim(env, tmp_path / "one.log", warm=True) as shim:
        shim.alive()
    first = warm_pid(state)
    wait_for(state, "mcp-*.sock")
    try:
        with Shim(env, tmp_path / "two.log", warm=True) as session:
            session.alive()  # handed to the warm process: its child serves it
            os.kill(first, signal.SIGTERM)
            deadline = time.monotonic() + scaled(30)
            while running(first) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not running(first)
            session.alive()  # the child serves on without its parent
            with Shim(env, tmp_path / "three.log", warm=True) as shim:
                shim.alive()  # the socket is stale: served here, and a new one started
            second = warm_pid(state, other_than=first)
            with Shim(env, tmp_path / "four.log", warm=True) as shim:
                shim.alive()
            session.alive()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first, signal.SIGTERM)
    os.kill(second, 0)


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and running(int(entry.name)):
            with contextlib.suppress(OSError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm is Linux only")
def test_a_session_ends_with_the_shim_its_client_killed(tmp_path: Path, state: Path) -> None:
    """A client that kills its ``ltm mcp`` (kill -9, mid-session, stdin still open) expects
    the server gone: the warm process's child that served it ends too, and the warm
    process serves the next session."""
    import subprocess

    from test_mcp import LTM

    env = default_env(tmp_path / "home", state)
    with Shim(env, tmp_path / "one.log", warm=True) as shim:
        shim.alive()
    pid = warm_pid(state)
    wait_for(state, "mcp-*.sock")
    before = set(children(pid))
    shim_process = subprocess.Popen(
        [LTM, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert shim_process.stdin is not None and shim_process.stdout is not None
        shim_process.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        shim_process.stdin.flush()
        assert json.loads(shim_process.stdout.readline())["id"] == 1  # served
        session = set(children(pid)) - before
        assert len(session) == 1, session  # by the warm process's child
        shim_process.kill()
        shim_process.wait(timeout=scaled(30))
        (child,) = session
        deadline = time.monotonic() + scaled(30)
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(child)
    finally:
        with contextlib.suppress(ProcessLookupError):
            shim_process.kill()
        shim_process.wait(timeout=scaled(30))  # not a budget: it was killed
    with Shim(env, tmp_path / "two.log", warm=True) as shim:
        shim.alive()
    os.kill(pid, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm is Linux only")
def test_a_relative_state_dir_is_the_one_under_the_working_directory(
    tmp_path: Path, state: Path
) -> None:
    """LTM_STATE_DIR=state names a folder of the working directory, for the warm process
    too (which serves from /): its socket is there, and the next session is handed to it."""
    app = state.parent
    env = default_env(tmp_path / "home", state)
    env["LTM_STATE_DIR"] = state.name
    with Shim(env, tmp_path / "one.log", cwd=app, warm=True) as shim:
        shim.alive()
    wait_for(state, "mcp-*.sock")
    pid = warm_pid(state)
    with Shim(env, tmp_path / "two.log", cwd=app, warm=True) as shim:
        shim.alive()
        assert children(pid)  # served by the warm process's child


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm is Linux only")
def test_a_state_dir_too_deep_for_a_socket_starts_no_warm_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Unix socket binds at a path longer than sockaddr_un holds: a warm process
    started for it would die at once, one per session. None is started; ltm mcp serves."""
    from ltm.cli.agents.mcp import warm

    state = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("LTM_STATE_DIR", str(state))
    before = set(children(os.getpid()))
    assert warm.hand_over() is None
    started = set(children(os.getpid())) - before
    for pid in started:  # one started anyway: let it end before the test does
        deadline = time.monotonic() + scaled(60)
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert not started
    assert not list(state.glob("mcp-*"))
