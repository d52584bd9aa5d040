"""The ``ltm`` command: every verb wired to its module, one file per verb.

Only the module of the verb being run is imported and handed to typer (all of
them for ``ltm --help`` or an unknown verb): building every command costs
more than running most of them, and a CLI is judged by how fast it answers.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import Annotated, Any

import typer

from ltm.cli.start.help import DEBUG_HELP, HOST_HELP, ROOT_HELP, VERSION_HELP

# verb -> (module under ltm.cli.commands, function) ...
COMMANDS: dict[str, tuple[str, str]] = {
    "save": ("save", "save"),
    "push": ("push", "push"),
    "ls": ("ls", "ls"),
    "search": ("search", "search"),
    "log": ("log", "log"),
    "show": ("show", "show"),
    "edit": ("edit", "edit"),
    "pull": ("pull", "pull"),
    "rm": ("rm", "rm"),
    "resume": ("resume", "resume"),
    "example": ("example", "example"),
    "validate": ("validate", "validate"),
    "auth": ("auth", "auth"),
    "logout": ("logout", "logout"),
    "whoami": ("whoami", "whoami"),
    "invite": ("invite", "invite"),
    "join": ("join", "join"),
    "approve": ("approve", "approve"),
    "publish": ("publish", "publish"),
    "unpublish": ("publish", "unpublish"),
    "share": ("share", "share"),
    "unshare": ("share", "unshare"),
    "open": ("open_cmd", "open_view"),
    "ui": ("ui", "ui"),
    "export": ("export", "export"),
    "import": ("import_", "import_"),
    "doctor": ("doctor", "doctor"),
    "conformance": ("conformance", "conformance"),
}
# ... and command groups: name -> module under ltm.cli.commands holding a typer ``app``.
GROUPS: dict[str, str] = {
    "sensitive": "sensitive",
    "server": "server",
    "teams": "teams",
    "config": "config_cmd",
    "mcp": "mcp",
    "tokens": "tokens",
    "hooks": "hooks",
    "completion": "completion",
}


def _version(value: bool) -> None:
    if value:
        from ltm.cli.start.fast import print_version

        print_version()
        raise typer.Exit()


def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help=VERSION_HELP),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help=DEBUG_HELP)] = False,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            "-H",
            metavar="URL",
            help=HOST_HELP,
        ),
    ] = None,
) -> None:
    """The options every verb takes (its help text is ``ROOT_HELP``)."""
    if debug:
        os.environ["LTM_DEBUG"] = "1"
    if host:  # ltm.cli.start.entry takes -H before typer runs; this serves direct callers
        os.environ["LTM_HOST"] = host


def _option_metavar(option: Any, ctx: Any) -> str | None:
    """An option's value as people name it (``TEAM``, ``URL``), never a flag's type."""
    if option.is_flag or option.count:
        return None
    name = option.metavar or (option.name or "value").upper()
    return name if option.nargs == 1 else f"{name}..."


def _plain_help() -> None:
    """Keep raw Python type names out of ``--help``.

    typer shows each parameter's annotation beside it (``--json <bool>``,
    ``FILE... <list[str]>``, ``-t <str>``): noise to a reader. Flags show
    nothing, options their metavar (or their name in capitals), arguments only
    their metavar, which the name column already shows. Set on typer's classes,
    in this process only, and only when the parser is built (never on the fast path).
    """
    from typer.core import TyperArgument, TyperOption

    TyperOption.display_type_rich = _option_metavar  # type: ignore[method-assign]
    TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]


def build(args: list[str]) -> typer.Typer:
    app = typer.Typer(
        name="ltm",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    _plain_help()
    app.callback(help=ROOT_HELP)(root)
    verb = next((a for a in args if not a.startswith("-")), None)
    wanted = [verb] if verb in COMMANDS or verb in GROUPS else [*COMMANDS, *GROUPS]
    for name in wanted:
        if name in COMMANDS:
            module, function = COMMANDS[name]
            command = getattr(import_module(f"ltm.cli.commands.{module}"), function)
            app.command(name)(command)
        else:
            app.add_typer(import_module(f"ltm.cli.commands.{GROUPS[name]}").app, name=name)
    return app


def run(args: list[str]) -> None:
    build(args)(args=args, prog_name="ltm")
