"""Tab completion: the real ``ltm`` answering each shell's completion request in a subprocess
(bash's ``COMP_WORDS``, zsh's and fish's ``_TYPER_COMPLETE_ARGS``), a real bash running the
installed script, ``ltm completion install``, and no cost to any other verb."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import Cli
from timing import scaled

from ltm.cli.commands.config_cmd import KEYS

BIN = str(Path(sys.executable).parent)
TEAMS = ["core", "crew", "docs"]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """Someone with two local packets and three teams recorded on two servers."""
    cli = Cli(tmp_path / "me")
    cli.env["HOME"] = str(tmp_path / "home")
    cli.env.pop("XDG_DATA_HOME", None)
    cli.env.pop("XDG_CONFIG_HOME", None)
    for goal in ("First plan", "Second plan: use `$(touch owned)` and 'quotes' \"too\""):
        cli.ok("save", "-", "--local", stdin=json.dumps({"goal": goal, "next_step": "Go on."}))
    cli.config.mkdir(parents=True, exist_ok=True)
    hosts = {
        "https://one.example": {"token": "ltm_one", "teams": ["core", "crew"]},
        "https://two.example": {"token": "ltm_two", "teams": ["docs", "bad;name"]},
    }
    (cli.config / "hosts.json").write_text(json.dumps({"version": 1, "hosts": hosts}))
    return cli


def ids(cli: Cli) -> list[str]:
    return [row["id"] for row in json.loads(cli.ok("ls", "--local", "--json"))["packets"]]


def bash(cli: Cli, line: str) -> list[str]:
    """What ``ltm`` answers bash's completion request for ``line`` (the cursor at its end)."""
    words = line.split(" ")
    out = cli.ok(COMP_WORDS=line, COMP_CWORD=str(len(words) - 1), _LTM_COMPLETE="complete_bash")
    return out.splitlines()


def typed(cli: Cli, shell: str, line: str, **env: str) -> str:
    return cli.ok(_TYPER_COMPLETE_ARGS=line, _LTM_COMPLETE=f"complete_{shell}", **env)


def test_bash_completes_verbs_options_teams_and_packet_ids(cli: Cli) -> None:
    assert "edit" in bash(cli, "ltm ed") and "completion" in bash(cli, "ltm comp")
    assert bash(cli, "ltm ls --ta") == ["--tag"]
    assert bash(cli, "ltm ls -t ") == TEAMS  # a name that is no team name is never offered
    assert bash(cli, "ltm ls -t c") == ["core", "crew"]
    assert bash(cli, "ltm teams members d") == ["docs"]
    newest, older = ids(cli)
    assert bash(cli, "ltm show ") == [newest, older]
    assert bash(cli, f"ltm show {older[:-2]}") == [older]
    assert bash(cli, f"ltm edit {newest[:-2]}") == [newest]
    for line in ("ltm resume ", "ltm open ", "ltm push --from-local "):
        assert bash(cli, line) == [newest, older], line


def test_settings_verbs_complete_their_names(cli: Cli) -> None:
    assert bash(cli, "ltm config set ") == list(KEYS)
    assert bash(cli, "ltm config get t") == ["timeout"]
    assert bash(cli, "ltm completion install z") == ["zsh"]
    cli.ok("sensitive", "add", "corp-host", r"corp\.example\.net")
    cli.ok("sensitive", "add", "quote", "it's")
    assert bash(cli, "ltm sensitive rm ") == ["corp-host", "quote"]
    zsh = typed(cli, "zsh", "ltm sensitive rm ")
    assert '"corp-host":"corp .example .net"' in zsh and '"quote":"it s"' in zsh


def test_completing_never_migrates_a_store_an_older_ltm_left(tmp_path: Path) -> None:
    """The next verb migrates it, in front of the person; a Tab press would hold the shell
    up for it (or for the busy timeout, while another process migrates it)."""
    import sqlite3

    from test_sqlite_upgrade import RELEASES, released_store

    cli = Cli(tmp_path / "me")
    store = Path(cli.env["LTM_DATA_DIR"]) / "ltm.db"
    store.parent.mkdir(parents=True, mode=0o700)
    released_store(store, RELEASES["schema 10"]())
    assert not any(bash(cli, "ltm show "))  # no candidate (bash reads one empty line)
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 10


def test_zsh_gets_descriptions_it_can_eval_safely(cli: Cli) -> None:
    out = typed(cli, "zsh", "ltm show ")
    assert out.startswith("_arguments '*: :((") and ids(cli)[0] in out
    assert "First plan" in out and "Second plan" in out
    assert not {"$", "`", "'", ";", "("} & set(out.split(":((", 1)[1].rsplit("))'", 1)[0])
    assert '"--team":"Use this team' in typed(cli, "zsh", "ltm ls --te")


