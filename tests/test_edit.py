"""``ltm edit ID``: the real ``ltm`` in subprocesses with an ``EDITOR`` that is a real program
(a script playing the person at the editor), on the local store and on ``ltm server run``."""

from __future__ import annotations

import json
import shlex
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import Cli, signed_in
from serverkit import Server, make_packet, running_server
from timing import scaled

OLD_TIME = "2026-05-01T12:00:00Z"


def editor(tmp_path: Path, *steps: str) -> str:
    """An editor program: call N runs ``steps[N]`` (Python, with ``path``, ``text`` and
    ``data`` (the JSON below ltm's notes, when it parses) at hand; it sets ``text``).
    Each call's file as seen is kept in ``seen-N.txt``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "editor.py"
    calls = tmp_path / "calls"
    branches = "".join(
        f"{'if' if n == 0 else 'elif'} call == {n}:\n"
        + "".join(f"    {line}\n" for line in step.splitlines())
        for n, step in enumerate(steps)
    )
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, stat, sys\n"
        "from pathlib import Path\n"
        f"calls = Path({str(calls)!r})\n"
        "call = int(calls.read_text()) if calls.exists() else 0\n"
        "calls.write_text(str(call + 1))\n"
        "path = Path(sys.argv[-1])\n"
        "text = path.read_text()\n"
        "(calls.parent / f'seen-{call}.txt').write_text(text)\n"
        "(calls.parent / f'mode-{call}.txt').write_text(oct(stat.S_IMODE(path.stat().st_mode)))\n"
        "body = ''.join(x for x in text.splitlines(True) if not x.startswith('//'))\n"
        "try:\n    data = json.loads(body)\nexcept ValueError:\n    data = None\n"
        f"{branches}"
        "else:\n    sys.exit(99)\n"
        "path.write_text(text)\n"
    )
    script.chmod(0o755)
    return str(script)


def set_goal(goal: str) -> str:
    return f"data['goal'] = {goal!r}\ntext = json.dumps(data)"


@pytest.fixture
def me(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "me")
    cli.env["LTM_STATE_DIR"] = str(tmp_path / "me" / "state")
    return cli


def saved(cli: Cli, *args: str, **changes: object) -> str:
    packet = make_packet(created_at=OLD_TIME, **changes)
    return cli.ok("save", "-", *args, stdin=json.dumps(packet)).strip()


def test_an_edit_is_a_new_packet_that_continues_the_old_one(me: Cli, tmp_path: Path) -> None:
    old = saved(me, goal="Ship the server")
    result = me.run("edit", old[:12], EDITOR=editor(tmp_path, set_goal("Ship the server, v2")))
    assert result.returncode == 0, result.stderr
    new = result.stdout.strip()
    assert new != old and f"saved {new}" in result.stderr and f"continuing {old}" in result.stderr
    packet = json.loads(me.ok("show", new, "--json"))
    assert packet["goal"] == "Ship the server, v2" and packet["parent_id"] == old
    assert packet["created_at"] != OLD_TIME  # stamped now
    assert json.loads(me.ok("show", old, "--json"))["goal"] == "Ship the server"  # kept
    assert [row["id"] for row in json.loads(me.ok("log", new, "--json"))["packets"]] == [old, new]

    seen = (tmp_path / "seen-0.txt").read_text()
    assert seen.startswith("// ltm edit: editing packet " + old)
    shown = json.loads("".join(x for x in seen.splitlines(True) if not x.startswith("//")))
    assert "id" not in shown and "created_at" not in shown and shown["parent_id"] == old
    assert (tmp_path / "mode-0.txt").read_text() == "0o600"  # the packet's text stays private
    assert list((tmp_path / "me" / "state" / "edits").iterdir()) == []  # nothing left behind


def test_in_place_keeps_the_id(me: Cli, tmp_path: Path) -> None:
    old = saved(me, goal="Before")
    result = me.run(
        "edit", old, "--in-place", EDITOR=editor(tmp_path, set_goal("After")), VISUAL=""
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == old and f"updated {old}" in result.stderr
    assert json.loads(me.ok("show", old, "--json"))["goal"] == "After"
    assert len(json.loads(me.ok("ls", "--json"))["packets"]) == 1


def test_a_refused_edit_reopens_the_editor_with_the_report(me: Cli, tmp_path: Path) -> None:
    old = saved(me)
    secret = "AKIA" + "QWERTYUIOPASDFGH"
    script = editor(
        tmp_path,
        f"data['next_step'] = 'use {secret}'\ndel data['goal']\ntext = json.dumps(data)",
        # the second time: the report is at the top, and the edit is still there
        "assert text.startswith('// the last save was refused:'), text\n"
        f"assert {secret!r} in text\n"
        "data['next_step'] = 'use the key from the vault'\n"
        "data['goal'] = 'Rotated'\ntext = json.dumps(data)",
    )
    result = me.run("edit", old, EDITOR=script)
    assert result.returncode == 0, result.stderr
    assert "goal" in result.stderr and "redaction pre-flight" in result.stderr  # one report
    assert "opening the editor again" in result.stderr
    seen = (tmp_path / "seen-1.txt").read_text()
    assert "//   goal: required" in seen and "aws-access-key" in seen
    packet = json.loads(me.ok("show", result.stdout.strip(), "--json"))
    assert packet["goal"] == "Rotated" and packet["parent_id"] == old


def test_an_edit_still_refused_is_kept_and_named(me: Cli, tmp_path: Path) -> None:
    old = saved(me)
    script = editor(tmp_path, "data['goal'] = ''\ntext = json.dumps(data)", "pass")
    result = me.run("edit", old, EDITOR=script)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ltm: the packet is still refused") and "your edit is kept in" in last
    kept = Path(last.split("kept in ", 1)[1].split(" (", 1)[0])
    assert json.loads(kept.read_text())["goal"] == ""  # a plain packet file: no notes left
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert f"ltm save {kept}" in last
    assert len(json.loads(me.ok("ls", "--json"))["packets"]) == 1  # nothing saved


def test_ctrl_c_while_the_editor_is_open_is_the_editors(me: Cli, tmp_path: Path) -> None:
    """The terminal sends Ctrl-C to ltm as well as to the editor: ltm must not end, with
    the editor still open on the packet (git ignores it too while its editor runs)."""
    old = saved(me, goal="Ship the server")
    # The editor waits until ltm ignores the signal (a bounded wait: old code never does),
    # then sends it, as the terminal would, and goes on editing.
    interrupt = (
        "import os, re, signal, time\n"
        f"deadline = time.monotonic() + {scaled(10)!r}\n"
        "status = lambda: open(f'/proc/{os.getppid()}/status').read()\n"
        "while not int(re.search(r'SigIgn:\\s*([0-9a-f]+)', status()).group(1), 16) & 2:\n"
        "    if time.monotonic() > deadline:\n"
        "        break\n"
        "    time.sleep(0.01)\n"
        "os.kill(os.getppid(), signal.SIGINT)\n"
        "time.sleep(0.2)\n"
    ) + set_goal("Ship the server, v2")
    result = me.run("edit", old[:12], EDITOR=editor(tmp_path, interrupt))
    assert result.returncode == 0, result.stderr
    new = result.stdout.strip()
    assert json.loads(me.ok("pull", new))["goal"] == "Ship the server, v2"


def test_a_failing_editor_keeps_what_it_wrote_and_nothing_else(me: Cli, tmp_path: Path) -> None:
    """An editor that wrote the file, then failed: the file kept is its edit (ltm wrote the
    packet as it was before the editor back over it, and said "your edit is kept"). One that
    changed nothing, or never started, leaves no file to save a copy of the packet from."""
    old = saved(me, goal="Ship the server")
    wrote = f"{set_goal('Ship the server, v2')}\npath.write_text(text)\nsys.exit(3)"
    line = me.fails("edit", old, EDITOR=editor(tmp_path / "a", wrote))
    assert "exited with status 3" in line and "your edit is kept in" in line
    kept = Path(line.split("kept in ", 1)[1].split(" (", 1)[0])
    assert json.loads(kept.read_text())["goal"] == "Ship the server, v2"
    killed = f"{set_goal('Ship it')}\npath.write_text(text)\nimport os\n"
    ended = me.fails("edit", old, EDITOR=editor(tmp_path / "k", killed + "os.kill(os.getpid(), 9)"))
    assert "was ended by signal 9 (SIGKILL)" in ended and "your edit is kept in" in ended

    edits = tmp_path / "me" / "state" / "edits"
    before = set(edits.iterdir())
    for program in (editor(tmp_path / "b", "sys.exit(3)"), str(tmp_path / "no-such-editor")):
        line = me.fails("edit", old, EDITOR=program)
        assert line.endswith(f"; nothing saved (packet {old} is unchanged)"), line
        assert "kept" not in line
    assert set(edits.iterdir()) == before
    assert len(json.loads(me.ok("ls", "--json"))["packets"]) == 1


def test_emptied_or_unchanged_stores_nothing(me: Cli, tmp_path: Path) -> None:
    old = saved(me)
    unchanged = me.run("edit", old, EDITOR=editor(tmp_path / "a", "pass"))
    assert unchanged.returncode == 0 and "no changes" in unchanged.stderr
    assert unchanged.stdout == ""
    line = me.fails("edit", old, EDITOR=editor(tmp_path / "b", "text = ''"))
    assert "emptied; nothing saved" in line
    assert len(json.loads(me.ok("ls", "--json"))["packets"]) == 1


def test_no_editor_and_no_terminal_is_one_line_exit_2(me: Cli) -> None:
    old = saved(me)
    env = {k: v for k, v in me.env.items() if k not in ("EDITOR", "VISUAL")}
    line = Cli(me.home, env).fails("edit", old, code=2)
    assert "set $EDITOR" in line
    assert "no packet" in me.fails("edit", "01NOSUCHPACKET", EDITOR="true")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("edit")) as srv:
        yield srv


def test_edit_a_teams_packet_on_a_server(server: Server, tmp_path: Path) -> None:
    owner = signed_in(server, tmp_path / "owner", "editor-owner")
    owner.ok("teams", "create", "edits")
    old = saved(owner, "-t", "edits", goal="Team plan")
    result = owner.run(
        "edit", old[:12], "-t", "edits", EDITOR=editor(tmp_path, set_goal("Team plan, revised"))
    )
    assert result.returncode == 0, result.stderr
    new = result.stdout.strip()
    assert f"in team edits on {server.url}" in result.stderr
    packet = json.loads(owner.ok("show", new, "-t", "edits", "--json"))
    assert packet["parent_id"] == old and packet["goal"] == "Team plan, revised"
    assert owner.ok("ls") == ""  # in the team, not the personal scope


def test_an_edit_saved_in_another_encoding_is_kept_as_written(me: Cli, tmp_path: Path) -> None:
    """An editor that saved Latin-1: the file is the edit, left as it is (ltm wrote the
    packet as it was before the editor over it)."""
    old = saved(me, goal="Ship the server")
    latin = (
        "goal = {**data, 'goal': 'Caf\\u00e9'}\n"
        "path.write_bytes(json.dumps(goal, ensure_ascii=False).encode('latin-1'))\nsys.exit(0)"
    )
    line = me.fails("edit", old, EDITOR=editor(tmp_path, latin))
    assert line.startswith("ltm: the edited file is not UTF-8 (byte "), line
    kept = Path(line.split("kept in ", 1)[1].split(" — ", 1)[0])
    assert json.loads(kept.read_bytes().decode("latin-1"))["goal"] == "Caf\u00e9"


def test_in_place_on_a_packet_not_yours_opens_nothing(server: Server, tmp_path: Path) -> None:
    """One shared with you, or a teammate's in a team: the server keeps each its author's,
    so an in-place edit would be refused only once the work was done. It is refused before
    the editor opens; without --in-place the edit is a new packet continuing it."""
    _, owner_token = server.issue("inplace-owner")
    mate_id, mate_token = server.issue("inplace-mate")
    owner, mate = Cli(tmp_path / "owner"), Cli(tmp_path / "mate")
    for cli, token in ((owner, owner_token), (mate, mate_token)):
        cli.env["LTM_STATE_DIR"] = str(cli.home / "state")
        cli.ok("auth", server.url, "--with-token", stdin=token)
    owner.ok("teams", "create", "inplace")
    code = server.client(owner_token).post("/v1/teams/inplace/invites", json={}).json()["code"]
    assert server.client(mate_token).post(f"/v1/invites/{code}/accept", json={}).is_success
    shared = saved(owner, goal="Owner's own")
    owner.ok("share", shared, mate_id)
    team = saved(owner, "-t", "inplace", goal="Owner's team plan")

    for name, ref, scope in (("shared", shared, ()), ("team", team, ("-t", "inplace"))):
        script = editor(tmp_path / name, set_goal("Mine now"))
        line = mate.fails("edit", ref, *scope, "--in-place", EDITOR=script)
        assert f"packet {ref} is not yours" in line and "drop --in-place" in line, line
        assert not (tmp_path / name / "calls").exists()  # the editor never opened
    assert json.loads(owner.ok("pull", team, "-t", "inplace"))["goal"] == "Owner's team plan"

    script = editor(tmp_path / "new", set_goal("Mine now"))
    new = mate.ok("edit", team, "-t", "inplace", EDITOR=script).strip()
    assert json.loads(mate.ok("pull", new, "-t", "inplace"))["parent_id"] == team
    # its author replaces it (the bytes read back before the push are the ones edited)
    script = editor(tmp_path / "own", set_goal("Owner's plan, revised"))
    assert owner.ok("edit", team, "-t", "inplace", "--in-place", EDITOR=script).strip() == team
    assert json.loads(owner.ok("pull", team, "-t", "inplace"))["goal"] == "Owner's plan, revised"


def test_an_edit_given_the_old_id_back_leaves_the_old_packet(me: Cli, tmp_path: Path) -> None:
    """Without --in-place the old packet is kept: an edit that put its id back would have
    replaced it, continuing itself. It is refused as any refusal is, the editor reopened."""
    old = saved(me, goal="Ship the server")
    script = editor(
        tmp_path,
        f"data['id'] = {old!r}\n{set_goal('Ship the server, v2')}",
        "assert '//   id: ' in text, text\ndel data['id']\ntext = json.dumps(data)",
    )
    result = me.run("edit", old, EDITOR=script)
    assert result.returncode == 0, result.stderr
    assert "is the packet being edited" in result.stderr
    new = result.stdout.strip()
    assert new != old and json.loads(me.ok("pull", new))["parent_id"] == old
    assert json.loads(me.ok("pull", old))["goal"] == "Ship the server"  # left as it was
    assert "parent_id" not in json.loads(me.ok("pull", old))

    loop = f"data['parent_id'] = {old!r}\n{set_goal('Ship it')}"
    looped = me.run("edit", old, "--in-place", EDITOR=editor(tmp_path / "b", loop, "pass"))
    assert looped.returncode == 1 and "still refused" in looped.stderr
    assert "cannot continue itself" in (tmp_path / "b" / "seen-1.txt").read_text()
    assert json.loads(me.ok("pull", old))["goal"] == "Ship the server"


def test_a_windowed_editor_without_its_wait_flag_is_named(me: Cli, tmp_path: Path) -> None:
    """``code`` (as subl, zed...) hands the file to a window and exits at once: ltm saw no
    change and stored nothing while the user went on editing there. It says how to wait."""
    old = saved(me)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "code").symlink_to(editor(tmp_path / "code", "pass", "pass"))
    path = f"{bin_dir}:{me.env['PATH']}"
    result = me.run("edit", old, EDITOR="code", PATH=path)
    assert result.returncode == 0 and "no changes" in result.stderr
    assert "EDITOR='code --wait'" in result.stderr
    waited = me.run("edit", old, EDITOR="code -w", PATH=path)
    assert waited.returncode == 0 and "wait" not in waited.stderr


def test_a_state_folder_that_cannot_hold_the_file_is_one_line(me: Cli, tmp_path: Path) -> None:
    """The file to edit lives in ltm's state folder: one that is a file (or read-only, or
    on a full disk) is said in one line, before the editor opens, not as an unexpected
    error."""
    old = saved(me)
    (tmp_path / "not-a-folder").write_text("")
    script = editor(tmp_path / "ed", set_goal("Never opened"))
    line = me.fails("edit", old, EDITOR=script, LTM_STATE_DIR=str(tmp_path / "not-a-folder"))
    assert line.startswith("ltm: cannot make the file to edit in ") and "nothing was opened" in line
    assert not (tmp_path / "ed" / "calls").exists()


def test_the_kept_edit_is_stored_by_the_command_named(me: Cli, tmp_path: Path) -> None:
    """An edit let through by --allow-unredacted (or --lenient), kept when something failed
    after the editor ran: the command it names stores it, with the same overrides; without
    them the pre-flight refused what the edit had been allowed."""
    old = saved(me, goal="Rotate the key")
    secret = "AKIA" + "QWERTYUIOPASDFGH"
    wrote = f"{set_goal('Rotate ' + secret)}\npath.write_text(text)\nsys.exit(3)"
    script = editor(tmp_path, wrote)
    # A state folder whose path has a space, as macOS's (Application Support) has.
    state = str(tmp_path / "Application Support")
    line = me.fails("edit", old, "--allow-unredacted", EDITOR=script, LTM_STATE_DIR=state)
    command = shlex.split(line.split("(store it with: ", 1)[1].removesuffix(")"))
    assert command[:2] == ["ltm", "save"] and "--allow-unredacted" in command, line
    new = me.ok(*command[1:]).strip()
    packet = json.loads(me.ok("pull", new))
    assert packet["goal"] == f"Rotate {secret}" and packet["parent_id"] == old


def test_in_place_never_overwrites_a_change_made_while_the_editor_was_open(
    me: Cli, tmp_path: Path
) -> None:
    """Another session saves the packet while it is open in the editor: --in-place would
    drop that change unseen. The edit is kept, and the other change stays stored."""
    old = saved(me, goal="Ship the server")
    elsewhere = (
        "import subprocess\n"
        "ltm = str(Path(sys.executable).with_name('ltm'))\n"
        "other = json.dumps({**data, 'goal': 'Changed elsewhere'})\n"
        "subprocess.run([ltm, 'save', '-'], input=other, text=True, check=True)\n"
    ) + set_goal("Mine")
    result = me.run("edit", old, "--in-place", EDITOR=editor(tmp_path, elsewhere))
    assert result.returncode == 1, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert f"packet {old} changed while it was open in your editor" in line, line
    kept = Path(line.split("kept in ", 1)[1].split(" (", 1)[0])
    assert json.loads(kept.read_text())["goal"] == "Mine"
    assert json.loads(me.ok("pull", old))["goal"] == "Changed elsewhere"
