"""ltm ls: the newest packets, newest first."""

from __future__ import annotations

from ltm.cli import options


def ls(
    limit: options.Limit = 50,
    team: options.Team = None,
    as_json: options.Json = False,
    local: options.Local = False,
    project: options.Project = None,
    here: options.Here = False,
) -> None:
    """List packets: id, age and goal."""
    from ltm.cli.fast import list_packets  # the body; ltm.cli.entry runs it without typer

    list_packets(limit=limit, team=team, as_json=as_json, local=local, project=project, here=here)
