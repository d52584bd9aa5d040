"""``ltm hooks install|uninstall HARNESS``: wire ``ltm hook`` into an agent harness.

Each harness keeps its hooks in a JSON file of its own shape; the files, events
and entry fields below follow each one's documentation:

- Claude Code: ``settings.json`` under ``hooks.<Event>``, a list of
  ``{"matcher", "hooks": [{"type": "command", "command", "timeout"}]}`` groups;
  the user's ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR`` when set), a
  project's ``.claude/settings.json``.
  https://code.claude.com/docs/en/hooks (Configuration)
- Codex: the same shape in ``hooks.json`` beside ``config.toml`` (``~/.codex``,
  or ``$CODEX_HOME``; a project's ``.codex``). Older releases keep hooks behind
  ``[features] codex_hooks = true`` (newer ones enable them by default and keep
  ``codex_hooks`` as an alias of ``hooks``), so the flag is set when the file says
  nothing about it; a new hook must be trusted once in Codex before it runs.
  https://developers.openai.com/codex/hooks
- Gemini CLI: ``settings.json`` (``~/.gemini``, a project's ``.gemini``) under
  ``hooks.<Event>`` in Claude Code's group shape; ``timeout`` is in milliseconds
  and ``name`` identifies the hook to ``/hooks enable|disable``. Its events are
  ``SessionStart``, ``PreCompress``, ``AfterAgent`` and ``BeforeAgent``.
  https://geminicli.com/docs/hooks/reference
- Cursor: ``hooks.json`` (``~/.cursor``, a project's ``.cursor``):
  ``{"version": 1, "hooks": {"sessionStart": [{"command", "timeout"}], ...}}``,
  one flat list of entries per event.
  https://cursor.com/docs/agent/hooks
- GitHub Copilot (the CLI and VS Code's agent mode): ``*.json`` files in
  ``~/.copilot/hooks`` (``$COPILOT_HOME/hooks``) or a repository's
  ``.github/hooks``; ltm writes its own ``ltm.json`` there, flat lists of
  ``{"type": "command", "command", "bash", "timeout"}`` under the PascalCase
  event names, which both read with Claude Code's field names (snake_case input,
  ``hookSpecificOutput`` output).
  https://docs.github.com/en/copilot/reference/hooks-reference
  https://code.visualstudio.com/docs/agents/reference/hooks-reference

The events: session start (inject the project's newest packet), before
compaction and when the agent stops (remind to save), and, where the harness
lets a hook add context to a prompt and the user did not say ``--no-recall``,
each prompt (recall a matching packet).

A user's own file runs this very ltm by its absolute path (an editor started from the
desktop may not have ~/.local/bin on PATH), with the ``LTM_*`` directories the shell sets.
A project's file (``--project``) is committed for the team, so it holds nothing of this
user's: each entry runs the ``ltm`` on PATH and does nothing where there is none
(``PORTABLE``).

``--write`` edits the file in place, touching exactly the entries ltm wrote: an
entry is ltm's when its command runs an ``ltm`` program with ``hook EVENT``
(past any ``NAME=value`` it sets first), nothing looser, so a user's
``notify-send 'ltm hook done'`` is never taken for one. A user's own hook that
shares a group with an ltm entry stays where it is; ltm's entry leaves that
group and ltm's own group is added; what the user set on ltm's own group or entry
(a matcher, Cursor's ``loop_limit``) stays. A second run changes nothing; ``uninstall``
removes exactly ltm's entries (and the Codex feature flag line it added, unless hooks
of the user's own are left that need it).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ltm.cli.agents.hook_entries import PORTABLE, hook_verb, hooks_file
from ltm.cli.agents.mcp.install import (
    JsoncError,
    MergeError,
    append_item,
    ltm_command,
    merge,
    parse_jsonc,
    passed_env,
    read_config,
    remove,
    remove_items,
    save_config,
)
from ltm.cli.errors import CliError

TIMEOUT = 5  # seconds the harness waits; ltm hook gives up by itself within 1.5 s
FLAG_LINE = "codex_hooks = true  # added by ltm hooks install"
HEADER_LINE = "[features]  # added by ltm hooks install"
RECALL = "user-prompt"  # the verb of the prompt-recall hook


class Event(NamedTuple):
    name: str  # the harness's event name
    verb: str  # what ltm hook is asked to do


class Harness(NamedTuple):
    name: str
    display: str
    hooks_file: Path
    config_toml: Path | None  # where Codex's feature flag goes
    events: tuple[Event, ...]  # every event ltm can wire, the recall one included
    grouped: bool  # Claude Code's {"matcher", "hooks": [...]} groups, else flat entries
    version: int | None  # a top-level "version" the file carries (Cursor, Copilot)
    shared: bool = False  # a project's file, committed for the team: the portable command


# The events of each harness, in the order they are written (recall last).
CLAUDE_EVENTS = (
    Event("SessionStart", "session-start"),
    Event("PreCompact", "pre-compact"),
    Event("Stop", "stop"),
    Event("UserPromptSubmit", RECALL),
)
GEMINI_EVENTS = (
    Event("SessionStart", "session-start"),
    Event("PreCompress", "pre-compact"),
    Event("AfterAgent", "stop"),
    Event("BeforeAgent", RECALL),
)
# Cursor's beforeSubmitPrompt can only let a prompt through or stop it (no added
# context), so there is no recall hook for Cursor.
CURSOR_EVENTS = (
    Event("sessionStart", "session-start"),
    Event("preCompact", "pre-compact"),
    Event("stop", "stop"),
)
NAMES = ("claude-code", "codex", "cursor", "copilot", "gemini")
# The events every installed harness must have for memory to work (doctor checks them).
EVENTS = tuple((e.name, e.verb) for e in CLAUDE_EVENTS if e.verb != RECALL)


def harness(name: str, *, project: bool) -> Harness:
    return _harness(name, project=project)._replace(shared=project)


def _harness(name: str, *, project: bool) -> Harness:
    if name not in NAMES:
        raise CliError(f"unknown harness {name!r}: {', '.join(NAMES)}", exit_code=2)
    file = hooks_file(name, project=project)
    if name == "claude-code":
        return Harness(name, "Claude Code", file, None, CLAUDE_EVENTS, True, None)
    if name == "codex":
        toml = file.parent / "config.toml"
        return Harness(name, "Codex", file, toml, CLAUDE_EVENTS, True, None)
    if name == "gemini":
        return Harness(name, "Gemini CLI", file, None, GEMINI_EVENTS, True, None)
    if name == "cursor":
        return Harness(name, "Cursor", file, None, CURSOR_EVENTS, False, 1)
    return Harness(name, "GitHub Copilot", file, None, CLAUDE_EVENTS, False, 1)


def can_recall(h: Harness) -> bool:
    return any(e.verb == RECALL for e in h.events)


def wanted(h: Harness, *, recall: bool) -> tuple[Event, ...]:
    return tuple(e for e in h.events if recall or e.verb != RECALL)


# -- the commands and entries ltm writes ---------------------------------------------


# The start of a command that runs the ``ltm`` on each person's PATH and, where there is
# none, ends at once with status 0 and no output, so the harness goes on as if there were no
# hook. It needs a POSIX shell (``command -v``, ``||``): Claude Code and Gemini CLI document
# hook commands as shell commands and Copilot CLI runs the ``bash`` field with bash; VS Code's
# ``command`` (the cross-platform one), Codex's and Cursor's ``command`` are given as command
# lines without naming the shell. On Windows none of them is sure to be POSIX (docs/agents.md).
# https://code.claude.com/docs/en/hooks, https://geminicli.com/docs/hooks/reference,
# https://docs.github.com/en/copilot/reference/hooks-reference,
# https://code.visualstudio.com/docs/agents/reference/hooks-reference,
# https://developers.openai.com/codex/hooks, https://cursor.com/docs/agent/hooks


def command(
    verb: str,
    harness_name: str,
    *,
    all_scopes: bool = False,
    teams: tuple[str, ...] = (),
    portable: bool = False,
) -> str:
    """The shell command a harness runs: this very ltm, with the store it uses; or, for a
    file others share (a project's, the plugin's), ``portable``: the ltm on each person's
    PATH with their own settings, nothing of this user's (no home path, no LTM_* value)."""
    args = ["hook", verb, "--harness", harness_name]
    if all_scopes and verb == RECALL:
        args.append("--all-scopes")
    if verb == "session-start":
        for team in teams:  # each team's newest packet of the project competes at start
            args += ["--team", team]
    if portable:
        # --shared: it stands down where the user's own file runs ltm's hook for the same
        # event (the harness runs both; ``ltm.cli.agents.hook_entries.own_runs``).
        return PORTABLE + shlex.join(["ltm", *args, "--shared"])
    env = [f"{k}={shlex.quote(v)}" for k, v in passed_env().items()]
    return " ".join([*env, shlex.join([*ltm_command(), *args])])


