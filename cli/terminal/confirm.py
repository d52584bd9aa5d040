"""Asking before an action that cannot be undone, and refusing when nobody can be asked.

Agents run ``ltm`` through shell tools with no terminal, so a destructive verb
that simply skipped its question there would delete at once, on a guess. A
verb that deletes or revokes asks on a terminal, and without one refuses
unless the caller said ``--yes``: the agent (or script) has to state the intent.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ltm.cli.errors import USAGE, CliError


def confirmed(
    question: str | Callable[[], str],
    *,
    yes: bool,
    verb: str,
    nothing: str,
    why: str = "cannot be undone",
) -> None:
    """Return when the action may go ahead; raise ``CliError`` otherwise.

    ``question``: what to ask, or a function that builds it (it may read the
    packet to name it: no request is made when there is no one to ask).
    ``yes``: the caller passed ``--yes``. ``verb``: the command as typed
    (``ltm rm ID``) for the refusal line. ``nothing``: what did not happen
    (``nothing deleted``) when the person answers no. ``why``: why it asks, in the
    refusal line (``verb`` *why*).
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError(
            f"{verb} {why} and there is no terminal to ask on; {nothing} — add --yes to confirm",
            exit_code=USAGE,
        )
    import typer

    from ltm.cli.terminal.output import safe

    # A question quotes what a server says (a device's request, a packet's goal): shown
    # through safe(), so none of it can erase or fake the question's own words.
    text = safe(question() if callable(question) else question, multiline=True)
    try:
        answer = typer.confirm(text, default=False, err=True)
    except typer.Abort as exc:
        if not isinstance(exc.__context__, EOFError):
            raise  # Ctrl-C: interrupted (ltm.cli.start.main)
        print(file=sys.stderr)  # Ctrl-D ends the question's line: no answer is a no
        answer = False
    if not answer:
        raise CliError(nothing)
