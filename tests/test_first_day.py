"""A team's first day, as people live it: the real ``ltm`` in subprocesses, each person
with a clean config dir, against ``ltm server run`` on loopback (two servers where a
name could be on both).

Copying the example, joining a team on a clean machine and reaching it by name,
importing into a team, destructive verbs with no terminal, ``whoami`` asking the
server, and the smaller things a newcomer trips on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpkit
import pexpect
import pytest
from clikit import LTM, Cli, base_env, json_reply, signed_in, stub_server
from serverkit import EXAMPLE, Server, ltm_server, running_server
from timing import scaled


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("first-day")) as srv:
        yield srv


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("second-server")) as srv:
        yield srv


def content(goal: str, **more: object) -> str:
    return json.dumps({"goal": goal, "next_step": "Carry on.", **more})


def team_of(server: Server, home: Path, team: str) -> tuple[Cli, str]:
    """An owner signed in to ``server`` with a new ``team``, and a fresh invite URL to it."""
    owner = signed_in(server, home, f"owner-{team}")
    owner.ok("teams", "create", team)
    return owner, owner.ok("invite", "-t", team).strip()


# -- 1. the example -----------------------------------------------------------------------


def test_every_saved_copy_of_the_example_is_a_new_packet_of_this_project(tmp_path: Path) -> None:
    shop = tmp_path / "shop"
    shop.mkdir()
    me = Cli(tmp_path / "me").at(shop)
    example = json.loads(me.ok("example"))
    assert not {"id", "created_at", "project"} & set(example), "save fills those in"
    assert example["ltm_version"] == "0.2" and example["decisions"][0]["locked"] is True
    (shop / "packet.json").write_text(me.ok("example"))

    first = me.ok("save", "packet.json").strip()
    second = me.ok("save", "packet.json").strip()
    assert first != second  # a second copy never replaces the first
    listed = json.loads(me.ok("ls", "--json"))["packets"]
    assert [row["id"] for row in listed] == [second, first]  # the newest is the last save
    saved = json.loads(me.ok("show", second, "--json"))
    reference = json.loads(EXAMPLE.read_text())
    assert saved["project"]["name"] == "shop"  # this directory's project, not ltm-example
    assert saved["created_at"] != reference["created_at"]  # stamped at the save
    assert saved["goal"] == reference["goal"]

    assert me.ok("example", "--reference").encode() == EXAMPLE.read_bytes()  # exact bytes
    assert me.ok("example", "--resume").startswith("# Resume context")
    assert "--resume or --reference" in me.fails("example", "--resume", "--reference", code=2)


# -- 2. join on a clean machine; a team by its name ---------------------------------------


def test_join_on_a_clean_machine_then_ls_by_the_team_name(server: Server, tmp_path: Path) -> None:
    owner, url = team_of(server, tmp_path / "owner", "core")
    shared = owner.ok("save", "-t", "core", "-", stdin=content("The team's goal")).strip()

    sam = Cli(tmp_path / "sam")  # a clean machine: no config at all
    joined = sam.run("join", url, "--display", "Sam")
    assert joined.returncode == 0, joined.stderr
    assert f"token saved in {sam.config / 'hosts.json'}" in joined.stderr  # where it went
    assert "your default stays the local store" in joined.stderr
    assert "ltm ls -t core" in joined.stderr

    assert shared[:12] in sam.ok("ls", "-t", "core")  # no "sign in first"
    mine = sam.ok("save", "-t", "core", "-", stdin=content("Sam's first step")).strip()
    assert mine[:12] in owner.ok("ls", "-t", "core")
    private = sam.ok("save", "-", stdin=content("Only mine")).strip()  # the default: local
    assert private[:12] in sam.ok("ls") and private[:12] not in owner.ok("ls", "-t", "core")

    who = sam.ok("whoami")
    assert "local store" in who
    assert f"signed in to {server.url} as Sam; teams: core" in who
    report = json.loads(sam.ok("whoami", "--json"))
    assert report["servers"] == [
        {"host": server.url, "user": report["servers"][0]["user"], "teams": ["core"]}
    ]
    assert report["servers"][0]["user"]["display"] == "Sam"
    assert "TEAM" in sam.ok("teams", "ls") and server.url in sam.ok("teams", "ls")


def test_a_team_the_files_do_not_know_is_looked_up_on_the_servers(
    server: Server, tmp_path: Path
) -> None:
    owner, url = team_of(server, tmp_path / "owner", "lookup")
    packet = owner.ok("save", "-t", "lookup", "-", stdin=content("Found by name")).strip()
    sam = Cli(tmp_path / "sam")
    sam.ok("join", url)
    hosts = json.loads((sam.config / "hosts.json").read_text())
    del hosts["hosts"][server.url]["teams"]  # joined with another client, say
    (sam.config / "hosts.json").write_text(json.dumps(hosts))

    assert packet[:12] in sam.ok("ls", "-t", "lookup")
    assert sam.credentials()["hosts"][server.url]["teams"] == ["lookup"]  # noted for next time
    nowhere = sam.fails("ls", "-t", "nosuch")
    assert f"no team nosuch of yours is on the ones you are signed in to ({server.url})" in nowhere
    assert "sign in: ltm auth HOST" in Cli(tmp_path / "blank").fails("ls", "-t", "core")


def test_one_team_name_on_two_servers_is_an_error_naming_both(
    server: Server, other: Server, tmp_path: Path
) -> None:
    _, here = team_of(server, tmp_path / "o1", "crew")
    _, there = team_of(other, tmp_path / "o2", "crew")
    sam = Cli(tmp_path / "sam")
    sam.ok("join", here)
    sam.ok("join", there)
    refused = sam.fails("ls", "-t", "crew", code=2)
    assert server.url in refused and other.url in refused and "-H" in refused
    assert sam.ok("-H", other.url, "ls", "-t", "crew") == ""  # named: no doubt
    sam.ok("config", "set", "host", server.url)  # a default that has the team wins
    assert sam.ok("ls", "-t", "crew") == ""


# -- 4. import into a team ----------------------------------------------------------------


def test_import_into_a_team_moves_what_is_already_personal(server: Server, tmp_path: Path) -> None:
    owner, _ = team_of(server, tmp_path / "owner", "imports")
    ids = [owner.ok("save", "-", stdin=content(f"Packet {n}")).strip() for n in range(3)]
    bundle = tmp_path / "bundle.jsonl"
    owner.ok("export", "-o", str(bundle))

    moved = owner.run("import", str(bundle), "-t", "imports")
    assert moved.returncode == 0, moved.stderr
    assert all(
        f"moved {i} from your personal packets into team imports" in moved.stdout for i in ids
    )
    assert "3 moved from your personal packets" in moved.stderr
    assert f"team imports on {server.url}" in moved.stderr
    listed = owner.ok("ls", "-t", "imports")
    assert all(i[:12] in listed for i in ids) and owner.ok("ls") == ""

    again = owner.run("import", str(bundle), "-t", "imports")
    assert again.returncode == 0, again.stderr
    assert f"skipped {ids[0]}: identical packet already present in team imports" in again.stdout
    assert "nothing changed" in again.stderr


# -- 5. destructive verbs without a terminal ----------------------------------------------


def test_destructive_verbs_refuse_without_a_terminal_unless_told_yes(
    server: Server, tmp_path: Path
) -> None:
    owner, url = team_of(server, tmp_path / "owner", "doomed")
    sam = Cli(tmp_path / "sam")
    sam.ok("join", url, "--display", "Sammy")  # one Sam per server: names are unique
    packet = owner.ok("save", "-t", "doomed", "-", stdin=content("Keep me")).strip()
    public = owner.ok("publish", packet, "-t", "doomed").strip()
    label = json.loads(owner.ok("tokens", "--json"))["tokens"][0]["label"]

    verbs = [
        ["unpublish", packet, "-t", "doomed"],
        ["rm", packet, "-t", "doomed"],
        ["teams", "kick", "doomed", "Sammy"],
        ["teams", "rm", "doomed"],
        ["tokens", "revoke", label],
    ]
    for args in verbs:  # stdin is not a terminal (an agent's shell tool)
        line = owner.fails(*args, code=2)
        assert "no terminal to ask on" in line and "add --yes" in line, line
    assert packet[:12] in owner.ok("ls", "-t", "doomed")  # nothing happened
    assert httpkit.get(public, timeout=scaled(10)).status_code == 200
    assert "Sam" in owner.ok("teams", "members", "doomed")
    assert packet[:12] in sam.ok("ls", "-t", "doomed")

    for args in verbs:
        done = owner.run(*args, "--yes")
        assert done.returncode == 0, (args, done.stderr)
    assert httpkit.get(public, timeout=scaled(10)).status_code == 404
    assert "token rejected" in owner.fails("whoami")  # its own token, revoked


def test_rm_of_a_packet_one_reads_but_may_not_delete_says_so(
    server: Server, tmp_path: Path
) -> None:
    """A teammate's packet, or one shared with you: the server's 404 to the delete was
    said as "no packet ... list them with: ltm ls -t TEAM", where it is listed."""
    owner, url = team_of(server, tmp_path / "owner", "kept")
    mate = Cli(tmp_path / "mate")
    mate.ok("join", url, "--display", "Mate")
    teams = owner.ok("save", "-t", "kept", "-", stdin=content("The team's")).strip()
    mine = owner.ok("save", "-", stdin=content("Shared")).strip()
    owner.ok("share", mine, "Mate")
    for args in (["rm", teams[:14], "-t", "kept"], ["rm", teams], ["rm", mine]):
        line = mate.fails(*args, "--yes", LTM_HOST=server.url)  # join set no default
        full = teams if teams.startswith(args[1]) else mine
        assert f"you can read packet {full} on {server.url} but not delete it" in line, line
    assert teams[:12] in owner.ok("ls", "-t", "kept") and mine[:12] in owner.ok("ls")
    # An id nobody has is still "no packet".
    assert "no packet 01M8MYCSM9AD" in mate.fails("rm", "01M8MYCSM9AD", "-y", LTM_HOST=server.url)


def test_on_a_terminal_a_destructive_verb_asks(server: Server, tmp_path: Path) -> None:
    owner, _ = team_of(server, tmp_path / "owner", "asked")
    child = pexpect.spawn(
        LTM, ["teams", "rm", "asked"], env=owner.env, encoding="utf-8", timeout=scaled(30)
    )
    child.expect(r"Delete team asked on .* and all of its packets\?")
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1 and "nothing deleted" in child.before
    assert "asked" in owner.ok("teams", "ls")


def test_rm_on_a_terminal_says_a_published_packets_link_ends(
    server: Server, tmp_path: Path
) -> None:
    owner = signed_in(server, tmp_path / "owner", "Publisher")
    packet = owner.ok("save", "-", stdin=content("Public")).strip()
    public = owner.ok("publish", packet).strip()
    child = pexpect.spawn(
        LTM, ["rm", packet[:14]], env=owner.env, encoding="utf-8", timeout=scaled(30)
    )
    child.expect(r"Delete \S+ \(Public\)\? Its public link (\S+) stops working")
    assert child.match.group(1) == public
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1 and "nothing deleted" in child.before
    assert httpkit.get(public, timeout=scaled(10)).status_code == 200


# -- 8. whoami ----------------------------------------------------------------------------


def test_whoami_names_the_user_and_scope_and_fails_on_a_rejected_token(
    server: Server, tmp_path: Path
) -> None:
    user_id, token = server.issue("Wanda")
    wanda = Cli(tmp_path / "wanda")
    wanda.ok("auth", server.url, "--with-token", stdin=token)
    who = wanda.ok("whoami")
    assert f"user         Wanda ({user_id})" in who  # the server's word, for a pasted token
    assert "scope 'read write'" in who and "label Wanda-" in who and token not in who
    report = json.loads(wanda.ok("whoami", "--json"))
    assert report["user"] == {"id": user_id, "display": "Wanda"}
    assert report["token_scope"] == "read write"

    label = report["token_label"]
    assert ltm_server("revoke-token", label, "--db", str(server.db)).returncode == 0
    assert f"token rejected by {server.url}" in wanda.fails("whoami")
    # A token from the environment the server rejects: the reason is the rejection, not
    # a server without /v1/whoami.
    told = wanda.run("whoami", LTM_HOST=server.url, LTM_TOKEN="ltm_" + "0" * 64)
    assert told.returncode == 1 and "(it comes from LTM_TOKEN)" in told.stderr
    assert "not named by this server" not in told.stdout


def test_whoami_against_a_server_without_the_route(tmp_path: Path) -> None:
    def reference(request: object) -> tuple[int, dict[str, str], bytes]:
        path = getattr(request, "path", "")
        if path.startswith("/v1/packets"):
            return json_reply(200, {"packets": []})
        return json_reply(404, {"error": "not found"})

    with stub_server(reference) as stub:
        cli = Cli(tmp_path / "ref")
        who = cli.ok("whoami", LTM_HOST=stub.url, LTM_TOKEN="ltm_" + "0" * 64)
        assert "not named by this server" in who
        assert [s.path for s in stub.seen] == ["/v1/whoami", "/v1/packets?limit=1"]


# -- 9. the smaller things ----------------------------------------------------------------


def test_publish_names_the_packet_and_the_rule_for_a_teammates_packet(
    server: Server, tmp_path: Path
) -> None:
    owner, url = team_of(server, tmp_path / "owner", "pub")
    packet = owner.ok("save", "-t", "pub", "-", stdin=content("Owner's")).strip()
    published = owner.run("publish", packet, "-t", "pub")
    assert f"revoke it with: ltm unpublish {packet} -t pub" in published.stderr
    sam = Cli(tmp_path / "sam")
    sam.ok("join", url)
    refused = sam.fails("publish", packet[:12], "-t", "pub")
    assert f"packet {packet} is in team pub" in refused
    assert "only its creator or the team's owner" in refused


def test_push_from_local_into_a_team_says_it_moved(server: Server, tmp_path: Path) -> None:
    owner, _ = team_of(server, tmp_path / "owner", "movers")
    packet = owner.ok("save", "--local", "-", stdin=content("Local first")).strip()
    copied = owner.run("push", "--from-local", packet)
    assert f"copied {packet} from the local store to {server.url}" in copied.stderr
    moved = owner.run("push", "--from-local", packet, "-t", "movers")
    assert moved.returncode == 0, moved.stderr
    assert f"moved {packet} on {server.url} from your personal packets into team movers" in (
        moved.stderr
    )
    assert packet[:12] in owner.ok("ls", "-t", "movers") and owner.ok("ls") == ""
    again = owner.run("push", "--from-local", packet, "-t", "movers")
    assert f"updated {packet} in team movers" in again.stderr


def test_save_refuses_a_parent_that_does_not_exist(tmp_path: Path) -> None:
    me = Cli(tmp_path / "me")
    ghost = "01GHOSTPARENT0000000000000"
    refused = me.fails("save", "-", stdin=content("Orphan", parent_id=ghost))
    assert f"parent_id {ghost} names no packet you can read" in refused
    assert me.ok("ls") == ""
    parent = me.ok("save", "-", stdin=content("Parent")).strip()
    me.ok("save", "-", stdin=content("Child", parent_id=parent))
    whole = {"id": "01PUSHEDORPHAN0000000000AA", "created_at": "2026-05-01T12:00:00Z"}
    pushed = me.run(
        "push", "-", stdin=content("Pushed", parent_id=ghost, ltm_version="0.2", **whole)
    )
    assert pushed.returncode == 0 and "pushed anyway" in pushed.stderr


def test_a_packet_that_continues_itself_is_refused_by_save(tmp_path: Path) -> None:
    """Saved again with its own id as parent_id, a packet found its parent (itself) and was
    stored looping on itself; ``ltm push``, which stores a file as written, warns."""
    me = Cli(tmp_path / "me")
    packet = me.ok("save", "-", stdin=content("First")).strip()
    looped = json.loads(me.ok("pull", packet)) | {"parent_id": packet}
    refused = me.fails("save", "-", stdin=json.dumps(looped))
    assert f"parent_id {packet} is the packet's own id" in refused and "nothing saved" in refused
    assert "parent_id" not in json.loads(me.ok("pull", packet))
    pushed = me.run("push", "-", stdin=json.dumps(looped))
    assert pushed.returncode == 0 and "cannot continue itself); pushed anyway" in (pushed.stderr)


def test_save_on_a_terminal_says_what_it_waits_for(tmp_path: Path) -> None:
    me = Cli(tmp_path / "me")
    child = pexpect.spawn(LTM, ["save"], env=me.env, encoding="utf-8", timeout=scaled(30))
    child.expect("reading the packet \\(JSON\\) from standard input; end with Ctrl-D")
    child.send(content("Typed in") + "\n")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "saved" in child.before


# -- 7. make on a machine that cannot install chromium; make demo's store ----------------

ROOT = Path(__file__).resolve().parents[1]


def test_make_sysdeps_goes_on_without_apt_get(tmp_path: Path) -> None:
    import shutil
    import subprocess

    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    bare = tmp_path / "bin"  # a PATH with a shell and id, and no apt-get or sudo
    bare.mkdir()
    for tool in ("sh", "id"):
        found = shutil.which(tool)
        assert found is not None
        (bare / tool).symlink_to(found)
    result = subprocess.run(
        [make, "-s", "-C", str(ROOT), "sysdeps", f"CHROMIUM={tmp_path / 'no-chromium'}"],
        capture_output=True,
        text=True,
        env={"PATH": str(bare)},
        timeout=scaled(60),
    )
    assert result.returncode == 0, result.stderr
    assert "no apt-get to install it; the browser tests will be skipped" in result.stdout


def make_demo(tmp_path: Path, env: dict[str, str]) -> str:
    import shutil
    import subprocess
    import sys

    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    stamp = tmp_path / "installed"
    stamp.touch()  # newer than pyproject.toml: this venv is used as it is
    bin_dir = str(Path(sys.executable).parent)
    result = subprocess.run(
        [make, "-s", "-C", str(ROOT), "demo", f"BIN={bin_dir}", f"STAMP={stamp}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert result.returncode == 0, result.stderr
    assert "in a throwaway store" in result.stdout and "# Resume context" in result.stdout
    return result.stdout


def test_make_demo_leaves_the_users_store_alone(tmp_path: Path) -> None:
    me = Cli(tmp_path / "me")
    make_demo(tmp_path, {**me.env, "HOME": str(tmp_path / "me"), "XDG_STATE_HOME": ""})
    assert not (tmp_path / "me" / "data").exists() and not (tmp_path / "me" / "config").exists()
    assert not (tmp_path / "me" / ".local").exists()  # nor its state dir (hooks' log, edits)


def test_make_demo_leaves_the_users_server_alone(server: Server, tmp_path: Path) -> None:
    """``LTM_HOST`` and ``LTM_TOKEN`` exported (CI, an agent's shell) name the user's own
    server: the demo's packet goes to its throwaway store, never there."""
    _user_id, token = server.issue("Demo13")
    me = Cli(tmp_path / "me", base_env(tmp_path / "me", LTM_HOST=server.url, LTM_TOKEN=token))
    make_demo(tmp_path, me.env)
    assert json.loads(me.ok("ls", "--json"))["packets"] == []
