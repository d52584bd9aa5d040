"""Who wrote the copies of other people's packets a local store holds.

The local store has one user, so whatever it holds reads as theirs; a packet
copied into it from a server (``ltm pull --to-local``) or a bundle (``ltm import
--local``) that someone else wrote must not. The CLI records who wrote each
such copy in ``authors.json`` beside the store (``ltm.cli.client.authors``
writes it), read wherever the packet is shown: the CLI's verbs, the
session-start hook, the stdio MCP shim and ``ltm ui``'s web view::

    {"<packet id>": {"id": "<user id>", "name": "<display name>", "host": "<server URL>"}}

Import-light: the session-start hook reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

FIELDS = ("id", "name", "host")


def read(path: Path) -> dict[str, dict[str, str]]:
    """Every recorded author by packet id; {} where there is no readable file. An entry
    that names no user id is no record."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(packet_id): {key: str(found.get(key) or "") for key in FIELDS}
        for packet_id, found in data.items()
        if isinstance(found, dict) and isinstance(found.get("id"), str) and found["id"]
    }
