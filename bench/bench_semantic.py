"""Search and recall by meaning: how often the right packet comes first, and what it costs.

    .venv/bin/python bench/bench_semantic.py [--quality] [--packets N]

Quality, on ``bench/semantic_corpus.json`` (one project's packets; prompts that say
what one packet is about in other words, checked here to share no word with it
but stop words and prompt filler; prompts about nothing saved). A local store holds
the packets; each prompt is searched as typed (``ltm search``) in each mode:
recall@1 (the wanted packet first, over the prompts that want one) and precision@1
(the first result right, over the prompts that got one; a result for a prompt that
wants none is wrong). Then prompt recall (``cli.agents.recall.best``, the hint of
``ltm hook user-prompt``) by words alone and with meaning: hint precision, coverage
and false hints, on this corpus and on ``bench/recall_corpus.json`` (the lexical
corpus, which must not get worse).

Cost, at ``--packets`` (default 10,000) packets: the model's load in a fresh
process, a query's vector, a packet's vector (plain Python, and numpy once the
table is loaded), filling a store's vectors, and ``nearest`` (the meaning half of
a hybrid search; the lexical half is ``bench/bench_search.py``'s). And the memory a
long-lived process (a server, the warm MCP helper), its table loaded, gains from
searches by meaning of ever new words: what its caches hold, which must stay bounded
(target 32 MB; they keep at most 8,192 rows as bytes and 1,024 word vectors). The hook's own
latency with meaning on is ``bench/bench_recall.py``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import user_env
from results import Figure, record  # (common imports it first: the load is read at the start)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).with_name("semantic_corpus.json")
LEXICAL_CORPUS = Path(__file__).with_name("recall_corpus.json")
MODES = ("lexical", "semantic", "hybrid")
FIGURES: list[Figure] = []
NOTES: list[str] = []


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def check_paraphrases(corpus: dict[str, Any]) -> None:
    """A prompt shares no word (nor a stem, as recall cuts them) with its packet, leaving
    out stop words and filler: else the words would find it, and meaning is not measured."""
    from ltm import search
    from ltm.cli.agents.recall import stem

    def words(text: str) -> set[str]:
        quiet = search.FILLER | search.STOP_WORDS
        return {stem(w) for w in search.words(text) if w not in quiet}

    packets = {item["key"]: item for item in corpus["packets"]}
    for case in corpus["prompts"]:
        if case["want"] is None:
            continue
        fields = search.fields_of(packets[case["want"]])
        shared = words(case["text"]) & words(" ".join(fields.values()))
        if shared:
            raise SystemExit(f"{case['text']!r} shares {sorted(shared)} with {case['want']}")


def environment(tmp: Path) -> dict[str, str]:
    env = user_env()
    env.update(
        LTM_CONFIG_DIR=str(tmp / "config"),
        LTM_DATA_DIR=str(tmp / "data"),
        LTM_STATE_DIR=str(tmp / "state"),
        LTM_CACHE_DIR=str(tmp / "cache"),
    )
    return env


def fill(env: dict[str, str], corpus: dict[str, Any]) -> dict[str, str]:
    from bench_recall import fill as fill_store

    return fill_store(env, corpus, len(corpus["packets"]))


def search_quality(corpus: dict[str, Any], keys: dict[str, str]) -> None:
    from ltm.cli.client.backend import LocalBackend
    from ltm.cli.errors import CliError

    names = {v: k for k, v in keys.items()}
    backend = LocalBackend.open()
    try:
        for mode in MODES:
            right = answered = 0
            wanted = sum(case["want"] is not None for case in corpus["prompts"])
            for case in corpus["prompts"]:
                try:
                    hits = backend.search(case["text"], limit=1, mode=mode)
                except CliError:  # too many words for the query language: no answer
                    hits = []
                if not hits:
                    continue
                answered += 1
                right += case["want"] is not None and names.get(hits[0]["id"]) == case["want"]
            recall = right / max(wanted, 1)
            precision = right / max(answered, 1)
            print(f"  {mode:9} recall@1 {recall:.3f} precision@1 {precision:.3f}")
            target = 0.8 if mode == "hybrid" else None
            FIGURES.append(
                Figure(f"ltm search, {mode}: recall@1", recall, "", "higher", target=target)
            )
            FIGURES.append(Figure(f"ltm search, {mode}: precision@1", precision, "", "higher"))
    finally:
        backend.close()


def hint_quality(corpus: dict[str, Any], keys: dict[str, str], label: str) -> None:
    from bench_recall import tally_hints

    from ltm.cli.agents import recall
    from ltm.cli.client.backend import LocalBackend

    names = {v: k for k, v in keys.items()}
    backend = LocalBackend.open()
    # The ways that gave no hint at all: no precision, no coverage, no false hint (NOTES
    # says so in one line, where three rows of a table would say nothing more).
    silent: list[str] = []
    try:
        for meaning in (False, True):
            recall.meaning_on = lambda on=meaning: on  # type: ignore[misc]
            hints, right, false_hints, wanted = tally_hints(backend, corpus, names)
            how = "words and meaning" if meaning else "words alone"
            precision = right / max(hints, 1)
            coverage = right / max(wanted, 1)
            print(
                f"  {label}, {how}: precision {right}/{hints}, coverage {right}/{wanted},"
                f" false hints {false_hints}"
            )
            name = f"hints on {label}, {how}"
            if not hints:
                silent.append(how)
                continue
            target = 0.9 if meaning else None
            FIGURES.append(Figure(f"{name}: precision", precision, "", "higher", target=target))
            FIGURES.append(Figure(f"{name}: coverage", coverage, "", "higher"))
            FIGURES.append(Figure(f"{name}: false hints", false_hints, ""))
    finally:
        backend.close()
    if silent:
        NOTES.append(
            f"hints on {label}, {' or '.join(silent)}: no hint given (no precision, coverage 0,"
            " no false hint)"
        )


def quality(tmp: Path) -> None:
    corpus = load(CORPUS)
    check_paraphrases(corpus)
    env = environment(tmp / "semantic")
    keys = fill(env, corpus)
    print(f"{CORPUS.name}: {len(corpus['packets'])} packets, {len(corpus['prompts'])} prompts")
    search_quality(corpus, keys)
    hint_quality(corpus, keys, "semantic_corpus")
    lexical = load(LEXICAL_CORPUS)
    env = environment(tmp / "lexical")
    keys = fill(env, lexical)
    hint_quality(lexical, keys, "recall_corpus")


def _load_in_fresh_process(env: dict[str, str]) -> float:
    code = (
        "import time; t = time.perf_counter(); from ltm import semantic; m = semantic.model();"
        " m.vector('warm'); print((time.perf_counter() - t) * 1000)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


_SEARCHES = 3000
_LONG_LIVED = f"""
import random, gc
from ltm import semantic
def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024
m = semantic.model()
m.warm()
random.seed(1)
words = sorted(w[1:] for w in m.vocab if w.startswith("\u2581") and w[1:].isalpha())
gc.collect()
base = rss()
for _ in range({_SEARCHES}):
    query = semantic.query_vector(" ".join(random.sample(words, 6)))
    semantic.word_match(query, " ".join(random.sample(words, 40)))
