"""The OAuth grant's life against a real ``ltm server run``: scope, revocation (RFC 7009),
refresh rotation with reuse detection, and the transport rules of ``/mcp``.

Driven by hand as a client's requests (httpx), the person's browser followed as
``test_remote_mcp.browser_signs_in`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from serverkit import Server, running_server
from test_remote_mcp import browser_signs_in, mcp_ping, pkce

pytest.importorskip("mcp.server.auth")

REDIRECT = "http://127.0.0.1:41999/cb"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("oauth-grants")) as srv:
        yield srv


def register(http: httpx.Client, **extra: Any) -> dict[str, Any]:
    doc = {
        "client_name": "ltm test client",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
        **extra,
    }
    answer = http.post("/register", json=doc)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def signed_in(
    server: Server, http: httpx.Client, token: str, *, ask: str | None = "read write", **reg: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A registered client and the token answer of its completed sign-in."""
    client, form = authorized(server, http, token, ask=ask, **reg)
    answer = http.post("/token", data=form)
    assert answer.status_code == 200, answer.text
    return client, dict(answer.json())


def authorized(
    server: Server, http: httpx.Client, token: str, *, ask: str | None = "read write", **reg: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """A registered client the person allowed, and the token request that redeems its code."""
    client = register(http, **reg)
    verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": client["client_id"],
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s1",
        "resource": server.url + "/mcp",
    }
    if ask is not None:
        query["scope"] = ask
    back = browser_signs_in(server, server.url + "/authorize?" + urlencode(query), token)
    code = parse_qs(urlsplit(back).query)["code"][0]
    form = {
        "grant_type": "authorization_code",
        "client_id": client["client_id"],
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    if client.get("client_secret"):
        form["client_secret"] = client["client_secret"]
    return client, form


def refresh(http: httpx.Client, client: dict[str, Any], refresh_token: str) -> httpx.Response:
    return http.post(
        "/token",
        data={
            "grant_type": "refresh_token",
            "client_id": client["client_id"],
            "refresh_token": refresh_token,
        },
    )


# -- scope ------------------------------------------------------------------------------


def test_an_authorize_without_scope_gets_the_registered_scope_not_more(server: Server) -> None:
    _, token = server.issue("scoped")
    with server.client() as http:
        _, issued = signed_in(server, http, token, ask=None, scope="read")
        assert issued["scope"] == "read"


# -- revocation (RFC 7009) ----------------------------------------------------------------


def test_a_public_client_revokes_its_access_token_without_a_secret(server: Server) -> None:
    _, token = server.issue("rev-access")
    with server.client() as http:
        client, issued = signed_in(server, http, token)
        assert mcp_ping(http, issued["access_token"]) == 200
        answer = http.post(
            "/revoke",
            data={
                "token": issued["access_token"],
                "token_type_hint": "access_token",
                "client_id": client["client_id"],
            },
        )
        assert answer.status_code == 200, answer.text
        assert mcp_ping(http, issued["access_token"]) == 401
        # The grant is over: its refresh token has no access token left to replace.
        ended = refresh(http, client, issued["refresh_token"])
        assert ended.status_code == 400 and ended.json()["error"] == "invalid_grant"


def test_revoking_a_refresh_token_ends_its_access_token(server: Server) -> None:
    _, token = server.issue("rev-refresh")
    with server.client() as http:
        client, issued = signed_in(server, http, token)
        answer = http.post(
            "/revoke", data={"token": issued["refresh_token"], "client_id": client["client_id"]}
        )
        assert answer.status_code == 200, answer.text
        assert mcp_ping(http, issued["access_token"]) == 401


def test_another_client_cannot_revoke_a_token_it_does_not_hold(server: Server) -> None:
    _, token = server.issue("rev-other")
    with server.client() as http:
        _, issued = signed_in(server, http, token)
        stranger = register(http)
        answer = http.post(
            "/revoke", data={"token": issued["access_token"], "client_id": stranger["client_id"]}
        )
        assert answer.status_code == 200  # RFC 7009 §2.2: nothing to say either way
        assert mcp_ping(http, issued["access_token"]) == 200
        unknown = http.post("/revoke", data={"token": "x", "client_id": "no-such-client"})
        assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"
        missing = http.post("/revoke", data={"client_id": stranger["client_id"]})
        assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"


def test_a_confidential_client_revokes_with_its_secret_only(server: Server) -> None:
    _, token = server.issue("rev-secret")
    with server.client() as http:
        client, issued = signed_in(
            server, http, token, token_endpoint_auth_method="client_secret_post"
        )
        form = {"token": issued["access_token"], "client_id": client["client_id"]}
        wrong = http.post("/revoke", data={**form, "client_secret": "nope"})
        assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
        assert mcp_ping(http, issued["access_token"]) == 200
        right = http.post("/revoke", data={**form, "client_secret": client["client_secret"]})
        assert right.status_code == 200
        assert mcp_ping(http, issued["access_token"]) == 401


def test_a_replayed_refresh_token_ends_the_whole_grant(server: Server) -> None:
    """OAuth 2.1 §4.3.1: a rotated-out refresh token used again means one of two parties
    holding it is not the client; the grant ends for both."""
    _, token = server.issue("reuse")
    with server.client() as http:
        client, issued = signed_in(server, http, token)
        renewed = refresh(http, client, issued["refresh_token"])
        assert renewed.status_code == 200
        fresh = renewed.json()
        replay = refresh(http, client, issued["refresh_token"])
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        assert mcp_ping(http, fresh["access_token"]) == 401
        after = refresh(http, client, fresh["refresh_token"])
        assert after.status_code == 400 and after.json()["error"] == "invalid_grant"


def test_a_replayed_code_ends_the_sign_in_it_made(server: Server) -> None:
    """RFC 6749 §4.1.2 (and OAuth 2.1 §4.1.3): a code presented twice is refused, and the
    tokens issued for it are revoked, since one of the two presenting it is not the client."""
    _, token = server.issue("code-replay")
    with server.client() as http:
        client, form = authorized(server, http, token)
        first = http.post("/token", data=form)
        assert first.status_code == 200, first.text
        issued = first.json()
        assert mcp_ping(http, issued["access_token"]) == 200
        replay = http.post("/token", data=form)
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        assert mcp_ping(http, issued["access_token"]) == 401
        ended = refresh(http, client, issued["refresh_token"])
        assert ended.status_code == 400 and ended.json()["error"] == "invalid_grant"


def test_a_code_or_refresh_token_is_not_redeemed_for_another_resource(server: Server) -> None:
    """RFC 8707 §2: a token request naming a resource this server does not issue tokens for
    is ``invalid_target``, as at /authorize, and the code stays unspent; this server's own
    /mcp is taken."""
    _, token = server.issue("aud-at-token")
    elsewhere = "https://other.example/mcp"
    with server.client() as http:
        client, form = authorized(server, http, token)
        refused = http.post("/token", data={**form, "resource": elsewhere})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_target"
        assert refused.headers["cache-control"] == "no-store"
        # Nor in a multipart form (which the SDK's handler would read): refused outright.
        multipart = http.post("/token", data=form, files={"resource": (None, elsewhere)})
        assert multipart.status_code == 400 and multipart.json()["error"] == "invalid_request"
        taken = http.post("/token", data={**form, "resource": server.url + "/mcp"})
        assert taken.status_code == 200, taken.text
        renewal = {
            "grant_type": "refresh_token",
            "client_id": client["client_id"],
            "refresh_token": taken.json()["refresh_token"],
        }
        again = http.post("/token", data={**renewal, "resource": elsewhere})
        assert again.status_code == 400 and again.json()["error"] == "invalid_target"
        renewed = http.post("/token", data={**renewal, "resource": server.url + "/mcp"})
        assert renewed.status_code == 200, renewed.text


# -- the transport rules of /mcp ---------------------------------------------------------------


def test_the_metadata_names_public_clients_and_is_not_shared_cacheable(server: Server) -> None:
    with server.client() as http:
        documents = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
        for path in documents:
            found = http.get(path)
            assert "none" in found.json()["token_endpoint_auth_methods_supported"]
            assert "public" not in found.headers["cache-control"]
        prm = http.get("/.well-known/oauth-protected-resource/mcp")
        assert "public" not in prm.headers["cache-control"]


def test_no_error_code_in_the_challenge_when_no_credentials_were_sent(server: Server) -> None:
    """RFC 6750 §3.1: a request without credentials gets a challenge with no error code."""
    with server.client() as http:
        bare = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert bare.status_code == 401
        challenge = bare.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
        assert "error=" not in challenge
        wrong = http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Authorization": "Bearer ltm_nobody_00"},
        )
        assert wrong.status_code == 401
        assert 'error="invalid_token"' in wrong.headers["www-authenticate"]


