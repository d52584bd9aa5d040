"""ltm teams: create, list, delete teams; see, remove and leave members."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, relative_time, safe

if TYPE_CHECKING:
    from ltm.cli.client.remote import RemoteBackend

app = typer.Typer(
    help="Teams on the server: packets pushed with -t TEAM are visible to every member.",
    no_args_is_help=True,
)

Name = Annotated[str, typer.Argument(metavar="TEAM", help="The team's name.")]


def server() -> RemoteBackend:
    """The signed-in server; teams do not exist in the local store."""
    from ltm.cli.client.backend import open_backend
    from ltm.cli.client.remote import RemoteBackend

    backend = open_backend()
    if not isinstance(backend, RemoteBackend):
        backend.close()
        raise CliError("teams live on a server; sign in first: ltm auth HOST")
    return backend


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
    if as_json:
        print(json.dumps(team, indent=2))
        return
    info(f"created team {team.get('name', name)} on {backend.host}; you are its owner")
    info(f"invite people with: ltm invite -t {team.get('name', name)}")


@app.command("ls")
def ls(as_json: options.Json = False) -> None:
    """List the teams you belong to."""
    backend = server()
    try:
        teams = backend.teams()
    finally:
        backend.close()
    if as_json:
        print(json.dumps({"teams": teams}, indent=2, ensure_ascii=False))
        return
    if not teams:
        info(f"you belong to no team on {backend.host}; create one: ltm teams create NAME")
        return
    me = _me(backend)
    rows = [("TEAM", "CREATED", "OWNER")]
    for team in teams:
        owner = str(team.get("owner_id", ""))
        rows.append(
            (
                str(team.get("name", "")),
                relative_time(str(team.get("created_at", ""))),
                "you" if me and owner == me else owner,
            )
        )
    _table(rows)


@app.command("rm")
def rm(
    name: Name,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a team and every packet in it (owner only)."""
    backend = server()
    try:
        if not yes and sys.stdin.isatty():
            question = f"Delete team {name} on {backend.host} and all of its packets?"
            if not typer.confirm(question, default=False, err=True):
                raise CliError("nothing deleted")
        backend.delete_team(name)
    finally:
        backend.close()
    info(f"deleted team {name}")


@app.command("members")
def members(name: Name, as_json: options.Json = False) -> None:
    """List a team's members."""
    backend = server()
    try:
        rows = backend.members(name)
    finally:
        backend.close()
    if as_json:
        print(json.dumps({"members": rows}, indent=2, ensure_ascii=False))
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
) -> None:
    """Remove a member from a team (owner only)."""
    backend = server()
    try:
        user_id, display = _member(backend, name, member)
        backend.kick(name, user_id)
    finally:
        backend.close()
    info(safe(f"removed {display} ({user_id}) from team {name}"))


@app.command("leave")
def leave(name: Name) -> None:
    """Leave a team (its owner cannot; delete the team instead)."""
    backend = server()
    try:
        backend.leave(name)
    finally:
        backend.close()
    info(f"left team {name}")


def _member(backend: RemoteBackend, team: str, member: str) -> tuple[str, str]:
    rows = backend.members(team)
    for row in rows:
        if row.get("user_id") == member:
            return member, str(row.get("display", member))
    named = [row for row in rows if row.get("display") == member]
    if len(named) == 1:
        return str(named[0].get("user_id", "")), member
    if named:
        ids = ", ".join(str(row.get("user_id")) for row in named)
        raise CliError(f"{len(named)} members of {team} are called {member!r} ({ids}); give the id")
    raise CliError(f"no member {member!r} in team {team} — see them: ltm teams members {team}")


def _table(rows: list[tuple[str, ...]]) -> None:
    rows = [tuple(safe(cell) for cell in row) for row in rows]  # names are people's text
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
