"""An MCP client's OAuth sign-in in a real headless Chromium, against ``ltm server run``.

The client's half is done as a client does it (registration, PKCE S256, the
token endpoint, then ``/mcp``); the person's half in the browser: ``/authorize``,
the consent page (answered with an ltm token at a loopback server's API address; in
the web view after Amazon Cognito's managed login as an AWS stage has it), and back to the client's
loopback redirect URI, which the browser is caught going to.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpkit
import pytest
from serverkit import Server, running_server
from test_browser_device import (  # the shared Chromium and Cognito fixtures
    ALICE,
    PASSWORD,
    aws_server,  # noqa: F401
    browser,  # noqa: F401
    cognito,  # noqa: F401
    page,  # noqa: F401
    sign_in_at_cognito,
)

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(), reason="/usr/bin/chromium is missing"
)

# The client registers its loopback redirect URI without a port and listens on whichever
# port it gets at sign-in (RFC 8252 §7.3): the server must take any.
REGISTERED = "http://127.0.0.1/callback"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("browser-mcp")) as srv:
        yield srv


def start(server: Server, callback: str) -> tuple[str, str, str]:
    """Register a client and build its authorization URL: (client id, verifier, URL)."""
    with server.client() as http:
        registered = http.post(
            "/register",
            json={
                "client_name": "Chromium test client",
                "redirect_uris": [REGISTERED],
                "grant_types": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_method": "none",
            },
        )
        assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    url = (
        server.url
        + "/authorize?"
        + urlencode(
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": callback,
                "code_challenge": challenge.rstrip(b"=").decode(),
                "code_challenge_method": "S256",
                "state": "st-1",
                "resource": server.url + "/mcp",
            }
        )
    )
    return client_id, verifier, url


@pytest.fixture
def caught() -> Iterator[dict[str, str]]:
    """The client's loopback listener (RFC 8252): a real one, keeping where the browser is
    sent back to."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: dict[str, str] = {}

    class Listener(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/callback"):  # not the browser's favicon.ico
                seen["url"] = seen["callback"] + self.path.removeprefix("/callback")
            body = b"signed in; close this tab"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    listener = ThreadingHTTPServer(("127.0.0.1", 0), Listener)
    seen["callback"] = f"http://127.0.0.1:{listener.server_port}/callback"
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        listener.shutdown()
        listener.server_close()


def consent(tab: Any, server: Server, who: str = "") -> None:
    """The consent page names the client and where it sends the person back, and, to a
    signed-in browser, the account the client gets (the browser may have been signed in as
    someone else by a page elsewhere); allow."""
    assert tab.locator("h1").inner_text() == "Allow this MCP client?"
    text = tab.locator("main").inner_text()
    assert "Chromium test client" in text and "http://127.0.0.1:" in text
    if who:
        assert f"the ltm memory of {who} (the account this browser is signed in as)" in text
    with tab.expect_navigation():
        tab.click("button[value=allow]")


def finish(server: Server, client_id: str, verifier: str, caught: dict[str, str]) -> str:
    """The client's half after the browser: the code for tokens, then one ``/mcp`` call."""
    query = parse_qs(urlsplit(caught["url"]).query)
    assert query["state"] == ["st-1"]
    with server.client() as http:
        tokens = http.post(
            "/token",
            data={
                "grant_type": "authorization_code",
                "client_id": client_id,
                "code": query["code"][0],
                "redirect_uri": caught["callback"],
                "code_verifier": verifier,
            },
        )
        assert tokens.status_code == 200, tokens.text
        answer = http.post(
            "/mcp",
            headers={
                "Authorization": f"Bearer {tokens.json()['access_token']}",
                "Accept": "application/json, text/event-stream",
                "Mcp-Protocol-Version": "2025-06-18",
            },
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "whoami", "arguments": {}},
            },
        )
    assert answer.status_code == 200, answer.text
    return str(json.loads(answer.text)["result"]["content"][0]["text"])


def test_self_hosted_sign_in_and_consent_in_chromium(
    server: Server,
    page: Any,  # noqa: F811
    caught: dict[str, str],
) -> None:
    user_id, token = server.issue("chrome-user")
    client_id, verifier, url = start(server, caught["callback"])
    page.goto(url)
    # A loopback server asks at the API's address (its pages' name is never told to an
    # anonymous request): the person's token, typed in, signs the answer.
    assert page.url.startswith(server.url + "/web/authorize?request=")
    page.fill("#token", token)
    consent(page, server)
    assert caught["url"].startswith(caught["callback"] + "?code=")
    assert user_id in finish(server, client_id, verifier, caught)


def test_cognito_sign_in_and_consent_in_chromium(
    aws_server: Server,  # noqa: F811
    cognito: Any,  # noqa: F811
    page: Any,  # noqa: F811
    caught: dict[str, str],
) -> None:
    """On AWS the person signs in with Cognito's managed login, as on the device pages."""
    client_id, verifier, url = start(aws_server, caught["callback"])
    page.goto(url)
    # On loopback (this test's stage) the question is first asked at the API's address;
    # someone without a token continues in the web view, where sessions live.
    request_id = page.locator("input[name=request]").get_attribute("value")
    page.goto(f"{aws_server.web}/web/authorize?request={request_id}")
    assert page.url.startswith((aws_server.web or aws_server.url) + "/web/signin?next=")
    with page.expect_navigation():
        page.click("button[type=submit]")
    sign_in_at_cognito(page, cognito, ALICE, PASSWORD)
    consent(page, aws_server, who=ALICE)
    assert caught["url"].startswith(caught["callback"] + "?code=")
    assert ALICE in finish(aws_server, client_id, verifier, caught)


def test_denying_sends_the_client_access_denied(
    server: Server,
    page: Any,  # noqa: F811
    caught: dict[str, str],
) -> None:
    server.issue("chrome-denier")
    _, _, url = start(server, caught["callback"])
    page.goto(url)
    with page.expect_navigation():  # denying needs no token
        page.click("button[value=deny]")
    query = parse_qs(urlsplit(caught["url"]).query)
    assert query["error"] == ["access_denied"] and "code" not in query
    assert httpkit.get(server.url + "/v1/healthz").status_code == 200
