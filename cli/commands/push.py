"""ltm push: store a complete packet file exactly as written (or copy a local one to the server)."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.client.send import send
from ltm.cli.commands import options
from ltm.cli.errors import CliError


def push(
    source: Annotated[
        str | None,
        typer.Argument(metavar="FILE|-", help="The packet file, or - for standard input."),
    ] = None,
    from_local: Annotated[
        str | None,
        typer.Option(
            "--from-local",
            metavar="ID",
            help="Copy this packet from the local store to the server instead of reading a file.",
            autocompletion=options.complete_packet,
        ),
    ] = None,
    team: options.Team = None,
    lenient: options.Lenient = False,
    allow_unredacted: options.AllowUnredacted = False,
    local: options.Local = False,
    outbox: Annotated[
        bool,
        typer.Option(
            "--outbox",
            help="Push the saves kept in the outbox while their server could not be reached.",
        ),
    ] = False,
) -> None:
    """Push a complete packet (id, created_at and ltm_version included) as it is."""
    if outbox:
        if source is not None or from_local is not None or local or team or lenient:
            raise CliError(
                "--outbox pushes what the outbox keeps, each with the options it was saved"
                " with; give no FILE, --from-local, --local, -t or --lenient",
                exit_code=2,
            )
        from ltm.cli.client.outbox import push_all

        push_all()
        return
    if from_local is not None:
        if source is not None or local:
            raise CliError(
                "--from-local takes the packet from the local store; give no FILE and no --local",
                exit_code=2,
            )
        from ltm.cli.client.transfer import to_server

        to_server(from_local, team=team, lenient=lenient, allow_unredacted=allow_unredacted)
        return
    if source is None:
        raise CliError(
            "give the packet FILE (- for standard input), or --from-local ID", exit_code=2
        )
    send(
        source,
        fill=False,
        team=team,
        lenient=lenient,
        allow_unredacted=allow_unredacted,
        local=local,
    )
