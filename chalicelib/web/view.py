"""The web view: server-rendered pages over the same rules as the API, and public pages.

Framework-free like ``device`` (whose ``WebRequest``/``WebResponse``,
signer, session cookie and sign-in it reuses); ``app.py`` routes to it and
imports it only when a page is asked for, so an API cold start never pays
for it.

Pages (all ``GET`` except the two forms):

- ``/web``: the reader's packets, or a team's (``?team=``), newest first,
  with the API's tag/project filters and a link to older packets; with
  ``?q=`` (and ``all=1`` for every scope), a search instead;
- ``/web/packets/{id}``: one packet in the resume block's order, its parent
  and children, a copy button; ``/web/packets/{id}/delete``: asks first, and its ``POST``
  deletes (the API's rule: creator or team owner);
- ``/web/teams/{name}``: members, and for the owner the pending invites;
- ``/web/signin`` (``GET`` and ``POST``), ``POST /web/signout``;
- ``/p/{secret}``: a published packet, for anyone, read-only;
- ``/web/static/{app.js,app.css}``;
- ``/web/ui?key=`` (``ltm ui`` only): the one-time key becomes a cookie.

Signing in is the device pages' sign-in: with Cognito, the managed login
(authorization code + PKCE, back through ``/device/callback``, whose signed
``state`` says the sign-in is for the web view); self-hosted, an existing
ltm token with the full scope typed into a password field (checked, never
stored). The browser then holds its
own session: a cookie signed with the device pages' key, carrying the user
id, an expiry (``SESSION_SECONDS``) and the user's session generation.
Signing out bumps the generation (a store counter), which ends every session
of that user at once, this browser's and any copy of its cookie; so does ending
everything of someone who left (``tokens.revoke_all``).

A session signed in with a token (the token form, ``ltm open``'s key) also
carries that token's hash, and every page looks the token up again (one read,
which also gives the user, so it costs no more than reading the user did):
revoking the token (``ltm tokens revoke``, ``ltm server revoke-token``), or its
expiry, ends every browser session made with it at once, as it ends the token's
API access. The hash is what the store itself keeps, never the token, and it
signs nobody in to the API.

Every answer carries a strict Content-Security-Policy (``default-src
'none'``; only same-origin script, style, images and form targets), no
framing, ``no-store``, ``nosniff`` and ``no-referrer``. The two forms that
write (delete, sign out) carry a CSRF token derived from the session and are
refused from another origin.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote, urlsplit

from ..loopback import loopback_url
from ..service import tokens
from ..service.errors import InsufficientScope, ServiceError
from ..service.users import SESSION_SECONDS, end_sessions, session_generation
from ..service.users import now as utc_now
from ..store import FULL_SCOPE, User
from . import render
from .device import BadForm, WebRequest, WebResponse, page_headers, parse_form, same_secret

if TYPE_CHECKING:
    from ..service.access import Caller
    from .device import DeviceWeb

T = TypeVar("T")
UI_KEY_ENV = "LTM_UI_KEY"
# The web view's own Host (name:port) on loopback: ``ltm ui``'s random name, or the name
# ``ltm server run`` gives its pages when it listens on a loopback address.
WEB_HOST_ENV = "LTM_WEB_HOST"
# With it, on a server: the address (host:port) the API answers at, for public links.
API_HOST_ENV = "LTM_API_HOST"
# ``ltm ui``: who wrote the local store's copies of others' packets (``ltm.copies``).
COPIES_ENV = "LTM_UI_COPIES"
# A token granted read or write alone (a device's, an MCP client's): which one, the refusal
# does not say, so the words fit both.
PARTIAL_TOKEN = "That token is read-only or write-only; use a token with full access (read write)."
KEY_SECONDS = 120  # a web sign-in key's life: enough to open a browser, not to linger
LOCAL_USER = "local"
STATIC = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
_STATIC_DIR = Path(__file__).resolve().parent / "static"
_NEXT_RE = re.compile(
    r"/(web|p)(/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?(\?[A-Za-z0-9._~%!$&'()*+,;=:@/?-]*)?"
)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The security headers of every web view answer: the device pages', with our CSP."""
    out = page_headers()
    out["Content-Security-Policy"] = CSP
    out["Cross-Origin-Resource-Policy"] = "same-origin"
    out.update(extra or {})
    return out


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """What a signed-in page works with."""

    user: User
    nonce: str  # the session's, for CSRF tokens
    nav: render.Nav
    value: T


def _posted_form(request: WebRequest) -> Mapping[str, list[str]]:
    """A POST's form fields; none for another method or a malformed form (whose missing
    CSRF field then fails the check like any other)."""
    if request.method != "POST":
        return {}
    try:
        return parse_form(request)
    except BadForm:
        return {}


