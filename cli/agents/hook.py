"""``ltm hook EVENT``: what an agent harness runs at session start, before compaction and
when the agent stops, so memory is resumed and saved without anyone asking.

The harness writes its hook JSON on stdin; the answer goes to stdout in that
harness's own format. Claude Code and Codex share one shape for what ltm uses
(Codex modelled its hooks on Claude Code's):

- ``session-start`` (Claude Code ``SessionStart``, sources startup, resume,
  clear, compact; Codex ``SessionStart``): the newest packet of this project as
  a compact resume block, plus an index of the project's other recent
  packets, as ``hookSpecificOutput.additionalContext``. Nothing when the
  project has no packet.
  https://code.claude.com/docs/en/hooks#sessionstart
  https://developers.openai.com/codex/hooks (SessionStart)
- ``pre-compact`` (``PreCompact``): the agent gets no turn before compaction,
  so the reminder to save goes to the person as ``systemMessage`` (common
  output field of both harnesses), and the session is marked so that the
  ``SessionStart`` with source ``compact`` that follows carries the reminder to
  the agent together with the packet.
  https://code.claude.com/docs/en/hooks#precompact
  https://developers.openai.com/codex/hooks (PreCompact)
- ``stop`` (``Stop``): once per session, after real work (a large transcript,
  or several turns when the harness gives no transcript) and when no packet
  of this project was saved since the session started (on the server, or kept
  in the outbox while it was out of reach), ``{"decision":
  "block", "reason": ...}`` asks the agent to save a packet with the ``save``
  tool. Never when ``stop_hook_active`` says the agent is already continuing
  because of a stop hook, and never twice (a marker in the state dir).
  https://code.claude.com/docs/en/hooks#stop-and-subagentstop-decision-control
  https://developers.openai.com/codex/hooks (Stop: decision block + reason)
- ``session-end`` (Claude Code ``SessionEnd``): the session is over and its
  output reaches nobody; answered with nothing.
  https://code.claude.com/docs/en/hooks#sessionend
- ``user-prompt`` (Claude Code and Codex ``UserPromptSubmit``, Gemini CLI
  ``BeforeAgent``, VS Code's ``UserPromptSubmit``): recall at the prompt. When a
  packet of this project that is not in the session's context yet matches the
  prompt strongly (``ltm.cli.agents.recall``), one fenced line naming it (id,
  age, goal) and how to resume it, as ``hookSpecificOutput.additionalContext``;
  never the same packet twice in a session, nothing when nothing matches well.
  It runs on every prompt, so it gives up sooner (``RECALL_WATCHDOG``).
  https://code.claude.com/docs/en/hooks#userpromptsubmit

The other harnesses take the same events under their own names and answer
shapes (``ltm hooks install`` writes the names; ``--harness`` picks the shape):

- Gemini CLI: ``SessionStart`` and ``BeforeAgent`` answer as above;
  ``PreCompress`` shows ``systemMessage``; ``AfterAgent`` asks for the save with
  ``{"decision": "deny", "reason"}`` (the reason becomes the agent's next prompt).
  https://geminicli.com/docs/hooks/reference
- Cursor: ``sessionStart`` answers ``{"additional_context"}``; ``preCompact``
  shows ``{"user_message"}``; ``stop`` asks with ``{"followup_message"}`` (sent as
  the next user message; ``loop_count`` above 0 means it already was). Its input
  names the session ``conversation_id`` (or ``session_id``) and the folder
  ``workspace_roots``; a ``stop`` whose ``status`` is not ``completed`` (the
  person stopped the agent, or it failed) is left alone. ``beforeSubmitPrompt``
  cannot add context: no recall.
  https://cursor.com/docs/agent/hooks
- GitHub Copilot: the PascalCase events in the VS Code format, which both the
  CLI and VS Code read with Claude Code's fields (the CLI drops what a prompt
  hook answers; VS Code uses it).
  https://docs.github.com/en/copilot/reference/hooks-reference
  https://code.visualstudio.com/docs/agents/reference/hooks-reference

Every hook fails open: a missing server, a revoked token, a broken config,
garbage on stdin or a slow disk give an empty answer and exit status 0 within
the budget (a watchdog ends the process), and one line in
``<state dir>/hook.log``. Packet text is untrusted: it is injected inside a
fenced block, under a header that says it is saved data, not instructions.

Import-light on purpose (no typer, pydantic or MCP SDK): it runs at every
session start.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from ltm.cli.config import private_dir, state_dir, time_scale

BUDGET = 1.5  # seconds the harness may wait at most
WATCHDOG = 1.0  # seconds after main() starts: the process ends, answering nothing (the
# interpreter start before it is part of the budget too, hence the margin)
NET_TIMEOUT = 0.45  # per request to a server (a hook makes at most two)
RECALL_BUDGET = 0.5  # a prompt hook runs before every prompt: it must give up sooner
RECALL_WATCHDOG = 0.4
RECALL_NET_TIMEOUT = 0.2  # per search request (one per word of the prompt searched)
MAX_STDIN = 1 << 20
INDEX_LINES = 10  # other packets listed under the injected one
STOP_MIN_TRANSCRIPT = 100_000  # bytes of transcript that count as real work
STOP_MIN_TURNS = 8  # ... or this many turns, when the harness gives no transcript
SESSION_KEEP = 7 * 86400  # per-session markers older than this are dropped
LOG_MAX = 256 * 1024
HARNESSES = ("claude-code", "codex", "cursor", "copilot", "gemini")
EVENTS = {
    "user-prompt": "user-prompt",
    "userpromptsubmit": "user-prompt",
    "session-start": "session-start",
    "sessionstart": "session-start",
    "pre-compact": "pre-compact",
    "precompact": "pre-compact",
    "stop": "stop",
    "session-end": "session-end",
    "sessionend": "session-end",
}

SAVE_WHAT = (
    "(one packet, 2-10 KB): goal (the outcome, one or two sentences); decisions with why "
    "(locked: true when settled); attempts, above all the FAILED ones with what was learned; "
    "open_questions; and next_step, the first concrete action for whoever resumes. If you "
    "resumed a packet, set parent_id to its id. No secrets or absolute local paths."
)


def save_lines(tools: bool) -> str:
    """How to save, naming the ``save`` tool only where the harness has it."""
    if tools:
        return (
            "Save what this session learned with the ltm `save` tool " + SAVE_WHAT + " (Without"
            " the tool, pipe the packet's JSON to `ltm save -`.)"
        )
    return "Save what this session learned by piping the packet's JSON to `ltm save -` " + SAVE_WHAT


def stop_reason(project: str, tools: bool) -> str:
    # The reason is the agent's next instruction, with no fence: the project's name (from
    # the folder's git remote or its folder, which anyone can set) appears only when it
    # is a plain owner/name that cannot carry words of its own.
    named = project if _plain(project, 128, "._/-") else "the project of this checkout"
    return (
        f"Before you finish: this session did real work on {named} and no ltm packet was "
        "saved for it yet. " + save_lines(tools) + " If nothing here is worth keeping, just stop."
    )


def load_words(tools: bool) -> str:
    """How to load a packet by id: the ``resume`` tool, or the shell command."""
    return "call the ltm `resume` tool with its id" if tools else "run `ltm resume ID` in the shell"


COMPACT_MESSAGE = (
    "ltm: the context is about to be compacted. Ask the agent to save a packet of this "
    "work (ltm save), so nothing learned is lost."
)


class _Skip(Exception):
    """Nothing to answer (not an error: no project, no packet, not the time to remind)."""


# -- entry point -------------------------------------------------------------------


def main(argv: list[str]) -> None:
    """Run one hook; always exits 0, printing the answer or nothing."""
    if argv[:1] in (["-h"], ["--help"]) or not argv:
        print(USAGE)
        return
    started = time.monotonic()
    recall = EVENTS.get(argv[0].lower().replace("_", "-")) == "user-prompt"
    # Every limit here stretches by LTM_TIME_SCALE, for a machine too slow for them.
    limit = (RECALL_WATCHDOG if recall else WATCHDOG) * time_scale()
    budget = (RECALL_BUDGET if recall else BUDGET) * time_scale()
    watchdog = threading.Timer(limit, _give_up, args=(argv, started, budget))
    watchdog.daemon = True
    watchdog.start()
    answer: dict[str, Any] | None = None
    try:
        args = _args(argv)
        stdin = (
            b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read(MAX_STDIN + 1)
        )
        if args.shared:
            # A project's or the plugin's entry: it stands down where the user's own file
            # runs ltm's hook for this event too (the harness runs both; two answers put
            # the packet in the session twice), as the user's runs ltm by its own path.
            from ltm.cli.agents.hook_entries import own_runs

            if own_runs(args.harness, args.event):
                raise _Skip
        payload = _normal(_payload(stdin))
        answer = handle(
            args.event, args.harness, payload, all_scopes=args.all_scopes, teams=args.teams
        )
    except _Skip:
        answer = None
    except BaseException as exc:
        log(f"{' '.join(argv)}: {type(exc).__name__}: {_one_line(str(exc))}")
        answer = None
    watchdog.cancel()
    if answer:
        sys.stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
        sys.stdout.flush()


USAGE = """usage: ltm hook EVENT [--harness claude-code|codex|cursor|copilot|gemini]
                     [--all-scopes] [--team TEAM]... [--shared]

