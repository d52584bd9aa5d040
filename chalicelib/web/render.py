"""HTML for the web view: small functions that build strings, every value escaped.

Packet text is untrusted (any team member writes it), so nothing from a
packet reaches the page except through ``text()``: HTML-escaped, and with
every character that would make it read differently than it is stored
replaced by a visible ``[U+202E]`` marker: the Unicode bidirectional controls
(the "Trojan Source" characters), and every other control or invisible format
character (zero-width space, word joiner, byte order mark, the tag characters
that spell hidden text an agent reads). The resume block the copy button copies
is such text too, so what a person copies into an agent is what they saw.
Packet text never becomes a link, an attribute other than a data value we
quote, or markup; the only links on a page are this app's own paths, built
from percent-encoded ids and names. Each text block
is also isolated (``unicode-bidi: isolate`` in the style sheet), so no
right-to-left run can spill into the page around it.

Pages load one same-origin style sheet and one same-origin script, nothing
else (the Content-Security-Policy allows nothing else); every page works
without the script, which only adds the copy button.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

# Bidi embeddings, overrides and isolates, the marks, and the Arabic letter mark.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# Kept as they are: line breaks and tabs, and the zero-width non-joiner and joiner, which
# shape Persian and Indic words and join emoji (text needs them to read right).
_KEPT = frozenset("\n\r\t\u200c\u200d")
GOAL_IN_LIST = 120  # characters of a goal shown in a listing (a page stays small)


def _hidden(ch: str) -> bool:
    """A control or format character (Unicode categories Cc, Cf): it shows as nothing, or
    changes how the text around it reads. Spaces of every kind show as spaces; private
    and unassigned code points show as a box: neither hides anything."""
    return ch not in _KEPT and unicodedata.category(ch) in ("Cc", "Cf")


def text(value: object, limit: int | None = None) -> str:
    """Untrusted text as HTML text: hidden characters made visible, then escaped."""
    raw = str(value)
    if limit is not None and len(raw) > limit:
        raw = raw[: limit - 1].rstrip() + "…"
    if not raw.isprintable():  # only then can it hold one (a fast check, in C)
        raw = "".join(f"[U+{ord(ch):04X}]" if _hidden(ch) else ch for ch in raw)
    return html.escape(raw, quote=False)


def attr(value: object) -> str:
    """A value for a double-quoted attribute."""
    return html.escape(_BIDI.sub("", str(value)), quote=True)


def seg(value: str) -> str:
    """One URL path segment."""
    return quote(value, safe="")


ROOT = "<@>"  # where this app's paths start; ``layout`` puts the real prefix in


def href(path: str, **query: str | None) -> str:
    """A link to one of this app's pages (escaping can never produce ``ROOT``'s ``<``)."""
    params = {k: v for k, v in query.items() if v}
    return ROOT + attr(path + (f"?{urlencode(params)}" if params else ""))


@dataclass(frozen=True, slots=True)
class Nav:
    """Who is signed in, for the page header (None on public pages)."""

    display: str
    csrf: str
    local: bool = False  # ``ltm ui``: the embedded store, no sign-out


def layout(title: str, body: str, *, nav: Nav | None, status: str = "", root: str = "") -> str:
    """A whole page. ``root`` is the path this app is served under (an API stage, or "")."""
    header = '<header><a class="home" href="<@>/web">ltm</a>'
    if nav is not None:
        header += f'<span class="who">{text(nav.display)}</span>'
        if not nav.local:
            header += (
                '<form method="post" action="<@>/web/signout" class="signout">'
                f'<input type="hidden" name="csrf" value="{attr(nav.csrf)}">'
                '<button type="submit">Sign out</button></form>'
            )
    header += "</header>"
    notice = f'<p class="notice" role="status">{text(status)}</p>' if status else ""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{text(title, 80)} · ltm</title>"
        '<link rel="stylesheet" href="<@>/web/static/app.css">'
        '<script src="<@>/web/static/app.js" defer></script></head>'
        f'<body>{header}<main id="main">{notice}{body}</main></body></html>\n'
    ).replace(ROOT, root)


# -- the packet list ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    created_at: str
    goal: str
    short: str = ""  # the id as shown: its shortest unique prefix (``ltm.ids.short_ids``)
    project: str = ""
    tags: tuple[str, ...] = ()
    next_step: str = ""
    scope: str | None = None  # in a list of every scope: the team's name, "" for personal
    author: str = ""  # a team packet's: who stored it


def _row(r: Row, *, by: str | None = None) -> str:
    """One listing entry: the goal (a link), then when, where, project, tags, the next step;
    ``by``: who shared it, in the list of packets shared with the reader."""
    meta = [f"<time>{text(r.created_at, 40)}</time>"]
    if by is not None:
        meta.append(f"shared by {text(by or 'a former user', 64)}")
    if r.scope is not None:
        meta.append(text(f"team {r.scope}" if r.scope else "personal", 60))
    if r.author and by is None:
        meta.append(f'by <span class="author">{text(r.author, 64)}</span>')
    if r.project:
        meta.append(f'<span class="project">{text(r.project, 60)}</span>')
    meta.append(f"<code>{text(r.short or r.id)}</code>")
    tags = "".join(f' <span class="tag">{text(t, 40)}</span>' for t in r.tags[:8])
    step = (
        f'<p class="snippet"><span class="k">Next</span> {text(r.next_step, GOAL_IN_LIST)}</p>'
        if r.next_step
        else ""
    )
    return (
        f'<li><a href="<@>/web/packets/{seg(r.id)}">{text(r.goal or "(no goal)", GOAL_IN_LIST)}'
        f'</a><span class="meta">{" · ".join(meta)}{tags}</span>{step}</li>'
    )


def packet_list(
    *,
    rows: Sequence[Row],
    teams: Sequence[str],
    team: str | None,
    tag: str,
    project: str,
    older: str | None,
    owned_team: bool,
    everywhere: bool = False,
    narrowed: bool = False,
    full: bool = False,
    sharing: bool = True,
) -> str:
    """``narrowed``: every scope was asked for with a filter, which reaches one scope only
    (``browse.listing``): the personal one is listed, and the page says so. ``full``: a
    whole page of rows, so the merged list of every scope may have older ones.
    ``sharing``: others can share packets with the reader (a server's users, not
    ``ltm ui``'s local store), so the page links the ones they did."""
    scope = f"Team {team}" if team else "All your scopes" if everywhere else "Your packets"
    # Without teams (``ltm ui``, a new user) there is one scope: no control to pick it.
    # The picker shows the scope listed: with no option selected, a browser would show
    # the first ("All my scopes") over a list of personal packets.
    every = f'<option value="{EVERY}"{" selected" if everywhere else ""}>All my scopes</option>'
    personal = not everywhere and not team
    picker = (
        '<div><label for="team">Scope</label>'
        f'<select id="team" name="team">{every}{_scope_options(teams, team, personal)}'
        "</select></div>"
        if teams
        else ""
    )
    form = (
        '<form method="get" action="<@>/web" class="filters" role="search">'
        f"{picker}"
        '<div><label for="tag">Tag</label>'
        f'<input id="tag" name="tag" value="{attr(tag)}" maxlength="32" spellcheck="false"></div>'
        '<div><label for="project">Project</label>'
        f'<input id="project" name="project" value="{attr(project)}" maxlength="128"'
        ' spellcheck="false"></div>'
        '<div><button type="submit">Show</button></div></form>'
    )
    search = search_form("", teams, team, all_scopes=everywhere, listed=True)
    parts = [f"<h1>{text(scope)}</h1>", search, form]
    if narrowed:  # the search's qualifiers reach every scope: offer that search
        quoted = f'"{project}"' if any(ch.isspace() for ch in project) else project
        q = " ".join(f"{k}:{v}" for k, v in (("tag", tag), ("project", quoted)) if v)
        parts.append(
            '<p class="note" role="status">Tag and project filters look in one scope at a'
            " time: these are your personal packets. Pick a team above, or search"
            f' <a href="{href("/web", q=q, all="1")}"><code>{text(q)}</code></a>'
            " in all your scopes.</p>"
        )
    if team:
        parts.append(
            f'<p><a href="<@>/web/teams/{seg(team)}">Members'
            f"{' and pending invites' if owned_team else ''} of {text(team)}</a></p>"
        )
    if sharing:
        parts.append(f'<p><a href="{href("/web", shared="1")}">Shared with you</a></p>')
    if rows:
        items = "".join(_row(r) for r in rows)
        parts.append(f'<ol class="packets" aria-label="Packets, newest first">{items}</ol>')
    else:
        filtered = tag or project
        parts.append(
            f'<p class="empty">{"No packets match." if filtered else "No packets here yet."}</p>'
        )
    if older:
        link = href("/web", team=team, tag=tag, project=project, after=older)
        parts.append(f'<p><a rel="next" href="{link}">Older packets</a></p>')
    elif everywhere and full:  # the merged list pages no further; each scope does
        scopes = " · ".join(
            ['<a href="<@>/web?team=">personal</a>']
            + [f'<a href="{href("/web", team=name)}">{text(name)}</a>' for name in teams]
        )
        parts.append(f'<p class="note">Older packets are listed one scope at a time: {scopes}</p>')
    if teams:
        items = "".join(
            f'<li><a href="{href("/web", team=name)}">{text(name)}</a>'
            f' · <a href="<@>/web/teams/{seg(name)}">members</a></li>'
            for name in teams
        )
        parts.append(f'<h2>Your teams</h2><ul class="teams">{items}</ul>')
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class SharedRow:
    row: Row
    by: str  # who shared it (display name)


def shared_list(rows: Sequence[SharedRow], *, cut: bool = False) -> str:
    """``GET /web?shared=1``: the packets other users shared with the reader, read-only;
    ``cut``: the list stops at its page, and there may be more."""
    parts = ["<h1>Shared with you</h1>"]
    if rows:
        items = "".join(_row(r.row, by=r.by) for r in rows)
        parts.append(f'<ol class="packets" aria-label="Shared packets, newest first">{items}</ol>')
        if cut:
            parts.append(
                f'<p class="more">The newest {len(rows)} shares are shown; older ones are'
                " listed by <code>ltm ls --shared --limit 200</code>.</p>"
            )
    else:
        parts.append('<p class="empty">Nobody has shared a packet with you.</p>')
    parts.append('<p><a href="<@>/web">Back to the list</a></p>')
    return "".join(parts)


EVERY = "*"  # the filters' scope for every scope of the reader (no team is named "*")


def _scope_options(teams: Sequence[str], team: str | None, personal: bool) -> str:
    chosen = " selected" if personal else ""
    options = [f'<option value=""{chosen}>Personal</option>'] + [
        f'<option value="{attr(name)}"{" selected" if name == team else ""}>{text(name)}</option>'
        for name in teams
    ]
    return "".join(options)


def search_form(
    q: str, teams: Sequence[str], team: str | None, *, all_scopes: bool, listed: bool = False
) -> str:
    """The search box (``GET /web?q=``): one scope, or every scope of the reader.

    ``listed``: above a listing, whose own row of filters picks the scope; the box then
    searches exactly what is listed (every scope on the landing page) and has no scope
    controls of its own, so the page has one row of them, not two that disagree.
    """
    checked = " checked" if all_scopes else ""
    if listed:
        scopes = (
            '<input type="hidden" name="all" value="1">'
            if all_scopes and teams
            else f'<input type="hidden" name="team" value="{attr(team or "")}">'
            if teams
            else ""
        )
    else:
        scopes = (
            '<div><label for="search-team">In</label>'
            f'<select id="search-team" name="team">{_scope_options(teams, team, not team)}'
            "</select></div>"
            f'<div class="check"><input type="checkbox" id="all" name="all" value="1"{checked}>'
            '<label for="all">All my scopes</label></div>'
            if teams  # one scope only: nothing to choose
            else ""
        )
    return (
        '<form method="get" action="<@>/web" class="search" role="search">'
        '<div class="grow"><label for="q">Search</label>'
        f'<input id="q" name="q" type="search" value="{attr(q)}" maxlength="512"'
        ' spellcheck="false" placeholder="words, &quot;a phrase&quot;, pref*, tag:x, project:y">'
        f"</div>{scopes}"
        '<div><button type="submit">Search</button></div></form>'
    )


def highlighted(snippet: str, highlights: Iterable[tuple[int, int]]) -> str:
    """A snippet with its matches in ``<mark>``: every piece escaped on its own.

    The ranges come from the store; ones out of bounds or overlapping an
    earlier one are skipped, so they can never cut the text short or repeat it.
    """
    out, at = [], 0
    for start, end in sorted(highlights):
        if start < at or end <= start or end > len(snippet):
            continue
        out.append(text(snippet[at:start]))
        out.append(f"<mark>{text(snippet[start:end])}</mark>")
        at = end
    out.append(text(snippet[at:]))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    created_at: str
    goal: str
    team: str | None  # None: personal
    field: str
    snippet: str
    highlights: tuple[tuple[int, int], ...]
    short: str = ""  # the id as shown (``ltm.ids.short_ids``)


def search_results(
    *,
    q: str,
    hits: Sequence[Hit],
    teams: Sequence[str],
    team: str | None,
    all_scopes: bool,
    error: str,
) -> str:
    """``GET /web?q=``: the ranked hits, each with the field it matched in and a snippet."""
    where = "all your scopes" if all_scopes else (f"team {team}" if team else "your packets")
    parts = [
        f"<h1>Search {text(where)}</h1>",
        search_form(q, teams, team, all_scopes=all_scopes),
    ]
    if error:
        parts.append(f'<p class="error" role="alert">Cannot search: {text(error)}.</p>')
    elif hits:
        items = "".join(
            f'<li><a href="<@>/web/packets/{seg(h.id)}">{text(h.goal or "(no goal)", GOAL_IN_LIST)}'
            f'</a><span class="meta">{text(f"team {h.team}" if h.team else "personal")}'
            f" · <time>{text(h.created_at, 40)}</time>"
            f" · <code>{text(h.short or h.id)}</code></span>"
            f'<p class="snippet"><span class="k">{text(h.field, 40)}</span> '
            f"{highlighted(h.snippet, h.highlights)}</p></li>"
            for h in hits
        )
        parts.append(f'<ol class="packets hits" aria-label="Results, best first">{items}</ol>')
    else:
        parts.append('<p class="empty">Nothing matches.</p>')
    back = href("/web", team=team)
    parts.append(f'<p><a href="{back}">Back to the list</a></p>')
    return "".join(parts)


# -- one packet -------------------------------------------------------------------------------


def _list(items: Iterable[Any]) -> str:
    lis = "".join(f"<li>{text(item)}</li>" for item in items)
    return f"<ul>{lis}</ul>" if lis else ""


def _items(packet: Mapping[str, Any], key: str) -> list[Any]:
    value = packet.get(key)
    return value if isinstance(value, list) else []


def _dicts(packet: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    return [d for d in _items(packet, key) if isinstance(d, Mapping)]


def _decisions(items: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for d in items:
        extra = ""
        if d.get("why"):
            extra += f'<p class="sub"><span class="k">Why</span> {text(d["why"])}</p>'
        if d.get("consequences"):
            extra += (
                f'<p class="sub"><span class="k">Consequences</span> {text(d["consequences"])}</p>'
            )
        out.append(f"<li><p>{text(d.get('what', ''))}</p>{extra}</li>")
    return f"<ul>{''.join(out)}</ul>" if out else ""


def _attempts(items: Sequence[Mapping[str, Any]], *, outcome: bool) -> str:
    out = []
    for a in items:
        badge = f'<span class="badge">{text(a.get("outcome", "?"), 16)}</span> ' if outcome else ""
        extra = ""
        if a.get("learned"):
            extra += f'<p class="sub"><span class="k">Learned</span> {text(a["learned"])}</p>'
        if a.get("confidence"):
            extra += f'<p class="sub"><span class="k">Confidence</span> {text(a["confidence"])}</p>'
        out.append(f"<li><p>{badge}{text(a.get('tried', ''))}</p>{extra}</li>")
    return f"<ul>{''.join(out)}</ul>" if out else ""


def _methods(items: Sequence[Mapping[str, Any]]) -> str:
    out = [
        f"<li><p><strong>{text(m.get('name', ''))}</strong></p>"
        f'<p class="sub"><span class="k">When</span> {text(m.get("when_applicable", ""))}</p>'
        f'<p class="sub"><span class="k">How</span> {text(m.get("how", ""))}</p></li>'
        for m in items
    ]
    return f"<ul>{''.join(out)}</ul>" if out else ""


def _section(title: str, content: str, cls: str = "") -> str:
    if not content:
        return ""
    klass = f' class="{cls}"' if cls else ""
    return f"<section{klass}><h2>{text(title)}</h2>{content}</section>"


@dataclass(frozen=True, slots=True)
class Child:
    id: str
    goal: str


@dataclass(frozen=True, slots=True)
class Parent:
    id: str
    goal: str | None  # None: not visible to the reader (or gone)
    link: bool


def packet_page(
    packet: Mapping[str, Any],
    *,
    packet_id: str,
    scope: str,
    resume_block: str,
    parent: Parent | None,
    children: Sequence[Child] = (),
    public_url: str | None = None,
    can_delete: bool = False,
    conforming: bool = True,
    shared_with: Sequence[str] = (),
    shared_by: str | None = None,
    author: str | None = None,
) -> str:
    """A packet in the resume block's order: what must not go wrong first, the next step last."""
    decisions = _dicts(packet, "decisions")
    attempts = _dicts(packet, "attempts")
    failed = [a for a in attempts if a.get("outcome") in ("failed", "partial")]
    worked = [a for a in attempts if a.get("outcome") not in ("failed", "partial")]
    facts = [("Id", f"<code>{text(packet_id)}</code>"), ("Scope", text(scope))]
    if author:  # who stored it, as the server knows (the packet's provenance is its own say)
        facts.append(("Saved by", text(author, 64)))
    if packet.get("created_at"):
        facts.append(("Created", f"<time>{text(packet['created_at'])}</time>"))
    project = packet.get("project")
    if isinstance(project, Mapping) and (project.get("name") or project.get("ref")):
        shown = text(project.get("name") or "")
        if project.get("ref"):
            shown += f" <code>{text(project['ref'])}</code>"
        facts.append(("Project", shown))
    tags = [t for t in _items(packet, "tags") if isinstance(t, str)]
    if tags:
        facts.append(("Tags", " ".join(f'<span class="tag">{text(t, 40)}</span>' for t in tags)))
    provenance = packet.get("provenance")
    if isinstance(provenance, Mapping):
        who = [str(provenance[k]) for k in ("author_human", "author_model") if provenance.get(k)]
        if who:
            facts.append(("Written by", text(" via ".join(who))))
    if parent is not None:
        if parent.goal is not None and parent.link:
            link = f"<@>/web/packets/{seg(parent.id)}"
            shown = f'<a href="{link}" rel="prev">{text(parent.goal, 120)}</a>'
        else:
            # Which of the two, the reader may not learn: a parent they cannot read
            # reads the same as one deleted.
            shown = f"<code>{text(parent.id)}</code> (deleted, or not visible to you)"
        facts.append(("Continues", shown))
    if children:
        links = "".join(
            f'<li><a href="<@>/web/packets/{seg(c.id)}" rel="next">'
            f"{text(c.goal or '(no goal)', 120)}</a></li>"
            for c in children
        )
        facts.append(("Continued by", f'<ul class="children">{links}</ul>'))
    if public_url:
        facts.append(("Public page", f'<code class="url">{text(public_url)}</code>'))
    if shared_with:
        facts.append(("Shared with", text(", ".join(shared_with))))
    if shared_by is not None:
        facts.append(("Shared with you by", text(shared_by or "a former user")))
    if not conforming:
        facts.append(("Schema", "accepted in lenient mode: it does not conform"))
    dl = "".join(f"<dt>{text(k)}</dt><dd>{v}</dd>" for k, v in facts)
    locked = [d for d in decisions if d.get("locked") is True]
    tentative = [d for d in decisions if d.get("locked") is not True]
    body = [
        '<article class="packet">',
        f'<h1 class="goal">{text(packet.get("goal", "") or "(no goal)")}</h1>',
        f'<dl class="facts">{dl}</dl>',
        '<div class="actions">'
        '<button type="button" class="copy" data-copy="resume-block" hidden>'
        "Copy the resume block</button>"
        '<span class="copied" role="status" aria-live="polite"></span>',
    ]
    if can_delete:
        body.append(f'<a class="danger" href="<@>/web/packets/{seg(packet_id)}/delete">Delete…</a>')
    body.append("</div>")
    body += [
        _section("Done when", _list(_items(packet, "success_criteria"))),
        _section("Locked decisions (settled)", _decisions(locked), "strong"),
        _section(
            "Failed attempts (do not retry without new information)",
            _attempts(failed, outcome=True),
            "strong",
        ),
        _section("Constraints", _list(_items(packet, "constraints"))),
        _section("Methods that worked", _methods(_dicts(packet, "methods"))),
        _section("Attempts that worked", _attempts(worked, outcome=False)),
        _section("Tentative decisions", _decisions(tentative)),
        _section("Open questions", _list(_items(packet, "open_questions"))),
        _section("Next step", f"<p>{text(packet.get('next_step', ''))}</p>", "next"),
        '<details class="block"><summary>The resume block</summary>'
        f'<pre id="resume-block" tabindex="0">{text(resume_block)}</pre></details>',
        "</article>",
    ]
    return "".join(body)


def confirm_delete(packet_id: str, goal: str, csrf: str) -> str:
    return (
        "<h1>Delete this packet?</h1>"
        f'<p class="quote">{text(goal or "(no goal)", 300)}</p>'
        f"<p>Packet <code>{text(packet_id)}</code> will be deleted for everyone who can see it,"
        " and its public page (if it has one) goes away. This cannot be undone.</p>"
        f'<form method="post" action="<@>/web/packets/{seg(packet_id)}/delete">'
        f'<input type="hidden" name="csrf" value="{attr(csrf)}">'
        '<button type="submit" class="danger">Delete the packet</button> '
        f'<a href="<@>/web/packets/{seg(packet_id)}">Cancel</a></form>'
    )


def confirm_key_sign_in(display: str, user_id: str, *, current: str | None, csrf: str) -> str:
    """The question before a sign-in link from ``ltm open`` signs this browser in: whose
    account it opens (another site may have sent the browser here with its own)."""
    leaving = (
        f"<p>This browser is signed in as <strong>{text(current, 80)}</strong> now;"
        " continuing signs it out of that account here.</p>"
        if current is not None
        else ""
    )
    return (
        "<h1>Sign in to ltm?</h1>"
        f"<p>This link signs this browser in as <strong>{text(display or user_id, 80)}</strong>"
        f" (user <code>{text(user_id)}</code>).</p>{leaving}"
        "<p>If you did not just run <code>ltm open</code> as that account, close this page:"
        " another site sent you here to sign you in as someone else.</p>"
        '<form method="post" action="<@>/web/key">'
        f'<input type="hidden" name="csrf" value="{attr(csrf)}">'
        '<input type="hidden" name="confirm" value="1">'
        f'<button type="submit">Sign in as {text(display or user_id, 80)}</button></form>'
    )


# -- teams --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberRow:
    display: str
    user_id: str
    role: str
    joined_at: str


@dataclass(frozen=True, slots=True)
class InviteRow:
    created_by: str
    created_at: str
    expires_at: str


def team_page(name: str, members: Sequence[MemberRow], invites: Sequence[InviteRow] | None) -> str:
    rows = "".join(
        f"<tr><td>{text(m.display or m.user_id)}</td><td>{text(m.role)}</td>"
        f"<td><time>{text(m.joined_at)}</time></td></tr>"
        for m in members
    )
    parts = [
        f"<h1>Team {text(name)}</h1>",
        f'<p><a href="{href("/web", team=name)}">Packets of {text(name)}</a></p>',
        "<h2>Members</h2>",
        '<table><caption class="sr">Members of the team</caption>'
        '<thead><tr><th scope="col">Member</th><th scope="col">Role</th>'
        f'<th scope="col">Joined</th></tr></thead><tbody>{rows}</tbody></table>',
    ]
    if invites is not None:
        parts.append("<h2>Pending invites</h2>")
        if invites:
            rows = "".join(
                f"<tr><td>{text(i.created_by)}</td><td><time>{text(i.created_at)}</time></td>"
                f"<td><time>{text(i.expires_at)}</time></td></tr>"
                for i in invites
            )
            parts.append(
                '<table><caption class="sr">Invites not yet used</caption>'
                '<thead><tr><th scope="col">Invited by</th><th scope="col">Created</th>'
                f'<th scope="col">Expires</th></tr></thead><tbody>{rows}</tbody></table>'
                '<p class="note">Codes are stored only as hashes: ask the member who made an'
                " invite for its link.</p>"
            )
        else:
            parts.append('<p class="empty">No pending invites.</p>')
    return "".join(parts)


# -- signing in, errors ---------------------------------------------------------------------------


def sign_in(
    *, action: str, csrf: str, next_path: str, error: str = "", cognito: bool, local: bool
) -> str:
    message = f'<p class="error" role="alert">{text(error)}</p>' if error else ""
    if local:
        return (
            "<h1>Sign in</h1>"
            f"{message}<p>This view of your local store opens from the terminal: run"
            " <code>ltm ui</code> again for a new session.</p>"
        )
    hidden = (
        f'<input type="hidden" name="csrf" value="{attr(csrf)}">'
        f'<input type="hidden" name="next" value="{attr(next_path)}">'
    )
    if cognito:
        return (
            f"<h1>Sign in</h1>{message}"
            f'<form method="post" action="{ROOT}{attr(action)}">{hidden}'
            '<button type="submit">Continue to sign in</button></form>'
            f"{code_offer(hidden)}"
        )
    return (
        f"<h1>Sign in</h1>{message}"
        # Most people never saw a token (they joined by invite, or signed in from a
        # browser): the CLI they signed in with can sign this browser in instead.
        "<p>Signed in with the ltm CLI? Run <code>ltm open</code> on that machine: it opens"
        " this view in your browser, already signed in, without showing a token.</p>"
        f'<form method="post" action="{ROOT}{attr(action)}">{hidden}'
        '<label for="token">Or: your ltm token</label>'
        '<input type="password" id="token" name="token" autocomplete="off" spellcheck="false"'
        " required>"
        '<p class="note">A token you use on a signed-in machine (<code>ltm whoami</code> shows'
        " where). It is checked, never stored in the browser: the browser gets its own"
        " session, which ends when you sign out or after a few hours.</p>"
        '<button type="submit">Sign in</button></form>'
        f"{code_offer(hidden)}"
    )


def code_offer(hidden: str) -> str:
    """The sign-in page's offer to be approved from a signed-in CLI (the device pages' way)."""
    return (
        f'<form method="post" action="{ROOT}/web/signin/code">{hidden}'
        "<p>Or approve this browser from any machine signed in to ltm: get a short code"
        " here, then run <code>ltm approve CODE</code> there.</p>"
        '<button type="submit" name="step" value="new">Get a code</button></form>'
    )


def sign_in_code(
    *, code: str, host: str, ticket: str, csrf: str, next_path: str, note: str = ""
) -> str:
    """The code to approve from a CLI, and the button that continues once it is approved."""
    message = f'<p class="error" role="alert">{text(note)}</p>' if note else ""
    return (
        f"<h1>Approve this browser</h1>{message}"
        "<p>On a machine signed in to ltm on this server, run:</p>"
        f'<pre><code id="approve-command">ltm approve {text(code)}</code></pre>'
        f'<p>The code: <strong class="code" id="user-code">{text(code)}</strong>'
        f" ({text(host)}). It expires in a few minutes.</p>"
        f'<form method="post" action="{ROOT}/web/signin/code">'
        f'<input type="hidden" name="csrf" value="{attr(csrf)}">'
        f'<input type="hidden" name="next" value="{attr(next_path)}">'
        f'<input type="hidden" name="ticket" value="{attr(ticket)}">'
        '<button type="submit" name="step" value="check">I approved it: continue</button>'
        "</form>"
        '<p class="note">This browser is then signed in as whoever approved it, until you'
        " sign out or for a few hours. Never approve a code someone else sent you.</p>"
    )


def problem(
    title: str, message: str, *, link: tuple[str, str] | None = ("/web", "Your packets")
) -> str:
    extra = f'<p><a href="{ROOT}{attr(link[0])}">{text(link[1])}</a></p>' if link else ""
    return f"<h1>{text(title)}</h1><p>{text(message)}</p>{extra}"
