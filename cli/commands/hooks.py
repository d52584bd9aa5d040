"""ltm hooks: make resume and save automatic in an agent harness (Claude Code, Codex)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

app = typer.Typer(
    help="Run ltm at the agent's session start, before compaction and when it stops, so the "
    "project's newest packet is resumed and the agent is reminded to save one.",
    no_args_is_help=True,
)


class Harness(StrEnum):
    claude_code = "claude-code"
    codex = "codex"


HarnessArg = Annotated[Harness, typer.Argument(help="The agent harness to configure.")]
ProjectOpt = Annotated[
    bool,
    typer.Option(
        "--project",
        help="This project's settings (.claude/settings.json, .codex/) instead of your user's.",
    ),
]


@app.command("install")
def install(
    harness: HarnessArg,
    project: ProjectOpt = False,
    write: Annotated[
        bool,
        typer.Option("--write", help="Merge the entries into the settings file (others kept)."),
    ] = False,
) -> None:
    """Print the hook entries that run `ltm hook`, or merge them in with --write."""
    from ltm.cli.agents.hooks_install import install as run

    run(harness.value, project=project, write=write)


@app.command("uninstall")
def uninstall(harness: HarnessArg, project: ProjectOpt = False) -> None:
    """Remove exactly the entries `ltm hooks install --write` added."""
    from ltm.cli.agents.hooks_install import uninstall as run

    run(harness.value, project=project)
