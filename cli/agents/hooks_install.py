"""``ltm hooks install|uninstall claude-code|codex``: wire ``ltm hook`` into a harness.

The entries, per harness and its documentation:

- Claude Code keeps hooks in ``settings.json`` under ``hooks.<Event>``: a list
  of ``{"matcher", "hooks": [{"type": "command", "command", "timeout"}]}``
  groups; the user's file is ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``
  when set), a project's ``.claude/settings.json``.
  https://code.claude.com/docs/en/hooks (Configuration)
- Codex reads the same shape from ``hooks.json`` beside its ``config.toml``
  (``~/.codex``, or ``$CODEX_HOME``; a project's ``.codex``). Hooks sit behind
  the ``[features]`` flag ``codex_hooks = true`` in older releases (newer ones
  enable them by default and keep ``codex_hooks`` as an alias of ``hooks``), so
  the flag is set when the file says nothing about it, and a new hook must be
  trusted once in Codex before it runs.
  https://developers.openai.com/codex/hooks

The events: ``SessionStart`` (inject the project's newest packet),
``PreCompact`` and ``Stop`` (remind to save). ``--write`` merges them into the
file, replacing an earlier ltm entry of the same event and keeping every
other hook and setting (the JSON is edited in place, as ``ltm mcp install``
does); a second run changes nothing; ``uninstall`` removes exactly the ltm
entries (and the feature flag line it added).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

EVENTS = (("SessionStart", "session-start"), ("PreCompact", "pre-compact"), ("Stop", "stop"))
TIMEOUT = 5  # seconds the harness waits; ltm hook gives up by itself within 1.5 s
FLAG_LINE = "codex_hooks = true  # added by ltm hooks install"
HEADER_LINE = "[features]  # added by ltm hooks install"
# An ltm hook command, whatever the path to ltm: ".../ltm hook EVENT" or "-m ltm.cli hook"
# (also the module paths earlier versions wrote: ltm.cli.entry, ltm.cli.start.entry).
_OURS = re.compile(
    r"(?:^|[\s/\\'\"])(?:ltm(?:\.exe)?['\"]?|-m ltm\.cli(?:\.start)?(?:\.entry)?)\s+hook\s"
)


@dataclass(frozen=True)
class Harness:
    name: str
    display: str
    hooks_file: Path
    config_toml: Path | None  # where the feature flag goes (Codex)


def _folder(dot: str, env_var: str, *, project: bool) -> Path:
    """The harness's folder: the project's ``.claude``/``.codex``, else the user's (which
    ``$CLAUDE_CONFIG_DIR``/``$CODEX_HOME`` move, as the harness itself honours them)."""
    if project:
        return Path.cwd() / dot
    moved = os.environ.get(env_var)
    return Path(moved) if moved else Path.home() / dot


def harness(name: str, *, project: bool) -> Harness:
    if name == "claude-code":
        base = _folder(".claude", "CLAUDE_CONFIG_DIR", project=project)
        return Harness(name, "Claude Code", base / "settings.json", None)
    if name == "codex":
        base = _folder(".codex", "CODEX_HOME", project=project)
        return Harness(name, "Codex", base / "hooks.json", base / "config.toml")
    raise CliError(f"unknown harness {name!r}: claude-code or codex")


def command(event: str, harness_name: str) -> str:
    """The shell command a harness runs: this very ltm, with the store it uses."""
    env = [f"{k}={shlex.quote(v)}" for k, v in passed_env().items()]
    return " ".join([*env, shlex.join([*ltm_command(), "hook", event, "--harness", harness_name])])


def groups(h: Harness) -> dict[str, dict[str, Any]]:
    """One matcher group per event (no matcher: every source and trigger)."""
    return {
        event: {
            "hooks": [{"type": "command", "command": command(verb, h.name), "timeout": TIMEOUT}]
        }
        for event, verb in EVENTS
    }


def is_ours(group: Any) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and isinstance(h.get("command"), str) and _OURS.search(h["command"])
        for h in hooks
    )


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


def install_json(h: Harness) -> list[str]:
    """Merge the groups into the hooks file; what changed (empty: nothing)."""
    target, raw, text = read_config(h.hooks_file)
    hooks = _current(h.hooks_file, text)
    changed = []
    for event, group in groups(h).items():
        existing = hooks.get(event, [])
        if not isinstance(existing, list):
            raise CliError(f'{h.hooks_file}: "hooks.{event}" is not a list; nothing was written')
        if [g for g in existing if is_ours(g)] == [group]:
            continue
        if event not in hooks:
            text = _edit(h.hooks_file, merge, text, ("hooks",), event, [group])
        else:  # the user's own groups keep their text; an older ltm group is replaced
            text = _edit(h.hooks_file, remove_items, text, ("hooks", event), is_ours)
            text = _edit(h.hooks_file, append_item, text, ("hooks", event), group)
        changed.append(event)
    if changed:
        save_config(h.hooks_file, target, raw, text)
    return changed


def uninstall_json(h: Harness) -> list[str]:
    target, raw, text = read_config(h.hooks_file)
    if not raw:
        return []
    hooks = _current(h.hooks_file, text)
    changed = []
    for event, _verb in EVENTS:
        existing = hooks.get(event)
        if not isinstance(existing, list) or not any(is_ours(g) for g in existing):
            continue
        if any(not is_ours(g) for g in existing):
            text = _edit(h.hooks_file, remove_items, text, ("hooks", event), is_ours)
        else:
            text = _edit(h.hooks_file, remove, text, ("hooks",), event)
        changed.append(event)
    if changed and _current(h.hooks_file, text) == {}:
        text = _edit(h.hooks_file, remove, text, (), "hooks")
    if changed and parse_jsonc(text).value == {}:
        h.hooks_file.unlink()  # it held nothing but what ltm added
    elif changed:
        save_config(h.hooks_file, target, raw, text)
    return changed


def _edit(path: Path, how: Any, text: str, *args: Any) -> str:
    try:
        done = how(text, *args)
        return str(done[0] if isinstance(done, tuple) else done)
    except (JsoncError, MergeError) as exc:
        raise CliError(f"{path}: {exc}; nothing was written") from None


# -- Codex's feature flag ------------------------------------------------------------


def _flag_state(path: Path, text: str) -> bool | None:
    import tomllib

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


def enable_flag(path: Path) -> str:
    """Set the flag when the file says nothing; returns what happened."""
    target, raw, text = read_config(path)
    state = _flag_state(path, text)
    if state is True:
        return "unchanged"
    if state is False:
        return "disabled"
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
    if _flag_state(path, new) is not True:
        raise CliError(f"{path}: could not add the hooks feature flag; nothing was written")
    save_config(path, target, raw, new)
    return "added"


def disable_flag(path: Path) -> bool:
    """Remove the lines ``enable_flag`` added (the header only while its table is empty)."""
    target, raw, text = read_config(path)
    if FLAG_LINE not in text:
        return False
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
    save_config(path, target, raw, new + "\n")
    return True


# -- the verbs ---------------------------------------------------------------------


def install(name: str, *, project: bool, write: bool) -> None:
    h = harness(name, project=project)
    snippet = json.dumps({"hooks": {e: [g] for e, g in groups(h).items()}}, indent=2) + "\n"
    where = "this project" if project else "your user"
    if not write:
        sys.stdout.write(snippet)
        _say(f'Add these to {h.hooks_file} (inside its "hooks" object, next to other hooks),')
        _say(
            f"or let ltm merge them for {where}: ltm hooks install {name}"
            f"{' --project' if project else ''} --write"
        )
        if h.config_toml is not None:
            _say(
                f"Codex also needs [features] codex_hooks = true in {h.config_toml} (older"
                " releases); --write sets it when the file does not say."
            )
        return
    try:
        changed = install_json(h)
    except CliError:
        sys.stdout.write(snippet)
        raise
    flag = enable_flag(h.config_toml) if h.config_toml is not None else "unchanged"
    if not changed and flag == "unchanged":
        _say(f"{h.hooks_file} already runs ltm hook; nothing changed")
    else:
        if changed:
            _say(f"added ltm hook for {', '.join(changed)} in {h.hooks_file}")
        if flag == "added":
            _say(f"enabled hooks in {h.config_toml} ([features] codex_hooks = true)")
    if flag == "disabled":
        _say(f"note: {h.config_toml} turns hooks off ([features]); ltm left it as it is")
    if h.name == "codex":
        _say("Codex asks you to trust new hooks once: open Codex and review them (/hooks).")
    _say(
        f"From the next {h.display} session on, the agent starts with this project's newest"
        " packet and is reminded to save one."
    )


def uninstall(name: str, *, project: bool) -> None:
    h = harness(name, project=project)
    changed = uninstall_json(h)
    flag = disable_flag(h.config_toml) if h.config_toml is not None else False
    if not changed and not flag:
        _say(f"no ltm hook in {h.hooks_file}; nothing changed")
        return
    if changed:
        _say(f"removed ltm hook for {', '.join(changed)} from {h.hooks_file}")
    if flag:
        _say(f"removed the hooks feature flag ltm had added to {h.config_toml}")


def _say(message: str) -> None:
    print(message, file=sys.stderr)