def test_options_and_get_on_mcp_name_the_same_methods(server: Server) -> None:
    _, token = server.issue("allow")
    with server.client() as http:
        options = http.options("/mcp")
        got = http.get("/mcp", headers={"Authorization": f"Bearer {token}"})
        assert got.status_code == 405
        assert options.status_code in (200, 204)
        assert options.headers["allow"] == got.headers["allow"]


def test_mcp_refuses_a_foreign_origin_and_keeps_its_own(server: Server) -> None:
    """The 2025-11-25 transport: a present, not allowed Origin is 403 (DNS rebinding)."""
    _, token = server.issue("origin")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    auth = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2025-06-18",
    }
    with server.client() as http:
        for origin in ("http://evil.example", "null", "http://127.0.0.1:1"):
            refused = http.post("/mcp", json=body, headers={**auth, "Origin": origin})
            assert refused.status_code == 403, origin
            unsigned = http.post("/mcp", json=body, headers={"Origin": origin})
            assert unsigned.status_code == 403, origin
        own = http.post("/mcp", json=body, headers={**auth, "Origin": server.url})
        assert own.status_code == 200
        # DNS rebinding: a page at a name rebound to this loopback server sends that name
        # as Host and Origin both; only loopback names are this server's own.
        port = urlsplit(server.url).port
        rebound = {"Host": f"rebind.example:{port}", "Origin": f"http://rebind.example:{port}"}
        assert http.post("/mcp", json=body, headers={**auth, **rebound}).status_code == 403
        assert http.post("/mcp", json=body, headers=auth).status_code == 200  # no Origin


