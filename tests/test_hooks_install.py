"""``ltm hooks install|uninstall``: the harness's settings files, with HOME in a tmp dir.

Real ``ltm`` subprocesses; every file is compared byte for byte before and
after, so "keeps every other setting", "a second run changes nothing" and
"uninstall removes exactly what it added" are checked as stated.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from clikit import Cli
from timing import scaled

EVENTS = {
    "SessionStart": "session-start",
    "PreCompact": "pre-compact",
    "Stop": "stop",
    "UserPromptSubmit": "user-prompt",  # recall at the prompt: on by default
}

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
    cli.env.pop("COPILOT_HOME", None)
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
    # A state dir of the shell's own (the hooks' log and markers) goes with them too.
    state = home(person) / "state"
    moved = person.run("hooks", "install", "claude-code", LTM_STATE_DIR=str(state))
    for groups in json.loads(moved.stdout)["hooks"].values():
        assert f"LTM_STATE_DIR={state}" in groups[0]["hooks"][0]["command"]
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
        timeout=scaled(30),
    )
    assert ran.returncode == 0 and ran.stdout == b"", ran.stderr

    installed = settings.read_text()
    preview = person.run("hooks", "uninstall", "claude-code")  # says, touches nothing
    assert preview.returncode == 0
    assert "would remove ltm hook for UserPromptSubmit" in preview.stderr
    assert "ltm hooks uninstall claude-code --write" in preview.stderr
    assert settings.read_text() == installed
    person.ok("hooks", "uninstall", "claude-code", "--write")
    assert settings.read_text() == CLAUDE_SETTINGS
    assert "nothing changed" in person.run("hooks", "uninstall", "claude-code", "--write").stderr


def test_hooks_beside_the_enabled_plugin_are_refused(person: Cli) -> None:
    """The Claude Code plugin runs the same hooks: installing them too would run each twice
    (the packet injected twice, two save requests)."""
    settings = home(person) / ".claude" / "settings.json"
    settings.parent.mkdir()
    with_plugin = {"enabledPlugins": {"ltm@ltm-python": True}, "model": "opus"}
    settings.write_text(json.dumps(with_plugin))
    line = person.fails("hooks", "install", "claude-code", "--write", code=2)
    assert "the ltm plugin is enabled in Claude Code" in line and "one or the other" in line
    assert json.loads(settings.read_text()) == with_plugin  # nothing written
    for scope in ((), ("--project",)):
        assert person.run("hooks", "install", "claude-code", *scope).returncode == 0  # preview

    with_plugin["enabledPlugins"]["ltm@ltm-python"] = False  # disabled: hooks are wanted
    settings.write_text(json.dumps(with_plugin))
    person.ok("hooks", "install", "claude-code", "--write", "--no-mcp")
    assert "SessionStart" in json.loads(settings.read_text())["hooks"]


def test_what_the_user_set_on_ltms_group_stays(person: Cli) -> None:
    """A matcher the user put on ltm's own group (session start on startup only, say)
    survives running install again (it was dropped and the group written anew), and an
    update of ltm's entry (another ltm, --no-recall...) keeps it too."""
    settings = home(person) / ".claude" / "settings.json"
    person.ok("hooks", "install", "claude-code", "--write", "--no-mcp")
    doc = json.loads(settings.read_text())
    doc["hooks"]["SessionStart"][0]["matcher"] = "startup|clear"
    settings.write_text(json.dumps(doc, indent=2))
    before = settings.read_text()
    again = person.run("hooks", "install", "claude-code", "--write", "--no-mcp")
    assert "nothing changed" in again.stderr and settings.read_text() == before

    person.ok("hooks", "install", "claude-code", "--write", "--no-mcp", "-t", "core")
    (group,) = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert group["matcher"] == "startup|clear" and "--team core" in group["hooks"][0]["command"]


def test_what_the_user_set_on_ltms_cursor_entry_stays(person: Cli) -> None:
    """Cursor's entries stand alone: a loop_limit the user set on ltm's stop entry survives
    running install again (the entry was written anew without it)."""
    path = home(person) / ".cursor" / "hooks.json"
    person.ok("hooks", "install", "cursor", "--write", "--no-mcp")
    doc = json.loads(path.read_text())
    doc["hooks"]["stop"][0]["loop_limit"] = 1
    path.write_text(json.dumps(doc, indent=2))
    before = path.read_text()
    again = person.run("hooks", "install", "cursor", "--write", "--no-mcp")
    assert "nothing changed" in again.stderr and path.read_text() == before


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
    here.ok("hooks", "uninstall", "claude-code", "--project", "--write")
    assert not settings.exists()


