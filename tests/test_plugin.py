"""The Claude Code plugin (``plugin/``) and the repository's marketplace file.

The schemas below are written from Claude Code's documentation of the two files:
https://code.claude.com/docs/en/plugins/manifest-reference (plugin.json: ``name``
required, kebab-case; ``version`` semver; ``author`` an object with ``name``;
component fields such as ``hooks`` and ``mcpServers`` a path, a list of paths or
an inline object) and https://code.claude.com/docs/en/plugins/marketplace-reference
(marketplace.json: ``name``, ``owner`` with ``name``, and ``plugins``, each entry
with a ``name`` and a ``source``; a relative source starts with ``./``).
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from clikit import Cli, shell_env
from timing import scaled

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugin"
KEBAB = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
SEMVER = r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
COMPONENT = {
    "anyOf": [
        {"type": "string", "pattern": r"^\./"},
        {"type": "array", "items": {"type": "string", "pattern": r"^\./"}},
        {"type": "object"},
    ]
}
PERSON = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "email": {"type": "string"},
        "url": {"type": "string"},
    },
}
MANIFEST = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": KEBAB},
        "version": {"type": "string", "pattern": SEMVER},
        "description": {"type": "string"},
        "author": PERSON,
        "homepage": {"type": "string"},
        "repository": {"type": "string"},
        "license": {"type": "string"},
        "keywords": {"type": "array", "items": {"type": "string"}},
        **{k: COMPONENT for k in ("commands", "agents", "skills", "hooks", "mcpServers")},
        **{k: COMPONENT for k in ("outputStyles", "lspServers")},
    },
    "additionalProperties": False,
}
MARKETPLACE = {
    "type": "object",
    "required": ["name", "owner", "plugins"],
    "properties": {
        "name": {"type": "string", "pattern": KEBAB},
        "owner": PERSON,
        "metadata": {
            "type": "object",
            "properties": {
                "description": {"type": "string"},
                "version": {"type": "string"},
                "pluginRoot": {"type": "string"},
            },
            "additionalProperties": False,
        },
        "plugins": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "source"],
                "properties": {
                    "name": {"type": "string", "pattern": KEBAB},
                    "source": {
                        "anyOf": [
                            {"type": "string", "pattern": r"^\./"},
                            {"type": "object", "required": ["source"]},
                        ]
                    },
                },
            },
        },
    },
}
# hooks/hooks.json: the settings file's "hooks" object, with an optional description.
# https://code.claude.com/docs/en/hooks (Configuration)
HOOKS = {
    "type": "object",
    "required": ["hooks"],
    "properties": {
        "description": {"type": "string"},
        "hooks": {
            "type": "object",
            "additionalProperties": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["hooks"],
                    "properties": {
                        "matcher": {"type": "string"},
                        "hooks": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["type", "command"],
                                "properties": {
                                    "type": {"const": "command"},
                                    "command": {"type": "string"},
                                    "timeout": {"type": "number"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "additionalProperties": False,
}


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_manifest_and_the_marketplace_follow_the_documented_schemas() -> None:
    jsonschema.validate(load(PLUGIN / ".claude-plugin" / "plugin.json"), MANIFEST)
    market = load(ROOT / ".claude-plugin" / "marketplace.json")
    jsonschema.validate(market, MARKETPLACE)
    jsonschema.validate(load(PLUGIN / "hooks" / "hooks.json"), HOOKS)
    (entry,) = market["plugins"]
    assert entry["name"] == "ltm"
    assert (ROOT / entry["source"] / ".claude-plugin" / "plugin.json").is_file()
    with pytest.raises(jsonschema.ValidationError):  # the check does check
        jsonschema.validate({"name": "Not Kebab", "version": "1"}, MANIFEST)


def test_the_plugin_version_is_the_package_version() -> None:
    package = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert load(PLUGIN / ".claude-plugin" / "plugin.json")["version"] == package


def test_the_plugin_hooks_are_the_ones_ltm_hooks_install_writes(tmp_path: Path) -> None:
    from ltm.cli.agents.hooks_install import hook_verb, plugin_hooks

    plugin = load(PLUGIN / "hooks" / "hooks.json")
    assert plugin == plugin_hooks()
    home = tmp_path / "home"
    home.mkdir()
    cli = Cli(tmp_path / "ltm")
    cli.env.update(HOME=str(home))
    cli.env.pop("CLAUDE_CONFIG_DIR", None)
    cli.at(home).ok("hooks", "install", "claude-code", "--write")
    installed = load(home / ".claude" / "settings.json")["hooks"]
    assert set(installed) == set(plugin["hooks"])
    for event, groups in plugin["hooks"].items():
        ((ours,),) = [g["hooks"] for g in groups]
        ((theirs,),) = [g["hooks"] for g in installed[event]]
        # Same arguments after the program (the plugin runs the ltm on PATH, and stands
        # down beside a user's own: --shared) and timeout.
        tail = ours["command"].split("exec ltm ", 1)[1].removesuffix(" --shared")
        assert ours["command"].endswith(" --shared")
        assert theirs["command"].endswith(f"/ltm {tail}")
        assert hook_verb(theirs["command"]) == tail.split()[1]
        assert ours["timeout"] == theirs["timeout"]
        assert {k for k in groups[0] if k != "hooks"} == {
            k for k in installed[event][0] if k != "hooks"
        }


def test_without_ltm_the_hooks_are_silent_and_the_mcp_entry_says_how_to_install(
    tmp_path: Path,
) -> None:
    env = shell_env(tmp_path, with_ltm=False)
    payload = {"session_id": "p-1", "cwd": str(tmp_path), "hook_event_name": "SessionStart",
               "source": "startup", "prompt": "the login test"}  # fmt: skip
    for groups in load(PLUGIN / "hooks" / "hooks.json")["hooks"].values():
        command = groups[0]["hooks"][0]["command"]
        ran = subprocess.run(
            ["sh", "-c", command], input=json.dumps(payload).encode(), env=env,
            capture_output=True, cwd=tmp_path, timeout=scaled(30),
        )  # fmt: skip
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b"")
    server = load(PLUGIN / ".mcp.json")["mcpServers"]["ltm"]
    ran = subprocess.run(
        [server["command"], *server["args"]], env=env, capture_output=True, timeout=scaled(30),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert ran.returncode != 0 and ran.stdout == b""
    (line,) = ran.stderr.decode().splitlines()
    assert "ltm" in line and "pipx install" in line


def test_with_ltm_on_path_the_plugin_hook_resumes(tmp_path: Path) -> None:
    env = shell_env(tmp_path, with_ltm=True)
    project = tmp_path / "proj"
    project.mkdir()
    packet = {"goal": "Ship the plugin", "next_step": "Publish the marketplace"}
    Cli(tmp_path / "person", env, project).ok("save", stdin=json.dumps(packet))
    start = load(PLUGIN / "hooks" / "hooks.json")["hooks"]["SessionStart"][0]["hooks"][0]
    payload = {"session_id": "p-2", "cwd": str(project), "hook_event_name": "SessionStart",
               "source": "startup"}  # fmt: skip
    ran = subprocess.run(
        ["sh", "-c", start["command"]], input=json.dumps(payload).encode(), env=env,
        capture_output=True, cwd=project, timeout=scaled(30),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert "Ship the plugin" in answer["hookSpecificOutput"]["additionalContext"]
    server = load(PLUGIN / ".mcp.json")["mcpServers"]["ltm"]
    assert server["args"][-1].endswith("exec ltm mcp")
