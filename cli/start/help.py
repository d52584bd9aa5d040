"""``ltm --help`` (and a bare ``ltm``) without building every typer command.

typer's top-level help imports every verb's module to read one line of each, then
typer, click and rich's Markdown and traceback machinery: 8-9 times a bare
``python -c pass``. Here the same screen is drawn from a table, with rich itself
and the very calls typer's ``rich_utils.rich_format_help`` makes for a group (its
console, theme, highlighters, tables and panels), so the width, the colours and
the wrapping follow the same environment in the same way.

``tests/test_cli_help.py`` renders typer's help for real, at several widths, with
and without colour, and holds this one byte-equal to it: a verb added, renamed or
described anew without updating ``VERBS`` fails there. ``main`` takes the root's
own help texts from here, so they are written once.
"""

from __future__ import annotations

import os
import sys

ROOT_HELP = (
    "Long-term memory for AI coding agents: save a Core Memory Packet at the end of a"
    " session, resume it at the start of the next."
)
VERSION_HELP = "Show the version."
DEBUG_HELP = "Show full details (tracebacks) on errors."
HOST_HELP = (
    "Talk to this server for this command only (as LTM_HOST=URL does); the default server stays."
)
USAGE = "Usage: ltm [OPTIONS] COMMAND [ARGS]..."
# The root's options as typer shows them: long name, short name, metavar, help.
OPTIONS = (
    ("--version", "", "", VERSION_HELP),
    ("--debug", "", "", DEBUG_HELP),
    ("--host", "-H", "URL", HOST_HELP),
    ("--help", "-h", "", "Show this message and exit."),
)
# Every verb in the order ``main`` adds them, with the first paragraph of its help.
VERBS = (
    ("save", "Save a packet. A missing id, created_at or ltm_version is filled in for you."),
    ("push", "Push a complete packet (id, created_at and ltm_version included) as it is."),
    ("ls", "List packets: id, age and goal."),
    ("search", "Search packets: ranked, with where each matched and a short snippet."),
    ("log", "Show the thread that led to a packet: id, age, goal and next step, one line each."),
    ("show", "Show a packet: a readable summary, or its JSON with --json."),
    (
        "edit",
        "Edit a packet in $EDITOR; saved as a new packet continuing it, checked as save checks.",
    ),
    ("pull", "Write a packet's JSON, exactly as stored, to stdout or to a file."),
    ("rm", "Delete a packet. Deleted packets cannot be recovered."),
    ("resume", "Print the resume block of a packet, ready to paste into a new agent session."),
    ("example", "Print an example packet (v0.2) to copy from."),
    (
        "validate",
        "Check packets as save would (or push, with --complete): schema and redaction at once.",
    ),
    ("auth", "Sign in to an ltm server; from then on every verb goes to it (--local overrides)."),
    (
        "logout",
        "Forget the saved token for a server (on the server it stays valid until revoked).",
    ),
    ("whoami", "Show the server the verbs go to, who you are there and what your token may do."),
    ("invite", "Print an invite URL for TEAM (single use; it expires, 7 days on ltm servers)."),
    (
        "join",
        "Join a team with an invite; without a token for that server you get a new account.",
    ),
    ("approve", "Approve a device that runs `ltm auth HOST`: it gets a token of its own, as you."),
    (
        "publish",
        "Publish a packet at a public URL anyone with the link can read (no account needed).",
    ),
    ("unpublish", "Revoke a packet's public URL; it stops working at once."),
    ("share", "Let another user of your server read one packet (never change or delete it)."),
    ("unshare", "End a share at once: the user can no longer read the packet."),
    ("open", "Open the server's web view (your packets, or one packet) in your browser."),
    ("ui", "Open the local store's web view in your browser (loopback only; Ctrl-C stops)."),
    ("export", "Export packets as a bundle: one JSON line per packet, after a header line."),
    ("import", "Import a bundle: ids kept, identical packets skipped, each line reported."),
    (
        "doctor",
        "Check what ltm depends on, one line each, with the fix for what fails (exit 1 then).",
    ),
    (
        "conformance",
        "Check a server against the ltm protocol: one line per check; exit 1 on a failure.",
    ),
    (
        "sensitive",
        "Manage your own redaction patterns (kept in settings.toml) and test the scanner.",
    ),
    ("server", "Run a self-hosted ltm server (SQLite): init, run, and manage its tokens."),
    ("teams", "Teams on the server: packets pushed with -t TEAM are visible to every member."),
    (
        "config",
        "Read and change settings: host (the default server), timeout (seconds), browser (open"
        " one for ltm auth: true/false); user, output, lenient, editor are kept for the"
        " reference CLI, which shares config.toml.",
    ),
    (
        "mcp",
        "The ltm tools for AI agents over MCP (Claude Code, Cursor, Zed, Claude Desktop...)."
        " Without a subcommand: serve MCP on stdin/stdout, as an MCP client runs it.",
    ),
    ("tokens", "Your tokens on the server (one per signed-in device): list them, revoke one."),
    (
        "hooks",
        "Run ltm at the agent's session start, at each prompt, before compaction and when it"
        " stops, so the project's newest packet is resumed, a matching one is recalled and"
        " the agent is reminded to save one.",
    ),
    ("completion", "Tab completion for bash, zsh and fish: print the script, or install it."),
)


