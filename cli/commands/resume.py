"""ltm resume: the prompt-ready block that starts the next session."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ltm.cli import options
from ltm.cli.errors import CliError


def resume(
    ref: Annotated[
        str | None,
        typer.Argument(metavar="[ID]", help="A packet id or prefix; the newest packet if omitted."),
    ] = None,
    team: options.Team = None,
    local: options.Local = False,
) -> None:
    """Print the resume block of a packet, ready to paste into a new agent session."""
    from ltm.cli.backend import open_backend
    from ltm.resume import render

    backend = open_backend(local=local)
    try:
        if ref is None:
            newest = backend.list(team=team, limit=1)
            if not newest:
                raise CliError(f"no packets in {backend.label}; save one with: ltm save FILE")
            ref = newest[0]["id"]
        body = backend.get(ref, team=team)
    finally:
        backend.close()
    try:
        packet = json.loads(body)
    except ValueError:
        raise CliError(f"packet {ref} is not readable JSON") from None
    print(render(packet), end="")
