"""Where the tools act: what differs between the stdio shim and the server's ``/mcp``.

The tools (``tools``, ``memory``) are the same everywhere; a ``Place`` gives them
what only the door knows: the backend to talk to (the CLI's client with what
``ltm auth`` stored, or the service layer as the request's signed-in user), the
working directory's project (only a shim on the user's machine has one), the
user's own redaction rules, and a few facts for ``whoami``. The current place
is a context variable: the stdio shim sets it once, ``/mcp`` for each request,
and tool calls run in worker threads that inherit it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..errors import Failure

if TYPE_CHECKING:
    from ..backend import Backend
    from ..packet import Checked
    from ..redact import Rule


class Place:
    """The server's defaults: no working directory, no user rules (subclass for more)."""

    def backend(self) -> Backend:
        raise NotImplementedError

    def keep_unsent(
        self, backend: Backend, checked: Checked, team: str | None, failure: Failure
    ) -> str | None:
        """A save ``backend`` could not deliver (``failure``), kept to send later where
        there is somewhere to keep it: the line that says so, else None (a server's own
        store is never out of its reach)."""
        return None

    def is_local(self, backend: Backend) -> bool:
        """Whether ``backend`` is the embedded store of the user's machine (whoami says so)."""
        return False

    def here(self) -> str | None:
        """The working directory's project name; None where there is no working directory."""
        return None

    def fill_project(self, data: dict[str, Any]) -> dict[str, Any]:
        """``save``'s project default: the working directory's, where there is one."""
        return data

    def rules(self) -> list[Rule]:
        """The user's own redaction rules (``ltm sensitive``), where they live."""
        return []

    def about(self) -> dict[str, Any]:
        """More lines for ``whoami`` (where the configuration lives, ...)."""
        return {}

    def project_filter(self, project: str | None, here: bool) -> str | None:
        """A listing's project: ``project``, or with ``here`` the working directory's."""
        if project is not None and here:
            raise Failure("give project or here, not both")
        if project is not None:
            if not project.strip():
                raise Failure("project needs a project name")
            return project
        if not here:
            return None
        found = self.here()
        if found is None:
            raise Failure(
                "here: no project is known where this server runs; give project NAME instead"
            )
        return found


CURRENT: ContextVar[Place] = ContextVar("ltm_mcp_place")


def current() -> Place:
    try:
        return CURRENT.get()
    except LookupError:
        raise Failure("the ltm tools are not set up here (no place to keep packets)") from None
