"""ltm publish / ltm unpublish: a packet's public, read-only page on the server.

The same routes and output as the reference CLI (internal/cli/publish.go in
dennisdevulder/ltm): ``publish`` prints the public URL alone on stdout;
``unpublish`` prints ``unpublished ID``. Only a server serves public pages;
the local store has nowhere to publish to.
"""

from __future__ import annotations

import json

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


def _server(verb: str) -> object:
    from ltm.cli.client.backend import open_backend
    from ltm.cli.client.remote import RemoteBackend

    backend = open_backend()
    if not isinstance(backend, RemoteBackend):
        backend.close()
        raise CliError(
            f"{verb} needs a server (public pages are served there); sign in first: ltm auth HOST"
        )
    return backend


def publish(ref: options.Ref, team: options.Team = None, as_json: options.Json = False) -> None:
    """Publish a packet at a public URL anyone with the link can read (no account needed)."""
    backend = _server("publish")
    try:
        published = backend.publish(ref, team=team)  # type: ignore[attr-defined]
    finally:
        backend.close()  # type: ignore[attr-defined]
    if as_json:
        print(json.dumps(published, indent=2))
        return
    print(published["public_url"])
    info("anyone with this link can read the packet; revoke it with: ltm unpublish ID")


def unpublish(ref: options.Ref, team: options.Team = None) -> None:
    """Revoke a packet's public URL; it stops working at once."""
    backend = _server("unpublish")
    try:
        backend.unpublish(ref, team=team)  # type: ignore[attr-defined]
    finally:
        backend.close()  # type: ignore[attr-defined]
    print(f"unpublished {ref}")
