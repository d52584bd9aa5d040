"""ltm share / ltm unshare / ltm ls --shared: one packet, read-only, for one user of a server.

Sharing is an extension of ltm servers (``POST``/``GET /v1/packets/{id}/shares``,
``DELETE /v1/packets/{id}/shares/{user}``, ``GET /v1/shared``): a reference
server has none of these routes, and the CLI then says so in one line. The
local store has one user and nobody to share with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, print_json, safe

if TYPE_CHECKING:
    from ltm.cli.client.remote import RemoteBackend, Reply

NO_SHARING = "this server does not offer sharing"

User = Annotated[
    str,
    typer.Argument(
        metavar="USER",
        help="Their display name (someone in one of your teams) or their user id.",
    ),
]


def _server(verb: str, team: str | None = None) -> RemoteBackend:
    """The server to share on: the default (``-H``), the team's with ``-t``, else the only
    server signed in to (``ltm join`` signs in without making the server the default)."""
    from ltm.cli.client.backend import needs_server, open_backend
    from ltm.cli.client.credentials import Target, load
    from ltm.cli.client.remote import RemoteBackend

    backend = open_backend(team=team)
    if isinstance(backend, RemoteBackend):
        return backend
    backend.close()
    state = load()
    if len(state.hosts) != 1:
        raise needs_server(verb)
    (host,) = state.hosts
    entry = state.hosts[host]
    user = entry.get("user") if isinstance(entry.get("user"), dict) else None
    return RemoteBackend.open(Target(host, state.token_for(host), "credentials", user))


def _segment(value: str) -> str:
    return quote(value, safe="")


def _offers_sharing(backend: RemoteBackend) -> bool:
    """Whether the server has the sharing routes (a reference server answers 404 or 405)."""
    reply = backend._call("GET", "/v1/shared", ok=(200, 404, 405), query={"limit": 1})
    return reply.status == 200


def _refused(backend: RemoteBackend, reply: Reply, packet_id: str, user: str | None) -> CliError:
    """The one line for a share route's 4xx: ours by its message, else no sharing there."""
    from ltm.cli.client.remote import status_error

    message = reply.error_text() if reply.is_ltm_error() else None
    host = backend.host
    if reply.status == 404 and message is not None and message.startswith("user not found"):
        near = message.removeprefix("user not found").strip()
        return CliError(
            f"no user {user!r} you can share with on {host}{' ' + near if near else ''} — give"
            " the display name of someone in one of your teams (ltm teams members TEAM) or"
            " their user id"
        )
    if reply.status == 404 and message == "share not found":
        return CliError(f"packet {packet_id} is not shared with {user!r} on {host}")
    if reply.status == 400 and message is not None:
        return CliError(f"{host}: {message}", exit_code=2)
    if reply.status in (404, 405) and not _offers_sharing(backend):
        return CliError(f"{NO_SHARING} ({host})")
    if reply.status == 404:
        return CliError(
            f"no packet {packet_id} you can share on {host} (only packets you read in your own"
            " or a team's scope; a packet shared with you cannot be shared again)"
        )
    return status_error(host, reply)


def _person(value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("display"), str):
        return f"{value['display']} ({value.get('id', '')})"
    return "a former user"


