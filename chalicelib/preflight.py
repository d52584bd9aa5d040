"""Everything a packet goes through before it is stored: one judgement, every door.

Parse → (fill the defaults) → validate → id check → redaction scan, all in one
pass (``judge``), so one report names every problem. The CLI (before a packet
leaves the user's machine), the stdio MCP shim and the remote ``/mcp``
endpoint (where the writer's machine runs no pre-flight, so the server runs
the whole of it, paths and local URLs included) all call these functions: a
packet is judged the same way whichever door it comes through, and a refused
packet is never stored or sent anywhere. What differs per door is passed in:
how to fill in the project (the working directory's, on the CLI) and the
user's own redaction rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import Failure

if TYPE_CHECKING:
    from .packet import Checked
    from .redact import Hit, Rule

FillProject = Callable[[dict[str, Any]], dict[str, Any]]


class Refused(Failure):
    """The packet may not be stored or sent: schema errors, a bad id, redaction hits.

    One report lists every problem at once (schema errors and redaction hits
    together), so a writer fixes a packet in one round, not two.
    """

    def __init__(self, label: str, errors: list[str], hits: list[Hit]) -> None:
        parts = []
        if errors:
            parts.append(f"{label} is not a valid packet:\n{_indent(errors)}")
        if hits:
            count = plural(len(hits), "hit")
            lines = _indent(hit_lines(hits))
            parts.append(f"the redaction pre-flight blocked the packet ({count}):\n{lines}")
            parts.append(
                "edit those fields, or pass --allow-unredacted to send it anyway"
                if not errors
                else "fix those fields (--allow-unredacted only lets the redaction hits pass)"
            )
        super().__init__("\n".join(parts))
        self.label = label
        self.errors = errors
        self.hits = hits


@dataclass(frozen=True, slots=True)
class Verdict:
    """Everything found wrong with one packet, in one pass."""

    checked: Checked | None  # None: not a packet at all (not JSON, not an object, ...)
    errors: list[str]  # schema problems: --lenient may accept these
    id_error: str | None  # an id outside the safe characters: never accepted
    hits: list[Hit]  # the redaction pre-flight's

    def refusals(self, *, lenient: bool) -> list[str]:
        """The errors that stop the packet (with ``lenient``, only what it cannot excuse)."""
        return refusals(
            self.errors, self.id_error, packet=self.checked is not None, lenient=lenient
        )


def refusals(errors: list[str], id_error: str | None, *, packet: bool, lenient: bool) -> list[str]:
    """``Verdict.refusals`` of a verdict's parts (``packet``: it is a packet at all)."""
    stopping = errors if not packet or not lenient else []
    return stopping + ([id_error] if id_error else [])


def judge(
    raw: bytes | Mapping[str, Any],
    *,
    fill: bool = False,
    scan: bool = True,
    rules: list[Rule] | None = None,
    fill_project: FillProject | None = None,
    plain: bool = False,
) -> Verdict:
    """Parse, (fill the defaults,) validate, check the id and scan: every problem at once.

    ``fill`` supplies a missing id, created_at and ltm_version, and the project
    (name and ref) of the working directory when the packet has none; the project
    is filled before the redaction scan, which judges it like every field.

    ``rules`` are the user's redaction rules, read once by a caller that judges many;
    ``fill_project`` supplies the project where the door knows one (the CLI's
    working directory).

    ``plain``: the mapping ``raw`` holds nothing JSON cannot carry, no lone surrogate
    (``bundle.Entry.plain``), so it is judged as it is, as the bytes ``packet.parse``
    decodes are; filled values are not.
    """
    from . import packet
    from .ids import id_problem

    data: Any = None
    try:
        data = packet.parse(raw) if isinstance(raw, bytes) else dict(raw)
        parsed = isinstance(raw, bytes) or plain
        if fill:
            data = packet.fill_defaults(data)
            if fill_project is not None:
                data = fill_project(data)
            parsed = False  # the project comes from the working directory: any text
        checked = packet.check(data, lenient=True, parsed=parsed)
    except packet.PacketError as exc:
        return Verdict(None, list(exc.errors), None, _scan_what_parsed(data, rules) if scan else [])
    packet_id = checked.data.get("id")
    # The schema judges the id's length; the characters are this implementation's rule.
    problem = id_problem(packet_id, prefix=True) if isinstance(packet_id, str) else None
    id_error = f"id: {problem.removeprefix('packet id ')}" if problem else None
    hits = scan_packet(checked.data, rules) if scan else []
    return Verdict(checked, list(checked.errors), id_error, hits)


