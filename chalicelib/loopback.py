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
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    # An IPv4 loopback address written as IPv6 (::ffff:127.0.0.1) reaches the same
    # server; Python before 3.13 calls it no loopback, and the web view's signed-in
    # pages then answered at it, where a page on any other local port gets their cookie.
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


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


def exposure_warnings(listen_host: str, external_url: str | None) -> list[str]:
    """What a server listening on ``listen_host`` (with ``--external-url``, if any) exposes
    that is meant for loopback only; one sentence each, for its first lines.

    Plain http is accepted on loopback alone (tokens never leave the machine there); a
    server reachable beyond it needs TLS in front (a proxy) and its public address given,
    or every link it builds (OAuth discovery, invites) comes from request headers.
    """
    from urllib.parse import urlsplit

    warnings: list[str] = []
    local = loopback_host(listen_host)
    if not local and not external_url:
        warnings.append(
            f"listening on {listen_host}, beyond this machine, with plain http and no"
            " --external-url: tokens cross the network unencrypted, and OAuth for /mcp and"
            " invite links follow request headers; put a TLS proxy in front and pass"
            " --external-url https://YOUR-NAME"
        )
    if external_url:
        parts = urlsplit(external_url)
        if parts.scheme == "http" and not loopback_host(parts.hostname):
            warnings.append(
                f"--external-url {external_url} is plain http beyond this machine: tokens"
                " cross the network unencrypted and OAuth for /mcp stays off; use https"
                " (a TLS proxy in front)"
            )
        elif loopback_host(parts.hostname) and not local:
            warnings.append(
                f"--external-url {external_url} names this machine, but the server listens"
                f" on {listen_host}, beyond it: links it hands out reach nobody else"
            )
    return warnings
