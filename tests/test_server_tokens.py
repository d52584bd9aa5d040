"""Token service: format, hashing, the bearer header, throttled last-used, revocation."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ltm.service import tokens
from ltm.service.errors import Conflict, NotFound, Unauthorized
from ltm.store import Token
from ltm.store.sqlite import SqliteStore

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SqliteStore(tmp_path / "t.db")
    yield s
    s.close()


class Counting:
    """Wraps a store and counts the calls the token check makes."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def counted(*args: Any, **kw: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kw)

        return counted


def test_tokens_are_prefixed_256_bit_and_stored_hashed(store: SqliteStore) -> None:
    user, secret = tokens.issue(store, "alice", when=T0)
    assert tokens.TOKEN_RE.fullmatch(secret)
    # ltm_ + the user's id (a hint for the store, see tokens.py) + _ + 256 random bits
    prefix, named, random_part = secret.split("_")
    assert (prefix, named) == ("ltm", user.id)
    assert len(random_part) == 64 and int(random_part, 16) >= 0
    (record,) = store.list_tokens()
    assert record.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert record.label == "alice" and record.user_id == user.id
    assert secret.encode() not in Path(store.path).read_bytes()
    assert tokens.mint() != tokens.mint()


def test_the_user_id_in_a_token_is_a_hint_the_credential_carries() -> None:
    user_id = "01JCZZ0000000000000000000A"
    named = tokens.mint(user_id)
    assert named.startswith(f"ltm_{user_id}_")
    assert tokens.credential(f"Bearer {named}").user_hint == user_id
    assert tokens.credential(f"Bearer {named}").token_hash == tokens.hash_token(named)
    # Ids that are not ULIDs (and tokens minted before the hint) get the plain form.
    for plain in (tokens.mint(), tokens.mint("local"), tokens.mint("01jczz0000000000000000000a")):
        assert tokens.TOKEN_RE.fullmatch(plain) and len(plain) == 4 + 64
        assert tokens.credential(f"Bearer {plain}").user_hint is None
    # Anything else is still looked up by its hash (and refused by the store), never parsed.
    assert tokens.credential("Bearer ltm_unknown").user_hint is None
    assert "token_hash" not in repr(tokens.credential(f"Bearer {named}"))


def test_plain_tokens_still_sign_in(store: SqliteStore) -> None:
    """A token without the user id (minted before it existed) keeps working."""
    user, _ = tokens.issue(store, "alice", when=T0)
    plain = tokens.mint()
    store.add_token(Token("laptop", user.id, tokens.hash_token(plain), T0))
    assert tokens.authenticate(store, f"Bearer {plain}", T0).id == user.id


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "missing bearer token"),
        ("", "missing bearer token"),
        ("Basic abc", "missing bearer token"),
        ("Bearer", "missing bearer token"),
        ("Bearer ltm_unknown", "invalid token"),
        ("Bearer " + "x" * 10_000, "invalid token"),
    ],
)
def test_authenticate_refusals(store: SqliteStore, header: str | None, message: str) -> None:
    with pytest.raises(Unauthorized) as caught:
        tokens.authenticate(store, header, T0)
    assert caught.value.message == message and caught.value.status == 401


def test_last_used_is_written_at_most_once_per_interval(store: SqliteStore) -> None:
    user, secret = tokens.issue(store, "alice", when=T0)
    counting = Counting(store)
    header = f"Bearer {secret}"
    assert tokens.authenticate(counting, header, T0).id == user.id  # type: ignore[arg-type]
    assert counting.calls == ["load", "touch_token"]  # first use is recorded
    for minutes in (1, 2, 4):
        counting.calls.clear()
        tokens.authenticate(counting, header, T0 + timedelta(minutes=minutes))  # type: ignore[arg-type]
        assert counting.calls == ["load"]  # one read, no write
    counting.calls.clear()
    later = T0 + tokens.TOUCH_INTERVAL + timedelta(seconds=1)
    tokens.authenticate(counting, header, later)  # type: ignore[arg-type]
    assert counting.calls == ["load", "touch_token"]
    assert store.list_tokens()[0].last_used_at == later


