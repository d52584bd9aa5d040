"""Fetching a Client ID Metadata Document: an anonymous request makes this server connect out.

The MCP specification's Client ID Metadata Documents
(https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization)
let a client's id be the https URL of a JSON document about it, which the
authorization server fetches. Whoever names such a URL makes this server open a
connection wherever it points, so every fetch is held to:

- one wall-clock deadline (``DEADLINE``) for resolving, connecting, the TLS
  handshake, the headers and the body together: the name is looked up in a
  thread waited for at most the time left (a lookup given up on keeps its
  fetch's place in the bounds below until it ends), and a watchdog closes the
  socket when the deadline passes, so a server that sends a byte every few
  seconds gets nothing;
- at most ``PER_PROCESS`` fetches at once in a process and ``PER_ADDRESS`` for
  one client address (an IPv6 client by its /64): past them the fetch is not
  made and the client is unknown for this request;
- a failure remembered for ``FAILURE_TTL``, so a dead or hostile site is not
  fetched again on every request;
- the address checked once and connected to as checked: the name is resolved
  once, every address it has must be public (an IPv6 address that embeds an
  IPv4 one, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, mapped ``::ffff:0:0/96``,
  is judged by that IPv4), and the connection goes to the vetted address, with
  the certificate checked against the name (no second lookup for a rebinding
  DNS server to answer differently);
- https only, no redirects, at most ``MAX_BYTES``.

Loopback addresses are allowed only to a server that itself listens on loopback
(``loopback.listening_on_loopback``), which is a development setup.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from typing import Any

DEADLINE = 5.0  # seconds, the whole fetch
MAX_BYTES = 16 * 1024
PER_PROCESS = 2  # fewer than the self-hosted server's worker threads (its DEFAULT_THREADS)
PER_ADDRESS = 1
FAILURE_TTL = 60.0  # seconds a failed URL is not fetched again
_FAILURES_KEPT = 1024

_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local networks only

_lock = threading.Lock()
_running = 0
_by_address: dict[str, int] = {}
_failed: dict[str, float] = {}


def public_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is on the public internet, an embedded IPv4 judged as itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return public_address(embedded)
        if ip in _NAT64_LOCAL or ip.teredo is not None:
            return False
    return ip.is_global and not ip.is_multicast


class Refused(Exception):
    """The fetch was not made or did not finish; the reason is for the log only."""


def _client_key(address: str) -> str:
    from ..service.device import client_key

    return client_key(address) if address else "unknown"


def fetch(url: str, *, client_address: str = "", allow_loopback: bool = False) -> bytes:
    """The body of a 200 answer to ``GET url`` (https, at most ``MAX_BYTES``), within the
    limits above; ``Refused`` otherwise."""
    global _running
    now = time.monotonic()
    key = _client_key(client_address)
    with _lock:
        if _failed.get(url, 0.0) > now:
            raise Refused("failed lately")
        if _running >= PER_PROCESS or _by_address.get(key, 0) >= PER_ADDRESS:
            raise Refused("too many fetches at once")
        _running += 1
        _by_address[key] = _by_address.get(key, 0) + 1
    place = _Place(key)
    try:
        return _fetch(url, now + DEADLINE, allow_loopback, place)
    except Refused:
        with _lock:
            if len(_failed) >= _FAILURES_KEPT:
                _failed.clear()
            _failed[url] = time.monotonic() + FAILURE_TTL
        raise
    finally:
        place.release()


class _Place:
    """A fetch's place in the bounds, given back when the last of its holders lets go:
    the fetch, and a name lookup it gave up waiting for (a thread that cannot be stopped
    still counts, so a slow resolver cannot pile up lookups past the bounds)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.holders = 1

    def hold(self) -> None:
        with _lock:
            self.holders += 1

    def release(self) -> None:
        global _running
        with _lock:
            self.holders -= 1
            if self.holders:
                return
            _running -= 1
            left = _by_address.pop(self.key) - 1
            if left:
                _by_address[self.key] = left


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise Refused("deadline passed")
    return left


def _resolve(host: str, port: int, deadline: float, place: _Place) -> list[Any]:
    """``getaddrinfo`` within the deadline: it cannot be interrupted, so it runs in a
    thread of its own, waited for at most the time left; that thread holds ``place``
    until it ends."""
    import socket

    answer: list[Any] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            answer.append(exc)
        finally:
            done.set()
            place.release()

    wait = _left(deadline)
    place.hold()
    try:
        threading.Thread(target=lookup, name="cimd-resolve", daemon=True).start()
    except RuntimeError:  # no thread to be had: the lookup never runs to let go
        place.release()
        raise Refused("cannot start the lookup") from None
    if not done.wait(wait):
        raise Refused("cannot resolve within the deadline")
    _left(deadline)
    found = answer[0]
    if isinstance(found, OSError):
        raise Refused(f"cannot resolve: {found}")
    return list(found)


def _vetted(host: str, port: int, allow_loopback: bool, deadline: float, place: _Place) -> str:
    """The one address to connect to: every address of ``host`` must pass."""
    found = _resolve(host, port, deadline, place)
    addresses = [str(info[4][0]) for info in found]
    if not addresses:
        raise Refused("no address")
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if not (public_address(ip) or (allow_loopback and ip.is_loopback)):
            raise Refused(f"not a public address: {ip}")
    return addresses[0]


def _fetch(url: str, deadline: float, allow_loopback: bool, place: _Place) -> bytes:
    import http.client
    import socket
    import ssl
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme != "https" or not host:
        raise Refused("not https")
    port = parts.port or 443
    address = _vetted(host, port, allow_loopback, deadline, place)
    try:
        raw = socket.create_connection((address, port), timeout=_left(deadline))
    except OSError as exc:
        raise Refused(f"cannot connect: {exc}") from None
    # The watchdog: whatever the socket is waiting for when the deadline comes, it ends.
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _closer(raw))
    watchdog.daemon = True
    watchdog.start()
    try:
        context = ssl.create_default_context()
        tls = context.wrap_socket(raw, server_hostname=host)
        connection = http.client.HTTPSConnection(host, port, timeout=_left(deadline))
        connection.sock = tls  # connected already, to the vetted address
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request("GET", path, headers={"Accept": "application/json"})
        tls.settimeout(_left(deadline))
        answer = connection.getresponse()
        if answer.status != 200:
            raise Refused(f"status {answer.status}")
        body = b""
        while len(body) <= MAX_BYTES:
            tls.settimeout(_left(deadline))
            chunk = answer.read1(MAX_BYTES + 1 - len(body))
            if not chunk:
                break
            body += chunk
        if len(body) > MAX_BYTES:
            raise Refused("too large")
        _left(deadline)
        return body
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise Refused(f"fetch failed: {type(exc).__name__}") from None
    finally:
        watchdog.cancel()
        raw.close()


def _closer(sock: Any) -> Callable[[], None]:
    def close() -> None:
        import contextlib
        import socket

        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    return close
