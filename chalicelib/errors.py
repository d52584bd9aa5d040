"""The one failure that needs no traceback: a message that is the whole story.

Raised by the rules every door shares (the pre-flight, the tools an agent
calls) and by the CLI (``ltm.cli.errors.CliError`` is one): a person sees
``ltm: <message>`` and ``exit_code``; an agent gets the message as a tool error.
"""

from __future__ import annotations


class Failure(Exception):
    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