Run by an agent harness (see: ltm hooks install): reads the hook JSON on stdin,
answers on stdout in that harness's format. EVENT: session-start, user-prompt,
pre-compact, stop, session-end. --all-scopes: recall from your teams' packets
of the project too. --team TEAM (repeatable): session start resumes the newest
packet of the project in your personal scope or any of these teams. --shared:
an entry of a file others share (a project's, the plugin's), which answers
nothing where your own hooks file runs ltm's hook for the same event."""


def _give_up(argv: list[str], started: float, budget: float) -> None:
    log(f"{' '.join(argv)}: gave up after {time.monotonic() - started:.2f} s (budget {budget:g} s)")
    os._exit(0)  # nothing printed: the harness goes on without us


class Args(NamedTuple):
    event: str
    harness: str
    all_scopes: bool
    teams: list[str]
    shared: bool  # an entry of a file others share (a project's, the plugin's)


def _args(argv: list[str]) -> Args:
    event = EVENTS.get(argv[0].lower().replace("_", "-"))
    if event is None:
        raise ValueError(f"unknown hook event {argv[0]!r}")
    harness = "claude-code"
    all_scopes = False
    shared = False
    teams: list[str] = []
    rest = argv[1:]
    while rest:
        arg = rest.pop(0)
        name, _, value = arg.partition("=")
        if name == "--harness":
            value = value or (rest.pop(0) if rest else "")
            if value not in HARNESSES:
                raise ValueError(f"unknown harness {value!r}")
            harness = value
        elif arg == "--all-scopes":
            all_scopes = True
        elif arg == "--shared":
            shared = True
        elif name == "--team":
            value = value or (rest.pop(0) if rest else "")
            if not value:
                raise ValueError("--team needs a team name")
            teams.append(value)
        else:
            raise ValueError(f"unexpected argument {arg!r}")
    return Args(event, harness, all_scopes, teams, shared)


