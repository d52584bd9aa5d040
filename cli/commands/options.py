"""Options shared by several verbs, declared once so they read the same everywhere."""

from __future__ import annotations

from typing import Annotated

import typer


def complete_packet(incomplete: str) -> list[tuple[str, str]]:
    """Tab completion: packet ids of the local store (loaded only for a completion request)."""
    from ltm.cli.commands.completion import packet_ids

    return packet_ids(incomplete)


def complete_team(incomplete: str) -> list[str]:
    """Tab completion: the teams hosts.json records (no request to a server)."""
    from ltm.cli.commands.completion import team_names

    return team_names(incomplete)


Ref = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="A packet id or a unique prefix.", autocompletion=complete_packet
    ),
]
Team = Annotated[
    str | None,
    typer.Option(
        "--team",
        "-t",
        help="Use this team's scope instead of your own.",
        autocompletion=complete_team,
    ),
]
Lenient = Annotated[
    bool,
    typer.Option("--lenient", help="Accept a packet that breaks the schema, flagged as such."),
]
AllowUnredacted = Annotated[
    bool,
    typer.Option(
        "--allow-unredacted",
        help="Send the packet even though the redaction pre-flight found secrets or local paths.",
    ),
]
Local = Annotated[
    bool, typer.Option("--local", help="Use the embedded local store even if a server is set.")
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
Limit = Annotated[
    int, typer.Option("--limit", "-n", metavar="N", min=1, max=1000, help="How many, at most.")
]
Project = Annotated[
    str | None,
    typer.Option(
        "--project", metavar="NAME", help="Only this project's packets (the packets' project.name)."
    ),
]
Here = Annotated[
    bool,
    typer.Option(
        "--here",
        help="Only the packets of the project in this directory (its git remote owner/name,"
        " else the folder's name).",
    ),
]
