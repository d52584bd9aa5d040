"""The pre-flight on the user's machine: ``ltm.preflight`` with what only the CLI knows.

The judgement itself (parse, fill, validate, id check, redaction scan, one
report) is ``ltm.preflight``'s, shared with the server's ``/mcp``. Here: reading
a packet from FILE or stdin, the user's own redaction patterns (``ltm
sensitive``) and the project of the working directory, which ``save`` fills in.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ltm.cli.errors import CliError
from ltm.preflight import SHOWN_HITS, Refused, Verdict, hit_lines, plural, report_lines

if TYPE_CHECKING:
    from ltm.packet import Checked
    from ltm.redact import Hit, Rule

__all__ = [
    "SHOWN_HITS",
    "Refused",
    "Verdict",
    "accept",
    "hit_lines",
    "judge",
    "plural",
    "read_source",
    "report_lines",
    "scan_packet",
    "source_error",
    "user_rules",
    "validation_report",
]


def read_source(source: str) -> bytes:
    """The bytes of FILE, or of standard input for ``-``, as UTF-8.

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
        return _utf8(_read_bounded(sys.stdin.buffer, "standard input"), "standard input")
    try:
        with Path(source).open("rb") as file:
            return _utf8(_read_bounded(file, source), source)
    except OSError as exc:
        raise source_error(source, exc, "a packet file") from None


def _read_bounded(stream: BinaryIO, source: str) -> bytes:
    """At most as many bytes as a packet's text can take: the parse refuses text over
    ``MAX_TEXT_BYTES`` of UTF-8 unread, and UTF-16 spends at most twice that plus its
    mark. Reading stops past it, so an endless pipe (``yes | ltm save -``) or
    ``ltm save /dev/zero`` is refused at once rather than read until memory runs out."""
    from ltm.packet import MAX_PACKET_BYTES, MAX_TEXT_BYTES

    most = 2 * MAX_TEXT_BYTES + 2
    raw = stream.read(most + 1)
    if len(raw) > most:
        raise CliError(
            f"{source}: more than {most} bytes, not read further; a packet is at most"
            f" {MAX_PACKET_BYTES} bytes"
        )
    return raw


# Windows PowerShell 5's ``>`` (as in ``ltm example > packet.json``) and Notepad's
# "Unicode" write UTF-16 with its byte order mark, where a packet is UTF-8 (RFC 8259 §8.1).
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")


def _utf8(raw: bytes, source: str) -> bytes:
    """``raw`` as UTF-8: a text that says by its byte order mark it is UTF-16, re-encoded
    (its meaning is not in doubt); anything else as it is, for the packet's own checks."""
    if not raw.startswith(_UTF16_MARKS):
        return raw
    try:
        return raw.decode("utf-16").encode("utf-8")
    except UnicodeError:  # also a lone surrogate, which UTF-8 cannot carry
        raise CliError(
            f"{source}: starts with a UTF-16 byte order mark but is not valid UTF-16;"
            " save it as UTF-8"
        ) from None


def source_error(source: str, exc: OSError, what: str) -> CliError:
    """The one line for a FILE argument that cannot be read (``what`` it should have been)."""
    if isinstance(exc, FileNotFoundError):
        return CliError(f"{source}: no such file")
    if isinstance(exc, IsADirectoryError):
        return CliError(f"{source}: is a directory, not {what}")
    return CliError(f"{source}: {exc.strerror or exc}")


def _fill_project(data: dict[str, Any]) -> dict[str, Any]:
    from ltm.cli.project import fill_project

    return fill_project(data)


def judge(
    raw: bytes | Mapping[str, Any],
    *,
    fill: bool = False,
    scan: bool = True,
    rules: list[Rule] | None = None,
    plain: bool = False,
) -> Verdict:
    """``ltm.preflight.judge`` with the user's rules and the working directory's project."""
    from ltm import preflight

    rules = (user_rules() if rules is None else rules) if scan else []
    return preflight.judge(
        raw, fill=fill, scan=scan, rules=rules, fill_project=_fill_project, plain=plain
    )


def validation_report(raw: bytes | Mapping[str, Any], *, complete: bool) -> dict[str, Any]:
    """What ``ltm validate`` and the MCP validate tool say (see ``ltm.preflight``)."""
    from ltm import preflight

    return preflight.validation_report(
        raw, complete=complete, rules=user_rules(), fill_project=_fill_project
    )


def accept(
    raw: bytes | Mapping[str, Any],
    *,
    fill: bool = False,
    lenient: bool = False,
    allow_unredacted: bool = False,
    label: str = "packet",
) -> Checked:
    """The packet to store or send, or ``Refused`` listing every problem found."""
    from ltm import preflight

    return preflight.accept(
        raw,
        fill=fill,
        lenient=lenient,
        allow_unredacted=allow_unredacted,
        label=label,
        rules=[] if allow_unredacted else user_rules(),
        fill_project=_fill_project,
    )


def user_rules() -> list[Rule]:
    """The user's own redaction patterns (``ltm sensitive add``)."""
    from ltm import redact
    from ltm.cli.config import load_settings, sensitive_patterns

    rules = []
    for entry in sensitive_patterns(load_settings()):
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
    from ltm import preflight

    return preflight.scan_packet(data, user_rules() if rules is None else rules)
