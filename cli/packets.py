"""The bodies of the packet verbs (ls, search, log, resume, show, example, --version).

Plain functions that import no argument parser: ``ltm.cli.commands`` declares each
verb's options for typer and calls these, so the rules of a verb live here once and
any caller (a command, a test, another verb) runs the same code.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import (
    color_allowed,
    info,
    one_line,
    print_json,
    safe,
    terminal_bytes,
    terminal_text,
)
from ltm.present import (
    MEANING_ONLY,
    decode_packet,
    earlier_count,
    marked,
    meaning_only,
    summary,
    where_label,
)

if TYPE_CHECKING:
    from ltm.cli.client.backend import Backend, Filters

PICK_FROM = 50  # how many recent packets the picker offers
MAX_LIMIT = 1000


def print_version() -> None:
    from ltm import __version__

    print(f"ltm {__version__}")


def print_example(*, resume: bool, reference: bool = False) -> None:
    """``ltm example``: the packet to copy from (no id, time or project: save fills them,
    so every copy saved is a new packet); ``reference``: the reference's exact bytes;
    ``resume``: the reference example's resume block."""
    from ltm.examples import example_bytes, template_bytes

    if resume:
        from ltm.resume import render

        sys.stdout.write(render(json.loads(example_bytes())))
    else:
        sys.stdout.buffer.write(example_bytes() if reference else template_bytes())
    sys.stdout.flush()


def project_filter(project: str | None, here: bool) -> str | None:
    """The project to filter on: ``--project NAME``, or ``--here`` (this directory's).

    A mistake in these options is a usage error, exit 2 as the parser's own (``-n 0``,
    ``--shared --here``): a script tells it from a failure of the store or server (1)."""
    if project is not None and here:
        raise CliError("give --project NAME or --here, not both", exit_code=2)
    if project is not None:
        if not project.strip():
            raise CliError("--project needs a project name", exit_code=2)
        return project
    if not here:
        return None
    from ltm.cli.project import current_project

    found = current_project()
    if found is None:
        raise CliError(
            "--here: no project found in this directory; use --project NAME", exit_code=2
        )
    return found[0]


def shown_ids(backend: Backend, ids: list[str]) -> list[str]:
    """Each id as short as it can be shown and still name one packet (``ltm.ids.short_ids``):
    unique among the rows shown and, on the local store, among all the packets of its scope
    (a server's scope is known only as far as it was listed)."""
    from ltm.cli.client.backend import LocalBackend
    from ltm.ids import short_ids

    if not isinstance(backend, LocalBackend):
        return short_ids(ids)
    store, owner = backend.store, backend.user().id

    def taken(prefix: str) -> bool:
        return len(store.packet_ids_with_prefix(prefix, owner_id=owner, limit=2)) > 1

    return short_ids(ids, taken=taken)


def _width(shown: list[str]) -> int:
    return max((len(s) for s in shown), default=12)


def list_packets(
    *,
    limit: int,
    team: str | None,
    as_json: bool,
    local: bool,
    project: str | None = None,
    here: bool = False,
    filters: Filters | None = None,
    page_token: str | None = None,
    every: bool = False,
) -> None:
    """``ltm ls``: a page (or with ``every``, all pages) of a scope, filtered."""
    from ltm.cli.client.backend import Filters, check_times, open_backend
    from ltm.cli.terminal.output import one_line, relative_time

    filters = filters or Filters()
    check_times(filters)
    project = project_filter(project, here)
    if project is not None:
        filters = Filters(**{**filters.query(), "project": project})
    backend = open_backend(local=local, team=team)
    try:
        listing = backend.page(filters, team=team, limit=limit, page_token=page_token)
        rows = list(listing.rows)
        while every and listing.next_page_token:
            listing = backend.page(
                filters, team=team, limit=limit, page_token=listing.next_page_token
            )
            rows += listing.rows
        shown = [] if as_json else shown_ids(backend, [row["id"] for row in rows])
        ids = [row["id"] for row in rows]
        authors = (_authors(backend, team, ids) if team else _copied(backend, ids)) if shown else {}
    finally:
        backend.close()
    more = listing.next_page_token
    if as_json:
        out: dict[str, Any] = {"packets": rows}
        if more:
            out["next_page_token"] = more
        print_json(out)
        return
    if not rows:
        where = where_label(backend, team, filters.project)
        if filters != Filters(project=filters.project) or page_token:
            info(f"no packets match in {where}")
        else:
            info(f"no packets yet in {where}; save one with: ltm save FILE")
        return
    width = _width(shown)
    by_width = max((len(name) for name in authors.values()), default=0)
    for row, short in zip(rows, shown, strict=True):
        when = relative_time(row["created_at"])
        by = f"{authors.get(row['id'], '?'):<{by_width}}  " if authors else ""
        line = f"{short:<{width}}  {when:<12}  {by}{one_line(row['goal'], 72)}"
        print(safe(line))  # packet text: no terminal control gets through
    if more:
        info(f"more packets: add --page-token {more} (or --all for every page)")


