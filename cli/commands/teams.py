"""ltm teams: create, list, delete teams; see, remove and leave members."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, print_json, relative_time, safe

if TYPE_CHECKING:
    from ltm.cli.client.remote import RemoteBackend

app = typer.Typer(
    help="Teams on the server: packets pushed with -t TEAM are visible to every member.",
    no_args_is_help=True,
)

Name = Annotated[
    str,
    typer.Argument(metavar="TEAM", help="The team's name.", autocompletion=options.complete_team),
]


def server(team: str | None = None) -> RemoteBackend:
    """The server of ``team`` (the one the user belongs to it on), else the default server.

    Teams do not exist in the local store.
    """
    from ltm.cli.client.backend import no_team_here, open_backend
    from ltm.cli.client.remote import RemoteBackend

    backend = open_backend(team=team)
    if not isinstance(backend, RemoteBackend):
        backend.close()
        if team:
            raise no_team_here(team)
        raise not_on_a_server()
    return backend


def not_on_a_server() -> CliError:
    """Teams need a server and the default is the local store: name the servers there are."""
    from ltm.cli.client.credentials import load

    hosts = sorted(load().hosts)
    if hosts:
        also = f" (or: {', '.join(hosts[1:])})" if hosts[1:] else ""
        return CliError(
            "teams live on a server and your default is the local store; name one you are"
            f" signed in to with -H: ltm -H {hosts[0]} teams …{also}"
        )
    return CliError(
        "teams live on a server, and you are signed in to none — sign in: ltm auth HOST,"
        " or accept an invite: ltm join URL"
    )


def _record(backend: RemoteBackend, names: list[str], **how: object) -> None:
    """Remember on this machine which teams the user has on this server (``-t`` finds it)."""
    from ltm.cli.client import credentials

    # Only for the token kept in the files: an LTM_TOKEN may be someone else's account.
    credentials.remember_teams(backend.host, names, token=backend.target.token, **how)  # type: ignore[arg-type]


def _me(backend: RemoteBackend) -> str | None:
    user = backend.target.user or {}
    return user.get("id")


@app.command("create")
def create(name: Name, as_json: options.Json = False) -> None:
    """Create a team; you become its owner."""
    backend = server()
    try:
        team = backend.create_team(name)
    finally:
        backend.close()
    _record(backend, [str(team.get("name", name))])
    if as_json:
        print(json.dumps(team, indent=2))
        return
    created = safe(str(team.get("name", name)))  # the server's word for it
    info(f"created team {created} on {backend.host}; you are its owner")
    info(f"invite people with: ltm invite -t {created}")


@app.command("ls")
def ls(as_json: options.Json = False) -> None:
    """List the teams you belong to.

    With the local store as the default, the teams on every server you are
    signed in to (ltm join keeps the default), each with its server.
    """
    backends = _servers_for_listing()
    found: list[tuple[RemoteBackend, dict[str, object]]] = []
    for backend in backends:
        try:
            teams = backend.teams()
        finally:
            backend.close()
        _record(backend, [str(t["name"]) for t in teams if t.get("name")], complete=True)
        found += [(backend, team) for team in teams]
    several = len(backends) > 1 or backends[0].target.source == "team"
    if as_json:
        rows = [{**team, "host": b.host} if several else team for b, team in found]
        print_json({"teams": rows})
        return
    if not found:
        where = ", ".join(b.host for b in backends)
        info(f"you belong to no team on {where}; create one: ltm teams create NAME")
        return
    table = [("TEAM", "CREATED", "OWNER", "SERVER" if several else "")]
    for backend, team in found:
        owner = str(team.get("owner_id", ""))
        me = _me(backend)
        table.append(
            (
                str(team.get("name", "")),
                relative_time(str(team.get("created_at", ""))),
                "you" if me and owner == me else _owner_name(backend, team, owner),
                backend.host if several else "",
            )
        )
    _table(table)


def _owner_name(backend: RemoteBackend, team: dict[str, object], owner: str) -> str:
    """The owner as people know them: their display name among the team's members (the
    team listing names the owner by id only), the id when the members cannot be read."""
    try:
        members = backend.members(str(team.get("name", "")))
    except CliError:
        return owner
    finally:
        backend.close()
    for member in members:
        if member.get("user_id") == owner and isinstance(member.get("display"), str):
            return f"{member['display']} ({owner})"
    return owner


def _servers_for_listing() -> list[RemoteBackend]:
    """The server verbs go to; with the local store as the default, every one signed in to."""
    from ltm.cli.client import credentials
    from ltm.cli.client.remote import RemoteBackend

    if credentials.active() is not None:
        return [server()]
    hosts = credentials.load().hosts
    if not hosts:
        raise not_on_a_server()
    return [
        RemoteBackend.open(credentials.Target(host, entry.get("token"), "team", entry.get("user")))
        for host, entry in sorted(hosts.items())
    ]


@app.command("rm")
def rm(
    name: Name,
    yes: options.Yes = False,
) -> None:
    """Delete a team and every packet in it (owner only).

    Asks first on a terminal; without one it deletes only with --yes.
    """
    from ltm.cli.terminal.confirm import confirmed

    backend = server(name)
    try:
        confirmed(
            f"Delete team {name} on {backend.host} and all of its packets?",
            yes=yes,
            verb=f"ltm teams rm {name}",
            nothing="nothing deleted",
        )
        backend.delete_team(name)
    finally:
        backend.close()
    _record(backend, [], drop=(name,))
    info(f"deleted team {name} on {backend.host}")


@app.command("members")
def members(name: Name, as_json: options.Json = False) -> None:
    """List a team's members."""
    backend = server(name)
    try:
        rows = backend.members(name)
    finally:
        backend.close()
    if as_json:
        print_json({"members": rows})
        return
    table = [("MEMBER", "ROLE", "JOINED", "USER ID")]
    for row in rows:
        table.append(
            (
                str(row.get("display", "")),
                str(row.get("role", "")),
                relative_time(str(row.get("joined_at", ""))),
                str(row.get("user_id", "")),
            )
        )
    _table(table)


