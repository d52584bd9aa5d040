"""Search, listing filters, page tokens and lineage over HTTP, against a real server.

Extension routes (``GET /v1/search``, ``/v1/packets/{id}/children`` and
``/thread``) and extension parameters of ``GET /v1/packets``: the reference
routes answer as before. Run on both stores.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote_plus

import httpx
import pytest
from serverkit import SERVER_STORES, Server, make_packet, running_server
from timing import scaled

_names = itertools.count()


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("search"), store=request.param) as srv:
        yield srv


@dataclass
class Who:
    id: str
    name: str
    http: httpx.Client


def person(server: Server, name: str) -> Who:
    unique = f"{name}-{next(_names)}"
    user_id, token = server.issue(unique)
    return Who(user_id, unique, server.client(token))


def pair_in_a_team(server: Server) -> tuple[Who, Who, str]:
    """Alice, Bob, and the team Alice owns and Bob joined."""
    alice, bob = person(server, "alice"), person(server, "bob")
    team = f"pair-{next(_names)}"
    assert alice.http.post("/v1/teams", json={"name": team}).status_code == 201
    code = alice.http.post(f"/v1/teams/{team}/invites").json()["code"]
    assert bob.http.post(f"/v1/invites/{code}/accept").status_code == 201
    return alice, bob, team


def push(who: Who, team: str | None = None, **fields: object) -> str:
    packet = make_packet(**fields)
    r = who.http.post("/v1/packets", json=packet, params={"team": team} if team else None)
    assert r.status_code == 201, r.text
    return str(packet["id"])


def found(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [hit["id"] for hit in r.json()["results"]]


@pytest.fixture
def world(server: Server) -> dict[str, object]:
    """Alice with a team, Bob outside it, each with packets about the same topic."""
    alice, bob = person(server, "alice"), person(server, "bob")
    team = f"core-{next(_names)}"
    assert alice.http.post("/v1/teams", json={"name": team}).status_code == 201
    word = f"zebra{next(_names)}"  # unique to this test across the module's server
    mine = push(alice, goal=f"Fix the {word} cache eviction", tags=["cache"])
    theirs = push(bob, goal=f"Bob's secret {word} plans")
    shared = push(alice, team, goal=f"Team notes about {word}", next_step=f"review {word}")
    return {"alice": alice, "bob": bob, "team": team, "word": word, "ids": (mine, theirs, shared)}


def test_search_stays_inside_the_callers_scopes(world: dict[str, object]) -> None:
    alice, bob, team, word = world["alice"], world["bob"], world["team"], world["word"]
    mine, theirs, shared = world["ids"]  # type: ignore[misc]
    assert isinstance(alice, Who) and isinstance(bob, Who)
    assert found(alice.http.get("/v1/search", params={"q": word})) == [mine]
    assert found(alice.http.get("/v1/search", params={"q": word, "team": team})) == [shared]
    every = alice.http.get("/v1/search", params={"q": word, "scope": "all"}).json()["results"]
    assert {h["id"]: h["team"] for h in every} == {mine: None, shared: team}
    assert found(bob.http.get("/v1/search", params={"q": word, "scope": "all"})) == [theirs]
    r = bob.http.get("/v1/search", params={"q": word, "team": team})
    assert r.status_code == 404 and r.json() == {"error": "team not found"}
    hit = alice.http.get("/v1/search", params={"q": f"{word} cache"}).json()["results"][0]
    assert hit["field"] == "goal" and hit["parent_id"] is None
    assert [hit["snippet"][s:e] for s, e in hit["highlights"]] == [word, "cache"]
    assert found(alice.http.get("/v1/search", params={"q": f"{word} tag:cache"})) == [mine]
    assert found(alice.http.get("/v1/search", params={"q": f"{word} tag:nope"})) == []


def test_probing_prefix_scores_learns_nothing_of_another_users_words(server: Server) -> None:
    """The attack: probe words of one's own, then ``qu<c>*`` searches, letter by letter.

    A ranking with statistics over every user's packets answers the prefix of
    a word hidden in someone else's private packet differently; here every
    answer (ids, order, scores, snippets) must stay byte for byte the same
    while another user stores, changes and deletes such words, in their own
    scope and in a team the prober is not in. ``scope=all`` covers the
    prober's team with that user too.
    """
    alice, bob, pair = pair_in_a_team(server)
    hidden = f"hidden-{next(_names)}"
    assert alice.http.post("/v1/teams", json={"name": hidden}).status_code == 201
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n, c in enumerate(letters):
        probe = " ".join([f"qu{c}zzprobe"] * (1 + n % 3))
        push(bob, goal=f"probe {probe}", created_at=f"2026-05-01T12:00:{n:02d}Z")
    push(alice, pair, goal="quill notes for the pair", next_step="read the quill notes")

    def probe_all() -> list[bytes]:
        answers = []
        for c in letters:
            for scope in ({}, {"scope": "all"}):
                r = bob.http.get("/v1/search", params={"q": f"qu{c}*", **scope})
                assert r.status_code == 200, r.text
                answers.append(r.content)
        return answers

    before = probe_all()
    secret = "quixotically"
    mine = [push(alice, goal=f"{secret} plan", constraints=[secret] * (n + 1)) for n in range(4)]
    push(alice, hidden, goal=f"{secret} for the hidden team")
    assert probe_all() == before
    push(alice, id=mine[0], goal="quantum quantum quantum")
    for packet in mine[1:]:
        assert alice.http.delete(f"/v1/packets/{packet}").status_code == 204
    assert probe_all() == before


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "q: the search query is required"),
        ({"q": "  "}, "q: nothing to search for"),
        ({"q": "x*"}, "q: a prefix term needs at least 2 characters: 'x*'"),
        ({"q": "ok", "limit": "0"}, "limit must be between 1 and 100"),
        ({"q": "ok", "limit": "ten"}, "limit must be an integer between 1 and 100"),
        ({"q": "ok", "scope": "everything"}, "scope: the only value is all"),
        ({"q": "ok", "scope": "all", "team": "x"}, "give a team or all scopes, not both"),
    ],
)
def test_bad_searches_are_400_with_the_reason(
    server: Server, params: dict[str, str], message: str
) -> None:
    r = person(server, "eve").http.get("/v1/search", params=params)
    assert r.status_code == 400 and r.json() == {"error": message}


def test_search_needs_a_token(server: Server) -> None:
    assert server.client().get("/v1/search", params={"q": "x"}).status_code == 401


def test_listing_filters_and_page_tokens(server: Server) -> None:
    alice, bob, team = pair_in_a_team(server)
    pushed = []
    for n in range(5):
        who = alice if n % 2 == 0 else bob
        tags = ["api"] if n < 3 else ["ui"]
        pushed.append(push(who, team, created_at=f"2026-05-0{n + 1}T12:00:00Z", tags=tags))
    newest = list(reversed(pushed))

    def listing(**params: str) -> list[str]:
        seen: list[str] = []
        token = None
        while True:
            query = {"team": team, "limit": "2", **params}
            if token:
                query["page_token"] = token
            r = alice.http.get("/v1/packets", params=query)
            assert r.status_code == 200, r.text
            body = r.json()
            # Each filter applied is echoed as given: how a client tells this server from
            # one that lists every packet whatever it is asked (the reference).
            filters = {"project", "tag", "since", "until", "author"}
            assert set(body) - {"packets", "next_page_token"} == filters & set(params)
            assert all(body[name] == params[name] for name in filters & set(params))
            assert all(set(p) == {"id", "created_at", "goal"} for p in body["packets"])
            seen += [p["id"] for p in body["packets"]]
            token = body.get("next_page_token")
            if token is None:
                return seen

    assert listing() == newest
    assert listing(tag="api") == newest[2:]
    assert listing(author=bob.name) == [pushed[3], pushed[1]]
    assert listing(author=bob.id, tag="api") == [pushed[1]]
    assert listing(author="me") == [pushed[4], pushed[2], pushed[0]]
    assert listing(since="2026-05-02", until="2026-05-04") == [pushed[2], pushed[1]]
    assert listing(since="2026-05-03T12:00:00Z") == newest[:3]
    assert listing(unknown="ignored") == newest  # unknown parameters: ignored, as before
    # the reference's plain limit keeps answering one page, its three keys each
    r = alice.http.get("/v1/packets", params={"team": team, "limit": "5"})
    assert [p["id"] for p in r.json()["packets"]] == newest and "next_page_token" not in r.json()
    for params, message in (
        ({"since": "last tuesday"}, "since: give a date"),
        ({"author": "nobody-here"}, "author: no member 'nobody-here' in this team"),
        ({"page_token": "garbage"}, "page_token: not a token from this listing"),
        ({"tag": "Not A Tag"}, "tag: lower-case letters"),
    ):
        r = alice.http.get("/v1/packets", params={"team": team, **params})
        assert r.status_code == 400 and r.json()["error"].startswith(message), r.text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"since": "999999w"}, "since: out of range"),
        ({"until": "0001-01-01T00:00:00+14:00"}, "until: out of range"),
        ({"until": "9999-12-31T23:59:59-14:00"}, "until: out of range"),
        ({"since": "999999d", "tag": "api"}, "since: out of range"),
    ],
)
def test_out_of_range_times_are_400_with_one_line(
    server: Server, params: dict[str, str], message: str
) -> None:
    alice, _bob, team = pair_in_a_team(server)
    for scope in ({}, {"team": team}):
        r = alice.http.get("/v1/packets", params={**params, **scope})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error.startswith(message) and "\n" not in error, error


def test_an_early_year_sorts_before_a_later_one(server: Server) -> None:
    alice = person(server, "alice")
    pushed = push(alice, created_at="2026-05-01T00:00:00Z")
    for since in ("0005-01-01", "0999-12-31T00:00:00Z"):
        listed = alice.http.get("/v1/packets", params={"since": since}).json()["packets"]
        assert [p["id"] for p in listed] == [pushed]


def test_children_and_thread_respect_visibility(server: Server) -> None:
    alice, bob, team = pair_in_a_team(server)
    root = push(alice, team, goal="root", created_at="2026-05-01T00:00:00Z")
    middle = push(bob, team, goal="middle", parent_id=root, created_at="2026-05-02T00:00:00Z")
    tip = push(alice, team, goal="tip", parent_id=middle, created_at="2026-05-03T00:00:00Z")
    private = push(alice, goal="aside", parent_id=middle, created_at="2026-05-04T00:00:00Z")

    thread = alice.http.get(f"/v1/packets/{tip}/thread").json()
    assert [p["id"] for p in thread["packets"]] == [root, middle, tip] and thread["complete"]
    assert thread["packets"][1]["parent_id"] == root
    kids = alice.http.get(f"/v1/packets/{middle}/children").json()["packets"]
    assert [p["id"] for p in kids] == [tip, private]
    kids = bob.http.get(f"/v1/packets/{middle}/children").json()["packets"]
    assert [p["id"] for p in kids] == [tip]  # alice's personal continuation is hers
    assert bob.http.get(f"/v1/packets/{private}/thread").status_code == 404
    outsider = person(server, "carol")
    assert outsider.http.get(f"/v1/packets/{middle}/children").status_code == 404
    # a thread whose earlier packets the reader cannot see starts where they can
    mine = push(bob, goal="bob continues privately", parent_id=private)
    partial = bob.http.get(f"/v1/packets/{mine}/thread").json()
    assert [p["id"] for p in partial["packets"]] == [mine] and partial["complete"] is False


SECRET = "ghp_" + "k3Yq9ZbV2mXw7LpT4nR8sD1fH6jC0aEuGi5o"  # a GitHub token's shape


def test_a_search_in_a_post_body_answers_as_the_query_string_does(server: Server) -> None:
    me = person(server, "poster")
    target = push(me, goal=f"Rotate the deploy key for {me.name}", tags=["infra"])
    by_get = found(me.http.get("/v1/search", params={"q": "rotate deploy tag:infra"}))
    by_post = found(me.http.post("/v1/search", json={"q": "rotate deploy tag:infra"}))
    assert by_get == by_post == [target]
    assert found(me.http.post("/v1/search", json={"q": "rotate", "limit": 1})) == [target]
    # The words of a body never reach the access log, where a query string's path would.
    me.http.post("/v1/search", json={"q": f"rotate {SECRET}"})
    assert SECRET not in server.logs()
    for bad, reason in [
        ({}, "q:"),
        ({"q": 5}, "q:"),
        ({"q": "x", "limit": "5"}, "limit"),
        ({"q": "x", "limit": 0}, "limit"),
        ({"q": "x", "scope": "mine"}, "scope"),
        ({"q": "x", "team": ""}, "team"),
        ({"q": "x", "mode": "fuzzy"}, "mode"),
        ({"q": "x", "mode": None}, "mode"),
        ({"q": "x", "team": None}, "team"),
    ]:
        r = me.http.post("/v1/search", json=bad)
        assert r.status_code == 400 and reason in r.json()["error"], (bad, r.text)
    # The credential is checked before the body is read.
    anonymous = server.client()
    assert anonymous.post("/v1/search", content=b"{not json").status_code == 401


def test_recall_words_reach_an_older_server_without_a_secret_in_the_url() -> None:
    """A server without ``POST /v1/search`` (an older ltm) is asked with a GET; the words
    of a prompt then go without what the scanner or the entropy check flags."""
    seen: list[str] = []

    class OldServer(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer(405, {"Code": "MethodNotAllowedError", "Message": "not allowed"})

        def do_GET(self) -> None:
            if self.path.startswith("/v1/healthz"):
                self._answer(200, {"ok": True, "version": "0.0.1"})
                return
            seen.append(self.path)
            self._answer(200, {"results": []})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), OldServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        from ltm.cli.client.credentials import Target
        from ltm.cli.client.remote import RemoteBackend

        target = Target(f"http://127.0.0.1:{httpd.server_port}", "tok", "LTM_HOST")
        backend = RemoteBackend.open(target, timeout=scaled(10))
        prompt = f"why does login break with token {SECRET} and hunter2Xq9Zr7Lm3Vb8Nc4Tk"
        assert backend.search(prompt, private=True, mode="lexical") == []
        assert backend.search("oauth", mode="lexical") == []
        backend.close()
    finally:
        httpd.shutdown()
    assert len(seen) == 2
    first = unquote_plus(seen[0])
    assert "login" in first and "break" in first
    assert SECRET not in first and "k3Yq9ZbV2mXw7LpT4nR8sD1fH6jC0aEuGi5o" not in first
    assert "hunter2Xq9Zr7Lm3Vb8Nc4Tk" not in first


def test_a_search_by_meaning_says_so_and_stays_in_scope(server: Server) -> None:
    """``mode=hybrid`` over HTTP: a packet found by meaning alone comes marked
    ``matched: meaning`` (one holding every word, ``words``), and nobody else's packet is
    anyone's neighbour. DynamoDB keeps no vectors: there the words alone answer."""
    from ltm import semantic

    if not semantic.installed():
        pytest.skip("needs ltm[semantic]")
    alice, bob = person(server, "alice"), person(server, "bob")
    pool = push(alice, goal="Fix Postgres connection pool exhaustion under peak load")
    push(bob, goal="Fix Postgres connection pool exhaustion under peak load")
    near = {"q": "database runs out of sockets when traffic peaks", "mode": "hybrid"}
    hits = alice.http.get("/v1/search", params=near).json()["results"]
    by_meaning = [(pool, "meaning")] if server.store == "sqlite" else []
    assert [(hit["id"], hit["matched"]) for hit in hits] == by_meaning
    worded = {"q": "postgres pool", "mode": "hybrid"}
    hits = alice.http.get("/v1/search", params=worded).json()["results"]
    assert [(hit["id"], hit["matched"]) for hit in hits] == [(pool, "words")]
