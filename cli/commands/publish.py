"""ltm publish / ltm unpublish: a packet's public, read-only page on the server.

The same routes and output as the reference CLI (internal/cli/publish.go in
dennisdevulder/ltm): ``publish`` prints the public URL alone on stdout;
``unpublish`` prints ``unpublished ID``. Only a server serves public pages;
the local store has nowhere to publish to.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.terminal.output import info


def _server(verb: str, team: str | None) -> object:
    from ltm.cli.client.backend import needs_server, open_backend
    from ltm.cli.client.remote import RemoteBackend

    backend = open_backend(team=team)
    if not isinstance(backend, RemoteBackend):
        backend.close()
        raise needs_server(f"{verb} (public pages are served by a server)")
    return backend


def publish(ref: options.Ref, team: options.Team = None, as_json: options.Json = False) -> None:
    """Publish a packet at a public URL anyone with the link can read (no account needed)."""
    backend = _server("publish", team)
    try:
        published = backend.publish(ref, team=team)  # type: ignore[attr-defined]
    finally:
        backend.close()  # type: ignore[attr-defined]
    if as_json:
        print(json.dumps(published, indent=2))
        return
    print(published["public_url"])
    from shlex import join

    from ltm.cli.client.credentials import reaching

    host = backend.host  # type: ignore[attr-defined]
    revoke = join(["ltm", "unpublish", published["id"], *reaching(host, team)])
    info(f"anyone with this link can read the packet; revoke it with: {revoke}")


def unpublish(
    ref: options.Ref,
    team: options.Team = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Revoke a packet's public URL; it stops working at once.

    Asks first on a terminal; without one it revokes only with --yes (a later
    publish gives a new URL, so everyone holding this one loses it for good).
    """
    from ltm.cli.terminal.confirm import confirmed

    backend = _server("unpublish", team)
    try:
        confirmed(
            lambda: _question(backend, ref, team),
            yes=yes,
            verb=f"ltm unpublish {ref}",
            nothing="nothing unpublished",
        )
        backend.unpublish(ref, team=team)  # type: ignore[attr-defined]
    finally:
        backend.close()  # type: ignore[attr-defined]
    print(f"unpublished {ref}")


def _question(backend: object, ref: str, team: str | None) -> str:
    """What ``unpublish`` asks on a terminal: the packet named (a prefix resolved, its goal)
    and its URL when the server says it (to whoever may unpublish it), read first so that a
    wrong or ambiguous id is told before anyone is asked to confirm anything."""
    from ltm.cli.commands.rm import goal_and_id

    body = backend.get(ref, team=team)  # type: ignore[attr-defined]
    packet_id = backend.resolve(ref, team=team)  # type: ignore[attr-defined]
    published = backend.published(packet_id)  # type: ignore[attr-defined]
    url = published[1] if published else "Its public URL"
    goal = goal_and_id(body)[0]
    return f"Unpublish {packet_id} ({goal})? {url} stops working for everyone at once"
