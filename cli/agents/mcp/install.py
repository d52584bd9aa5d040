"""``ltm mcp install CLIENT``: the config entry that makes an MCP client run ``ltm mcp``.

Each client keeps its servers in a file under one key: Claude Code's project
``.mcp.json``, Cursor's ``~/.cursor/mcp.json``, Claude Desktop's
``claude_desktop_config.json``, Gemini CLI's ``~/.gemini/settings.json`` and
GitHub Copilot CLI's ``~/.copilot/mcp-config.json`` under ``mcpServers``; Zed's
``settings.json`` under ``context_servers``; VS Code's ``.vscode/mcp.json`` under
``servers``; Codex's ``~/.codex/config.toml`` (TOML) as ``[mcp_servers.ltm]``.
The entry runs this very ``ltm`` by absolute path (GUI clients do not see the
shell's PATH) and carries ``LTM_CONFIG_DIR`` / ``LTM_DATA_DIR`` / ``LTM_STATE_DIR``
when they are set, so the client's shim finds the same store, sign-in and state
(the hooks' log and markers, the warm helper's socket) as the shell. Never
a token: credentials stay where ``ltm auth`` put them.

``--write`` edits the file in place by inserting or replacing only the
``ltm`` entry in the text: other servers, settings, comments and formatting
are kept (Zed's settings are JSON with comments). A file that cannot be
parsed is refused, never overwritten, and the result is re-parsed and compared
before anything is written.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltm.cli.agents.hook_entries import harness_home
from ltm.cli.errors import CliError

SERVER_NAME = "ltm"
PASSED_ENV = ("LTM_CONFIG_DIR", "LTM_DATA_DIR", "LTM_STATE_DIR")


# --------------------------------------------------------------------------
# What to run


def ltm_command() -> list[str]:
    """The absolute command of the running ``ltm``: argv[0], else PATH, else this Python."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.stem == "ltm" and argv0.is_file():
        return [str(argv0.absolute())]
    found = shutil.which("ltm")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "ltm.cli"]


def passed_env() -> dict[str, str]:
    """Where the store and sign-in live, when the shell overrides them (paths, never secrets)."""
    return {
        name: str(Path(os.environ[name]).expanduser().absolute())
        for name in PASSED_ENV
        if os.environ.get(name)
    }


# --------------------------------------------------------------------------
# The clients


def _config_home() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else Path.home() / ".config"


def _appdata() -> Path:
    return Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")


def _claude_code_path() -> Path:
    return Path.cwd() / ".mcp.json"


def _cursor_path() -> Path:
    return Path.home() / ".cursor" / "mcp.json"


def _zed_path() -> Path:
    if sys.platform == "win32":
        return _appdata() / "Zed" / "settings.json"
    if sys.platform == "darwin":
        return Path.home() / ".config" / "zed" / "settings.json"
    return _config_home() / "zed" / "settings.json"


_DESKTOP_FILE = "claude_desktop_config.json"


def _claude_desktop_path() -> Path:
    if sys.platform == "win32":
        return _appdata() / "Claude" / _DESKTOP_FILE
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Claude" / _DESKTOP_FILE
    return _config_home() / "Claude" / _DESKTOP_FILE


def _plain_entry(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "mcp"]}
    if env:
        entry["env"] = env
    return entry


def _vscode_path() -> Path:
    return Path.cwd() / ".vscode" / "mcp.json"


# Codex: [mcp_servers.NAME] with command, args, env (or url) in config.toml.
# https://developers.openai.com/codex/mcp
def _codex_path() -> Path:
    return harness_home(".codex", "CODEX_HOME") / "config.toml"


# Gemini CLI: "mcpServers" in settings.json; command/args/env, or httpUrl for Streamable HTTP.
# https://geminicli.com/docs/tools/mcp-server
def _gemini_path() -> Path:
    return harness_home(".gemini", None) / "settings.json"


