"""Search over packets: the query language, the text each field contributes, snippets.

One implementation serves every store, so a query means the same on SQLite
(FTS5 does the matching; each match is ranked from its own text) and on
DynamoDB (a term index kept by the write path, ranked with statistics of the
caller's scopes alone): a ranking never counts packets the caller cannot read
(see ``SqliteStore.search``). Both cut words as FTS5's ``unicode61``
tokenizer does (letters and digits; a mark such as a vowel sign separates) and
fold case and diacritics; on SQLite, FTS5 cuts and folds the query as typed
itself, since ``fold`` is not unicode61's outside Latin (``й``, Greek accents,
Hangul). A run of a script written without spaces (Chinese, Japanese, Korean,
Thai) is cut into its pairs of characters instead, by both stores (``_grams``;
on SQLite those pairs are matched in a table of their own, ``packet_grams``).
Both take their text from ``fields_of`` and both show ``snippet``.

Query syntax, all terms required (AND)::

    word            a word anywhere in the packet
    "two words"     a phrase: the words next to each other, in one field
    pref*           any word starting with ``pref`` (at least 2 characters)
    tag:NAME        only packets carrying the tag NAME
    project:NAME    only packets of the project NAME (``project:"my app"``)

Anything else a user types is text: quotes that do not pair, operators of
FTS5 (``AND``, ``NEAR``, ``-``, ``^``, ``:``) are plain words or separators,
so no input can produce an FTS5 syntax error. Light: stdlib only, imported on
the CLI's start-up.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

# Fields in the order a snippet prefers them, with their ranking weight: the goal
# and tags say what a packet is about; the rest is detail.
FIELDS: tuple[tuple[str, float], ...] = (
    ("goal", 5.0),
    ("tags", 4.0),
    ("next_step", 3.0),
    ("project", 2.0),
    ("decisions", 2.0),
    ("attempts", 2.0),
    ("methods", 1.5),
    ("success_criteria", 1.0),
    ("constraints", 1.0),
    ("open_questions", 1.0),
)
FIELD_NAMES = tuple(name for name, _ in FIELDS)
WEIGHTS = dict(FIELDS)

MAX_TERMS = 16
MAX_QUERY_CHARS = 512
MIN_PREFIX = 2  # shorter prefixes would match nearly everything (and DynamoDB buckets by 2)
SNIPPET_CHARS = 120

_WORD = re.compile(r"[^\W_]+")
_QUERY = re.compile(r'(?P<qual>(?:tag|project):)?(?:"(?P<phrase>[^"]*)"?|(?P<word>[^\s"]+))')


class QueryError(ValueError):
    """A query that cannot be searched (empty, too long, a one-letter prefix)."""


def fold(text: str) -> str:
    """Lower case without diacritics, as FTS5's ``unicode61 remove_diacritics 2``."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def words(text: str) -> list[str]:
    """The words of ``text`` as search matches them: folded, and a run of a script
    written without spaces cut into its pairs of characters (``_grams``)."""
    # Cut, then fold each word, as FTS5 and ``_tokens`` do: folding first would join
    # what a mark separates (Devanagari's vowel signs and virama, Hebrew's vowel points
    # are not word characters), and a query's words would never be a packet's.
    if _GRAM_ANY.search(text) is None:
        return [fold(word) for word in _WORD.findall(text)]
    return [token for token, _, _ in _tokens(text) if token != BREAK]


