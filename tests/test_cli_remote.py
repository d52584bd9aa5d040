"""Every verb against a real ``ltm server run`` on loopback, as users run them.

The server is the real one (``serverkit``); each person is a config dir of
their own and the real ``ltm`` command in a subprocess. Errors have their own
suite (test_cli_remote_errors.py); the picker and clipboard theirs
(test_picker.py); sign-in from a browser test_auth_device.py.
"""

from __future__ import annotations

import ast
import json
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpkit
import pytest
from clikit import LTM, Cli, Seen, signed_in, stub_server
from serverkit import Server, running_server
from timing import scaled

CONTENT = {
    "goal": "Make the login test stop flaking",
    "next_step": "Run the test 50 times and read the first failure",
    "decisions": [{"what": "Keep pytest", "why": "the team knows it", "locked": True}],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("cli-remote")) as srv:
        yield srv


def content(goal: str) -> str:
    return json.dumps({**CONTENT, "goal": goal})


def test_auth_with_a_token_stores_it_privately(server: Server, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "alice")
    _user_id, token = server.issue("alice")
    result = cli.run("auth", server.url + "/", "--with-token", stdin=token)
    assert result.returncode == 0, result.stderr
    assert f"signed in to {server.url}" in result.stderr
    assert token not in result.stderr + result.stdout
    path = cli.config / "credentials"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cli.config.stat().st_mode) == 0o700
    saved = cli.credentials()
    assert saved["default"] == server.url  # the trailing slash is gone
    assert saved["hosts"][server.url]["token"] == token
    assert saved["hosts"][server.url]["via"] == "token"

    who = cli.ok("whoami")
    assert server.url in who and token not in who
    report = json.loads(cli.ok("whoami", "--json"))
    assert report["host"] == server.url and report["backend"] == "remote"
    assert len(report["token_fingerprint"]) == 8 and report["token_fingerprint"] in who


ARGV_WARNING = "warning: a token on the command line can be read by other users"


def test_auth_reads_the_token_from_stdin(server: Server, tmp_path: Path) -> None:
    for args in (["--with-token"], ["-"]):
        cli = Cli(tmp_path / "stdin" / args[0])
        _user_id, token = server.issue("stdin")
        result = cli.run("auth", server.url, *args, stdin=token + "\n")
        assert result.returncode == 0, result.stderr
        assert cli.credentials()["hosts"][server.url]["token"] == token
        assert ARGV_WARNING not in result.stderr and token not in result.stderr


def test_a_token_in_argv_is_warned_about(server: Server, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "argv")
    _user_id, token = server.issue("argv")
    result = cli.run("auth", server.url, token)  # a token in argv, on purpose
    assert result.returncode == 0, result.stderr
    assert ARGV_WARNING in result.stderr and "ltm auth HOST --with-token" in result.stderr
    assert cli.credentials()["hosts"][server.url]["token"] == token
    # a token in argv, on purpose
    both = cli.fails("auth", server.url, token, "--with-token", code=2, stdin=token)
    assert "not both" in both
    empty = Cli(tmp_path / "empty").fails("auth", server.url, "--with-token", code=2)
    assert empty == "ltm: no token on standard input"


ON_PURPOSE = "# a token in argv, on purpose"


def tokens_in_argv(tree: ast.AST) -> Iterator[int]:
    """The lines of ``tree`` that run ``ltm auth HOST TOKEN``: a call or a list whose
    arguments are ``"auth"``, a host, then anything but an option (``--with-token``,
    ``-``) or unpacked ones."""
    for node in ast.walk(tree):
        items = node.args if isinstance(node, ast.Call) else getattr(node, "elts", None)
        if not isinstance(items, list) or not isinstance(node, ast.Call | ast.List | ast.Tuple):
            continue
        for at, item in enumerate(items[:-2]):
            if not (isinstance(item, ast.Constant) and item.value == "auth"):
                continue
            token = items[at + 2]
            option = isinstance(token, ast.Constant) and str(token.value).startswith("-")
            if not (option or isinstance(token, ast.Starred)):
                yield node.lineno


