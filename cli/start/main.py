"""The ``ltm`` command line: typer parses every verb, one file per verb.

Each verb's module under ``ltm.cli.commands`` declares its options for typer and
calls a plain function that imports no parser (``ltm.cli.packets``,
``ltm.cli.client.send``...). Only the module of the verb being run is imported and
handed to typer (all of them for ``ltm --help`` or an unknown verb): building every
command costs more than running most of them.

What keeps typer cheap to start: help and errors are drawn without rich (plain
text; a usage error is one line), and plain options are coerced without pydantic
(``ltm.cli.start.coercion``).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from importlib import import_module
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from collections.abc import Iterator

    from typer.core import TyperOption

ROOT_HELP = (
    "Long-term memory for AI coding agents: save a Core Memory Packet at the end of a"
    " session, resume it at the start of the next."
)
HOST_HELP = (
    "Talk to this server for this command only (as LTM_HOST=URL does); the default server"
    " stays. Before or after the verb."
)
LOCAL_HELP = "Use the embedded local store even if a server is set (as the verb's --local)."

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
    "profile": ("profile", "profile"),
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
# ``ltm --help`` lists the verbs in these sections, in this order (as gh groups its
# commands); a verb in none of them is listed under "Other commands".
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Packets",
        ("save", "resume", "ls", "show", "search", "log", "edit", "pull", "push", "rm"),
    ),
    ("Agents", ("hooks", "mcp", "example", "validate")),
    (
        "Servers and sign-in",
        ("auth", "logout", "whoami", "profile", "tokens", "approve", "server"),
    ),
    ("Teams and sharing", ("teams", "invite", "join", "share", "unshare", "publish", "unpublish")),
    ("Views and bundles", ("open", "ui", "export", "import")),
    ("Settings and checks", ("config", "sensitive", "completion", "doctor", "conformance")),
)


def _version(value: bool) -> None:
    if value:
        from ltm.cli.packets import print_version

        print_version()
        raise typer.Exit()


def _take_host(value: str | None) -> str | None:
    """``-H URL``: this process talks to that server (every verb honours ``LTM_HOST``)."""
    if value is not None:
        if not value or value.startswith("-"):
            raise typer.BadParameter("needs a server URL: ltm -H URL VERB …")
        os.environ["LTM_HOST"] = value
    return value


Host = Annotated[
    str | None,
    typer.Option("--host", "-H", metavar="URL", help=HOST_HELP, callback=_take_host),
]


def root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show full details (tracebacks) on errors.")
    ] = False,
    host: Host = None,
    local: Annotated[bool, typer.Option("--local", help=LOCAL_HELP)] = False,
) -> None:
    """The options every verb takes, given before it."""
    if debug:
        os.environ["LTM_DEBUG"] = "1"
    if local:
        verb = ctx.invoked_subcommand or ""
        command = ctx.command.get_command(ctx, verb)  # type: ignore[attr-defined]
        if not any(param.name == "local" for param in getattr(command, "params", ())):
            raise typer.BadParameter(f"ltm {verb} has no local store to use", param_hint="--local")
        # The verb's own --local, as if given after it (click's default_map, read when
        # the verb's context is made, after this callback).
        ctx.default_map = {**(ctx.default_map or {}), verb: {"local": True}}


def _option_metavar(self: TyperOption, ctx: Any) -> str | None:
    """An option's value as people name it (``TEAM``, ``URL``), never a flag's type;
    it becomes ``TyperOption``'s method (``_plain_help``), hence ``self``."""
    if self.is_flag or self.count:
        return None
    name = self.metavar or (self.name or "value").upper()
    return name if self.nargs == 1 else f"{name}..."


def _plain_help() -> None:
    """Keep raw Python type names out of ``--help``.

    typer shows each parameter's annotation beside it (``--json <bool>``,
    ``FILE... <list[str]>``, ``-t <str>``): noise to a reader. Flags show nothing,
    options their metavar (or their name in capitals), arguments only their
    metavar, which the name column already shows. Set on typer's classes, in this
    process only.
    """
    from typer.core import TyperArgument, TyperOption

    TyperOption.display_type_rich = _option_metavar  # type: ignore[method-assign]
    TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]


class Root(TyperGroup):
    """The ``ltm`` group: its verbs listed in sections, as ``gh`` lists its commands.

    A write to a pipe whose reader went away (``ltm ls | head -1``, ``ltm --help | head
    -1``) comes out of it as ``ReaderGone``: typer catches a ``BrokenPipeError`` from
    parsing (help, ``--version``) or from the verb and exits 1 without a word.
    """

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _reader_gone_unmasked():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _reader_gone_unmasked():
            return super().invoke(ctx)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        names = [n for n in self.list_commands(ctx) if not self.commands[n].hidden]
        if not names:
            return
        for title, verbs in _sections(names):
            # The whole first sentence, wrapped by the formatter, never cut with "...".
            rows = [(n, self.commands[n].get_short_help_str(limit=1000)) for n in verbs]
            with formatter.section(_heading(title)):
                formatter.write_dl(rows)


