"""The outbox: a save whose server is down is kept on the machine, and pushed once the
server is back, by the next command that reaches it or by ``ltm push --outbox``.

A real ``ltm server run`` on a fixed loopback port, stopped and started again on the same
port and database; the real ``ltm`` in subprocesses; the official MCP client for the
agent's ``save``.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import sqlite3
import stat
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from clikit import LTM, Cli, Seen, free_port, signed_in, stub_server
from serverkit import Server, init_db, ltm_server, run_server
from test_mcp import Shim
from test_project import needs_git, repo
from timing import scaled


class Restartable:
    """A server that can be stopped and started again at the same URL and database."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.db = directory / "server.db"
        self.root = init_db(self.db)
        self.port = free_port()
        self.server: Server | None = None
        self.start()

    def start(self) -> Server:
        self.server = run_server(
            self.db, self.directory / "server.log", self.root, "--addr", f"127.0.0.1:{self.port}"
        )
        return self.server

    def stop(self) -> None:
        assert self.server is not None
        self.server.stop()

    @property
    def live(self) -> Server:
        assert self.server is not None
        return self.server

    def ids(self) -> set[str]:
        with closing(sqlite3.connect(self.db)) as db:
            return {row[0] for row in db.execute("SELECT id FROM packets")}


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Restartable]:
    restartable = Restartable(tmp_path / "server")
    try:
        yield restartable
    finally:
        restartable.stop()


Reply = tuple[int, dict[str, str], bytes]


def packet(goal: str) -> str:
    return json.dumps({"goal": goal, "next_step": "Carry on from here."})


BAD_GATEWAY = (502, {"Content-Type": "text/html"}, b"<html><h1>502 Bad Gateway</h1></html>")


@contextmanager
def proxy_to(
    box: Restartable, meddle: Callable[[Seen], Reply | None] | None = None
) -> Iterator[str]:
    """A reverse proxy in front of ``box``, as docs/security.md has one for TLS: it passes
    each request on, and answers 502 Bad Gateway while the server behind it is down.
    ``meddle`` sees each request first; what it answers is the reply instead."""

    def forward(request: Seen) -> Reply:
        instead = meddle(request) if meddle is not None else None
        if instead is not None:
            return instead
        return passed_on(box, request)

    with stub_server(forward) as stub:
        yield stub.url


def passed_on(box: Restartable, request: Seen) -> Reply:
    """``request`` sent on to ``box`` as a proxy does, and its answer (502 when it is down)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", box.port, timeout=scaled(30))
    headers = {k: v for k, v in request.headers.items() if k not in ("host", "connection")}
    try:
        conn.request(request.method, request.path, body=request.body or None, headers=headers)
        reply = conn.getresponse()
        body = reply.read()
    except ConnectionRefusedError:
        return BAD_GATEWAY
    finally:
        conn.close()
    hop = ("content-length", "transfer-encoding", "connection", "keep-alive")
    return reply.status, {k: v for k, v in reply.getheaders() if k.lower() not in hop}, body


def outbox_files(cli: Cli) -> list[Path]:
    folder = Path(cli.env["LTM_DATA_DIR"]) / "outbox"
    return sorted(p for p in folder.glob("*.json")) if folder.exists() else []


def test_a_save_while_the_server_is_down_is_kept_and_pushed_once(
    box: Restartable, tmp_path: Path
) -> None:
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()

    result = olive.run("save", "-", stdin=packet("Keep the save that could not go"))
    assert result.returncode == 0, result.stderr
    kept = result.stdout.strip()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "cannot reach" in lines[0] and f"kept {kept} in the outbox" in lines[0]
    assert "ltm push --outbox" in lines[0]

    files = outbox_files(olive)
    assert len(files) == 1
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700
    assert kept in files[0].read_text()

    # Doctor and the agent's session start both say what waits.
    doctor = olive.run("doctor")
    assert re.search(
        r"warn\s+outbox\s+1 saved packet waits for " + re.escape(box.live.url), doctor.stdout
    )
    assert "ltm push --outbox" in doctor.stdout
    started = olive.run("hook", "session-start", stdin=json.dumps({"cwd": str(tmp_path)}))
    context = json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "1 saved packet waits for" in context and "not lost" in context

    # A command while the server is still down: the command fails as it would, the
    # packet waits on.
    olive.fails("ls")
    assert len(outbox_files(olive)) == 1

    box.start()
    assert kept not in box.ids()
    listed = olive.run("ls")
    assert listed.returncode == 0, listed.stderr
    assert f"outbox: pushed {kept} to {box.live.url}" in listed.stderr
    assert "dropped" not in listed.stderr  # the version delivered is no older version of itself
    assert kept[:12] in listed.stdout  # pushed before the listing was asked for
    assert kept in box.ids()
    assert outbox_files(olive) == []

    again = olive.run("ls")
    assert "outbox" not in again.stderr  # exactly once
    assert re.search(r"ok\s+outbox\s+empty", olive.run("doctor").stdout)
    shown = json.loads(olive.ok("pull", kept))
    assert shown["goal"] == "Keep the save that could not go"


def test_rm_of_a_packet_waiting_in_the_outbox_names_its_file(
    box: Restartable, tmp_path: Path
) -> None:
    """The packet's one copy is the outbox file: rm said only "cannot reach" (or, with
    --local, "no packet"), and no verb names the outbox's files."""
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    kept = olive.ok("save", "-", stdin=packet("Not meant to go")).strip()
    [held] = outbox_files(olive)
    for args in (("rm", kept, "--yes"), ("rm", kept[:14], "--yes", "--local")):
        result = olive.run(*args)
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 2 and "Traceback" not in result.stderr, result.stderr
        assert lines[1] == (
            f"ltm: {kept} waits unsent in this machine's outbox for {box.live.url}:"
            f" delete {held} to drop it, or send it with: ltm push --outbox"
        )
    assert outbox_files(olive) == [held]  # rm deletes nothing it was not asked to

    box.start()  # reached, the outbox goes first: then rm deletes it as any packet
    assert "deleted" in olive.run("rm", kept, "--yes").stderr
    assert kept not in box.ids() and outbox_files(olive) == []


