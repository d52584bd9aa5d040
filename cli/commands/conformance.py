"""ltm conformance URL: run the protocol's wire checks against any ltm server.

Tokens never go on the command line (they would land in shell history and in
``ps``): the first user's comes from ``LTM_CONFORMANCE_TOKEN`` or
``--token-file``, an optional second user's from ``LTM_CONFORMANCE_TOKEN_2`` or
``--token2-file``. Without a second token, the run mints a second user by
accepting one of its own invites without a bearer, as the protocol lets any
server do. The checks themselves live in ``ltm.cli.conformance``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import print_json

TOKEN_ENV = "LTM_CONFORMANCE_TOKEN"
TOKEN2_ENV = "LTM_CONFORMANCE_TOKEN_2"

TokenFile = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        metavar="FILE",
        help=f"A file holding the first user's token (else ${TOKEN_ENV}).",
        show_default=False,
    ),
]
Token2File = Annotated[
    Path | None,
    typer.Option(
        "--token2-file",
        metavar="FILE",
        help=f"A file holding a second user's token (else ${TOKEN2_ENV}; else one is minted"
        " through an invite).",
        show_default=False,
    ),
]


def _token(path: Path | None, env: str, *, required: bool) -> str | None:
    if path is not None:
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}", exit_code=2) from None
        if not value:
            raise CliError(f"{path} is empty; it should hold a token", exit_code=2)
        return value
    value = os.environ.get(env, "").strip()
    if value:
        return value
    if required:
        raise CliError(
            f"give the token of a user on the server: {TOKEN_ENV}=… or --token-file FILE"
            " (never on the command line)",
            exit_code=2,
        )
    return None


def conformance(
    url: Annotated[
        str, typer.Argument(metavar="URL", help="The server, e.g. http://127.0.0.1:8080.")
    ],
    token_file: TokenFile = None,
    token2_file: Token2File = None,
    as_json: options.Json = False,
) -> None:
    """Check a server against the ltm protocol: one line per check; exit 1 on a failure."""
    from urllib.parse import urlsplit

    from ltm.cli.client.remote import configured_timeout
    from ltm.cli.conformance import run
    from ltm.cli.terminal.output import keep_the_verdict

    keep_the_verdict()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CliError(f"URL must be http(s)://HOST[:PORT], got {url!r}", exit_code=2)
    first = _token(token_file, TOKEN_ENV, required=True)
    assert first is not None
    second = _token(token2_file, TOKEN2_ENV, required=False)
    # A conformance run waits longer than other commands by default (a server under the
    # run's concurrent accepts is slow to answer); LTM_TIMEOUT, when set, is the user's.
    timeout = configured_timeout() if os.environ.get("LTM_TIMEOUT") else 30.0
    report = run(url, first, second, timeout=timeout)
    if as_json:
        print_json(report.as_json())
    else:
        from ltm.cli.terminal.output import safe

        for check in report.checks:
            print(safe(check.line()))  # a server's answers are shown: untrusted text
        for note in report.notes:
            print(safe(f"note: {note}"))
        differs = report.count("differs")
        print(
            f"{report.count('pass')} passed, {report.count('fail')} failed,"
            + (f" {differs} differ from the protocol's recommendation," if differs else "")
            + f" {report.count('not offered')} not offered"
        )
    if report.count("fail"):
        raise typer.Exit(1)
