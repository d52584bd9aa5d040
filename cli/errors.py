"""The one error the CLI shows: a single line, and an exit code."""

from __future__ import annotations

from ltm.errors import Failure


class CliError(Failure):
    """Shown to the user as ``ltm: <message>`` with ``exit_code``; never a traceback."""


class ReaderGone(Exception):
    """Standard output's reader went away mid-verb (``ltm ls | head -1``): exit 0.

    Raised in place of ``BrokenPipeError``, which typer turns into a silent exit 1 before
    ``ltm.cli.start.entry`` can see it.
    """