def _cookie_value(request: WebRequest, name: str) -> str:
    """The value of the cookie ``name`` the request carries ("" for none; the last of two)."""
    raw = ""
    for part in (request.headers.get("cookie") or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            raw = value
    return raw


def _one(values: Mapping[str, Sequence[str]], name: str) -> str:
    found = values.get(name) or [""]
    return found[0] if len(found) == 1 else ""


def _stamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


class WebView:
    """The pages of one server (or of ``ltm ui``: ``ui_key`` set, the embedded store's user)."""

    def __init__(
        self,
        device_web: DeviceWeb,
        *,
        ui_key: str | None = None,
        web_host: str | None = None,
        api_host: str | None = None,
        copies: str | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.device = device_web
        # Only the local store's view (``ltm ui``) holds copies of others' packets.
        self.copies = Path(copies) if copies and ui_key else None
        # ltm ui serves on a random name of its own (``<random>.localhost:<port>``): its
        # cookie then belongs to that name alone. Cookies do not separate ports, so on
        # 127.0.0.1 a page another local user serves on another port would receive it.
        # A server on loopback does the same for its signed-in pages; the links it
        # publishes keep the API's address (``api_host``): a public link is handed
        # around, and the pages' name must not travel with it.
        self.web_host = web_host.lower() if web_host else None
        self.api_host = api_host or None
        self.store = device_web.store
        self.signer = device_web.signer
        self.ui_key = ui_key
        self.clock = clock
        self._ui_lock = threading.Lock()
        self._ui_used = False
        self._request = threading.local()  # the base URL of the request being answered

    @property
    def _base(self) -> str:
        return str(getattr(self._request, "base", ""))

    @property
    def _root(self) -> str:
        """The path this app is served under (an API Gateway stage), "" at a host's root."""
        return urlsplit(self._base).path.rstrip("/")

    def answer(self, handler: str, request: WebRequest, **params: str) -> WebResponse:
        """Run the page ``handler`` for ``request`` (what app.py calls)."""
        self._request.base = request.base_url
        if not self._right_host(handler, request.base_url):
            return self._misdirected()
        return getattr(self, handler)(request, **params)

    def _right_host(self, handler: str, base_url: str) -> bool:
        """Whether this page may answer at ``base_url``'s host.

        ``ltm ui``: only at its random name, every page. A server on loopback
        (``ltm server run`` gives its pages a ``*.localhost`` name): its signed-in
        pages answer at that name, or at a name that is not loopback (a reverse
        proxy's, whose operator owns it); never at 127.0.0.1, [::1], localhost or
        another ``*.localhost`` name, whose cookies a page on any other local port
        would receive. Published pages and the static files carry no session: they
        answer anywhere, so public links keep the API's address.
        """
        if self.web_host is None:
            return True
        netloc = urlsplit(base_url).netloc.lower()
        if netloc == self.web_host:
            return True
        if self.local:
            return False
        # The consent page of an MCP client's sign-in answers at the API's address too,
        # without a session (``authorize``): the pages' name is not for anonymous eyes.
        return handler in ("public", "static", "authorize") or not loopback_name(netloc)

    @classmethod
    def from_env(cls, device_web: DeviceWeb, environ: Mapping[str, str] = os.environ) -> WebView:
        return cls(
            device_web,
            ui_key=environ.get(UI_KEY_ENV) or None,
            web_host=environ.get(WEB_HOST_ENV) or None,
            api_host=environ.get(API_HOST_ENV) or None,
            copies=environ.get(COPIES_ENV) or None,
        )

    def _copies(self) -> dict[str, dict[str, str]]:
        """Who wrote the local store's copies of others' packets (``ltm ui`` only)."""
        if self.copies is None:
            return {}
        from ..copies import read

        return read(self.copies)

    def _misdirected(self) -> WebResponse:
        """421 for a request under another host name: nothing is read, no cookie is set.

        The name this view answers on is not repeated here: every local user can
        reach this port and read this page, and knowing the name is what a page on
        another port would need to receive the session cookie.
        """
        if self.local:
            text = (
                "This view answers only at the address its terminal printed. Open that"
                " address, or run the command again."
            )
        else:
            text = (
                "This server's web pages answer at an address of their own,"
                " http://ltm-….localhost:PORT/web, printed when the server started"
                " (ltm server run). Run ltm open to open it signed in. Cookies do not"
                " separate ports, so on 127.0.0.1 or localhost a session would also reach"
                " pages other users of this machine serve on other ports."
            )
        body = render.problem("Wrong address", text, link=None)
        page = render.layout("Wrong address", body, nav=None, status="", root="")
        return WebResponse(421, page, headers())

    @property
    def local(self) -> bool:
        return self.ui_key is not None

    # -- sessions ------------------------------------------------------------------------

    def _cookie_name(self, request: WebRequest) -> str:
        return "__Host-ltm_web" if request.base_url.startswith("https://") else "ltm_web"

    def _cookie(self, request: WebRequest, value: str, max_age: int) -> str:
        # ltm ui: Strict (nothing from another site ever rides along). A server: Lax, so the
        # session set on the way back from Cognito's login is sent on the redirect that follows.
        same_site = "Strict" if self.local else "Lax"
        attributes = f"Path=/; Max-Age={max_age}; HttpOnly; SameSite={same_site}"
        if request.base_url.startswith("https://"):
            attributes += "; Secure"
        return f"{self._cookie_name(request)}={value}; {attributes}"

    def start_session(self, request: WebRequest, user: User, *, token_hash: str = "") -> str:
        """The Set-Cookie that signs ``user`` in to this browser.

        ``token_hash``: the token the person signed in with; the session lasts only as
        long as that token does.
        """
        when = self.clock()
        generation = 0 if self.local else session_generation(self.store, user.id, when)
        payload: dict[str, Any] = {
            "u": user.id,
            "g": generation,
            "n": secrets.token_urlsafe(16),
            "exp": int(when.timestamp()) + SESSION_SECONDS,
        }
        if token_hash:
            payload["t"] = token_hash
        value = self.signer.sign("web-session", payload)
        return self._cookie(request, value, SESSION_SECONDS)

    def _session(self, request: WebRequest) -> tuple[User, str] | None:
        """The signed-in user and the session's nonce (for CSRF), or None."""
        raw = _cookie_value(request, self._cookie_name(request))
        if not raw:
            return None
        when = self.clock()
        payload = self.signer.unsign("web-session", raw, when)
        if payload is None:
            return None
        user_id, nonce = str(payload.get("u", "")), str(payload.get("n", ""))
        if self.local:
            if user_id != LOCAL_USER:
                return None
            return User(LOCAL_USER, LOCAL_USER, when), nonce
        if payload.get("g") != session_generation(self.store, user_id, when):
            return None  # signed out since
        token_hash = payload.get("t")
        if token_hash is None:  # signed in without a token (Cognito, an approval made so)
            user = self.store.get_user(user_id)
            return (user, nonce) if user is not None else None
        found = self.store.token_owner(str(token_hash))
        if found is None or found[1].id != user_id or tokens.expired(found[0], when):
            return None  # the token was revoked or ended: so is every session made with it
        record, user = found
        if not set(FULL_SCOPE.split()) <= set(record.scope.split()):
            return None
        return user, nonce

    def _csrf(self, nonce: str) -> str:
        return self.signer.mac("web-csrf", nonce)

    def _nav(self, user: User, nonce: str) -> render.Nav:
        return render.Nav(user.display, self._csrf(nonce), local=self.local)

    def _form_ok(self, request: WebRequest, nonce: str, form: Mapping[str, list[str]]) -> bool:
        """A write's form: our CSRF token, and (when the browser says) from this origin."""
        # With Referrer-Policy no-referrer, browsers send ``Origin: null`` on a form POST;
        # Fetch Metadata still says where it came from.
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = request.headers.get("origin")
        if origin and origin != "null" and origin.rstrip("/") != _origin(request.base_url):
            return False
        return same_secret(_one(form, "csrf"), self._csrf(nonce))

    # -- answers --------------------------------------------------------------------------

    def _page(
        self,
        status: int,
        title: str,
        body: str,
        *,
        nav: render.Nav | None,
        notice: str = "",
        cookie: str = "",
        form_target: str = "",
    ) -> WebResponse:
        extra = {"Set-Cookie": cookie} if cookie else {}
        if form_target:  # a form whose answer redirects there (CSP checks the redirect too)
            extra["Content-Security-Policy"] = CSP.replace(
                "form-action 'self'", f"form-action 'self' {form_target}"
            )
        page = render.layout(title, body, nav=nav, status=notice, root=self._root)
        return WebResponse(status, page, headers(extra))

    def _redirect(self, location: str, cookie: str = "") -> WebResponse:
        """303 to ``location``: an absolute URL, or one of this app's paths."""
        if location.startswith("/"):
            location = self._base.rstrip("/") + location
        extra = {"Location": location}
        if cookie:
            extra["Set-Cookie"] = cookie
        body = render.layout(
            "Redirecting", f'<p><a href="{render.attr(location)}">Continue</a></p>', nav=None
        )
        return WebResponse(303, body, headers(extra))

    def _not_found(self, nav: render.Nav | None) -> WebResponse:
        body = render.problem(
            "Not found",
            "There is nothing here, or nothing you may see.",
            link=("/web", "Your packets") if nav else None,
        )
        return self._page(404, "Not found", body, nav=nav)

    def _failed(self, exc: ServiceError, nav: render.Nav | None) -> WebResponse:
        if exc.status == 404:
            return self._not_found(nav)
        return self._page(
            exc.status,
            "That did not work",
            render.problem("That did not work", exc.message),
            nav=nav,
        )

    def _read(
        self, request: WebRequest, path: str, load: Callable[[User], T]
    ) -> Read[T] | WebResponse:
        """A signed-in page's data: the reader, their header, and ``load(user)``.

        Signed out: on to sign in (and back to ``path``). A refusal of the
        rules (404 for what the reader may not see) becomes its page.
        """
        found = self._session(request)
        if found is None:
            return self._redirect(f"/web/signin?next={quote(path, safe='/')}")
        user, nonce = found
        nav = self._nav(user, nonce)
        try:
            return Read(user, nonce, nav, load(user))
        except ServiceError as exc:
            return self._failed(exc, nav)

    # -- pages -------------------------------------------------------------------------------

    def home(self, request: WebRequest) -> WebResponse:
        return self._redirect("/web")

    def packets(self, request: WebRequest) -> WebResponse:
        """``GET /web``: a scope's packets; with ``q``, a search instead."""
        from ..service import browse

        if "q" in request.query:
            return self._search(request)
        if _one(request.query, "shared") == "1":
            return self._shared(request)
        team = _one(request.query, "team") or None
        tag = _one(request.query, "tag").strip()
        project = _one(request.query, "project").strip()
        after = _one(request.query, "after") or None
        # No scope asked for (the landing page), or "All my scopes" picked: every scope of
        # the reader, merged.
        everywhere = "team" not in request.query or team == render.EVERY
        if team == render.EVERY:
            team = None
        read = self._read(
            request,
            _path_of(request, "/web"),
            lambda user: browse.listing(
                self.store,
                user,
                team=team,
                tag=tag,
                project=project,
                after=after,
                everywhere=everywhere,
            ),
        )
        if isinstance(read, WebResponse):
            return read
        shown = read.value
        ids = [m.id for m in shown.rows]
        short = dict(zip(ids, _short(ids), strict=True))
        copies = self._copies()
        body = render.packet_list(
            rows=[
                _row(
                    m,
                    short[m.id],
                    shown.details.get(m.id),
                    (shown.scopes or {}).get(m.id),
                    copied=_copy_author(copies.get(m.id), short=True),
                )
                for m in shown.rows
            ],
            teams=[t.name for t in shown.teams],
            team=shown.team.name if shown.team else None,
            tag=tag,
            project=project,
            older=shown.older,
            owned_team=shown.owns_team,
            everywhere=shown.everywhere,
            # "All my scopes" picked with a filter: the store filters one scope only.
            narrowed=_one(request.query, "team") == render.EVERY and bool(tag or project),
            full=len(shown.rows) >= browse.PAGE,
            sharing=not self.local,
        )
        notice = "Packet deleted." if _one(request.query, "done") == "deleted" else ""
        return self._page(200, "Packets", body, nav=read.nav, notice=notice)

    def _shared(self, request: WebRequest) -> WebResponse:
        """``GET /web?shared=1``: the packets other users shared with the reader."""
        from ..service import browse

        read = self._read(
            request,
            _path_of(request, "/web"),
            lambda user: browse.shared_listing(self.store, user),
        )
        if isinstance(read, WebResponse):
            return read
        got = read.value
        metas = [r.meta for r in got.received]
        short = _short([m.id for m in metas])
        rows = [
            render.SharedRow(
                _row(r.meta, s, got.details.get(r.meta.id), None), r.by.display if r.by else ""
            )
            for r, s in zip(got.received, short, strict=True)
        ]
        listing = render.shared_list(rows, cut=len(rows) >= browse.PAGE)
        return self._page(200, "Shared with you", listing, nav=read.nav)

    def _search(self, request: WebRequest) -> WebResponse:
        """``GET /web?q=``: ``search.search`` over one scope or all of the reader's."""
        from ..service import browse

        q = _one(request.query, "q")
        everywhere = _one(request.query, "all") == "1"  # ticked, it wins over the scope picked
        team = None if everywhere else (_one(request.query, "team") or None)
        read = self._read(
            request,
            _path_of(request, "/web"),
            lambda user: browse.results(self.store, user, q, team=team, all_scopes=everywhere),
        )
        if isinstance(read, WebResponse):
            return read
        found = read.value
        short = _short([f.meta.id for f in found.found])
        body = render.search_results(
            q=q,
            hits=[
                render.Hit(
                    f.meta.id,
                    f.meta.created_at,
                    f.meta.goal,
                    f.team,
                    f.field,
                    f.snippet,
                    f.highlights,
                    shown,
                )
                for f, shown in zip(found.found, short, strict=True)
            ],
            teams=[t.name for t in found.teams],
            team=team,
            all_scopes=everywhere,
            error=found.error,
        )
        return self._page(400 if found.error else 200, "Search", body, nav=read.nav)

    def packet(self, request: WebRequest, id: str) -> WebResponse:
        """``GET /web/packets/{id}``."""
        from ..service import browse
        from ..service.publish import public_url

        read = self._read(
            request,
            f"/web/packets/{quote(id, safe='')}",
            lambda user: browse.packet_view(self.store, user, id),
        )
        if isinstance(read, WebResponse):
            return read
        view = read.value
        parent = None
        if view.parent is not None:
            meta = view.parent.meta
            parent = render.Parent(view.parent.id, meta.goal if meta else None, meta is not None)
        children = [render.Child(m.id, m.goal) for m in view.children]
        url = (
            public_url(self._api_base(request.base_url), view.publication.secret)
            if view.publication
            else None
        )
        body = self._packet_body(
            view.stored.meta.id,
            view.data,
            view.stored.conforming,
            scope=f"team {view.team.name}" if view.team else "personal",
            parent=parent,
            children=children,
            public=url,
            can_delete=view.can_delete,
            shared_with=[f"{s.user.display} ({s.user.id})" for s in view.shares],
            # With the account's id: anyone who knows the reader's id may share with them,
            # under a display name made to look like a teammate's.
            shared_by=f"{view.shared_by.display} ({view.shared_by.id})" if view.shared_by else None,
            author=view.author or _copy_author(self._copies().get(view.stored.meta.id)) or None,
        )
        return self._page(200, str(view.data.get("goal") or id), body, nav=read.nav)

    def _packet_body(
        self,
        packet_id: str,
        data: Mapping[str, Any],
        conforming: bool,
        *,
        scope: str,
        parent: render.Parent | None,
        children: Sequence[render.Child] = (),
        public: str | None = None,
        can_delete: bool = False,
        shared_with: Sequence[str] = (),
        shared_by: str | None = None,
        author: str | None = None,
    ) -> str:
        from ..resume import render as resume_block

        return render.packet_page(
            data,
            packet_id=packet_id,
            scope=scope,
            resume_block=resume_block(data),
            parent=parent,
            children=children,
            public_url=public,
            can_delete=can_delete,
            conforming=conforming,
            shared_with=shared_with,
            shared_by=shared_by,
            author=author,
        )

    def delete(self, request: WebRequest, id: str) -> WebResponse:
        """``GET`` asks, ``POST`` deletes (creator or team owner, as ``DELETE /v1/packets``)."""
        from ..service import browse, packets

        path = f"/web/packets/{quote(id, safe='')}"
        read = self._read(
            request, path + "/delete", lambda user: browse.packet_view(self.store, user, id)
        )
        if isinstance(read, WebResponse):
            return read
        view, nav = read.value, read.nav
        if not view.can_delete:
            return self._page(
                403,
                "Not yours to delete",
                render.problem(
                    "Not yours to delete",
                    "Only the packet's creator or the team's owner can delete it.",
                    link=(path, "Back to the packet"),
                ),
                nav=nav,
            )
        if request.method == "GET":
            goal = str(view.data.get("goal") or view.stored.meta.goal)
            body = render.confirm_delete(id, goal, self._csrf(read.nonce))
            return self._page(200, "Delete this packet?", body, nav=nav)
        form = _posted_form(request)
        if not self._form_ok(request, read.nonce, form):
            return self._expired(nav, path)
        try:
            packets.delete(self.store, read.user, id)
        except ServiceError as exc:
            return self._failed(exc, nav)
        scope = f"team={quote(view.team.name, safe='')}&" if view.team else ""
        return self._redirect(f"/web?{scope}done=deleted")

    def _expired(self, nav: render.Nav | None, back: str) -> WebResponse:
        return self._page(
            403,
            "Please try again",
            render.problem(
                "Please try again",
                "That form expired or came from another site; nothing was changed.",
                link=(back, "Go back"),
            ),
            nav=nav,
        )

    def team(self, request: WebRequest, name: str) -> WebResponse:
        """``GET /web/teams/{name}``: members; for the owner, pending invites."""
        from ..service import browse

        read = self._read(
            request,
            f"/web/teams/{quote(name, safe='')}",
            lambda user: browse.team_view(self.store, user, name),
        )
        if isinstance(read, WebResponse):
            return read
        view = read.value
        names = {m.user_id: m.display or m.user_id for m in view.members}
        members = [
            render.MemberRow(m.display, m.user_id, m.role, _stamp(m.joined_at))
            for m in view.members
        ]
        invites = None
        if view.invites is not None:
            invites = [
                render.InviteRow(
                    names.get(i.created_by, "a former member"),
                    _stamp(i.created_at),
                    _stamp(i.expires_at),
                )
                for i in view.invites
            ]
        body = render.team_page(view.team.name, members, invites)
        return self._page(200, f"Team {view.team.name}", body, nav=read.nav)

    # -- public pages ----------------------------------------------------------------------

    def public(self, request: WebRequest, secret: str) -> WebResponse:
        """``GET /p/{secret}``: a published packet, no sign-in; 404 once unpublished or deleted."""
        from ..service import publish

        try:
            stored = publish.read_public(self.store, secret)
        except ServiceError:
            return self._not_found(None)
        from ..service.browse import parse

        data = parse(stored.body)
        parent_id = data.get("parent_id")
        # The parent is named, never linked: being published does not make it readable.
        parent = (
            render.Parent(parent_id, None, False)
            if isinstance(parent_id, str) and parent_id
            else None
        )
        body = self._packet_body(
            stored.meta.id, data, stored.conforming, scope="published (read-only)", parent=parent
        )
        return self._page(200, str(data.get("goal") or "Published packet"), body, nav=None)

    def static(self, request: WebRequest, name: str) -> WebResponse:
        media = STATIC.get(name)
        if media is None:
            return self._not_found(None)
        content = (_STATIC_DIR / name).read_text(encoding="utf-8")
        return WebResponse(200, content, headers({"Content-Type": media}))

    # -- an MCP client's OAuth sign-in: the consent page ----------------------------------------

    def authorize(self, request: WebRequest) -> WebResponse:
        """``GET /web/authorize?request=ID`` asks; ``POST`` answers (``chalicelib.web.consent``)."""
        from ..mcp.oauth import StoreProvider
        from . import consent

        # The authorization server is the API's address; this page may be at the pages'
        # own name (a loopback server's), which is not the issuer.
        api = self._api_base(self._base)
        provider = StoreProvider(
            self.store,
            issuer=api,
            resource=api + "/mcp",
            consent_url=self._base.rstrip("/") + "/web/authorize",
        )
        form = _posted_form(request)
        request_id = _one(form or request.query, "request")
        if self._at_loopback_api():
            return self._authorize_by_token(request, provider, form, request_id)
        read = self._read(
            request,
            f"/web/authorize?request={quote(request_id, safe='')}",
            lambda user: provider.pending(request_id) if request_id else None,
        )
        if isinstance(read, WebResponse):
            return read
        if read.value is None:
            return self._page(410, "This sign-in has ended", consent.gone(), nav=read.nav)
        back = consent.destination(str(read.value["redirect_uri"]))
        if back is None:
            return self._page(400, "Not allowed", consent.refused(), nav=read.nav)
        if request.method == "GET":
            body = consent.page(
                request_id, read.value, back, self._csrf(read.nonce), who=read.user.display
            )
            return self._page(
                200, "Allow this MCP client?", body, nav=read.nav, form_target=back.csp_source()
            )
        if not self._form_ok(request, read.nonce, form):
            return self._expired(read.nav, "/web")
        allow = _one(form, "answer") == "allow"
        location = provider.decide(request_id, read.user.id, allow=allow)
        if location is None:
            return self._page(410, "This sign-in has ended", consent.gone(), nav=read.nav)
        return self._redirect(location)

    def _at_loopback_api(self) -> bool:
        """Whether this page answers at a loopback server's API address (not its pages')."""
        netloc = urlsplit(self._base).netloc.lower()
        return (
            self.web_host is not None
            and not self.local
            and netloc != self.web_host
            and loopback_name(netloc)
        )

    def _authorize_by_token(
        self, request: WebRequest, provider: Any, form: Mapping[str, Sequence[str]], request_id: str
    ) -> WebResponse:
        """The consent question at a loopback server's API address, answered with a token.

        ``/authorize`` is anonymous, and the pages' own name (``ltm-<hex>.localhost``,
        where web sessions live) must never be in an answer to an anonymous request:
        another local user who learns it can serve a page on another port of that name
        and receive the session cookie. So the MCP client's sign-in stays at the API's
        address, where no cookie is kept: the person's token, typed into the form, signs
        the answer (denying needs none). The request id, unguessable, is the CSRF guard.
        """
        from . import consent

        pending = provider.pending(request_id) if request_id else None
        if pending is None:
            return self._page(410, "This sign-in has ended", consent.gone(), nav=None)
        back = consent.destination(str(pending["redirect_uri"]))
        if back is None:
            return self._page(400, "Not allowed", consent.refused(), nav=None)
        status, error = 200, ""
        if request.method == "POST":
            allow = _one(form, "answer") == "allow"
            secret = _one(form, "token").strip()
            user: User | None = None
            if allow and not secret:
                status, error = 400, "Enter one of your ltm tokens to allow."
            elif allow:
                try:
                    user = tokens.authenticate(
                        self.store, f"Bearer {secret}", self.clock(), need=FULL_SCOPE
                    )
                except InsufficientScope:
                    status, error = 403, PARTIAL_TOKEN
                except ServiceError:
                    status, error = 401, "That token was not accepted."
            if not allow or user is not None:
                location = provider.decide(request_id, user.id if user else "", allow=allow)
                if location is None:
                    return self._page(410, "This sign-in has ended", consent.gone(), nav=None)
                return self._redirect(location)
        body = consent.page(request_id, pending, back, None, error=error)
        return self._page(
            status, "Allow this MCP client?", body, nav=None, form_target=back.csp_source()
        )

    # -- signing in and out -------------------------------------------------------------------

    def sign_in(self, request: WebRequest) -> WebResponse:
        """``GET`` the form; ``POST`` a token (self-hosted) or go to Cognito."""
        session, device_cookie = self.device._session(request)
        query = request.query if request.method == "GET" else {}
        form = _posted_form(request)
        next_path = _safe_next(_one(form or query, "next"))
        csrf = self.device._csrf(session)
        cognito = self.device.cognito is not None

        # Back from signing out (``sign_out``): say so, and that it reached every browser.
        notice = (
            "Signed out: your sessions in every browser have ended."
            if _one(query, "out") == "1" and not self.local
            else ""
        )

        def again(status: int, error: str) -> WebResponse:
            body = render.sign_in(
                action="/web/signin",
                csrf=csrf,
                next_path=next_path,
                error=error,
                cognito=cognito,
                local=self.local,
            )
            target = self.device.cognito.origin if self.device.cognito else ""
            return self._page(
                status,
                "Sign in",
                body,
                nav=None,
                notice=notice,
                cookie=device_cookie,
                form_target=target,
            )

        if request.method == "GET" or self.local:
            if self._session(request) is not None and request.method == "GET" and not self.local:
                return self._redirect(next_path)
            return again(200 if request.method == "GET" else 403, "")
        if device_cookie or not self.device._csrf_ok(session, form):
            return again(403, "Your session on this page expired or cookies are off. Try again.")
        when = self.clock()
        if cognito:
            return self._to_cognito(request, session, next_path, when)
        # No per-address lockout here: a token holds 256 random bits, so guessing is
        # hopeless anyway, and counting failures by address would let one person lock
        # out everyone behind the same proxy (the flaw the device pages no
        # longer have). A web session may delete, so it takes a token with the full scope.
        secret = _one(form, "token").strip()
        if not secret:
            return again(400, "Enter one of your ltm tokens.")
        try:
            user = tokens.authenticate(self.store, f"Bearer {secret}", when, need="read write")
        except InsufficientScope:
            return again(403, PARTIAL_TOKEN)
        except ServiceError:
            return again(401, "That token was not accepted.")
        session_cookie = self.start_session(request, user, token_hash=tokens.hash_token(secret))
        return self._redirect(next_path, session_cookie)

    def sign_in_code(self, request: WebRequest) -> WebResponse:
        """``POST /web/signin/code``: sign this browser in by a code approved from a CLI.

        ``step=new`` makes a device-flow grant (``device.authorize_web``) and shows its
        user code for ``ltm approve CODE``; ``step=check`` (the continue button) starts
        the session of the user who approved it, once. The grant travels as a signed
        ticket bound to this browser's device-pages cookie: a copied page is no use
        elsewhere, and no device code or token ever reaches the browser.
        """
        from ..service import device

        if self.local:
            return self._not_found(None)
        session, device_cookie = self.device._session(request)
        form = _posted_form(request)
        next_path = _safe_next(_one(form, "next"))
        if device_cookie or not self.device._csrf_ok(session, form):
            return self._code_problem(
                403, "Please try again", "Your session on this page expired or cookies are off."
            )
        when = self.clock()
        csrf = self.device._csrf(session)
        host = urlsplit(self._base).netloc
        if _one(form, "step") != "check":
            try:
                code, grant = device.authorize_web(
                    self.store,
                    self.device.settings,
                    client_ip=request.client_ip,
                    user_agent=request.headers.get("user-agent"),
                    when=when,
                )
            except device.OAuthError as exc:
                return self._code_problem(exc.status, "Please wait", exc.description)
            ticket = self.signer.sign(
                "web-code",
                {
                    "d": grant.device_code_hash,
                    "c": code,
                    "sb": self.device._binding(session),
                    "exp": int(grant.expires_at.timestamp()),
                },
            )
            body = render.sign_in_code(
                code=code, host=host, ticket=ticket, csrf=csrf, next_path=next_path
            )
            return self._page(200, "Approve this browser", body, nav=None)
        ticket = _one(form, "ticket")
        payload = self.signer.unsign("web-code", ticket, when)
        if payload is None or not same_secret(
            str(payload.get("sb", "")), self.device._binding(session)
        ):
            return self._code_problem(
                400, "Code expired", "This code expired or was made in another browser."
            )
        claim = device.claim_web(self.store, str(payload.get("d", "")), when=when)
        status = claim.status
        if status == "approved" and claim.user is not None:
            # Bound to the approver's token, when they approved with one: revoking it
            # ends this session too.
            cookie = self.start_session(request, claim.user, token_hash=claim.token_hash or "")
            return self._redirect(next_path, cookie)
        if status == "pending":
            body = render.sign_in_code(
                code=str(payload.get("c", "")),
                host=host,
                ticket=ticket,
                csrf=csrf,
                next_path=next_path,
                note="Not approved yet. Run the command below, then continue.",
            )
            return self._page(200, "Approve this browser", body, nav=None)
        if status == "denied":
            return self._code_problem(403, "Sign-in denied", "This sign-in was denied.")
        return self._code_problem(
            410, "Code expired", "This code was used already or took too long."
        )

    def _code_problem(self, status: int, title: str, message: str) -> WebResponse:
        body = render.problem(title, f"{message} Get a new code.", link=("/web/signin", "Sign in"))
        return self._page(status, title, body, nav=None)

    def _to_cognito(
        self, request: WebRequest, session: str, next_path: str, when: datetime
    ) -> WebResponse:
        assert self.device.cognito is not None
        nonce = secrets.token_urlsafe(16)
        state = self.signer.sign(
            "state",
            {
                "w": next_path,  # a web view sign-in: the device callback hands it back here
                "n": nonce,
                "sb": self.device._binding(session),
                "exp": int(when.timestamp()) + 600,
            },
        )
        location = self.device.cognito.authorize_url(
            redirect_uri=self.device._redirect_uri(request),
            state=state,
            verifier=self.device._verifier(nonce),
        )
        return self._redirect(location)

    def signed_in_by_cognito(self, request: WebRequest, user: User, next_path: str) -> WebResponse:
        """Back from Cognito (``device_web`` verified the state and the ID token)."""
        return self._redirect(_safe_next(next_path), self.start_session(request, user))

    def sign_out(self, request: WebRequest) -> WebResponse:
        """``POST /web/signout``: ends every session of this user, then back to sign in."""
        found = self._session(request)
        clear = self._cookie(request, "", 0)
        if found is None:
            return self._redirect("/web/signin", clear)
        user, nonce = found
        form = _posted_form(request)
        if not self._form_ok(request, nonce, form):
            return self._expired(self._nav(user, nonce), "/web")
        if not self.local:
            end_sessions(self.store, user.id, self.clock())
        return self._redirect("/web/signin?out=1", clear)

    def ui(self, request: WebRequest) -> WebResponse:
        """``/web/ui``: ``ltm ui``'s one-time key, exchanged for a session cookie.

        ``POST`` (the form ``ltm ui``'s private forwarding page posts: the key stays out
        of URLs and history), or ``GET ?key=`` (the URL printed for a person to open).
        """
        if self.ui_key is None:
            return self._not_found(None)
        if request.method == "POST":
            try:
                key = _one(parse_form(request), "key")
            except BadForm:
                key = ""
        else:
            key = _one(request.query, "key")
        with self._ui_lock:
            good = not self._ui_used and same_secret(key, self.ui_key)
            if good:
                self._ui_used = True
        if not good:
            return self._page(
                403,
                "Link already used",
                render.problem(
                    "Link already used",
                    "This link opens the view once. Run ltm ui again for a new one.",
                    link=None,
                ),
                nav=None,
            )
        user = User(LOCAL_USER, LOCAL_USER, self.clock())
        cookie = self.start_session(request, user)
        if request.method == "GET":
            return self._redirect("/web", cookie)
        # The POST came from the private forwarding page (a file: another site, to the
        # browser). A redirect would continue that cross-site navigation, on which a
        # SameSite=Strict cookie is not sent; a refresh from this page is same-site.
        target = render.attr(self._base.rstrip("/") + "/web")
        page = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="0;url={target}"><title>ltm</title></head>'
            f'<body><p><a href="{target}">Continue to your packets</a></p></body></html>\n'
        )
        return WebResponse(200, page, headers({"Set-Cookie": cookie}))

    # -- signing a browser in from the CLI (ltm open) --------------------------------------

    def sign_in_key(self, caller: Caller, base_url: str) -> dict[str, Any]:
        """``POST /v1/web/sign-in-key``: a key that signs a browser in as the caller, once.

        For people who never saw a token (they joined by invite, or signed in with
        the device flow): the CLI trades its own credentials for this key and hands
        it to the browser through a private page (never a command line). The key is
        signed (no store write), lives ``KEY_SECONDS`` and works once; the session it
        starts carries the CLI token's hash, so revoking that token ends it. Needs
        the full scope, as a web session may delete.
        """
        from ..service.access import Credential, user_of

        user = user_of(self.store, caller, need=FULL_SCOPE)
        token_hash = caller.token_hash if isinstance(caller, Credential) else ""
        when = self.clock()
        key = self.signer.sign(
            "web-key",
            {
                "u": user.id,
                "t": token_hash,
                "n": secrets.token_urlsafe(16),
                "exp": int(when.timestamp()) + KEY_SECONDS,
            },
        )
        return {
            "url": self._web_base(base_url) + "/web/key",
            "key": key,
            "expires_in": KEY_SECONDS,
        }

    def _api_base(self, base_url: str) -> str:
        """The API's base for a page answered at ``base_url`` (the same, but at the pages'
        own name on loopback, where it is the address the server listens at)."""
        parts = urlsplit(base_url.rstrip("/"))
        if self.local or self.api_host is None or parts.netloc.lower() != self.web_host:
            return base_url.rstrip("/")
        return f"{parts.scheme}://{self.api_host}{parts.path}"

    def pages_base(self, base_url: str) -> str:
        """Where the pages answer for a caller who reached the server at ``base_url``."""
        return self._web_base(base_url)

    def _web_base(self, base_url: str) -> str:
        """Where the pages answer for a caller who reached the server at ``base_url``."""
        parts = urlsplit(base_url.rstrip("/"))
        if self.web_host is None or self.local or not loopback_name(parts.netloc):
            return base_url.rstrip("/")
        return f"{parts.scheme}://{self.web_host}{parts.path}"

    def key_sign_in(self, request: WebRequest) -> WebResponse:
        """``/web/key``: a key from ``sign_in_key`` becomes this browser's session, once the
        browser's person has seen whose it is.

        Any site can post a key to this page: its maker's own, from ``ltm open`` on their
        account (login CSRF). Taken at once, that signs the visitor's browser in as the
        maker, unasked: the visitor reads the maker's packets as their own, and an agent
        they connect in that browser (the consent page) writes into the maker's memory.
        So the key is redeemed only here, at this server's own pages:

        1. ``POST`` with ``key``: checked, not used; kept in a short-lived cookie, and the
           browser sent on to ``GET /web/key``. That is a top-level navigation, on which the
           browser sends the session cookie (SameSite=Lax), as a cross-site POST does not.
        2. ``GET``: a browser already signed in as the key's user goes straight on.
           Any other browser is asked, naming the account (and the one it would leave).
        3. ``POST`` with ``confirm``: the answer, from that page alone (its CSRF token is
           bound to the cookie of step 1, which no other site can read); the key is used.
        """
        if self.local:
            return self._not_found(None)
        if request.method == "GET":
            return self._key_question(request)
        form = _posted_form(request)
        pending = self._pending_key(request)
        if _one(form, "confirm"):
            if pending is None or not self._form_ok(request, pending["n"], form):
                return self._key_refused()
            return self._redeem_key(request, pending)
        key = _one(form, "key")
        if self._key_holder(key) is None:
            return self._key_refused()
        when = self.clock()
        value = self.signer.sign(
            "web-key-pending",
            {
                "k": key,
                "x": _safe_next(_one(form, "next")),
                "n": secrets.token_urlsafe(16),
                "exp": int(when.timestamp()) + KEY_SECONDS,
            },
        )
        return self._redirect("/web/key", self._pending_cookie(request, value, KEY_SECONDS))

    def _key_question(self, request: WebRequest) -> WebResponse:
        """``GET /web/key``: on at once for the key's own user; anyone else is asked."""
        pending = self._pending_key(request)
        holder = self._key_holder(pending["k"]) if pending else None
        if pending is None or holder is None:
            return self._key_refused()
        session = self._session(request)
        if session is not None and session[0].id == holder.id:
            return self._redeem_key(request, pending)
        body = render.confirm_key_sign_in(
            holder.display,
            holder.id,
            current=session[0].display if session else None,
            csrf=self._csrf(pending["n"]),
        )
        return self._page(200, "Sign in to ltm?", body, nav=None)

    def _redeem_key(self, request: WebRequest, pending: Mapping[str, Any]) -> WebResponse:
        """The key used (single use across processes) and the session started."""
        when = self.clock()
        payload = self.signer.unsign("web-key", str(pending["k"]), when)
        user: User | None = None
        if payload is not None:
            nonce, token_hash = str(payload.get("n", "")), str(payload.get("t", ""))
            expires = datetime.fromtimestamp(float(payload["exp"]), when.tzinfo)
            # The first redemption counts 1, any replay more.
            if nonce and self.store.add_to_counter(f"web-key:{nonce}", when, expires) == 1:
                user = self._key_user(str(payload.get("u", "")), token_hash)
        if user is None:
            return self._key_refused()
        cookie = self.start_session(request, user, token_hash=token_hash)
        return self._redirect(_safe_next(str(pending["x"])), cookie)

    def _key_holder(self, key: str) -> User | None:
        """The user a sign-in key names while it is good (signed, unexpired, its token
        standing); None else. Whether it was used already shows only on redeeming it."""
        payload = self.signer.unsign("web-key", key, self.clock())
        if payload is None:
            return None
        return self._key_user(str(payload.get("u", "")), str(payload.get("t", "")))

    def _pending_name(self, request: WebRequest) -> str:
        return "__Host-ltm_key" if request.base_url.startswith("https://") else "ltm_key"

    def _pending_cookie(self, request: WebRequest, value: str, max_age: int) -> str:
        attributes = f"Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax"
        if request.base_url.startswith("https://"):
            attributes += "; Secure"
        return f"{self._pending_name(request)}={value}; {attributes}"

    def _pending_key(self, request: WebRequest) -> dict[str, Any] | None:
        """The key this browser brought to ``POST /web/key`` (its cookie), while fresh."""
        raw = _cookie_value(request, self._pending_name(request))
        payload = self.signer.unsign("web-key-pending", raw, self.clock())
        if payload is None or not all(isinstance(payload.get(f), str) for f in "kxn"):
            return None
        return payload

    def _key_refused(self) -> WebResponse:
        return self._page(
            403,
            "Sign-in link expired",
            render.problem(
                "Sign-in link expired",
                "This sign-in was used already, took too long, or its token was revoked;"
                " or this browser keeps no cookies for this site, which signing in needs."
                " Run ltm open again.",
                link=None,
            ),
            nav=None,
        )

    def _key_user(self, user_id: str, token_hash: str) -> User | None:
        """The key's user, while the token it was made with still stands (full scope)."""
        if not token_hash:
            return self.store.get_user(user_id)
        found = self.store.token_owner(token_hash)
        if found is None or found[1].id != user_id:
            return None
        if not set(FULL_SCOPE.split()) <= set(found[0].scope.split()):
            return None
        return found[1]


def _short(ids: list[str]) -> list[str]:
    """The ids as a page shows them: each its shortest prefix unique among the rows."""
    from ..ids import short_ids

    return short_ids(ids)


def _row(meta: Any, short: str, details: Any, scope: str | None, copied: str = "") -> render.Row:
    """A listing row from a packet's meta and ``browse.Details`` (tags, next step);
    ``copied``: who wrote it, for a local copy of another's packet."""
    return render.Row(
        meta.id,
        meta.created_at,
        meta.goal,
        short=short,
        project=meta.project or "",
        tags=tuple(details.tags) if details else (),
        next_step=details.next_step if details else "",
        scope=scope,
        author=copied or (details.author if details else ""),
    )


def _copy_author(copy: dict[str, str] | None, *, short: bool = False) -> str:
    """How a page names the author of a local copy of another's packet ("" for the user's
    own): their name, and on its own page their user id too."""
    if copy is None:
        return ""
    if not copy["name"]:
        return f"user {copy['id']}"
    return copy["name"] if short else f"{copy['name']} ({copy['id']})"


def _origin(base_url: str) -> str:
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def _safe_next(value: str) -> str:
    """Where to go after signing in: one of this app's own pages, never another site."""
    if value and _NEXT_RE.fullmatch(value) and "//" not in value and "\\" not in value:
        return value
    return "/web"


# A listing's query as signing in hands it back: an empty ``team`` is the personal scope.
_KEPT_QUERY = ("team", "tag", "project", "q", "all", "shared", "after")


def _path_of(request: WebRequest, path: str) -> str:
    """``path`` with the query that says what the page shows (to return to after sign-in)."""
    params = [
        f"{quote(name, safe='')}={quote(values[0], safe='')}"
        for name, values in request.query.items()
        if name in _KEPT_QUERY and len(values) == 1 and (values[0] or name == "team")
    ]
    return path + (f"?{'&'.join(params)}" if params else "")


def web_host_name(key: bytes) -> str:
    """A loopback server's name for its pages: ``ltm-<16 hex>.localhost``, from its signing key.

    Derived, not stored: every worker process and every restart agrees on it, so
    bookmarks and sessions survive a restart, and nobody without the server's key
    can guess it (64 bits). Browsers resolve every ``*.localhost`` name to
    loopback: https://www.rfc-editor.org/rfc/rfc6761#section-6.3 and
    https://url.spec.whatwg.org/#host-miscellaneous.
    """
    digest = hmac.new(key, b"ltm web view host name", hashlib.sha256).hexdigest()
    return f"ltm-{digest[:16]}.localhost"


def loopback_name(netloc: str) -> bool:
    """Whether a Host (``name[:port]``) names loopback (see ``loopback``)."""
    return loopback_url(f"//{netloc}")