@app.command("kick")
def kick(
    name: Name,
    member: Annotated[
        str, typer.Argument(metavar="MEMBER", help="The member's user id or display name.")
    ],
    yes: options.Yes = False,
) -> None:
    """Remove a member from a team (owner only).

    Asks first on a terminal; without one it removes only with --yes.
    """
    from ltm.cli.terminal.confirm import confirmed

    backend = server(name)
    try:
        user_id, display = _member(backend, name, member)
        confirmed(
            safe(f"Remove {display} ({user_id}) from team {name} on {backend.host}?"),
            yes=yes,
            verb=safe(f"ltm teams kick {name} {member}"),
            nothing="nobody removed",
        )
        backend.kick(name, user_id)
    finally:
        backend.close()
    info(safe(f"removed {display} ({user_id}) from team {name} on {backend.host}"))


@app.command("leave")
def leave(name: Name, yes: options.Yes = False) -> None:
    """Leave a team (its owner cannot; delete the team instead).

    Asks first on a terminal; without one it leaves only with --yes (coming back
    takes a new invite).
    """
    from ltm.cli.terminal.confirm import confirmed

    backend = server(name)
    try:
        confirmed(
            f"Leave team {name} on {backend.host}? Coming back takes a new invite",
            yes=yes,
            verb=f"ltm teams leave {name}",
            nothing="still a member",
        )
        backend.leave(name)
    finally:
        backend.close()
    _record(backend, [], drop=(name,))
    info(f"left team {name} on {backend.host}")


def _member(backend: RemoteBackend, team: str, member: str) -> tuple[str, str]:
    rows = backend.members(team)
    for row in rows:
        if row.get("user_id") == member:
            return member, str(row.get("display", member))
    named = [row for row in rows if row.get("display") == member] or [
        row for row in rows if str(row.get("display", "")).casefold() == member.casefold()
    ]  # display names match in any case, as ltm share matches them
    if len(named) == 1:
        return str(named[0].get("user_id", "")), str(named[0].get("display", member))
    if named:
        ids = ", ".join(str(row.get("user_id")) for row in named)
        raise CliError(f"{len(named)} members of {team} are called {member!r} ({ids}); give the id")
    raise CliError(f"no member {member!r} in team {team} — see them: ltm teams members {team}")


def _table(rows: Sequence[tuple[str, ...]]) -> None:
    rows = [tuple(safe(cell) for cell in row) for row in rows]  # names are people's text
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
