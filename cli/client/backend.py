"""The one client: where packets go, behind one interface.

The CLI verbs and the MCP shim talk to a ``Backend`` and never care whether it
is the embedded local store or a server. Both report failures as ``CliError``
with a message that says what to do next.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ltm.cli.errors import CliError

if TYPE_CHECKING:
    from ltm.store import Store, User


from ltm.backend import (
    WALK_PAGE,
    Backend,
    Filters,
    Held,
    Listing,
    Pushed,
    ServiceBackend,
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
    """Refuse a ``--since``/``--until`` that is no time a listing can hold, before it goes
    anywhere: one line, exit 2 (a server says the same as ``since: ...``, with a 400)."""
    from datetime import UTC, datetime

    from ltm.times import TimeError, sort_key

    now = datetime.now(UTC)
    for flag, value in (("--since", filters.since), ("--until", filters.until)):
        if value is not None:
            try:
                sort_key(value, now)
            except TimeError as exc:
                raise CliError(f"{flag}: {exc}", exit_code=2) from None


class IdTaken(CliError):
    """The packet id exists in another scope or belongs to someone else; nothing was changed."""


class LocalBackend(ServiceBackend):
    """The embedded SQLite store: one user, no server, no account."""

    scan = False  # the pre-flight (with the user's own rules) judged every packet already

    def __init__(self, store: Store, user: User, path: str) -> None:
        super().__init__(store, user, f"local store ({path})")
        self.user_record = user
        self.path = path

    @classmethod
    def open(cls) -> LocalBackend:
        from ltm.cli.config import local_db_path, private_dir
        from ltm.store import User
        from ltm.store.sqlite import SqliteStore

        path = local_db_path()
        try:
            private_dir(path.parent)  # ltm's data folder: the owner's alone
            store = SqliteStore(path)
        except Exception as exc:  # sqlite3 errors, permissions, a newer schema
            raise CliError(f"cannot open the local store {path}: {exc}") from None
        return cls(store, User("local", "local", datetime.now(UTC)), str(path))

    def fail(self, message: str) -> CliError:
        return CliError(message)

    def _no_teams(self, team: str | None) -> None:
        if team:
            raise no_team_here(team)

    def _id_taken(self, data: Mapping[str, Any]) -> CliError:
        # A store shared with a server: the id is another user's.
        return IdTaken(f"packet id {data.get('id')} is taken in the {self.label}")

    def close(self) -> None:
        self.store.close()

    def whoami(self) -> dict[str, Any]:
        return {"backend": "local", "store": self.path}

    def team_names(self) -> list[str]:
        return []


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


def open_backend(
    *, local: bool = False, timeout: float | None = None, team: str | None = None
) -> Backend:
    """The server signed in to (``ltm auth``), else the local store; ``local`` forces the latter.

    ``team``: the verb's ``-t TEAM``, which picks the server the user belongs to
    that team on (``credentials.active``); when the files know no such team and the
    default is the local store, the servers signed in to are asked.
    ``timeout`` (seconds) overrides the configured network timeout (hooks keep it short).
    """
    if not local:
        from ltm.cli.client.credentials import active

        target = active(team)
        if target is None and team:
            from ltm.cli.client.remote import find_team

            target = find_team(team, timeout=timeout)
        if target is not None:
            from ltm.cli.client.remote import RemoteBackend

            return RemoteBackend.open(target, timeout=timeout)
    return LocalBackend.open()
