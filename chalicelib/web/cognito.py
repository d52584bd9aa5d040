"""Who the user is on AWS: Amazon Cognito managed login (hosted UI), as an OpenID Connect client.

The verification page sends the person to the user pool's domain
(``/oauth2/authorize``, authorization code with PKCE S256), Cognito sends them
back to ``{API}/device/callback`` with a code, and the server exchanges it at
``/oauth2/token`` (``grant_type=authorization_code``, the PKCE verifier, the
client secret when the app client has one) for an ID token. The ID token is
verified before anything is believed: RS256 signature against the pool's
JWKS (``https://cognito-idp.{region}.amazonaws.com/{pool}/.well-known/jwks.json``,
cached, refetched for an unknown ``kid``), ``iss`` (that URL without the JWKS
path), ``aud`` (the app client id), ``exp``/``iat`` and ``token_use == "id"``.
Its ``sub`` is the identity the ltm user is bound to.

Configuration, from the environment (set per stage in ``.chalice/config.json``
from the CloudFormation outputs):

- ``LTM_COGNITO_USER_POOL_ID`` (``us-east-1_AbC123``), ``LTM_COGNITO_CLIENT_ID``,
  ``LTM_COGNITO_DOMAIN`` (``https://PREFIX.auth.REGION.amazoncognito.com``, a
  custom domain, or just the prefix); all three switch Cognito sign-in on.
- ``LTM_COGNITO_CLIENT_SECRET``: only for an app client with a secret (a public
  client with PKCE needs none).
- ``LTM_COGNITO_SCOPES``: default ``openid email``.
- The region comes from the pool id; ``AWS_ENDPOINT_URL_COGNITO_IDP`` (the
  SDK's standard variable) points the JWKS fetch at another endpoint.

Plain ``http://`` is accepted for a loopback domain or endpoint only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..loopback import loopback_host

HTTP_TIMEOUT = 10.0
JWKS_LIFESPAN = 3600
CLOCK_LEEWAY = 60  # seconds of clock skew tolerated on exp/iat
MAX_RESPONSE = 1 << 20


class CognitoError(Exception):
    """Signing in through Cognito failed; the message is safe to show (no token, no secret)."""


def _check_url(url: str, what: str) -> str:
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "https" or (parts.scheme == "http" and loopback_host(parts.hostname))
    if secure and parts.hostname and not parts.query and not parts.fragment:
        return url.rstrip("/")
    raise ValueError(f"{what} must be an https:// URL, got {url!r}")


@dataclass(frozen=True, slots=True)
class CognitoConfig:
    user_pool_id: str
    client_id: str
    domain: str  # base URL of the managed login, no trailing slash
    client_secret: str | None = None
    scopes: str = "openid email"
    idp_endpoint: str | None = None  # default https://cognito-idp.{region}.amazonaws.com

    @property
    def region(self) -> str:
        return self.user_pool_id.split("_", 1)[0]

    @property
    def issuer(self) -> str:
        return f"https://cognito-idp.{self.region}.amazonaws.com/{self.user_pool_id}"

    @property
    def jwks_url(self) -> str:
        base = self.idp_endpoint or f"https://cognito-idp.{self.region}.amazonaws.com"
        return f"{base}/{self.user_pool_id}/.well-known/jwks.json"

    @property
    def origin(self) -> str:
        """The scheme://host[:port] of the managed login (for the pages' form-action CSP)."""
        parts = urllib.parse.urlsplit(self.domain)
        return f"{parts.scheme}://{parts.netloc}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> CognitoConfig | None:
        """The configuration, or None when Cognito sign-in is not configured."""
        pool = (environ.get("LTM_COGNITO_USER_POOL_ID") or "").strip()
        client_id = (environ.get("LTM_COGNITO_CLIENT_ID") or "").strip()
        domain = (environ.get("LTM_COGNITO_DOMAIN") or "").strip()
        if not (pool or client_id or domain):
            return None
        if not (pool and client_id and domain):
            raise ValueError(
                "Cognito sign-in needs LTM_COGNITO_USER_POOL_ID, LTM_COGNITO_CLIENT_ID and"
                " LTM_COGNITO_DOMAIN together"
            )
        if "_" not in pool:
            raise ValueError(f"LTM_COGNITO_USER_POOL_ID looks wrong: {pool!r}")
        region = pool.split("_", 1)[0]
        if "://" not in domain:
            domain = (
                f"https://{domain}"
                if "." in domain
                else f"https://{domain}.auth.{region}.amazoncognito.com"
            )
        endpoint = (environ.get("AWS_ENDPOINT_URL_COGNITO_IDP") or "").strip() or None
        return cls(
            user_pool_id=pool,
            client_id=client_id,
            domain=_check_url(domain, "LTM_COGNITO_DOMAIN"),
            client_secret=(environ.get("LTM_COGNITO_CLIENT_SECRET") or "").strip() or None,
            scopes=(environ.get("LTM_COGNITO_SCOPES") or "").strip() or "openid email",
            idp_endpoint=_check_url(endpoint, "AWS_ENDPOINT_URL_COGNITO_IDP") if endpoint else None,
        )

    # -- the authorization code flow --------------------------------------------------

    def authorize_url(self, *, redirect_uri: str, state: str, verifier: str) -> str:
        """Where to send the browser: the managed login, with PKCE S256."""
        query = urllib.parse.urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "scope": self.scopes,
                "state": state,
                "code_challenge": pkce_challenge(verifier),
                "code_challenge_method": "S256",
            },
            quote_via=urllib.parse.quote,
        )
        return f"{self.domain}/oauth2/authorize?{query}"

    def exchange_code(self, *, code: str, redirect_uri: str, verifier: str) -> dict[str, Any]:
        """``POST /oauth2/token``: the authorization code for tokens (``id_token`` among them)."""
        form = {
            "grant_type": "authorization_code",
            "client_id": self.client_id,
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        if self.client_secret:
            pair = f"{_form_quote(self.client_id)}:{_form_quote(self.client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        request = urllib.request.Request(
            f"{self.domain}/oauth2/token",
            data=urllib.parse.urlencode(form).encode(),
            headers=headers,
            method="POST",
        )
        status, body = _fetch(request)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if status != 200 or not isinstance(data, dict):
            error = data.get("error") if isinstance(data, dict) else None
            raise CognitoError(
                f"Cognito refused the sign-in code (HTTP {status}"
                + (f", {str(error)[:64]}" if error else "")
                + ")"
            )
        if not isinstance(data.get("id_token"), str):
            raise CognitoError("Cognito sent no ID token (is the openid scope allowed?)")
        return data

    def verify_id_token(self, id_token: str) -> dict[str, Any]:
        """The ID token's claims once its signature, issuer, audience, times and use check out."""
        import jwt  # PyJWT; imported here so the rest of the app does not pay for it

        try:
            key = _jwks_client(self.jwks_url).get_signing_key_from_jwt(id_token)
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key.key,
                algorithms=["RS256"],
                audience=self.client_id,
                issuer=self.issuer,
                leeway=CLOCK_LEEWAY,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.PyJWKClientConnectionError:
            raise CognitoError("could not fetch Cognito's signing keys") from None
        except jwt.PyJWTError as exc:
            raise CognitoError(
                f"the ID token from Cognito is not valid ({type(exc).__name__})"
            ) from None
        if claims.get("token_use") != "id":
            raise CognitoError("the token from Cognito is not an ID token")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise CognitoError("the ID token from Cognito names no subject")
        return claims


def display_name(claims: Mapping[str, Any]) -> str:
    """What to call a user signing in for the first time."""
    for name in ("email", "preferred_username", "cognito:username", "name"):
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return "user"


def pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _form_quote(value: str) -> str:
    # RFC 6749 §2.3.1: client id and secret are form-encoded before Basic auth.
    return urllib.parse.quote_plus(value)


def _fetch(request: urllib.request.Request) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            return response.status, response.read(MAX_RESPONSE)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(MAX_RESPONSE)
    except (OSError, ValueError) as exc:
        raise CognitoError(f"could not reach Cognito ({type(exc).__name__})") from None


_jwks_lock = threading.Lock()
_jwks_clients: dict[str, Any] = {}


def _jwks_client(url: str) -> Any:
    """One PyJWKClient per JWKS URL per process: it caches the key set for an hour."""
    import jwt

    with _jwks_lock:
        client = _jwks_clients.get(url)
        if client is None:
            client = jwt.PyJWKClient(
                url, cache_jwk_set=True, lifespan=JWKS_LIFESPAN, timeout=int(HTTP_TIMEOUT)
            )
            _jwks_clients[url] = client
        return client
