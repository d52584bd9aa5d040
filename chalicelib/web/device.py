"""The device flow over HTTP: the two OAuth endpoints and the verification page.

Framework-free: ``app.py`` turns a Chalice request into a ``WebRequest`` and a
``WebResponse`` back into a Chalice ``Response``; the rules live in
``service.device`` and the identity provider in ``cognito``.

The verification page (``GET/POST /device``, ``verification_uri_complete`` is
``/device?code=XXXX-XXXX``) is plain server-rendered HTML: no JavaScript, a
mobile viewport, and on every answer ``Content-Security-Policy: default-src
'none'`` (one hashed style block; forms may post to this server and, with
Cognito, navigate to its sign-in), ``frame-ancestors 'none'`` and
``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` (the code in the
URL never leaks to another site), ``Cache-Control: no-store`` and
``X-Content-Type-Options: nosniff``.

A person:

1. opens the page (a session cookie is set: random, HttpOnly, SameSite=Lax,
   ``__Host-`` and Secure over https) and types the code from the terminal;
2. signs in: with Cognito, the page redirects to the managed login
   (authorization code + PKCE; ``state`` is signed and carries the grant, a
   nonce from which the PKCE verifier is derived, and a binding to the session
   cookie) and Cognito returns to ``/device/callback``; self-hosted, the
   person pastes one of their existing ltm tokens into a password field (it
   is checked, never echoed, never logged);
3. sees which device is asking (client, the name or User-Agent it sent, when,
   from which address), the server it signs in to and the code to check against
   the terminal's, and approves or denies it (``POST /device/decide``).

Every form carries a CSRF token, an HMAC of the session cookie (double
submit); the sign-in result travels to step 3 as a short-lived signed ticket
bound to the same session. The signing key is ``LTM_DEVICE_SECRET`` when set
(Lambda: set it per stage), else a random key the store keeps
(``ensure_secret``; ``ltm server init`` creates it).

Wrong codes and wrong tokens count against the limits of ``service.device``:
self-hosted, the token is checked before the code is looked up, so a wrong
code is charged to the person who typed it and a wrong token to the code; with
Cognito the code is looked up before the sign-in, charged to the address.
Approving needs a token with the full scope (``read write``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..service import device, tokens
from ..service.errors import InsufficientScope, NotFound, ServiceError
from ..service.users import now as utc_now
from ..store import DeviceGrant, Store, User
from .cognito import CognitoConfig, CognitoError, display_name

SECRET_NAME = "device-pages-signing-key"
SECRET_ENV = "LTM_DEVICE_SECRET"
MIN_SECRET_CHARS = 32
SESSION_SECONDS = 1800
STATE_SECONDS = 600
TICKET_SECONDS = 300
MAX_FORM_FIELDS = 16
MAX_FORM_BYTES = 8192
FORM_TYPE = "application/x-www-form-urlencoded"


# -- requests and responses -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WebRequest:
    method: str
    headers: Mapping[str, str]  # lower-case names
    query: Mapping[str, list[str]]
    body: bytes
    client_ip: str
    base_url: str  # where this API is reached from outside (scheme, host, stage prefix)


@dataclass(slots=True)
class WebResponse:
    status: int
    body: str
    headers: dict[str, str] = field(default_factory=dict)


def _json(
    status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> WebResponse:
    return WebResponse(
        status,
        json.dumps(body, separators=(",", ":")),
        {
            "Content-Type": "application/json",
            "Cache-Control": "no-store",
            "Pragma": "no-cache",
            **(headers or {}),
        },
    )


class BadForm(Exception):
    pass


def parse_form(request: WebRequest) -> dict[str, list[str]]:
    """An ``application/x-www-form-urlencoded`` body; BadForm for anything else."""
    media = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if media != FORM_TYPE:
        raise BadForm(f"the body must be {FORM_TYPE}")
    if len(request.body) > MAX_FORM_BYTES:
        raise BadForm("the form is too large")
    try:
        text = request.body.decode("utf-8")
        return parse_qs(
            text, keep_blank_values=True, strict_parsing=False, max_num_fields=MAX_FORM_FIELDS
        )
    except (UnicodeDecodeError, ValueError):
        raise BadForm("the form is malformed") from None


def _one(values: Mapping[str, list[str]], name: str) -> str:
    found = values.get(name) or [""]
    return found[0] if len(found) == 1 else ""


# -- signing ---------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    """HMAC-SHA256 under one key, with a purpose in every MAC so values never cross uses."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("the signing key is too short")
        self._key = key

    def mac(self, purpose: str, data: str) -> str:
        message = purpose.encode() + b"\x00" + data.encode("utf-8", "surrogateescape")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def sign(self, purpose: str, payload: Mapping[str, Any]) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self.mac(purpose, body)}"

    def unsign(self, purpose: str, token: str, when: datetime) -> dict[str, Any] | None:
        """The payload when the MAC matches and ``exp`` has not passed; else None."""
        if not token or len(token) > 2048 or token.count(".") != 1:
            return None
        body, mac = token.split(".")
        if not same_secret(mac, self.mac(purpose, body)):
            return None
        try:
            payload = json.loads(_unb64(body))
        except ValueError:
            return None
        if not isinstance(payload, dict) or not isinstance(payload.get("exp"), int | float):
            return None
        return payload if payload["exp"] > when.timestamp() else None


