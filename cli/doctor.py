"""``ltm doctor``: what is wrong when the agent "forgets", one line per check, with the fix.

Each check returns a ``Check``: ``ok``, ``warn`` (works, but worth knowing),
``fail`` (something the user must fix; the command exits 1) or ``skip`` (does
not apply here). Every check is bounded in time: network requests get a
1.5-second timeout, and the local store's integrity check is interrupted at
2 seconds (``--full`` lets it run to the end), so a server that is down or
a huge store never makes the doctor hang.

Checks only read: nothing is created, migrated or repaired.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ltm.cli.config import time_scale
from ltm.cli.errors import CliError

if TYPE_CHECKING:
    from ltm.cli.client.credentials import Target
    from ltm.cli.client.remote import Http, Reply

Status = Literal["ok", "warn", "fail", "skip"]
# The most one check may take, and per request (room to finish within the check's budget);
# both stretch by LTM_TIME_SCALE on a machine too slow for them.
BUDGET_S = 2.0 * time_scale()
NET_TIMEOUT_S = 1.5 * time_scale()
# How long to wait for a local store another program holds: within the check's budget.
LOCK_WAIT_S = 1.0 * time_scale()
PROTOCOL_VERSION = "0.2"  # the /v1/healthz version this client speaks (app.PROTOCOL_VERSION)
SKEW_WARN_S = 30
SKEW_FAIL_S = 300
TOKEN_FILES = ("credentials", "hosts.json")
# SQLite's SQLITE_BUSY and SQLITE_LOCKED (https://www.sqlite.org/rescode.html): the store
# is held by another connection, which is no damage.
SQLITE_LOCKED_CODES = frozenset({5, 6})


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None
    elapsed_ms: float = 0.0  # how long the check took (each is bounded by BUDGET_S)


def _posix() -> bool:
    return os.name == "posix"


def _command(*words: str | Path) -> str:
    """A fix's command line as the user's shell reads it back: paths are quoted, so one
    under a folder with a space in its name is still one word when pasted."""
    from ltm.cli.agents.mcp.install import shell_join

    return shell_join([str(word) for word in words])


# -- files -------------------------------------------------------------------------


CONFIG_TOML = "config.toml"  # the check of the file shared with the reference CLI


def check_files() -> list[Check]:
    """The config dir and the files that hold tokens: present, and private on POSIX."""
    from ltm.cli.config import config_dir

    directory = config_dir()
    if not directory.exists():
        return [
            Check(
                "config",
                "ok",
                f"no config directory yet ({directory}); the local store is used",
            )
        ]
    out: list[Check] = []
    problems: list[str] = []
    if _posix():
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & 0o077:
            problems.append(f"{directory} is mode {mode:o}, not 700")
    present = []
    for name in (*TOKEN_FILES, "config.toml", "settings.toml"):
        path = directory / name
        if not path.exists():
            continue
        present.append(name)
        if name in TOKEN_FILES and _posix():
            mode = stat.S_IMODE(path.stat().st_mode)
            if mode != 0o600:
                problems.append(f"{path} is mode {mode:o}, not 600")
    if problems:
        fixes = [_command("chmod", "700", directory)] + [
            _command("chmod", "600", directory / n) for n in TOKEN_FILES if n in present
        ]
        out.append(
            Check(
                "config",
                "fail",
                "others can read your tokens: " + "; ".join(problems),
                " && ".join(fixes),
            )
        )
    else:
        where = ", ".join(present) if present else "no files"
        note = "" if _posix() else " (permissions not checked: Windows uses ACLs)"
        out.append(Check("config", "ok", f"{directory}: {where}{note}"))
    from ltm.cli.config import load_reference, load_settings

    fix = "correct it, or move it aside and set again what it held (ltm config, ltm sensitive)"
    try:
        # Every verb reads it (the default server), ltm auth and ltm config set too, which
        # rewrite it whole: no sign-in or setting mends it, only the file.
        load_reference()
    except CliError as exc:
        out.append(Check(CONFIG_TOML, "fail", exc.message, fix))
    else:
        try:
            from ltm.cli.client import credentials

            credentials.load()
        except CliError as exc:
            out.append(Check("sign-in", "fail", exc.message, "sign in again: ltm auth HOST"))
    try:
        load_settings()  # every save reads it (ltm sensitive), every request (timeout)
    except CliError as exc:
        out.append(Check("settings", "fail", exc.message, fix))
    return out


def check_private() -> Check:
    """ltm's data folder (the local store, its -wal and -shm) and state folder (the hooks'
    logs and markers, the warm MCP socket) are the user's alone: 700 folders, 600 files.
    The doctor only reads: ltm repairs them itself the next time it opens the store or
    runs a hook."""
    from ltm.cli.config import data_dir, local_db_path, state_dir

    if not _posix():
        return Check("private", "skip", "permissions not checked: Windows uses ACLs")
    problems: list[str] = []
    fixes: list[str] = []
    for folder in (data_dir(), state_dir()):
        mode = _mode(folder)
        if folder.exists() and not folder.is_dir():
            continue  # not a folder: no chmod mends that (the store's check says so)
        if mode is not None and mode & 0o077:
            problems.append(f"{folder} is mode {mode:o}, not 700")
            fixes.append(_command("chmod", "700", folder))
    store = local_db_path()
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{store}{suffix}")
        mode = _mode(path)
        if mode is not None and mode & 0o077:
            problems.append(f"{path} is mode {mode:o}, not 600")
            fixes.append(_command("chmod", "600", path))
    if problems:
        return Check(
            "private",
            "fail",
            "other users of this machine can read your packets or hook logs: "
            + "; ".join(problems)
            + " (ltm itself makes the data folder private when it opens the local store, and"
            " the state folder when a hook runs or a verb keeps a file there)",
            " && ".join(fixes),  # the command alone: pasted whole into a shell, it runs
        )
    return Check("private", "ok", f"{data_dir()} and {state_dir()}: yours alone (700, files 600)")


def check_outbox() -> Check:
    """Saves kept while their server could not be reached (``ltm.cli.client.outbox``)."""
    from ltm.cli.client import outbox

    entries = outbox.waiting()
    broken = outbox.unreadable()
    aside = outbox.set_aside()
    if broken or aside:  # saves that will never go by themselves: said before what waits
        parts = (outbox.damaged(broken), outbox.aside(aside), outbox.summary(entries))
        fixes = [outbox.ASIDE_FIX] if aside else []
        if broken:
            fixes.insert(
                0,
                "open each file that cannot be read: what is left of its packet is under"
                ' "packet"; then remove the file (ltm never does)',
            )
        return Check("outbox", "warn", "; ".join(part for part in parts if part), "; ".join(fixes))
    if not entries:
        return Check("outbox", "ok", "empty: every save reached its server")
    try:
        stranded = outbox.signed_out(entries)
        away = outbox.elsewhere(entries)
    except CliError:  # a config that names no server: its own check says so
        stranded, away = [], []
    fix = "they go with the next command that reaches the server, or now: ltm push --outbox"
    if away:  # no command goes there now: only push --outbox does
        fix = f"commands no longer go to {away[0]}: push them there with: ltm push --outbox"
    if stranded:  # logged out since: no command goes there until the user signs in again
        fix = f"sign in there again, and they go with the next command: ltm auth {stranded[0]}"
    return Check("outbox", "warn", outbox.summary(entries), fix)


def check_meaning() -> Check:
    """Search and recall by meaning: the ``semantic`` extra, and the local store's packets
    still without a vector (the next search by meaning computes them, once)."""
    from ltm import semantic

    if not semantic.installed():
        # A wordllama whose model is elsewhere (another release) is not a missing extra.
        why = "the semantic extra is not installed"
        if semantic.package_folder() is not None and (off := semantic.why_off()):
            why = off
        return Check(
            "meaning",
            "skip",
            f"search and recall by words only: {why}",
            f"for search by meaning too: pip install '{semantic.EXTRA}'",
        )
    if not semantic.enabled():
        return Check("meaning", "skip", "turned off by LTM_SEMANTIC")
    try:
        semantic.model()  # installed is not readable: a damaged file turns meaning off
    except semantic.Unavailable as exc:
        return Check("meaning", "warn", f"search and recall by words only: {exc}")
    on = f"search and recall by meaning too ({semantic.MODEL})"
    if missing := _vectors_missing():
        # Recall at the prompt never fills them (a hook must stay quick): say who does.
        return Check(
            "meaning",
            "warn",
            f"{on}; {missing} packets of the local store have no vector yet (saved before"
            " the extra): recall at the prompt misses them until a search makes them",
            "compute them once with any search: ltm search --local x",
        )
    return Check("meaning", "ok", on)


def _vectors_missing() -> int:
    """The local store's packets without a vector (saved before the extra, or with another
    model), read-only; 0 where there is no store, or it cannot tell."""
    from ltm.cli.config import local_db_path
    from ltm.store.sqlite import SqliteStore

    path = local_db_path()
    if not path.exists():
        return 0
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
        try:
            return SqliteStore.vectors_missing_in(conn)
        finally:
            conn.close()
    except sqlite3.Error:  # no vector tables yet (an older store), or busy: not this check's
        return 0


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.lstat().st_mode)
    except OSError:
        return None


# -- the server ----------------------------------------------------------------------


def _unanswered(exc: CliError) -> str:
    """What a failed request says, for a check. The doctor waits its own NET_TIMEOUT_S
    whatever ``ltm config set timeout`` says (it never hangs), so a timeout's usual advice
    to raise that setting is left out: it would change nothing here."""
    from ltm.cli.client.transport import TimedOut

    if isinstance(exc, TimedOut):
        return f"{exc.host} took the connection but did not answer within {exc.timeout:g} s"
    return exc.message


def check_server(target: Target | None) -> tuple[list[Check], Reply | None, Http | None]:
    """Reachable, and speaking our protocol version (``GET /v1/healthz``)."""
    from ltm.cli.client.remote import Http
    from ltm.cli.client.transport import TimedOut
    from ltm.loopback import loopback_url

    if target is None:
        return (
            [Check("server", "skip", "no server configured; packets stay in the local store")],
            (None),
            None,
        )
    http = Http(target.host, timeout=NET_TIMEOUT_S)
    try:
        reply = http.request("GET", "/v1/healthz")
    except CliError as exc:
        http.close()
        fix = (
            f"start the server, or check the URL (ltm auth {target.host}); work"
            " offline meanwhile with --local"
        )
        if isinstance(exc, TimedOut):
            fix = (
                "the server is stuck or overloaded: see its logs, or restart it; work"
                " offline meanwhile with --local"
            )
        return [Check("server", "fail", _unanswered(exc), fix)], None, None
    data: Any = None
    if reply.status == 200:
        try:
            import json

            data = json.loads(reply.body)
        except ValueError:
            data = None
    if not isinstance(data, dict) or data.get("ok") is not True:
        return (
            [
                Check(
                    "server",
                    "fail",
                    f"{target.host} answered GET /v1/healthz with HTTP {reply.status}, not an ltm"
                    " health answer",
                    "check the URL: it must be the server's base address (ltm auth URL)",
                )
            ],
            None,
            http,
        )
    version = data.get("version")
    if version != PROTOCOL_VERSION:
        return (
            [
                Check(
                    "server",
                    "fail",
                    f"{target.host} speaks protocol {version!r}; this ltm speaks"
                    f" {PROTOCOL_VERSION!r}",
                    "upgrade whichever side is older (pip install -U ltm, or the server)",
                )
            ],
            reply,
            http,
        )
    up = f"{target.host} is up, protocol {version}"
    # A DynamoDB server upgraded without its repairs (docs/deploy-aws.md, Operating it):
    # search there misses older packets and usage counts may be off. Only names of plain
    # letters are repeated (index, usage): the answer is the server's text.
    owed = data.get("repairs_owed")
    named = [
        r
        for r in (owed if isinstance(owed, list) else [])[:4]
        if isinstance(r, str) and r.isascii() and r.isalpha() and len(r) <= 16
    ]
    if named:
        commands = " and ".join(f"python -m ltm.store.dynamo_repair {r}" for r in named)
        return (
            [
                Check(
                    "server",
                    "warn",
                    f"{up}, but its table was not repaired after an upgrade: search there"
                    " can miss older packets, and usage counts can be off",
                    f"the server's operator runs: {commands} (docs/deploy-aws.md)",
                )
            ],
            reply,
            http,
        )
    if target.host.startswith("http://") and not loopback_url(target.host):
        # `ltm auth` says so once; the token goes out in the clear with every command since.
        return (
            [
                Check(
                    "server",
                    "warn",
                    f"{up}, over plain HTTP beyond this machine: the token travels unencrypted"
                    " with every request",
                    "put a TLS proxy in front of the server (docs/server.md, Behind a proxy)"
                    " and sign in again at its https:// address (ltm auth https://...)",
                )
            ],
            reply,
            http,
        )
    return [Check("server", "ok", up)], reply, http


def check_token(target: Target, http: Http) -> Check:
    """The token is accepted, and what the server says it may do."""
    if not target.token:
        return Check("token", "fail", f"no token for {target.host}", f"ltm auth {target.host}")
    try:
        reply = http.request("GET", "/v1/packets", query={"limit": 1}, token=target.token)
    except CliError as exc:
        return Check("token", "fail", _unanswered(exc), "try again; check the server")
    if reply.status == 401:
        origin = " (from LTM_TOKEN)" if target.via == "LTM_TOKEN" else ""
        return Check(
            "token",
            "fail",
            f"{target.host} rejects the token{origin}: revoked or never valid there",
            f"sign in again: ltm auth {target.host}",
        )
    if reply.status != 200:
        return Check(
            "token",
            "fail",
            f"{target.host} answered HTTP {reply.status} to a listing with the token",
            "see the server's logs",
        )
    return Check("token", "ok", "accepted" + _token_details(target, http))


def _token_details(target: Target, http: Http) -> str:
    """Label and granted scope, from ``GET /v1/tokens`` where the server has it (we do)."""
    import json

    try:
        reply = http.request("GET", "/v1/tokens", token=target.token)
        rows = json.loads(reply.body).get("tokens") if reply.status == 200 else None
    except (CliError, ValueError, AttributeError):
        return ""
    if reply.status == 403:
        # Listing tokens needs the full scope; this token just listed packets, so it
        # may read and nothing more (RFC 6750 §3.1's insufficient_scope).
        return " (scope 'read': reads only; sign in again for write access)"
    current = next((r for r in rows or [] if isinstance(r, dict) and r.get("current")), None)
    if current is None:
        return ""
    parts = [f"label {current.get('label')!r}"]
    scope = current.get("scope")
    parts.append(f"scope {scope!r}" if isinstance(scope, str) else "scope not stated: full")
    user = (target.user or {}).get("display")
    if user:
        parts.append(f"user {user!r}")
    return " (" + ", ".join(parts) + ")"


def check_clock(target: Target, reply: Reply) -> Check:
    """The server's ``Date`` header against this machine's clock."""
    raw = reply.headers.get("date")
    if not raw:
        return Check("clock", "skip", f"{target.host} sends no Date header")
    try:
        theirs = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return Check("clock", "skip", f"{target.host} sends an unreadable Date header")
    skew = (datetime.now(UTC) - theirs).total_seconds()
    text = f"{abs(skew):.0f} s {'ahead of' if skew > 0 else 'behind'} {target.host}"
    fix = "turn on time sync (NTP) on this machine or the server"
    if abs(skew) > SKEW_FAIL_S:
        return Check("clock", "fail", f"this machine is {text}: new packets get wrong times", fix)
    if abs(skew) > SKEW_WARN_S:
        return Check("clock", "warn", f"this machine is {text}", fix)
    return Check("clock", "ok", "in step with the server (±1 s, the Date header's resolution)")


# -- the local store --------------------------------------------------------------------


def _size(path: Path) -> int:
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += Path(f"{path}{suffix}").stat().st_size
    return total


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB" if size >= 1024 * 1024 else f"{size / 1024:.0f} KiB"


def check_store(*, full: bool = False) -> Check:
    """Integrity (``PRAGMA integrity_check``), schema version and size; opened read-only."""
    from ltm.cli.config import local_db_path
    from ltm.store.sqlite_schema import SCHEMA_VERSION

    path = local_db_path()
    for folder in path.parents:  # every save would fail making the store's folder
        if folder.exists():
            if not folder.is_dir():
                return Check(
                    "store",
                    "fail",
                    f"{folder} is a file, not a folder: the local store {path} cannot be made",
                    f"move it aside ({_command('mv', folder, f'{folder}.aside')}), or set"
                    " LTM_DATA_DIR to a folder",
                )
            break
    if not path.exists():
        return Check("store", "ok", f"no local store yet ({path}); it is made on the first save")
    size = _size(path)
    moves = [_command("mv", path, f"{path}.broken")]
    for suffix in ("-wal", "-shm"):
        # SQLite finds a database's journal by its name beside it: left behind, the copy
        # set aside would lose what its journal holds (the latest changes).
        if Path(f"{path}{suffix}").exists():
            moves.append(_command("mv", f"{path}{suffix}", f"{path}.broken{suffix}"))
    aside = " && ".join(moves)
    # --local: signed in, a plain import goes to the server and leaves the new store empty
    restore = "ltm import --local BACKUP.jsonl"
    fix_corrupt = f"move it aside ({aside}) and restore your packets from a bundle: {restore}"
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
    except sqlite3.Error as exc:
        return Check("store", "fail", f"cannot open {path}: {exc}", "check the file's permissions")
    deadline = time.monotonic() + BUDGET_S
    stopped = False

    def out_of_time() -> int:
        nonlocal stopped
        stopped = not full and time.monotonic() > deadline
        return 1 if stopped else 0

    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.set_progress_handler(out_of_time, 10_000)
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.OperationalError as exc:
        if stopped:
            return Check(
                "store",
                "warn",
                f"{path} ({_mib(size)}): integrity check not finished within {BUDGET_S:g} s,"
                f" schema version {version}",
                "run it to the end: ltm doctor --full",
            )
        if (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in SQLITE_LOCKED_CODES:
            # Held, not damaged: moving it aside would drop packets that are intact.
            return Check(
                "store",
                "fail",
                f"{path}: {exc} (another program holds it: a running ltm, or one that"
                " opened the file)",
                "let that program finish or close it, then run ltm doctor again",
            )
        return Check("store", "fail", f"{path}: {exc}", fix_corrupt)
    except sqlite3.DatabaseError as exc:
        return Check("store", "fail", f"{path} is damaged: {exc}", fix_corrupt)
    finally:
        conn.close()
    problems = [row[0] for row in rows if row[0] != "ok"]
    if problems:
        shown = "; ".join(problems[:3]) + ("; …" if len(problems) > 3 else "")
        return Check("store", "fail", f"{path} is damaged: {shown}", fix_corrupt)
    if version > SCHEMA_VERSION:
        return Check(
            "store",
            "fail",
            f"{path} has schema version {version}; this ltm understands up to {SCHEMA_VERSION}",
            "upgrade ltm (pip install -U ltm): a newer ltm wrote this store",
        )
    note = "" if version == SCHEMA_VERSION else f" (upgraded to {SCHEMA_VERSION} on next use)"
    return Check("store", "ok", f"{path}: intact, schema version {version}{note}, {_mib(size)}")


# -- harness entries -------------------------------------------------------------------------


def _ltm_paths() -> set[str]:
    """Ways the running ``ltm`` may be named in a harness's config."""
    from ltm.cli.agents.mcp.install import ltm_command

    command = ltm_command()
    return {command[0], _resolved(command[0])}


