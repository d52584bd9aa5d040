"""MCP, defined once: the server ltm offers (``server``), and ``/mcp`` over HTTP.

- ``server``: the SDK ``Server`` around the tools, the ``resume`` prompt and the
  packet resources, for the stdio shim and ``/mcp`` alike;
- ``http``: ``/mcp`` in the SDK's stateless Streamable HTTP form, behind OAuth;
- ``oauth``: the authorization server's provider over the ltm store;
- ``asgi``: one request through an ASGI app, for Chalice and ``ltm server run``.

Everything here imports the SDK, so only the routes that need it load it.
"""
