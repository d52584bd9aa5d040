"""Where an OAuth client may send a person's browser back to, and what the consent page says
about it: https, loopback http and private-use schemes (RFC 8252 §7.1) only; never userinfo
or a fragment; the page shows scheme, host and port, and its CSP is built from them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from serverkit import Server, local_client, running_server
from test_remote_mcp import authorize_url, pkce

pytest.importorskip("mcp.server.auth")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("oauth-redirects")) as srv:
        yield srv


def registered(server: Server, redirect: str) -> tuple[int, dict[str, object]]:
    with server.client() as http:
        answer = http.post(
            "/register",
            json={
                "client_name": "redirects",
                "redirect_uris": [redirect],
                "token_endpoint_auth_method": "none",
            },
        )
    return answer.status_code, answer.json()


@pytest.mark.parametrize(
    "redirect",
    [
        "javascript:alert(document.cookie)//",
        "data:text/html,<script>alert(1)</script>",
        "https://app.example/cb#frag",
        "https://claude.ai@evil.example/cb",
        "https://user:pw@app.example/cb",
        "http://app.example/cb",  # plain http off loopback
        "file:///etc/passwd",
    ],
)
def test_a_registration_with_an_unsafe_redirect_uri_is_refused(
    server: Server, redirect: str
) -> None:
    status, body = registered(server, redirect)
    assert status == 400, body
    assert body["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


@pytest.mark.parametrize(
    "redirect",
    [
        "https://app.example/oauth/cb",
        "http://127.0.0.1:33418/callback",
        "http://[::1]/callback",
        "http://localhost:8080/cb",
        "cursor://anysphere.cursor-retrieval/oauth/callback",
        "com.example.app:/oauth2redirect",
    ],
)
def test_https_loopback_and_private_use_redirects_are_taken(server: Server, redirect: str) -> None:
    status, body = registered(server, redirect)
    assert status == 201, body


def consent_page(server: Server, client_id: str, redirect: str) -> tuple[int, str, str]:
    """Open the consent page an anonymous /authorize sends the browser to: (status, page,
    its CSP)."""
    _, challenge = pkce()
    url = authorize_url(server, client_id, redirect, challenge)
    with local_client(follow_redirects=False) as browser:
        shown = browser.get(browser.get(url).headers["location"])
        return shown.status_code, shown.text, shown.headers.get("content-security-policy", "")


def test_the_consent_page_shows_scheme_host_and_port(server: Server) -> None:
    status, body = registered(server, "https://app.example/oauth/cb")
    assert status == 201
    code, page, csp = consent_page(server, str(body["client_id"]), "https://app.example/oauth/cb")
    assert code == 200 and "https://app.example:443" in page
    assert "form-action 'self' https://app.example:443" in csp


def test_a_stored_client_with_userinfo_never_reaches_the_consent_question(server: Server) -> None:
    """A client kept from before these rules (or written by other means): the page refuses
    it rather than show ``claude.ai`` as the destination or paste its parts into the CSP."""
    hostile = "https://claude.ai@evil.example/cb"
    store = server.open_store()  # type: ignore[misc]
    try:
        store.put_oauth_item(
            "client",
            "legacy-client",
            {
                "client_id": "legacy-client",
                "client_name": "legacy",
                "redirect_uris": [hostile],
                "token_endpoint_auth_method": "none",
                "scope": "read write",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            },
            datetime(2100, 1, 1, tzinfo=UTC),
        )
    finally:
        store.close()
    code, page, csp = consent_page(server, "legacy-client", hostile)
    assert code == 400
    assert "Allow this MCP client?" not in page and "claude.ai" not in page
    assert "claude.ai" not in csp and "evil.example" not in csp


def test_a_client_named_by_its_document_is_shown_with_the_documents_host(server: Server) -> None:
    """A metadata document names its client as it likes: two documents that both say
    "Claude" and send the browser back to loopback would ask the same question. So the page
    also names the host the document is at, its client id's (draft-ietf-oauth-client-id-
    metadata-document §8.5: the server SHOULD display the hostname of the client_id)."""
    import hashlib

    redirect = "http://127.0.0.1/callback"
    ids = ("https://claude.ai/oauth/client.json", "https://claude-ai.example/client.json")
    store = server.open_store()  # type: ignore[misc]
    try:
        for client_id in ids:  # as a fetch at /authorize keeps them, so none is made here
            store.put_oauth_item(
                "cimd",
                hashlib.sha256(client_id.encode()).hexdigest(),
                {
                    "client_id": client_id,
                    "client_name": "Claude",
                    "redirect_uris": [redirect],
                    "scope": "read write",
                    "token_endpoint_auth_method": "none",
                },
                datetime(2100, 1, 1, tzinfo=UTC),
            )
    finally:
        store.close()
    (code, real, _), (code2, lookalike, _) = (consent_page(server, i, redirect) for i in ids)
    assert code == code2 == 200
    assert "<code>claude.ai</code>" in real and "claude-ai.example" not in real
    assert "<code>claude-ai.example</code>" in lookalike
    # A registered client's id is no place: no such line.
    status, body = registered(server, redirect)
    assert status == 201
    _, page, _ = consent_page(server, str(body["client_id"]), redirect)
    assert "in its document at" not in page