# GitHub Copilot CLI: "mcpServers" in mcp-config.json; "type": "local" with command, args,
# env and the tools it may call ("*": all), or "type": "http" with a url.
# https://docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/add-mcp-servers
def _copilot_path() -> Path:
    return harness_home(".copilot", "COPILOT_HOME") / "mcp-config.json"


# The remote entry (``--remote URL``): the server's /mcp as each client documents a
# Streamable HTTP server, with no header, so the client signs in with OAuth itself.
# Claude Code: https://code.claude.com/docs/en/mcp ("type": "http");
# Cursor: https://cursor.com/docs/mcp ("url");
# VS Code: https://code.visualstudio.com/docs/copilot/customization/mcp-servers ("servers",
# "type": "http"); Zed: https://zed.dev/docs/ai/mcp ("context_servers", "url").
# Claude Desktop takes remote servers only as custom connectors added in its settings
# (https://support.claude.com/en/articles/11175166), reached from Anthropic's cloud.


@dataclass(frozen=True)
class Client:
    name: str
    display: str
    key: str
    path: Callable[[], Path]
    entry: Callable[[list[str], dict[str, str]], dict[str, Any]]
    notes: tuple[str, ...] = field(default=())
    remote: Callable[[str], dict[str, Any]] | None = None
    toml: bool = False  # the file is TOML (Codex), not JSON
    shared: bool = False  # its usual file is the project's, committed with the repository


CLIENTS: dict[str, Client] = {
    "claude-code": Client(
        "claude-code",
        "Claude Code",
        "mcpServers",
        _claude_code_path,
        lambda command, env: {"type": "stdio", **_plain_entry(command, env), "env": env},
        (
            "This is the project scope (.mcp.json in the project root, shared with the "
            "repository; Claude Code asks before using it).",
        ),
        lambda url: {"type": "http", "url": url},
        shared=True,
    ),
    "cursor": Client(
        "cursor",
        "Cursor",
        "mcpServers",
        _cursor_path,
        _plain_entry,
        ("A project's .cursor/mcp.json takes the same entry (use --file).",),
        lambda url: {"url": url},
    ),
    "vscode": Client(
        "vscode",
        "VS Code",
        "servers",
        _vscode_path,
        lambda command, env: {"type": "stdio", **_plain_entry(command, env)},
        (
            "This is the workspace's .vscode/mcp.json; for every workspace, run "
            "'MCP: Open User Configuration' and add the entry there (or use --file).",
        ),
        lambda url: {"type": "http", "url": url},
        shared=True,
    ),
    "zed": Client(
        "zed",
        "Zed",
        "context_servers",
        _zed_path,
        lambda command, env: {"source": "custom", **_plain_entry(command, env), "env": env},
        remote=lambda url: {"url": url},
    ),
    "claude-desktop": Client(
        "claude-desktop",
        "Claude Desktop",
        "mcpServers",
        _claude_desktop_path,
        _plain_entry,
    ),
    "codex": Client(
        "codex",
        "Codex",
        "mcp_servers",
        _codex_path,
        _plain_entry,
        ("A trusted project's .codex/config.toml takes the same table (use --file).",),
        lambda url: {"url": url},
        toml=True,
    ),
    "gemini": Client(
        "gemini",
        "Gemini CLI",
        "mcpServers",
        _gemini_path,
        _plain_entry,
        ("A project's .gemini/settings.json takes the same entry (use --file).",),
        lambda url: {"httpUrl": url},
    ),
    "copilot": Client(
        "copilot",
        "GitHub Copilot CLI",
        "mcpServers",
        _copilot_path,
        lambda command, env: {"type": "local", **_plain_entry(command, env), "tools": ["*"]},
        ("VS Code's agent mode reads .vscode/mcp.json instead: ltm mcp install vscode.",),
        lambda url: {"type": "http", "url": url, "tools": ["*"]},
    ),
}


