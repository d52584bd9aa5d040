"""Who wrote the packets copied into the local store from a server (``pull --to-local``).

The local store has one user, so everything in it reads as the user's own; a
teammate's packet copied down must not (the session-start hook would frame another
person's notes as the user's). The server named the author when the packet came
down (``X-Ltm-Created-By``); that fact is kept here, in ``authors.json`` beside the
local store (0600), keyed by packet id, and read where the packet is framed.

Import-light: the session-start hook reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = "authors.json"


def _path() -> Path:
    from ltm.cli.config import data_dir

    return data_dir() / FILE


def _load() -> dict[str, Any]:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def of(packet_id: str) -> dict[str, str] | None:
    """The author recorded for a local copy: ``{"id", "name", "host"}``, or None (the
    user's own, or written here)."""
    found = _load().get(packet_id)
    return found if isinstance(found, dict) and found.get("id") else None


def remember(packet_id: str, author: dict[str, str] | None) -> None:
    """Record (or with None, forget) who wrote the local copy of ``packet_id``."""
    from ltm.cli.config import private_dir, write_private

    known = _load()
    if author is None:
        if packet_id not in known:
            return
        known.pop(packet_id)
    else:
        known[packet_id] = author
    private_dir(_path().parent)
    write_private(_path(), json.dumps(known, ensure_ascii=False, indent=1) + "\n")
