"""The resume block: a packet as a prompt-ready markdown block.

Ordered for attention ("lost in the middle", Liu et al. 2023): what the next
agent must not get wrong (the goal, when it is done, what is settled, what
already failed) comes first; background (constraints, methods, tentative
decisions, open questions) sits in the middle where attention sags; the next
step closes the block, because the last thing read is the first thing done.

Works on a plain dict, so it renders any packet that parses, and stays cheap
to import (``ltm example --resume`` runs without pydantic). The same packet
always renders to the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PREAMBLE = (
    "# Resume context — ltm Core Memory Packet",
    "",
    "You are resuming prior work. Treat this block as authoritative:",
    "- Decisions marked **locked** are settled; do not re-litigate them.",
    "- Failed attempts were already tried; do not retry them without new information.",
    "- The final section, **Next step**, is your first action.",
)


COMPACT_PREAMBLE = (
    "# Saved memory packet",
    "",
    "Locked decisions were settled; failed attempts were already tried; the Next step "
    "is where the work stopped.",
)
# Compact mode (what a session-start hook injects): the long tail of a big packet is
# cut, so the block stays small in the agent's context; resume shows all of it.
COMPACT_TEXT = 300  # characters per text field
COMPACT_ITEMS = 6  # items per list


def _text(value: Any) -> str:
    """One-line-safe text: packets are data, so strip what could break the markdown layout."""
    return str(value).strip().replace("\r\n", "\n").replace("\n", "\n  ")


def _items(packet: Mapping[str, Any], key: str) -> list[Any]:
    value = packet.get(key)
    return value if isinstance(value, list) else []


def _dicts(packet: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    return [item for item in _items(packet, key) if isinstance(item, Mapping)]


def _section(title: str, lines: Iterable[str]) -> list[str]:
    body = list(lines)
    return ["", f"## {title}", *body] if body else []


def _bullets(values: Iterable[Any]) -> list[str]:
    return [f"- {_text(v)}" for v in values]


def _decision(d: Mapping[str, Any]) -> list[str]:
    lines = [f"- {_text(d.get('what', ''))}"]
    if d.get("why"):
        lines.append(f"  Why: {_text(d['why'])}")
    if d.get("consequences"):
        lines.append(f"  Consequences: {_text(d['consequences'])}")
    return lines


def _attempt(a: Mapping[str, Any], *, with_outcome: bool) -> list[str]:
    prefix = f"[{a.get('outcome', '?')}] " if with_outcome else ""
    lines = [f"- {prefix}{_text(a.get('tried', ''))}"]
    if a.get("learned"):
        lines.append(f"  Learned: {_text(a['learned'])}")
    if a.get("confidence"):
        lines.append(f"  Confidence the outcome is final: {_text(a['confidence'])}")
    return lines


def _method(m: Mapping[str, Any]) -> list[str]:
    return [
        f"- **{_text(m.get('name', ''))}**, when: {_text(m.get('when_applicable', ''))}",
        f"  How: {_text(m.get('how', ''))}",
    ]


def _flat(groups: Iterable[list[str]]) -> list[str]:
    return [line for group in groups for line in group]


def _trimmed(value: Any) -> Any:
    """``value`` with long strings cut and long lists shortened (compact mode)."""
    if isinstance(value, str):
        flat = value.strip()
        return flat if len(flat) <= COMPACT_TEXT else flat[: COMPACT_TEXT - 1] + "…"
    if isinstance(value, Mapping):
        return {k: _trimmed(v) for k, v in value.items()}
    if isinstance(value, list):
        kept = [_trimmed(v) for v in value[:COMPACT_ITEMS]]
        if len(value) > COMPACT_ITEMS and all(isinstance(v, str) for v in value):
            kept.append(f"… and {len(value) - COMPACT_ITEMS} more")
        return kept
    return value


def render(packet: Mapping[str, Any], *, compact: bool = False, before: int | None = None) -> str:
    """Render the resume block; ends with a newline.

    ``compact``: a shorter preamble, long texts and lists cut, and only the id
    and date of the packet's provenance (for injecting into an agent's context).
    ``before``: how many packets precede this one in its work thread (its
    ``parent_id`` chain), when the caller could find out; the block then says
    so and how to see them.
    """
    if compact:
        packet = _trimmed(packet)
    decisions = _dicts(packet, "decisions")
    locked = [d for d in decisions if d.get("locked") is True]
    tentative = [d for d in decisions if d.get("locked") is not True]
    attempts = _dicts(packet, "attempts")
    failed = [a for a in attempts if a.get("outcome") in ("failed", "partial")]
    worked = [a for a in attempts if a.get("outcome") not in ("failed", "partial")]

    lines = list(COMPACT_PREAMBLE if compact else PREAMBLE)
    # Start: highest attention.
    lines += _section("Goal", [_text(packet.get("goal", ""))])
    lines += _section("Done when", _bullets(_items(packet, "success_criteria")))
    lines += _section("Locked decisions (do not revisit)", _flat(map(_decision, locked)))
    lines += _section(
        "Failed attempts (do not retry without new information)",
        _flat(_attempt(a, with_outcome=True) for a in failed),
    )
    # Middle: background.
    lines += _section("Constraints", _bullets(_items(packet, "constraints")))
    lines += _section(
        "Methods that worked (apply when the trigger matches)",
        _flat(map(_method, _dicts(packet, "methods"))),
    )
    lines += _section(
        "Attempts that worked", _flat(_attempt(a, with_outcome=False) for a in worked)
    )
    lines += _section(
        "Tentative decisions (revisit only with cause)", _flat(map(_decision, tentative))
    )
    lines += _section("Open questions", _bullets(_items(packet, "open_questions")))
    lines += _section("Packet", _provenance(packet, before)[: 3 if compact else None])
    # End: highest attention again.
    lines += _section("Next step (your first action)", [_text(packet.get("next_step", ""))])
    return "\n".join(lines) + "\n"


def _provenance(packet: Mapping[str, Any], before: int | None = None) -> list[str]:
    lines = [f"- Id: {_text(packet.get('id', ''))} (ltm v{_text(packet.get('ltm_version', '?'))})"]
    if packet.get("parent_id"):
        see = f"`ltm log {_text(packet.get('id', ''))}`"
        if before:
            came = "1 packet came" if before == 1 else f"{before} packets came"
            thread = f" ({came} before this one in its thread; see them with {see})"
        else:
            thread = f" (see the thread with {see})"
        lines.append(f"- Continues: {_text(packet['parent_id'])}{thread}")
    if packet.get("created_at"):
        lines.append(f"- Created: {_text(packet['created_at'])}")
    project = packet.get("project")
    if isinstance(project, Mapping):
        name, ref = project.get("name"), project.get("ref")
        if name or ref:
            shown = " ".join(_text(x) for x in (name, f"({ref})" if ref else None) if x)
            lines.append(f"- Project: {shown}")
    provenance = packet.get("provenance")
    if isinstance(provenance, Mapping):
        who = [_text(provenance[k]) for k in ("author_human", "author_model") if provenance.get(k)]
        if who:
            lines.append(f"- Written by: {' via '.join(who)}")
        if provenance.get("confidence"):
            lines.append(f"- Author confidence: {_text(provenance['confidence'])}")
    tags = _items(packet, "tags")
    if tags:
        lines.append(f"- Tags: {', '.join(_text(t) for t in tags)}")
    return lines
