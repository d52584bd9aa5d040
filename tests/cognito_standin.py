"""A stand-in for the parts of Amazon Cognito that moto does not serve: managed login.

moto implements the Cognito user-pool API (users, app clients, password
authentication, tokens signed with its JWKS, served at
``/{pool}/.well-known/jwks.json``) but not the hosted sign-in pages on the
pool's domain. This module runs moto's server on a loopback port and, next to
it, a small HTTP server that plays the pool's domain, backed by moto:

- ``GET /oauth2/authorize``: checks the request as Cognito does (a known app
  client, a registered callback URL, ``response_type=code``, allowed scopes,
  PKCE S256 present) and shows a sign-in form;
- ``POST /login``: checks the password with moto (``AdminInitiateAuth``,
  ``ADMIN_USER_PASSWORD_AUTH``), keeps moto's real tokens under a one-time
  authorization code and redirects to the callback with ``code`` and
  ``state`` (or ``error=access_denied`` when the person cancels);
- ``POST /oauth2/token``: ``grant_type=authorization_code`` with the code,
  the same ``redirect_uri`` and ``client_id``, and the PKCE verifier whose
  S256 matches the challenge; answers moto's ID, access and refresh tokens;
- ``GET /oauth2/userInfo``: the user's attributes for a moto access token.

The server under test is configured exactly as on AWS (pool id, client id,
domain = this stand-in's URL; ``AWS_ENDPOINT_URL_COGNITO_IDP`` = moto's URL
for the JWKS) and does not know it is talking to a stand-in.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

REGION = "us-east-1"
PASSWORD = "Corr3ct-Horse-Battery!"


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    tokens: dict[str, Any]
    used: bool = False


@dataclass
class Cognito:
    """moto's Cognito plus the stand-in managed login; ``domain`` is what the server is told."""

    moto_url: str
    domain: str
    pool_id: str
    client_id: str
    client: Any  # boto3 cognito-idp client, against moto
    codes: dict[str, Grant] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)  # "METHOD /path" seen by the stand-in

    def add_user(self, email: str, password: str = PASSWORD) -> str:
        """A confirmed user; returns its ``sub``."""
        self.client.admin_create_user(
            UserPoolId=self.pool_id,
            Username=email,
            UserAttributes=[
                {"Name": "email", "Value": email},
                {"Name": "email_verified", "Value": "true"},
            ],
            MessageAction="SUPPRESS",
        )
        self.client.admin_set_user_password(
            UserPoolId=self.pool_id, Username=email, Password=password, Permanent=True
        )
        user = self.client.admin_get_user(UserPoolId=self.pool_id, Username=email)
        return next(a["Value"] for a in user["UserAttributes"] if a["Name"] == "sub")

    def allow_callback(self, url: str) -> None:
        """Register a server's callback URL on the app client (known once it listens)."""
        known = (self.app_client(self.client_id) or {}).get("CallbackURLs", [])
        self.client.update_user_pool_client(
            UserPoolId=self.pool_id,
            ClientId=self.client_id,
            CallbackURLs=[*known, url],
            AllowedOAuthFlows=["code"],
            AllowedOAuthScopes=["openid", "email"],
            AllowedOAuthFlowsUserPoolClient=True,
            SupportedIdentityProviders=["COGNITO"],
            ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        )

    def env(self) -> dict[str, str]:
        """The server's configuration, as the AWS stage sets it."""
        return {
            "LTM_COGNITO_USER_POOL_ID": self.pool_id,
            "LTM_COGNITO_CLIENT_ID": self.client_id,
            "LTM_COGNITO_DOMAIN": self.domain,
            "AWS_ENDPOINT_URL_COGNITO_IDP": self.moto_url,
            "AWS_REGION": REGION,
        }

    # -- what the stand-in does --------------------------------------------------------

    def app_client(self, client_id: str) -> dict[str, Any] | None:
        try:
            found = self.client.describe_user_pool_client(
                UserPoolId=self.pool_id, ClientId=client_id
            )
        except self.client.exceptions.ResourceNotFoundException:
            return None
        return dict(found["UserPoolClient"])

    def sign_in(self, client_id: str, username: str, password: str) -> dict[str, Any] | None:
        try:
            answer = self.client.admin_initiate_auth(
                UserPoolId=self.pool_id,
                ClientId=client_id,
                AuthFlow="ADMIN_USER_PASSWORD_AUTH",
                AuthParameters={"USERNAME": username, "PASSWORD": password},
            )
        except (
            self.client.exceptions.NotAuthorizedException,
            self.client.exceptions.UserNotFoundException,
        ):
            return None
        result = answer["AuthenticationResult"]
        return {
            "id_token": result["IdToken"],
            "access_token": result["AccessToken"],
            "refresh_token": result["RefreshToken"],
            "expires_in": result["ExpiresIn"],
            "token_type": "Bearer",
        }


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _login_page(params: dict[str, str], error: str = "") -> bytes:
    hidden = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in params.items()
    )
    message = f'<p class="error">{html.escape(error)}</p>' if error else ""
    return (
        "<!doctype html><html><head><title>Sign in</title></head><body>"
        f"<h1>Sign in</h1>{message}"
        f'<form method="post" action="/login">{hidden}'
        '<label>Email <input name="username" id="signInFormUsername"></label>'
        '<label>Password <input name="password" type="password" id="signInFormPassword">'
        "</label>"
        '<button type="submit" name="signin" value="1">Sign in</button>'
        '<button type="submit" name="cancel" value="1">Cancel</button>'
        "</form></body></html>"
    ).encode()


