"""The server's place for the tools: the service layer, as the request's signed-in user.

A tool call on ``/mcp`` acts with the bearer token of its request, bound to this
``/mcp`` as its audience (RFC 8707): every call checks it again through the
service layer (``ServiceBackend``), so a token revoked with ``ltm tokens
revoke`` stops working at the next call, and every rule of the HTTP API holds
(scopes: ``read`` for reading tools, ``write`` for ``save``, ``push``, ``rm``).

Nothing runs on the writer's machine here, so ``save`` and ``push`` go through
the whole pre-flight on the server (``ltm.preflight``: schema, id rule, and the
redaction scan with its path and local-URL rules too, not only the secret
classes the server's push scan refuses), and a refusal is a tool error listing
``field/kind`` with nothing stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .place import Place

if TYPE_CHECKING:
    from ..backend import Backend
    from ..store import Store


class ServerPlace(Place):
    def __init__(self, store: Store, token: str, resource: str, base_url: str) -> None:
        self.store = store
        self.token = token
        self.resource = resource
        self.base_url = base_url

    def backend(self) -> Backend:
        from ..backend import ServiceBackend
        from ..service import tokens

        credential = tokens.credential(f"Bearer {self.token}")._replace(audience=self.resource)
        return ServiceBackend(self.store, credential, self.base_url)

    def about(self) -> dict[str, Any]:
        return {"server": self.base_url, "mcp": self.resource}
