"""Everything a packet goes through before it leaves the user's hands.

Read → parse → (fill the defaults) → validate → id check → redaction scan, all
in one pass (``judge``), so one report names every problem. The CLI verbs and
the MCP shim both call these functions, so a packet is judged the same way
whichever door it comes through, and a refused packet is never stored or sent
anywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltm.cli.errors import CliError

if TYPE_CHECKING:
    from ltm.packet import Checked
    from ltm.redact import Hit, Rule


class Refused(CliError):
    """The packet may not be stored or sent: schema errors, a bad id, redaction hits.

    One report lists every problem at once (schema errors and redaction hits
    together), so a user fixes a packet in one round, not two.
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
        errors = self.errors if self.checked is None or not lenient else []
        return errors + ([self.id_error] if self.id_error else [])


def read_source(source: str) -> bytes:
    """The bytes of FILE, or of standard input for ``-``.

    On a terminal, standard input waits for typing: say so, or ``ltm save`` with
    no argument would look hung.
    """
    if source == "-":
        if sys.stdin.isatty():
            end = "Ctrl-Z, Enter" if sys.platform == "win32" else "Ctrl-D"
            print(
                f"ltm: reading the packet (JSON) from standard input; end with {end}"
                " — or give a file: ltm save FILE (ltm example shows one)",
                file=sys.stderr,
            )
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise source_error(source, exc, "a packet file") from None


def source_error(source: str, exc: OSError, what: str) -> CliError:
    """The one line for a FILE argument that cannot be read (``what`` it should have been)."""
    if isinstance(exc, FileNotFoundError):
        return CliError(f"{source}: no such file")
    if isinstance(exc, IsADirectoryError):
        return CliError(f"{source}: is a directory, not {what}")
    return CliError(f"{source}: {exc.strerror or exc}")


def judge(
    raw: bytes | Mapping[str, Any],
    *,
    fill: bool = False,
    scan: bool = True,
    rules: list[Rule] | None = None,
) -> Verdict:
    """Parse, (fill the defaults,) validate, check the id and scan: every problem at once.

    ``fill`` supplies a missing id, created_at and ltm_version, and the project
    (name and ref) of the working directory when the packet has none; the project
    is filled before the redaction scan, which judges it like every field.

    ``rules`` are the user's redaction rules, read once by a caller that judges many.
    """
    from ltm import packet
    from ltm.ids import id_problem

    data: Any = None
    try:
        data = packet.parse(raw) if isinstance(raw, bytes) else dict(raw)
        if fill:
            from ltm.cli.project import fill_project

            data = fill_project(packet.fill_defaults(data))
        checked = packet.check(data, lenient=True)
    except packet.PacketError as exc:
        return Verdict(None, list(exc.errors), None, _scan_what_parsed(data) if scan else [])
    packet_id = checked.data.get("id")
    # The schema judges the id's length; the characters are this implementation's rule.
    problem = id_problem(packet_id, prefix=True) if isinstance(packet_id, str) else None
    id_error = f"id: {problem.removeprefix('packet id ')}" if problem else None
    hits = scan_packet(checked.data, rules) if scan else []
    return Verdict(checked, list(checked.errors), id_error, hits)


def validation_report(raw: bytes | Mapping[str, Any], *, complete: bool) -> dict[str, Any]:
    """What ``ltm validate`` and the MCP validate tool say about a packet.

    Judges what ``save`` would store (the defaults filled in), or with ``complete``
    what ``push`` needs (nothing filled in). ``valid`` covers the schema and the id;
    ``redaction`` lists the pre-flight's hits; ``bytes`` is the stored size.
    """
    from ltm.packet import canonical_bytes

    verdict = judge(raw, fill=not complete)
    errors = verdict.refusals(lenient=False)
    report: dict[str, Any] = {
        "valid": not errors,
        "errors": errors,
        "redaction": [hit.as_dict() for hit in verdict.hits],
    }
    if verdict.checked is not None:
        report["bytes"] = len(canonical_bytes(verdict.checked.data))
    return report


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """A validation report's problems as lines: the schema's, then the redaction hits."""
    lines = []
    if report["errors"]:
        lines.append(f"not a valid packet ({plural(len(report['errors']), 'problem')}):")
        lines += [f"  {error}" for error in report["errors"]]
    if report["redaction"]:
        count = plural(len(report["redaction"]), "hit")
        lines.append(f"the redaction pre-flight would block it ({count}):")
        from ltm.redact import Hit

        lines += [f"  {line}" for line in hit_lines([Hit(**h) for h in report["redaction"]])]
    return lines


def _scan_what_parsed(data: Any) -> list[Hit]:
    """The hits of a packet too broken to check, so the one report still names them."""
    if not isinstance(data, dict):
        return []
    try:
        return scan_packet(data)
    except Exception:  # nested too deeply, odd types: the schema errors say enough
        return []


def accept(
    raw: bytes | Mapping[str, Any],
    *,
    fill: bool = False,
    lenient: bool = False,
    allow_unredacted: bool = False,
    label: str = "packet",
) -> Checked:
    """The packet to store or send, or ``Refused`` listing every problem found."""
    verdict = judge(raw, fill=fill, scan=not allow_unredacted)
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


def user_rules() -> list[Rule]:
    """The user's own redaction patterns (``ltm sensitive add``)."""
    from ltm import redact
    from ltm.cli.config import load_settings

    rules = []
    for entry in load_settings().get("sensitive", []):
        try:
            rules.append(redact.compile_user_rule(entry["kind"], entry["regex"]))
        except (KeyError, TypeError, ValueError) as exc:
            kind = entry.get("kind") if isinstance(entry, dict) else None
            if not (isinstance(exc, ValueError) and isinstance(kind, str) and kind.isprintable()):
                raise CliError(f"bad sensitive pattern in settings.toml: {entry!r}") from None
            # Saved by an earlier build (which took Python `re` syntax) or edited
            # by hand: every scan needs it, so name it and say how to replace it.
            import shlex

            raise CliError(
                f"your sensitive pattern {kind!r} cannot be used: {exc}; fix it with "
                f"`ltm sensitive rm {shlex.quote(kind)}`, then `ltm sensitive add` it again"
            ) from None
    return rules


def scan_packet(data: Mapping[str, Any], rules: list[Rule] | None = None) -> list[Hit]:
    """The pre-flight's hits; pass ``rules`` (from ``user_rules``) when scanning many packets."""
    from ltm import redact

    return redact.scan_packet(data, user_rules() if rules is None else rules)


def plural(count: int, word: str) -> str:
    return f"{count} {word if count == 1 else word + 's'}"
