"""Who wrote the packets copied into the local store from elsewhere: a server
(``pull --to-local``) or a bundle (``ltm import --local``).

The local store has one user, so everything in it reads as the user's own; a
teammate's packet copied down must not (the session-start hook would frame another
person's notes as the user's). The server named the author when the packet came
down (``X-Ltm-Created-By``), a bundle's line names it (``created_by``); that fact is
kept here, in ``authors.json`` beside the local store (0600, its format in
``ltm.copies``), keyed by packet id, and read where the packet is framed
(``LocalBackend.copied_from``, ``ltm ui``) and exported.

Import-light: the session-start hook reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltm.backend import Backend

FILE = "authors.json"
FIELD_MAX = 200  # characters kept of an author's id, name or server from a bundle


def path() -> Path:
    """``authors.json``, beside the local store."""
    from ltm.cli.config import data_dir

    return data_dir() / FILE


def _load() -> dict[str, dict[str, str]]:
    from ltm.copies import read

    return read(path())


def of(packet_id: str) -> dict[str, str] | None:
    """The author recorded for a local copy: ``{"id", "name", "host"}``, or None (the
    user's own, or written here)."""
    return _load().get(packet_id)


def every() -> dict[str, dict[str, str]]:
    """Every recorded author, by packet id (read once, for an export or a listing)."""
    return _load()


def remember(packet_id: str, author: dict[str, str] | None) -> None:
    """Record (or with None, forget) who wrote the local copy of ``packet_id``."""
    remember_many({packet_id: author})


def remember_many(changes: dict[str, dict[str, str] | None]) -> None:
    """Record (None: forget) the authors of many local copies, in one write; none when
    nothing changes (an import of the user's own packets never makes the file)."""
    from ltm.cli.config import private_dir, write_private

    known = _load()
    changed = False
    for packet_id, author in changes.items():
        if author is None:
            changed |= known.pop(packet_id, None) is not None
        elif known.get(packet_id) != author:
            known[packet_id] = author
            changed = True
    if not changed:
        return
    private_dir(path().parent)
    write_private(path(), json.dumps(known, ensure_ascii=False, indent=1) + "\n")


def member_names(backend: Backend, team: str) -> dict[str, str]:
    """A team's members' display names by user id; {} where they cannot be listed (the
    local store, a server that refuses)."""
    from ltm.cli.errors import CliError

    try:
        rows = backend.members(team)
    except CliError:
        rows = []
    return {str(r.get("user_id")): str(r.get("display") or "") for r in rows}


class FromBundle:
    """Who wrote each line of a bundle imported into the local store, as ``pull
    --to-local`` records it: None for the user's own, else ``{"id", "name", "host"}``.

    A line's ``created_by`` is a user id on a server (its ``created_by_host``, else the
    header's ``source``); it is the user's own when it is the id this machine is signed
    in with there, else (not signed in there) the one who exported the bundle
    (``exported_by``). A bundle that names no exporter (older ltm) is told by its
    personal lines: a server's personal listing holds only its caller's packets. What a
    local store wrote (``local``) is the user's own.
    """

    def __init__(self, header: dict[str, Any]) -> None:
        from ltm.cli.client.credentials import load

        source = header.get("source")
        self.source = source if isinstance(source, str) and source != "local" else ""
        exporter = header.get("exported_by")
        self.exporter = exporter if isinstance(exporter, str) and exporter != "local" else ""
        self.hosts = load().hosts

    def _me(self, host: str) -> str:
        user = self.hosts.get(host, {}).get("user")
        if isinstance(user, dict) and user.get("id"):
            return str(user["id"])
        return self.exporter if host == self.source else ""

    def author(self, entry: Any) -> dict[str, str] | None:
        """Who wrote ``entry`` (a ``bundle.Entry``), when it is not the user."""
        by = entry.created_by
        if not by or by == "local":
            return None
        host = entry.created_by_host or self.source
        me = self._me(host)
        if not me and self.source and host == self.source and entry.scope == "personal":
            self.exporter = me = by  # a server's personal scope: the exporter's own
        if by == me:
            return None
        # A bundle is anyone's text: what is kept of it stays small (shown one-lined).
        return {"id": by[:FIELD_MAX], "name": entry.created_by_name[:FIELD_MAX], "host": host}
