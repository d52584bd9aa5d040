"""ltm search: find packets by what they say, best match first.

The body is ``ltm.cli.packets.search_packets``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError


def search(
    query: Annotated[
        list[str],
        typer.Argument(
            metavar="QUERY",
            help='Words (all must match), "a phrase", pref*, tag:NAME, project:NAME.',
        ),
    ],
    team: options.Team = None,
    all_scopes: Annotated[
        bool,
        typer.Option("--all-scopes", help="Search your personal packets and all your teams'."),
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100, help="How many, at most.")
    ] = 20,
    as_json: options.Json = False,
    local: options.Local = False,
    semantic: Annotated[
        bool,
        typer.Option(
            "--semantic", help="By meaning alone (needs ltm[semantic]): words may differ."
        ),
    ] = False,
    lexical: Annotated[
        bool, typer.Option("--lexical", help="By the words alone, every one required.")
    ] = False,
) -> None:
    """Search packets: ranked, with where each matched and a short snippet.

    With the semantic extra installed, packets holding every word come first, then
    packets near in meaning (docs/search.md); --lexical or --semantic for one of them.
    """
    from ltm.cli.packets import search_packets

    if team and all_scopes:
        raise CliError("give -t TEAM or --all-scopes, not both")
    if semantic and lexical:
        raise CliError("give --semantic or --lexical, not both")
    search_packets(
        " ".join(query),
        team=team,
        all_scopes=all_scopes,
        limit=limit,
        as_json=as_json,
        local=local,
        mode="semantic" if semantic else "lexical" if lexical else None,
    )
