"""ltm show: one packet, for people (or as JSON).

The body is ``ltm.cli.start.fast.show_packet``: the plain forms of this verb skip
typer entirely (see ``ltm.cli.start.entry``); this command serves the rest (help,
typos) with the same behaviour.
"""

from __future__ import annotations

from ltm.cli.commands import options


def show(
    ref: options.Ref,
    team: options.Team = None,
    as_json: options.Json = False,
    local: options.Local = False,
) -> None:
    """Show a packet: a readable summary, or its JSON with --json."""
    from ltm.cli.start.fast import show_packet

    show_packet(ref, team=team, as_json=as_json, local=local)
