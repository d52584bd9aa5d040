"""ltm server: run a self-hosted ltm server (the commands live in ``ltm.cli.server``)."""

from ltm.cli.server.commands import app

__all__ = ["app"]
