"""Search by meaning: the model read from wordllama's package folder (no network), the
vectors kept beside each packet in SQLite, ``nearest``, the fill of an older store, and
the hybrid ranking of ``service.search``."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ltm import packet, search, semantic
from ltm.service import search as searching
from ltm.service.access import Caller
from ltm.service.errors import BadRequest
from ltm.store import PacketMeta, StoredPacket, User
from ltm.store.sqlite import SqliteStore
from ltm.store.sqlite_schema import VECTORS_VERSION

pytestmark = pytest.mark.skipif(not semantic.installed(), reason="needs ltm[semantic]")

PACKETS = {
    "oauth": (
        "Rotate OAuth refresh tokens on every use and revoke the old one",
        "Add reuse detection: a replayed refresh token ends the whole grant",
    ),
    "pool": (
        "Fix Postgres connection pool exhaustion under peak load",
        "Set pgbouncer to transaction mode and cap the pool at 40 connections",
    ),
    "i18n": (
        "Translate the storefront into German and French",
        "Extract the remaining hard-coded strings from the cart templates",
    ),
}


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Any connection attempt fails the test: the model is the package's files alone."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the semantic model tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("LTM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LTM_SEMANTIC", raising=False)


def _stored(
    key: str, owner: str = "u1", n: int = 0, more: dict[str, Any] | None = None
) -> tuple[StoredPacket, str]:
    goal, step = PACKETS[key] if more is None else (more["goal"], more["next_step"])
    data = {
        "ltm_version": "0.2",
        "id": f"01SEMANTIC{key.upper():0<6}{owner.upper():0<4}{n:06d}"[:26],
        "created_at": f"2026-01-0{1 + n % 9}T00:00:00Z",
        "project": {"name": "shop"},
        "goal": goal,
        "next_step": step,
        "tags": [key],
        **(more or {}),
    }
    meta = PacketMeta(data["id"], data["created_at"], goal, owner, None, "shop")
    return StoredPacket(meta, packet.canonical_bytes(data)), packet.created_at_sort_key(
        data["created_at"]
    )


def _put(
    store: SqliteStore, key: str, owner: str = "u1", n: int = 0, more: dict[str, Any] | None = None
) -> str:
    stored, sort_key = _stored(key, owner, n, more)
    store.put_packet(stored, sort_key=sort_key)
    return stored.meta.id


def _near(store: SqliteStore, text: str, owner: str = "u1", q: str = "x") -> list[str]:
    meaning = semantic.query_vector(text)
    assert meaning is not None
    hits = store.nearest(meaning, search.parse(q), scopes=[(owner, None)], limit=5)
    return [hit.meta.id for hit in hits]


def test_the_model_loads_from_the_package_folder_without_the_network() -> None:
    model = semantic.Model(semantic.package_folder())  # type: ignore[arg-type]
    try:
        vector = model.vector("sign-in session expires too early")
        assert vector is not None and len(vector) == semantic.DIM
        assert abs(sum(v * v for v in vector) - 1.0) < 1e-9
        assert model.vector("") is None
    finally:
        model.close()
    # The vocabulary was cached for the next process, and is read back the same.
    assert len(list(Path(os.environ["LTM_CACHE_DIR"]).glob("semantic-vocab-*.marshal"))) == 1
    again = semantic.Model(semantic.package_folder())  # type: ignore[arg-type]
    assert again.vocab == model.vocab
    again.close()


def test_tokens_are_the_tokenizers_own() -> None:
    from tokenizers import Tokenizer

    folder = semantic.package_folder()
    assert folder is not None
    reference = Tokenizer.from_file(
        str(folder / "tokenizers" / "l2_supercat_tokenizer_config.json")
    )
    model = semantic.model()
    for text in [
        "Rotate OAuth refresh tokens on every use",
        "pgbouncer's transaction mode, capped at 40 connections (not 500)!",
        "Übersetzung des Ladens ins Deutsche — und 日本語",
        "line one\nline two",
    ]:
        assert model.tokens(text) == reference.encode(text, add_special_tokens=False).ids


def test_a_word_of_any_length_is_split_in_bounded_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """A packet or prompt of one long word (a blob, or a script without spaces) is cut
    before BPE, whose cost grows with the square of a word's length: the pieces still
    come from the vocabulary, the words of ordinary text are split as the tokenizer's."""
    model = semantic.Model(semantic.package_folder())  # type: ignore[arg-type]
    seen: list[int] = []
    bpe = model._bpe
    monkeypatch.setattr(model, "_bpe", lambda word: (seen.append(len(word)), bpe(word))[1])
    try:
        blob = "Zq8" * (semantic.TEXT_CHARS // 3)
        assert model.tokens(blob) and model.vector(blob) is not None
        assert max(seen) <= semantic.LONGEST_CHUNK
        words = "Rotate OAuth refresh tokens on every use"
        assert model.tokens(words) == semantic.model().tokens(words)
        assert semantic.packet_vector({"goal": "x" * 10 * semantic.TEXT_CHARS}) is not None
    finally:
        model.close()


def test_a_saved_packet_gets_its_vector_beside_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ltm.db")
    pid = _put(store, "oauth")
    db = sqlite3.connect(tmp_path / "ltm.db")
    rows = db.execute(
        "SELECT p.id, length(v.vector) FROM packets p JOIN packet_vectors v USING (doc)"
    )
    assert rows.fetchall() == [(pid, semantic.STORED_BYTES)]
    assert store.vectors_missing() == 0
    # Saved again (same id), the packet keeps one vector; deleted, it has none.
    _put(store, "oauth")
    assert db.execute("SELECT count(*) FROM packet_vectors").fetchone() == (1,)
    assert store.delete_packet(pid)
    assert db.execute("SELECT count(*) FROM packet_vectors").fetchone() == (0,)
    db.close()
    store.close()


def test_nearest_finds_a_paraphrase_in_the_callers_scopes_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ltm.db")
    mine = {key: _put(store, key) for key in PACKETS}
    found = _near(store, "my login keeps timing out on phones, renewal credentials")
    assert found[0] == mine["oauth"]
    assert _near(store, "too many open database links at busy hours")[0] == mine["pool"]
    # Another user's packets change nothing in what this caller gets, and are never shown.
    before = _near(store, "localize the shop for Berlin and Paris visitors")
    for n in range(5):
        _put(store, "i18n", owner="u2", n=n)
    after = _near(store, "localize the shop for Berlin and Paris visitors")
    assert before == after and before[0] == mine["i18n"]
    assert _near(store, "localize the shop for Berlin", owner="nobody") == []
    # Qualifiers hold: a tag the packet lacks finds nothing.
    assert _near(store, "renewal credentials", q="tag:i18n")[0] == mine["i18n"]
    assert _near(store, "renewal credentials", q="tag:nosuch") == []
    store.close()


# Packets (of bench/semantic_corpus.json) whose mean vectors sit close together.
FULLER = {
    "stripe": {
        "goal": "Make the Stripe payment webhook idempotent so retries never charge twice",
        "tags": ["payments", "stripe"],
        "next_step": "Store the event id in webhook_events before handling the event",
        "decisions": [
            {
                "what": "Deduplicate on Stripe's event id",
                "why": "Stripe redelivers the same event id",
            }
        ],
    },
    "gdpr": {
        "goal": "Let customers download all their personal data as a GDPR export",
        "tags": ["privacy", "gdpr"],
        "next_step": (
            "Bundle orders, addresses and consent history into one zip in a background job"
        ),
    },
    "logs": {
        "goal": "Cut the logging bill by dropping debug logs in production",
        "tags": ["observability", "costs"],
        "next_step": "Sample info-level request logs at ten percent and keep every error",
    },
    "oauth": {
        "goal": "Rotate OAuth refresh tokens on every use and revoke the old one",
        "tags": ["auth", "oauth"],
        "next_step": "Add reuse detection: a replayed refresh token ends the whole grant",
        "decisions": [
            {
                "what": "Refresh tokens live 30 days, access tokens 15 minutes",
                "why": "The mobile app stays signed in for a month",
            }
        ],
    },
}


def test_the_nearest_few_are_ordered_again_by_their_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paraphrase whose mean vector lands nearer another packet is found first by the
    re-rank: "duplicate charges" matches "Deduplicate ... charge", which the mean drowns."""
    store = SqliteStore(tmp_path / "ltm.db")
    ids = {key: _put(store, key, more=more) for key, more in FULLER.items()}
    prompts = {
        "duplicate charges when card callbacks arrive again": ids["stripe"],
        "my login keeps timing out too soon on phones": ids["oauth"],
    }
    for prompt, wanted in prompts.items():
        meaning = semantic.query_vector(prompt)
        assert meaning is not None and meaning.words
        hits = store.nearest(meaning, search.parse("x"), scopes=[("u1", None)], limit=4)
        assert hits[0].meta.id == wanted
        # The scores stay the cosines: here the first is not the highest.
        cosines = sorted(((hit.score, hit.meta.id) for hit in hits), reverse=True)
        assert cosines[0][1] != wanted
    # By the cosine alone (a query without its words), the mean puts another packet first.
    for prompt, wanted in prompts.items():
        meaning = semantic.query_vector(prompt)
        assert meaning is not None
        bare = meaning._replace(words=())
        hits = store.nearest(bare, search.parse("x"), scopes=[("u1", None)], limit=4)
        assert hits[0].meta.id != wanted
    store.close()


def test_the_rerank_orders_the_nearest_few_only_and_keeps_their_cosines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    meaning = semantic.query_vector("duplicate charges")
    assert meaning is not None
    monkeypatch.setattr(semantic, "RERANK_DEPTH", 2)
    ranked = [("export", 0.30), ("stripe", 0.29), ("far", 0.10), ("farther", 0.05)]
    texts = {
        "export": "customers download personal data GDPR export",
        "stripe": "Deduplicate Stripe event charge twice",
        "far": "Deduplicate charges",  # past the depth: stays where the cosine put it
    }
    assert semantic.rerank(meaning, ranked, texts) == [ranked[1], ranked[0], *ranked[2:]]
    assert semantic.rerank(meaning._replace(words=()), ranked, texts) == ranked
    assert semantic.word_match(meaning, texts["stripe"]) > semantic.word_match(
        meaning, texts["export"]
    )
    assert semantic.word_match(meaning, "") == 0.0


def test_an_older_store_is_filled_once_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LTM_SEMANTIC", "0")
    store = SqliteStore(tmp_path / "ltm.db")
    for n in range(30):
        _put(store, list(PACKETS)[n % 3], n=n)
    assert store.vectors_missing() == 30
    monkeypatch.delenv("LTM_SEMANTIC")
    seen: list[tuple[int, int]] = []
    assert store.fill_vectors(lambda done, total: seen.append((done, total))) == 30
    assert seen[-1] == (30, 30)
    assert store.vectors_missing() == 0
    assert store.fill_vectors() == 0
    # Vectors of another model are never compared with this one's, and are all made again.
    near = semantic.query_vector("database sockets")
    assert near is not None
    assert store.nearest(near, search.parse("x"), scopes=[("u1", None)], limit=5)
    store._conn().execute("UPDATE vector_model SET name = 'an older model'")
    assert store.nearest(near, search.parse("x"), scopes=[("u1", None)], limit=5) == []
    assert store.vectors_missing() == 30
    assert store.fill_vectors() == 30
    assert store.nearest(near, search.parse("x"), scopes=[("u1", None)], limit=5)
    store.close()


def test_packets_without_a_vector_are_counted_exactly_and_from_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(tmp_path / "ltm.db")
    db = store._conn()

    def truth() -> int:
        return int(
            db.execute(
                "SELECT count(*) FROM packets p WHERE NOT EXISTS"
                " (SELECT 1 FROM packet_vectors v WHERE v.doc = p.doc)"
            ).fetchone()[0]
        )

    keys = list(PACKETS)
    with_vector = [_put(store, key, n=n) for n, key in enumerate(keys)]
    monkeypatch.setenv("LTM_SEMANTIC", "0")
    without = [_put(store, key, n=10 + n) for n, key in enumerate(keys)]
    assert store.vectors_missing() == truth() == len(without)
    # Saved again with meaning on, a packet gets its vector; saved again with it off, one
    # loses it; deleted, a packet counts no more, with or without its vector.
    monkeypatch.delenv("LTM_SEMANTIC")
    _put(store, keys[0], n=10)
    monkeypatch.setenv("LTM_SEMANTIC", "0")
    _put(store, keys[1], n=1)
    assert store.delete_packet(without[2]) and store.delete_packet(with_vector[2])
    assert store.vectors_missing() == truth() == 2
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    store.vectors_missing()
    db.set_trace_callback(None)
    plans = " ".join(
        str(row)
        for sql in statements
        if "count(" in sql
        for row in db.execute("EXPLAIN QUERY PLAN " + sql)
    )
    assert "USING COVERING INDEX packet_vectors_by_doc" in plans, plans
    store.close()


def test_a_database_of_the_previous_version_gains_the_vector_tables(tmp_path: Path) -> None:
    path = tmp_path / "ltm.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    db.executescript(
        "DROP TRIGGER vectors_end_with_packet; DROP TABLE packet_vectors;"
        f" DROP TABLE vector_model; PRAGMA user_version = {VECTORS_VERSION - 1};"
    )
    db.close()
    store = SqliteStore(path)
    _put(store, "pool")
    assert store.vectors_missing() == 0
    store.close()


@pytest.fixture()
def served(tmp_path: Path) -> tuple[SqliteStore, Caller, dict[str, str]]:
    from datetime import UTC, datetime

    from ltm.ids import new_ulid

    store = SqliteStore(tmp_path / "ltm.db")
    user = User(new_ulid(), "me", datetime.now(UTC))
    store.create_user(user)
    ids = {key: _put(store, key, owner=user.id) for key in PACKETS}
    return store, user, ids


def test_hybrid_ranks_words_and_meaning_together(
    served: tuple[SqliteStore, Caller, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, caller, ids = served
    # Words that match nothing: meaning alone answers, and the closest comes first.
    hybrid = "hybrid"
    found = searching.search(
        store, caller, "database runs out of sockets when traffic peaks", mode=hybrid
    )
    assert found and found[0].meta.id == ids["pool"]
    # A word that matches keeps its lexical hit (its snippet marks the word) on top,
    # and the packets found by meaning alone follow it.
    found = searching.search(store, caller, "pgbouncer", mode=hybrid)
    assert found[0].meta.id == ids["pool"] and found[0].highlights
    assert not any(hit.highlights for hit in found[1:])
    # Each says how it was found: the words, or meaning alone.
    assert [hit.matched for hit in found] == ["words"] + ["meaning"] * (len(found) - 1)
    by_words = searching.search(store, caller, "pgbouncer", mode="lexical")
    assert [hit.matched for hit in by_words] == ["words"]
    alone = searching.search(store, caller, "pgbouncer", mode="semantic")
    assert alone and {hit.matched for hit in alone} == {"meaning"}
    # Without a mode the search is lexical, as it always was.
    assert [hit.meta.id for hit in searching.search(store, caller, "pgbouncer")] == [ids["pool"]]
    lexical = searching.search(store, caller, "relational store links", mode="lexical")
    assert lexical == []
    by_meaning = searching.search(store, caller, "German French", mode="semantic", limit=1)
    assert [hit.meta.id for hit in by_meaning] == [ids["i18n"]]
    assert 0 < by_meaning[0].score <= 1
    with pytest.raises(BadRequest, match="mode"):
        searching.search(store, caller, "x", mode="fuzzy")
    monkeypatch.setenv("LTM_SEMANTIC", "0")
    with pytest.raises(BadRequest, match=r"ltm\[semantic\]"):
        searching.search(store, caller, "x", mode="semantic")
    assert searching.search(store, caller, "relational store links") == []
    store.close()


def test_a_model_that_breaks_under_a_server_is_said_as_a_missing_extra(
    served: tuple[SqliteStore, Caller, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its packets' vectors made, the server's model then unreadable (its weights cut
    short): a search by meaning is a 400 naming the extra, which the CLI takes as the
    sign to ask for the words alone (``Backend.find``); the words still answer."""
    store, caller, ids = served
    real = semantic.package_folder()
    assert real is not None
    broken = tmp_path / "wordllama"
    for part in (semantic._WEIGHTS, semantic._TOKENIZER):
        broken.joinpath(part[0]).mkdir(parents=True)
        broken.joinpath(*part).write_bytes(real.joinpath(*part).read_bytes())
    weights = broken.joinpath(*semantic._WEIGHTS)
    weights.write_bytes(weights.read_bytes()[:100_000])
    monkeypatch.setattr(semantic, "package_folder", lambda: broken)
    monkeypatch.setattr(semantic, "_model", None)
    monkeypatch.setattr(semantic, "_broken", None)
    for mode in ("hybrid", "semantic"):
        with pytest.raises(BadRequest, match=r"cannot be read .* 'ltm\[semantic\]'"):
            searching.search(store, caller, "database sockets", mode=mode)
    assert [hit.meta.id for hit in searching.search(store, caller, "pgbouncer")] == [ids["pool"]]
    store.close()


# A labelled set: packets of bench/semantic_corpus.json, short queries sharing no word
# with the packet they are about, and one about none of them. Their cosines (0.17 to
# 0.23 for the right ones, 0.11 for the unrelated one) are what the floor sits between.
FLOOR_PACKETS = {
    "rate": ("Rate-limit the public API per key so one client cannot starve the others", "api"),
    "cart": ("Send a reminder email when a shopper leaves items in the cart for a day", "email"),
    "stripe": ("Make the Stripe payment webhook idempotent so retries never charge twice", "pay"),
    "copy": ("Rewrite the welcome email copy to sound friendlier", "copywriting"),
    "subject": ("Write the subject lines for the spring sale email campaign", "marketing"),
}
FLOOR_QUERIES = {
    "throttling clients": "rate",
    "abandoned basket": "cart",
    "duplicate charges": "stripe",
    "oauth refresh": None,  # about none of them: nothing to show
}


def test_a_weak_neighbour_by_meaning_is_not_a_result(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from ltm.ids import new_ulid

    store = SqliteStore(tmp_path / "ltm.db")
    user = User(new_ulid(), "me", datetime.now(UTC))
    store.create_user(user)
    ids = {
        key: _put(store, key, user.id, n, {"goal": goal, "next_step": "go on", "tags": [tag]})
        for n, (key, (goal, tag)) in enumerate(FLOOR_PACKETS.items())
    }
    for query, want in FLOOR_QUERIES.items():
        found = searching.search(store, user, query, mode="hybrid")
        assert all(hit.matched == "meaning" for hit in found)
        if want is None:
            assert found == [], [(hit.meta.goal, hit.score) for hit in found]
        else:
            assert found[0].meta.id == ids[want], query
    store.close()


def test_equal_packets_come_newest_first_by_meaning_as_by_words(
    served: tuple[SqliteStore, Caller, dict[str, str]],
) -> None:
    store, caller, ids = served
    goal, step = PACKETS["pool"]
    same = {"id": "01SEMANTICPOOLSAVEDAGAIN00", "goal": goal, "next_step": step, "tags": ["pool"]}
    again = _put(store, "pool", caller.id, n=1, more=same)  # the same words, saved later
    for mode in ("lexical", "semantic", "hybrid"):
        found = searching.search(store, caller, "pgbouncer", mode=mode, limit=2)
        assert [hit.meta.id for hit in found] == [again, ids["pool"]], mode
    store.close()


def test_fusion_is_reciprocal_rank() -> None:
    fused = semantic.fuse(["a", "b"], [("b", 0.9), ("c", 0.8)], limit=3)
    keys = [key for key, _ in fused]
    assert keys == ["b", "a", "c"]  # b is in both lists
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert semantic.fuse([], [("c", 0.8)], limit=3) == [("c", pytest.approx(1 / 61))]


def test_plain_text_keeps_the_words_as_typed() -> None:
    query = search.parse('OAuth "Refresh Token" rota* tag:auth project:"my app"')
    assert search.plain_text(query) == "OAuth Refresh Token rota"


def test_encoding_is_compact_and_ranks_by_cosine() -> None:
    a = semantic.model().vector("database connection pool")
    b = semantic.model().vector("Postgres pgbouncer connections")
    c = semantic.model().vector("translate the shop into French")
    assert a and b and c
    stored = {"b": semantic.encode(b), "c": semantic.encode(c)}
    assert all(len(v) == semantic.STORED_BYTES for v in stored.values())
    ranked = semantic.rank(semantic.query_of(a), stored.items(), limit=2)
    assert [key for key, _ in ranked] == ["b", "c"]
    exact = sum(x * y for x, y in zip(a, b, strict=True))
    assert ranked[0][1] == pytest.approx(exact, abs=0.02)
    assert json.dumps(semantic.MODEL)


def test_doctor_says_once_whether_meaning_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from ltm.cli import doctor

    assert doctor.check_meaning().status == "ok"
    monkeypatch.setenv("LTM_SEMANTIC", "0")
    assert "LTM_SEMANTIC" in doctor.check_meaning().detail
    monkeypatch.setattr(semantic, "installed", lambda: False)
    check = doctor.check_meaning()
    assert check.status == "skip" and "words only" in check.detail
    assert check.fix is not None and "ltm[semantic]" in check.fix


def test_a_process_that_embeds_many_texts_loads_the_table_once() -> None:
    model = semantic.Model(semantic.package_folder())  # type: ignore[arg-type]
    try:
        first = model.vector("Postgres connection pool exhaustion")
        assert first is not None and model._np_table is None  # one save: no numpy
        for n in range(semantic.WARM_AFTER):
            model.vector(f"text number {n}")
        assert model._np_table is not None
        again = model.vector("Postgres connection pool exhaustion")
        assert again == pytest.approx(first, abs=1e-6)  # the same vector either way
    finally:
        model.close()


def test_without_numpy_many_texts_are_embedded_in_plain_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """numpy missing or broken (an import that fails): a fill or a server's pushes make
    the same vectors in plain Python, never an error."""
    import sys

    texts = [f"Postgres connection pool number {n}" for n in range(2 * semantic.WARM_AFTER)]
    model = semantic.Model(semantic.package_folder())  # type: ignore[arg-type]
    try:
        expected = [model.vector(text) for text in texts[:1]]
    finally:
        model.close()
    monkeypatch.setitem(sys.modules, "numpy", None)  # ``import numpy`` raises ImportError
    monkeypatch.setattr(
        semantic, "_numpy_at_hand", functools.cache(semantic._numpy_at_hand.__wrapped__)
    )
    model = semantic.Model(semantic.package_folder())  # type: ignore[arg-type]
    try:
        found = model.vectors(texts)
        assert model._np_table is None and all(v is not None for v in found)
        assert found[0] == pytest.approx(expected[0], abs=1e-6)
        assert [model.vector(text) for text in texts] == found  # one by one, past WARM_AFTER
    finally:
        model.close()


def test_meaning_off_says_how_to_turn_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off by the variable, pip would change nothing: the reason names what does."""
    assert semantic.why_off() is None
    monkeypatch.setenv("LTM_SEMANTIC", "off")
    assert semantic.why_off() == "search by meaning is turned off here (LTM_SEMANTIC=off)"
    monkeypatch.delenv("LTM_SEMANTIC")
    monkeypatch.setattr(semantic, "installed", lambda: False)
    monkeypatch.setattr(semantic, "package_folder", lambda: None)
    assert "pip install 'ltm[semantic]'" in (semantic.why_off() or "")


# Two unrelated requests, in English and as written in Korean, Japanese and Chinese.
UNRELATED = [
    (
        ("keep telling me how to deploy", "why the database migration fails"),
        ("배포하는 방법을 계속 알려줘", "데이터베이스 마이그레이션이 실패하는 원인"),
    ),
    (
        ("find why the search test fails", "rewrite the deploy steps"),
        ("検索テストが失敗する原因を調べて", "デプロイの手順を書き直す"),
    ),
    (
        ("the database migration fails", "the deploy script needs fixing"),
        ("数据库迁移失败", "部署脚本需要修复"),
    ),
]


@pytest.mark.parametrize(("english", "written"), UNRELATED, ids=["korean", "japanese", "chinese"])
def test_text_without_spaces_is_left_to_its_words(
    tmp_path: Path, english: tuple[str, str], written: tuple[str, str]
) -> None:
    """The model learned English: two requests it keeps apart in English, it puts near
    each other as written in these scripts. Such a query has no meaning vector, so search
    by meaning adds no unrelated packet to the words' hits, and a prompt no hint."""
    from datetime import UTC, datetime

    from ltm.ids import new_ulid

    def cosine(pair: tuple[str, str]) -> float:
        first, second = semantic.model().vectors(list(pair))
        assert first is not None and second is not None
        return sum(a * b for a, b in zip(first, second, strict=True))

    assert cosine(written) > cosine(english) + 0.1  # why: the model cannot tell them apart
    assert semantic.query_vector(written[0]) is None
    assert semantic.query_vector(english[0]) is not None

    store = SqliteStore(tmp_path / "ltm.db")
    user = User(new_ulid(), "me", datetime.now(UTC))
    store.create_user(user)
    other = {"goal": written[1], "next_step": "go on", "tags": ["x"]}
    _put(store, "oauth", user.id, 0, other)
    for mode in ("hybrid", "semantic"):
        assert searching.search(store, user, written[0], mode=mode) == [], mode
    store.close()


def test_an_upgrade_replaces_its_installs_cached_vocabulary(tmp_path: Path) -> None:
    """Each install's cache is named after its files: an upgrade (new files, same place)
    makes a new one, and the old one, which nothing reads again, goes; a second
    install's cache, and one of an older ltm's naming, are taken as their own."""
    source = semantic.package_folder()
    assert source is not None
    installs = []
    for name in ("pipx", "project"):
        folder = tmp_path / name
        for part in (semantic._WEIGHTS, semantic._TOKENIZER):
            (folder / Path(*part)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / Path(*part), folder / Path(*part))
        installs.append(folder)
    cache = Path(os.environ["LTM_CACHE_DIR"])
    cache.mkdir()
    legacy = cache / "semantic-vocab-1842796-1795934485-16384096.marshal"
    legacy.write_bytes(b"")
    killed = cache / f"{legacy.name}.4242.tmp"  # a hook killed while it wrote: long ago
    killed.write_bytes(b"half")
    os.utime(killed, (1_000_000_000, 1_000_000_000))
    writing = cache / f"{legacy.name}.4343.tmp"  # another process writing now
    writing.write_bytes(b"half")

    def cached() -> set[str]:
        return {p.name for p in cache.glob("semantic-vocab-*.marshal")}

    semantic.Model(installs[0]).close()
    first = cached()
    assert len(first) == 1  # the older naming's file went with the first new one
    assert not killed.exists() and writing.exists()
    semantic.Model(installs[1]).close()
    both = cached()
    assert len(both) == 2 and first < both

    tokenizer = installs[0] / Path(*semantic._TOKENIZER)
    os.utime(tokenizer, (1_900_000_000, 1_900_000_000))  # the upgrade: the same place, new files
    model = semantic.Model(installs[0])
    assert model.vector("sign-in session expires too early") is not None
    model.close()
    after = cached()
    assert len(after) == 2 and not first & after and (both - first) < after
