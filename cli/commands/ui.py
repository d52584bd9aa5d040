"""ltm ui: the web view of the embedded local store, in your browser, on this machine only.

A loopback-only server (the ``ltm server run`` machinery: the same Chalice
app, cheroot, one process) on 127.0.0.1 and a random port, over the local
store. Other people on this machine can reach a loopback port too, so the
view is locked: the URL carries a one-time random key (256 bits) that the
first request exchanges for a session cookie (HttpOnly, SameSite=Strict),
then redirects to a clean URL; the key never works again. The pages' signing
key is random per run and never written anywhere, so sessions end with the
process. Ctrl-C stops it.
"""

from __future__ import annotations

import os
import secrets
import sys
from typing import Annotated

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


def ui(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")
    ] = 0,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL only; do not open a browser.")
    ] = False,
) -> None:
    """Open the local store's web view in your browser (loopback only; Ctrl-C stops)."""
    from ltm.cli.start.extras import require

    require("server", "ltm ui")  # the same app and HTTP server as `ltm server run`
    from ltm.cli.client.device import _launch, browser_available
    from ltm.cli.config import local_db_path

    path = local_db_path()
    key = secrets.token_urlsafe(32)
    for name in [n for n in os.environ if n.startswith("LTM_COGNITO_")]:
        del os.environ[name]  # the local view never signs in anywhere
    os.environ.pop("LTM_EXTERNAL_URL", None)
    os.environ.update(
        LTM_STORE="sqlite",
        LTM_DB=str(path),
        LTM_UI_KEY=key,
        LTM_DEVICE_SECRET=secrets.token_urlsafe(32),
        LTM_LOG_LEVEL=os.environ.get("LTM_UI_LOG_LEVEL", "WARNING"),
    )

    from ltm.cli.server.http import BODY_TOO_LARGE_ERRORS, bind, serve
    from ltm.cli.server.loader import load_app
    from ltm.cli.server.wsgi import ChaliceWSGI

    module = load_app()
    try:
        module.get_store()  # open (and migrate) now: fail before listening
    except Exception as exc:
        raise CliError(f"cannot open the local store {path}: {exc}") from None
    wsgi = ChaliceWSGI(module.app, logger=module.logger, too_large=BODY_TOO_LARGE_ERRORS)
    try:
        sockets = bind("127.0.0.1", port, 1)
    except OSError as exc:
        raise CliError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    bound = sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{bound}/web/ui?key={key}"
    info(f"ltm ui: the local store ({path}) at http://127.0.0.1:{bound}/web — Ctrl-C stops")
    print(url)  # one use: the first browser to open it gets the session
    sys.stdout.flush()
    if not no_browser and browser_available() and not _launch(url):
        info("could not open a browser; open the URL above")
    status = serve(wsgi, sockets, threads=4, on_stop=module.close_store)
    if status:
        raise typer.Exit(status)
