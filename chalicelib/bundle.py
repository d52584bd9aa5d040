"""The bundle: every packet of a store (or of some scopes) as one JSONL file.

``ltm export`` writes a bundle and ``ltm import`` reads one, so a user's
memory moves between machines, stores and servers, and a backup is a plain
text file any tool (``jq``, ``grep``) can read. The format is defined here,
once, and versioned.

Format ``ltm-bundle`` version 1
===============================

UTF-8 text, one JSON object per line (``\\n`` ends every line, no blank
lines). The first line is the header::

    {"format": "ltm-bundle", "version": 1, "exported_at": "2026-05-01T12:00:00Z",
     "source": "local" | "<server URL>", "ltm": "<exporting ltm version>",
     "exported_by": "<user id>"}      # optional: who exported it ("local" on the local store)

Every further line is one packet::

    {"id": "01J...",                  # the packet's id (as in the packet)
     "scope": "personal" | "team",    # where it lived
     "team": "<team name>",           # only when scope is "team"
     "created_by": "<user id>",       # who stored it ("local" on the local store)
     "created_by_name": "<name>",     # optional: that user's display name, when known
     "created_by_host": "<server URL>",  # optional: where that user id is one, when it is
                                      # not the header's source (a copy in a local store)
     "created_at": "<RFC 3339>",      # the packet's own created_at
     "conforming": true,              # false: stored in lenient mode, flagged
     "packet": {...}}                 # the packet itself, keys in canonical order

The packet object, encoded again with ``ltm.packet.canonical_bytes``, gives
the stored canonical bytes exactly (canonical form is stable under a parse
and re-encode), which is what makes an export -> import round trip
byte-identical. Readers refuse a header whose ``format`` is not
``ltm-bundle`` or whose ``version`` is newer than ``VERSION``; fields they do
not know on a packet line are ignored, so later versions may add some. A line
that starts with its id and names another one further on is refused: JSON
keeps the last of a name given twice, and a reader may go by the first
(``id_hint``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

FORMAT = "ltm-bundle"
VERSION = 1
MAX_LINE_BYTES = 256 * 1024  # a packet is at most 32 KiB; its line, escaped, stays far below

Scope = Literal["personal", "team"]


class BundleError(ValueError):
    """A bundle (or one of its lines) that cannot be read; the message says why."""


class AnotherBundle(BundleError):
    """A header line after the first: two bundles joined (``cat a.ltm b.ltm``). What
    follows it is the other bundle's, whose header says where it came from."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One packet line of a bundle."""

    id: str
    scope: Scope
    team: str | None
    created_by: str
    created_at: str
    conforming: bool
    packet: dict[str, Any]
    # The packet holds nothing JSON cannot carry, no lone surrogate, so its checks need
    # not walk it for one (``packet.check``'s ``parsed``): JSON decoding made it of a line
    # of bytes with no "\\uD" escape and no 0xED byte. json.loads decodes bytes with
    # "surrogatepass", and 0xED leads the UTF-8 form of a surrogate (and of U+D000 to
    # U+D7FF, which only costs such a line the shortcut).
    plain: bool = False
    created_by_name: str = ""
    created_by_host: str = ""

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent back by every worker of an import: as a tuple, not the slots' state.
        return (
            Entry,
            (
                self.id,
                self.scope,
                self.team,
                self.created_by,
                self.created_at,
                self.conforming,
                self.packet,
                self.plain,
                self.created_by_name,
                self.created_by_host,
            ),
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def header_line(*, source: str, exported_at: str, exported_by: str = "") -> str:
    from . import __version__

    header = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": exported_at,
        "source": source,
        "ltm": __version__,
    }
    if exported_by:
        header["exported_by"] = exported_by
    return _dumps(header) + "\n"


