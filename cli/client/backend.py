"""The one client: where packets go, behind one interface.

The CLI verbs and the MCP shim talk to a ``Backend`` and never care whether it
is the embedded local store or a server. Both report failures as ``CliError``
with a message that says what to do next.
"""

from __future__ import annotations

import os
import sys
from _thread import allocate_lock  # threading's own lock, without importing threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ltm.cli.errors import CliError, opening

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ltm.errors import Failure
    from ltm.packet import Checked
    from ltm.service.packets import Prepared
    from ltm.store import Store, User


from ltm.backend import (
    WALK_PAGE,
    Backend,
    Filters,
    Held,
    Listing,
    Pushed,
    ServiceBackend,
    _id_of,
    check_query,
    check_ref,
    meta_row,
)

__all__ = [
    "WALK_PAGE",
    "Backend",
    "Filters",
    "Held",
    "IdTaken",
    "Listing",
    "LocalBackend",
    "Pushed",
    "check_query",
    "check_ref",
    "check_times",
    "meta_row",
    "open_backend",
]


def check_times(filters: Filters) -> None:
    """Refuse a ``--since``/``--until`` that is no time a listing can hold, or a pair that
    no time lies between, before it goes anywhere: one line, exit 2 (a server says the
    first as ``since: ...``, with a 400)."""
    from datetime import UTC, datetime

    from ltm.times import TimeError, sort_key

    now = datetime.now(UTC)
    keys: dict[str, str] = {}
    for flag, value in (("--since", filters.since), ("--until", filters.until)):
        if value is not None:
            try:
                keys[flag] = sort_key(value, now)
            except TimeError as exc:
                raise CliError(f"{flag}: {exc}", exit_code=2) from None
    if len(keys) == 2 and keys["--since"] >= keys["--until"]:
        # An empty range is a mistake (the two swapped, 3d for 3w): said, not "no packets match".
        raise CliError(
            f"--since {filters.since} is not before --until {filters.until}: no packet can match",
            exit_code=2,
        )


class IdTaken(CliError):
    """The packet id exists in another scope or belongs to someone else; nothing was changed."""


