"""ltm mcp: serve the ltm tools to an MCP client over stdio, or install that in a client.

Kept import-light (typer and the standard library only): the MCP SDK is
imported when serving, never when the CLI starts.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="The ltm tools for AI agents over MCP (Claude Code, Codex, Gemini CLI, Copilot, Cursor,"
    " Zed, Claude Desktop...). "
    "Without a subcommand: serve MCP on stdin/stdout, as an MCP client runs it.",
    invoke_without_command=True,
)


class Client(StrEnum):
    claude_code = "claude-code"
    cursor = "cursor"
    vscode = "vscode"
    zed = "zed"
    claude_desktop = "claude-desktop"
    codex = "codex"
    gemini = "gemini"
    copilot = "copilot"


@app.callback(invoke_without_command=True)
def mcp(ctx: typer.Context) -> None:
    """Serve the ltm tools over MCP on stdin/stdout (the client starts this)."""
    if ctx.invoked_subcommand is None:
        from ltm.cli.agents.mcp.server import serve

        serve()


@app.command("install")
def install(
    client: Annotated[
        Client,
        typer.Argument(metavar="CLIENT", help=f"The MCP client to configure: {', '.join(Client)}."),
    ],
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Merge the entry into the client's config file (other servers are kept).",
        ),
    ] = False,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", metavar="FILE", help="Use this config file instead of the client's usual one."
        ),
    ] = None,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            metavar="URL",
            help="Connect the client to this server's /mcp over HTTP instead (it signs in with"
            " OAuth by itself; nothing of ltm needs to be installed where it runs).",
        ),
    ] = None,
) -> None:
    """Print the config snippet that runs `ltm mcp` in CLIENT (or, with --remote, connects it
    to a server's /mcp), or write it with --write."""
    from ltm.cli.agents.mcp.install import run

    run(client.value, write=write, file=file, remote=remote)
