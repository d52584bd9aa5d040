"""Agent integrations: the harness hooks and their installers, and the stdio MCP shim."""
