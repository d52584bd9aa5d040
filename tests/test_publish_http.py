"""Publishing over HTTP against a real ``ltm server run`` (SQLite and DynamoDB), and its CLI.

The routes are the reference CLI's (``POST``/``DELETE /v1/packets/{id}/publish``,
answer ``{"id", "public_url"}``; internal/cli/publish.go in dennisdevulder/ltm):
its requests carry no body and no Content-Type, and any 2xx is success. The
public page needs no sign-in, is strict about what it lets the browser do,
and answers 404 the moment the packet is unpublished or deleted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpkit
import httpx
import pytest
from clikit import Cli, answered, signed_in
from serverkit import LTM, SERVER_STORES, Server, make_packet, running_server
from timing import scaled

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECRET_URL = re.compile(r"http://127\.0\.0\.1:\d+/p/([A-Za-z0-9_-]{32})")


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("publish"), store=request.param) as srv:
        yield srv


def reference_post(client: httpx.Client, path: str) -> httpx.Response:
    """What the Go client sends: no body, no Content-Type."""
    return client.request("POST", path, content=b"")


def test_publish_answers_the_reference_shape_and_serves_a_public_page(server: Server) -> None:
    ann = server.client(server.issue("ann")[1])
    packet = make_packet(goal="Shared <b>goal</b>", tags=["ops"])
    assert ann.post("/v1/packets", json=packet).status_code == 201

    first = reference_post(ann, f"/v1/packets/{packet['id']}/publish")
    assert first.status_code == 201
    assert set(first.json()) == {"id", "public_url"} and first.json()["id"] == packet["id"]
    url = first.json()["public_url"]
    found = SECRET_URL.fullmatch(url)
    assert found, url
    assert packet["id"] not in url  # the secret, never the id
    # Publishing again: the same URL, 200.
    again = reference_post(ann, f"/v1/packets/{packet['id']}/publish")
    assert again.status_code == 200 and again.json()["public_url"] == url

    page = httpkit.get(url)  # no sign-in
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "Shared &lt;b&gt;goal&lt;/b&gt;" in page.text and "<b>goal" not in page.text
    assert "/web/packets/" not in page.text  # nothing links into the signed-in view

    assert ann.delete(f"/v1/packets/{packet['id']}/publish").status_code == 204
    assert httpkit.get(url).status_code == 404
    assert ann.delete(f"/v1/packets/{packet['id']}/publish").status_code == 204  # idempotent
    # A new publication is a new secret; the old one stays dead.
    renewed = reference_post(ann, f"/v1/packets/{packet['id']}/publish").json()["public_url"]
    assert renewed != url and httpkit.get(renewed).status_code == 200
    assert httpkit.get(url).status_code == 404


def test_deleting_the_packet_kills_the_public_page_at_once(server: Server) -> None:
    ann = server.client(server.issue("ann")[1])
    packet = make_packet(goal="Soon gone")
    ann.post("/v1/packets", json=packet)
    url = reference_post(ann, f"/v1/packets/{packet['id']}/publish").json()["public_url"]
    assert httpkit.get(url).status_code == 200
    assert ann.delete(f"/v1/packets/{packet['id']}").status_code == 204
    assert httpkit.get(url).status_code == 404
    # The same id pushed again is a new packet: the old link does not come back.
    assert ann.post("/v1/packets", json=packet).status_code == 201
    assert httpkit.get(url).status_code == 404


def test_only_the_owner_creator_or_team_owner_may_publish(server: Server) -> None:
    owner = server.client(server.issue("owner")[1])
    member_id, member_token = server.issue("member")
    member = server.client(member_token)
    stranger = server.client(server.issue("stranger")[1])
    team = f"pub-{member_id[-6:].lower()}"
    assert owner.post("/v1/teams", json={"name": team}).status_code == 201
    code = owner.post(f"/v1/teams/{team}/invites").json()["code"]
    assert member.post(f"/v1/invites/{code}/accept", json={}).status_code == 201

    mine = make_packet(goal="the owner's own")
    owner.post("/v1/packets", json=mine)
    by_member = make_packet(goal="the member's team packet")
    member.post(f"/v1/packets?team={team}", json=by_member)
    by_owner = make_packet(goal="the owner's team packet")
    owner.post(f"/v1/packets?team={team}", json=by_owner)

    for client in (member, stranger):  # someone else's personal packet: as if absent
        r = reference_post(client, f"/v1/packets/{mine['id']}/publish")
        assert r.status_code == 404 and r.json() == {"error": "not found"}
    # A member may not publish the owner's team packet; the team owner may publish any.
    assert reference_post(member, f"/v1/packets/{by_owner['id']}/publish").status_code == 404
    assert reference_post(member, f"/v1/packets/{by_member['id']}/publish").status_code == 201
    assert reference_post(owner, f"/v1/packets/{by_member['id']}/publish").status_code == 200
    assert stranger.delete(f"/v1/packets/{by_member['id']}/publish").status_code == 404
    assert (
        reference_post(stranger, "/v1/packets/01NOSUCHPACKET000000000000/publish").status_code
        == 404
    )
    assert httpkit.post(f"{server.url}/v1/packets/{mine['id']}/publish").status_code == 401


def scoped_token(server: Server, user_id: str, scope: str) -> str:
    """Another token of ``user_id`` with only ``scope`` (as the device flow grants one)."""
    from ltm.service import tokens
    from ltm.store import Token
    from ltm.store.sqlite import SqliteStore

    secret = tokens.mint(user_id)
    store = server.open_store() if server.open_store else SqliteStore(server.db)
    try:
        label = f"{scope.replace(' ', '-')}-{secret[-8:]}"
        store.add_token(
            Token(label, user_id, tokens.hash_token(secret), datetime.now(UTC), scope=scope)
        )
    finally:
        store.close()
    return secret


def test_publishing_needs_read_and_write(server: Server) -> None:
    """A write-only token must not read a packet by publishing it (the URL reads it)."""
    user_id, full = server.issue("wren")
    owner = server.client(full)
    packet = make_packet(goal="Private until published")
    assert owner.post("/v1/packets", json=packet).status_code == 201
    path = f"/v1/packets/{packet['id']}/publish"
    for scope in ("write", "read"):
        partial = server.client(scoped_token(server, user_id, scope))
        refused = reference_post(partial, path)
        assert refused.status_code == 403 and refused.json() == {"error": "insufficient scope"}
        assert refused.headers["WWW-Authenticate"].endswith('scope="read write"')
        assert "public_url" not in refused.text
    # Nothing was published: the full token's publish is a first one (201).
    url = reference_post(owner, path).json()["public_url"]
    assert httpkit.get(url).status_code == 200
    partial = server.client(scoped_token(server, user_id, "write"))
    assert partial.delete(path).status_code == 403
    assert httpkit.get(url).status_code == 200  # still published


def test_a_members_publications_die_when_they_leave_or_are_kicked(server: Server) -> None:
    owner = server.client(server.issue("boss")[1])
    kicked_id, kicked_token = server.issue("kicked")
    leaver = server.client(server.issue("leaver")[1])
    kicked = server.client(kicked_token)
    team = f"gone-{kicked_id[-6:].lower()}"
    assert owner.post("/v1/teams", json={"name": team}).status_code == 201
    for member in (kicked, leaver):
        code = owner.post(f"/v1/teams/{team}/invites").json()["code"]
        assert member.post(f"/v1/invites/{code}/accept", json={}).status_code == 201
    urls = {}
    for name, member in (("kicked", kicked), ("leaver", leaver), ("owner", owner)):
        packet = make_packet(goal=f"published by {name}")
        assert member.post(f"/v1/packets?team={team}", json=packet).status_code == 201
        urls[name] = reference_post(member, f"/v1/packets/{packet['id']}/publish").json()[
            "public_url"
        ]
        assert httpkit.get(urls[name]).status_code == 200
    assert owner.delete(f"/v1/teams/{team}/members/{kicked_id}").status_code == 204
    assert leaver.post(f"/v1/teams/{team}/leave").status_code == 204
    assert httpkit.get(urls["kicked"]).status_code == 404
    assert httpkit.get(urls["leaver"]).status_code == 404
    assert httpkit.get(urls["owner"]).status_code == 200  # the owner's stays


@pytest.mark.parametrize("secret", ["x", "A" * 32, "a" * 200, "..%2F..%2Fetc"])
def test_unknown_secrets_are_404(server: Server, secret: str) -> None:
    r = httpkit.get(f"{server.url}/p/{secret}")
    assert r.status_code == 404
    assert r.headers["content-security-policy"] == CSP


def cli_side(server: Server) -> None:
    """The CLI's side is the same on every store: it runs against the SQLite server only."""
    if server.store != "sqlite":
        pytest.skip("the CLI side is the same on every store")


