"""``ltm hooks install|uninstall``: the harness's settings files, with HOME in a tmp dir.

Real ``ltm`` subprocesses; every file is compared byte for byte before and
after, so "keeps every other setting", "a second run changes nothing" and
"uninstall removes exactly what it added" are checked as stated.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from clikit import Cli

EVENTS = {"SessionStart": "session-start", "PreCompact": "pre-compact", "Stop": "stop"}

CLAUDE_SETTINGS = """{
  "model": "opus",
  "permissions": {"allow": ["Bash(make test)"]},
  "hooks": {
    "SessionStart": [
      {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}
    ],
    "PostToolUse": [
      {"matcher": "Write", "hooks": [{"type": "command", "command": "ruff format"}]}
    ]
  }
}
"""

CODEX_CONFIG = """# my codex settings
model = "gpt-5-codex"

[features]
web_search = true

[mcp_servers.ltm]
command = "ltm"
"""


@pytest.fixture
def person(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    cli = Cli(tmp_path / "ltm")
    cli.env.update(HOME=str(home))
    cli.env.pop("CLAUDE_CONFIG_DIR", None)
    cli.env.pop("CODEX_HOME", None)
    return cli.at(home)


def home(cli: Cli) -> Path:
    return Path(cli.env["HOME"])


def ours(groups: list[dict[str, Any]]) -> list[str]:
    return [h["command"] for g in groups for h in g["hooks"] if " hook " in h["command"]]


def test_print_mode_shows_the_entries_and_writes_nothing(person: Cli) -> None:
    result = person.run("hooks", "install", "claude-code")
    assert result.returncode == 0, result.stderr
    hooks = json.loads(result.stdout)["hooks"]
    assert set(hooks) == set(EVENTS)
    for event, verb in EVENTS.items():
        (group,) = hooks[event]
        (entry,) = group["hooks"]
        assert entry["type"] == "command" and entry["timeout"] == 5
        assert entry["command"].endswith(f"ltm hook {verb} --harness claude-code")
        assert "LTM_CONFIG_DIR=" in entry["command"]  # the same store as this shell
    assert "--write" in result.stderr
    assert not (home(person) / ".claude").exists()


def test_claude_code_user_settings_merge_rerun_and_uninstall(person: Cli) -> None:
    settings = home(person) / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(CLAUDE_SETTINGS)
    person.ok("hooks", "install", "claude-code", "--write")
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"] == {"allow": ["Bash(make test)"]}
    assert data["hooks"]["PostToolUse"] == json.loads(CLAUDE_SETTINGS)["hooks"]["PostToolUse"]
    start = data["hooks"]["SessionStart"]
    assert start[0]["hooks"][0]["command"] == "echo hi"  # the user's own hook stays first
    for event, verb in EVENTS.items():
        (command,) = ours(data["hooks"][event])
        assert f"hook {verb} --harness claude-code" in command

    after = settings.read_bytes()
    again = person.run("hooks", "install", "claude-code", "--write")
    assert "nothing changed" in again.stderr and settings.read_bytes() == after

    # The installed command works as the harness runs it: through a shell, JSON on stdin.
    (command,) = ours(data["hooks"]["SessionStart"])
    ran = subprocess.run(
        command,
        shell=True,
        input=b'{"hook_event_name": "SessionStart", "source": "startup", "cwd": "/"}',
        capture_output=True,
        env=person.env,
        timeout=30,
    )
    assert ran.returncode == 0 and ran.stdout == b"", ran.stderr

    person.ok("hooks", "uninstall", "claude-code")
    assert settings.read_text() == CLAUDE_SETTINGS
    assert "nothing changed" in person.run("hooks", "uninstall", "claude-code").stderr


def test_an_older_ltm_entry_is_replaced_not_duplicated(person: Cli) -> None:
    settings = home(person) / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = {"type": "command", "command": "/old/venv/bin/ltm hook session-start"}
    settings.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [old]}]}}))
    person.ok("hooks", "install", "claude-code", "--write")
    start = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert len(start) == 1 and "/old/venv" not in start[0]["hooks"][0]["command"]


def test_claude_code_project_scope_and_uninstall_leaves_no_file(
    person: Cli, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    here = person.at(project)
    here.ok("hooks", "install", "claude-code", "--project", "--write")
    settings = project / ".claude" / "settings.json"
    assert set(json.loads(settings.read_text())["hooks"]) == set(EVENTS)
    assert not (home(person) / ".claude").exists()
    here.ok("hooks", "uninstall", "claude-code", "--project")
    assert not settings.exists()


def test_codex_hooks_json_and_the_feature_flag(person: Cli) -> None:
    codex = home(person) / ".codex"
    codex.mkdir()
    config = codex / "config.toml"
    config.write_text(CODEX_CONFIG)
    result = person.run("hooks", "install", "codex", "--write")
    assert result.returncode == 0, result.stderr
    assert "trust" in result.stderr
    hooks = json.loads((codex / "hooks.json").read_text())
    assert set(hooks) == {"hooks"}  # Codex refuses unknown top-level keys
    for event, verb in EVENTS.items():
        (command,) = ours(hooks["hooks"][event])
        assert command.endswith(f"hook {verb} --harness codex")
    doc = tomllib.loads(config.read_text())
    assert doc["features"] == {"web_search": True, "codex_hooks": True}
    assert doc["mcp_servers"] == {"ltm": {"command": "ltm"}} and doc["model"] == "gpt-5-codex"
    assert config.read_text().startswith("# my codex settings\n")

    before = (config.read_bytes(), (codex / "hooks.json").read_bytes())
    person.ok("hooks", "install", "codex", "--write")
    assert (config.read_bytes(), (codex / "hooks.json").read_bytes()) == before

    person.ok("hooks", "uninstall", "codex")
    assert config.read_text() == CODEX_CONFIG
    assert not (codex / "hooks.json").exists()


def test_codex_without_config_and_with_hooks_turned_off(person: Cli) -> None:
    codex = home(person) / ".codex"
    person.ok("hooks", "install", "codex", "--write")
    assert tomllib.loads((codex / "config.toml").read_text()) == {"features": {"codex_hooks": True}}
    person.ok("hooks", "uninstall", "codex")
    assert not (codex / "config.toml").exists() and not (codex / "hooks.json").exists()

    codex.mkdir(exist_ok=True)
    (codex / "config.toml").write_text("[features]\nhooks = false\n")
    result = person.run("hooks", "install", "codex", "--write")
    assert result.returncode == 0 and "turns hooks off" in result.stderr
    assert (codex / "config.toml").read_text() == "[features]\nhooks = false\n"


def test_a_broken_settings_file_is_refused_never_overwritten(person: Cli) -> None:
    settings = home(person) / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus",,}')
    message = person.fails("hooks", "install", "claude-code", "--write")
    assert "not valid JSON" in message and "nothing was written" in message
    assert settings.read_text() == '{"model": "opus",,}'
    settings.write_text('{"hooks": []}')
    assert "not a JSON object" in person.fails("hooks", "install", "claude-code", "--write")
