"""Search on its own: the query language, hostile input, and indexing an old database.

The behaviour every store shares (ranking, snippets, filters, visibility) is
in test_store_contract.py; here what is specific to the query parser and to
SQLite's one-time indexing of a database made before search existed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltm import search
from ltm.store import PacketMeta, StoredPacket
from ltm.store.sqlite import SqliteStore
from ltm.store.sqlite_schema import MIGRATIONS, SCHEMA_VERSION


def test_parse_terms_phrases_prefixes_and_qualifiers() -> None:
    q = search.parse('Flaky "token  refresh" logi* tag:auth project:"my app" foo-bar')
    assert q.terms == (
        search.Term(("flaky",), text="Flaky"),
        search.Term(("token", "refresh"), text="token  refresh"),
        search.Term(("logi",), prefix=True, text="logi"),
        search.Term(("foo", "bar"), text="foo-bar"),
    )
    assert q.tags == ("auth",) and q.projects == ("my app",)
    # The text as typed: FTS5 cuts and folds it with the tokenizer that indexed the packets.
    assert search.fts_expression(q) == (
        '"Flaky" AND "token  refresh" AND "logi" * AND "foo-bar"'
        ' AND tags : "auth" AND project : "my app"'
    )


@pytest.mark.parametrize("text", ["", "   ", '""', "***", "-", "a*", 'tag:""'])
def test_nothing_to_search_for_is_a_clear_error(text: str) -> None:
    with pytest.raises(search.QueryError):
        search.parse(text)


def test_too_long_or_too_many_terms_is_refused() -> None:
    with pytest.raises(search.QueryError, match="too long"):
        search.parse("x" * 600)
    with pytest.raises(search.QueryError, match="too many"):
        search.parse(" ".join(f"w{n}" for n in range(20)))


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> SqliteStore:
    store = SqliteStore(tmp_path_factory.mktemp("hostile") / "ltm.db")
    body = {"goal": 'NEAR AND OR NOT "quoted" col:on ^start (paren) * - +', "next_step": "x"}
    meta = PacketMeta("01HOSTILE000", "2026-01-01T00:00:00Z", body["goal"], "u1")
    store.put_packet(StoredPacket(meta, json.dumps(body).encode()), sort_key="2026")
    return store


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_no_input_makes_an_fts5_syntax_error(hostile_store: SqliteStore, text: str) -> None:
    try:
        query = search.parse(text)
    except search.QueryError:
        return
    hostile_store.search(query, scopes=[("u1", None)])  # must not raise


@pytest.mark.parametrize(
    "text",
    ["NEAR(a b)", "goal:x", '"unclosed', "AND", "a OR b", "^start", "col:on", "-x", "(paren"],
)
def test_fts5_operators_are_plain_words(hostile_store: SqliteStore, text: str) -> None:
    hits = hostile_store.search(search.parse(text), scopes=[("u1", None)])
    assert [h.meta.id for h in hits] in ([], ["01HOSTILE000"])


def test_snippet_marks_matches_in_one_line() -> None:
    fields = dict.fromkeys(search.FIELD_NAMES, "")
    fields["decisions"] = "Use the\n  retry queue.\nIt keeps RETRIES bounded " + "x " * 100
    snip = search.snippet(fields, search.parse("retr*"))
    assert snip.field == "decisions"
    assert "\n" not in snip.text and snip.text.endswith("…")
    assert [snip.text[s:e] for s, e in snip.highlights] == ["retry", "RETRIES"]


def test_a_database_from_before_search_is_indexed_on_open_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    for step in MIGRATIONS[:2]:  # the schema as the previous release left it
        assert isinstance(step, str)
        db.executescript(step)
    db.execute("PRAGMA user_version = 2")
    packets = [
        ("01OLDROOT000", None, "Port the scheduler to asyncio", ["infra"]),
        ("01OLDCHILD00", "01OLDROOT000", "Finish the asyncio port: timers", []),
    ]
    for n, (pid, parent, goal, tags) in enumerate(packets):
        body = {"id": pid, "goal": goal, "next_step": "go", "tags": tags}
        if parent:
            body["parent_id"] = parent
        db.execute(
            "INSERT INTO packets (id, scope, owner_id, team_id, sort_key, created_at, goal, body)"
            " VALUES (?, 'u:u1', 'u1', NULL, ?, ?, ?, ?)",
            (pid, f"2026-01-0{n + 1}", f"2026-01-0{n + 1}", goal, json.dumps(body).encode()),
        )
    db.commit()
    db.close()

    store = SqliteStore(path)
    me = [("u1", None)]
    found = store.search(search.parse("asyncio"), scopes=me)
    assert {h.meta.id for h in found} == {"01OLDROOT000", "01OLDCHILD00"}
    assert [m.id for m in store.children("01OLDROOT000", scopes=me)] == ["01OLDCHILD00"]
    assert [m.id for m in store.list_packets(owner_id="u1", tag="infra").items] == ["01OLDROOT000"]
    store.close()

    # Opened again: already at the current version, nothing indexed twice.
    store = SqliteStore(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM packet_fts").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM label_packets").fetchone()[0] == 1
    conn.close()
    assert len(store.search(search.parse("asyncio"), scopes=me)) == 2
    store.close()