def cli_on(server: Server, tmp_path: Path, name: str) -> Cli:
    """``name`` signed in on a machine of their own (the server is its default)."""
    cli_side(server)
    return signed_in(server, tmp_path / "cli", name)


def test_cli_publish_unpublish_and_open(server: Server, tmp_path: Path) -> None:
    cli = cli_on(server, tmp_path, "cara")
    packet = make_packet(goal="From the CLI")

    cli.ok("save", "-", stdin=json.dumps(packet))
    url = cli.ok("publish", packet["id"][:14]).strip()  # a prefix resolves
    assert SECRET_URL.fullmatch(url)
    assert httpkit.get(url).status_code == 200
    # `ltm show` states it, as the reference's show does from the same two headers
    # (internal/cli/show.go in dennisdevulder/ltm), with and without "--" first.
    for args in (("show", packet["id"][:14]), ("show", "--", packet["id"])):
        lines = cli.ok(*args).splitlines()
        published = [line for line in lines if line.startswith("Published ")]
        assert len(published) == 1, lines
        assert re.fullmatch(rf"Published \S+Z  {re.escape(url)}", published[0])
    assert cli.ok("unpublish", packet["id"], "--yes").strip() == f"unpublished {packet['id']}"
    assert httpkit.get(url).status_code == 404
    assert "Published" not in cli.ok("show", packet["id"])
    assert "no packet" in cli.fails("publish", "01NOSUCHPACKET000000000000")
    shown = cli.ok("open", packet["id"][:14], "--no-browser").strip()
    assert shown == f"{server.web}/web/packets/{packet['id']}"
    assert cli.ok("open", "--no-browser").strip() == f"{server.web}/web"
    local = Cli(tmp_path / "nobody")
    assert "ltm auth" in local.fails("publish", packet["id"])
    assert "ltm ui" in local.fails("open")