def test_a_kept_packet_at_the_cap_is_delivered(box: Restartable, tmp_path: Path) -> None:
    # The outbox keeps a packet's canonical bytes, indented: past 32 KiB for one whose
    # compact form fits. Read back for its delivery, it is the same packet all the same.
    near = {"goal": "At the cap", "next_step": "n", "project": {"name": "capped"}}
    near |= {"tags": ["a"] * 16, "constraints": ["c" * 1000] * 32}
    compact = len(json.dumps(near, separators=(",", ":")).encode())
    near["open_questions"] = ["q" * (32_768 - 160 - compact)]  # id, created_at filled in
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    result = olive.run("save", "-", stdin=json.dumps(near))
    assert result.returncode == 0, result.stderr
    kept = result.stdout.strip()
    assert len(json.loads(outbox_files(olive)[0].read_text())["packet"].encode()) > 32_768

    box.start()
    delivered = olive.run("push", "--outbox")
    assert f"outbox: pushed {kept}" in delivered.stderr, delivered.stderr
    assert kept in box.ids() and outbox_files(olive) == []


def test_a_save_through_a_proxy_whose_server_is_down_is_kept(
    box: Restartable, tmp_path: Path
) -> None:
    """Behind a proxy, a server that is down answers 502 (503, 504) from the proxy: no
    server took the save, and it is kept as when nothing answers at all."""
    with proxy_to(box) as url:
        olive = Cli(tmp_path / "olive")
        olive.ok("auth", url, "--with-token", stdin=box.live.issue("Olive")[1])
        box.stop()

        result = olive.run("save", "-", stdin=packet("Keep the save the gateway turned away"))
        assert result.returncode == 0, result.stderr
        kept = result.stdout.strip()
        assert "HTTP 502" in result.stderr and f"kept {kept} in the outbox" in result.stderr
        assert len(outbox_files(olive)) == 1

        # Still down: the command fails as it would; the packet waits, not "refused".
        line = olive.fails("ls")
        assert "HTTP 502" in line and "outbox" not in line
        assert len(outbox_files(olive)) == 1

        box.start()
        listed = olive.run("ls")
        assert listed.returncode == 0, listed.stderr
        assert f"outbox: pushed {kept} to {url}" in listed.stderr
        assert kept in box.ids()
        assert outbox_files(olive) == []


