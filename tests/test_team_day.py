"""A team's day end to end, as people live it: the real ``ltm`` in subprocesses, each person
on a fresh machine (a clean config and data dir), against ``ltm server run`` on loopback.

Olive creates a team and invites Sam; Sam joins on a clean machine, lists and saves in
the team, opens the web view signed in (never seeing a token), imports a bundle of his
local packets into the team, shares one packet with Cat, and is refused a delete that
has no terminal to ask on.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import Cli, signed_in
from serverkit import Server, ltm_server, running_server
from test_project import needs_git, repo
from timing import scaled

TOKEN = re.compile(r"ltm_[A-Za-z0-9_-]{20,}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("team-day")) as srv:
        yield srv


def content(goal: str) -> str:
    return json.dumps({"goal": goal, "next_step": "Carry on."})


def follower(tmp_path: Path) -> tuple[str, Path]:
    """A BROWSER program that does what a browser does with ``ltm open``'s private page:
    submits its form (or follows its refresh), keeps the cookie, and saves the page it
    lands on; asked whose account to sign in as, it answers as the person would, and
    saves the question to ``asked.html``. Its own argv goes to ``argv.txt``: the CLI may
    put nothing secret there."""
    landed = tmp_path / "landed.html"
    program = tmp_path / "browser.py"
    program.write_text(
        f"#!{sys.executable}\n"
        "import html, re, socket, sys, urllib.parse, urllib.request, http.cookiejar\n"
        "from pathlib import Path\n"
        # As a browser does: every *.localhost name is loopback (the web view's own name).
        "real = socket.getaddrinfo\n"
        "def resolve(host, *rest, **kw):\n"
        "    name = host.decode() if isinstance(host, bytes) else host\n"
        "    local = name and name.endswith('.localhost')\n"
        "    return real('127.0.0.1' if local else host, *rest, **kw)\n"
        "socket.getaddrinfo = resolve\n"
        f"Path({str(tmp_path / 'argv.txt')!r}).write_text('\\n'.join(sys.argv[1:]))\n"
        "page = Path(sys.argv[1].removeprefix('file://')).read_text()\n"
        "jar = http.cookiejar.CookieJar()\n"
        "opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))\n"
        "def submit(page, base=''):\n"
        '    action = re.search(r\'<form method="post" action="([^"]+)"\', page)\n'
        '    fields = dict(re.findall(r\'name="([^"]+)" value="([^"]*)"\', page))\n'
        "    data = urllib.parse.urlencode({k: html.unescape(v) for k, v in fields.items()})\n"
        "    url = urllib.parse.urljoin(base, html.unescape(action.group(1)))\n"
        "    answer = opener.open(url, data.encode())\n"
        "    return answer.url, answer.read().decode()\n"
        "url, page = submit(page)\n"
        "if 'name=\"confirm\"' in page:\n"
        f"    Path({str(tmp_path / 'asked.html')!r}).write_text(page)\n"
        "    url, page = submit(page, url)\n"
        f"Path({str(landed)!r}).write_text(url + '\\n' + page)\n"
    )
    program.chmod(0o755)
    return str(program), landed


def test_a_team_day_end_to_end(server: Server, tmp_path: Path) -> None:
    # Olive, signed in already, starts a team and invites Sam.
    olive = signed_in(server, tmp_path / "olive", "Olive")
    olive.ok("teams", "create", "core")
    plan = olive.ok("save", "-t", "core", "-", stdin=content("Olive's plan for core")).strip()
    url = olive.ok("invite", "-t", "core").strip()

    # Sam, on a machine with no ltm config at all: everything he is shown is kept.
    sam = Cli(tmp_path / "sam")
    seen: list[str] = []

    def run(*args: str, stdin: str = "", code: int = 0, **env: str) -> str:
        result = sam.run(*args, stdin=stdin, **env)
        seen.extend([result.stdout, result.stderr])
        assert result.returncode == code, (args, result.stderr)
        return result.stdout

    run("join", url, "--display", "Sam")
    assert plan[:12] in run("ls", "-t", "core")
    mine = run("save", "-t", "core", "-", stdin=content("Sam's first step")).strip()
    assert mine[:12] in olive.ok("ls", "-t", "core")

    # The web view, signed in from the CLI: the browser gets a private page, nothing more.
    browser, landed = follower(tmp_path)
    sam.env.pop("LTM_NO_BROWSER", None)
    opened = run(
        "open", "-t", "core", BROWSER=f"{browser} %s", LTM_STATE_DIR=str(tmp_path / "sam-st")
    )
    web = server.web or server.url  # a loopback server's pages: a name of their own
    assert opened.strip() == f"{web}/web?team=core"
    page = landed.read_text()
    assert page.startswith(f"{web}/web?team=core\n")  # signed in: not the sign-in form
    assert "Sign in as Sam" in (tmp_path / "asked.html").read_text()  # asked first, by name
    assert "Sam&#x27;s first step" in page or "Sam's first step" in page
    assert "Olive&#x27;s plan for core" in page or "Olive's plan for core" in page
    argv = (tmp_path / "argv.txt").read_text()
    assert argv.startswith("file://") and "key" not in argv

    # A bundle of Sam's local packets, imported into the team.
    local = [run("save", "-", stdin=content(f"Local note {n}")).strip() for n in range(2)]
    bundle = tmp_path / "bundle.jsonl"
    run("export", "-o", str(bundle))
    run("import", str(bundle), "-t", "core")
    listed = olive.ok("ls", "-t", "core")
    assert all(pid[:12] in listed for pid in local)

    # One packet shared with Cat, who is in no team of Sam's: by her user id.
    cat = signed_in(server, tmp_path / "cat", "Cat")
    cat_id = json.loads(cat.ok("whoami", "--json"))["user"]["id"]
    note = run("-H", server.url, "save", "-", stdin=content("For Cat only")).strip()
    run("-H", server.url, "share", note, cat_id)
    shared = json.loads(cat.ok("ls", "--shared", "--json"))["packets"]
    assert [p["id"] for p in shared] == [note]
    assert json.loads(cat.ok("show", note, "--json"))["goal"] == "For Cat only"
    assert plan[:12] not in cat.ok("ls")  # the team's packets stay the team's

    # No terminal (an agent's shell tool): a delete is refused, and nothing is deleted.
    refused = run("rm", mine, "-t", "core", code=2)
    assert refused == "" and "no terminal to ask on" in seen[-1] and "--yes" in seen[-1]
    assert mine[:12] in olive.ok("ls", "-t", "core")

    # Sam never saw a token: not in anything ltm printed to him, nor on the browser's argv.
    token = sam.credentials()["hosts"][server.url]["token"]
    assert not any(token in text or TOKEN.search(text) for text in [*seen, argv])


def test_the_sign_in_page_takes_a_code_approved_from_a_signed_in_cli(
    server: Server, tmp_path: Path
) -> None:
    """The device pages' way on the web view: the page shows a code, ``ltm approve CODE``
    on any signed-in machine approves it, and the browser's session is the approver's."""
    import html

    olive = signed_in(server, tmp_path / "olive", "Olive2")
    olive.ok("teams", "create", "webcode")
    url = olive.ok("invite", "-t", "webcode").strip()
    sam = Cli(tmp_path / "sam")
    sam.ok("join", url, "--display", "Sam2")  # his default stays the local store
    sam.ok("save", "-t", "webcode", "-", stdin=content("Seen through the code"))

    def fields(page: str) -> dict[str, str]:
        found = re.findall(r'name="([^"]+)" value="([^"]*)"', page)
        return {k: html.unescape(v) for k, v in found}

    browser = server.web_client(follow_redirects=False)
    signin = browser.get("/web/signin?next=/web%3Fteam%3Dwebcode")
    assert signin.status_code == 200 and "ltm approve CODE" in signin.text
    form = fields(signin.text.split('action="/web/signin/code"', 1)[1].split("</form>", 1)[0])
    shown = browser.post("/web/signin/code", data={**form, "step": "new"})
    assert shown.status_code == 200, shown.text
    code = re.search(r"ltm approve ([A-Z]{4}-[A-Z]{4})", shown.text)
    assert code
    ticket = fields(shown.text)
    waiting = browser.post("/web/signin/code", data={**ticket, "step": "check"})
    assert waiting.status_code == 200 and "Not approved yet" in waiting.text
    assert browser.get("/web").status_code == 303  # not signed in until approved
    # The same ticket in another browser (no cookie of this one) is of no use.
    with server.web_client() as elsewhere:
        other = elsewhere.post("/web/signin/code", data={**ticket, "step": "check"})
    assert other.status_code == 403

    approved = sam.run("-H", server.url, "approve", code.group(1), "--yes")
    assert approved.returncode == 0, approved.stderr
    assert "approved the sign-in of web browser" in approved.stderr
    assert "signed in to the web view as you" in approved.stderr
    done = browser.post("/web/signin/code", data={**ticket, "step": "check"})
    web = server.web or server.url
    assert done.status_code == 303 and done.headers["location"] == f"{web}/web?team=webcode"
    page = browser.get("/web?team=webcode")
    assert page.status_code == 200 and "Seen through the code" in page.text and "Sam2" in page.text
    again = browser.post("/web/signin/code", data={**ticket, "step": "check"})
    assert again.status_code == 410  # once only
    assert "ltm_" not in approved.stderr + approved.stdout  # no token shown, none made
    tokens = json.loads(sam.ok("-H", server.url, "tokens", "--json"))["tokens"]
    assert len(tokens) == 1  # the invite's token only: the browser got a session, no token

    # Denied from the CLI: the browser is told, and is not signed in.
    fresh = server.web_client(follow_redirects=False)
    form = fields(
        fresh.get("/web/signin").text.split('action="/web/signin/code"', 1)[1].split("</form>")[0]
    )
    shown = fresh.post("/web/signin/code", data={**form, "step": "new"})
    code = re.search(r"ltm approve ([A-Z]{4}-[A-Z]{4})", shown.text)
    assert code
    olive.ok("approve", code.group(1), "--deny")
    denied = fresh.post("/web/signin/code", data={**fields(shown.text), "step": "check"})
    assert denied.status_code == 403 and "denied" in denied.text
    assert fresh.get("/web").status_code == 303  # on to sign in


@needs_git
def test_team_memory_reaches_the_agent_atsession_start(server: Server, tmp_path: Path) -> None:
    """Hooks installed with ``-t core``: the session starts with the project's newest packet
    across Sam's own scope and the team's, framed by who wrote it."""
    olive = signed_in(server, tmp_path / "olive", "Olive3")
    olive.ok("teams", "create", "resumers")
    url = olive.ok("invite", "-t", "resumers").strip()
    sam = Cli(tmp_path / "sam")
    sam.env.update(HOME=str(tmp_path / "sam-home"), LTM_STATE_DIR=str(tmp_path / "sam-state"))
    sam.ok("join", url, "--display", "Sam3")

    checkout = repo(tmp_path / "app", "https://github.com/acme/teamapp.git")
    olive_here, sam_here = olive.at(checkout), sam.at(checkout)
    olive_here.ok("save", "-t", "resumers", "-", stdin=content("Olive's teamapp plan"))

    installed = sam_here.run("hooks", "install", "codex", "-t", "resumers", "--write", "--no-mcp")
    assert installed.returncode == 0, installed.stderr
    hooks = json.loads((tmp_path / "sam-home" / ".codex" / "hooks.json").read_text())
    start = hooks["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert start.endswith("hook session-start --harness codex --team resumers")

    def session_start() -> str:
        payload = {"session_id": "c-1", "cwd": str(checkout), "hook_event_name": "SessionStart"}
        done = subprocess.run(
            ["sh", "-c", start],
            input=json.dumps(payload),
            env=sam.env,
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=scaled(30),
        )
        assert done.returncode == 0 and done.stdout.strip(), done.stderr
        return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]

    text = session_start()
    header, inside = text.split("ltm-data\n", 1)
    assert "Olive's teamapp plan" in inside
    assert "Saved by: another person, Olive3" in inside and "Scope: team resumers" in inside
    assert "Olive3" not in header  # names stay inside the fence
    # Continued where it lives: the hook names the team to save in, and that save works.
    plan = re.search(r'set "parent_id" to the packet\'s id \((\w+)\)', text)
    assert plan is not None and "(`ltm save - -t resumers`)" in text
    follow = json.dumps({"goal": "Sam carries on", "next_step": "Ship", "parent_id": plan[1]})
    sam_here.ok("save", "-", "-t", "resumers", stdin=follow)

    mine = sam_here.ok("save", "-", stdin=content("Sam's own next move"))  # his default scope
    text = session_start()
    inside = text.split("ltm-data\n", 1)[1]
    assert "Sam's own next move" in inside.split("## Other recent packets")[0]
    assert "Saved by: the user's own account" in inside
    assert "(`ltm save -`)" in text
    assert "team resumers · Olive's teamapp plan" in inside  # the index names the team
    assert mine.strip() in text

    # Copied into Sam's local store too, Olive's packet is still listed once, as the team's.
    sam_here.ok("pull", plan[1], "-t", "resumers", "--to-local")
    inside = session_start().split("ltm-data\n", 1)[1]
    assert inside.count("Olive's teamapp plan") == 1
    assert "team resumers · Olive's teamapp plan" in inside


def test_sharing_by_name_in_any_case_from_a_joined_machine(server: Server, tmp_path: Path) -> None:
    """The README's ``ltm share ID sam`` for a teammate who joined as ``Sam``; Sam, whose
    default stays the local store after ``ltm join``, lists and reads what was shared."""
    olive = signed_in(server, tmp_path / "olive", "Olive4")
    olive.ok("teams", "create", "sharers")
    url = olive.ok("invite", "-t", "sharers").strip()
    sam = Cli(tmp_path / "sam")
    sam.ok("join", url, "--display", "Sam4")
    sam_id = json.loads(sam.ok("-H", server.url, "whoami", "--json"))["user"]["id"]

    note = olive.ok("save", "-", stdin=content("For Sam, whatever the case")).strip()
    missed = olive.fails("share", note, "sma4")
    assert "did you mean 'Sam4'" in missed
    shared = olive.run("share", note, "sam4")
    assert shared.returncode == 0, shared.stderr
    assert f"shared {note} with Sam4 ({sam_id})" in shared.stdout

    # An operator naming the user in another case gets Sam's user, not a second one.
    issued = ltm_server("issue-token", "SAM4", "--db", str(server.db))
    assert issued.returncode == 0, issued.stderr
    other = Cli(tmp_path / "sam-laptop")
    other.ok("auth", server.url, "--with-token", stdin=issued.stdout.strip())
    assert json.loads(other.ok("whoami", "--json"))["user"]["id"] == sam_id

    listed = sam.run("ls", "--shared")
    assert listed.returncode == 0, listed.stderr
    assert note in listed.stdout.split()  # the full id: ltm show needs it
    assert f"read one with: ltm show ID -H {server.url}" in listed.stderr
    assert json.loads(sam.ok("-H", server.url, "show", note, "--json"))["goal"] == (
        "For Sam, whatever the case"
    )
    assert note in sam.ok("ls", "--shared", "-t", "sharers")
    # Read by Sam, it says whose it is; read by Olive, it is hers.
    assert "Saved by Olive4 (" in sam.ok("-H", server.url, "show", note)
    assert f"reached with -H {server.url}," in sam.fails("show", note)  # not local: where
    assert "Saved by" not in olive.ok("show", note)

    teams = sam.ok("teams", "ls")
    olive_id = json.loads(olive.ok("whoami", "--json"))["user"]["id"]
    assert f"Olive4 ({olive_id})" in teams


def test_people_see_who_wrote_a_team_packet(server: Server, tmp_path: Path) -> None:
    """The author of a team packet in ``ls -t``, ``show -t`` and the web view (the server
    names who stored it; the packet's own provenance is not evidence), and the web's search
    box searches every scope the landing page lists."""
    from test_web_pages import browser_for

    olive = signed_in(server, tmp_path / "olive", "Olive5")
    olive.ok("teams", "create", "authors")
    url = olive.ok("invite", "-t", "authors").strip()
    _sam_id, sam_token = server.issue("Sam5")
    sam = Cli(tmp_path / "sam")
    sam.ok("auth", server.url, "--with-token", stdin=sam_token)
    sam.ok("join", url)
    theirs = olive.ok("save", "-t", "authors", "-", stdin=content("Olive's payment retries"))
    mine = sam.ok("save", "-t", "authors", "-", stdin=content("Sam's payment audit")).strip()
    personal = sam.ok("save", "-", stdin=content("Sam's own payment note")).strip()

    listed = sam.ok("ls", "-t", "authors").splitlines()
    assert any(theirs.strip()[:12] in line and "Olive5" in line for line in listed), listed
    assert any(mine[:12] in line and " you " in line for line in listed), listed
    shown = sam.ok("show", theirs.strip(), "-t", "authors")
    assert "Saved by Olive5 (" in shown
    assert "Saved by" not in sam.ok("show", personal)  # a personal packet is one's own

    web = browser_for(server, sam_token)
    landing = web.get("/web").text
    assert 'by <span class="author">Olive5</span>' in landing
    assert landing.count('name="team"') == 1  # one row of scope controls, not two
    assert '<input type="hidden" name="all" value="1">' in landing
    page = web.get(f"/web/packets/{theirs.strip()}").text
    assert "Saved by" in page and "Olive5" in page
    # The box above the landing page searches what it lists: every scope.
    found = web.get("/web", params={"q": "payment", "all": "1"}).text
    assert theirs.strip() in found and personal in found and mine in found


def test_the_whole_day_from_clean_configs_with_the_server_down_for_a_while(
    tmp_path: Path,
) -> None:
    """Three people, two teams, a share, a kick, the member's ``ls --shared``, and a save
    while the server is stopped that reaches it once it is back (the outbox)."""
    from test_outbox import Restartable, outbox_files

    box = Restartable(tmp_path / "server")
    try:
        olive = signed_in(box.live, tmp_path / "olive", "Olive6")
        for team in ("core", "web"):
            olive.ok("teams", "create", team)
        sam, cat = Cli(tmp_path / "sam"), Cli(tmp_path / "cat")
        sam.ok("join", olive.ok("invite", "-t", "core").strip(), "--display", "Sam6")
        cat.ok("join", olive.ok("invite", "-t", "web").strip(), "--display", "Cat6")
        sam.ok("join", olive.ok("invite", "-t", "web").strip())  # Sam is in both teams now

        plan = olive.ok("save", "-t", "core", "-", stdin=content("Core plan")).strip()
        assert plan[:12] in sam.ok("ls", "-t", "core")
        note = olive.ok("save", "-", stdin=content("For cat6 alone")).strip()
        olive.ok("share", note, "cat6")  # Cat shares team web with Olive: by name, any case
        assert note in cat.ok("ls", "--shared")  # a clean machine: default is the local store
        assert "Core plan" not in cat.ok("ls", "-t", "web")

        olive.ok("teams", "kick", "web", "SAM6", "--yes")
        gone = sam.run("ls", "-t", "web")
        assert gone.returncode != 0 and "web" in gone.stderr

        # The server goes down at the end of Sam's session: his save is kept, not lost.
        box.stop()
        kept = sam.run("save", "-t", "core", "-", stdin=content("Sam's end of session"))
        assert kept.returncode == 0 and "kept" in kept.stderr, kept.stderr
        assert len(outbox_files(sam)) == 1
        box.start()
        listed = sam.run("ls", "-t", "core")
        assert listed.returncode == 0 and "outbox: pushed" in listed.stderr, listed.stderr
        assert kept.stdout.strip()[:12] in olive.ok("ls", "-t", "core")
        assert outbox_files(sam) == []
    finally:
        box.stop()


def test_display_names_are_unique_and_people_change_theirs(server: Server, tmp_path: Path) -> None:
    """One name per person on a server, in any case: a join or an operator's new user with a
    taken name is refused; ``ltm profile --display`` renames, and teammates see it at once."""
    olive = signed_in(server, tmp_path / "olive", "Olive7")
    olive.ok("teams", "create", "names")
    sam = Cli(tmp_path / "sam")
    sam.ok("join", olive.ok("invite", "-t", "names").strip(), "--display", "Sam7")

    taken = Cli(tmp_path / "imposter").run(
        "join", olive.ok("invite", "-t", "names").strip(), "--display", "sAM7"
    )
    assert taken.returncode != 0 and "'sAM7' is taken on this server" in taken.stderr
    operator = ltm_server("issue-token", "OLIVE7", "--new-user", "--db", str(server.db))
    assert operator.returncode != 0 and "is taken" in operator.stderr

    assert sam.ok("profile").startswith("Sam7 (")
    renamed = sam.run("profile", "--display", "Samuel7")
    assert renamed.returncode == 0, renamed.stderr
    assert renamed.stdout.startswith("Samuel7 (")
    members = olive.ok("teams", "members", "names")
    assert "Samuel7" in members and "Sam7 " not in members
    note = olive.ok("save", "-", stdin=content("For Samuel")).strip()
    assert "Samuel7" in olive.ok("share", note, "samuel7")

    line = olive.fails("profile", "--display", "SAMUEL7", code=2)
    assert "'SAMUEL7' is taken on this server" in line
    assert olive.ok("profile", "--display", "olive7").startswith("olive7 (")  # one's own


def teammates(
    server: Server, tmp_path: Path, team: str, owner: str, member: str
) -> tuple[Cli, Cli]:
    """``owner``, signed in, with a new ``team``; ``member`` joined it on a clean machine
    (whose default stays the local store)."""
    olive = signed_in(server, tmp_path / "olive", owner)
    olive.ok("teams", "create", team)
    sam = Cli(tmp_path / "sam")
    sam.env["LTM_STATE_DIR"] = str(tmp_path / "sam-state")
    sam.ok("join", olive.ok("invite", "-t", team).strip(), "--display", member)
    return olive, sam


def session_start(cli: Cli, checkout: Path) -> str:
    """What the session-start hook puts in the agent's context, inside the data fence."""
    payload = {"session_id": "s-9", "cwd": str(checkout), "hook_event_name": "SessionStart"}
    done = cli.at(checkout).run("hook", "session-start", stdin=json.dumps(payload))
    text = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    return text.split("ltm-data\n", 1)[1]


@needs_git
def test_a_teammates_packet_copied_to_the_local_store_stays_theirs(
    server: Server, tmp_path: Path
) -> None:
    """``pull --to-local`` keeps who wrote the packet: the session start frames the local
    copy as the teammate's notes, not the user's own."""
    olive, sam = teammates(server, tmp_path, "copies", "Olive8", "Sam8")
    checkout = repo(tmp_path / "app", "https://github.com/acme/copied.git")
    theirs = olive.at(checkout).ok("save", "-t", "copies", "-", stdin=content("Olive's copy"))
    sam.ok("pull", theirs.strip(), "-t", "copies", "--to-local")

    inside = session_start(sam, checkout)
    assert "Olive's copy" in inside and "Saved by: another person, Olive8" in inside
    assert "the user's own account" not in inside


@needs_git
def test_a_teammates_packet_imported_into_the_local_store_stays_theirs(
    server: Server, tmp_path: Path
) -> None:
    """A bundle exported from a server carries who wrote each packet; imported into the
    local store of a fresh machine, a teammate's packet is framed as theirs at session
    start, in ``ls`` and in ``show``, the exporter's own as the user's; and a local store's
    export of such a copy keeps it theirs on the next machine too."""
    olive, sam = teammates(server, tmp_path, "imported", "Olive9", "Sam9")
    checkout = repo(tmp_path / "app", "https://github.com/acme/imported.git")
    on = ("-H", server.url)  # joining leaves the local store Sam's default
    mine = sam.at(checkout).ok(*on, "save", "-", stdin=content("Sam's own plan")).strip()
    theirs = olive.at(checkout).ok("save", "-t", "imported", "-", stdin=content("Olive's fix"))
    theirs = theirs.strip()
    bundle = tmp_path / "sam.jsonl"
    sam.ok(*on, "export", "--all", "-o", str(bundle))

    # Sam's new laptop: signed in nowhere, the bundle into its local store.
    laptop = Cli(tmp_path / "laptop")
    laptop.env["LTM_STATE_DIR"] = str(tmp_path / "laptop-state")
    laptop.ok("import", str(bundle), "--local")
    inside = session_start(laptop, checkout)
    assert "Olive's fix" in inside and "Saved by: another person, Olive9" in inside
    assert "the user's own account" not in inside
    listed = laptop.ok("ls", "--local")
    assert re.search(rf"{theirs[:12]}\S*\s+.*Olive9\s+Olive's fix", listed), listed
    assert re.search(rf"{mine[:12]}\S*\s+.*you\s+Sam's own plan", listed), listed
    assert "Saved by Olive9 (" in laptop.ok("show", theirs, "--local")
    assert "Saved by" not in laptop.ok("show", mine, "--local")

    # Sam's own packet, newest, is his at session start.
    laptop.at(checkout).ok("save", "--local", "-", stdin=content("Sam, later"))
    assert "Saved by: another person" not in session_start(laptop, checkout)

    # Exported from the laptop's local store and imported on a third machine: still Olive's.
    again = tmp_path / "laptop.jsonl"
    laptop.ok("export", "--local", "-o", str(again))
    third = Cli(tmp_path / "third")
    third.ok("import", str(again), "--local")
    assert "Saved by Olive9 (" in third.ok("show", theirs, "--local")
    assert "Saved by" not in third.ok("show", mine, "--local")
    third.ok("rm", theirs, "--local", "--yes")  # gone, and so is who wrote it
    assert theirs not in (third.home / "data" / "authors.json").read_text()


def test_another_users_bundle_imported_locally_is_framed_as_theirs(
    server: Server, tmp_path: Path
) -> None:
    """A bundle of Olive's personal packets, imported into the local store of Sam, who is
    signed in to the same server as himself: Olive's, not Sam's."""
    olive = signed_in(server, tmp_path / "olive", "Olive10")
    note = olive.ok("save", "-", stdin=content("Olive's personal note")).strip()
    bundle = tmp_path / "olive.jsonl"
    olive.ok("export", "-o", str(bundle))
    sam = signed_in(server, tmp_path / "sam", "Sam10")
    sam.ok("import", str(bundle), "--local")
    assert "Saved by Olive10 (" in sam.ok("show", note, "--local")
    # Into the server, the server decides: Olive's packet is hers there, never Sam's.
    refused = sam.run("import", str(bundle))
    assert refused.returncode == 1 and f"refused {note}" in refused.stdout
    assert note not in sam.ok("ls")


def test_a_join_without_a_name_says_how_to_take_ones_own(server: Server, tmp_path: Path) -> None:
    """Off a terminal, ``ltm join`` without ``--display`` gets the server's made-up name;
    it says so, and the command it names gives the member a name of their own."""
    olive = signed_in(server, tmp_path / "olive", "Olive11")
    olive.ok("teams", "create", "unnamed")
    cat = Cli(tmp_path / "cat")
    joined = cat.run("join", olive.ok("invite", "-t", "unnamed").strip())
    assert joined.returncode == 0, joined.stderr
    made_up = re.search(r"teammates know you as (invited-\w+)", joined.stderr)
    assert made_up is not None, joined.stderr
    hint = "ltm profile --display NAME -t unnamed"
    assert hint in joined.stderr
    cat.ok(*hint.removeprefix("ltm ").replace("NAME", "Cat11").split())
    assert "Cat11" in olive.ok("teams", "members", "unnamed")
    assert made_up[1] not in olive.ok("teams", "members", "unnamed")


def test_a_join_under_a_taken_name_says_to_join_again_with_another(
    server: Server, tmp_path: Path
) -> None:
    """The refusal names the way out (the same invite, another --display), not a generic
    "pick another name or id": the invite is still good, and no id goes in a join."""
    olive = signed_in(server, tmp_path / "olive", "Olive12")
    olive.ok("teams", "create", "taken")
    url = olive.ok("invite", "-t", "taken").strip()
    dana = Cli(tmp_path / "dana")
    line = dana.fails("join", url, "--display", "olive12")
    assert "'olive12' is taken on this server" in line
    assert "--display" in line and "or id" not in line, line
    dana.ok("join", url, "--display", "Dana12")
    assert "Dana12" in olive.ok("teams", "members", "taken")
