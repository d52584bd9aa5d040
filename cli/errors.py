"""The one error the CLI shows: a single line, and an exit code."""

from __future__ import annotations


class CliError(Exception):
    """Shown to the user as ``ltm: <message>`` with ``exit_code``; never a traceback."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