def entry_for(
    client: Client, remote: str | None = None, *, portable: bool = False
) -> dict[str, Any]:
    """The client's entry. ``portable``: for a file shared with a repository, which runs
    on every teammate's machine: ``ltm`` from PATH and none of this user's paths."""
    if remote is not None:
        assert client.remote is not None  # run() refused the client otherwise
        return client.remote(mcp_url(remote))
    if portable:
        return client.entry([SERVER_NAME], {})
    return client.entry(ltm_command(), passed_env())


def mcp_url(server: str) -> str:
    """The server's MCP endpoint: ``URL`` as given when it ends in ``/mcp``, else ``URL/mcp``.

    Remote MCP signs in with OAuth, which needs HTTPS (loopback aside: a server on
    this machine, for trying it out).
    """
    from urllib.parse import urlsplit

    url = server.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(
            f"--remote takes the server's URL, such as https://ltm.example.org; got {server!r}",
            exit_code=2,
        )
    if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise CliError(
            f"{url}: remote MCP needs https:// (the client signs in with OAuth, which runs only"
            " over HTTPS, or http:// on this machine)",
            exit_code=2,
        )
    return url if url.endswith("/mcp") else url + "/mcp"


def claude_add_remote(url: str) -> str:
    return shell_join(
        ["claude", "mcp", "add", "--transport", "http", "--scope", "user", SERVER_NAME, url]
    )


def snippet(client: Client, entry: dict[str, Any]) -> str:
    if client.toml:
        import tomli_w

        return tomli_w.dumps({client.key: {SERVER_NAME: entry}})
    return json.dumps({client.key: {SERVER_NAME: entry}}, indent=2) + "\n"


def read_doc(client: Client, text: str) -> Any:
    """A client's config file as data (JSON with comments, or TOML); ``ValueError`` when
    it cannot be parsed."""
    if not client.toml:
        return parse_jsonc(text).value if text.strip() else {}
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise JsoncError(text, 0, str(exc)) from None


def merge_toml(text: str, table: str, name: str, entry: dict[str, Any]) -> tuple[str, str]:
    """Set ``[table.name]`` to ``entry`` in a TOML document, the rest of the text untouched:
    the entry's old tables (``[table.name]`` and its sub-tables) go, the new ones are
    appended. Returns (new text, what happened); ``MergeError`` when the entry is written
    some other way (dotted keys, an inline table) that this cannot replace alone."""
    import tomllib

    import tomli_w

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise JsoncError(text, 0, str(exc)) from None
    servers = doc.get(table, {})
    if not isinstance(servers, dict):
        raise MergeError(f'"{table}" is not a table')
    if servers.get(name) == entry:
        return text, "unchanged"
    what = "updated" if name in servers else "added"
    ours = re.compile(
        rf"""^\s*\[\s*{re.escape(table)}\s*\.\s*(?:{re.escape(name)}|"{re.escape(name)}")"""
        r"""\s*(?:\.[^\]]*)?\]\s*(?:#.*)?$"""
    )
    kept: list[str] = []
    tail: list[str] = []  # comments and blank lines at the end of the entry being dropped
    skipping = False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("["):
            if skipping and not ours.match(line):
                kept += _after_blank(kept, tail)  # comments just above a table are its own
            tail = []
            skipping = bool(ours.match(line))
        if not skipping:
            kept.append(line)
        elif not line.strip() or line.lstrip().startswith("#"):
            tail.append(line)
        else:
            tail = []
    kept += _after_blank(kept, tail)  # ltm writes no comments: these are the user's
    base = "".join(kept).rstrip("\n")
    block = tomli_w.dumps({table: {name: entry}})
    new = f"{base}\n\n{block}" if base else block
    expected = copy.deepcopy(doc)
    expected.setdefault(table, {})[name] = entry
    try:
        same = tomllib.loads(new) == expected
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        raise MergeError(f"the {name!r} entry is written in a way ltm cannot replace alone")
    return new, what


def _after_blank(kept: list[str], lines: list[str]) -> list[str]:
    """``lines`` without the blank lines they start with when ``kept`` already ends in one
    (or is empty): dropping a table between them leaves one blank line, not two."""
    while lines and not lines[0].strip() and (not kept or not kept[-1].strip()):
        lines = lines[1:]
    return lines


