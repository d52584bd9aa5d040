"""The one error the CLI shows: a single line, and an exit code."""

from __future__ import annotations

from ltm.errors import Failure


class CliError(Failure):
    """Shown to the user as ``ltm: <message>`` with ``exit_code``; never a traceback."""
