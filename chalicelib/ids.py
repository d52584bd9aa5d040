"""Which packet ids this implementation takes: one rule for the CLI, the MCP shim and the server.

The schemas let an id be any 10 to 64 characters, but an id travels in URL
paths (``/v1/packets/{id}``), terminal lines and file names: one holding
``/``, CR/LF or a bidi override can be stored and listed, yet never fetched
or deleted again, and it shows as something it is not. So an id is valid iff
it matches ``^[A-Za-z0-9][A-Za-z0-9._:-]{9,63}$``: ULIDs (what we mint) and
the reference's ids pass. The rule sits beside the schema check, not in it,
so ``ltm.packet.check`` keeps the published schemas' exact verdicts.

Kept free of imports beyond the interpreter's own: the CLI's fast verbs check an id
before anything else.
"""

from __future__ import annotations

import os
import time
from _thread import allocate_lock  # threading's own lock, without importing threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "ID_CHARS",
    "MAX_ID",
    "MIN_ID",
    "SHORT_ID",
    "check_packet_id",
    "id_problem",
    "new_ulid",
    "short_ids",
]

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
    # Letters and digits alone (a ULID) need no look at each character: an import
    # checks every id three times (judged, stored, looked up).
    if not (packet_id.isascii() and packet_id.isalnum()):
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


# Crockford's base32, as ULIDs are written (https://github.com/ulid/spec).
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_minted = 0  # the last ULID this process minted, as a number
_minting = allocate_lock()


def new_ulid() -> str:
    """A new ULID: 48 bits of Unix milliseconds, then 80 random bits, as 26 characters.

    Minted here, not by python-ulid, whose import reads package metadata (20-30 ms, more
    than the rest of ``ltm save``). Like python-ulid, the ids one process mints sort in
    the order minted: within one millisecond (or should the clock step back) the next
    is the last plus one.
    """
    global _minted
    fresh = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    with _minting:
        _minted = value = max(fresh, _minted + 1)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


# The shortest an id is shown. A ULID's first 10 characters are its millisecond and the
# next 2 the first bits of its randomness, so 12 tell apart nearly all packets; like git's
# abbreviated object names (https://git-scm.com/docs/git-config#Documentation/git-config.txt-coreabbrev)
# the prefix then grows until it is unique.
SHORT_ID = 12


def short_ids(
    ids: Sequence[str],
    *,
    minimum: int = SHORT_ID,
    taken: Callable[[str], bool] | None = None,
) -> list[str]:
    """Each id cut to the shortest prefix (at least ``minimum``) no other id here starts with.

    ``taken(prefix)`` says whether another packet of the scope, beyond those listed,
    starts with ``prefix`` (a store's prefix lookup); the prefix grows past those too.
    Ids no longer than ``minimum`` are shown whole.
    """
    ordered = sorted(set(ids))
    lengths: dict[str, int] = {}
    for i, packet_id in enumerate(ordered):
        # Among sorted ids, the longest common prefix is with a neighbour.
        common = 0
        for j in (i - 1, i + 1):
            if 0 <= j < len(ordered):
                common = max(common, _common(packet_id, ordered[j]))
        size = max(minimum, common + 1)
        if taken is not None:
            while size < len(packet_id) and taken(packet_id[:size]):
                size += 1
        lengths[packet_id] = min(size, len(packet_id))
    return [packet_id[: lengths[packet_id]] for packet_id in ids]


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


AMBIGUOUS_SHOWN = 5  # candidates named when a prefix matches several packets


def ambiguous(prefix: str, candidates: list[str], where: str = "") -> str:
    """The refusal of a prefix that names several packets, naming them (as git names the
    candidates of an ambiguous short id) so the next try can be exact. ``candidates``: up
    to one more than is shown (an ellipsis then says there are more)."""
    shown = ", ".join(candidates[:AMBIGUOUS_SHOWN])
    more = ", …" if len(candidates) > AMBIGUOUS_SHOWN else ""
    place = f" {where}" if where else ""
    return f"{prefix!r} matches more than one packet{place}: {shown}{more} — give more of the id"
