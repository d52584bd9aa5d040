"""The fast path: the plain forms of the most used verbs answer without typer or pydantic.

``ltm.cli.start.entry`` hands ``--version``, ``example``, ``ls``, ``resume``,
``show``, ``search`` and ``log`` to ``ltm.cli.start.fast`` when it recognises their
plain forms; anything else (help, typos, unusual options) goes through the typer commands, which
call the same bodies. These tests run the real ``ltm`` in subprocesses and
check both halves: nothing heavy is imported on the fast path, and the two
paths print the same thing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import Cli

HEAVY = ("typer", "pydantic", "click", "rich", "httpx", "ulid", "re2")
TYPER_PATH = "import sys; from ltm.cli.start.main import run; run(sys.argv[1:])"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path)
    assert cli.ok("save", "-", "--local", stdin=cli.ok("example")).strip()
    return cli


def packet_id(cli: Cli) -> str:
    return json.loads(cli.ok("ls", "--local", "--json"))["packets"][0]["id"]


def through_typer(cli: Cli, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", TYPER_PATH, *args],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["example"],
        ["ls", "--local"],
        ["ls", "--local", "--json", "-n", "5"],
        ["resume", "ID", "--local"],
        ["show", "ID", "--local"],
        ["show", "ID", "--local", "--json"],
        ["show", "PREFIX", "--local"],
        ["search", "readme", "--local"],
        ["search", '"email.md"', "tag:docs", "--local", "--json"],
        ["log", "ID", "--local"],
        ["ls", "--local", "--tag", "docs", "--since", "30d", "--author", "me", "--all"],
    ],
)
def test_plain_forms_import_nothing_heavy(cli: Cli, args: list[str]) -> None:
    full = packet_id(cli)
    args = [full if a == "ID" else full[:12] if a == "PREFIX" else a for a in args]
    assert not {name.split(".")[0] for name in cli.imports(*args)} & set(HEAVY)


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["example"],
        ["example", "--resume"],
        ["show", "ID", "--local"],
        ["show", "ID", "--local", "--json"],
        ["resume", "ID", "--local"],
        ["ls", "--local"],
        ["ls", "--local", "--tag", "docs", "--json"],
        ["search", "email", "--local"],
        ["log", "ID", "--local"],
    ],
)
def test_fast_and_typer_paths_print_the_same(cli: Cli, args: list[str]) -> None:
    full = packet_id(cli)
    args = [full if a == "ID" else a for a in args]
    assert cli.ok(*args) == through_typer(cli, *args)


def test_show_prints_a_summary_and_the_stored_json(cli: Cli) -> None:
    full = packet_id(cli)
    text = cli.ok("show", full[:12], "--local")
    assert text.startswith(f"ID       {full}\n") and "\nNext step\n  " in text
    assert json.loads(cli.ok("show", full, "--local", "--json"))["id"] == full


def test_unusual_forms_still_reach_typer(cli: Cli) -> None:
    # help and mistakes are typer's to answer, with its usage line
    assert "Usage: ltm show" in cli.ok("show", "--help")
    result = cli.run("show", "--local")
    assert result.returncode == 2 and "Missing argument 'ID'" in result.stderr
    line = cli.fails("show", "01NOSUCHPACKET", "--local")
    assert "01NOSUCHPACKET" in line


@pytest.mark.parametrize("verb", sorted(__import__("ltm.cli.start.fast").cli.start.fast.FLAGS_OF))
def test_every_fast_option_is_its_typer_twins(verb: str) -> None:
    """Each option the fast path takes for a verb is declared by that verb's typer command,
    as a flag where the fast path reads a flag and with a value where it reads a value, under
    the same parameter name: the two parsers cannot drift apart."""
    import typer

    from ltm.cli.start import fast
    from ltm.cli.start.main import build

    group = typer.main.get_command(build([verb]))
    command = group.commands[verb]  # type: ignore[attr-defined]
    declared: dict[str, tuple[str | None, bool]] = {}
    for param in command.params:
        for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
            declared[opt] = (param.name, bool(getattr(param, "is_flag", False)))
    for flag in fast.FLAGS_OF[verb]:
        assert flag in declared and declared[flag][1], f"ltm {verb} {flag}: not a typer flag"
    for opt, name in fast.OPTIONS.items():
        if name in fast.VALUES_OF[verb]:
            assert declared.get(opt) == (name, False), (
                f"ltm {verb} {opt}: typer has {declared.get(opt)}"
            )


def test_ids_sharing_a_long_prefix_are_shown_apart_on_both_paths(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    example = json.loads(cli.ok("example"))
    twins = ["01JS5LTWINPREFIX00000000A1", "01JS5LTWINPREFIX00000000B2"]
    for pid in twins:
        cli.ok("save", "-", "--local", stdin=json.dumps({**example, "id": pid}))
    fast = cli.ok("ls", "--local")
    assert fast == through_typer(cli, "ls", "--local")
    assert {line.split()[0] for line in fast.splitlines()} == {pid[:25] for pid in twins}