def _payload(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_STDIN:
        raise ValueError("hook input larger than 1 MiB")
    data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    return data


def _normal(payload: dict[str, Any]) -> dict[str, Any]:
    """The fields ltm reads, under Claude Code's names whatever the harness calls them:
    Copilot's camelCase format (``sessionId``, ``transcriptPath``), Cursor's
    ``conversation_id``, ``workspace_roots`` and ``loop_count``."""
    out = dict(payload)
    for ours, *theirs in (
        ("session_id", "sessionId", "conversation_id"),
        ("transcript_path", "transcriptPath"),
    ):
        if not isinstance(out.get(ours), str) or not out.get(ours):
            out[ours] = next(
                (payload[k] for k in theirs if isinstance(payload.get(k), str) and payload[k]),
                out.get(ours),
            )
    roots = payload.get("workspace_roots")
    if not (isinstance(out.get("cwd"), str) and out["cwd"]) and isinstance(roots, list) and roots:
        out["cwd"] = roots[0]
    loops = payload.get("loop_count")
    if isinstance(loops, int) and not isinstance(loops, bool) and loops > 0:
        out["stop_hook_active"] = True  # Cursor: this stop follows ltm's own follow-up
    return out


# -- each harness's answer shapes ------------------------------------------------------


def context_answer(harness: str, event: str, text: str) -> dict[str, Any]:
    """Text the agent reads (session start, prompt recall)."""
    if harness == "cursor":
        return {"additional_context": text}
    name = "SessionStart" if event == "session-start" else "UserPromptSubmit"
    if harness == "gemini" and event == "user-prompt":
        name = "BeforeAgent"
    return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}