# -- scripts written without spaces ------------------------------------------
#
# Chinese, Japanese and Thai put no space between words, and Korean joins nouns into
# compounds: FTS5's unicode61 (and ``_WORD``) keep such a run whole, one word, so a
# word inside it found nothing. Such a run is cut instead into its overlapping pairs
# of characters (bigrams: 検索テスト is 検索 索テ テス スト), the packet's text and the
# query's alike, so a query of two characters or more matches as the phrase of its
# pairs wherever it stands in a run (the usual way without a dictionary of each
# language; Lucene's CJKBigramFilter does this). A run of one character is that
# character, so a query of one character finds it where it stands alone (between
# spaces, punctuation or other scripts), not inside a longer run: a pair is the
# least a word of these scripts is matched by, and DynamoDB's index finds a word by
# its first two characters. Each character is read in its compatibility form
# (half-width katakana as full-width, a compatibility ideograph as the unified
# one); marks (Thai's vowel and tone marks, kana's combining sound marks) are left
# out, so a Thai word is one run and matches with or without them.
#
# These rules live here alone: DynamoDB's term index takes a packet's words from
# ``words`` (``term_weights``), SQLite's ``packet_grams`` table indexes ``gram_text``
# and is asked with ``grams_expression``, and both check and mark a match with
# ``_tokens``.
_GRAM_RANGES = (
    "\u0e01-\u0e3a\u0e40-\u0e4e\u0e50-\u0e59"  # Thai (letters, marks, digits)
    "\u1100-\u11ff\u3131-\u318e\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7fb"  # Hangul
    "\u3005-\u3007"  # 々 〆 〇
    "\u3041-\u3096\u3099\u309a\u309d-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"  # Han
)
_GRAM_ANY = re.compile(f"[{_GRAM_RANGES}]")
# A run of those scripts, or a word of any other (as ``_WORD``, but stopping at them).
_PIECE = re.compile(f"(?P<run>[{_GRAM_RANGES}]+)|[^\\W_{_GRAM_RANGES}]+")
# Stands between two runs with nothing but spaces or punctuation between them, so the
# pairs of one run and the next never make a phrase (東京、京都 holds no 東京都). A
# private-use character: never a word of a query (``_WORD`` skips it), and a word
# character to unicode61, so FTS5 keeps it in its place.
BREAK = "\ue000"


def _grams(run: str, at: int) -> list[tuple[str, int, int]]:
    """The pairs of characters of ``run`` (which starts at ``at`` in its text), each with
    where it stands; one character alone when the run has one."""
    chars: list[tuple[str, int]] = []
    for i, ch in enumerate(run):
        for plain in unicodedata.normalize("NFKC", ch):
            if not unicodedata.category(plain).startswith("M"):
                chars.append((plain.lower(), at + i))
            elif chars:
                # A sound mark typed apart (half-width ｶﾞ, or か and U+3099) makes one
                # letter with the kana before it (ガ); a mark that makes none is left out.
                joined = unicodedata.normalize("NFC", chars[-1][0] + plain)
                if len(joined) == 1:
                    chars[-1] = (joined, chars[-1][1])
    # Each character ends where the next begins: its marks go with it.
    ends = [start for _, start in chars[1:]] + [at + len(run)]
    if len(chars) == 1:
        return [(chars[0][0], chars[0][1], ends[0])]
    return [
        (chars[i][0] + chars[i + 1][0], chars[i][1], ends[i + 1]) for i in range(len(chars) - 1)
    ]


def pieces(text: str) -> list[tuple[str, bool]]:
    """``text`` cut as ``_tokens`` cuts it, before folding: each run of a script written
    without spaces (True, which search reads as its pairs) and each word of any other
    (False). Recall at the prompt picks its keywords from these."""
    return [(m.group(), m["run"] is not None) for m in _PIECE.finditer(text)]


def has_grams(text: str) -> bool:
    """Whether ``text`` holds a character of a script written without spaces."""
    return _GRAM_ANY.search(text) is not None


def gram_texts(texts: Sequence[str]) -> tuple[str, ...] | None:
    """A packet's row in ``packet_grams`` (``gram_text`` of each field), or None when
    no field holds such a script: only those packets have one."""
    if not any(_GRAM_ANY.search(text) for text in texts):
        return None
    return tuple(gram_text(text) for text in texts)


def gram_text(text: str) -> str:
    """``text`` as SQLite's ``packet_grams`` indexes it: its words (``_tokens``, the
    breaks between runs included) one space apart, which unicode61 cuts back into
    the same words."""
    return " ".join(token for token, _, _ in _tokens(text))


# NamedTuples, not dataclasses: a hook's recall and the fast ``ltm search`` load this
# module, and importing dataclasses costs a process 12-15 ms (bench/bench_imports.py).
class Term(NamedTuple):
    words: tuple[str, ...]  # one word, or the words of a phrase
    prefix: bool = False  # the last word is a prefix
    # As typed (without the prefix star), for FTS5 to cut and fold with its own tokenizer:
    # its folding is not ``fold``'s outside Latin (й, ά, Hangul, full-width forms stay).
    text: str = ""


