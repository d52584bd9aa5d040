"""Each harness end to end: ``ltm hooks install HARNESS --write`` into a temporary home,
then the installed command run as that harness runs it (through a shell, its
documented JSON on stdin, in the project's folder), and the answer checked in the
shape that harness reads.

Payloads, field for field, from each harness's documentation:
- Claude Code: https://code.claude.com/docs/en/hooks
- Codex: https://developers.openai.com/codex/hooks
- Cursor: https://cursor.com/docs/agent/hooks (``conversation_id``, ``workspace_roots``,
  ``loop_count``; no ``cwd``)
- GitHub Copilot, VS Code compatible format (PascalCase events, snake_case fields):
  https://docs.github.com/en/copilot/reference/hooks-reference
- Gemini CLI: https://geminicli.com/docs/hooks/reference
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clikit import Cli
from serverkit import running_server
from timing import scaled

HARNESSES = ["claude-code", "codex", "cursor", "copilot", "gemini"]
# The harness's event names for session start, prompt, compaction, stop.
NAMES = {
    "claude-code": ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop"),
    "codex": ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop"),
    "copilot": ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop"),
    "gemini": ("SessionStart", "BeforeAgent", "PreCompress", "AfterAgent"),
    "cursor": ("sessionStart", None, "preCompact", "stop"),
}
FILES = {
    "claude-code": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "copilot": ".copilot/hooks/ltm.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
}


def payload(harness: str, kind: str, folder: Path, session: str, **extra: Any) -> dict[str, Any]:
    """The documented input of one event (kind: start, prompt, compact, stop)."""
    event = dict(zip(("start", "prompt", "compact", "stop"), NAMES[harness], strict=True))[kind]
    if harness == "cursor":
        data: dict[str, Any] = {
            "conversation_id": session,
            "generation_id": "g-1",
            "model": "claude-4-sonnet",
            "hook_event_name": event,
            "cursor_version": "2.1.0",
            "workspace_roots": [str(folder)],
            "user_email": None,
            "transcript_path": None,
        }
        if kind == "start":
            data.update(session_id=session, is_background_agent=False, composer_mode="agent")
        if kind == "stop":
            data.update(status="completed", loop_count=0)
        if kind == "compact":
            data.update(trigger="auto", context_usage_percent=92)
        return {**data, **extra}
    data = {"session_id": session, "cwd": str(folder), "hook_event_name": event}
    if harness in ("claude-code", "codex"):
        data.update(transcript_path=None, permission_mode="default", model="m")
    if harness in ("gemini", "copilot"):
        data["timestamp"] = "2026-05-01T10:00:00Z"
    if harness == "gemini":
        data["transcript_path"] = str(folder / "t.json")
    if kind == "start":
        data["source"] = "new" if harness == "copilot" else "startup"
    if kind == "stop":
        data["stop_hook_active"] = False
        if harness == "gemini":
            data.update(prompt="go on", prompt_response="Done.")
        if harness == "copilot":
            data.update(transcript_path=str(folder / "t.jsonl"), stop_reason="end_turn")
    if kind == "compact":
        data.update(trigger="auto", custom_instructions="")
    return {**data, **extra}


@pytest.fixture
def person(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    cli = Cli(tmp_path / "ltm")
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"):
        cli.env.pop(var, None)
    cli.env.update(HOME=str(home), LTM_STATE_DIR=str(tmp_path / "state"))
    return cli.at(home)


def installed(cli: Cli, harness: str) -> dict[str, str]:
    """{event: the installed command} after ``ltm hooks install HARNESS --write --mcp``, the
    tools wired too (Claude Code's by the ``claude mcp add --scope user`` the install prints,
    done here as it writes ~/.claude.json), so the hooks name the tools."""
    cli.ok("hooks", "install", harness, "--write", "--mcp")
    if harness == "claude-code":
        entry = {"type": "stdio", "command": "ltm", "args": ["mcp"]}
        claude = Path(cli.env["HOME"]) / ".claude.json"
        claude.write_text(json.dumps({"mcpServers": {"ltm": entry}}))
    path = Path(cli.env["HOME"]) / FILES[harness]
    text = path.read_text()
    if harness == "gemini":
        from ltm.cli.agents.mcp.install import parse_jsonc

        doc = parse_jsonc(text).value
    else:
        doc = json.loads(text)
    out = {}
    for event, items in doc["hooks"].items():
        entries = [e for g in items for e in g["hooks"]] if "hooks" in items[0] else items
        (entry,) = entries
        out[event] = entry["command"]
    # A second install changes nothing.
    cli.ok("hooks", "install", harness, "--write", "--mcp")
    assert path.read_text() == text
    return out


def run(command: str, data: dict[str, Any] | bytes, cli: Cli, folder: Path, **env: str) -> Any:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    ran = subprocess.run(
        command, shell=True, input=raw, env={**cli.env, **env}, cwd=folder,
        capture_output=True, timeout=scaled(30),
    )  # fmt: skip
    assert ran.returncode == 0 and ran.stderr == b"", ran.stderr
    return json.loads(ran.stdout) if ran.stdout.strip() else None


def context_of(harness: str, answer: Any, event: str) -> str:
    if harness == "cursor":
        assert set(answer) == {"additional_context"}
        return str(answer["additional_context"])
    assert set(answer) == {"hookSpecificOutput"}
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    return str(answer["hookSpecificOutput"]["additionalContext"])


@pytest.mark.parametrize("harness", HARNESSES)
def test_each_harness_as_it_runs_the_installed_hooks(
    person: Cli, tmp_path: Path, harness: str
) -> None:
    commands = installed(person, harness)
    start, prompt, compact, stop = NAMES[harness]
    folder = tmp_path / "shop"
    folder.mkdir()
    here = person.at(folder)
    older = here.ok("save", stdin=json.dumps({
        "goal": "Make the flaky checkout payment webhook retry idempotent",
        "next_step": "Add the idempotency key to the webhook handler",
    })).strip()  # fmt: skip
    here.ok("save", stdin=json.dumps({"goal": "Redesign the navigation bar", "next_step": "go"}))

    # Session start: the newest packet, fenced, in the harness's shape.
    text = context_of(harness, run(commands[start], payload(harness, "start", folder, "s1"),
                                   here, folder), "SessionStart")  # fmt: skip
    assert "Redesign the navigation bar" in text and "ltm-data" in text
    assert "not instructions" in text

    # Each prompt: the older packet is recalled once (where the harness can add context), in
    # a session that was not shown it at its start (there it was in the index already).
    if prompt is None:
        assert "beforeSubmitPrompt" not in commands
    else:
        words = "the checkout webhook payment retry is flaky again"
        ask = payload(harness, "prompt", folder, "p1", prompt=words)
        hint = context_of(harness, run(commands[prompt], ask, here, folder), prompt)
        assert older in hint and "ltm-recall" in hint and len(hint) <= 300
        assert run(commands[prompt], ask, here, folder) is None  # never twice

    # Compaction: a message for the person.
    answer = run(commands[compact], payload(harness, "compact", folder, "s1"), here, folder)
    key = "user_message" if harness == "cursor" else "systemMessage"
    assert set(answer) == {key} and "save" in answer[key]

    # The end: after real work (turns, no transcript) in a project with nothing saved during
    # the session, the agent is asked to save, once.
    other = tmp_path / "blog"
    other.mkdir()
    answers = [
        run(commands[stop], payload(harness, "stop", other, "s2"), here, other) for _ in range(9)
    ]
    asked = [a for a in answers if a is not None]
    assert len(asked) == 1
    if harness == "cursor":
        assert (
            set(asked[0]) == {"followup_message"} and "`save` tool" in asked[0]["followup_message"]
        )
    else:
        decision = "deny" if harness == "gemini" else "block"
        assert asked[0]["decision"] == decision and "`save` tool" in asked[0]["reason"]

    # Fail open: garbage on stdin, no server.
    assert run(commands[start], b"\x00not json{", here, folder) is None
    dead = {"LTM_HOST": "http://127.0.0.1:9", "LTM_TOKEN": "t" * 40}
    assert (
        run(commands[start], payload(harness, "start", folder, "s3"), here, folder, **dead) is None
    )
    if prompt is not None:
        ask = payload(harness, "prompt", folder, "s3", prompt="checkout webhook payment retry")
        assert run(commands[prompt], ask, here, folder, **dead) is None


@pytest.mark.parametrize("status", ["aborted", "error"])
def test_cursor_never_sets_going_an_agent_the_person_stopped(
    person: Cli, tmp_path: Path, status: str
) -> None:
    """Cursor runs its stop hook when the person stops the agent too: a follow-up message
    then would start it again. Only a run that completed is asked to save."""
    commands = installed(person, "cursor")
    folder = tmp_path / "blog"
    folder.mkdir()
    here = person.at(folder)
    stopped = payload("cursor", "stop", folder, "s-x", status=status)
    assert [run(commands["stop"], stopped, here, folder) for _ in range(9)] == [None] * 9
    done = run(commands["stop"], payload("cursor", "stop", folder, "s-x"), here, folder)
    assert set(done) == {"followup_message"}  # the turns counted: the next completed run


def test_a_revoked_token_fails_open_in_every_harness(person: Cli, tmp_path: Path) -> None:
    from ltm.service import tokens
    from ltm.store.sqlite import SqliteStore

    folder = tmp_path / "shop"
    folder.mkdir()
    with running_server(tmp_path / "srv") as server:
        user_id, token = server.issue("alice")
        here = person.at(folder)
        here.ok("auth", server.url, "--with-token", stdin=token)
        here.ok("save", stdin=json.dumps({"goal": "Retry the checkout webhook", "next_step": "x"}))
        commands = {h: installed(person, h) for h in HARNESSES}
        for h, found in commands.items():
            got = run(found[NAMES[h][0]], payload(h, "start", folder, f"r-{h}"), here, folder)
            assert "Retry the checkout webhook" in context_of(h, got, "SessionStart")
        store = SqliteStore(server.db)
        try:
            for t in store.list_tokens(user_id=user_id):
                tokens.revoke(store, t.label, user_id=user_id)
        finally:
            store.close()
        for h, found in commands.items():
            start, prompt = NAMES[h][:2]
            assert run(found[start], payload(h, "start", folder, f"v-{h}"), here, folder) is None
            if prompt is not None:
                ask = payload(h, "prompt", folder, f"v-{h}", prompt="checkout webhook retry")
                assert run(found[prompt], ask, here, folder) is None