def search_packets(
    query: str,
    *,
    team: str | None,
    all_scopes: bool,
    limit: int,
    as_json: bool,
    local: bool,
    mode: str | None = None,
) -> None:
    """``ltm search``: ranked matches, each with where it matched and a marked snippet.
    ``mode``: ``lexical``, ``semantic``, or None: both where meaning is there (the
    local store with the extra, a server that has it), else the words."""
    from ltm.cli.client.backend import check_query, open_backend
    from ltm.cli.terminal.output import one_line, relative_time, safe

    check_query(query)
    backend = open_backend(local=local, team=team)
    try:
        hits = backend.find(
            query, team=team, all_scopes=all_scopes, limit=limit, mode=mode, progress=_progress
        )
        shown = [] if as_json else shown_ids(backend, [str(hit["id"]) for hit in hits])
    finally:
        backend.close()
    if as_json:
        print_json({"results": hits})
        return
    if not hits:
        where = (
            f"team {team} on {backend.label}"
            if team
            else f"any of your scopes on {backend.label}"
            if all_scopes
            else backend.label
        )
        info(f"nothing matches {query!r} in {where}")
        from ltm.search import has_grams

        if mode == "semantic" and has_grams(query):
            # The model learned English: such a query has no meaning (ltm.semantic.query_vector).
            info(
                "by meaning, Chinese, Japanese, Korean and Thai are searched by their words:"
                " leave out --semantic"
            )
        return
    color = color_allowed()
    width = _width(shown)
    for hit, short in zip(hits, shown, strict=True):
        scope = f"[{safe(str(hit['team']))}] " if hit.get("team") else ""
        when = relative_time(str(hit.get("created_at", "")))
        goal = safe(one_line(str(hit.get("goal", "")), 72))
        print(f"{safe(short):<{width}}  {when:<12}  {scope}{goal}")
        field = safe(str(hit.get("field", "")))
        how = f"{MEANING_ONLY}; " if meaning_only(hit) else ""
        print(f"    {how}{field}: {marked(hit, color=color)}")


def _progress(done: int, total: int) -> None:
    """One line on stderr, rewritten in place on a terminal, for the one-time fill."""
    line = f"ltm: working out what each packet means (once): {done}/{total}"
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line + ("\n" if done >= total else ""))
    elif done >= total or done % 5000 < 500:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def log_thread(ref: str, *, team: str | None, as_json: bool, local: bool) -> None:
    """``ltm log``: the work thread from its root to ``ref``, one line per packet."""
    from ltm.cli.client.backend import open_backend
    from ltm.cli.terminal.output import one_line, relative_time, safe

    backend = open_backend(local=local, team=team)
    try:
        rows, complete = backend.thread(ref, team=team)
        shown = [] if as_json else shown_ids(backend, [str(row["id"]) for row in rows])
    finally:
        backend.close()
    why, said = ("", "") if complete else _cut_short(rows)
    if as_json:
        answer: dict[str, Any] = {"packets": rows, "complete": complete}
        if why:  # a script told only "incomplete" would look for packets that are there
            answer["stopped"] = why
        print_json(answer)
        return
    if said:
        info(said)
    width = _width(shown)
    for row, short in zip(rows, shown, strict=True):
        when = relative_time(row["created_at"])
        goal = safe(one_line(row["goal"], 48))
        step = safe(one_line(str(row.get("next_step", "")), 48))
        print(f"{safe(short):<{width}}  {when:<12}  {goal}  -> next: {step}")