def _same(word: str, token: str, prefix: bool) -> bool:
    return token.startswith(word) if prefix else token == word


class Query(NamedTuple):
    terms: tuple[Term, ...] = ()
    tags: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    text: str = ""  # as typed

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(w for term in self.terms for w in term.words)


def parse(text: str) -> Query:
    """The query a user typed; QueryError when there is nothing to search for."""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"query too long (max {MAX_QUERY_CHARS} characters)")
    terms: list[Term] = []
    tags: list[str] = []
    projects: list[str] = []
    for m in _QUERY.finditer(text):
        qual, phrase, word = m["qual"], m["phrase"], m["word"]
        raw = phrase if phrase is not None else word
        if qual:
            value = raw.strip()
            if value:
                (tags if qual == "tag:" else projects).append(value)
            continue
        prefix = phrase is None and raw.endswith("*")
        # With the breaks between runs, as the packet's text has them (``_tokens``).
        found = tuple(token for token, _, _ in _tokens(raw))
        if not found:
            continue
        if prefix and len(found[-1]) < MIN_PREFIX:
            raise QueryError(f"a prefix term needs at least {MIN_PREFIX} characters: {raw!r}")
        typed = raw.rstrip("*") if prefix else raw
        if phrase is None and len(found) > 1 and not prefix:
            # foo-bar, v1.2: FTS5 reads these as the phrase of their words; so do we
            terms.append(Term(found, text=typed))
        else:
            terms.append(Term(found, prefix, typed))
    if len(terms) + len(tags) + len(projects) > MAX_TERMS:
        raise QueryError(f"too many terms (max {MAX_TERMS})")
    if not terms and not tags and not projects:
        raise QueryError("nothing to search for")
    return Query(tuple(terms), tuple(tags), tuple(projects), text)


def plain_text(query: Query) -> str:
    """What ``query`` says in words, as typed (case kept): its terms without the
    qualifiers, quotes and prefix stars."""
    parts = []
    for m in _QUERY.finditer(query.text):
        if m["qual"]:
            continue
        raw = m["phrase"] if m["phrase"] is not None else m["word"]
        parts.append(raw.rstrip("*"))
    return " ".join(part for part in parts if part.strip())


def fts_expression(query: Query) -> str:
    """The FTS5 MATCH string: every term a quoted string, so nothing is an operator.

    Each string is the text as typed, which FTS5 cuts and folds with the tokenizer
    that indexed the packets: our ``fold`` differs from unicode61's outside Latin. Only
    its compatibility characters are made plain first (full-width ``ＡＰＩ`` is ``API``,
    as ``fold`` reads it too), which unicode61 keeps as they are."""
    parts = []
    for term in query.terms:
        typed = _compatibility_plain(term.text or " ".join(term.words))
        parts.append(_quoted(typed) + (" *" if term.prefix else ""))
    # Qualifiers narrow the match inside the index too (their column's words as a
    # phrase); the exact tag or project is still checked against the labels.
    for column, values in (("tags", query.tags), ("project", query.projects)):
        for value in values:
            if words(value):
                parts.append(f"{column} : {_quoted(value)}")
    return " AND ".join(parts)


def grams_expression(query: Query) -> str | None:
    """The MATCH string for SQLite's ``packet_grams`` when a term of ``query`` is in a
    script written without spaces, else None (``fts_expression`` on ``packet_fts``
    answers, as it always has). That table holds the words ``_tokens`` makes, one
    space apart (``gram_text``), so each term is the phrase of its own ``_tokens``:
    the pairs of a run in a row, whatever script the rest of the query is in."""
    if not any(has_grams(term.text or " ".join(term.words)) for term in query.terms):
        return None
    parts = [_quoted(" ".join(term.words)) + (" *" if term.prefix else "") for term in query.terms]
    for column, values in (("tags", query.tags), ("project", query.projects)):
        for value in values:
            if found := gram_text(value):
                parts.append(f"{column} : {_quoted(found)}")
    return " AND ".join(parts)