# -- the loopback server's pages name stays private --------------------------------------------


def test_an_anonymous_authorize_never_learns_the_pages_name(server: Server) -> None:
    """The pages' own name (``ltm-<hex>.localhost``) is what another local user needs to
    catch the web session cookie: no answer to an unauthenticated request carries it."""
    from test_remote_mcp import authorize_url

    assert server.web, "a loopback server has a pages name"
    name = urlsplit(server.web).hostname
    assert name
    _, token = server.issue("private-name")
    _, read_only = server.issue("private-name-ro")
    store = server.open_store()  # type: ignore[misc]
    try:
        from ltm.service import tokens

        user_id = tokens.whoami(store, tokens.credential(f"Bearer {read_only}"))[0].id
        read_only, record = tokens.new_token(user_id, "ro-consent", scope="read")
        store.add_token(record)
    finally:
        store.close()
    with server.client() as http:
        client = register(http)
        _, challenge = pkce()
        url = authorize_url(server, client["client_id"], REDIRECT, challenge)
        seen: list[str] = []
        answer = http.get(url)
        seen.append(answer.text + str(answer.headers))
        page = http.get(answer.headers["location"])
        seen.append(page.text + str(page.headers))
        request_id = parse_qs(urlsplit(answer.headers["location"]).query)["request"][0]
        form = {"request": request_id, "answer": "allow"}
        for wrong, status in (("", 400), ("ltm_nobody_00", 401), (read_only, 403)):
            refused = http.post("/web/authorize", data={**form, "token": wrong})
            assert refused.status_code == status, wrong
            assert "Allow this MCP client?" in refused.text
            seen.append(refused.text + str(refused.headers))
        for text in seen:
            assert name not in text
        allowed = http.post("/web/authorize", data={**form, "token": token})
        assert allowed.status_code == 303
        assert allowed.headers["location"].startswith(REDIRECT + "?code=")
        again = http.post("/web/authorize", data={**form, "token": token})
        assert again.status_code == 410  # answered once


def test_a_code_not_yet_redeemed_when_its_user_is_offboarded_gets_no_token(
    server: Server,
) -> None:
    """Ending everything of someone who left (``ltm server revoke-token --user``) ends the
    sign-ins they allowed whose code the client has not yet redeemed (it lives minutes)."""
    from ltm.service import tokens

    user_id, token = server.issue("leaving")
    with server.client() as http:
        _, form = authorized(server, http, token)
        store = server.open_store()  # type: ignore[misc]
        try:
            assert tokens.revoke_all(store, user_id)
        finally:
            store.close()
        answer = http.post("/token", data=form)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant", answer.text
    store = server.open_store()  # type: ignore[misc]
    try:
        assert store.list_tokens(user_id=user_id) == []
    finally:
        store.close()
