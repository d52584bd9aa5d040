"""Cognito sign-in on the verification page: configuration, ID-token checks, callback refusals.

A local RSA key and a loopback HTTP server play the pool's JWKS and token
endpoints, so every way an ID token or a callback can be wrong is tried:
another audience or issuer, an access token, an expired token, a forged
signature, a state from another browser or tampered with, a PKCE verifier
that does not match, Cognito refusing the code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from ltm.service import device
from ltm.store.sqlite import SqliteStore
from ltm.web.cognito import CognitoConfig, CognitoError, display_name, pkce_challenge
from ltm.web.device import DeviceWeb, Signer, WebRequest, signing_key

POOL = "eu-west-1_TestPool"
CLIENT = "test-client-id"
ISSUER = f"https://cognito-idp.eu-west-1.amazonaws.com/{POOL}"
BASE = "https://api.example.org/prod"


def _key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY, OTHER_KEY = _key(), _key()


def _jwk(key: Any, kid: str) -> dict[str, Any]:
    data = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**data, "kid": kid, "alg": "RS256", "use": "sig"}


@dataclass
class Idp:
    """The pool's JWKS (``/{pool}/.well-known/jwks.json``) and the domain's ``/oauth2/token``."""

    url: str
    answer: tuple[int, dict[str, Any]] = (200, {})
    seen: list[dict[str, str]] = field(default_factory=list)

    def config(self, **extra: str) -> CognitoConfig:
        env = {
            "LTM_COGNITO_USER_POOL_ID": POOL,
            "LTM_COGNITO_CLIENT_ID": CLIENT,
            "LTM_COGNITO_DOMAIN": self.url,
            "AWS_ENDPOINT_URL_COGNITO_IDP": self.url,
            **extra,
        }
        config = CognitoConfig.from_env(env)
        assert config is not None
        return config


@pytest.fixture(scope="module")
def idp() -> Iterator[Idp]:
    state = Idp(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, data: dict[str, Any]) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == f"/{POOL}/.well-known/jwks.json":
                self._send(200, {"keys": [_jwk(KEY, "k1")]})
            else:
                self._send(404, {})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            form = {k: v[0] for k, v in parse_qs(raw).items()}
            form["authorization"] = self.headers.get("Authorization", "")
            state.seen.append(form)
            self._send(*state.answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def id_token(key: Any = KEY, kid: str = "k1", **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": CLIENT,
        "sub": "sub-1",
        "token_use": "id",
        "iat": now,
        "exp": now + 3600,
        "email": "zoe@example.org",
        **claims,
    }
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


# -- configuration ------------------------------------------------------------------------------


def test_configuration_from_the_environment() -> None:
    assert CognitoConfig.from_env({}) is None
    config = CognitoConfig.from_env(
        {
            "LTM_COGNITO_USER_POOL_ID": POOL,
            "LTM_COGNITO_CLIENT_ID": CLIENT,
            "LTM_COGNITO_DOMAIN": "ltm-prod",
        }
    )
    assert config is not None
    assert config.domain == "https://ltm-prod.auth.eu-west-1.amazoncognito.com"
    assert config.issuer == ISSUER
    assert config.jwks_url == f"{ISSUER}/.well-known/jwks.json"
    assert config.scopes == "openid email" and config.client_secret is None
    custom = CognitoConfig.from_env(
        {
            "LTM_COGNITO_USER_POOL_ID": POOL,
            "LTM_COGNITO_CLIENT_ID": CLIENT,
            "LTM_COGNITO_DOMAIN": "login.example.org",
        }
    )
    assert custom is not None and custom.domain == "https://login.example.org"
    with pytest.raises(ValueError, match="together"):
        CognitoConfig.from_env({"LTM_COGNITO_CLIENT_ID": CLIENT})
    with pytest.raises(ValueError, match="https"):
        CognitoConfig.from_env(
            {
                "LTM_COGNITO_USER_POOL_ID": POOL,
                "LTM_COGNITO_CLIENT_ID": CLIENT,
                "LTM_COGNITO_DOMAIN": "http://login.example.org",  # plain HTTP, not loopback
            }
        )


def test_authorize_url_uses_pkce_s256(idp: Idp) -> None:
    config = idp.config()
    url = config.authorize_url(redirect_uri=f"{BASE}/device/callback", state="s", verifier="v" * 43)
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{idp.url}/oauth2/authorize"
    assert query == {
        "response_type": "code",
        "client_id": CLIENT,
        "redirect_uri": f"{BASE}/device/callback",
        "scope": "openid email",
        "state": "s",
        "code_challenge": pkce_challenge("v" * 43),
        "code_challenge_method": "S256",
    }
    # RFC 7636 appendix B's example.
    assert (
        pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


# -- the ID token -------------------------------------------------------------------------------


def test_a_good_id_token_is_believed(idp: Idp) -> None:
    claims = idp.config().verify_id_token(id_token())
    assert claims["sub"] == "sub-1" and display_name(claims) == "zoe@example.org"
    assert display_name({"cognito:username": "zoe"}) == "zoe" and display_name({}) == "user"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (lambda: id_token(aud="another-client"), "InvalidAudience"),
        (
            lambda: id_token(iss="https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Other"),
            "InvalidIssuer",
        ),
        (lambda: id_token(exp=int(time.time()) - 3600), "ExpiredSignature"),
        (lambda: id_token(token_use="access"), "not an ID token"),
        (lambda: id_token(token_use=None), "not an ID token"),
        (lambda: id_token(sub=None), "MissingRequiredClaim"),
        (lambda: id_token(key=OTHER_KEY), "InvalidSignature"),
        (lambda: id_token(kid="unknown"), "PyJWKClientError"),
        (
            lambda: jwt.encode(
                {"sub": "x", "aud": CLIENT, "iss": ISSUER},
                "an-hmac-secret-long-enough-for-sha256!",
                algorithm="HS256",
            ),
            "",
        ),
        (lambda: "not.a.jwt", ""),
    ],
)
def test_a_bad_id_token_is_refused(idp: Idp, token: Any, reason: str) -> None:
    with pytest.raises(CognitoError, match=reason or None):
        idp.config().verify_id_token(token())


def test_code_exchange(idp: Idp) -> None:
    config = idp.config(LTM_COGNITO_CLIENT_SECRET="s3cr3t/+")
    idp.answer = (200, {"id_token": "x.y.z", "access_token": "a", "token_type": "Bearer"})
    got = config.exchange_code(code="c0de", redirect_uri=f"{BASE}/device/callback", verifier="v")
    assert got["id_token"] == "x.y.z"
    sent = idp.seen[-1]
    assert sent["grant_type"] == "authorization_code" and sent["code_verifier"] == "v"
    assert sent["code"] == "c0de" and sent["client_id"] == CLIENT
    pair = base64.b64decode(sent["authorization"].removeprefix("Basic ")).decode()
    assert pair == f"{CLIENT}:s3cr3t%2F%2B"  # RFC 6749 §2.3.1: form-encoded first
    idp.answer = (400, {"error": "invalid_grant"})
    with pytest.raises(CognitoError, match="invalid_grant"):
        config.exchange_code(code="c", redirect_uri="r", verifier="v")
    idp.answer = (200, {"access_token": "a"})
    with pytest.raises(CognitoError, match="no ID token"):
        config.exchange_code(code="c", redirect_uri="r", verifier="v")
    dead = CognitoConfig(POOL, CLIENT, "http://127.0.0.1:9")
    with pytest.raises(CognitoError, match="could not reach"):
        dead.exchange_code(code="c", redirect_uri="r", verifier="v")


# -- the callback page ---------------------------------------------------------------------------


@dataclass
class Browser:
    web: DeviceWeb
    cookie: str = ""
    code: str = ""  # the user code typed on the page

    def request(self, method: str, query: dict[str, str] | None = None, form: str = "") -> Any:
        headers = {"user-agent": "test"}
        if self.cookie:
            headers["cookie"] = self.cookie
        if form:
            headers["content-type"] = "application/x-www-form-urlencoded"
        return WebRequest(
            method=method,
            headers=headers,
            query={k: [v] for k, v in (query or {}).items()},
            body=form.encode(),
            client_ip="192.0.2.10",
            base_url=BASE,
        )

    def get_page(self) -> str:
        answer = self.web.page(self.request("GET"))
        set_cookie = answer.headers.get("Set-Cookie", "")
        if set_cookie:
            self.cookie = set_cookie.split(";", 1)[0]
        return answer.body


def _csrf(page: str) -> str:
    import re

    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found
    return found.group(1)


@pytest.fixture
def web(idp: Idp, tmp_path: Path) -> Iterator[DeviceWeb]:
    store = SqliteStore(tmp_path / "s.db")
    yield DeviceWeb(
        store,
        settings=device.DeviceSettings(),
        signer=Signer(signing_key(store, {})),
        cognito=idp.config(),
    )
    store.close()


def to_cognito(web: DeviceWeb) -> tuple[Browser, dict[str, str], str]:
    """A browser that entered a fresh code: the redirect's query and the device code."""
    from urllib.parse import urlencode

    auth = device.authorize(
        web.store, web.settings, {"client_id": ["ltm-cli"]}, base_url=BASE, client_ip="192.0.2.1"
    )
    browser = Browser(web, code=auth.user_code)
    csrf = _csrf(browser.get_page())
    answer = web.page(
        browser.request("POST", form=urlencode({"csrf": csrf, "code": auth.user_code}))
    )
    assert answer.status == 303
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    location = urlsplit(answer.headers["Location"])
    query = {k: v[0] for k, v in parse_qs(location.query).items()}
    assert query["redirect_uri"] == f"{BASE}/device/callback"
    return browser, query, auth.device_code


