"""ltm doctor: each check passing and failing, the real ``ltm`` against a real server.

Each person is a home of their own (HOME, config and data dirs) and runs in a
project directory of their own, so the harness files the doctor reads are the
test's. Failing servers are played by small stdlib servers (clikit); ours is
the real ``ltm server run``.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from clikit import LTM, Cli, Seen, free_port, json_reply, signed_in, silent_server, stub_server
from serverkit import Server, running_server
from timing import SCALE, scaled

BUDGET_MS = 2000  # the most one check may take (scaled on a loaded machine: tests/timing.py)
# The process's own start (a few hundred ms on a loaded machine) is not part of a check.


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("doctor")) as srv:
        yield srv


def person(home: Path, cli: Cli | None = None) -> Cli:
    cli = cli or Cli(home)
    cli.env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg"))
    (home / "project").mkdir(parents=True, exist_ok=True)
    return cli


def doctor(cli: Cli, *args: str, code: int | None = None, **env: str) -> dict[str, Any]:
    result = cli.run("doctor", "--json", *args, cwd=cli.home / "project", **env)
    report = json.loads(result.stdout)
    assert result.returncode == (0 if report["ok"] else 1), result.stderr
    if code is not None:
        assert result.returncode == code, result.stdout
    for check in report["checks"]:
        assert check["elapsed_ms"] <= scaled(BUDGET_MS), check
    return report


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def test_all_good_against_a_live_server(server: Server, tmp_path: Path) -> None:
    cli = person(tmp_path, signed_in(server, tmp_path, "olive"))
    cli.ok("save", "-", "--local", stdin=cli.ok("example"))
    cli.run("mcp", "install", "cursor", "--write", cwd=tmp_path / "project")
    report = doctor(cli, code=0)
    checks = by_name(report)
    assert checks["config"]["status"] == "ok"
    assert "credentials" in checks["config"]["detail"]
    assert checks["server"]["status"] == "ok" and "protocol 0.2" in checks["server"]["detail"]
    assert checks["token"]["status"] == "ok"
    assert "label" in checks["token"]["detail"] and "scope" in checks["token"]["detail"]
    assert checks["clock"]["status"] == "ok"
    assert (
        checks["store"]["status"] == "ok" and "intact, schema version" in checks["store"]["detail"]
    )
    assert checks["mcp cursor"]["status"] == "ok", checks["mcp cursor"]
    assert checks["mcp zed"]["status"] == "skip"
    assert checks["hooks claude-code"]["status"] == "skip"

    text = cli.run("doctor", cwd=tmp_path / "project")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert len(lines) == len(report["checks"])
    assert lines[1].startswith("ok    server")


def test_a_server_that_is_down_fails_fast(tmp_path: Path) -> None:
    cli = person(tmp_path)
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    checks = by_name(doctor(cli, code=1, LTM_HOST=url, LTM_TOKEN="t" * 40))
    assert checks["server"]["status"] == "fail"
    assert "connection refused" in checks["server"]["detail"]
    assert "--local" in checks["server"]["fix"]
    assert checks["token"]["status"] == checks["clock"]["status"] == "skip"

    with silent_server() as silent:  # accepts, never answers: the timeout must cut it short
        checks = by_name(doctor(cli, code=1, LTM_HOST=silent, LTM_TOKEN="t" * 40))
    assert checks["server"]["status"] == "fail"
    # 1.5 s a request, stretched as the tests' budgets are (LTM_TIME_SCALE, tests/clikit.py)
    assert f"did not answer within {1.5 * SCALE:g} s" in checks["server"]["detail"]
    # the doctor waits its own time: raising the commands' timeout changes nothing here
    assert "timeout" not in checks["server"]["detail"] + checks["server"]["fix"]


def test_a_bad_ltm_host_or_ltm_token_is_fixed_in_the_environment(
    server: Server, tmp_path: Path
) -> None:
    cli = person(tmp_path, signed_in(server, tmp_path, "eve"))
    bad = by_name(doctor(cli, code=1, LTM_HOST="http://u:hunter2@127.0.0.1:9/?t=s3cr3t"))["server"]
    assert "LTM_HOST" in bad["fix"] and "config set" not in bad["fix"]
    # the URL is named as it would be taken: its password and query are no one's to read
    assert "'http://127.0.0.1:9'" in bad["detail"]
    assert "hunter2" not in json.dumps(bad) and "s3cr3t" not in json.dumps(bad)
    # the configured server is fine: unsetting LTM_HOST, as the fix says, passes
    assert by_name(doctor(cli, code=0))["server"]["status"] == "ok"
    bad = by_name(doctor(cli, code=1, LTM_TOKEN="not a token\n"))["server"]
    assert "LTM_TOKEN" in bad["fix"] and "config set" not in bad["fix"]


def test_a_rejected_token(server: Server, tmp_path: Path) -> None:
    cli = person(tmp_path)
    checks = by_name(doctor(cli, code=1, LTM_HOST=server.url, LTM_TOKEN="not-a-real-token-at-all"))
    assert checks["server"]["status"] == "ok"
    assert checks["token"]["status"] == "fail"
    assert "rejects the token (from LTM_TOKEN)" in checks["token"]["detail"]
    assert checks["token"]["fix"] == f"sign in again: ltm auth {server.url}"


def _fake_server(version: str, clock: datetime) -> Any:
    def answer(request: Seen) -> tuple[int, dict[str, str], bytes]:
        status, headers, body = (
            json_reply(200, {"ok": True, "version": version})
            if request.path.startswith("/v1/healthz")
            else json_reply(200, {"packets": []})
        )
        return status, {**headers, "Date": format_datetime(clock, usegmt=True)}, body

    return stub_server(answer)


def test_a_server_speaking_another_protocol_version(tmp_path: Path) -> None:
    cli = person(tmp_path)
    with _fake_server("9.9", datetime.now(UTC)) as stub:
        checks = by_name(doctor(cli, code=1, LTM_HOST=stub.url, LTM_TOKEN="t" * 40))
    assert checks["server"]["status"] == "fail"
    assert "speaks protocol '9.9'; this ltm speaks '0.2'" in checks["server"]["detail"]


def test_a_server_owing_its_repairs_after_an_upgrade_is_a_warning(tmp_path: Path) -> None:
    """A DynamoDB server whose operator skipped the repairs an upgrade needs says so in
    healthz; search there misses older packets, which a user would otherwise take for
    packets lost. The names are repeated only when plain words: the rest is the server's."""
    cli = person(tmp_path)
    owed = ["index", "usage", "\x1b]8;;evil\x1b\\x"]

    def answer(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply(200, {"ok": True, "version": "0.2", "repairs_owed": owed})

    with stub_server(answer) as stub:
        server = by_name(doctor(cli, LTM_HOST=stub.url, LTM_TOKEN="t" * 40))["server"]
    assert server["status"] == "warn", server
    assert "not repaired after an upgrade" in server["detail"]
    assert server["fix"] == (
        "the server's operator runs: python -m ltm.store.dynamo_repair index and"
        " python -m ltm.store.dynamo_repair usage (docs/deploy-aws.md)"
    )
    owed.clear()  # repaired: nothing to say
    with stub_server(answer) as stub:
        assert (
            by_name(doctor(cli, LTM_HOST=stub.url, LTM_TOKEN="t" * 40))["server"]["status"] == "ok"
        )


def test_a_server_over_plain_http_beyond_this_machine_is_a_warning(tmp_path: Path) -> None:
    """`ltm auth` warns once that the token travels unencrypted; the doctor says so on
    every run, as long as it is so (the server is reached through a proxy here, under a
    name that is not loopback's)."""
    cli = person(tmp_path)
    host = "http://ltm.example.test:8080"

    def answer(request: Seen) -> tuple[int, dict[str, str], bytes]:
        assert request.path.startswith(host)  # a proxy gets the absolute URL
        return json_reply(200, {"ok": True, "version": "0.2"})

    with stub_server(answer) as proxy:
        report = doctor(cli, LTM_HOST=host, LTM_TOKEN="t" * 40, HTTP_PROXY=proxy.url)
    server = by_name(report)["server"]
    assert server["status"] == "warn", server
    assert "plain HTTP" in server["detail"] and "https://" in server["fix"]

    with _fake_server("0.2", datetime.now(UTC)) as stub:  # loopback: plain HTTP is fine
        report = doctor(cli, LTM_HOST=stub.url, LTM_TOKEN="t" * 40)
    assert by_name(report)["server"]["status"] == "ok"


@pytest.mark.parametrize(("offset", "status"), [(0, "ok"), (90, "warn"), (-900, "fail")])
def test_clock_skew_against_the_servers_date(tmp_path: Path, offset: int, status: str) -> None:
    cli = person(tmp_path)
    with _fake_server("0.2", datetime.now(UTC) + timedelta(seconds=offset)) as stub:
        report = doctor(cli, LTM_HOST=stub.url, LTM_TOKEN="t" * 40)
    clock = by_name(report)["clock"]
    assert clock["status"] == status, clock
    if offset:
        assert ("behind" if offset > 0 else "ahead of") in clock["detail"]
        assert "NTP" in clock["fix"]
    assert report["ok"] is (status != "fail")


def test_token_files_others_can_read(server: Server, tmp_path: Path) -> None:
    cli = person(tmp_path, signed_in(server, tmp_path, "pat"))
    credentials = cli.config / "credentials"
    credentials.chmod(0o644)
    config = by_name(doctor(cli, code=1))["config"]
    assert config["status"] == "fail"
    assert f"{credentials} is mode 644, not 600" in config["detail"]
    assert f"chmod 600 {credentials}" in config["fix"]
    credentials.chmod(0o600)
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert by_name(doctor(cli, code=0))["config"]["status"] == "ok"


def shell(command: str, cli: Cli | None = None) -> None:
    """Run a fix as the user pastes it: one line for their shell (with ``cli``'s
    environment and its ``ltm`` on PATH, where the fix runs ltm)."""
    env = None
    if cli is not None:
        env = {**cli.env, "PATH": f"{Path(LTM).parent}{os.pathsep}{cli.env['PATH']}"}
    subprocess.run(["sh", "-c", command], check=True, env=env, timeout=scaled(30))


def test_the_fixes_doctor_prints_work_pasted_under_a_folder_with_a_space(
    server: Server, tmp_path: Path
) -> None:
    home = tmp_path / "my home"
    cli = person(home, signed_in(server, home, "sam"))
    saved = cli.ok("save", "-", "--local", stdin=cli.ok("example")).strip()
    bundle = home / "my backup.jsonl"
    cli.ok("export", "--local", "-o", str(bundle))
    data = Path(cli.env["LTM_DATA_DIR"])
    cli.config.chmod(0o755)
    (cli.config / "credentials").chmod(0o644)
    data.chmod(0o755)
    (data / "ltm.db").chmod(0o644)
    checks = by_name(doctor(cli, code=1))
    shell(checks["config"]["fix"])
    shell(checks["private"]["fix"])  # the whole fix, pasted as it is
    checks = by_name(doctor(cli, code=0))
    assert checks["config"]["status"] == checks["private"]["status"] == "ok"

    db = data / "ltm.db"
    db.write_bytes(b"not a database at all" * 200)
    Path(f"{db}-wal").write_bytes(b"its journal")  # goes with it: the latest changes
    fix = by_name(doctor(cli, code=1))["store"]["fix"]
    shell(fix.split("(", 1)[1].split(")", 1)[0])  # move it aside (mv ...)
    assert Path(f"{db}.broken").exists()
    assert Path(f"{db}.broken-wal").read_bytes() == b"its journal"
    assert not Path(f"{db}-wal").exists()
    # then restore from a bundle: signed in, into the local store all the same
    restore = fix.split("from a bundle: ", 1)[1].replace("BACKUP.jsonl", shlex.quote(str(bundle)))
    shell(restore, cli)
    assert saved[:12] in cli.ok("ls", "--local")  # the id as ls shows it
    assert by_name(doctor(cli, code=0))["store"]["status"] == "ok"


def test_a_damaged_local_store(tmp_path: Path) -> None:
    cli = person(tmp_path)
    cli.ok("save", "-", "--local", stdin=cli.ok("example"))
    db = Path(cli.env["LTM_DATA_DIR"]) / "ltm.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with db.open("r+b") as handle:  # keep the header, wreck the pages after it
        handle.seek(4096)
        handle.write(b"\xff" * 8192)
    store = by_name(doctor(cli, code=1))["store"]
    assert store["status"] == "fail" and "damaged" in store["detail"]
    assert "ltm import" in store["fix"]

    db.write_bytes(b"not a database at all" * 200)
    store = by_name(doctor(cli, code=1))["store"]
    assert store["status"] == "fail" and "damaged" in store["detail"]


def test_a_store_another_program_holds_is_not_called_damaged(tmp_path: Path) -> None:
    cli = person(tmp_path)
    cli.ok("save", "-", "--local", stdin=cli.ok("example"))
    db = Path(cli.env["LTM_DATA_DIR"]) / "ltm.db"
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        store = by_name(doctor(cli, code=1))["store"]
        assert store["status"] == "fail" and "locked" in store["detail"]
        assert "mv " not in store["fix"] and "ltm import" not in store["fix"]
    finally:
        holder.close()  # what the fix says: the program that holds it lets go
    assert by_name(doctor(cli, code=0))["store"]["status"] == "ok"


def test_a_data_folder_that_is_a_file(tmp_path: Path) -> None:
    cli = person(tmp_path)
    data = Path(cli.env["LTM_DATA_DIR"])
    data.write_text("not a folder")
    data.chmod(0o644)
    checks = by_name(doctor(cli, code=1))
    assert checks["store"]["status"] == "fail" and "not a folder" in checks["store"]["detail"]
    assert checks["private"]["status"] == "ok"  # no chmod mends a file in a folder's place
    shell(checks["store"]["fix"].split("(", 1)[1].split(")", 1)[0])  # move it aside (mv ...)
    cli.ok("save", "-", "--local", stdin=cli.ok("example"))
    assert by_name(doctor(cli, code=0))["store"]["status"] == "ok"


def test_a_store_from_a_newer_ltm(tmp_path: Path) -> None:
    cli = person(tmp_path)
    cli.ok("save", "-", "--local", stdin=cli.ok("example"))
    db = Path(cli.env["LTM_DATA_DIR"]) / "ltm.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    store = by_name(doctor(cli, code=1))["store"]
    assert store["status"] == "fail"
    assert "schema version 99" in store["detail"] and "upgrade ltm" in store["fix"]


def test_mcp_entries_that_run_a_missing_or_other_ltm(tmp_path: Path) -> None:
    cli = person(tmp_path)
    project = tmp_path / "project"
    # The project's .mcp.json runs PATH's ltm: this one, once it is on PATH.
    cli.env["PATH"] = f"{Path(LTM).parent}{os.pathsep}{cli.env.get('PATH', '')}"
    cli.ok("mcp", "install", "claude-code", "--write", cwd=project)
    assert by_name(doctor(cli))["mcp claude-code"]["status"] == "ok"
    config = project / ".mcp.json"
    doc = json.loads(config.read_text())
    assert doc["mcpServers"]["ltm"]["command"] == "ltm"
    cli.env["PATH"] = str(tmp_path / "empty")
    gone = by_name(doctor(cli, code=1))["mcp claude-code"]
    assert gone["status"] == "fail" and "there is none on PATH here" in gone["detail"]
    # ltm mcp install would write the same bare name again: the fix is PATH
    assert gone["fix"].startswith("put ltm on PATH")
    doc["mcpServers"]["ltm"]["command"] = str(tmp_path / "old-venv" / "bin" / "ltm")
    config.write_text(json.dumps(doc))
    check = by_name(doctor(cli, code=1))["mcp claude-code"]
    assert check["status"] == "fail" and "which is gone" in check["detail"]
    assert check["fix"] == "ltm mcp install claude-code --write"

    other = tmp_path / "other" / "ltm"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    doc["mcpServers"]["ltm"]["command"] = str(other)
    config.write_text(json.dumps(doc))
    assert by_name(doctor(cli, code=0))["mcp claude-code"]["status"] == "warn"

    config.write_text("{ not json")
    assert by_name(doctor(cli, code=1))["mcp claude-code"]["status"] == "fail"


def hooks_person(tmp_path: Path) -> Cli:
    cli = person(tmp_path)
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"):
        cli.env.pop(var, None)
    return cli


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_hooks_that_ltm_installed(tmp_path: Path, harness: str) -> None:
    cli = hooks_person(tmp_path)
    assert by_name(doctor(cli, code=0))[f"hooks {harness}"]["status"] == "skip"
    # ltm writes "LTM_CONFIG_DIR=... LTM_DATA_DIR=... /path/to/ltm hook EVENT" (this test's
    # dirs): the program is found past the variables
    cli.ok("hooks", "install", harness, "--write")
    folder = ".claude" if harness == "claude-code" else ".codex"
    path = tmp_path / folder / ("settings.json" if harness == "claude-code" else "hooks.json")
    assert "LTM_CONFIG_DIR=" in path.read_text()
    check = by_name(doctor(cli, code=0))[f"hooks {harness}"]
    assert check == {
        **check,
        "status": "ok",
        "detail": f"{path}: SessionStart, PreCompact, Stop, UserPromptSubmit run this ltm",
    }

    doc = json.loads(path.read_text())
    del doc["hooks"]["Stop"]
    path.write_text(json.dumps(doc))
    check = by_name(doctor(cli, code=0))[f"hooks {harness}"]
    assert check["status"] == "warn" and "no ltm hook for Stop" in check["detail"]
    assert check["fix"] == f"ltm hooks install {harness} --write"

    gone = tmp_path / "gone" / "ltm"
    text = path.read_text().replace(LTM, str(gone))
    path.write_text(text)
    check = by_name(doctor(cli, code=1))[f"hooks {harness}"]
    assert check["status"] == "fail"
    assert check["detail"] == f"{path}: SessionStart runs {gone}, which is gone"

    path.write_text("{ not json")
    assert by_name(doctor(cli, code=1))[f"hooks {harness}"]["status"] == "fail"


def test_project_hooks_and_the_local_settings(tmp_path: Path) -> None:
    cli = hooks_person(tmp_path)
    project = tmp_path / "project"
    cli.run("hooks", "install", "claude-code", "--project", "--write", cwd=project)
    local = project / ".claude" / "settings.local.json"
    local.write_text((project / ".claude" / "settings.json").read_text())
    (project / ".claude" / "settings.json").unlink()
    # A project's hooks run the ltm on PATH, as a teammate's harness finds it.
    cli.env["PATH"] = f"{Path(LTM).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    checks = by_name(doctor(cli, code=0))
    assert checks["hooks claude-code local"]["status"] == "ok"
    assert "hooks claude-code" not in checks  # the user's file holds none: no line for it

    doc = json.loads(local.read_text())
    del doc["hooks"]["SessionStart"]
    local.write_text(json.dumps(doc))
    check = by_name(doctor(cli, code=0))["hooks claude-code local"]
    assert check["status"] == "warn" and "nothing is resumed" in check["detail"]
    assert check["fix"] == "ltm hooks install claude-code --write --project"


def test_claude_config_dir_is_where_claude_code_reads(tmp_path: Path) -> None:
    cli = hooks_person(tmp_path)
    moved = tmp_path / "claude-elsewhere"
    cli.env["CLAUDE_CONFIG_DIR"] = str(moved)
    cli.ok("hooks", "install", "claude-code", "--write")
    check = by_name(doctor(cli, code=0))["hooks claude-code"]
    assert check["status"] == "ok" and str(moved / "settings.json") in check["detail"]


def test_codex_hooks_turned_off(tmp_path: Path) -> None:
    cli = hooks_person(tmp_path)
    cli.ok("hooks", "install", "codex", "--write")
    config = tmp_path / ".codex" / "config.toml"
    assert "codex_hooks = true" in config.read_text()
    assert "hooks codex flag" not in by_name(doctor(cli, code=0))
    for off in ("[features]\nhooks = false\n", "[features]\ncodex_hooks = false\n"):
        config.write_text(off)
        check = by_name(doctor(cli, code=1))["hooks codex flag"]
        assert check["detail"] == (
            f"{config} turns Codex's hooks off ([features] hooks = false): ltm's never run"
        )
    config.unlink()  # hooks are on by default in Codex
    assert "hooks codex flag" not in by_name(doctor(cli, code=0))
    config.write_text("[features\n")
    check = by_name(doctor(cli, code=1))["hooks codex flag"]
    assert check["status"] == "fail" and "not valid TOML" in check["detail"]


def test_unrelated_hooks_are_not_ltm_s(tmp_path: Path) -> None:
    cli = hooks_person(tmp_path)
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    group = {"matcher": "", "hooks": [{"type": "command", "command": "echo unrelated"}]}
    settings.write_text(json.dumps({"hooks": {"SessionStart": [group]}}))
    assert by_name(doctor(cli, code=0))["hooks claude-code"]["status"] == "skip"


@pytest.mark.parametrize(
    ("harness", "file", "events"),
    [
        ("cursor", ".cursor/hooks.json", "sessionStart, preCompact, stop"),
        ("copilot", ".copilot/hooks/ltm.json", "SessionStart, PreCompact, Stop, UserPromptSubmit"),
        ("gemini", ".gemini/settings.json", "SessionStart, PreCompress, AfterAgent, BeforeAgent"),
    ],
)
def test_the_other_harnesses_hooks(tmp_path: Path, harness: str, file: str, events: str) -> None:
    cli = hooks_person(tmp_path)
    assert by_name(doctor(cli, code=0))[f"hooks {harness}"]["status"] == "skip"
    cli.ok("hooks", "install", harness, "--write")
    path = tmp_path / file
    check = by_name(doctor(cli, code=0))[f"hooks {harness}"]
    assert check["status"] == "ok" and check["detail"] == f"{path}: {events} run this ltm"
    doc = json.loads(path.read_text())
    first = events.split(", ")[0]
    del doc["hooks"][first]
    off = {"copilot": {"disableAllHooks": True}, "gemini": {"hooksConfig": {"enabled": False}}}
    doc.update(off.get(harness, {}))
    path.write_text(json.dumps(doc))
    checks = by_name(doctor(cli, code=1 if harness in off else 0))
    assert checks[f"hooks {harness}"]["status"] == "warn"
    assert f"no ltm hook for {first}" in checks[f"hooks {harness}"]["detail"]
    if harness in off:
        assert checks[f"hooks {harness} off"]["status"] == "fail"


def test_a_fresh_solo_install_stays_private_whatever_verb_made_its_folders(
    tmp_path: Path,
) -> None:
    """``ltm edit`` keeps its file in the state folder and may be the first verb run: the
    state folder it makes is 700 like the rest, so doctor finds nothing to fix."""
    cli = person(tmp_path / "solo")
    state = tmp_path / "solo" / "fresh" / "state"
    cli.env["LTM_STATE_DIR"] = str(state)
    packet = cli.ok("save", "-", stdin=json.dumps({"goal": "Solo", "next_step": "Edit"}))
    edited = cli.run("edit", packet.strip(), EDITOR="true")
    assert edited.returncode == 0, edited.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "edits").stat().st_mode) == 0o700
    report = by_name(doctor(cli))
    assert report["private"]["status"] == "ok", report["private"]

    state.chmod(0o755)
    failed = by_name(doctor(cli, code=1))["private"]
    assert failed["status"] == "fail" and f"chmod 700 {state}" in failed["fix"]
    assert "any ltm command" not in failed["fix"]  # most verbs never touch that folder


