"""ltm join: accept a team invite (on a clean machine it signs you in as a new user)."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.errors import CliError
from ltm.cli.output import info

MARKER = "/v1/invites/"


def join(
    invite: Annotated[
        str,
        typer.Argument(
            metavar="URL", help="The invite URL (…/v1/invites/CODE), or the code alone."
        ),
    ],
    display: Annotated[
        str | None,
        typer.Option("--display", help="Your name in the team, when this makes you a new user."),
    ] = None,
) -> None:
    """Join a team with an invite; without a token for that server you get a new account."""
    from ltm.cli import credentials
    from ltm.cli.remote import Http, accept_invite

    host, code = parse_invite(invite)
    current = credentials.active()
    token = current.token if current and current.host == host else credentials.token_for(host)
    http = Http(host)
    try:
        answer = accept_invite(http, code, token=token, display=display)
    finally:
        http.close()
    team = answer.get("team") if isinstance(answer.get("team"), dict) else {}
    user = answer.get("user") if isinstance(answer.get("user"), dict) else {}
    team_name = str(team.get("name", "?"))
    who = str(user.get("display", "")) or "you"
    minted = answer.get("token")
    if isinstance(minted, str) and minted:
        previous = credentials.store_login(host, minted, via="invite", user=user)
        info(f"signed in to {host} as {who} (a new user; token saved in {credentials.path()})")
        if previous:
            info(
                f"the default server is now {host} (was {previous}: ltm config set host {previous})"
            )
    else:
        if token is None:
            raise CliError(f"{host} accepted the invite but sent no token to sign in with")
        credentials.remember_user(host, user)
        if display and user.get("display") not in (None, display):
            info(f"--display applies to new users only; you are {who} on {host}")
    info(f"joined team {team_name} on {host} as {who}; its packets: ltm ls -t {team_name}")


def parse_invite(text: str) -> tuple[str, str]:
    """(host, code) from an invite URL, or the configured host and a bare code."""
    from ltm.cli import credentials

    raw = text.strip()
    if MARKER in raw:
        base, _, rest = raw.partition(MARKER)
        code = rest.split("?", 1)[0].split("#", 1)[0].strip("/")
        code = code.removesuffix("/accept")
        if not code or "/" in code:
            raise CliError(f"not an invite URL: {text!r}", exit_code=2)
        return credentials.normalize_host(base), code
    if "/" in raw or not raw:
        raise CliError(
            f"not an invite URL: {text!r} (expected https://HOST/v1/invites/CODE)", exit_code=2
        )
    current = credentials.active()
    if current is None:
        raise CliError("a bare invite code needs a configured server; pass the whole invite URL")
    return current.host, raw