class Meanwhile:
    """A second ``ltm save`` of the same packet, started while the proxy holds the first
    process's push of an older version of it: the delivery in progress, lock held."""

    def __init__(self, packet_id: str) -> None:
        self.packet_id = packet_id
        self.cli: Cli | None = None
        self.save: subprocess.Popen[bytes] | None = None
        self.armed = False  # set once the first version is kept and is to be delivered

    def start(self, goal: str) -> None:
        assert self.cli is not None
        newer = self.cli.home / "newer.json"
        newer.write_text(json.dumps({"id": self.packet_id, "goal": goal, "next_step": "Go on."}))
        self.save = subprocess.Popen(
            [LTM, "save", str(newer)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.cli.env,
        )
        # Let it run as far as it goes while the older push is held: on to the server, if
        # it does not wait for the delivery (the old push would then land after it).
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.save.wait(timeout=scaled(5))

    def finished(self) -> str:
        assert self.save is not None
        _, err = self.save.communicate(timeout=scaled(60))
        assert self.save.returncode == 0, err.decode()
        return err.decode()


@pytest.mark.parametrize("answered", [True, False], ids=["pushed", "kept"])
def test_a_save_while_an_older_version_is_delivered_lands_after_it(
    box: Restartable, tmp_path: Path, answered: bool
) -> None:
    """The same packet saved again while another process delivers its older version from
    the outbox: the save waits for that delivery, so the server ends with the newer one.
    Kept (its proxy answering 502 to that save, the server overloaded): delivering the old
    one must not remove the new one from the outbox."""
    second = Meanwhile("01JNEWERVERSIONSAVED0000000" if answered else "01JNEWERVERSIONKEPT00000000")
    turned_away: list[bytes] = []

    def again_meanwhile(request: Seen) -> Reply | None:
        if second.armed and request.method == "POST" and b"first version" in request.body:
            second.armed = False
            second.start("second version")
        elif b"second version" in request.body and not (answered or turned_away):
            turned_away.append(request.body)  # the newer save meets a server that is down
            return BAD_GATEWAY
        return None

    with proxy_to(box, again_meanwhile) as url:
        olive = second.cli = Cli(tmp_path / "olive")
        olive.ok("auth", url, "--with-token", stdin=box.live.issue("Olive")[1])
        box.stop()
        older = {"id": second.packet_id, "goal": "first version", "next_step": "Go on."}
        olive.ok("save", "-", stdin=json.dumps(older))
        box.start()
        second.armed = True

        delivered = olive.run("push", "--outbox")
        assert delivered.returncode == 0, delivered.stderr
        assert f"outbox: pushed {second.packet_id}" in delivered.stderr
        assert "dropped" not in delivered.stderr
        said = second.finished()
        if answered:
            assert f"{second.packet_id} in {url}" in said
        else:
            assert f"kept {second.packet_id} in the outbox" in said
            files = outbox_files(olive)
            assert len(files) == 1 and "second version" in files[0].read_text()
            olive.ok("push", "--outbox")
        assert outbox_files(olive) == []
        assert json.loads(olive.ok("pull", second.packet_id))["goal"] == "second version"


OLDER = {"goal": "first version", "next_step": "Go on."}


def answers_lost(
    box: Restartable, lost: list[bytes], flaky: list[bool]
) -> Callable[[Seen], Reply | None]:
    """A proxy's meddling: while ``flaky[0]``, a push of the first version reaches the
    server, but its answer is lost (504), and the body goes to ``lost``."""

    def answer_lost(request: Seen) -> Reply | None:
        if request.method == "POST" and b"first version" in request.body and flaky[0]:
            lost.append(request.body)
            passed_on(box, request)  # stored by the server; its answer never comes back
            return (504, {"Content-Type": "text/html"}, b"<h1>504 Gateway Time-out</h1>")
        return None

    return answer_lost


def kept_older(box: Restartable, url: str, tmp_path: Path, packet_id: str) -> Cli:
    """Olive, signed in at ``url``, saves the first version while the server is down: it
    waits in her outbox. The server is back when this returns."""
    olive = Cli(tmp_path / "olive")
    olive.ok("auth", url, "--with-token", stdin=box.live.issue("Olive")[1])
    box.stop()
    olive.ok("save", "-", stdin=json.dumps({**OLDER, "id": packet_id}))
    box.start()
    return olive


def test_an_older_version_whose_delivery_timed_out_never_lands_after_a_newer_save(
    box: Restartable, tmp_path: Path
) -> None:
    """The outbox's older version reaches the server but its answer is lost (the proxy
    times out: 504), so it waits on; the command's own save of the newer version then goes
    through. The older one must not be delivered again after it, or the server ends with
    the version the user replaced."""
    packet_id = "01JOLDERVERSIONTIMEDOUT0000"
    lost: list[bytes] = []
    flaky = [True]  # every answer to the older version lost, retries included

    with proxy_to(box, answers_lost(box, lost, flaky)) as url:
        olive = kept_older(box, url, tmp_path, packet_id)
        newer = tmp_path / "newer.json"
        newer.write_text(json.dumps({**OLDER, "id": packet_id, "goal": "second version"}))
        saved = olive.run("save", str(newer))
        flaky[0] = False
        assert saved.returncode == 0 and lost, saved.stderr
        assert f"{packet_id} in {url}" in saved.stderr
        assert f"older version of {packet_id}" in saved.stderr  # said, not silently dropped
        assert outbox_files(olive) == []

        olive.ok("ls")
        assert json.loads(olive.ok("pull", packet_id))["goal"] == "second version"


def test_an_older_version_waiting_never_lands_after_an_import_replaced_it(
    box: Restartable, tmp_path: Path
) -> None:
    """As above, with the newer version brought by ``ltm import --replace``, whose packets
    go in batches (``POST /v1/packets/batch``), not one push each."""
    from ltm.bundle import entry_line, header_line

    packet_id = "01JOLDERVERSIONIMPORTED0000"
    flaky = [True]

    with proxy_to(box, answers_lost(box, [], flaky)) as url:
        olive = kept_older(box, url, tmp_path, packet_id)
        # The newer version: the packet as save filled it in (created_at, ltm_version).
        body = json.loads(json.loads(outbox_files(olive)[0].read_text())["packet"])
        body["goal"] = "second version"
        bundle = tmp_path / "newer.jsonl"
        bundle.write_text(
            header_line(source="test", exported_at="2026-05-01T12:00:00Z")
            + entry_line(
                body=json.dumps(body).encode(),
                team=None,
                created_by="local",
                created_at=str(body["created_at"]),
            )
        )
        imported = olive.run("import", str(bundle), "--replace")
        flaky[0] = False
        assert imported.returncode == 0, imported.stderr
        assert f"older version of {packet_id}" in imported.stderr  # said, not silently dropped
        assert outbox_files(olive) == []

        olive.ok("ls")
        assert json.loads(olive.ok("pull", packet_id))["goal"] == "second version"


def kept_as_olive(box: Restartable, tmp_path: Path) -> tuple[Cli, str, str, str]:
    """A save kept while signed in as Olive, the server back: the CLI, the packet's id,
    Olive's token and Bob's (another account on the same server)."""
    _, olive_token = box.live.issue("Olive")
    _, bob_token = box.live.issue("Bob")
    me = Cli(tmp_path / "me")
    me.ok("auth", box.live.url, "--with-token", stdin=olive_token)
    box.stop()
    kept = me.ok("save", "-", stdin=packet("Olive's offline work")).strip()
    box.start()
    return me, kept, olive_token, bob_token


def test_a_save_waits_for_the_account_it_was_saved_as(box: Restartable, tmp_path: Path) -> None:
    """Kept while signed in as Olive, then signed in to the same server as Bob: Olive's
    packet must not land in Bob's account; it goes once Olive signs in again."""
    me, kept, olive_token, bob_token = kept_as_olive(box, tmp_path)

    me.ok("auth", box.live.url, "--with-token", stdin=bob_token)
    listed = me.run("ls")
    assert listed.returncode == 0, listed.stderr
    assert f"outbox: {kept} was saved as Olive" in listed.stderr
    assert f"ltm auth {box.live.url}" in listed.stderr
    assert kept not in box.ids() and len(outbox_files(me)) == 1
    pushed = me.run("push", "--outbox")
    assert pushed.returncode == 1 and "still in the outbox" in pushed.stderr, pushed.stderr

    me.ok("auth", box.live.url, "--with-token", stdin=olive_token)
    assert f"outbox: pushed {kept}" in me.run("ls").stderr
    assert kept in box.ids() and outbox_files(me) == []
    owner = sqlite3.connect(box.db).execute("SELECT owner_id FROM packets WHERE id = ?", (kept,))
    assert owner.fetchone()[0] == olive_token.split("_")[1]


def test_a_save_waits_for_its_account_under_a_token_from_the_environment(
    box: Restartable, tmp_path: Path
) -> None:
    """Kept while signed in as Olive; then a command runs with Bob's token in ``LTM_TOKEN``
    (a CI job, an agent), whose sign-in knows no account by itself: the server is asked
    whose token it is, and Olive's packet waits rather than land in Bob's account."""
    me, kept, olive_token, bob_token = kept_as_olive(box, tmp_path)

    as_bob = me.run("ls", LTM_TOKEN=bob_token)
    assert as_bob.returncode == 0, as_bob.stderr
    assert f"outbox: {kept} was saved as Olive" in as_bob.stderr
    assert kept not in box.ids() and len(outbox_files(me)) == 1

    as_olive = me.run("ls", LTM_TOKEN=olive_token)
    assert f"outbox: pushed {kept}" in as_olive.stderr, as_olive.stderr
    owner = sqlite3.connect(box.db).execute("SELECT owner_id FROM packets WHERE id = ?", (kept,))
    assert owner.fetchone()[0] == olive_token.split("_")[1]
    assert outbox_files(me) == []


def test_logging_out_says_what_still_waits_and_how_it_goes(
    box: Restartable, tmp_path: Path
) -> None:
    """A packet kept for a server the user then logs out of waits for a sign-in there: no
    command reaches that server until then, so logout and doctor say so."""
    _, token = box.live.issue("Olive")
    olive = Cli(tmp_path / "olive")
    olive.ok("auth", box.live.url, "--with-token", stdin=token)
    box.stop()
    kept = olive.ok("save", "-", stdin=packet("Kept, then logged out")).strip()

    out = olive.run("logout")
    assert out.returncode == 0, out.stderr
    url = box.live.url
    assert f"1 saved packet waits for {url}" in out.stderr
    assert f"ltm auth {url}" in out.stderr
    doctor = olive.run("doctor").stdout
    assert re.search(r"warn\s+outbox\s+1 saved packet waits for " + re.escape(url), doctor)
    assert f"ltm auth {url}" in doctor and "next command that reaches" not in doctor
    # The agent is told the same at its session start.
    started = olive.run("hook", "session-start", stdin=json.dumps({"cwd": str(tmp_path)}))
    context = json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"pushed once the user signs in there again (ltm auth {url})" in context
    assert "next ltm command that reaches" not in context and "not lost" in context
    assert len(outbox_files(olive)) == 1

    box.start()
    olive.ok("auth", url, "--with-token", stdin=token)
    olive.ok("ls")
    assert kept in box.ids() and outbox_files(olive) == []


@needs_git
def test_the_stop_hook_counts_a_save_kept_in_the_outbox(box: Restartable, tmp_path: Path) -> None:
    """A session that saved while its server was down did save: once the server is back
    (the hook pushes nothing itself), the stop hook must not ask for the packet again,
    or the agent writes a second packet of the same work."""
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    olive.env["LTM_STATE_DIR"] = str(tmp_path / "olive" / "state")
    app = olive.at(repo(tmp_path / "app", "https://github.com/acme/app.git"))
    transcript = tmp_path / "s-1.jsonl"
    transcript.write_text("x" * 200_000)  # real work
    session = {"session_id": "s-1", "cwd": str(app.cwd), "transcript_path": str(transcript)}
    started = app.run("hook", "session-start", stdin=json.dumps({**session, "source": "startup"}))
    assert started.returncode == 0 and started.stdout == "", started.stderr

    box.stop()
    kept = app.ok("save", "-", stdin=packet("Offline work, saved")).strip()
    assert len(outbox_files(olive)) == 1
    assert '\\"name\\": \\"acme/app\\"' in outbox_files(olive)[0].read_text()  # this project's
    box.start()
    stop = app.run("hook", "stop", stdin=json.dumps({**session, "stop_hook_active": False}))
    assert stop.returncode == 0 and stop.stdout == "", stop.stdout  # no second packet asked

    app.ok("ls")
    assert kept in box.ids() and outbox_files(olive) == []


def test_push_outbox_runs_the_checks_again_and_sets_aside_what_they_refuse(
    box: Restartable, tmp_path: Path
) -> None:
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    first = olive.ok("save", "-", stdin=packet("Release the ACME-4242 build")).strip()
    second = olive.ok("save", "-", stdin=packet("Tidy the changelog")).strip()
    assert len(outbox_files(olive)) == 2

    # Nothing reachable: push --outbox says what is left, and keeps it.
    line = olive.fails("push", "--outbox")
    assert "still in the outbox" in line and "cannot be reached" in line
    assert len(outbox_files(olive)) == 2

    # A redaction rule added since the save applies when the packet goes: refused here, it
    # would be refused at every command, so it is set aside for the user to edit.
    olive.ok("sensitive", "add", "ticket", "ACME-[0-9]+")
    box.start()
    result = olive.run("push", "--outbox")
    assert result.returncode == 1
    assert f"outbox: pushed {second}" in result.stderr
    assert f"outbox: {first} was refused" in result.stderr and "redaction" in result.stderr
    assert box.ids() & {first, second} == {second}
    assert outbox_files(olive) == []
    command = said_command(result.stderr)
    assert command[:2] == ["ltm", "push"]

    again = olive.run("push", "--outbox")
    assert again.returncode == 0, again.stderr
    assert "nothing waits in the outbox" in again.stderr and "1 packet set aside" in again.stderr
    olive.ok("sensitive", "rm", "ticket")
    olive.ok(*command[1:])
    assert {first, second} <= box.ids()


def said_command(stderr: str) -> list[str]:
    """The command the line that set a packet aside says to run, as its words."""
    (line,) = [line for line in stderr.splitlines() if "set aside (not retried)" in line]
    return shlex.split(line.split("then run: ")[1].split(" (and delete")[0])


def aside_files(cli: Cli) -> list[Path]:
    return sorted((Path(cli.env["LTM_DATA_DIR"]) / "outbox" / "refused").glob("*.json"))


def test_a_packet_whose_id_is_taken_is_set_aside_once_to_save_with_a_new_id(
    box: Restartable, tmp_path: Path
) -> None:
    """Kept offline with an id that, meanwhile, is another user's packet: the server's 409
    will not change, so the packet leaves the delivery queue for a file of its own, said
    once, with the command that saves it under a new id; doctor lists it until deleted."""
    bob = signed_in(box.live, tmp_path / "bob", "Bob")
    taken = bob.ok("save", "-", stdin=packet("Bob's own packet")).strip()
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    mine = {"id": taken, "goal": "Olive's offline work", "next_step": "Carry on."}
    olive.ok("save", "-", stdin=json.dumps(mine))
    box.start()

    result = olive.run("ls")
    assert result.returncode == 0, result.stderr
    (path,) = aside_files(olive)
    assert result.stderr.count("set aside") == 1 and str(path) in result.stderr
    assert "drop its id and run: ltm save)" not in result.stderr  # the server's advice, replaced
    assert outbox_files(olive) == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {**json.loads(path.read_text()), **mine}

    assert "outbox" not in olive.run("ls").stderr  # said once
    assert "nothing waits" in olive.run("push", "--outbox").stderr  # and never retried
    doctor = olive.run("doctor").stdout
    assert re.search(r"warn\s+outbox\s+1 packet set aside", doctor), doctor
    assert path.name in doctor and "ltm push FILE" in doctor
    # The line above may have gone to an agent's MCP log: each session start says it too.
    started = olive.run("hook", "session-start", stdin=json.dumps({"cwd": str(tmp_path)}))
    assert "1 packet set aside" in started.stdout and str(path) in started.stdout

    command = said_command(result.stderr)
    assert command[:3] == ["ltm", "save", str(path)]
    edited = {k: v for k, v in json.loads(path.read_text()).items() if k != "id"}
    path.write_text(json.dumps(edited))
    fresh = olive.ok(*command[1:]).strip()
    assert fresh != taken and fresh in box.ids()
    assert json.loads(olive.ok("pull", fresh))["goal"] == "Olive's offline work"
    assert json.loads(bob.ok("pull", taken))["goal"] == "Bob's own packet"
    assert path.exists()  # the user's to delete


def test_a_packet_the_server_rejects_is_set_aside_and_what_may_pass_waits(
    box: Restartable, tmp_path: Path
) -> None:
    """Through a proxy: a 503 (the server is down) and a 403 (what the sign-in may do)
    leave the packet waiting, as before; a 400 (the server's own checks refuse the packet)
    sets it aside once, never sent again, and the command said pushes it once fixed."""
    answers: list[int] = []  # what the next POSTs of packets are answered, in order
    posts: list[int] = []

    def refusing(request: Seen) -> Reply | None:
        if request.method != "POST" or not request.path.startswith("/v1/packets"):
            return None
        status = answers.pop(0) if answers else 0
        posts.append(status)
        if not status:
            return None
        error = {400: "goal: a secret was found", 403: "forbidden", 503: "down"}[status]
        return (status, {"Content-Type": "application/json"}, json.dumps({"error": error}).encode())

    with proxy_to(box, refusing) as url:
        olive = Cli(tmp_path / "olive")
        olive.ok("auth", url, "--with-token", stdin=box.live.issue("Olive")[1])
        box.stop()
        kept = olive.ok("save", "-", stdin=packet("Ship the build")).strip()
        box.start()
        posts.clear()  # the save's own, answered 502 while the server was down

        for status in (503, 403):
            answers.append(status)
            olive.run("ls")
            assert len(outbox_files(olive)) == 1 and aside_files(olive) == [], status

        answers.append(400)
        result = olive.run("ls")
        assert result.returncode == 0, result.stderr
        (path,) = aside_files(olive)
        assert "a secret was found" in result.stderr and str(path) in result.stderr
        assert outbox_files(olive) == []
        assert json.loads(path.read_text())["id"] == kept
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

        assert "outbox" not in olive.run("ls").stderr
        olive.run("push", "--outbox")
        assert posts == [503, 403, 400]  # not sent again

        command = said_command(result.stderr)
        assert command[:3] == ["ltm", "push", str(path)]
        olive.ok(*command[1:])
        assert kept in box.ids()


def test_a_refused_save_is_not_kept(box: Restartable, tmp_path: Path) -> None:
    """Only a server out of reach keeps a packet: one the pre-flight refuses is refused."""
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    olive.ok("sensitive", "add", "ticket", "ACME-[0-9]+")
    result = olive.run("save", "-", stdin=packet("Release the ACME-4242 build"))
    assert result.returncode == 1 and "redaction" in result.stderr, result.stderr
    assert "outbox" not in result.stderr
    invalid = olive.run("save", "-", stdin='{"goal": 5}')
    assert invalid.returncode == 1 and "not a valid packet" in invalid.stderr
    assert outbox_files(olive) == []


def test_the_agents_save_is_kept_too(box: Restartable, tmp_path: Path) -> None:
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    env = {**olive.env, "LTM_STATE_DIR": str(tmp_path / "olive" / "state")}
    box.stop()
    with Shim(env, tmp_path / "shim.stderr") as shim:
        answer = shim.ok(
            "save", {"packet": {"goal": "An agent's end of session", "next_step": "Resume it."}}
        )
    assert "kept" in answer and "outbox" in answer and "Nothing is lost" in answer
    files = outbox_files(olive)
    assert len(files) == 1
    kept = json.loads(json.loads(files[0].read_text())["packet"])["id"]

    box.start()
    olive.ok("push", "--outbox")
    assert kept in box.ids()


def bundle_of_three_chunks(tmp_path: Path) -> tuple[Path, list[dict[str, object]]]:
    """A bundle of three import chunks of packets, and its packets."""
    from ltm import bundle
    from ltm.cli.client.portable import CHUNK

    packets = [json.loads(packet(f"Imported packet {n}")) for n in range(3 * CHUNK)]
    for n, data in enumerate(packets):
        data.update(ltm_version="0.2", id=f"01IMPORTED{n:06d}", created_at="2026-05-01T12:00:00Z")
    path = tmp_path / "bundle.jsonl"
    lines = [
        json.dumps(
            {
                "id": data["id"],
                "scope": "personal",
                "created_by": "olive",
                "created_at": "2026-05-01T12:00:00Z",
                "conforming": True,
                "packet": data,
            }
        )
        + "\n"
        for data in packets
    ]
    header = bundle.header_line(source="test", exported_at="2026-05-01T12:00:00Z")
    path.write_text(header + "".join(lines), encoding="utf-8")
    return path, packets


def on_second_batch(fails: str, then: Callable[[], Reply | None]) -> Callable[[Seen], Reply | None]:
    """A proxy's ``meddle`` that answers ``then()`` from the second ``fails`` (GET: an
    import's look-up of ids, POST: its push) of the batch route on; None lets it by."""
    seen: list[str] = []

    def meddle(request: Seen) -> Reply | None:
        if request.method == fails and request.path.split("?")[0] == "/v1/packets/batch":
            seen.append(request.path)
            if len(seen) > 1:
                return then()
        return None

    return meddle


def assert_stopped_midway(result: subprocess.CompletedProcess[str], box: Restartable) -> int:
    """The import ended at the first line that did not get through, having refused none;
    returns how many it added."""
    assert result.returncode == 1, result.stderr
    assert "refused" not in result.stdout
    added = [line.split()[1] for line in result.stdout.splitlines()]
    assert 0 < len(added) < 300 and set(added) <= box.ids()
    line = len(added) + 2  # the header is line 1
    assert f"import stopped at line {line}: " in result.stderr, result.stderr
    assert "run the same import again" in result.stderr
    assert f"{len(added)} added, 0 skipped (already present), 0 refused" in result.stderr
    return len(added)


def assert_completed(
    again: subprocess.CompletedProcess[str],
    box: Restartable,
    packets: list[dict[str, object]],
    added: int,
) -> None:
    """The rerun added the rest and skipped what the first run added: nothing twice."""
    assert again.returncode == 0, again.stderr
    rest = len(packets) - added
    assert f"{rest} added, {added} skipped (already present), 0 refused" in again.stderr
    assert {p["id"] for p in packets} <= box.ids()


@pytest.mark.parametrize("fails", ["GET", "POST"])
def test_an_import_stops_where_its_server_went_out_of_reach(
    box: Restartable, tmp_path: Path, fails: str
) -> None:
    """The server goes down midway through an import (here: its proxy answers 502 from the
    second chunk's look-up, or its second push, on): the import stops at the first line
    that did not get through and says to run it again, rather than refuse each of the
    thousands of lines after it; the rerun adds the rest, nothing twice."""
    path, packets = bundle_of_three_chunks(tmp_path)
    down = [True]
    meddle = on_second_batch(fails, lambda: BAD_GATEWAY if down[0] else None)
    with proxy_to(box, meddle) as url:
        olive = Cli(tmp_path / "olive")
        olive.ok("auth", url, "--with-token", stdin=box.live.issue("Olive")[1])
        result = olive.run("import", str(path))
        added = assert_stopped_midway(result, box)
        assert "HTTP 502" in result.stderr

        down[0] = False
        assert_completed(olive.run("import", str(path)), box, packets, added)


@pytest.mark.parametrize("fails", ["GET", "POST"])
def test_an_import_stops_where_its_token_stopped_working(
    box: Restartable, tmp_path: Path, fails: str
) -> None:
    """The token is revoked (or expires) midway through an import: from the second chunk's
    look-up, or its second push, on, the real server answers 401. The import stops at
    the first line that did not get through and says to sign in again, rather than
    refuse each line after it for the same reason (every one a request, and a report
    that reads as if the packets were at fault); after ``ltm auth`` the same import
    adds the rest, nothing twice."""
    path, packets = bundle_of_three_chunks(tmp_path)

    revoked: list[str] = []

    def revoke() -> None:  # once: the run after signing in again goes through
        if not revoked:
            revoked.append(
                ltm_server("revoke-token", "--user", "Olive", "--db", str(box.db)).stdout
            )

    with proxy_to(box, on_second_batch(fails, revoke)) as url:
        olive = Cli(tmp_path / "olive")
        user_id, token = box.live.issue("Olive")
        olive.ok("auth", url, "--with-token", stdin=token)
        result = olive.run("import", str(path))
        added = assert_stopped_midway(result, box)
        assert f"token rejected by {url}" in result.stderr and "ltm auth" in result.stderr

        # A user whose every token was revoked is named by id (``tokens.find_user``).
        issued = ltm_server("issue-token", user_id, "--db", str(box.db))
        assert issued.returncode == 0, issued.stderr
        olive.ok("auth", url, "--with-token", stdin=issued.stdout.strip())
        assert_completed(olive.run("import", str(path)), box, packets, added)


def test_a_save_kept_by_a_build_that_spelled_the_default_port_is_delivered(
    box: Restartable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Builds before ``https://host:443`` became ``https://host`` kept a save for such a
    server under that spelling: its file named from it, its record saying it. The same
    server now has the other spelling; the save is still for it, and goes.

    In this process: a server on port 443 is out of a test's reach, so the save names
    one, and the backend that delivers it is signed in to the test's server."""
    from ltm.cli.client import outbox
    from ltm.cli.client.credentials import Target
    from ltm.cli.client.remote import RemoteBackend

    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path / "config"))
    old_host, host = "https://ltm.example.org:443", "https://ltm.example.org"
    from ltm.examples import example_bytes

    kept = {**json.loads(example_bytes()), "id": "01JS5KEPTOLD00000000000001"}
    folder = tmp_path / "data" / "outbox"
    folder.mkdir(parents=True, mode=0o700)
    record = {  # as the first builds with an outbox wrote it
        "host": old_host,
        "team": None,
        "lenient": False,
        "allow_unredacted": False,
        "kept_at": "2026-11-28T12:00:00.000000Z",
        "packet": json.dumps(kept, indent=2),
    }
    name = f"{outbox._host_key(old_host)}.{outbox._host_key('01JS5KEPTOLD00000000000001')}.json"
    (folder / name).write_text(json.dumps(record))

    (entry,) = outbox.waiting(host)
    assert entry.host == host and entry.packet_id == "01JS5KEPTOLD00000000000001"
    assert host in outbox.summary(outbox.waiting()) and old_host not in outbox.summary([entry])

    backend = RemoteBackend.open(Target(host=box.live.url, token=box.root, source="credentials"))
    try:
        outbox.deliver_waiting(backend, host)
    finally:
        backend.close()
    assert "01JS5KEPTOLD00000000000001" in box.ids()
    assert outbox.waiting() == []


