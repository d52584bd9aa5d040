"""The device flow over HTTP, against a real ``ltm server run`` (self-hosted: token sign-in).

Every RFC 6749/8628 error of the two OAuth endpoints with its status and
body, the verification page's security headers, CSRF and session binding,
sign-in with an existing token, ``POST /v1/device/approve``, the caller's
token routes, and the wrong-code limit across requests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpkit
import httpx
import pytest
from devicekit import GRANT, approve, authorize, csrf_of, device_server, poll
from serverkit import SERVER_STORES, Server


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The server on each store: its SQLite file, and DynamoDB (moto's server)."""
    with device_server(tmp_path_factory.mktemp("device-http"), store=request.param) as srv:
        yield srv


def ticket_of(page: str) -> str:
    found = re.search(r'name="ticket" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


# -- the OAuth endpoints --------------------------------------------------------------------


def test_authorize_device_answers_rfc8628(server: Server) -> None:
    r = httpkit.post(
        server.url + "/oauth/authorize_device", data={"client_id": "ltm-cli", "scope": "read write"}
    )
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert set(body) == {
        "device_code",
        "user_code",
        "verification_uri",
        "verification_uri_complete",
        "expires_in",
        "interval",
    }
    assert re.fullmatch(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}", body["user_code"])
    assert body["verification_uri"] == server.url + "/device"
    assert body["verification_uri_complete"] == f"{server.url}/device?code={body['user_code']}"
    assert body["expires_in"] == 600 and body["interval"] == 1


def test_the_sign_in_page_tells_a_newcomer_about_invites(server: Server) -> None:
    """Someone new to the server, sent here by ``ltm auth URL``, has no token to paste:
    the page says that an invite is their way in."""
    with httpkit.Client(base_url=server.url) as browser:
        page = browser.get("/device")
    assert page.status_code == 200
    assert "with an invite?" in page.text and "<code>ltm join INVITE-URL</code>" in page.text


@pytest.mark.parametrize(
    ("data", "headers", "error", "status"),
    [
        ({"scope": "read write"}, {}, "invalid_request", 400),
        ({"client_id": "someone-else"}, {}, "invalid_client", 400),
        ({"client_id": "someone-else"}, {"Authorization": "Basic eDp5"}, "invalid_client", 401),
        ({"client_id": "ltm-cli", "scope": "admin"}, {}, "invalid_scope", 400),
    ],
)
def test_authorize_device_errors(
    server: Server, data: dict[str, str], headers: dict[str, str], error: str, status: int
) -> None:
    r = httpkit.post(server.url + "/oauth/authorize_device", data=data, headers=headers)
    assert r.status_code == status
    assert r.json()["error"] == error and r.json()["error_description"]
    assert r.headers["cache-control"] == "no-store"
    if status == 401:
        assert r.headers["www-authenticate"].startswith("Basic")


def test_oauth_endpoints_take_only_forms(server: Server) -> None:
    for path in ("/oauth/authorize_device", "/oauth/token"):
        r = httpkit.post(server.url + path, json={"client_id": "ltm-cli"})
        assert r.status_code == 400 and r.json()["error"] == "invalid_request"
        r = httpkit.post(
            server.url + path,
            content=b"client_id=ltm-cli&client_id=ltm-cli",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 400 and r.json()["error"] == "invalid_request"
        assert httpkit.get(server.url + path).status_code == 405


def test_every_token_endpoint_error(server: Server) -> None:
    code = authorize(server)["device_code"]
    url = server.url + "/oauth/token"
    cases = [
        ({"device_code": code, "client_id": "ltm-cli"}, "invalid_request"),
        ({"grant_type": "password", "device_code": code, "client_id": "ltm-cli"},
         "unsupported_grant_type"),
        ({"grant_type": GRANT, "device_code": code}, "invalid_request"),
        ({"grant_type": GRANT, "device_code": code, "client_id": "x"}, "invalid_client"),
        ({"grant_type": GRANT, "client_id": "ltm-cli"}, "invalid_request"),
        ({"grant_type": GRANT, "device_code": "bogus", "client_id": "ltm-cli"}, "invalid_grant"),
    ]  # fmt: skip
    for data, error in cases:
        r = httpkit.post(url, data=data)
        assert (r.status_code, r.json()["error"]) == (400, error), data
        assert r.headers["cache-control"] == "no-store" and r.headers["pragma"] == "no-cache"


def test_pending_slow_down_approve_single_use(server: Server) -> None:
    auth = authorize(server)
    r = poll(server, auth["device_code"])
    assert (r.status_code, r.json()["error"]) == (400, "authorization_pending")
    r = poll(server, auth["device_code"])  # at once: faster than the 1 s interval
    assert (r.status_code, r.json()["error"]) == (400, "slow_down")
    assert "6 seconds" in r.json()["error_description"]  # 1 + 5
    r = approve(server, server.root_token, auth["user_code"].lower().replace("-", " "))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "approved"
    assert r.json()["device"]["name"] == "ltm-test/1.0"
    assert r.json()["device"]["client_id"] == "ltm-cli"
    r = poll(server, auth["device_code"])  # approved: handed out whatever the pace
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["token_type"] == "Bearer" and set(body) == {"access_token", "token_type", "scope"}
    assert r.headers["cache-control"] == "no-store"
    listed = httpkit.get(
        server.url + "/v1/packets", headers={"Authorization": f"Bearer {body['access_token']}"}
    )
    assert listed.status_code == 200
    r = poll(server, auth["device_code"])
    assert (r.status_code, r.json()["error"]) == (400, "invalid_grant")


def test_denied_is_access_denied(server: Server) -> None:
    auth = authorize(server)
    r = approve(server, server.root_token, auth["user_code"], approve=False)
    assert r.status_code == 200 and r.json()["status"] == "denied"
    r = poll(server, auth["device_code"])
    assert (r.status_code, r.json()["error"]) == (400, "access_denied")


def test_expired_token(tmp_path: Path) -> None:
    with device_server(tmp_path, LTM_DEVICE_EXPIRES_IN="1") as srv:
        auth = authorize(srv)
        assert auth["expires_in"] == 1
        time.sleep(1.2)
        r = poll(srv, auth["device_code"])
        assert (r.status_code, r.json()["error"]) == (400, "expired_token")
        assert approve(srv, srv.root_token, auth["user_code"]).status_code == 404


# -- POST /v1/device/approve --------------------------------------------------------------------


def test_approve_api_errors(server: Server) -> None:
    auth = authorize(server)
    url = server.url + "/v1/device/approve"
    assert httpkit.post(url, json={"user_code": auth["user_code"]}).json() == {
        "error": "missing bearer token"
    }
    _uid, other = server.issue("approver")
    r = approve(server, other, auth["user_code"], approve="yes")
    assert r.status_code == 400
    r = httpkit.post(
        url,
        content=b"user_code=x",
        headers={"Authorization": f"Bearer {other}", "Content-Type": "text/plain"},
    )
    assert r.status_code == 415
    assert approve(server, other, auth["user_code"]).status_code == 200
    r = approve(server, other, auth["user_code"])
    assert r.status_code == 409 and "already" in r.json()["error"]


def test_a_waiting_sign_in_can_be_looked_at_without_deciding_it(server: Server) -> None:
    """``GET /v1/device/approve``: what ``ltm approve`` shows before asking (RFC 8628
    section 5.4: the code may come from someone who started the sign-in elsewhere)."""
    auth = authorize(server)
    url = server.url + "/v1/device/approve"
    _uid, token = server.issue("looker")
    bearer = {"Authorization": f"Bearer {token}"}
    r = httpkit.get(url, params={"user_code": auth["user_code"].lower()}, headers=bearer)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "pending"
    shown = r.json()["device"]
    assert {key: shown[key] for key in ("client_id", "name", "from", "scope")} == {
        "client_id": "ltm-cli",
        "name": "ltm-test/1.0",
        "from": "127.0.0.1",
        "scope": "read write",
    }
    # A look decides nothing: the device still waits, and the code can still be approved.
    r = poll(server, auth["device_code"])
    assert (r.status_code, r.json()["error"]) == (400, "authorization_pending")
    decided = approve(server, token, auth["user_code"])
    assert decided.status_code == 200
    assert decided.json() == {"status": "approved", "device": shown}  # the same device
    r = httpkit.get(url, params={"user_code": auth["user_code"]}, headers=bearer)
    assert r.status_code == 409 and "already" in r.json()["error"]
    assert httpkit.get(url, params={"user_code": "BCDF-GHJK"}, headers=bearer).status_code == 404
    assert httpkit.get(url, params={"user_code": auth["user_code"]}).status_code == 401


def test_wrong_codes_lock_out_the_guesser_not_their_neighbours(tmp_path: Path) -> None:
    """Wrong codes are charged to the user who typed them (RFC 8628 §5.1),
    so a guesser behind one address (every test client is 127.0.0.1) is stopped while
    another user from that same address approves their device."""
    with device_server(tmp_path) as srv:
        auth = authorize(srv)
        _bob_id, bob = srv.issue("bob")
        for _ in range(4):
            r = approve(srv, srv.root_token, "BCDF-GHJK")
            assert r.status_code == 404 and "unknown or expired code" in r.json()["error"]
        r = approve(srv, srv.root_token, auth["user_code"])  # even the right one, now
        assert r.status_code == 429 and "too many wrong codes" in r.json()["error"]
        # The page charges the same user: refused there too.
        with httpkit.Client(base_url=srv.url) as browser:
            page = browser.get("/device").text
            r = browser.post(
                "/device",
                data={"csrf": csrf_of(page), "code": auth["user_code"], "token": srv.root_token},
            )
            assert r.status_code == 429 and "too many wrong codes" in r.text
        # Bob, from the same address: not affected, on the page or with ltm approve.
        with httpkit.Client(base_url=srv.url) as browser:
            page = browser.get("/device").text
            r = browser.post(
                "/device", data={"csrf": csrf_of(page), "code": auth["user_code"], "token": bob}
            )
            assert r.status_code == 200 and "Approve this device?" in r.text
        assert approve(srv, bob, auth["user_code"]).status_code == 200


def test_wrong_tokens_on_the_page_are_charged_to_the_code(tmp_path: Path) -> None:
    with device_server(tmp_path, LTM_DEVICE_WRONG_SIGN_INS_PER_CODE="3") as srv:
        target, other = authorize(srv), authorize(srv)
        bad = "ltm_" + "0" * 64
        with httpkit.Client(base_url=srv.url) as browser:
            csrf = csrf_of(browser.get("/device").text)
            for _ in range(3):
                r = browser.post(
                    "/device", data={"csrf": csrf, "code": target["user_code"], "token": bad}
                )
                assert r.status_code == 401
            r = browser.post(
                "/device",
                data={"csrf": csrf, "code": target["user_code"], "token": srv.root_token},
            )
            assert r.status_code == 429 and "failed sign-ins for this code" in r.text
            # Another code, from the same address and session, is not affected.
            r = browser.post(
                "/device", data={"csrf": csrf, "code": other["user_code"], "token": srv.root_token}
            )
            assert r.status_code == 200 and "Approve this device?" in r.text


# -- the caller's tokens ------------------------------------------------------------------


def test_tokens_list_and_revoke_own_only(server: Server) -> None:
    _a, alice = server.issue("alice")
    _b, bob = server.issue("bob")
    auth = authorize(server, device_name="alice's phone")
    assert approve(server, alice, auth["user_code"]).status_code == 200
    device_token = poll(server, auth["device_code"]).json()["access_token"]

    r = httpkit.get(server.url + "/v1/tokens", headers={"Authorization": f"Bearer {device_token}"})
    assert r.status_code == 200
    rows = r.json()["tokens"]
    assert len(rows) == 2
    assert [row["current"] for row in rows] == [False, True]
    label = rows[1]["label"]
    assert re.fullmatch(r"alice-s-phone-[0-9a-f]{6}", label)
    assert "ltm_" not in r.text

    as_bob = {"Authorization": f"Bearer {bob}"}
    assert httpkit.delete(f"{server.url}/v1/tokens/{label}", headers=as_bob).status_code == 404
    as_alice = {"Authorization": f"Bearer {alice}"}
    assert httpkit.delete(f"{server.url}/v1/tokens/{label}", headers=as_alice).status_code == 204
    r = httpkit.get(server.url + "/v1/packets", headers={"Authorization": f"Bearer {device_token}"})
    assert r.status_code == 401 and r.json() == {"error": "invalid token"}
    assert httpkit.get(server.url + "/v1/tokens").status_code == 401


# -- the verification page ---------------------------------------------------------------

SECURITY_HEADERS = {
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-robots-tag": "noindex, nofollow",
}


def assert_page_headers(r: httpx.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert r.headers[name] == value, name
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "script-src" not in csp  # nothing may run
    assert re.search(r"style-src 'sha256-[A-Za-z0-9+/=]+'", csp)
    assert "<script" not in r.text.lower()


def test_page_is_plain_html_with_security_headers(server: Server) -> None:
    r = httpkit.get(server.url + "/device?code=bcdf-ghjk")
    assert r.status_code == 200
    assert_page_headers(r)
    assert 'name="viewport"' in r.text
    assert 'value="BCDF-GHJK"' in r.text  # normalized and filled in
    assert 'type="password"' in r.text  # self-hosted: sign in with a token
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    # The style block matches the CSP hash exactly.
    import base64
    import hashlib

    css = re.search(r"<style>(.*?)</style>", r.text, re.S).group(1)  # type: ignore[union-attr]
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in r.headers["content-security-policy"]
    # A hostile code value is escaped, never reflected raw.
    r = httpkit.get(server.url + '/device?code="><script>alert(1)</script>')
    assert r.status_code == 200 and "<script>" not in r.text


def test_page_posts_need_the_session_and_its_csrf_token(server: Server) -> None:
    auth = authorize(server)
    form = {"code": auth["user_code"], "token": server.root_token}
    r = httpkit.post(server.url + "/device", data={**form, "csrf": "x"})  # no cookie
    assert r.status_code == 403
    assert_page_headers(r)
    with httpkit.Client(base_url=server.url) as browser:
        page = browser.get("/device").text
        assert browser.post("/device", data={**form, "csrf": "forged"}).status_code == 403
        assert browser.post("/device", data=form).status_code == 403
        # Another session's valid CSRF token does not fit this session.
        with httpkit.Client(base_url=server.url) as other:
            foreign = csrf_of(other.get("/device").text)
        assert browser.post("/device", data={**form, "csrf": foreign}).status_code == 403
        r = browser.post("/device", data={**form, "csrf": csrf_of(page)})
        assert r.status_code == 200 and "Approve this device?" in r.text
    # Nothing was decided by any of this.
    assert poll(server, auth["device_code"]).json()["error"] == "authorization_pending"


def test_page_sign_in_with_a_token_approve_and_deny(server: Server) -> None:
    _uid, carol = server.issue("carol")
    first = authorize(server, device_name="<b>carol's</b> laptop")
    second = authorize(server)
    with httpkit.Client(base_url=server.url) as browser:
        csrf = csrf_of(browser.get("/device").text)
        # A wrong code, then a wrong token: refused, the token never echoed.
        r = browser.post("/device", data={"csrf": csrf, "code": "BCDF-GHJK", "token": carol})
        assert r.status_code == 404 and "unknown or expired code" in r.text
        assert carol not in r.text
        bad = "ltm_" + "0" * 64
        r = browser.post("/device", data={"csrf": csrf, "code": first["user_code"], "token": bad})
        assert r.status_code == 401 and bad not in r.text
        r = browser.post("/device", data={"csrf": csrf, "code": first["user_code"], "token": ""})
        assert r.status_code == 400
        # The right token: which device asks, escaped.
        r = browser.post("/device", data={"csrf": csrf, "code": first["user_code"], "token": carol})
        assert r.status_code == 200
        assert_page_headers(r)
        assert "&lt;b&gt;carol&#x27;s&lt;/b&gt; laptop" in r.text and "<b>carol" not in r.text
        assert "ltm-cli" in r.text and "127.0.0.1" in r.text and "carol" in r.text
        assert carol not in r.text
        # The code to check against the terminal's, and the server it signs in to.
        assert f"<code>{first['user_code']}</code>" in r.text
        assert f"<strong>{urlsplit(server.url).netloc}</strong>" in r.text
        ticket = ticket_of(r.text)
        # A tampered ticket or a missing action is refused.
        r = browser.post(
            "/device/decide", data={"csrf": csrf, "ticket": ticket + "x", "action": "approve"}
        )
        assert r.status_code == 400
        r = browser.post("/device/decide", data={"csrf": csrf, "ticket": ticket})
        assert r.status_code == 400
        r = browser.post(
            "/device/decide", data={"csrf": csrf, "ticket": ticket, "action": "approve"}
        )
        assert r.status_code == 200 and "Device approved" in r.text
        r = browser.post("/device/decide", data={"csrf": csrf, "ticket": ticket, "action": "deny"})
        assert r.status_code == 409
        # The second device is denied.
        r = browser.post(
            "/device", data={"csrf": csrf, "code": second["user_code"], "token": carol}
        )
        r = browser.post(
            "/device/decide", data={"csrf": csrf, "ticket": ticket_of(r.text), "action": "deny"}
        )
        assert r.status_code == 200 and "Device denied" in r.text
    # A ticket does not work from another session (another browser).
    with httpkit.Client(base_url=server.url) as thief:
        other_csrf = csrf_of(thief.get("/device").text)
        r = thief.post(
            "/device/decide", data={"csrf": other_csrf, "ticket": ticket, "action": "approve"}
        )
        assert r.status_code == 400

    token = poll(server, first["device_code"]).json()["access_token"]
    who = httpkit.get(server.url + "/v1/tokens", headers={"Authorization": f"Bearer {token}"})
    assert len(who.json()["tokens"]) == 2  # carol's own and the new device's
    assert poll(server, second["device_code"]).json()["error"] == "access_denied"


def test_callback_without_cognito_is_404(server: Server) -> None:
    r = httpkit.get(server.url + "/device/callback?code=x&state=y")
    assert r.status_code == 404
    assert_page_headers(r)


def test_nothing_secret_in_the_logs(server: Server) -> None:
    logs = server.logs()
    assert server.root_token not in logs
    assert "ltm_" not in logs
    assert "code=" not in logs  # no query string (user codes) in access lines
