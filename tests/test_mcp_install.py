"""``ltm mcp install CLIENT [--write]``: the snippet per client, and a merge that keeps the rest.

The command runs as a user runs it (the console script, HOME and the config
dirs in a temporary directory); the JSON(C) merge underneath is also held to
its promises directly: other servers, settings, comments and formatting stay,
a second run changes nothing, and a file it cannot parse is never touched.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from timing import scaled

from ltm.cli.agents.mcp.install import JsoncError, MergeError, merge, parse_jsonc

LTM = str(Path(sys.executable).with_name("ltm"))
CLIENTS = ("claude-code", "cursor", "zed", "claude-desktop")
KEYS = {
    "claude-code": "mcpServers",
    "cursor": "mcpServers",
    "zed": "context_servers",
    "claude-desktop": "mcpServers",
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    return tmp_path / "home"


def run(
    home: Path, *args: str, ltm_env: bool = True, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LTM_") and k not in ("XDG_CONFIG_HOME", "APPDATA")
    }
    env["HOME"] = str(home)
    if ltm_env:
        env["LTM_CONFIG_DIR"] = str(home.parent / "config")
        env["LTM_DATA_DIR"] = str(home.parent / "data")
    env.update(extra)
    return subprocess.run(
        [LTM, "mcp", "install", *args],
        env=env,
        cwd=home.parent / "project",
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


def default_path(home: Path, client: str) -> Path:
    return {
        "claude-code": home.parent / "project" / ".mcp.json",
        "cursor": home / ".cursor" / "mcp.json",
        "zed": home / ".config" / "zed" / "settings.json",
        "claude-desktop": home / ".config" / "Claude" / "claude_desktop_config.json",
    }[client]


# --------------------------------------------------------------------------
# Snippets


@pytest.mark.parametrize("client", CLIENTS)
def test_snippet_for_each_client(home: Path, client: str) -> None:
    result = run(home, client)
    assert result.returncode == 0, result.stderr
    snippet = json.loads(result.stdout)
    assert list(snippet) == [KEYS[client]]
    entry = snippet[KEYS[client]]["ltm"]
    assert entry["args"] == ["mcp"]
    if client == "claude-code":
        # The project's .mcp.json is shared with the repository: PATH's ltm, no home paths.
        assert entry["command"] == "ltm" and entry["env"] == {}
        assert str(home) not in result.stdout and str(home.parent) not in result.stdout
        assert "LTM_CONFIG_DIR and LTM_DATA_DIR stay out of this shared file" in result.stderr
    else:
        assert entry["command"] == LTM and Path(entry["command"]).is_absolute()
        assert os.access(entry["command"], os.X_OK)
        # The shell's store and sign-in follow the client; never a token.
        assert entry["env"] == {
            "LTM_CONFIG_DIR": str(home.parent / "config"),
            "LTM_DATA_DIR": str(home.parent / "data"),
        }
    assert str(default_path(home, client)) in result.stderr
    assert f"ltm mcp install {client} --write" in result.stderr
    assert not default_path(home, client).exists()  # printing writes nothing
    if client == "zed":
        assert entry["source"] == "custom"
    if client == "claude-code":
        assert entry["type"] == "stdio"
        assert f"claude mcp add --scope user -e LTM_CONFIG_DIR={home.parent / 'config'}" in (
            result.stderr
        )
        assert f"ltm -- {LTM} mcp" in result.stderr


def test_snippet_without_overrides_has_no_env(home: Path) -> None:
    cursor = json.loads(run(home, "cursor", ltm_env=False).stdout)["mcpServers"]["ltm"]
    assert cursor == {"command": LTM, "args": ["mcp"]}
    zed = json.loads(run(home, "zed", ltm_env=False).stdout)["context_servers"]["ltm"]
    assert zed == {"source": "custom", "command": LTM, "args": ["mcp"], "env": {}}


def test_platform_paths_follow_xdg(home: Path, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    result = run(home, "claude-desktop", XDG_CONFIG_HOME=str(xdg))
    assert str(xdg / "Claude" / "claude_desktop_config.json") in result.stderr
    result = run(home, "zed", XDG_CONFIG_HOME=str(xdg))
    assert str(xdg / "zed" / "settings.json") in result.stderr


def test_unknown_client_is_refused(home: Path) -> None:
    result = run(home, "emacs")
    assert result.returncode != 0
    assert "claude-code" in result.stderr and "zed" in result.stderr


# --------------------------------------------------------------------------
# --write


@pytest.mark.parametrize("client", CLIENTS)
def test_write_creates_the_file(home: Path, client: str) -> None:
    result = run(home, client, "--write")
    assert result.returncode == 0, result.stderr
    path = default_path(home, client)
    written = json.loads(path.read_text())
    assert written == json.loads(run(home, client).stdout)
    assert "added the 'ltm' server" in result.stderr and "Restart" in result.stderr


@pytest.mark.parametrize("client", ["cursor", "claude-desktop", "claude-code"])
def test_write_merges_and_is_idempotent(home: Path, client: str) -> None:
    path = default_path(home, client)
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {
            "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]},
            "memory": {"command": "uvx", "args": ["mcp-memory"], "env": {"DEBUG": "1"}},
        },
    }
    path.write_text(json.dumps(existing, indent=4) + "\n")
    path.chmod(0o600)

    assert run(home, client, "--write").returncode == 0
    merged = json.loads(path.read_text())
    assert merged["globalShortcut"] == "Ctrl+Space"
    assert merged["mcpServers"]["github"] == existing["mcpServers"]["github"]
    assert merged["mcpServers"]["memory"] == existing["mcpServers"]["memory"]
    assert merged["mcpServers"]["ltm"]["command"] == ("ltm" if client == "claude-code" else LTM)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the file's mode is kept
    assert '\n    "globalShortcut"' in path.read_text()  # and its indentation

    before = path.read_bytes()
    again = run(home, client, "--write")
    assert again.returncode == 0
    assert "nothing changed" in again.stderr
    assert path.read_bytes() == before


def test_write_replaces_a_stale_ltm_entry_only(home: Path) -> None:
    path = default_path(home, "cursor")
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "ltm": {"command": "/old/venv/bin/ltm", "args": ["mcp"]},
                    "other": {"command": "other-server"},
                }
            },
            indent=2,
        )
    )
    result = run(home, "cursor", "--write")
    assert result.returncode == 0 and "updated" in result.stderr
    servers = json.loads(path.read_text())["mcpServers"]
    assert servers["ltm"]["command"] == LTM
    assert servers["other"] == {"command": "other-server"}


def test_zed_settings_with_comments_keep_their_comments(home: Path) -> None:
    path = default_path(home, "zed")
    path.parent.mkdir(parents=True)
    original = """// Zed settings
