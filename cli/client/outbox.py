"""The outbox: saves that could not reach their server, kept on this machine until they can.

A ``save`` (CLI or the MCP tool) whose server cannot be reached (no connection, no
name, no answer, or a proxy's 502, 503 or 504 for it) has already passed the
pre-flight; rather than lose it (an agent's end-of-session packet is written once), it
is kept here, one file per packet, and pushed by the next command that reaches that
server (``open_backend``) or by ``ltm push --outbox``. Delivery runs the same checks
again (schema, redaction, with the flags the save was given), and the server its own.

Exactly once: a file is removed only after its push was answered (and only while it
holds what was pushed: the packet saved again meanwhile waits on), a push of the
same id and bytes is one packet however often it is sent, and one process at a
time delivers (an ``flock`` on the folder's lock file). A command for a server
something waits for waits while another process delivers to it, then delivers
what is left itself, before its own request: a packet saved again meanwhile is
pushed after the older version being delivered, never overwritten by it. (The
hooks, on their short budget, deliver nothing and so never wait.) Saving the same
id again while offline replaces the waiting file: the newest version is the one
the server would have kept too; a push of it that the server takes (any command, the
agent's tool) removes what was kept of it before, which is that version or an older
one (its delivery timed out, or was refused).

Refused for good: a packet refused for what it is (the checks here, a 400, 409 or 413:
``final`` says which and why) would be refused again at every command; it is set aside,
said once with the command that pushes it once fixed, as its own packet JSON in the
folder's ``refused/``, never retried, and never deleted by ltm (``ltm doctor`` lists it
until the user deletes it). A refusal that may pass (a 403: the sign-in, not the
packet) leaves it waiting. A save kept while signed in as one account (when
the sign-in knows it: a server with ``/v1/whoami``) is delivered only while signed
in as that account: another account signed in to the same server since would
otherwise receive it. A sign-in that does not know its account (``LTM_TOKEN``) asks
the server, and one the server will not name delivers no such save.

Private and durable: the folders are 0700 inside ltm's data folder, each file 0600,
written to a temporary name, fsynced, renamed, and the folder fsynced, so a packet
said to be kept survives a crash or a power cut.

Import-light: ``open_backend`` asks ``waiting`` on every remote command.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ltm.cli.errors import CliError

if TYPE_CHECKING:
    from ltm.backend import Backend
    from ltm.cli.client.credentials import Target
    from ltm.packet import Checked

FOLDER = "outbox"
LOCK = ".lock"


class Entry(NamedTuple):
    path: Path
    host: str
    team: str | None
    lenient: bool
    allow_unredacted: bool
    body: bytes  # the packet as the pre-flight accepted it (canonical bytes)
    packet_id: str
    kept_at: str
    # The account it was saved as, when the sign-in knew it: delivered only as that one.
    user_id: str | None = None
    user_display: str = ""


class Delivery(NamedTuple):
    sent: list[str]  # packet ids pushed
    refused: list[str]  # ids the checks or the server refused: they stay, or are set aside
    left: int  # entries not tried (the server could not be reached)


def folder() -> Path:
    from ltm.cli.config import data_dir

    return data_dir() / FOLDER


def _host_key(host: str) -> str:
    import hashlib  # here: the hooks ask ``waiting()`` and need no hash

    return hashlib.sha256(host.encode("utf-8")).hexdigest()[:16]


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the save never reached its server: no connection at all
    (``Unreachable``), no answer in time (``TimedOut``: the server may have stored it,
    and sending the same id and bytes again is still one packet), or a 502, 503 or 504
    (``Unavailable``: the proxy in front of a server that is down says so). A TLS or other
    HTTP problem is no such thing: it would fail again the same way, so it is reported as
    it is."""
    from ltm.cli.client.remote import Unavailable
    from ltm.cli.client.transport import TimedOut, Unreachable

    return isinstance(exc, (Unreachable, TimedOut, Unavailable))


def keep(
    checked: Checked,
    *,
    host: str,
    team: str | None,
    lenient: bool,
    allow_unredacted: bool,
    user: dict[str, str] | None = None,
) -> Path:
    """Keep a checked packet for ``host`` (saved as ``user``, when known); returns its file.
    Durable when it returns."""
    packet_id = str(checked.data.get("id", ""))
    record = {
        "host": host,
        "team": team,
        "lenient": lenient,
        "allow_unredacted": allow_unredacted,
        "user": user,
        "kept_at": stamp(),
        "packet": checked.body().decode("utf-8"),
    }
    path = folder() / f"{_host_key(host)}.{_host_key(packet_id)}.json"
    _write(path, json.dumps(record, ensure_ascii=False))
    return path


