"""ltm profile: who you are on a server, and the name teammates know you by."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, print_json, safe


def profile(
    display: Annotated[
        str | None,
        typer.Option(
            "--display",
            metavar="NAME",
            help="Your new name on the server (teammates see it and share with you by it;"
            " unique on the server in any case).",
        ),
    ] = None,
    team: options.Team = None,
    as_json: options.Json = False,
) -> None:
    """Show your name on the server, or change it with --display.

    The server is the default (-H for another), or with -t TEAM the one that team is on,
    or the only one you are signed in to (after `ltm join`).
    """
    from ltm.cli.client import credentials
    from ltm.cli.client.remote import status_error
    from ltm.cli.commands.share import _server

    backend = _server("profile", team)
    try:
        if display is None:
            reply = backend._call("GET", "/v1/whoami", ok=(200, 404))
        else:
            reply = backend._call(
                "PATCH", "/v1/whoami", ok=(200, 400, 404, 405, 409), payload={"display": display}
            )
        if reply.status == 409 or (reply.status == 400 and reply.is_ltm_error()):
            raise CliError(f"{backend.host}: {reply.error_text()}", exit_code=2)
        if reply.status in (404, 405):
            raise CliError(
                f"{backend.host} does not offer changing your name (a reference server keeps"
                " the name given when you joined)"
            )
        if reply.status != 200:
            raise status_error(backend.host, reply)
        answer = reply.json(backend.host)
    finally:
        backend.close()
    user = answer.get("user") if isinstance(answer, dict) else None
    if not isinstance(user, dict) or not isinstance(user.get("display"), str):
        raise CliError(f"{backend.host} sent an unexpected answer about you")
    if display is not None:
        credentials.remember_user(
            backend.host, {k: str(v) for k, v in user.items()}, token=backend.target.token
        )
    if as_json:
        print_json({"host": backend.host, "user": user})
        return
    print(safe(f"{user['display']} ({user.get('id', '')}) on {backend.host}"))
    if display is not None:
        info(f"teammates now see you as {safe(user['display'])}; they share with you by it")
