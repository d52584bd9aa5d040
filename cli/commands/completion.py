"""ltm completion: tab completion for bash, zsh and fish (verbs, options, teams, packet ids).

The protocol is click's, as typer speaks it
(https://click.palletsprojects.com/en/stable/shell-completion/): the shell runs
``ltm`` with ``_LTM_COMPLETE=complete_bash`` (``complete_zsh``, ``complete_fish``)
and the words typed so far in the environment (``COMP_WORDS``/``COMP_CWORD`` for
bash, ``_TYPER_COMPLETE_ARGS`` for zsh and fish), and reads the candidates back.
``ltm.cli.start.entry`` sends such a request here before anything else, so no verb
pays for completion: the parser, and typer's shell classes, load only for a
request. typer's built-in ``--install-completion`` stays off (``add_completion=False``):
it would load that machinery for every verb that goes through typer.

Candidates beyond the parser's own (verbs, options): team names from
``hosts.json`` (the teams recorded for the servers signed in to; no request is
made while a person waits at a prompt) and packet ids from the local store,
each with its goal as the description. Packet text is untrusted and zsh
``eval``s what it gets, so a description keeps only plain characters.
"""

from __future__ import annotations

import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info

app = typer.Typer(
    help="Tab completion for bash, zsh and fish: print the script, or install it.",
    no_args_is_help=True,
)

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_LTM_COMPLETE"
MARK = "# ltm tab completion"
SUGGESTED = 50  # packet ids offered for an empty prefix: the newest
_PLAIN = re.compile(r"[^A-Za-z0-9 ,.+=@%/_-]+")  # what a description keeps
_TEAM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


# -- candidates ------------------------------------------------------------------------