def test_fish_gets_one_candidate_per_line(cli: Cli) -> None:
    out = typed(cli, "fish", "ltm ls --", _TYPER_COMPLETE_FISH_ACTION="get-args")
    lines = out.splitlines()
    assert "--here\tOnly the packets of the project in this directory" in out
    assert all(line.startswith("--") for line in lines), lines  # no description spills over
    teams = typed(cli, "fish", "ltm push -t ", _TYPER_COMPLETE_FISH_ACTION="get-args")
    assert teams.splitlines() == TEAMS


def test_a_real_bash_completes_with_the_printed_script(cli: Cli, tmp_path: Path) -> None:
    bash_exe = shutil.which("bash")
    if bash_exe is None:
        pytest.skip("bash is not installed")
    script = tmp_path / "ltm.bash"
    script.write_text(cli.ok("completion", "bash"))
    env = {**cli.env, "PATH": f"{BIN}:{cli.env.get('PATH', '')}"}
    program = (
        f". {script}\n"
        "COMP_WORDS=(ltm ls -t c); COMP_CWORD=3\n"
        "_ltm_completion ltm\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(
        [bash_exe, "--norc", "--noprofile", "-c", program],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["core", "crew"]


def test_the_scripts_hook_into_each_shell(cli: Cli) -> None:
    assert "complete -o default -F _ltm_completion ltm" in cli.ok("completion", "bash")
    assert "compdef _ltm_completion ltm" in cli.ok("completion", "zsh")
    assert cli.ok("completion", "fish").startswith("complete --command ltm")


def test_install_writes_the_script_once_per_shell(cli: Cli, tmp_path: Path) -> None:
    home = Path(cli.env["HOME"])
    first = cli.run("completion", "install", "bash")
    assert first.returncode == 0, first.stderr
    script = home / ".local/share/bash-completion/completions/ltm"
    assert script.read_text() == cli.ok("completion", "bash")
    assert f"sourced from {home / '.bashrc'}" in first.stderr
    cli.ok("completion", "install", "bash")
    assert (home / ".bashrc").read_text().count(str(script)) == 2  # one line: [ -r F ] && . F

    zsh = cli.run("completion", "install", SHELL="/usr/bin/zsh")  # the shell from $SHELL
    assert zsh.returncode == 0 and "installed zsh completion" in zsh.stderr
    assert "compinit" in (home / ".zshrc").read_text()
    fish = cli.run("completion", "install", "fish")
    assert fish.returncode == 0 and (home / ".config/fish/completions/ltm.fish").is_file()
    assert not (home / ".config/fish/config.fish").exists()  # fish autoloads it

    assert "choose bash, zsh or fish" in cli.fails("completion", "install", "tcsh", code=2)
    assert "name it" in cli.fails("completion", "install", code=2, SHELL="/bin/tcsh")


def test_install_into_a_start_up_file_it_cannot_write_says_one_line(cli: Cli) -> None:
    home = Path(cli.env["HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / ".bashrc").symlink_to(home / "dotfiles-not-cloned" / "bashrc")  # dangling
    line = cli.fails("completion", "install", "bash")
    script = home / ".local/share/bash-completion/completions/ltm"
    assert f"cannot add to {home / '.bashrc'} (No such file or directory)" in line
    assert line.endswith(
        f"add this line to it yourself: [ -r '{script}' ] && . '{script}'  # ltm tab completion"
    )
    assert script.is_file()  # the script itself is in place
    (home / ".zshrc").mkdir()
    assert "cannot add to" in cli.fails("completion", "install", "zsh")


def test_install_appends_to_a_symlinked_start_up_file_not_in_utf8(cli: Cli) -> None:
    home = Path(cli.env["HOME"])
    (home / "dotfiles").mkdir(parents=True)
    kept = b"alias ll='ls -l'  # caf\xe9, in Latin-1\n"
    (home / "dotfiles" / "bashrc").write_bytes(kept)
    (home / ".bashrc").symlink_to(home / "dotfiles" / "bashrc")
    cli.ok("completion", "install", "bash")
    cli.ok("completion", "install", "bash")
    assert (home / ".bashrc").is_symlink()
    written = (home / "dotfiles" / "bashrc").read_bytes()
    assert written.startswith(kept) and written.count(b"# ltm tab completion") == 1


def test_no_other_verb_loads_completion(cli: Cli) -> None:
    # typer loads its own completion module with itself; ours (and the packet ids it
    # reads) only for a shell's completion request.
    ours = "ltm.cli.commands.completion"
    for args in (["ls", "--local"], ["show", ids(cli)[0], "--local"], ["--version"]):
        assert ours not in cli.imports(*args), args
    assert ours not in cli.imports("sensitive", "ls")