def _compatibility_plain(text: str) -> str:
    """Each character with a compatibility decomposition (full-width, half-width, a
    ligature, a superscript) in its plain form (NFKC), the others as they are: NFKC of
    the whole text would also split a letter Unicode keeps from composing (Devanagari's
    ड़, U+095C, into ड and a nukta, which unicode61 cuts as two words)."""
    return "".join(
        unicodedata.normalize("NFKC", ch) if unicodedata.decomposition(ch).startswith("<") else ch
        for ch in text
    )


def _quoted(text: str) -> str:
    # FTS5 reads a NUL as the end of the expression; it separates words, as a space does.
    return '"' + text.replace('"', '""').replace("\x00", " ") + '"'


# -- words that must not travel in a URL ---------------------------------------

ENTROPY_MIN_CHARS = 16  # shorter runs are words, ids and versions
ENTROPY_BITS = 3.5  # per character: random base64 is near 6, hex near 4, English 2.5-3.3


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_random(token: str) -> bool:
    """A run of letters and digits long and varied enough to be a key or a token."""
    core = token.strip(".,;:!?()[]{}<>\"'`")
    if len(core) < ENTROPY_MIN_CHARS:
        return False
    mixed = any(c.isdigit() for c in core) or (core.lower() != core and core.upper() != core)
    return mixed and _entropy(core) >= ENTROPY_BITS


def without_secrets(text: str) -> str:
    """``text`` without the words that could be a credential, for a query sent where it
    may be logged (a URL): each whitespace-separated word the secret scanner
    (``ltm.redact``) finds a secret in, or that ``looks_random``. Loads the scanner
    (tens of milliseconds): for the rare request that needs it."""
    from .redact import scan_text

    shown = [match.rstrip("…")[:12] for _kind, match in scan_text(text, masked=False)]
    kept = [
        word
        for word in text.split()
        if not looks_random(word) and not any(piece and piece in word for piece in shown)
    ]
    return " ".join(kept)


# -- what a packet contributes ----------------------------------------------


def load(body: bytes) -> dict[str, object]:
    """The packet's JSON object, or {} for bytes that are not one (a lenient oddity)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _texts(value: object) -> list[str]:
    """Every string in ``value``, depth first in order (dict values in their order)."""
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    _gather(value, out)
    return out


def _gather(value: object, out: list[str]) -> None:
    # One list filled in place, not a list a level: every write of a packet runs this.
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, list | dict):
            _gather(item, out)


def fields_of(data: dict[str, object]) -> dict[str, str]:
    """The searchable text of each field (lists joined by newlines)."""
    return {
        "goal": "\n".join(_texts(data.get("goal"))),
        "tags": " ".join(_texts(data.get("tags"))),
        "next_step": "\n".join(_texts(data.get("next_step"))),
        "project": project_of(data) or "",
        "decisions": "\n".join(_texts(data.get("decisions"))),
        "attempts": "\n".join(_texts(data.get("attempts"))),
        "methods": "\n".join(_texts(data.get("methods"))),
        "success_criteria": "\n".join(_texts(data.get("success_criteria"))),
        "constraints": "\n".join(_texts(data.get("constraints"))),
        "open_questions": "\n".join(_texts(data.get("open_questions"))),
    }


def tags_of(data: dict[str, object]) -> list[str]:
    tags = data.get("tags")
    if not isinstance(tags, list):
        return []
    return sorted({t for t in tags if isinstance(t, str) and t})


def project_of(data: dict[str, object]) -> str | None:
    project = data.get("project")
    name = project.get("name") if isinstance(project, dict) else None
    return name if isinstance(name, str) and name else None


def next_step_of(body: bytes) -> str:
    step = load(body).get("next_step")
    return step if isinstance(step, str) else ""


def parent_of(data: dict[str, object]) -> str | None:
    parent = data.get("parent_id")
    return parent if isinstance(parent, str) and parent else None


# Words too common to narrow a search. DynamoDB's term index leaves them out
# (each would be a posting in nearly every packet, a write per push and a huge
# list to read); a query's stop words are still checked on the packets found.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "no",
        "not",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)


# Words that say nothing about which work a prompt is about, besides the stop words:
# the small talk of prompts ("can you please fix this again").
_FILLER_TEXT = """
    about above after again against all also always am any anything are around ask back
    because been before being below between both but can cannot could did does doing done
    down during each else even ever every few first for from further get gets getting give
    go goes going gone good got great had has have having he hello help her here hers him
    his how however i i'm if into is it its just know last let lets like look looking made
    make makes making many may me might more most much must my need needs new next no nor
    not now of off ok okay on once one only or other our ours out over own please pick put
    quite rather really s same see seem she should show so some something still such sure t
    take than thank thanks that the their them then there these they thing things this those
    through time to today too try trying two under until up upon us use used using very want
    wants was way we well were what when where whether which while who why will with within
    without work working would yes yet you your yours add change check code continue file
    files fix fixing hey hi lets resume run runs running start started stuff tell think update
    ll ve re d m
