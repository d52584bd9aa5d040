"""Meaning: a vector per packet and per query, from a static embedding model that ships
in a wheel, and the fusion of its ranking with the lexical one.

The optional extra ``ltm[semantic]`` installs ``wordllama``
(https://pypi.org/project/wordllama/), whose package folder holds a 256-dimension
token embedding table (``weights/l2_supercat_256.safetensors``: 32,000 rows of
float16) and the Llama 2 tokenizer it was trained with
(``tokenizers/l2_supercat_tokenizer_config.json``). A text's vector is the mean of
its tokens' rows, scaled to unit length: what ``WordLlamaInference.embed`` computes.
Both files are read here by path, never through ``WordLlama.load``: its default
path looks for the tokenizer under ``tokenizer/`` (the package has ``tokenizers/``)
and then downloads one. Nothing here ever uses the network.

Light on purpose, because prompt recall runs it in a hook on every prompt: the
standard library only (numpy, a dependency of the extra, only where many texts
are embedded at once). The tokenizer's vocabulary is read once from its JSON and
kept as a ``marshal`` file in the user's cache; a text is split as the tokenizer's
BPE does (sentencepiece's rule: merge the adjacent pair that makes the best piece,
the lowest id, until none does; byte pieces for characters outside the
vocabulary); only the rows a text needs are read from the weights file (the
safetensors layout: https://huggingface.co/docs/safetensors/index, an 8-byte
header length, a JSON header, then the raw little-endian tensor).

Stored form (``encode``): 32 bytes of sign bits, then 256 signed bytes (the unit
vector scaled so its largest component is 127). Ranking many stored vectors
(``rank``) takes the ``PREFILTER`` nearest by Hamming distance of the sign bits
(an ``int.bit_count`` each) and orders those by the cosine of the signed bytes.

Re-rank (``rerank``): the nearest ``RERANK_DEPTH`` by cosine are ordered again by
the cosine fused with a word match, the mean over the query's words of the cosine
of the packet's word nearest each (a word's vector: the sum of its tokens' rows).
It reads the candidates' texts, not their stored vectors, so nothing stored
changes; a hit's score stays its cosine.
"""

from __future__ import annotations

import functools
import heapq
import json
import marshal
import math
import operator
import os
import re
import struct
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

MODEL = "wordllama/l2_supercat_256"  # what stored vectors were made with
EXTRA = "ltm[semantic]"  # what installs it: pip install 'ltm[semantic]'
DIM = 256
BITS_BYTES = DIM // 8
STORED_BYTES = BITS_BYTES + DIM
PREFILTER = 64  # candidates the sign bits keep for the exact cosine
WARM_AFTER = 16  # texts a process embeds in plain Python before it loads the whole table
# A process keeps at most this many rows (512 bytes each) and word vectors (256 floats,
# 8 KB each) it made, so a long-lived one stays small whatever it was asked.
ROWS_KEPT = 8192
WORDS_KEPT = 1024
TEXT_CHARS = 4000  # of a packet's text embedded (its most telling fields come first)
# Characters of one word that BPE splits at once. Its cost grows with the square of a
# word's length (each merge scans the whole word), and no piece of the vocabulary is
# longer than 16 characters: a longer word (a hash, a blob, minified code, a sentence of
# a script written without spaces, all text anyone can push or prompt) is cut in pieces
# of this length first, so one word of ``TEXT_CHARS`` costs what a text of short ones does.
LONGEST_CHUNK = 64
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_OFF = ("0", "off", "false", "no")
_SPACE = "\u2581"  # sentencepiece's word mark
_CHUNKS = re.compile(f"{_SPACE}*[^{_SPACE}]+|{_SPACE}+")


class Unavailable(RuntimeError):
    """The extra is not installed, or its files are not where this version expects."""


