"""``ltm resume`` on a terminal: the picker in a real pseudo-terminal (pexpect), and the clipboard.

Keys are sent as a terminal sends them (``ESC [ B`` for the down arrow). The
clipboard is reached through pyperclip's real Wayland path: a stand-in
``wl-copy`` on PATH that keeps what it is given, so the test can read it back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from clikit import LTM, Cli, wl_clipboard
from serverkit import Server, running_server
from timing import scaled

DOWN, UP, ENTER, ESC = "\x1b[B", "\x1b[A", "\r", "\x1b"
GOALS = ["Oldest goal: the flaky login", "Middle goal: the slow build", "Newest goal: docs"]


def saved(cli: Cli, *extra: str) -> list[str]:
    """Three packets, oldest first; their ids."""
    return [
        cli.ok(
            "save", *extra, "-", stdin=json.dumps({"goal": g, "next_step": f"Next: {g}"})
        ).strip()
        for g in GOALS
    ]


def spawn(cli: Cli, *args: str, **env: str) -> pexpect.spawn:
    child = pexpect.spawn(
        LTM, list(args), env={**cli.env, **env}, encoding="utf-8", timeout=scaled(30),
        dimensions=(24, 120),
    )  # fmt: skip
    child.expect("Resume which packet")
    return child


def finish(child: pexpect.spawn) -> tuple[str, int]:
    child.expect(pexpect.EOF)
    child.close()
    return child.before, child.exitstatus


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "me")


def test_arrows_and_enter_pick_a_packet(cli: Cli) -> None:
    ids = saved(cli)
    child = spawn(cli, "resume", "--no-copy")
    child.expect(GOALS[0])  # every row is shown: short id, age, goal
    child.send(DOWN)
    child.send(DOWN)
    child.send(UP)  # newest first: down, down, up lands on the middle one
    child.send(ENTER)
    output, status = finish(child)
    assert status == 0, output
    assert "# Resume context" in output
    assert "Middle goal: the slow build" in output and "Next: Middle goal" in output
    assert "Newest goal" not in output.split("# Resume context", 1)[1]
    assert "\x1b[?25h" in output  # the cursor is shown again
    assert f"Id: {ids[1]}" in output.split("# Resume context", 1)[1]


def test_esc_cancels(cli: Cli) -> None:
    saved(cli)
    child = spawn(cli, "resume")
    child.send(DOWN)
    child.send(ESC)
    output, status = finish(child)
    assert status == 130
    assert "ltm: cancelled; nothing resumed" in output
    assert "# Resume context" not in output


def test_vi_keys_and_q(cli: Cli) -> None:
    saved(cli)
    child = spawn(cli, "resume", "--no-copy")
    child.send("jjk\r")
    output, status = finish(child)
    assert status == 0 and "Middle goal" in output.split("# Resume context", 1)[1]
    child = spawn(cli, "resume")
    child.send("q")
    _output, status = finish(child)
    assert status == 130


def test_enter_copies_and_falls_back_to_stdout_without_a_clipboard(cli: Cli) -> None:
    saved(cli)
    child = spawn(cli, "resume")
    child.send(ENTER)
    output, status = finish(child)
    assert status == 0
    assert "warning: no clipboard tool found" in output
    assert "printing the block instead" in output
    assert "Newest goal: docs" in output.split("# Resume context", 1)[1]


def test_enter_copies_to_the_clipboard(cli: Cli, tmp_path: Path) -> None:
    ids = saved(cli)
    bin_dir, clip = wl_clipboard(tmp_path)
    env = {"PATH": f"{bin_dir}:{cli.env['PATH']}", "WAYLAND_DISPLAY": "wayland-test"}
    child = spawn(cli, "resume", **env)
    child.send(DOWN + DOWN + ENTER)
    output, status = finish(child)
    assert status == 0, output
    assert f"copied the resume block of {ids[0]}" in output
    assert "# Resume context" not in output  # on the clipboard, not on the screen
    assert clip.read_text() == cli.ok("resume", ids[0])

    # With an id it prints; --copy copies that one too.
    assert cli.ok("resume", ids[2], **env).startswith("# Resume context")
    copied = cli.run("resume", ids[2], "--copy", **env)
    assert copied.stdout == "" and "copied the resume block" in copied.stderr
    assert clip.read_text() == cli.ok("resume", ids[2])
    # --json prints: asked for with --copy too, neither is done
    both = cli.fails("resume", ids[1], "--copy", "--json", code=2, **env)
    assert both == "ltm: give --copy or --json, not both"
    assert clip.read_text() == cli.ok("resume", ids[2])


def test_off_a_terminal_the_newest_packet_is_printed(cli: Cli) -> None:
    saved(cli)
    block = cli.ok("resume")  # stdin and stdout are pipes here
    assert "Newest goal: docs" in block
    missing = cli.run("resume", "--copy")
    assert missing.returncode == 0 and "warning: no clipboard tool found" in missing.stderr
    assert missing.stdout == block


def test_a_long_list_scrolls(cli: Cli) -> None:
    for n in range(14):
        cli.ok("save", "-", stdin=json.dumps({"goal": f"Goal number {n:02d}", "next_step": "n"}))
    child = spawn(cli, "resume", "--no-copy")
    child.expect("1/14")
    child.send(DOWN * 12)
    child.expect("13/14")
    child.send("\x1b[F")  # End
    child.expect("14/14")
    child.send(ENTER)
    output, status = finish(child)
    assert status == 0 and "Goal number 00" in output.split("# Resume context", 1)[1]


# -- against a server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("picker")) as srv:
        yield srv


def test_the_picker_on_a_team_and_rm_asking_first(server: Server, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "remote")
    _user_id, token = server.issue("picker")
    cli.ok("auth", server.url, "--with-token", stdin=token)
    cli.ok("teams", "create", "pickers")
    ids = saved(cli, "-t", "pickers")
    child = spawn(cli, "resume", "-t", "pickers", "--no-copy")
    child.send(DOWN + ENTER)
    output, status = finish(child)
    assert status == 0 and "Middle goal" in output.split("# Resume context", 1)[1]

    child = pexpect.spawn(LTM, ["rm", ids[1][:12], "-t", "pickers"], env=cli.env,
                          encoding="utf-8", timeout=scaled(30))  # fmt: skip
    child.expect(r"Delete .*Middle goal.*\?")
    child.sendline("n")
    output, status = finish(child)
    assert status == 1 and "nothing deleted" in output
    assert ids[1][:12] in cli.ok("ls", "-t", "pickers")

    child = pexpect.spawn(LTM, ["rm", ids[1][:12], "-t", "pickers"], env=cli.env,
                          encoding="utf-8", timeout=scaled(30))  # fmt: skip
    child.expect(r"\?")
    child.sendline("y")
    output, status = finish(child)
    assert status == 0 and f"deleted {ids[1]}" in output
    assert ids[1][:12] not in cli.ok("ls", "-t", "pickers")


def test_rm_asking_ctrl_c_is_an_interruption_and_ctrl_d_a_no(cli: Cli) -> None:
    """At ``rm``'s question Ctrl-C ends the verb as it does anywhere (one line, exit 130)
    and Ctrl-D answers no: both were "ltm: aborted", exit 1, on the question's line."""
    ids = saved(cli)

    def asked() -> pexpect.spawn:
        child = pexpect.spawn(LTM, ["rm", ids[0][:12]], env=cli.env, encoding="utf-8",
                              timeout=scaled(30))  # fmt: skip
        child.expect(r"Delete .*Oldest goal.*\? \[y/N\]: ")
        return child

    child = asked()
    child.sendintr()
    output, status = finish(child)
    assert (status, output.strip().splitlines()[-1]) == (130, "ltm: interrupted"), output

    child = asked()
    child.sendeof()
    output, status = finish(child)
    assert (status, output.strip().splitlines()[-1]) == (1, "ltm: nothing deleted"), output
    assert ids[0] in cli.ok("ls", "--json")