def notice_answer(harness: str, message: str) -> dict[str, Any]:
    """A message for the person (before compaction)."""
    return {"user_message": message} if harness == "cursor" else {"systemMessage": message}


def continue_answer(harness: str, reason: str) -> dict[str, Any]:
    """Ask the agent to go on with ``reason`` as its next instruction (at the end)."""
    if harness == "cursor":
        return {"followup_message": reason}
    if harness == "gemini":
        return {"decision": "deny", "reason": reason}
    return {"decision": "block", "reason": reason}


# -- the events --------------------------------------------------------------------


def handle(
    event: str,
    harness: str,
    payload: dict[str, Any],
    *,
    all_scopes: bool = False,
    teams: list[str] | None = None,
) -> dict[str, Any] | None:
    """The answer to one hook event (None: answer nothing)."""
    from ltm.cli.errors import StoreUpgrading

    session = Session.of(payload)
    try:
        if event == "session-start":
            return session_start(harness, payload, session, teams=teams or [])
        if event == "user-prompt":
            return user_prompt(harness, payload, session, all_scopes=all_scopes)
    except StoreUpgrading as exc:
        # The first session after an upgrade: the person learns why nothing is resumed.
        log(f"{event}: {exc.message}")
        return notice_answer(harness, f"ltm: {exc.message}") if event == "session-start" else None
    if event == "pre-compact":
        if session is not None:
            session.update(compacted=True)
        return notice_answer(harness, COMPACT_MESSAGE)
    if event == "stop":
        return stop(harness, payload, session)
    return None  # session-end: nobody reads an answer any more


def session_start(
    harness: str, payload: dict[str, Any], session: Session | None, *, teams: list[str]
) -> dict[str, Any] | None:
    source = payload.get("source")
    compacted = source == "compact" or bool(session and session.data.get("compacted"))
    if session is not None:
        if source in (None, "startup", "clear", "new"):
            session.reset()  # a new conversation: a new chance to remind
        session.update(compacted=False)
    waiting = _outbox_note()
    try:
        project = _project(payload)
        rows, newest, origin = _newest(project, teams)
    except Exception:
        if not waiting:
            raise
        # The server may be the very reason saves wait: say so even with nothing to resume.
        return context_answer(harness, "session-start", waiting)
    if session is not None:  # what the agent now has in view: recall points elsewhere
        session.update(context=sorted({*session.data.get("context", []), *_ids(rows)}))
    tools = has_tools(harness, _cwd(payload))
    text = injected(project, newest, rows[1:], remind=compacted, tools=tools, origin=origin)
    if waiting:
        text += "\n" + waiting
    return context_answer(harness, "session-start", text)


