"""Everything a packet goes through before it leaves the user's hands.

Read → parse → (fill the defaults) → validate → redaction scan. The CLI verbs
and the MCP shim both call these functions, so a packet is judged the same
way whichever door it comes through, and a blocked packet is never stored or
sent anywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltm.cli.errors import CliError

if TYPE_CHECKING:
    from ltm.packet import Checked
    from ltm.redact import Hit, Rule


class Blocked(CliError):
    """The redaction pre-flight found something that must not leave the machine."""

    def __init__(self, hits: list[Hit]) -> None:
        lines = "\n".join(f"  {hit}" for hit in hits)
        super().__init__(
            f"redaction pre-flight blocked the packet ({len(hits)} "
            f"{'hit' if len(hits) == 1 else 'hits'}):\n{lines}\n"
            "edit those fields, or pass --allow-unredacted to send it anyway"
        )
        self.hits = hits


def read_source(source: str) -> bytes:
    """The bytes of FILE, or of standard input for ``-``."""
    if source == "-":
        return sys.stdin.buffer.read()
    path = Path(source)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CliError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{source}: is a directory, not a packet file") from None
    except OSError as exc:
        raise CliError(f"{source}: {exc.strerror or exc}") from None


def check(
    raw: bytes | Mapping[str, Any],
    *,
    fill: bool = False,
    lenient: bool = False,
    label: str = "packet",
) -> Checked:
    """Parse and validate; with ``fill``, supply a missing id, created_at and ltm_version,
    and the project (name and ref) of the working directory when the packet has none.

    The project is filled before the redaction scan, which judges it like every field.
    """
    from ltm import packet

    try:
        data = packet.parse(raw) if isinstance(raw, bytes) else dict(raw)
        if fill:
            from ltm.cli.project import fill_project

            data = fill_project(packet.fill_defaults(data))
        return packet.check(data, lenient=lenient)
    except packet.PacketError as exc:
        raise CliError(f"{label} is not a valid packet:\n" + _indent(exc.errors)) from None


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


def scan(data: Mapping[str, Any]) -> list[Hit]:
    from ltm import redact

    return redact.scan_packet(data, user_rules())


def preflight(checked: Checked, *, allow_unredacted: bool = False) -> None:
    """Raise ``Blocked`` when the scan finds anything, unless the user overrides it."""
    if allow_unredacted:
        return
    hits = scan(checked.data)
    if hits:
        raise Blocked(hits)