def test_a_packet_only_in_the_local_store_is_named_where_it_is(
    server: Server, tmp_path: Path
) -> None:
    """Saved before signing in (or with --local), a packet is not on the server: publish,
    share and open say where it is and how to copy it up, not only that the server has none."""
    cli = cli_on(server, tmp_path, "lou")
    pid = cli.ok("save", "--local", "-", stdin=json.dumps(make_packet(goal="Before"))).strip()
    for args in (("publish", pid[:14]), ("share", pid, "someone"), ("open", pid, "--no-browser")):
        said = cli.fails(*args)
        assert f"{pid} is in your local store, not on {server.url}" in said, said
        assert said.endswith(f"ltm push --from-local {pid}"), said
    assert "no packet" in cli.fails("publish", "01NOSUCHPACKET000000000000")
    cli.ok("push", "--from-local", pid)
    assert SECRET_URL.fullmatch(cli.ok("publish", pid[:14]).strip())


def test_unpublish_on_a_terminal_names_the_packet_before_it_asks(
    server: Server, tmp_path: Path
) -> None:
    # A prefix is resolved, and a wrong or ambiguous one told, before the question, which
    # names the packet and the URL that stops working.
    import pexpect

    cli = cli_on(server, tmp_path, "una")
    packet = make_packet(goal="Asked about")
    pid = cli.ok("save", "-", stdin=json.dumps(packet)).strip()
    url = cli.ok("publish", pid).strip()
    asked, said, status = answered(cli, ["unpublish", pid[:14]], "n")
    assert f"Unpublish {pid} (Asked about)? {url} stops working" in asked, asked
    assert "nothing unpublished" in said and status == 1
    assert httpkit.get(url).status_code == 200
    for wrong in ("01NOSUCHPACKET", pid[:2]):  # none, and (with the one above) ambiguous
        cli.ok("save", "-", stdin=json.dumps(make_packet(goal="Another")))
        child = pexpect.spawn(LTM, ["unpublish", wrong], env=cli.env, timeout=scaled(30))
        child.expect(pexpect.EOF)
        child.close()
        out = child.before.decode()
        assert "[y/N]" not in out and out.startswith("ltm: "), out
        assert child.exitstatus == 1


