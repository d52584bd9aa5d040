"""The OAuth 2.1 authorization server in front of ``/mcp``, over the ltm store.

The MCP specification's authorization
(https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization)
makes ``/mcp`` a protected resource whose clients sign people in by
themselves: discovery from a 401 (RFC 9728 protected resource metadata, RFC
8414 authorization server metadata), client registration (RFC 7591), the
authorization code grant with PKCE S256 (RFC 7636), resource indicators (RFC
8707) and rotating refresh tokens.

What is taken and what is written here: the official MCP SDK
(``mcp.server.auth``) implements the endpoints themselves: request parsing
and validation, PKCE verification, redirect-URI checks, client
authentication, metadata documents and error responses. This module is the
``OAuthAuthorizationServerProvider`` those endpoints call: where clients,
pending requests, codes and tokens live (``Store.put_oauth_item`` and the
token table), who the person is (the web view's sign-in: Cognito on AWS, a
token or a signed-in CLI when self-hosted, then a consent page, see
``chalicelib/web/consent.py``), and two rules the SDK leaves to the server:
loopback redirect URIs match on any port (RFC 8252 §7.3), and every token is
bound to this server's ``/mcp`` (RFC 8707).

Every access token issued here is an ltm token (``ltm_<user>_<hex>``) in the
store's token table, labelled ``mcp:<client>:<n>``: ``ltm tokens`` lists it
and ``ltm tokens revoke`` ends it (its refresh token dies with it). Codes and
refresh tokens, and the secrets of confidential clients, are stored as their
sha256 only; the store never holds a usable secret.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ..service import tokens
from ..service.users import session_generation
from ..store import Store, Token

if TYPE_CHECKING:
    from pydantic import AnyUrl

ACCESS_TTL = timedelta(hours=1)
REFRESH_TTL = timedelta(days=30)
CODE_TTL = timedelta(minutes=5)
REQUEST_TTL = timedelta(minutes=10)  # from /authorize to the person's answer on the consent page
SCOPES = ["read", "write"]
UNUSED_CLIENT_TTL = timedelta(days=7)  # a registration no sign-in used goes after this
# Caps on what an anonymous request makes this server keep.
MAX_REDIRECT_URIS = 10
MAX_CLIENT_NAME = 200
MAX_CLIENT_DOC = 8 * 1024  # the whole registered document, as stored
MAX_STATE = 1024
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True, slots=True)
class DoorLimit:
    """How many anonymous requests to one endpoint may write, per window: from one client
    address (an IPv6 one by its /64) and from everyone together."""

    per_address: int
    everyone: int
    window: timedelta


# /register writes a client; /authorize a pending request. Generous for people (an MCP
# client registers once and signs in now and then), tight for a script filling the store.
DOOR_LIMITS = {
    "/register": DoorLimit(per_address=20, everyone=1000, window=timedelta(hours=1)),
    "/authorize": DoorLimit(per_address=60, everyone=3000, window=timedelta(minutes=10)),
}


def admit(
    store: Store,
    endpoint: str,
    client_address: str,
    when: datetime,
    limits: dict[str, DoorLimit] = DOOR_LIMITS,
) -> int | None:
    """Count one request to ``endpoint``; the seconds to wait (for ``Retry-After``) when it
    is over its address's or everyone's limit, else None. The counters are the store's, so
    the limits hold across Lambda instances and server processes."""
    from ..service.device import client_key

    limit = limits.get(endpoint)
    if limit is None:
        return None
    seconds = int(limit.window.total_seconds())
    index = int(when.timestamp()) // seconds
    ends = datetime.fromtimestamp((index + 1) * seconds, UTC)
    name = endpoint.strip("/")
    address = client_key(client_address) if client_address else "unknown"
    counters = {
        f"oauth-{name}:all:{index}": limit.everyone,
        f"oauth-{name}:addr:{address}:{index}": limit.per_address,
    }
    wait = max(1, int((ends - when).total_seconds()))
    # Read before counting: a flood past its limit costs reads only, never a write.
    if any(store.read_counter(key, when) >= most for key, most in counters.items()):
        return wait
    over = False
    for key, most in counters.items():
        over |= store.add_to_counter(key, when, ends) > most
    return wait if over else None


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secret_hash(secret: str) -> str:
    """What a client secret is stored and compared as (the secrets are 256 random bits)."""
    return "sha256:" + _hash(secret)


def _now() -> datetime:
    return datetime.now(UTC)


MAX_REDIRECT_URI = 2000
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,63}")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")
# Schemes a browser acts on itself (script, content, files, other protocols): never a place
# to send an authorization code back to, whatever a client registers.
_NOT_PRIVATE_USE = frozenset(
    {"about", "blob", "data", "file", "filesystem", "ftp", "jar", "javascript", "mailto"}
    | {"sms", "tel", "vbscript", "view-source", "ws", "wss", "http", "https"}
)


class Destination(NamedTuple):
    """A redirect URI's validated parts: all a consent page shows and a CSP names."""

    scheme: str
    host: str  # "" for a private-use scheme without one
    port: int | None

    def shown(self) -> str:
        """``scheme://host:port`` (the port always spelled), or a private-use ``scheme:``."""
        if not self.host:
            return f"{self.scheme}:"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}" + (f":{self.port}" if self.port else "")

    def csp_source(self) -> str:
        """The CSP source of this destination: a host-source from the validated parts, or a
        private-use scheme's scheme-source
        (https://www.w3.org/TR/CSP3/#grammardef-source-expression)."""
        if self.scheme not in ("http", "https"):
            return f"{self.scheme}:"
        return self.shown()


