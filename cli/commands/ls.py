"""ltm ls: the newest packets, newest first, a page at a time, optionally filtered."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.commands import options


def ls(
    limit: options.Limit = 50,
    team: options.Team = None,
    tag: Annotated[
        str | None, typer.Option("--tag", metavar="TAG", help="Only packets with this tag.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Created at or after: 2026-04-01, an RFC 3339 time, or 3d.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", metavar="WHEN", help="Created before (same forms as --since)."),
    ] = None,
    author: Annotated[
        str | None,
        typer.Option(
            "--author",
            metavar="WHO",
            help="Pushed by this member (user id or display name, or me).",
        ),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every page, not just the first.")] = False,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared", help="The packets other users of your server shared with you (ltm share)."
        ),
    ] = False,
    page_token: Annotated[
        str | None,
        typer.Option(
            "--page-token", metavar="TOKEN", help="Continue a listing where the last page ended."
        ),
    ] = None,
    as_json: options.Json = False,
    local: options.Local = False,
    project: options.Project = None,
    here: options.Here = False,
) -> None:
    """List packets: id, age and goal."""
    if shared:
        # every other filter is refused, not dropped: --all too (one page is all it lists)
        if tag or since or until or author or page_token or project or here or local or every:
            raise typer.BadParameter("--shared takes only -t (the team's server), --limit, --json")
        from ltm.cli.commands.share import list_shared

        list_shared(limit=limit, as_json=as_json, team=team)
        return
    from ltm.cli.client.backend import Filters
    from ltm.cli.packets import MAX_LIMIT, list_packets

    list_packets(
        limit=MAX_LIMIT if every and limit == 50 else limit,
        team=team,
        as_json=as_json,
        local=local,
        filters=Filters(tag=tag, since=since, until=until, author=author),
        page_token=page_token,
        every=every,
        project=project,
        here=here,
    )
