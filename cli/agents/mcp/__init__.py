"""``ltm mcp``: the ltm tools for any MCP client (Claude Code, Cursor, Zed, Claude Desktop).

- ``tools``: what each tool takes, says and does, in plain Python (no SDK);
- ``server``: the stdio server, built on the official ``mcp`` SDK;
- ``install``: the config snippet for each client, and the merge that writes it.

Importing this package is free; the SDK is imported only when serving.
"""