def destination(uri: str) -> Destination:
    """The parts of a redirect URI this server sends browsers to; ValueError (the reason) for
    any other. RFC 8252 (https://www.rfc-editor.org/rfc/rfc8252#section-7) and OAuth 2.1:
    https anywhere; plain http only to loopback (§7.3); a private-use scheme (§7.1,
    ``com.example.app:/cb``, ``cursor://...``) but none a browser acts on itself
    (``javascript:``, ``data:``, ``file:``). Never userinfo (``https://claude.ai@evil.example``
    reads as claude.ai), never a fragment (RFC 6749 §3.1.2), no whitespace or controls."""
    import ipaddress

    if len(uri) > MAX_REDIRECT_URI:
        raise ValueError(f"a redirect URI is at most {MAX_REDIRECT_URI} characters")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        raise ValueError("a redirect URI has no spaces or control characters")
    if "#" in uri:
        raise ValueError("a redirect URI has no fragment")
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        raise ValueError("a redirect URI must be an absolute URI") from None
    scheme = parts.scheme.lower()
    if not _SCHEME.fullmatch(scheme):
        raise ValueError("a redirect URI must be an absolute URI")
    if "@" in parts.netloc:
        raise ValueError("a redirect URI has no user name or password")
    host = (parts.hostname or "").lower()
    if host:
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            if not _DNS_NAME.fullmatch(host.rstrip(".")):
                raise ValueError("a redirect URI's host must be a DNS name or an address") from None
            host = host.rstrip(".")
    if scheme == "https":
        if not host:
            raise ValueError("an https redirect URI needs a host")
        return Destination(scheme, host, port or 443)
    if scheme == "http":
        if host not in _LOOPBACK:
            raise ValueError("plain http redirect URIs are for loopback only (127.0.0.1, [::1])")
        return Destination(scheme, host, port or 80)
    if scheme in _NOT_PRIVATE_USE:
        raise ValueError(f"{scheme}: is not a redirect URI scheme")
    return Destination(scheme, host, port)


class Client(OAuthClientInformationFull):
    """A registered client whose loopback redirect URIs match on any port.

    RFC 8252 §7.3: a native app listens on a port the operating system picks
    at the moment of sign-in, so the authorization server must accept any
    port on a loopback redirect URI registered without one or with another.
    Everything else (scheme, host, path, query) matches exactly.
    """

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        if redirect_uri is not None and self.redirect_uris:
            asked = urlsplit(str(redirect_uri))
            for registered in self.redirect_uris:
                known = urlsplit(str(registered))
                if (
                    asked.scheme == known.scheme == "http"
                    and asked.hostname in _LOOPBACK
                    and asked.hostname == known.hostname
                    and (asked.path or "/") == (known.path or "/")
                    and asked.query == known.query
                ):
                    return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


CIMD_TTL = timedelta(hours=1)
CIMD_MAX_URL = 2000


