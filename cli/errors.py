"""The one error the CLI shows: a single line, and an exit code."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from ltm.errors import Failure

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# The exit code of bad usage: a missing argument, or a bad value given on the command
# line, in the environment or to ``ltm config set`` (as typer's own usage errors).
USAGE = 2


class CliError(Failure):
    """Shown to the user as ``ltm: <message>`` with ``exit_code``; never a traceback."""


class ReaderGone(Exception):
    """Standard output's reader went away mid-verb (``ltm ls | head -1``): exit 0.

    Raised in place of ``BrokenPipeError``, which typer turns into a silent exit 1 before
    ``ltm.cli.start.entry`` can see it.
    """


@contextmanager
def opening(what: str, path: Path) -> Iterator[None]:
    """A store at ``path`` that cannot be opened (a folder, a file that is no database, a
    newer schema, no permission) as one line naming it, never an "unexpected error".
    Only what opening a store raises: a bug in ltm still ends as the unexpected error it
    is, with its traceback under ``--debug``."""
    import errno
    import sqlite3

    try:
        yield
    except (sqlite3.Error, OSError, Failure) as exc:
        detail = "a folder, not a database file" if path.is_dir() else str(exc)
        # An error of the file system's that says what it is (no such folder, not a
        # folder, no permission) is that, full disk or not; SQLite's own words are vague.
        said = isinstance(exc, OSError) and exc.errno not in (errno.ENOSPC, errno.EDQUOT)
        if not said and not isinstance(exc, Failure) and _full(path):
            # SQLite, denied room for the shared-memory file it makes on opening, says
            # "disk I/O error": a failing disk, to whoever reads it.
            detail += f"; the disk holding {path.parent} is full"
        raise CliError(f"cannot open {what} {path}: {detail}") from None


def _full(path: Path) -> bool:
    """Whether the file system holding ``path`` has no room left (under 64 KiB)."""
    import shutil

    try:
        return shutil.disk_usage(path.parent).free < 64 * 1024
    except OSError:
        return False


class StoreUpgrading(CliError):
    """The local store waits for the migration this ltm brings, which a process of its own
    runs (``LocalBackend`` opened with ``migrate=False``: a hook)."""