def test_callback_approves_only_with_everything_right(web: DeviceWeb, idp: Idp) -> None:
    browser, query, device_code = to_cognito(web)
    # CSP lets forms go to this server and the managed login only.
    assert f"form-action 'self' {idp.url};" in web._headers()["Content-Security-Policy"]
    idp.answer = (200, {"id_token": id_token(sub="sub-zoe"), "access_token": "a"})

    # A state from another browser (no or another session cookie) is refused.
    stranger = Browser(web)
    stranger.get_page()
    answer = web.callback(stranger.request("GET", {"code": "c", "state": query["state"]}))
    assert answer.status == 400 and "did not start in this browser" in answer.body
    # A tampered state is refused.
    forged = query["state"][:-2] + ("AA" if not query["state"].endswith("AA") else "BB")
    assert web.callback(browser.request("GET", {"code": "c", "state": forged})).status == 400
    # Cognito says the person cancelled.
    cancelled = web.callback(
        browser.request("GET", {"error": "access_denied", "state": query["state"]})
    )
    assert cancelled.status == 400 and "Sign-in cancelled" in cancelled.body
    # Cognito refuses the code, or hands back a bad token: 502, nothing decided.
    idp.answer = (400, {"error": "invalid_grant"})
    assert (
        web.callback(browser.request("GET", {"code": "c", "state": query["state"]})).status == 502
    )
    idp.answer = (200, {"id_token": id_token(aud="someone-else")})
    assert (
        web.callback(browser.request("GET", {"code": "c", "state": query["state"]})).status == 502
    )
    assert web.store.get_user_by_subject("sub-zoe") is None

    # All right: the token exchange carries the PKCE verifier of this state's challenge.
    idp.answer = (200, {"id_token": id_token(sub="sub-zoe"), "access_token": "a"})
    answer = web.callback(browser.request("GET", {"code": "c", "state": query["state"]}))
    assert answer.status == 200 and "Approve this device?" in answer.body
    # What is approved, where, and the code to check against the terminal's (RFC 8628
    # §5.4: a code in a link someone sent is not the one on the person's own screen).
    assert f"<code>{browser.code}</code>" in answer.body
    assert f"<strong>{urlsplit(BASE).netloc}</strong>" in answer.body
    sent = idp.seen[-1]
    verifier = sent["code_verifier"]
    assert pkce_challenge(verifier) == query["code_challenge"]
    assert len(verifier) >= 43 and verifier not in answer.body
    assert sent["redirect_uri"] == f"{BASE}/device/callback"
    user = web.store.get_user_by_subject("sub-zoe")
    assert user is not None and user.display == "zoe@example.org"
    grant = web.store.get_device_grant(device.hash_code(device_code))
    assert grant is not None and grant.status == "pending"  # still needs the click