def entry(
    h: Harness, event: Event, *, all_scopes: bool = False, teams: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One hook entry in the harness's own fields."""
    run = command(event.verb, h.name, all_scopes=all_scopes, teams=teams, portable=h.shared)
    if h.name == "gemini":  # milliseconds, and a name for /hooks enable|disable
        name = f"ltm-{event.verb}"
        return {"name": name, "type": "command", "command": run, "timeout": 1000 * TIMEOUT}
    if h.name == "cursor":
        return {"command": run, "timeout": TIMEOUT}
    if h.name == "copilot":  # "bash" for the CLI's older releases, "command" for VS Code
        return {"type": "command", "command": run, "bash": run, "timeout": TIMEOUT}
    return {"type": "command", "command": run, "timeout": TIMEOUT}


def item(
    h: Harness, event: Event, *, all_scopes: bool = False, teams: tuple[str, ...] = ()
) -> dict[str, Any]:
    """What goes in the event's list: a group of its own (no matcher: every source and
    trigger) or, in the flat files, the entry itself."""
    one = entry(h, event, all_scopes=all_scopes, teams=teams)
    return {"hooks": [one]} if h.grouped else one


def snippet(
    h: Harness, *, recall: bool, all_scopes: bool, teams: tuple[str, ...] = ()
) -> dict[str, Any]:
    hooks = {
        e.name: [item(h, e, all_scopes=all_scopes, teams=teams)] for e in wanted(h, recall=recall)
    }
    return {"version": h.version, "hooks": hooks} if h.version is not None else {"hooks": hooks}


def is_ours_entry(value: Any) -> bool:
    """One hook entry that runs ``ltm hook`` (its ``command``, or Copilot's ``bash``)."""
    if not isinstance(value, dict):
        return False
    run = value.get("command", value.get("bash"))
    return isinstance(run, str) and hook_verb(run) is not None


def _entries(group: Any) -> list[Any]:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return hooks if isinstance(hooks, list) else []


def is_ours(group: Any) -> bool:
    """A group holding at least one ltm entry."""
    return any(is_ours_entry(e) for e in _entries(group))


def _only_ours(group: Any) -> bool:
    """A group ltm may drop whole: ltm's entries and nothing of the user's."""
    entries = _entries(group)
    return bool(entries) and all(is_ours_entry(e) for e in entries)


def ours_in(h: Harness, items: list[Any]) -> list[dict[str, Any]]:
    """ltm's entries among an event's list."""
    if h.grouped:
        return [e for g in items for e in _entries(g) if is_ours_entry(e)]
    return [e for e in items if is_ours_entry(e)]


def ltm_commands(h: Harness, doc: Any) -> dict[str, list[str]]:
    """{event: the commands of its ltm entries} of a hooks file (doctor reads this)."""
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    found: dict[str, list[str]] = {}
    for event, items in hooks.items() if isinstance(hooks, dict) else ():
        if isinstance(items, list):
            runs = [e.get("command", e.get("bash")) for e in ours_in(h, items)]
            if runs:
                found[str(event)] = [str(r) for r in runs]
    return found


# -- the JSON file -----------------------------------------------------------------


def _current(path: Path, text: str) -> dict[str, Any]:
    try:
        value = parse_jsonc(text).value if text.strip() else {}
    except JsoncError as exc:
        raise CliError(f"{path} is not valid JSON ({exc}); nothing was written") from None
    if not isinstance(value, dict):
        raise CliError(f"{path}: the top level is not a JSON object; nothing was written")
    hooks = value.get("hooks", {})
    if not isinstance(hooks, dict):
        raise CliError(f'{path}: "hooks" is not a JSON object; nothing was written')
    return hooks


def _event_list(path: Path, hooks: dict[str, Any], event: str) -> list[Any]:
    existing = hooks.get(event, [])
    if not isinstance(existing, list):
        raise CliError(f'{path}: "hooks.{event}" is not a list; nothing was written')
    return existing


def _drop_ours(h: Harness, text: str, event: str) -> str:
    """The text without ltm's entries of one event; the user's entries keep their text
    and their groups, an ltm-only group goes whole."""
    path = h.hooks_file
    if not h.grouped:
        return _edit(path, remove_items, text, ("hooks", event), is_ours_entry)
    text = _edit(path, remove_items, text, ("hooks", event), _only_ours)
    items = _current(path, text).get(event, [])
    for i in reversed(range(len(items))):
        if is_ours(items[i]):  # a group the user shares with an ltm entry
            text = _edit(path, remove_items, text, ("hooks", event, i, "hooks"), is_ours_entry)
    return text


def install_json(
    h: Harness, *, recall: bool = True, all_scopes: bool = False, teams: tuple[str, ...] = ()
) -> list[str]:
    """Merge ltm's entries into the hooks file; what changed (empty: nothing)."""
    target, _raw, text = read_config(h.hooks_file)
    hooks = _current(h.hooks_file, text)
    if h.version is not None and not text.strip():
        text = json.dumps({"version": h.version}, indent=2) + "\n"
    changed = []
    keep = wanted(h, recall=recall)
    for event in h.events:
        existing = _event_list(h.hooks_file, hooks, event.name)
        mine = ours_in(h, existing)
        if event not in keep:
            if mine:  # recall turned off: ltm's earlier prompt hook goes
                text = _drop_ours(h, text, event.name)
                if not _current(h.hooks_file, text).get(event.name):
                    text = _edit(h.hooks_file, remove, text, ("hooks",), event.name)
                changed.append(event.name)
            continue
        desired = item(h, event, all_scopes=all_scopes, teams=teams)
        # What the user set on ltm's own group or entry (a matcher, Cursor's loop_limit,
        # a status message) stays with it; ltm's own fields are ltm's to rewrite.
        if h.grouped:
            groups = [g for g in existing if is_ours(g)]
            if len(groups) == 1 and len(mine) == 1 and _only_ours(groups[0]):
                desired = {**groups[0], "hooks": [{**mine[0], **desired["hooks"][0]}]}
            already = groups == [desired]
        else:
            if len(mine) == 1:
                desired = {**mine[0], **desired}
            already = mine == [desired]
        if already:
            continue
        if event.name not in hooks:
            text = _edit(h.hooks_file, merge, text, ("hooks",), event.name, [desired])
        else:
            if mine:
                text = _drop_ours(h, text, event.name)
            text = _edit(h.hooks_file, append_item, text, ("hooks", event.name), desired)
        hooks = _current(h.hooks_file, text)
        changed.append(event.name)
    if changed:
        save_config(h.hooks_file, target, text)
    return changed


def uninstall_json(h: Harness, *, write: bool = True) -> list[str]:
    """Remove ltm's entries from the hooks file; what changed (``write=False``: what
    would, with the file left as it is)."""
    target, raw, text = read_config(h.hooks_file)
    if not raw:
        return []
    hooks = _current(h.hooks_file, text)
    changed = []
    for event, items in list(hooks.items()):
        if not isinstance(items, list) or not ours_in(h, items):
            continue
        text = _drop_ours(h, text, event)
        if not _current(h.hooks_file, text).get(event) and items:
            # Nothing of the user's was left under this event: the key goes too.
            text = _edit(h.hooks_file, remove, text, ("hooks",), event)
        changed.append(event)
    if changed and _current(h.hooks_file, text) == {}:
        text = _edit(h.hooks_file, remove, text, (), "hooks")
    if not write:
        return changed
    if changed and _only_skeleton(h, text):
        h.hooks_file.unlink()  # it held nothing but what ltm added
    elif changed:
        save_config(h.hooks_file, target, text)
    return changed


def _only_skeleton(h: Harness, text: str) -> bool:
    """Whether the file now holds nothing but the empty shell ltm writes around its
    entries (``{}``, Cursor's and Copilot's ``{"version": 1}``), and no comment: a
    user's note in an otherwise empty file is theirs, and the file stays."""
    leftover = parse_jsonc(text).value if text.strip() else {}
    if leftover not in ({}, {"version": h.version}):
        return False
    bare = re.sub(r"\s+", "", text)  # JSON holds no space outside strings here
    return bare in ("", "{}", json.dumps(leftover, separators=(",", ":")))


def _edit(path: Path, how: Callable[..., Any], text: str, *args: Any) -> str:
    try:
        done = how(text, *args)
        return str(done[0] if isinstance(done, tuple) else done)
    except (JsoncError, MergeError) as exc:
        raise CliError(f"{path}: {exc}; nothing was written") from None


# -- Codex's feature flag ------------------------------------------------------------


def _flag_state(path: Path, text: str) -> bool | None:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CliError(f"{path} is not valid TOML ({exc}); nothing was written") from None
    return flag_state(doc)


def flag_state(doc: dict[str, Any]) -> bool | None:
    """``[features]`` hooks / codex_hooks as a config.toml sets it (None: not set)."""
    features = doc.get("features", {})
    if not isinstance(features, dict):
        return None
    for key in ("hooks", "codex_hooks"):
        if isinstance(features.get(key), bool):
            return bool(features[key])
    return None


class FlagEdit(NamedTuple):
    what: str  # "added", "unchanged" or "disabled" (the file turns hooks off)
    target: Path
    new: str  # the file's text with the flag ("added" only)


def plan_flag(path: Path) -> FlagEdit:
    """How the flag gets set when the file says nothing, worked out before anything is
    written, so that a file ltm cannot add it to stops the install before the hooks
    file changes."""
    target, _raw, text = read_config(path)
    state = _flag_state(path, text)
    if state is not None:
        return FlagEdit("unchanged" if state else "disabled", target, text)
    lines = text.splitlines(keepends=True)
    header = next(
        (i for i, line in enumerate(lines) if re.match(r"\s*\[\s*features\s*\]\s*(#.*)?$", line)),
        None,
    )
    if header is not None:
        lines.insert(header + 1, FLAG_LINE + "\n")
        new = "".join(lines)
    else:
        sep = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
        new = f"{text}{sep}{HEADER_LINE}\n{FLAG_LINE}\n"
    try:
        added = flag_state(tomllib.loads(new)) is True
    except tomllib.TOMLDecodeError:
        added = False
    if not added:  # features as dotted keys or an inline table: no [features] to add to
        raise CliError(
            f"{path}: its features are written in a way ltm cannot add the hooks flag to;"
            " nothing was written. Set codex_hooks = true among them yourself (older Codex"
            " releases need it), then run this again."
        )
    return FlagEdit("added", target, new)


def enable_flag(path: Path, plan: FlagEdit | None = None) -> str:
    """Set the flag when the file says nothing (as ``plan`` worked out); what happened."""
    plan = plan or plan_flag(path)
    if plan.what == "added":
        save_config(path, plan.target, plan.new)
    return plan.what


def disable_flag(path: Path, *, write: bool = True) -> bool:
    """Remove the lines ``enable_flag`` added (the header only while its table is empty);
    whether there were any (``write=False``: the file is left as it is)."""
    target, _raw, text = read_config(path)
    if FLAG_LINE not in text or not write:
        return FLAG_LINE in text
    lines = [line for line in text.splitlines() if line != FLAG_LINE]
    if HEADER_LINE in lines:
        at = lines.index(HEADER_LINE)
        rest = lines[at + 1 :]
        table = rest[: next((j for j, r in enumerate(rest) if r.lstrip().startswith("[")), None)]
        if all(not r.strip() for r in table):
            del lines[at]
    new = "\n".join(lines).rstrip("\n")
    if not new.strip():
        path.unlink()  # it held nothing but what ltm added
        return True
    save_config(path, target, new + "\n")
    return True


# -- the Claude Code plugin ------------------------------------------------------------


def plugin_hooks() -> dict[str, Any]:
    """``plugin/hooks/hooks.json``: the Claude Code events ``ltm hooks install claude-code``
    wires (recall included, its default), each running the ``ltm`` on PATH and staying
    silent when there is none (exit 0, nothing printed: the session goes on unchanged).
    https://code.claude.com/docs/en/plugins/manifest-reference (hooks, standard layout)
    """
    hooks = {}
    for event in CLAUDE_EVENTS:
        run = command(event.verb, "claude-code", portable=True)
        hooks[event.name] = [{"hooks": [{"type": "command", "command": run, "timeout": TIMEOUT}]}]
    return {
        "description": "ltm: resume this project's newest packet at session start, recall a "
        "matching packet at the prompt, remind the agent to save before compaction and at "
        "the end.",
        "hooks": hooks,
    }


# -- the verbs ---------------------------------------------------------------------


def install(
    name: str,
    *,
    project: bool,
    write: bool,
    recall: bool | None = None,
    all_scopes: bool = False,
    mcp: bool | None = None,
    teams: tuple[str, ...] = (),
) -> None:
    h = harness(name, project=project)
    if recall and not can_recall(h):
        raise CliError(
            f"{h.display} cannot add context to a prompt from a hook, so ltm cannot recall "
            "packets there; install without --recall",
            exit_code=2,
        )
    if write and h.name == "claude-code":
        from ltm.cli.agents.wired import claude_plugin

        if claude_plugin():
            # The plugin (plugin/hooks/hooks.json) runs the same hooks for every project:
            # one or the other, so that what runs is plain to see (the plugin's entries
            # would stand down beside the user's own, ``--shared``).
            raise CliError(
                "the ltm plugin is enabled in Claude Code (enabledPlugins in its"
                " settings.json) and already runs these hooks; one or the other: keep the"
                " plugin, or disable it (/plugin) and install again",
                exit_code=2,
            )
    recall = can_recall(h) if recall is None else recall
    text = json.dumps(snippet(h, recall=recall, all_scopes=all_scopes, teams=teams), indent=2)
    text += "\n"
    where = "this project" if project else "your user"
    if not write:
        sys.stdout.write(text)
        inside = "the file" if h.name == "copilot" else 'its "hooks" object, next to other hooks'
        _say(f"Add these to {h.hooks_file} ({inside}),")
        _say(
            f"or let ltm merge them for {where}: ltm hooks install {name}"
            f"{' --project' if project else ''} --write"
        )
        if h.config_toml is not None:
            _say(
                f"Codex also needs [features] codex_hooks = true in {h.config_toml} (older"
                " releases); --write sets it when the file does not say."
            )
        _say_shared(h)
        return
    try:
        # Codex's flag is worked out first: a config.toml ltm cannot add it to stops the
        # install before the hooks file changes, never halfway.
        plan = plan_flag(h.config_toml) if h.config_toml is not None else None
        changed = install_json(h, recall=recall, all_scopes=all_scopes, teams=teams)
    except CliError:
        sys.stdout.write(text)
        raise
    flag = enable_flag(h.config_toml, plan) if h.config_toml is not None else "unchanged"
    if not changed and flag == "unchanged":
        _say(f"{h.hooks_file} already runs ltm hook; nothing changed")
    else:
        if changed:
            _say(f"wrote ltm hook for {', '.join(changed)} in {h.hooks_file}")
        if flag == "added":
            _say(f"enabled hooks in {h.config_toml} ([features] codex_hooks = true)")
    if flag == "disabled":
        _say(f"note: {h.config_toml} turns hooks off ([features]); ltm left it as it is")
    for line in NOTES.get(h.name, ()):
        _say(line)
    _say_shared(h)
    said = "starts with this project's newest packet" + (
        f" (yours or team {', '.join(teams)}'s)" if teams else ""
    )
    if recall:
        said += ", is pointed at a matching packet when a prompt recalls one,"
    _say(f"From the next {h.display} session on, the agent {said} and is reminded to save one.")
    offer_tools(h, project=project, wire=mcp)


def _say_shared(h: Harness) -> None:
    """What a project's file means for the team, and hooks that would run twice."""
    if not h.shared:
        return
    _say(
        f"{h.hooks_file.relative_to(Path.cwd())} is for the team to commit: its hooks run the"
        " ltm on each person's PATH, with their own settings, and do nothing where there is"
        " none. A teammate needs ltm installed and on the PATH their harness starts with (an"
        " editor started from the desktop may not read a shell's profile)."
    )
    user = harness(h.name, project=False)
    try:
        _target, raw, text = read_config(user.hooks_file)
        personal = bool(raw) and bool(ltm_commands(user, parse_jsonc(text).value))
    except (CliError, JsoncError, OSError):
        personal = False
    if personal:
        # The harness runs every file's hooks (Claude Code is said to merge identical
        # commands only, and these differ): the project's entries stand down (``--shared``).
        _say(
            f"note: {user.hooks_file} runs ltm's hooks too: on this machine those answer and"
            " the project's stand down, so each event is answered once"
        )


# Where ``--project`` hooks want the tools: the project's own MCP file of each harness.
PROJECT_MCP = {
    "claude-code": ".mcp.json",
    "codex": ".codex/config.toml",
    "gemini": ".gemini/settings.json",
    "copilot": ".github/mcp.json",
    "cursor": ".cursor/mcp.json",
}


def offer_tools(h: Harness, *, project: bool, wire: bool | None) -> None:
    """The hooks point the agent at the ltm tools where the harness has them: offer to wire
    them (``ltm mcp install``) when it has not; ``wire``: yes or no without asking (None:
    ask on a terminal, else say how)."""
    from ltm.cli.agents.mcp import install as mcp
    from ltm.cli.agents.wired import has_tools

    if has_tools(h.name) or wire is False:
        return
    # Claude Code's project file is the client's own default (written without home paths).
    file = Path.cwd() / PROJECT_MCP[h.name] if project and h.name != "claude-code" else None
    if h.name == "claude-code" and not project:
        # Claude Code keeps a user's servers in its own ~/.claude.json: its command adds one.
        entry = mcp.entry_for(mcp.CLIENTS["claude-code"])
        _say(f"{h.display} has no ltm tools yet; to add them for every project: ")
        _say("  " + mcp.claude_add_command(entry))
        return
    again = f"ltm mcp install {h.name} --write" + (f" --file {file}" if file else "")
    if wire is None:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            _say(f"{h.display} has no ltm tools yet (the hooks name them once it has): {again}")
            return
        answer = input(f"{h.display} has no ltm tools yet. Add them now ({again})? [Y/n] ")
        if answer.strip().lower() not in ("", "y", "yes"):
            _say(f"not added; later: {again}")
            return
    mcp.run(h.name, write=True, file=file)


NOTES = {
    "codex": ("Codex asks you to trust new hooks once: open Codex and review them (/hooks).",),
    "gemini": (
        "Gemini CLI releases that keep hooks off need them turned on once: /settings, "
        '"Enable Hooks System".',
    ),
    "cursor": ("Cursor cannot add context to a prompt from a hook: no recall at the prompt.",),
    "copilot": (
        "Copilot CLI ignores what a prompt hook returns (VS Code's agent mode reads it), so "
        "recall at the prompt works in VS Code only.",
    ),
}


def uninstall(name: str, *, project: bool, write: bool) -> None:
    """Remove what ``install --write`` added; without ``write``, say what that would be
    and change nothing (as install prints its entries before it writes them)."""
    h = harness(name, project=project)
    # Older Codex releases run no hook at all without the flag: it stays while hooks of
    # the user's own are left beside it (read before ltm's entries go).
    needed = h.config_toml is not None and _users_hooks(h)
    changed = uninstall_json(h, write=write)
    flag = False
    if h.config_toml is not None and not needed:
        flag = disable_flag(h.config_toml, write=write)
    if not changed and not flag:
        _say(f"no ltm hook in {h.hooks_file}; nothing changed")
        return
    removed = "removed" if write else "would remove"
    if changed:
        _say(f"{removed} ltm hook for {', '.join(changed)} from {h.hooks_file}")
    if flag:
        _say(f"{removed} the hooks feature flag ltm had added to {h.config_toml}")
    elif needed and h.config_toml is not None and disable_flag(h.config_toml, write=False):
        kept = "kept" if write else "would keep"
        _say(f"{kept} the hooks feature flag in {h.config_toml}: your own hooks there need it")
    if not write:
        _say(
            f"nothing changed yet; to remove them: ltm hooks uninstall {name}"
            f"{' --project' if project else ''} --write"
        )


def _users_hooks(h: Harness) -> bool:
    """Whether the harness's folder holds hooks that are not ltm's: entries in the hooks
    file, or Codex's inline ``[hooks]`` tables in config.toml."""
    _target, raw, text = read_config(h.hooks_file)
    hooks = _current(h.hooks_file, text) if raw else {}
    for items in hooks.values():
        for value in items if isinstance(items, list) else ():
            entries = _entries(value) if h.grouped else [value]
            if any(not is_ours_entry(e) for e in entries):
                return True
    if h.config_toml is None:
        return False
    _target, _raw, toml_text = read_config(h.config_toml)
    try:
        return bool(tomllib.loads(toml_text).get("hooks"))
    except tomllib.TOMLDecodeError:
        return False


def _say(message: str) -> None:
    print(message, file=sys.stderr)
