"""Small helpers for what the CLI prints."""

from __future__ import annotations

import sys
from datetime import UTC, datetime


def info(message: str) -> None:
    """Commentary goes to stderr, so stdout stays clean for pipes."""
    print(message, file=sys.stderr)


# Packet text is untrusted (a team member wrote it): printed raw, ESC ]0; sets the
# terminal's title, ESC [2J clears it, a C1 CSI (U+009B) does the same on terminals
# that honour 8-bit controls, and bidi overrides make text read as something it is
# not. Each such character is shown as its \uXXXX escape: visible, and inside a
# JSON string the very same character, so JSON output stays equivalent JSON.
# Escaped: C0 controls (newline and tab kept in multi-line text), DEL, C1, the bidi
# embeddings/overrides/isolates and marks (U+202A-E, U+2066-9, U+200E/F, U+061C).
_UNSAFE = [
    *range(0x00, 0x20),
    *range(0x7F, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0x200E,
    0x200F,
    0x061C,
]
_ONE_LINE = {code: f"\\u{code:04x}" for code in _UNSAFE}
_MULTI_LINE = {code: escape for code, escape in _ONE_LINE.items() if code not in (0x09, 0x0A)}


def safe(text: str, *, multiline: bool = False) -> str:
    """``text`` fit for a terminal: control and bidi characters shown escaped (see above).

    ``multiline`` keeps newlines and tabs (a summary, an error report); one-line
    fields (a listing row, a picker label) escape them too.
    """
    return text.translate(_MULTI_LINE if multiline else _ONE_LINE)


def terminal_bytes(body: bytes) -> bytes:
    """Bytes for stdout: escaped with :func:`safe` on a terminal, exactly as given in a pipe.

    Used for JSON (pull, show --json): the escapes are JSON's own, so a terminal
    sees equivalent JSON, and a pipe or file gets the stored bytes untouched.
    """
    if not sys.stdout.isatty():
        return body
    text = body.decode("utf-8", "surrogateescape")
    return safe(text, multiline=True).encode("utf-8", "surrogateescape")


def short_id(packet_id: str) -> str:
    return packet_id if len(packet_id) <= 12 else packet_id[:12]


def one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


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