def test_signing_key_from_the_environment(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "k.db")
    try:
        kept = signing_key(store, {})
        assert kept == signing_key(store, {}) and len(kept) == 32
        configured = signing_key(store, {"LTM_DEVICE_SECRET": "x" * 40})
        assert configured == hashlib.sha256(b"x" * 40).digest() != kept
        with pytest.raises(ValueError, match="at least 32"):
            signing_key(store, {"LTM_DEVICE_SECRET": "short"})
    finally:
        store.close()


def test_signer_rejects_tampering_purpose_and_expiry() -> None:
    from datetime import UTC, datetime

    signer = Signer(b"k" * 32)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    token = signer.sign("state", {"d": "x", "exp": int(now.timestamp()) + 60})
    assert signer.unsign("state", token, now) == {"d": "x", "exp": int(now.timestamp()) + 60}
    assert signer.unsign("ticket", token, now) is None  # another purpose
    assert signer.unsign("state", token + "A", now) is None
    assert signer.unsign("state", "", now) is None
    # A forged value with a non-ASCII MAC: refused, not a TypeError from compare_digest
    # (a 500 on POST /web/key, and on any signed cookie a client sends).
    assert signer.unsign("state", "\x07Ø×p.ùA\x89", now) is None
    assert signer.unsign("state", token.split(".")[0] + ".é", now) is None
    later = datetime.fromtimestamp(now.timestamp() + 61, UTC)
    assert signer.unsign("state", token, later) is None
    assert Signer(b"j" * 32).unsign("state", token, now) is None