def shell_join(words: list[str]) -> str:
    """A command line the user's shell reads back as ``words``.

    POSIX shells: ``shlex`` quoting. Windows: cmd.exe does not take POSIX
    single quotes around ``C:\\Program Files\\...``; the MS C runtime's
    double-quote rules (``subprocess.list2cmdline``) work in cmd.exe and
    PowerShell alike.
    """
    if sys.platform == "win32":
        import subprocess

        return subprocess.list2cmdline(words)
    return shlex.join(words)


def claude_add_command(entry: dict[str, Any]) -> str:
    env_flags = [f"-e {shell_join([f'{k}={v}'])}" for k, v in entry.get("env", {}).items()]
    command = shell_join([entry["command"], *entry["args"]])
    return " ".join(["claude mcp add --scope user", *env_flags, SERVER_NAME, "--", command])


# --------------------------------------------------------------------------
# JSON with comments: parse with positions, so that an edit touches one spot


class JsoncError(ValueError):
    def __init__(self, text: str, pos: int, message: str) -> None:
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"line {line}, column {column}: {message}")


@dataclass
class Node:
    start: int
    end: int
    value: Any
    members: list[tuple[str, Node]] | None = None  # objects: in file order
    inner: int = 0  # objects: the offset just after "{"
    key_starts: list[int] = field(default_factory=list)  # objects: where each member's key is
    elements: list[Node] | None = None  # arrays: the items, in order


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_DECODER = json.JSONDecoder()
_MAX_DEPTH = 200


