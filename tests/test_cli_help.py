"""Every verb's ``--help`` reads as prose: no raw Python type names.

typer prints each parameter's annotation (``--json <bool>``,
``FILE...|- <list[str]>``, ``-t <str>``); ``ltm.cli.start.main`` shows flags bare,
options with a metavar (``TEAM``, ``URL``, ``N``) and arguments by name.
"""

from __future__ import annotations

import re

import pytest
import typer
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