def test_the_unpublish_printed_reaches_the_server_it_was_published_on(
    server: Server, tmp_path: Path
) -> None:
    # Joined by invite, the machine's default stays the local store: the packet is
    # published with -H, and the command printed to revoke it must name that server too.
    import shlex

    cli_side(server)
    _, token = server.issue("pia")
    owner = server.client(token)
    assert owner.post("/v1/teams", json={"name": "pubteam"}).status_code == 201
    code = owner.post("/v1/teams/pubteam/invites", json={}).json()["code"]
    cli = Cli(tmp_path / "joiner")
    cli.ok("join", f"{server.url}/v1/invites/{code}")
    pid = cli.ok("save", "-t", "pubteam", "-", stdin=json.dumps(make_packet())).strip()
    published = cli.run("-H", server.url, "publish", pid)
    assert published.returncode == 0, published.stderr
    revoke = published.stderr.strip().rpartition("revoke it with: ")[2]
    assert revoke == f"ltm unpublish {pid} -H {server.url}"
    cli.ok(*shlex.split(revoke)[1:], "--yes")
    assert httpkit.get(published.stdout.strip()).status_code == 404


def _read_only_token(server: Server, user_id: str) -> str:
    from ltm.service.tokens import new_token

    secret, record = new_token(user_id, f"ro-{user_id[-8:]}", scope="read")
    store = server.open_store()
    try:
        store.add_token(record)
    finally:
        store.close()
    return secret


def test_a_read_tells_who_may_publish_that_the_packet_is_published(server: Server) -> None:
    # The reference CLI's `show` prints a "Published" line from these two headers of
    # GET /v1/packets/{id} (internal/cli/show.go in dennisdevulder/ltm, v0.11). They go to
    # whoever may publish the packet, never to a reader who may not.
    owner_id, owner_token = server.issue("pub-owner")
    owner = server.client(owner_token)
    member_id, member_token = server.issue("pub-member")
    member = server.client(member_token)
    team = f"hdr-{member_id[-6:].lower()}"
    assert owner.post("/v1/teams", json={"name": team}).status_code == 201
    code = owner.post(f"/v1/teams/{team}/invites").json()["code"]
    assert member.post(f"/v1/invites/{code}/accept", json={}).status_code == 201

    mine = make_packet(goal="personal, published")
    owner.post("/v1/packets", json=mine)
    shared = make_packet(goal="the owner's team packet, published")
    owner.post(f"/v1/packets?team={team}", json=shared)

    plain = owner.get(f"/v1/packets/{mine['id']}")
    assert plain.status_code == 200
    assert "x-ltm-published-at" not in plain.headers and "x-ltm-public-url" not in plain.headers

    url = reference_post(owner, f"/v1/packets/{mine['id']}/publish").json()["public_url"]
    got = owner.get(f"/v1/packets/{mine['id']}")
    assert got.headers["x-ltm-public-url"] == url
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", got.headers["x-ltm-published-at"])
    assert got.content == plain.content  # the body stays the packet's bytes

    team_url = reference_post(owner, f"/v1/packets/{shared['id']}/publish").json()["public_url"]
    assert owner.get(f"/v1/packets/{shared['id']}").headers["x-ltm-public-url"] == team_url
    # A member reads the owner's team packet but may not publish it: no URL for them.
    seen = member.get(f"/v1/packets/{shared['id']}")
    assert seen.status_code == 200
    assert "x-ltm-public-url" not in seen.headers and "x-ltm-published-at" not in seen.headers
    # A read-only token of the owner reads the packet, but may not publish: no URL either.
    read_only = server.client(_read_only_token(server, owner_id))
    seen = read_only.get(f"/v1/packets/{mine['id']}")
    assert seen.status_code == 200 and "x-ltm-public-url" not in seen.headers

    assert owner.delete(f"/v1/packets/{mine['id']}/publish").status_code == 204
    assert "x-ltm-public-url" not in owner.get(f"/v1/packets/{mine['id']}").headers
