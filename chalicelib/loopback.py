"""Whether a host is this machine: the one place plain HTTP is accepted.

One reading for the server (Cognito's URLs, the web view's own host names)
and the CLI (the plain-HTTP warning, ``ltm open``). An address is loopback by
its value (127.0.0.0/8, ::1), a name only when it is ``localhost`` or under
it (browsers resolve ``*.localhost`` to loopback: RFC 6761 §6.3): a name
that merely starts with "127." (``127.example.com``) is somebody's host.
Light (stdlib only, ``ipaddress`` on demand): the CLI imports it freely.
"""

from __future__ import annotations

from collections.abc import Mapping


def loopback_host(host: str | None) -> bool:
    """Whether a host name or address (``urlsplit(...).hostname``) is loopback."""
    if not host:
        return False
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_url(url: str) -> bool:
    """Whether a URL (or ``//host:port``) names a server on loopback."""
    from urllib.parse import urlsplit

    try:
        return loopback_host(urlsplit(url).hostname)
    except ValueError:  # a malformed port or IPv6 literal
        return False


LISTEN_ENV = "LTM_API_HOST"  # ``host:port``, set by ``ltm server run`` listening on loopback


def listening_on_loopback(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process serves from a loopback listening address.

    Decided by where the server listens (``ltm server run`` on 127.0.0.1 says so in
    ``LTM_API_HOST``; never on Lambda, nor behind ``--external-url``), not by any
    request header: a Host or X-Forwarded-Host is whatever the client wrote.
    """
    import os

    listening = (os.environ if environ is None else environ).get(LISTEN_ENV, "")
    return bool(listening) and loopback_url(f"//{listening}")
