"""ltm hooks: make resume and save automatic in an agent harness (Claude Code, Codex,
Cursor, GitHub Copilot, Gemini CLI)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

app = typer.Typer(
    help="Run ltm at the agent's session start, at each prompt, before compaction and when "
    "it stops, so the project's newest packet is resumed, a matching one is recalled and the "
    "agent is reminded to save one.",
    no_args_is_help=True,
)


class Harness(StrEnum):
    claude_code = "claude-code"
    codex = "codex"
    cursor = "cursor"
    copilot = "copilot"
    gemini = "gemini"


HarnessArg = Annotated[
    Harness,
    typer.Argument(
        metavar="HARNESS", help=f"The agent harness to configure: {', '.join(Harness)}."
    ),
]
ProjectOpt = Annotated[
    bool,
    typer.Option(
        "--project",
        help="This project's settings (.claude/, .codex/, .cursor/, .github/hooks/, .gemini/) "
        "instead of your user's.",
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
    recall: Annotated[
        bool | None,
        typer.Option(
            "--recall/--no-recall",
            help="Point the agent at a matching packet when a prompt recalls one (on by "
            "default where the harness can add context to a prompt; Cursor cannot).",
            show_default=False,
        ),
    ] = None,
    all_scopes: Annotated[
        bool,
        typer.Option(
            "--recall-all-scopes",
            help="Recall from your teams' packets of this project too, not only your own.",
        ),
    ] = False,
    mcp: Annotated[
        bool | None,
        typer.Option(
            "--mcp/--no-mcp",
            help="With --write, also add the ltm MCP tools to the harness when it lacks them"
            " (default: ask on a terminal).",
            show_default=False,
        ),
    ] = None,
    team: Annotated[
        list[str] | None,
        typer.Option(
            "-t",
            "--team",
            metavar="TEAM",
            help="Session start resumes the newest packet of the project in your own scope"
            " or this team's, whichever is newer (repeat for more teams).",
        ),
    ] = None,
) -> None:
    """Print the hook entries that run `ltm hook`, or merge them in with --write."""
    from ltm.cli.agents.hooks_install import install as run

    run(
        harness.value,
        project=project,
        write=write,
        recall=recall,
        all_scopes=all_scopes,
        mcp=mcp,
        teams=tuple(dict.fromkeys(team or ())),
    )


@app.command("uninstall")
def uninstall(
    harness: HarnessArg,
    project: ProjectOpt = False,
    write: Annotated[
        bool, typer.Option("--write", help="Remove them (without it: say what would go).")
    ] = False,
) -> None:
    """Say which entries `ltm hooks install --write` added, or remove exactly those with
    --write."""
    from ltm.cli.agents.hooks_install import uninstall as run

    run(harness.value, project=project, write=write)
