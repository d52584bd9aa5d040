"""ltm ui: the web view of the embedded local store, in your browser, on this machine only.

A loopback-only server (the ``ltm server run`` machinery: the same Chalice
app, waitress, one process) on 127.0.0.1 and a random port, over the local
store. Other people on this machine can reach a loopback port too, so the
view is locked three ways:

- it answers only under a random host name of its own,
  ``ltm-<random>.localhost:<port>`` (current browsers resolve every
  ``*.localhost`` name to loopback: https://www.rfc-editor.org/rfc/rfc6761#section-6.3
  and https://url.spec.whatwg.org/#host-miscellaneous), and refuses any other
  Host (421). Cookies do not separate ports, so a cookie set for 127.0.0.1
  would also go to a page another user serves on another loopback port; set
  for this random name, it goes nowhere else;
- the first request must bring a one-time random key (256 bits), which it
  exchanges for a session cookie (HttpOnly, SameSite=Strict) before
  redirecting to a clean URL; the key never works again;
- the key and the name reach the browser through a private 0600 page that
  posts the key (``ltm.cli.client.launch``), never on the browser's command
  line, which every local user can read.

The server listens before the browser is asked to open (from a thread: a
browser command that blocks cannot hang it). The pages' signing key is
random per run and never written anywhere, so sessions end with the process.
Ctrl-C stops it.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from ltm.cli.errors import CliError, opening
from ltm.cli.terminal.output import info


def only_host(app: Callable[..., Iterable[bytes]], host: str) -> Callable[..., Iterable[bytes]]:
    """A WSGI app that answers only requests whose Host is ``host`` (421 for any other)."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if str(environ.get("HTTP_HOST", "")).lower() != host:
            body = b"Wrong address: open the one ltm ui printed.\n"
            start_response(
                "421 Misdirected Request",
                [
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("Content-Length", str(len(body))),
                    ("Cache-Control", "no-store"),
                ],
            )
            return [body]
        return app(environ, start_response)

    return guarded


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
    from ltm.cli.client.authors import path as copies_path
    from ltm.cli.client.device import browser_available
    from ltm.cli.config import local_db_path

    path = local_db_path()
    key = secrets.token_urlsafe(32)
    name = f"ltm-{secrets.token_hex(8)}.localhost"  # 64 random bits: the cookie's own host
    for variable in [n for n in os.environ if n.startswith("LTM_COGNITO_")]:
        del os.environ[variable]  # the local view never signs in anywhere
    os.environ.pop("LTM_EXTERNAL_URL", None)
    os.environ.update(
        LTM_STORE="sqlite",
        LTM_DB=str(path),
        LTM_UI_KEY=key,
        LTM_UI_COPIES=str(copies_path()),  # who wrote the copies of others' packets
        LTM_DEVICE_SECRET=secrets.token_urlsafe(32),
        LTM_LOG_LEVEL=os.environ.get("LTM_UI_LOG_LEVEL", "WARNING"),
    )

    from ltm.cli.server.http import bind_for_browsers, serve
    from ltm.cli.server.loader import load_app
    from ltm.cli.server.wsgi import ChaliceWSGI

    module = load_app()
    with opening("the local store", path):
        module.get_store()  # open (and migrate) now: fail before listening
    try:  # the other loopback address browsers send its name to, held too
        sock, held = bind_for_browsers("127.0.0.1", port)
    except OSError as exc:
        raise CliError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    host = f"{name}:{sock.getsockname()[1]}"
    os.environ["LTM_WEB_HOST"] = host  # read by the web view on its first page
    wsgi = only_host(ChaliceWSGI(module.app, logger=module.logger), host)
    base = f"http://{host}"
    info(f"ltm ui: the local store ({path}) at {base}/web — Ctrl-C stops")
    print(f"{base}/web/ui?key={key}")  # one use: the first browser to open it gets the session
    sys.stdout.flush()
    page: Path | None = None
    if not no_browser and browser_available():
        from ltm.cli.client.launch import write_page

        try:
            page = write_page(f"{base}/web/ui", {"key": key})
        except OSError as exc:
            info(f"could not write the page that opens the view ({exc}); open the URL above")
        else:
            # The socket listens already; the browser is asked from a thread, so a browser
            # command that blocks (or takes its time) never keeps the view from serving.
            threading.Thread(target=_open_browser, args=(page,), daemon=True).start()
    try:
        status = serve(wsgi, sock, threads=4, on_stop=module.close_store)
    finally:
        for other in held:
            other.close()
        from ltm.cli.client.launch import forget

        forget(page)  # the key is spent or dies with this process: the page goes too
    if status:
        raise typer.Exit(status)


def _open_browser(page: Path) -> None:
    from ltm.cli.client.launch import forget, launch

    if not launch(page):
        forget(page)
        info("could not open a browser; open the URL above")