def _cut_short(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """Why a thread is shown from its first row on: the reason ``log --json`` gives
    ("itself", "loop", "limit" or "unreadable") and the line ``ltm log`` says. Said as it
    is: "gone or not visible" of a thread that loops, or of one longer than a walk reads,
    would send the user looking for packets that are there."""
    first = safe(str(rows[0]["id"])) if rows else ""
    parent = rows[0].get("parent_id") if rows else None
    if rows and parent == rows[0]["id"]:
        return "itself", f"{first} names itself as its parent (parent_id); nothing comes before it"
    if parent in {row["id"] for row in rows}:
        return "loop", (
            f"this thread loops: {first} continues {safe(str(parent))}, shown after it"
            " (their parent_id links form a cycle); shown from there"
        )
    from ltm.service.packets import MAX_THREAD  # only a thread cut short pays for it

    if len(rows) >= MAX_THREAD:
        return "limit", (
            f"the thread goes on before these {len(rows):,} packets, the most one walk reads;"
            f" the earlier ones: ltm log {safe(str(parent))}"
        )
    return "unreadable", (
        "earlier packets of this thread are gone or not visible to you; shown from there"
    )


def resume_packet(
    ref: str | None,
    *,
    team: str | None,
    local: bool,
    copy: bool | None,
    as_json: bool,
    project: str | None = None,
    here: bool = False,
) -> None:
    """Print (or copy) a packet's resume block; without ``ref``, pick one or take the newest.

    ``project``/``here`` narrow the choice to one project's packets; with an id there is
    no choice to narrow, and a packet of another project would be resumed as if it passed.
    """
    from ltm.cli.client.backend import open_backend
    from ltm.resume import clean, render

    if ref is not None and (project is not None or here):
        raise CliError("give a packet ID or --project/--here, not both", exit_code=2)
    if copy and as_json:  # --json prints; the clipboard would silently get nothing
        raise CliError("give --copy or --json, not both", exit_code=2)
    project = project_filter(project, here)
    interactive = ref is None and not as_json and sys.stdin.isatty() and sys.stdout.isatty()
    if interactive and (sys.platform == "win32" or os.environ.get("TERM") == "dumb"):
        # The picker needs termios and a terminal that moves its cursor: print the
        # newest, as off a terminal.
        interactive = False
    backend = open_backend(local=local, team=team)
    try:
        if ref is None:
            ref = _choose(backend, team, interactive=interactive, project=project)
        body = backend.get(ref, team=team)
        packet = decode_packet(body, ref)
        before = earlier_count(backend, packet, team)
    finally:
        backend.close()
    block = render(packet, before=before)
    # Off a terminal the block goes to an agent (its shell tool, the clipboard, a harness
    # reading --json): controls and invisible characters are left out, as every tool
    # and hook leaves them out of packet text (``ltm.resume.frame``); tag characters
    # would spell instructions nobody saw. On a terminal it is read: shown escaped.
    prompt = clean(block)
    packet_id = str(packet.get("id", ref))
    if as_json:
        text = json.dumps({"id": packet_id, "resume": prompt}, ensure_ascii=False) + "\n"
        _write(terminal_text(text))
        return
    if copy if copy is not None else interactive:
        from ltm.cli.terminal.clipboard import copy as to_clipboard

        problem = to_clipboard(prompt)
        if problem is None:
            lines = prompt.count("\n")
            info(f"copied the resume block of {packet_id} ({lines} lines) to the clipboard")
            return
        info(f"warning: {problem}; printing the block instead")
    _write(terminal_text(block) if sys.stdout.isatty() else prompt.encode())


def _write(raw: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(raw)
    sys.stdout.flush()


def _authors(backend: Backend, team: str, ids: list[str]) -> dict[str, str]:
    """A team listing's authors by packet id, as people know them ("you", a member's display
    name, else the user id); {} where the server cannot say (the reference)."""
    stored = backend.authors(ids)
    if not stored:
        return {}
    names = _member_names(backend, team)
    people = {uid: _who(backend, names, uid) for uid in set(stored.values())}
    return {pid: people[uid] for pid, uid in stored.items()}


def _copied(backend: Backend, ids: list[str]) -> dict[str, str]:
    """A local listing's authors by packet id, when any row is a copy of another's packet
    ("you" for the others); {} when all are the user's own (no column then)."""
    copies = backend.copies(ids)
    if not copies:
        return {}
    return {
        pid: one_line(copies[pid]["name"] or copies[pid]["id"], 24) if pid in copies else "you"
        for pid in ids
    }


def _sharer(backend: Backend, team: str | None, packet_id: str) -> str | None:
    """ "name (user id)" of who stored a packet the caller reads outside any team and did
    not write (one shared with them), else None."""
    from ltm.cli.client.remote import RemoteBackend

    if team or not isinstance(backend, RemoteBackend):
        return None
    stored_by = backend.stored_by(packet_id)
    if not stored_by or backend.is_me(stored_by) is not False:
        return None
    from ltm.cli.commands.share import sharer

    name = one_line(sharer(backend, packet_id), 24)
    return f"{name} ({stored_by})" if name else f"user {stored_by}"


def _copy_author(backend: Backend, packet_id: str) -> str | None:
    """ "name (user id, on host)" for a local copy of another's packet, else None."""
    copy = backend.copied_from(packet_id)
    if copy is None:
        return None
    # What a bundle said, kept as it came: one line each, never a line of its own.
    name, by, host = (one_line(copy[key], 80) for key in ("name", "id", "host"))
    on = f", on {host}" if host else ""
    return f"{name or 'user'} ({by}{on})"


def _member_names(backend: Backend, team: str) -> dict[str, str]:
    from ltm.cli.client.authors import member_names

    return {uid: one_line(name, 24) for uid, name in member_names(backend, team).items()}


def _who(backend: Backend, names: dict[str, str], user_id: str) -> str:
    if backend.is_me(user_id):
        return "you"
    return names.get(user_id) or user_id


def show_packet(ref: str, *, team: str | None, as_json: bool, local: bool) -> None:
    """A packet as a readable summary (naming its children), or its stored JSON."""
    from ltm.cli.client.backend import open_backend

    backend = open_backend(local=local, team=team)
    children: list[dict[str, Any]] = []
    published: tuple[str, str] | None = None
    author: str | None = None
    try:
        body = backend.get(ref, team=team)
        if not as_json:
            packet = decode_packet(body, ref)
            packet_id = str(packet.get("id", ref))
            # Only a server publishes; it says so on the read itself (RemoteBackend.published).
            published = backend.published(packet_id)
            try:  # an extension: a reference server cannot list children, so none are named
                children = backend.children(packet_id, team=team)
            except CliError:
                children = []
            stored_by = backend.stored_by(packet_id) if team else None
            if stored_by:
                who = _who(backend, _member_names(backend, team or ""), stored_by)
                author = who if who in ("you", stored_by) else f"{who} ({stored_by})"
            author = _copy_author(backend, packet_id) or _sharer(backend, team, packet_id) or author
    finally:
        backend.close()
    if as_json:
        _write(terminal_bytes(body + b"\n"))
        return
    shown = summary(
        packet,
        children=[str(c["id"]) for c in children],
        published=published,
        author=author,
    )
    print(safe(shown, multiline=True), end="")


def _choose(
    backend: Backend, team: str | None, *, interactive: bool, project: str | None = None
) -> str:
    from ltm.cli.terminal.output import one_line, relative_time

    rows = backend.list(team=team, limit=PICK_FROM if interactive else 1, project=project)
    if not rows:
        raise CliError(
            f"no packets in {where_label(backend, team, project)}; save one with: ltm save FILE"
        )
    if not interactive:
        return rows[0]["id"]
    from ltm.cli.terminal.picker import pick

    shown = shown_ids(backend, [r["id"] for r in rows])
    width = _width(shown)
    labels = [
        f"{short:<{width}}  {relative_time(r['created_at']):<12}  {one_line(r['goal'], 200)}"
        for r, short in zip(rows, shown, strict=True)
    ]
    chosen = pick(labels, title="Resume which packet?")
    if chosen is None:
        raise CliError("cancelled; nothing resumed", exit_code=130)
    return rows[chosen]["id"]
