"""ltm tokens: list your tokens on the server (one per device) and revoke one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, print_json, relative_time, safe

if TYPE_CHECKING:
    from ltm.cli.client.remote import RemoteBackend

app = typer.Typer(
    help="Your tokens on the server (one per signed-in device): list them, revoke one.",
    invoke_without_command=True,
)


def server(what: str) -> RemoteBackend:
    """The signed-in server; tokens do not exist in the local store."""
    from ltm.cli.client.backend import needs_server, open_backend
    from ltm.cli.client.remote import RemoteBackend

    backend = open_backend()
    if not isinstance(backend, RemoteBackend):
        backend.close()
        raise needs_server(what)
    return backend


def _tokens(backend: RemoteBackend) -> list[dict[str, Any]]:
    reply = backend._call(
        "GET",
        "/v1/tokens",
        ok=(200,),
        feature="token management",
    )
    answer = reply.json(backend.host)
    rows = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(rows, list):
        raise CliError(f"{backend.host} sent an unexpected token list — is it an ltm server?")
    return [row for row in rows if isinstance(row, dict)]


@app.callback()
def tokens(ctx: typer.Context, as_json: options.Json = False) -> None:
    """List your tokens: label, created, last used, expiry, scope (never the token itself)."""
    if ctx.invoked_subcommand is None:
        _list(as_json)


@app.command("ls")
def ls(as_json: options.Json = False) -> None:
    """List your tokens (the same as plain `ltm tokens`)."""
    _list(as_json)


def _list(as_json: bool) -> None:
    backend = server("listing tokens")
    try:
        rows = _tokens(backend)
    finally:
        backend.close()
    if as_json:
        print_json({"tokens": rows})
        return
    table = [("LABEL", "CREATED", "LAST USED", "EXPIRES", "SCOPE", "")]
    for row in rows:
        last, expires = row.get("last_used_at"), row.get("expires_at")
        table.append(
            (
                str(row.get("label", "")),
                relative_time(str(row.get("created_at", ""))),
                relative_time(str(last)) if last else "never",
                str(expires)[:10] if expires else "never",  # the day it stops working
                str(row.get("scope", "")),  # what it may do: read, write or "read write"
                "(this machine)" if row.get("current") else "",
            )
        )
    shown = [tuple(safe(cell) for cell in row) for row in table]  # labels may be a device's text
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    for line in shown:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


@app.command("revoke")
def revoke(
    label: Annotated[str, typer.Argument(metavar="LABEL", help="The token's label (ltm tokens).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Revoke one of your tokens: the device using it is signed out at once.

    Asks first on a terminal; without one it revokes only with --yes.
    """
    from urllib.parse import quote

    from ltm.cli.terminal.confirm import confirmed

    backend = server("revoking a token")
    host = backend.host
    try:
        current = any(row.get("label") == label and row.get("current") for row in _tokens(backend))
        question = (
            f"{label} is the token this machine uses; revoke it and sign out here?"
            if current
            else f"Revoke token {label} on {host}? The device using it is signed out at once"
        )
        confirmed(
            safe(question),
            yes=yes,
            verb=safe(f"ltm tokens revoke {label}"),
            nothing="nothing revoked",
        )
        backend._call(
            "DELETE",
            f"/v1/tokens/{quote(label, safe='')}",
            ok=(200, 204),
            hints={404: f"you have no token labelled {label!r} on {{host}} — see: ltm tokens"},
            feature="token management",
        )
    finally:
        backend.close()
    info(f"revoked token {label} on {host}")
    if current:
        # The token stays in the credentials file (forgetting it would send the next
        # verbs to the local store without a word): each verb now says it is rejected.
        info(
            f"the token this machine used on {host} no longer works; sign in again with:"
            f" ltm auth {host}"
        )
