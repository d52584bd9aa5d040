"""ltm logout: forget the token for a server."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


def logout(
    host: Annotated[
        str | None,
        typer.Argument(metavar="HOST", help="The server (default: -H's, else the configured one)."),
    ] = None,
) -> None:
    """Forget the saved token for a server (on the server it stays valid until revoked)."""
    from ltm.cli.client import credentials

    if host is None:
        # The server the verbs go to, as ltm auth takes it: -H (LTM_HOST) when given, so
        # `ltm -H URL logout` never signs out of the default server instead.
        target = credentials.active()
        if target is None:
            raise CliError("not signed in to any server; nothing to do")
        host = target.host
    else:
        host = credentials.normalize_host(host)
    if not credentials.forget(host):
        raise CliError(f"not signed in to {host}; nothing to do")
    rest = credentials.default_host()
    where = f"verbs go to {rest}" if rest else "verbs use the local store"
    info(f"logged out of {host}; {where}")
    from ltm.cli.client import outbox

    waiting = outbox.waiting(host)
    if waiting:  # no command reaches that server now: they wait for the next sign-in
        info(f"{outbox.summary(waiting)}: they go once you sign in there again: ltm auth {host}")
