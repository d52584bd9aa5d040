"""ltm push: store a complete packet file exactly as written."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli import options
from ltm.cli.commands.save import send


def push(
    source: Annotated[
        str, typer.Argument(metavar="FILE|-", help="The packet file, or - for standard input.")
    ],
    team: options.Team = None,
    lenient: options.Lenient = False,
    allow_unredacted: options.AllowUnredacted = False,
    local: options.Local = False,
) -> None:
    """Push a complete packet (id, created_at and ltm_version included) as it is."""
    send(
        source,
        fill=False,
        team=team,
        lenient=lenient,
        allow_unredacted=allow_unredacted,
        local=local,
    )
