"""Searching the packets a caller can read (reads only).

The scopes come from the caller, never from the request: personal by
default, one team (``team``, 404 ``team not found`` for a team the caller is
not in, as everywhere) or every scope they belong to (``all_scopes``). The
store is asked about those scopes only, so nothing outside them is read into
the ranking, the snippets or the result.
"""

from __future__ import annotations

from typing import NamedTuple

from ..store import PacketMeta, Scope, Store
from .access import Caller, access
from .errors import BadRequest

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


class Found(NamedTuple):  # not a dataclass: recall at the prompt imports this module
    meta: PacketMeta
    team: str | None  # the team's name, None for a personal packet
    score: float
    field: str  # where the snippet comes from
    snippet: str
    highlights: tuple[tuple[int, int], ...]  # [start, end) ranges of ``snippet``


def search(
    store: Store,
    caller: Caller,
    q: str,
    *,
    team: str | None = None,
    all_scopes: bool = False,
    limit: int = DEFAULT_LIMIT,
) -> list[Found]:
    """Packets matching ``q`` (see ``ltm.search`` for the syntax), best first."""
    from .. import search as query_language

    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    if team is not None and all_scopes:
        raise BadRequest("give a team or all scopes, not both")
    try:
        query = query_language.parse(q)
    except query_language.QueryError as exc:
        raise BadRequest(f"q: {exc}") from None
    who = access(store, caller, need="read", team=team)
    names: dict[str, str] = {}
    scopes: list[Scope]
    if who.team is not None:
        scopes = [(who.user.id, who.team.id)]
        names[who.team.id] = who.team.name
    elif all_scopes:
        teams = store.list_teams(who.user.id)
        scopes = [(who.user.id, None), *((who.user.id, t.id) for t in teams)]
        names.update((t.id, t.name) for t in teams)
    else:
        scopes = [(who.user.id, None)]
    hits = store.search(query, scopes=scopes, limit=limit)
    return [
        Found(
            meta=hit.meta,
            team=names.get(hit.meta.team_id) if hit.meta.team_id else None,
            score=hit.score,
            field=hit.snippet.field,
            snippet=hit.snippet.text,
            highlights=hit.snippet.highlights,
        )
        for hit in hits
    ]