//
// For information on how to configure Zed, see the Zed documentation.
{
  "theme": "One Dark", // my favourite
  /* fonts */
  "buffer_font_size": 15,
  "context_servers": {
    "postgres": {
      "source": "custom",
      "command": "pg-mcp",
      "args": [],
    },
  },
}
"""
    path.write_text(original)
    result = run(home, "zed", "--write")
    assert result.returncode == 0, result.stderr
    text = path.read_text()
    for kept in ("// Zed settings", "// my favourite", "/* fonts */", '"pg-mcp"'):
        assert kept in text
    settings_ = parse_jsonc(text).value
    assert settings_["theme"] == "One Dark" and settings_["buffer_font_size"] == 15
    assert set(settings_["context_servers"]) == {"postgres", "ltm"}
    assert settings_["context_servers"]["ltm"]["source"] == "custom"
    assert run(home, "zed", "--write").returncode == 0
    assert path.read_text() == text  # idempotent


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"mcpServers": {"github": {"command": "npx"},}', "not valid JSON (line 1"),
        ("{'mcpServers': {}}", "not valid JSON"),
        ("[1, 2, 3]", "the top level is not a JSON object"),
        ('{"mcpServers": ["github"]}', '"mcpServers" is not a JSON object'),
        ('{"a": 1} trailing', "not valid JSON"),
    ],
)
def test_write_refuses_a_file_it_cannot_parse(home: Path, content: str, reason: str) -> None:
    path = default_path(home, "cursor")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    result = run(home, "cursor", "--write")
    assert result.returncode == 1
    assert reason in result.stderr and "nothing was written" in result.stderr
    assert path.read_text() == content  # untouched
    assert json.loads(result.stdout)["mcpServers"]["ltm"]["command"] == LTM  # to add by hand
    assert [p.name for p in path.parent.iterdir()] == ["mcp.json"]  # no temp file left


def test_write_to_a_chosen_file_and_through_a_symlink(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "cursor-mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"mcpServers": {}}')
    link = home / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    assert run(home, "cursor", "--write").returncode == 0
    assert link.is_symlink()  # the dotfile link is kept; its target gets the entry
    assert json.loads(dotfiles.read_text())["mcpServers"]["ltm"]["command"] == LTM

    chosen = tmp_path / "project" / ".cursor" / "mcp.json"
    assert run(home, "cursor", "--write", "--file", str(chosen)).returncode == 0
    assert json.loads(chosen.read_text())["mcpServers"]["ltm"]["args"] == ["mcp"]


def test_write_keeps_the_mode_of_an_empty_file(home: Path) -> None:
    """An existing file keeps its mode even when it is empty (it became 0644)."""
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.touch(mode=0o600)
    path.chmod(0o600)
    assert run(home, "cursor", "--write").returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["mcpServers"]["ltm"]["args"] == ["mcp"]


def test_a_write_that_cannot_reach_the_disk_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new text reaches the disk before it takes the file's name: when it cannot (the
    disk fails the flush), the old file is still there, whole, and no temporary is left."""
    from ltm.cli.agents.mcp.install import save_config
    from ltm.cli.errors import CliError

    path = tmp_path / "settings.json"
    path.write_text('{"model": "opus"}\n')

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(CliError, match="Input/output error"):
        save_config(path, path, '{"model": "opus", "hooks": {}}\n')
    assert path.read_text() == '{"model": "opus"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


