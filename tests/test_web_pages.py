"""The web view over HTTP: headers, size, forms that refuse forgeries, sessions, ``ltm ui``.

Against a real ``ltm server run`` (and a real ``ltm ui`` subprocess); the
session-expiry test drives ``WebView`` in-process with a clock, since a
session lives hours.
"""

from __future__ import annotations

import html
import json
import re
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpkit
import httpx
import pytest
from clikit import LTM, Cli
from serverkit import SERVER_STORES, Server, local_client, make_packet, running_server
from timing import scaled

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
MAX_PAGE_BYTES = 50 * 1024


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("pages"), store=request.param) as srv:
        yield srv


def browser_for(server: Server, token: str) -> httpx.Client:
    """An HTTP client holding a web session, signed in the way the sign-in form does it."""
    client = server.web_client(follow_redirects=False)
    form = client.get("/web/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, form.text
    signed = client.post(
        "/web/signin", data={"csrf": csrf.group(1), "next": "/web", "token": token}
    )
    assert signed.status_code == 303, signed.text
    assert signed.headers["location"] == server.web + "/web"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Max-Age=28800" in cookie
    return client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def assert_page_headers(response: httpx.Response) -> None:
    headers = response.headers
    assert headers["content-security-policy"] == CSP
    assert headers["cache-control"] == "no-store"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-robots-tag"] == "noindex, nofollow"


def test_every_answer_carries_the_security_headers(server: Server) -> None:
    _uid, token = server.issue("hedy")
    packet = make_packet(goal="Headers")
    server.client(token).post("/v1/packets", json=packet)
    web = browser_for(server, token)
    for path, status in (
        ("/web", 200),
        (f"/web/packets/{packet['id']}", 200),
        (f"/web/packets/{packet['id']}/delete", 200),
        ("/web/packets/01NOSUCHPACKET0000000000000", 404),
        ("/web/static/app.js", 200),
        ("/web/static/app.css", 200),
        ("/web/static/nope.js", 404),
        ("/p/" + "A" * 32, 404),
        ("/", 303),
    ):
        response = web.get(path)
        assert response.status_code == status, path
        assert_page_headers(response)
    assert web.get("/web/static/app.js").headers["content-type"].startswith("text/javascript")
    assert server.web_client().get("/web/signin").headers["content-security-policy"] == CSP


def test_a_list_of_50_packets_stays_under_50_kb(server: Server) -> None:
    _uid, token = server.issue("big")
    api = server.client(token)
    for n in range(55):  # the worst case for escaping: every character becomes an entity
        goal = ("&<>" * 400)[:1024]
        packet = make_packet(goal=goal, created_at=f"2026-05-01T12:{n:02d}:00Z")
        assert api.post("/v1/packets", json=packet).status_code == 201
    page = browser_for(server, token).get("/web")
    assert page.status_code == 200
    assert page.text.count("<li>") == 50
    assert len(page.content) <= MAX_PAGE_BYTES, len(page.content)
    assert 'rel="next"' in page.text  # the rest is a page further


def test_a_full_landing_page_says_where_older_packets_are(server: Server) -> None:
    """The landing page merges every scope's newest 50 and pages no further: when it is
    full, it links each scope, whose own list goes back (personal: ``team=``, not the
    landing page again)."""
    _uid, token = server.issue("lena")
    api = server.client(token)
    assert api.post("/v1/teams", json={"name": "lena-crew"}).status_code == 201
    for n in range(51):
        packet = make_packet(goal=f"Note {n}", created_at=f"2026-05-01T12:{n:02d}:00Z")
        assert api.post("/v1/packets", json=packet).status_code == 201
    web = browser_for(server, token)
    landing = web.get("/web")
    assert landing.text.count('<li><a href="/web/packets/') == 50
    assert 'rel="next"' not in landing.text
    note = re.search(
        r'<p class="note">Older packets are listed one scope at a time: (.*?)</p>', landing.text
    )
    assert note, landing.text
    links = re.findall(r'href="([^"]+)">([^<]+)</a>', note.group(1))
    assert [name for _, name in links] == ["personal", "lena-crew"]
    personal = web.get(html.unescape(links[0][0]))
    assert "<h1>Your packets</h1>" in personal.text and 'rel="next"' in personal.text
    assert "Older packets are listed" not in personal.text


def test_the_landing_page_lists_every_scope_with_what_a_row_needs(server: Server) -> None:
    """Teammates' packets show on landing; rows carry project, tags and next step (escaped),
    and ids that share a long prefix are shown long enough to tell apart."""
    ann_id, ann_token = server.issue("ann-land")
    bob_id, bob_token = server.issue("bob-land")
    ann, bob = server.client(ann_token), server.client(bob_token)
    assert ann.post("/v1/teams", json={"name": "land"}).status_code == 201
    code = ann.post("/v1/teams/land/invites", json={}).json()["code"]
    assert bob.post(f"/v1/invites/{code}/accept", json={}).status_code in (200, 201)
    twins = ["01JS5LTWINPREFIX00000000A1", "01JS5LTWINPREFIX00000000B2"]
    for n, pid in enumerate(twins):
        packet = make_packet(
            id=pid,
            goal=f"Team <goal> {n}",
            created_at=f"2026-05-02T12:0{n}:00Z",
            tags=["ops"],
            project={"name": "web<app>"},
            next_step="Fix <the> thing",
        )
        assert ann.post("/v1/packets?team=land", json=packet).status_code == 201

    page = browser_for(server, bob_token).get("/web")  # bob has no packets of his own
    assert page.status_code == 200
    assert "No packets here yet" not in page.text
    assert "Team &lt;goal&gt; 0" in page.text and "team land" in page.text
    assert "web&lt;app&gt;" in page.text and '<span class="tag">ops</span>' in page.text
    assert "Fix &lt;the&gt; thing" in page.text
    for pid in twins:  # they differ at the 25th character: 12 would show one id twice
        assert f"<code>{pid[:25]}</code>" in page.text
    personal = browser_for(server, bob_token).get("/web?team=")
    assert "No packets here yet" in personal.text

    # Shared with bob: listed in his shared view, and its page names who shared it.
    mine = make_packet(goal="Ann's <own>")
    assert ann.post("/v1/packets", json=mine).status_code == 201
    assert ann.post(f"/v1/packets/{mine['id']}/shares", json={"user": bob_id}).status_code == 201
    shared = browser_for(server, bob_token).get("/web?shared=1")
    assert "Ann&#x27;s &lt;own&gt;" in shared.text or "Ann's &lt;own&gt;" in shared.text
    assert "shared by ann-land" in shared.text
    packet_page = browser_for(server, bob_token).get(f"/web/packets/{mine['id']}")
    assert packet_page.status_code == 200 and "Shared with you by" in packet_page.text
    # Anyone who knows bob's id may share with him, under a name that looks like a
    # teammate's: the page names the sharer's account too, as the owner's names bob's.
    assert re.search(rf"<dd>ann-land[-0-9]* \({ann_id}\)</dd>", packet_page.text)
    assert "Delete" not in packet_page.text
    owner_page = browser_for(server, ann_token).get(f"/web/packets/{mine['id']}")
    assert f"bob-land ({bob_id})" in owner_page.text


def test_shared_with_you_says_when_it_stops_at_its_page(server: Server) -> None:
    _, sharer_token = server.issue("sam-shares")
    reader_id, reader_token = server.issue("rey-reads")
    sam = server.client(sharer_token)
    for n in range(51):
        packet = make_packet(goal=f"Shared note {n}")
        assert sam.post("/v1/packets", json=packet).status_code == 201
        shared = sam.post(f"/v1/packets/{packet['id']}/shares", json={"user": reader_id})
        assert shared.status_code == 201
        if n == 48:  # 49 shares: all of them shown, nothing to say
            page = browser_for(server, reader_token).get("/web?shared=1")
            assert page.text.count("Shared note") == 49 and "ltm ls --shared" not in page.text
    page = browser_for(server, reader_token).get("/web?shared=1")
    assert page.text.count("Shared note") == 50
    assert "The newest 50 shares are shown" in page.text and "ltm ls --shared" in page.text


def test_filters_reach_older_packets_and_pages_keep_them(server: Server) -> None:
    _uid, token = server.issue("fiona")
    api = server.client(token)
    tagged = make_packet  # 52 old packets of one project and tag, then 55 newer ones without
    for n in range(52):
        packet = tagged(
            goal=f"Archived {n}",
            created_at=f"2026-04-01T10:{n:02d}:00Z",
            tags=["archived"],
            project={"name": "old-site"},
        )
        assert api.post("/v1/packets", json=packet).status_code == 201
    for n in range(55):
        packet = make_packet(goal=f"Fresh {n}", created_at=f"2026-05-02T10:{n:02d}:00Z")
        assert api.post("/v1/packets", json=packet).status_code == 201
    web = browser_for(server, token)
    for query in ({"tag": "archived"}, {"project": "old-site"}):
        first = web.get("/web", params=query)
        assert first.status_code == 200
        assert first.text.count("<li>") == 50 and "Fresh" not in first.text
        assert "Archived 51" in first.text  # newest first, though older than every Fresh one
        assert len(first.content) <= MAX_PAGE_BYTES
        older = re.search(r'rel="next" href="([^"]+)"', first.text)
        assert older, first.text
        link = html.unescape(older.group(1))
        assert f"{next(iter(query))}=" in link  # the next page keeps the filter
        second = web.get(link)
        assert second.status_code == 200
        assert second.text.count("<li>") == 2 and "Archived 0" in second.text
        assert 'rel="next"' not in second.text
    both = web.get("/web", params={"tag": "archived", "project": "nope"})
    assert both.status_code == 200 and "No packets match." in both.text
    bad = web.get("/web", params={"tag": "Not A Tag"})
    assert bad.status_code == 400 and "tag: lower-case letters" in bad.text


def test_search_shows_the_field_and_an_escaped_highlighted_snippet(server: Server) -> None:
    owner_id, token = server.issue("sally")
    _other_id, other_token = server.issue("simon")
    api, other = server.client(token), server.client(other_token)
    hostile = make_packet(
        goal="Cache <script>alert(1)</script> invalidation",
        next_step="Ask about the <b>zeppelin</b> loader",
    )
    plain = make_packet(goal="Unrelated work")
    theirs = make_packet(goal="Their zeppelin notes")
    team = f"srch-{owner_id[-6:].lower()}"
    in_team = make_packet(goal="Team zeppelin plan")
    assert api.post("/v1/packets", json=hostile).status_code == 201
    assert api.post("/v1/packets", json=plain).status_code == 201
    assert other.post("/v1/packets", json=theirs).status_code == 201
    assert api.post("/v1/teams", json={"name": team}).status_code == 201
    assert api.post(f"/v1/packets?team={team}", json=in_team).status_code == 201
    web = browser_for(server, token)
    listing = web.get("/web")
    assert 'name="q"' in listing.text and 'role="search"' in listing.text
    found = web.get("/web", params={"q": "zeppelin"})
    assert found.status_code == 200
    assert f"/web/packets/{hostile['id']}" in found.text
    assert "<script>" not in found.text and "<b>" not in found.text
    assert "&lt;script&gt;" in found.text and "&lt;b&gt;" in found.text
    assert "<mark>zeppelin</mark>" in found.text
    assert "next_step" in found.text  # the field it matched in
    assert plain["id"] not in found.text and theirs["id"] not in found.text
    assert in_team["id"] not in found.text  # personal unless asked otherwise
    everywhere = web.get("/web", params={"q": "zeppelin", "all": "1"})
    assert in_team["id"] in everywhere.text and f"team {team}" in everywhere.text
    assert theirs["id"] not in everywhere.text
    ticked = web.get("/web", params={"q": "zeppelin", "all": "1", "team": team})
    assert hostile["id"] in ticked.text and in_team["id"] in ticked.text
    one_team = web.get("/web", params={"q": "zeppelin", "team": team})
    assert in_team["id"] in one_team.text and hostile["id"] not in one_team.text
    for q, message in (
        ("", "nothing to search for"),
        ("   ", "nothing to search for"),
        ("a*", "a prefix term needs at least"),
    ):
        refused = web.get("/web", params={"q": q})
        assert refused.status_code == 400, q
        assert "Cannot search: " + message in html.unescape(refused.text)
        assert 'name="q"' in refused.text  # the box is still there
    none = web.get("/web", params={"q": "nonexistentword"})
    assert none.status_code == 200 and "Nothing matches." in none.text
    stranger = browser_for(server, other_token).get("/web", params={"q": "zeppelin", "team": team})
    assert stranger.status_code == 404


def test_a_packet_page_links_its_readable_children(server: Server) -> None:
    _uid, token = server.issue("carl")
    _oid, other_token = server.issue("cleo")
    api, other = server.client(token), server.client(other_token)
    parent = make_packet(goal="First leg")
    child = make_packet(
        goal="Second <leg>", parent_id=parent["id"], created_at="2026-05-02T00:00:00Z"
    )
    foreign = make_packet(goal="Someone else's sequel", parent_id=parent["id"])
    for client, packet in ((api, parent), (api, child), (other, foreign)):
        assert client.post("/v1/packets", json=packet).status_code == 201
    web = browser_for(server, token)
    page = web.get(f"/web/packets/{parent['id']}")
    assert page.status_code == 200
    assert "Continued by" in page.text
    assert f'href="/web/packets/{child["id"]}" rel="next">Second &lt;leg&gt;</a>' in page.text
    assert foreign["id"] not in page.text and "sequel" not in page.text
    leaf = web.get(f"/web/packets/{child['id']}")
    assert "Continued by" not in leaf.text and f"/web/packets/{parent['id']}" in leaf.text


def test_a_team_page_shows_pending_invites_to_its_owner_only(server: Server) -> None:
    owner_id, owner_token = server.issue("tina")
    _mid, member_token = server.issue("theo")
    owner, member = server.client(owner_token), server.client(member_token)
    team = f"pages-{owner_id[-6:].lower()}"
    assert owner.post("/v1/teams", json={"name": team}).status_code == 201
    used = owner.post(f"/v1/teams/{team}/invites").json()["code"]
    assert member.post(f"/v1/invites/{used}/accept", json={}).status_code == 201
    pending = owner.post(f"/v1/teams/{team}/invites").json()["code"]
    as_owner = browser_for(server, owner_token).get(f"/web/teams/{team}")
    assert as_owner.status_code == 200
    assert "Pending invites" in as_owner.text and "theo" in as_owner.text
    assert as_owner.text.count("<tr>") == 2 + 1 + 2  # header + 2 members, header + 1 invite
    assert pending not in as_owner.text and used not in as_owner.text  # codes never shown
    as_member = browser_for(server, member_token).get(f"/web/teams/{team}")
    assert as_member.status_code == 200 and "Pending invites" not in as_member.text


def test_the_public_url_shows_to_who_may_manage_it(server: Server) -> None:
    owner_id, owner_token = server.issue("uma")
    _mid, member_token = server.issue("ugo")
    owner, member = server.client(owner_token), server.client(member_token)
    team = f"pub-{owner_id[-6:].lower()}"
    owner.post("/v1/teams", json={"name": team})
    code = owner.post(f"/v1/teams/{team}/invites").json()["code"]
    member.post(f"/v1/invites/{code}/accept", json={})
    packet = make_packet(goal="Team notes")
    owner.post(f"/v1/packets?team={team}", json=packet)
    url = owner.post(f"/v1/packets/{packet['id']}/publish").json()["public_url"]
    path = f"/web/packets/{packet['id']}"
    mine = browser_for(server, owner_token).get(path)
    assert url in mine.text and "Delete…" in mine.text
    theirs = browser_for(server, member_token).get(path)
    assert theirs.status_code == 200 and "Team notes" in theirs.text
    assert url not in theirs.text and "Delete…" not in theirs.text
    assert f"team {team}" in theirs.text


def test_forged_or_cross_site_deletes_are_refused(server: Server) -> None:
    _uid, token = server.issue("vera")
    api = server.client(token)
    packet = make_packet(goal="Keep me")
    api.post("/v1/packets", json=packet)
    web = browser_for(server, token)
    path = f"/web/packets/{packet['id']}/delete"
    csrf = csrf_of(web.get(path).text)
    assert web.post(path, data={"csrf": "wrong"}).status_code == 403
    assert web.post(path, data={}).status_code == 403
    cross = web.post(path, data={"csrf": csrf}, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    other_origin = web.post(path, data={"csrf": csrf}, headers={"Origin": "https://evil.test"})
    assert other_origin.status_code == 403
    assert api.get(f"/v1/packets/{packet['id']}").status_code == 200
    # GET never deletes; the real form does.
    done = web.post(path, data={"csrf": csrf}, headers={"Origin": "null"})
    assert done.status_code == 303 and done.headers["location"].endswith("/web?done=deleted")
    assert api.get(f"/v1/packets/{packet['id']}").status_code == 404


@pytest.mark.parametrize(
    "target", ["https://evil.test/", "//evil.test/web", "/\\evil.test", "/v1/packets", "web"]
)
def test_sign_in_only_returns_to_this_apps_pages(server: Server, target: str) -> None:
    _uid, token = server.issue("nina")
    client = server.web_client(follow_redirects=False)
    csrf = csrf_of(client.get("/web/signin", params={"next": target}).text)
    signed = client.post("/web/signin", data={"csrf": csrf, "next": target, "token": token})
    assert signed.headers["location"] == server.web + "/web"


@pytest.mark.parametrize("asked", ["/web?shared=1", "/web?team=&tag=ops", "/web?q=x&all=1"])
def test_signing_in_returns_to_the_page_asked_for(server: Server, asked: str) -> None:
    """A signed-out visitor who followed a link to the packets shared with them (or a
    filtered list, a search) lands on that page once signed in, not on the landing page."""
    _uid, token = server.issue()
    client = server.web_client(follow_redirects=False)
    sent = client.get(asked)
    assert sent.status_code == 303
    form = client.get(sent.headers["location"])
    next_path = re.search(r'name="next" value="([^"]+)"', form.text)
    assert next_path and html.unescape(next_path.group(1)) == asked
    fields = {"csrf": csrf_of(form.text), "next": html.unescape(next_path.group(1))}
    signed = client.post("/web/signin", data={**fields, "token": token})
    assert signed.headers["location"] == server.web + asked


def test_a_tampered_or_foreign_session_is_no_session(server: Server) -> None:
    _uid, token = server.issue("tess")
    web = browser_for(server, token)
    value = web.cookies["ltm_web"]
    body, mac = value.split(".")
    forged = server.web_client(cookies={"ltm_web": body + "." + mac[::-1]}).get("/web")
    assert forged.status_code == 303 and "/web/signin" in forged.headers["location"]
    assert web.get("/web").status_code == 200


@pytest.mark.parametrize("how", ["api", "server"])
def test_revoking_the_token_ends_its_web_sessions(server: Server, how: str) -> None:
    """The API refuses a revoked token at once; so must every page signed in with it."""
    if how == "server" and server.store != "sqlite":
        pytest.skip("ltm server revoke-token manages the server's SQLite file")
    _uid, token = server.issue("rev")
    _uid2, other_token = server.issue("stays")
    web, other = browser_for(server, token), browser_for(server, other_token)
    api = server.client(token)
    packet = make_packet(goal="Not after revoking")
    assert api.post("/v1/packets", json=packet).status_code == 201
    page = web.get(f"/web/packets/{packet['id']}/delete")
    assert page.status_code == 200
    csrf = csrf_of(page.text)
    label = next(t["label"] for t in api.get("/v1/tokens").json()["tokens"] if t["current"])
    if how == "api":
        assert api.delete(f"/v1/tokens/{label}").status_code == 204
    else:
        from serverkit import ltm_server

        done = ltm_server("revoke-token", label, "--db", str(server.db))
        assert done.returncode == 0, done.stderr
    assert api.get("/v1/packets").status_code == 401
    listed = web.get("/web")
    assert listed.status_code == 303 and "/web/signin" in listed.headers["location"]
    deleted = web.post(f"/web/packets/{packet['id']}/delete", data={"csrf": csrf})
    assert deleted.status_code == 303 and "/web/signin" in deleted.headers["location"]
    from ltm.store.sqlite import SqliteStore

    store = server.open_store() if server.open_store else SqliteStore(server.db)
    try:
        assert store.get_packet(packet["id"]) is not None  # not deleted
    finally:
        store.close()
    assert other.get("/web").status_code == 200  # another person's session is untouched


@pytest.mark.parametrize("where", ["cli", "device page"])
def test_revoking_the_approving_token_ends_a_session_signed_in_by_code(
    server: Server, where: str
) -> None:
    """A browser signed in by a code that someone approved with their token holds that
    person's session: revoking the token ends it, as it ends a session signed in with
    the token itself. Approved with ``ltm approve`` (the API) or on the device page."""
    _uid, token = server.issue(f"approver-{where.replace(' ', '-')}")
    api = server.client(token)

    def fields(page: str) -> dict[str, str]:
        found = re.findall(r'name="([^"]+)" value="([^"]*)"', page)
        return {k: html.unescape(v) for k, v in found}

    browser = server.web_client(follow_redirects=False)
    signin = browser.get("/web/signin").text
    form = fields(signin.split('action="/web/signin/code"', 1)[1].split("</form>", 1)[0])
    shown = browser.post("/web/signin/code", data={**form, "step": "new"})
    code = re.search(r"ltm approve ([A-Z]{4}-[A-Z]{4})", shown.text)
    assert shown.status_code == 200 and code, shown.text
    if where == "cli":
        approved = api.post("/v1/device/approve", json={"user_code": code.group(1)})
        assert approved.status_code == 200 and approved.json()["status"] == "approved"
    else:
        with httpkit.Client(base_url=server.url) as page:
            csrf = csrf_of(page.get("/device").text)
            asked = page.post("/device", data={"csrf": csrf, "code": code.group(1), "token": token})
            assert asked.status_code == 200, asked.text
            ticket = fields(asked.text)["ticket"]
            done = page.post(
                "/device/decide", data={"csrf": csrf, "ticket": ticket, "action": "approve"}
            )
            assert done.status_code == 200 and "Device approved" in done.text
    signed = browser.post("/web/signin/code", data={**fields(shown.text), "step": "check"})
    assert signed.status_code == 303, signed.text
    assert browser.get("/web").status_code == 200
    label = next(t["label"] for t in api.get("/v1/tokens").json()["tokens"] if t["current"])
    assert api.delete(f"/v1/tokens/{label}").status_code == 204
    ended = browser.get("/web")
    assert ended.status_code == 303 and "/web/signin" in ended.headers["location"]


# What a browser says of a form posted by a page of another site (``ltm open``'s page is a
# local file: to the browser, another site too), and of one posted by this server's page.
CROSS_SITE = {"Sec-Fetch-Site": "cross-site", "Origin": "null"}
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin", "Origin": "null"}


def post_key(browser: httpx.Client, key: str, next_path: str = "") -> httpx.Response:
    """What ``ltm open``'s page makes the browser do: post the key, then follow the 303."""
    fields = {"key": key, **({"next": next_path} if next_path else {})}
    posted = browser.post("/web/key", data=fields, headers=CROSS_SITE)
    if posted.status_code != 303:
        return posted
    assert posted.headers["location"].endswith("/web/key"), posted.headers
    assert "set-cookie" in posted.headers  # the key, kept for the page that follows
    return browser.get("/web/key")


def answer_key_question(browser: httpx.Client, question: httpx.Response) -> httpx.Response:
    """The person presses "Sign in as ..." on the question ``GET /web/key`` asked."""
    assert question.status_code == 200, question.text
    return browser.post(
        "/web/key", data={"csrf": csrf_of(question.text), "confirm": "1"}, headers=SAME_ORIGIN
    )


def test_a_sign_in_key_signs_a_browser_in_once(server: Server) -> None:
    """``POST /v1/web/sign-in-key``: what ``ltm open`` trades its token for."""
    user_id, token = server.issue("keyed")
    api = server.client(token)
    made = api.post("/v1/web/sign-in-key")
    assert made.status_code == 201, made.text
    answer = made.json()
    assert answer["url"] == server.web + "/web/key" and answer["expires_in"] == 120
    assert httpkit.post(server.url + "/v1/web/sign-in-key").status_code == 401
    browser = server.web_client(follow_redirects=False)
    question = post_key(browser, answer["key"], "/web?team=x")
    assert "keyed" in question.text and user_id in question.text
    signed = answer_key_question(browser, question)
    assert signed.status_code == 303 and signed.headers["location"] == server.web + "/web?team=x"
    assert "HttpOnly" in signed.headers["set-cookie"]
    assert browser.get("/web").status_code == 200
    # Once only: a copy of the key (a replay) gets nothing, asked or not.
    again = server.web_client(follow_redirects=False)
    replayed = answer_key_question(again, post_key(again, answer["key"]))
    assert replayed.status_code == 403 and "set-cookie" not in replayed.headers
    forged = server.web_client().post("/web/key", data={"key": answer["key"][:-2] + "AA"})
    assert forged.status_code == 403
    garbled = server.web_client().post("/web/key", data={"key": "\x07Ø×p.ùA\x89"})
    assert garbled.status_code == 403  # not a 500: a non-ASCII key is no key
    # A key made with a token that is revoked before it is used is dead too, and so is
    # the session made with it once the token goes.
    late = api.post("/v1/web/sign-in-key").json()["key"]
    label = next(t["label"] for t in api.get("/v1/tokens").json()["tokens"] if t["current"])
    assert api.delete(f"/v1/tokens/{label}").status_code == 204
    assert server.web_client().post("/web/key", data={"key": late}).status_code == 403
    assert browser.get("/web").status_code == 303


def test_another_sites_sign_in_key_never_signs_a_browser_in_unasked(server: Server) -> None:
    """Login CSRF: a page elsewhere posts its maker's own key (from ``ltm open`` on their
    account) to sign the visitor's browser in as the maker, who then reads whatever the
    visitor saves there, or whose memory an agent the visitor connects writes to."""
    _, token = server.issue("victim")
    _, maker_token = server.issue("maker")
    maker_key = server.client(maker_token).post("/v1/web/sign-in-key").json()["key"]
    browser = browser_for(server, token)
    question = post_key(browser, maker_key, "/web")
    # The browser is asked, by a page naming both accounts, and stays the victim's.
    assert question.status_code == 200 and "set-cookie" not in question.headers
    assert "Sign in as maker" in question.text and "signed in as <strong>victim" in question.text
    assert "victim" in browser.get("/web").text
    # The answer counts only from that page: another site cannot post it (nor read the
    # CSRF token it needs, bound to the key's cookie in this browser).
    csrf = csrf_of(question.text)
    for headers in (CROSS_SITE, {"Sec-Fetch-Site": "same-site"}):
        posted = browser.post("/web/key", data={"csrf": csrf, "confirm": "1"}, headers=headers)
        assert posted.status_code == 403 and "set-cookie" not in posted.headers
    unbound = browser.post("/web/key", data={"confirm": "1", "csrf": "x"}, headers=SAME_ORIGIN)
    assert unbound.status_code == 403
    elsewhere = server.web_client(follow_redirects=False)  # no key cookie: nothing to answer
    no_key = elsewhere.post("/web/key", data={"csrf": csrf, "confirm": "1"}, headers=SAME_ORIGIN)
    assert no_key.status_code == 403 and "victim" in browser.get("/web").text
    assert "keeps no cookies" in elsewhere.get("/web/key").text  # cookies off: said so
    # A browser with no session is asked too; the person who answers is signed in.
    fresh = server.web_client(follow_redirects=False)
    asked = post_key(fresh, server.client(maker_token).post("/v1/web/sign-in-key").json()["key"])
    assert asked.status_code == 200 and "signed in as" not in asked.text
    assert fresh.get("/web").status_code == 303
    assert answer_key_question(fresh, asked).status_code == 303
    assert "maker" in fresh.get("/web").text


def test_a_browser_signed_in_as_the_keys_user_goes_straight_on(server: Server) -> None:
    _, token = server.issue("regular")
    browser = browser_for(server, token)
    key = server.client(token).post("/v1/web/sign-in-key").json()["key"]
    on = post_key(browser, key, "/web?team=x")
    assert on.status_code == 303 and on.headers["location"] == server.web + "/web?team=x"
    assert "HttpOnly" in on.headers["set-cookie"]
    assert browser.get("/web").status_code == 200


def test_a_sign_in_key_needs_the_full_scope(server: Server) -> None:
    from test_publish_http import scoped_token

    user_id, _token = server.issue("partial")
    for scope in ("read", "write"):
        r = server.client(scoped_token(server, user_id, scope)).post("/v1/web/sign-in-key")
        assert r.status_code == 403 and r.json() == {"error": "insufficient scope"}


@pytest.mark.parametrize("scope", ["read", "write"])
def test_a_partial_token_cannot_sign_a_browser_in(server: Server, scope: str) -> None:
    """A web session may delete: a read-only or write-only token is refused, in words that
    are true of it (a write-only token is not told it "may only read")."""
    from test_publish_http import scoped_token

    user_id, _token = server.issue()
    client = server.web_client(follow_redirects=False)
    fields = {"csrf": csrf_of(client.get("/web/signin").text), "next": "/web"}
    signed = client.post(
        "/web/signin", data={**fields, "token": scoped_token(server, user_id, scope)}
    )
    assert signed.status_code == 403 and "set-cookie" not in signed.headers
    refusal = re.search(r'<p class="error" role="alert">([^<]+)</p>', signed.text)
    assert refusal and "read-only or write-only" in refusal.group(1)
    assert "full access (read write)" in refusal.group(1)


def test_ltm_open_signs_the_browser_in_without_a_token_on_argv(
    server: Server, tmp_path: Path
) -> None:
    if server.store != "sqlite":
        pytest.skip("the CLI side is the same on every store")
    from clikit import signed_in

    cli = signed_in(server, tmp_path / "cli", "opener")
    token = cli.credentials()["hosts"][server.url]["token"]
    argv_file = tmp_path / "argv.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" >> {argv_file}\ncat "${{1#file://}}" >> {argv_file}.page\n'
    )
    browser.chmod(0o755)
    cli.env.pop("LTM_NO_BROWSER", None)
    result = cli.run(
        "open", BROWSER=f"{browser} %s", DISPLAY=":0", LTM_STATE_DIR=str(tmp_path / "state")
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == server.web + "/web"
    assert "to sign in as you" in result.stderr
    argv = argv_file.read_text()
    (opened,) = argv.split()
    assert opened.startswith("file://") and token not in argv
    page = Path(f"{argv_file}.page").read_text()
    key = re.search(r'name="key" value="([^"]+)"', page)
    assert key and key.group(1) not in argv and key.group(1) not in result.stderr
    assert f'action="{server.web}/web/key"' in page
    # What the browser does with the page: post the key, and once asked it is signed in.
    browser_client = server.web_client(follow_redirects=False)
    question = post_key(browser_client, html.unescape(key.group(1)))
    assert "Sign in as opener" in question.text
    signed = answer_key_question(browser_client, question)
    assert signed.status_code == 303
    assert browser_client.get("/web").status_code == 200


def test_a_loopback_server_serves_its_pages_at_a_name_of_their_own(server: Server) -> None:
    """Cookies do not separate ports: on 127.0.0.1 a web session would also reach a page
    another local user serves on another port. The pages answer at ``ltm-<hex>.localhost``
    (printed in the first stderr line); the API, public links and CLIs stay on 127.0.0.1."""
    port = server.url.rsplit(":", 1)[1]
    found = re.fullmatch(r"http://(ltm-[0-9a-f]{16}\.localhost):(\d+)", server.web)
    assert found and found.group(2) == port, server.web
    name = found.group(1)
    assert f"web view at {server.web}/web" in server.logs().splitlines()[0]
    _uid, token = server.issue("lou")
    packet = make_packet(goal="Loopback notes")
    api = server.client(token)
    assert api.post("/v1/packets", json=packet).status_code == 201  # the API: 127.0.0.1
    public = api.post(f"/v1/packets/{packet['id']}/publish").json()["public_url"]
    assert public.startswith(server.url + "/p/")  # handed around: never the pages' name
    assert httpkit.get(public).status_code == 200
    assert httpkit.get(server.url + "/web/static/app.css").status_code == 200
    for host in (
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"ltm-0000000000000000.localhost:{port}",
    ):
        for method, path in (
            ("GET", "/web"),
            ("GET", "/web/signin"),
            ("POST", "/web/signin"),
            ("GET", f"/web/packets/{packet['id']}"),
            ("POST", "/web/key"),
            ("GET", "/web/ui"),
        ):
            r = httpkit.request(
                method, f"http://127.0.0.1:{port}{path}", headers={"Host": host}, data={}
            )
            assert r.status_code == 421, (host, path, r.status_code)
            assert "set-cookie" not in r.headers, (host, path)
            # Says where to go, without the name: anyone on this machine can read this page.
            assert "ltm open" in r.text and name not in r.text
            assert r.headers["content-security-policy"] == CSP
    # A session belongs to the pages' name alone (host-only: no Domain attribute).
    web = browser_for(server, token)
    cookie = web.cookies.jar
    assert {c.domain for c in cookie} == {f"{name}.local"} or {c.name for c in cookie} >= {
        "ltm_web"
    }
    signed = [c for c in cookie if c.name == "ltm_web"]
    assert len(signed) == 1 and not signed[0].domain_specified
    page = web.get(f"/web/packets/{packet['id']}")
    assert page.status_code == 200 and public in page.text  # the link shown is the API's
    # Behind a reverse proxy the pages answer at the proxy's name, which is not loopback.
    proxied = httpkit.get(
        server.url + "/web/signin", headers={"X-Forwarded-Host": "ltm.example.org"}
    )
    assert proxied.status_code == 200


def test_a_server_with_an_external_url_serves_its_pages_there(tmp_path: Path) -> None:
    """``--external-url``: the operator names where clients reach the server; no other name."""
    with running_server(tmp_path, "--external-url", "https://ltm.example.org") as srv:
        assert srv.web == "" and "web view" not in srv.logs()
        page = httpkit.get(srv.url + "/web/signin", headers={"Host": "ltm.example.org"})
        assert page.status_code == 200


def view_on_a_clock(store: Any, clock: list[datetime], settings: Any = None) -> Any:
    """A ``WebView`` over ``store``, driven in-process at the time ``clock[0]`` (a session
    lives hours): no Cognito, the device flow's ``settings`` (the defaults)."""
    from ltm.service import device
    from ltm.web.device import DeviceWeb, Signer
    from ltm.web.view import WebView

    device_web = DeviceWeb(
        store,
        settings=settings or device.DeviceSettings.from_env({}),
        signer=Signer(b"k" * 32),
        cognito=None,
        clock=lambda: clock[0],
    )
    return WebView(device_web, clock=lambda: clock[0])


def page_asked(cookie: str) -> Any:
    """A ``GET`` of a page by a browser holding ``cookie`` (the in-process view's)."""
    from ltm.web.device import WebRequest

    return WebRequest("GET", {"cookie": cookie}, {}, b"", "127.0.0.1", "http://127.0.0.1:1")


def test_sessions_expire(tmp_path: Path) -> None:
    from ltm.service import tokens
    from ltm.store.sqlite import SqliteStore
    from ltm.web.view import SESSION_SECONDS

    store = SqliteStore(tmp_path / "s.db")
    user, _secret = tokens.issue(store, "clock")
    clock = [datetime(2026, 5, 1, tzinfo=UTC)]
    view = view_on_a_clock(store, clock)
    request = page_asked

    set_cookie = view.answer("ui", request(""))  # not ltm ui: 404, and no session
    assert set_cookie.status == 404
    cookie = view.start_session(request(""), user).split(";", 1)[0]
    assert view.answer("packets", request(cookie)).status == 200
    clock[0] += timedelta(seconds=SESSION_SECONDS - 1)
    assert view.answer("packets", request(cookie)).status == 200
    clock[0] += timedelta(seconds=2)
    assert view.answer("packets", request(cookie)).status == 303
    store.close()


def test_a_session_ends_when_the_token_it_was_signed_in_with_expires(tmp_path: Path) -> None:
    """A device token that lives a set time (``LTM_DEVICE_TOKEN_DAYS``) signs a browser in
    through the sign-in form; once the token has expired, so has that session, hours
    before a session's own end, as it ends when the token is revoked."""
    from urllib.parse import urlencode

    from ltm.service import device, tokens
    from ltm.store.sqlite import SqliteStore
    from ltm.web.device import WebRequest
    from ltm.web.view import SESSION_SECONDS

    store = SqliteStore(tmp_path / "s.db")
    _user, root = tokens.issue(store, "lapse")
    clock = [datetime(2026, 5, 1, tzinfo=UTC)]
    settings = device.DeviceSettings.from_env({"LTM_DEVICE_TOKEN_DAYS": "1"})
    view = view_on_a_clock(store, clock, settings)
    base = "http://127.0.0.1:1"
    # A device signs in, approved by the user: its token lasts one day.
    asked = device.authorize(
        store, settings, {"client_id": ["ltm-cli"]}, base_url=base, client_ip="", when=clock[0]
    )
    device.decide(
        store,
        settings,
        tokens.credential(f"Bearer {root}"),
        asked.user_code,
        approve=True,
        when=clock[0],
    )
    form = {"grant_type": [device.GRANT_TYPE], "client_id": ["ltm-cli"]}
    issued = device.token(
        store, settings, {**form, "device_code": [asked.device_code]}, when=clock[0]
    )
    assert issued.expires_in == 86400

    def request(method: str, cookie: str, body: dict[str, str] | None = None) -> WebRequest:
        headers = {"cookie": cookie, "content-type": "application/x-www-form-urlencoded"}
        return WebRequest(method, headers, {}, urlencode(body or {}).encode(), "", base)

    clock[0] += timedelta(days=1) - timedelta(hours=1)  # an hour before the token ends
    form_page = view.answer("sign_in", request("GET", ""))
    device_cookie = form_page.headers["Set-Cookie"].split(";", 1)[0]
    fields = {"csrf": csrf_of(form_page.body), "next": "/web", "token": issued.access_token}
    signed = view.answer("sign_in", request("POST", device_cookie, fields))
    assert signed.status == 303, signed.body
    cookie = signed.headers["Set-Cookie"].split(";", 1)[0]
    clock[0] += timedelta(hours=1) - timedelta(seconds=1)
    assert view.answer("packets", request("GET", cookie)).status == 200
    clock[0] += timedelta(seconds=1)  # the token's end; the session had hours left
    assert SESSION_SECONDS > 3600
    ended = view.answer("packets", request("GET", cookie))
    assert ended.status == 303 and "/web/signin" in ended.headers["Location"]
    store.close()


def test_someone_who_left_is_signed_out_of_the_web_view_too(tmp_path: Path) -> None:
    """Ending everything of someone who left (``tokens.revoke_all``: ``ltm server
    revoke-token --user``, the AWS guide's snippet) ends their web sessions too: one
    signed in through Cognito carries no token whose revocation would end it, and would
    otherwise read and delete for the rest of its 8 hours. Nobody else's session ends."""
    from ltm.service import tokens
    from ltm.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    sam, _ = tokens.issue(store, "sam")
    ann, _ = tokens.issue(store, "ann")
    clock = [datetime(2026, 5, 1, tzinfo=UTC)]
    view = view_on_a_clock(store, clock)
    request = page_asked

    def signed_in(user: Any) -> str:  # back from Cognito's login: a session, no token
        answer = view.answer("signed_in_by_cognito", request(""), user=user, next_path="/web")
        assert answer.status == 303
        return answer.headers["Set-Cookie"].split(";", 1)[0]

    sams, anns = signed_in(sam), signed_in(ann)
    assert view.answer("packets", request(sams)).status == 200
    clock[0] += timedelta(minutes=1)
    tokens.revoke_all(store, sam.id, when=clock[0])
    ended = view.answer("packets", request(sams))
    assert ended.status == 303 and "/web/signin" in ended.headers["Location"]
    assert view.answer("packets", request(anns)).status == 200
    store.close()


def test_links_keep_an_api_stage_prefix(tmp_path: Path) -> None:
    """On API Gateway's default domain the stage is part of every path (``/api/web``)."""
    from ltm.service import device, packets, tokens
    from ltm.store.sqlite import SqliteStore
    from ltm.web.device import DeviceWeb, Signer, WebRequest
    from ltm.web.view import WebView

    store = SqliteStore(tmp_path / "s.db")
    user, _secret = tokens.issue(store, "stage")
    packets.push(store, user, make_packet(goal="On a stage"))
    device_web = DeviceWeb(
        store, settings=device.DeviceSettings.from_env({}), signer=Signer(b"k" * 32), cognito=None
    )
    view = WebView(device_web)
    base = "https://abc123.execute-api.eu-west-1.amazonaws.com/api"

    def request(cookie: str) -> WebRequest:
        return WebRequest("GET", {"cookie": cookie}, {}, b"", "192.0.2.1", base)

    signed_out = view.answer("packets", request(""))
    assert signed_out.headers["Location"] == base + "/web/signin?next=/web"
    cookie = view.start_session(request(""), user)
    assert "__Host-ltm_web=" in cookie and "Secure" in cookie
    page = view.answer("packets", request(cookie.split(";", 1)[0])).body
    paths = re.findall(r'(?:href|src|action)="([^"]+)"', page)
    assert paths and all(p.startswith("/api/web") for p in paths), paths
    store.close()


# -- ltm ui -------------------------------------------------------------------------------------

UI_URL = re.compile(r"http://(ltm-[0-9a-f]{16}\.localhost):(\d+)/web/ui\?key=[A-Za-z0-9_-]{43}")


@contextmanager
def running_ui(cli: Cli, **env: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``ltm ui`` as a subprocess: (the one-time URL it prints, the process)."""
    proc = subprocess.Popen(
        [LTM, "ui", *([] if env else ["--no-browser"])],
        env={**cli.env, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # blocks until the server listens
        assert UI_URL.fullmatch(line), line
        yield line, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=scaled(15))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=scaled(15))


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[tuple[str, Cli]]:
    """``ltm ui --no-browser`` on a local store holding one packet: (its one-time URL, the CLI)."""
    cli = Cli(tmp_path / "me")
    cli.ok("save", "-", stdin=json.dumps(make_packet(goal="Local <thing>")))
    with running_ui(cli) as (url, _proc):
        yield url, cli


def test_ltm_ui_stops_promptly_on_sigterm_with_connections_open(tmp_path: Path) -> None:
    # A browser keeps its connection open after a page, and a stalled one may be mid-request:
    # neither may hold the view up once it is told to stop (a supervisor's SIGTERM).
    cli = Cli(tmp_path / "me")
    with running_ui(cli) as (url, proc):
        address = UI_URL.fullmatch(url)
        assert address is not None
        host, port = address.group(1, 2)
        kept = socket.create_connection(("127.0.0.1", int(port)))
        kept.sendall(f"GET /web HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        assert kept.recv(64).startswith(b"HTTP/1.1 ")
        stalled = socket.create_connection(("127.0.0.1", int(port)))
        stalled.sendall(f"GET /web HTTP/1.1\r\nHost: {host}:{port}\r\n".encode())
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=scaled(30)) == 0
        assert time.monotonic() - started < scaled(5)
        kept.close()
        stalled.close()


def test_ltm_ui_exchanges_its_one_time_key_for_a_cookie(ui: tuple[str, Cli]) -> None:
    url, _cli = ui
    base = url.split("/web/ui", 1)[0]
    with local_client(follow_redirects=True) as stranger:  # another local user, no key
        page = stranger.get(base + "/web")
    assert "run <code>ltm ui</code> again" in page.text and "Local &lt;thing&gt;" not in page.text
    assert page.headers["content-security-policy"] == CSP

    me = local_client(follow_redirects=False)
    first = me.get(url)
    assert first.status_code == 303 and first.headers["location"] == base + "/web"  # a clean URL
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    page = me.get(base + "/web")
    assert page.status_code == 200 and "Local &lt;thing&gt;" in page.text
    assert "Sign out" not in page.text  # the session ends with the process
    # One scope, nothing to pick: no scope controls, no "All my scopes".
    assert 'name="team"' not in page.text and "All my scopes" not in page.text
    # Nobody else writes to the local store: no link to packets shared with "you".
    assert "Shared with you" not in page.text

    again = local_client().get(url, follow_redirects=False)  # the key works once
    assert again.status_code == 403
    guessed = local_client().get(base + "/web/ui?key=" + "A" * 43, follow_redirects=False)
    assert guessed.status_code == 403
    # Token sign-in is off: the local store has no tokens to check.
    form = local_client().post(base + "/web/signin", data={"token": "x"})
    assert form.status_code == 403


def test_ltm_ui_names_who_wrote_a_copy_of_anothers_packet(tmp_path: Path) -> None:
    """A teammate's packet imported into the local store: ``ltm ui`` says whose it is in
    the list and on its page, as ``ls`` and ``show`` do; the user's own names nobody."""
    cli = Cli(tmp_path / "me")
    mine, theirs = make_packet(goal="My own plan"), make_packet(goal="Olive's fix")
    cli.ok("save", "-", stdin=json.dumps(mine))
    header = {"format": "ltm-bundle", "version": 1, "source": "https://team.example"}
    line = {
        "id": theirs["id"],
        "scope": "team",
        "team": "core",
        "created_by": "01OLIVE",
        "created_by_name": "Olive <O>",
        "packet": theirs,
    }
    bundle = tmp_path / "team.jsonl"
    bundle.write_text(f"{json.dumps(header)}\n{json.dumps(line)}\n")
    cli.ok("import", str(bundle), "--local")
    with running_ui(cli) as (url, _proc):
        base = url.split("/web/ui", 1)[0]
        me = local_client(follow_redirects=False)
        assert me.get(url).status_code == 303
        listed = me.get(base + "/web").text
        rows = {
            goal: row for row in listed.split("<li") for goal in ("My own", "Olive") if goal in row
        }
        assert 'by <span class="author">Olive &lt;O&gt;</span>' in rows["Olive"]
        assert "author" not in rows["My own"]
        page = me.get(f"{base}/web/packets/{theirs['id']}").text
        assert "Olive &lt;O&gt; (01OLIVE)" in page
        assert "Olive" not in me.get(f"{base}/web/packets/{mine['id']}").text


def test_ltm_ui_answers_only_its_own_host_name(ui: tuple[str, Cli]) -> None:
    """Cookies do not separate ports: the view's cookie must belong to a name of its own."""
    url, _cli = ui
    found = UI_URL.fullmatch(url)
    assert found
    name, port = found.group(1), found.group(2)
    key_path = url.split(f":{port}", 1)[1]
    for host in (
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"ltm-0000000000000000.localhost:{port}",
    ):
        for path in (key_path, "/web", "/web/signin", "/v1/healthz", "/device"):
            r = httpkit.get(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
            assert r.status_code == 421, (host, path, r.status_code)
            assert "set-cookie" not in r.headers and name not in r.text
    # None of those spent the key: the view's own name still takes it, once.
    first = local_client().get(url, follow_redirects=False)
    assert first.status_code == 303
    cookie = first.headers["set-cookie"]
    assert "Domain=" not in cookie  # host-only: the random name alone receives it


def test_ltm_ui_serves_before_the_browser_returns_and_keeps_its_key_off_argv(
    tmp_path: Path,
) -> None:
    """A browser command that blocks must not hang the view, and must not see the key."""
    cli = Cli(tmp_path / "me")
    cli.ok("save", "-", stdin=json.dumps(make_packet(goal="Blocked browser")))
    argv_file = tmp_path / "argv.txt"
    browser = tmp_path / "browser.sh"
    # Records its arguments and the page it was given, then blocks until killed.
    browser.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" >> {argv_file}\n'
        f'cat "${{1#file://}}" >> {argv_file}.page 2>/dev/null\nexec sleep 600\n'
    )
    browser.chmod(0o755)
    env = {"BROWSER": f"{browser} %s", "DISPLAY": ":0", "LTM_STATE_DIR": str(tmp_path / "st")}
    cli.env.pop("LTM_NO_BROWSER", None)
    with running_ui(cli, **env) as (url, _proc):
        key = url.split("key=", 1)[1]
        base = url.split("/web/ui", 1)[0]
        # The server answers while the browser command still sleeps.
        assert local_client().get(base + "/web", follow_redirects=False).status_code == 303
        for _ in range(300):
            if argv_file.exists() and Path(f"{argv_file}.page").exists():
                break
            time.sleep(0.1)
        argv = argv_file.read_text()
        assert key not in argv and "localhost" not in argv
        (opened,) = argv.split()
        assert opened.startswith("file://")
        page = Path(opened.removeprefix("file://"))
        assert stat.S_IMODE(page.stat().st_mode) == 0o600
        assert stat.S_IMODE(page.parent.stat().st_mode) == 0o700
        # The private page posts the key: this is what the browser does with it.
        posted = local_client().post(base + "/web/ui", data={"key": key})
        assert posted.status_code == 200 and "set-cookie" in posted.headers
    assert not page.exists()  # removed when ltm ui stopped


def test_ltm_ui_listens_on_loopback_only(ui: tuple[str, Cli]) -> None:
    url, _cli = ui
    found = UI_URL.fullmatch(url)
    assert found
    port = int(found.group(2))
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        pytest.skip("reads Linux's socket tables")
    listening = []
    for table in tables:
        for line in table.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, and nothing else (no 0.0.0.0, no ::)


def test_forms_with_non_ascii_secrets_are_refused_not_a_server_error(server: Server) -> None:
    """A CSRF field, ticket or key a client fills with non-ASCII text is just wrong: each
    form answers 4xx (constant-time comparison on bytes, not on a str it cannot take)."""
    _user, token = server.issue()
    web, device_pages = browser_for(server, token), local_client(base_url=server.url)
    odd = {"csrf": "é\u2028", "ticket": "ü.é", "key": "x.é", "code": "ABCD-EFGH"}
    for client, path in (
        (web, "/web/signout"),
        (web, "/web/signin"),
        (web, "/web/signin/code"),
        (web, "/web/key"),
        (web, "/web/packets/01ABCDEFGHJKMNPQRSTVWXYZ00/delete"),
        (device_pages, "/device"),
        (device_pages, "/device/decide"),
    ):
        answer = client.post(path, data=odd, headers={"Origin": str(client.base_url)})
        assert answer.status_code < 500, (path, answer.status_code)


def test_every_hidden_character_shows_as_a_marker_and_text_keeps_its_own() -> None:
    """Every control and format character of packet text (bidi controls, zero-width space,
    BOM, the tag characters that spell text only an agent reads) shows as ``[U+XXXX]``;
    what people write (joiners of Persian and emoji, spaces of every kind, line breaks,
    variation selectors) shows as written."""
    import unicodedata

    from ltm.web import render

    kept = "\n\r\t\u200c\u200d"
    hidden = [
        chr(c)
        for c in range(0x110000)
        if unicodedata.category(chr(c)) in ("Cc", "Cf") and chr(c) not in kept
    ]
    markers = "".join(f"[U+{ord(ch):04X}]" for ch in hidden)
    assert render.text("a" + "".join(hidden) + "<b>") == "a" + markers + "&lt;b&gt;"
    written = "می\u200cخواهم 👨\u200d👩\u200d👧 ❤\ufe0f pay\u00a0100 日本\u3000語 line\nnext\ttab"
    assert render.text(written) == written
