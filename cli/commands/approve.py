"""ltm approve: sign another device in as you, by the code it shows (device flow, RFC 8628)."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, print_json, relative_time, safe


def approve(
    code: Annotated[
        str, typer.Argument(metavar="CODE", help="The code the other device shows (XXXX-XXXX).")
    ],
    deny: Annotated[
        bool, typer.Option("--deny", help="Refuse the sign-in instead of approving it.")
    ] = False,
    as_json: options.Json = False,
) -> None:
    """Approve a device that runs `ltm auth HOST`: it gets a token of its own, as you."""
    from ltm.cli.commands.tokens import server

    backend = server("approving a device")
    host = backend.host
    try:
        reply = backend._call(
            "POST",
            "/v1/device/approve",
            ok=(200,),
            payload={"user_code": code, "approve": not deny},
            hints={
                404: f"{{msg}} — no sign-in is waiting for code {code} on {{host}}; check the"
                " code on the other device (codes expire after 10 minutes)",
                409: f"code {code} was already approved or denied — to try again, run ltm auth"
                f" {host} on the other device",
                429: "{host} refused: {msg}",
                400: "{host} rejected the request: {msg}",
            },
        )
    finally:
        backend.close()
    answer = reply.json(host)
    if as_json:
        print_json(answer)
        return
    if not isinstance(answer, dict):
        raise CliError(f"{host} sent an unexpected answer to the approval")
    found = answer.get("device")
    found = found if isinstance(found, dict) else {}
    name = safe(str(found.get("name") or "a device"))  # the device named itself
    asked = relative_time(str(found.get("requested_at", "")))
    origin = safe(f" from {found['from']}") if found.get("from") else ""
    if answer.get("status") == "denied":
        info(f"denied the sign-in of {name} (asked {asked}{origin}) on {host}")
        return
    if found.get("client_id") == "ltm-web":  # the web view's sign-in page: no token made
        info(f"approved the sign-in of {name} (asked {asked}{origin}) on {host}")
        info("that browser is signed in to the web view as you until it signs out (hours at most)")
        return
    scope = str(found.get("scope") or "read write")
    access = "full access" if set(scope.split()) >= {"read", "write"} else f"{scope} only"
    info(f"approved the sign-in of {name} (asked {asked}{origin}) on {host}, with {access}")
    info(
        "it gets a token of its own; see them with: ltm tokens, revoke one: ltm tokens revoke LABEL"
    )