@pytest.mark.parametrize("name", ["claude-code", "cursor"])
def test_uninstall_keeps_a_file_whose_comments_are_the_users(person: Cli, name: str) -> None:
    """The file ltm emptied is deleted only when nothing of the user's is left in it: a
    comment they wrote in an otherwise empty settings file stays, with the file."""
    folder = home(person) / (".claude" if name == "claude-code" else ".cursor")
    folder.mkdir()
    path = folder / ("settings.json" if name == "claude-code" else "hooks.json")
    mine = '// my settings: keep this note\n{"version": 1}\n' if name == "cursor" else None
    mine = mine or "// my settings: keep this note\n{}\n"
    path.write_text(mine)
    person.ok("hooks", "install", name, "--write", "--no-mcp")
    person.ok("hooks", "uninstall", name, "--write")
    assert path.read_text().startswith("// my settings: keep this note\n")
    assert json.loads(path.read_text().split("\n", 1)[1]) == json.loads(mine.split("\n", 1)[1])


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

    person.ok("hooks", "uninstall", "codex", "--write")
    assert config.read_text() == CODEX_CONFIG
    assert not (codex / "hooks.json").exists()


def test_codex_without_config_and_with_hooks_turned_off(person: Cli) -> None:
    codex = home(person) / ".codex"
    person.ok("hooks", "install", "codex", "--write")
    assert tomllib.loads((codex / "config.toml").read_text()) == {"features": {"codex_hooks": True}}
    person.ok("hooks", "uninstall", "codex", "--write")
    assert not (codex / "config.toml").exists() and not (codex / "hooks.json").exists()

    codex.mkdir(exist_ok=True)
    (codex / "config.toml").write_text("[features]\nhooks = false\n")
    result = person.run("hooks", "install", "codex", "--write")
    assert result.returncode == 0 and "turns hooks off" in result.stderr
    assert (codex / "config.toml").read_text() == "[features]\nhooks = false\n"


def test_codex_uninstall_keeps_the_flag_the_users_own_hooks_need(person: Cli) -> None:
    """Older Codex releases run no hook without the flag: ltm's line stays while hooks of
    the user's own remain (in hooks.json, or inline in config.toml), and goes with the
    last of them."""
    codex = home(person) / ".codex"
    codex.mkdir()
    config, hooks_file = codex / "config.toml", codex / "hooks.json"
    config.write_text(CODEX_CONFIG)
    person.ok("hooks", "install", "codex", "--write", "--no-mcp")
    doc = json.loads(hooks_file.read_text())
    mine = [{"matcher": "Bash", "hooks": [{"type": "command", "command": "ruff format"}]}]
    doc["hooks"]["PostToolUse"] = mine
    hooks_file.write_text(json.dumps(doc, indent=2))
    flagged = config.read_text()

    preview = person.run("hooks", "uninstall", "codex")
    assert "would remove the hooks feature flag" not in preview.stderr
    assert "would keep the hooks feature flag" in preview.stderr
    result = person.run("hooks", "uninstall", "codex", "--write")
    assert result.returncode == 0 and "kept the hooks feature flag" in result.stderr
    assert config.read_text() == flagged
    assert json.loads(hooks_file.read_text()) == {"hooks": {"PostToolUse": mine}}

    hooks_file.unlink()  # the user's own hooks gone too: the flag goes on the next run
    person.ok("hooks", "install", "codex", "--write", "--no-mcp")
    inline = '\n[[hooks.Stop]]\nhooks = [{ type = "command", command = "say done" }]\n'
    config.write_text(config.read_text() + inline)
    with_inline = config.read_text()
    person.ok("hooks", "uninstall", "codex", "--write")
    assert config.read_text() == with_inline
    config.write_text(flagged)
    person.ok("hooks", "install", "codex", "--write", "--no-mcp")
    person.ok("hooks", "uninstall", "codex", "--write")
    assert config.read_text() == CODEX_CONFIG


