"""``/mcp`` over HTTP, and the OAuth endpoints in front of it: one ASGI app per server URL.

The transport is the official SDK's Streamable HTTP server
(``StreamableHTTPSessionManager``), in its stateless JSON form: every POST is
answered with one JSON body, and no session outlives its request, because a
Lambda may be a new process at every request and can hold no stream open
(https://modelcontextprotocol.io/specification/2025-11-25/basic/transports).
A GET (the server-to-client event stream of the stateful form) and a DELETE
(ending a session) are answered 405 with ``Allow: POST``: this server keeps
no stream and no session. A POST whose Accept
header asks for ``text/event-stream`` only is answered 406; one that accepts
both, or sends no Accept header, gets JSON. A body that is not
``application/json`` is 415, and a JSON-RPC batch 400 (``_admissible``). No
JSON-RPC message is answered here: the SDK parses, routes and answers every
one, and ``chalicelib.mcp.asgi`` hands it the request.

Authorization is the SDK's too: ``mcp.server.auth`` serves the metadata
documents, ``/authorize``, ``/token``, ``/register`` and ``/revoke`` over
``oauth.StoreProvider``, and its bearer middleware answers an unsigned
``/mcp`` request 401 with ``WWW-Authenticate: Bearer ... resource_metadata=``
pointing at this server's protected resource metadata (RFC 9728), which names
this server as the authorization server.

Paths are the app's own (``/mcp``, ``/.well-known/...``); on API Gateway's
default domain the stage prefix (``/api``) comes before them, so the metadata
a client finds by the rules of RFC 8414 §3.1 for an issuer with a path is also
served at ``/.well-known/openid-configuration`` (which the MCP specification
has clients try at ``{issuer}/.well-known/openid-configuration``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from ..loopback import loopback_url
from ..store import Store
from . import oauth

MCP_PATH = "/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"


@cache
def server() -> Any:
    """The SDK ``Server`` with ltm's tools, prompt and resources: one per process."""
    from . import memory, tools
    from .server import build_server

    return build_server(tools, memory, workdir=False)


def oauth_allowed(issuer: str, *, on_loopback: bool) -> bool:
    """OAuth needs HTTPS, but for loopback (RFC 8414 §2; RFC 8252 for native clients).

    "Loopback" is where the server listens (``on_loopback``), and the issuer's host must
    name it too: a Host or X-Forwarded-Host header alone never makes plain http do, on a
    server anyone else can reach."""
    from urllib.parse import urlsplit

    parts = urlsplit(issuer)
    if parts.scheme == "https":
        return True
    # The names the SDK takes for a plain-http issuer (``validate_issuer_url``).
    return (
        on_loopback
        and parts.scheme == "http"
        and parts.hostname in ("127.0.0.1", "localhost", "::1")
    )


class _Verifier:
    """The SDK's token verifier: ltm tokens, and OAuth tokens bound to this ``/mcp``."""

    def __init__(self, store: Store, resource: str) -> None:
        self.store = store
        self.resource = resource

    async def verify_token(self, token: str) -> Any:
        import anyio

        return await anyio.to_thread.run_sync(oauth.verify, self.store, token, self.resource)


