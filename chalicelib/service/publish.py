"""Publishing a packet at a public, read-only URL, and reading it back without signing in.

The URL is ``{base}/p/{secret}``: 192 random bits (``secrets.token_urlsafe``),
never the packet id, so a published packet cannot be found by guessing and an
unpublished one's id reveals nothing. The store looks it up by the secret's
hex sha256 and keeps the secret too (see ``store.Publication`` for why).

Who may publish or unpublish: whoever may delete the packet (the protocol's
rule): a personal packet's owner; a team packet's creator (still a member)
or the team's owner. Anyone else, and anyone who cannot see the packet at
all, gets 404 ``not found``, as for every packet they have no business with.

Publishing and unpublishing need a token with the full scope (``read
write``), not just ``write``: publishing answers a URL anyone can read the
packet at, so a write-only token that could publish could read every packet
it may manage by publishing it. Unpublishing is held to the same scope so the
two halves of one feature are granted together.

Reading a packet (``read``) tells the same people, and only them, that it is
published: the Go reference CLI's ``show`` prints a "Published" line from
the ``X-LTM-Published-At`` and ``X-LTM-Public-URL`` headers of ``GET
/v1/packets/{id}`` (``internal/cli/show.go`` in dennisdevulder/ltm). A team
member who may read but not publish never learns the public URL from them.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime

from ..store import FULL_SCOPE, PacketMeta, Publication, Store, StoredPacket, User
from ..store import NotFound as StoreNotFound
from .access import Caller, Need, access, grants
from .errors import NotFound
from .users import now

SECRET_BYTES = 24  # 192 bits
SECRET_RE = re.compile(r"[A-Za-z0-9_-]{32}")  # what token_urlsafe(24) makes
# What a token must be granted to publish, unpublish, or be told a packet's public URL.
MANAGE: Need = FULL_SCOPE  # "read write": see the module docstring


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def public_url(base_url: str, secret: str) -> str:
    return f"{base_url.rstrip('/')}/p/{secret}"


def may_manage(store: Store, user: User, meta: PacketMeta) -> bool:
    """The protocol's delete rule, shared by publishing: owner, or creator / team owner."""
    if meta.team_id is None:
        return meta.owner_id == user.id
    member = store.get_member(meta.team_id, user.id)
    return member is not None and (meta.owner_id == user.id or member.role == "owner")


def _managed(
    store: Store, caller: Caller, packet_id: str, *, need: Need = MANAGE
) -> tuple[User, StoredPacket]:
    who = access(store, caller, need=need, packet_id=packet_id)
    if who.packet is None or not may_manage(store, who.user, who.packet.meta):
        raise NotFound("not found")
    return who.user, who.packet


def publish(
    store: Store, caller: Caller, packet_id: str, *, when: datetime | None = None
) -> tuple[Publication, bool]:
    """Publish (or find the publication of) a packet; True when it was published just now."""
    user, found = _managed(store, caller, packet_id)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    fresh = Publication(packet_id, secret, hash_secret(secret), user.id, when or now())
    try:
        current = store.publish_packet(fresh, seen=found.meta)
    except StoreNotFound:  # deleted (or moved) between the read and the write
        raise NotFound("not found") from None
    return current, current.secret == secret


def unpublish(store: Store, caller: Caller, packet_id: str) -> None:
    """End a publication; the URL is dead at once. Unpublishing what is not published is fine."""
    _managed(store, caller, packet_id)
    store.unpublish_packet(packet_id)


def publication(store: Store, caller: Caller, packet_id: str) -> Publication | None:
    """The publication of a packet the caller may manage (None when it is not published)."""
    _, found = _managed(store, caller, packet_id, need="read")
    return store.publication_of(found)


def read(store: Store, caller: Caller, packet_id: str) -> tuple[StoredPacket, Publication | None]:
    """``GET /v1/packets/{id}``: the packet (as ``packets.get``) and, for whoever may
    publish it, its publication (None when unpublished or not theirs to know).

    The membership read a team packet needs anyway answers both questions, and
    the packet as read serves its publication (``Store.publication_of``), so
    only the publication itself costs a read more (on DynamoDB: only when the
    packet is published), and only for a caller who may manage the packet with
    a token granted ``MANAGE``.
    """
    who = access(store, caller, need="read", packet_id=packet_id)
    found = who.packet
    if found is None:
        raise NotFound("not found")
    meta = found.meta
    if meta.team_id is None:
        readable = manages = meta.owner_id == who.user.id
    else:
        member = store.get_member(meta.team_id, who.user.id)
        readable = member is not None
        manages = member is not None and (meta.owner_id == who.user.id or member.role == "owner")
    if not readable:
        from .share import readable_by_share  # only a refused read pays for the import

        # Shared with the caller: theirs to read, never to publish, so no publication.
        if not readable_by_share(store, who.user, meta):
            raise NotFound("not found")
        return found, None
    if not manages or not grants(who.scope, MANAGE):
        return found, None
    return found, store.publication_of(found)


def read_public(store: Store, secret: str) -> StoredPacket:
    """The packet published under ``secret``: no sign-in; 404 for anything else."""
    if not SECRET_RE.fullmatch(secret):
        raise NotFound("not found")
    found = store.published_packet(hash_secret(secret))
    if found is None:
        raise NotFound("not found")
    return found
