"""``ltm server`` as an operator runs it: init, run, issue-token, tokens, revoke-token."""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpkit
import httpx
import pytest
import typer
from serverkit import (
    SERVER,
    clean_env,
    init_db,
    ltm_server,
    make_packet,
    run_server,
    running_server,
)
from timing import scaled

from ltm.store import Token
from ltm.store.sqlite import SqliteStore

TOKEN = re.compile(r"ltm_(?:[0-9A-Z]{26}_)?[0-9a-f]{64}")  # [the user id] + 256 random bits


def test_init_prints_the_root_token_alone_on_stdout(tmp_path: Path) -> None:
    db = tmp_path / "srv" / "server.db"
    result = ltm_server("init", "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert TOKEN.fullmatch(result.stdout.strip())
    assert result.stdout.count("\n") == 1
    assert "root token" in result.stderr and result.stdout.strip() not in result.stderr
    assert db.stat().st_mode & 0o077 == 0  # the database is private to its owner


def test_a_relative_data_dir_is_named_as_the_file_it_is(tmp_path: Path) -> None:
    """A relative LTM_DATA_DIR (or --db) names another file from another folder: init
    said `ltm server run` alone, which from elsewhere found no database, and that
    refusal's `ltm server init --db data/server.db` made a second one there."""
    made, elsewhere = tmp_path / "made here", tmp_path / "elsewhere"
    made.mkdir()
    elsewhere.mkdir()
    env = clean_env(LTM_DATA_DIR="data")
    db = made / "data" / "server.db"

    def server(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SERVER, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=scaled(60)
        )

    created = server("init", cwd=made)
    assert created.returncode == 0, created.stderr
    assert f"Initialized {db}." in created.stderr
    assert f"Start the server with `ltm server run --db '{db}'`" in created.stderr
    refused = server("run", cwd=elsewhere)
    assert refused.returncode == 1
    there = elsewhere / "data" / "server.db"
    assert refused.stderr == (
        f"ltm: no server database at {there}; create it first with"
        f" `ltm server init --db {shlex.quote(str(there))}`\n"
    )
    assert server("tokens", "--db", str(db.relative_to(made)), cwd=made).returncode == 0


def test_init_twice_does_not_mint_a_second_root_token(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    first = init_db(db)
    again = ltm_server("init", "--db", str(db))
    assert again.returncode == 0
    assert again.stdout == ""
    assert "already initialized" in again.stderr
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM tokens").fetchone()[0] == 1
    finally:
        conn.close()
    assert first not in again.stderr


def test_default_database_lives_in_the_data_dir(tmp_path: Path) -> None:
    env = clean_env(LTM_DATA_DIR=str(tmp_path / "data"))
    result = ltm_server("init", env=env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "server.db").is_file()
    listed = ltm_server("tokens", "--json", env=env)
    assert [t["label"] for t in json.loads(listed.stdout)] == ["root"]


def test_run_refuses_a_missing_database(tmp_path: Path) -> None:
    db = tmp_path / "missing.db"
    result = ltm_server("run", "--db", str(db), "--addr", "127.0.0.1:0", timeout=scaled(30))
    assert result.returncode != 0
    assert "ltm server init" in result.stderr
    assert not db.exists()


@pytest.mark.parametrize("command", ["issue-token alice", "tokens", "revoke-token root"])
def test_token_commands_refuse_a_missing_database(tmp_path: Path, command: str) -> None:
    db = tmp_path / "missing.db"
    result = ltm_server(*command.split(), "--db", str(db))
    assert result.returncode != 0 and "ltm server init" in result.stderr
    assert not db.exists()


@pytest.mark.parametrize("command", ["init", "run --addr 127.0.0.1:0", "tokens"])
def test_a_database_that_is_a_folder_or_no_database_is_one_clear_line(
    tmp_path: Path, command: str
) -> None:
    """``--db`` naming a folder or another file: one line that says so, exit 1. It was an
    "unexpected error: OperationalError", and init made the folder 0600, unenterable."""
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    other = tmp_path / "notes.txt"
    other.write_text("not a database\n")
    for db, said in ((folder, "a folder, not a database file"), (other, "file is not a database")):
        result = ltm_server(*command.split(), "--db", str(db), timeout=scaled(30))
        assert result.returncode == 1, result.stderr
        # (before it, the line that the file's mode was made private, as for any store)
        last = result.stderr.splitlines()[-1]
        assert last == f"ltm: cannot open the server database {db}: {said}", result.stderr
    assert folder.stat().st_mode & 0o777 == 0o755  # left as it was
    assert other.read_text() == "not a database\n"


@pytest.mark.parametrize("addr", ["8080", "localhost", "host:port", "127.0.0.1:99999"])
def test_run_rejects_a_bad_addr(tmp_path: Path, addr: str) -> None:
    db = tmp_path / "server.db"
    init_db(db)
    result = ltm_server("run", "--db", str(db), "--addr", addr, timeout=scaled(30))
    assert result.returncode != 0 and "--addr" in result.stderr


def test_run_rejects_a_bad_external_url(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    init_db(db)
    result = ltm_server(
        "run",
        "--db",
        str(db),
        "--addr",
        "127.0.0.1:0",
        "--external-url",
        "ftp://x",
        timeout=scaled(30),
    )
    assert result.returncode != 0 and "--external-url" in result.stderr


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A file system of 1 MiB of its own (a tmpfs), to fill; skipped where none can be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        timeout=scaled(30),
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=scaled(30))


def test_a_full_disk_is_named_when_the_database_cannot_be_opened(small_disk: Path) -> None:
    """SQLite, given no room for the shared-memory file it makes on opening, says "disk
    I/O error", which reads as a failing disk: the line says the disk is full."""
    db = small_disk / "server.db"
    init_db(db)
    with (small_disk / "filler").open("wb", buffering=0) as filler, pytest.raises(OSError):
        while True:  # until no room is left
            filler.write(b"\0" * 4096)
    listed = ltm_server("tokens", "--db", str(db))
    assert listed.returncode == 1
    assert listed.stderr.startswith(f"ltm: cannot open the server database {db}: "), listed.stderr
    assert listed.stderr.endswith(f"; the disk holding {small_disk} is full\n")
    # A path the file system refuses for another reason is that reason alone, full or not.
    beside = ltm_server("init", "--db", str(small_disk / "filler" / "server.db"))
    assert beside.returncode == 1 and "Not a directory" in beside.stderr, beside.stderr
    assert "is full" not in beside.stderr


def test_a_log_level_that_is_none_stops_the_start_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "server.db"
    init_db(db)
    for level in ("LOUD", "10"):
        result = ltm_server(
            "run", "--db", str(db), "--addr", "127.0.0.1:0", env=clean_env(LTM_LOG_LEVEL=level)
        )
        assert result.returncode == 1 and result.stderr == (
            f"ltm: LTM_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL,"
            f" got {level!r}\n"
        )
    # A level's name in any case, WARN among them, is one.
    from ltm.logs import log_level

    monkeypatch.setenv("LTM_LOG_LEVEL", "warn")
    assert log_level() == "WARNING"


@pytest.mark.parametrize(
    "url",
    [
        "https://ltm.example.org:99999",  # no such port
        "https://ltm.example.org:0",
        "https://:443",  # no host
        "https://exa mple.org",
        "https://ltm.example.org;x",
        "https://ltm.example.org/#",  # an empty fragment or query still ends every link
        "https://ltm.example.org/?",
        "https://ltm.example.org/a b",
        "https://[zz]/",
    ],
)
def test_an_external_url_no_link_can_start_with_is_refused(url: str) -> None:
    from ltm.cli.server.commands import _check_url

    with pytest.raises(typer.Exit):
        _check_url(url)


def test_an_external_url_with_a_password_is_refused_without_repeating_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ltm.cli.server.commands import _check_url

    with pytest.raises(typer.Exit):
        _check_url("https://ops:hunter2@ltm.example.org")
    err = capsys.readouterr().err
    assert "user name or password" in err and "hunter2" not in err


def test_an_external_url_is_kept_in_lower_case() -> None:
    """The pages mark their cookies Secure (and __Host-) when the address they are
    reached at starts with "https://": an "HTTPS://" one left them plain."""
    from ltm.cli.server.commands import _check_url

    assert _check_url("HTTPS://LTM.Example.org/Team/") == "https://ltm.example.org/Team"
    assert _check_url("http://[::1]:8080/") == "http://[::1]:8080"


def test_issue_list_and_revoke_tokens(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    root = init_db(db)
    issued = ltm_server("issue-token", "alice", "--db", str(db))
    assert issued.returncode == 0, issued.stderr
    alice = issued.stdout.strip()
    assert TOKEN.fullmatch(alice) and issued.stdout.count("\n") == 1
    second = ltm_server("issue-token", "alice", "--db", str(db))  # another device's token
    assert second.returncode == 0, second.stderr
    assert "token 'alice-2' for the existing user 'alice'" in second.stderr
    duplicate = ltm_server("issue-token", "alice", "--label", "alice", "--db", str(db))
    assert duplicate.returncode != 0 and "'alice' already exists" in duplicate.stderr
    other = ltm_server("issue-token", "bob", "--label", "bob-laptop", "--db", str(db))
    assert other.returncode == 0
    # A device signed in read-only, for 30 days: what the operator is shown of it.
    bob_id = other.stderr.rsplit("(id ", 1)[1].split(")")[0]
    store = SqliteStore(db)
    try:
        store.add_token(
            Token(
                label="bob-phone",
                user_id=bob_id,
                token_hash="0" * 64,
                created_at=datetime(2026, 5, 1, tzinfo=UTC),
                scope="read",
                expires_at=datetime(2026, 5, 31, tzinfo=UTC),
            )
        )
    finally:
        store.close()

    server = run_server(db, tmp_path / "server.log", root)
    try:
        assert server.client(alice).get("/v1/teams").status_code == 200
        listed = ltm_server("tokens", "--db", str(db))
        assert listed.returncode == 0
        lines = listed.stdout.splitlines()
        assert lines[0].split() == [
            *("LABEL", "USER", "USER", "ID", "CREATED", "LAST", "USED", "EXPIRES", "SCOPE")
        ]
        rows = {line.split()[0]: line.split() for line in lines[1:]}
        assert set(rows) == {"root", "alice", "alice-2", "bob-laptop", "bob-phone"}
        assert rows["bob-laptop"][4:] == ["never", "never", "read", "write"]
        assert rows["alice"][4] != "never"  # alice's token was just used
        assert rows["bob-phone"][4:] == ["never", "2026-05-31T00:00:00Z", "read"]
        for token in (root, alice, other.stdout.strip()):
            assert token not in listed.stdout
        as_json = json.loads(ltm_server("tokens", "--json", "--db", str(db)).stdout)
        assert {t["label"]: t["user"] for t in as_json} == {
            "root": "root",
            "alice": "alice",
            "alice-2": "alice",
            "bob-laptop": "bob",
            "bob-phone": "bob",
        }
        phone = next(t for t in as_json if t["label"] == "bob-phone")
        assert (phone["scope"], phone["expires_at"]) == ("read", "2026-05-31T00:00:00Z")
        assert len({t["user_id"] for t in as_json if t["user"] == "alice"}) == 1  # one user

        revoked = ltm_server("revoke-token", "alice", "--db", str(db))
        assert revoked.returncode == 0, revoked.stderr
        r = server.client(alice).get("/v1/teams")
        assert r.status_code == 401 and r.json() == {"error": "invalid token"}
        assert server.client(root).get("/v1/teams").status_code == 200
        missing = ltm_server("revoke-token", "alice", "--db", str(db))
        assert missing.returncode != 0 and "alice" in missing.stderr

        # Someone leaves: every token of theirs ends at once, and nobody else's (the new
        # token takes the free label "alice" again).
        third = ltm_server("issue-token", "alice", "--db", str(db)).stdout.strip()
        assert server.client(third).get("/v1/teams").status_code == 200
        gone = ltm_server("revoke-token", "--user", "ALICE", "--db", str(db))
        assert gone.returncode == 0, gone.stderr
        assert "Revoked 2 token(s) of 'alice': alice-2, alice." in gone.stderr
        assert server.client(third).get("/v1/teams").status_code == 401
        assert server.client(other.stdout.strip()).get("/v1/teams").status_code == 200
        # Without a token, a user is known by id alone.
        assert "no user 'alice' holding a token" in (
            ltm_server("revoke-token", "--user", "alice", "--db", str(db)).stderr
        )
        alice_id = next(t["user_id"] for t in as_json if t["user"] == "alice")
        again = ltm_server("revoke-token", "--user", alice_id, "--db", str(db))
        assert again.returncode == 0 and "no token left" in again.stderr
        # Her name alone never gives her account (a newcomer would get her packets), and
        # the refusal names the id that does.
        back = ltm_server("issue-token", "Alice", "--db", str(db))
        assert back.returncode != 0 and f"'alice' is user {alice_id}" in back.stderr
        assert "whose tokens are all revoked" in back.stderr
        by_id = ltm_server("issue-token", alice_id, "--db", str(db))
        assert by_id.returncode == 0 and "for the existing user 'alice'" in by_id.stderr
        assert server.client(by_id.stdout.strip()).get("/v1/teams").status_code == 200
        for wrong in ((), ("bob-laptop", "--user", "bob")):
            refused = ltm_server("revoke-token", *wrong, "--db", str(db))
            assert refused.returncode != 0 and "LABEL or --user" in refused.stderr
        nobody = ltm_server("revoke-token", "--user", "zed", "--db", str(db))
        assert "no user 'zed' holding a token" in nobody.stderr
        # A token pasted where its label (or its user) belongs is refused, never repeated.
        for pasted in (("revoke-token", third), ("revoke-token", "--user", f"Bearer {third}")):
            refused = ltm_server(*pasted, "--db", str(db))
            assert refused.returncode != 0 and "holds a token itself" in refused.stderr
            assert third not in refused.stderr + refused.stdout
            assert third.split("_")[1] in refused.stderr  # its user id, to revoke by
    finally:
        server.stop()


def test_a_lost_root_token_is_replaced_from_the_box_and_the_first_user_named(
    tmp_path: Path,
) -> None:
    db = tmp_path / "server.db"
    created = ltm_server("init", "--db", str(db), "--name", "Dana")
    assert created.returncode == 0, created.stderr
    lost = created.stdout.strip()
    again = ltm_server("init", "--db", str(db))
    assert "a lost root token: `ltm server issue-token root`" in again.stderr

    fresh = ltm_server("issue-token", "root", "--db", str(db))  # "root" names the first user
    assert fresh.returncode == 0, fresh.stderr
    assert "token 'Dana' for the existing user 'Dana'" in fresh.stderr
    assert ltm_server("revoke-token", "root", "--db", str(db)).returncode == 0  # the lost one
    also = ltm_server("issue-token", "Dana", "--db", str(db))  # or by display name
    assert "token 'Dana-2' for the existing user 'Dana'" in also.stderr
    server = run_server(db, tmp_path / "server.log", lost)
    try:
        assert server.client(lost).get("/v1/teams").status_code == 401
        me = server.client(fresh.stdout.strip()).get("/v1/whoami").json()
        assert me["user"]["display"] == "Dana" and len(me["user"]["id"]) == 26  # a ULID
        assert me["token"]["label"] == "Dana" and me["token"]["scope"] == "read write"
        also_me = server.client(also.stdout.strip()).get("/v1/whoami").json()["user"]
        assert also_me["id"] == me["user"]["id"]
    finally:
        server.stop()

    # Display names are unique per server in any case: never a second Dana.
    twice = ltm_server("issue-token", "dana", "--new-user", "--db", str(db))
    assert twice.returncode != 0 and "'dana' is taken on this server" in twice.stderr


def test_a_read_only_token_reads_and_never_writes(tmp_path: Path) -> None:
    """A dashboard's or a CI job's token that only reads: the operator had no way to mint
    one (only a device's sign-in could ask for less than full access)."""
    db = tmp_path / "server.db"
    root = init_db(db)
    issued = ltm_server("issue-token", "dash", "--read-only", "--db", str(db))
    assert issued.returncode == 0, issued.stderr
    assert "Issued read-only token 'dash' for the new user 'dash'" in issued.stderr
    listed = json.loads(ltm_server("tokens", "--json", "--db", str(db)).stdout)
    assert {t["label"]: t["scope"] for t in listed} == {"root": "read write", "dash": "read"}
    server = run_server(db, tmp_path / "server.log", root)
    try:
        reader = server.client(issued.stdout.strip())
        assert reader.get("/v1/packets").status_code == 200
        pushed = reader.post("/v1/packets", json=make_packet())
        assert pushed.status_code == 403, pushed.text
    finally:
        server.stop()


def test_the_root_token_revoked_first_never_makes_a_stranger_root(tmp_path: Path) -> None:
    """A leaked root token is revoked at once, before a new one is issued: `issue-token
    root` then made a new, empty user called root (who took the label, and the name,
    for good), and the revoke did not say the first user's id, the one name left."""
    db = tmp_path / "server.db"
    assert ltm_server("init", "--db", str(db), "--name", "Dana").returncode == 0
    revoked = ltm_server("revoke-token", "root", "--db", str(db))
    assert revoked.returncode == 0, revoked.stderr
    said = re.search(r"'Dana' \(id ([0-9A-Z]{26})\) now holds no token", revoked.stderr)
    assert said is not None, revoked.stderr
    dana = said.group(1)
    assert f"`ltm server issue-token {dana}`" in revoked.stderr

    # Nor does init take the database for an empty one: it minted a root user as well.
    again = ltm_server("init", "--db", str(db))
    assert again.returncode == 0 and again.stdout == ""
    assert "already initialized" in again.stderr and "the root token is revoked" in again.stderr

    refused = ltm_server("issue-token", "root", "--db", str(db))
    assert refused.returncode == 1 and refused.stdout == ""
    assert "'root' names nobody" in refused.stderr and "--new-user" in refused.stderr
    assert json.loads(ltm_server("tokens", "--json", "--db", str(db)).stdout) == []
    back = ltm_server("issue-token", dana, "--db", str(db))
    assert back.returncode == 0 and f"the existing user 'Dana' (id {dana})" in back.stderr
    # Asked for plainly, a user called root is made.
    made = ltm_server("issue-token", "root", "--new-user", "--db", str(db))
    assert made.returncode == 0 and "for the new user 'root'" in made.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_stops_cleanly_on_a_signal(tmp_path: Path, sig: int) -> None:
    db = tmp_path / "server.db"
    root = init_db(db)
    server = run_server(db, tmp_path / "server.log", root)
    assert server.client(root).post("/v1/packets", json={}).status_code == 400
    assert server.stop(sig) == 0
    assert "stopped" in server.logs()
    with pytest.raises(httpx.ConnectError):
        httpkit.get(server.url + "/v1/healthz", timeout=scaled(2))
    # The WAL was checkpointed and the database is whole.
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


@pytest.mark.skipif(os.name != "posix", reason="the writers' lock is an flock")
def test_a_stop_does_not_wait_for_a_request_stuck_on_a_lock(tmp_path: Path) -> None:
    """Another program holds the database's write lock (`sqlite3` at its prompt) while a
    push waits for it: SIGTERM stops the server once waitress's 5 s for requests in
    flight are over, the push dropped unanswered and not stored. Closing the database
    waited for the push's statement, that is for SQLite's 30 s busy timeout."""
    import fcntl

    from ltm.store.sqlite import BUSY_TIMEOUT_MS

    db = tmp_path / "server.db"
    root = init_db(db)
    server = run_server(db, tmp_path / "server.log", root)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    data = make_packet()
    answers: list[object] = []

    def push() -> None:
        try:
            answers.append(server.client(root).post("/v1/packets", json=data).status_code)
        except httpx.HTTPError as exc:
            answers.append(exc)

    pushing = threading.Thread(target=push)
    pushing.start()
    try:
        # The server takes its writers' lock, then waits for SQLite's: once the lock is
        # taken, the push is waiting on the holder.
        lock = os.open(f"{db}.writelock", os.O_RDWR)
        try:
            deadline = time.monotonic() + scaled(30)
            while time.monotonic() < deadline:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    break
                fcntl.flock(lock, fcntl.LOCK_UN)
                time.sleep(0.01)
            else:
                pytest.fail("the push never reached the database")
        finally:
            os.close(lock)
        server.proc.send_signal(signal.SIGTERM)
        # Before the push's wait for the lock would end: the stop does not wait for it.
        assert server.proc.wait(timeout=BUSY_TIMEOUT_MS / 1000 - 5) == 0  # not a budget
        assert "stopped" in server.logs()
        # waitress's word on it is a JSON line as the app's are; only ltm's own say is text.
        lines = server.logs().splitlines()
        records = [json.loads(line) for line in lines if not line.startswith("ltm server: ")]
        assert any(r["message"] == "1 thread(s) still running" for r in records), lines
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        server.stop()
        pushing.join(timeout=scaled(30))
    assert len(answers) == 1 and isinstance(answers[0], httpx.HTTPError)  # never a 201
    with sqlite3.connect(db) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        found = check.execute("SELECT count(*) FROM packets WHERE id = ?", (data["id"],))
        assert found.fetchone() == (0,)


def test_run_logs_to_stderr_and_nothing_to_stdout(tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    root = init_db(db)
    proc = subprocess.Popen(
        [*SERVER, "run", "--db", str(db), "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    port = int(re.search(r":(\d+) ", line).group(1))  # type: ignore[union-attr]
    headers = {"Authorization": f"Bearer {root}"}
    assert httpkit.get(f"http://127.0.0.1:{port}/v1/packets", headers=headers).status_code == 200
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=scaled(15))
    assert proc.returncode == 0
    assert out == b""
    records = [json.loads(x) for x in err.decode().splitlines() if x.startswith("{")]
    assert any(r.get("path") == "/v1/packets" and r.get("status") == 200 for r in records)


def test_importing_the_commands_is_cheap() -> None:
    code = (
        "import sys, ltm.cli.server.commands\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('chalice', 'waitress', 'aws_lambda_powertools', 'pydantic', 'httpx')"
        " or m.startswith('ltm.store') or m.startswith('ltm.service')]\n"
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(60)
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_app_py_sees_the_ltm_modules_themselves() -> None:
    """``import chalicelib.X`` inside app.py is ``ltm.X``: the same objects, never a copy."""
    code = (
        "import sys\n"
        "from ltm.cli.server.loader import load_app\n"
        "m = load_app()\n"
        "import chalicelib, ltm, chalicelib.service.errors as a, ltm.service.errors as b\n"
        "assert a is b and chalicelib is ltm\n"
        "aliases = [n for n in sys.modules if n.split('.')[0] == 'chalicelib']\n"
        "assert aliases and all(sys.modules[n] is sys.modules['ltm' + n[10:]] for n in aliases)\n"
        "assert ltm.__spec__.name == 'ltm' and b.__spec__.name == 'ltm.service.errors'\n"
        "print(len(aliases))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(60)
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 5


def test_find_app_py_in_an_installed_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ltm
    from ltm.cli.server import loader

    site_packages = tmp_path / "lib" / "site-packages" / "ltm"
    site_packages.mkdir(parents=True)
    (tmp_path / "share" / "ltm").mkdir(parents=True)
    (tmp_path / "share" / "ltm" / "app.py").write_text("# app\n")
    monkeypatch.setattr(ltm, "__file__", str(site_packages / "__init__.py"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert loader.find_app_py() == tmp_path / "share" / "ltm" / "app.py"
    (tmp_path / "share" / "ltm" / "app.py").unlink()
    monkeypatch.setattr(loader.site, "USER_BASE", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError):
        loader.find_app_py()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_run_serves_from_one_process(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
        assert children.read_text().split() == []
        assert server.client(server.root_token).get("/v1/teams").status_code == 200


def test_an_address_in_use_is_one_clear_error_and_never_a_second_server(tmp_path: Path) -> None:
    """A second server on the address of a running one exits 1 with one line; the first
    keeps every connection (a second one sharing the port would answer some of them
    from its own database: "token rejected")."""
    with running_server(tmp_path / "first") as first:
        second_db = tmp_path / "second" / "server.db"
        second_db.parent.mkdir()
        init_db(second_db)
        address = first.url.removeprefix("http://")
        result = ltm_server("run", "--db", str(second_db), "--addr", address, timeout=scaled(30))
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"ltm: cannot listen on {address}: Address already in use"
        ]
        for _ in range(16):  # a new connection each: all reach the first server
            with first.client(first.root_token) as client:
                assert client.get("/v1/teams").status_code == 200


def _documented(command: str, doc: str) -> str:
    """The one line of a code block of ``doc`` that holds ``command``."""
    text = (Path(__file__).resolve().parents[1] / "docs" / doc).read_text(encoding="utf-8")
    blocks = re.findall(r"^```\w*\n(.*?)^```", text, flags=re.M | re.S)
    found = {line for block in blocks for line in block.splitlines() if command in line}
    assert len(found) == 1, found
    return found.pop()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 command on this machine")
def test_the_documented_backup_of_a_running_server_is_whole_and_private(tmp_path: Path) -> None:
    """docs/backup.md's copy of the server's database, taken while the server runs and a
    writer pushes all along: it completes, and gives a database that opens with every
    packet acknowledged before it started, and, as the database itself, readable by its
    owner alone (it holds every user's memory), whatever the umask of the shell it is
    typed in.

    The database is made big (a table of ballast) so that copying it takes a while, and
    another process (this one) commits beside the server as fast as it can: the copy
    `.backup` makes, 100 pages at a time, starts over whenever another process writes
    between two of its steps, and under a steady writer never ended.
    """
    db = tmp_path / "server.db"
    root = init_db(db)
    with sqlite3.connect(db) as ballast:
        ballast.execute("CREATE TABLE ballast (b BLOB)")
        ballast.execute("CREATE TABLE ticks (n INTEGER)")
        ballast.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 96)"
            " INSERT INTO ballast SELECT zeroblob(1048576) FROM n"
        )
    server = run_server(db, tmp_path / "server.log", root)
    acknowledged: list[tuple[float, str]] = []  # (when its 201 came, id)
    done = threading.Event()
    failures: list[str] = []

    def writer() -> None:
        with server.client(root) as client:
            while not done.is_set():
                data = make_packet(goal=f"pushed during the backup {time.monotonic_ns()}")
                reply = client.post("/v1/packets", json=data)
                if reply.status_code != 201:
                    failures.append(reply.text)
                    return
                acknowledged.append((time.monotonic(), data["id"]))

    def ticker() -> None:
        conn = sqlite3.connect(db, isolation_level=None, timeout=scaled(30))
        try:
            conn.execute("PRAGMA synchronous = OFF")  # as many commits as it can
            while not done.is_set():
                conn.execute("INSERT INTO ticks VALUES (1)")
        finally:
            conn.close()

    pushing = [threading.Thread(target=writer), threading.Thread(target=ticker)]
    try:
        for thread in pushing:
            thread.start()
        while len(acknowledged) < 20 and all(thread.is_alive() for thread in pushing):
            time.sleep(0.01)
        command = _documented("copy.db", "backup.md")
        started = time.monotonic()
        backup = subprocess.Popen(
            ["sh", "-c", f"umask 022; {command}"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, err = backup.communicate(timeout=scaled(60))
        except subprocess.TimeoutExpired:
            os.killpg(backup.pid, signal.SIGKILL)
            backup.communicate()
            pytest.fail("the documented backup never completed while pushes arrived")
        assert backup.returncode == 0, err
        assert all(thread.is_alive() for thread in pushing), failures  # pushed all along
    finally:
        done.set()
        for thread in pushing:
            thread.join(timeout=scaled(30))
        server.stop()
    assert not failures, failures[:1]
    before = [packet for when, packet in acknowledged if when < started]
    copy = tmp_path / "copy.db"
    assert copy.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(copy) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    from ltm.store.sqlite import SqliteStore

    store = SqliteStore(copy)
    try:
        assert all(store.get_packet(packet) is not None for packet in before)
    finally:
        store.close()


def _as_user(uid: int, gid: int, work: Callable[[], None]) -> int:
    """The exit status of ``work`` run in a forked child as user ``uid`` (1: it raised)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setgid(gid)
            os.setuid(uid)
            work()
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_a_database_this_user_cannot_write_is_one_clear_line(tmp_path: Path) -> None:
    """A database restored read-only, or run by a user other than its owner: the verb
    says which file and which user in one line, never an "unexpected error". (Root
    writes whatever the mode: as root, the verb runs as nobody, in a child of this
    process, as nobody cannot reach this Python.)"""
    import getpass  # noqa: F401  (the verb's, imported while the child can read it)

    from ltm.cli.server.commands import app
    from ltm.cli.start import extras  # noqa: F401
    from ltm.service import tokens  # noqa: F401
    from ltm.store.sqlite import SqliteStore  # noqa: F401

    base = Path(tempfile.mkdtemp())  # tmp_path's parents are root's alone
    try:
        base.chmod(0o755)
        db = base / "server.db"
        init_db(db)
        db.chmod(0o400)
        user = pwd.getpwuid(os.geteuid())
        if user.pw_uid == 0:
            user = pwd.getpwnam("nobody")
            for file in (base, *base.iterdir()):
                os.chown(file, user.pw_uid, user.pw_gid)
        err = tmp_path / "stderr"
        sink = err.open("w")  # here: the child cannot make a file in tmp_path

        def verb() -> None:
            os.dup2(sink.fileno(), 2)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            status = app(["issue-token", "sam", "--db", str(db)], standalone_mode=False)
            sys.stderr.flush()
            os._exit(status or 0)  # click hands back the status of typer.Exit

        try:
            assert _as_user(user.pw_uid, user.pw_gid, verb) == 1
        finally:
            sink.close()
        said = err.read_text()
        assert said.startswith(f"ltm: cannot write {db} as {user.pw_name} "), said
        assert "readonly" in said and said.count("\n") == 1
    finally:
        shutil.rmtree(base)


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0, reason="needs root, to act as two users"
)
def test_issue_token_as_root_leaves_the_server_user_able_to_write(tmp_path: Path) -> None:
    """The server runs as a user of its own; the operator runs `sudo ltm server
    issue-token --db ...` on its database. Whatever root creates beside it stays the
    database owner's, as SQLite gives its -wal and -shm: a writers' lock left root's
    (one made for a database from before the lock, or restored without it) refused the
    server every write."""
    from ltm.store.sqlite import SqliteStore

    service = pwd.getpwnam("nobody")
    warm = SqliteStore(tmp_path / "warm.db")  # what the child runs, imported as root
    warm.ensure_secret("warm", b"x")
    warm.close()
    base = Path(tempfile.mkdtemp())  # tmp_path's parents are root's alone
    try:
        base.chmod(0o755)
        folder = base / "srv"
        folder.mkdir()
        os.chown(folder, service.pw_uid, service.pw_gid)
        db = folder / "server.db"

        def write(name: str) -> Callable[[], None]:
            def work() -> None:
                store = SqliteStore(db)
                try:
                    store.ensure_secret(name, b"x")
                finally:
                    store.close()

            return work

        assert _as_user(service.pw_uid, service.pw_gid, write("made")) == 0
        Path(f"{db}.writelock").unlink()  # as a database from before the writers' lock
        issued = ltm_server("issue-token", "sam", "--db", str(db))
        assert issued.returncode == 0, issued.stderr
        assert _as_user(service.pw_uid, service.pw_gid, write("after")) == 0
    finally:
        shutil.rmtree(base)