class _Admission:
    """The anonymous endpoints that make this server keep something (``/register``, a
    client; ``/authorize``, a pending request) answer 429 past their rate limits
    (``oauth.admit``), before anything is parsed or written. Every request's path and
    client address are told to the provider here (``oauth.REQUEST``)."""

    def __init__(self, app: Any, store: Store) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            client = scope.get("client") or ("", 0)
            oauth.REQUEST.set((scope["path"], str(client[0])))
        # A CORS preflight (OPTIONS) writes nothing and is not counted.
        if (
            scope["type"] == "http"
            and scope["path"] in oauth.DOOR_LIMITS
            and scope["method"] in ("GET", "POST")
        ):
            import anyio
            from starlette.responses import JSONResponse

            wait = await anyio.to_thread.run_sync(
                oauth.admit, self.store, scope["path"], str(client[0]), datetime.now(UTC)
            )
            if wait is not None:
                refusal = JSONResponse(
                    {
                        "error": "too_many_requests",
                        "error_description": "too many requests from your network or from"
                        " everyone lately; wait, then try again",
                    },
                    status_code=429,
                    headers={"Retry-After": str(wait), "Cache-Control": "no-store"},
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _HashedSecrets:
    """The token and revocation endpoints see a client secret as its stored hash.

    A confidential client's secret is kept hashed (``oauth.secret_hash``), and the
    SDK's client authentication compares the secret a request carries with the
    stored one; so the secret in the request (the form's ``client_secret``, or
    HTTP Basic's password) is replaced by its hash before the SDK reads it.
    """

    PATHS = ("/token", "/revoke")
    FORM = "application/x-www-form-urlencoded"

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] not in self.PATHS:
            await self.app(scope, receive, send)
            return
        import base64
        from urllib.parse import parse_qsl, quote, unquote, urlencode

        from starlette.datastructures import Headers
        from starlette.responses import JSONResponse

        media = Headers(scope=scope).get("content-type", "").split(";", 1)[0].strip().lower()
        if scope["method"] == "POST" and media != self.FORM:
            # The only form the secret is hashed in, and the one these endpoints are
            # specified with (RFC 6749 §4.1.3, RFC 7009 §2.1): the SDK also reads a
            # multipart form, whose secret would reach it unhashed, so that the stored
            # hash itself would pass as the secret.
            refusal = JSONResponse(
                {"error": "invalid_request", "error_description": f"the body must be {self.FORM}"},
                status_code=400,
                headers={"Cache-Control": "no-store"},
            )
            await refusal(scope, receive, send)
            return
        body = await _whole_body(receive)
        pairs = parse_qsl(body.decode("latin-1"), keep_blank_values=True)
        if any(name == "client_secret" for name, _ in pairs):
            pairs = [
                (name, oauth.secret_hash(value) if name == "client_secret" else value)
                for name, value in pairs
            ]
            body = urlencode(pairs).encode("latin-1")
        headers = []
        for name, value in scope["headers"]:
            if name == b"authorization" and value[:6].lower() == b"basic ":
                try:
                    pair = base64.b64decode(value[6:]).decode("utf-8")
                    client, _, secret = pair.partition(":")
                    hashed = oauth.secret_hash(unquote(secret))
                    value = b"Basic " + base64.b64encode(f"{client}:{quote(hashed)}".encode())
                except (ValueError, UnicodeDecodeError):
                    pass  # not Basic credentials: the SDK refuses them as they are
            if name != b"content-length":
                headers.append((name, value))
        headers.append((b"content-length", str(len(body)).encode()))
        await self.app({**scope, "headers": headers}, _replaying(body), send)


class _TokenResource:
    """The token endpoint refuses a ``resource`` other than this server's ``/mcp``.

    RFC 8707 §2 (https://www.rfc-editor.org/rfc/rfc8707#section-2): a token request may
    name the resource the token is for, and an authorization server that cannot issue a
    token for it answers ``invalid_target``. Every token issued here is bound to this
    ``/mcp`` (``oauth.StoreProvider``), whatever the request names, and the SDK's token
    handler does not read the parameter; so a request for another resource is refused
    here, before a code or a refresh token is spent, as ``/authorize`` refuses it.
    """

    def __init__(self, app: Any, resource: str) -> None:
        self.app = app
        self.resource = resource

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/token" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        from urllib.parse import parse_qsl

        from starlette.responses import JSONResponse

        body = await _whole_body(receive)  # urlencoded: ``_HashedSecrets`` refused any other
        asked = [v for k, v in parse_qsl(body.decode("latin-1")) if k == "resource"]
        if any(not oauth.same_resource(value, self.resource) for value in asked):
            refusal = JSONResponse(
                {
                    "error": "invalid_target",
                    "error_description": f"resource must be this server's MCP endpoint,"
                    f" {self.resource}",
                },
                status_code=400,
                headers={"Cache-Control": "no-store"},
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, _replaying(body), send)


async def _whole_body(receive: Any) -> bytes:
    """A request's whole body, read from its ASGI messages (bounded by ``limits`` before)."""
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


def _replaying(body: bytes) -> Any:
    """An ASGI ``receive`` that hands the app ``body`` once it was read already."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


ALLOW = "OPTIONS, POST"  # what /mcp answers, in every 405 and OPTIONS alike


def _origin_of(url: str) -> str | None:
    """``scheme://host:port`` with the port always spelled (an Origin leaves a default
    port out, a base URL may spell it), lower case; None when ``url`` is none."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        return None
    host = parts.hostname.lower()
    return f"{parts.scheme}://[{host}]:{port}" if ":" in host else f"{parts.scheme}://{host}:{port}"


