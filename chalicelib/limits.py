"""How big a request body may be, by route: one table for every layer that refuses one.

The app checks it on Lambda (``app.py``); ``ltm server run`` checks it earlier too,
before a byte of the body is read (from the request's head) and in its
WSGI adapter, so the three answer 413 alike. Every route takes what one push may
send, a packet's 32 KiB; two take more:

- ``POST /v1/packets/batch`` (an extension): up to ``MAX_BATCH`` pushes in one
  request. A batch reply says how much the server takes (``BATCH_BYTES_HEADER``),
  so a client sends its first batch within 32 KiB, which any version of the route
  takes, and the rest as large as that says. Fewer, larger requests cost the
  server less a packet: each request pays for its token check, its transaction
  and its commit once.
- ``POST /mcp``: a JSON-RPC request whose ``save`` carries a whole packet, with the
  envelope around it, so a packet at the cap still fits.

Both stay far under what API Gateway and Lambda take (10 MB and 6 MB).
"""

from __future__ import annotations

# Every route but those below: what one push may send, a packet at its cap
# (``packet.MAX_PACKET_BYTES``; a test holds the two equal). No import here:
# the hook's and the CLI's light paths read this module.
MAX_BODY = 32_768
MAX_BATCH_BODY = 1 << 20
MAX_MCP_BODY = 1 << 20
BATCH_BYTES_HEADER = "X-LTM-Batch-Bytes"

# (method, route) → its bound; the route as the app declares it (a template).
ROUTE_BODIES: dict[tuple[str, str], int] = {
    ("POST", "/v1/packets/batch"): MAX_BATCH_BODY,
    ("POST", "/mcp"): MAX_MCP_BODY,
}
LARGEST_BODY = max(MAX_BODY, *ROUTE_BODIES.values())


def body_limit(method: str, route: str) -> int:
    """The most bytes a ``method`` request to ``route`` may carry in its body."""
    return ROUTE_BODIES.get((method.upper(), route), MAX_BODY)


def too_large(limit: int) -> str:
    """The 413's message, the same from every layer."""
    return f"request body too large (max {limit} bytes)"
