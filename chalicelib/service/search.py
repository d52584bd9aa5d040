"""Searching the packets a caller can read (reads only).

The scopes come from the caller, never from the request: personal by
default, one team (``team``, 404 ``team not found`` for a team the caller is
not in, as everywhere) or every scope they belong to (``all_scopes``). The
store is asked about those scopes only, so nothing outside them is read into
the ranking, the snippets or the result.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from ..store import PacketMeta, Scope, SearchHit, Store
from .access import Caller, access
from .errors import BadRequest

if TYPE_CHECKING:
    from ..search import Query

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


class Found(NamedTuple):  # not a dataclass: recall at the prompt imports this module
    meta: PacketMeta
    team: str | None  # the team's name, None for a personal packet
    score: float
    field: str  # where the snippet comes from
    snippet: str
    highlights: tuple[tuple[int, int], ...]  # [start, end) ranges of ``snippet``
    # How it was found: ``words`` (it holds every word of the query) or ``meaning`` (by
    # meaning alone: a neighbour, maybe a weak one, which a reader must be told apart).
    matched: str = "words"

    def where(self) -> dict[str, Any]:
        """The hit's own fields as ``/v1/search`` sends them (the packet's beside them)."""
        return {
            "team": self.team,
            "field": self.field,
            "snippet": self.snippet,
            "highlights": [list(span) for span in self.highlights],
            "matched": self.matched,
        }


MODES = ("hybrid", "lexical", "semantic")


def search(
    store: Store,
    caller: Caller,
    q: str,
    *,
    team: str | None = None,
    all_scopes: bool = False,
    limit: int = DEFAULT_LIMIT,
    mode: str | None = None,
) -> list[Found]:
    """Packets matching ``q`` (see ``ltm.search`` for the syntax), best first.

    ``mode``: ``lexical`` (the words, as always; None is this), ``semantic`` (by meaning
    alone, the score a cosine) or ``hybrid`` (both, fused: ``ltm.semantic.fuse``).
    Asking for meaning where the ``semantic`` extra is not installed is a
    ``BadRequest`` naming it."""
    from .. import search as query_language

    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    if team is not None and all_scopes:
        raise BadRequest("give a team or all scopes, not both")
    if mode is not None and mode not in MODES:
        raise BadRequest(f"mode: one of {', '.join(MODES)}")
    try:
        query = query_language.parse(q)
    except query_language.QueryError as exc:
        raise BadRequest(f"q: {exc}") from None
    if mode is None:
        mode = "lexical"
    elif mode != "lexical" and not _semantic().enabled():
        raise BadRequest(f"mode: search by meaning needs {_semantic().EXTRA} installed")
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
    hits = _ranked(store, query, scopes, limit, mode)
    return [
        Found(
            meta=hit.meta,
            team=names.get(hit.meta.team_id) if hit.meta.team_id else None,
            score=hit.score,
            field=hit.snippet.field,
            snippet=hit.snippet.text,
            highlights=hit.snippet.highlights,
            matched=matched,
        )
        for hit, matched in hits
    ]


def _semantic() -> ModuleType:
    """``ltm.semantic``, imported only when meaning is asked for: the words alone (what
    the prompt hook searches with, on every prompt) never load it."""
    from .. import semantic

    return semantic


def _ranked(
    store: Store, query: Query, scopes: list[Scope], limit: int, mode: str
) -> list[tuple[SearchHit, str]]:
    """The hits, best first, each with how it was found (``Found.matched``)."""
    if mode == "lexical":
        return [(hit, "words") for hit in store.search(query, scopes=scopes, limit=limit)]
    semantic = _semantic()
    lexical = store.search(query, scopes=scopes, limit=limit) if mode != "semantic" else []
    try:
        meaning = semantic.query_vector(meaning_text(query))
    except semantic.Unavailable as exc:  # its files cannot be read: said as a missing extra is
        raise BadRequest(f"mode: {exc}") from None
    if meaning is None:
        return [(hit, "words") for hit in lexical]
    near = store.nearest(meaning, query, scopes=scopes, limit=max(limit, semantic.FUSE_DEPTH))
    if mode == "semantic":
        return [(hit, "meaning") for hit in near[:limit]]
    near = [hit for hit in near if hit.score >= semantic.SEMANTIC_FLOOR]
    # A packet both found keeps the lexical hit: its snippet marks the words. The
    # packets that hold every word come first (the query language's promise), in
    # their fused order; then those found by meaning alone.
    by_id = {hit.meta.id: hit for hit in (*near, *lexical)}
    words = {hit.meta.id for hit in lexical}
    fused = semantic.fuse(
        [hit.meta.id for hit in lexical],
        [(hit.meta.id, hit.score) for hit in near],
        limit=len(words) + len(near),
    )
    fused.sort(key=lambda pair: pair[0] not in words)
    return [
        (by_id[key]._replace(score=score), "words" if key in words else "meaning")
        for key, score in fused[:limit]
    ]


def meaning_text(query: Query) -> str:
    """The words of a query as typed, for its meaning: without qualifiers, quotes or
    prefix stars (the case kept: the model's tokens are cased)."""
    from .. import search as query_language

    return query_language.plain_text(query)
