"""ltm invite: a single-use link that lets one person join a team."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.terminal.output import info, safe


def invite(
    team: Annotated[
        str, typer.Option("--team", "-t", help="The team to invite to.", show_default=False)
    ],
    as_json: options.Json = False,
) -> None:
    """Print an invite URL for TEAM (single use; it expires, 7 days on ltm servers)."""
    from ltm.cli.commands.teams import server

    backend = server(team)
    try:
        created = backend.invite(team)
    finally:
        backend.close()
    if as_json:
        print(json.dumps(created, indent=2))
        return
    print(created["url"])
    expires = str(created.get("expires_at", ""))
    left = until(expires)
    info(f"single use; expires {safe(expires)}" + (f" (in {left})" if left else ""))
    info(f"the invitee runs: ltm join {created['url']}")


def until(stamp: str) -> str | None:
    """'7 d', '5 h', '12 min' from now; None when unreadable or past."""
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (when - datetime.now(UTC)).total_seconds()
    if seconds <= 0:
        return None
    if seconds >= 86400:
        return f"{round(seconds / 86400)} d"
    if seconds >= 3600:
        return f"{round(seconds / 3600)} h"
    return f"{max(1, round(seconds / 60))} min"