def same_secret(given: str, expected: str) -> bool:
    """Whether a value a client sent is the secret expected, in constant time.

    On bytes: ``hmac.compare_digest`` raises on a str holding any non-ASCII
    character, which a client may send in any form field or cookie.
    """
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def signing_key(store: Store, environ: Mapping[str, str] = os.environ) -> bytes:
    """``LTM_DEVICE_SECRET`` when set (at least 32 characters), else the store's own key."""
    configured = environ.get(SECRET_ENV, "")
    if configured:
        if len(configured) < MIN_SECRET_CHARS:
            raise ValueError(f"{SECRET_ENV} must be at least {MIN_SECRET_CHARS} characters")
        return hashlib.sha256(configured.encode()).digest()
    return store.ensure_secret(SECRET_NAME, secrets.token_bytes(32))


# -- pages -------------------------------------------------------------------------------

_CSS = (
    "body{font:16px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;"
    "background:#f6f7f9;color:#1b1f24}"
    "main{max-width:28rem;margin:2rem auto;padding:1.5rem;background:#fff;"
    "border:1px solid #d8dde3;border-radius:12px}"
    "h1{font-size:1.35rem;margin:0 0 1rem}"
    "label{display:block;font-weight:600;margin:1rem 0 .25rem}"
    "input[type=text],input[type=password]{box-sizing:border-box;width:100%;"
    "font-size:1.2rem;padding:.6rem;border:1px solid #9aa4af;border-radius:8px}"
    "input.code{letter-spacing:.15em;text-transform:uppercase;font-family:ui-monospace,monospace}"
    "button{font-size:1rem;padding:.7rem 1.2rem;margin:1.2rem .5rem 0 0;border-radius:8px;"
    "border:1px solid #1f6feb;background:#1f6feb;color:#fff}"
    "button.deny{background:#fff;color:#b42318;border-color:#b42318}"
    ".error{color:#b42318;font-weight:600}.note{color:#57606a;font-size:.9rem}"
    "dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;margin:1rem 0}"
    "dt{color:#57606a}dd{margin:0;word-break:break-word}"
    "code{font-family:ui-monospace,monospace}"
)
_CSS_HASH = base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()


def page_headers(form_targets: str = "") -> dict[str, str]:
    """The security headers of every verification page."""
    form_action = ("'self' " + form_targets).strip()
    return {
        "Content-Type": "text/html; charset=utf-8",
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; form-action {form_action};"
            " frame-ancestors 'none'; base-uri 'none'"
        ),
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "Pragma": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Cross-Origin-Opener-Policy": "same-origin",
        # Nothing here is for a search engine: sign-in pages, private packets, and a
        # published packet, reachable by whoever holds its link, not by a search.
        "X-Robots-Tag": "noindex, nofollow",
    }


