"""ltm export: your packets (and your teams'), as one bundle (JSONL) to keep or to move."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ltm.cli.client.portable import export_to
from ltm.cli.commands import options


def export(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Write the bundle here (default: stdout)."
        ),
    ] = None,
    team: options.Team = None,
    all_scopes: Annotated[
        bool, typer.Option("--all", help="Your personal packets and those of all your teams.")
    ] = False,
    local: options.Local = False,
) -> None:
    """Export packets as a bundle: one JSON line per packet, after a header line."""
    export_to(output, team=team, all_scopes=all_scopes, local=local)
