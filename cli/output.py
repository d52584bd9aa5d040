"""Small helpers for what the CLI prints."""

from __future__ import annotations

import sys
from datetime import UTC, datetime


def info(message: str) -> None:
    """Commentary goes to stderr, so stdout stays clean for pipes."""
    print(message, file=sys.stderr)


def short_id(packet_id: str) -> str:
    return packet_id if len(packet_id) <= 12 else packet_id[:12]


def one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def terminal(text: str) -> str:
    """Packet text made safe for a terminal: control and format characters shown escaped.

    Packets are untrusted: an escape sequence (``\x1b[...``), a carriage return
    or a bidi override in a goal must print as text, never act on the terminal.
    """
    if text.isprintable():
        return text
    return "".join(
        c
        if c.isprintable() or c == " "
        else (f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")
        for c in text
    )


def relative_time(stamp: str, now: datetime | None = None) -> str:
    """'3 min ago', '5 h ago', '2 d ago', else the date; the raw text when unreadable."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 7 * 86400:
        return f"{int(seconds // 86400)} d ago"
    return when.date().isoformat()
