"""Users: minting ids and checking the display names people choose."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..store import User
from .errors import BadRequest, Conflict

if TYPE_CHECKING:
    from ..store import Store
    from .access import Caller

MAX_DISPLAY = 64
SESSION_SECONDS = 8 * 3600  # a web view session's life (``chalicelib.web.view``)
GENERATION_KEEP = timedelta(days=2)  # a generation counter outlives every session it ends


def new_id() -> str:
    """A fresh id for a user, a team or anything else we mint (a ULID)."""
    from ..ids import new_ulid

    return new_ulid()


def now() -> datetime:
    return datetime.now(UTC)


def check_display(display: object) -> str:
    """A display name: 1 to 64 characters, no control characters, trimmed."""
    if not isinstance(display, str):
        raise BadRequest("display: must be a string")
    if len(display) > MAX_DISPLAY or not display.strip():
        raise BadRequest(f"display: must be 1 to {MAX_DISPLAY} characters")
    display = display.strip()
    if any(unicodedata.category(ch).startswith("C") for ch in display):
        raise BadRequest("display: must not contain control characters")
    return display


def new_user(display: str, *, when: datetime | None = None, subject: str | None = None) -> User:
    return User(
        id=new_id(), display=check_display(display), created_at=when or now(), subject=subject
    )


def taken(display: str) -> Conflict:
    """409 for a display name another user of this server goes by (in any case)."""
    return Conflict(
        f"display: {display!r} is taken on this server (names are unique in any case);"
        " choose another"
    )


def rename(store: Store, caller: Caller, display: object) -> User:
    """The caller's new display name (``ltm profile --display``); 409 when it is taken."""
    from ..store import NameTaken
    from .access import user_of

    user = user_of(store, caller, need="write")
    name = check_display(display)
    try:
        return store.rename_user(user.id, name)
    except NameTaken:
        raise taken(name) from None


def _generation_key(user_id: str) -> str:
    return f"web-session:{user_id}"


def session_generation(store: Store, user_id: str, when: datetime) -> int:
    """The generation of the user's web view sessions: each carries the one it started
    in, and counts only while it is still the current one (``end_sessions``)."""
    return store.read_counter(_generation_key(user_id), when)


def end_sessions(store: Store, user_id: str, when: datetime) -> None:
    """End every web view session of the user at once, in any browser (signing out;
    someone who left): their generation is passed."""
    store.add_to_counter(
        _generation_key(user_id), when, when + timedelta(seconds=SESSION_SECONDS) + GENERATION_KEEP
    )
