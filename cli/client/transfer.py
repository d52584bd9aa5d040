"""Copying packets between the local store and the signed-in server.

A packet that goes to the server passes the same validation and redaction
pre-flight as ``ltm push FILE``; one that comes down is validated before the
local store takes it. Copies, not moves: the source keeps its packet. (On the server, a push with
``-t TEAM`` of an id that is the caller's personal packet there moves that
packet into the team, the protocol's rule; the message says so.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltm.cli.terminal.output import info

if TYPE_CHECKING:
    from ltm.cli.client.remote import RemoteBackend


def _server(team: str | None) -> RemoteBackend:
    from ltm.cli.client.backend import needs_server, open_backend
    from ltm.cli.client.remote import RemoteBackend

    backend = open_backend(team=team)
    if not isinstance(backend, RemoteBackend):
        backend.close()
        raise needs_server("copying between the local store and a server")
    return backend


def to_server(ref: str, *, team: str | None, lenient: bool, allow_unredacted: bool) -> str:
    from ltm.cli.client import preflight
    from ltm.cli.client.backend import LocalBackend

    remote = _server(team)
    try:
        store = LocalBackend.open()
        try:
            body = store.get(ref)
        finally:
            store.close()
        checked = preflight.accept(
            body, lenient=lenient, allow_unredacted=allow_unredacted, label=f"local packet {ref}"
        )
        moved = team is not None and remote.holds_personally(checked.data)
        existed = moved or remote.stored(str(checked.data.get("id", ""))) is not None
        pushed = remote.push(
            checked.data, team=team, lenient=lenient, allow_unredacted=allow_unredacted
        )
    finally:
        remote.close()
    where = f"team {team} on {remote.host}" if team else remote.host
    if moved:
        # The protocol's push -t: the owner's personal packet moves into the team.
        info(
            f"moved {pushed.id} on {remote.host} from your personal packets into team {team}"
            " (it was there already; the local store keeps its copy)"
        )
    elif existed:
        info(f"updated {pushed.id} in {where} from the local store's copy")
    else:
        info(f"copied {pushed.id} from the local store to {where}")
    print(pushed.id)
    return pushed.id


def to_local_store(ref: str, *, team: str | None, lenient: bool) -> str:
    from ltm.cli.client import preflight
    from ltm.cli.client.backend import LocalBackend

    remote = _server(team)
    try:
        body = remote.get(ref, team=team)
        author = _author(remote, body, ref, team)
    finally:
        remote.close()
    # Coming down, it stays on this machine: judged, not scanned.
    label = f"packet {ref} from {remote.host}"
    checked = preflight.accept(body, lenient=lenient, allow_unredacted=True, label=label)
    store = LocalBackend.open()
    try:
        pushed = store.push(checked.data, lenient=lenient)
    finally:
        store.close()
    from ltm.cli.client import authors

    authors.remember(pushed.id, author)  # so it is framed as its author's, not the user's
    verb = "copied" if pushed.created else "updated"
    info(f"{verb} {pushed.id} from {remote.host} into the {store.label}")
    print(pushed.id)
    return pushed.id


def _author(
    remote: RemoteBackend, body: bytes, ref: str, team: str | None
) -> dict[str, str] | None:
    """Who the server says stored the packet just fetched, when that is not the user:
    ``{"id", "name", "host"}`` (the name from the team's members), else None."""
    from ltm.present import decode_packet

    packet_id = str(decode_packet(body, ref).get("id", ref))
    author = remote.stored_by(packet_id)
    if not author or remote.is_me(author) is True:
        return None
    from ltm.cli.client.authors import member_names

    name = member_names(remote, team).get(author, "") if team else ""
    return {"id": author, "name": name, "host": remote.host}
