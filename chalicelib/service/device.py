"""Signing in from a browser: the OAuth 2.0 Device Authorization Grant (RFC 8628), server side.

Framework-free rules over the store; ``app.py`` (through ``chalicelib.web.device``)
only moves bytes in and out.

The two endpoints, as the reference client calls them (form-encoded):

- ``POST /oauth/authorize_device`` (``client_id=ltm-cli``, ``scope=read write``):
  a new grant. The answer carries the ``device_code`` (256 random bits, shown
  to the device only, stored as its sha256), the ``user_code`` (8 letters of
  RFC 8628's consonant alphabet, 20^8 ≈ 2^34.6, shown as ``XXXX-XXXX``), the
  ``verification_uri`` (``/device``) and ``verification_uri_complete``
  (``/device?code=XXXX-XXXX``), ``expires_in`` (600 s by default) and
  ``interval`` (5 s).
- ``POST /oauth/token`` (``grant_type=urn:ietf:params:oauth:grant-type:device_code``,
  ``device_code``, ``client_id``): the device polls. Until a user decides it
  gets ``authorization_pending``, or ``slow_down`` when it polls before its
  interval has passed (the grant's interval then grows by 5 s, RFC 8628
  §3.5); then ``access_denied``, or once, ``{"access_token", "token_type":
  "Bearer", "scope"}``; after the expiry ``expired_token``; a used, unknown or
  foreign device code is ``invalid_grant``. Errors are RFC 6749 §5.2 JSON
  (``{"error", "error_description"}``), status 400 (401 for ``invalid_client``
  when the client sent credentials).

The token handed out is an ordinary ltm bearer token of the approving user
(``tokens.new_token``), one per device, labelled after the device so people
can tell their devices apart (``ltm tokens``) and revoke one. By default it
has no expiry: the reference client cannot refresh, so it lasts until revoked,
and the answer carries no ``expires_in``. An operator who wants signed-in
devices to sign in again now and then (someone who left the organisation then
loses access by the time the lifetime runs out, even if nobody revokes their
tokens) sets ``LTM_DEVICE_TOKEN_DAYS``: each token then expires that many days
after it was issued, the answer says so in ``expires_in`` (RFC 6749 §5.1), and
signing in again (``ltm auth login``) renews it.

A grant is decided (approved or denied) once, by a signed-in user who types
the user code: on the verification page (Cognito or an existing token, see
``chalicelib.web.device``) or with ``ltm approve CODE``
(``POST /v1/device/approve``). Approving needs the full scope: a read-only
token cannot sign a device in (least of all one asking for more). The grant
keeps the hash of the token it was approved with, when there was one: a web
view session started from an approved code (``claim_web``) then ends when that
token is revoked, like a session signed in with the token itself, and a device
approved with it that has not collected its token by then gets none
(``invalid_grant``): its own token would outlive the revoked one.

Guessing codes stays bounded (RFC 8628 §5.1, "User Code Brute Forcing":
https://www.rfc-editor.org/rfc/rfc8628#section-5.1) by store-backed counters,
so the limits hold across Lambda instances and server threads. Wrong codes
are charged to whoever can be told apart without locking out anyone else:

- the signed-in approving user (``ltm approve``, the self-hosted page, which
  checks the token before it looks the code up): per user;
- a wrong token on the self-hosted page: per user code typed, so guessing
  tokens against one device is bounded and nobody else is touched;
- the only anonymous lookup (the code step before a Cognito sign-in): per
  client address (an IPv6 address by its /64).

Each try is counted before it is made and handed back once it turns out
right, so guesses sent at once (on many Lambda instances) stay within the
limit too. Past a limit the entries it covers are refused for the rest of
the window (429), right or wrong; a person behind the same address or proxy as a
guesser signs in with their own account and is not affected. There is no
count of everyone's failures together: it would let anyone lock every sign-in
out with a few hundred wrong codes. The bound holds without it: a guess hits
one of the live codes with odds of about live/20^8, and every guesser is held
to a few tries per window per account or per address.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import secrets
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from ..store import FULL_SCOPE, DeviceGrant, NameTaken, Store, User
from ..store import Conflict as StoreConflict
from ..store import Gone as StoreGone
from ..store import NotFound as StoreNotFound
from .access import Caller, Credential, user_of
from .errors import BadRequest, Conflict, NotFound, ServiceError
from .tokens import expired, new_token
from .users import new_user, now

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
CLIENT_IDS = frozenset({"ltm-cli"})  # public clients (no secret), as the reference's
WEB_CLIENT_ID = "ltm-web"  # the web view's sign-in page (authorize_web); no token endpoint
SCOPES = frozenset({"read", "write"})
DEFAULT_SCOPE = FULL_SCOPE  # what a device that names no scope asks for

# RFC 8628 §6.1: consonants only (no vowels, so no words; no 0/O or 1/I confusions).
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
_USER_CODE_RE = re.compile(f"[{USER_CODE_ALPHABET}]{{{USER_CODE_LENGTH}}}")
_SEPARATORS = re.compile(r"[\s\-‐‑‒–—―_.]+")
MAX_CODE_INPUT = 64
DEVICE_NAME_MAX = 120
CREATE_ATTEMPTS = 5
LABEL_ATTEMPTS = 5


# -- settings ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceSettings:
    """The knobs of the device flow; ``from_env`` reads the ``LTM_DEVICE_*`` variables."""

    expires_in: int = 600  # seconds a grant lives (RFC 8628 suggests minutes)
    interval: int = 5  # seconds between polls
    slow_down_step: int = 5  # RFC 8628 §3.5
    poll_leeway: timedelta = timedelta(milliseconds=250)  # clock and network jitter
    window: timedelta = timedelta(minutes=15)  # rate-limit window
    wrong_codes_per_user: int = 10  # wrong user codes per approving user per window
    wrong_codes_per_client: int = 10  # wrong codes looked up anonymously, per address
    wrong_sign_ins_per_code: int = 10  # wrong tokens on the page, per user code typed
    authorize_per_client: int = 30  # new grants per client address per window
    token_days: int | None = None  # how long an issued token works; None: until revoked

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> DeviceSettings:
        def number(name: str, default: int, low: int, high: int) -> int:
            raw = environ.get(name)
            if raw is None or raw.strip() == "":
                return default
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {raw!r}") from None
            if not low <= value <= high:
                raise ValueError(f"{name} must be between {low} and {high}, got {value}")
            return value

        base = cls()
        return cls(
            expires_in=number("LTM_DEVICE_EXPIRES_IN", base.expires_in, 1, 3600),
            interval=number("LTM_DEVICE_INTERVAL", base.interval, 1, 60),
            wrong_codes_per_user=number(
                "LTM_DEVICE_WRONG_CODES_PER_USER", base.wrong_codes_per_user, 1, 10_000
            ),
            wrong_codes_per_client=number(
                "LTM_DEVICE_WRONG_CODES_PER_CLIENT", base.wrong_codes_per_client, 1, 10_000
            ),
            wrong_sign_ins_per_code=number(
                "LTM_DEVICE_WRONG_SIGN_INS_PER_CODE", base.wrong_sign_ins_per_code, 1, 10_000
            ),
            authorize_per_client=number(
                "LTM_DEVICE_AUTHORIZE_PER_CLIENT", base.authorize_per_client, 1, 100_000
            ),
            # At most ten years: a bound, so a typo cannot mean "for ever" in disguise.
            token_days=number("LTM_DEVICE_TOKEN_DAYS", 0, 1, 3650)
            if (environ.get("LTM_DEVICE_TOKEN_DAYS") or "").strip()
            else None,
        )


# -- errors ------------------------------------------------------------------------


class OAuthError(Exception):
    """An RFC 6749 §5.2 error: ``{"error": code, "error_description": description}``."""

    def __init__(
        self,
        code: str,
        description: str,
        *,
        status: int = 400,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {description}")
        self.code = code
        self.description = description
        self.status = status
        self.headers = dict(headers or {})

    def body(self) -> dict[str, str]:
        return {"error": self.code, "error_description": self.description}


class TooManyAttempts(ServiceError):
    """Too many wrong user codes charged to this user, code or client lately.

    ``kind`` says which limit: ``user``, ``code`` or ``client``.
    """

    status = 429

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


WRONG_CODE = "unknown or expired code; check the code your terminal shows"


# -- codes -------------------------------------------------------------------------


def new_user_code() -> str:
    """Eight letters of the RFC 8628 alphabet (normalized form, without the dash)."""
    return "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))


def show_user_code(code: str) -> str:
    """``XXXX-XXXX``: how the code is shown to people."""
    half = USER_CODE_LENGTH // 2
    return f"{code[:half]}-{code[half:]}"


def normalize_user_code(raw: object) -> str | None:
    """What a person typed, as a code (case, dashes, spaces ignored); None if it is not one."""
    if not isinstance(raw, str) or len(raw) > MAX_CODE_INPUT:
        return None
    text = unicodedata.normalize("NFKC", raw)
    text = _SEPARATORS.sub("", text).upper()
    return text if _USER_CODE_RE.fullmatch(text) else None


def hash_code(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogateescape")).hexdigest()


def clean_device_name(raw: object) -> str:
    """A printable, bounded device description (from a User-Agent or a name the device sent)."""
    if not isinstance(raw, str):
        return ""
    text = "".join(ch if unicodedata.category(ch)[0] not in "CZ" else " " for ch in raw)
    text = " ".join(text.split())
    return text[:DEVICE_NAME_MAX]


_LABEL_JUNK = re.compile(r"[^A-Za-z0-9._-]+")


def device_label(device_name: str) -> str:
    """A token label people can tell apart and type: ``<device>-<6 hex>``."""
    slug = _LABEL_JUNK.sub("-", device_name).strip("-._")[:40].strip("-._")
    return f"{slug or 'device'}-{secrets.token_hex(3)}"


def client_key(client_ip: str) -> str:
    """The rate-limit identity of a client: its IPv4 address, or the /64 of an IPv6 one."""
    try:
        address = ipaddress.ip_address(client_ip.strip())
    except ValueError:
        return client_ip.strip()[:64] or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


# -- form parameters ------------------------------------------------------------------


def _param(form: Mapping[str, Sequence[str]], name: str) -> str | None:
    """One parameter; RFC 6749 §3.1: giving one more than once is ``invalid_request``."""
    values = form.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise OAuthError("invalid_request", f"{name} given more than once")
    return values[0]


def _client(form: Mapping[str, Sequence[str]], *, authenticated: bool) -> str:
    client_id = _param(form, "client_id")
    if not client_id:
        raise OAuthError("invalid_request", "client_id is required")
    if client_id not in CLIENT_IDS:
        if authenticated:  # RFC 6749 §5.2: the client tried to authenticate
            raise OAuthError(
                "invalid_client",
                "unknown client",
                status=401,
                headers={"WWW-Authenticate": 'Basic realm="ltm"'},
            )
        raise OAuthError("invalid_client", "unknown client")
    return client_id


def _scope(form: Mapping[str, Sequence[str]]) -> str:
    raw = _param(form, "scope")
    if raw is None or not raw.strip():
        return DEFAULT_SCOPE
    wanted = raw.split()
    unknown = [s for s in wanted if s not in SCOPES]
    if unknown:
        raise OAuthError("invalid_scope", f"unknown scope: {' '.join(unknown)[:64]}")
    return " ".join(s for s in ("read", "write") if s in wanted)


# -- rate limits ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Window:
    index: int
    ends: datetime


def _window(settings: DeviceSettings, when: datetime) -> _Window:
    seconds = int(settings.window.total_seconds())
    index = int(when.timestamp()) // seconds
    return _Window(index, datetime.fromtimestamp((index + 1) * seconds, when.tzinfo))


@dataclass(frozen=True, slots=True)
class _Limit:
    kind: str  # user, code or client
    key: str  # the counters' name in the store, after their prefix
    limit: int
    refusal: str  # what a person is told once it is reached

    @property
    def tries(self) -> str:
        return f"device-tries:{self.key}"

    @property
    def rights(self) -> str:
        return f"device-right:{self.key}"


def _limits(
    settings: DeviceSettings,
    when: datetime,
    *,
    user: User | None = None,
    client_ip: str | None = None,
    code: str | None = None,
) -> list[_Limit]:
    """The counters one kind of failure is charged to."""
    index = _window(settings, when).index
    limits: list[_Limit] = []
    if user is not None:
        limits.append(
            _Limit(
                "user",
                f"user:{user.id}:{index}",
                settings.wrong_codes_per_user,
                "you entered too many wrong codes; wait a few minutes, then try again",
            )
        )
    if code is not None:
        limits.append(
            _Limit(
                "code",
                f"code:{hash_code(code)}:{index}",
                settings.wrong_sign_ins_per_code,
                "too many failed sign-ins for this code; wait a few minutes, then start again",
            )
        )
    if client_ip is not None:
        limits.append(
            _Limit(
                "client",
                f"client:{client_key(client_ip)}:{index}",
                settings.wrong_codes_per_client,
                "too many wrong codes from your network; sign in first, or wait a few minutes",
            )
        )
    return limits


def charge(
    store: Store,
    settings: DeviceSettings,
    when: datetime,
    *,
    user: User | None = None,
    client_ip: str | None = None,
    code: str | None = None,
) -> None:
    """Charge one try (a code to look up, or a token to check for a code) to this user,
    code or address before it is made; 429 when their wrong tries are already too many.

    Each try is counted before it is made and handed back once it turns out right
    (``refund``): a read of the count before the try let guesses sent at once all pass
    it, as many as could be in flight. Wrong tries are the tries not handed back.
    """
    ends = _window(settings, when).ends
    for limit in _limits(settings, when, user=user, client_ip=client_ip, code=code):
        tries = store.add_to_counter(limit.tries, when, ends)
        # Only past the limit in tries can the wrong ones be too many: read the rights then.
        if tries > limit.limit and tries - store.read_counter(limit.rights, when) > limit.limit:
            raise TooManyAttempts(limit.refusal, kind=limit.kind)


def refund(
    store: Store,
    settings: DeviceSettings,
    when: datetime,
    *,
    user: User | None = None,
    client_ip: str | None = None,
    code: str | None = None,
) -> None:
    """Hand back the try ``charge`` counted: it was right (a real code, a real token)."""
    ends = _window(settings, when).ends
    for limit in _limits(settings, when, user=user, client_ip=client_ip, code=code):
        store.add_to_counter(limit.rights, when, ends)


# -- the device authorization endpoint ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Authorization:
    """What ``POST /oauth/authorize_device`` answers (RFC 8628 §3.2)."""

    device_code: str
    user_code: str  # shown form, XXXX-XXXX
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int

    def body(self) -> dict[str, Any]:
        return {
            "device_code": self.device_code,
            "user_code": self.user_code,
            "verification_uri": self.verification_uri,
            "verification_uri_complete": self.verification_uri_complete,
            "expires_in": self.expires_in,
            "interval": self.interval,
        }


def verification_uri(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/device"


def authorize(
    store: Store,
    settings: DeviceSettings,
    form: Mapping[str, Sequence[str]],
    *,
    base_url: str,
    client_ip: str,
    user_agent: str | None = None,
    authenticated: bool = False,
    when: datetime | None = None,
) -> Authorization:
    """A new pending grant for the device (RFC 8628 §3.1, §3.2); raises ``OAuthError``.

    ``device_name`` (an optional form parameter, an extension) names the
    device for the verification page and the token's label; without it, the
    request's User-Agent does.
    """
    when = when or now()
    client_id = _client(form, authenticated=authenticated)
    scope = _scope(form)
    name = clean_device_name(_param(form, "device_name")) or clean_device_name(user_agent)
    device_code, user_code, _grant = _new_grant(
        store, settings, client_id=client_id, scope=scope, name=name, client_ip=client_ip, when=when
    )
    page = verification_uri(base_url)
    return Authorization(
        device_code=device_code,
        user_code=user_code,
        verification_uri=page,
        verification_uri_complete=f"{page}?code={user_code}",
        expires_in=settings.expires_in,
        interval=settings.interval,
    )


def _new_grant(
    store: Store,
    settings: DeviceSettings,
    *,
    client_id: str,
    scope: str,
    name: str,
    client_ip: str,
    when: datetime,
) -> tuple[str, str, DeviceGrant]:
    """A new pending grant, within the per-address limit: (device code, shown user code, grant)."""
    window = _window(settings, when)
    key = f"device-authorize:client:{client_key(client_ip)}:{window.index}"
    if store.add_to_counter(key, when, window.ends) > settings.authorize_per_client:
        raise OAuthError(
            "slow_down",
            "too many sign-in requests from your network; wait a few minutes",
            status=429,
            headers={"Retry-After": str(max(1, int((window.ends - when).total_seconds())))},
        )

    for _attempt in range(CREATE_ATTEMPTS):
        device_code = secrets.token_urlsafe(32)
        user_code = new_user_code()
        grant = DeviceGrant(
            device_code_hash=hash_code(device_code),
            user_code_hash=hash_code(user_code),
            client_id=client_id,
            scope=scope,
            device_name=name,
            client_ip=client_ip[:64],
            created_at=when,
            expires_at=when + timedelta(seconds=settings.expires_in),
            interval=settings.interval,
            next_poll_at=when,
        )
        try:
            store.create_device_grant(grant, when)
        except StoreConflict:
            continue  # a live grant holds this user code: draw again
        return device_code, show_user_code(user_code), grant
    raise OAuthError("temporarily_unavailable", "could not allocate a code; try again", status=503)


# -- a browser signed in by a CLI: the web view's sign-in page ---------------------------


def authorize_web(
    store: Store,
    settings: DeviceSettings,
    *,
    client_ip: str,
    user_agent: str | None = None,
    when: datetime | None = None,
) -> tuple[str, DeviceGrant]:
    """A grant for the web view's sign-in page: the user code it shows, and the grant.

    Someone signed in elsewhere approves it with ``ltm approve CODE`` (``decide``, the
    device flow's rules and limits); the browser that holds the grant then gets a web
    session for the approving user (``claim_web``), never a token. Its client id is not
    one ``POST /oauth/token`` accepts, and its device code is dropped here: the page
    knows the grant by its hash, in a signed ticket bound to the browser's cookie.
    """
    when = when or now()
    agent = clean_device_name(user_agent)
    name = clean_device_name(f"web browser ({agent})" if agent else "web browser")
    _code, shown, grant = _new_grant(
        store,
        settings,
        client_id=WEB_CLIENT_ID,
        scope=FULL_SCOPE,
        name=name,
        client_ip=client_ip,
        when=when,
    )
    return shown, grant


class Claim(NamedTuple):
    """Where a web sign-in grant stands (``claim_web``)."""

    status: str  # pending, denied, expired, used, or approved (then ``user`` is set)
    user: User | None = None
    # The hash of the token the approval was made with: the session the claim starts
    # lasts only as long as that token, as a session signed in with it would.
    token_hash: str | None = None


def claim_web(store: Store, device_code_hash: str, *, when: datetime | None = None) -> Claim:
    """Where a web sign-in grant stands: ``pending``, ``denied``, ``expired`` or ``used``
    (no user), or ``approved`` with the approving user, once: a second claim is ``used``."""
    when = when or now()
    grant = store.get_device_grant(device_code_hash)
    if grant is None or grant.client_id != WEB_CLIENT_ID or grant.expires_at <= when:
        return Claim("expired")
    if grant.status in ("pending", "denied"):
        return Claim(grant.status)
    if grant.status != "approved" or grant.user_id is None:
        return Claim("used")
    # Once only, across processes: the first claim counts 1 (the web key's rule too).
    if store.add_to_counter(f"web-grant:{device_code_hash}", when, grant.expires_at) != 1:
        return Claim("used")
    user = store.get_user(grant.user_id)
    if user is None:
        return Claim("expired")
    return Claim("approved", user, grant.approved_with)


# -- the token endpoint ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Issued:
    access_token: str
    label: str
    scope: str
    expires_in: int | None = None  # seconds; None when the token lasts until revoked

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "scope": self.scope,
        }
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        return body


def token(
    store: Store,
    settings: DeviceSettings,
    form: Mapping[str, Sequence[str]],
    *,
    authenticated: bool = False,
    when: datetime | None = None,
) -> Issued:
    """One poll of the device (RFC 8628 §3.4, §3.5): the token once approved, else OAuthError."""
    when = when or now()
    grant_type = _param(form, "grant_type")
    if not grant_type:
        raise OAuthError("invalid_request", "grant_type is required")
    if grant_type != GRANT_TYPE:
        raise OAuthError(
            "unsupported_grant_type", f"only {GRANT_TYPE} is supported at this endpoint"
        )
    client_id = _client(form, authenticated=authenticated)
    device_code = _param(form, "device_code")
    if not device_code:
        raise OAuthError("invalid_request", "device_code is required")
    if len(device_code) > 256:
        raise OAuthError("invalid_grant", "unknown device code")

    polled = store.poll_device_grant(
        hash_code(device_code),
        when,
        slow_down_step=settings.slow_down_step,
        leeway=settings.poll_leeway,
    )
    if polled is None:
        raise OAuthError("invalid_grant", "unknown device code")
    grant, too_fast = polled
    if grant.client_id != client_id:
        raise OAuthError("invalid_grant", "this device code was issued to another client")
    if grant.expires_at <= when:
        raise OAuthError("expired_token", "the device code has expired; start again")
    if grant.status == "used":
        raise OAuthError("invalid_grant", "this device code was already used")
    if grant.status == "denied":
        raise OAuthError("access_denied", "the sign-in was denied")
    if grant.status == "approved":
        return _redeem(store, grant, when, settings.token_days)
    if too_fast:
        raise OAuthError(
            "slow_down", f"polling too fast; wait {grant.interval} seconds between requests"
        )
    raise OAuthError("authorization_pending", "waiting for the user to approve")


def _redeem(store: Store, grant: DeviceGrant, when: datetime, days: int | None) -> Issued:
    assert grant.user_id is not None
    if grant.approved_with is not None and not _token_works(store, grant.approved_with, when):
        # Revoked since (someone who left, a stolen token): the device's own token would
        # outlive the one that let it in.
        raise OAuthError(
            "invalid_grant",
            "the token this sign-in was approved with has been revoked since; start again",
        )
    lifetime = timedelta(days=days) if days is not None else None
    for _attempt in range(LABEL_ATTEMPTS):
        label = device_label(grant.device_name)
        # The token gets exactly the scope the device asked for and the user approved.
        secret, record = new_token(grant.user_id, label, when=when, scope=grant.scope)
        if lifetime is not None:
            record = record._replace(expires_at=record.created_at + lifetime)
        try:
            store.redeem_device_grant(grant.device_code_hash, when, record)
        except StoreConflict:
            continue  # the label was taken (or the write was throttled): draw another suffix
        except StoreNotFound:
            raise OAuthError("invalid_grant", "unknown device code") from None
        except StoreGone:
            raise OAuthError("invalid_grant", "this device code was already used") from None
        seconds = int(lifetime.total_seconds()) if lifetime is not None else None
        return Issued(access_token=secret, label=label, scope=grant.scope, expires_in=seconds)
    raise OAuthError(
        "temporarily_unavailable", "could not hand out the new token; try again", status=503
    )


def _token_works(store: Store, token_hash: str, when: datetime) -> bool:
    found = store.token_owner(token_hash)
    return found is not None and not expired(found[0], when)


# -- deciding: the verification page and ``ltm approve`` ------------------------------------------


def find_pending(
    store: Store,
    settings: DeviceSettings,
    raw_code: object,
    *,
    user: User | None = None,
    client_ip: str = "",
    when: datetime | None = None,
) -> DeviceGrant:
    """The pending grant a person's code names, with the wrong-code limits applied.

    A wrong code is charged to ``user`` when the person is signed in, else
    (an anonymous lookup) to ``client_ip``. 429 past the limits (before
    looking); 404 for a wrong or expired code (counted); 409 for a code that
    was already approved or denied. Something that is not a code at all is
    404 without counting: no lookup is made, so nothing is learned.
    """
    when = when or now()
    charged: dict[str, Any] = {"user": user} if user is not None else {"client_ip": client_ip}
    code = normalize_user_code(raw_code)
    if code is None:
        raise NotFound(WRONG_CODE)
    charge(store, settings, when, **charged)
    grant = store.get_device_grant_by_user_code(hash_code(code), when)
    if grant is None:
        raise NotFound(WRONG_CODE)
    refund(store, settings, when, **charged)
    if grant.status != "pending":
        raise Conflict("this code was already used: it has been approved or denied")
    return grant


def decide(
    store: Store,
    settings: DeviceSettings,
    caller: Caller,
    raw_code: object,
    *,
    approve: bool,
    when: datetime | None = None,
    approved_with: str | None = None,
) -> DeviceGrant:
    """Approve or deny the device whose code the signed-in caller typed (``ltm approve``).

    Needs the full scope; wrong codes are charged to the caller. ``approved_with``:
    the hash of the caller's token, when the caller is already known as a user (a
    ``Credential`` caller gives its own).
    """
    when = when or now()
    user = approver(store, caller)
    if isinstance(caller, Credential):
        approved_with = caller.token_hash
    if not isinstance(approve, bool):
        raise BadRequest("approve: must be true or false")
    grant = find_pending(store, settings, raw_code, user=user, when=when)
    return decide_grant(store, grant, user, approve=approve, when=when, approved_with=approved_with)


def pending(
    store: Store,
    settings: DeviceSettings,
    caller: Caller,
    raw_code: object,
    *,
    when: datetime | None = None,
) -> DeviceGrant:
    """The waiting grant a code names, looked at and not decided (``ltm approve`` shows it
    before asking, as the page does: RFC 8628 section 5.4, a code sent by someone else).

    For whoever may decide it (the full scope), with the same wrong-code limits, so a
    look is no cheaper way to guess codes than a decision.
    """
    return find_pending(store, settings, raw_code, user=approver(store, caller), when=when)


def approver(store: Store, caller: Caller) -> User:
    """The user who approves: their token needs the full scope (403 ``insufficient scope``)."""
    return user_of(store, caller, need=FULL_SCOPE)


def describe_scope(scope: str) -> str:
    """What a granted scope lets the device do, in words for the approval page."""
    granted = set(scope.split())
    if granted >= {"read", "write"}:
        return "read and write: list, fetch, push and delete packets, manage teams"
    if granted == {"read"}:
        return "read only: list and fetch packets and teams; nothing can be changed"
    if granted == {"write"}:
        return "write only: push and delete packets, manage teams; nothing can be listed or read"
    return scope


def decide_grant(
    store: Store,
    grant: DeviceGrant,
    user: User,
    *,
    approve: bool,
    when: datetime | None = None,
    approved_with: str | None = None,
) -> DeviceGrant:
    """Record the decision on a grant already found (the page signs in between finding and
    this); ``approved_with``: the hash of the token the user decided with, if any."""
    when = when or now()
    try:
        return store.decide_device_grant(
            grant.user_code_hash,
            when,
            approve=approve,
            user_id=user.id,
            approved_with=approved_with,
        )
    except StoreNotFound:
        raise NotFound("this code has expired; start again in your terminal") from None
    except StoreGone:
        raise Conflict("this code was already used: it has been approved or denied") from None


# -- who the user is, from an external identity ------------------------------------------------


NAME_TRIES = 20  # numbered names tried for a first sign-in whose name another user has


def user_for_subject(
    store: Store, subject: str, display: str, *, when: datetime | None = None
) -> User:
    """The ltm user of an external identity (a Cognito ``sub``); created on first sign-in."""
    found = store.get_user_by_subject(subject)
    if found is not None:
        return found
    name = clean_device_name(display)[:64].strip() or "user"
    for n in range(1, NAME_TRIES + 1):
        # Names are unique per server in any case: a taken one gets a number (name-2...).
        tried = name if n == 1 else f"{name[: 64 - len(str(n)) - 1]}-{n}"
        user = new_user(tried, when=when, subject=subject)
        try:
            store.create_user(user)
        except NameTaken:
            continue
        except StoreConflict:  # a concurrent first sign-in created it
            pass
        break
    found = store.get_user_by_subject(subject)
    if found is None:
        raise Conflict("could not create the user; try again")
    return found