def test_a_settings_file_that_is_not_toml(tmp_path: Path) -> None:
    """``save`` reads settings.toml (your redaction patterns), every request its timeout:
    a damaged one stopped them while the doctor said all was well."""
    cli = person(tmp_path)
    cli.config.mkdir(parents=True)
    (cli.config / "settings.toml").write_text("timeout = [\n")
    refused = cli.fails("save", "-", "--local", stdin=cli.ok("example"))
    checks = by_name(doctor(cli, code=1))
    assert checks["settings"]["status"] == "fail"
    assert checks["settings"]["detail"] in refused and "not valid TOML" in refused
    assert "move it aside" in checks["settings"]["fix"]


def test_a_config_toml_that_is_not_toml_gets_the_fix_that_works(tmp_path: Path) -> None:
    """ltm auth and ltm config set read it before they rewrite it: the doctor's fixes
    (sign in again, set the host) failed on the same error; only the file mends it."""
    cli = person(tmp_path)
    cli.config.mkdir(parents=True, mode=0o700)
    (cli.config / "config.toml").write_text('host = "https://ltm.example.org"\nuser = \n')
    checks = by_name(doctor(cli, code=1))
    assert checks["config.toml"]["status"] == "fail"
    assert "line 2" in checks["config.toml"]["detail"]
    assert "move it aside" in checks["config.toml"]["fix"]
    assert "sign-in" not in checks
    assert checks["server"]["fix"] == "fix config.toml first (above)"


def test_a_project_s_portable_hooks_are_ltm_s(tmp_path: Path) -> None:
    """A --project install runs the ltm on PATH (the file is the team's): doctor takes its
    entries for ltm's, and says so when no ltm is on PATH, where they do nothing."""
    cli = hooks_person(tmp_path)
    project = tmp_path / "project"
    cli.run("hooks", "install", "claude-code", "--project", "--write", "--no-mcp", cwd=project)
    path = project / ".claude" / "settings.json"
    assert "command -v ltm" in path.read_text()
    on_path = f"{Path(LTM).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    check = by_name(doctor(cli, code=0, PATH=on_path))["hooks claude-code project"]
    assert check["status"] == "ok" and "run the ltm on PATH" in check["detail"]
    check = by_name(doctor(cli, code=1, PATH="/nonexistent"))["hooks claude-code project"]
    assert check["status"] == "fail" and "none on PATH" in check["detail"]