gc.collect()
print(rss() - base)
"""


def _long_lived_growth(env: dict[str, str]) -> float:
    """What a long-lived process (a server, the warm MCP helper), its table loaded, gains
    in resident memory from searches by meaning of ever new words: its caches' bound."""
    out = subprocess.run(
        [sys.executable, "-c", _LONG_LIVED], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


def cost(tmp: Path, packets: int) -> None:
    env = environment(tmp / "cost")
    os.environ.update(env)
    _load_in_fresh_process(env)  # the first one writes the vocabulary's cache
    loads = [_load_in_fresh_process(env) for _ in range(5)]
    FIGURES.append(
        Figure("model load in a fresh process (median of 5)", statistics.median(loads), "ms")
    )
    if Path("/proc/self/status").exists():
        FIGURES.append(
            Figure(
                f"memory a long-lived process gains from {_SEARCHES:,} searches by meaning",
                _long_lived_growth(env),
                "MB",
                target=32.0,
            )
        )

    from bench_search import seed_sqlite
    from corpus import packet as corpus_packet

    from ltm import search, semantic
    from ltm.store.sqlite import SqliteStore

    model = semantic.model()
    texts = [
        semantic.text_of(search.fields_of(corpus_packet(n, f"01SEMBENCH{n:016d}")))
        for n in range(300)
    ]
    started = time.perf_counter()
    for text in texts:
        model.vector(text)
    plain = (time.perf_counter() - started) / len(texts) * 1000
    model.warm()
    started = time.perf_counter()
    model.vectors(texts)
    warm = (time.perf_counter() - started) / len(texts) * 1000
    prompts = [case["text"] for case in load(CORPUS)["prompts"]]
    started = time.perf_counter()
    for prompt in prompts:
        semantic.query_vector(prompt)
    query = (time.perf_counter() - started) / len(prompts) * 1000
    FIGURES.extend(
        [
            Figure("a packet's vector, plain Python", plain, "ms"),
            Figure("a packet's vector, numpy (table loaded)", warm, "ms"),
            Figure("a prompt's vector", query, "ms"),
        ]
    )
    db = tmp / "cost" / "bench.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    os.environ["LTM_SEMANTIC"] = "0"  # seeded without vectors: the fill is measured
    seed_sqlite(db, "u1", packets)
    del os.environ["LTM_SEMANTIC"]
    store = SqliteStore(db)
    try:
        started = time.perf_counter()
        store.fill_vectors()
        filled = time.perf_counter() - started
        FIGURES.append(Figure(f"fill_vectors, {packets:,} packets", filled, "s"))
        times = []
        for prompt in prompts * 3:
            meaning = semantic.query_vector(prompt)
            assert meaning is not None
            started = time.perf_counter()
            store.nearest(meaning, search.parse("x"), scopes=[("u1", None)], limit=20)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        FIGURES.append(Figure(f"nearest, {packets:,} packets: p50", statistics.median(times), "ms"))
        p95 = times[round(0.95 * (len(times) - 1))]
        FIGURES.append(Figure(f"nearest, {packets:,} packets: p95", p95, "ms"))
        print(f"  nearest at {packets}: p50 {statistics.median(times):.1f} ms, p95 {p95:.1f} ms")
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", action="store_true", help="only the quality part")
    parser.add_argument("--packets", type=int, default=10_000)
    args = parser.parse_args()
    from ltm import semantic

    if not semantic.installed():
        raise SystemExit("needs the semantic extra: pip install -e '.[semantic]'")
    with tempfile.TemporaryDirectory() as tmp:
        quality(Path(tmp))
        if not args.quality:
            cost(Path(tmp), args.packets)
    for figure in FIGURES:
        print(f"  {figure.name}: {figure.value:.3f} {figure.unit}")
    if not args.quality:
        record("semantic", FIGURES, notes=NOTES)


if __name__ == "__main__":
    main()
