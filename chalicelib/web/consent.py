"""The consent page of the OAuth sign-in for ``/mcp``: who asks, where you go back, yes or no.

An MCP client's ``/authorize`` (``chalicelib.mcp.oauth``) sends the person's
browser to ``/web/authorize?request=...``. The person signs in the way the
web view signs people in (Amazon Cognito's managed login on AWS; a token or an
approval from a signed-in ``ltm`` when self-hosted), then this page names the
client as it registered itself (and, for a client named by its metadata
document, the host that document is at), the place it will send them back to
(the redirect URI's origin, which is what matters: a client's name is its own
claim, its redirect URI is checked), and what it may do. Allowing mints a
single-use code and sends the browser back with it; denying sends
``access_denied``. Both are form POSTs with the web view's CSRF token.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..mcp.oauth import Destination
from ..mcp.oauth import destination as oauth_destination
from . import render

WHAT = {"read": "read your packets and your teams' packets", "write": "save and delete packets"}


def destination(url: str) -> Destination | None:
    """Where the browser goes back to, as validated parts; None for a redirect URI these
    rules refuse (a client stored before them, or by other means): no question is asked."""
    try:
        return oauth_destination(url)
    except ValueError:
        return None


def document_host(client_id: object) -> str:
    """The host (and port, when one is given) of a client named by the https URL of its
    metadata document; "" for a registered client, whose id names no place. A document
    names its client as it likes, so where it is decides who it is
    (draft-ietf-oauth-client-id-metadata-document §8.5: the hostname of the client_id is
    shown)."""
    if not isinstance(client_id, str) or not client_id.startswith("https://"):
        return ""
    try:
        parts = urlsplit(client_id)
        port = parts.port
    except ValueError:
        return ""
    host = parts.hostname or ""
    return f"{host}:{port}" if host and port else host


def page(
    request_id: str,
    pending: dict[str, Any],
    back: Destination,
    csrf: str | None,
    *,
    who: str = "",
    error: str = "",
) -> str:
    """The question, with the request's facts escaped (a client names itself); ``back``
    is shown as scheme, host and port, never as the client wrote it. With no ``csrf``
    (no session: a loopback server's API address, see ``WebView.authorize``), the
    person's token goes in the form and signs the answer.

    ``who``: the account the browser's session is of, named in the question itself, as the
    device page does: a browser can be signed in as someone else without its person
    knowing (a page elsewhere posting that someone's sign-in key, see ``key_sign_in``),
    and allowing would hand the client that account, where the agent's packets would go."""
    can = [WHAT[s] for s in pending.get("scopes", []) if s in WHAT] or [WHAT["read"]]
    name = pending.get("client_name") or "an unnamed client"
    at = document_host(pending.get("client_id"))
    byline = (
        f'<p class="note">(the name it gives itself, in its document at <code>{render.text(at)}'
        "</code>)</p>"
        if at
        else ""
    )
    message = f'<p class="error" role="alert">{render.text(error)}</p>' if error else ""
    if csrf is not None:
        signed = f'<input type="hidden" name="csrf" value="{render.attr(csrf)}">'
    else:
        signed = (
            '<label for="token">Your ltm token (full access), to allow</label>'
            '<input type="password" id="token" name="token" autocomplete="off"'
            ' spellcheck="false">'
            '<p class="note">Checked for this answer only, never kept by the browser.'
            " No token at hand? Run <code>ltm open</code> on a machine signed in to this"
            " server, and in the tab it opens go to"
            f" <code>/web/authorize?request={render.text(request_id)}</code>.</p>"
        )
    return (
        "<h1>Allow this MCP client?</h1>"
        + message
        + f'<p class="quote">{render.text(name, 200)}</p>'
        + byline
        + (
            f"<p>wants to use the ltm memory of <strong>{render.text(who, 200)}</strong> (the"
            " account this browser is signed in as) on this server. It will be able to:</p>"
            if who
            else "<p>wants to use your ltm memory on this server. It will be able to:</p>"
        )
        + "<ul>"
        + "".join(f"<li>{render.text(item)}</li>" for item in can)
        + "</ul>"
        + "<p>After you answer, your browser goes back to"
        f" <code>{render.text(back.shown())}</code>."
        " Allow only if you started this sign-in from that program just now.</p>"
        '<form method="post" action="<@>/web/authorize">'
        f'<input type="hidden" name="request" value="{render.attr(request_id)}">'
        + signed
        + '<button type="submit" name="answer" value="allow">Allow</button> '
        '<button type="submit" name="answer" value="deny" class="danger">Deny</button>'
        "</form>"
        "<p>You can end this access at any time: it is listed by <code>ltm tokens</code> "
        "as <code>mcp:…</code>, and <code>ltm tokens revoke LABEL</code> ends it.</p>"
    )


def gone() -> str:
    return render.problem(
        "This sign-in has ended",
        "The request is unknown, was already answered, or waited more than 10 minutes. "
        "Start the sign-in again from your MCP client.",
    )


def refused() -> str:
    return render.problem(
        "This client cannot sign in here",
        "It asks to send your browser back to an address this server does not send people"
        " to (not https, not this machine, or an address with a user name in it). Nothing"
        " was shared.",
    )
