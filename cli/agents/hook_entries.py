"""Where each harness keeps a user's hooks, and how an entry ltm wrote is told apart.

``ltm hooks install`` writes the entries and ``ltm doctor`` reads them; the hook
itself asks whether the user's own file runs ltm's hook for its event, so that an
entry of a file others share (a project's, the plugin's: ``--shared``) stands down
beside it. Import-light for that reason: the standard library's json, re and shlex.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

HOOK_VERBS = ("session-start", "pre-compact", "stop", "session-end", "user-prompt")
# The start of a command in a file others share: the ltm on each person's PATH, and
# nothing where there is none.
PORTABLE = "command -v ltm >/dev/null 2>&1 || exit 0; exec "
_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
# Module paths earlier versions ran ltm by: python -m ltm.cli[.start][.entry]
_MODULES = (["ltm.cli"], ["ltm.cli.entry"], ["ltm.cli.start.entry"])
# Each harness's folder and its hooks file (a user's own: in the home folder, unless
# the harness's variable moves it; a project's: in the project, under ``project``).
_FILES = {
    "claude-code": (".claude", "CLAUDE_CONFIG_DIR", ".claude", "settings.json"),
    "codex": (".codex", "CODEX_HOME", ".codex", "hooks.json"),
    "gemini": (".gemini", None, ".gemini", "settings.json"),
    "cursor": (".cursor", None, ".cursor", "hooks.json"),
    "copilot": (".copilot", "COPILOT_HOME", ".github", "hooks/ltm.json"),
}


def hooks_file(harness: str, *, project: bool) -> Path:
    """The hooks file of ``harness``: the project's (in the working directory), else the
    user's own (``$CLAUDE_CONFIG_DIR``, ``$CODEX_HOME`` and ``$COPILOT_HOME`` move it, as
    the harness itself honours them). KeyError for a harness ltm does not know."""
    dot, env_var, in_project, name = _FILES[harness]
    if project:
        return Path.cwd() / in_project / name
    return harness_home(dot, env_var) / name


def harness_home(dot: str, env_var: str | None = None) -> Path:
    """A harness's own folder in the user's home (``~/.codex``...), or where its variable
    (``CODEX_HOME``...) moves it, as the harness itself reads it."""
    moved = os.environ.get(env_var) if env_var else None
    return Path(moved) if moved else Path.home() / dot


def _words(command_line: str) -> list[str]:
    """The words of the program a command runs and its arguments: past the ``PORTABLE``
    start ltm writes into shared files, and past any ``NAME=value`` it sets first."""
    if command_line.startswith(PORTABLE):
        command_line = command_line[len(PORTABLE) :]
    try:
        words = shlex.split(command_line)
    except ValueError:
        return []
    while words and _ENV_WORD.fullmatch(words[0]):
        words.pop(0)
    return words


def hook_program(command_line: str) -> str | None:
    """The program a command runs (``ltm`` for a portable one), as doctor checks it."""
    words = _words(command_line)
    return words[0] if words else None


def hook_verb(command_line: str) -> str | None:
    """The ``ltm hook`` verb a command runs, or None when it is not an ltm hook.

    The program itself must be ltm (``.../ltm``, ``ltm.exe`` or ``python -m ltm.cli``),
    past the ``PORTABLE`` start and any ``NAME=value`` words, followed by ``hook`` and one
    of ltm's verbs: a command that merely mentions ``ltm hook`` (``notify-send 'ltm hook
    done'``) is the user's.
    """
    words = _words(command_line)
    if not words:
        return None
    program = re.split(r"[/\\]", words[0])[-1].lower()
    if program in ("ltm", "ltm.exe"):
        rest = words[1:]
    elif program.startswith("python") and words[1:2] == ["-m"] and words[2:3] in _MODULES:
        rest = words[3:]
    else:
        return None
    if len(rest) < 2 or rest[0] != "hook" or rest[1] not in HOOK_VERBS:
        return None
    return rest[1]


def own_runs(harness: str, verb: str) -> bool:
    """Whether the user's own hooks file for ``harness`` has an entry, not a shared one,
    that runs ltm's ``verb`` hook. Any command string under its ``hooks`` counts (an
    entry's ``command``, or Copilot's ``bash``); a file that is not plain JSON (a comment
    in it) is read for its strings as written, and a file not there runs none."""
    try:
        text = hooks_file(harness, project=False).read_text(encoding="utf-8")
    except (OSError, ValueError, KeyError):
        return False
    if f"hook {verb}" not in text:
        return False  # the common case, read no further
    try:
        doc = json.loads(text)
        runs = list(_strings(doc.get("hooks") if isinstance(doc, dict) else None))
    except ValueError:  # JSONC: its strings, as written
        runs = [_string(m.group()) for m in re.finditer(r'"(?:[^"\\]|\\.)*"', text)]
    return any(
        isinstance(run, str) and not run.startswith(PORTABLE) and hook_verb(run) == verb
        for run in runs
    )


def _string(literal: str) -> str | None:
    """A JSON string literal's text; None for one JSON would refuse (a bad escape)."""
    try:
        value = json.loads(literal)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _strings(value: Any) -> Any:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