def entry_line(
    *,
    body: bytes,
    team: str | None,
    created_by: str,
    created_at: str,
    conforming: bool = True,
    created_by_name: str = "",
    created_by_host: str = "",
) -> str:
    """The line for one stored packet (``body``: its canonical bytes)."""
    packet = json.loads(body)
    line: dict[str, Any] = {"id": packet.get("id"), "scope": "team" if team else "personal"}
    if team:
        line["team"] = team
    line["created_by"] = created_by
    if created_by_name:
        line["created_by_name"] = created_by_name
    if created_by_host:
        line["created_by_host"] = created_by_host
    line.update(created_at=created_at, conforming=conforming, packet=packet)
    return _dumps(line) + "\n"


def read_header(line: bytes | str) -> dict[str, Any]:
    """The header's fields; ``BundleError`` when this is not a bundle this ltm can read."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # nested too deep to decode: no header either
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(
            f"not an ltm bundle (its first line must be a {FORMAT} header; make one with"
            " ltm export)"
        )
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"the bundle header has no valid version: {version!r}")
    if version > VERSION:
        raise BundleError(
            f"the bundle is format version {version}, newer than this ltm reads ({VERSION});"
            " upgrade ltm"
        )
    return data


_NOT_PLAIN = (b"\\ud", b"\\uD", b"\xed")

# A line that starts with its id, as ``entry_line`` writes it (JSON's whitespace allowed):
# an id of letters and digits (a ULID) reads off the head without decoding the line.
_HEAD = re.compile(rb'\{[ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*"([0-9A-Za-z]{1,64})"[ \t\r\n]*,')
_HEAD_TEXT = re.compile(_HEAD.pattern.decode())


def id_hint(line: bytes | str) -> str | None:
    """The id a line starts with (``{"id":"01J...",``), read without decoding the line;
    None for a line that does not start so. Whatever the rest holds, ``read_entry``
    gives this line this id or refuses it: it refuses a line that names another id
    further on (JSON keeps the last of a name given twice), so ``ltm import`` may
    order and look lines up by it before any process decodes them."""
    found = _HEAD.match(line) if isinstance(line, bytes) else _HEAD_TEXT.match(line)
    if found is None:
        return None
    value = found.group(1)
    return value.decode() if isinstance(value, bytes) else value


def read_entry(line: bytes | str) -> Entry:
    """One packet line; ``BundleError`` saying what is wrong with it."""
    if len(line) > MAX_LINE_BYTES:
        raise BundleError(f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        raise BundleError("not valid JSON") from None
    if not isinstance(data, dict):
        raise BundleError("not a JSON object")
    packet = data.get("packet")
    if not isinstance(packet, dict):
        if data.get("format") == FORMAT:
            raise AnotherBundle("another bundle's header (bundles joined into one file?)")
        raise BundleError("no packet object")
    scope = data.get("scope", "personal")
    team = data.get("team")
    if scope not in ("personal", "team"):
        raise BundleError(f"scope must be personal or team, not {scope!r}")
    if scope == "team" and (not isinstance(team, str) or not team):
        raise BundleError("a team line names no team")
    packet_id = data.get("id", packet.get("id"))
    hint = id_hint(line)
    if hint is not None and packet_id != hint:
        raise BundleError("the line names its id twice, differently")
    if packet_id != packet.get("id"):
        raise BundleError("the line's id is not the packet's id")
    conforming = data.get("conforming", True)
    return Entry(
        id=packet_id if isinstance(packet_id, str) else "",
        scope=scope,
        team=team if scope == "team" else None,
        created_by=str(data.get("created_by", "")),
        created_at=str(data.get("created_at", packet.get("created_at", ""))),
        conforming=conforming is not False,
        packet=packet,
        plain=isinstance(line, bytes) and not any(mark in line for mark in _NOT_PLAIN),
        created_by_name=_text(data.get("created_by_name")),
        created_by_host=_text(data.get("created_by_host")),
    )


def _text(value: Any) -> str:
    """An optional text field of a line: what is not a string counts as absent."""
    return value if isinstance(value, str) else ""


def lines(stream: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the packet lines after the header, blank lines skipped."""
    for number, raw in enumerate(stream, start=2):
        line = raw.rstrip(b"\r\n")
        if line.strip():
            yield number, line