@pytest.mark.parametrize(
    "features", ["features.web_search = true\n", "features = { web_search = true }\n"]
)
def test_codex_features_ltm_cannot_add_the_flag_to_stop_it_before_anything_is_written(
    person: Cli, features: str
) -> None:
    """Features written as dotted keys or an inline table leave no [features] table to add
    the flag to: the install says so, and neither file changes (the hooks file was written
    before the flag failed, and the valid config.toml was called invalid TOML)."""
    codex = home(person) / ".codex"
    codex.mkdir()
    config = codex / "config.toml"
    config.write_text(features)
    message = person.fails("hooks", "install", "codex", "--write", "--no-mcp")
    assert "nothing was written" in message and "codex_hooks = true" in message
    assert "not valid TOML" not in message
    assert config.read_text() == features and not (codex / "hooks.json").exists()


def test_a_broken_settings_file_is_refused_never_overwritten(person: Cli) -> None:
    settings = home(person) / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus",,}')
    message = person.fails("hooks", "install", "claude-code", "--write")
    assert "not valid JSON" in message and "nothing was written" in message
    assert settings.read_text() == '{"model": "opus",,}'
    settings.write_text('{"hooks": []}')
    assert "not a JSON object" in person.fails("hooks", "install", "claude-code", "--write")


# -- exactly ltm's entries (a user's hook sharing a group, a look-alike command) --------