def test_a_save_the_disk_cannot_hold_is_not_said_to_be_kept(
    box: Restartable, tmp_path: Path
) -> None:
    """The outbox's file cannot be written whole (the disk fills midway; here a file size
    limit, which cuts the write short as a full disk does): the save must fail and say
    so, with nothing half-written left behind, rather than say it kept a packet that
    no later command can read."""
    import resource
    import signal

    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    big = tmp_path / "big.json"
    steps = [f"Step {n}: " + "x" * 900 for n in range(16)]  # 15 KB, past the limit below
    big.write_text(json.dumps({"goal": "A long save", "next_step": "Go on.", "constraints": steps}))

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails (EFBIG), not the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    result = subprocess.run(
        [LTM, "save", str(big)],
        env=olive.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        preexec_fn=small_disk,
        timeout=scaled(60),  # not a budget
    )
    assert result.returncode == 1, result.stderr
    assert "it is pushed by the next" not in result.stderr, result.stderr
    assert "could not be kept in the outbox" in result.stderr and "Traceback" not in result.stderr
    assert "outbox" in result.stderr and "nothing saved" in result.stderr, result.stderr
    assert result.stdout == ""
    folder = Path(olive.env["LTM_DATA_DIR"]) / "outbox"
    assert [p.name for p in folder.iterdir() if p.name != ".lock"] == []