def print_help() -> bool:
    """Print the top-level help as typer would; False (nothing printed) where typer would
    not draw it with rich, so that typer answers."""
    if "TYPER_USE_RICH" in os.environ:  # typer's switch: its own reading of it decides
        return False
    width = os.getenv("TERMINAL_WIDTH")  # typer's: the console's width, when set
    if width and not width.isdigit():
        return False  # typer fails on it: let it say so
    try:
        import rich  # noqa: F401 (without rich, typer prints click's plain help)
    except ImportError:
        return False
    _draw(int(width) if width else None)
    return True


def _draw(width: int | None) -> None:
    """What typer's ``rich_utils.rich_format_help`` draws for a group with no arguments,
    one options panel, one commands panel and no epilog, on typer's console."""
    from rich.align import Align
    from rich.columns import Columns
    from rich.console import Console, Group
    from rich.highlighter import RegexHighlighter
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text
    from rich.theme import Theme

    class OptionHighlighter(RegexHighlighter):
        highlights = (  # typer's, as they are
            r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
            r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
            r"(?P<types>\<[^\>]+\>)",
            r"(?P<usage>Usage: )",
        )

    class NegativeOptionHighlighter(RegexHighlighter):
        highlights = (  # typer's, as they are
            r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
            r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        )

    class TypesHighlighter(RegexHighlighter):
        highlights = (  # typer's, as they are
            r"^(?P<types_sep>(\[|<))",
            r"(?P<types_sep>\|)",
            r"(?P<types_sep>(\]|>))(\.\.\.)?$",
        )

    highlighter = OptionHighlighter()
    negative, types = NegativeOptionHighlighter(), TypesHighlighter()
    forced = any(os.getenv(name) for name in ("GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS"))
    theme = {
        "option": "bold cyan",
        "switch": "bold green",
        "negative_option": "bold magenta",
        "negative_switch": "bold red",
        "types": "bold yellow",
        "types_sep": "dim",
        "usage": "yellow",
    }
    console = Console(
        theme=Theme(theme),
        highlighter=highlighter,
        color_system="auto",
        force_terminal=False if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL") else forced or None,
        width=width,
        stderr=False,
    )

    def text(markup: str) -> Text:
        """typer's ``_make_rich_text`` in its default (rich) markup mode."""
        if "\033[" in markup:
            return highlighter(Text.from_ansi(markup, style=""))
        return highlighter(Text.from_markup(markup, style=""))

    def table(*, highlight: bool) -> Table:
        return Table(
            highlight=highlight,
            show_header=False,
            expand=True,
            box=None,
            show_lines=False,
            leading=0,
            border_style=None,
            row_styles=None,
            pad_edge=False,
            padding=(0, 1),
        )

    console.print(Padding(highlighter(USAGE), 1), style="bold")
    console.print(Padding(Align(Group(text(ROOT_HELP)), pad=False), (0, 1, 1, 1)))
    options = table(highlight=True)
    for long, short, metavar, help_text in OPTIONS:
        shown = Text(style="bold yellow", overflow="fold")
        shown.append(metavar)
        names = [highlighter(long), highlighter(short), negative(""), negative("")]
        options.add_row(*names, types(shown), Columns([text(help_text)]))
    console.print(Panel(options, border_style="dim", title="Options", title_align="left"))
    verbs = table(highlight=False)
    verbs.add_column(style="bold cyan", no_wrap=True, width=max(len(v) for v, _ in VERBS))
    verbs.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for verb, help_text in VERBS:
        verbs.add_row(Text(verb), text(help_text))
    console.print(Panel(verbs, border_style="dim", title="Commands", title_align="left"))


def answer(argv: list[str]) -> bool:
    """``ltm --help``/``-h`` (exit 0) and a bare ``ltm`` (exit 2, as click's
    no-args-is-help), when ``argv`` is one of them and rich can draw it."""
    if argv not in ([], ["--help"], ["-h"]) or not print_help():
        return False
    if not argv:
        sys.exit(2)
    print()  # click echoes typer's (empty) help string after rich has drawn it
    return True
