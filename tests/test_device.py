"""The device flow's rules (chalicelib/service/device.py), framework-free, on every store.

Time is passed explicitly (``when=``), so expiry, polling intervals and
rate-limit windows are tested without sleeping.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from timing import scaled

from ltm.service import device, tokens
from ltm.service.device import DeviceSettings, OAuthError, TooManyAttempts
from ltm.service.errors import BadRequest, Conflict, NotFound
from ltm.store import Store, User

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
BASE = "https://ltm.example.org"
SETTINGS = DeviceSettings()
FORM = {"client_id": ["ltm-cli"], "scope": ["read write"]}


def start(store: Store, *, when: datetime = T0, ip: str = "192.0.2.1", **kw: object):
    return device.authorize(
        store,
        kw.pop("settings", SETTINGS),  # type: ignore[arg-type]
        kw.pop("form", FORM),  # type: ignore[arg-type]
        base_url=BASE,
        client_ip=ip,
        user_agent=kw.pop("user_agent", "ltm-python/0.1.0"),  # type: ignore[arg-type]
        when=when,
        **kw,  # type: ignore[arg-type]
    )


def poll(store: Store, device_code: str, when: datetime, **extra: list[str]) -> device.Issued:
    form = {
        "grant_type": [device.GRANT_TYPE],
        "device_code": [device_code],
        "client_id": ["ltm-cli"],
        **extra,
    }
    return device.token(store, SETTINGS, form, when=when)


def oauth_error(call) -> OAuthError:  # type: ignore[no-untyped-def]
    with pytest.raises(OAuthError) as info:
        call()
    return info.value


def make_user(store: Store, name: str = "alice") -> tuple[User, str]:
    return tokens.issue(store, name, label=f"{name}-laptop", when=T0)


# -- codes --------------------------------------------------------------------------


def test_user_codes_are_unambiguous_and_strong_enough() -> None:
    assert len(set(device.USER_CODE_ALPHABET)) == 20
    assert not set(device.USER_CODE_ALPHABET) & set("AEIOUY0123456789")  # no vowels, no digits
    assert math.log2(len(device.USER_CODE_ALPHABET) ** device.USER_CODE_LENGTH) >= 34
    codes = {device.new_user_code() for _ in range(500)}
    assert len(codes) == 500
    for code in codes:
        assert re.fullmatch(r"[BCDFGHJKLMNPQRSTVWXZ]{8}", code)
        assert re.fullmatch(r"[A-Z]{4}-[A-Z]{4}", device.show_user_code(code))


@pytest.mark.parametrize(
    "typed",
    [
        "BCDF-GHJK",
        "bcdf-ghjk",
        "bcdfghjk",
        " bcdf ghjk ",
        "BCDF – GHJK",
        "Bc Df-Gh Jk",
        "ＢＣＤＦ-ＧＨＪＫ",
    ],
)
def test_typed_codes_are_normalized(typed: str) -> None:
    assert device.normalize_user_code(typed) == "BCDFGHJK"


@pytest.mark.parametrize(
    "typed", ["", "BCDF-GHJ", "BCDF-GHJKL", "ABCD-EFGH", "BCDF-GHJ1", "x" * 500, None, 12345678]
)
def test_malformed_codes_are_not_codes(typed: object) -> None:
    assert device.normalize_user_code(typed) is None


def test_client_key_groups_ipv6_by_64_and_unmaps_ipv4() -> None:
    assert device.client_key("192.0.2.7") == "192.0.2.7"
    assert device.client_key("2001:db8:1:2:aaaa::1") == device.client_key("2001:db8:1:2:ffff::9")
    assert device.client_key("2001:db8:1:2::1") != device.client_key("2001:db8:1:3::1")
    assert device.client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert device.client_key("") == "unknown"


def test_device_labels_are_typeable_and_distinct() -> None:
    label = device.device_label("ltm-python/0.1.0 (Linux; alice's laptop)")
    assert re.fullmatch(r"[A-Za-z0-9._-]+-[0-9a-f]{6}", label)
    assert tokens.check_label(label) == label
    assert device.device_label("").startswith("device-")
    assert device.device_label("x") != device.device_label("x")


def test_settings_from_env() -> None:
    assert DeviceSettings.from_env({}) == DeviceSettings()
    custom = DeviceSettings.from_env({"LTM_DEVICE_EXPIRES_IN": "30", "LTM_DEVICE_INTERVAL": "1"})
    assert (custom.expires_in, custom.interval) == (30, 1)
    with pytest.raises(ValueError, match="LTM_DEVICE_INTERVAL"):
        DeviceSettings.from_env({"LTM_DEVICE_INTERVAL": "0"})
    with pytest.raises(ValueError, match="integer"):
        DeviceSettings.from_env({"LTM_DEVICE_EXPIRES_IN": "ten"})


# -- the device authorization endpoint -------------------------------------------------


def test_authorize_answers_rfc8628_and_stores_only_hashes(store: Store) -> None:
    auth = start(store)
    body = auth.body()
    assert set(body) == {
        "device_code",
        "user_code",
        "verification_uri",
        "verification_uri_complete",
        "expires_in",
        "interval",
    }
    assert len(auth.device_code) >= 43  # 32 random bytes, URL-safe base64: 256 bits
    assert re.fullmatch(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}", auth.user_code)
    assert auth.verification_uri == f"{BASE}/device"
    assert auth.verification_uri_complete == f"{BASE}/device?code={auth.user_code}"
    assert (auth.expires_in, auth.interval) == (600, 5)
    grant = store.get_device_grant(device.hash_code(auth.device_code))
    assert grant is not None
    assert (
        grant.status == "pending" and grant.client_id == "ltm-cli" and grant.scope == "read write"
    )
    assert grant.expires_at == T0 + timedelta(minutes=10)
    assert grant.device_name == "ltm-python/0.1.0" and grant.client_ip == "192.0.2.1"
    stored = repr(grant)
    assert auth.device_code not in stored and auth.user_code.replace("-", "") not in stored
    assert grant.user_code_hash == device.hash_code(auth.user_code.replace("-", ""))


def test_authorize_takes_a_device_name_and_cleans_it(store: Store) -> None:
    auth = start(store, form={**FORM, "device_name": ["alice-laptop\x1b[31m\n"]})
    grant = store.get_device_grant(device.hash_code(auth.device_code))
    assert grant is not None and grant.device_name == "alice-laptop [31m"


def test_authorize_errors(store: Store) -> None:
    e = oauth_error(lambda: start(store, form={"scope": ["read write"]}))
    assert (e.code, e.status) == ("invalid_request", 400)
    e = oauth_error(lambda: start(store, form={"client_id": ["other-app"]}))
    assert (e.code, e.status) == ("invalid_client", 400)
    e = oauth_error(lambda: start(store, form={"client_id": ["other-app"]}, authenticated=True))
    assert (e.code, e.status) == ("invalid_client", 401)
    assert "WWW-Authenticate" in e.headers
    e = oauth_error(lambda: start(store, form={"client_id": ["ltm-cli", "ltm-cli"]}))
    assert e.code == "invalid_request" and "more than once" in e.description
    e = oauth_error(lambda: start(store, form={**FORM, "scope": ["read admin"]}))
    assert (e.code, e.status) == ("invalid_scope", 400)
    assert e.body() == {"error": "invalid_scope", "error_description": e.description}
    # No scope at all is the default scope.
    auth = start(store, form={"client_id": ["ltm-cli"]})
    grant = store.get_device_grant(device.hash_code(auth.device_code))
    assert grant is not None and grant.scope == "read write"


def test_authorize_is_rate_limited_per_client(store: Store) -> None:
    settings = DeviceSettings(authorize_per_client=3)
    for _ in range(3):
        start(store, settings=settings, ip="198.51.100.1")
    e = oauth_error(lambda: start(store, settings=settings, ip="198.51.100.1"))
    assert (e.code, e.status) == ("slow_down", 429) and int(e.headers["Retry-After"]) > 0
    start(store, settings=settings, ip="198.51.100.2")  # another client is not affected
    start(store, settings=settings, ip="198.51.100.1", when=T0 + settings.window)  # next window


# -- the token endpoint ---------------------------------------------------------------


def test_every_token_endpoint_error(store: Store) -> None:
    auth = start(store)
    form = {"device_code": [auth.device_code], "client_id": ["ltm-cli"]}

    def call(f: dict[str, list[str]], authenticated: bool = False):  # type: ignore[no-untyped-def]
        return lambda: device.token(store, SETTINGS, f, authenticated=authenticated, when=T0)

    cases = [
        (form, "invalid_request", 400),  # no grant_type
        ({**form, "grant_type": ["authorization_code"]}, "unsupported_grant_type", 400),
        ({**form, "grant_type": [device.GRANT_TYPE] * 2}, "invalid_request", 400),
        (
            {"grant_type": [device.GRANT_TYPE], "device_code": [auth.device_code]},
            "invalid_request",
            400,
        ),
        ({**form, "grant_type": [device.GRANT_TYPE], "client_id": ["evil"]}, "invalid_client", 400),
        ({"grant_type": [device.GRANT_TYPE], "client_id": ["ltm-cli"]}, "invalid_request", 400),
        (
            {**form, "grant_type": [device.GRANT_TYPE], "device_code": ["nope"]},
            "invalid_grant",
            400,
        ),
        (
            {**form, "grant_type": [device.GRANT_TYPE], "device_code": ["x" * 300]},
            "invalid_grant",
            400,
        ),
    ]
    for f, code, status in cases:
        e = oauth_error(call(f))
        assert (e.code, e.status) == (code, status), f
    e = oauth_error(call({**form, "grant_type": [device.GRANT_TYPE], "client_id": ["evil"]}, True))
    assert (e.code, e.status) == ("invalid_client", 401)


def test_pending_then_slow_down_grows_the_interval(store: Store) -> None:
    auth = start(store)
    dch = device.hash_code(auth.device_code)
    e = oauth_error(lambda: poll(store, auth.device_code, T0 + timedelta(seconds=5)))
    assert e.code == "authorization_pending"
    e = oauth_error(lambda: poll(store, auth.device_code, T0 + timedelta(seconds=7)))  # 2 s later
    assert (e.code, e.status) == ("slow_down", 400)
    grant = store.get_device_grant(dch)
    assert grant is not None and grant.interval == 10
    # Polling at the old pace is still too fast; at the new one it is fine.
    e = oauth_error(lambda: poll(store, auth.device_code, T0 + timedelta(seconds=12)))
    assert e.code == "slow_down"
    grant = store.get_device_grant(dch)
    assert grant is not None and grant.interval == 15
    e = oauth_error(lambda: poll(store, auth.device_code, T0 + timedelta(seconds=27)))
    assert e.code == "authorization_pending"
    # Jitter within the leeway is not punished.
    e = oauth_error(
        lambda: poll(store, auth.device_code, T0 + timedelta(seconds=41, milliseconds=900))
    )
    assert e.code == "authorization_pending"


def test_approved_device_gets_one_token_that_works_until_revoked(store: Store) -> None:
    alice, _ = make_user(store)
    auth = start(store)
    grant = device.decide(
        store,
        SETTINGS,
        alice,
        auth.user_code.lower(),
        approve=True,
        when=T0 + timedelta(seconds=30),
    )
    assert (grant.status, grant.user_id) == ("approved", alice.id)
    issued = poll(store, auth.device_code, T0 + timedelta(seconds=35))
    body = issued.body()
    assert body["token_type"] == "Bearer" and body["scope"] == "read write"
    assert "expires_in" not in body and "refresh_token" not in body
    assert tokens.TOKEN_RE.fullmatch(issued.access_token)
    assert issued.label.startswith("ltm-python-0.1.0-")
    user = tokens.authenticate(store, f"Bearer {issued.access_token}", T0 + timedelta(days=400))
    assert user.id == alice.id
    labels = [t.label for t in store.list_tokens(user_id=alice.id)]
    assert labels == ["alice-laptop", issued.label]
    # Single use.
    e = oauth_error(lambda: poll(store, auth.device_code, T0 + timedelta(seconds=45)))
    assert (e.code, e.status) == ("invalid_grant", 400)
    # Revoked: gone.
    tokens.revoke(store, issued.label, user_id=alice.id)
    with pytest.raises(Exception, match="invalid token"):
        tokens.authenticate(store, f"Bearer {issued.access_token}")


def test_denied_and_expired(store: Store) -> None:
    alice, _ = make_user(store)
    denied = start(store)
    device.decide(store, SETTINGS, alice, denied.user_code, approve=False, when=T0)
    e = oauth_error(lambda: poll(store, denied.device_code, T0 + timedelta(seconds=5)))
    assert (e.code, e.status) == ("access_denied", 400)
    late = start(store)
    e = oauth_error(lambda: poll(store, late.device_code, T0 + timedelta(minutes=10)))
    assert (e.code, e.status) == ("expired_token", 400)
    # Approved but collected too late: expired too, and no token is made.
    slow = start(store)
    device.decide(store, SETTINGS, alice, slow.user_code, approve=True, when=T0)
    e = oauth_error(lambda: poll(store, slow.device_code, T0 + timedelta(minutes=11)))
    assert e.code == "expired_token"
    assert len(store.list_tokens(user_id=alice.id)) == 1
    # An expired code cannot be approved.
    with pytest.raises(NotFound):
        device.decide(
            store,
            SETTINGS,
            alice,
            late.user_code,
            approve=True,
            when=T0 + timedelta(minutes=10),
        )


def test_a_device_code_of_another_client_is_invalid_grant(store: Store) -> None:
    auth = start(store)
    grant = store.get_device_grant(device.hash_code(auth.device_code))
    assert grant is not None
    other = grant._replace(
        device_code_hash=device.hash_code("other"),
        user_code_hash="u2",
        client_id="other-cli",
    )
    store.create_device_grant(other, T0)
    e = oauth_error(lambda: poll(store, "other", T0 + timedelta(seconds=5)))
    assert e.code == "invalid_grant" and "another client" in e.description


# -- deciding and the rate limits on wrong codes -------------------------------------------


def test_decide_errors(store: Store) -> None:
    alice, _ = make_user(store)
    auth = start(store)
    with pytest.raises(NotFound, match="unknown or expired code"):
        device.decide(store, SETTINGS, alice, "BCDF-GHJK", approve=True, when=T0)
    with pytest.raises(NotFound):
        device.decide(store, SETTINGS, alice, "not a code", approve=True, when=T0)
    with pytest.raises(BadRequest):
        device.decide(store, SETTINGS, alice, auth.user_code, approve="yes")  # type: ignore[arg-type]
    device.decide(store, SETTINGS, alice, auth.user_code, approve=True, when=T0)
    with pytest.raises(Conflict, match="already"):
        device.decide(store, SETTINGS, alice, auth.user_code, approve=False, when=T0)


def test_anonymous_wrong_codes_are_limited_per_client(store: Store) -> None:
    """The one anonymous lookup (before a Cognito sign-in) is charged to the address."""
    alice, _ = make_user(store)
    settings = DeviceSettings(wrong_codes_per_client=3)
    auth = start(store)
    for _ in range(3):
        with pytest.raises(NotFound):
            device.find_pending(store, settings, "BCDF-GHJK", client_ip="203.0.113.5", when=T0)
    # Past the limit even the right code is refused, from that client (and its /64 for IPv6).
    with pytest.raises(TooManyAttempts) as info:
        device.find_pending(store, settings, auth.user_code, client_ip="203.0.113.5", when=T0)
    assert info.value.status == 429
    # Another client is not affected; the next window starts afresh.
    assert device.find_pending(store, settings, auth.user_code, client_ip="203.0.113.6", when=T0)
    later = T0 + settings.window
    fresh = start(store, when=later)
    assert device.find_pending(
        store, settings, fresh.user_code, client_ip="203.0.113.5", when=later
    )
    device.decide(store, settings, alice, auth.user_code, approve=True, when=T0)


def test_wrong_codes_from_everywhere_lock_nobody_else_out(store: Store) -> None:
    """500 wrong codes from many addresses and many users: a fresh address still looks
    its code up, and a signed-in person still approves (no global lockout)."""
    settings = DeviceSettings()
    guessers = [make_user(store, f"guesser{n}")[0] for n in range(10)]
    auth = start(store)
    for n in range(250):
        with pytest.raises((NotFound, TooManyAttempts)):
            device.find_pending(store, settings, "BCDF-GHJK", client_ip=f"10.0.{n}.1", when=T0)
        with pytest.raises((NotFound, TooManyAttempts)):
            device.decide(store, settings, guessers[n % 10], "BCDF-GHJK", approve=True, when=T0)
    assert device.find_pending(store, settings, auth.user_code, client_ip="10.9.9.9", when=T0)
    alice, _ = make_user(store)
    grant = device.decide(store, settings, alice, auth.user_code, approve=True, when=T0)
    assert grant.user_id == alice.id


def test_wrong_codes_are_charged_to_the_approving_user(store: Store) -> None:
    """RFC 8628 §5.1: guessing stays bounded per user, and one user locks out nobody else."""
    alice, _ = make_user(store)
    bob, _ = make_user(store, "bob")
    settings = DeviceSettings(wrong_codes_per_user=9, wrong_codes_per_client=1)
    auth = start(store)
    for _ in range(9):
        with pytest.raises(NotFound):
            device.decide(store, settings, alice, "BCDF-GHJK", approve=True, when=T0)
    # Alice is done for this window, even with the right code ...
    with pytest.raises(TooManyAttempts, match="you entered too many"):
        device.decide(store, settings, alice, auth.user_code, approve=True, when=T0)
    # ... while Bob (behind the same address, which no longer counts) is not affected,
    # nor is an anonymous lookup from anywhere.
    assert device.find_pending(store, settings, auth.user_code, client_ip="192.0.2.1", when=T0)
    grant = device.decide(store, settings, bob, auth.user_code, approve=True, when=T0)
    assert grant.user_id == bob.id
    # The next window starts afresh for Alice.
    later = T0 + settings.window
    fresh = start(store, when=later)
    device.decide(store, settings, alice, fresh.user_code, approve=True, when=later)


def test_something_that_is_not_a_code_is_not_counted(store: Store) -> None:
    alice, _ = make_user(store)
    settings = DeviceSettings(wrong_codes_per_user=1)
    auth = start(store)
    for junk in ("", "not a code", "BCDF", "A" * 100):
        with pytest.raises(NotFound):
            device.decide(store, settings, alice, junk, approve=True, when=T0)
    device.decide(store, settings, alice, auth.user_code, approve=True, when=T0)


def test_ipv6_clients_share_their_64(store: Store) -> None:
    settings = DeviceSettings(wrong_codes_per_client=2)
    for host in ("1", "2"):
        with pytest.raises(NotFound):
            device.find_pending(
                store, settings, "BCDF-GHJK", client_ip=f"2001:db8::{host}", when=T0
            )
    with pytest.raises(TooManyAttempts):
        device.find_pending(store, settings, "BCDF-GHJK", client_ip="2001:db8::ffff", when=T0)


# -- identities ------------------------------------------------------------------------------


def test_first_sign_in_creates_the_user_once(store: Store) -> None:
    first = device.user_for_subject(store, "sub-123", "alice@example.org", when=T0)
    again = device.user_for_subject(store, "sub-123", "renamed@example.org", when=T0)
    assert first == again and first.subject == "sub-123" and first.display == "alice@example.org"
    assert store.get_user_by_subject("sub-123") == first
    odd = device.user_for_subject(store, "sub-456", "\x00\x01", when=T0)
    assert odd.display == "user"


def test_a_web_code_claim_carries_the_token_it_was_approved_with(store: Store) -> None:
    """The browser's session is bound to the approver's token (``Claim.token_hash``);
    approved as a trusted user, with no token, it is bound to none."""
    alice, secret = make_user(store)
    credential = tokens.credential(f"Bearer {secret}")
    for caller, expected in ((credential, tokens.hash_token(secret)), (alice, None)):
        shown, grant = device.authorize_web(store, SETTINGS, client_ip="192.0.2.9", when=T0)
        device.decide(store, SETTINGS, caller, shown, approve=True, when=T0)
        claim = device.claim_web(store, grant.device_code_hash, when=T0)
        assert claim == device.Claim("approved", alice, expected)
        assert device.claim_web(store, grant.device_code_hash, when=T0).status == "used"


def test_a_store_from_before_approved_with_gains_it_on_open(tmp_path: Path) -> None:
    """Migration 12 on a store that has grants already: they read back unchanged."""
    import sqlite3

    from ltm.store.sqlite import SqliteStore
    from ltm.store.sqlite_schema import COMPACT_VERSION, SCHEMA_VERSION

    db = tmp_path / "old.db"
    store = SqliteStore(db)
    _alice, _secret = make_user(store)
    _shown, grant = device.authorize_web(store, SETTINGS, client_ip="192.0.2.9", when=T0)
    store.close()
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE device_grants DROP COLUMN approved_with")
    # The version before migration 12: every later migration runs again on tables it
    # already made, as on a store whose recorded version lags its schema.
    conn.execute(f"PRAGMA user_version = {COMPACT_VERSION}")
    conn.commit()
    conn.close()
    store = SqliteStore(db)
    try:
        assert store.get_device_grant(grant.device_code_hash) == grant
        decided = store.decide_device_grant(
            grant.user_code_hash, T0, approve=True, user_id="u1", approved_with="h"
        )
        assert store.get_device_grant(grant.device_code_hash) == decided
        assert decided.approved_with == "h"
    finally:
        store.close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_a_lifetime_set_by_the_operator_ends_the_device_token(store: Store) -> None:
    """``LTM_DEVICE_TOKEN_DAYS``: the token says when it ends (``expires_in``), works until
    then, and is refused after; signing in again is the renewal."""
    settings = DeviceSettings.from_env({"LTM_DEVICE_TOKEN_DAYS": "30"})
    assert settings.token_days == 30
    alice, _ = make_user(store)
    auth = start(store)
    device.decide(store, settings, alice, auth.user_code, approve=True, when=T0)
    form = {"grant_type": [device.GRANT_TYPE], "device_code": [auth.device_code]}
    issued = device.token(store, settings, {**form, "client_id": ["ltm-cli"]}, when=T0)
    assert issued.body()["expires_in"] == 30 * 86400
    bearer = f"Bearer {issued.access_token}"
    assert tokens.authenticate(store, bearer, T0 + timedelta(days=29)).id == alice.id
    with pytest.raises(Exception, match="invalid token"):
        tokens.authenticate(store, bearer, T0 + timedelta(days=30))
    (listed,) = [t for t in store.list_tokens(user_id=alice.id) if t.label == issued.label]
    assert listed.expires_at == T0 + timedelta(days=30)


@pytest.mark.parametrize("raw", ["0", "3651", "a month"])
def test_a_lifetime_out_of_bounds_is_refused_at_start(raw: str) -> None:
    with pytest.raises(ValueError, match="LTM_DEVICE_TOKEN_DAYS"):
        DeviceSettings.from_env({"LTM_DEVICE_TOKEN_DAYS": raw})


def test_revoking_every_token_of_someone_who_left(store: Store) -> None:
    """``tokens.revoke_all``: each of the user's devices is signed out, nobody else's."""
    alice, first = make_user(store)
    second = tokens.add(store, alice.id, "alice-desktop", when=T0)
    _bob, bobs = make_user(store, "bob")
    assert sorted(tokens.revoke_all(store, alice.id)) == ["alice-desktop", "alice-laptop"]
    for secret in (first, second):
        with pytest.raises(Exception, match="invalid token"):
            tokens.authenticate(store, f"Bearer {secret}")
    assert tokens.authenticate(store, f"Bearer {bobs}").display == "bob"
    assert tokens.revoke_all(store, alice.id) == []


def test_a_sign_in_approved_with_a_token_revoked_before_it_is_collected_gets_nothing(
    store: Store,
) -> None:
    """Someone who left (``revoke_all``) or a stolen token revoked: a device approved with
    that token and not yet collected gets no token of its own, which would outlive it."""
    alice, secret = make_user(store)
    auth = start(store)
    caller = tokens.credential(f"Bearer {secret}")
    device.decide(store, SETTINGS, caller, auth.user_code, approve=True, when=T0)
    assert tokens.revoke_all(store, alice.id) == ["alice-laptop"]
    e = oauth_error(lambda: poll(store, auth.device_code, T0 + timedelta(seconds=5)))
    assert e.code == "invalid_grant" and "revoked" in e.description
    assert store.list_tokens(user_id=alice.id) == []
    # Approved with a token still good, the device gets its own, as before.
    other = start(store)
    fresh = tokens.add(store, alice.id, "alice-desktop", when=T0)
    caller = tokens.credential(f"Bearer {fresh}")
    device.decide(store, SETTINGS, caller, other.user_code, approve=True, when=T0)
    assert poll(store, other.device_code, T0 + timedelta(seconds=5)).access_token


class _Overlapping:
    """A store whose user-code lookups wait for one another (up to ``scaled(2)`` s): guesses
    sent at once all pass any check made before the lookup, as on many Lambda instances."""

    def __init__(self, store: Store, parties: int) -> None:
        self._store = store
        self._barrier = threading.Barrier(parties, timeout=scaled(2))
        self._lock = threading.Lock()
        self.lookups = 0

    def get_device_grant_by_user_code(self, user_code_hash: str, now: datetime) -> object:
        with self._lock:
            self.lookups += 1
        # Broken: the others were refused before looking, nothing more to wait for.
        with contextlib.suppress(threading.BrokenBarrierError):
            self._barrier.wait()
        return self._store.get_device_grant_by_user_code(user_code_hash, now)

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


@pytest.mark.parametrize("who", ["user", "client"])
def test_guesses_sent_at_once_stay_within_the_limit(store: Store, who: str) -> None:
    """RFC 8628 §5.1's bound holds for concurrent guesses too: each is charged before its
    lookup, so twelve at once look up no more codes than the limit of three allows."""
    alice, _ = make_user(store)
    settings = DeviceSettings(wrong_codes_per_user=3, wrong_codes_per_client=3)
    overlapping = _Overlapping(store, 12)
    charged: dict[str, object] = {"user": alice} if who == "user" else {"client_ip": "192.0.2.9"}
    outcomes: list[str] = []

    def guess(n: int) -> None:
        try:
            device.find_pending(
                overlapping,  # type: ignore[arg-type]
                settings,
                f"BCDF-GH{'JKLMNPQRSTVW'[n]}{'JKLMNPQRSTVW'[n]}",
                when=T0,
                **charged,  # type: ignore[arg-type]
            )
        except (NotFound, TooManyAttempts) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlapping.lookups == 3
    assert sorted(outcomes) == ["NotFound"] * 3 + ["TooManyAttempts"] * 9


def test_right_codes_are_not_charged_as_wrong_ones(store: Store) -> None:
    """Charging each try before its lookup leaves the limit about wrong codes: a person
    who approves many devices is never refused for it."""
    alice, _ = make_user(store)
    settings = DeviceSettings(wrong_codes_per_user=2)
    for n in range(5):
        auth = start(store, ip=f"192.0.2.{n}")
        device.decide(store, settings, alice, auth.user_code, approve=True, when=T0)
    for _ in range(2):
        with pytest.raises(NotFound):
            device.decide(store, settings, alice, "BCDF-GHJK", approve=True, when=T0)
    with pytest.raises(TooManyAttempts):
        device.decide(store, settings, alice, start(store).user_code, approve=True, when=T0)
