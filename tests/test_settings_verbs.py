"""The settings verbs as a person runs them: ``ltm config`` and ``ltm sensitive`` on
settings.toml and config.toml, the real ``ltm`` in subprocesses, one home per test."""

from __future__ import annotations

import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from clikit import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "me")


def test_settings_changed_at_once_keep_every_change(cli: Cli) -> None:
    """Each verb rewrites settings.toml whole from what it read: without the config dir's
    lock, writers running together put back what they read and drop the others' change."""
    adds = [("sensitive", "add", f"k{n}", f"pattern{n}") for n in range(6)]
    sets = [("config", "set", "timeout", "7"), ("config", "set", "browser", "false")]
    with ThreadPoolExecutor(max_workers=len(adds) + len(sets)) as pool:
        results = list(pool.map(lambda args: cli.run(*args), adds + sets))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    saved = tomllib.loads((cli.config / "settings.toml").read_text())
    assert sorted(p["kind"] for p in saved["sensitive"]) == [f"k{n}" for n in range(6)]
    assert saved["timeout"] == 7 and saved["browser"] is False
    assert "timeout = 7\n" in (cli.config / "settings.toml").read_text()  # as typed, not 7.0


@pytest.mark.parametrize("regex", [".+", "[a-z]{3}", "the"])
def test_a_pattern_that_matches_ordinary_text_is_warned_of(cli: Cli, regex: str) -> None:
    """Such a pattern blocks every save: said when it is added, not at the next save."""
    added = cli.run("sensitive", "add", "broad", regex)
    assert added.returncode == 0 and "matches ordinary text" in added.stderr
    assert "ltm sensitive rm broad" in added.stderr
    narrow = cli.run("sensitive", "add", "acme-token", "acme_[a-z0-9]{20}")
    assert narrow.returncode == 0 and "warning" not in narrow.stderr


def test_a_pattern_added_again_under_its_name_says_it_replaced_one(cli: Cli) -> None:
    assert "added pattern dup" in cli.run("sensitive", "add", "dup", "first").stderr
    assert "replaced pattern dup" in cli.run("sensitive", "add", "dup", "second").stderr
    assert cli.ok("sensitive", "ls") == "dup\tsecond\n"


@pytest.mark.parametrize("verb", [("ls",), ("add", "k", "x"), ("rm", "k"), ("test", "text")])
def test_a_hand_broken_sensitive_key_is_named_not_a_crash(cli: Cli, verb: tuple[str, ...]) -> None:
    cli.config.mkdir(parents=True, mode=0o700)
    (cli.config / "settings.toml").write_text('sensitive = "corp.example.net"\n')
    line = cli.fails("sensitive", *verb)
    assert str(cli.config / "settings.toml") in line and "ltm sensitive add" in line
    # The same line from a save, which scans with the user's patterns.
    assert cli.fails("save", "-", stdin='{"goal": "g", "next_step": "n"}') == line


def test_sensitive_ls_escapes_what_a_hand_edited_file_holds(cli: Cli) -> None:
    """A pattern written into settings.toml by hand may hold a newline or an escape
    sequence (TOML's \\n, \\u001b): listed, it is one line, and nothing reaches the
    terminal raw."""
    cli.config.mkdir(parents=True, mode=0o700)
    (cli.config / "settings.toml").write_text(
        '[[sensitive]]\nkind = "two-lines"\nregex = "a\\nb\\u001b]0;title\\u0007"\n'
    )
    listed = cli.ok("sensitive", "ls")
    assert listed.count("\n") == 1 and "\x1b" not in listed and "\x07" not in listed
    assert listed.startswith("two-lines\ta")


# A token of the user's own, for a pattern of their own: the scanner has no rule for it.
OWN_TOKEN = "acme_" + "q7w3e9r1" + "t5y2u8i4o6p0"


def test_a_token_your_own_pattern_finds_is_never_echoed(cli: Cli) -> None:
    """A user's pattern may describe a token of theirs: a report names the field and the
    kind and shows the match's head, as for the built-in secrets, on the terminal too."""
    cli.ok("sensitive", "add", "acme-token", "acme_[a-z0-9]{20}")
    tested = cli.run("sensitive", "test", f"use {OWN_TOKEN} here")
    assert tested.returncode == 1 and tested.stdout == "acme-token: acme_q…\n"
    saved = cli.run("save", "-", stdin=f'{{"goal": "use {OWN_TOKEN}", "next_step": "go"}}')
    assert saved.returncode == 1 and "goal/acme-token: acme_q…" in saved.stderr
    assert OWN_TOKEN[6:] not in saved.stdout + saved.stderr


