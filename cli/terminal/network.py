"""The one line a person reads when a server could not be talked to.

Each says what happened and what to do next. What came from the network (a
reply's first bytes, a library's reason) is made safe for a terminal here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltm.present import safe

if TYPE_CHECKING:
    from ltm.cli.client.transport import TransportError

OFFLINE = "work offline with --local"


def more_time(timeout: float) -> float:
    """What to suggest after a wait of ``timeout`` s ran out: more than that (twice, at least
    30 s, within the 600 s the setting takes)."""
    return min(600, max(30, 2 * timeout))


def describe(error: TransportError) -> str:
    host, detail, seconds = error.host, safe(error.detail), f"{error.timeout:g}"
    https_hint = f"does the server speak HTTPS? if not, use {error.plain_url}"
    lines = {
        "refused": f"cannot reach {host}: connection refused — is the server running there?"
        f" (check the URL with: ltm whoami; {OFFLINE})",
        "unresolved": f"cannot reach {host}: the name {detail} does not resolve — check the URL"
        " and your network (ltm whoami shows the configured server)",
        "no-connection": f"cannot reach {host}: no connection within {seconds} s — check the URL"
        f" and your network ({OFFLINE})",
        "network": f"cannot reach {host}: {detail} — check your network and the URL ({OFFLINE})",
        "no-answer": f"{host} did not answer within {seconds} s — try again, or allow more"
        f" time: ltm config set timeout {more_time(error.timeout):g}",
        "untrusted": f"TLS failure with {host}: certificate not trusted ({detail}) — if the"
        " server uses a private CA, point SSL_CERT_FILE at its certificate bundle",
        "no-handshake": f"TLS failure with {host}: no TLS handshake within {seconds} s —"
        f" {https_hint}",
        "handshake": f"TLS failure with {host} ({detail}) — "
        + (
            https_hint
            if "WRONG_VERSION" in detail.upper() or "RECORD" in detail.upper()
            else "check the server's TLS setup, or the URL"
        ),
        "closed": f"{host} closed the connection without answering — is it an ltm server, and"
        " is the scheme (http/https) right?",
        "not-http": f"{host} did not answer in HTTP ({detail}) — check the URL and the scheme"
        " (http/https)",
    }
    return lines[error.cause]