def _outbox_note() -> str:
    """A line on saves waiting in the outbox (their server was out of reach), and one on
    packets set aside there (their server refused them for good), else ''. The set-aside
    line comes at each session start while they are there: the one line their delivery
    said may have gone to an agent's MCP log, where nobody reads it."""
    from ltm.cli.client import outbox

    aside = outbox.set_aside()
    note = (
        f"ltm: {outbox.aside(aside)}; the user fixes and pushes each (ltm doctor says how).\n"
        if aside
        else ""
    )
    return _waiting_note() + note


def _waiting_note() -> str:
    from ltm.cli.client import outbox
    from ltm.cli.errors import CliError

    entries = outbox.waiting()
    if not entries:
        return ""
    try:
        stranded = outbox.signed_out(entries)
        away = outbox.elsewhere(entries)
    except CliError:  # a config that names no server: the note says what it can
        stranded, away = [], []
    # Logged out of that server since: no command reaches it until the user signs in again.
    # Another server the default since: only push --outbox goes to it.
    if stranded:
        then = f"they are pushed once the user signs in there again (ltm auth {stranded[0]})"
    elif away:
        then = "commands go to another server now: the user pushes them with ltm push --outbox"
    else:
        then = "they are pushed by the next ltm command that reaches it (or: ltm push --outbox)"
    return (
        f"ltm: {outbox.summary(entries)}: kept on this machine because the server could not"
        f" be reached; {then}. They are not lost: do not save them again.\n"
    )


def user_prompt(
    harness: str, payload: dict[str, Any], session: Session | None, *, all_scopes: bool
) -> dict[str, Any] | None:
    """Recall: a hint naming the packet this prompt is about, once per packet and session."""
    prompt = payload.get("prompt")
    if harness == "cursor" or session is None or not isinstance(prompt, str):
        raise _Skip  # no way to add context, or to remember what was hinted
    from ltm.cli.agents.recall import best, hint, whose
    from ltm.cli.client.backend import open_backend

    project = _project(payload)
    skip = {*session.data.get("context", []), *session.data.get("hinted", [])}
    backend = open_backend(timeout=RECALL_NET_TIMEOUT * time_scale(), deliver=False, migrate=False)
    try:
        found = best(
            backend,
            project,
            prompt,
            skip=skip,
            since=str(session.data.get("started", "")),
            all_scopes=all_scopes,
        )
        mine = whose(backend, found) if found is not None else True
    finally:
        backend.close()
    if found is None:
        raise _Skip
    text = hint(found, clean=_clean, mine=mine, tools=has_tools(harness, _cwd(payload)))
    if not text:
        raise _Skip
    # Remembered before answering: never the same packet twice, even if we die next.
    session.update(hinted=[*session.data.get("hinted", []), found["id"]])
    return context_answer(harness, "user-prompt", text)


def _ids(rows: list[dict[str, str]]) -> list[str]:
    return [row["id"] for row in rows if isinstance(row.get("id"), str)]


def stop(harness: str, payload: dict[str, Any], session: Session | None) -> dict[str, Any] | None:
    if payload.get("stop_hook_active") is True or session is None:
        raise _Skip  # continuing because of a stop hook already, or no way to count
    turns = int(session.data.get("turns", 0)) + 1
    session.update(turns=turns)
    if session.data.get("reminded"):
        raise _Skip
    status = payload.get("status")
    if harness == "cursor" and isinstance(status, str) and status != "completed":
        # Cursor runs stop when the person stops the agent too ("aborted", or "error"):
        # a follow-up would set it going again against their wish (Claude Code's Stop
        # does not run on an interrupt). https://cursor.com/docs/agent/hooks (stop)
        raise _Skip
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript:
        try:
            worked = Path(transcript).stat().st_size >= STOP_MIN_TRANSCRIPT
        except OSError:
            worked = turns >= STOP_MIN_TURNS
    else:
        worked = turns >= STOP_MIN_TURNS
    if not worked:
        raise _Skip
    project = _project(payload)
    started = str(session.data.get("started", "~"))
    if _kept_since(project, started):
        raise _Skip  # saved during this session, and waiting in the outbox for its server
    rows = _list(project, 1)
    if rows and rows[0].get("created_at", "") >= started:
        raise _Skip  # a packet of this project was saved during this session
    session.update(reminded=True)  # before answering: at most once, even if we die next
    return continue_answer(harness, stop_reason(project, has_tools(harness, _cwd(payload))))


