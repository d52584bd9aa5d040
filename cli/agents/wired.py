"""Whether a harness has the ltm tools: an MCP server entry that runs ``ltm mcp``.

The hooks tell the agent to call the ltm ``save`` and ``resume`` tools only where
the harness has them; elsewhere they name the shell commands instead (``ltm save
-``, ``ltm resume ID``). ``ltm doctor`` asks the same question of every harness
whose hooks are installed. The files are the ones ``ltm mcp install`` writes, and
the other places each harness reads MCP servers from:

- Claude Code: a project's ``.mcp.json``; ``~/.claude.json`` (user scope, and the
  project's entry under ``projects``; in ``$CLAUDE_CONFIG_DIR`` when that is set);
  the ltm plugin enabled in ``settings.json``. https://code.claude.com/docs/en/mcp
- Codex: ``[mcp_servers]`` of ``config.toml`` (``$CODEX_HOME``, a trusted
  project's ``.codex``). https://developers.openai.com/codex/mcp
- Gemini CLI: ``mcpServers`` of ``settings.json`` (``~/.gemini``, a project's
  ``.gemini``). https://geminicli.com/docs/tools/mcp-server
- GitHub Copilot: the CLI's ``mcp-config.json`` (``$COPILOT_HOME``), a
  repository's ``.mcp.json`` or ``.github/mcp.json``, VS Code's ``.vscode/mcp.json``.
  https://docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/add-mcp-servers
- Cursor: ``mcp.json`` (``~/.cursor``, a project's ``.cursor``).
  https://cursor.com/docs/mcp

Import-light: the hooks ask it at session start (json, and tomllib for Codex only).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ltm.cli.agents.hook_entries import harness_home

_JSON_KEY = re.compile(r'"ltm"\s*:\s*\{')


def places(harness: str, cwd: str | None = None) -> list[tuple[Path, tuple[str, ...]]]:
    """(file, key path to the servers' table) where ``harness`` reads MCP servers."""
    here = Path(cwd) if cwd else Path.cwd()
    if harness == "claude-code":
        # $CLAUDE_CONFIG_DIR moves .claude.json into that folder with the settings
        # (https://github.com/anthropics/claude-code/issues/48448 shows it there).
        moved = os.environ.get("CLAUDE_CONFIG_DIR")
        state = Path(moved) / ".claude.json" if moved else Path.home() / ".claude.json"
        found: list[tuple[Path, tuple[str, ...]]] = [(here / ".mcp.json", ("mcpServers",))]
        found.append((state, ("mcpServers",)))
        found.append((state, ("projects", str(here), "mcpServers")))
        return found
    if harness == "codex":
        return [
            (harness_home(".codex", "CODEX_HOME") / "config.toml", ("mcp_servers",)),
            (here / ".codex" / "config.toml", ("mcp_servers",)),
        ]
    if harness == "gemini":
        return [
            (harness_home(".gemini") / "settings.json", ("mcpServers",)),
            (here / ".gemini" / "settings.json", ("mcpServers",)),
        ]
    if harness == "copilot":
        return [
            (harness_home(".copilot", "COPILOT_HOME") / "mcp-config.json", ("mcpServers",)),
            (here / ".mcp.json", ("mcpServers",)),
            (here / ".github" / "mcp.json", ("mcpServers",)),
            (here / ".vscode" / "mcp.json", ("servers",)),
        ]
    if harness == "cursor":
        return [
            (harness_home(".cursor") / "mcp.json", ("mcpServers",)),
            (here / ".cursor" / "mcp.json", ("mcpServers",)),
        ]
    return []


def has_tools(harness: str, cwd: str | None = None) -> bool:
    """Whether ``harness`` (run in ``cwd``) has an MCP server that runs ltm's tools."""
    if harness == "claude-code" and claude_plugin():
        return True
    docs: dict[Path, Any] = {}
    for path, keys in places(harness, cwd):
        if path not in docs:
            docs[path] = _read(path)
        node = docs[path]
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and any(_runs_ltm(n, e) for n, e in node.items()):
            return True
        if node is _UNREADABLE and _mentions(path):
            return True  # JSON with comments: an "ltm" entry is as far as one can tell here
    return False


_UNREADABLE: Any = object()


def _read(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        if path.suffix == ".toml":
            import tomllib

            return tomllib.loads(raw.decode("utf-8"))
        return json.loads(raw)
    except ValueError:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        return _UNREADABLE


def _mentions(path: Path) -> bool:
    try:
        return bool(_JSON_KEY.search(path.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


def _runs_ltm(name: str, entry: Any) -> bool:
    """ltm's entry: named ``ltm``, or any entry whose command is an ltm running ``mcp``."""
    if not isinstance(entry, dict) or entry.get("disabled") is True:
        return False
    if entry.get("enabled") is False:  # Codex's switch
        return False
    if name == "ltm":
        return True
    command = entry.get("command")
    args = entry.get("args")
    return (
        isinstance(command, str)
        and Path(command).stem == "ltm"
        and isinstance(args, list)
        and args[:1] == ["mcp"]
    )


def claude_plugin() -> bool:
    """The ltm plugin enabled in the user's Claude Code settings (it carries the tools)."""
    settings = harness_home(".claude", "CLAUDE_CONFIG_DIR") / "settings.json"
    doc = _read(settings)
    plugins = doc.get("enabledPlugins") if isinstance(doc, dict) else None
    return isinstance(plugins, dict) and any(
        key.split("@", 1)[0] == "ltm" and value is True for key, value in plugins.items()
    )
