"""The one rule for packet ids that travel: a safe character set, checked everywhere.

The schema only bounds an id's length (10 to 64). An id is also a URL path
segment (``/v1/packets/{id}``), a line in ``ltm ls`` and a word in an agent's
context, so ids with ``/``, CR/LF, spaces or bidi controls could be stored but
never fetched, deleted or shown safely. Every id we mint (a ULID), the
reference's ids and its published examples pass ``PACKET_ID_RE``; the server
refuses anything else on push, and the CLI and the MCP shim say the same
before sending.
"""

from __future__ import annotations

import re
import unicodedata

PACKET_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{9,63}$"
PACKET_ID_RE = re.compile(PACKET_ID_PATTERN)
_ALLOWED = "letters, digits and . _ : -"


def _describe(ch: str) -> str:
    """A character as a person can read it, never the raw control or bidi character itself."""
    code = f"U+{ord(ch):04X}"
    if ch.isprintable() and unicodedata.category(ch)[0] not in "CZ":
        return f"{ch!r} ({code})"
    name = unicodedata.name(ch, "") or ascii(ch)  # control characters have no name: '\r'
    return f"{code} ({name})"


def check_packet_id(id: object) -> None:
    """Raise ValueError, naming the first offending character, unless ``id`` is a safe id."""
    if not isinstance(id, str):
        raise ValueError("packet id must be a string")
    if PACKET_ID_RE.fullmatch(id):
        return
    for ch in id:
        if not (ch.isascii() and (ch.isalnum() or ch in "._:-")):
            raise ValueError(f"packet id contains {_describe(ch)}; ids may use {_ALLOWED}")
    if not 10 <= len(id) <= 64:
        raise ValueError(f"packet id must be 10 to 64 characters, not {len(id)}")
    raise ValueError(f"packet id must start with a letter or a digit, not {id[0]!r}")
