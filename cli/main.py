"""The ``ltm`` command: every verb wired to its module, one file per verb."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ltm.cli.commands import example, ls, pull, push, resume, rm, save, sensitive, show, validate

app = typer.Typer(
    name="ltm",
    help="Long-term memory for AI coding agents: save a Core Memory Packet at the end of a "
    "session, resume it at the start of the next.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from ltm import __version__

        print(f"ltm {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show full details (tracebacks) on errors.")
    ] = False,
) -> None:
    if debug:
        os.environ["LTM_DEBUG"] = "1"


app.command("save")(save.save)
app.command("push")(push.push)
app.command("ls")(ls.ls)
app.command("show")(show.show)
app.command("pull")(pull.pull)
app.command("rm")(rm.rm)
app.command("resume")(resume.resume)
app.command("example")(example.example)
app.command("validate")(validate.validate)
app.add_typer(sensitive.app, name="sensitive")