def plain(text: str, width: int = 60) -> str:
    """A description any shell shows as text: other characters become spaces."""
    flat = " ".join(_PLAIN.sub(" ", text).split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def one_line(text: str) -> str:
    return " ".join(text.split())


def team_names(incomplete: str) -> list[str]:
    """The teams ``hosts.json`` records on the servers signed in to (no network)."""
    try:
        from ltm.cli.client.credentials import load, teams_of

        hosts = load().hosts
    except Exception:  # damaged files: no candidates, never an error at a prompt
        return []
    names = {name for entry in hosts.values() for name in teams_of(entry)}
    return sorted(n for n in names if _TEAM.fullmatch(n) and n.startswith(incomplete))


def packet_ids(incomplete: str) -> list[tuple[str, str]]:
    """Packet ids of the local store starting with ``incomplete`` (newest first), with goals.

    Reads only a store that exists: completing never creates one. Nor migrates one an
    older ltm left: that is the next verb's work, and at a prompt it would hold up the
    shell, for as long as the store's busy timeout while another process migrates it.
    """
    try:
        from ltm.cli.config import local_db_path

        path = local_db_path()
        if not path.is_file():
            return []
        from ltm.ids import id_problem
        from ltm.service import packets
        from ltm.store import User
        from ltm.store.sqlite import SqliteStore, pending_migration

        if pending_migration(path):
            return []

        store = SqliteStore(path)
        try:
            user = User("local", "local", datetime.now(UTC))
            prefix = incomplete
            found: list[tuple[str, str]] = []
            cursor: str | None = None
            while len(found) < SUGGESTED:
                page = packets.page(store, user, limit=200, page_token=cursor)
                found += [
                    (meta.id, plain(meta.goal))
                    for meta in page.items
                    if meta.id.startswith(prefix) and id_problem(meta.id) is None
                ]
                cursor = page.cursor
                if cursor is None or not prefix:
                    break
            return found[:SUGGESTED]
        finally:
            store.close()
    except Exception:
        return []


# -- answering a request ----------------------------------------------------------------


def respond(args: list[str]) -> None:
    """Answer the shell's completion request (``_LTM_COMPLETE`` is set)."""
    # typer's shell classes (its zsh and fish protocol), registered for this process only.
    from typer import _completion_classes

    from ltm.cli.start.main import build

    _completion_classes.completion_init()
    # Descriptions on one line: typer renders them with rich, which wraps them at the
    # terminal's width, and a fish candidate per line then reads the rest as candidates.
    _completion_classes._sanitize_help_text = one_line
    build([])(args=args, prog_name="ltm", complete_var=COMPLETE_VAR)


def script(shell: str) -> str:
    """The script that hooks ``ltm`` into ``shell``'s completion (typer's, for ltm)."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="ltm", complete_var=COMPLETE_VAR, shell=shell) + "\n"


def _shell(name: str | None) -> str:
    if name is None:
        name = Path(os.environ.get("SHELL", "")).name or None
        if name not in SHELLS:
            raise CliError(
                "which shell? name it: ltm completion install bash|zsh|fish", exit_code=2
            )
    if name not in SHELLS:
        raise CliError(f"no completion for {name!r}; choose bash, zsh or fish", exit_code=2)
    return name


def _print(shell: str) -> None:
    sys.stdout.write(script(_shell(shell)))


@app.command("bash")
def bash() -> None:
    """Print the bash completion script (eval "$(ltm completion bash)")."""
    _print("bash")


@app.command("zsh")
def zsh() -> None:
    """Print the zsh completion script (after compinit: eval "$(ltm completion zsh)")."""
    _print("zsh")


@app.command("fish")
def fish() -> None:
    """Print the fish completion script (ltm completion fish | source)."""
    _print("fish")


def _data_home() -> Path:
    raw = os.environ.get("XDG_DATA_HOME", "")
    return Path(raw) if raw and Path(raw).is_absolute() else Path.home() / ".local" / "share"


def _config_home() -> Path:
    raw = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(raw) if raw and Path(raw).is_absolute() else Path.home() / ".config"


def targets(shell: str) -> tuple[Path, Path | None]:
    """Where the script goes, and the start-up file that must source it (None: autoloaded).

    bash: bash-completion's per-user folder (it loads ``ltm`` from there on demand,
    https://github.com/scop/bash-completion#faq), sourced from ~/.bashrc as well for a
    bash without bash-completion; zsh: a file sourced from .zshrc (after compinit, which
    the script needs); fish: its per-user completions folder, which fish autoloads
    (https://fishshell.com/docs/current/completions.html#where-to-put-completions).
    """
    if shell == "bash":
        return _data_home() / "bash-completion" / "completions" / "ltm", Path.home() / ".bashrc"
    if shell == "zsh":
        zdot = Path(os.environ.get("ZDOTDIR") or Path.home())
        return _data_home() / "ltm" / "completion.zsh", zdot / ".zshrc"
    return _config_home() / "fish" / "completions" / "ltm.fish", None


def _source_line(shell: str, file: Path) -> str:
    quoted = str(file).replace("'", "'\\''")
    if shell == "zsh":
        # compdef exists only after compinit: start it when the user's .zshrc did not.
        return (
            f"autoload -Uz compinit && (( $+functions[compdef] )) || compinit; "
            f"[ -r '{quoted}' ] && . '{quoted}'  {MARK}\n"
        )
    return f"[ -r '{quoted}' ] && . '{quoted}'  {MARK}\n"


@app.command("install")
def install(
    shell: Annotated[
        str | None,
        typer.Argument(
            metavar="[SHELL]",
            help="bash, zsh or fish (default: your $SHELL).",
            autocompletion=lambda incomplete: [s for s in SHELLS if s.startswith(incomplete)],
        ),
    ] = None,
) -> None:
    """Install tab completion for your shell (once; open a new shell to use it)."""
    name = _shell(shell)
    file, rc = targets(name)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(script(name), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {file}: {exc.strerror or exc}") from None
    where = f"installed {name} completion in {file}"
    if rc is not None:
        line = _source_line(name, file)
        try:
            # Bytes: a start-up file need not be UTF-8, and it is only appended to.
            current = rc.read_bytes() if rc.exists() else b""
            if MARK.encode() not in current:
                # Appended, never rewritten: a symlinked rc (a dotfile manager's) stays one.
                with rc.open("a", encoding="utf-8") as handle:
                    handle.write("" if not current or current.endswith(b"\n") else "\n")
                    handle.write(line)
                where += f", sourced from {rc}"
            else:
                where += f" (already sourced from {rc})"
        except OSError as exc:  # read-only, a folder, a symlink to a missing folder
            raise CliError(
                f"installed {name} completion in {file}, but cannot add to {rc}"
                f" ({exc.strerror or exc}); add this line to it yourself: {line.strip()}"
            ) from None
    info(f"{where}; open a new shell to use it")