# --------------------------------------------------------------------------
# The merge itself

ENTRY = {"command": "/opt/ltm", "args": ["mcp"]}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  \n",
        "{}",
        "{ }",
        '{"a": 1}',
        '{\n\t"a": {\n\t\t"b": [1, 2]\n\t}\n}\n',
        '{"mcpServers": {}}',
        '{"mcpServers": {"x": {"command": "y"}}, "z": null}',
        '{"mcpServers": 1, "mcpServers": {"x": {}}}',  # duplicate key: the last one counts
        '// c\n{ /* d */ "a": [1,], }',
    ],
)
def test_merge_changes_exactly_one_entry(text: str) -> None:
    before = parse_jsonc(text).value if text.strip() else {}
    new, what = merge(text, ("mcpServers",), "ltm", ENTRY)
    assert what == "added"
    after = parse_jsonc(new).value
    expected = {**before, "mcpServers": {**before.get("mcpServers", {}), "ltm": ENTRY}}
    assert after == expected
    assert merge(new, ("mcpServers",), "ltm", ENTRY) == (new, "unchanged")


def test_merge_refusals() -> None:
    with pytest.raises(JsoncError, match="line 2, column 1"):
        merge('{"a": 1,\n]', ("mcpServers",), "ltm", ENTRY)
    with pytest.raises(JsoncError, match="unterminated"):
        merge('{"a": 1 /* never closed', ("mcpServers",), "ltm", ENTRY)
    with pytest.raises(MergeError):
        merge('"just a string"', ("mcpServers",), "ltm", ENTRY)
    with pytest.raises(JsoncError, match="nested too deeply"):
        parse_jsonc("[" * 500 + "]" * 500)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values, st.sampled_from([None, 2, 4, "\t"]))
def test_parser_agrees_with_json(value: Any, indent: Any) -> None:
    text = json.dumps(value, indent=indent)
    assert parse_jsonc(text).value == json.loads(text)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5), st.sampled_from([None, 2]))
def test_merge_keeps_everything_else(doc: dict[str, Any], indent: Any) -> None:
    text = json.dumps(doc, indent=indent)
    try:
        new, _ = merge(text, ("mcpServers",), "ltm", ENTRY)
    except MergeError:
        assert not isinstance(doc.get("mcpServers"), dict)
        return
    after = json.loads(new)  # still strict JSON when it was
    assert after["mcpServers"]["ltm"] == ENTRY
    assert {k: v for k, v in after.items() if k != "mcpServers"} == {
        k: v for k, v in doc.items() if k != "mcpServers"
    }
    others = {k: v for k, v in after["mcpServers"].items() if k != "ltm"}
    assert others == {k: v for k, v in doc.get("mcpServers", {}).items() if k != "ltm"}


# --------------------------------------------------------------------------
# The harnesses that had hooks but no tools: Codex (TOML), Gemini CLI, Copilot CLI

