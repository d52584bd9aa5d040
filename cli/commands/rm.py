"""ltm rm: delete a packet (asks first on a terminal)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


def rm(
    ref: options.Ref,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    team: options.Team = None,
    local: options.Local = False,
) -> None:
    """Delete a packet. Deleted packets cannot be recovered."""
    from ltm.cli.client.backend import open_backend

    backend = open_backend(local=local)
    try:
        if not yes and sys.stdin.isatty():
            goal = _goal(backend.get(ref, team=team))
            if not typer.confirm(f"Delete {ref} ({goal})?", default=False, err=True):
                raise CliError("nothing deleted")
        deleted = backend.delete(ref, team=team)
    finally:
        backend.close()
    info(f"deleted {deleted}")


def _goal(body: bytes) -> str:
    import json

    from ltm.cli.terminal.output import one_line, safe

    try:
        return safe(one_line(str(json.loads(body).get("goal", "")), 60))
    except (ValueError, AttributeError):
        return "unreadable packet"
