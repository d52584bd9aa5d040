"""ltm import: load a bundle (from ltm export) into the local store or the server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.terminal.output import info


def import_(
    source: Annotated[
        str, typer.Argument(metavar="FILE|-", help="The bundle, or - for standard input.")
    ],
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            "-t",
            help="Put every packet in this team (default: the scope each line names).",
        ),
    ] = None,
    lenient: options.Lenient = False,
    allow_unredacted: options.AllowUnredacted = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Overwrite your own packet when the bundle has a different one with its id.",
        ),
    ] = False,
    local: options.Local = False,
) -> None:
    """Import a bundle: ids kept, identical packets skipped, each line reported.

    Every packet is validated and scanned by the redaction pre-flight, as for
    ltm push. A packet whose id belongs to someone else is never overwritten.
    Exits 1 when any line was refused.
    """
    from ltm.cli.client.backend import open_backend
    from ltm.cli.client.portable import Importer, Report
    from ltm.cli.client.preflight import source_error

    if source == "-":
        stream, size = sys.stdin.buffer, None
    else:
        path = Path(source)
        try:
            stream = path.open("rb")
            size = path.stat().st_size
        except OSError as exc:
            raise source_error(source, exc, "a bundle") from None
    backend = open_backend(local=local, team=team)
    report = Report()
    try:
        if team and backend.whoami().get("backend") == "local":
            from ltm.cli.client.backend import no_team_here

            raise no_team_here(team)
        Importer(
            backend,
            report,
            team=team,
            lenient=lenient,
            allow_unredacted=allow_unredacted,
            replace=replace,
        ).run(stream, size=size)
    finally:
        backend.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    sys.stdout.flush()
    info(report.summary(f"team {team} on {backend.label}" if team else backend.label))
    if report.refused:
        raise typer.Exit(1)