def _layout(title: str, content: str) -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{html.escape(title)} · ltm</title><style>{_CSS}</style></head>"
        f"<body><main><h1>{html.escape(title)}</h1>{content}</main></body></html>\n"
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


# -- the flow ------------------------------------------------------------------------------


class DeviceWeb:
    """The OAuth endpoints and the verification pages of one server."""

    def __init__(
        self,
        store: Store,
        *,
        settings: device.DeviceSettings,
        signer: Signer,
        cognito: CognitoConfig | None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.store = store
        self.settings = settings
        self.signer = signer
        self.cognito = cognito
        self.clock = clock
        # The web view's sign-ins come back through this callback too (one registered
        # redirect URI); the web view sets this to finish them: (request, user, next path).
        self.web_sign_in: Callable[[WebRequest, User, str], WebResponse] | None = None

    @classmethod
    def from_env(cls, store: Store, environ: Mapping[str, str] = os.environ) -> DeviceWeb:
        return cls(
            store,
            settings=device.DeviceSettings.from_env(environ),
            signer=Signer(signing_key(store, environ)),
            cognito=CognitoConfig.from_env(environ),
        )

    # -- OAuth endpoints (JSON) -----------------------------------------------------------

    def authorize_device(self, request: WebRequest) -> WebResponse:
        """``POST /oauth/authorize_device`` (RFC 8628 §3.1, §3.2)."""
        try:
            form = parse_form(request)
            result = device.authorize(
                self.store,
                self.settings,
                form,
                base_url=request.base_url,
                client_ip=request.client_ip,
                user_agent=request.headers.get("user-agent"),
                authenticated=bool(request.headers.get("authorization")),
                when=self.clock(),
            )
        except BadForm as exc:
            return _json(400, device.OAuthError("invalid_request", str(exc)).body())
        except device.OAuthError as exc:
            return _json(exc.status, exc.body(), exc.headers)
        return _json(200, result.body())

    def token(self, request: WebRequest) -> WebResponse:
        """``POST /oauth/token`` with the device-code grant (RFC 8628 §3.4, §3.5)."""
        try:
            form = parse_form(request)
            issued = device.token(
                self.store,
                self.settings,
                form,
                authenticated=bool(request.headers.get("authorization")),
                when=self.clock(),
            )
        except BadForm as exc:
            return _json(400, device.OAuthError("invalid_request", str(exc)).body())
        except device.OAuthError as exc:
            return _json(exc.status, exc.body(), exc.headers)
        return _json(200, issued.body())

    # -- pages --------------------------------------------------------------------------------

    def page(self, request: WebRequest) -> WebResponse:
        """``GET /device`` (the form), ``POST /device`` (a code; self-hosted, a token too)."""
        session, cookie = self._session(request)
        if request.method == "GET":
            code = _one(request.query, "code")
            shown = device.normalize_user_code(code)
            return self._enter(
                request, session, cookie, code=device.show_user_code(shown) if shown else ""
            )
        try:
            form = parse_form(request)
        except BadForm:
            return self._problem(
                request, 400, "That did not work", "The form was malformed. Start again."
            )
        if cookie or not self._csrf_ok(session, form):
            return self._expired_session(request, cookie)
        raw_code = _one(form, "code")
        when = self.clock()
        if self.cognito is None:
            return self._token_sign_in(request, session, form, raw_code, when)
        try:
            # The one anonymous lookup: charged to the client's address.
            grant = device.find_pending(
                self.store, self.settings, raw_code, client_ip=request.client_ip, when=when
            )
        except device.TooManyAttempts as exc:
            typed = device.normalize_user_code(raw_code)
            if exc.kind != "client" or typed is None:
                return self._code_refused(request, session, raw_code, exc)
            # Someone at this address guessed too much: the others here sign in first
            # and their code is looked up after, charged to them (not the address).
            return self._to_cognito(request, session, when, typed=typed)
        except ServiceError as exc:
            return self._code_refused(request, session, raw_code, exc)
        return self._to_cognito(
            request, session, when, grant=grant, typed=device.normalize_user_code(raw_code)
        )

    def callback(self, request: WebRequest) -> WebResponse:
        """``GET /device/callback``: back from Cognito with a code (or an error) and our state."""
        if self.cognito is None:
            return self._problem(
                request, 404, "Not found", "This server does not sign in through Cognito."
            )
        session, cookie = self._session(request)
        when = self.clock()
        state = self.signer.unsign("state", _one(request.query, "state"), when)
        if (
            state is None
            or cookie
            or not same_secret(str(state.get("sb", "")), self._binding(session))
        ):
            return self._problem(
                request,
                400,
                "Sign-in expired",
                "This sign-in did not start in this browser, or took too long. Open the link"
                " from your terminal again.",
                cookie=cookie,
            )
        if isinstance(state.get("w"), str) and self.web_sign_in is not None:
            return self._web_callback(request, state, when)
        if _one(request.query, "error"):
            return self._problem(
                request,
                400,
                "Sign-in cancelled",
                "Signing in did not complete, so the device was not approved. To try again,"
                " open the link from your terminal.",
            )
        code = _one(request.query, "code")
        typed = state.get("c")  # a user code still to be looked up (see page())
        shown = typed if isinstance(typed, str) else state.get("s")
        grant = None
        if not isinstance(typed, str):
            grant = self.store.get_device_grant(str(state.get("d", "")))
            if grant is None or grant.expires_at <= when or grant.status != "pending":
                return self._gone(request, grant)
        if not code:
            return self._problem(request, 400, "That did not work", "Cognito sent no sign-in code.")
        user = self._cognito_user(request, code, state, when)
        if isinstance(user, WebResponse):
            return user
        if grant is None:
            try:  # signed in now: a wrong code is charged to this user
                grant = device.find_pending(self.store, self.settings, typed, user=user, when=when)
            except ServiceError as exc:
                return self._code_refused(request, session, str(typed), exc)
        return self._confirm(
            request, session, grant, user, when, code=shown if isinstance(shown, str) else ""
        )

    def _cognito_user(
        self, request: WebRequest, code: str, state: Mapping[str, Any], when: datetime
    ) -> User | WebResponse:
        """The ltm user Cognito signed in: the code exchanged, the ID token verified."""
        assert self.cognito is not None
        try:
            tokens_ = self.cognito.exchange_code(
                code=code,
                redirect_uri=self._redirect_uri(request),
                verifier=self._verifier(str(state.get("n", ""))),
            )
            claims = self.cognito.verify_id_token(tokens_["id_token"])
        except CognitoError as exc:
            return self._problem(request, 502, "Sign-in failed", f"{exc}. Try again in a moment.")
        return device.user_for_subject(self.store, claims["sub"], display_name(claims), when=when)

    def _web_callback(
        self, request: WebRequest, state: Mapping[str, Any], when: datetime
    ) -> WebResponse:
        """A web view sign-in back from Cognito: the person, then the web view's session."""
        assert self.cognito is not None and self.web_sign_in is not None
        code = _one(request.query, "code")
        if _one(request.query, "error") or not code:
            return self._problem(
                request, 400, "Sign-in cancelled", "Signing in did not complete. Try again."
            )
        user = self._cognito_user(request, code, state, when)
        if isinstance(user, WebResponse):
            return user
        return self.web_sign_in(request, user, str(state["w"]))

    def decide(self, request: WebRequest) -> WebResponse:
        """``POST /device/decide``: the signed-in person approves or denies the device."""
        session, cookie = self._session(request)
        try:
            form = parse_form(request)
        except BadForm:
            return self._problem(
                request, 400, "That did not work", "The form was malformed. Start again."
            )
        if cookie or not self._csrf_ok(session, form):
            return self._expired_session(request, cookie)
        when = self.clock()
        ticket = self.signer.unsign("ticket", _one(form, "ticket"), when)
        if ticket is None or not same_secret(str(ticket.get("sb", "")), self._binding(session)):
            return self._problem(
                request,
                400,
                "Approval expired",
                "This approval took too long or did not start in this browser. Open the link"
                " from your terminal again.",
            )
        action = _one(form, "action")
        if action not in ("approve", "deny"):
            return self._problem(request, 400, "That did not work", "Choose approve or deny.")
        grant = self.store.get_device_grant(str(ticket.get("d", "")))
        user = self.store.get_user(str(ticket.get("u", "")))
        if grant is None or user is None or grant.expires_at <= when or grant.status != "pending":
            return self._gone(request, grant)
        try:
            decided = device.decide_grant(
                self.store,
                grant,
                user,
                approve=action == "approve",
                when=when,
                approved_with=str(ticket["t"]) if ticket.get("t") else None,
            )
        except ServiceError:
            return self._gone(request, self.store.get_device_grant(grant.device_code_hash))
        if decided.status == "approved":
            return self._done(
                "Device approved",
                f"<p>The device is now signed in as <strong>{_e(user.display)}</strong>."
                " You can close this window and go back to your terminal.</p>"
                "<p class=note>Changed your mind? List and revoke device tokens with"
                " <code>ltm tokens</code> and <code>ltm tokens revoke LABEL</code>.</p>",
            )
        return self._done(
            "Device denied",
            "<p>The device was <strong>not</strong> signed in. You can close this window.</p>",
        )

    # -- steps ----------------------------------------------------------------------------------

    def _token_sign_in(
        self,
        request: WebRequest,
        session: str,
        form: Mapping[str, list[str]],
        raw_code: str,
        when: datetime,
    ) -> WebResponse:
        """Self-hosted: the person is known by their token before the code is looked up.

        So a wrong code is charged to that user, a wrong token to the code it
        was tried with, and nobody else behind the same address is locked out.
        """
        code = device.normalize_user_code(raw_code)
        if code is None:
            return self._code_refused(request, session, raw_code, NotFound(device.WRONG_CODE))
        secret = _one(form, "token").strip()
        if not secret:
            return self._enter(
                request,
                session,
                "",
                code=raw_code[:32],
                error="Enter one of your ltm tokens.",
                status=400,
            )
        try:
            device.charge(self.store, self.settings, when, code=code)
            user = tokens.authenticate(self.store, f"Bearer {secret}", when, need=device.FULL_SCOPE)
        except device.TooManyAttempts as exc:
            return self._code_refused(request, session, raw_code, exc)
        except InsufficientScope:
            device.refund(self.store, self.settings, when, code=code)  # a real token
            return self._enter(
                request,
                session,
                "",
                code=raw_code[:32],
                error="That token is read-only or write-only. Approving a device needs a token"
                " with full access (read write).",
                status=403,
            )
        except ServiceError:  # a wrong token: its try stays charged to the code
            return self._enter(
                request,
                session,
                "",
                code=raw_code[:32],
                error="That token was not accepted. Use a token of this server (ltm whoami"
                " shows which one you use).",
                status=401,
            )
        device.refund(self.store, self.settings, when, code=code)
        try:
            grant = device.find_pending(self.store, self.settings, code, user=user, when=when)
        except ServiceError as exc:
            return self._code_refused(request, session, raw_code, exc)
        return self._confirm(
            request, session, grant, user, when, code=code, token_hash=tokens.hash_token(secret)
        )

    def _code_refused(
        self, request: WebRequest, session: str, raw_code: str, exc: ServiceError
    ) -> WebResponse:
        """The code form again with why the code was refused (past a limit, the code is cleared)."""
        if isinstance(exc, device.TooManyAttempts):
            return self._enter(request, session, "", code="", error=exc.message, status=429)
        return self._enter(
            request, session, "", code=raw_code[:32], error=exc.message, status=exc.status
        )

    def _to_cognito(
        self,
        request: WebRequest,
        session: str,
        when: datetime,
        *,
        grant: DeviceGrant | None = None,
        typed: str | None = None,
    ) -> WebResponse:
        """On to the managed sign-in, with the grant found (or the code to look up after)."""
        assert self.cognito is not None
        nonce = secrets.token_urlsafe(16)
        # The code travels in the signed state, to be looked up after the sign-in or shown
        # on the approval page: no more exposed than in verification_uri_complete, which
        # carries it in a URL too.
        about = {"d": grant.device_code_hash, "s": typed} if grant is not None else {"c": typed}
        state = self.signer.sign(
            "state",
            {
                **about,
                "n": nonce,
                "sb": self._binding(session),
                "exp": int(when.timestamp()) + STATE_SECONDS,
            },
        )
        location = self.cognito.authorize_url(
            redirect_uri=self._redirect_uri(request), state=state, verifier=self._verifier(nonce)
        )
        headers = self._headers()
        headers["Location"] = location
        body = _layout("Signing in", f'<p><a href="{_e(location)}">Continue to sign in</a></p>')
        return WebResponse(303, body, headers)

    def _confirm(
        self,
        request: WebRequest,
        session: str,
        grant: DeviceGrant,
        user: User,
        when: datetime,
        *,
        code: str = "",
        token_hash: str = "",
    ) -> WebResponse:
        """The approve-or-deny page; ``code``: the user code typed (normalized), shown to
        be checked against the device's (RFC 8628 §5.4: a code in a link someone sent is
        not the one on the person's own screen); ``token_hash``: the token the person
        signed in with here, which the decision records (``DeviceGrant.approved_with``)."""
        payload: dict[str, Any] = {
            "d": grant.device_code_hash,
            "u": user.id,
            "sb": self._binding(session),
            "exp": int(when.timestamp()) + TICKET_SECONDS,
        }
        if token_hash:
            payload["t"] = token_hash
        ticket = self.signer.sign("ticket", payload)
        minutes = max(0, int((when - grant.created_at).total_seconds() // 60))
        ago = "just now" if minutes == 0 else f"{minutes} min ago"
        shown = device.normalize_user_code(code)
        check = (
            f"<dt>Code</dt><dd><code>{_e(device.show_user_code(shown))}</code>: the code your"
            " terminal shows?</dd>"
            if shown
            else ""
        )
        host = urlsplit(request.base_url).netloc
        content = (
            f"<p>Signed in as <strong>{_e(user.display)}</strong>. A device asks to sign in"
            f" to ltm at <strong>{_e(host)}</strong> as you:</p><dl>"
            f"{check}"
            f"<dt>Device</dt><dd>{_e(grant.device_name or 'unnamed device')}</dd>"
            f"<dt>Client</dt><dd><code>{_e(grant.client_id)}</code></dd>"
            f"<dt>Access</dt><dd><code>{_e(grant.scope)}</code>:"
            f" {_e(device.describe_scope(grant.scope))}</dd>"
            f"<dt>Asked</dt><dd>{_e(_when(grant.created_at))} ({_e(ago)})</dd>"
            f"<dt>From</dt><dd>{_e(grant.client_ip or 'unknown')}</dd></dl>"
            "<p class=note>Approve only if you started this sign-in yourself, just now, on"
            " that device. Someone who sends you a link or a code to approve is trying to get"
            " into your account.</p>"
            f'<form method="post" action="{_e(_url(request, "/device/decide"))}">'
            f'<input type="hidden" name="csrf" value="{_e(self._csrf(session))}">'
            f'<input type="hidden" name="ticket" value="{_e(ticket)}">'
            '<button type="submit" name="action" value="approve">Approve</button>'
            '<button type="submit" name="action" value="deny" class="deny">Deny</button>'
            "</form>"
        )
        return WebResponse(200, _layout("Approve this device?", content), self._headers())

    def _enter(
        self,
        request: WebRequest,
        session: str,
        cookie: str,
        *,
        code: str,
        error: str = "",
        status: int = 200,
    ) -> WebResponse:
        token_field = ""
        if self.cognito is None:
            token_field = (
                '<label for="token">Your ltm token</label>'
                '<input type="password" id="token" name="token" autocomplete="off"'
                ' spellcheck="false">'
                "<p class=note>A token you already use on a signed-in machine (this server has"
                " no other sign-in). It is checked, not stored; or run"
                " <code>ltm approve CODE</code> on that machine instead.</p>"
                "<p class=note>New here, with an invite? Stop this sign-in and run"
                " <code>ltm join INVITE-URL</code>: it makes your account and signs this"
                " device in.</p>"
            )
        message = f'<p class="error" role="alert">{_e(error)}</p>' if error else ""
        content = (
            f"{message}<p>Enter the code shown in your terminal to sign that device in.</p>"
            f'<form method="post" action="{_e(_url(request, "/device"))}">'
            f'<input type="hidden" name="csrf" value="{_e(self._csrf(session))}">'
            '<label for="code">Code</label>'
            f'<input type="text" id="code" name="code" class="code" value="{_e(code)}"'
            ' placeholder="XXXX-XXXX" autocomplete="off" autocapitalize="characters"'
            ' spellcheck="false" maxlength="32" required>'
            f"{token_field}"
            '<button type="submit">Continue</button></form>'
        )
        headers = self._headers()
        if cookie:
            headers["Set-Cookie"] = cookie
        return WebResponse(status, _layout("Sign in a device", content), headers)

    def _gone(self, request: WebRequest, grant: DeviceGrant | None) -> WebResponse:
        if grant is not None and grant.status in ("approved", "used"):
            return self._problem(
                request, 409, "Already approved", "This device was already approved."
            )
        if grant is not None and grant.status == "denied":
            return self._problem(request, 409, "Already denied", "This device was already denied.")
        return self._problem(
            request,
            410,
            "Code expired",
            "This code has expired. Start again in your terminal (ltm auth HOST).",
        )

    def _problem(
        self, request: WebRequest, status: int, title: str, text: str, *, cookie: str = ""
    ) -> WebResponse:
        link = _e(_url(request, "/device"))
        content = f'<p>{_e(text)}</p><p><a href="{link}">Enter a code</a></p>'
        headers = self._headers()
        if cookie:
            headers["Set-Cookie"] = cookie
        return WebResponse(status, _layout(title, content), headers)

    def _expired_session(self, request: WebRequest, cookie: str) -> WebResponse:
        return self._problem(
            request,
            403,
            "Please try again",
            "Your session on this page expired or cookies are off. Open the page again and"
            " re-enter the code.",
            cookie=cookie,
        )

    def _done(self, title: str, content: str) -> WebResponse:
        return WebResponse(200, _layout(title, content), self._headers())

    # -- sessions, CSRF, PKCE -------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return page_headers(self.cognito.origin if self.cognito else "")

    def _cookie_name(self, request: WebRequest) -> str:
        return "__Host-ltm_device" if request.base_url.startswith("https://") else "ltm_device"

    def _session(self, request: WebRequest) -> tuple[str, str]:
        """The session id from the cookie, or a new one and the Set-Cookie that starts it."""
        name = self._cookie_name(request)
        for part in (request.headers.get("cookie") or "").split(";"):
            key, _, value = part.strip().partition("=")
            if (
                key == name
                and 20 <= len(value) <= 64
                and value.replace("-", "").replace("_", "").isalnum()
            ):
                return value, ""
        session = secrets.token_urlsafe(24)
        attributes = f"Path=/; Max-Age={SESSION_SECONDS}; HttpOnly; SameSite=Lax"
        if request.base_url.startswith("https://"):
            attributes += "; Secure"
        return session, f"{name}={session}; {attributes}"

    def _csrf(self, session: str) -> str:
        return self.signer.mac("csrf", session)

    def _csrf_ok(self, session: str, form: Mapping[str, list[str]]) -> bool:
        return same_secret(_one(form, "csrf"), self._csrf(session))

    def _binding(self, session: str) -> str:
        return self.signer.mac("bind", session)[:22]

    def _verifier(self, nonce: str) -> str:
        """The PKCE code verifier: derived from the state's nonce, never stored or sent out."""
        return self.signer.mac("pkce", nonce)

    def _redirect_uri(self, request: WebRequest) -> str:
        return _url(request, "/device/callback")


def _url(request: WebRequest, path: str) -> str:
    return f"{request.base_url.rstrip('/')}{path}"
