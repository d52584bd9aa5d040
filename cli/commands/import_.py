"""ltm import: load a bundle (from ltm export) into the local store or the server."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.client.portable import import_from
from ltm.cli.commands import options


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
    from ltm.cli.terminal.output import keep_the_verdict

    # The import is the job, not its report: a reader of the report that goes away
    # (`| head`, a `| less` quit early) ends only the report, never the import midway.
    keep_the_verdict()
    status = import_from(
        source,
        team=team,
        lenient=lenient,
        allow_unredacted=allow_unredacted,
        replace=replace,
        local=local,
    )
    if status:
        raise typer.Exit(status)
