"""ltm save: hand over a packet (just its content will do) and keep it."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.client.send import send
from ltm.cli.commands import options


def save(
    source: Annotated[
        str, typer.Argument(metavar="FILE|-", help="The packet file, or - for standard input.")
    ] = "-",
    team: options.Team = None,
    lenient: options.Lenient = False,
    allow_unredacted: options.AllowUnredacted = False,
    local: options.Local = False,
    continues: Annotated[
        str | None,
        typer.Option(
            "--continues",
            metavar="ID|last",
            help="This packet continues that one (sets parent_id); last: the newest packet"
            " of this project (the packet's, else this directory's) in the scope you save to.",
        ),
    ] = None,
) -> None:
    """Save a packet. A missing id, created_at or ltm_version is filled in for you."""
    send(
        source,
        fill=True,
        team=team,
        lenient=lenient,
        allow_unredacted=allow_unredacted,
        local=local,
        continues=continues,
    )