class _Parser:
    """JSON plus what JSONC editors allow: // and /* */ comments, trailing commas."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> JsoncError:
        return JsoncError(self.text, self.pos if pos is None else pos, message)

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def document(self) -> Node:
        node = self.value(0)
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("unexpected text after the JSON value")
        return node

    def value(self, depth: int) -> Node:
        if depth > _MAX_DEPTH:
            raise self.fail("nested too deeply")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file")
        c = self.text[self.pos]
        if c == "{":
            return self.object(depth)
        if c == "[":
            return self.array(depth)
        if c == '"':
            return self.string()
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                start = self.pos
                self.pos += len(word)
                return Node(start, self.pos, literal)
        m = _NUMBER.match(self.text, self.pos)
        if m is None:
            raise self.fail(f"unexpected character {c!r}")
        self.pos = m.end()
        return Node(m.start(), m.end(), json.loads(m.group()))

    def string(self) -> Node:
        start = self.pos
        try:
            # raw_decode at a quote reads that one string and says where it ends
            # (https://docs.python.org/3/library/json.html#json.JSONDecoder.raw_decode).
            value, self.pos = _DECODER.raw_decode(self.text, start)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg, exc.pos) from None
        return Node(start, self.pos, value)

    def object(self, depth: int) -> Node:
        start = self.pos
        self.pos += 1
        node = Node(start, start, {}, members=[], inner=self.pos)
        while True:
            self.skip()
            if self.text.startswith("}", self.pos):
                break
            if not self.text.startswith('"', self.pos):
                raise self.fail('expected a "key" or }')
            node.key_starts.append(self.pos)
            key = self.string().value
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected :")
            self.pos += 1
            child = self.value(depth + 1)
            node.members.append((key, child))  # type: ignore[union-attr]
            node.value[key] = child.value
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("}", self.pos):
                raise self.fail("expected , or }")
        self.pos += 1
        node.end = self.pos
        return node

    def array(self, depth: int) -> Node:
        start = self.pos
        self.pos += 1
        items = []
        elements = []
        while True:
            self.skip()
            if self.text.startswith("]", self.pos):
                break
            elements.append(self.value(depth + 1))
            items.append(elements[-1].value)
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("]", self.pos):
                raise self.fail("expected , or ]")
        self.pos += 1
        return Node(start, self.pos, items, elements=elements)


def parse_jsonc(text: str) -> Node:
    return _Parser(text).document()


def _member(node: Node, key: str) -> Node | None:
    found = None
    for name, child in node.members or ():
        if name == key:
            found = child  # the last one wins, as in every JSON parser
    return found


def _indent_unit(text: str) -> str:
    m = re.search(r"\n([ \t]+)\S", text)
    return m.group(1) if m else "  "


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    m = re.match(r"[ \t]*", text[line_start:])
    return m.group() if m else ""


class MergeError(Exception):
    pass


def merge(text: str, path: tuple[str, ...], name: str, entry: Any) -> tuple[str, str]:
    """Set ``path.name`` to ``entry`` in a JSON(C) document; returns (new text, what happened).

    What happened is ``added``, ``updated`` or ``unchanged``. Raises
    :class:`JsoncError` when the text does not parse and :class:`MergeError`
    when the document's shape leaves no place for the entry.
    """
    if not text.strip():
        return json.dumps(_nest(path, name, entry), indent=2) + "\n", "added"
    root = parse_jsonc(text)
    if root.members is None:
        raise MergeError("the top level is not a JSON object")
    unit = _indent_unit(text)
    node, depth = root, 0
    insert_key: str | None = None
    insert_value: Any = None
    for i, key in enumerate(path):
        child = _member(node, key)
        if child is None:
            insert_key, insert_value = key, _nest(path[i + 1 :], name, entry)
            break
        if child.members is None:
            raise MergeError(f'"{key}" is not a JSON object')
        node, depth = child, depth + 1
    else:
        existing = _member(node, name)
        if existing is not None:
            if existing.value == entry:
                return text, "unchanged"
            indent = _line_indent(text, existing.start)
            body = json.dumps(entry, indent=unit).replace("\n", "\n" + indent)
            new = text[: existing.start] + body + text[existing.end :]
            return _verified(text, new, root.value, path, name, entry), "updated"
        insert_key, insert_value = name, entry
    member_indent = unit * (depth + 1)
    body = json.dumps(insert_value, indent=unit).replace("\n", "\n" + member_indent)
    piece = f"\n{member_indent}{json.dumps(insert_key)}: {body}"
    piece += "," if node.members else "\n" + unit * depth
    new = text[: node.inner] + piece + text[node.inner :]
    return _verified(text, new, root.value, path, name, entry), "added"


def remove(text: str, path: tuple[str, ...], name: str) -> tuple[str, str]:
    """Delete ``path.name`` from a JSON(C) document; returns (new text, ``removed`` or
    ``unchanged``). Only that member's text goes, with the comma that joined it."""
    if not text.strip():
        return text, "unchanged"
    root = parse_jsonc(text)
    node: Node | None = root
    for key in path:
        node = _member(node, key) if node is not None and node.members is not None else None
    if node is None or node.members is None:
        return text, "unchanged"
    names = [key for key, _child in node.members]
    if name not in names:
        return text, "unchanged"
    i = len(names) - 1 - names[::-1].index(name)  # the last one is the one that counts
    child = node.members[i][1]
    if i + 1 < len(names):  # up to the next member's key
        start, end = node.key_starts[i], node.key_starts[i + 1]
    elif i > 0:  # from the end of the previous member
        start, end = node.members[i - 1][1].end, child.end
    else:  # the only member: the object becomes empty
        start, end = node.inner, node.end - 1
    after = text[end:]
    if i + 1 == len(names) and i == 0:
        new = text[:start] + text[end:]
    elif i + 1 == len(names):
        new = text[:start] + _after_value(after)
    else:
        new = text[:start] + after
    expected = copy.deepcopy(root.value)
    target = expected
    for key in path:
        target = target[key]
    del target[name]
    try:
        same = parse_jsonc(new).value == expected
    except JsoncError:
        same = False
    if not same:
        raise MergeError("could not remove the entry without disturbing the rest of the file")
    return new, "removed"


