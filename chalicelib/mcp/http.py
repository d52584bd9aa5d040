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
both gets JSON. No JSON-RPC framing is written here: the SDK parses, routes
and answers every message, and ``chalicelib.mcp.asgi`` hands it the request.

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

from functools import cache
from typing import Any

from ..store import Store
from . import oauth

MCP_PATH = "/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"


@cache
def server() -> Any:
    """The SDK ``Server`` with ltm's tools, prompt and resources: one per process."""
    from . import memory, tools
    from .server import build_server

    return build_server(tools, memory)


def oauth_allowed(issuer: str) -> bool:
    """OAuth needs HTTPS, but for loopback (RFC 8414 §2; RFC 8252 for native clients)."""
    from urllib.parse import urlsplit

    parts = urlsplit(issuer)
    return parts.scheme == "https" or parts.hostname in ("127.0.0.1", "localhost", "::1")


class _Verifier:
    """The SDK's token verifier: ltm tokens, and OAuth tokens bound to this ``/mcp``."""

    def __init__(self, store: Store, resource: str) -> None:
        self.store = store
        self.resource = resource

    async def verify_token(self, token: str) -> Any:
        import anyio

        return await anyio.to_thread.run_sync(oauth.verify, self.store, token, self.resource)


class _HashedSecrets:
    """The token and revocation endpoints see a client secret as its stored hash.

    A confidential client's secret is kept hashed (``oauth.secret_hash``), and the
    SDK's client authentication compares the secret a request carries with the
    stored one; so the secret in the request (the form's ``client_secret``, or
    HTTP Basic's password) is replaced by its hash before the SDK reads it.
    """

    PATHS = ("/token", "/revoke")

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] not in self.PATHS:
            await self.app(scope, receive, send)
            return
        import base64
        from urllib.parse import parse_qsl, quote, unquote, urlencode

        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
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
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


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
                headers={"Allow": "POST"},
            )
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


def build_app(store: Store, base_url: str, consent_url: str | None = None) -> Any:
    """The ASGI app for a server reached at ``base_url``: ``/mcp`` and, where OAuth may run,
    the authorization server, whose consent page is ``consent_url`` (the web view's own
    address, which on loopback is a name of its own; default: under ``base_url``)."""
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
    if oauth_allowed(issuer):
        provider = oauth.StoreProvider(
            store,
            issuer=issuer,
            resource=resource,
            consent_url=consent_url or issuer + "/web/authorize",
        )
        registration = ClientRegistrationOptions(
            enabled=True, valid_scopes=oauth.SCOPES, default_scopes=oauth.SCOPES
        )
        revocation = RevocationOptions(enabled=True)
        metadata = build_metadata(AnyHttpUrl(issuer), None, registration, revocation)
        # Clients whose id is the URL of their metadata document are taken too (the MCP
        # specification prefers them to registration): the SDK's metadata does not say so,
        # so these two documents are ours.
        metadata.client_id_metadata_document_supported = True
        documents = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
        routes += [
            route
            for route in create_auth_routes(
                provider, AnyHttpUrl(issuer), None, registration, revocation
            )
            if route.path not in documents
        ]
        for path in documents:
            routes.append(
                Route(
                    path,
                    endpoint=cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"]),
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
                    endpoint=cors_middleware(handler.handle, ["GET", "OPTIONS"]),
                    methods=["GET", "OPTIONS"],
                )
            )
    endpoint = RequireAuthMiddleware(
        _Stateless(server(), store, resource, issuer),
        [],
        prm_url if oauth_allowed(issuer) else None,
    )
    routes.append(Route(MCP_PATH, endpoint=endpoint))
    middleware = [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(_Verifier(store, resource))),
        Middleware(AuthContextMiddleware),
    ]
    return _HashedSecrets(Starlette(routes=routes, middleware=middleware))
