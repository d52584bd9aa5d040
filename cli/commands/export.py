"""ltm export: every packet you can see, as one bundle (JSONL) to keep or to move."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


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
    from ltm.cli.client.backend import open_backend
    from ltm.cli.client.portable import AtomicFile
    from ltm.cli.client.portable import export as write_bundle

    if team and all_scopes:
        raise CliError("give -t TEAM or --all, not both", exit_code=2)
    if output is None and sys.stdout.isatty():
        raise CliError(
            "the bundle would flood the terminal; write it to a file: ltm export -o FILE"
            " (or redirect: ltm export > FILE)",
            exit_code=2,
        )
    backend = open_backend(local=local, team=team)
    try:
        scopes: list[str | None] = [team] if team else [None]
        if all_scopes:
            scopes += backend.team_names()
        elif team and backend.whoami().get("backend") == "local":
            raise CliError(
                "teams live on a server; the local store is personal. Sign in first: ltm auth HOST"
            )
        sink = AtomicFile(output) if output is not None else None
        try:
            counts = write_bundle(backend, scopes, sink.file if sink else sys.stdout.buffer)
        except BaseException:
            if sink is not None:
                sink.abandon()
            raise
        if sink is not None:
            sink.commit()
        else:
            sys.stdout.buffer.flush()
    finally:
        backend.close()
    total = sum(counts.values())
    parts = ", ".join(f"{n} {name}" for name, n in counts.items())
    where = f" to {output}" if output is not None else ""
    noun = "packet" if total == 1 else "packets"
    info(f"exported {total} {noun} from {backend.label} ({parts}){where}")