def test_the_tests_sign_in_with_the_token_on_stdin() -> None:
    """A token in argv is readable by every local user while the command runs: the tests
    sign in as the docs say (``--with-token``, the token on stdin); only the test of the
    warning puts one on the command line, and says so."""
    found = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number in sorted(set(tokens_in_argv(ast.parse("\n".join(lines))))):
            said = lines[number - 1] + (lines[number - 2] if number > 1 else "")
            if ON_PURPOSE not in said:
                found.append(f"{path.name}:{number}: {lines[number - 1].strip()}")
    assert not found, "give the token on stdin (--with-token):\n" + "\n".join(found)


def test_auth_asks_for_the_token_without_echo_on_a_terminal(server: Server, tmp_path: Path) -> None:
    import pexpect

    cli = Cli(tmp_path / "tty")
    _user_id, token = server.issue("tty")
    child = pexpect.spawn(
        LTM, ["auth", server.url, "--with-token"], env=cli.env, timeout=scaled(30)
    )
    child.expect("token \\(input hidden\\): ")
    child.sendline(token)
    child.expect(pexpect.EOF)
    child.close()
    shown = child.before.decode()
    assert child.exitstatus == 0, shown
    assert token not in shown and "signed in to" in shown  # the terminal never echoed it
    assert cli.credentials()["hosts"][server.url]["token"] == token


def test_ctrl_c_at_the_token_prompt_is_an_interruption(server: Server, tmp_path: Path) -> None:
    """Ctrl-C at the hidden prompt ends ``auth`` as it ends any verb (exit 130), and Ctrl-D
    gives no token (exit 2): both were "no token given", exit 2, on the prompt's line."""
    import pexpect

    cli = Cli(tmp_path / "tty")
    keys = [
        (pexpect.spawn.sendintr, 130, "ltm: interrupted"),
        (pexpect.spawn.sendeof, 2, "ltm: no token given; nothing was saved"),
    ]
    for key, status, said in keys:
        child = pexpect.spawn(
            LTM, ["auth", server.url, "--with-token"], env=cli.env, timeout=scaled(30)
        )
        child.expect("token \\(input hidden\\): ")
        key(child)
        child.expect(pexpect.EOF)
        child.close()
        shown = child.before.decode()
        assert (child.exitstatus, shown.strip().splitlines()[-1]) == (status, said), shown
    assert not (cli.config / "hosts.json").exists() and not (cli.config / "credentials").exists()


def test_every_packet_verb_in_personal_scope(server: Server, tmp_path: Path) -> None:
    cli = signed_in(server, tmp_path / "bea", "bea")
    first = cli.ok("save", "-", stdin=content("First goal")).strip()
    example = tmp_path / "example.json"
    example.write_text(cli.ok("example", "--reference"))
    pushed = cli.run("push", str(example))
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.strip() == "01JS5LTMEXAMPLEPACKET00001A"
    assert f"in {server.url}" in pushed.stderr
    second = cli.ok("save", "-", stdin=content("Second goal")).strip()

    lines = cli.ok("ls").splitlines()
    assert [line[:12] for line in lines] == [second[:12], first[:12], "01JS5LTMEXAM"]
    listing = json.loads(cli.ok("ls", "--json", "-n", "2"))
    assert [p["id"] for p in listing["packets"]] == [second, first]

    shown = cli.ok("show", first[:10])
    assert f"ID       {first}" in shown and "First goal" in shown
    assert json.loads(cli.ok("show", first, "--json"))["goal"] == "First goal"
    pulled = json.loads(cli.ok("pull", first))
    assert pulled["id"] == first and pulled["goal"] == "First goal"
    cli.ok("pull", first, "-o", str(tmp_path / "copy.json"))
    assert json.loads((tmp_path / "copy.json").read_text()) == pulled

    block = cli.ok("resume", first)
    assert block.startswith("# Resume context") and "First goal" in block
    assert cli.ok("resume", first[:12]) == block
    assert "Second goal" in cli.ok("resume")  # off a terminal: the newest
    as_json = json.loads(cli.ok("resume", first, "--json"))
    assert as_json == {"id": first, "resume": block}

    removed = cli.run("rm", first[:12], "--yes")
    assert removed.returncode == 0 and f"deleted {first}" in removed.stderr
    assert first[:12] not in cli.ok("ls")
    assert "no packet" in cli.fails("show", first)

    # The local store is apart: nothing of this landed in it.
    local = cli.run("ls", "--local")
    assert local.returncode == 0 and local.stdout == "" and "local store" in local.stderr