def _node_at(root: Node, path: tuple[str | int, ...]) -> Node | None:
    """The node at ``path``: a key picks an object's member, a number a list's item."""
    node: Node | None = root
    for key in path:
        if node is None:
            return None
        if isinstance(key, int):
            items = node.elements
            node = items[key] if items is not None and 0 <= key < len(items) else None
        else:
            node = _member(node, key) if node.members is not None else None
    return node


def _checked(new: str, expected: Any, what: str) -> str:
    try:
        same = parse_jsonc(new).value == expected
    except JsoncError:
        same = False
    if not same:
        raise MergeError(f"could not {what} without disturbing the rest of the file")
    return new


def append_item(text: str, path: tuple[str, ...], item: Any) -> str:
    """Add ``item`` at the end of the array at ``path``, touching no other item's text."""
    root = parse_jsonc(text)
    array = _node_at(root, path)
    if array is None or array.elements is None:
        raise MergeError(f'"{".".join(path)}" is not a list')
    unit = _indent_unit(text)
    if array.elements:
        last = array.elements[-1]
        indent = _line_indent(text, last.start)
        body = json.dumps(item, indent=unit).replace("\n", "\n" + indent)
        new = text[: last.end] + f",\n{indent}{body}" + text[last.end :]
    else:
        indent = _line_indent(text, array.start)
        body = json.dumps([item], indent=unit).replace("\n", "\n" + indent)
        new = text[: array.start] + body + text[array.end :]
    expected = copy.deepcopy(root.value)
    target = expected
    for key in path:
        target = target[key]
    target.append(item)
    return _checked(new, expected, "add the entry")


def remove_items(text: str, path: tuple[str | int, ...], unwanted: Callable[[Any], bool]) -> str:
    """Delete the items of the array at ``path`` that ``unwanted`` picks, one by one,
    each with the comma that joined it; the other items' text is kept as it is.
    ``path`` may go through lists too (``("hooks", "Stop", 2, "hooks")``)."""
    root = parse_jsonc(text)
    expected = copy.deepcopy(root.value)
    target = expected
    for key in path:
        target = target[key]
    target[:] = [item for item in target if not unwanted(item)]
    while True:
        array = _node_at(parse_jsonc(text), path)
        if array is None or array.elements is None:
            raise MergeError(f'"{".".join(map(str, path))}" is not a list')
        items = array.elements
        found = [i for i, node in enumerate(items) if unwanted(node.value)]
        if not found:
            return _checked(text, expected, "remove the entry")
        i = found[-1]
        if i + 1 < len(items):
            text = text[: items[i].start] + text[items[i + 1].start :]
        elif i > 0:
            text = text[: items[i - 1].end] + _after_value(text[items[i].end :])
        else:
            text = text[: array.start + 1] + text[array.end - 1 :]


def _after_value(after: str) -> str:
    """The text after a last member's value, minus a trailing comma it may have had."""
    stripped = after.lstrip(" \t")
    return stripped[1:] if stripped.startswith(",") else after


def _nest(path: tuple[str, ...], name: str, entry: Any) -> Any:
    value: Any = {name: entry}
    for key in reversed(path):
        value = {key: value}
    return value


def _verified(
    old: str, new: str, before: dict[str, Any], path: tuple[str, ...], name: str, entry: Any
) -> str:
    """The edit must change exactly the one entry, or nothing is written."""
    expected = copy.deepcopy(before)
    target = expected
    for key in path:
        target = target.setdefault(key, {})
    target[name] = entry
    try:
        after = parse_jsonc(new).value
    except JsoncError:
        after = None
    if after != expected:
        raise MergeError("could not insert the entry without disturbing the rest of the file")
    return new


# --------------------------------------------------------------------------
# Writing


def read_config(path: Path) -> tuple[Path, bytes, str]:
    """(the file to write, its bytes, its text) of a config file; empty when it is missing."""
    target = path.resolve() if path.is_symlink() else path  # keep dotfile links intact
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        raw = b""
    except OSError as exc:
        raise CliError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        return target, raw, raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text; nothing was written") from None


