"""ltm rm: delete a packet (asks first on a terminal; without one, only with --yes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

if TYPE_CHECKING:
    from ltm.backend import Backend

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


def rm(
    ref: options.Ref,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    team: options.Team = None,
    local: options.Local = False,
) -> None:
    """Delete a packet. Deleted packets cannot be recovered.

    Asks first on a terminal; without one (a script, an agent's shell tool) it
    deletes only with --yes.
    """
    from ltm.cli.client.backend import check_ref, open_backend
    from ltm.cli.terminal.confirm import confirmed
    from ltm.present import where_label

    check_ref(ref)  # a bad id is refused first, whatever else is wrong
    try:
        backend = open_backend(local=local, team=team)
        try:
            confirmed(
                lambda: _question(backend, ref, team),
                yes=yes,
                verb=f"ltm rm {ref}",
                nothing="nothing deleted",
            )
            deleted = backend.delete(ref, team=team)
        finally:
            backend.close()
    except CliError as exc:
        raise _kept_here(exc, ref) from None
    where = where_label(backend, team)
    info(f"deleted {deleted} from {where}")


def _question(backend: Backend, ref: str, team: str | None) -> str:
    """What rm asks on a terminal: the packet's goal, and its public link when it has one
    (the server says it, on the read, to whoever may delete the packet): the link ends
    with it."""
    goal, packet_id = goal_and_id(backend.get(ref, team=team))
    asked = f"Delete {ref} ({goal})?"
    shown = backend.published(packet_id) if packet_id else None
    if shown:
        asked += f" Its public link {shown[1]} stops working for everyone at once"
    return asked


def _kept_here(exc: CliError, ref: str) -> CliError:
    """``exc``, naming the outbox file when the packet waits there, unsent.

    A packet saved while its server was out of reach is in no store yet: rm found it
    nowhere (or could not reach the server at all), and no verb lists the outbox's
    files, so without this the packet's one copy went unmentioned.
    """
    from ltm.cli.client import outbox

    kept = [entry for entry in outbox.waiting() if entry.packet_id.startswith(ref)]
    if not kept:
        return exc
    entry = kept[0]
    return CliError(
        f"{exc.message}\nltm: {entry.packet_id} waits unsent in this machine's outbox for"
        f" {entry.host}: delete {entry.path} to drop it, or send it with: ltm push --outbox",
        exit_code=exc.exit_code,
    )


def goal_and_id(body: bytes) -> tuple[str, str]:
    """The packet's goal, as the question shows it, and its id ("" when unreadable)."""
    import json

    from ltm.cli.terminal.output import one_line, safe

    try:
        packet = json.loads(body)
        return safe(one_line(str(packet.get("goal", "")), 60)), str(packet.get("id", ""))
    except (ValueError, AttributeError):
        return "unreadable packet", ""