def _kept_since(project: str, started: str) -> bool:
    """Whether a packet of ``project`` was saved since ``started`` and kept in the outbox
    (its server was out of reach): the hooks push nothing, so the server cannot know."""
    from ltm.cli.client import outbox

    for entry in outbox.waiting():
        if entry.kept_at[:19] < started[:19]:  # to the second, as the session's start
            continue
        from ltm.search import project_of  # only with a packet kept in this session

        try:
            data = json.loads(entry.body)
        except ValueError:
            continue
        if isinstance(data, dict) and project_of(data) == project:
            return True
    return False


# -- what is injected ----------------------------------------------------------------


def injected(
    project: str,
    packet: dict[str, Any],
    others: list[dict[str, str]],
    *,
    remind: bool = False,
    tools: bool = True,
    origin: Any = None,
) -> str:
    """The session-start context: the packet (and the index of the others) framed as saved
    data by ``ltm.resume.frame``, as every path to an agent frames it, then how to go on.

    ``origin`` (``ltm.resume.Origin``) says who saved the packet: a personal listing holds
    only the caller's own packets (on our server, the reference's and the local store
    alike), framed as the user's own (the default); a team's packet is framed by the
    author the server names. The project's name comes from this checkout and sits
    inside the frame with everything else that is not our own words.
    """
    from ltm.cli.terminal.output import one_line, relative_time
    from ltm.resume import Origin, frame, render

    packet_id = _clean(str(packet.get("id", "")))
    body = render(packet, compact=True)
    if others:
        body += "\n## Other recent packets of this project (id, age, goal)\n"
        body += "".join(
            f"- {_clean(row['id'])} · {relative_time(row['created_at'])} · "
            + (f"team {one_line(_clean(row['team']), 40)} · " if row.get("team") else "")
            + f"{one_line(_clean(row['goal']), 90)}\n"
            for row in others[:INDEX_LINES]
        )
    saved = packet.get("created_at")
    saved = saved if isinstance(saved, str) else ""
    origin = (
        Origin(mine=True, saved_at=saved) if origin is None else origin._replace(saved_at=saved)
    )
    # A team's packet is continued in that team: saved elsewhere, its parent_id names a
    # packet that scope cannot read, and the save is refused.
    team = one_line(_clean(origin.team), 40) if origin.team else ""
    if tools:
        how = f'the ltm `save` tool with team "{team}"' if team else "the ltm `save` tool"
    else:
        how = f"`ltm save - -t {team}`" if team else "`ltm save -`"
    lines = [
        "ltm: saved memory for the project of this checkout.",
        "",
        # The project's name comes from the folder's git remote, which anyone can set:
        # it sits inside the fence with the rest of the data.
        frame(body, origin, about=[f"Project: {project}"]).rstrip("\n"),
        "",
        "If the user wants to continue this work, its Next step is where it stopped; when "
        f"you save progress ({how}), set"
        f' "parent_id" to the packet\'s id'
        f" ({packet_id if _plain(packet_id, 64, '._:-') else 'its Id line'})."
        # Only when there is a list: a pointer to nothing sends the agent looking for it.
        + (f" To load another packet listed above in full, {load_words(tools)}." if others else ""),
    ]
    if remind:
        lines += ["", "The context was just compacted. " + save_lines(tools)]
    return "\n".join(lines) + "\n"


def has_tools(harness: str, cwd: str | None) -> bool:
    """Whether the harness has the ltm MCP tools (``ltm.cli.agents.wired``); the hooks name
    a tool only then."""
    from ltm.cli.agents.wired import has_tools as wired

    try:
        return wired(harness, cwd)
    except Exception:  # an odd config file: name the shell commands, which always work
        return False