def save_config(path: Path, target: Path, new: str) -> None:
    """Replace the file atomically, keeping its mode (0644 for a new one): its bytes reach
    the disk before the name points at them, so a crash leaves the old file or the new
    one, never a truncated one."""
    try:
        mode = target.stat().st_mode & 0o7777  # an empty file too: its mode is the user's
    except FileNotFoundError:
        mode = 0o644
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise CliError(f"{path}: cannot write it: {exc.strerror or exc}") from None
        raise


def write_entry(path: Path, client: Client, entry: dict[str, Any]) -> str:
    """Merge the entry into the file (created when missing); returns what happened."""
    target, _raw, text = read_config(path)
    try:
        if client.toml:
            new, what = merge_toml(text, client.key, SERVER_NAME, entry)
        else:
            new, what = merge(text, (client.key,), SERVER_NAME, entry)
    except JsoncError as exc:
        kind = "TOML" if client.toml else "JSON"
        raise CliError(
            f"{path} is not valid {kind} ({exc}); nothing was written. Fix the file, or add "
            "the snippet above by hand."
        ) from None
    except MergeError as exc:
        raise CliError(
            f"{path}: {exc}; nothing was written. Add the snippet above by hand."
        ) from None
    if what != "unchanged":
        save_config(path, target, new)
    return what


def run(name: str, *, write: bool, file: Path | None, remote: str | None = None) -> None:
    client = CLIENTS[name]
    info = _stderr
    if remote is not None and client.remote is None:
        url = mcp_url(remote)
        if write:
            raise CliError(
                f"{client.display} takes a remote server as a custom connector in its settings,"
                f" not in a file; add it there: Settings > Connectors > Add custom connector,"
                f" URL {url}",
                exit_code=2,
            )
        sys.stdout.write(url + "\n")
        info(
            f"In {client.display}: Settings > Connectors > Add custom connector, and paste this"
            " URL; it signs you in with the server's own sign-in page. Claude connects from"
            " Anthropic's cloud, so the server must be reachable from the internet over HTTPS."
        )
        return
    portable = client.shared and file is None
    entry = entry_for(client, remote, portable=portable)
    path = file if file is not None else client.path()
    text = snippet(client, entry)
    again = f" --remote {remote}" if remote is not None else ""
    if not write:
        sys.stdout.write(text)
        inside = "at its end" if client.toml else f"inside its {client.key!r} object"
        info(f"Add this to {path} ({inside}, next to other servers),")
        info(f"or let ltm merge it for you: ltm mcp install {client.name}{again} --write")
        if client.name == "claude-code":
            mine = entry_for(client)  # the user's own scope: this ltm and its paths
            every = claude_add_remote(entry["url"]) if remote else claude_add_command(mine)
            info(f"For every project instead: {every}")
        if portable and remote is None:
            _shared_note(client)
        if remote is not None:
            info("The client signs you in with the server's own page the first time it connects.")
        for note in client.notes:
            info(note)
        return
    try:
        what = write_entry(path, client, entry)
    except CliError:
        sys.stdout.write(text)
        raise
    if portable and remote is None:
        _shared_note(client)
    if what == "unchanged":
        info(f"{path} already has this ltm entry; nothing changed")
    else:
        info(f"{what} the {SERVER_NAME!r} server in {path}")
        info(f"Restart {client.display} (or reload its MCP servers) to use it.")


def _shared_note(client: Client) -> None:
    """A file committed with the repository runs on teammates' machines: say what that
    means for the entry (``ltm`` from PATH, none of this user's paths)."""
    info = _stderr
    if shutil.which(SERVER_NAME) is None:
        info(
            f"note: the entry runs ltm from PATH (the file is shared with the repository), and"
            f" no ltm is on this shell's PATH; put it there, or use --file for an entry of"
            f" your own with {ltm_command()[0]}"
        )
    moved = [name for name in PASSED_ENV if os.environ.get(name)]
    if moved:
        info(
            f"note: {' and '.join(moved)} stay out of this shared file; set them where"
            f" {client.display} starts, or use --file for an entry of your own"
        )


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)
