"""Signing in from a browser: the OAuth 2.0 Device Authorization Grant (RFC 8628).

As the reference client does it: post ``client_id=ltm-cli`` and ``scope=read
write`` to ``{HOST}/oauth/authorize_device``, show the user the code and the
URL (and open the browser when there is one), then poll ``{HOST}/oauth/token``
every ``interval`` seconds until the user approves (``access_token``), the
server asks to slow down (``slow_down``: five more seconds, from then on), the
user declines (``access_denied``) or the code runs out (``expired_token``, or
``expires_in`` passes). A 502, 503 or 504 (a proxy, or a database busy for a
moment) is polled through, after ``Retry-After`` when it is longer, and so is a poll
that gets no answer at all (the server restarting); a 429 (a gateway's throttle) too,
five seconds slower from then on, as ``slow_down``. The token
is a plain bearer for ``/v1``.

Works against any server that implements the two endpoints; ``sleep`` and
``clock`` can be replaced (tests count the waits instead of sitting them out).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from ltm.cli.client.remote import UNAVAILABLE, Http, Reply, status_error
from ltm.cli.client.transport import TimedOut, Unreachable
from ltm.cli.errors import CliError

CLIENT_ID = "ltm-cli"
SCOPE = "read write"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
DEFAULT_INTERVAL = 5.0
SLOW_DOWN_STEP = 5.0
THROTTLED = 429  # Too Many Requests, from a gateway in front of the server
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True, slots=True)
class DeviceCode:
    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float


def start(http: Http) -> DeviceCode:
    """Ask the server for a device code and a user code."""
    body = urlencode({"client_id": CLIENT_ID, "scope": SCOPE}).encode()
    reply = http.request("POST", "/oauth/authorize_device", body=body, content_type=FORM)
    if reply.status in (404, 405, 501):
        raise CliError(
            f"{http.host} does not offer browser sign-in (no device flow; HTTP {reply.status})"
            f" — sign in with a token instead: ltm auth {http.host} --with-token"
        )
    data = _oauth_json(http, reply)
    if reply.status != 200 or "error" in data:
        raise _oauth_error(http, reply, data, "could not start browser sign-in")
    try:
        device_code = _text(data, "device_code")
        user_code = _text(data, "user_code")
        verification_uri = _text(data, "verification_uri")
    except KeyError as exc:
        raise CliError(
            f"{http.host} started browser sign-in without {exc.args[0]} — the server's device"
            " flow is broken; sign in with a token instead"
        ) from None
    complete = data.get("verification_uri_complete")
    return DeviceCode(
        device_code=device_code,
        user_code=user_code,
        verification_uri=verification_uri,
        verification_uri_complete=complete if isinstance(complete, str) and complete else None,
        expires_in=_seconds(data.get("expires_in"), 900.0),
        interval=_seconds(data.get("interval"), DEFAULT_INTERVAL),
    )


def poll(
    http: Http,
    code: DeviceCode,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Wait for the user's decision; the access token when they approve."""
    interval = code.interval
    deadline = clock() + code.expires_in
    body = urlencode(
        {"grant_type": GRANT_TYPE, "device_code": code.device_code, "client_id": CLIENT_ID}
    ).encode()
    wait: float = interval
    problem: CliError | None = None  # why the last poll went unanswered, said at expiry
    while True:
        if clock() + wait > deadline:
            raise problem if problem is not None else _expired(http)
        sleep(wait)
        try:
            reply = http.request("POST", "/oauth/token", body=body, content_type=FORM)
        except (Unreachable, TimedOut) as exc:
            # The server out of reach for a moment (restarting, a network blip): as below.
            # A TLS failure or a malformed answer would fail the same way again: it ends it.
            wait, problem = interval, exc
            continue
        if reply.status == THROTTLED or reply.status in UNAVAILABLE:
            # A proxy in front of a server that is down, a database busy for a moment, or
            # a gateway's throttle (API Gateway limits /oauth/token for everyone signing
            # in): the code is still good and the person may be approving it right now,
            # so poll again (after Retry-After, when that is longer) until it expires.
            if reply.status == THROTTLED:  # the gateway's own slow_down
                interval += SLOW_DOWN_STEP
            wait, problem = max(interval, _retry_after(reply)), status_error(http.host, reply)
            continue
        wait, problem = interval, None
        data = _oauth_json(http, reply)
        error = data.get("error")
        if reply.status == 200 and not error:
            return _access_token(http, data)
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += SLOW_DOWN_STEP
            wait = interval
            continue
        if error == "access_denied":
            raise CliError(
                f"sign-in to {http.host} was declined in the browser — nothing was saved;"
                f" to try again: ltm auth {http.host}"
            )
        if error == "expired_token":
            raise _expired(http)
        raise _oauth_error(http, reply, data, "browser sign-in failed")