def test_team_scope_and_joining_on_a_clean_machine(server: Server, tmp_path: Path) -> None:
    alice = signed_in(server, tmp_path / "ann", "ann")
    alice.ok("teams", "create", "crew-a")
    assert "crew-a" in alice.ok("teams", "ls")
    created = json.loads(alice.ok("teams", "ls", "--json"))["teams"]
    assert [t["name"] for t in created] == ["crew-a"]

    invite = alice.run("invite", "-t", "crew-a")
    assert invite.returncode == 0, invite.stderr
    url = invite.stdout.strip()
    assert url.startswith(server.url + "/v1/invites/")
    assert "single use; expires" in invite.stderr and "(in 7 d)" in invite.stderr

    bob = Cli(tmp_path / "bob")  # a clean machine: no config dir at all
    assert not bob.config.exists()
    joined = bob.run("join", url, "--display", "Bob", "--make-default")  # test_cli_join.py
    assert joined.returncode == 0, joined.stderr
    assert "joined team crew-a" in joined.stderr and "as Bob" in joined.stderr
    saved = bob.credentials()
    assert saved["default"] == server.url
    entry = saved["hosts"][server.url]
    assert entry["via"] == "invite" and entry["token"].startswith("ltm_")
    assert entry["user"]["display"] == "Bob"
    assert stat.S_IMODE((bob.config / "credentials").stat().st_mode) == 0o600
    assert "Bob" in bob.ok("whoami")

    shared = bob.ok("save", "-t", "crew-a", "-", stdin=content("Team goal")).strip()
    assert alice.ok("ls", "-t", "crew-a").startswith(shared[:12])
    assert shared[:12] not in alice.ok("ls")  # team packets stay out of personal scope
    assert "Team goal" in alice.ok("resume", shared[:14], "-t", "crew-a")
    assert "Team goal" in alice.ok("resume", "-t", "crew-a")  # the team's newest
    assert json.loads(alice.ok("show", shared, "--json", "-t", "crew-a"))["goal"] == "Team goal"

    members = alice.ok("teams", "members", "crew-a")
    assert "ann" in members and "Bob" in members and "owner" in members
    rows = json.loads(bob.ok("teams", "members", "crew-a", "--json"))["members"]
    assert {r["role"] for r in rows} == {"owner", "member"}

    kicked = alice.run("teams", "kick", "crew-a", "Bob", "--yes")  # by display name
    assert kicked.returncode == 0 and "removed Bob" in kicked.stderr
    assert "team 'crew-a' not found" in bob.fails("ls", "-t", "crew-a")

    # Joining again as an existing user: the token is sent, no new one is minted.
    token_before = bob.credentials()["hosts"][server.url]["token"]
    again = alice.ok("invite", "-t", "crew-a").strip()
    assert "joined team crew-a" in bob.run("join", again).stderr
    assert bob.credentials()["hosts"][server.url]["token"] == token_before
    assert "no terminal to ask on" in bob.fails("teams", "leave", "crew-a", code=2)
    bob.ok("teams", "leave", "crew-a", "--yes")
    assert bob.ok("teams", "ls") == ""

    alice.ok("teams", "rm", "crew-a", "--yes")
    assert alice.ok("teams", "ls") == ""


def test_moving_packets_between_the_local_store_and_the_server(
    server: Server, tmp_path: Path
) -> None:
    cli = signed_in(server, tmp_path / "cyd", "cyd")
    cli.ok("teams", "create", "movers")
    local_id = cli.ok("save", "--local", "-", stdin=content("Written offline")).strip()
    assert local_id[:12] not in cli.ok("ls")  # only local so far

    moved = cli.run("push", "--from-local", local_id[:10])
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.strip() == local_id
    assert f"to {server.url}" in moved.stderr
    assert cli.ok("ls").startswith(local_id[:12])
    assert local_id[:12] in cli.ok("ls", "--local")  # a copy: the local one stays

    other = cli.ok("save", "--local", "-", stdin=content("For the team")).strip()
    cli.ok("push", "--from-local", other, "-t", "movers")
    assert cli.ok("ls", "-t", "movers").startswith(other[:12])

    remote_id = cli.ok("save", "-", stdin=content("Written online")).strip()
    pulled = cli.run("pull", remote_id[:12], "--to-local")
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.strip() == remote_id and "into the local store" in pulled.stderr
    assert "Written online" in cli.ok("resume", "--local", remote_id)

    assert "--from-local" in cli.fails("push", "a.json", "--from-local", "X", code=2)
    assert "--to-local" in cli.fails("pull", remote_id, "--to-local", "-o", "x.json", code=2)


