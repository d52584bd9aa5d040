"""Where ltm keeps its files, and the user's settings.

Config (settings, credentials) and data (the embedded store) live apart, as
the XDG spec and the reference implementation have it:

- config: ``$LTM_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/ltm``, else ``~/.config/ltm``
  (the reference's precedence, on every platform, so one dotfile setup works
  everywhere);
- data: ``$LTM_DATA_DIR``, else the platform's user data dir (``~/.local/share/ltm``
  on Linux);
- state (hook log and markers, the warm MCP socket): ``$LTM_STATE_DIR``, else the
  platform's user state dir (``~/.local/state/ltm`` on Linux).

The config dir is shared with the Go reference CLI, so the files it knows are
kept in its format:

- ``config.toml``: the reference's settings (``host``, ``user``, ``output``,
  ``lenient``, ``editor``). ``host`` is the default server. Rewritten as a whole
  document (read, change, write), so keys this CLI does not know survive.
- ``credentials``: the default server's token (see ``ltm.cli.client.credentials``).

Settings only this CLI has (``timeout``, ``browser``, the ``[[sensitive]]``
redaction patterns) live in ``settings.toml`` beside them, not in
``config.toml``: the reference ignores unknown keys when it reads config.toml
but rewrites the file from its five fields on ``ltm auth``/``ltm config set``,
which would silently drop a user's redaction patterns. ``config.json`` from
earlier builds of this CLI is moved into ``settings.toml`` on first read.

Every file here is written atomically with mode 0600 in a 0700 dir; no token
is ever written to a settings file. ``config.toml``, ``settings.toml`` and the
sign-in files are read and written back under one lock (``locked``), so two
processes never undo each other's change.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ltm.cli.errors import CliError

REFERENCE_FILE = "config.toml"  # shared with the reference CLI
SETTINGS_FILE = "settings.toml"  # this CLI's own settings
LEGACY_SETTINGS_FILE = "config.json"  # earlier builds of this CLI
T = TypeVar("T")
SETTINGS_HEADER = (
    "# Settings of the Python ltm CLI that the reference CLI does not have (the shared\n"
    "# ones, such as host, are in config.toml). Change with: ltm config, ltm sensitive\n"
)


def config_dir() -> Path:
    if os.environ.get("LTM_CONFIG_DIR"):
        return Path(os.environ["LTM_CONFIG_DIR"])
    if os.environ.get("XDG_CONFIG_HOME"):
        return Path(os.environ["XDG_CONFIG_HOME"]) / "ltm"
    # Not Path.home(): it takes an empty or relative $HOME as it is (an empty one is "/"),
    # which put the tokens in another home than the store, or in the current folder.
    return Path(_home()) / ".config" / "ltm"


def timeout_seconds(raw: object) -> float:
    """A network timeout as ``ltm config set timeout`` and ``LTM_TIMEOUT`` take it: seconds,
    more than 0 and at most 600; ValueError saying what is wrong otherwise."""
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"timeout must be a number of seconds, got {raw!r}") from None
    if not 0 < value <= 600:  # NaN too
        raise ValueError(f"timeout must be more than 0 and at most 600 seconds, got {raw!r}")
    return value


def time_scale() -> float:
    """``LTM_TIME_SCALE``: how many times longer ltm's own time limits are (the hooks'
    watchdog and request timeouts, ``ltm doctor``'s per check, the default network
    timeout), for a machine too slow
    or too loaded to finish within them; 1 when unset, and when not a number of 1 or
    more (a hook must never fail over its environment)."""
    raw = os.environ.get("LTM_TIME_SCALE", "").strip()
    try:
        value = float(raw) if raw else 1.0
    except ValueError:
        return 1.0
    return value if value >= 1 else 1.0


def data_dir() -> Path:
    if os.environ.get("LTM_DATA_DIR"):
        return Path(os.environ["LTM_DATA_DIR"])
    return _platform_dir("data")


def state_dir() -> Path:
    if os.environ.get("LTM_STATE_DIR"):
        return Path(os.environ["LTM_STATE_DIR"])
    return _platform_dir("state")


def _platform_dir(kind: str) -> Path:
    """The platform's user data or state dir for ltm, as platformdirs names it.

    On Linux that is the XDG Base Directory rule
    (https://specifications.freedesktop.org/basedir-spec/latest/): ``$XDG_DATA_HOME``
    or ``$XDG_STATE_HOME`` when absolute, else ``~/.local/share`` or ``~/.local/state``.
    It is spelled out here because importing platformdirs adds ~9 ms (it loads
    tempfile and shutil; bench/bench_imports.py), paid by every hook and every ``ltm mcp`` start;
    tests/test_config_dirs.py holds it to platformdirs' own answer. Elsewhere
    platformdirs answers.
    """
    if sys.platform.startswith("linux"):
        base = os.environ.get(f"XDG_{kind.upper()}_HOME", "")
        if not os.path.isabs(base):
            base = os.path.join(_home(), ".local", "share" if kind == "data" else "state")
        return Path(base) / "ltm"
    import platformdirs

    find = platformdirs.user_data_dir if kind == "data" else platformdirs.user_state_dir
    return Path(find("ltm", appauthor=False))


def _home() -> str:
    """``$HOME`` when absolute, else the password database's (as platformdirs does)."""
    home = os.environ.get("HOME", "")
    if os.path.isabs(home):
        return home
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir


PRIVATE_DIR = 0o700


def private_dir(path: Path) -> Path:
    """Make ``path`` (one of ltm's own folders: config, data, state, or one inside them,
    which makes that folder first) and keep it 0700.

    They hold tokens, the local store, the hooks' logs and the warm MCP socket:
    nothing another user of the machine may read. A folder made by an earlier ltm
    with 0755 is repaired here and said once on stderr (once repaired, there is
    nothing left to say). ``mkdir``'s mode is masked by the umask and applies to the
    last folder only, so the mode is set outright. Windows: its ACLs apply instead.
    Returns ``path``.
    """
    for root in (config_dir(), data_dir(), state_dir()):
        if root != path and root in path.parents:
            private_dir(root)  # mkdir's mode reaches the last folder only: ltm's own first
            break
    try:
        path.mkdir(parents=True, mode=PRIVATE_DIR)
        made = True
    except FileExistsError:
        made = False
    if not path.is_dir():
        # A file where a folder is named (LTM_DATA_DIR set to the store's own path): said
        # as the folder it is not, and never made executable by the chmod below.
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", str(path))
    if os.name != "posix":
        return path
    info = path.stat()
    mode = info.st_mode & 0o777
    if mode & 0o077 and info.st_uid == os.getuid():
        os.chmod(path, PRIVATE_DIR)
        if not made:
            print(
                f"ltm: {path} could be read by other users of this machine (mode {mode:o});"
                " made private (700)",
                file=sys.stderr,
            )
    return path


def local_db_path() -> Path:
    """The embedded store: the user's own packets, no server involved."""
    return data_dir() / "ltm.db"


# -- TOML documents -----------------------------------------------------------------


def read_toml(path: Path) -> dict[str, Any] | None:
    """A TOML file as a dict; None when there is none (tomllib is imported only then)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    import tomllib

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        # Every verb that reads it stops here, ltm config set too (it rewrites the whole
        # file from what it read): the way out is the file itself, so the line says how.
        raise CliError(
            f"cannot read {path}: not valid TOML ({exc}); correct it in an editor, or move"
            " it aside and set again what it held"
        ) from None


def write_toml(path: Path, doc: dict[str, Any], *, header: str = "") -> None:
    import tomli_w

    write_private(path, header + tomli_w.dumps(_without_none(doc)))


def _without_none(doc: dict[str, Any]) -> dict[str, Any]:
    """TOML has no null: a key set to None is a key left out."""
    return {
        k: _without_none(v) if isinstance(v, dict) else v for k, v in doc.items() if v is not None
    }


def load_reference() -> dict[str, Any]:
    """``config.toml``, every key of it (empty when there is none)."""
    return read_toml(config_dir() / REFERENCE_FILE) or {}


def update_reference(**changes: Any) -> None:
    """Set keys of ``config.toml`` (None removes one), keeping every other key as it is."""
    with locked():
        found = read_toml(config_dir() / REFERENCE_FILE)
        if found is None and all(value is None for value in changes.values()):
            return  # nothing to remove from a file that is not there
        doc = found or {}
        for key, value in changes.items():
            for name in [k for k in doc if k != key and k.lower() == key]:
                del doc[name]  # the reference would take "Host" for host too: one spelling only
            if value is None:
                doc.pop(key, None)
            else:
                doc[key] = value
        write_toml(config_dir() / REFERENCE_FILE, doc)


def reference_value(doc: dict[str, Any], key: str) -> Any:
    """``doc[key]`` as the reference decodes it: an exact key first, else one in another case."""
    if key in doc:
        return doc[key]
    for name, value in doc.items():
        if name.lower() == key:
            return value
    return None


# -- this CLI's own settings --------------------------------------------------------


def load_settings() -> dict[str, Any]:
    """``settings.toml`` (timeout, browser, sensitive, and any key we do not know)."""
    directory = config_dir()
    doc = read_toml(directory / SETTINGS_FILE)
    if doc is not None:
        return doc
    return _migrate_legacy_settings(directory)


def save_settings(settings: dict[str, Any]) -> None:
    write_toml(config_dir() / SETTINGS_FILE, settings, header=SETTINGS_HEADER)


def update_settings(change: Callable[[dict[str, Any]], T]) -> T:
    """Read ``settings.toml``, let ``change`` edit it in place, write it back: under the
    config dir's lock, so two ``ltm sensitive add`` or ``ltm config set`` at once keep
    both changes (each rewrites the whole file from what it read). Returns ``change``'s
    answer; the file is not written when ``change`` raises."""
    with contextlib.suppress(OSError):
        private_dir(config_dir())  # the lock's file lives there: made first, or no lock
    with locked():
        settings = load_settings()
        answer = change(settings)
        save_settings(settings)
        return answer


def sensitive_patterns(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """``settings.toml``'s ``[[sensitive]]`` tables; a CliError naming the file when the
    key holds anything else (a hand edit), rather than a crash in every verb that scans."""
    found = settings.get("sensitive", [])
    if isinstance(found, list) and all(isinstance(entry, dict) for entry in found):
        return list(found)
    raise CliError(
        f"sensitive in {config_dir() / SETTINGS_FILE} must be a list of "
        "{ kind = ..., regex = ... } tables; correct it, or remove it and add the "
        "patterns again: ltm sensitive add KIND REGEX"
    )


def _migrate_legacy_settings(directory: Path) -> dict[str, Any]:
    """Move an earlier build's ``config.json`` into ``settings.toml`` (best effort)."""
    legacy = directory / LEGACY_SETTINGS_FILE
    try:
        text = legacy.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(f"cannot read {legacy}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise CliError(f"cannot read {legacy}: not JSON") from None
    if not isinstance(data, dict):
        raise CliError(f"{legacy} must hold a JSON object")
    data = _without_none(data)
    try:
        save_settings(data)
        legacy.unlink()
    except OSError:
        pass  # a read-only config dir: use the old file as it is, move it next time
    return data


LOCK_FILE = ".credentials.lock"
_held: dict[int, int] = {}  # thread id: how deep it holds the lock (it is taken once)


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Hold the config dir's lock: for reading, changing and writing back its files.

    Two ltm processes (an agent's MCP server recording teams, a terminal signing in or
    setting ``ltm config set``) each rewrite a whole file from what they read: without
    the lock the later write puts back what it read, and the other's change is lost (a
    default server switched back under the other's token). An ``flock`` (released by the
    kernel when a process dies, so never stale) on a file of its own, as renames replace
    the files it guards; taken again in the same thread, it is already held. Windows has
    no flock: there the common case, one process writing, goes on without it. No config
    dir yet (nothing in it to lose) or a read-only one (the write says so): no lock.
    """
    import threading

    me = threading.get_ident()
    if _held.get(me):
        _held[me] += 1
        try:
            yield
        finally:
            _held[me] -= 1
        return
    with file_lock(config_dir() / LOCK_FILE) as held:
        if held:
            _held[me] = 1
        try:
            yield
        finally:
            _held.pop(me, None)


@contextlib.contextmanager
def file_lock(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold an ``flock`` on ``path`` (made 0600 if missing); yields whether it is held.

    False when the file cannot be opened (no folder yet, a read-only one), on Windows (no
    flock: one process at a time is the common case there, and it goes on), or, unless
    ``wait``, when another process holds it. The kernel releases the lock when the holder
    dies, so it is never stale.
    """
    try:
        import fcntl
    except ImportError:
        yield True
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def write_private(path: Path, text: str, *, mode: int = 0o600, follow: bool = True) -> None:
    """Write a file atomically and durably, with ``mode`` set before any byte lands in it.

    A symlinked file (a dotfile manager's) stays a symlink: its target is replaced;
    unless ``follow`` is False (a folder of ltm's own, where a link is none of ltm's):
    then the link itself is replaced, and the temporary file is never opened through one.
    """
    if follow and path.is_symlink():
        path = path.resolve()
    if path.parent == config_dir():
        private_dir(path.parent)  # it holds the tokens
    else:
        path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    nofollow = 0 if follow else getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | nofollow, mode)
    try:
        # A buffered write: all of ``text`` or an error (a bare ``os.write`` may write part
        # of it on a full disk and say nothing).
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            # On disk before the rename: a crash after it must find the new bytes, not
            # an empty file where the tokens were (a rename can reach the disk first).
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # A file system that cannot sync a folder: the rename is made, if not yet durable.
    with contextlib.suppress(OSError):
        sync_dir(path.parent)


def sync_dir(path: Path) -> None:
    """A rename or an unlink is durable once its folder is synced (POSIX only)."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_file(path: Path) -> None:
    """Delete a file (or a symlink's target, as ``write_private`` writes through it)."""
    if path.is_symlink():
        path = path.resolve()
    path.unlink(missing_ok=True)
