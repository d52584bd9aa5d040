"""``ltm join URL`` never moves the default server on its own.

An invite link can come from anyone, and the default server receives every
later ``save``. Joining a team on another server keeps the default (the
signed-in server, or the local store) unless the user passes
``--make-default`` or says yes on a terminal; the CLI says where the team
lives and how to reach it (``-H``). Two real servers on loopback: "home" (the
user's default) and "other" (where the invite comes from).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from clikit import LTM, Cli, signed_in
from serverkit import Server, running_server
from timing import scaled


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("home")) as srv:
        yield srv


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("other")) as srv:
        yield srv


def invite(server: Server, home_dir: Path, team: str) -> str:
    owner = signed_in(server, home_dir, f"owner-{team}")
    owner.ok("teams", "create", team)
    return owner.ok("invite", "-t", team).strip()


def content(goal: str) -> str:
    return json.dumps({"goal": goal, "next_step": "Carry on."})


def test_joining_elsewhere_keeps_the_default_server(
    home: Server, other: Server, tmp_path: Path
) -> None:
    me = signed_in(home, tmp_path / "me", "me")
    before = me.credentials()
    url = invite(other, tmp_path / "owner", "far")

    joined = me.run("join", url, "--display", "Me")
    assert joined.returncode == 0, joined.stderr
    assert f"joined team far on {other.url}" in joined.stderr
    assert f"your default stays {home.url}" in joined.stderr
    assert f"-t far reaches {other.url}: ltm ls -t far" in joined.stderr  # how to reach it

    after = me.credentials()
    assert after["default"] == home.url == before["default"]
    assert after["hosts"][home.url]["token"] == before["hosts"][home.url]["token"]
    assert after["hosts"][other.url]["via"] == "invite"  # the new account is kept, aside
    assert after["token"] == before["token"]  # the reference's credentials file: untouched

    # A save without -H still goes home; with -H it reaches the team on the other server.
    mine = me.ok("save", "-", stdin=content("Stays home")).strip()
    assert mine[:12] in me.ok("ls") and "Stays home" in me.ok("show", mine)
    shared = me.ok("-H", other.url, "save", "-t", "far", "-", stdin=content("Team work")).strip()
    assert shared[:12] in me.ok("ls", "-t", "far", "--host", other.url)
    assert shared[:12] in me.ok(f"--host={other.url}", "ls", "-t", "far")
    assert "Team work" in me.ok("resume", shared, "-t", "far", "-H", other.url)
    # -t finds the server the team was joined on; the default stays for everything else.
    assert shared[:12] in me.ok("ls", "-t", "far")
    assert mine[:12] not in me.ok("ls", "-t", "far")
    assert me.credentials()["default"] == home.url


def test_a_clean_machine_keeps_the_local_store_unless_asked(other: Server, tmp_path: Path) -> None:
    fresh = Cli(tmp_path / "fresh")
    joined = fresh.run("join", invite(other, tmp_path / "o1", "crew1"))
    assert joined.returncode == 0, joined.stderr
    assert "your default stays the local store" in joined.stderr
    assert fresh.credentials()["default"] is None
    fresh.ok("save", "-", stdin=content("Local one"))
    assert "local store" in fresh.ok("whoami")
    assert fresh.ok("-H", other.url, "ls", "-t", "crew1") == ""  # signed in there, aside

    chosen = Cli(tmp_path / "chosen")
    joined = chosen.run("join", invite(other, tmp_path / "o2", "crew2"), "--make-default")
    assert joined.returncode == 0, joined.stderr
    assert f"the default server is now {other.url} (was the local store" in joined.stderr
    assert chosen.credentials()["default"] == other.url
    assert chosen.ok("ls", "-t", "crew2") == ""  # no -H needed any more


def test_make_default_moves_it_with_an_existing_account(
    home: Server, other: Server, tmp_path: Path
) -> None:
    me = signed_in(home, tmp_path / "me", "me2")
    me.ok("join", invite(other, tmp_path / "o1", "first"))  # a new account on other, aside
    again = me.run("join", invite(other, tmp_path / "o2", "second"), "--make-default")
    assert again.returncode == 0, again.stderr
    assert f"back with: ltm config set host {home.url}" in again.stderr
    saved = me.credentials()
    assert saved["default"] == other.url
    assert saved["hosts"][home.url]["token"]  # home's token is kept for going back
    assert me.ok("ls", "-t", "second") == "" and me.ok("ls", "-t", "first") == ""


def test_on_a_terminal_it_asks_and_no_is_the_default(
    home: Server, other: Server, tmp_path: Path
) -> None:
    me = signed_in(home, tmp_path / "me", "me3")
    child = pexpect.spawn(
        LTM, ["join", invite(other, tmp_path / "o1", "asked")], env=me.env,
        encoding="utf-8", timeout=scaled(30),
    )  # fmt: skip
    child.expect(r"Your name on .*Enter for none\)")  # a new user on that server
    child.sendline("Asked Person")
    child.expect(rf"Make {other.url} your default server \(now {home.url}\)\?.*\[y/N\]")
    child.sendline("")  # just Enter: no
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "your default stays" in child.before
    assert "as Asked Person" in child.before
    assert me.credentials()["default"] == home.url

    child = pexpect.spawn(
        LTM, ["join", invite(other, tmp_path / "o2", "yes")], env=me.env,
        encoding="utf-8", timeout=scaled(30),
    )  # fmt: skip
    child.expect(r"\[y/N\]")  # no name asked: the earlier join signed me in there
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "the default server is now" in child.before
    assert me.credentials()["default"] == other.url


def test_joining_the_default_server_needs_no_flag(home: Server, tmp_path: Path) -> None:
    me = signed_in(home, tmp_path / "me", "me4")
    joined = me.run("join", invite(home, tmp_path / "o", "near"))
    assert joined.returncode == 0, joined.stderr
    assert "its packets: ltm ls -t near" in joined.stderr and "-H" not in joined.stderr
    assert me.credentials()["default"] == home.url


def test_host_option_needs_a_url(tmp_path: Path) -> None:
    assert "'-H' requires an argument" in Cli(tmp_path / "x").fails("ls", "-H", code=2)
    assert "needs a server URL" in Cli(tmp_path / "x").fails("-H", "--json", "ls", code=2)
    assert "not a server URL" in Cli(tmp_path / "x").fails("-H", "ftp://x", "ls", code=2)


def test_joining_with_an_ltm_token_records_nothing_on_the_kept_sign_in(
    home: Server, tmp_path: Path
) -> None:
    """LTM_HOST/LTM_TOKEN name another account (a CI bot's) on the server this machine is
    signed in to: the team joined and the name the server gave are that account's, not
    the one whose token the files keep, so neither is written beside it."""
    me = signed_in(home, tmp_path / "me", "me4")
    bot = signed_in(home, tmp_path / "bot", "bot4")
    before = me.credentials()["hosts"][home.url]
    url = invite(home, tmp_path / "owner", "botwork")
    joined = me.run("join", url, LTM_HOST=home.url, LTM_TOKEN=bot.credentials()["token"])
    assert joined.returncode == 0, joined.stderr
    after = me.credentials()["hosts"][home.url]
    assert after["token"] == before["token"]
    assert after.get("user") == before.get("user")
    assert "botwork" not in after.get("teams", [])


def test_ctrl_d_at_the_name_prompt_ends_on_a_line_of_its_own(tmp_path: Path) -> None:
    """The refusal after a question left unanswered starts its own line: it was written
    after the question, as if it were the answer."""
    env = Cli(tmp_path).env
    child = pexpect.spawn(LTM, ["join", "https://ltm.example.org/v1/invites/abc"], env=env,
                          encoding="utf-8", timeout=scaled(30))  # fmt: skip
    child.expect(r"Enter for none\): ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    after = child.before  # what followed the question on the terminal
    assert child.exitstatus == 1 and after.replace("\r\n", "\n") == "\nltm: aborted\n", after
