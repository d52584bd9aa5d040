"""ltm open: the web view of the signed-in server in a browser (the reference's ``platform``).

The reference's ``ltm platform`` (internal/cli/platform.go in
dennisdevulder/ltm) prints the dashboard URL, then opens it. So does this,
for any ltm server: ``{host}/web``, or one packet's page. The local store
has its own view: ``ltm ui``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


def open_view(
    ref: Annotated[
        str | None,
        typer.Argument(metavar="[ID]", help="A packet to open (an id or a unique prefix)."),
    ] = None,
    team: options.Team = None,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL only; do not open a browser.")
    ] = False,
) -> None:
    """Open the server's web view (your packets, or one packet) in your browser."""
    from urllib.parse import quote

    from ltm.cli.client.credentials import active
    from ltm.cli.client.device import _launch, browser_available

    target = active()
    if target is None:
        raise CliError("not signed in to a server; for the local store's view run: ltm ui")
    url = target.host.rstrip("/") + "/web"
    if ref:
        from ltm.cli.client.remote import RemoteBackend

        backend = RemoteBackend.open(target)
        try:
            packet_id = backend.resolve(ref, team=team)
        finally:
            backend.close()
        url += f"/packets/{quote(packet_id, safe='')}"
    elif team:
        url += f"?team={quote(team, safe='')}"
    print(url)
    if not no_browser and browser_available() and not _launch(url):
        info("could not open a browser; open the URL above")
