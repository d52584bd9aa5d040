"""Which packet ids this implementation takes: one rule for the CLI, the MCP shim and the server.

The schemas let an id be any 10 to 64 characters, but an id travels in URL
paths (``/v1/packets/{id}``), terminal lines and file names: one holding
``/``, CR/LF or a bidi override can be stored and listed, yet never fetched
or deleted again, and it shows as something it is not. So an id is valid iff
it matches ``^[A-Za-z0-9][A-Za-z0-9._:-]{9,63}$``: ULIDs (what we mint) and
the reference's ids pass. The rule sits beside the schema check, not in it,
so ``ltm.packet.check`` keeps the published schemas' exact verdicts.

Kept free of imports: the CLI's fast verbs check an id before anything else.
"""

from __future__ import annotations

__all__ = ["ID_CHARS", "MAX_ID", "MIN_ID", "check_packet_id", "id_problem"]

MIN_ID, MAX_ID = 10, 64
ID_CHARS = "letters, digits and . _ : -"
_PUNCTUATION = frozenset("._:-")


def _allowed(char: str) -> bool:
    return (
        ("0" <= char <= "9")
        or ("A" <= char <= "Z")
        or ("a" <= char <= "z")
        or (char in _PUNCTUATION)
    )


def _name(char: str) -> str:
    # repr() escapes what does not print (controls, bidi marks), so the message
    # never carries the character itself to a terminal or a log line.
    return f"{char!r} (U+{ord(char):04X})"


def id_problem(packet_id: object, *, prefix: bool = False) -> str | None:
    """What is wrong with ``packet_id`` (a sentence starting "packet id"), or None.

    With ``prefix``, ``packet_id`` is a reference to a packet: a full id or the
    start of one, so it may be shorter than an id (never longer).
    """
    if not isinstance(packet_id, str):
        return "packet id must be a string"
    for char in packet_id:
        if not _allowed(char):
            return f"packet id contains {_name(char)}; ids may use {ID_CHARS}"
    if not packet_id:
        return "packet id is empty"
    if packet_id[0] in _PUNCTUATION:
        return f"packet id starts with {_name(packet_id[0])}; ids start with a letter or a digit"
    if len(packet_id) > MAX_ID or (not prefix and len(packet_id) < MIN_ID):
        return f"packet id must be {MIN_ID} to {MAX_ID} characters long, not {len(packet_id)}"
    return None


def check_packet_id(packet_id: object, *, prefix: bool = False) -> None:
    """Raise ValueError saying what is wrong with ``packet_id``; see :func:`id_problem`."""
    problem = id_problem(packet_id, prefix=prefix)
    if problem is not None:
        raise ValueError(problem)
