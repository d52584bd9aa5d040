"""ltm open: the web view of the signed-in server in a browser (the reference's ``platform``).

The reference's ``ltm platform`` (internal/cli/platform.go in
dennisdevulder/ltm) prints the dashboard URL, then opens it. So does this,
for any ltm server: ``{host}/web``, or one packet's page. The local store
has its own view: ``ltm ui``.

Opening a browser also signs it in, from the CLI's own credentials: people
who joined by invite or signed in with the device flow never saw a token to
type into the sign-in page. The CLI asks the server for a short-lived,
single-use key (``POST /v1/web/sign-in-key``, an extension; it needs the
token's full scope) and hands it to the browser through a private page that
posts it (``ltm.cli.client.launch``): never on a command line, in a URL or in
a log. Revoking the CLI's token ends that browser session too. A server
without the route (the reference) gets the plain URL.

A server listening on loopback (``ltm server run``'s default) serves its pages
at a ``*.localhost`` name of its own, so that their cookie reaches no other
local port; the key's answer says where, and the URL printed is that one.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info
from ltm.loopback import loopback_url


def open_view(
    ref: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="A packet to open (an id or a unique prefix).",
            autocompletion=options.complete_packet,
        ),
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

    target = active(team)  # -t TEAM: the server the user belongs to that team on
    if target is None and team:
        from ltm.cli.client.remote import find_team

        target = find_team(team)
    if target is None:
        from ltm.cli.client.backend import needs_server, no_team_here

        if team:
            raise no_team_here(team)
        problem = needs_server("the web view")
        raise CliError(f"{problem.message}; the local store's own view: ltm ui")
    next_path = "/web"
    if ref:
        from ltm.cli.client.remote import RemoteBackend

        backend = RemoteBackend.open(target)
        try:
            packet_id = backend.resolve(ref, team=team)
        finally:
            backend.close()
        next_path += f"/packets/{quote(packet_id, safe='')}"
    elif team:
        next_path += f"?team={quote(team, safe='')}"
    base = target.host.rstrip("/")
    opening = not no_browser and browser_available()
    key = None
    if opening or loopback_url(base):
        # Opening: the key signs the browser in. Printing only, on loopback: its
        # answer is where the pages answer (a name of their own); the key lapses unused.
        key = _sign_in_key(target, quiet=not opening)
    pages = key["url"].removesuffix("/web/key") if key else base
    url = pages + next_path
    print(url)
    if not opening:
        return
    if key is None:
        if not _launch(url):
            info("could not open a browser; open the URL above")
        return
    from ltm.cli.client.launch import open_private

    if open_private(key["url"], {"key": key["key"], "next": next_path}) is None:
        info("could not open a browser; open the URL above")
    else:
        # A browser signed in as someone else, or not at all, asks first (login CSRF).
        info("opened in your browser to sign in as you (single-use key, not shown)")


def _same_server(base: str, url: str) -> bool:
    """``url`` is the key's page on the server at ``base``: under it, or, for a server on
    loopback, under a ``*.localhost`` name on the same port (its pages' own name)."""
    from urllib.parse import urlsplit

    if url.startswith(base + "/"):
        return True
    here, there = urlsplit(base), urlsplit(url)
    return (
        loopback_url(base)
        and there.scheme == here.scheme
        and (there.hostname or "").endswith(".localhost")
        and there.port == here.port
        and there.path == here.path + "/web/key"
        and not there.query
        and not there.username
    )


def _sign_in_key(target: Any, *, quiet: bool = False) -> dict[str, str] | None:
    """A one-time web sign-in key from the server, or None (no such route, or refused)."""
    from ltm.cli.client.remote import Http, plain_ascii

    http = Http(target.host)
    try:
        reply = http.request("POST", "/v1/web/sign-in-key", token=target.token)
        data = reply.json(target.host) if reply.status == 201 else None
    except CliError:
        return None
    finally:
        http.close()
    if not isinstance(data, dict):
        # On loopback the URL printed then is the API's address, whose pages answer only
        # "wrong address": their own name comes with a key, so say where it is even when
        # only printing (a token granted read or write alone gets no key).
        here = loopback_url(target.host)
        if reply.status == 403 and (here or not quiet):
            where = (
                " at the web view address `ltm server run` printed"
                " (http://ltm-….localhost:PORT/web)"
                if here
                else " there"
            )
            info(
                "this token may not sign a browser in (it needs read write); sign in with a"
                f" full-access token{where}"
            )
        return None
    found = {k: data.get(k) for k in ("url", "key")}
    if not all(isinstance(v, str) and v for v in found.values()):
        return None
    if not plain_ascii(found["url"]) or not _same_server(
        target.host.rstrip("/"), str(found["url"])
    ):
        return None  # the key goes back to the server it came from, nowhere else
    return found  # type: ignore[return-value]
