"""Which project the working directory belongs to: the name and ref a packet carries.

The name is the git remote ``origin``'s ``owner/name`` (https, ssh and
``git@host:owner/name.git`` forms), else the git top folder's name, else the
working directory's name; the ref is the current branch, or the short commit
when HEAD is detached. Never a local path: a packet travels.

Read straight from the files under ``.git`` (HEAD, config, and for a linked
worktree its ``commondir``) instead of running ``git``: spawning git costs
more than a whole hook's work, and hooks run at every session start.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_NAME = 128  # the protocol's limits on project.name and project.ref
MAX_REF = 256
SHORT_COMMIT = 12

# [remote "origin"] ... url = VALUE, as git writes it (we read, never write).
_SECTION = re.compile(r'^\s*\[\s*remote\s+"origin"\s*\]\s*$')
_ANY_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(.*?)\s*$", re.IGNORECASE)
# scp-like: [user@]host:path, where the host has no slash before the colon.
_SCP = re.compile(r"^(?:[^@/]+@)?[^/:]+:(?!/)(.+)$")


def current_project(cwd: str | Path | None = None) -> tuple[str, str | None] | None:
    """``(name, ref)`` of the project at ``cwd`` (default: the process's), or None.

    None only when no usable name can be found (a working directory of ``/``).
    """
    start = Path(cwd) if cwd is not None else Path.cwd()
    try:
        start = start.absolute()
    except OSError:
        return None
    found = _git_dirs(start)
    if found is None:
        name = _clean_name(start.name)
        return (name, None) if name else None
    top, git_dir, common_dir = found
    name = _remote_name(common_dir / "config") or _clean_name(top.name)
    if not name:
        return None
    return name, _head_ref(git_dir)


def _git_dirs(start: Path) -> tuple[Path, Path, Path] | None:
    """(work tree top, this checkout's git dir, the shared git dir) of the repository."""
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        try:
            if dot_git.is_dir():
                return folder, dot_git, dot_git
            if dot_git.is_file():
                # A linked worktree or a submodule: "gitdir: PATH" (maybe relative).
                text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
                if not text.startswith("gitdir:"):
                    return None
                git_dir = (folder / text[len("gitdir:") :].strip()).resolve()
                common = git_dir
                commondir = git_dir / "commondir"
                if commondir.is_file():
                    common = (git_dir / commondir.read_text().strip()).resolve()
                return folder, git_dir, common
        except OSError:
            return None
    return None


def _remote_name(config: Path) -> str | None:
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        if _SECTION.match(line):
            inside = True
        elif _ANY_SECTION.match(line):
            inside = False
        elif inside and (m := _URL.match(line)):
            return name_from_url(m.group(1).strip('"'))
    return None


def name_from_url(url: str) -> str | None:
    """``owner/name`` from a git remote URL; None for a local path or anything unclear.

    https://host/owner/name(.git), ssh://[user@]host[:port]/owner/name.git,
    git@host:owner/name.git. Credentials in the URL are never kept (only the
    path is read), and a local path (file://, /srv/x.git, C:\\x) gives None.
    """
    url = url.strip()
    if not url:
        return None
    scheme, sep, rest = url.partition("://")
    if sep:
        if scheme.lower() == "file":
            return None
        path = rest.partition("/")[2]  # drop [user[:password]@]host[:port]
    else:
        if url.startswith(("/", ".", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", url):
            return None  # a local path
        m = _SCP.match(url)
        if m is None:
            return None
        path = m.group(1)
    path = path.split("?", 1)[0].split("#", 1)[0].strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    if not parts:
        return None
    return _clean_name("/".join(parts[-2:]))


def _clean_name(name: str) -> str | None:
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    return name[:MAX_NAME] or None


def _head_ref(git_dir: Path) -> str | None:
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        ref = head[4:].strip()
        for prefix in ("refs/heads/", "refs/"):
            if ref.startswith(prefix):
                ref = ref[len(prefix) :]
                break
        return ref[:MAX_REF] or None
    if re.fullmatch(r"[0-9a-fA-F]{7,64}", head):
        return head[:SHORT_COMMIT].lower()
    return None


def fill_project(data: dict[str, object], cwd: str | Path | None = None) -> dict[str, object]:
    """``data`` with ``project.name``/``project.ref`` added from ``cwd`` where it leaves them out.

    A packet naming another project keeps it as it is (its ref is not
    guessed from this directory); one with no project gets this directory's.
    """
    project = data.get("project")
    if project is not None and not isinstance(project, dict):
        return data  # malformed: leave it for validation to report
    have = dict(project or {})
    if "name" in have and "ref" in have:
        return data
    found = current_project(cwd)
    if found is None:
        return data
    name, ref = found
    if "name" not in have:
        have["name"] = name
    if "ref" not in have and ref is not None and have.get("name") == name:
        have["ref"] = ref
    if have == (project or {}):
        return data
    return {**data, "project": have}


def here() -> str | None:
    """The current project's name (for ``--here``), or None when there is none."""
    found = current_project()
    return found[0] if found else None
