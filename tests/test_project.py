"""Project scope: which project a directory is, ``ltm save`` filling it in, and
``ltm ls``/``ltm resume`` (and the server) listing one project's packets.

Repositories are made with the real ``git``; the CLI runs as a subprocess in
them (tests/clikit.py), against the embedded store and a real server.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from clikit import Cli, Seen, json_reply, signed_in, stub_server
from serverkit import make_packet, running_server

from ltm.cli.project import current_project, fill_project, name_from_url

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(repo: Path, *args: str) -> str:
    assert GIT is not None
    out = subprocess.run(
        [GIT, "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin",
        },
    )
    return out.stdout.strip()


def repo(path: Path, remote: str | None = None, branch: str = "main") -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", branch)
    if remote is not None:
        git(path, "remote", "add", "origin", remote)
    return path


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/acme/app.git", "acme/app"),
        ("https://github.com/acme/app", "acme/app"),
        ("https://user:secret@github.com/acme/app.git", "acme/app"),
        ("git@github.com:acme/app.git", "acme/app"),
        ("ssh://git@git.example.com:2222/acme/app.git", "acme/app"),
        ("git://example.com/acme/app", "acme/app"),
        ("/srv/git/app.git", None),
        ("file:///srv/git/app.git", None),
        ("../app", None),
        ("C:\\repos\\app", None),
        ("", None),
    ],
)
def test_name_from_a_remote_url_is_owner_slash_name_never_a_path(url: str, name: str) -> None:
    assert name_from_url(url) == name


@needs_git
def test_current_project_from_remote_branch_and_detached_head(tmp_path: Path) -> None:
    app = repo(tmp_path / "checkout", "git@github.com:acme/app.git", branch="feature/x")
    sub = app / "src" / "deep"
    sub.mkdir(parents=True)
    assert current_project(sub) == ("acme/app", "feature/x")
    (app / "f").write_text("x")
    git(app, "add", "f")
    git(app, "commit", "-q", "-m", "one")
    commit = git(app, "rev-parse", "HEAD")
    git(app, "checkout", "-q", "--detach")
    assert current_project(app) == ("acme/app", commit[:12])


@needs_git
def test_no_remote_is_the_top_folder_and_a_worktree_reads_the_shared_config(
    tmp_path: Path,
) -> None:
    plain = repo(tmp_path / "plain-repo")
    (plain / "a").mkdir()
    assert current_project(plain / "a") == ("plain-repo", "main")
    (plain / "f").write_text("x")
    git(plain, "add", "f")
    git(plain, "commit", "-q", "-m", "one")
    git(plain, "remote", "add", "origin", "https://example.com/acme/shared.git")
    git(plain, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"))
    assert current_project(tmp_path / "wt") == ("acme/shared", "side")
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert current_project(outside) == ("not-a-repo", None)


def test_fill_project_keeps_what_the_packet_says(tmp_path: Path) -> None:
    here = tmp_path / "proj"
    here.mkdir()
    assert fill_project({"goal": "g"}, here)["project"] == {"name": "proj"}
    other = {"goal": "g", "project": {"name": "elsewhere"}}
    assert fill_project(other, here) == other
    both = {"project": {"name": "x", "ref": "y"}}
    assert fill_project(both, here) is both
    assert fill_project({"project": "not an object"}, here) == {"project": "not an object"}


@needs_git
def test_save_fills_the_project_and_ls_resume_filter_by_it(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    app = cli.at(repo(tmp_path / "app", "https://github.com/acme/app.git"))
    lib = cli.at(repo(tmp_path / "lib", "git@github.com:acme/lib.git", branch="dev"))
    first = app.ok("save", stdin=json.dumps({"goal": "app work", "next_step": "go on"})).strip()
    lib.ok("save", stdin=json.dumps({"goal": "lib work", "next_step": "go on"}))
    second = app.ok("save", stdin=json.dumps({"goal": "more app", "next_step": "go"})).strip()
    stored = json.loads(app.ok("pull", first))
    assert stored["project"] == {"name": "acme/app", "ref": "main"}

    assert [r["id"] for r in json.loads(app.ok("ls", "--here", "--json"))["packets"]] == [
        second,
        first,
    ]
    only_lib = json.loads(app.ok("ls", "--project", "acme/lib", "--json"))["packets"]
    assert [r["goal"] for r in only_lib] == ["lib work"]
    assert len(json.loads(app.ok("ls", "--json"))["packets"]) == 3
    assert json.loads(lib.ok("resume", "--here", "--json"))["resume"].count("lib work") == 1
    assert "more app" in app.ok("resume", "--project=acme/app")
    empty = app.run("ls", "--project", "acme/none")
    assert empty.returncode == 0 and "no packets yet in project acme/none" in empty.stderr
    # usage errors exit 2, as the parser's own do: a script tells them from a failure (1)
    for verb in ("ls", "resume"):
        both = app.fails(verb, "--here", "--project", "x", code=2)
        assert both == "ltm: give --project NAME or --here, not both"
        assert app.fails(verb, "--project", " ", code=2) == "ltm: --project needs a project name"
    # an id names the packet: a filter beside it would be ignored, so it is refused
    for narrow in (["--here"], ["--project", "acme/lib"]):
        said = app.fails("resume", first, *narrow, code=2)
        assert said == "ltm: give a packet ID or --project/--here, not both"
    # The typer forms take the same options (a help flag is not a fast-path form).
    assert "--here" in app.ok("ls", "--help")


def test_the_migration_backfills_project_from_stored_bodies(tmp_path: Path) -> None:
    from ltm.store.sqlite import SqliteStore
    from ltm.store.sqlite_schema import MIGRATIONS

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    # A database from just before project scope (the migrations after it run on open too).
    before = next(
        n for n, step in enumerate(MIGRATIONS) if isinstance(step, str) and "project TEXT" in step
    )
    for step in MIGRATIONS[:before]:
        conn.executescript(step)
    conn.execute(f"PRAGMA user_version = {before}")
    rows = [
        ("01WITHPROJ000", {"project": {"name": "acme/app"}}),
        ("01NOPROJECT00", {"goal": "x"}),
        ("01BADPROJECT0", {"project": "a string"}),
        ("01NOTJSON0000", None),
    ]
    for n, (pid, body) in enumerate(rows):
        raw = b"not json" if body is None else json.dumps(body).encode()
        conn.execute(
            "INSERT INTO packets (id, scope, owner_id, team_id, sort_key, created_at, goal,"
            " conforming, body) VALUES (?, 'u:local', 'local', NULL, ?, ?, 'g', 1, ?)",
            (pid, f"2026-01-0{n + 1}", f"2026-01-0{n + 1}", raw),
        )
    conn.commit()
    conn.close()
    store = SqliteStore(db)
    try:
        page = store.list_packets(owner_id="local", project="acme/app")
        assert [m.id for m in page.items] == ["01WITHPROJ000"]
        assert len(store.list_packets(owner_id="local").items) == 4
        plan = store._conn().execute(
            "EXPLAIN QUERY PLAN SELECT id FROM packets WHERE scope = ? AND project = ?"
            " ORDER BY sort_key DESC, id DESC",
            ("u:local", "acme/app"),
        )
        assert "packets_by_project" in " ".join(str(row) for row in plan.fetchall())
    finally:
        store.close()


def test_the_server_filters_by_project_and_says_so(tmp_path: Path) -> None:
    with running_server(tmp_path / "srv") as server:
        _uid, token = server.issue("alice")
        with server.client(token) as alice:
            for name in ("acme/app", "acme/app", "acme/lib"):
                r = alice.post("/v1/packets", json=make_packet(project={"name": name}))
                assert r.status_code == 201
            alice.post("/v1/packets", json=make_packet())
            listed = alice.get("/v1/packets", params={"project": "acme/app"}).json()
            assert listed["project"] == "acme/app" and len(listed["packets"]) == 2
            assert set(listed["packets"][0]) == {"id", "created_at", "goal"}
            # Without the filter, the reply is the protocol's, unchanged.
            assert set(alice.get("/v1/packets").json()) == {"packets"}
            assert len(alice.get("/v1/packets").json()["packets"]) == 4
            bad = alice.get("/v1/packets", params={"project": ""})
            assert bad.status_code == 400
            long = alice.get("/v1/packets", params={"project": "x" * 129})
            assert long.status_code == 400
        carol = signed_in(server, tmp_path / "home", "carol")
        app = carol.at(repo(tmp_path / "app", "https://github.com/acme/app.git"))
        lib = carol.at(repo(tmp_path / "lib", "https://github.com/acme/lib.git"))
        mine = app.ok("save", stdin=json.dumps({"goal": "app", "next_step": "n"})).strip()
        lib.ok("save", stdin=json.dumps({"goal": "lib", "next_step": "n"}))
        listed = json.loads(app.ok("ls", "--here", "--json"))["packets"]
        assert [r["id"] for r in listed] == [mine]  # alice's acme/app packets are hers


def test_against_a_server_without_the_filter_the_client_filters(tmp_path: Path) -> None:
    """The reference server ignores ?project=: the CLI must not show other projects."""
    bodies = {
        f"01REFERENCE{n:03d}": make_packet(
            id=f"01REFERENCE{n:03d}",
            goal=f"goal {n}",
            **({"project": {"name": "acme/app"}} if n % 2 else {}),
        )
        for n in range(6)
    }
    newest_first = sorted(bodies, reverse=True)

    def reference(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        path = seen.path.split("?", 1)[0]
        if path == "/v1/healthz":
            return json_reply(200, {"ok": True, "version": "0.2"})
        if path == "/v1/packets":
            limit = int(dict(parse_qsl(seen.path.partition("?")[2])).get("limit", 50))
            rows = [
                {k: bodies[i][k] for k in ("id", "created_at", "goal")}
                for i in newest_first[:limit]
            ]
            return json_reply(200, {"packets": rows})
        packet_id = path.rsplit("/", 1)[-1]
        if packet_id in bodies:
            return json_reply(200, bodies[packet_id])
        return json_reply(404, {"error": "not found"})

    with stub_server(reference) as stub:
        cli = Cli(tmp_path / "home")
        cli.ok("auth", stub.url, "--with-token", stdin="a-token-for-the-reference-server")
        rows = json.loads(cli.ok("ls", "--project", "acme/app", "-n", "2", "--json"))["packets"]
        assert [r["id"] for r in rows] == ["01REFERENCE005", "01REFERENCE003"]