def _write(path: Path, text: str) -> None:
    """``text`` as ``path`` (in the outbox folder or one inside it), private (folders 0700,
    the file 0600) and durable when it returns: a packet said to be kept (or set aside)
    must survive a crash or a power cut, rename included."""
    from ltm.cli.config import private_dir, sync_dir, write_private

    private_dir(folder())  # the data folder first, then the outbox: both 0700
    private_dir(path.parent)
    write_private(path, text, follow=False)
    sync_dir(path.parent)


def stamp() -> str:
    """Now, as ``kept_at`` says it: such strings sort as the times they name."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def superseded(host: str, data: dict[str, Any], team: str | None, *, since: str) -> None:
    """A push of ``data`` to ``host`` (``team``), begun at ``since``, that the server took:
    what the outbox kept of that packet before then is delivered (the same bytes) or an
    older version of it. Either way it goes: delivered later, an older version would put
    back on the server what this push replaced (its own delivery timed out, say, or was
    refused, before this command's newer save went through)."""
    try:
        if not any(n.endswith(".json") and not n.startswith(".") for n in os.listdir(folder())):
            return
    except OSError:
        return
    from ltm.cli.config import sync_dir
    from ltm.cli.terminal.output import info

    packet_id = str(data.get("id", ""))
    for entry in waiting(host):
        if entry.packet_id != packet_id or entry.team != (team or None) or entry.kept_at >= since:
            continue
        if _read(entry.path) != entry:
            continue  # saved again meanwhile: that one is newer, and waits on
        entry.path.unlink(missing_ok=True)
        sync_dir(entry.path.parent)
        if json.loads(entry.body) != data:
            info(
                f"outbox: dropped the older version of {packet_id} kept offline"
                f" {entry.kept_at[:19]}Z: the version just pushed replaces it"
            )


def waiting(host: str | None = None) -> list[Entry]:
    """What waits (for ``host``, else for every server), oldest save first: a thread's
    parent goes before the packet that continues it. Unreadable files are skipped."""
    try:
        names = os.listdir(folder())
    except OSError:
        return []
    # Every file is read, not only those named for ``host``: a file's name is made from
    # the server as the build that kept it spelled it (see _spelled).
    found = []
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        entry = _read(folder() / name)
        if entry is not None and (host is None or entry.host == host):
            found.append(entry)
    return sorted(found, key=lambda e: (e.kept_at, e.packet_id))


def unreadable() -> list[Path]:
    """The outbox's files ``waiting`` cannot read (cut short, damaged): saves that will
    never go by themselves, named so the user can look (never deleted: a damaged file
    may be all that is left of its packet)."""
    try:
        names = sorted(os.listdir(folder()))
    except OSError:
        return []
    paths = [folder() / n for n in names if n.endswith(".json") and not n.startswith(".")]
    return [path for path in paths if _read(path) is None]


def damaged(paths: list[Path]) -> str:
    """'2 files cannot be read: PATH, PATH' ('' for none)."""
    if not paths:
        return ""
    count = f"{len(paths)} file{'s' if len(paths) != 1 else ''} cannot be read"
    return f"{count}: {', '.join(str(path) for path in paths)}"


def _read(path: Path) -> Entry | None:
    try:
        record = json.loads(path.read_bytes())
        body = record["packet"].encode("utf-8")
        packet_id = json.loads(body).get("id", "")
        user = record.get("user") if isinstance(record.get("user"), dict) else {}
        return Entry(
            path,
            _spelled(str(record["host"])),
            record.get("team") or None,
            bool(record.get("lenient")),
            bool(record.get("allow_unredacted")),
            body,
            str(packet_id),
            str(record.get("kept_at", "")),
            str(user["id"]) if user.get("id") else None,
            str(user.get("display") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _spelled(host: str) -> str:
    """``host`` as the sign-in spells a server now: builds before the default port was
    dropped from a URL kept ``https://host:443``, the same server as ``https://host``,
    and their saves, named and marked so, went to none (nothing asked for that host)."""
    from ltm.cli.client.credentials import as_key

    return as_key(host)


def deliver(backend: Backend, host: str, *, wait: bool = False) -> Delivery:
    """Push what waits for ``host`` through ``backend``, oldest first, saying one line for
    each. Stops at the first push that cannot reach the server (the rest wait on)."""
    from ltm.cli.client import preflight
    from ltm.cli.client.remote import Rejected
    from ltm.cli.terminal.output import info

    sent: list[str] = []
    refused: list[str] = []
    if not waiting(host):
        return Delivery(sent, refused, 0)
    from ltm.cli.config import file_lock

    with file_lock(folder() / LOCK, wait=wait) as mine:
        entries = waiting(host)  # read again under the lock: what another process left
        if not mine:
            return Delivery(sent, refused, len(entries))
        me = account(backend)
        if me is None and any(entry.user_id for entry in entries):
            try:
                me = _asked(backend)
            except CliError as exc:
                if unreachable(exc):
                    return Delivery(sent, refused, len(entries))
                if isinstance(exc, Rejected):
                    return _rejected(exc, host, entries, sent, refused)
                raise
        for done, entry in enumerate(entries):
            if not entry.path.exists():
                continue  # gone meanwhile (delivered by another process: Windows has no lock)
            where = f"team {entry.team} on {host}" if entry.team else host
            if entry.user_id and (me is None or me["id"] != entry.user_id):
                # Signed in as someone else since (or as an account the server will not name):
                # their packet must not land in this account.
                refused.append(entry.packet_id)
                info(
                    f"outbox: {entry.packet_id} was saved as {entry.user_display or '?'}"
                    f" (user {entry.user_id}) on {host}, not as the account signed in now;"
                    f" it waits for a sign-in as that account: ltm auth {host}"
                )
                continue
            try:
                checked = preflight.accept(
                    entry.body,
                    lenient=entry.lenient,
                    allow_unredacted=entry.allow_unredacted,
                    label=f"the outbox's packet {entry.packet_id}",
                )
                pushed = backend.push_checked(
                    checked,
                    team=entry.team,
                    lenient=entry.lenient,
                    allow_unredacted=entry.allow_unredacted,
                )
            except Exception as exc:  # the pre-flight's own Refused is a Failure, not a CliError
                if unreachable(exc):
                    return Delivery(sent, refused, len(entries) - done)
                if isinstance(exc, Rejected):
                    return _rejected(exc, host, entries[done:], sent, refused)
                refused.append(entry.packet_id)
                message = _first_line(getattr(exc, "message", str(exc)))
                if final(exc) and _read(entry.path) == entry:  # else saved again: that waits
                    info(_set_aside(entry, where, exc))
                else:
                    info(
                        f"outbox: {entry.packet_id} was not taken by {where}: "
                        f"{message}; it stays in the outbox ({entry.path})"
                    )
                continue
            if _read(entry.path) == entry:  # else saved again meanwhile: that one waits on
                from ltm.cli.config import sync_dir

                entry.path.unlink(missing_ok=True)
                sync_dir(entry.path.parent)
            sent.append(pushed.id)
            info(f"outbox: pushed {pushed.id} to {where} (saved offline {entry.kept_at[:19]}Z)")
    return Delivery(sent, refused, 0)


def final(exc: BaseException) -> bool:
    """Whether ``exc`` refuses the packet itself, so that sending it again, at every
    command, would meet the same refusal (and say so each time): such a packet is set
    aside (``_set_aside``) for the user to fix. Which refusals are final, and why:

    - 400: the server's own checks (its schema, its secret scan) judged these bytes,
      and judge the same bytes the same way;
    - 409: the id belongs to another user's packet (or one in another scope): it stays
      theirs, so this packet needs a new id;
    - 413: too large for the server: the packet does not shrink by waiting;
    - the pre-flight here refusing it (the schema, a redaction rule added since the
      save): the packet must be edited, or the rule given up, before it goes.

    Not final, and the packet waits as before: a 401 (the token, not the packet: the
    delivery stops, ``_rejected``); a 403, and a 404 for a team, which say what this
    sign-in may do, not what the packet is: signing in with full access (a read-only
    device token) or rejoining the team makes the same packet welcome, with nothing
    to edit; a 429, a 5xx, a 507 (storage full until packets are deleted), a server
    out of reach: each passes."""
    from ltm.cli.client.backend import IdTaken
    from ltm.cli.client.remote import Refusal
    from ltm.preflight import Refused

    return isinstance(exc, (IdTaken, Refusal, Refused))


ASIDE = "refused"  # inside the outbox folder: packets their server refused for good


def _set_aside(entry: Entry, where: str, exc: BaseException) -> str:
    """Move ``entry`` out of the delivery queue into the outbox's ``refused`` folder, as
    the packet's own JSON (indented, to edit), never to be sent again by ltm; returns the
    one line that says why, where it is and the command that pushes it once fixed.
    Written (durably) before the entry goes: the packet is never only in memory."""
    import shlex

    from ltm.cli.client.backend import IdTaken
    from ltm.cli.config import sync_dir

    text = json.dumps(json.loads(entry.body), ensure_ascii=False, indent=2) + "\n"
    safe = entry.packet_id.replace("-", "").replace("_", "").isalnum() and entry.packet_id.isascii()
    stem = entry.packet_id[:80] if safe else _host_key(entry.packet_id)
    path, n = folder() / ASIDE / f"{stem}.json", 1
    while path.exists() and path.read_text(encoding="utf-8", errors="replace") != text:
        n += 1  # one set aside before, still there: the user's to delete, never replaced
        path = path.with_name(f"{stem}-{n}.json")
    _write(path, text)
    entry.path.unlink(missing_ok=True)
    sync_dir(entry.path.parent)
    reason = _first_line(getattr(exc, "message", str(exc))).split(" — ")[0]
    flags = [f"-t {shlex.quote(entry.team)}"] if entry.team else []
    flags += ["--lenient"] * entry.lenient + ["--allow-unredacted"] * entry.allow_unredacted
    if isinstance(exc, IdTaken):
        fix, verb = 'delete its "id" line (ltm save gives it a new id)', "save"
    else:
        fix, verb = "edit it as that says", "push"
    command = " ".join(["ltm", verb, shlex.quote(str(path)), *flags])
    return (
        f"outbox: {entry.packet_id} was refused by {where}: {reason}; sending it again would"
        f" be refused again, so it is set aside (not retried) as {path} — {fix}, then run:"
        f" {command} (and delete the file once it is taken)"
    )


def set_aside() -> list[Path]:
    """The packets set aside (``_set_aside``) and still there: the user's to push, and to
    delete (ltm never does)."""
    try:
        names = sorted(os.listdir(folder() / ASIDE))
    except OSError:
        return []
    return [folder() / ASIDE / n for n in names if n.endswith(".json") and not n.startswith(".")]


def aside(paths: list[Path]) -> str:
    """'2 packets set aside, refused by their server: PATH, PATH' ('' for none)."""
    if not paths:
        return ""
    count = f"{len(paths)} packet{'s' if len(paths) != 1 else ''} set aside"
    return f"{count}, refused by their server (never retried): {', '.join(map(str, paths))}"


# What to do with a packet set aside, for doctor and ``push --outbox``.
ASIDE_FIX = (
    "push each once fixed: ltm push FILE (-t TEAM for a team's; pushed as it is, it says"
    ' again what is refused; an id that is another\'s packet: delete its "id" line, then'
    " ltm save FILE); then delete the file"
)


def _rejected(
    exc: CliError, host: str, rest: list[Entry], sent: list[str], refused: list[str]
) -> Delivery:
    """The server refused the token (401): every push after this one would meet it too
    (hundreds of requests and lines, on every command), so the delivery stops here, says
    so once, and all of ``rest`` stay."""
    from ltm.cli.terminal.output import info

    left = [entry.packet_id for entry in rest if entry.path.exists()]
    refused.extend(left)
    info(
        f"outbox: {len(left)} saved packet{'s' if len(left) != 1 else ''} for {host} not"
        f" pushed: {_first_line(exc.message)}; they stay in the outbox ({folder()})"
    )
    return Delivery(sent, refused, 0)


def deliver_waiting(backend: Backend, host: str) -> None:
    """What ``open_backend`` runs for a server: deliver when anything waits for it (after
    another process delivering to it is done: the command may be about to push a newer
    version of a packet it is delivering); a server out of reach leaves it waiting,
    silently (the command itself says so)."""
    try:
        names = os.listdir(folder())
    except OSError:
        return
    if any(name.endswith(".json") and not name.startswith(".") for name in names):
        deliver(backend, host, wait=True)  # which of them wait for ``host``: their records say


def push_all() -> None:
    """``ltm push --outbox``: deliver to every server something waits for; a ``CliError``
    when anything is left (a server still out of reach, a packet refused)."""
    from ltm.cli.client.remote import RemoteBackend
    from ltm.cli.terminal.output import info

    entries = waiting()
    broken = damaged(unreadable())
    if not entries and not broken:
        kept = aside(set_aside())
        info(
            f"nothing waits in the outbox to be pushed; {kept} — {ASIDE_FIX}"
            if kept
            else "the outbox is empty: nothing waits to be pushed"
        )
        return
    problems = [broken] if broken else []
    for host in sorted({entry.host for entry in entries}):
        count = sum(1 for entry in entries if entry.host == host)
        target = _target(host)
        if not target.token:
            problems.append(f"{count} for {host}: not signed in there — run: ltm auth {host}")
            continue
        backend = RemoteBackend.open(target)
        try:
            done = deliver(backend, host, wait=True)
        finally:
            backend.close()
        if done.left:
            problems.append(f"{done.left} for {host}: it still cannot be reached")
        if done.refused:
            problems.append(f"{len(done.refused)} for {host}: refused (said above)")
    if problems:
        raise CliError("still in the outbox: " + "; ".join(problems))


def _target(host: str) -> Target:
    """How a delivery to ``host`` signs in: as the verbs do when it is theirs (``LTM_TOKEN``
    included), else with the token kept for it (none: signed out of it since)."""
    from ltm.cli.client.credentials import Target, active, token_for

    target = active()
    if target is None or target.host != host:
        target = Target(host=host, token=token_for(host), source="credentials")
    return target


def signed_out(entries: list[Entry]) -> list[str]:
    """The servers something waits for that no token here signs in to: no command reaches
    them until the user signs in there again."""
    return sorted({entry.host for entry in entries if not _target(entry.host).token})


def elsewhere(entries: list[Entry]) -> list[str]:
    """The servers something waits for, signed in to, that commands no longer go to
    (another server became the default since): only ``ltm push --outbox`` reaches them."""
    from ltm.cli.client.credentials import active

    target = active()
    here = target.host if target is not None else None
    hosts = {entry.host for entry in entries} - set(signed_out(entries))
    return sorted(host for host in hosts if host != here)


def summary(entries: list[Entry]) -> str:
    """'3 packets wait for https://a (oldest kept 2026-...)' per server, joined by '; '."""
    by_host: dict[str, list[Entry]] = {}
    for entry in entries:
        by_host.setdefault(entry.host, []).append(entry)
    parts = []
    for host, group in sorted(by_host.items()):
        count = f"{len(group)} saved packet{'s' if len(group) != 1 else ''}"
        verb = "waits" if len(group) == 1 else "wait"
        parts.append(f"{count} {verb} for {host} (oldest kept {group[0].kept_at[:19]}Z)")
    return "; ".join(parts)


def keep_unsent(
    backend: Backend,
    checked: Checked,
    failure: BaseException,
    *,
    team: str | None,
    lenient: bool = False,
    allow_unredacted: bool = False,
) -> str | None:
    """A save (CLI or MCP) that ``failure`` stopped: kept when its server could not be
    reached, and the one line that says so; None when that is not what happened (or the
    backend is no server), and the failure stands."""
    from ltm.cli.client.remote import RemoteBackend

    if not isinstance(backend, RemoteBackend) or not unreachable(failure):
        return None
    host = backend.host
    reason = _first_line(getattr(failure, "message", str(failure))).split(" — ")[0]
    try:
        keep(
            checked,
            host=host,
            team=team,
            lenient=lenient,
            allow_unredacted=allow_unredacted,
            user=account(backend),
        )
    except OSError as exc:  # a full disk, a folder ltm may not write: not kept, and said
        raise CliError(
            f"{reason}; and it could not be kept in the outbox ({folder()}):"
            f" {exc.strerror or exc}; nothing saved"
        ) from None
    return (
        f"{reason}; kept {checked.data.get('id')} in the outbox: it is pushed by the next"
        " command that reaches the server (or now: ltm push --outbox)"
    )


def account(backend: Backend) -> dict[str, str] | None:
    """The account ``backend`` is signed in as, when its sign-in knows (a server with
    ``/v1/whoami``); None otherwise (the reference, a token from ``LTM_TOKEN``)."""
    from ltm.cli.client.remote import RemoteBackend

    user = backend.target.user if isinstance(backend, RemoteBackend) else None
    return user if isinstance(user, dict) and isinstance(user.get("id"), str) else None


def _asked(backend: Backend) -> dict[str, str] | None:
    """The account the server says ``backend``'s token is (``GET /v1/whoami``), for a
    sign-in that does not know it (a token from ``LTM_TOKEN``); None when it will not say."""
    answer = backend.identify()
    user = answer.get("user") if isinstance(answer, dict) else None
    return user if isinstance(user, dict) and isinstance(user.get("id"), str) else None


def _first_line(text: str) -> str:
    return " ".join(text.split())[:300]


def describe(entry: Entry) -> dict[str, Any]:
    return {"id": entry.packet_id, "host": entry.host, "team": entry.team, "kept_at": entry.kept_at}