def test_past_the_address_limit_people_sign_in_before_their_code_is_checked(
    idp: Idp, tmp_path: Path
) -> None:
    """With Cognito, the code step before sign-in is the one anonymous lookup,
    charged to the address. Once someone there has guessed too much, the others behind the
    same address are not locked out: they sign in first, then their code is looked up and
    a wrong one is charged to them (RFC 8628 §5.1 stays bounded per user)."""
    from urllib.parse import urlencode

    store = SqliteStore(tmp_path / "s.db")
    web = DeviceWeb(
        store,
        settings=device.DeviceSettings(wrong_codes_per_client=2, wrong_codes_per_user=1),
        signer=Signer(signing_key(store, {})),
        cognito=idp.config(),
    )
    try:
        auth = device.authorize(
            store, web.settings, {"client_id": ["ltm-cli"]}, base_url=BASE, client_ip="192.0.2.1"
        )

        def enter(browser: Browser, code: str) -> Any:
            form = urlencode({"csrf": _csrf(browser.get_page()), "code": code})
            return web.page(browser.request("POST", form=form))

        guesser = Browser(web)
        for _ in range(2):
            assert enter(guesser, "BCDF-GHJK").status == 404
        # The address is over its limit; a neighbour's right code still goes on to sign-in.
        neighbour = Browser(web)
        answer = enter(neighbour, auth.user_code)
        assert answer.status == 303
        state = parse_qs(urlsplit(answer.headers["Location"]).query)["state"][0]
        idp.answer = (200, {"id_token": id_token(sub="sub-neighbour"), "access_token": "a"})
        page = web.callback(neighbour.request("GET", {"code": "c", "state": state}))
        assert page.status == 200 and "Approve this device?" in page.body
        assert f"<code>{auth.user_code}</code>" in page.body  # looked up after sign-in
        # The guesser's next wrong code goes to sign-in too, then is charged to them.
        answer = enter(guesser, "BCDF-GHJK")
        assert answer.status == 303
        state = parse_qs(urlsplit(answer.headers["Location"]).query)["state"][0]
        idp.answer = (200, {"id_token": id_token(sub="sub-guesser"), "access_token": "a"})
        page = web.callback(guesser.request("GET", {"code": "c", "state": state}))
        assert page.status == 404 and "unknown or expired code" in page.body
        answer = enter(guesser, auth.user_code)
        state = parse_qs(urlsplit(answer.headers["Location"]).query)["state"][0]
        page = web.callback(guesser.request("GET", {"code": "c", "state": state}))
        assert page.status == 429 and "you entered too many wrong codes" in page.body
        grant = store.get_device_grant(device.hash_code(auth.device_code))
        assert grant is not None and grant.status == "pending"
    finally:
        store.close()
