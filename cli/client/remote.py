"""The ltm HTTP API from the client side: any server that speaks the protocol.

``Http`` is a small HTTP/1.1 client: one keep-alive connection per command,
TLS verified against the system's CA store (``SSL_CERT_FILE`` points it at a
private CA), proxies from ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``. It runs
on the standard library's ``http.client`` for both schemes. It is not httpx on
purpose: importing httpx (with the rich/click it pulls in) costs 3 to 6 times
the whole start-up of ``python -c pass``, more than the entire budget of ``ltm ls``.

Every failure becomes a one-line ``CliError`` that says what happened and what
to do next: a request with no HTTP answer is one of ``ltm.cli.client.transport``'s
classes (``Unreachable``: nothing was sent); the underlying exception stays
chained for ``--debug``.
``RemoteBackend`` is the ``Backend`` for a server, plus the team and invite
calls the CLI needs.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn
from urllib.parse import quote, urlencode, urlsplit

from ltm import limits
from ltm.cli.client.backend import (
    WALK_PAGE,
    Backend,
    Filters,
    Held,
    IdTaken,
    Listing,
    Pushed,
    check_ref,
)
from ltm.cli.errors import CliError
from ltm.errors import Failure
from ltm.ids import id_problem
from ltm.present import safe

if TYPE_CHECKING:
    from http.client import HTTPConnection

    from ltm.cli.client.credentials import Target
    from ltm.packet import Checked

DEFAULT_TIMEOUT = 10.0
MAX_REPLY_BYTES = 8 * 1024 * 1024
RESOLVE_PAGE = 200  # how many of the newest packets an id prefix is looked up in
PROJECT_SCAN = 50  # against a server without the listing filters, how many rows it filters
MAX_PACKET_KIB = 32
MAX_PAGES = 100_000  # listing pages one command walks (ls --all, export): a hostile server's end
# The batch routes (an extension): at most this many packets a request, in a body of at
# most 32 KiB (what one push may send, so any server takes it; the envelope and its
# commas included) until the server's batch reply says it takes more (``limits``).
BATCH = 100
MAX_BODY = limits.MAX_BODY
_BATCH_ENVELOPE = len(b'{"packets":[]}')
LANES = 2  # batch requests in flight at once during an import (the server runs them side by side)


class Wire(NamedTuple):
    """A packet as a batch request carries it (``wire``): made in an import's workers."""

    id: str
    text: str  # the packet's JSON, as a single push would send it
    quoted: bytes  # ``text`` as one string of the batch body's JSON array, UTF-8


def wire(packet: Mapping[str, Any] | Checked) -> Wire:
    """``packet`` (a mapping, or a ``Checked``'s data) encoded as a push sends it; no
    store call, so ``ltm import`` runs it in the processes that judge the packets."""
    data = packet.data if hasattr(packet, "data") else packet
    text = json.dumps(dict(data), ensure_ascii=False, separators=(",", ":"))
    return Wire(str(data.get("id", "")), text, json.dumps(text, ensure_ascii=False).encode())


# One request of an import's pushes: (index in the batch, packet) each, and the team.
_Run = tuple[list[tuple[int, Wire]], str | None]


_BATCH_BYTES = limits.BATCH_BYTES_HEADER.lower()


class _BatchSize:
    """How big a batch body to send (``bytes``), and whether a batch reply said it
    (``sized``): one for a backend and its lanes, so what one learns, all send."""

    __slots__ = ("bytes", "sized")

    def __init__(self) -> None:
        self.bytes = MAX_BODY
        self.sized = False


def _batch_bytes(said: str | None) -> int:
    """How big a batch body to send from now on: what the server's batch reply says it
    takes (never less than 32 KiB, which every server takes), else 32 KiB."""
    try:
        value = int(said or 0)
    except ValueError:
        return MAX_BODY
    return max(MAX_BODY, min(value, MAX_REPLY_BYTES))


def configured_timeout() -> float:
    """Seconds to wait on the network: ``LTM_TIMEOUT``, else ``ltm config set timeout``,
    else the default stretched by ``LTM_TIME_SCALE`` (``ltm.cli.config.time_scale``)."""
    from ltm.cli.config import SETTINGS_FILE, config_dir, load_settings, time_scale, timeout_seconds

    raw: Any = os.environ.get("LTM_TIMEOUT")
    # Named in the error: a bad value from either place stops every request.
    source = "LTM_TIMEOUT"
    if not raw:
        raw = load_settings().get("timeout")
        source = f"{config_dir() / SETTINGS_FILE} (fix: ltm config set timeout SECONDS)"
    if raw in (None, ""):
        return DEFAULT_TIMEOUT * time_scale()
    try:
        return timeout_seconds(raw)
    except ValueError as exc:
        raise CliError(f"{exc}, in {source}") from None


def _debug(message: str) -> None:
    if os.environ.get("LTM_DEBUG"):
        print(f"ltm: debug: {message}", file=sys.stderr)


