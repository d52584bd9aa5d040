"""ltm save: hand over a packet (just its content will do) and keep it."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli import options
from ltm.cli.output import info


def send(
    source: str,
    *,
    fill: bool,
    team: str | None,
    lenient: bool,
    allow_unredacted: bool,
    local: bool,
) -> str:
    """Check, scan and store one packet; the one path for save and push."""
    from ltm.cli import preflight
    from ltm.cli.backend import open_backend

    raw = preflight.read_source(source)
    checked = preflight.accept(
        raw, fill=fill, lenient=lenient, allow_unredacted=allow_unredacted, label=_label(source)
    )
    backend = open_backend(local=local)
    try:
        pushed = backend.push(
            checked.data, team=team, lenient=lenient, allow_unredacted=allow_unredacted
        )
    finally:
        backend.close()
    verb = "saved" if pushed.created else "updated"
    note = "" if checked.conforming else " (non-conforming, accepted with --lenient)"
    where = f"team {team} on {backend.label}" if team else backend.label
    info(f"{verb} {pushed.id} in {where}{note}")
    print(pushed.id)
    return pushed.id


def _label(source: str) -> str:
    return "standard input" if source == "-" else source


def save(
    source: Annotated[
        str, typer.Argument(metavar="FILE|-", help="The packet file, or - for standard input.")
    ] = "-",
    team: options.Team = None,
    lenient: options.Lenient = False,
    allow_unredacted: options.AllowUnredacted = False,
    local: options.Local = False,
) -> None:
    """Save a packet. A missing id, created_at or ltm_version is filled in for you."""
    send(
        source,
        fill=True,
        team=team,
        lenient=lenient,
        allow_unredacted=allow_unredacted,
        local=local,
    )
