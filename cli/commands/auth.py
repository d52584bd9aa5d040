"""ltm auth: sign in to a server, with a token or from a browser (device flow).

A token is read from standard input (``--with-token``, as ``gh auth login`` does)
or typed at a prompt that does not echo it: a token given as an argument is
readable by every local user (``/proc/PID/cmdline``, ``ps``) while the command
runs, and stays in shell history; it still works, with a warning.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, safe

if TYPE_CHECKING:
    from ltm.cli.client.remote import Http


def auth(
    host: Annotated[
        str | None,
        typer.Argument(
            metavar="HOST",
            help="The server, e.g. https://ltm.example.org (default: the configured server).",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Argument(
            metavar="TOKEN",
            help="Discouraged (other users can read it, shell history keeps it): use"
            " --with-token. '-' reads it from stdin.",
            show_default=False,
        ),
    ] = None,
    with_token: Annotated[
        bool,
        typer.Option(
            "--with-token",
            help="Read a token issued by the server from stdin (a prompt that does not echo"
            " it on a terminal). Without a token, sign in from a browser.",
        ),
    ] = False,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Show the sign-in URL; do not open a browser.")
    ] = False,
) -> None:
    """Sign in to an ltm server; from then on every verb goes to it (--local overrides)."""
    from ltm.cli.client import credentials
    from ltm.cli.client.remote import Http, probe

    if host is None:
        configured = credentials.active()
        if configured is None:
            raise CliError("no server configured — run: ltm auth HOST [--with-token]", exit_code=2)
        host = configured.host
    host = credentials.normalize_host(host)
    if with_token and token is not None:
        raise CliError(
            "give the token on stdin (--with-token) or not at all, not both", exit_code=2
        )
    in_argv = token is not None and token != "-"
    if with_token or token == "-":
        token = read_token()
    if token:
        credentials._check_token(token)  # before anything is sent: it is a header's value
    http = Http(host)
    unchecked: str | None = None  # why a token from the browser could not be checked
    user: dict[str, str] | None = None
    try:
        health = probe(http)
        if token:
            check_token(http, token)
            via = "token"
            user = account(http, token)
        else:
            from ltm.cli.client import device

            token = device.sign_in(
                http, open_browser=not no_browser and device.browser_available(), say=info
            )
            via = "device"
            try:
                check_token(http, token)
                user = account(http, token)
            except CliError as exc:
                from ltm.cli.client.outbox import unreachable

                # The server handed this token out a moment ago and its code is spent: a
                # server out of reach for the check is no reason to throw the sign-in away.
                if not unreachable(exc):
                    raise
                unchecked = " ".join(exc.message.split()).split(" — ")[0]
    finally:
        http.close()
    previous = credentials.store_login(host, token, via=via, user=user)
    version = health.get("version")
    # The server's words (its version, the user's name) reach the terminal through safe().
    info(
        safe(
            f"signed in to {host}"
            + (f" (protocol {version})" if isinstance(version, str) else "")
            + f"; token {credentials.fingerprint(token)} saved in {credentials.path()}"
        )
    )
    if unchecked:
        info(
            safe(
                f"warning: the new token could not be checked just now ({unchecked}); it is"
                " saved: ltm whoami shows the account once the server answers"
            )
        )
    elif user:
        # Said from the server's answer, so a sign-in approved with someone else's
        # account (their code typed into another person's browser) shows at once.
        info(safe(f"signed in as {user['display']} (user {user['id']})"))
    else:
        info("the server does not say which account this is (it has no /v1/whoami)")
    if previous:
        info(f"the default server is now {host} (was {previous}: ltm config set host {previous})")
    if in_argv:  # said once the token is known to work: that one was exposed
        info(
            "warning: a token on the command line can be read by other users of this machine"
            " and stays in your shell history — next time: ltm auth HOST --with-token"
            " (it reads the token from stdin, or asks for it without echo)"
        )
    if warning := credentials.plain_http_warning(host):
        info(warning)


def read_token() -> str:
    """The token from stdin: its first line, or typed at a prompt with no echo."""
    if sys.stdin.isatty():
        import getpass

        try:
            token = getpass.getpass("token (input hidden): ", stream=sys.stderr).strip()
        except EOFError:
            print(file=sys.stderr)  # ends the prompt's line
            raise CliError("no token given; nothing was saved", exit_code=2) from None
        except KeyboardInterrupt:  # as at any question: one line, exit 130 (ltm.cli.start)
            print(file=sys.stderr)
            raise
    else:
        # A file saved with a byte order mark (Notepad's UTF-8) holds the token after it.
        token = sys.stdin.readline().lstrip("\ufeff").strip()
    if not token:
        raise CliError("no token on standard input", exit_code=2)
    return token


def account(http: Http, token: str) -> dict[str, str] | None:
    """``GET /v1/whoami``: the account the token belongs to (None from a server without it)."""
    reply = http.request("GET", "/v1/whoami", token=token)
    if reply.status != 200:
        return None
    try:
        user = reply.json(http.host).get("user")
    except (CliError, AttributeError):
        return None
    if not isinstance(user, dict):
        return None
    found = {k: user[k] for k in ("id", "display") if isinstance(user.get(k), str)}
    return found if "id" in found and "display" in found else None


def check_token(http: Http, token: str) -> None:
    """``GET /v1/packets?limit=1`` with the token, as the protocol's sign-in check."""
    from ltm.cli.client.remote import status_error

    reply = http.request("GET", "/v1/packets", query={"limit": 1}, token=token)
    if reply.status == 200:
        return
    if reply.status == 401:
        raise CliError(
            f"token rejected by {http.host} ({reply.error_text()}) — check it, or ask the"
            " server's admin for a new one (ltm server issue-token NAME); nothing was saved"
        )
    raise status_error(http.host, reply)
