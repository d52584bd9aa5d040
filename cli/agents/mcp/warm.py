"""A warm ``ltm mcp``: the SDK is imported once per user, not once per session.

Importing the official MCP SDK is nearly all of ``ltm mcp``'s start-up (see
BENCHMARKS.md), and a client starts the shim for every session. So ``ltm mcp``
first tries a per-user Unix socket in ltm's state dir: a background process
that has already imported the SDK answers by forking a child that is handed
this process's stdin, stdout and stderr (``SCM_RIGHTS``), its working
directory and its environment, and serves the session exactly as ``ltm mcp``
would; this process waits for the child's exit status and exits with it.
When no warm process answers, ``ltm mcp`` starts one in the background and
serves this session itself, so only the first session after an idle spell
pays the import.

On by default on Linux (the peer is named by ``SO_PEERCRED``);
``LTM_MCP_WARM=0`` in the shim's environment turns it off. The warm process
serves only its own user (the socket is 0600 in a 0700 dir, and the peer's
uid is checked), only the ltm it was started from (the socket's name hashes
the version, the interpreter, the import path, every ltm source file and the
site-packages folder, so an upgrade, an edit or another PYTHONPATH starts a new
one), and exits after ``IDLE`` seconds without a session.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import sys
from pathlib import Path

IDLE = 30 * 60
HEADER_MAX = 1 << 20
SUN_PATH = 108  # the longest path a Unix socket may have (Linux's sockaddr_un)


OFF = ("0", "off", "false", "no")


def enabled() -> bool:
    """On unless ``LTM_MCP_WARM`` says off, on Linux: the peer check reads Linux's
    ``struct ucred`` (pid, uid, gid); OpenBSD has ``SO_PEERCRED`` too, in another order."""
    if os.environ.get("LTM_MCP_WARM", "").strip().lower() in OFF:
        return False
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


def socket_path() -> Path:
    from ltm import __version__
    from ltm.cli.config import state_dir

    # The environment (its prefix) and the interpreter's version, not the name it was
    # started by: a venv's ``python`` and ``python3`` (the console scripts' shebang) are
    # one interpreter, and each must find the warm process the other started.
    where = [__version__, sys.prefix, sys.version, *_import_path()]
    key = hashlib.sha256("\n".join([*where, *_sources()]).encode())
    # Absolute: the warm process moves to / before it binds (a relative LTM_STATE_DIR
    # named a folder under / there, and no warm process ever served).
    return state_dir().absolute() / f"mcp-{os.getuid()}-{key.hexdigest()[:16]}.sock"


def _import_path() -> list[str]:
    """What decides where the warm process imports from beyond its prefix: PYTHONPATH
    and its kin, and the user's site-packages (under HOME) when the interpreter reads
    it. Another may find another ltm, SDK or pydantic than the warm process loaded.
    Not ``sys.path`` itself: its first entry is this process's script or working
    directory (the warm process runs with ``-P``), and a caller may have added to it."""
    import site

    names = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE")
    out = [f"{name}={os.environ.get(name)}" for name in names]
    if site.ENABLE_USER_SITE:
        out.append(site.getusersitepackages())
    return out


def _sources() -> list[str]:
    """What the warm process's code is: every ltm module (path, size, mtime), and the
    folder the SDK is installed in, whose mtime moves when a package is added,
    upgraded or removed. A warm process started from other code is never used."""
    import importlib.util

    import ltm
    import ltm.cli

    roots = [Path(ltm.__file__).parent, Path(ltm.cli.__file__).parent]
    if roots[1].is_relative_to(roots[0]):  # an installed ltm; an editable one has two folders
        roots.pop()
    out: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            info = path.stat()
            out.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
    spec = importlib.util.find_spec("mcp")
    if spec is not None and spec.origin:
        folder = Path(spec.origin).parent.parent
        out.append(f"{folder}:{os.stat(folder).st_mtime_ns}")
    return out


# -- the client side: ltm mcp ----------------------------------------------------------


def hand_over() -> int | None:
    """Serve this session through the warm process; its exit status, or None when
    there is none (then one is started for the next session).

    What is handed over (the environment, tokens included, and stdin/stdout/stderr)
    goes only to a process of this very user: the socket must be a socket (not a
    symlink), owned by this user, mode 0600, in a folder of this user's that nobody
    else may write to; and, what settles it whatever happened between that look
    and the connect, the peer's uid (``SO_PEERCRED``) must be ours. Anything else:
    this session is served here, and nothing is started over a path that is not ours.
    """
    path = socket_path()
    if len(os.fsencode(path)) > SUN_PATH:
        return None  # no socket binds there: each warm process started would die at once
    problem = _untrusted(path)
    if problem == "missing":
        _start(path)
        return None
    if problem is not None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(0.5)
        conn.connect(str(path))
    except OSError:
        conn.close()
        _start(path)
        return None
    if _peer_uid(conn) != os.getuid():
        conn.close()
        return None
    try:
        header = json.dumps({"cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(conn, [struct.pack("!I", len(header)) + header], [0, 1, 2])
        conn.settimeout(5)
        if _recv_exact(conn, 1) != b"A":
            conn.close()
            return None  # not taken (a stale or refusing process): serve it here
        # Only now is the session the warm process's: it forks on this "go", and without
        # it (we gave up waiting and closed) it never serves our stdin alongside us.
        conn.sendall(b"G")
    except OSError:
        conn.close()
        return None
    try:
        conn.settimeout(None)
        status = _recv_exact(conn, 4)  # the session runs in the warm process's child
    except OSError:
        return 1  # it was handed over: never serve it here as well
    finally:
        conn.close()
    return struct.unpack("!i", status)[0] if len(status) == 4 else 1


def _untrusted(path: Path) -> str | None:
    """Why the socket at ``path`` may not be trusted ("missing" when there is none
    and its folder is ours), else None. ``lstat``: a symlink is judged, not followed."""
    import stat

    me = os.getuid()
    try:
        folder = os.lstat(path.parent)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "folder unreadable"
    if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != me or folder.st_mode & 0o022:
        return "folder not the user's own"
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "unreadable"
    if not stat.S_ISSOCK(info.st_mode):
        return "not a socket"  # a symlink, or a file planted in its place
    if info.st_uid != me or info.st_mode & 0o077:
        return "not the user's own, or open to others"
    return None


def _peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux ``struct ucred``: pid, uid, gid)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return struct.unpack("3i", creds)[1]


def _start(path: Path) -> None:
    import subprocess

    from ltm.cli.config import private_dir

    with contextlib.suppress(OSError):  # no warm process then; this session is served anyway
        private_dir(path.parent)
        subprocess.Popen(
            # -P: the working directory (a project, maybe with its own mcp/ or pydantic.py)
            # must not shadow the modules the warm process imports for every session.
            [sys.executable, "-P", "-m", "ltm.cli.agents.mcp.warm", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


# -- the warm process ----------------------------------------------------------------


def run(path: Path) -> None:
    import fcntl
    import signal

    from ltm.cli.config import private_dir

    private_dir(path.parent)
    # Never through a symlink planted in the pid file's place.
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    lock = os.open(path.with_suffix(".pid"), flags, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another warm process of this ltm is starting or serving
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    os.chdir("/")  # hold no project folder open; each session gets its client's cwd

    from ltm.cli.agents.mcp import server
    from ltm.mcp import tools

    server.load_sdk()  # paid once, here, for every session
    server.rehearse()
    tools.catalogue()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path.unlink(missing_ok=True)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(16)
    listener.settimeout(IDLE)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return  # idle: the next ltm mcp starts a new one
            _session(conn, listener, lock)
    finally:
        listener.close()
        path.unlink(missing_ok=True)


def _session(conn: socket.socket, listener: socket.socket, lock: int) -> None:
    fds: list[int] = []
    try:
        if _peer_uid(conn) != os.getuid():
            return
        conn.settimeout(5)
        raw, fds, _flags, _addr = socket.recv_fds(conn, HEADER_MAX + 4, 3)
        (size,) = struct.unpack("!I", raw[:4])
        body = raw[4:]
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                return
            body += chunk
        header = json.loads(body)
        if len(fds) != 3:
            return
        conn.sendall(b"A")
        if _recv_exact(conn, 1) != b"G":
            return  # the client gave up and serves the session itself
        conn.settimeout(None)
        pid = os.fork()
        if pid == 0:  # the session
            import signal

            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            listener.close()
            # The lock says a warm process serves this socket; a session outlives that
            # process (idle exit, SIGTERM), and holding it would keep the next one from
            # starting for as long as the session runs.
            os.close(lock)
            status = 1
            try:
                for number, fd in enumerate(fds):
                    os.dup2(fd, number)
                    os.close(fd)
                os.chdir(header["cwd"])
                os.environ.clear()
                os.environ.update(header["env"])
                _end_with(conn)
                status = _serve()
            finally:
                try:
                    conn.sendall(struct.pack("!i", status))
                finally:
                    os._exit(status)
    except (OSError, ValueError, KeyError, struct.error):
        pass
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        conn.close()


def _end_with(conn: socket.socket) -> None:
    """End this session when the ``ltm mcp`` that handed it over goes away (killed by
    its client): the client then expects the server gone, whatever its pipes say."""
    import threading

    def watch() -> None:
        with contextlib.suppress(OSError):
            conn.recv(1)  # nothing is ever sent this way: returns at EOF
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _serve() -> int:
    from ltm.cli.agents.mcp.server import serve
    from ltm.cli.errors import CliError

    try:
        serve()
    except CliError as exc:
        print(f"ltm: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except BaseException:  # reported as the CLI would: one line, never a traceback
        print("ltm: unexpected error in ltm mcp", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run(Path(sys.argv[1]))
