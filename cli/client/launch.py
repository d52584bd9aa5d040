"""Opening a browser on a URL that carries a secret, without putting the secret on a command line.

``webbrowser.open(url)`` runs the browser with the URL in its argv, which
every local user can read (``ps``, ``/proc/PID/cmdline``). A one-time key or
a device sign-in code there can be redeemed, or approved with someone else's
account, by whoever reads it first. So the browser is given a private file
instead: an HTML page in a 0700 folder, created 0600 with ``O_EXCL`` (never
through a planted file or link), that forwards to the real URL. A GET target
is reached by a meta refresh; a form target (``fields``) by a form that
posts itself, so its fields never land in a URL or the browser's history.
Jupyter opens its servers the same way (``use_redirect_file``:
https://jupyter-server.readthedocs.io/en/latest/other/full-config.html).

The file is only a way in: its key is single-use and short-lived, the caller
removes it when done, and files older than ``STALE_SECONDS`` are swept on
the next launch.
"""

from __future__ import annotations

import contextlib
import html
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

STALE_SECONDS = 600
PREFIX = "open-"


def folder() -> Path:
    """The private folder for forwarding pages (0700, ours, not a link)."""
    from ltm.cli.config import private_dir, state_dir

    path = state_dir() / "browser"
    private_dir(state_dir())  # the state folder too: mkdir's mode reaches the last folder only
    path.mkdir(exist_ok=True, mode=0o700)
    info = path.lstat()
    if path.is_symlink() or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
        raise OSError(f"{path} is not a folder of this user")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def forwarding_page(url: str, fields: Mapping[str, str] | None = None) -> str:
    """The HTML that forwards to ``url`` (a GET, or a POST of ``fields``)."""
    target = html.escape(url, quote=True)
    if fields is None:
        return (
            "<!doctype html><html><head><meta charset=utf-8>"
            '<meta name="referrer" content="no-referrer">'
            f'<meta http-equiv="refresh" content="0;url={target}"><title>ltm</title></head>'
            f'<body><p><a href="{target}">Continue to ltm</a></p></body></html>\n'
        )
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k, quote=True)}"'
        f' value="{html.escape(v, quote=True)}">'
        for k, v in fields.items()
    )
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        '<meta name="referrer" content="no-referrer"><title>ltm</title></head><body>'
        f'<form method="post" action="{target}">{inputs}'
        '<button type="submit">Continue to ltm</button></form>'
        "<script>document.forms[0].submit()</script></body></html>\n"
    )


def write_page(url: str, fields: Mapping[str, str] | None = None) -> Path:
    """A new private forwarding page; the caller removes it (``forget``) when done."""
    where = folder()
    _sweep(where)
    path = where / f"{PREFIX}{os.getpid()}-{secrets.token_hex(8)}.html"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(forwarding_page(url, fields))
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def open_private(url: str, fields: Mapping[str, str] | None = None) -> Path | None:
    """Open ``url`` (posting ``fields``) in a browser through a private page; its path or None.

    None when no browser could be started (the page is removed then).
    """
    if urlsplit(url).scheme not in ("http", "https"):
        return None  # never forward to a file: or javascript: URL a server named
    try:
        path = write_page(url, fields)
    except OSError:
        return None
    if not launch(path):
        forget(path)
        return None
    return path


def launch(page: Path) -> bool:
    """Ask the browser to open a forwarding page; its ``file:`` URL is all its argv carries."""
    import webbrowser

    try:
        return bool(webbrowser.open(page.as_uri()))
    except Exception:  # no usable browser after all
        return False


def forget(path: Path | None) -> None:
    """Remove a forwarding page (it is single-use; a missing one is fine)."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _sweep(where: Path) -> None:
    """Remove forwarding pages left behind by runs that could not clean up (a kill)."""
    cutoff = time.time() - STALE_SECONDS
    for old in where.glob(f"{PREFIX}*.html"):
        try:
            if old.lstat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass
