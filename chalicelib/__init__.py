"""ltm: Core Memory Packets for AI coding agents.

This package is the framework-free core shared by the CLI, the MCP shim and the
server. It is deployed to Lambda as ``chalicelib`` and installed as ``ltm``, so
modules here import each other relatively and never by package name.
"""

__version__ = "0.1.0"
