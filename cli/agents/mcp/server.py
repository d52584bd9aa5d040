"""The stdio MCP server: the official SDK's low-level ``Server`` around ``tools``.

stdout carries the protocol and nothing else (the SDK's ``stdio_server`` also
points file descriptor 1 at stderr while it serves, so a stray print cannot
corrupt the stream); logs go to stderr. Each tool call runs in a worker
thread with its own backend, opened and closed per call like a CLI verb, so
a slow server never stalls the protocol, a fresh ``ltm auth`` is picked up
without a restart, and any failure stays inside that one call.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from ltm.cli.errors import CliError

log = logging.getLogger("ltm.mcp")


def _configure_logging() -> None:
    debug = bool(os.environ.get("LTM_DEBUG"))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ltm mcp: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


def load_sdk() -> None:
    """Import only the parts of the official SDK a stdio server runs on.

    ``import mcp`` (the package) loads the client, the HTTP transports and the
    high-level server too, and every SDK import starts there: ``mcp`` and
    ``mcp.server`` are entered here as bare packages (their submodules load
    as usual, their ``__init__`` re-exports do not run), so the process pays
    for the low-level server, the stdio transport and the protocol types only.
    And the SDK declares some 550 pydantic models, each building its
    validator at import: ``defer_build`` builds one when it is first used, so
    start-up pays only for the messages a session exchanges.

    The cyclic garbage collector is off while those classes are made: each
    collection would walk every object made so far, and there is no garbage
    to find in an import. What was imported is then
    frozen out of the collector's sight for the life of the process (and of the
    warm process's children, which share those pages).
    """
    if "mcp.server.stdio" in sys.modules:
        return
    import gc

    gc.disable()
    try:
        _import_sdk()
    finally:
        gc.enable()
    gc.freeze()


def _import_sdk() -> None:
    import importlib.util
    from types import ModuleType

    import pydantic

    pydantic.BaseModel.model_config["defer_build"] = True
    for name in ("mcp", "mcp.server"):
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            raise ImportError(f"no module named {name!r}")
        package = ModuleType(name)
        package.__spec__ = spec
        package.__path__ = list(spec.submodule_search_locations)
        package.__file__ = spec.origin
        package.__package__ = name
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)
    import mcp.server.lowlevel.server
    import mcp.server.stdio
    import mcp.shared.exceptions  # noqa: F401
    import mcp_types  # noqa: F401


def build_server() -> Any:
    """The SDK server with ltm's tools over the CLI's client; the SDK is imported here
    (see ``load_sdk``)."""
    load_sdk()
    from ltm.cli.agents.mcp.place import install
    from ltm.mcp import memory, tools
    from ltm.mcp.server import build_server as build

    install()
    return build(tools, memory)


def rehearse() -> None:
    """Play a session's start in memory, once per protocol version that opens with
    ``initialize``: the warm process does this before it forks, so each session
    inherits every pydantic validator and serializer its start uses already built
    (they are deferred; see ``load_sdk``) instead of building them itself.
    Best effort: a failure here only leaves that work to the sessions."""
    import anyio
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    server = build_server()
    try:
        for version in HANDSHAKE_PROTOCOL_VERSIONS:
            anyio.run(_rehearsal, server, version)
    except Exception as exc:  # the SDK changed under us: sessions still work, if slower
        log.info("rehearsal skipped: %s", exc)


async def _rehearsal(server: Any, version: str) -> None:
    import json

    import anyio
    import mcp_types as types
    from mcp.shared.memory import create_client_server_memory_streams
    from mcp.shared.message import SessionMessage

    client = {"name": "ltm-rehearsal", "version": "0"}
    script: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": client},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "prompts/list"},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/templates/list"},
    ]
    with anyio.fail_after(10):
        async with (
            create_client_server_memory_streams() as ((replies, requests), (read, write)),
            anyio.create_task_group() as group,
        ):
            group.start_soon(server.run, read, write, server.create_initialization_options())
            for line in script:
                # As stdio_server reads a line and writes a reply (mcp/server/stdio.py).
                message = types.jsonrpc_message_adapter.validate_json(
                    json.dumps(line), by_name=False
                )
                await requests.send(SessionMessage(message))
                if "id" in line:
                    reply = await replies.receive()
                    if isinstance(reply, Exception):  # the stream carries the server's errors
                        raise reply
                    reply.message.model_dump_json(by_alias=True, exclude_unset=True)
            group.cancel_scope.cancel()


async def _serve() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve() -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    try:
        import anyio

        load_sdk()
    except ImportError:
        raise CliError("the mcp package is missing from this installation; reinstall ltm") from None
    _configure_logging()
    if sys.stdin.isatty():
        print(
            "ltm mcp: speaking MCP on stdin/stdout; an MCP client starts this, not a person "
            "(see: ltm mcp install --help). Ctrl-D to stop.",
            file=sys.stderr,
        )
    anyio.run(_serve)