def validation_report(
    raw: bytes | Mapping[str, Any],
    *,
    complete: bool,
    rules: list[Rule] | None = None,
    fill_project: FillProject | None = None,
) -> dict[str, Any]:
    """What ``ltm validate`` and the MCP validate tool say about a packet.

    Judges what ``save`` would store (the defaults filled in), or with ``complete``
    what ``push`` needs (nothing filled in). ``valid`` covers the schema and the id;
    ``redaction`` lists the pre-flight's hits; ``bytes`` is the stored size.
    """
    from .packet import canonical_bytes

    verdict = judge(raw, fill=not complete, rules=rules, fill_project=fill_project)
    errors = verdict.refusals(lenient=False)
    looping = own_parent(verdict.checked.data) if verdict.checked is not None else None
    if looping is not None and not complete:  # save refuses it; push warns and stores it
        errors.append(looping)
    report: dict[str, Any] = {
        "valid": not errors,
        "errors": errors,
        "redaction": [hit.as_dict() for hit in verdict.hits],
    }
    if verdict.checked is not None:
        report["bytes"] = len(canonical_bytes(verdict.checked.data))
    return report


def own_parent(data: Mapping[str, Any]) -> str | None:
    """The problem of a packet whose ``parent_id`` is its own id, else None: stored, its
    thread would loop on itself (the schema's threads are a DAG). Needs no store, so
    ``ltm validate`` says it as ``save`` does (``backend.parent_problem``)."""
    parent = data.get("parent_id")
    if isinstance(parent, str) and parent and parent == data.get("id"):
        return f"parent_id {parent} is the packet's own id (a packet cannot continue itself)"
    return None


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """A validation report's problems as lines: the schema's, then the redaction hits."""
    lines = []
    if report["errors"]:
        lines.append(f"not a valid packet ({plural(len(report['errors']), 'problem')}):")
        lines += [f"  {error}" for error in report["errors"]]
    if report["redaction"]:
        count = plural(len(report["redaction"]), "hit")
        lines.append(f"the redaction pre-flight would block it ({count}):")
        from .redact import Hit

        lines += [f"  {line}" for line in hit_lines([Hit(**h) for h in report["redaction"]])]
    return lines


def _scan_what_parsed(data: Any, rules: list[Rule] | None) -> list[Hit]:
    """The hits of a packet too broken to check, so the one report still names them."""
    if not isinstance(data, dict):
        return []
    try:
        return scan_packet(data, rules)
    except Exception:  # nested too deeply, odd types: the schema errors say enough
        return []


def accept(
    raw: bytes | Mapping[str, Any],
    *,
    fill: bool = False,
    lenient: bool = False,
    allow_unredacted: bool = False,
    label: str = "packet",
    rules: list[Rule] | None = None,
    fill_project: FillProject | None = None,
) -> Checked:
    """The packet to store or send, or ``Refused`` listing every problem found."""
    verdict = judge(
        raw, fill=fill, scan=not allow_unredacted, rules=rules, fill_project=fill_project
    )
    errors = verdict.refusals(lenient=lenient)
    if errors or verdict.hits or verdict.checked is None:
        raise Refused(label, errors, verdict.hits)
    return verdict.checked


# A report names this many hits at most, then counts the rest: a packet with thousands
# of paths (a pasted build log) gets a report a person, or an agent's context, can take.
SHOWN_HITS = 30


def hit_lines(hits: list[Hit]) -> list[str]:
    """The report's lines for redaction hits: the first ``SHOWN_HITS``, then a count."""
    lines = [str(hit) for hit in hits[:SHOWN_HITS]]
    rest = hits[SHOWN_HITS:]
    if rest:
        fields = sorted({hit.field for hit in rest})
        where = ", ".join(fields[:5]) + (", …" if len(fields) > 5 else "")
        lines.append(f"… and {plural(len(rest), 'more hit')} ({where})")
    return lines


def _indent(lines: list[str]) -> str:
    return "\n".join(f"  {line}" for line in lines)


def plural(count: int, word: str) -> str:
    return f"{count} {word if count == 1 else word + 's'}"


def scan_packet(data: Mapping[str, Any], rules: list[Rule] | None) -> list[Hit]:
    """The pre-flight's hits: the built-in rules and ``rules`` (the user's own)."""
    from . import redact

    return redact.scan_packet(data, rules or [])