def _handler(cognito: Cognito) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(
            self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: dict[str, Any]) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def _form(self) -> dict[str, str]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode()
            return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            cognito.requests.append(f"GET {parts.path}")
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == "/oauth2/authorize":
                self._authorize(query)
            elif parts.path == "/oauth2/userInfo":
                self._userinfo()
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            cognito.requests.append(f"POST {path}")
            form = self._form()
            if path == "/login":
                self._login(form)
            elif path == "/oauth2/token":
                self._token(form)
            else:
                self._send(404, b"not found", "text/plain")

        def _authorize(self, query: dict[str, str]) -> None:
            client = cognito.app_client(query.get("client_id", ""))
            problem = None
            if client is None:
                problem = "unknown client"
            elif query.get("response_type") != "code":
                problem = "unsupported response_type"
            elif query.get("redirect_uri") not in client.get("CallbackURLs", []):
                problem = "redirect_mismatch"
            elif not set(query.get("scope", "").split()) <= set(
                client.get("AllowedOAuthScopes", [])
            ):
                problem = "invalid_scope"
            elif query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
                problem = "PKCE S256 required"
            if problem:
                self._send(400, f"error: {problem}".encode(), "text/plain")
                return
            keep = ("client_id", "redirect_uri", "state", "code_challenge")
            self._send(200, _login_page({k: query.get(k, "") for k in keep}), "text/html")

        def _login(self, form: dict[str, str]) -> None:
            redirect, state = form.get("redirect_uri", ""), form.get("state", "")
            client = cognito.app_client(form.get("client_id", ""))
            if client is None or redirect not in client.get("CallbackURLs", []):
                self._send(400, b"error: bad login form", "text/plain")
                return
            if form.get("cancel"):
                target = f"{redirect}?{urlencode({'error': 'access_denied', 'state': state})}"
                self._send(302, b"", "text/plain", {"Location": target})
                return
            tokens = cognito.sign_in(
                form["client_id"], form.get("username", ""), form.get("password", "")
            )
            if tokens is None:
                keep = ("client_id", "redirect_uri", "state", "code_challenge")
                page = _login_page(
                    {k: form.get(k, "") for k in keep}, "Incorrect username or password."
                )
                self._send(200, page, "text/html")
                return
            code = secrets.token_urlsafe(24)
            cognito.codes[code] = Grant(
                form["client_id"], redirect, form.get("code_challenge", ""), tokens
            )
            target = f"{redirect}?{urlencode({'code': code, 'state': state})}"
            self._send(302, b"", "text/plain", {"Location": target})

        def _token(self, form: dict[str, str]) -> None:
            if form.get("grant_type") != "authorization_code":
                self._json(400, {"error": "unsupported_grant_type"})
                return
            grant = cognito.codes.get(form.get("code", ""))
            if (
                grant is None
                or grant.used
                or grant.client_id != form.get("client_id")
                or grant.redirect_uri != form.get("redirect_uri")
            ):
                self._json(400, {"error": "invalid_grant"})
                return
            if _s256(form.get("code_verifier", "")) != grant.challenge:
                self._json(400, {"error": "invalid_grant"})
                return
            grant.used = True
            self._json(200, grant.tokens)

        def _userinfo(self) -> None:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                self._json(401, {"error": "invalid_token"})
                return
            try:
                user = cognito.client.get_user(AccessToken=auth[7:])
            except Exception:
                self._json(401, {"error": "invalid_token"})
                return
            self._json(200, {a["Name"]: a["Value"] for a in user["UserAttributes"]})

    return Handler


@contextmanager
def cognito_standin() -> Iterator[Cognito]:
    """moto's server with a user pool and app client, and the managed-login stand-in."""
    import boto3
    from moto.server import ThreadedMotoServer

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    moto_url = f"http://{host}:{port}"
    client = boto3.client(
        "cognito-idp",
        region_name=REGION,
        endpoint_url=moto_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    pool_id = client.create_user_pool(PoolName="ltm", UsernameAttributes=["email"])["UserPool"][
        "Id"
    ]
    client_id = client.create_user_pool_client(
        UserPoolId=pool_id,
        ClientName="ltm-device-pages",
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        AllowedOAuthFlows=["code"],
        AllowedOAuthScopes=["openid", "email"],
        AllowedOAuthFlowsUserPoolClient=True,
        SupportedIdentityProviders=["COGNITO"],
        CallbackURLs=["https://placeholder.invalid/device/callback"],
    )["UserPoolClient"]["ClientId"]

    standin = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    cognito = Cognito(
        moto_url=moto_url,
        domain=f"http://127.0.0.1:{standin.server_address[1]}",
        pool_id=pool_id,
        client_id=client_id,
        client=client,
    )
    standin.RequestHandlerClass = _handler(cognito)
    thread = threading.Thread(target=standin.serve_forever, daemon=True)
    thread.start()
    try:
        yield cognito
    finally:
        standin.shutdown()
        standin.server_close()
        moto.stop()
