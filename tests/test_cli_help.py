"""Every verb's ``--help`` reads as prose: no raw Python type names.

typer prints each parameter's annotation (``--json <bool>``,
``FILE...|- <list[str]>``, ``-t <str>``); ``ltm.cli.start.main`` shows flags bare,
options with a metavar (``TEAM``, ``URL``, ``N``) and arguments by name.

The top-level help (``ltm --help``, ``-h``, a bare ``ltm``) is drawn without typer
(``ltm.cli.start.help``): the tests at the end run typer's for real and hold the two
byte-equal, at several widths, with colour and without.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer
from clikit import LTM
from typer.testing import CliRunner

from ltm.cli.start.main import COMMANDS, GROUPS, build

RAW_TYPE = re.compile(r"<(bool|str|int|float|path|list\[[^\]]*\]|[a-z]+ range)>|\blist\[str\]")


def _help(args: list[str]) -> str:
    result = CliRunner().invoke(build(args), [*args, "--help"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    return result.output


def _every_command() -> list[list[str]]:
    found: list[list[str]] = [[]]
    found += [[verb] for verb in COMMANDS]
    for group in GROUPS:
        found.append([group])
        click_group = typer.main.get_command(build([group])).commands[group]  # type: ignore[attr-defined]
        found += [[group, sub] for sub in click_group.commands]
    return found


@pytest.mark.parametrize("args", _every_command(), ids=lambda a: " ".join(a) or "ltm")
def test_help_shows_no_raw_type_names(args: list[str]) -> None:
    text = _help(args)
    assert not RAW_TYPE.search(text), RAW_TYPE.search(text)
    assert "Usage: ltm" in text


def test_options_with_values_show_what_goes_there() -> None:
    assert re.search(r"--limit\s+-n\s+N \[1<=x<=1000\]", _help(["ls"]))
    assert re.search(r"--team\s+-t\s+TEAM", _help(["ls"]))
    assert re.search(r"--host\s+-H\s+URL", _help([]))
    assert re.search(r"--display\s+NAME", _help(["join"]))
    assert re.search(r"--json\s+One JSON", _help(["validate"]))  # a flag: nothing between


# -- the top-level help, without typer ---------------------------------------------

TYPER_PATH = "import sys; from ltm.cli.start.main import run; run(sys.argv[1:])"
# What decides how rich draws: the width, whether it is a terminal, which colours. The
# variables are cleared first, so the machine running the tests does not choose.
DRAWN = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "PY_COLORS")
DRAWN += ("TERMINAL_WIDTH", "GITHUB_ACTIONS", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
SETTINGS = {
    "piped": {},
    "narrow": {"COLUMNS": "52"},
    "wide": {"COLUMNS": "160"},
    "very wide": {"COLUMNS": "400"},
    "typer's width": {"TERMINAL_WIDTH": "100"},
    "colour": {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "100"},
    "true colour": {"FORCE_COLOR": "1", "COLORTERM": "truecolor"},
    "no colour": {"FORCE_COLOR": "1", "NO_COLOR": "1", "TERM": "xterm"},
    "dumb terminal": {"FORCE_COLOR": "1", "TERM": "dumb"},
    "ci": {"GITHUB_ACTIONS": "true"},
}
COLOURED = {"colour", "true colour", "no colour", "ci"}  # NO_COLOR keeps bold and dim


def _drawn(argv: list[str], setting: dict[str, str]) -> tuple[int, bytes, bytes]:
    env = {k: v for k, v in os.environ.items() if k not in DRAWN and not k.startswith("LTM_")}
    out = subprocess.run(argv, env={**env, **setting}, capture_output=True, timeout=60)
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize("args", [["--help"], ["-h"], []], ids=["--help", "-h", "ltm"])
@pytest.mark.parametrize("setting", SETTINGS, ids=list(SETTINGS))
def test_top_level_help_is_typers_byte_for_byte(args: list[str], setting: str) -> None:
    fast = _drawn([LTM, *args], SETTINGS[setting])
    assert fast == _drawn([sys.executable, "-c", TYPER_PATH, *args], SETTINGS[setting])
    assert fast[0] == (0 if args else 2) and b"save" in fast[1]
    assert (b"\x1b[" in fast[1]) == (setting in COLOURED)


def _on_a_terminal(argv: list[str], columns: int) -> bytes:
    """What ``argv`` draws on a pseudo-terminal ``columns`` wide (rich asks the terminal)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in DRAWN and not k.startswith("LTM_")}
    proc = subprocess.Popen(argv, stdout=follower, stderr=follower, env={**env, "TERM": "xterm"})
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process is gone and everything it wrote was read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    return drawn


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
@pytest.mark.parametrize("columns", [60, 132])
def test_top_level_help_on_a_terminal_is_typers(columns: int) -> None:
    fast = _on_a_terminal([LTM, "--help"], columns)
    assert fast == _on_a_terminal([sys.executable, "-c", TYPER_PATH, "--help"], columns)
    assert b"\x1b[" in fast and b"save" in fast


def test_the_help_table_names_every_verb_in_order() -> None:
    from ltm.cli.start.help import VERBS

    assert [verb for verb, _ in VERBS] == [*COMMANDS, *GROUPS]


def test_top_level_help_imports_no_parser() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", LTM, "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert not {name.split(".")[0] for name in names} & {"typer", "click", "pydantic"}
    assert not {name for name in names if name.startswith("ltm.cli.commands")}