def client_metadata(
    url: str, *, allow_loopback: bool = False, client_address: str = ""
) -> dict[str, Any] | None:
    """The client metadata document at ``url``, as the client it describes, or None.

    The MCP specification's Client ID Metadata Documents
    (https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization):
    the client id is an https URL with a path; the document there is JSON whose
    ``client_id`` is that very URL, and it names the client's redirect URIs. The
    server fetches it, held short (``cimd``: one 5 s deadline, bounded concurrency
    per process and per ``client_address``, public addresses only, 16 KiB, no
    redirects). Such a client is public: it authenticates with PKCE alone.
    """
    from . import cimd

    if len(url) > CIMD_MAX_URL:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if (
        parts.scheme != "https"
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.fragment
        or parts.path in ("", "/")
    ):
        return None
    try:
        raw = cimd.fetch(url, client_address=client_address, allow_loopback=allow_loopback)
    except cimd.Refused:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("client_id") != url:
        return None
    uris = doc.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        return None
    name = doc.get("client_name")
    if len(uris) > MAX_REDIRECT_URIS or (isinstance(name, str) and len(name) > MAX_CLIENT_NAME):
        return None  # the bounds of a registration hold for a document too
    try:
        for uri in uris:
            destination(uri)
    except ValueError:
        return None
    if doc.get("token_endpoint_auth_method", "none") != "none":
        return None  # a secret or a key this server does not hold: not a client here
    allowed = ("client_name", "client_uri", "logo_uri", "redirect_uris", "grant_types")
    kept = {k: doc[k] for k in allowed if k in doc}
    asked = doc["scope"] if isinstance(doc.get("scope"), str) else "read write"
    scope = " ".join(s for s in SCOPES if s in asked.split()) or " ".join(SCOPES)
    return {**kept, "client_id": url, "scope": scope, "token_endpoint_auth_method": "none"}


def same_resource(asked: str, resource: str) -> bool:
    """Whether a request's RFC 8707 ``resource`` names ``resource`` (a trailing slash aside)."""
    return asked.rstrip("/") == resource


GRANT_KEY_CHARS = 32


def _grant_key(label: str) -> str:
    """The key of the grant whose access token carries ``label`` (labels are not secret,
    and a refresh token shows its grant's key: a hash, so it shows no label)."""
    return _hash("grant:" + label)[:GRANT_KEY_CHARS]


def _registered_scopes(client: OAuthClientInformationFull) -> list[str]:
    registered = (client.scope or "").split()
    return [s for s in SCOPES if s in registered] or ["read"]


def client_label(client: OAuthClientInformationFull) -> str:
    """``mcp:<client name>:<4 hex>``: a token label people recognise in ``ltm tokens``."""
    name = re.sub(r"[^A-Za-z0-9._@+-]+", "-", client.client_name or "client").strip("-.")
    return f"mcp:{(name or 'client')[:40]}:{secrets.token_hex(4)}"


# The HTTP request being answered: its path and the client's address, for what the
# provider's interface does not pass (where a fetch is needed, whom it is charged to).
# Outside a request (None): everything is allowed, as for a caller in this process.
REQUEST: ContextVar[tuple[str | None, str]] = ContextVar("oauth_request", default=(None, ""))