"""
FILLER = frozenset(_FILLER_TEXT.split())


def term_weights(fields: dict[str, str]) -> dict[str, float]:
    """Each distinct word of a packet but stop words, with its weighted count (term index)."""
    weights: dict[str, float] = {}
    for name, text in fields.items():
        weight = WEIGHTS[name]
        for word in words(text):
            if word not in STOP_WORDS:
                weights[word] = weights.get(word, 0.0) + weight
    return weights


# -- matching and snippets ----------------------------------------------------


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """Each word of ``text`` folded, with where it stands in the original text; a run of
    a script written without spaces as its pairs (``_grams``), ``BREAK`` between two
    such runs."""
    if _GRAM_ANY.search(text) is None:
        return [(fold(m.group()), m.start(), m.end()) for m in _WORD.finditer(text)]
    out: list[tuple[str, int, int]] = []
    after_run = False
    for m in _PIECE.finditer(text):
        if m["run"] is None:
            out.append((fold(m.group()), m.start(), m.end()))
            after_run = False
            continue
        grams = _grams(m.group(), m.start())
        if not grams:
            continue  # marks alone
        if after_run:
            out.append((BREAK, m.start(), m.start()))
        out.extend(grams)
        after_run = True
    return out


def _term_spans(term: Term, tokens: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    spans = []
    n = len(term.words)
    for i in range(len(tokens) - n + 1):
        if all(
            _same(w, tokens[i + k][0], term.prefix and k == n - 1) for k, w in enumerate(term.words)
        ):
            spans.append((tokens[i][1], tokens[i + n - 1][2]))
    return spans


def matches(fields: dict[str, str], query: Query) -> bool:
    """Whether every term occurs (a phrase as consecutive words within one field)."""
    tokenized = [_tokens(text) for text in fields.values()]
    return all(any(_term_spans(term, tokens) for tokens in tokenized) for term in query.terms)


class Snippet(NamedTuple):
    field: str  # where it matched (the goal when only qualifiers were given)
    text: str  # a short excerpt of that field, one line
    highlights: tuple[tuple[int, int], ...]  # [start, end) character ranges of ``text``


def snippet(fields: dict[str, str], query: Query, width: int = SNIPPET_CHARS) -> Snippet:
    """The excerpt of the best field (by weight) that matched, with the matches marked."""
    best: tuple[str, str, list[tuple[int, int]]] | None = None
    for name in FIELD_NAMES:
        text = fields.get(name) or ""
        if not text or not query.terms:
            continue
        tokens = _tokens(text)
        spans = sorted(s for term in query.terms for s in _term_spans(term, tokens))
        if spans:
            best = (name, text, spans)
            break
    if best is None:
        name = "goal"
        text = fields.get("goal") or ""
        spans = []
    else:
        name, text, spans = best
    start = 0
    if spans and spans[0][1] > width:
        start = max(0, spans[0][0] - width // 3)
    end = min(len(text), start + width)
    excerpt = text[start:end]
    flat = " ".join(excerpt.split())  # one line: newlines and runs of spaces collapse
    # Map spans through the whitespace collapse by re-finding them in order.
    marks = []
    pos = 0
    for s, e in spans:
        if s < start or e > end:
            continue
        piece = " ".join(text[s:e].split())
        at = flat.find(piece, pos)
        if at >= 0:
            marks.append((at, at + len(piece)))
            pos = at + len(piece)
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    shift = len(prefix)
    return Snippet(
        name,
        prefix + flat + suffix,
        tuple((s + shift, e + shift) for s, e in marks),
    )
