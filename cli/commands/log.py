"""ltm log: the work thread of a packet, from its root to it (``parent_id`` links).

The body is ``ltm.cli.packets.log_thread``.
"""

from __future__ import annotations

from ltm.cli.commands import options


def log(
    ref: options.Ref,
    team: options.Team = None,
    as_json: options.Json = False,
    local: options.Local = False,
) -> None:
    """Show the thread that led to a packet: id, age, goal and next step, one line each."""
    from ltm.cli.packets import log_thread

    log_thread(ref, team=team, as_json=as_json, local=local)