class Reply(NamedTuple):  # a NamedTuple: see ltm.cli.client.backend
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self, host: str) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            raise self.not_json(host) from None

    def packet_body(self, host: str) -> bytes:
        """The stored bytes of a packet, a JSON object: a page in their place (a web site at
        the URL) is no packet, and was shown as one that "is not readable JSON"."""
        body = self.body.rstrip(b"\r\n")
        if not body.lstrip().startswith(b"{"):
            raise self.not_json(host)
        return body

    def not_json(self, host: str) -> CliError:
        return CliError(
            f"{host} answered HTTP {self.status} with {self._kind()}, not ltm JSON"
            f" — check that {host} is an ltm server"
        )

    def _kind(self) -> str:
        media = self.headers.get("content-type", "").split(";", 1)[0].strip() or "no content type"
        return "an empty body" if not self.body.strip() else f"a {safe(media)} body"

    def is_ltm_error(self) -> bool:
        """Does the body carry the protocol's ``{"error": "..."}``?"""
        try:
            data = json.loads(self.body)
        except ValueError:
            return False
        return isinstance(data, dict) and isinstance(data.get("error"), str)

    def error_text(self) -> str:
        """The server's ``{"error": ...}`` message, else a hint of what came back; its
        controls escaped (``ltm.present.safe``) wherever it is shown: a terminal, and an
        agent's tool result, which its client may print to one."""
        return safe(self._error_text())

    def _error_text(self) -> str:
        try:
            data = json.loads(self.body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            message = data.get("error")
            if isinstance(message, str) and message.strip():
                return _one_line(message)
            if isinstance(data.get("message"), str):  # API Gateway's own errors
                return _one_line(data["message"])
        media = self.headers.get("content-type", "")
        if "html" in media or self.body.lstrip()[:1] == b"<":
            return "an HTML page"
        text = self.body.decode("utf-8", "replace").strip()
        return _one_line(text) if text else "no message"


def _one_line(text: str, width: int = 400) -> str:
    flat = "; ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class Http:
    """Requests to one server; raises ``CliError`` for anything but an HTTP reply."""

    def __init__(self, host: str, *, timeout: float | None = None) -> None:
        parts = urlsplit(host)
        self.host = host
        self.scheme = parts.scheme
        self.hostname = parts.hostname or ""
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        self.netloc = parts.netloc
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout if timeout is not None else configured_timeout()
        self._conn: HTTPConnection | None = None
        self._used = False
        self._absolute = False  # True when talking to a plain-HTTP proxy
        self._proxy_headers: dict[str, str] = {}

    # -- connections -----------------------------------------------------------

    def _connect(self) -> HTTPConnection:
        proxy = _proxy_for(self.scheme, self.netloc)
        import http.client

        if self.scheme == "https":
            context = _tls_context()
            if proxy:
                p_host, p_port, auth = proxy
                conn: HTTPConnection = http.client.HTTPSConnection(
                    p_host, p_port, timeout=self.timeout, context=context
                )
                conn.set_tunnel(self.hostname, self.port, headers=auth)
            else:
                conn = http.client.HTTPSConnection(
                    self.hostname, self.port, timeout=self.timeout, context=context
                )
        elif not proxy:
            conn = http.client.HTTPConnection(self.hostname, self.port, timeout=self.timeout)
        else:  # plain HTTP through a proxy
            p_host, p_port, auth = proxy
            conn = http.client.HTTPConnection(p_host, p_port, timeout=self.timeout)
            self._proxy_headers = auth
            self._absolute = True
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def another(self) -> Http:
        """The same server, settings and proxy, on a connection of its own (none yet)."""
        import copy

        other = copy.copy(self)
        other._conn = None
        other._used = False
        return other

    # -- requests --------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        token: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        idempotent: bool | None = None,
    ) -> Reply:
        """One request and its reply, on the kept-alive connection when there is one.

        ``idempotent`` (default: GET, DELETE and HEAD are) says that sending the
        request twice does what sending it once does, so it may go on a
        kept-alive connection and be sent again when the server had closed that
        connection. A push is (its id is in the body; the same bytes twice are
        one packet): ``ltm import`` sends thousands on one connection. Any other
        POST goes on a fresh connection, so it is never sent twice.

        ``timeout`` is the whole request's: connecting, sending and the reply to its
        last byte (``_Deadline``), not each wait on the network.
        """
        if idempotent is None:
            idempotent = method in ("GET", "DELETE", "HEAD")
        params = {k: v for k, v in (query or {}).items() if v is not None}
        target = self.prefix + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": "application/json", "User-Agent": _user_agent()}
        headers.update(extra_headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        _well_formed(self.host, method, target, headers)
        started = time.perf_counter()
        deadline = _Deadline(self)
        try:
            reply = self._exchange(method, target, body, headers, idempotent, deadline)
        finally:
            deadline.cancel()
        elapsed = (time.perf_counter() - started) * 1000
        _debug(f"{method} {self.host}{target} -> {reply.status} ({elapsed:.1f} ms)")
        return reply

    def _exchange(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
        idempotent: bool,
        deadline: _Deadline,
    ) -> Reply:
        """The request sent and its reply read, all before ``deadline``."""
        import http.client

        # A kept-alive connection the server has since closed fails on first use;
        # retry once on a fresh one, but never a POST that may have been received.
        for attempt in (1, 2):
            reused = self._used and self._conn is not None
            if self._conn is None or (not idempotent and reused):
                self.close()
                self._conn = self._connect()
                reused = False
            conn = self._conn
            left = deadline.left()
            if left <= 0:  # the first attempt took it all
                self.close()
                raise self._transport_error(TimeoutError(), connecting=conn.sock is None)
            # No one wait (connecting, a send, a read) longer than the time left; the
            # deadline's watchdog ends a request whose waits each stay short.
            conn.timeout = left
            if conn.sock is None:
                try:
                    _connect_within(conn, left)
                except _failures() as exc:
                    # HTTPSConnection keeps the plain socket when the TLS handshake fails.
                    handshake = conn.sock is not None
                    self.close()
                    raise self._transport_error(
                        exc, connecting=True, handshake=handshake, late=deadline.passed
                    ) from exc
            else:
                conn.sock.settimeout(left)
            url = f"{self.scheme}://{self.netloc}{target}" if self._absolute else target
            if self._absolute:
                headers.update(self._proxy_headers)
            try:
                conn.request(method, url, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read(MAX_REPLY_BYTES + 1)
                if deadline.passed:  # a body read to the close ends early, silently
                    raise TimeoutError("the request's deadline passed")
                if len(data) > MAX_REPLY_BYTES:
                    raise CliError(f"{self.host} sent more than {MAX_REPLY_BYTES} bytes; stopped")
                if response.length:  # read(n) returns what came before the close, silently
                    raise http.client.IncompleteRead(data, response.length)
                reply = Reply(
                    status=response.status,
                    headers={k.lower(): v for k, v in response.getheaders()},
                    body=data,
                )
                if response.will_close:
                    self.close()
                self._used = True
                return reply
            except (ConnectionResetError, BrokenPipeError) as exc:  # RemoteDisconnected too
                self.close()
                if reused and attempt == 1 and idempotent and not deadline.passed:
                    continue
                raise self._transport_error(exc, late=deadline.passed) from exc
            except CliError:
                self.close()
                raise
            except _failures() as exc:
                self.close()
                raise self._transport_error(exc, late=deadline.passed) from exc
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _transport_error(
        self,
        exc: BaseException,
        *,
        connecting: bool = False,
        handshake: bool = False,
        late: bool = False,
    ) -> CliError:
        """The one line for a request that got no HTTP answer; ``late``: the request's
        deadline passed (what its watchdog's closing the socket caused is a timeout)."""
        from ltm.cli.client.transport import classify

        _debug(f"{type(exc).__name__}: {exc}")
        failure = classify(
            TimeoutError() if late else exc,
            host=self.host,
            hostname=self.hostname,
            timeout=self.timeout,
            plain_url=f"http://{self.netloc}{self.prefix}",
            connecting=connecting,
            handshake=handshake,
        )
        return failure or CliError(f"request to {self.host} failed: {exc}")


class _Deadline:
    """One request's wall clock: ``Http.timeout`` for connecting, sending and the whole
    reply together. When it passes, a watchdog shuts the connection's socket down, so a
    server that answers a byte at a time (each read well within the socket's timeout)
    is stopped all the same."""

    def __init__(self, http: Http) -> None:
        import threading

        self.passed = False
        self._http = http
        self._at = time.monotonic() + http.timeout
        self._watchdog = threading.Timer(http.timeout, self._end)
        self._watchdog.daemon = True
        self._watchdog.start()

    def left(self) -> float:
        return self._at - time.monotonic()

    def _end(self) -> None:
        import contextlib
        import socket

        self.passed = True
        conn = self._http._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        """The request is over; a connection the watchdog shut down is not kept."""
        self._watchdog.cancel()
        if self.passed:
            self._http.close()


def _connect_within(conn: HTTPConnection, seconds: float) -> None:
    """``conn.connect()``, given up (``TimeoutError``) after ``seconds``.

    The socket's timeout bounds the TCP connect and the TLS handshake, but not the
    name lookup before them: ``getaddrinfo`` takes no timeout, and a resolver that
    does not answer holds it for the system's retries (5 s each, several times). So
    a name is connected in a thread of its own, left behind when the time is up; a
    connection it makes after that is closed as it is made.
    """
    import ipaddress
    import threading

    try:
        ipaddress.ip_address(conn.host)
    except ValueError:
        pass
    else:
        conn.connect()  # an address: nothing to look up
        return
    lock = threading.Lock()
    failure: list[BaseException] = []
    late = False

    def connect() -> None:
        try:
            conn.connect()
        except BaseException as exc:  # handed to the caller's thread, raised there
            failure.append(exc)
        with lock:
            if late:
                conn.close()

    worker = threading.Thread(target=connect, name="ltm-connect", daemon=True)
    worker.start()
    worker.join(seconds)
    with lock:
        if worker.is_alive():
            late = True
            raise TimeoutError(f"no connection to {conn.host} within {seconds:g} s")
    if failure:
        raise failure[0]


def _failures() -> tuple[type[Exception], ...]:
    """What a request may raise (http.client is loaded by then: ``_connect``)."""
    import http.client

    return (OSError, ValueError, http.client.HTTPException)


def _well_formed(host: str, method: str, target: str, headers: Mapping[str, str]) -> None:
    """Refuse, before anything is sent, a request line or header that would split the
    request; the message names the header, never its value (it may be the token)."""
    if any(c <= " " or c == "\x7f" for c in method + target):
        raise CliError(f"request to {host} failed: control character or space in {target!r}")
    for name, value in headers.items():
        if not name or any(c in "\r\n\0:" for c in name) or any(c in "\r\n\0" for c in value):
            raise CliError(f"request to {host} failed: invalid header {name!r}")


def _user_agent() -> str:
    from ltm import __version__

    return f"ltm-python/{__version__}"


def _tls_context() -> Any:
    import ssl

    return ssl.create_default_context()


_PROXY_VARS = ("https_proxy", "http_proxy", "all_proxy")


def _proxy_for(scheme: str, netloc: str) -> tuple[str, int, dict[str, str]] | None:
    """(host, port, headers) of the proxy to use from the environment, when one applies."""
    if not any(os.environ.get(n) or os.environ.get(n.upper()) for n in _PROXY_VARS):
        return None
    # proxy_bypass_environment: urllib.request's no_proxy rules, missing from its stubs
    from urllib.request import (  # type: ignore[attr-defined]
        getproxies_environment,
        proxy_bypass_environment,
    )

    proxies = getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or proxy_bypass_environment(netloc, proxies):
        return None
    if "://" not in proxy:
        proxy = f"http://{proxy}"
    parts = urlsplit(proxy)
    if parts.scheme != "http" or not parts.hostname:
        raise CliError(f"unsupported proxy {proxy!r}: give an http:// proxy URL")
    headers: dict[str, str] = {}
    if parts.username:
        import base64
        from urllib.parse import unquote

        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return parts.hostname, parts.port or 80, headers


def plain_ascii(token: object) -> bool:
    """A page token fit to send back and to print: printable ASCII, no space, bounded."""
    return isinstance(token, str) and 0 < len(token) <= 2048 and all("!" <= c <= "~" for c in token)


def server_url(host: str, url: object, what: str) -> str:
    """A URL a server handed out (an invite, a public page, a sign-in key), fit to print
    and to open: http(s), a host, no space, control or non-ASCII character."""
    parts = urlsplit(url) if isinstance(url, str) and plain_ascii(url) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = repr(url)[:80] if isinstance(url, str) else type(url).__name__
        raise CliError(f"{host} sent an unusable {what} URL ({shown}) — is it an ltm server?")
    return str(url)


# -- HTTP statuses as one clear line -------------------------------------------


class Rejected(CliError):
    """The server refused the token (401): the sign-in no longer works."""


class Unavailable(CliError):
    """502, 503 or 504: what a proxy or gateway in front of the server answers while the
    server behind it is down, overloaded or slow. No server took the request (or, like a
    timeout, it may have: sending the same push again is still one packet)."""


UNAVAILABLE = (502, 503, 504)


class Refusal(CliError):
    """400, 409 or 413: the server judged what was sent (its checks, an id that is
    another's, its size) and would judge the same request the same way again; the outbox
    sets such a packet aside rather than send it at every command."""


REFUSALS = (400, 409, 413)


def status_error(host: str, reply: Reply, hints: Mapping[int, str] | None = None) -> CliError:
    """The one line for a refusal: the hint for this status, else a generic one."""
    message = reply.error_text()
    status = reply.status
    if status in (404, 405) and not reply.is_ltm_error():
        return CliError(
            f"{host} answered HTTP {status} with {message}, not an ltm error — is it an ltm"
            " server? check the URL (ltm whoami shows it)"
        )
    if status == 403 and "insufficient_scope" in reply.headers.get("www-authenticate", ""):
        # RFC 6750 §3.1: the token is valid but was granted less (a read-only device token).
        return CliError(
            f"{host} refused: this token may not do that ({message}; it was granted less than"
            f" the full scope) — sign in with full access: ltm auth {host}"
        )
    if hints and status in hints:
        kind = Refusal if status in REFUSALS else CliError
        return kind(hints[status].replace("{host}", host).replace("{msg}", message))
    if status == 401:
        return Rejected(f"token rejected by {host} — run: ltm auth {host}")
    if status == 403:
        return CliError(f"{host} refused: {message} — you lack the rights; ask the team's owner")
    if status == 404:
        return CliError(f"{host}: {message} (HTTP 404) — check the name or id")
    if status == 409:
        return Refusal(f"{host}: {message} (HTTP 409) — pick another name or id")
    if status == 410:
        return CliError(
            f"{host}: {message} (HTTP 410) — ask a team member for a new invite: ltm invite -t TEAM"
        )
    if status == 413:
        return Refusal(
            f"{host} refused the request as too large ({message}) — a packet may be at most"
            f" {MAX_PACKET_KIB} KiB; trim it"
        )
    if status == 400:
        return Refusal(f"{host} rejected the request: {message}")
    if 300 <= status < 400:
        location = reply.headers.get("location", "")
        return CliError(
            f"{host} redirects (HTTP {status}) to {safe(location) or 'another address'} — ltm"
            " does not"
            " follow redirects (they could carry your token elsewhere); if the server moved,"
            " sign in at its new address: ltm auth NEW-URL"
        )
    if status == 429:
        return CliError(f"{host} is rate-limiting requests ({message}) — wait a bit, then retry")
    if status == 507:  # the per-user storage bound: not a fault, and retrying will not help
        return CliError(f"{host} refused: {message} (HTTP 507) — list them with: ltm ls --all")
    if status >= 500:
        kind = Unavailable if status in UNAVAILABLE else CliError
        return kind(
            f"{host} failed with HTTP {status} ({message}) — a problem on the server's side;"
            " try again later, or work offline with --local"
        )
    return CliError(f"unexpected HTTP {status} from {host}: {message}")


def probe(http: Http) -> dict[str, Any]:
    """``GET /v1/healthz``: is this an ltm server? Returns its answer."""
    reply = http.request("GET", "/v1/healthz")
    if reply.status != 200:
        if reply.status >= 500 or reply.status == 429 or 300 <= reply.status < 400:
            # A server that is down, rate-limiting or moved may well be an ltm server:
            # the line for that status says what to do (wait, or sign in at its new address).
            raise status_error(http.host, reply)
        raise CliError(
            f"{http.host} does not look like an ltm server (GET /v1/healthz: HTTP {reply.status},"
            f" {reply.error_text()}) — check the URL"
        )
    data = reply.json(http.host)
    if not isinstance(data, dict) or data.get("ok") is not True:
        raise CliError(
            f"{http.host} does not look like an ltm server (unexpected /v1/healthz answer)"
            " — check the URL"
        )
    return data


# -- the backend ------------------------------------------------------------------


def team_not_found(team: str, host: str) -> str:
    """What a server's 404 for a team means to the person who named it."""
    return (
        f"team {team!r} not found on {host}, or you are not a member — see your teams: ltm teams ls"
    )


class RemoteBackend(Backend):
    """Packets on an ltm server, over the protocol's HTTP API."""

    meaning_decided_elsewhere = True  # the server searches by meaning if it has the extra

    def __init__(self, target: Target, http: Http | None = None) -> None:
        self.target = target
        self.host = target.host
        self.label = target.host
        self.http = http or Http(target.host)
        self._resolved: dict[tuple[str, str | None], str] = {}
        self._bodies: dict[str, bytes] = {}
        self._published: dict[str, tuple[str, str]] = {}
        self._is_ltm: bool | None = None  # GET /v1/healthz answered as an ltm server does
        self._authors: dict[str, str] = {}  # packet id -> X-Ltm-Created-By of its GET
        self._batches: bool | None = None  # the batch routes are there (None: not yet asked)
        self._batch = _BatchSize()  # shared with this backend's lanes (``_lane``)
        self._page_tokens: set[str] = set()  # every page asked for: a repeat is a loop

    @classmethod
    def open(cls, target: Target, *, timeout: float | None = None) -> RemoteBackend:
        if not target.token:
            raise CliError(
                f"not signed in to {target.host} — run: ltm auth {target.host}"
                " (or use --local for the local store)"
            )
        return cls(target, Http(target.host, timeout=timeout) if timeout is not None else None)

    # -- plumbing ------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        ok: tuple[int, ...],
        query: Mapping[str, Any] | None = None,
        payload: Any = None,
        raw: bytes | None = None,
        hints: Mapping[int, str] | None = None,
        headers: Mapping[str, str] | None = None,
        feature: str | None = None,
        idempotent: bool | None = None,
    ) -> Reply:
        """One request; a status outside ``ok`` becomes the one line that explains it.

        ``feature`` names what a route beyond the protocol's table does (publishing,
        tokens, search): a server without the route says "not offered", not "not ltm".
        """
        body = raw
        if payload is not None:
            body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        reply = self.http.request(
            method,
            path,
            query=query,
            body=body,
            token=self.target.token,
            extra_headers=headers,
            idempotent=idempotent,
        )
        if feature is not None and self.lacks_route(reply):
            raise self.not_offered(feature, method, path)
        if reply.status in ok:
            if method != "GET" and 200 <= reply.status < 300 and reply.body.strip():
                # An ltm server answers a change with JSON or nothing: a page (a web server
                # answering every address with 200) changed nothing, whatever its status.
                # (A GET's answer is read by its caller, which says so.)
                reply.json(self.host)
            return reply
        if reply.status == 401:
            raise self._rejected()
        raise status_error(self.host, reply, hints)

    # -- which server this is: asked once --------------------------------------------------

    def lacks_route(self, reply: Reply) -> bool:
        """Whether ``reply`` says the server has no such route, rather than refusing in ltm.

        An ltm server's own refusals are ``{"error": ...}``; a 404 or 405 with any other
        body is the web framework's (the reference's Go router answers ``404 page not
        found`` in text/plain). That alone could be a proxy in front of anything, so the
        server's ``GET /v1/healthz`` is asked too, once per command (``is_ltm_server``).
        """
        if reply.status not in (404, 405) or reply.is_ltm_error():
            return False
        return self.is_ltm_server()

    def is_ltm_server(self) -> bool:
        """``GET /v1/healthz`` answers ``{"ok": true, ...}``: asked once, then remembered."""
        if self._is_ltm is None:
            try:
                probe(self.http)
            except CliError:
                self._is_ltm = False
            else:
                self._is_ltm = True
        return self._is_ltm

    def not_offered(self, feature: str, method: str, path: str) -> CliError:
        return CliError(
            f"{self.host} does not offer {feature} ({method} {path} is not a route there) —"
            " it speaks the ltm protocol without ltm's extensions (a reference ltm server?);"
            " this needs a server that has them"
        )

    def _rejected(self) -> CliError:
        if self.target.via == "LTM_TOKEN":
            return Rejected(
                f"token rejected by {self.host} (it comes from LTM_TOKEN) — fix LTM_TOKEN, or"
                f" unset it and run: ltm auth {self.host}"
            )
        return Rejected(f"token rejected by {self.host} — run: ltm auth {self.host}")

    def _team_hints(self, team: str | None) -> dict[int, str]:
        return {404: team_not_found(team, "{host}")} if team else {}

    # -- Backend ----------------------------------------------------------------------

    def push(
        self,
        data: Mapping[str, Any],
        *,
        team: str | None = None,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> Pushed:
        from ltm.cli.client import outbox

        packet_id = str(data.get("id", ""))
        since = outbox.stamp()
        hints = {**self._team_hints(team), 400: "{host} rejected the packet: {msg}"}
        reply = self._call(
            "POST",
            "/v1/packets",
            ok=(200, 201, 409),
            query={"team": team, "lenient": "true" if lenient else None},
            payload=dict(data),
            hints=hints,
            # The user's override of our server's own scan (a reference server ignores it).
            headers={"X-LTM-Allow-Unredacted": "1"} if allow_unredacted else None,
            idempotent=True,  # the id is in the body: sent twice, it is one packet
        )
        if reply.status == 409:
            raise self._id_taken(packet_id)
        answer = reply.json(self.host)
        pushed_id = answer.get("id") if isinstance(answer, dict) else None
        if id_problem(pushed_id) is not None:
            # What the server calls it is printed (ltm save's one line of stdout) and kept:
            # only a packet id, else the one sent, never the server's text as it came.
            pushed_id = packet_id
        # Taken: a version the outbox kept before this push must not land after it.
        outbox.superseded(self.host, dict(data), team, since=since)
        return Pushed(str(pushed_id), True)

    def _id_taken(self, packet_id: str) -> IdTaken:
        return IdTaken(
            f"packet {packet_id} already exists on {self.host} in another scope or owned by"
            " someone else; nothing was changed — give the packet a new id (drop its id and"
            " run: ltm save)"
        )

    # -- many at once: the batch routes (extensions), else one request per packet -------

    def readying(self) -> Callable[[Checked], Wire]:
        """Each packet encoded for the batch request in the worker that judged it."""
        return wire

    def push_many(
        self,
        items: Sequence[tuple[Mapping[str, Any] | Checked | Wire, str | None]],
        *,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> list[Pushed | Failure]:
        """``POST /v1/packets/batch`` for runs of packets with the same team, each request
        within ``BATCH`` packets and the body the server takes (32 KiB until a batch reply
        says more); a packet too big to share a request, and every packet on a server
        without the route (asked once), goes alone. A packet may come encoded already
        (``readying``)."""
        from ltm.cli.client import outbox

        since = outbox.stamp()
        done: list[Pushed | CliError | None] = [None] * len(items)
        packets = [
            (index, data if isinstance(data, Wire) else wire(data), team)
            for index, (data, team) in enumerate(items)
        ]

        def send(via: RemoteBackend, run: list[tuple[int, Wire]], team: str | None) -> None:
            """One request: a batch, or a packet alone (too big to share one, or a server
            without the batch routes); each packet's answer into ``done``."""
            if len(run) == 1 and (via._batches is False or via._alone(run[0][1])):
                own_team = items[run[0][0]][1]
                data = json.loads(run[0][1].text)
                done[run[0][0]] = via._push_one(data, own_team, lenient, allow_unredacted)
                return
            answers = via._push_batch(
                [packet for _, packet in run],
                team=team,
                lenient=lenient,
                allow_unredacted=allow_unredacted,
            )
            for (index, _), answer in zip(run, answers, strict=True):
                done[index] = answer

        # The first batch push alone tells whether the server has the batch routes, and how
        # big a batch it takes: the rest are planned again with what it said. Once it has
        # them, the rest go on LANES connections at once: each request is a set of single
        # pushes with distinct ids, so their order changes no packet's outcome, and the
        # server's processes take them side by side.
        runs = self._runs(packets)
        while runs and self._batches is not False and not self._batch.sized:
            send(self, *runs.pop(0))
            runs = self._runs([p for p in packets if done[p[0]] is None])
        if len(runs) > 1 and self._batches:
            self._in_lanes(runs, send)
        else:
            for one, team in runs:
                send(self, one, team)
        # Taken: a version the outbox kept before this push must not land after it, as for
        # one packet pushed (``push``). The outbox is read once, and is empty as a rule.
        kept = {(entry.packet_id, entry.team) for entry in outbox.waiting(self.host)}
        for index, packet, team in packets:
            if isinstance(done[index], Pushed) and (packet.id, team or None) in kept:
                outbox.superseded(self.host, json.loads(packet.text), team, since=since)
        return [d if d is not None else CliError("not pushed") for d in done]

    def _runs(self, packets: Sequence[tuple[int, Wire, str | None]]) -> list[_Run]:
        """``packets`` (index, packet, team) as requests: runs of one team within ``BATCH``
        packets and the batch body this server takes, and each packet too big for one alone."""
        runs: list[_Run] = []
        run: list[tuple[int, Wire]] = []
        run_team: str | None = None
        room, size = self._batch.bytes - _BATCH_ENVELOPE, 0
        for index, packet, team in packets:
            cost = len(packet.quoted) + 1  # as it travels: a JSON string, a comma
            alone = self._batches is False or cost > room
            if run and (alone or team != run_team or len(run) == BATCH or size + cost > room):
                runs.append((run, run_team))
                run, size = [], 0
            if alone:
                runs.append(([(index, packet)], team))
                continue
            run_team = team
            run.append((index, packet))
            size += cost
        if run:
            runs.append((run, run_team))
        return runs

    def _alone(self, packet: Wire) -> bool:
        """A packet too big to share a batch request: it is pushed on its own."""
        return len(packet.quoted) + 1 + _BATCH_ENVELOPE > self._batch.bytes

    def _in_lanes(
        self,
        runs: list[_Run],
        send: Callable[[RemoteBackend, list[tuple[int, Wire]], str | None], None],
    ) -> None:
        """The requests of ``runs`` on ``LANES`` connections at once: this backend's, and
        more of their own, each used by one thread only."""
        from concurrent.futures import ThreadPoolExecutor

        lanes = [self, *(self._lane() for _ in range(LANES - 1))]

        def drive(via: RemoteBackend, share: list[_Run]) -> None:
            for run, team in share:
                send(via, run, team)

        try:
            with ThreadPoolExecutor(max_workers=LANES, thread_name_prefix="ltm-push") as pool:
                started = [
                    pool.submit(drive, via, runs[n :: len(lanes)]) for n, via in enumerate(lanes)
                ]
                for lane in started:
                    lane.result()  # a failure of a lane is this call's
        finally:
            for via in lanes[1:]:
                via.http.close()

    def _lane(self) -> RemoteBackend:
        """This backend on a connection of its own (same server, token and answers)."""
        import copy

        via = copy.copy(self)
        via.http = self.http.another()
        return via

    def _push_one(
        self, data: Mapping[str, Any], team: str | None, lenient: bool, allow_unredacted: bool
    ) -> Pushed | CliError:
        try:
            return self.push(data, team=team, lenient=lenient, allow_unredacted=allow_unredacted)
        except CliError as exc:
            return exc

    def _push_batch(
        self,
        packets: list[Wire],
        *,
        team: str | None,
        lenient: bool,
        allow_unredacted: bool,
    ) -> list[Pushed | CliError]:
        """One batch request; each packet's answer as ``push`` would give it."""
        ids = [packet.id for packet in packets]
        if self._batches is not False:
            # The body ``{"packets": [TEXT, ...]}``, each TEXT as it was quoted already.
            body = b'{"packets":[' + b",".join(packet.quoted for packet in packets) + b"]}"
            if len(body) > self._batch.bytes:  # planned before a lane learned it is less
                return self._push_smaller(packets, team, lenient, allow_unredacted)
            try:
                reply = self._call(
                    "POST",
                    "/v1/packets/batch",
                    ok=(200, 404, 405, 413),
                    query={"team": team, "lenient": "true" if lenient else None},
                    raw=body,
                    hints={**self._team_hints(team), 400: "{host} rejected the batch: {msg}"},
                    headers={"X-LTM-Allow-Unredacted": "1"} if allow_unredacted else None,
                    idempotent=True,  # every packet's id is in it: sent twice, it is one batch
                )
            except CliError as exc:
                return [exc] * len(packets)
            if self._lacks_batch(reply):
                self._batches = False
            elif reply.status == 413 and len(body) > MAX_BODY:
                # Something in front of the server (a proxy, or the server short of room
                # for big bodies just now) takes less than it said: 32 KiB from now on.
                self._batch.bytes, self._batch.sized = MAX_BODY, True
                return self._push_smaller(packets, team, lenient, allow_unredacted)
            elif reply.status != 200:
                error = status_error(self.host, reply, self._team_hints(team))
                return [error] * len(packets)
            else:
                if not self._batch.sized:  # the first batch reply: the size from now on
                    self._batch.bytes = _batch_bytes(reply.headers.get(_BATCH_BYTES))
                self._batches = self._batch.sized = True
                return self._batch_answers(reply, ids, team)
        return [
            self._push_one(json.loads(packet.text), team, lenient, allow_unredacted)
            for packet in packets
        ]

    def _push_smaller(
        self, packets: list[Wire], team: str | None, lenient: bool, allow_unredacted: bool
    ) -> list[Pushed | CliError]:
        """``packets`` again, in requests of the size this backend now sends."""
        out: list[Pushed | CliError] = []
        for run, _ in self._runs([(index, packet, team) for index, packet in enumerate(packets)]):
            if len(run) == 1 and self._alone(run[0][1]):
                data = json.loads(run[0][1].text)
                out.append(self._push_one(data, team, lenient, allow_unredacted))
                continue
            out += self._push_batch(
                [packet for _, packet in run],
                team=team,
                lenient=lenient,
                allow_unredacted=allow_unredacted,
            )
        return out

    def _batch_answers(
        self, reply: Reply, ids: list[str], team: str | None
    ) -> list[Pushed | CliError]:
        answer = reply.json(self.host)
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != len(ids):
            raise CliError(f"{self.host} sent an unexpected batch answer — is it an ltm server?")
        hints = {**self._team_hints(team), 400: "{host} rejected the packet: {msg}"}
        out: list[Pushed | CliError] = []
        for packet_id, result in zip(ids, results, strict=True):
            status = result.get("status") if isinstance(result, dict) else None
            if status in (200, 201):
                out.append(Pushed(str(result.get("id") or packet_id), True))
            elif status == 409:
                out.append(self._id_taken(packet_id))
            else:
                # The packet's own answer, read as the single push's reply would be.
                error = result.get("error") if isinstance(result, dict) else None
                body = json.dumps({"error": str(error or "no message")}).encode()
                one = Reply(int(status) if isinstance(status, int) else 502, {}, body)
                out.append(status_error(self.host, one, hints))
        return out

    def _lacks_batch(self, reply: Reply) -> bool:
        """A server without the batch routes: it answers 404 or 405 (an older ltm server
        reads ``batch`` as a packet id: ``not found``, ``method not allowed``). This server
        answers those routes' 404 only with ``team not found``."""
        return reply.status in (404, 405) and reply.error_text() != "team not found"

    def stored_many(self, packet_ids: Sequence[str]) -> dict[str, bytes | None]:
        """``GET /v1/packets/batch`` for ``BATCH`` ids at a time, else one GET per id."""
        found: dict[str, bytes | None] = {}
        wanted = list(dict.fromkeys(packet_ids))
        for start in range(0, len(wanted), BATCH):
            chunk = wanted[start : start + BATCH]
            answers = self._get_batch(chunk)
            if answers is None:
                found.update((packet_id, self.stored(packet_id)) for packet_id in chunk)
                continue
            for packet_id, answer in zip(chunk, answers, strict=True):
                found[packet_id] = answer[0] if answer is not None else None
        return found

    def authors(self, packet_ids: Sequence[str]) -> dict[str, str]:
        """Who stored each packet (user ids), from the batch read; {} from a server without
        it (the reference): a listing then names nobody rather than read packet by packet."""
        found: dict[str, str] = {}
        wanted = list(dict.fromkeys(packet_ids))
        for start in range(0, len(wanted), BATCH):
            chunk = wanted[start : start + BATCH]
            answers = self._get_batch(chunk)
            if answers is None:
                return found
            found.update((i, a[1]) for i, a in zip(chunk, answers, strict=True) if a and a[1])
        return found

    def _get_batch(self, ids: list[str]) -> list[tuple[bytes, str, bool] | None] | None:
        """Each id's (body, created_by, conforming), None where absent; None when the server
        has no batch read (asked once)."""
        if self._batches is False or not ids:
            return None
        query = "&".join(f"id={quote(packet_id, safe='')}" for packet_id in ids)
        reply = self._call("GET", f"/v1/packets/batch?{query}", ok=(200, 404, 405))
        if reply.status != 200:
            if self._lacks_batch(reply):
                self._batches = False
                return None
            raise status_error(self.host, reply)
        self._batches = True
        answer = reply.json(self.host)
        rows = answer.get("packets") if isinstance(answer, dict) else None
        if not isinstance(rows, list) or len(rows) != len(ids):
            raise CliError(f"{self.host} sent an unexpected batch read — is it an ltm server?")
        out: list[tuple[bytes, str, bool] | None] = []
        for packet_id, row in zip(ids, rows, strict=True):
            if not isinstance(row, dict) or row.get("id") != packet_id:
                raise CliError(f"{self.host} sent an unexpected batch read — is it an ltm server?")
            body = row.get("body")
            if row.get("status") != 200 or not isinstance(body, str):
                out.append(None)
                continue
            out.append(
                (
                    body.encode("utf-8").rstrip(b"\r\n"),
                    str(row.get("created_by") or ""),
                    row.get("conforming") is not False,
                )
            )
        return out

    def page(
        self,
        filters: Filters,
        *,
        team: str | None = None,
        limit: int = 50,
        page_token: str | None = None,
    ) -> Listing:
        # Filters and page_token are extensions: a reference server ignores them.
        query = filters.query()
        rows, token, applied = self._page(team=team, limit=limit, page_token=page_token, **query)
        ignored = {name for name, value in query.items() if value is not None} - applied
        if not ignored:
            return Listing(_rows(rows), token)
        if "author" in ignored:  # who stored a packet is in neither its row nor its body
            raise CliError(
                f"{self.host} lists without ltm's listing filters (a reference ltm server, or"
                " an ltm server older than this CLI): it cannot list by author; list without"
                " --author"
            )
        # A server that listed every packet (the reference): the filters are applied here,
        # to the newest packets, a bounded number, as many read as the project or tag needs.
        if len(rows) >= limit:
            rows, _, _ = self._page(team=team, limit=max(limit, PROJECT_SCAN), **query)
        return Listing(_rows(self._matching(rows, filters, limit)), None)

    def search(
        self,
        query: str,
        *,
        team: str | None = None,
        all_scopes: bool = False,
        limit: int = 20,
        mode: str | None = None,
        private: bool = False,
    ) -> list[dict[str, Any]]:
        """The query goes in a POST body, which proxies and access logs leave out; a
        server without that route (an older ltm) is asked with a GET, whose query
        string they keep: for ``private`` words (a prompt's), without any the secret
        scanner or the entropy check flags (``ltm.search.without_secrets``)."""
        fields = {
            "q": query,
            "team": team,
            "scope": "all" if all_scopes else None,
            "limit": limit,
            "mode": mode,
        }
        sent = {key: value for key, value in fields.items() if value is not None}
        reply = self._call(
            "POST",
            "/v1/search",
            ok=(200, 404, 405),
            payload=sent,
            hints={400: "{host}: {msg}"},
            idempotent=True,
        )
        if reply.status != 200:
            if not self.lacks_route(reply):
                self._extension_reply(reply, "search", "POST", "/v1/search", team)
            if private:
                from ltm.search import without_secrets

                kept = fields["q"] = without_secrets(query)
                if not kept.strip():
                    return []
            fields["mode"] = None if mode in (None, "hybrid") else mode
            reply = self._extension("/v1/search", "search", fields, team)
        answer = reply.json(self.host)
        found = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(found, list):
            raise CliError(f"{self.host} sent unexpected search results — is it an ltm server?")
        return [hit for hit in found if isinstance(hit, dict) and isinstance(hit.get("id"), str)]

    def children(self, ref: str, *, team: str | None = None) -> list[dict[str, Any]]:
        packet_id = self.resolve(ref, team=team)
        path = f"/v1/packets/{_segment(packet_id)}/children"
        answer = self._extension(path, "lineage", {}, team).json(self.host)
        rows = answer.get("packets") if isinstance(answer, dict) else None
        return _rows(rows, lineage=True) if isinstance(rows, list) else []

    def thread(self, ref: str, *, team: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        packet_id = self.resolve(ref, team=team)
        path = f"/v1/packets/{_segment(packet_id)}/thread"
        answer = self._extension(path, "lineage", {}, team).json(self.host)
        rows = answer.get("packets") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            raise CliError(f"{self.host} sent an unexpected thread — is it an ltm server?")
        return _rows(rows, lineage=True), answer.get("complete") is not False

    def _extension(
        self, path: str, feature: str, query: Mapping[str, Any], team: str | None
    ) -> Reply:
        """A GET on a route the reference server does not have: say so plainly if it is absent."""
        reply = self._call(
            "GET", path, ok=(200, 404), query=query, hints={400: "{host}: {msg}"}, feature=feature
        )
        if reply.status == 200:
            return reply
        return self._extension_reply(reply, feature, "GET", path, team)

    def _extension_reply(
        self, reply: Reply, feature: str, method: str, path: str, team: str | None
    ) -> NoReturn:
        """Never returns: the error a 404 of an extension route stands for."""
        message = reply.error_text() if reply.is_ltm_error() else None
        if message == "team not found":
            raise status_error(self.host, reply, self._team_hints(team))
        if message == "not found":
            raise CliError(f"no such packet on {self.host}, or it is not yours to see")
        if message is None:  # not ltm's 404, and /v1/healthz is not ltm's either
            raise status_error(self.host, reply)
        raise self.not_offered(feature, method, path)

    def _matching(
        self, rows: list[dict[str, Any]], filters: Filters, limit: int
    ) -> list[dict[str, Any]]:
        """The first ``limit`` of the newest ``PROJECT_SCAN`` rows that pass ``filters``
        (author aside): the times by the row, the project and the tag by the body."""
        from datetime import UTC, datetime

        from ltm.times import TimeError, sort_key

        now = datetime.now(UTC)
        try:
            low = sort_key(filters.since, now) if filters.since is not None else None
            high = sort_key(filters.until, now) if filters.until is not None else None
        except TimeError as exc:
            raise CliError(f"since/until: {exc}") from None
        kept = []
        for row in rows[:PROJECT_SCAN]:
            try:
                at = sort_key(str(row.get("created_at", "")), now)
            except TimeError:
                continue
            if (low is not None and at < low) or (high is not None and at >= high):
                continue
            if filters.project is not None or filters.tag is not None:
                from ltm.search import project_of, tags_of

                try:
                    data = json.loads(self._fetch(str(row.get("id", ""))) or b"{}")
                except ValueError:
                    continue
                if not isinstance(data, dict):
                    continue
                if filters.project is not None and project_of(data) != filters.project:
                    continue
                if filters.tag is not None and filters.tag not in tags_of(data):
                    continue
            kept.append(row)
            if len(kept) == limit:
                break
        return kept

    def _page(
        self,
        *,
        team: str | None,
        limit: int,
        page_token: str | None = None,
        **filters: str | None,
    ) -> tuple[list[dict[str, Any]], str | None, set[str]]:
        """One listing page: its rows, the ``next_page_token`` if any, and the filters the
        server says it applied, by echoing them (all extensions the reference does not have).

        A server's page token is held to plain text and never asked for twice, and a
        command walks at most ``MAX_PAGES`` pages: a server that always has a next page
        cannot make ``ls --all`` or ``export`` run forever."""
        if page_token is not None:
            if page_token in self._page_tokens:
                raise CliError(
                    f"{self.host} sent a page token it had sent before; stopped listing (the"
                    " listing would never end) — is it an ltm server?"
                )
            if len(self._page_tokens) >= MAX_PAGES:
                raise CliError(f"{self.host} listed more than {MAX_PAGES:,} pages; stopped")
            self._page_tokens.add(page_token)
        reply = self._call(
            "GET",
            "/v1/packets",
            ok=(200,),
            query={"team": team, "limit": limit, "page_token": page_token, **filters},
            hints={**self._team_hints(team), 400: "{host}: {msg}"},
        )
        answer = reply.json(self.host)
        rows = answer.get("packets") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            raise CliError(f"{self.host} sent an unexpected packet list — is it an ltm server?")
        token = answer.get("next_page_token")
        if token is not None and token != "" and not plain_ascii(token):
            raise CliError(f"{self.host} sent a malformed page token — is it an ltm server?")
        asked = {name for name, value in filters.items() if value is not None}
        return (
            [row for row in rows[:limit] if isinstance(row, dict)],  # no more than asked for
            token or None,
            {name for name in asked if answer.get(name) == filters[name]},
        )

    def walk(self, *, team: str | None = None) -> Iterator[Held]:
        from ltm.cli.terminal.output import info

        me = (self.target.user or {}).get("id", "")
        token: str | None = None
        while True:
            rows, token, _ = self._page(team=team, limit=WALK_PAGE, page_token=token)
            for start in range(0, len(rows), BATCH):
                chunk = rows[start : start + BATCH]
                answers = self._get_batch([str(row.get("id", "")) for row in chunk])
                if answers is None:  # a server without the batch read: one GET each
                    yield from self._walk_one_by_one(chunk, team, me)
                    continue
                for row, answer in zip(chunk, answers, strict=True):
                    if answer is None:  # deleted since the page was read
                        continue
                    body, created_by, conforming = answer
                    yield Held(
                        body=body,
                        team=team,
                        created_by=created_by or ("" if team else me),
                        created_at=str(row.get("created_at", "")),
                        conforming=conforming,
                    )
            if token is None:
                # A full page and no token: a server without pages (the reference), or the
                # end of the listing on one whose last page is full. A server with the batch
                # read pages too (page tokens came first): there it is the end.
                if len(rows) == WALK_PAGE and self._batches is not True:
                    info(
                        f"ltm: warning: {self.host} lists only its newest {WALK_PAGE} packets"
                        f" per scope and has no page_token; older ones were not exported"
                    )
                return

    def _walk_one_by_one(
        self, rows: list[dict[str, Any]], team: str | None, me: str
    ) -> Iterator[Held]:
        for row in rows:
            reply = self._call(
                "GET", f"/v1/packets/{_segment(str(row.get('id', '')))}", ok=(200, 404)
            )
            if reply.status == 404:  # deleted since the page was read
                continue
            yield Held(
                body=reply.packet_body(self.host),
                team=team,
                created_by=reply.headers.get("x-ltm-created-by") or ("" if team else me),
                created_at=str(row.get("created_at", "")),
                conforming=reply.headers.get("x-ltm-conforming") != "false",
            )

    def stored(self, packet_id: str) -> bytes | None:
        reply = self._call("GET", f"/v1/packets/{_segment(packet_id)}", ok=(200, 404))
        return None if reply.status == 404 else reply.packet_body(self.host)

    def team_names(self) -> list[str]:
        return [str(row["name"]) for row in self.teams() if isinstance(row.get("name"), str)]

    def holds_personally(self, packet: Mapping[str, Any]) -> bool:
        """Looked up in the personal listing by the packet's time (a one-second window),
        not by reading it: a read succeeds for a team packet too and cannot tell them apart.
        A server without listing filters (the reference) lists its newest packets instead."""
        from datetime import datetime, timedelta

        packet_id, stamp = packet.get("id"), packet.get("created_at")
        if not isinstance(stamp, str):
            return False
        try:
            at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return False
        until = (at + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
        rows, _, _ = self._page(team=None, limit=WALK_PAGE, since=stamp, until=until)
        return any(row.get("id") == packet_id for row in rows)

    def get(self, ref: str, *, team: str | None = None) -> bytes:
        check_ref(ref)
        packet_id = self.resolve(ref, team=team)
        body = self._bodies.get(packet_id)
        if body is None:
            body = self._fetch(packet_id)
            if body is None:
                raise self._missing(ref, team)
        return body

    def delete(self, ref: str, *, team: str | None = None) -> str:
        check_ref(ref)
        known = self._resolved.get((ref, team))
        if known is None:
            # A full id deletes in one request; only a prefix needs the list.
            reply = self._call("DELETE", f"/v1/packets/{_segment(ref)}", ok=(200, 204, 404))
            if reply.status != 404:
                return ref
            known = self.resolve(ref, team=team)
        # Resolved, the packet is one this user reads (their own, a team's, or shared
        # with them): the server's 404 to its delete means it is not theirs to delete,
        # not that there is no such packet. Who wants one shared with them gone from their
        # list drops the share, with their own id (or name).
        from shlex import join

        from ltm.cli.client.credentials import reaching

        me = (self.target.user or {}).get("id") or "YOUR-NAME"
        drop = join(["ltm", "unshare", known, me, *reaching(self.host, None)])
        self._call(
            "DELETE",
            f"/v1/packets/{_segment(known)}",
            ok=(200, 204),
            hints={
                404: f"you can read packet {known} on {self.host} but not delete it: a packet"
                f" shared with you is deleted by its owner alone ({drop} drops it from your"
                " list), a team's packet by its author or the team's owner"
            },
        )
        self._bodies.pop(known, None)
        return known

    def close(self) -> None:
        self.http.close()

    def whoami(self) -> dict[str, Any]:
        from ltm.cli.client.credentials import fingerprint

        token = self.target.token
        return {
            "backend": "remote",
            "host": self.host,
            "user": self.target.user,
            "token_fingerprint": fingerprint(token) if token else None,
        }

    def identify(self) -> dict[str, Any] | None:
        """Who the server says the token belongs to: ``GET /v1/whoami``'s answer.

        None from a server without that route (the reference), once a listing has
        shown the token is accepted there. A rejected token raises, as everywhere.
        """
        reply = self._call("GET", "/v1/whoami", ok=(200, 403, 404))
        if reply.status == 403:  # valid, but granted no read: a write-only device token
            return {"token": {"scope": "write"}}
        if reply.status == 404:
            self._call("GET", "/v1/packets", ok=(200,), query={"limit": 1})
            return None
        answer = reply.json(self.host)
        if not isinstance(answer, dict) or not isinstance(answer.get("user"), dict):
            raise CliError(f"{self.host} sent an unexpected whoami answer — is it an ltm server?")
        return answer

    # -- ids and prefixes ---------------------------------------------------------------

    def resolve(self, ref: str, *, team: str | None = None) -> str:
        """The full id for ``ref``: itself when the server has it, else the one id it prefixes."""
        known = self._resolved.get((ref, team))
        if known is not None:
            return known
        if not ref or ref != ref.strip():
            raise CliError(f"not a packet id: {ref!r}")
        body = self._fetch(ref)
        if body is not None:
            self._resolved[(ref, team)] = ref
            return ref
        rows = self.list(team=team, limit=RESOLVE_PAGE)
        matches = [row["id"] for row in rows if row["id"].startswith(ref)]
        if not matches and not team:
            # A packet shared with the caller is in none of their listings: its prefix is
            # looked up among the newest shared with them (where ltm ls --shared found it).
            try:
                shared = self.shared(RESOLVE_PAGE) or []
            except CliError:  # the miss is the answer; how the server took this is not
                shared = []
            matches = [row["id"] for row in shared if row["id"].startswith(ref)]
        if not matches:
            raise self._missing(ref, team)
        if len(matches) > 1:
            from ltm.ids import ambiguous

            raise CliError(ambiguous(ref, matches, f"on {self.host}"))
        self._resolved[(ref, team)] = matches[0]
        return matches[0]

    def shared(self, limit: int) -> list[dict[str, Any]] | None:
        """``GET /v1/shared``: the packets others shared with the caller, newest share
        first (``limit`` at most 200); None where the server has no sharing (the reference)."""
        reply = self._call(
            "GET", "/v1/shared", ok=(200, 404, 405), query={"limit": min(limit, 200)}
        )
        if reply.status != 200:
            return None
        answer = reply.json(self.host)
        rows = answer.get("packets") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            raise CliError(f"{self.host} sent an unexpected list of shared packets")
        return [r for r in rows if isinstance(r, dict) and isinstance(r.get("id"), str)]

    def _fetch(self, packet_id: str) -> bytes | None:
        reply = self._call("GET", f"/v1/packets/{_segment(packet_id)}", ok=(200, 404))
        if reply.status == 404:
            return None
        body = reply.packet_body(self.host)
        self._bodies[packet_id] = body
        at = reply.headers.get("x-ltm-published-at")
        url = reply.headers.get("x-ltm-public-url")
        if at and url:
            self._published[packet_id] = (at, url)
        author = reply.headers.get("x-ltm-created-by")
        if author:
            self._authors[packet_id] = author
        return body

    def published(self, packet_id: str) -> tuple[str, str] | None:
        """(published at, public URL) of a packet fetched by this backend, if it is published.

        From the ``X-LTM-Published-At`` and ``X-LTM-Public-URL`` headers of ``GET
        /v1/packets/{id}``, which a server sends only to whoever may publish the packet
        (the reference's ``show`` reads the same two; internal/cli/show.go).
        """
        return self._published.get(packet_id)

    def stored_by(self, packet_id: str) -> str | None:
        return self._authors.get(packet_id)

    def is_me(self, user_id: str) -> bool | None:
        """Compared with the user ``ltm auth`` or ``ltm join`` recorded, else asked of the
        server: a personal listing filtered by ``author`` accepts only the caller's own id
        (or ``me``) and refuses any other with 400, so one ``limit=1`` request tells."""
        known = (self.target.user or {}).get("id")
        if known:
            return user_id == known
        reply = self._call(
            "GET", "/v1/packets", ok=(200, 400), query={"limit": 1, "author": user_id}
        )
        if reply.status == 200:
            return True
        return False if reply.error_text().startswith("author:") else None

    def _missing(self, ref: str, team: str | None) -> CliError:
        from ltm.cli.client.backend import local_id

        local = local_id(ref)
        if local is not None:
            from shlex import join

            from ltm.cli.client.credentials import reaching

            copy = join(["ltm", "push", "--from-local", local, *reaching(self.host, team)])
            return CliError(
                f"packet {local} is in your local store, not on {self.host} — read it there"
                f" with --local, or copy it to the server: {copy}"
            )
        if team:
            return CliError(
                f"no packet {ref} in team {team} on {self.host} — list them with: ltm ls -t {team}"
            )
        return CliError(
            f"no packet {ref} among yours on {self.host} (a team's? add -t TEAM) — list them"
            " with: ltm ls"
        )

    # -- publishing (only servers serve public pages) ---------------------------------

    def _packet_call(self, method: str, ref: str, suffix: str, *, team: str | None) -> Reply:
        """``method`` on ``/v1/packets/{id}{suffix}``: a full id at once, a prefix resolved.

        The server answers 404 both for a packet the caller cannot see and for one
        they may read but not manage (a teammate's): the second is told apart by
        reading it, so the message names the rule rather than denying the packet.
        """
        known = self._resolved.get((ref, team))
        feature = "publishing (public pages)"
        if known is None:
            reply = self._call(
                method,
                f"/v1/packets/{_segment(ref)}{suffix}",
                ok=(200, 201, 204, 404),
                feature=feature,
            )
            if reply.status != 404:
                return reply
            if not reply.is_ltm_error():  # and /v1/healthz is not ltm's either
                raise status_error(self.host, reply)
            known = self.resolve(ref, team=team)
        reply = self._call(
            method,
            f"/v1/packets/{_segment(known)}{suffix}",
            ok=(200, 201, 204, 404),
            feature=feature,
        )
        if reply.status != 404:
            return reply
        if known in self._bodies or self._fetch(known) is not None:
            scope = f"in team {team}" if team else "readable to you"
            raise CliError(
                f"packet {known} is {scope} on {self.host}, but only its creator or the team's"
                " owner may publish or unpublish it — ask them"
            )
        raise self._missing(known, team)

    def publish(self, ref: str, *, team: str | None = None) -> dict[str, str]:
        """``POST /v1/packets/{id}/publish``: ``{"id", "public_url"}``."""
        answer = self._packet_call("POST", ref, "/publish", team=team).json(self.host)
        if not isinstance(answer, dict):
            raise CliError(f"{self.host} sent an unexpected answer to publish")
        url = server_url(self.host, answer.get("public_url"), "public")
        return {"id": str(answer.get("id") or ref), "public_url": url}

    def unpublish(self, ref: str, *, team: str | None = None) -> None:
        """``DELETE /v1/packets/{id}/publish``: the public URL stops working at once."""
        self._packet_call("DELETE", ref, "/publish", team=team)

    # -- teams and invites (not part of Backend: only servers have them) ----------------

    def create_team(self, name: str) -> dict[str, Any]:
        reply = self._call(
            "POST",
            "/v1/teams",
            ok=(200, 201),
            payload={"name": name},
            hints={
                409: f"the team name {name!r} is taken on {{host}} — pick another name",
                400: "{host} refused the team name: {msg}",
            },
        )
        answer = reply.json(self.host)
        team = answer.get("team") if isinstance(answer, dict) else None
        return team if isinstance(team, dict) else {"name": name}

    def teams(self) -> list[dict[str, Any]]:
        answer = self._call("GET", "/v1/teams", ok=(200,)).json(self.host)
        rows = answer.get("teams") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            raise CliError(f"{self.host} sent an unexpected team list — is it an ltm server?")
        return [row for row in rows if isinstance(row, dict)]

    def delete_team(self, name: str) -> None:
        self._call(
            "DELETE",
            f"/v1/teams/{_segment(name)}",
            ok=(200, 204),
            hints={
                **self._team_hints(name),
                403: f"only the owner of team {name!r} can delete it — ask them, or leave it:"
                f" ltm teams leave {name}",
            },
        )

    def members(self, name: str) -> list[dict[str, Any]]:
        reply = self._call(
            "GET", f"/v1/teams/{_segment(name)}/members", ok=(200,), hints=self._team_hints(name)
        )
        answer = reply.json(self.host)
        rows = answer.get("members") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            raise CliError(f"{self.host} sent an unexpected member list — is it an ltm server?")
        return [row for row in rows if isinstance(row, dict)]

    def kick(self, name: str, user_id: str) -> None:
        self._call(
            "DELETE",
            f"/v1/teams/{_segment(name)}/members/{_segment(user_id)}",
            ok=(200, 204),
            hints={
                **self._team_hints(name),
                403: f"only the owner of team {name!r} can remove members — ask them",
                400: "{host} refused: {msg}",
            },
        )

    def leave(self, name: str) -> None:
        self._call(
            "POST",
            f"/v1/teams/{_segment(name)}/leave",
            ok=(200, 204),
            raw=b"{}",
            hints={
                **self._team_hints(name),
                400: f"{{host}} refused: {{msg}} (to delete the team: ltm teams rm {name})",
            },
        )

    def invite(self, name: str) -> dict[str, Any]:
        reply = self._call(
            "POST",
            f"/v1/teams/{_segment(name)}/invites",
            ok=(200, 201),
            raw=b"{}",
            hints=self._team_hints(name),
        )
        answer = reply.json(self.host)
        if not isinstance(answer, dict):
            raise CliError(f"{self.host} sent an unexpected invite — is it an ltm server?")
        return {**answer, "url": server_url(self.host, answer.get("url"), "invite")}


def find_team(team: str, *, timeout: float | None = None) -> Target | None:
    """The server signed in to where the user belongs to ``team``, asking each of them.

    For ``-t TEAM`` when the default is the local store and ``hosts.json`` knows no
    such team (joined with another client, or created with ``-H``): each server's
    ``GET /v1/teams`` answer is recorded, so the next command needs no request.
    A server that cannot be reached or refuses the token is passed over.
    """
    from ltm.cli.client import credentials

    state = credentials.load()
    rejected: list[str] = []  # the team may be there, behind a revoked or expired token
    for host, entry in sorted(state.hosts.items()):
        http = Http(host, timeout=timeout)
        try:
            reply = http.request("GET", "/v1/teams", token=entry.get("token"))
            answer = reply.json(host) if reply.status == 200 else None
        except CliError:
            continue
        finally:
            http.close()
        if reply.status == 401:
            rejected.append(host)
        rows = answer.get("teams") if isinstance(answer, dict) else None
        if isinstance(rows, list):
            names = [str(r["name"]) for r in rows if isinstance(r, dict) and r.get("name")]
            credentials.remember_teams(host, names, token=entry.get("token"), complete=True)
    if credentials.team_host(credentials.load(), team) is None:
        if rejected:
            raise Rejected(
                f"team {team} is on none of the servers that answered, and"
                f" {', '.join(rejected)} rejected your token (revoked or expired) —"
                f" sign in there again: ltm auth {rejected[0]}"
            )
        return None
    return credentials.active(team)


def accept_invite(
    http: Http, code: str, *, token: str | None, display: str | None
) -> dict[str, Any]:
    """``POST /v1/invites/{code}/accept``, as the signed-in user or (no token) a new one."""
    payload = {"display": display} if display else {}
    reply = http.request(
        "POST",
        f"/v1/invites/{_segment(code)}/accept",
        body=json.dumps(payload).encode(),
        token=token,
    )
    if reply.status in (200, 201):
        answer = reply.json(http.host)
        if not isinstance(answer, dict):
            raise CliError(f"{http.host} sent an unexpected answer to the invite")
        return answer
    hints = {
        # 410 is every dead code, unknown ones included (as the reference answers).
        410: "this invite has expired, was already used, or does not exist — ask a team member"
        " for a new one: ltm invite -t TEAM",
        404: "no such invite on {host} — check the URL, or ask for a new invite",
        401: f"your token for {http.host} was rejected — run: ltm auth {http.host}, or sign out"
        " (ltm logout) to join as a new user",
        400: "{host} refused the invite: {msg}",
        # A name taken on the server is the joiner's to change, with the same invite; any
        # other conflict (a team left moments ago) says in its own words what to do.
        409: "{host}: {msg} — join under another name: ltm join URL --display NAME"
        if reply.error_text().startswith("display:")
        else "{host}: {msg}",
    }
    raise status_error(http.host, reply, hints)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _rows(rows: list[Any], *, lineage: bool = False) -> list[dict[str, Any]]:
    """Listing entries from a server, with only the keys we use, as strings."""
    out: list[dict[str, Any]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        entry: dict[str, Any] = {
            "id": str(row.get("id", "")),
            "created_at": str(row.get("created_at", "")),
            "goal": str(row.get("goal", "")),
        }
        if lineage:
            parent = row.get("parent_id")
            entry["parent_id"] = parent if isinstance(parent, str) else None
            if "next_step" in row:
                entry["next_step"] = str(row["next_step"])
        out.append(entry)
    return out