def test_a_user_hook_sharing_a_group_with_ltm_stays_on_install_and_uninstall(
    person: Cli,
) -> None:
    settings = home(person) / ".claude" / "settings.json"
    settings.parent.mkdir()
    old_ltm = {"type": "command", "command": "/old/venv/bin/ltm hook session-start"}
    mine = {"type": "command", "command": "echo started >> ~/sessions.log"}
    settings.write_text(
        json.dumps({"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [mine, old_ltm]}]}})
    )
    person.ok("hooks", "install", "claude-code", "--write")
    start = json.loads(settings.read_text())["hooks"]["SessionStart"]
    # The user's group keeps the user's hook (and its matcher); ltm's entry left it for a
    # group of its own.
    assert start[0] == {"matcher": "startup", "hooks": [mine]}
    assert len(start) == 2 and "/old/venv" not in json.dumps(start)
    (command,) = ours(start)
    assert command.endswith("hook session-start --harness claude-code")

    person.ok("hooks", "uninstall", "claude-code", "--write")
    assert json.loads(settings.read_text()) == {
        "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [mine]}]}
    }


def test_a_command_that_only_mentions_ltm_hook_is_the_users(person: Cli) -> None:
    settings = home(person) / ".claude" / "settings.json"
    settings.parent.mkdir()
    lookalikes = [
        "notify-send 'ltm hook done'",
        "echo ltm hook session-start >> /tmp/log",
        "/usr/bin/env ltm-helper hook session-start",
    ]
    groups = [{"hooks": [{"type": "command", "command": c}]} for c in lookalikes]
    text = json.dumps({"hooks": {"SessionStart": groups, "Stop": groups[:1]}}, indent=2) + "\n"
    settings.write_text(text)
    person.ok("hooks", "install", "claude-code", "--write")
    data = json.loads(settings.read_text())
    assert data["hooks"]["SessionStart"][:3] == groups and len(data["hooks"]["SessionStart"]) == 4
    assert data["hooks"]["Stop"][:1] == groups[:1] and len(data["hooks"]["Stop"]) == 2
    person.ok("hooks", "uninstall", "claude-code", "--write")
    assert settings.read_text() == text


def test_recall_can_be_left_out_and_is_taken_out_again(person: Cli) -> None:
    settings = home(person) / ".claude" / "settings.json"
    person.ok("hooks", "install", "claude-code", "--write", "--no-recall")
    assert set(json.loads(settings.read_text())["hooks"]) == set(EVENTS) - {"UserPromptSubmit"}
    person.ok("hooks", "install", "claude-code", "--write", "--recall-all-scopes")
    (recall,) = ours(json.loads(settings.read_text())["hooks"]["UserPromptSubmit"])
    assert recall.endswith("hook user-prompt --harness claude-code --all-scopes")
    result = person.run("hooks", "install", "claude-code", "--write", "--no-recall")
    assert "UserPromptSubmit" in result.stderr
    assert "UserPromptSubmit" not in json.loads(settings.read_text())["hooks"]


def test_cursor_cannot_recall(person: Cli) -> None:
    result = person.run("hooks", "install", "cursor", "--recall")
    assert result.returncode == 2 and "cannot recall" in result.stderr


# -- Cursor, Copilot, Gemini: their files and shapes --------------------------------------


def test_cursor_hooks_json(person: Cli) -> None:
    path = home(person) / ".cursor" / "hooks.json"
    path.parent.mkdir()
    mine = {"command": "./audit.sh", "matcher": "Shell"}
    path.write_text(json.dumps({"version": 1, "hooks": {"beforeShellExecution": [mine]}}))
    before = path.read_text()
    person.ok("hooks", "install", "cursor", "--write")
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["hooks"]["beforeShellExecution"] == [mine]
    for event, verb in {"sessionStart": "session-start", "preCompact": "pre-compact",
                        "stop": "stop"}.items():  # fmt: skip
        (entry,) = data["hooks"][event]
        assert set(entry) == {"command", "timeout"} and entry["timeout"] == 5
        assert entry["command"].endswith(f"hook {verb} --harness cursor")
    assert "beforeSubmitPrompt" not in data["hooks"]
    after = path.read_bytes()
    person.ok("hooks", "install", "cursor", "--write")
    assert path.read_bytes() == after
    person.ok("hooks", "uninstall", "cursor", "--write")
    assert json.loads(path.read_text()) == json.loads(before)


def test_copilot_writes_its_own_file_user_and_project(person: Cli, tmp_path: Path) -> None:
    path = home(person) / ".copilot" / "hooks" / "ltm.json"
    person.ok("hooks", "install", "copilot", "--write")
    data = json.loads(path.read_text())
    assert data["version"] == 1 and set(data["hooks"]) == set(EVENTS)
    for event, verb in EVENTS.items():
        (entry,) = data["hooks"][event]
        assert entry["type"] == "command" and entry["timeout"] == 5
        assert entry["command"] == entry["bash"]
        assert entry["command"].endswith(f"hook {verb} --harness copilot")
    person.ok("hooks", "uninstall", "copilot", "--write")
    assert not path.exists()

    project = tmp_path / "proj"
    project.mkdir()
    here = person.at(project)
    here.ok("hooks", "install", "copilot", "--project", "--write")
    assert (project / ".github" / "hooks" / "ltm.json").exists()
    here.ok("hooks", "uninstall", "copilot", "--project", "--write")
    assert not (project / ".github" / "hooks" / "ltm.json").exists()


def test_gemini_settings(person: Cli) -> None:
    path = home(person) / ".gemini" / "settings.json"
    path.parent.mkdir()
    text = '{\n  // my settings\n  "theme": "GitHub",\n  "hooks": {\n    "BeforeTool": [\n' \
        '      {"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}\n' \
        "    ]\n  }\n}\n"  # fmt: skip
    path.write_text(text)
    person.ok("hooks", "install", "gemini", "--write")
    after = path.read_text()
    assert "// my settings" in after
    from ltm.cli.agents.mcp.install import parse_jsonc

    data = parse_jsonc(after).value
    events = {"SessionStart": "session-start", "PreCompress": "pre-compact",
              "AfterAgent": "stop", "BeforeAgent": "user-prompt"}  # fmt: skip
    assert set(data["hooks"]) == {"BeforeTool", *events}
    for event, verb in events.items():
        ((entry,),) = [g["hooks"] for g in data["hooks"][event]]
        assert entry["name"] == f"ltm-{verb}" and entry["timeout"] == 5000
        assert entry["command"].endswith(f"hook {verb} --harness gemini")
    person.ok("hooks", "install", "gemini", "--write")
    assert path.read_text() == after
    person.ok("hooks", "uninstall", "gemini", "--write")
    assert path.read_text() == text


@pytest.mark.parametrize("name", ["codex", "gemini", "copilot"])
def test_hooks_offer_the_tools_and_doctor_checks_them(person: Cli, name: str) -> None:
    """Hooks that name the ltm tools want a harness that has them: install offers them
    (no terminal here: it says the command), --mcp adds them, and doctor checks."""
    result = person.run("hooks", "install", name, "--write")
    assert result.returncode == 0, result.stderr
    assert f"ltm mcp install {name} --write" in result.stderr
    doctor = person.run("doctor").stdout
    assert any(
        line.startswith("warn") and f"tools {name}" in line and "ltm mcp install" in line
        for line in doctor.splitlines()
    ), doctor

    added = person.run("hooks", "install", name, "--write", "--mcp")
    assert added.returncode == 0, added.stderr
    assert "added the 'ltm' server" in added.stderr
    doctor = person.run("doctor").stdout
    assert any(line.startswith("ok") and f"tools {name}" in line for line in doctor.splitlines()), (
        doctor
    )
    assert f"ok    mcp {name}" in doctor or re.search(rf"ok\s+mcp {name}\s", doctor), doctor

    again = person.run("hooks", "install", name, "--write")
    assert "ltm mcp install" not in again.stderr  # wired: nothing more to offer


def test_claude_code_tools_are_found_where_claude_config_dir_keeps_them(
    person: Cli, tmp_path: Path
) -> None:
    """With $CLAUDE_CONFIG_DIR set, Claude Code keeps its user-scope MCP servers in
    .claude.json inside that folder, not in the home folder: the ltm server there counts
    (it was missed, so install kept offering the tools and the hooks named none)."""
    moved = tmp_path / "claude-alt"
    moved.mkdir()
    entry = {"type": "stdio", "command": "/opt/ltm/bin/ltm", "args": ["mcp"], "env": {}}
    (moved / ".claude.json").write_text(json.dumps({"mcpServers": {"ltm": entry}}))
    person.env["CLAUDE_CONFIG_DIR"] = str(moved)
    result = person.run("hooks", "install", "claude-code", "--write")
    assert result.returncode == 0, result.stderr
    assert (moved / "settings.json").exists()
    assert "no ltm tools yet" not in result.stderr and "claude mcp add" not in result.stderr


def test_no_mcp_leaves_the_tools_out(person: Cli) -> None:
    result = person.run("hooks", "install", "gemini", "--write", "--no-mcp")
    assert result.returncode == 0 and "ltm mcp install" not in result.stderr
    assert "mcpServers" not in (home(person) / ".gemini" / "settings.json").read_text()


PROJECT_FILES = {
    "claude-code": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "copilot": ".github/hooks/ltm.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
}


def ltm_entries(path: Path) -> dict[str, list[dict[str, Any]]]:
    """{event: ltm's entries} of a hooks file, grouped or flat."""
    from ltm.cli.agents.hooks_install import hook_verb
    from ltm.cli.agents.mcp.install import parse_jsonc

    found = {}
    for event, items in parse_jsonc(path.read_text()).value["hooks"].items():
        entries = [e for g in items for e in g.get("hooks", [g])]
        found[event] = [e for e in entries if hook_verb(e.get("command", "")) is not None]
    return found


@pytest.mark.parametrize("name", sorted(PROJECT_FILES))
def test_a_project_install_runs_the_ltm_on_each_persons_path(
    person: Cli, tmp_path: Path, name: str
) -> None:
    """A project's file is committed: nothing of this user's goes in it (their ltm's path,
    their LTM_* dirs), and on a machine without ltm its hooks do nothing, quietly."""
    from clikit import LTM, shell_env

    project = tmp_path / "proj"
    project.mkdir()
    here = person.at(project)
    assert here.env["LTM_DATA_DIR"].startswith(str(tmp_path))  # personal settings are set
    said = here.run("hooks", "install", name, "--project", "--write", "--no-mcp")
    assert said.returncode == 0, said.stderr
    assert "on each person's PATH" in said.stderr and "to commit" in said.stderr
    path = project / PROJECT_FILES[name]
    text = path.read_text()
    assert str(tmp_path) not in text and LTM not in text and "LTM_" not in text
    entries = ltm_entries(path)
    assert entries and all(len(found) == 1 for found in entries.values())
    compact = next(e for e in entries if e in ("PreCompact", "PreCompress", "preCompact"))
    for field in ("command", "bash") if name == "copilot" else ("command",):
        run = entries[compact][0][field]
        assert run.startswith("command -v ltm >/dev/null 2>&1 || exit 0; exec ltm hook ")
        data = json.dumps({
            "session_id": "s-1", "conversation_id": "s-1", "cwd": str(project),
            "workspace_roots": [str(project)], "hook_event_name": compact,
        })  # fmt: skip
        for with_ltm in (True, False):
            machine = tmp_path / ("with-ltm" if with_ltm else "without-ltm")
            machine.mkdir(exist_ok=True)
            env = shell_env(machine, with_ltm=with_ltm)
            ran = subprocess.run(
                ["sh", "-c", run], input=data.encode(), env=env, cwd=project,
                capture_output=True, timeout=scaled(30),
            )  # fmt: skip
            assert ran.returncode == 0 and ran.stderr == b"", ran.stderr
            if with_ltm:  # the reminder to save, in the harness's shape
                assert "save" in ran.stdout.decode()
            else:
                assert ran.stdout == b""
    here.ok("hooks", "install", name, "--project", "--write", "--no-mcp")
    assert path.read_text() == text  # a second run changes nothing
    here.ok("hooks", "uninstall", name, "--project", "--write")
    assert not path.exists()


@pytest.mark.parametrize("name", ["claude-code", "cursor"])
def test_a_project_file_an_older_ltm_wrote_with_personal_paths_is_replaced(
    person: Cli, tmp_path: Path, name: str
) -> None:
    """Earlier releases wrote this user's ltm and LTM_* dirs into the project's file: a new
    --project install leaves one portable entry per event, nothing of theirs."""
    project = tmp_path / "proj"
    path = project / PROJECT_FILES[name]
    path.parent.mkdir(parents=True)
    old = "LTM_DATA_DIR=/home/alice/ltm-data /home/alice/.venv/bin/ltm hook {} --harness " + name
    if name == "cursor":
        events = {"sessionStart": "session-start", "preCompact": "pre-compact", "stop": "stop"}
        hooks: dict[str, Any] = {
            e: [{"command": old.format(v), "timeout": 5}] for e, v in events.items()
        }
        doc: dict[str, Any] = {"version": 1, "hooks": hooks}
    else:
        events = EVENTS
        hooks = {
            e: [{"hooks": [{"type": "command", "command": old.format(v), "timeout": 5}]}]
            for e, v in events.items()
        }
        doc = {"hooks": hooks}
    path.write_text(json.dumps(doc, indent=2))
    person.at(project).ok("hooks", "install", name, "--project", "--write", "--no-mcp")
    assert "/home/alice" not in path.read_text()
    entries = ltm_entries(path)
    assert set(entries) == set(events)
    for event, verb in events.items():
        (entry,) = entries[event]
        assert entry["command"].endswith(f"exec ltm hook {verb} --harness {name} --shared")


def test_own_and_project_hooks_together_answer_each_event_once(person: Cli, tmp_path: Path) -> None:
    """The harness runs the user's and the project's hooks alike, and the two commands differ
    (an absolute ltm, the ltm on PATH), so nothing merges them: the project's entry stands
    down where the user's own file runs ltm's hook for that event, and answers where it
    does not (a teammate with no hooks of their own)."""
    from clikit import shell_env

    project = tmp_path / "proj"
    project.mkdir()
    here = person.at(project)
    alone = here.run("hooks", "install", "codex", "--project", "--write", "--no-mcp")
    assert alone.returncode == 0 and "too" not in alone.stderr
    compact = ltm_entries(project / PROJECT_FILES["codex"])["PreCompact"][0]["command"]
    data = json.dumps({"session_id": "s-1", "cwd": str(project), "hook_event_name": "PreCompact"})

    def project_hook() -> str:
        machine = tmp_path / "machine"
        machine.mkdir(exist_ok=True)
        env = {**shell_env(machine, with_ltm=True), "HOME": person.env["HOME"]}
        ran = subprocess.run(
            ["sh", "-c", compact], input=data.encode(), env=env, cwd=project,
            capture_output=True, timeout=scaled(30),
        )  # fmt: skip
        assert ran.returncode == 0 and ran.stderr == b"", ran.stderr
        return ran.stdout.decode()

    assert "save" in project_hook()  # no hooks of this user's own: the project's answers
    person.ok("hooks", "install", "codex", "--write", "--no-mcp")
    assert project_hook() == ""  # the user's own answers this event
    both = here.run("hooks", "install", "codex", "--project", "--no-mcp")
    user = home(person) / ".codex" / "hooks.json"
    assert f"note: {user} runs ltm's hooks too" in both.stderr and "once" in both.stderr
    person.ok("hooks", "uninstall", "codex", "--write")
    assert "save" in project_hook()


def test_the_users_own_file_is_read_whatever_its_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared entry asks the user's own file on every prompt: a comment in it, or a string
    JSON would refuse, is still read for ltm's entries; a shared entry there is not one."""
    from ltm.cli.agents.hook_entries import PORTABLE, own_runs

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    settings = tmp_path / "settings.json"
    own = "/opt/ltm/bin/ltm hook session-start --harness claude-code"
    settings.write_text(
        '{ // the user\'s note\n "hooks": {"SessionStart": [{"hooks": [{"command": "'
        + own
        + '"}]}]}, "odd": "\\x"}'
    )
    assert own_runs("claude-code", "session-start") and not own_runs("claude-code", "stop")
    shared = PORTABLE + "ltm hook session-start --harness claude-code --shared"
    settings.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [{"command": shared}]}]}}))
    assert not own_runs("claude-code", "session-start")
    settings.unlink()
    assert not own_runs("claude-code", "session-start")
