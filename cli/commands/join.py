"""ltm join: accept a team invite (on a clean machine it signs you in as a new user)."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, safe

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
        typer.Option(
            "--display",
            metavar="NAME",
            help="Your name in the team, when this makes you a new user.",
        ),
    ] = None,
    make_default: Annotated[
        bool,
        typer.Option(
            "--make-default",
            help="Also make the invite's server your default (where save, ls... go without -H).",
        ),
    ] = False,
) -> None:
    """Join a team with an invite; without a token for that server you get a new account.

    Your default server stays as it is unless you pass --make-default (or say yes
    when asked on a terminal): an invite link can come from anyone, and the default
    server receives every later save.
    """
    from ltm.cli.client import credentials
    from ltm.cli.client.remote import Http, accept_invite

    host, code = parse_invite(invite)
    current = credentials.active()
    token = current.token if current and current.host == host else credentials.token_for(host)
    if display is None and token is None:
        display = _name_asked(host)
    http = Http(host)
    try:
        answer = accept_invite(http, code, token=token, display=display)
    finally:
        http.close()
    team = answer["team"] if isinstance(answer.get("team"), dict) else {}
    user = answer["user"] if isinstance(answer.get("user"), dict) else {}
    team_name = safe(str(team.get("name", "?")))
    who = safe(str(user.get("display", ""))) or "you"
    default = credentials.load().default
    move = default != host and (make_default or _asked(host, default))
    minted = answer.get("token")
    becomes_default = move or default == host
    if isinstance(minted, str) and minted:
        credentials.store_login(host, minted, via="invite", user=user, make_default=becomes_default)
        # The default server's token goes where the reference CLI reads it; any other
        # server's stays in hosts.json.
        kept = credentials.path() if becomes_default else credentials.hosts_path()
        info(f"signed in to {host} as {who} (a new user; token saved in {kept})")
    else:
        if token is None:
            raise CliError(f"{host} accepted the invite but sent no token to sign in with")
        credentials.remember_user(host, user, token=token)
        if move:
            credentials.set_default(host)
        if display and user.get("display") not in (None, display):
            info(f"--display applies to new users only; you are {who} on {host}")
    raw_name = team.get("name")
    if isinstance(raw_name, str) and credentials.TEAM_NAME.fullmatch(raw_name):
        # So -t finds this server from now on: for the account that joined.
        joined_as = minted if isinstance(minted, str) and minted else token
        credentials.remember_teams(host, [raw_name], token=joined_as)
    info(f"joined team {team_name} on {host} as {who}")
    if isinstance(minted, str) and minted and not display:  # a name the server made up
        info(
            f"teammates know you as {who} and share with you by it; to go by your own name:"
            f" ltm profile --display NAME -t {team_name}"
        )
    if becomes_default:
        if move:
            back = f"ltm config set host {default}" if default else "ltm config unset host"
            was = default or "the local store"
            info(f"the default server is now {host} (was {was}; back with: {back})")
        info(f"its packets: ltm ls -t {team_name}")
        return
    stays = default or "the local store"
    info(
        f"your default stays {stays} (where save, ls... go without -t); -t {team_name} reaches"
        f" {host}: ltm ls -t {team_name}  (to make {host} the default: ltm config set host {host})"
    )


def _name_asked(host: str) -> str | None:
    """On a terminal, the name a new user goes by in the team (None: none given, and the
    server names them ``invited-XXXXXX``). Teammates share with you by it."""
    import sys

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    answer = typer.prompt(
        f"Your name on {host} (teammates see it and share with you by it; Enter for none)",
        default="",
        show_default=False,
        err=True,
    )
    return str(answer).strip() or None


def _asked(host: str, default: str | None) -> bool:
    """On a terminal, ask whether the invite's server becomes the default (no by default)."""
    import sys

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    now = f"now {default}" if default else "now the local store"
    return typer.confirm(
        f"Make {host} your default server ({now})? Every save without -H would go there",
        default=False,
        err=True,
    )


def parse_invite(text: str) -> tuple[str, str]:
    """(host, code) from an invite URL, or the configured host and a bare code."""
    from ltm.cli.client import credentials

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