def _indented_past_the_cap() -> dict[str, object]:
    """A packet whose compact form is within the 32 KiB cap (which it is measured by) and
    whose stored, indented form is past it."""
    from serverkit import make_packet

    from ltm.packet import MAX_PACKET_BYTES, canonical_bytes

    packet = make_packet(
        success_criteria=["a"] * 16, tags=[f"t{i}" for i in range(16)], open_questions=["q"] * 32
    )
    packet["constraints"] = []
    while len(_compact(packet)) < MAX_PACKET_BYTES - 60:  # strings of at most 1024 characters
        room = MAX_PACKET_BYTES - 60 - len(_compact(packet)) - 3
        packet["constraints"] = [*packet["constraints"], "y" * min(1024, max(1, room))]
    assert len(_compact(packet)) <= MAX_PACKET_BYTES < len(canonical_bytes(packet))
    return packet


def _compact(packet: dict[str, object]) -> bytes:
    return json.dumps(packet, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_packet_stored_past_32_kib_by_its_indentation_moves_both_ways(
    server: Server, tmp_path: Path
) -> None:
    """Stores keep a packet indented, a little past the cap its compact form is held to:
    such a packet, taken by the server and the local store alike, is copied between
    them as ltm export and ltm import move it, not refused for its indentation."""
    cli = signed_in(server, tmp_path / "eve", "eve")
    up, down = _indented_past_the_cap(), _indented_past_the_cap()
    cli.ok("push", "--local", "-", stdin=_compact(up))
    moved = cli.run("push", "--from-local", str(up["id"]))
    assert moved.returncode == 0, moved.stderr
    assert cli.ok("pull", str(up["id"])) == cli.ok("pull", str(up["id"]), "--local")

    cli.ok("push", "-", stdin=_compact(down))
    pulled = cli.run("pull", str(down["id"]), "--to-local")
    assert pulled.returncode == 0, pulled.stderr
    assert cli.ok("pull", str(down["id"]), "--local") == cli.ok("pull", str(down["id"]))


def test_the_redaction_pre_flight_runs_before_a_local_packet_leaves(
    server: Server, tmp_path: Path
) -> None:
    cli = signed_in(server, tmp_path / "dee", "dee")
    leaky = json.dumps({**CONTENT, "next_step": "Open /home/dee/secrets.txt"})
    local_id = cli.ok("save", "--local", "--allow-unredacted", "-", stdin=leaky).strip()
    blocked = cli.run("push", "--from-local", local_id)
    assert blocked.returncode == 1
    assert "redaction pre-flight blocked" in blocked.stderr and "next_step" in blocked.stderr
    assert local_id[:12] not in cli.ok("ls")  # nothing left the machine
    cli.ok("push", "--from-local", local_id, "--allow-unredacted")
    assert local_id[:12] in cli.ok("ls")

    blocked = cli.run("save", "-", stdin=leaky)
    assert blocked.returncode == 1 and "redaction pre-flight blocked" in blocked.stderr


def test_id_prefixes_resolve_on_the_server(server: Server, tmp_path: Path) -> None:
    cli = signed_in(server, tmp_path / "eve", "eve")
    base = "01PREFIXEVE0000000000000"
    for suffix in ("1A", "2B"):
        cli.ok(
            "push",
            "-",
            stdin=json.dumps(
                {
                    **CONTENT,
                    "ltm_version": "0.2",
                    "id": base + suffix,
                    "created_at": "2026-05-01T12:00:00Z",
                }
            ),
        )
    refused = cli.fails("show", base)  # the candidates named, as git names them
    assert "matches more than one packet on" in refused
    assert f"{base}2B, {base}1A — give more of the id" in refused  # newest first
    assert json.loads(cli.ok("pull", base + "2"))["id"] == base + "2B"
    assert "no packet 01NOPE" in cli.fails("resume", "01NOPE")
    removed = cli.run("rm", base + "1", "--yes")
    assert removed.returncode == 0 and f"deleted {base}1A" in removed.stderr


def test_lenient_packets_are_flagged_and_strict_ones_checked_before_sending(
    server: Server, tmp_path: Path
) -> None:
    cli = signed_in(server, tmp_path / "fay", "fay")
    odd = json.dumps({**CONTENT, "tags": ["Not A Valid Tag"]})
    refused = cli.run("save", "-", stdin=odd)
    assert refused.returncode == 1 and "not a valid packet" in refused.stderr
    saved = cli.run("save", "--lenient", "-", stdin=odd)
    assert saved.returncode == 0, saved.stderr
    assert "non-conforming" in saved.stderr
    packet_id = saved.stdout.strip()
    assert json.loads(cli.ok("pull", packet_id))["tags"] == ["Not A Valid Tag"]


def test_local_logout_and_config(server: Server, tmp_path: Path) -> None:
    cli = signed_in(server, tmp_path / "gus", "gus")
    packet_id = cli.ok("save", "-", stdin=content("On the server")).strip()
    assert cli.ok("ls", "--local") == ""  # --local forces the embedded store
    assert cli.ok("config", "get", "host").strip() == server.url

    cli.ok("config", "set", "timeout", "30")
    assert cli.ok("config", "get", "timeout").strip() == "30"
    assert "timeout=30" in cli.ok("config", "get")
    cli.ok("config", "unset", "timeout")
    assert cli.run("config", "get", "timeout").returncode == 1
    assert "unknown setting" in cli.fails("config", "set", "colour", "red", code=2)
    assert "must be a number" in cli.fails("config", "set", "timeout", "soon", code=2)
    # The reference's keys, kept in config.toml with its types; its env overrides win on get.
    cli.ok("config", "set", "lenient", "yes")
    cli.ok("config", "set", "editor", "vim")
    assert "must be true or false" in cli.fails("config", "set", "lenient", "maybe", code=2)
    assert cli.ok("config", "get", "lenient") == "true\n"
    assert cli.ok("config", "get", "output", LTM_OUTPUT="json") == "json\n"
    toml = tomllib.loads((cli.config / "config.toml").read_text())
    assert toml == {"host": server.url, "lenient": True, "editor": "vim"}
    cli.ok("config", "unset", "editor")
    assert "editor" not in tomllib.loads((cli.config / "config.toml").read_text())

    cli.ok("config", "unset", "host")  # the token stays; the verbs go local
    assert packet_id[:12] not in cli.ok("ls")
    cli.ok("config", "set", "host", server.url)
    assert cli.ok("ls").startswith(packet_id[:12])

    out = cli.run("logout")
    assert out.returncode == 0 and f"logged out of {server.url}" in out.stderr
    assert not (cli.config / "credentials").exists()
    assert cli.credentials() == {"default": None, "token": None, "hosts": {}}
    assert "not signed in" in cli.ok("whoami")
    assert packet_id[:12] not in cli.ok("ls")  # back on the local store
    assert "nothing to do" in cli.fails("logout")
    assert "no server configured" in cli.fails("auth", code=2)


def test_logout_with_host_option_leaves_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ltm -H B logout`` signs out of B, as ``ltm -H B auth`` signs in there."""
    from ltm.cli.client import credentials

    cli = Cli(tmp_path / "me")
    monkeypatch.setenv("LTM_CONFIG_DIR", str(cli.config))
    credentials.store_login("https://a.example", "tok-a", via="token")
    credentials.store_login("https://b.example", "tok-b", via="token", make_default=False)
    out = cli.run("-H", "https://b.example/", "logout")
    assert out.returncode == 0 and "logged out of https://b.example;" in out.stderr, out.stderr
    saved = cli.credentials()
    assert saved["default"] == "https://a.example" and saved["token"] == "tok-a"
    assert set(saved["hosts"]) == {"https://a.example"}


def test_a_team_behind_a_revoked_token_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default is the local store and hosts.json knows no such team: the servers are
    asked, and one that rejects the token is the likely home of the team, so it is named
    with the way to sign in again, not "no team of yours"."""
    from clikit import json_reply

    from ltm.cli.client import credentials

    def revoked(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply(401, {"error": "invalid or revoked token"})

    cli = Cli(tmp_path / "me")
    monkeypatch.setenv("LTM_CONFIG_DIR", str(cli.config))
    with stub_server(revoked) as stub:
        credentials.store_login(stub.url, "tok-old", via="token", make_default=False)
        line = cli.fails("ls", "-t", "core")
    assert f"{stub.url} rejected your token" in line and f"ltm auth {stub.url}" in line, line


def test_environment_overrides_the_credentials_file(server: Server, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "ci")  # nothing saved: everything from the environment
    _user_id, token = server.issue("ci")
    packet_id = cli.ok(
        "save", "-", stdin=content("From CI"), LTM_HOST=server.url, LTM_TOKEN=token
    ).strip()
    listed = cli.ok("ls", LTM_HOST=server.url, LTM_TOKEN=token)
    assert listed.startswith(packet_id[:12])
    assert "(from -H or LTM_HOST)" in cli.ok("whoami", LTM_HOST=server.url, LTM_TOKEN=token)
    assert not (cli.config / "credentials").exists()
    assert "not signed in to" in cli.fails("ls", LTM_HOST=server.url)


def go_signs_in(cli: Cli, host: str, token: str) -> None:
    """What the Go reference's ``ltm auth HOST TOKEN`` leaves behind (internal/auth/auth.go
    SaveToken; internal/config/config.go Save: its five fields, the rest of the file gone)."""
    cli.config.mkdir(parents=True, exist_ok=True)
    (cli.config / "credentials").write_text(token + "\n")
    (cli.config / "config.toml").write_text(f'host = "{host}"\noutput = "human"\n')


def test_a_reference_sign_in_works_here_and_ours_there(server: Server, tmp_path: Path) -> None:
    """The Go reference keeps the bare token in credentials and the host in config.toml."""
    cli = Cli(tmp_path / "gopher")
    _user_id, token = server.issue("gopher")
    go_signs_in(cli, server.url, token)
    packet_id = cli.ok("save", "-", stdin=content("Signed in by the reference")).strip()
    assert cli.ok("ls").startswith(packet_id[:12])
    assert "via" not in cli.ok("whoami")

    # Our sign-in, read back the reference's way: the token alone, the host in config.toml.
    _user_id, ours = server.issue("gopher-2")
    cli.ok("sensitive", "add", "codename", "bluebird")
    cli.ok("auth", server.url, "--with-token", stdin=ours)
    assert (cli.config / "credentials").read_text() == ours + "\n"
    assert tomllib.loads((cli.config / "config.toml").read_text()) == {
        "host": server.url,
        "output": "human",
    }
    assert cli.credentials()["hosts"][server.url]["via"] == "token"

    # The reference signs in again: what it wrote is what we use, and nothing of ours is lost.
    go_signs_in(cli, server.url, token)
    assert "via" not in cli.ok("whoami")  # no stale details about the other token
    assert cli.ok("ls").startswith(packet_id[:12])
    assert cli.ok("sensitive", "ls") == "codename\tbluebird\n"


def test_through_an_http_proxy(server: Server, tmp_path: Path) -> None:
    def proxy(request: Seen) -> tuple[int, dict[str, str], bytes]:
        assert request.path.startswith(server.url)  # a proxy gets the absolute URL
        headers = {k: v for k, v in request.headers.items() if k in ("authorization",
                   "content-type", "accept")}  # fmt: skip
        r = httpkit.request(request.method, request.path, headers=headers, content=request.body)
        return r.status_code, {"Content-Type": r.headers.get("content-type", "")}, r.content

    cli = signed_in(server, tmp_path / "behind-proxy", "behind-proxy")
    with stub_server(proxy) as stub:
        with_auth = stub.url.replace("http://", "http://sam:s3cret@")
        packet_id = cli.ok("save", "-", stdin=content("Via proxy"), HTTP_PROXY=with_auth).strip()
        assert cli.ok("ls", HTTP_PROXY=stub.url).startswith(packet_id[:12])
        assert [r.method for r in stub.seen] == ["POST", "GET"]
        assert stub.seen[0].headers["proxy-authorization"] == "Basic c2FtOnMzY3JldA=="
        assert "proxy-authorization" not in stub.seen[1].headers
        cli.ok("ls", HTTP_PROXY=stub.url, NO_PROXY="127.0.0.1")
        assert len(stub.seen) == 2  # NO_PROXY: straight to the server