def _read_jsonc(path: Path) -> Any:
    from ltm.cli.agents.mcp.install import parse_jsonc

    return parse_jsonc(path.read_text(encoding="utf-8")).value


def _read_or_fail(name: str, path: Path) -> Any:
    """A harness's JSON (with comments) file, else the failed ``Check`` that says why."""
    try:
        return _read_jsonc(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Check(name, "fail", f"{path} cannot be read: {exc}", "fix the file")


def _read_client_or_fail(name: str, client: Any, path: Path) -> Any:
    """An MCP client's config file (JSON with comments, or Codex's TOML), else the failed
    ``Check`` that says why."""
    from ltm.cli.agents.mcp.install import read_doc

    try:
        return read_doc(client, path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Check(name, "fail", f"{path} cannot be read: {exc}", "fix the file")


def check_mcp() -> list[Check]:
    """Each known MCP client's config: an ``ltm`` entry that runs this ``ltm``."""
    from ltm.cli.agents.mcp.install import CLIENTS, SERVER_NAME

    mine = _ltm_paths()
    out = []
    for client in CLIENTS.values():
        name = f"mcp {client.name}"
        path = client.path()
        install = f"ltm mcp install {client.name} --write"
        if not path.exists():
            out.append(Check(name, "skip", f"no {path}; to add ltm: {install}"))
            continue
        doc = _read_client_or_fail(name, client, path)
        if isinstance(doc, Check):
            out.append(doc)
            continue
        servers = doc.get(client.key) if isinstance(doc, dict) else None
        entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
        if not isinstance(entry, dict):
            out.append(Check(name, "skip", f"{path} has no ltm entry; to add it: {install}"))
            continue
        out.append(_entry_check(name, path, entry, mine, install))
    return out


def _entry_check(name: str, path: Path, entry: dict[str, Any], mine: set[str], fix: str) -> Check:
    command = entry.get("command")
    args = entry.get("args") or []
    if not isinstance(command, str) or not command:
        return Check(name, "fail", f"{path}: the ltm entry has no command", fix)
    program = command if Path(command).stem == "ltm" else None
    if program is None and isinstance(args, list) and "ltm.cli.start.entry" in args:
        program = command  # python -m ltm.cli.start.entry
    if program is None:
        return Check(name, "warn", f"{path}: the ltm entry runs {command!r}, not ltm", fix)
    if os.sep not in program and not _on_path(program):
        # ltm mcp install writes this same bare name into a shared file: only PATH mends it.
        return _none_on_path(name, f"{path}: the ltm entry", program, "the ltm tools")
    if not Path(program).exists() and not _on_path(program):
        return Check(name, "fail", f"{path}: the ltm entry runs {program}, which is gone", fix)
    if _on_path(program):  # a bare "ltm" (a file shared with the repository): PATH's
        program = _which(program)
    if program not in mine and _resolved(program) not in mine:
        return Check(name, "warn", f"{path}: the ltm entry runs another ltm ({program})", fix)
    return Check(name, "ok", f"{path} runs this ltm")


def _none_on_path(name: str, where: str, program: str, what: str) -> Check:
    """A bare program name (a project's portable entry) with none on PATH here."""
    return Check(
        name,
        "fail",
        f"{where} runs the {program} on PATH, and there is none on PATH here: {what} do nothing",
        "put ltm on PATH (also for the editor or harness you start)",
    )


def _on_path(program: str) -> bool:
    import shutil

    return os.sep not in program and shutil.which(program) is not None


def _which(program: str) -> str:
    import shutil

    return shutil.which(program) or program


def _resolved(program: str) -> str:
    try:
        return str(Path(program).resolve())
    except OSError:
        return program


def hook_files(harness_name: str) -> list[tuple[str, Path]]:
    """(scope, file) where a harness reads hooks: "" for the user's.

    The user's and the project's files, as ``ltm hooks install`` writes them
    (``ltm.cli.agents.hooks_install.harness``), Claude Code's untracked
    ``.claude/settings.local.json``, and for GitHub Copilot every ``*.json`` of its
    hooks folders (it reads them all; ltm writes ``ltm.json``).
    https://code.claude.com/docs/en/hooks (Configuration),
    https://developers.openai.com/codex/hooks (Where Codex looks for hooks),
    https://docs.github.com/en/copilot/reference/hooks-reference (Hooks locations)
    """
    from ltm.cli.agents.hooks_install import harness

    user, project = harness(harness_name, project=False), harness(harness_name, project=True)
    files = [("", user.hooks_file), ("project", project.hooks_file)]
    if harness_name == "claude-code":
        files.append(("local", project.hooks_file.with_name("settings.local.json")))
    if harness_name == "copilot":
        for scope, own in list(files):
            try:
                others = sorted(own.parent.glob("*.json"))
            except OSError:
                others = []
            files += [(scope, other) for other in others if other != own]
    return files


def _hooks_check(
    name: str,
    fix: str,
    path: Path,
    ours: dict[str, list[str]],
    mine: set[str],
    harness_name: str = "claude-code",
) -> Check:
    """One hooks file holding ltm entries: every event wired, to an ltm that exists."""
    from ltm.cli.agents.hook_entries import hook_program
    from ltm.cli.agents.hooks_install import RECALL, harness

    wired = harness(harness_name, project=False).events
    rank = {event.name: i for i, event in enumerate(wired)}
    events = sorted(ours, key=lambda event: rank.get(event, len(rank)))  # ltm's order first
    for event in events:
        for program in filter(None, map(hook_program, ours[event])):
            if os.sep not in program and not _on_path(program):
                # A project's portable hooks: they do nothing where no ltm is on PATH.
                return _none_on_path(name, f"{path}: {event}", program, "the hooks")
            if os.sep in program and not Path(program).exists():
                return Check(name, "fail", f"{path}: {event} runs {program}, which is gone", fix)
            if program not in mine and _resolved(program) not in mine and os.sep in program:
                return Check(name, "warn", f"{path}: {event} runs another ltm ({program})", fix)
    missing = [e.name for e in wired if e.verb != RECALL and e.name not in ours]
    if missing:
        return Check(
            name,
            "warn",
            f"{path}: no ltm hook for {', '.join(missing)} (without SessionStart nothing is"
            " resumed; without PreCompact and Stop no one is reminded to save)",
            fix,
        )
    programs = {p for event in events for p in filter(None, map(hook_program, ours[event]))}
    which = "the ltm on PATH" if any(os.sep not in p for p in programs) else "this ltm"
    return Check(name, "ok", f"{path}: {', '.join(events)} run {which}")


def _codex_flag() -> Check | None:
    """Codex runs hooks unless a config.toml says ``[features] hooks = false``
    (``codex_hooks``, the old name): the user's, or the project's once trusted.

    https://developers.openai.com/codex/hooks ("Hooks are enabled by default").
    """
    from ltm.cli.agents.hooks_install import flag_state, harness
    from ltm.cli.config import read_toml

    for project in (False, True):
        toml = harness("codex", project=project).config_toml
        assert toml is not None
        try:
            doc = read_toml(toml)
        except CliError as exc:
            return Check("hooks codex flag", "fail", str(exc), "fix the file")
        if doc is not None and flag_state(doc) is False:
            return Check(
                "hooks codex flag",
                "fail",
                f"{toml} turns Codex's hooks off ([features] hooks = false): ltm's never run",
                f"remove that line from {toml}, or set it to true",
            )
    return None


def _ltm_hooks(harness_name: str, doc: Any) -> dict[str, list[str]]:
    """{event: the commands of its ltm entries} of a hooks file."""
    from ltm.cli.agents.hooks_install import harness, ltm_commands

    return ltm_commands(harness(harness_name, project=False), doc)


def _hooks_turned_off(harness_name: str, path: Path, doc: Any) -> Check | None:
    """A file that switches every hook off: Copilot's ``disableAllHooks``, Gemini CLI's
    ``hooksConfig.enabled: false``.
    https://docs.github.com/en/copilot/reference/hooks-reference (Disable all hooks),
    https://geminicli.com/docs/hooks (Enable and disable the hooks system)
    """
    if not isinstance(doc, dict):
        return None
    off = None
    if harness_name == "copilot" and doc.get("disableAllHooks") is True:
        off = "disableAllHooks is true"
    config = doc.get("hooksConfig")
    if harness_name == "gemini" and isinstance(config, dict) and config.get("enabled") is False:
        off = "hooksConfig.enabled is false"
    if off is None:
        return None
    return Check(
        f"hooks {harness_name} off",
        "fail",
        f"{path}: {off}, so ltm's hooks never run",
        f"remove that setting from {path}",
    )


def _tools_check(harness_name: str) -> Check:
    """Hooks are installed: the ltm tools they would name must be there too (without
    them the hooks name the shell commands instead, which work but cost the agent more)."""
    from ltm.cli.agents.wired import has_tools

    name = f"tools {harness_name}"
    if has_tools(harness_name):
        return Check(name, "ok", "the ltm MCP tools are wired (the hooks name them)")
    return Check(
        name,
        "warn",
        "ltm's hooks run but the harness has no ltm MCP tools (save, resume...): the agent"
        " must use the shell commands",
        f"ltm mcp install {harness_name} --write",
    )


def check_hooks() -> list[Check]:
    """Each harness's hooks files that hold ``ltm hook`` entries, and what turns them off."""
    from ltm.cli.agents.hooks_install import NAMES, harness

    found: list[Check] = []
    mine = _ltm_paths()
    for harness_name in NAMES:
        before = len(found)
        for scope, path in hook_files(harness_name):
            name = " ".join(filter(None, ("hooks", harness_name, scope)))
            fix = f"ltm hooks install {harness_name} --write" + (" --project" if scope else "")
            if not path.exists():
                continue
            doc = _read_or_fail(name, path)
            if isinstance(doc, Check):
                found.append(doc)
                continue
            ours = _ltm_hooks(harness_name, doc)
            if ours:
                found.append(_hooks_check(name, fix, path, ours, mine, harness_name))
                if off := _hooks_turned_off(harness_name, path, doc):
                    found.append(off)
        if harness_name == "codex" and len(found) > before and (flag := _codex_flag()):
            found.append(flag)
        if len(found) > before:
            found.append(_tools_check(harness_name))
        if len(found) == before:
            display = harness(harness_name, project=False).display
            install = f"ltm hooks install {harness_name} --write"
            skip = f"no ltm hook in {display}'s settings; to add them: {install}"
            found.append(Check(f"hooks {harness_name}", "skip", skip))
    return found


# -- all of them ----------------------------------------------------------------------------


def run_all(*, full: bool = False) -> list[Check]:
    checks: list[Check] = []
    checks += _timed("config", check_files)
    found: dict[str, Any] = {}
    target: Target | None = None
    try:
        from ltm.cli.client import credentials

        target = credentials.active()
    except CliError as exc:  # a config.toml host that is not a URL, damaged hosts.json
        unread = any(check.name == CONFIG_TOML for check in checks)  # its fix is said there
        fix = "ltm config set host URL"
        # The environment overrides the files: no config set mends what it holds.
        if exc.message.startswith("LTM_TOKEN:"):
            fix = "correct LTM_TOKEN in this environment, or unset it to use your sign-in"
        elif unread:
            fix = f"fix {CONFIG_TOML} first (above)"
        elif os.environ.get("LTM_HOST"):
            fix = "correct LTM_HOST in this environment, or unset it to use the configured server"
        checks.append(Check("server", "fail", exc.message, fix))

    def server() -> list[Check]:
        result, found["health"], found["http"] = check_server(target)
        return result

    if not checks or checks[-1].name != "server":
        checks += _timed("server", server)
    http, health = found.get("http"), found.get("health")
    try:
        if target is not None and http is not None and health is not None:
            checks += _timed("token", lambda: [check_token(target, http)])
            checks += _timed("clock", lambda: [check_clock(target, health)])
        elif target is not None:
            for name in ("token", "clock"):
                checks.append(Check(name, "skip", "the server did not answer; not checked"))
    finally:
        if http is not None:
            http.close()
    checks += _timed("store", lambda: [check_store(full=full)])
    checks += _timed("private", lambda: [check_private()])
    checks += _timed("outbox", lambda: [check_outbox()])
    checks += _timed("meaning", lambda: [check_meaning()])
    checks += _timed("mcp", check_mcp)
    checks += _timed("hooks", check_hooks)
    return checks


def _timed(name: str, check: Callable[[], list[Check]]) -> list[Check]:
    """Run a check, timed; one that breaks reports that instead of ending the doctor."""
    started = time.perf_counter()
    try:
        results = check()
    except CliError as exc:
        results = [Check(name, "fail", exc.message)]
    except Exception as exc:
        results = [Check(name, "fail", f"the check itself failed: {type(exc).__name__}: {exc}")]
    elapsed = round((time.perf_counter() - started) * 1000 / max(1, len(results)), 1)
    return [replace(c, elapsed_ms=elapsed) for c in results]


MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "--  "}


def render(checks: list[Check]) -> str:
    """One line per check. Details carry outside data (program paths from a repository's
    ``.mcp.json`` or ``.claude/settings.json``, a server's answers), so every line goes
    through the one ``safe``: no escape sequence reaches the terminal."""
    from ltm.cli.terminal.output import one_line, safe

    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        line = f"{MARKS[c.status]}  {c.name.ljust(width)}  {one_line(c.detail, 300)}"
        if c.fix and c.status in ("fail", "warn"):
            line += f" — fix: {c.fix}"
        lines.append(safe(line))
    return "\n".join(lines)


def as_json(checks: list[Check]) -> dict[str, Any]:
    failed = any(c.status == "fail" for c in checks)
    return {"ok": not failed, "checks": [asdict(c) for c in checks]}


def main(*, json_out: bool, full: bool) -> int:
    import json

    checks = run_all(full=full)
    if json_out:
        print(json.dumps(as_json(checks), indent=2))
    else:
        print(render(checks))
    failed = [c for c in checks if c.status == "fail"]
    if failed and not json_out:
        noun = "check" if len(failed) == 1 else "checks"
        print(f"ltm doctor: {len(failed)} {noun} failed", file=sys.stderr)
    return 1 if failed else 0
