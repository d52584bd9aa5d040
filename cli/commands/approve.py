"""ltm approve: sign another device in as you, by the code it shows (device flow, RFC 8628)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, print_json, relative_time, safe

if TYPE_CHECKING:
    from ltm.cli.client.remote import RemoteBackend


FEATURE = "device approval"  # what a server without /v1/device/approve does not offer


def _hints(code: str) -> dict[int, str]:
    """What each refusal of ``code`` means, for the look and for the decision alike."""
    return {
        404: f"{{msg}} — no sign-in is waiting for code {code} on {{host}}; check the code on"
        " the other device (codes expire after 10 minutes)",
        409: f"code {code} was already approved or denied — to try again, run ltm auth {{host}}"
        " on the other device",
        429: "{host} refused: {msg}",
        400: "{host} rejected the request: {msg}",
    }


def _described(found: dict[str, Any]) -> tuple[str, str]:
    """The device as it described itself (its name is its own: untrusted) and when and
    from where it asked."""
    name = safe(str(found.get("name") or "a device"))
    asked = relative_time(str(found.get("requested_at", "")))
    origin = safe(f" from {found['from']}") if found.get("from") else ""
    return name, f"asked {asked}{origin}"


def _access(found: dict[str, Any]) -> str:
    scope = str(found.get("scope") or "read write")
    return "full access" if set(scope.split()) >= {"read", "write"} else f"{safe(scope)} only"


def _question(backend: RemoteBackend, code: str) -> str:
    """What approving ``code`` would do, read from the server without deciding it.

    RFC 8628 section 5.4: anyone can start a sign-in on their own machine and send
    the code to someone signed in; approving it signs *their* device in as you. So the
    device is shown first. A server without the look (an older ltm) still gets the
    question, without the device.
    """
    from ltm.cli.client.remote import status_error

    host = backend.host
    who = safe(str((backend.target.user or {}).get("display") or "you"))
    # A server without device approval at all (a reference server: a plain 404) is
    # "not offered" (``feature``); one with only the POST answers the GET 405 (an older
    # ltm server), or 403 without an ltm error (API Gateway, for a method it has no route
    # for; a read-only token's 403 is an ltm error and says so).
    reply = backend._call(
        "GET",
        "/v1/device/approve",
        ok=(200, 403, 404, 405),
        query={"user_code": code},
        feature=FEATURE,
    )
    warning = "Approve only a sign-in you started yourself, on a device in front of you"
    if reply.status == 405 or (reply.status == 403 and not reply.is_ltm_error()):
        return (
            f"{host} does not say which device asks (an older ltm server).\n"
            f"{warning}: sign a device in to {host} as {who} with code {safe(code)}?"
        )
    if reply.status != 200:
        raise status_error(host, reply, _hints(code))
    answer = reply.json(host)
    found = answer.get("device") if isinstance(answer, dict) else None
    if not isinstance(found, dict):
        raise CliError(f"{host} sent an unexpected answer about code {safe(code)}")
    name, asked = _described(found)
    if found.get("client_id") == "ltm-web":
        what = "a browser signs in to the web view"
    else:
        what = f"it gets a token of its own, with {_access(found)}"
    return f"{name} ({asked}) asks to sign in to {host} as {who}: {what}.\n{warning}: approve it?"


def approve(
    code: Annotated[
        str, typer.Argument(metavar="CODE", help="The code the other device shows (XXXX-XXXX).")
    ],
    deny: Annotated[
        bool, typer.Option("--deny", help="Refuse the sign-in instead of approving it.")
    ] = False,
    yes: options.Yes = False,
    as_json: options.Json = False,
) -> None:
    """Approve a device that runs `ltm auth HOST`: it gets a token of its own, as you.

    Shows the device and asks first on a terminal; without one it approves only with
    --yes. --deny does not ask.
    """
    from ltm.cli.commands.tokens import server
    from ltm.cli.terminal.confirm import confirmed

    backend = server("approving a device")
    host = backend.host
    try:
        if not deny:
            confirmed(
                lambda: _question(backend, code),
                yes=yes,
                verb=safe(f"ltm approve {code}"),
                nothing="nothing approved",
                why="signs another device in as you",
            )
        reply = backend._call(
            "POST",
            "/v1/device/approve",
            ok=(200,),
            payload={"user_code": code, "approve": not deny},
            hints=_hints(code),
            feature=FEATURE,
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
    name, asked = _described(found)
    if answer.get("status") == "denied":
        info(f"denied the sign-in of {name} ({asked}) on {host}")
        return
    if found.get("client_id") == "ltm-web":  # the web view's sign-in page: no token made
        info(f"approved the sign-in of {name} ({asked}) on {host}")
        info("that browser is signed in to the web view as you until it signs out (hours at most)")
        return
    info(f"approved the sign-in of {name} ({asked}) on {host}, with {_access(found)}")
    info(
        "it gets a token of its own; see them with: ltm tokens, revoke one: ltm tokens revoke LABEL"
    )