@contextmanager
def _reader_gone_unmasked() -> Iterator[None]:
    from ltm.cli.errors import ReaderGone

    try:
        yield
    except BrokenPipeError:
        raise ReaderGone from None


def _sections(names: list[str]) -> Iterator[tuple[str, list[str]]]:
    placed: set[str] = set()
    for title, verbs in SECTIONS:
        shown = [v for v in verbs if v in names]
        placed.update(shown)
        if shown:
            yield title, shown
    rest = [n for n in names if n not in placed]
    if rest:
        yield "Other commands", rest


def _heading(title: str) -> str:
    from ltm.cli.terminal.output import bold

    return bold(title)


def _host_everywhere(command: Any, option: Any = None) -> None:
    """``-H URL`` after the verb too (``ltm ls -t core -H URL``): the root's option,
    hidden, on every verb and subcommand (one parameter object: click keeps values in
    the context, never on the parameter)."""
    if option is None:
        carrier = typer.Typer()

        @carrier.command()
        def carry(host: Host = None) -> None:
            """Never run: it only declares the option."""

        option = typer.main.get_command(carrier).params[0]
        option.hidden, option.expose_value = True, False
    for sub in getattr(command, "commands", {}).values():
        if getattr(sub, "commands", None):
            _host_everywhere(sub, option)
        elif not any(param.name == "host" for param in sub.params):
            sub.params.append(option)


# The root's options that take a value: the word after them is not the verb.
VALUED = ("-H", "--host")


def _verb(args: list[str]) -> str | None:
    """The verb ``args`` name (the first word that is neither an option nor a root
    option's value), to build typer with that verb only."""
    taken = False
    for arg in args:
        if taken:
            taken = False
        elif arg in VALUED:
            taken = True
        elif not arg.startswith("-"):
            return arg
    return None


def build(args: list[str]) -> Any:
    """The click command for ``ltm ARGS``: the root group with the verb ``args`` names."""
    from ltm.cli.start.coercion import install

    install()
    _plain_help()
    app = typer.Typer(
        name="ltm",
        cls=Root,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback(help=ROOT_HELP)(root)
    verb = _verb(args)
    if verb is None and "--version" in args:
        wanted = []  # answered by its eager callback, before any verb is looked at
    elif verb in COMMANDS or verb in GROUPS:
        wanted = [verb]
    else:  # the help, or an unknown verb (whose error suggests the nearest)
        wanted = [*COMMANDS, *GROUPS]
    for name in wanted:
        if name in COMMANDS:
            module, function = COMMANDS[name]
            command = getattr(import_module(f"ltm.cli.commands.{module}"), function)
            app.command(name)(command)
        else:
            app.add_typer(import_module(f"ltm.cli.commands.{GROUPS[name]}").app, name=name)
    command = typer.main.get_command(app)
    _host_everywhere(command)
    return command


INTERRUPTED = 130  # 128 + SIGINT, the status a shell gives a command Ctrl-C ended


def run(args: list[str]) -> None:
    """Parse ``args`` and run the verb; a usage error is one line (``CliError``, exit 2)."""
    from typer import Abort
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

    from ltm.cli.errors import CliError

    command = build(args)
    try:
        status = command.main(args=args, prog_name="ltm", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # a bare ``ltm`` or ``ltm teams``: the help, exit 2
        print(exc.ctx.get_help())
        raise SystemExit(2) from None
    except UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ltm"
        message = " ".join(exc.format_message().split())
        raise CliError(f"{message} (see: {where} --help)", exit_code=exc.exit_code) from None
    except ClickException as exc:
        raise CliError(" ".join(exc.format_message().split()), exit_code=exc.exit_code) from None
    except Abort as exc:  # Ctrl-C or Ctrl-D at a question
        print(file=sys.stderr)  # ends the question's line
        if isinstance(exc.__context__, KeyboardInterrupt):
            raise KeyboardInterrupt from None  # as anywhere else: one line, exit 130
        raise CliError("aborted", exit_code=1) from None
    if status == INTERRUPTED:  # typer's answer to Ctrl-C in a verb: exit 130, without a word
        raise KeyboardInterrupt
    if isinstance(status, int) and status:
        raise SystemExit(status)
