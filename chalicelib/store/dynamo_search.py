"""The DynamoDB store's search index: what a packet puts in it, who writes it, how a query reads it.

What is indexed
---------------
A packet's ``INDEXED_WORDS`` heaviest words (``ltm.search.term_weights``: the goal
and tags weigh most, then next step, project, decisions...; ties go to the longer,
more specific word), one small posting each::

    posting   T#<scope>#<w[:2]> / <word>#<sort key>#<id>     w: the word's weight
    facet     FACET#<scope>#tag#<tag> / <sort key>#<id>      (listing fields, for ``ls --tag``)
              FACET#<scope>#project#<name> / <sort key>#<id>
    pending   PEND#<scope> / <sort key>#<id>                 rev: the packet's revision

A posting carries nothing its key already says. A tag or project name too long for a
partition key (only a lenient packet has one) gets no facet. Indexing every distinct word
(the previous design) wrote ~200 postings per 3 KB packet: 96% of a push's
write units and 13x the packet's bytes in storage. The heaviest words are what
people search a packet by; a word a packet mentions only in passing is not
found by search on DynamoDB (SQLite's FTS5 indexes every word). The bench
``bench/bench_dynamo_cost.py`` holds the budget: at most 40 write units and 3x
the packet's bytes stored per new 3 KB packet.

Who writes it
-------------
The request path writes the packet, its owner's usage counter and a *pending*
item, in one transaction (``dynamo.py``). The postings and facets are derived by
the table's stream consumer (``dynamo_stream.py``) from each packet record's
old and new images: it writes the difference and then deletes the pending
item, only while that item still names the revision the record carries (a
newer push keeps its own). Records of one key arrive in order, a batch is
retried whole, so replaying the diff is idempotent; the order across keys does
not matter (every item belongs to one packet).

How a query reads it (bounded, whatever the scope's size)
---------------------------------------------------------
Postings of one word are sorted by ``<sort key>#<id>`` (newest first read
backwards), as are facets and the pending items, so a query of several words
and qualifiers is a *leapfrog join*: each list is read a page at a time, and a
list ahead of the others seeks (a Query bounded by ``BETWEEN``) to where the
furthest one stands. A rare word and a common one cost about one page of the
rare word plus one short Query per match of it; nothing is capped by age, so
every packet having all the words is found. It stops after ``MAX_MATCHES``
matches (the newest) or ``MAX_READS`` Queries, whichever first: two words that
each fill thousands of postings and seldom meet (the bench's worst case at
100,000 packets) are joined as far as 20 pages of each reach, newest first. The
scope's pending items (a strongly consistent Query, usually empty) are merged
in: a packet is searchable from the moment its push returned, before the
consumer ran, and forever after. The best candidates' packets are read, as many
as the answer needs (more, up to ``VERIFY_CAP``, only for those that fail), to
check each still exists in a readable scope, has the words among its indexed
ones, matches whole phrases; the snippet comes from it.

Prefix terms (``refr*``) read their 2-letter partition's postings in word order
(at most ``PREFIX_CAP``); when that read is complete they join like a word,
otherwise they filter the words' matches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from . import PacketMeta, Scope, SearchHit

if TYPE_CHECKING:
    from ..search import Query

Item = dict[str, dict[str, Any]]

INDEXED_WORDS = 16  # postings per packet: the bound on a push's index writes and storage
MAX_WORD = 64  # longer words are indexed (and looked up) by their first 64 characters
MAX_PARTITION_KEY = 2048  # bytes: DynamoDB's bound on a partition key
PAGE = 200  # postings per Query page (~20 KB: ~2.5 read units, eventually consistent)
# A search's budget, 60 read units at most for two words at 100,000 packets in a scope
# (bench/bench_dynamo_cost.py): its Queries (a page of postings is ~2 units) and the
# packets it reads (half a unit each, up to 4 KB).
MAX_READS = 20  # Queries per scope and search, at most
MAX_MATCHES = 75  # matches collected per scope and search
VERIFY_CAP = 30  # candidate packets read (to check and cut snippets) per search, at most
PREFIX_CAP = 1000  # postings read for one prefix term
PENDING_CAP = 200  # not-yet-indexed packets merged per scope (the consumer keeps this near 0)
LISTING = ("id", "created_at", "goal", "owner_id", "team_id", "project", "parent_id")


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _get(item: Mapping[str, Mapping[str, Any]], name: str) -> str | None:
    value = item.get(name)
    return None if value is None else value.get("S")


def scope_name(owner_id: str, team_id: str | None) -> str:
    return f"t:{team_id}" if team_id else f"u:{owner_id}"


def indexed_words(data: dict[str, object]) -> dict[str, float]:
    """The words a packet is found by, with their weights: the ``INDEXED_WORDS`` heaviest."""
    from .. import search

    weights: dict[str, float] = {}
    for word, weight in search.term_weights(search.fields_of(data)).items():
        weights[word[:MAX_WORD]] = weights.get(word[:MAX_WORD], 0.0) + weight
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))
    return dict(ranked[:INDEXED_WORDS])


def fits_key(partition: str) -> bool:
    """Whether DynamoDB takes ``partition`` as a partition key (2048 bytes at most)."""
    return len(partition.encode()) <= MAX_PARTITION_KEY


def pending_key(scope: str, sort_key: str, packet_id: str) -> Item:
    return {"pk": _s(f"PEND#{scope}"), "sk": _s(f"{sort_key}#{packet_id}")}


def index_items(meta: PacketMeta, sort_key: str, body: bytes) -> dict[tuple[str, str], Item]:
    """The postings and facet items a packet puts in the index, by key."""
    from .. import search

    data = search.load(body)
    scope = scope_name(meta.owner_id, meta.team_id)
    order = f"{sort_key}#{meta.id}"
    items: dict[tuple[str, str], Item] = {}
    for word, weight in indexed_words(data).items():
        pk, sk = f"T#{scope}#{word[:2]}", f"{word}#{order}"
        items[(pk, sk)] = {"pk": _s(pk), "sk": _s(sk), "w": {"N": f"{weight:g}"}}
    facets = [("tag", tag) for tag in search.tags_of(data)]
    if project := search.project_of(data):
        facets.append(("project", project))
    listing = _listing_fields(meta)
    for kind, value in facets:
        pk = f"FACET#{scope}#{kind}#{value}"
        if not fits_key(pk):
            # A lenient packet's tag or project name may be any length: a facet DynamoDB
            # refuses would fail its stream record at every retry (and the repair).
            continue
        items[(pk, order)] = {"pk": _s(pk), "sk": _s(order), **listing}
    return items


def _listing_fields(meta: PacketMeta) -> Item:
    fields: Item = {}
    for name, value in zip(LISTING, meta, strict=False):
        if value is not None:
            fields[name] = _s(value)
    return fields


def image_index(item: Mapping[str, Mapping[str, Any]] | None) -> dict[tuple[str, str], Item]:
    """The index items of a stored packet item (a table item or a stream image)."""
    if not item or "body" not in item or _get(item, "sk") != "PKT":
        return {}
    from .dynamo import _packet_meta

    body = item["body"]["B"]
    return index_items(_packet_meta(item), _get(item, "sort_key") or "", bytes(body))


def _order_of(sk: str, prefix: str) -> str:
    return sk[len(prefix) :]


def _split_order(order: str) -> str:
    return order.rsplit("#", 1)[-1]  # the packet id: the order key's last part


class _Budget:
    def __init__(self, reads: int) -> None:
        self.left = reads

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


class _Cursor:
    """One list of a scope's packets, newest first: a word's postings, or a facet."""

    def __init__(self, store: Any, partition: str, prefix: str, budget: _Budget) -> None:
        self.store, self.partition, self.prefix, self.budget = store, partition, prefix, budget
        self.buffer: list[tuple[str, float]] = []  # (order key, weight), descending
        self.start: Item | None = None  # where the last page ended
        self.done = False

    def head(self) -> tuple[str, float] | None:
        if not self.buffer and not self.done:
            self._fetch(None)
        return self.buffer[0] if self.buffer else None

    def pop(self) -> None:
        self.buffer.pop(0)

    def seek(self, order: str) -> None:
        """Skip what is newer than ``order``."""
        while self.buffer and self.buffer[0][0] > order:
            self.buffer.pop(0)
        if not self.buffer and not self.done:
            self._fetch(order)

    def _fetch(self, upto: str | None) -> None:
        if not self.budget.take():
            self.done = True  # the search's bound: its answer may then miss older matches
            return
        names = {"#p": "pk"}
        values: Item = {":p": _s(self.partition)}
        condition = "#p = :p"
        kwargs: dict[str, Any] = {}
        if upto is not None:
            names["#s"] = "sk"
            values[":hi"] = _s(self.prefix + upto)
            if self.prefix:
                condition += " AND #s BETWEEN :lo AND :hi"
                values[":lo"] = _s(self.prefix)
            else:
                condition += " AND #s <= :hi"
        else:
            if self.prefix:
                names["#s"] = "sk"
                condition += " AND begins_with(#s, :lo)"
                values[":lo"] = _s(self.prefix)
            if self.start is not None:
                kwargs["ExclusiveStartKey"] = self.start
        resp = self.store.client.query(
            TableName=self.store.table,
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ScanIndexForward=False,
            Limit=PAGE,
            **kwargs,
        )
        items = resp.get("Items", [])
        for item in items:
            weight = float(item["w"]["N"]) if "w" in item else 0.0
            self.buffer.append((_order_of(item["sk"]["S"], self.prefix), weight))
        if items:
            last = items[-1]
            self.start = {"pk": last["pk"], "sk": last["sk"]}
        self.done = not resp.get("LastEvaluatedKey")


def _listed(found: dict[str, tuple[float, str]]) -> _Cursor:
    """A list read in full already (a prefix's postings), as a cursor."""
    cursor = _Cursor(None, "", "", _Budget(0))
    cursor.buffer = sorted(((order, w) for w, order in found.values()), reverse=True)
    cursor.done = True
    return cursor


def leapfrog(lists: list[_Cursor], most: int) -> Iterator[tuple[str, list[float]]]:
    """The order keys every list has, newest first, with each list's weight there."""
    found = 0
    while found < most:
        heads = [lst.head() for lst in lists]
        if any(h is None for h in heads):
            return
        low = min(h[0] for h in heads if h is not None)
        if all(h is not None and h[0] == low for h in heads):
            yield low, [h[1] for h in heads if h is not None]
            found += 1
            for lst in lists:
                lst.pop()
            continue
        for lst, h in zip(lists, heads, strict=True):
            if h is not None and h[0] > low:
                lst.seek(low)


class SearchMixin:
    """Search and the stream consumer's index writes for ``DynamoStore``."""

    table: str
    client: Any

    if TYPE_CHECKING:

        def _query(self, **kwargs: Any) -> Iterator[Item]: ...
        def _batch_get(self, keys: list[Item], *, consistent: bool = True) -> list[Item]: ...
        def _batch_write(self, puts: list[Item], deletes: list[Item]) -> None: ...

    # -- the consumer side -----------------------------------------------

    def apply_packet_change(
        self,
        old: Mapping[str, Mapping[str, Any]] | None,
        new: Mapping[str, Mapping[str, Any]] | None,
    ) -> None:
        """Bring the index from a packet's old image to its new one (a stream record).

        Idempotent: writing the same difference twice leaves the same items, and the
        pending item goes only while it names this revision.
        """
        before, after = image_index(old), image_index(new)
        deletes = [{"pk": _s(pk), "sk": _s(sk)} for pk, sk in before if (pk, sk) not in after]
        puts = [item for key, item in after.items() if before.get(key) != item]
        self._batch_write(puts, deletes)
        if new is None or "body" not in new:
            return
        rev = _get(new, "rev")
        if rev is None or (old is not None and _get(old, "rev") == rev):
            return  # a publish or share mark: the text did not change
        from .dynamo import _packet_meta

        meta = _packet_meta(new)
        scope = scope_name(meta.owner_id, meta.team_id)
        key = pending_key(scope, _get(new, "sort_key") or "", meta.id)
        with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):
            self.client.delete_item(
                TableName=self.table,
                Key=key,
                ConditionExpression="#r = :r",
                ExpressionAttributeNames={"#r": "rev"},
                ExpressionAttributeValues={":r": _s(rev)},
            )

    # -- the query side --------------------------------------------------

    def search(self, query: Query, *, scopes: list[Scope], limit: int = 20) -> list[SearchHit]:
        from .. import search
        from .dynamo import _packet_meta

        readable = {scope_name(owner, team) for owner, team in scopes}
        if not readable or limit < 1:
            return []
        words, prefixes = _query_words(query)
        if query.terms and not words and not prefixes:
            return []  # stop words alone: not in the index
        # Found through the index: id -> (rank, order); and not indexed yet: id -> order.
        indexed_hits: dict[str, tuple[float, str]] = {}
        pending: dict[str, str] = {}
        for scope in sorted(readable):
            for pid, found in self._scope_candidates(scope, query, words, prefixes).items():
                if indexed_hits.get(pid, (-1.0, "")) < found:
                    indexed_hits[pid] = found
            pending.update(self._pending(scope))
        ranked = sorted(indexed_hits.items(), key=lambda kv: kv[1], reverse=True)
        ranked = ranked[: max(VERIFY_CAP, limit)]
        order = {pid: found[1] for pid, found in ranked}
        fresh = [pid for pid in pending if pid not in order]
        order.update((pid, pending[pid]) for pid in fresh)
        hits: list[SearchHit] = []

        def check(pids: list[str], *, consistent: bool) -> int:
            """Read ``pids`` and keep those that still match; how many did."""
            kept = 0
            for start in range(0, len(pids), 100):  # BatchGetItem takes 100 keys
                keys = [
                    {"pk": _s(f"PKT#{pid}"), "sk": _s("PKT")} for pid in pids[start : start + 100]
                ]
                for item in self._batch_get(keys, consistent=consistent):
                    meta = _packet_meta(item)
                    if scope_name(meta.owner_id, meta.team_id) not in readable:
                        continue
                    data = search.load(bytes(item["body"]["B"]))
                    indexed = indexed_words(data)
                    if not _findable(indexed, words, prefixes) or not _has_labels(data, query):
                        continue
                    fields = search.fields_of(data)
                    if not search.matches(fields, query):
                        continue
                    score = _score(indexed, words, prefixes)
                    hits.append(SearchHit(meta, score, search.snippet(fields, query)))
                    kept += 1
            return kept

        # The index ranks a candidate as its packet scores (the same weights), so the best
        # ``limit`` are read first, and more only for those that no longer match (a phrase
        # the words do not make, a packet changed or gone): each packet read costs half a
        # read unit (reading all the candidates was a third of a search's units).
        queue = [pid for pid, _ in ranked]
        kept = 0
        while queue and kept < limit:
            wanted, queue = queue[: limit - kept], queue[limit - kept :]
            kept += check(wanted, consistent=False)
        # The pending packets were written a moment ago: read them strongly consistent.
        check(fresh, consistent=True)
        hits.sort(key=lambda h: (h.score, order[h.meta.id], h.meta.id), reverse=True)
        return hits[:limit]

    def _pending(self, scope: str) -> dict[str, str]:
        """The scope's packets the consumer has not indexed yet: id -> order key."""
        found: dict[str, str] = {}
        resp = self.client.query(
            TableName=self.table,
            KeyConditionExpression="#p = :p",
            ExpressionAttributeNames={"#p": "pk"},
            ExpressionAttributeValues={":p": _s(f"PEND#{scope}")},
            ScanIndexForward=False,
            ConsistentRead=True,  # read-your-writes: the push's transaction wrote it
            Limit=PENDING_CAP,
        )
        for item in resp.get("Items", []):
            order = item["sk"]["S"]
            found[_split_order(order)] = order
        return found

    def _scope_candidates(
        self, scope: str, query: Query, words: list[str], prefixes: list[str]
    ) -> dict[str, tuple[float, str]]:
        """The scope's packets having every word, prefix and qualifier: id -> (rank, order)."""
        budget = _Budget(MAX_READS)
        lists: list[_Cursor] = [_Cursor(self, f"T#{scope}#{w[:2]}", w + "#", budget) for w in words]
        for kind, values in (("tag", query.tags), ("project", query.projects)):
            lists.extend(_Cursor(self, f"FACET#{scope}#{kind}#{v}", "", budget) for v in values)
        filters: list[dict[str, tuple[float, str]]] = []
        for prefix in prefixes:
            found, complete = self._prefix_postings(scope, prefix)
            if not found:
                return {}
            if complete or not (words or query.tags or query.projects):
                lists.append(_listed(found))
            else:
                filters.append(found)
        ranked: dict[str, tuple[float, str]] = {}
        # The words' lists come first, then the facets (they only filter), then prefixes.
        weighted, facets = len(words), len(query.tags) + len(query.projects)
        for order, weights in leapfrog(lists, MAX_MATCHES):
            pid = _split_order(order)
            if any(pid not in f for f in filters):
                continue
            scored = weights[:weighted] + weights[weighted + facets :]
            rank = sum(w / (w + 1.2) for w in scored)
            ranked[pid] = (rank, order)
        return ranked

    def _prefix_postings(
        self, scope: str, prefix: str
    ) -> tuple[dict[str, tuple[float, str]], bool]:
        """A prefix's postings (id -> (weight, order)); and whether all were read."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "#p = :p AND begins_with(#s, :w)",
            "ExpressionAttributeNames": {"#p": "pk", "#s": "sk"},
            "ExpressionAttributeValues": {":p": _s(f"T#{scope}#{prefix[:2]}"), ":w": _s(prefix)},
        }
        found: dict[str, tuple[float, str]] = {}
        for read, item in enumerate(self._query(**kwargs), start=1):
            sk = item["sk"]["S"]
            order = sk.split("#", 1)[1]
            pid = _split_order(order)
            weight = float(item["w"]["N"]) if "w" in item else 0.0
            old = found.get(pid)
            found[pid] = (weight + (old[0] if old else 0.0), order)
            if read >= PREFIX_CAP:
                return found, False
        return found, True


def _query_words(query: Query) -> tuple[list[str], list[str]]:
    """The query's whole words (stop words left out, as the index does) and prefixes."""
    from .. import search

    words: list[str] = []
    prefixes: list[str] = []
    for term in query.terms:
        for i, word in enumerate(term.words):
            if word == search.BREAK:
                continue  # where two runs meet: a place in a phrase, never indexed
            word = word[:MAX_WORD]
            if term.prefix and i == len(term.words) - 1:
                if word not in prefixes:
                    prefixes.append(word)
            elif word not in search.STOP_WORDS and word not in words:
                words.append(word)
    return words, prefixes


def _findable(indexed: dict[str, float], words: list[str], prefixes: list[str]) -> bool:
    """Whether the index has the packet under every word and prefix (what search finds)."""
    return all(w in indexed for w in words) and all(
        any(k.startswith(p) for k in indexed) for p in prefixes
    )


def _score(indexed: dict[str, float], words: list[str], prefixes: list[str]) -> float:
    """BM25's shape without document lengths: each word's weight, saturated."""
    score = sum(indexed[w] / (indexed[w] + 1.2) for w in words if w in indexed)
    for p in prefixes:
        weight = sum(v for k, v in indexed.items() if k.startswith(p))
        score += weight / (weight + 1.2)
    return score


def _has_labels(data: dict[str, object], query: Query) -> bool:
    from .. import search

    tags = set(search.tags_of(data))
    project = search.project_of(data)
    return all(t in tags for t in query.tags) and all(p == project for p in query.projects)