def test_a_file_in_the_outbox_that_cannot_be_read_is_reported(
    box: Restartable, tmp_path: Path
) -> None:
    """A kept save whose file cannot be read (cut short by an older build on a full disk,
    damaged since) is a save that will never go: doctor and ``push --outbox`` name it,
    rather than call the outbox empty and every save delivered."""
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    olive.ok("save", "-", stdin=packet("Kept whole"))
    (damaged,) = outbox_files(olive)
    damaged.write_bytes(damaged.read_bytes()[:100])  # as a short write left it

    doctor = olive.run("doctor").stdout
    assert re.search(r"warn\s+outbox\s+1 file cannot be read", doctor), doctor
    assert damaged.name in doctor
    box.start()
    result = olive.run("push", "--outbox")
    assert result.returncode == 1, result.stderr
    assert "the outbox is empty" not in result.stderr
    assert "1 file cannot be read" in result.stderr and damaged.name in result.stderr
    assert damaged.exists()  # not ltm's to delete: it may be all that is left of the packet


def test_a_rejected_token_stops_the_delivery_at_its_first_packet(
    box: Restartable, tmp_path: Path
) -> None:
    """The token was revoked while saves waited: every push would meet the same 401, so
    the first one stops the delivery (one request, one line), rather than send each of
    hundreds and print a refusal for each on every command; all of them stay."""
    posts: list[str] = []

    def revoked(request: Seen) -> Reply | None:
        if request.method == "POST" and not box_down[0]:
            posts.append(request.path)
            return (401, {"Content-Type": "application/json"}, b'{"error": "invalid token"}')
        return None

    box_down = [True]
    with proxy_to(box, revoked) as url:
        olive = Cli(tmp_path / "olive")
        olive.ok("auth", url, "--with-token", stdin=box.live.issue("Olive")[1])
        box.stop()
        for n in range(5):
            olive.ok("save", "-", stdin=packet(f"Offline work {n}"))
        box.start()
        box_down[0] = False

        result = olive.run("push", "--outbox")
        assert result.returncode == 1, result.stderr
        assert len(posts) == 1, result.stderr
        assert "token rejected" in result.stderr and f"ltm auth {url}" in result.stderr
        assert result.stderr.count("was not taken") <= 1, result.stderr
        assert "5 for" in result.stderr
        assert len(outbox_files(olive)) == 5


