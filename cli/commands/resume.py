"""ltm resume: the prompt-ready block that starts the next session."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.commands import options


def resume(
    ref: Annotated[
        str | None,
        typer.Argument(
            metavar="ID",
            help="A packet id or prefix. Without one: pick from the recent packets on a"
            " terminal, else the newest.",
            autocompletion=options.complete_packet,
        ),
    ] = None,
    team: options.Team = None,
    local: options.Local = False,
    copy: Annotated[
        bool | None,
        typer.Option(
            "--copy/--no-copy",
            help="Copy the block to the clipboard instead of printing it (default: copy when"
            " picked interactively).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"id", "resume"} as JSON instead.')
    ] = False,
    project: options.Project = None,
    here: options.Here = False,
) -> None:
    """Print the resume block of a packet, ready to paste into a new agent session."""
    from ltm.cli.packets import resume_packet

    resume_packet(
        ref, team=team, local=local, copy=copy, as_json=as_json, project=project, here=here
    )