CODEX_CONFIG = """# my codex settings
model = "gpt-5-codex"

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[mcp_servers.ltm]
command = "/old/ltm"
args = ["mcp"]

[mcp_servers.ltm.env]
LTM_DATA_DIR = "/old/data"

[profiles.fast]
model = "o4-mini"
"""


def test_codex_toml_is_merged_keeping_everything_else(home: Path) -> None:
    import tomllib

    printed = run(home, "codex")
    assert printed.returncode == 0, printed.stderr
    entry = tomllib.loads(printed.stdout)["mcp_servers"]["ltm"]
    assert entry["command"] == LTM and entry["args"] == ["mcp"]
    assert entry["env"]["LTM_DATA_DIR"] == str(home.parent / "data")
    path = home / ".codex" / "config.toml"
    assert str(path) in printed.stderr and not path.exists()

    path.parent.mkdir()
    path.write_text(CODEX_CONFIG)
    result = run(home, "codex", "--write")
    assert result.returncode == 0, result.stderr
    assert "updated the 'ltm' server" in result.stderr
    doc = tomllib.loads(path.read_text())
    before = tomllib.loads(CODEX_CONFIG)
    assert doc["mcp_servers"]["ltm"] == entry  # the old env table is gone with the entry
    assert doc["mcp_servers"]["github"] == before["mcp_servers"]["github"]
    assert doc["profiles"] == before["profiles"] and doc["model"] == "gpt-5-codex"
    assert path.read_text().startswith("# my codex settings\n")
    same = path.read_bytes()
    assert "nothing changed" in run(home, "codex", "--write").stderr
    assert path.read_bytes() == same

    moved = home.parent / "codex-home"
    result = run(home, "codex", "--write", CODEX_HOME=str(moved))
    assert result.returncode == 0 and (moved / "config.toml").exists()


def test_codex_toml_keeps_the_comments_above_the_table_after_ltms(home: Path) -> None:
    """Replacing ltm's tables keeps the user's comment that heads the next table (it went
    with ltm's entry, as if it were part of it), and one at the end of the file."""
    import tomllib

    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    note = "# profiles: fast is for quick questions\n"
    text = CODEX_CONFIG.replace("[profiles.fast]\n", note + "[profiles.fast]\n")
    path.write_text(text + "# end of my settings\n")
    assert run(home, "codex", "--write").returncode == 0
    written = path.read_text()
    assert note + "[profiles.fast]\n" in written and "# end of my settings\n" in written
    assert "\n\n\n" not in written  # the dropped table leaves one blank line, not two
    assert tomllib.loads(written)["mcp_servers"]["ltm"]["command"] == LTM


@pytest.mark.parametrize(
    "content",
    ['model = "x"\n[mcp_servers\n', 'mcp_servers = { ltm = { command = "x" } }\n'],
)
def test_codex_toml_it_cannot_edit_is_left_alone(home: Path, content: str) -> None:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(content)
    result = run(home, "codex", "--write")
    assert result.returncode == 1
    assert "nothing was written" in result.stderr
    assert path.read_text() == content


def test_gemini_and_copilot_entries(home: Path) -> None:
    gemini = home / ".gemini" / "settings.json"
    gemini.parent.mkdir()
    gemini.write_text('{\n  // mine\n  "theme": "GitHub",\n  "hooks": {}\n}\n')
    assert run(home, "gemini", "--write").returncode == 0
    text = gemini.read_text()
    assert "// mine" in text
    doc = parse_jsonc(text).value
    assert doc["theme"] == "GitHub" and doc["mcpServers"]["ltm"]["command"] == LTM

    assert run(home, "copilot", "--write").returncode == 0
    entry = json.loads((home / ".copilot" / "mcp-config.json").read_text())["mcpServers"]["ltm"]
    assert entry["type"] == "local" and entry["tools"] == ["*"]
    assert entry["command"] == LTM and entry["args"] == ["mcp"]

    remote = json.loads(run(home, "gemini", "--remote", "https://ltm.example.org").stdout)
    assert remote == {"mcpServers": {"ltm": {"httpUrl": "https://ltm.example.org/mcp"}}}
    remote = json.loads(run(home, "copilot", "--remote", "https://ltm.example.org").stdout)
    assert remote["mcpServers"]["ltm"]["type"] == "http"
