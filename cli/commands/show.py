"""ltm show: one packet, for people (or as JSON).

The body is ``ltm.cli.packets.show_packet``.
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
    from ltm.cli.packets import show_packet

    show_packet(ref, team=team, as_json=as_json, local=local)
