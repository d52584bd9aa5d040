"""Small helpers for what the CLI prints."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from typing import Any

from ltm.present import one_line, safe

__all__ = [
    "bold",
    "color_allowed",
    "info",
    "keep_the_verdict",
    "one_line",
    "print_json",
    "relative_time",
    "safe",
    "short_id",
    "terminal_bytes",
    "terminal_text",
]


def info(message: str) -> None:
    """Commentary goes to stderr, so stdout stays clean for pipes. It often quotes a
    server's words (names, dates, ids), so no terminal control gets through."""
    print(safe(message, multiline=True), file=sys.stderr)


def keep_the_verdict() -> None:
    """For a verb whose exit status is its verdict (validate, doctor, conformance), or whose
    output only reports its job (import): a reader of its output that goes away (``ltm
    validate *.json | head -1``) no longer ends it with exit 0, which a script under ``set
    -o pipefail`` took for a pass (and an import left half done). What it prints after
    that goes nowhere; it runs to the end and exits with its verdict.
    (Other verbs stop there, with exit 0: ``ltm.cli.start.entry``.)"""
    if not isinstance(sys.stdout, _ReaderOptional):
        sys.stdout = _ReaderOptional(sys.stdout)


class _ReaderOptional:
    """A stream (text, or its binary ``buffer``) that writes to /dev/null once its
    reader has gone, instead of raising ``BrokenPipeError``."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, data: Any) -> int:
        try:
            return int(self._stream.write(data))
        except BrokenPipeError:
            self._gone()
            return len(data)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    @property
    def buffer(self) -> _ReaderOptional:
        return _ReaderOptional(self._stream.buffer)

    def _gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())  # what is still buffered goes there too
        except (OSError, ValueError):
            pass
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def color_allowed(stream: object = None) -> bool:
    """Whether to style what goes to ``stream`` (stdout by default): a terminal that is
    not ``TERM=dumb``, and no ``NO_COLOR`` set to anything (https://no-color.org)."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return False
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def bold(text: str, stream: object = None) -> str:
    """``text`` in bold where :func:`color_allowed`, else as it is."""
    return f"\x1b[1m{text}\x1b[0m" if color_allowed(stream) else text


def terminal_bytes(body: bytes) -> bytes:
    """Bytes for stdout: escaped with :func:`safe` on a terminal, exactly as given in a pipe.

    Used for JSON (pull, show --json): the escapes are JSON's own, so a terminal
    sees equivalent JSON, and a pipe or file gets the stored bytes untouched.
    """
    if not sys.stdout.isatty():
        return body
    text = body.decode("utf-8", "surrogateescape")
    return safe(text, multiline=True).encode("utf-8", "surrogateescape")


def terminal_text(text: str) -> bytes:
    """``text`` as :func:`terminal_bytes` gives it. A lone surrogate, which a server's JSON
    may carry (``"\\ud800"``) and UTF-8 cannot write, becomes its ``\\udXXX`` escape:
    inside a JSON string the same character, in a pipe too."""
    return terminal_bytes(text.encode("utf-8", "backslashreplace"))


def print_json(data: Any, *, indent: int | None = 2) -> None:
    """``data`` as JSON on stdout: packet text, and names a server hands back, are
    untrusted, so on a terminal their controls are shown escaped (``terminal_bytes``); a
    pipe gets them as they are."""
    import json

    text = json.dumps(data, ensure_ascii=False, indent=indent) + "\n"
    sys.stdout.flush()
    sys.stdout.buffer.write(terminal_text(text))
    sys.stdout.flush()


def short_id(packet_id: str) -> str:
    return packet_id if len(packet_id) <= 12 else packet_id[:12]


def relative_time(stamp: str, now: datetime | None = None) -> str:
    """'3 min ago', '5 h ago', '2 d ago', else the date; the text as sent when unreadable,
    through :func:`safe` (a server's text: every listing prints it)."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return safe(stamp)
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