class _Door:
    """What ``/mcp`` checks before the bearer token.

    The 2025-11-25 Streamable HTTP transport
    (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#security-warning):
    an ``Origin`` that is present and not this server's own is 403 (a page another
    site serves, or a rebound DNS name); clients that send none (every non-browser
    client) pass. ``OPTIONS`` names the methods as a 405 does. A request that sent no
    credentials is told where to sign in with no error code (RFC 6750 §3.1,
    https://www.rfc-editor.org/rfc/rfc6750#section-3.1); a wrong token goes on to the
    SDK's check, which answers ``invalid_token``.
    """

    def __init__(self, app: Any, origins: set[str], resource_metadata: str | None) -> None:
        self.app = app
        self.origins = origins
        self.resource_metadata = resource_metadata

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.datastructures import Headers
        from starlette.responses import JSONResponse, Response

        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and _origin_of(origin) not in self.origins:
            refusal: Response = JSONResponse(
                {"error": "forbidden: this Origin may not call this server's /mcp"},
                status_code=403,
            )
        elif scope["method"] == "OPTIONS":
            refusal = Response(status_code=204, headers={"Allow": ALLOW})
        elif not headers.get("authorization", "").lower().startswith("bearer "):
            challenge = "Bearer"
            if self.resource_metadata:
                challenge += f' resource_metadata="{self.resource_metadata}"'
            refusal = JSONResponse(
                {"error": "unauthorized", "error_description": "sign in: see WWW-Authenticate"},
                status_code=401,
                headers={"WWW-Authenticate": challenge, "Cache-Control": "no-store"},
            )
        else:
            await self.app(scope, receive, send)
            return
        await refusal(scope, receive, send)


def revocation_handler(provider: oauth.StoreProvider) -> Any:
    """``POST /revoke`` (RFC 7009, https://www.rfc-editor.org/rfc/rfc7009#section-2):
    the client authenticates as at the token endpoint (a public client by its id alone),
    and a token of any kind it holds ends its whole grant. A token it does not hold, or
    none known, is answered 200 all the same (§2.2)."""
    from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    authenticator = ClientAuthenticator(provider)
    no_store = {"Cache-Control": "no-store"}

    async def handle(request: Request) -> Response:
        import anyio

        try:
            client = await authenticator.authenticate_request(request)
        except AuthenticationError as failed:
            return JSONResponse(
                {"error": "invalid_client", "error_description": failed.message},
                status_code=401,
                headers=no_store,
            )
        form = await request.form()
        token = form.get("token")
        if not isinstance(token, str) or not token:
            return JSONResponse(
                {"error": "invalid_request", "error_description": "token is required"},
                status_code=400,
                headers=no_store,
            )
        await anyio.to_thread.run_sync(provider.revoke, client.client_id, token)
        return Response(status_code=200, headers=no_store)

    return handle


def _private(handler: Any) -> Any:
    """A metadata handler whose answer no shared cache keeps: its URLs come from the Host
    the request named, unless the operator set ``--external-url``."""

    async def handle(request: Any) -> Any:
        answer = await handler(request)
        answer.headers["Cache-Control"] = "no-store"
        return answer

    return handle


class _Stateless:
    """The ``/mcp`` endpoint: a fresh stateless session manager for each request, with the
    tools acting as the request's signed-in user (``remote.ServerPlace``)."""

    def __init__(self, server: Any, store: Store, resource: str, base_url: str) -> None:
        self.server = server
        self.store = store
        self.resource = resource
        self.base_url = base_url

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        from .place import CURRENT
        from .remote import ServerPlace

        if scope["method"] != "POST":
            # Stateless: no event stream to open (GET) and no session to end (DELETE); the
            # specification lets a server without them answer 405.
            from starlette.responses import JSONResponse

            refusal = JSONResponse(
                {"error": "method not allowed: this server answers each POST; it keeps no stream"},
                status_code=405,
                headers={"Allow": ALLOW},
            )
            await refusal(scope, receive, send)
            return

        refusal, scope, receive = await _admissible(scope, receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        # RequireAuthMiddleware let only a verified token this far (scope["user"]).
        token = scope["user"].access_token.token
        CURRENT.set(ServerPlace(self.store, token, self.resource, self.base_url))

        manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,
            stateless=True,
            # Every request carries a bearer token that a rebinding page does not have,
            # and the Host is the operator's choice (a proxy, a stage, a *.localhost name).
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)


JSON = "application/json"


async def _admissible(scope: Any, receive: Any) -> tuple[Any, Any, Any]:
    """(a refusal or None, the scope, a ``receive``) for a POST to ``/mcp``, before the SDK.

    - No Accept header takes anything (RFC 9110 §12.5.1): it is answered in JSON, where
      the SDK would answer 406 to a client that said nothing against it.
    - A Content-Type other than JSON is 415 naming the one to send (the SDK's transport
      check answers a bare "Invalid Content-Type header" in plain text).
    - A JSON-RPC batch (an array) is 400 ``Invalid Request`` saying to send one message per
      POST: MCP has had no batches since 2025-06-18 (the SDK answers with a validation
      dump, as invalid params).

    The refusals are worded as the SDK words its own: a JSON-RPC error with no id."""
    from mcp_types import INVALID_REQUEST
    from starlette.datastructures import Headers
    from starlette.responses import JSONResponse

    headers = Headers(scope=scope)
    if "accept" not in headers:
        scope = {**scope, "headers": [*scope["headers"], (b"accept", JSON.encode())]}
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    body = b""
    if media != JSON:
        sent = f"Content-Type {media}" if media else "no Content-Type"
        status = 415
        message = f"Unsupported Media Type: {sent}; send Content-Type: {JSON}, one JSON-RPC message"
    else:
        body = await _whole_body(receive)  # bounded before: app.py's body limit for /mcp
        if body.lstrip()[:1] != b"[":
            return None, scope, _replaying(body)
        status = 400
        message = (
            "Invalid Request: a JSON-RPC batch (an array) is not accepted;"
            " send each message in its own POST"
        )
    error = {"code": INVALID_REQUEST, "message": message}
    refusal = JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=status)
    return refusal, scope, _replaying(body)