def test_saves_for_a_server_that_is_no_longer_the_default_say_how_they_go(
    box: Restartable, tmp_path: Path
) -> None:
    """Kept for one server, then signed in to another, which becomes the default: no
    command goes to the first any more, so doctor and the agent's session start must not
    promise that the next command pushes them; ``ltm push --outbox`` does."""
    olive = signed_in(box.live, tmp_path / "olive", "Olive")
    box.stop()
    kept = olive.ok("save", "-", stdin=packet("Kept for the first server")).strip()
    box.start()
    other = Restartable(tmp_path / "other")
    try:
        olive.ok("auth", other.live.url, "--with-token", stdin=other.live.issue("Olive")[1])
        olive.ok("ls")
        assert kept not in box.ids() and len(outbox_files(olive)) == 1

        doctor = olive.run("doctor").stdout
        assert re.search(
            r"warn\s+outbox\s+1 saved packet waits for " + re.escape(box.live.url), doctor
        )
        assert "next command that reaches" not in doctor and "ltm push --outbox" in doctor
        started = olive.run("hook", "session-start", stdin=json.dumps({"cwd": str(tmp_path)}))
        context = json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "next ltm command that reaches" not in context, context
        assert "ltm push --outbox" in context and "not lost" in context

        olive.ok("push", "--outbox")
        assert kept in box.ids() and kept not in other.ids() and outbox_files(olive) == []
    finally:
        other.stop()
