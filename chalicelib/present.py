"""Packets as people and agents read them: one-line rows, summaries, marked snippets.

Pure functions over plain data, shared by the CLI (the terminal), the stdio
MCP shim and the remote ``/mcp`` (an agent's context), so a packet reads the
same through every door. Packet text is untrusted: ``safe`` shows control
and bidi characters escaped wherever it is printed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .errors import Failure
from .resume import json_escape

if TYPE_CHECKING:
    from typing import Protocol

    class Backend(Protocol):
        label: str

        def thread(
            self, ref: str, *, team: str | None = None
        ) -> tuple[list[dict[str, Any]], bool]: ...


# Packet text is untrusted (a team member wrote it): printed raw, ESC ]0; sets the
# terminal's title, ESC [2J clears it, a C1 CSI (U+009B) does the same on terminals
# that honour 8-bit controls, and bidi overrides make text read as something it is
# not. Each such character is shown as its \uXXXX escape: visible, and inside a
# JSON string the very same character, so JSON output stays equivalent JSON.
# Escaped: every control and format character (Unicode's Cc and Cf, newline and tab
# kept in multi-line text), as the web view marks them (``ltm.web.render``):
# - C0, DEL and C1 controls;
# - the bidi embeddings/overrides/isolates and marks (U+202A-E, U+2066-9, U+200E/F,
#   U+061C);
# - what a terminal draws as nothing: tag characters (each shadows an ASCII letter, so
#   a goal can carry a sentence an agent reads and a person never sees), zero-width
#   space, word joiner, BOM, soft hyphen..., which make a name or a row read as another.
#   The joiners (U+200C/D) stay: emoji sequences and Persian or Indic words need them;
# - lone surrogates (Cs): a server's JSON may hold one ("\ud800"), which no UTF-8 stream
#   can write, and a reply's invalid bytes read as U+DC80-DCFF (``surrogateescape``),
#   where a raw 0x9b would reach the terminal as an 8-bit CSI.
_HIDDEN = ("Cc", "Cf", "Cs")
_JOINERS = "\u200c\u200d"


def safe(text: str, *, multiline: bool = False) -> str:
    """``text`` fit for a terminal: control, bidi and invisible characters shown escaped
    (see above).

    ``multiline`` keeps newlines and tabs (a summary, an error report); one-line
    fields (a listing row, a picker label) escape them too.
    """
    plain = text.replace("\n", "").replace("\t", "") if multiline else text
    if plain.isprintable():  # nothing to escape (checks in C): the common case
        return text
    import unicodedata  # only for text that may hold such a character

    kept = _JOINERS + ("\n\t" if multiline else "")
    return "".join(
        json_escape(ch) if ch not in kept and unicodedata.category(ch) in _HIDDEN else ch
        for ch in text
    )


def one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def where_label(backend: Backend, team: str | None, project: str | None = None) -> str:
    """Where a listing looked, for messages: the store or server, the team, the project."""
    where = f"team {team} on {backend.label}" if team else backend.label
    return f"project {project} in {where}" if project else where


MEANING_ONLY = "by meaning only, not by its words"


def meaning_only(hit: dict[str, Any]) -> bool:
    """Whether a search hit was found by meaning alone (``matched``: ``meaning``): a
    neighbour that may not be about the query, which a reader must not take for a
    match of its words. A server that does not say (an older one, the reference
    server) searched by words."""
    return hit.get("matched") == "meaning"


def marked(hit: dict[str, Any], *, color: bool) -> str:
    """The snippet with its matches bold (a terminal) or in **stars** (a pipe), made safe."""
    text = str(hit.get("snippet", ""))
    start, end = ("\x1b[1m", "\x1b[0m") if color else ("**", "**")
    out, pos = [], 0
    for span in hit.get("highlights") or []:
        try:
            a, b = int(span[0]), int(span[1])
        except (TypeError, ValueError, IndexError):
            continue
        if not pos <= a < b <= len(text):
            continue  # out of order or out of range: show the text unmarked there
        out += [safe(text[pos:a]), start, safe(text[a:b]), end]
        pos = b
    out.append(safe(text[pos:]))
    return "".join(out)


def earlier_count(backend: Backend, packet: dict[str, Any], team: str | None) -> int | None:
    """How many packets come before this one in its thread; None when it has no parent
    or the server cannot say (a reference server has no thread route)."""
    if not packet.get("parent_id") or not isinstance(packet.get("id"), str):
        return None
    try:
        rows, _ = backend.thread(packet["id"], team=team)
    except Failure:
        return None
    return len(rows) - 1


def decode_packet(body: bytes, ref: str) -> dict[str, Any]:
    """A stored packet as a dict; a clear error when it is not a JSON object."""
    try:
        packet = json.loads(body)
    except ValueError:
        raise Failure(f"packet {ref} is not readable JSON") from None
    if not isinstance(packet, dict):
        raise Failure(f"packet {ref} is not a JSON object")
    return packet


def _in(value: Any, indent: int) -> str:
    """``value`` as text whose further lines sit ``indent`` spaces in: a value of several
    lines must not start one where the summary's own headings and fields start (a
    goal could add a "Saved by" or a "Next step" of its own)."""
    return str(value).replace("\r\n", "\n").replace("\n", "\n" + " " * indent)


def summary(
    p: dict[str, Any],
    *,
    children: list[str] | None = None,
    published: tuple[str, str] | None = None,
    author: str | None = None,
) -> str:
    def head(title: str, value: Any) -> str:
        return f"{title:<8} {_in(value, 9)}"

    lines = [head("ID", p.get("id", "")), head("Created", p.get("created_at", ""))]
    if author:  # who stored it, as the server says (a team's packet)
        lines.append(head("Saved by", author))
    lines.append(head("Version", p.get("ltm_version", "")))
    if published is not None:  # (when, public URL): the same fact the reference's show prints
        lines.append(head("Published", f"{published[0]}  {published[1]}"))
    if p.get("parent_id"):
        lines.append(head("Parent", f"{p['parent_id']}  (the thread: ltm log {p.get('id', '')})"))
    if children:
        lines.append(head("Children", ", ".join(children)))
    project = p.get("project") or {}
    if project:
        lines.append(
            head("Project", f"{project.get('name', '')} {project.get('ref', '')}".rstrip())
        )
    if p.get("tags"):
        lines.append(head("Tags", ", ".join(p["tags"])))
    lines += ["", "Goal", f"  {_in(p.get('goal', ''), 4)}"]
    for title, key in (("Done when", "success_criteria"), ("Constraints", "constraints")):
        if p.get(key):
            lines += ["", title, *(f"  - {_in(item, 4)}" for item in p[key])]
    if p.get("decisions"):
        lines += ["", "Decisions"]
        for d in p["decisions"]:
            lock = " [locked]" if d.get("locked") else ""
            lines += [
                f"  - {_in(d.get('what', ''), 4)}{lock}",
                f"    why: {_in(d.get('why', ''), 6)}",
            ]
    if p.get("attempts"):
        lines += ["", "Attempts"]
        for a in p["attempts"]:
            lines.append(f"  - [{_in(a.get('outcome', ''), 4)}] {_in(a.get('tried', ''), 4)}")
            if a.get("learned"):
                lines.append(f"    learned: {_in(a['learned'], 6)}")
    if p.get("methods"):
        lines += [
            "",
            "Methods",
            *(f"  - {_in(m.get('name', ''), 4)}: {_in(m.get('how', ''), 4)}" for m in p["methods"]),
        ]
    if p.get("open_questions"):
        lines += ["", "Open questions", *(f"  - {_in(q, 4)}" for q in p["open_questions"])]
    lines += ["", "Next step", f"  {_in(p.get('next_step', ''), 4)}"]
    return "\n".join(lines) + "\n"
