"""Saving or pushing one packet: read, check, scan, store. The body of ``ltm save`` and
``ltm push``, a plain function that imports no parser."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info
from ltm.present import one_line, where_label

if TYPE_CHECKING:
    from ltm.cli.client.backend import Backend

# What save fills in and push asks of the file, as the checks word their absence.
UNFILLED = frozenset({"id: required", "created_at: required"})


def send(
    source: str,
    *,
    fill: bool,
    team: str | None,
    lenient: bool,
    allow_unredacted: bool,
    local: bool,
    continues: str | None = None,
) -> str:
    """Check, scan and store one packet; the one path for save and push.

    ``continues``: a packet id (or prefix), or ``last``, that this packet
    follows in its work thread; it becomes the packet's ``parent_id``.
    """
    from ltm.cli.client import preflight
    from ltm.cli.client.backend import open_backend
    from ltm.preflight import Refused

    raw = preflight.read_source(source)
    backend = open_backend(local=local, team=team)
    try:
        packet: bytes | dict[str, Any] = raw
        if continues is not None:
            packet = _with_parent(backend, raw, continues, team=team, label=_label(source))
        try:
            checked = preflight.accept(
                packet,
                fill=fill,
                lenient=lenient,
                allow_unredacted=allow_unredacted,
                label=_label(source),
            )
        except Refused as exc:
            if fill or not set(exc.errors) & UNFILLED:
                raise
            # `ltm example | ltm push -`: what save would have filled in, push asks of the file.
            import shlex

            shown = shlex.quote(source)
            raise CliError(
                f"{exc.message}\npush stores a complete packet as it is;"
                f" ltm save {shown} fills in its id and created_at",
                exit_code=exc.exit_code,
            ) from None
        try:
            if continues is None:
                _check_parent(backend, checked.data, team=team, refuse=fill)
            pushed = backend.push_checked(
                checked, team=team, lenient=lenient, allow_unredacted=allow_unredacted
            )
        except CliError as exc:
            if not fill:  # push stores a file as it is, and says when it cannot
                raise
            from ltm.cli.client.outbox import keep_unsent

            kept = keep_unsent(
                backend,
                checked,
                exc,
                team=team,
                lenient=lenient,
                allow_unredacted=allow_unredacted,
            )
            if kept is None:
                raise
            info(kept)
            print(checked.data["id"])
            return str(checked.data["id"])
    finally:
        backend.close()
    verb = "saved" if pushed.created else "updated"
    note = "" if checked.conforming else " (non-conforming, accepted with --lenient)"
    where = where_label(backend, team)
    info(f"{verb} {pushed.id} in {where}{note}")
    print(pushed.id)
    return pushed.id


def _check_parent(
    backend: Backend, data: Mapping[str, Any], *, team: str | None, refuse: bool
) -> None:
    """A ``parent_id`` must name a packet the user can read, or the thread breaks there
    (and not the packet itself, or it loops there).

    ``save`` refuses (nothing stored; the packet is still in its file); ``push``,
    which stores a packet exactly as written (one may arrive before its parent),
    warns and goes on.
    """
    from ltm.backend import parent_problem

    problem = parent_problem(backend, data, where_label(backend, team))
    if problem is None:
        return
    if refuse:
        raise CliError(
            f"{problem}; nothing saved — fix it (ltm ls lists ids; --continues last takes the"
            " newest) or drop parent_id"
        )
    info(f"warning: {problem}; pushed anyway")


def _with_parent(
    backend: Backend, raw: bytes, continues: str, *, team: str | None, label: str
) -> dict[str, Any]:
    """The packet with ``parent_id`` set to the packet ``continues`` names.

    ``last`` is the newest packet of this project (the packet's ``project.name``,
    else the working directory's) in the scope the packet is saved to, other than
    this packet itself when it is saved again.
    """
    from ltm import packet
    from ltm.preflight import _indent
    from ltm.present import decode_packet

    try:
        data = packet.parse(raw)
    except packet.PacketError as exc:
        raise CliError(f"{label} is not a valid packet:\n" + _indent(exc.errors)) from None
    version = data.get("ltm_version", packet.CURRENT_VERSION)
    if version == "0.1":
        raise CliError("--continues needs an ltm_version 0.2 packet (parent_id is new in 0.2)")
    if continues == "last":
        from ltm.cli.project import current_project

        named = data.get("project")
        project = named.get("name") if isinstance(named, dict) else None
        if not isinstance(project, str):
            here = current_project()
            project = here[0] if here else None
        rows = backend.list(team=team, limit=2, project=project)
        rows = [row for row in rows if row["id"] != data.get("id")]
        if not rows:
            where = f"team {team}" if team else backend.label
            of = f" of project {project}" if project else ""
            raise CliError(f"--continues last: no earlier packet{of} in {where} to continue")
        parent = rows[0]["id"]
        # Picked, not named: say which, as ltm edit does, so a wrong pick shows at once.
        info(f"continues {parent}: {one_line(str(rows[0].get('goal') or ''), 60)}")
    else:
        found = decode_packet(backend.get(continues, team=team), continues)
        parent = str(found.get("id", continues))
    if parent == data.get("id"):
        raise CliError("a packet cannot continue itself")
    stated = data.get("parent_id")
    if stated not in (None, parent):
        # Two parents asked for: either silently replaced by the other breaks a thread.
        raise CliError(
            f"{label} already continues {one_line(str(stated), 64)} (its parent_id);"
            f" --continues {continues} names {parent}: remove one",
            exit_code=2,
        )
    return {**data, "parent_id": parent}


def _label(source: str) -> str:
    return "standard input" if source == "-" else source