def _cwd(payload: dict[str, Any]) -> str | None:
    cwd = payload.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def _plain(text: str, limit: int, marks: str) -> bool:
    """Text that may stand outside the frame (an id by the id rule's characters, a plain
    owner/name): ASCII letters, digits and ``marks`` only, no spaces, at most ``limit``."""
    return 0 < len(text) <= limit and all(
        ch.isascii() and (ch.isalnum() or ch in marks) for ch in text
    )


def _clean(text: str) -> str:
    """Printable text only: no terminal escapes or invisible controls in the context, as
    every path to an agent cleans packet text (``ltm.resume.clean``: already imported
    wherever there is a packet to show, with the terminal's helpers)."""
    from ltm.resume import clean

    return clean(text)


# -- reading packets -----------------------------------------------------------------


def _project(payload: dict[str, Any]) -> str:
    from ltm.cli.project import current_project

    cwd = payload.get("cwd")
    found = current_project(cwd if isinstance(cwd, str) and cwd else None)
    if found is None:
        raise _Skip
    return found[0]


def _list(project: str, limit: int) -> list[dict[str, str]]:
    from ltm.cli.client.backend import open_backend

    backend = open_backend(timeout=NET_TIMEOUT * time_scale(), deliver=False, migrate=False)
    try:
        return backend.list(limit=limit, project=project)
    finally:
        backend.close()


def _newest(
    project: str, teams: list[str] | tuple[str, ...] = ()
) -> tuple[list[dict[str, str]], dict[str, Any], Any]:
    """The project's newest packet across the personal scope and ``teams``, the other
    recent ones (each row with its ``team``, None for personal), and who saved the newest
    (``ltm.resume.Origin``). The scopes are listed side by side (one thread each, so
    several fit the hook's budget); a scope that fails (a team one is no longer in, a
    server out of reach) is left out and logged, the others still answer."""
    from ltm.cli.errors import StoreUpgrading
    from ltm.resume import Origin

    scopes: list[str | None] = [None, *dict.fromkeys(teams)]
    found: dict[str | None, tuple[Any, list[dict[str, str]]]] = {}
    upgrading: list[StoreUpgrading] = []

    def listing(team: str | None) -> None:
        from ltm.cli.client.backend import open_backend

        try:
            backend = open_backend(
                team=team, timeout=NET_TIMEOUT * time_scale(), deliver=False, migrate=False
            )
        except StoreUpgrading as exc:
            upgrading.append(exc)  # said instead of the resume, when no scope answers
            return
        except Exception as exc:
            log(f"session-start: scope {team or 'personal'}: {_one_line(str(exc))}")
            return
        try:
            rows = backend.list(team=team, limit=INDEX_LINES + 1, project=project)
        except Exception as exc:
            backend.close()
            log(f"session-start: scope {team or 'personal'}: {_one_line(str(exc))}")
            return
        found[team] = (backend, [{**row, "team": team} for row in rows])  # type: ignore[dict-item]

    if len(scopes) == 1:
        listing(None)
    else:
        workers = [threading.Thread(target=listing, args=(team,), daemon=True) for team in scopes]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    try:
        rows = _once(
            sorted(
                (row for _, listed in found.values() for row in listed),
                key=lambda row: (str(row.get("created_at", "")), str(row.get("id", ""))),
                reverse=True,
            )
        )
        if not rows:
            if upgrading:
                raise upgrading[0]
            raise _Skip
        team = rows[0]["team"]
        backend = found[team][0]
        body = backend.get(rows[0]["id"], team=team)
        origin = Origin(mine=True)
        if team is not None:
            origin = _team_origin(backend, team, rows[0]["id"])
        elif (copied := backend.copied_from(rows[0]["id"])) is not None:
            # the local store keeps copies of others' packets (pull --to-local, import)
            origin = Origin(mine=False, author_id=copied["id"], author_name=copied["name"])
    finally:
        for backend, _ in found.values():
            backend.close()
    packet = json.loads(body)
    if not isinstance(packet, dict):
        raise ValueError(f"packet {rows[0]['id']} is not a JSON object")
    return rows, _text_only(packet), origin


