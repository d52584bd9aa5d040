"""The verbs that must answer fast, without the argument parser.

``ltm --version`` and ``ltm example`` (agents call them at session start),
``ltm ls``, ``ltm resume`` and ``ltm show`` (what people and agents run most,
usually against a server), ``ltm save`` (people and scripts run it in loops; its
body is ``ltm.cli.client.send``'s), ``ltm export`` and ``ltm import`` (backups and moves
of thousands of packets, where the parser's start-up is a tenth of the whole; their
bodies are ``ltm.cli.client.portable``'s): their bodies live here or there, importable
without typer (typer, and the pydantic it loads to coerce arguments, cost more than the
whole rest of most commands). ``ltm.cli.start.entry`` hands their plain forms to ``run``;
anything it does not recognise (help, a typo, an interactive pick) goes to the
typer commands, which call the same bodies.

One idea, two parsers: ``OPTIONS``/``FLAGS_OF``/``VALUES_OF`` below name only
options the verb's typer command declares too (same flag or value, same
parameter name), and both paths print the same bytes. ``tests/test_cli_fast.py``
holds them to that, so a new option goes into the typer command first and
here only if its plain form must be fast.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, safe, terminal_bytes
from ltm.present import decode_packet, earlier_count, marked, summary, where_label

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
    """The project to filter on: ``--project NAME``, or ``--here`` (this directory's)."""
    if project is not None and here:
        raise CliError("give --project NAME or --here, not both")
    if project is not None:
        if not project.strip():
            raise CliError("--project needs a project name")
        return project
    if not here:
        return None
    from ltm.cli.project import current_project

    found = current_project()
    if found is None:
        raise CliError("--here: no project found in this directory; use --project NAME")
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
    finally:
        backend.close()
    more = listing.next_page_token
    if as_json:
        out: dict[str, Any] = {"packets": rows}
        if more:
            out["next_page_token"] = more
        text = json.dumps(out, ensure_ascii=False, indent=2) + "\n"
        _write(terminal_bytes(text.encode("utf-8", "surrogateescape")))
        return
    if not rows:
        where = where_label(backend, team, filters.project)
        if filters != Filters(project=filters.project) or page_token:
            info(f"no packets match in {where}")
        else:
            info(f"no packets yet in {where}; save one with: ltm save FILE")
        return
    width = _width(shown)
    for row, short in zip(rows, shown, strict=True):
        when = safe(relative_time(row["created_at"]))
        line = f"{short:<{width}}  {when:<12}  {one_line(row['goal'], 72)}"
        print(safe(line))  # packet text: no terminal control gets through
    if more:
        info(f"more packets: add --page-token {more} (or --all for every page)")


def search_packets(
    query: str, *, team: str | None, all_scopes: bool, limit: int, as_json: bool, local: bool
) -> None:
    """``ltm search``: ranked matches, each with where it matched and a marked snippet."""
    import os

    from ltm.cli.client.backend import check_query, open_backend
    from ltm.cli.terminal.output import one_line, relative_time, safe

    check_query(query)
    backend = open_backend(local=local, team=team)
    try:
        hits = backend.search(query, team=team, all_scopes=all_scopes, limit=limit)
        shown = [] if as_json else shown_ids(backend, [str(hit["id"]) for hit in hits])
    finally:
        backend.close()
    if as_json:
        print(json.dumps({"results": hits}, ensure_ascii=False, indent=2))
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
        return
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    width = _width(shown)
    for hit, short in zip(hits, shown, strict=True):
        scope = f"[{safe(str(hit['team']))}] " if hit.get("team") else ""
        when = relative_time(str(hit.get("created_at", "")))
        goal = safe(one_line(str(hit.get("goal", "")), 72))
        print(f"{safe(short):<{width}}  {when:<12}  {scope}{goal}")
        field = safe(str(hit.get("field", "")))
        print(f"    {field}: {marked(hit, color=color)}")


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
    if as_json:
        print(json.dumps({"packets": rows, "complete": complete}, ensure_ascii=False, indent=2))
        return
    if not complete:
        info("earlier packets of this thread are gone or not visible to you; shown from there")
    width = _width(shown)
    for row, short in zip(rows, shown, strict=True):
        when = relative_time(row["created_at"])
        goal = safe(one_line(row["goal"], 48))
        step = safe(one_line(str(row.get("next_step", "")), 48))
        print(f"{safe(short):<{width}}  {when:<12}  {goal}  -> next: {step}")


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

    ``project``/``here`` narrow the choice to one project's packets (an explicit id wins).
    """
    from ltm.cli.client.backend import open_backend
    from ltm.resume import render

    project = project_filter(project, here)
    interactive = ref is None and not as_json and sys.stdin.isatty() and sys.stdout.isatty()
    if interactive and sys.platform == "win32":
        interactive = False  # the picker needs termios: print the newest, as off a terminal
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
    packet_id = str(packet.get("id", ref))
    if as_json:
        text = json.dumps({"id": packet_id, "resume": block}, ensure_ascii=False) + "\n"
        _write(terminal_bytes(text.encode("utf-8", "surrogateescape")))
        return
    if copy if copy is not None else interactive:
        from ltm.cli.terminal.clipboard import copy as to_clipboard

        problem = to_clipboard(block)
        if problem is None:
            lines = block.count("\n")
            info(f"copied the resume block of {packet_id} ({lines} lines) to the clipboard")
            return
        info(f"warning: {problem}; printing the block instead")
    # On a terminal the block is read, so its controls are shown escaped; piped (to an
    # agent, a file, the clipboard) it goes as written.
    _write(terminal_bytes(block.encode("utf-8", "surrogateescape")))


def _write(raw: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(raw)
    sys.stdout.flush()


def show_packet(ref: str, *, team: str | None, as_json: bool, local: bool) -> None:
    """A packet as a readable summary (naming its children), or its stored JSON."""
    from ltm.cli.client.backend import open_backend

    backend = open_backend(local=local, team=team)
    children: list[dict[str, Any]] = []
    published: tuple[str, str] | None = None
    try:
        body = backend.get(ref, team=team)
        if not as_json:
            packet = decode_packet(body, ref)
            packet_id = str(packet.get("id", ref))
            # Only a server publishes; it says so on the read itself (RemoteBackend.published).
            known = getattr(backend, "published", None)
            published = known(packet_id) if known is not None else None
            try:  # an extension: a reference server cannot list children, so none are named
                children = backend.children(packet_id, team=team)
            except CliError:
                children = []
    finally:
        backend.close()
    if as_json:
        _write(terminal_bytes(body + b"\n"))
        return
    shown = summary(packet, children=[str(c["id"]) for c in children], published=published)
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


# -- the fast path ------------------------------------------------------------------


def run(argv: list[str]) -> bool:
    """Run a fast verb when ``argv`` is a plain form of it; False to use typer."""
    if argv == ["--version"]:
        print_version()
        return True
    if argv[:1] == ["example"] and argv[1:] in ([], ["--resume"], ["--reference"]):
        print_example(resume=argv[1:] == ["--resume"], reference=argv[1:] == ["--reference"])
        return True
    verb, rest = argv[0], argv[1:]
    parsed = _parse(rest, flags=FLAGS)
    if parsed is None:
        return False
    positional, values, flags = parsed
    team = values.get("team")
    if flags - FLAGS_OF.get(verb, set()) or set(values) - VALUES_OF.get(verb, set()):
        return False  # not this verb's: typer says so
    if verb == "save":
        if len(positional) > 1:
            return False
        from ltm.cli.client.send import send

        send(
            positional[0] if positional else "-",
            fill=True,
            team=team,
            lenient="--lenient" in flags,
            allow_unredacted="--allow-unredacted" in flags,
            local="--local" in flags,
            continues=values.get("continues"),
        )
        return True
    if verb == "export":
        output = values.get("output")
        if positional or (output is not None and not _typer_takes(output)):
            return False
        from pathlib import Path

        from ltm.cli.client.portable import export_to

        export_to(
            None if output is None else Path(output),
            team=team,
            all_scopes="--all" in flags,
            local="--local" in flags,
        )
        return True
    if verb == "import":
        if len(positional) != 1:
            return False
        from ltm.cli.client.portable import import_from

        status = import_from(
            positional[0],
            team=team,
            lenient="--lenient" in flags,
            allow_unredacted="--allow-unredacted" in flags,
            replace="--replace" in flags,
            local="--local" in flags,
        )
        if status:
            sys.exit(status)
        return True
    raw = values.get("limit", "20" if verb == "search" else "50")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        return False
    scoped = {"project": values.get("project"), "here": "--here" in flags}
    if verb == "ls":
        if positional:
            return False
        from ltm.cli.client.backend import Filters

        filters = Filters(
            tag=values.get("tag"),
            since=values.get("since"),
            until=values.get("until"),
            author=values.get("author"),
        )
        every = "--all" in flags
        list_packets(
            limit=MAX_LIMIT if every and "limit" not in values else int(raw),
            team=team,
            as_json="--json" in flags,
            local="--local" in flags,
            filters=filters,
            page_token=values.get("page_token"),
            every=every,
            **scoped,  # type: ignore[arg-type]
        )
        return True
    if verb == "search":
        if not positional or (team and "--all-scopes" in flags):
            return False
        search_packets(
            " ".join(positional),
            team=team,
            all_scopes="--all-scopes" in flags,
            limit=int(raw),
            as_json="--json" in flags,
            local="--local" in flags,
        )
        return True
    if verb == "log":
        if len(positional) != 1:
            return False
        log_thread(positional[0], team=team, as_json="--json" in flags, local="--local" in flags)
        return True
    if verb == "resume":
        if len(positional) > 1 or "limit" in values or {"--copy", "--no-copy"} <= flags:
            return False
        ref = positional[0] if positional else None
        copy = True if "--copy" in flags else False if "--no-copy" in flags else None
        resume_packet(
            ref,
            team=team,
            local="--local" in flags,
            copy=copy,
            as_json="--json" in flags,
            **scoped,  # type: ignore[arg-type]
        )
        return True
    if verb == "show":
        if (
            len(positional) != 1
            or "limit" in values
            or "project" in values
            or flags & {"--copy", "--no-copy", "--here"}
        ):
            return False
        show_packet(positional[0], team=team, as_json="--json" in flags, local="--local" in flags)
        return True
    return False


OPTIONS = {
    "-t": "team",
    "--team": "team",
    "-n": "limit",
    "--limit": "limit",
    "--project": "project",
    "--tag": "tag",
    "--since": "since",
    "--until": "until",
    "--author": "author",
    "--page-token": "page_token",
    "--continues": "continues",
    "-o": "output",
    "--output": "output",
}
FLAGS = {
    "--json",
    "--local",
    "--copy",
    "--no-copy",
    "--all",
    "--all-scopes",
    "--here",
    "--lenient",
    "--allow-unredacted",
    "--replace",
}
# What each fast verb takes; anything else goes to typer, which explains the mistake.
_COMMON = {"--json", "--local"}
FLAGS_OF = {
    "ls": _COMMON | {"--all", "--here"},
    "resume": _COMMON | {"--copy", "--no-copy", "--here"},
    "show": _COMMON,
    "search": _COMMON | {"--all-scopes"},
    "log": _COMMON,
    "save": {"--local", "--lenient", "--allow-unredacted"},
    "export": {"--local", "--all"},
    "import": {"--local", "--lenient", "--allow-unredacted", "--replace"},
}
VALUES_OF = {
    "ls": {"team", "limit", "project", "tag", "since", "until", "author", "page_token"},
    "resume": {"team", "project"},
    "show": {"team"},
    "search": {"team", "limit"},
    "log": {"team"},
    "save": {"team", "continues"},
    "export": {"team", "output"},
    "import": {"team"},
}


def _typer_takes(output: str) -> bool:
    """Whether typer takes ``-o FILE`` as given: its path type refuses a file that exists
    but cannot be read (click's ``Path(readable=True)``), and that refusal is its to word."""
    import os

    return os.access(output, os.R_OK) or not os.path.exists(output)


def _parse(
    args: list[str], *, flags: set[str]
) -> tuple[list[str], dict[str, str], set[str]] | None:
    """Positionals, option values and flags; None for anything unusual (let typer say it)."""
    positional: list[str] = []
    values: dict[str, str] = {}
    seen: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if arg in flags:
            if arg in seen:
                return None
            seen.add(arg)
        elif name in OPTIONS and name.startswith("--") and eq:
            if OPTIONS[name] in values or not inline:
                return None
            values[OPTIONS[name]] = inline
        elif arg in OPTIONS:
            if OPTIONS[arg] in values or i + 1 >= len(args) or args[i + 1].startswith("-"):
                return None
            values[OPTIONS[arg]] = args[i + 1]
            i += 1
        elif (arg.startswith("-") and arg != "-") or not arg:
            return None  # "-" alone is an argument (standard input), as typer takes it
        else:
            positional.append(arg)
        i += 1
    return positional, values, seen