@functools.cache
def package_folder() -> Path | None:
    """The installed ``wordllama`` package's folder, found without importing it (its
    ``__init__`` imports requests and more). Looked up once a process: a server asks
    at every push, and the lookup is a walk of ``sys.path``."""
    from importlib.util import find_spec

    try:
        spec = find_spec("wordllama")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def installed() -> bool:
    folder = package_folder()
    return folder is not None and folder.joinpath(*_WEIGHTS).is_file()


def enabled() -> bool:
    """Installed and not turned off (``LTM_SEMANTIC=0``)."""
    return why_off() is None


def why_off() -> str | None:
    """Why search by meaning is off in this process, as the user mends it: the variable
    that turns it off (pip would change nothing), or the extra to install; None when on."""
    value = os.environ.get("LTM_SEMANTIC", "").strip()
    if value.lower() in _OFF:
        return f"search by meaning is turned off here (LTM_SEMANTIC={value})"
    if not installed():
        folder = package_folder()
        if folder is not None:  # a wordllama that keeps its model elsewhere
            return f"search by meaning needs wordllama's model, not in {folder}: {_REINSTALL}"
        return f"search by meaning needs the semantic extra: pip install '{EXTRA}'"
    return None  # installed; whether its files can be read, ``model`` finds out


def _cache_dir() -> Path:
    if os.environ.get("LTM_CACHE_DIR"):
        return Path(os.environ["LTM_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "ltm"


class Model:
    """The vocabulary in memory and the weights file open; rows are read as needed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        weights = folder.joinpath(*_WEIGHTS)
        tokenizer = folder.joinpath(*_TOKENIZER)
        if not weights.is_file() or not tokenizer.is_file():
            raise Unavailable(f"wordllama's files are not in {folder}")
        self._file = open(weights, "rb")  # noqa: SIM115 - held for the model's life
        try:
            length = os.fstat(self._file.fileno()).st_size
            (size,) = struct.unpack("<Q", self._file.read(8))
            if size > length:  # a damaged length: never ask read() for that much
                raise Unavailable(f"{weights} is cut short")
            header = json.loads(self._file.read(size))
            tensor = header["embedding.weight"]
            rows, dim = tensor["shape"]
            if tensor["dtype"] != "F16" or dim != DIM:
                raise Unavailable(f"unexpected weights in {weights}: {tensor['dtype']} {dim}")
            self._data = 8 + size + tensor["data_offsets"][0]
            # Every row is read by an offset (``_rows``): a file cut short would fail a
            # search, or a save, on the first token past its end rather than here.
            if length < self._data + rows * DIM * 2:
                raise Unavailable(f"{weights} is cut short")
            self.vocab = _vocabulary(tokenizer, weights)
        except BaseException:
            self._file.close()
            raise
        self.rows = rows
        self._row = struct.Struct(f"<{DIM}e")
        self._lock = threading.Lock()
        # Rows read, as their bytes: unpacked, a row is 256 float objects (8 KB), and a
        # long-lived process (a server, the warm MCP helper) that searched by meaning
        # kept thousands of them (bench/bench_semantic.py measures what it gains).
        self._cache: dict[int, bytes] = {}
        self._bytes = [self.vocab.get(f"<0x{b:02X}>") for b in range(256)]
        self._words: dict[str, tuple[int, ...]] = {}
        self._word_rows: dict[str, tuple[tuple[float, ...], float] | None] = {}
        self._np_table: Any = None  # the whole table, once ``warm`` loaded it
        self._embedded = 0  # texts embedded by this process

    def close(self) -> None:
        self._file.close()

    # -- tokens --------------------------------------------------------------------

    def tokens(self, text: str) -> list[int]:
        """The token ids of ``text``, as the Llama tokenizer splits it: a word mark
        before the text and in place of each space, then BPE, which never joins a
        word mark to the piece before it (so each run of marks and what follows it is
        split alone, and remembered)."""
        ids: list[int] = []
        if not text.strip():
            return ids  # a lone word mark means nothing
        for whole in _CHUNKS.findall(_SPACE + text.replace(" ", _SPACE)):
            for start in range(0, len(whole), LONGEST_CHUNK):
                chunk = whole[start : start + LONGEST_CHUNK]
                found = self._words.get(chunk)
                if found is None:
                    found = self._bpe(chunk)
                    if len(self._words) < 200_000:
                        self._words[chunk] = found
                ids.extend(found)
        return ids

    def _bpe(self, word: str) -> tuple[int, ...]:
        vocab = self.vocab
        pieces = list(word)
        while len(pieces) > 1:
            best = best_at = -1
            for i in range(len(pieces) - 1):
                rank = vocab.get(pieces[i] + pieces[i + 1])
                if rank is not None and (best < 0 or rank < best):
                    best, best_at = rank, i
            if best_at < 0:
                break
            pieces[best_at : best_at + 2] = [pieces[best_at] + pieces[best_at + 1]]
        ids: list[int] = []
        for piece in pieces:
            known = vocab.get(piece)
            if known is not None:
                ids.append(known)
                continue
            for byte in piece.encode():  # byte fallback, as the tokenizer's
                if (fallback := self._bytes[byte]) is not None:
                    ids.append(fallback)
        return tuple(ids)

    # -- vectors -------------------------------------------------------------------

    def _rows(self, ids: Iterable[int]) -> list[tuple[float, ...]]:
        out = []
        width = self._row.size
        with self._lock:
            for token in ids:
                raw = self._cache.get(token)
                if raw is None:
                    self._file.seek(self._data + token * width)
                    raw = self._file.read(width)
                    if len(self._cache) < ROWS_KEPT:
                        self._cache[token] = raw
                out.append(self._row.unpack(raw))
        return out

    def vector(self, text: str) -> tuple[float, ...] | None:
        """``text``'s unit vector, or None when it has no token (or is all zeros). In
        plain Python, reading only the rows it needs, unless ``warm`` loaded the table."""
        ids = [t for t in self.tokens(text) if 0 <= t < self.rows]
        if not ids:
            return None
        self._embedded += 1
        if self._np_table is None and self._embedded > WARM_AFTER and _numpy_at_hand():
            self.warm()  # a long-lived process (a server's pushes): a tenth of the cost
        if self._np_table is not None:
            return self._np_vector(ids)
        counts: dict[int, int] = {}
        for token in ids:
            counts[token] = counts.get(token, 0) + 1
        total = [0.0] * DIM
        for token, row in zip(counts, self._rows(counts), strict=True):
            n = counts[token]
            total = [a + n * b for a, b in zip(total, row, strict=True)]
        return _unit(total)

    def word(self, word: str) -> tuple[tuple[float, ...], float] | None:
        """One word's vector (the sum of its tokens' rows, not scaled) and its length,
        remembered: ``word_match`` asks for the same words again and again."""
        if word in self._word_rows:
            return self._word_rows[word]
        ids = [t for t in self.tokens(word) if 0 <= t < self.rows]
        found: tuple[tuple[float, ...], float] | None = None
        if ids:
            rows = self._rows(ids)
            total = rows[0] if len(rows) == 1 else tuple(map(math.fsum, zip(*rows, strict=True)))
            norm = math.hypot(*total)
            if norm and math.isfinite(norm):
                found = (total, norm)
        if len(self._word_rows) < WORDS_KEPT:
            self._word_rows[word] = found
        return found

    def vectors(self, texts: Sequence[str]) -> list[tuple[float, ...] | None]:
        """Many texts at once (a backfill, an import): over the whole table, with numpy."""
        if len(texts) >= 16 and _numpy_at_hand():
            self.warm()
        return [self.vector(text) for text in texts]

    def warm(self) -> None:
        """Load the whole table (16 MB, with numpy), for a process that embeds many texts:
        a packet's vector then costs a tenth (bench/bench_semantic.py)."""
        if self._np_table is not None:
            return
        import numpy as np

        with self._lock:
            self._file.seek(self._data)
            raw = self._file.read(self.rows * DIM * 2)
        self._np_table = np.frombuffer(raw, dtype="<f2").reshape(self.rows, DIM)

    def _np_vector(self, ids: list[int]) -> tuple[float, ...] | None:
        import numpy as np

        total = self._np_table[np.asarray(ids, dtype=np.int64)].astype(np.float64).sum(axis=0)
        return _unit(total.tolist())


@functools.cache
def _numpy_at_hand() -> bool:
    """Whether numpy imports: a dependency of the extra, but plain Python makes the same
    vectors, so a numpy missing or broken (built for another Python) costs time only,
    never a save or a search. Tried once a process, when many texts are embedded."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def _unit(values: Sequence[float]) -> tuple[float, ...] | None:
    norm = math.sqrt(math.fsum(v * v for v in values))
    if not norm or not math.isfinite(norm):
        return None
    return tuple(v / norm for v in values)


def _vocabulary(tokenizer: Path, weights: Path) -> dict[str, int]:
    """The tokenizer's pieces and ids, from the user's cache when it is there, else read
    from the JSON and cached.

    The cache file is named after the install it was read from (the tokenizer's path)
    and that install's files: an upgrade makes a new one and removes the install's
    older ones, which nothing would read again (500 KB at each upgrade, for ever);
    another install's (a second venv) stay.
    """
    stat = tokenizer.stat()
    install = f"{zlib.crc32(os.fsencode(tokenizer.absolute())):08x}"
    key = f"{install}-{stat.st_size}-{int(stat.st_mtime)}-{weights.stat().st_size}"
    folder = _cache_dir()
    cache = folder / f"semantic-vocab-{key}.marshal"
    try:
        found = marshal.loads(cache.read_bytes())
        if isinstance(found, dict) and found:
            return found
    except (OSError, ValueError, EOFError, TypeError):
        pass
    vocab = json.loads(tokenizer.read_bytes())["model"]["vocab"]
    if not isinstance(vocab, dict):
        raise Unavailable(f"no vocabulary in {tokenizer}")
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        partial.write_bytes(marshal.dumps(vocab))
        os.replace(partial, cache)
        for older in folder.glob("semantic-vocab-*.marshal"):
            if older != cache and _outdated(older.name, install):
                older.unlink(missing_ok=True)
        # A write its process never finished (a hook killed by its harness's timeout).
        for left in folder.glob("semantic-vocab-*.tmp"):
            if left.stat().st_mtime < time.time() - _UNFINISHED_AFTER:
                left.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home: read the JSON each time, slower but right
    return vocab


_UNFINISHED_AFTER = 600.0  # seconds: no write of one file takes that long


def _outdated(name: str, install: str) -> bool:
    """Whether the cache file ``name`` is replaced by this install's new one: its own
    older one, or one named before caches named their install (``semantic-vocab-`` and
    three numbers: its install, if still used, writes it again under the new name)."""
    parts = name.removeprefix("semantic-vocab-").removesuffix(".marshal").split("-")
    return parts[0] == install or (len(parts) == 3 and all(p.isdigit() for p in parts))


_model: Model | None = None
_model_lock = threading.Lock()
# Why the model failed to load in this process, said again by each ``model`` call: its
# files are read once, and a broken install is not read again at every packet.
_broken: str | None = None
_REINSTALL = f"pip install --force-reinstall '{EXTRA}'"
# What reading a damaged file can raise: a short read (struct.error), JSON that does not
# parse (ValueError), a header or vocabulary of another shape (LookupError, TypeError).
_DAMAGED = (OSError, ValueError, LookupError, TypeError, struct.error)


def model() -> Model:
    """The process's model, loaded once; ``Unavailable``, with one line that says why and
    names the extra, without it or when its files cannot be read."""
    global _model, _broken
    if _model is None:
        with _model_lock:
            if _model is None:
                if _broken is not None:
                    raise Unavailable(_broken)
                folder = package_folder()
                if folder is None:
                    raise Unavailable(f"install {EXTRA} for search by meaning")
                try:
                    _model = Model(folder)
                except (Unavailable, *_DAMAGED) as exc:
                    detail = " ".join(str(exc).split())[:200] or type(exc).__name__
                    _broken = (
                        f"search by meaning is off: wordllama's model cannot be read"
                        f" ({detail}); reinstall it: {_REINSTALL}"
                    )
                    raise Unavailable(_broken) from None
    return _model


def loaded() -> bool:
    return _model is not None


# -- the stored form and its ranking -----------------------------------------------


def encode(vector: Sequence[float]) -> bytes:
    """Sign bits then signed bytes (see the module's docstring)."""
    bits = 0
    for i, v in enumerate(vector):
        if v > 0:
            bits |= 1 << i
    scale = 127.0 / (max(abs(v) for v in vector) or 1.0)
    quantized = bytes((round(v * scale) & 0xFF) for v in vector)
    return bits.to_bytes(BITS_BYTES, "little") + quantized


class Query(NamedTuple):
    bits: int
    values: tuple[int, ...]  # the signed bytes
    norm: float
    # Each distinct word of the query, its vector (unit length): what ``rerank`` matches
    # against a candidate's words. Empty for a query made from a vector alone.
    words: tuple[tuple[float, ...], ...] = ()


def _values(stored: bytes) -> tuple[tuple[int, ...], float]:
    values = _SIGNED.unpack_from(stored, BITS_BYTES)
    return values, math.sqrt(sum(map(operator.mul, values, values))) or 1.0


_SIGNED = struct.Struct(f"{DIM}b")


def query_of(vector: Sequence[float]) -> Query:
    stored = encode(vector)
    values, norm = _values(stored)
    return Query(int.from_bytes(stored[:BITS_BYTES], "little"), values, norm)


def cosine(query: Query, stored: bytes) -> float:
    values, norm = _values(stored)
    return sum(map(operator.mul, query.values, values)) / (query.norm * norm)


def candidates(
    query: Query, bits: Sequence[tuple[Any, bytes]], count: int = PREFILTER
) -> list[Any]:
    """The keys of the ``count`` rows of ``bits`` (key, the 32 bytes of sign bits) nearest
    ``query`` by Hamming distance, nearest first: one ``int.bit_count`` a row, in a
    comprehension (a plain loop costs five times as much at 10,000 rows)."""
    mine = query.bits
    from_bytes = int.from_bytes
    distance = [(mine ^ from_bytes(row[1], "little")).bit_count() for row in bits]
    chosen = heapq.nsmallest(count, range(len(distance)), key=distance.__getitem__)
    return [bits[i][0] for i in chosen]


def rank(
    query: Query, stored: Iterable[tuple[Any, bytes]], *, limit: int, floor: float = -1.0
) -> list[tuple[Any, float]]:
    """The ``limit`` nearest of ``stored`` (key, encoded vector) by cosine, above
    ``floor`` (none by default), best first (ties: the greater key first); the sign
    bits pick the ``PREFILTER`` candidates (``candidates``) where there are more."""
    rows = [row for row in stored if len(row[1]) == STORED_BYTES]
    if len(rows) > max(PREFILTER, limit):
        keep = set(candidates(query, [(n, row[1][:BITS_BYTES]) for n, row in enumerate(rows)]))
        rows = [row for n, row in enumerate(rows) if n in keep]
    scored = [(key, cosine(query, blob)) for key, blob in rows]
    scored = [item for item in scored if item[1] > floor]
    # Ties go to the greater key (on SQLite the newer packet), as a lexical search's do:
    # a packet saved again in the same words comes before its older copy either way.
    scored.sort(key=lambda item: (item[1], item[0]), reverse=True)
    return scored[:limit]


# -- what a packet means -------------------------------------------------------------

# The fields whose words say what a packet is about, in the order they are kept when
# a packet's text is longer than ``TEXT_CHARS``; the goal counts twice.
MEANING_FIELDS = ("goal", "goal", "tags", "next_step", "decisions", "attempts", "open_questions")
_WORDS = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")


def clean(text: str) -> str:
    """``text``'s words without stop words and prompt filler (``search.FILLER``): a mean
    of token rows is pulled toward what every text shares, and these words are most of
    it (on bench/semantic_corpus.json they cost a quarter of the right answers)."""
    from .search import FILLER, STOP_WORDS

    return " ".join(
        w
        for w in _WORDS.findall(text)
        if (low := w.lower()) not in FILLER and low not in STOP_WORDS
    )


def text_of(fields: dict[str, str]) -> str:
    """The text a packet's vector is made of (``search.fields_of``'s fields)."""
    return clean("\n".join(fields.get(name) or "" for name in MEANING_FIELDS)[:TEXT_CHARS])


def packet_vector(fields: dict[str, str]) -> bytes | None:
    """A packet's stored vector (``encode``), or None for a packet without words."""
    vector = model().vector(text_of(fields))
    return encode(vector) if vector is not None else None


def query_vector(text: str) -> Query | None:
    """What a query or a prompt means, ready for ``rank`` and ``rerank``; None when no
    word is left, or when the text holds Chinese, Japanese, Korean or Thai.

    The model learned English: its tokenizer reads those scripts a character or a byte at
    a time, and it puts two texts in them near each other whatever they say (two
    unrelated requests, far apart in English, are near in Korean, Japanese and Chinese:
    tests/test_semantic.py). A query in them is left to its words (``search`` cuts such
    a run into pairs of characters): meaning would rank noise, and a prompt's hint by
    meaning would name an unrelated packet.
    """
    from .search import has_grams

    if has_grams(text[:TEXT_CHARS]):
        return None
    words = clean(text[:TEXT_CHARS])
    found = model()
    vector = found.vector(words)
    if vector is None:
        return None
    rows = filter(None, map(found.word, dict.fromkeys(words.split()[:RERANK_WORDS])))
    units = tuple(unit for row, _norm in rows if (unit := _unit(row)) is not None)
    return query_of(vector)._replace(words=units)


# -- the re-rank of the nearest few --------------------------------------------------

# A mean of token rows blurs a text into one point, and a paraphrase's point can land
# nearer another packet's. The nearest ``RERANK_DEPTH`` are ordered again by the cosine
# fused with how well each of the query's words finds a word of the packet: the mean,
# over the query's words, of the cosine of the packet word nearest it (the recall of
# BERTScore, Zhang et al., ICLR 2020, https://arxiv.org/abs/1904.09675, with the
# model's static word vectors). "duplicate charges" then finds the packet that
# "Deduplicate"s Stripe events so they never "charge" twice, a match the mean drowns
# among the packet's other words. Measured on bench/semantic_corpus.json: recall@1
# from 23 of 30 to 25 (none lost), 24 with a weight of 0.1 to 0.3, the same at any
# depth from 5 to 20, and with a packet's first 32 to 64 words (24 with 16 or 24);
# alone, the match ranks far worse than the mean (every word has some near neighbour in
# a packet), so it only re-orders the nearest few. Its cost is a vector for each new
# word (a tokenization and a read of its rows), so the depth and the words bound it: a
# cold ``ltm search`` pays it whole (bench/bench_search.py's ratio, and ``nearest`` in
# bench/bench_semantic.py).
RERANK_DEPTH = 5
RERANK_WEIGHT = 0.2  # of the word match, the cosine weighing the rest
RERANK_WORDS = 32  # words of a packet (its goal and tags first) or a query matched


def word_match(query: Query, text: str) -> float:
    """The mean over ``query``'s words of the cosine of the word of ``text`` (a
    ``text_of``) nearest each; 0.0 when either has none. In plain Python: for unit
    ``q`` and ``v`` of length ``n``, q·v = (1 + n² - |q - v|²) / 2, so one
    ``math.dist`` (C) a pair."""
    found = model()
    # Only the first words get a vector: a long packet costs no more than a short one.
    rows = list(islice(filter(None, map(found.word, dict.fromkeys(text.split()))), RERANK_WORDS))
    if not query.words or not rows:
        return 0.0
    dist = math.dist
    total = 0.0
    for q in query.words:
        total += max((1.0 + n * n - dist(q, v) ** 2) / (2.0 * n) for v, n in rows)
    return total / len(query.words)


def rerank(
    query: Query, ranked: Sequence[tuple[Any, float]], texts: dict[Any, str]
) -> list[tuple[Any, float]]:
    """``ranked`` (key, cosine; best first, as ``rank`` gives it) with its first
    ``RERANK_DEPTH`` ordered by ``(1 - RERANK_WEIGHT) * cosine + RERANK_WEIGHT *
    word_match`` (``texts``: each key's ``text_of``). The scores stay the cosines: the
    floors measured on them (``SEMANTIC_FLOOR``, the prompt hint's) keep their sense."""
    if not query.words:
        return list(ranked)
    head, rest = list(ranked[:RERANK_DEPTH]), list(ranked[RERANK_DEPTH:])
    fused = {
        key: (1.0 - RERANK_WEIGHT) * cos + RERANK_WEIGHT * word_match(query, texts.get(key, ""))
        for key, cos in head
    }
    head.sort(key=lambda item: fused[item[0]], reverse=True)
    return head + rest


# -- fusion --------------------------------------------------------------------------

RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al., SIGIR 2009)
LEXICAL_WEIGHT = 1.0
SEMANTIC_WEIGHT = 1.0
SEMANTIC_ALONE_WEIGHT = 1.0  # when the words matched nothing, meaning is all there is
# Cosine under which a packet found by meaning alone is not a search result. No floor
# tells a right answer from a wrong one (a prompt about nothing saved reaches 0.3 with
# its nearest), so it only keeps the unrelated tail out of a list, and the list says
# which results are by meaning only (a hint asks for more: ``cli.agents.recall``).
# Chosen on bench/semantic_corpus.json's packets, by cosine alone, with short typed
# queries sharing no word with their packet: 0.15 keeps every right answer 0.1 kept
# and shows fewer than half the wrong packets; 0.2 starts losing right answers. A
# query about none of a store's packets ("oauth refresh" among email copy) meets
# them near 0.11 (tests/test_semantic.py). Search's recall@1 and precision@1 with
# it: BENCHMARKS.md, "Search and recall by meaning".
SEMANTIC_FLOOR = 0.15
FUSE_DEPTH = 20  # how many of each ranking are fused


def fuse(
    lexical: Sequence[Any], semantic: Sequence[tuple[Any, float]], *, limit: int
) -> list[tuple[Any, float]]:
    """Reciprocal rank fusion: each list adds ``weight / (RRF_K + rank)`` to a key's
    score (rank from 1); ties go to the lexical order, then the semantic one.
    https://plg.uwaterloo.ca/~gvcormac/cormacksigir09-rrf.pdf"""
    scores: dict[Any, float] = {}
    order: dict[Any, int] = {}
    for n, key in enumerate(lexical, start=1):
        scores[key] = scores.get(key, 0.0) + LEXICAL_WEIGHT / (RRF_K + n)
        order.setdefault(key, n)
    weight = SEMANTIC_WEIGHT if lexical else SEMANTIC_ALONE_WEIGHT
    for n, (key, _cos) in enumerate(semantic, start=1):
        scores[key] = scores.get(key, 0.0) + weight / (RRF_K + n)
        order.setdefault(key, len(lexical) + n)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))
    return ranked[:limit]
