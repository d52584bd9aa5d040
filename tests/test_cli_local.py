"""The ltm command end to end, as a user runs it: real subprocesses, a real SQLite file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from timing import scaled

LTM = str(Path(sys.executable).with_name("ltm"))
EXAMPLE_ID = "01JS5LTMEXAMPLEPACKET00001A"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("LTM_")}
    e["LTM_DATA_DIR"] = str(tmp_path / "data")
    e["LTM_CONFIG_DIR"] = str(tmp_path / "config")
    return e


def ltm(
    env: dict[str, str], *args: str, stdin: str | bytes = b""
) -> subprocess.CompletedProcess[str]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        [LTM, *args], input=data, env=env, capture_output=True, timeout=scaled(60)
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


def ok(env: dict[str, str], *args: str, stdin: str | bytes = b"") -> str:
    result = ltm(env, *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    return result.stdout


CONTENT = {
    "goal": "Make the login test stop flaking",
    "next_step": "Run the test 50 times with -p no:randomly and read the first failure",
    "decisions": [{"what": "Keep pytest", "why": "the team knows it", "locked": True}],
    "attempts": [
        {"tried": "Raised the timeout to 30 s", "outcome": "failed", "learned": "not timing"}
    ],
}


def test_save_fills_defaults_and_resume_renders_it(env: dict[str, str]) -> None:
    packet_id = ok(env, "save", "-", stdin=json.dumps(CONTENT)).strip()
    assert len(packet_id) == 26  # a ULID
    stored = json.loads(ok(env, "pull", packet_id))
    assert stored["ltm_version"] == "0.2" and stored["id"] == packet_id
    assert stored["created_at"].endswith("Z")

    block = ok(env, "resume", packet_id)
    assert block.startswith("# Resume context")
    assert "Make the login test stop flaking" in block
    assert "Raised the timeout to 30 s" in block.split("## Failed attempts")[1]
    assert block.rstrip().endswith(CONTENT["next_step"])  # the next step closes the block
    assert ok(env, "resume") == block  # no id: the newest packet
    assert ok(env, "resume", packet_id[:8]) == block  # a unique prefix


def test_save_from_file_push_ls_show_rm(env: dict[str, str], tmp_path: Path) -> None:
    example = tmp_path / "example.json"
    example.write_text(ok(env, "example", "--reference"))  # the reference's, with its fixed id
    assert ok(env, "push", str(example)).strip() == EXAMPLE_ID
    second = ok(env, "save", "-", stdin=json.dumps(CONTENT)).strip()

    lines = ok(env, "ls").splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(second[:12])  # newest first
    listing = json.loads(ok(env, "ls", "--json", "--limit", "1"))
    assert [p["id"] for p in listing["packets"]] == [second]
    assert set(listing["packets"][0]) == {"id", "created_at", "goal"}

    shown = ok(env, "show", EXAMPLE_ID)
    assert "Goal" in shown and "[locked]" in shown
    raw = ok(env, "show", EXAMPLE_ID, "--json")
    assert json.loads(raw)["id"] == EXAMPLE_ID

    out = tmp_path / "copy.json"
    ok(env, "pull", EXAMPLE_ID, "-o", str(out))
    assert json.loads(out.read_text()) == json.loads(example.read_text())

    result = ltm(env, "rm", EXAMPLE_ID, "--yes")
    assert result.returncode == 0 and "deleted" in result.stderr
    missing = ltm(env, "show", EXAMPLE_ID)
    assert missing.returncode == 1 and "no packet matches" in missing.stderr


def test_a_pulled_packet_at_the_cap_validates_and_pushes_back(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Its compact form fits the 32 KiB cap; the indented form a store hands back does
    # not. The file `ltm pull` wrote must be one `ltm validate` and `ltm push` take.
    # With its project named, neither save nor validate fills one in (which would grow it).
    near = {**CONTENT, "id": EXAMPLE_ID, "created_at": "2026-04-22T00:00:00Z"}
    near["project"] = {"name": "capped"}
    near |= {"ltm_version": "0.2", "tags": ["a"] * 16, "constraints": ["c" * 1000] * 32}
    compact = json.dumps(near, ensure_ascii=False, separators=(",", ":"))
    near["open_questions"] = ["q" * (32_768 - 40 - len(compact.encode()))]
    ok(env, "push", "-", stdin=json.dumps(near, separators=(",", ":")))
    pulled = tmp_path / "pulled.json"
    ok(env, "pull", EXAMPLE_ID, "-o", str(pulled))
    assert len(pulled.read_bytes()) > 32_768
    assert ok(env, "validate", str(pulled)).strip() == f"{pulled}: ok"
    result = ltm(env, "push", str(pulled))
    assert result.returncode == 0 and "updated" in result.stderr, result.stderr


def test_repush_is_idempotent(env: dict[str, str]) -> None:
    example = ok(env, "example", "--reference")
    ok(env, "save", "-", stdin=example)
    result = ltm(env, "save", "-", stdin=example)
    assert result.returncode == 0 and "updated" in result.stderr
    assert len(ok(env, "ls").splitlines()) == 1


def test_example_and_its_resume_block(env: dict[str, str]) -> None:
    packet = json.loads(ok(env, "example"))
    assert packet["ltm_version"] == "0.2"
    block = ok(env, "example", "--resume")
    assert "## Locked decisions" in block and packet["next_step"] in block
    assert not (Path(env["LTM_DATA_DIR"]) / "ltm.db").exists()  # no store touched


def test_version(env: dict[str, str]) -> None:
    assert ok(env, "--version").startswith("ltm ")


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps({**CONTENT, "ltm_version": "9.9"}), "supported: 0.1, 0.2"),
        (json.dumps({**CONTENT, "goal": "x" * 40_000}), "32768"),
        (
            json.dumps({**CONTENT, "attempts": [{"tried": "x", "outcome": "maybe"}]}),
            "attempts[0].outcome",
        ),
    ],
)
def test_bad_input_is_one_clear_error_and_stores_nothing(
    env: dict[str, str], stdin: str, message: str
) -> None:
    result = ltm(env, "save", "-", stdin=stdin)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert ok(env, "ls", "--json") == ok(env, "ls", "--json")  # still usable
    assert json.loads(ok(env, "ls", "--json"))["packets"] == []


def test_endless_input_is_refused_unread(tmp_path: Path) -> None:
    """A source longer than any packet's text is refused once that much is read: an
    endless one (a pipe from yes, /dev/zero) is never read until memory runs out."""
    from clikit import Cli

    from ltm.packet import MAX_TEXT_BYTES

    cli = Cli(tmp_path / "me")
    most = 2 * MAX_TEXT_BYTES + 2  # the longest UTF-16 text the parse could still take
    limit = "not read further; a packet is at most 32768 bytes"
    said = cli.fails("save", "-", stdin=b"{" * (most + 1))
    assert said == f"ltm: standard input: more than {most} bytes, {limit}"
    if Path("/dev/zero").exists():
        said = cli.fails("save", "/dev/zero")
        assert said == f"ltm: /dev/zero: more than {most} bytes, {limit}"
    # up to that, the packet's own checks judge it and say its size
    assert "over the 32768-byte limit" in cli.run("save", "-", stdin=b" " * most).stderr
    assert json.loads(cli.ok("ls", "--json"))["packets"] == []


def test_ls_shared_refuses_the_options_it_does_not_take(tmp_path: Path) -> None:
    from clikit import Cli

    cli = Cli(tmp_path / "me")
    only = "ltm: Invalid value: --shared takes only -t (the team's server), --limit, --json"
    for extra in (["--all"], ["--tag", "x"], ["--here"], ["--local"], ["--since", "3d"]):
        assert cli.fails("ls", "--shared", *extra, code=2) == f"{only} (see: ltm ls --help)"


def test_every_schema_error_is_listed(env: dict[str, str]) -> None:
    bad = {
        **CONTENT,
        "tags": ["Not OK"],
        "attempts": [{"tried": "x", "outcome": "maybe"}],
        "zzz": 1,
    }
    result = ltm(env, "save", "-", stdin=json.dumps(bad))
    assert result.returncode == 1
    for path in ("tags[0]", "attempts[0].outcome", "zzz"):
        assert path in result.stderr


def test_missing_file(env: dict[str, str]) -> None:
    result = ltm(env, "save", "/nonexistent/packet.json")
    assert result.returncode == 1
    assert result.stderr.strip() == "ltm: /nonexistent/packet.json: no such file"


def test_redaction_blocks_and_stores_nothing(env: dict[str, str]) -> None:
    leaky = {**CONTENT, "next_step": "Read /home/alice/work/notes.txt"}
    result = ltm(env, "save", "-", stdin=json.dumps(leaky))
    assert result.returncode == 1
    assert "next_step/abs-path" in result.stderr
    assert json.loads(ok(env, "ls", "--json"))["packets"] == []
    # The one override sends it anyway.
    assert ok(env, "save", "--allow-unredacted", "-", stdin=json.dumps(leaky)).strip()


def test_a_report_names_the_first_hits_and_counts_the_rest(env: dict[str, str]) -> None:
    # A pasted build log full of paths: the report stays readable (and so does the
    # MCP tool's error in an agent's context), and says how many it left out.
    from ltm.cli.client.preflight import SHOWN_HITS

    log = " ".join(f"/srv/build/step{n}.log" for n in range(SHOWN_HITS + 12))
    leaky = {**CONTENT, "goal": log, "next_step": "read /srv/build/last.log"}
    result = ltm(env, "save", "-", stdin=json.dumps(leaky))
    assert result.returncode == 1
    err = result.stderr
    assert f"blocked the packet ({SHOWN_HITS + 13} hits):" in err
    assert err.count("/abs-path: ") == SHOWN_HITS
    assert "… and 13 more hits (goal, next_step)" in err
    validated = ltm(env, "validate", "-", stdin=json.dumps(leaky))
    assert "… and 13 more hits (goal, next_step)" in validated.stdout
    report = json.loads(ltm(env, "validate", "--json", "-", stdin=json.dumps(leaky)).stdout)
    assert len(report["redaction"]) == SHOWN_HITS + 13  # the JSON report has them all


def test_lenient_accepts_and_flags(env: dict[str, str]) -> None:
    odd = {**CONTENT, "mood": "optimistic"}
    assert ltm(env, "save", "-", stdin=json.dumps(odd)).returncode == 1
    result = ltm(env, "save", "--lenient", "-", stdin=json.dumps(odd))
    assert result.returncode == 0 and "non-conforming" in result.stderr


def test_teams_need_a_server(env: dict[str, str]) -> None:
    result = ltm(env, "ls", "--team", "core")
    assert result.returncode == 1 and "ltm auth" in result.stderr


def test_ambiguous_prefix(env: dict[str, str]) -> None:
    for n in range(2):
        ok(env, "save", "-", stdin=json.dumps({**CONTENT, "id": f"01SAMEPREFIX{n:02d}"}))
    result = ltm(env, "show", "01SAMEPREFIX")
    assert result.returncode == 1 and "more than one" in result.stderr


def test_validate_judges_what_save_stores_and_complete_what_push_needs(
    env: dict[str, str], tmp_path: Path
) -> None:
    content = tmp_path / "content.json"
    content.write_text(json.dumps(CONTENT))  # no id, created_at or ltm_version
    result = ltm(env, "validate", str(content))
    assert result.returncode == 0 and result.stdout == f"{content}: ok\n"
    assert ok(env, "save", str(content)).strip()  # and save agrees

    result = ltm(env, "validate", "--complete", "--json", str(content))
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["valid"] is False
    assert {e.split(":")[0] for e in report["errors"]} == {"ltm_version", "id", "created_at"}
    assert ltm(env, "push", str(content)).returncode == 1  # and push agrees


def test_validate_refuses_what_save_refuses_a_packet_continuing_itself(
    env: dict[str, str], tmp_path: Path
) -> None:
    looping = tmp_path / "looping.json"
    own = "01JS5LTMEXAMPLEPACKET00001B"
    looping.write_text(json.dumps({**CONTENT, "id": own, "parent_id": own}))
    said = f"parent_id {own} is the packet's own id (a packet cannot continue itself)"
    result = ltm(env, "validate", "--json", str(looping))
    assert result.returncode == 1 and json.loads(result.stdout)["errors"] == [said]
    saved = ltm(env, "save", str(looping))
    assert saved.returncode == 1 and said in saved.stderr  # and save agrees
    # push stores a packet as written, warning: so does validate --complete (no error).
    complete = ltm(env, "validate", "--complete", "--json", str(looping))
    assert said not in complete.stdout


def test_one_report_lists_schema_errors_and_redaction_hits(
    env: dict[str, str], tmp_path: Path
) -> None:
    token = "ghp_" + "Zk3Qw8Rt5Yu2Io9Pa4Sd7Fg1Hj6Kl0Zx3Cv8"
    both = json.dumps({"goal": f"token {token}", "tags": ["Bad Tag"]})
    saved = ltm(env, "save", "-", stdin=both)
    assert saved.returncode == 1
    err = saved.stderr
    assert "next_step: required" in err and "tags[0]: must match" in err
    assert "redaction pre-flight blocked the packet (1 hit):" in err
    assert "goal/github-token: ghp_Zk3Q…" in err and token[8:] not in err  # its head alone
    assert err.index("next_step: required") < err.index("redaction pre-flight")

    validated = ltm(env, "validate", "-", stdin=both)
    assert validated.returncode == 1
    assert "not a valid packet (2 problems):" in validated.stdout
    assert "(1 hit):" in validated.stdout and "goal/github" in validated.stdout
    assert token[8:] not in validated.stdout
    assert "no packets yet" in ltm(env, "ls").stderr


def test_validate_text_json_and_exit_codes(env: dict[str, str], tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(ok(env, "example"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"goal": "g"}))
    leaky = tmp_path / "leaky.json"
    leaky.write_text(
        json.dumps({**json.loads(good.read_text()), "goal": "see C:\\Users\\bob\\x.txt"})
    )
    assert ltm(env, "validate", str(good)).returncode == 0

    result = ltm(env, "validate", "--json", str(good), str(bad), str(leaky))
    assert result.returncode == 1
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["file"] for r in reports] == [str(good), str(bad), str(leaky)]
    assert reports[0].pop("bytes") > 2000  # the size it would be stored at
    assert reports[0] == {"file": str(good), "valid": True, "errors": [], "redaction": []}
    assert reports[1]["valid"] is False and any("next_step" in e for e in reports[1]["errors"])
    assert reports[2]["valid"] is True
    assert reports[2]["redaction"][0]["field"] == "goal"
    assert reports[2]["redaction"][0]["kind"].endswith("path")

    assert ltm(env, "validate", "-", stdin=good.read_text()).returncode == 0
    assert ltm(env, "validate", str(tmp_path / "missing.json")).returncode == 2
    assert ltm(env, "validate").returncode == 2  # usage error


def test_sensitive_patterns(env: dict[str, str]) -> None:
    ok(env, "sensitive", "add", "codename", r"project-bluebird")
    assert "codename" in ok(env, "sensitive", "ls")
    tested = ltm(env, "sensitive", "test", "ship project-bluebird now")
    assert tested.returncode == 1 and tested.stdout == "codename: proj…\n"
    assert ltm(env, "sensitive", "test", "nothing to see").returncode == 0

    result = ltm(env, "save", "-", stdin=json.dumps({**CONTENT, "goal": "ship project-bluebird"}))
    assert result.returncode == 1 and "goal/codename" in result.stderr

    bad = ltm(env, "sensitive", "add", "broken", "(unclosed")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    # Kept in our settings.toml, not in config.toml, which the reference CLI rewrites whole.
    config = Path(env["LTM_CONFIG_DIR"])
    saved = tomllib.loads((config / "settings.toml").read_text())
    assert saved["sensitive"] == [{"kind": "codename", "regex": "project-bluebird"}]
    assert not (config / "config.toml").exists()
    ok(env, "sensitive", "rm", "codename")
    assert ok(env, "save", "-", stdin=json.dumps({**CONTENT, "goal": "ship project-bluebird"}))


def test_sensitive_patterns_of_an_earlier_build_are_kept(env: dict[str, str]) -> None:
    """Earlier builds kept settings in config.json: the patterns move, and still block."""
    config = Path(env["LTM_CONFIG_DIR"])
    config.mkdir()
    old = {"timeout": 12, "sensitive": [{"kind": "codename", "regex": r"blue\.bird"}]}
    (config / "config.json").write_text(json.dumps(old))
    blocked = ltm(env, "save", "-", stdin=json.dumps({**CONTENT, "goal": "ship blue.bird"}))
    assert blocked.returncode == 1 and "goal/codename" in blocked.stderr
    assert ok(env, "sensitive", "ls") == "codename\tblue\\.bird\n"
    assert ok(env, "config", "get", "timeout") == "12\n"
    assert not (config / "config.json").exists()
    assert tomllib.loads((config / "settings.toml").read_text()) == old


def test_two_processes_saving_at_once_lose_nothing(env: dict[str, str]) -> None:
    # A first save creates and migrates the store; then many writers race on it.
    ok(env, "save", "-", stdin=json.dumps(CONTENT))

    def save(n: int) -> str:
        return ok(env, "save", "-", stdin=json.dumps({**CONTENT, "goal": f"goal {n}"})).strip()

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(save, range(24)))
    assert len(set(ids)) == 24
    listed = {p["id"] for p in json.loads(ok(env, "ls", "--json", "--limit", "100"))["packets"]}
    assert set(ids) <= listed and len(listed) == 25
    db = sqlite3.connect(Path(env["LTM_DATA_DIR"]) / "ltm.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_push_of_a_packet_save_would_complete_names_save(env: dict[str, str]) -> None:
    """``ltm example | ltm push -``: push stores a file as it is, so an id and a created_at
    it lacks are refused, and the refusal names the verb that fills them in."""
    example = ok(env, "example")
    refused = ltm(env, "push", "-", stdin=example)
    assert refused.returncode == 1
    assert "id: required" in refused.stderr
    assert refused.stderr.rstrip().endswith(
        "push stores a complete packet as it is; ltm save - fills in its id and created_at"
    )
    # a complete packet's other problems are said as they were, with no word of save
    complete = json.loads(ok(env, "example", "--reference"))
    broken = ltm(env, "push", "-", stdin=json.dumps({**complete, "goal": ""}))
    assert broken.returncode == 1 and "ltm save" not in broken.stderr