def sign_in(
    http: Http,
    *,
    open_browser: bool,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """The whole flow: start, show the code (and open the page), wait for the token."""
    from ltm.cli.client.launch import forget, open_private
    from ltm.cli.terminal.output import safe

    code = start(http)
    page = code.verification_uri_complete or code.verification_uri
    # The server chose these strings: shown through safe(), never raw to the terminal.
    say(safe(f"To sign in to {http.host}, open {code.verification_uri}"))
    say(safe(f"and enter the code: {code.user_code}"))
    # The page URL carries the user code: through a private file, never on the browser's
    # command line, where another local user could read it and approve it as themself.
    opened = open_private(page) if open_browser else None
    if opened is not None:
        say("(opened in your browser)")
    minutes = max(1, round(code.expires_in / 60))
    say(f"Waiting for you to approve (the code is valid for {minutes} min; Ctrl-C stops)…")
    try:
        return poll(http, code, sleep=sleep, clock=clock)
    finally:
        forget(opened)


def browser_available() -> bool:
    """A browser we can open without taking over this terminal."""
    if os.environ.get("LTM_NO_BROWSER") or os.environ.get("CI"):
        return False
    from ltm.cli.config import load_settings

    if str(load_settings().get("browser", "true")).lower() in ("false", "0", "no", "off"):
        return False
    if os.environ.get("BROWSER"):
        return True
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _launch(url: str) -> bool:
    if urlsplit(url).scheme not in ("http", "https"):
        return False  # never hand a file: or javascript: URL from a server to the browser
    import webbrowser

    try:
        return bool(webbrowser.open(url))
    except Exception:  # no usable browser after all: the URL is on screen anyway
        return False


def _expired(http: Http) -> CliError:
    return CliError(
        f"the sign-in code for {http.host} expired before it was approved — start again:"
        f" ltm auth {http.host}"
    )


def _oauth_json(http: Http, reply: Reply) -> dict[str, Any]:
    if reply.status >= 500:
        raise status_error(http.host, reply)
    data = reply.json(http.host)
    if not isinstance(data, dict):
        raise CliError(f"{http.host} sent an unexpected OAuth answer (not a JSON object)")
    return data


def _oauth_error(http: Http, reply: Reply, data: dict[str, Any], what: str) -> CliError:
    error = data.get("error")
    if isinstance(error, str):
        detail = data.get("error_description")
        extra = f": {detail}" if isinstance(detail, str) and detail else ""
        return CliError(
            f"{what} on {http.host} ({error}{extra}) — sign in with a token instead:"
            f" ltm auth {http.host} --with-token"
        )
    return status_error(http.host, reply)


def _access_token(http: Http, data: dict[str, Any]) -> str:
    token = data.get("access_token")
    kind = data.get("token_type")
    if not isinstance(token, str) or not token:
        raise CliError(f"{http.host} approved the sign-in but sent no access_token")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise CliError(f"{http.host} sent a {kind!r} token; ltm needs a Bearer token")
    return token


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise KeyError(key)
    return value


def _retry_after(reply: Reply) -> float:
    """Retry-After in seconds (RFC 9110 §10.2.3); 0 when absent or an HTTP date."""
    raw = reply.headers.get("retry-after", "").strip()
    return float(raw) if raw.isdigit() else 0.0


def _seconds(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return default
    return float(value)