def _once(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Each packet once: a team's packet copied into the local store (``pull --to-local``,
    ``import``) is listed by both scopes; the team's row stays, where it is continued."""
    kept: dict[str, dict[str, str]] = {}
    for row in rows:
        if row["id"] not in kept or (kept[row["id"]]["team"] is None and row["team"]):
            kept[row["id"]] = row
    return [row for row in rows if kept[row["id"]] is row]


def _team_origin(backend: Any, team: str, packet_id: str) -> Any:
    """Who saved a team's packet: the author the server named when it was fetched, whether
    that is the caller, and their display name among the team's members."""
    from ltm.resume import Origin

    author = backend.stored_by(packet_id) or ""
    if not author:
        return Origin(mine=None, team=team)
    mine = backend.is_me(author)
    name = ""
    try:
        for member in backend.members(team):
            if member.get("user_id") == author and isinstance(member.get("display"), str):
                name = member["display"]
    except Exception as exc:  # no member list: the author's id alone
        log(f"session-start: members of {team}: {_one_line(str(exc))}")
    return Origin(mine=mine, author_id=author, author_name=name, team=team)


def _text_only(value: Any) -> Any:
    """The packet with every string cleaned of control characters."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, dict):
        return {k: _text_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_text_only(v) for v in value]
    return value


# -- state: per-session markers and the log -----------------------------------------


class Session:
    """What the hooks remember about one harness session (by its id), in one small file."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def of(cls, payload: dict[str, Any]) -> Session | None:
        session_id = payload.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            return None
        folder = state_dir() / "sessions"
        name = _file_name(session_id)
        path = folder / f"{name}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict):
            data = {}
            _sweep(folder)
        if "started" not in data:
            data["started"] = _now()
        return cls(path, data)

    def reset(self) -> None:
        self.data = {"started": _now()}

    def update(self, **changes: Any) -> None:
        self.data.update(changes)
        private_dir(state_dir())
        self.path.parent.mkdir(exist_ok=True, mode=0o700)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        _write_private(tmp, json.dumps(self.data).encode("utf-8"), append=False)
        os.replace(tmp, self.path)


def _file_name(session_id: str) -> str:
    """A marker's file name: the id itself when it is a plain one (harnesses use UUIDs),
    else its hash (hashlib costs a few ms, so only odd ids pay for it)."""
    if len(session_id) <= 64 and session_id.isascii() and session_id.replace("-", "").isalnum():
        return session_id
    import hashlib

    return "h-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sweep(folder: Path) -> None:
    """Drop markers of sessions older than a week (runs when a new session shows up), and
    the half-written ones (``.NAME.json.PID``) a watchdog ended mid-write."""
    cutoff = time.time() - SESSION_KEEP
    try:
        for entry in os.scandir(folder):
            ours = entry.name.endswith(".json") or entry.name.startswith(".")
            if ours and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
    except OSError:
        pass


def log(message: str) -> None:
    """One line in ``<state dir>/hook.log``; never raises (it is the last resort)."""
    try:
        folder = private_dir(state_dir())
        path = folder / "hook.log"
        try:
            if path.stat().st_size > LOG_MAX:
                os.replace(path, folder / "hook.log.1")
        except FileNotFoundError:
            pass
        _write_private(path, f"{_now()} {_one_line(message)}\n".encode(), append=True)
    except Exception:
        pass


def _write_private(path: Path, data: bytes, *, append: bool) -> None:
    """Write to a file only its owner may read (0600, set even on one an earlier ltm
    made 0644), never through a symlink planted in its place."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    try:
        if os.name == "posix":
            os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 500 else flat[:499] + "…"