class StoreProvider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """The SDK's authorization server provider, over one ltm store.

    ``issuer`` is this server's base URL (the authorization server), and
    ``resource`` its ``/mcp`` URL, the one audience of every token issued.
    ``consent_url`` is where ``/authorize`` sends the person's browser. It
    subclasses the SDK's protocol for the SDK's own answer to the grants it does not
    take (the jwt-bearer grant: ``unsupported_grant_type``).
    """

    def __init__(
        self,
        store: Store,
        *,
        issuer: str,
        resource: str,
        consent_url: str,
        fetch_loopback: bool = False,
    ) -> None:
        from pydantic import AnyHttpUrl

        self.store = store
        # Client metadata documents on loopback: only for a server that listens there
        # itself (development), never because of what a request says its Host is.
        self.fetch_loopback = fetch_loopback
        # As the metadata documents spell it (a path-less issuer ends in "/"): the RFC 9207
        # ``iss`` of an answer must be that very string, or the client refuses the answer.
        self.issuer = str(AnyHttpUrl(issuer))
        self.resource = resource
        self.consent_url = consent_url

    # -- clients (RFC 7591) -------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        doc = self.store.get_oauth_item("client", client_id, _now())
        if doc is not None:
            return Client.model_validate(doc)
        if client_id.startswith("https://"):
            import anyio

            path, address = REQUEST.get()
            return await anyio.to_thread.run_sync(
                self._metadata_client, client_id, path in (None, "/authorize"), address
            )
        return None

    def _metadata_client(self, url: str, fetch: bool, client_address: str) -> Client | None:
        """A client whose id is the URL of its metadata document (the MCP specification's
        Client ID Metadata Documents): fetched once, kept an hour, never registered.

        Fetched only where its document matters, ``/authorize`` (its redirect URIs and
        name); the token and revocation endpoints know such a client by its id alone:
        it is public, and its codes and refresh tokens are bound to that id."""
        key = _hash(url)
        cached = self.store.get_oauth_item("cimd", key, _now())
        if cached is None:
            if not fetch:
                return Client(client_id=url, token_endpoint_auth_method="none", scope="read write")
            found = client_metadata(
                url, allow_loopback=self.fetch_loopback, client_address=client_address
            )
            if found is None:
                return None
            cached = found
            self.store.put_oauth_item("cimd", key, cached, _now() + CIMD_TTL, now=_now())
        try:
            return Client.model_validate(cached)
        except ValueError:
            return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if client_info.client_id is None:
            raise ValueError("a registered client needs an id")
        if len(client_info.redirect_uris or []) > MAX_REDIRECT_URIS:
            raise RegistrationError(
                "invalid_redirect_uri", f"at most {MAX_REDIRECT_URIS} redirect URIs"
            )
        if len(client_info.client_name or "") > MAX_CLIENT_NAME:
            raise RegistrationError(
                "invalid_client_metadata", f"client_name is at most {MAX_CLIENT_NAME} characters"
            )
        for uri in client_info.redirect_uris or []:
            try:
                destination(str(uri))
            except ValueError as refused:
                raise RegistrationError("invalid_redirect_uri", str(refused)) from None
        doc = client_info.model_dump(mode="json", exclude_none=True)
        if doc.get("client_secret"):
            # Kept as its sha256 only: the client got the secret in the registration's
            # answer, and the token endpoint compares hashes (``http._HashedSecrets``).
            doc["client_secret"] = secret_hash(doc["client_secret"])
        if len(json.dumps(doc)) > MAX_CLIENT_DOC:
            raise RegistrationError(
                "invalid_client_metadata", f"the client's metadata is over {MAX_CLIENT_DOC} bytes"
            )
        # Kept while unused for a week; every sign-in through it keeps it as long as the
        # refresh token it issues (``_keep_client``).
        now = _now()
        self.store.put_oauth_item(
            "client", client_info.client_id, doc, now + UNUSED_CLIENT_TTL, now=now
        )

    def _keep_client(self, client: OAuthClientInformationFull, until: datetime) -> None:
        doc = self.store.get_oauth_item("client", client.client_id, _now())
        if doc is not None:  # a registered client (a metadata document's is not stored)
            self.store.put_oauth_item("client", client.client_id, doc, until)

    # -- /authorize: hand the person to the consent page ---------------------------

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        if params.resource is not None and not same_resource(params.resource, self.resource):
            raise AuthorizeError(
                "invalid_request", f"resource must be this server's MCP endpoint, {self.resource}"
            )
        if params.state is not None and len(params.state) > MAX_STATE:
            raise AuthorizeError("invalid_request", f"state is at most {MAX_STATE} characters")
        request_id = secrets.token_urlsafe(24)
        self.store.put_oauth_item(
            "request",
            _hash(request_id),
            {
                "client_id": client.client_id,
                "client_name": client.client_name or client.client_id,
                "redirect_uri": str(params.redirect_uri),
                "redirect_uri_provided_explicitly": params.redirect_uri_provided_explicitly,
                "code_challenge": params.code_challenge,
                # No scope asked: the client's registered scope, never more (a client
                # registered for ``read`` must not come back with ``read write``).
                "scopes": params.scopes or _registered_scopes(client),
                "state": params.state,
            },
            _now() + REQUEST_TTL,
            now=_now(),
        )
        return construct_redirect_uri(self.consent_url, request=request_id)

    # -- what the consent page calls ------------------------------------------------

    def pending(self, request_id: str) -> dict[str, Any] | None:
        """The authorization request waiting for the person's answer (None: unknown or late)."""
        return self.store.get_oauth_item("request", _hash(request_id), _now())

    def decide(self, request_id: str, user_id: str, *, allow: bool) -> str | None:
        """The person's answer: the URL to send their browser back to (with a code, or
        ``access_denied``), or None when the request is unknown, late or answered."""
        request = self.store.take_oauth_item("request", _hash(request_id), _now())
        if request is None:
            return None
        back = request["redirect_uri"]
        if not allow:
            return construct_redirect_uri(
                back, error="access_denied", state=request["state"], iss=self.issuer
            )
        code = secrets.token_urlsafe(32)  # 256 bits (RFC 6749 §10.10 asks for at least 128)
        expires = _now() + CODE_TTL
        # The user's session generation: ending everything of theirs (someone who left)
        # passes it, and so ends this sign-in too if its code is not yet redeemed.
        generation = session_generation(self.store, user_id, _now())
        self.store.put_oauth_item(
            "code",
            _hash(code),
            {**request, "user_id": user_id, "expires_at": expires.timestamp(), "g": generation},
            expires,
            now=_now(),
        )
        # RFC 9207: the issuer in the answer, so a client talking to several servers
        # knows which one answered (mix-up attacks).
        return construct_redirect_uri(back, code=code, state=request["state"], iss=self.issuer)

    # -- /token: codes -------------------------------------------------------------

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        doc = self.store.get_oauth_item("code", _hash(authorization_code), _now())
        if doc is None:
            self._code_replayed(client, authorization_code)
            return None
        if doc["client_id"] != client.client_id:
            return None
        return AuthorizationCode(
            code=authorization_code,
            scopes=doc["scopes"],
            expires_at=doc["expires_at"],
            client_id=doc["client_id"],
            code_challenge=doc["code_challenge"],
            redirect_uri=doc["redirect_uri"],
            redirect_uri_provided_explicitly=doc["redirect_uri_provided_explicitly"],
            resource=self.resource,
            subject=doc["user_id"],
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        # Taken, not read: of two requests with one code, the second finds nothing.
        doc = self.store.take_oauth_item("code", _hash(authorization_code.code), _now())
        if doc is None or doc["client_id"] != client.client_id:
            raise TokenError("invalid_grant", "authorization code already used or expired")
        if "g" in doc and doc["g"] != session_generation(self.store, doc["user_id"], _now()):
            raise TokenError("invalid_grant", "this sign-in was ended; sign in again")
        label = client_label(client)
        issued = self._issue(client, doc["user_id"], doc["scopes"], label)
        # Which sign-in the code made, for as long as the code would have lived: the code
        # presented again in that time ends it (``_code_replayed``).
        self.store.put_oauth_item(
            "spent",
            _hash(authorization_code.code),
            {"client_id": client.client_id, "user_id": doc["user_id"], "label": label},
            datetime.fromtimestamp(doc["expires_at"], UTC),
            now=_now(),
        )
        return issued

    def _code_replayed(self, client: OAuthClientInformationFull, code: str) -> None:
        """A spent code presented again: someone else holds a copy, so the sign-in it made
        ends (RFC 6749 §4.1.2, https://www.rfc-editor.org/rfc/rfc6749#section-4.1.2: the
        server SHOULD revoke the tokens issued for a code used twice)."""
        spent = self.store.get_oauth_item("spent", _hash(code), _now())
        if spent is not None and spent["client_id"] == client.client_id:
            self._end_grant(spent["label"], spent["user_id"])

    # -- /token: refresh tokens (rotated at every use) -------------------------------

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        doc = self.store.get_oauth_item("refresh", _hash(refresh_token), _now())
        if doc is None:
            self._replayed(client, refresh_token)
            return None
        if doc["client_id"] != client.client_id:
            return None
        return RefreshToken(
            token=refresh_token,
            client_id=doc["client_id"],
            scopes=doc["scopes"],
            expires_at=int(doc["expires_at"]),
            resource=self.resource,
            subject=doc["user_id"],
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        doc = self.store.take_oauth_item("refresh", _hash(refresh_token.token), _now())
        if doc is None or doc["client_id"] != client.client_id:
            raise TokenError("invalid_grant", "refresh token already used, revoked or expired")
        # The access token's label is the grant: revoking it (ltm tokens revoke) ends the
        # refresh token too, because its old access token must still be there to replace.
        if not self.store.revoke_token(doc["label"], user_id=doc["user_id"]):
            raise TokenError("invalid_grant", "this sign-in was revoked; sign in again")
        granted = [s for s in (scopes or doc["scopes"]) if s in doc["scopes"]]
        return self._issue(client, doc["user_id"], granted, doc["label"])

    def _replayed(self, client: OAuthClientInformationFull, refresh_token: str) -> None:
        """An unknown refresh token of a live grant (its prefix names the grant) is a
        rotated-out one come back: someone else holds a copy. End the grant (OAuth 2.1
        §4.3.1, https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1#section-4.3.1):
        its access token goes, and with it the current refresh token."""
        grant_key, dot, _ = refresh_token.partition(".")
        if not dot or len(grant_key) != GRANT_KEY_CHARS:
            return
        grant = self.store.get_oauth_item("grant", grant_key, _now())
        if grant is not None and grant["client_id"] == client.client_id:
            self._end_grant(grant["label"], grant["user_id"])

    def _end_grant(self, label: str, user_id: str) -> None:
        self.store.revoke_token(label, user_id=user_id)
        self.store.take_oauth_item("grant", _grant_key(label), _now())

    def _issue(
        self, client: OAuthClientInformationFull, user_id: str, scopes: list[str], label: str
    ) -> OAuthToken:
        now = _now()
        secret = tokens.mint(user_id)
        scope = " ".join(s for s in SCOPES if s in scopes) or "read"
        self.store.add_token(
            Token(
                label=label,
                user_id=user_id,
                token_hash=tokens.hash_token(secret),
                created_at=now,
                scope=scope,
                resource=self.resource,
                expires_at=now + ACCESS_TTL,
            )
        )
        # Prefixed with its grant's key, so that a rotated-out copy is known as this
        # grant's when it comes back (``_replayed``); the secret part is 256 random bits.
        grant_key = _grant_key(label)
        refresh = f"{grant_key}.{secrets.token_urlsafe(32)}"
        refresh_ends = now + REFRESH_TTL
        self.store.put_oauth_item(
            "refresh",
            _hash(refresh),
            {
                "client_id": client.client_id,
                "user_id": user_id,
                "scopes": scope.split(),
                "label": label,
                "expires_at": refresh_ends.timestamp(),
            },
            refresh_ends,
            now=now,
        )
        # Which client holds the grant whose access token carries ``label``: what a
        # revocation (RFC 7009) checks the asking client against.
        self.store.put_oauth_item(
            "grant",
            grant_key,
            {"client_id": client.client_id, "user_id": user_id, "label": label},
            refresh_ends,
            now=now,
        )
        self._keep_client(client, refresh_ends)
        return OAuthToken(
            access_token=secret,
            token_type="Bearer",
            expires_in=int(ACCESS_TTL.total_seconds()),
            scope=scope,
            refresh_token=refresh,
        )

    # -- tokens presented to /mcp, and revocation (RFC 7009) --------------------------

    async def load_access_token(self, token: str) -> AccessToken | None:
        return verify(self.store, token, self.resource)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        # The SDK's revocation handler is not mounted (``http.revocation`` checks the
        # client against the grant); this is the provider interface's entry all the same.
        if isinstance(token, RefreshToken):
            self.revoke(token.client_id, token.token)
            return
        found = self.store.token_owner(tokens.hash_token(token.token))
        if found is not None:
            self._end_grant(found[0].label, found[0].user_id)

    def revoke(self, client_id: str, token: str) -> None:
        """RFC 7009 §2.1: end the grant ``token`` (an access or a refresh token) belongs to,
        when ``client_id`` (already authenticated) holds it; else nothing, silently.

        Either kind ends the whole grant: a refresh token's access token goes with it,
        and an access token's refresh token has nothing left to replace."""
        if len(token) > tokens.MAX_TOKEN_CHARS:
            return
        refresh = self.store.get_oauth_item("refresh", _hash(token), _now())
        if refresh is not None:
            if refresh["client_id"] == client_id:
                self.store.take_oauth_item("refresh", _hash(token), _now())
                self._end_grant(refresh["label"], refresh["user_id"])
            return
        found = self.store.token_owner(tokens.hash_token(token))
        if found is None:
            return
        record = found[0]
        grant = self.store.get_oauth_item("grant", _grant_key(record.label), _now())
        if grant is not None and grant["client_id"] == client_id:
            self._end_grant(record.label, record.user_id)


def verify(store: Store, token: str, resource: str) -> AccessToken | None:
    """The token as the SDK's bearer check wants it, or None: unknown, revoked, expired,
    or issued for another resource. Tokens ltm minted itself (no resource) are accepted:
    clients configured with a header keep working."""
    from ..service.errors import Unauthorized

    if len(token) > tokens.MAX_TOKEN_CHARS:
        return None
    found = store.token_owner(tokens.hash_token(token))
    try:
        user = tokens.checked(store, found, _now(), audience=resource)
    except Unauthorized:
        return None
    assert found is not None  # checked refused otherwise
    record = found[0]
    return AccessToken(
        token=token,
        client_id=record.label,
        scopes=record.scope.split(),
        expires_at=int(record.expires_at.timestamp()) if record.expires_at else None,
        resource=resource,
        subject=user.id,
    )