def test_a_failing_touch_does_not_fail_the_request(store: SqliteStore) -> None:
    user, secret = tokens.issue(store, "alice", when=T0)

    class Broken(Counting):
        def touch_token(self, *args: Any) -> None:
            raise RuntimeError("disk full")

    assert tokens.authenticate(Broken(store), f"Bearer {secret}", T0).id == user.id  # type: ignore[arg-type]


def test_labels_are_unique_and_checked(store: SqliteStore) -> None:
    tokens.issue(store, "alice", when=T0)
    with pytest.raises(Conflict):
        tokens.issue(store, "someone", label="alice", when=T0)
    user, _ = tokens.issue(store, "bob", when=T0)
    with pytest.raises(Conflict):
        tokens.add(store, user.id, "alice", when=T0)
    second = tokens.add(store, user.id, "bob-laptop", when=T0)
    assert tokens.authenticate(store, f"Bearer {second}", T0).id == user.id
    for bad in ("", "has space", "-lead", "x" * 65):
        with pytest.raises(Exception, match="label"):
            tokens.add(store, user.id, bad, when=T0)


def test_a_token_issued_by_name_gets_a_label_whatever_the_name(store: SqliteStore) -> None:
    """`ltm server issue-token NAME` labels the token after the name: a name with a space
    or an accent (a valid display name) was refused for its label, which nobody gave,
    and a 64-character name's second token had no room for its number."""
    jo = tokens.issue_for(store, "Jo Smith", when=T0)
    assert (jo.created, jo.label, jo.user.display) == (True, "Jo-Smith", "Jo Smith")
    again = tokens.issue_for(store, "Jo Smith", when=T0)
    assert (again.created, again.label, again.user.id) == (False, "Jo-Smith-2", jo.user.id)
    assert tokens.issue_for(store, "Zoë", when=T0).label == "Zoe"
    assert tokens.issue_for(store, "李明", when=T0).label == "token"
    long = "x" * 64
    assert tokens.issue_for(store, long, when=T0).label == "x" * 56
    assert tokens.issue_for(store, long, when=T0).label == "x" * 56 + "-2"
    # The name as stored, trimmed: the same user, not a refusal.
    sam = tokens.issue_for(store, "  sam  ", when=T0)
    assert sam.user.display == "sam" and sam.label == "sam"
    assert tokens.issue_for(store, "sam", when=T0).user.id == sam.user.id


def test_an_id_of_nobody_is_refused_not_made_a_user(store: SqliteStore) -> None:
    """The id a revoke names, mistyped by a letter: issue-token made a new user called by
    that id, who took the token meant for someone else."""
    sam = tokens.issue_for(store, "sam", when=T0).user
    typo = sam.id[:-1] + ("0" if sam.id[-1] != "0" else "1")
    with pytest.raises(NotFound, match=f"no user has the id {typo}"):
        tokens.issue_for(store, typo, when=T0)
    assert {t.user_id for t in store.list_tokens()} == {sam.id}
    assert tokens.issue_for(store, sam.id, when=T0).user.id == sam.id
    made = tokens.issue_for(store, typo, new_user=True, when=T0)
    assert made.created and made.user.display == typo


def test_revoke(store: SqliteStore) -> None:
    user, secret = tokens.issue(store, "alice", when=T0)
    other, _ = tokens.issue(store, "bob", when=T0)
    with pytest.raises(NotFound):
        tokens.revoke(store, "alice", user_id=other.id)  # only your own, when scoped
    tokens.revoke(store, "alice", user_id=user.id)
    with pytest.raises(Unauthorized):
        tokens.authenticate(store, f"Bearer {secret}", T0)
    with pytest.raises(NotFound):
        tokens.revoke(store, "alice")
