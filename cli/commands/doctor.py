"""ltm doctor: check the sign-in, the server, the local store and the agent wiring."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.commands import options


def doctor(
    as_json: options.Json = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="Let the local store's integrity check run past its 2-second budget."
        ),
    ] = False,
) -> None:
    """Check what ltm depends on, one line each, with the fix for what fails (exit 1 then)."""
    from ltm.cli.doctor import main
    from ltm.cli.terminal.output import keep_the_verdict

    keep_the_verdict()
    code = main(json_out=as_json, full=full)
    if code:
        raise typer.Exit(code)
