"""The stdio shim's place (``ltm.mcp.place``): the user's machine, as the CLI sees it.

Packets go where the CLI's go (``open_backend``: the server ``ltm auth`` signed in
to, else the embedded store); ``save`` fills in the working directory's project;
the user's own redaction rules (``ltm sensitive``) apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ltm.mcp.place import CURRENT, Place

if TYPE_CHECKING:
    from ltm.backend import Backend
    from ltm.errors import Failure
    from ltm.packet import Checked
    from ltm.redact import Rule


class CliPlace(Place):
    def backend(self) -> Backend:
        from ltm.cli.client.backend import open_backend

        # The session serves many calls: the local store stays open between them.
        return open_backend(keep=True)

    def keep_unsent(
        self, backend: Backend, checked: Checked, team: str | None, failure: Failure
    ) -> str | None:
        from ltm.cli.client.outbox import keep_unsent

        return keep_unsent(backend, checked, failure, team=team)

    def is_local(self, backend: Backend) -> bool:
        from ltm.cli.client.backend import LocalBackend

        return isinstance(backend, LocalBackend)

    def here(self) -> str | None:
        from ltm.cli.project import current_project

        found = current_project()
        return found[0] if found else None

    def fill_project(self, data: dict[str, Any]) -> dict[str, Any]:
        from ltm.cli.project import fill_project

        return fill_project(data)

    def rules(self) -> list[Rule]:
        from ltm.cli.client.preflight import user_rules

        return user_rules()

    def about(self) -> dict[str, Any]:
        from ltm.cli.config import config_dir

        return {"config_dir": str(config_dir())}


def install() -> None:
    """Make the CLI's place the current one (for this context and what it starts)."""
    CURRENT.set(CliPlace())