@pytest.mark.parametrize(
    "verb", [("config", "get"), ("config", "set", "host", "h.example"), ("ls",)]
)
def test_a_config_toml_that_is_not_toml_is_named_with_its_line_and_the_way_out(
    cli: Cli, verb: tuple[str, ...]
) -> None:
    cli.config.mkdir(parents=True, mode=0o700)
    (cli.config / "config.toml").write_text('host = "https://ltm.example.org"\nuser = \n')
    line = cli.fails(*verb)
    assert str(cli.config / "config.toml") in line and "line 2" in line
    assert line.endswith("correct it in an editor, or move it aside and set again what it held")


def test_a_host_that_is_not_a_string_is_refused_not_taken_for_the_local_store(cli: Cli) -> None:
    """The reference refuses such a file; taken for no host, saves went to the local store
    of a person who meant them for their server."""
    cli.config.mkdir(parents=True, mode=0o700)
    (cli.config / "config.toml").write_text("host = 5\n")
    line = cli.fails("ls")
    assert f"host = '5' in {cli.config / 'config.toml'} is not a server URL" in line
    cli.ok("config", "set", "host", "https://ltm.example.org")  # the way out it names
    assert cli.ok("config", "get", "host") == "https://ltm.example.org\n"


def test_a_plain_http_default_server_beyond_this_machine_is_warned_of(cli: Cli) -> None:
    """As ltm auth warns: every command since sends the token to it in the clear."""
    far = cli.run("config", "set", "host", "http://ltm.example.org")
    assert far.returncode == 0
    assert "warning: http://ltm.example.org is plain HTTP; the token travels unencrypted" in (
        far.stderr
    )
    near = cli.run("config", "set", "host", "http://127.0.0.1:8080")
    assert near.returncode == 0 and "warning" not in near.stderr


def test_the_reference_clis_list_and_path_verbs(cli: Cli) -> None:
    cli.ok("config", "set", "user", "sam")
    assert cli.ok("config", "list") == cli.ok("config", "get")
    assert "user=sam\n" in cli.ok("config", "list")
    assert cli.ok("config", "path") == f"{cli.config / 'config.toml'}\n"


def test_a_bad_timeout_is_named_with_where_it_was_set(cli: Cli) -> None:
    """Every request stops on it: the line says which of the two places to fix."""
    env = {"LTM_HOST": "http://127.0.0.1:9", "LTM_TOKEN": "ltm_" + "a" * 32}
    cli.config.mkdir(parents=True, mode=0o700)
    (cli.config / "settings.toml").write_text('timeout = "abc"\n')
    line = cli.fails("ls", **env)
    assert line == (
        f"ltm: timeout must be a number of seconds, got 'abc', in {cli.config / 'settings.toml'}"
        " (fix: ltm config set timeout SECONDS)"
    )
    (cli.config / "settings.toml").unlink()
    line = cli.fails("ls", LTM_TIMEOUT="-5", **env)
    assert line.endswith("got '-5', in LTM_TIMEOUT")


def test_a_setting_its_environment_variable_overrides_says_so(cli: Cli) -> None:
    """ltm config get and every verb take the variable first: a change that seemed to do
    nothing is said as such."""
    said = cli.run("config", "set", "host", "https://b.example", LTM_HOST="https://a.example")
    assert "note: LTM_HOST=https://a.example overrides it in this environment" in said.stderr
    said = cli.run("config", "set", "timeout", "5", LTM_TIMEOUT="30")
    assert "note: LTM_TIMEOUT=30 overrides it in this environment" in said.stderr
    assert "note" not in cli.run("config", "set", "timeout", "5").stderr


def test_a_pattern_or_value_starting_with_a_dash_is_taken_as_given(cli: Cli) -> None:
    """-----BEGIN and --password= are what one blocks; click read them as unknown options."""
    cli.ok("sensitive", "add", "pem-head", "-----BEGIN")
    cli.ok("sensitive", "add", "pw-flag", r"--password=\S+")
    assert cli.ok("sensitive", "ls") == "pem-head\t-----BEGIN\npw-flag\t--password=\\S+\n"
    tested = cli.run("sensitive", "test", "--password=hunter22")
    assert tested.returncode == 1 and "pw-flag: --pa…\n" in tested.stdout
    said = "ltm: timeout must be more than 0 and at most 600 seconds, got '-1'"
    assert cli.fails("config", "set", "timeout", "-1", code=2) == said
    assert "Usage: ltm sensitive add" in cli.ok("sensitive", "add", "--help")


def test_the_text_to_test_can_come_on_standard_input(cli: Cli) -> None:
    """A real secret given as an argument lands in the shell's history."""
    assert cli.run("sensitive", "test", stdin=f"use {OWN_TOKEN}").returncode == 0  # no rule yet
    cli.ok("sensitive", "add", "acme-token", "acme_[a-z0-9]{20}")
    tested = cli.run("sensitive", "test", stdin=f"line one\nuse {OWN_TOKEN}\n")
    assert tested.returncode == 1 and tested.stdout == "acme-token: acme_q…\n"
    assert cli.run("sensitive", "test", stdin="nothing here").returncode == 0