def share(
    ref: options.Ref,
    user: Annotated[
        str | None,
        typer.Argument(
            metavar="[USER]",
            help="Their display name (someone in one of your teams) or their user id;"
            " without it, list whom the packet is shared with.",
        ),
    ] = None,
    team: options.Team = None,
    as_json: options.Json = False,
) -> None:
    """Let another user of your server read one packet (never change or delete it).

    They find it with `ltm ls --shared` and read it with `ltm show ID` (`ltm -H HOST show
    ID` when your server is not the default); `ltm unshare ID USER` ends it at once.
    """
    backend = _server("share", team)
    rows: list[Any] = []
    try:
        packet_id = backend.resolve(ref, team=team)
        path = f"/v1/packets/{_segment(packet_id)}/shares"
        if user is None:
            reply = backend._call("GET", path, ok=(200, 400, 404, 405))
            if reply.status != 200:
                raise _refused(backend, reply, packet_id, None)
            answer = reply.json(backend.host)
            listed = answer.get("shares") if isinstance(answer, dict) else None
            if not isinstance(listed, list):
                raise CliError(f"{backend.host} sent an unexpected share list")
            rows = listed
        else:
            reply = backend._call(
                "POST", path, ok=(200, 201, 400, 404, 405), payload={"user": user}
            )
            if reply.status not in (200, 201):
                raise _refused(backend, reply, packet_id, user)
            answer = reply.json(backend.host)
    finally:
        backend.close()
    if as_json:
        print_json(answer)
        return
    if user is None:
        if not rows:
            info(f"{packet_id} is not shared with anyone; share it with: ltm share ID USER")
        for row in rows:
            if isinstance(row, dict):
                who, by = _person(row.get("user")), _person(row.get("shared_by"))
                print(safe(f"{who}  shared by {by}  {row.get('created_at', '')}"))
        return
    shared = answer.get("share") if isinstance(answer, dict) else None
    who = _person(shared.get("user")) if isinstance(shared, dict) else user
    verb = "shared" if reply.status == 201 else "already shared"
    print(safe(f"{verb} {packet_id} with {who}"))
    if reply.status == 201:
        from shlex import join

        from ltm.cli.client.credentials import reaching

        # Copied and run as it is: a display name may hold a space or a quote, and the
        # share is on this server, which need not be the default.
        end = join(["ltm", "unshare", packet_id, user, *reaching(backend.host, team)])
        info(f"they can read it (ltm ls --shared); end it with: {end}")


def unshare(ref: options.Ref, user: User, team: options.Team = None) -> None:
    """End a share at once: the user can no longer read the packet."""
    if not user.strip():  # the route would lose its last segment and name no share at all
        raise CliError(
            "unshare: give the user's display name or id (ltm share ID lists them)", exit_code=2
        )
    backend = _server("unshare", team)
    try:
        packet_id = backend.resolve(ref, team=team)
        reply = backend._call(
            "DELETE",
            f"/v1/packets/{_segment(packet_id)}/shares/{_segment(user)}",
            ok=(200, 204, 400, 404, 405),
        )
        if reply.status not in (200, 204):
            raise _refused(backend, reply, packet_id, user)
    finally:
        backend.close()
    print(safe(f"unshared {packet_id} with {user}"))


def shared_rows(backend: RemoteBackend, limit: int) -> list[dict[str, Any]]:
    """``GET /v1/shared``: the packets others shared with the caller, newest share first."""
    rows = backend.shared(limit)
    if rows is None:
        raise CliError(f"{NO_SHARING} ({backend.host})")
    return rows


def sharer(backend: RemoteBackend, packet_id: str) -> str:
    """The display name of whoever shared ``packet_id`` with the caller; "" where the
    server cannot say (no sharing there, or not among the 200 newest shares)."""
    try:
        rows = shared_rows(backend, 200)
    except CliError:
        return ""
    by = next((r.get("shared_by") for r in rows if r["id"] == packet_id), None)
    name = by.get("display") if isinstance(by, dict) else None
    return name if isinstance(name, str) else ""


def list_shared(*, limit: int, as_json: bool, team: str | None = None) -> None:
    """``ltm ls --shared``: the packets others shared with you, the newest share first, on
    the server ``_server`` picks (``-t TEAM``: the one that team is on)."""
    from shlex import join

    from ltm.cli.client.credentials import reaching
    from ltm.cli.terminal.output import one_line, print_json, relative_time

    backend = _server("ls --shared", team)
    try:
        rows = shared_rows(backend, limit)
    finally:
        backend.close()
    if as_json:
        print_json({"packets": rows})
        return
    if not rows:
        info(f"nobody has shared a packet with you on {backend.host}")
        return
    # Full ids: a prefix of a shared packet's id names it only while it is among the 200
    # newest shared with the reader (RemoteBackend.resolve); the full id always does.
    width = max(len(r["id"]) for r in rows)
    for row in rows:
        by = row.get("shared_by")
        name = by.get("display") if isinstance(by, dict) else None
        when = relative_time(str(row.get("created_at", "")))
        goal = one_line(str(row.get("goal", "")), 60)
        line = f"{row['id']:<{width}}  {when:<12}  {goal}  (from {name or 'a former user'})"
        print(safe(line))
    info(f"read one with: {join(['ltm', 'show', 'ID', *reaching(backend.host, None)])}")