class LocalBackend(ServiceBackend):
    """The embedded SQLite store: one user, no server, no account."""

    scan = False  # the pre-flight (with the user's own rules) judged every packet already

    # The store a long-lived process (the MCP server) keeps open between calls, with
    # what identifies it: (path, device, inode, process id).
    _kept: tuple[tuple[str, int, int, int], LocalBackend] | None = None
    _keeping = allocate_lock()

    def __init__(self, store: Store, user: User, path: str, *, kept: bool = False) -> None:
        super().__init__(store, user, f"local store ({path})")
        self.user_record = user
        self.path = path
        self.kept = kept

    @classmethod
    def open(cls, *, keep: bool = False, migrate: bool = True) -> LocalBackend:
        """The local store; ``keep``: the same one on every call in this process.

        A process that serves many calls keeps its store open: opening one costs a
        connection and the schema check, and closing the last connection to a WAL
        database checkpoints it (a second fsync, after the commit's). The store is
        opened again when its file is another (moved, deleted) or after a fork.
        """
        from ltm.cli.config import local_db_path

        path = local_db_path()
        if not keep:
            return cls._opened(path, keep=False, migrate=migrate)
        with cls._keeping:  # threads of one process (the MCP shim's) share the kept store
            if cls._kept is not None:
                key, backend = cls._kept
                if key == _file_key(path):
                    return backend
                cls._kept = None
                if key[3] == os.getpid():
                    backend.store.close()
            backend = cls._opened(path, keep=True, migrate=migrate)
            found = _file_key(path)
            if found is not None:
                cls._kept = (found, backend)
            return backend

    @classmethod
    def _opened(cls, path: Path, *, keep: bool, migrate: bool = True) -> LocalBackend:
        from ltm.cli.config import private_dir
        from ltm.store import User
        from ltm.store.sqlite import SqliteStore

        if not migrate:
            _migrate_aside(path)
        with opening("the local store", path):
            private_dir(path.parent)  # ltm's data folder: the owner's alone
            store = SqliteStore(path)
        return cls(store, User("local", "local", datetime.now(UTC)), str(path), kept=keep)

    def fail(self, message: str) -> CliError:
        return CliError(message)

    def _no_teams(self, team: str | None) -> None:
        if team:
            raise no_team_here(team)

    def _id_taken(self, data: Mapping[str, Any]) -> CliError:
        # A store shared with a server: the id is another user's.
        return IdTaken(f"packet id {_id_of(data)} is taken in the {self.label}")

    def readying(self) -> Callable[[Checked], Prepared]:
        """Each packet made ready to store, in the worker that judged it: encoded, its
        identity read, and the store's own work on its bytes done (``Store.derive``: the
        search text and the packed body), so this process is left the writes."""
        import functools

        from ltm.service.packets import prepare

        derive = type(self.store).derive
        return functools.partial(prepare, owner_id=self.user_record.id, derive=derive)

    def push_many(
        self,
        items: Sequence[tuple[Mapping[str, Any] | Checked | Prepared, str | None]],
        *,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> list[Pushed | Failure]:
        """Personal pushes in one transaction and one durable commit (``ltm import``); one
        outcome per packet, in order: a ``Pushed``, an ``IdTaken`` or another ``CliError``
        (that packet alone is refused). A ``Checked`` packet is stored as judged, a
        ``Prepared`` one (``readying``) as made ready."""
        from ltm.service import packets as service
        from ltm.service.errors import Conflict

        for _, team in items:
            self._no_teams(team)
        packets = [data for data, _ in items]
        with self._service():
            outcomes = service.push_many(self.store, self.caller, packets, lenient=lenient)
        results: list[Pushed | Failure] = []
        for data, outcome in zip(packets, outcomes, strict=True):
            if isinstance(outcome, Conflict):
                results.append(IdTaken(f"packet id {_id_of(data)} is taken in the {self.label}"))
            elif isinstance(outcome, Exception):
                results.append(CliError(outcome.message))
            else:
                results.append(Pushed(outcome.id, outcome.created))
        return results

    def close(self) -> None:
        if not self.kept:  # a kept store stays open for the process's next call
            self.store.close()

    def whoami(self) -> dict[str, Any]:
        return {"backend": "local", "store": self.path}

    def _resolve(self, ref: str, team: str | None = None) -> str:
        from ltm.service.errors import NotFound

        try:
            return super()._resolve(ref, team)
        except NotFound as exc:
            raise NotFound(exc.message + elsewhere()) from None

    def copied_from(self, packet_id: str) -> dict[str, str] | None:
        """Who wrote this local copy of another's packet (``pull --to-local``, ``import``):
        ``{"id", "name", "host"}``; None for the user's own."""
        from ltm.cli.client import authors

        return authors.of(packet_id)

    def copies(self, packet_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Those of ``packet_ids`` that are copies of another's packet, with who wrote
        each (``copied_from``), the record read once."""
        from ltm.cli.client import authors

        known = authors.every()
        return {pid: known[pid] for pid in packet_ids if pid in known}

    def delete(self, ref: str, *, team: str | None = None) -> str:
        from ltm.cli.client import authors

        deleted = super().delete(ref, team=team)
        authors.remember(deleted, None)  # a later packet under that id is not theirs
        return deleted

    def stored_by(self, packet_id: str) -> str | None:
        # A copy is its author's (their id on their server), never the local user's.
        copied = self.copied_from(packet_id)
        return copied["id"] if copied is not None else super().stored_by(packet_id)

    def team_names(self) -> list[str]:
        return []


def _file_key(path: Any) -> tuple[str, int, int, int] | None:
    """What tells one store file from another here: path, device, inode, process id."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (str(path), info.st_dev, info.st_ino, os.getpid())


def no_team_here(team: str) -> CliError:
    """The local store has no teams: say where teams are, and how to reach one."""
    from ltm.cli.client.credentials import load

    hosts = sorted(load().hosts)
    if hosts:
        return CliError(
            f"teams live on a server, and no team {team} of yours is on the ones you are signed"
            f" in to ({', '.join(hosts)}); your default, the local store, has no teams — your"
            " teams: ltm teams ls"
        )
    return CliError(
        "teams live on a server, and you are signed in to none (the local store has no teams)"
        " — sign in: ltm auth HOST, or accept an invite: ltm join URL"
    )


def local_id(ref: str) -> str | None:
    """The id of the packet ``ref`` (an id or a unique prefix) names in the local store,
    or None: none there, no local store at all (none is created), or one that cannot be
    read now (it waits for a migration). A server that has no such packet asks this, so
    a packet saved before signing in (or with --local) is named where it is."""
    from ltm.cli.config import local_db_path
    from ltm.service.errors import ServiceError

    if not local_db_path().is_file():
        return None
    try:
        backend = LocalBackend.open(migrate=False)
    except CliError:
        return None
    try:
        return backend._resolve(ref)
    except ServiceError:
        return None
    finally:
        backend.close()


def elsewhere() -> str:
    """Where else a packet not in the local store may be: the servers signed in to (a
    packet shared with the user, or one of theirs there), a team's."""
    from ltm.cli.client.credentials import load

    state = load()
    if state.default is not None:
        return f" in the local store (without --local, ltm reads {state.default})"
    hosts = sorted(state.hosts)
    if not hosts:
        return " in the local store — list them with: ltm ls"
    return (
        f" in the local store (your default); a packet on a server is reached with"
        f" -H {hosts[0]}, a team's with -t TEAM"
    )


def needs_server(what: str) -> CliError:
    """``what`` needs a server and the default is the local store: name the servers there are."""
    from ltm.cli.client.credentials import load

    hosts = sorted(load().hosts)
    if hosts:
        also = f" (also: {', '.join(hosts[1:])})" if hosts[1:] else ""
        return CliError(
            f"{what} needs a server and your default is the local store; name one you are"
            f" signed in to with -H: ltm -H {hosts[0]} …{also}"
        )
    return CliError(
        f"{what} needs a server and you are signed in to none — sign in: ltm auth HOST,"
        " or accept an invite: ltm join URL"
    )


# What a process of its own runs to migrate the local store (``_migrate_aside``).
_MIGRATE = "import sys; from ltm.cli.client.backend import migrate; migrate(sys.argv[1])"


def migrate(path: str) -> None:
    """Migrate the local store at ``path``, in a process of its own; a failure goes to the
    hook log, where no terminal shows it (exit status 1)."""
    from ltm.store.sqlite import SqliteStore

    try:
        SqliteStore(path).close()
    except Exception as exc:
        from ltm.cli.agents.hook import log

        log(f"the upgrade of the local store {path} failed: {type(exc).__name__}: {exc}")
        raise SystemExit(1) from None


def _migrate_aside(path: Path) -> None:
    """When the store at ``path`` waits for a migration, start a process of its own that
    runs it, and raise ``StoreUpgrading``.

    For a hook, whose watchdog ends it within a second: the migration an upgrade brings
    takes longer on a large store (the compact layout rewrites every packet in it),
    so run in the hook it was cut short and rolled back at every session, and the hooks
    found no packet after the upgrade until some other command opened the store. The
    process, in a session of its own, outlives the hook; other processes opening the
    store meanwhile wait for its write lock, as for any migration.
    """
    from ltm.store.sqlite import pending_migration

    if not pending_migration(path):
        return
    import subprocess

    from ltm.cli.errors import StoreUpgrading

    try:
        subprocess.Popen(
            [sys.executable, "-c", _MIGRATE, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return  # no process to be had: migrated here, as before
    raise StoreUpgrading(
        f"the local store {path} is being upgraded for this version of ltm (once, in the"
        " background); its packets are back at the next session (if this stays, `ltm ls`"
        " upgrades it and says what stops it)"
    )


def open_backend(
    *,
    local: bool = False,
    timeout: float | None = None,
    team: str | None = None,
    keep: bool = False,
    deliver: bool = True,
    migrate: bool = True,
) -> Backend:
    """The server signed in to (``ltm auth``), else the local store; ``local`` forces the latter.

    ``team``: the verb's ``-t TEAM``, which picks the server the user belongs to
    that team on (``credentials.active``); when the files know no such team and the
    default is the local store, the servers signed in to are asked.
    ``timeout`` (seconds) overrides the configured network timeout (hooks keep it short).
    ``keep``: a long-lived process keeps the local store open (``LocalBackend.open``).
    ``deliver``: first push what the outbox keeps for that server (``ltm.cli.client.outbox``);
    a hook, on its short budget, leaves that to the next command.
    ``migrate``: a local store that waits for a migration is migrated here; a hook, on its
    short budget, leaves that to a process of its own (``StoreUpgrading``).
    """
    if not local:
        from ltm.cli.client.credentials import active

        target = active(team)
        if target is None and team:
            from ltm.cli.client.remote import find_team

            target = find_team(team, timeout=timeout)
        if target is not None:
            from ltm.cli.client.remote import RemoteBackend

            remote = RemoteBackend.open(target, timeout=timeout)
            if deliver:
                from ltm.cli.client.outbox import deliver_waiting

                deliver_waiting(remote, remote.host)
            return remote
    return LocalBackend.open(keep=keep, migrate=migrate)