def build_app(
    store: Store, base_url: str, consent_url: str | None = None, *, on_loopback: bool = False
) -> Any:
    """The ASGI app for a server reached at ``base_url``: ``/mcp`` and, where OAuth may run,
    the authorization server, whose consent page is ``consent_url`` (default: under
    ``base_url``, the API's own address: on loopback the pages' own name is never handed
    to an anonymous ``/authorize``).
    ``on_loopback``: the server listens on loopback (``loopback.listening_on_loopback``),
    the one case where a client metadata document may be fetched from loopback."""
    from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
    from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
    from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
    from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
    from mcp.shared.auth import ProtectedResourceMetadata
    from pydantic import AnyHttpUrl
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.routing import Route

    issuer = base_url.rstrip("/")
    resource = issuer + MCP_PATH
    prm_url = AnyHttpUrl(issuer + PRM_PATH)
    routes: list[Route] = []
    allowed = oauth_allowed(issuer, on_loopback=on_loopback)
    if allowed:
        provider = oauth.StoreProvider(
            store,
            issuer=issuer,
            resource=resource,
            consent_url=consent_url or issuer + "/web/authorize",
            fetch_loopback=on_loopback,
        )
        registration = ClientRegistrationOptions(
            enabled=True, valid_scopes=oauth.SCOPES, default_scopes=oauth.SCOPES
        )
        revocation = RevocationOptions(enabled=True)
        metadata = build_metadata(AnyHttpUrl(issuer), None, registration, revocation)
        # Clients whose id is the URL of their metadata document are taken too (the MCP
        # specification prefers them to registration), and public clients (PKCE alone,
        # RFC 8414 §2 "none") at the token and revocation endpoints: the SDK's metadata
        # says neither, so these two documents are ours.
        metadata.client_id_metadata_document_supported = True
        methods = ["client_secret_post", "client_secret_basic", "none"]
        metadata.token_endpoint_auth_methods_supported = methods
        metadata.revocation_endpoint_auth_methods_supported = methods
        documents = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
        ours = (*documents, "/revoke")
        routes += [
            route
            for route in create_auth_routes(
                provider, AnyHttpUrl(issuer), None, registration, revocation
            )
            if route.path not in ours
        ]
        routes.append(
            Route(
                "/revoke",
                endpoint=cors_middleware(revocation_handler(provider), ["POST", "OPTIONS"]),
                methods=["POST", "OPTIONS"],
            )
        )
        for path in documents:
            routes.append(
                Route(
                    path,
                    endpoint=cors_middleware(
                        _private(MetadataHandler(metadata).handle), ["GET", "OPTIONS"]
                    ),
                    methods=["GET", "OPTIONS"],
                )
            )
        resource_metadata = ProtectedResourceMetadata(
            resource=AnyHttpUrl(resource),
            authorization_servers=[AnyHttpUrl(issuer)],
            scopes_supported=oauth.SCOPES,
            resource_name="ltm",
        )
        handler = ProtectedResourceMetadataHandler(resource_metadata)
        for path in (PRM_PATH, "/.well-known/oauth-protected-resource"):
            routes.append(
                Route(
                    path,
                    endpoint=cors_middleware(_private(handler.handle), ["GET", "OPTIONS"]),
                    methods=["GET", "OPTIONS"],
                )
            )
    endpoint = RequireAuthMiddleware(
        _Stateless(server(), store, resource, issuer),
        [],
        prm_url if allowed else None,
    )
    # The server's own origin, as the request named it; but on loopback only under a
    # loopback name: a DNS name rebound to 127.0.0.1 names itself in Host and Origin alike.
    own = [issuer, consent_url or ""]
    if on_loopback:
        own = [url for url in own if loopback_url(url)]
    origins = {o for o in map(_origin_of, own) if o}
    door = _Door(endpoint, origins, str(prm_url) if allowed else None)
    routes.append(Route(MCP_PATH, endpoint=door))
    middleware = [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(_Verifier(store, resource))),
        Middleware(AuthContextMiddleware),
    ]
    app: Any = _Admission(Starlette(routes=routes, middleware=middleware), store)
    if allowed:
        app = _TokenResource(app, resource)
    return _HashedSecrets(app)
