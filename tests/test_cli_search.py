"""ltm search, ls filters and page tokens, and lineage (save --continues, log, show,
resume), end to end: real subprocesses on the local store and against a real server."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import Cli, signed_in
from serverkit import Server, make_packet, running_server

from ltm.bundle import entry_line, header_line


def save(cli: Cli, *args: str, **content: object) -> str:
    packet = {"goal": "a goal", "next_step": "a next step", **content}
    return cli.ok("save", "-", *args, stdin=json.dumps(packet)).strip()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


MEANING = pytest.mark.skipif(
    not __import__("ltm.semantic").semantic.installed(), reason="needs ltm[semantic]"
)


@MEANING
def test_search_by_meaning_words_or_both(cli: Cli) -> None:
    cli.env["LTM_CACHE_DIR"] = str(cli.home / "cache")
    cli.env["LTM_SEMANTIC"] = "0"  # saved before the extra: the first search fills them
    pool = save(cli, goal="Fix Postgres connection pool exhaustion under peak load")
    save(cli, goal="Translate the storefront into German and French", tags=["i18n"])
    del cli.env["LTM_SEMANTIC"]
    first = cli.run("search", "database runs out of sockets when traffic peaks", "--json")
    assert first.returncode == 0, first.stderr
    assert "working out what each packet means (once): 2/2" in first.stderr
    assert json.loads(first.stdout)["results"][0]["id"] == pool
    again = cli.run("search", "database sockets", "--semantic", "--json")
    assert again.stderr == "" and json.loads(again.stdout)["results"][0]["id"] == pool
    # The words alone: every one must match.
    assert cli.run("search", "database sockets", "--lexical").stderr.startswith("nothing matches")
    # Words that match come first, then what is near in meaning.
    dutch = save(cli, goal="Add Dutch and Italian translations to the storefront")
    both = json.loads(cli.ok("search", "German", "--json"))["results"]
    assert [hit["id"] for hit in both][1:] == [dutch]
    assert both[0]["highlights"] and not both[1]["highlights"]
    # And each says how it was found, in JSON and in the text: a neighbour by meaning is
    # not taken for a match of the words.
    assert [hit["matched"] for hit in both] == ["words", "meaning"]
    text = cli.ok("search", "German").splitlines()
    assert "by meaning only" not in text[1] and "by meaning only" in text[3], text
    assert "not both" in cli.fails("search", "x", "--semantic", "--lexical", code=1)
    # Turned off here, the extra installed: the way back is the variable, not pip.
    off = cli.run("search", "x", "--semantic", LTM_SEMANTIC="0")
    assert off.returncode == 1 and "LTM_SEMANTIC=0" in off.stderr, off.stderr
    assert "pip install" not in off.stderr


def test_search_finds_a_word_inside_a_run_of_japanese_chinese_or_korean(cli: Cli) -> None:
    """Japanese and Chinese put no space between words, Korean joins compounds: a word
    inside such a run finds its packet, and is the part marked."""
    runs = {
        "テスト": save(cli, goal="検索テストを直す"),
        "功能": save(cli, goal="修复搜索功能的错误"),
        "자동완성": save(cli, goal="검색어자동완성오류 수정"),
    }
    for word, saved in runs.items():
        found = json.loads(cli.ok("search", word, "--lexical", "--json"))["results"]
        assert [hit["id"] for hit in found] == [saved], word
    assert "    goal: 検索**テスト**を直す" in cli.ok("search", "テスト", "--lexical")


@MEANING
def test_by_meaning_a_query_in_those_scripts_says_to_search_by_words(cli: Cli) -> None:
    """The model learned English (test_semantic.py): by meaning such a query finds nothing,
    and the line says why and what finds it; the words do."""
    cli.env["LTM_CACHE_DIR"] = str(cli.home / "cache")
    saved = save(cli, goal="検索テストを直す")
    nothing = cli.run("search", "テスト", "--semantic")
    assert nothing.returncode == 0 and nothing.stdout == "", nothing.stderr
    assert "searched by their words: leave out --semantic" in nothing.stderr
    found = json.loads(cli.ok("search", "テスト", "--json"))["results"]
    assert [hit["id"] for hit in found] == [saved]
    english = cli.run("search", "unrelated words here", "--semantic")
    assert "leave out --semantic" not in english.stderr


def test_search_ranks_marks_and_escapes(cli: Cli) -> None:
    target = save(
        cli,
        goal="Stop the OAuth refresh race in the login flow",
        tags=["auth"],
        attempts=[{"tried": "a mutex", "outcome": "failed", "learned": "deadlocks"}],
    )
    other = save(cli, goal="Tidy docs", decisions=[{"what": "mention oauth", "why": "users ask"}])
    save(cli, goal="Evil \x1b[2J\x1b[31mgoal\u202e")
    out = cli.ok("search", "oauth")
    lines = out.splitlines()
    assert lines[0].startswith(target[:12]) and "Stop the OAuth refresh race" in lines[0]
    assert lines[1] == "    goal: Stop the **OAuth** refresh race in the login flow"
    evil = cli.ok("search", "evil")  # packet text never drives the terminal
    assert "\x1b" not in evil and "\u202e" not in evil and "\\u001b[2J" in evil
    assert any(line.startswith(other[:12]) for line in lines)
    assert "    decisions: mention **oauth**" in out
    # phrases, prefixes, qualifiers; several words are one query
    assert cli.ok("search", '"refresh race"').splitlines()[0].startswith(target[:12])
    assert cli.ok("search", "mute*", "tag:auth").splitlines()[0].startswith(target[:12])
    found = json.loads(cli.ok("search", "oauth", "refresh", "--json", "--lexical"))["results"]
    assert [h["id"] for h in found] == [target]
    assert found[0]["field"] == "goal" and found[0]["highlights"]
    assert cli.run("search", "nothing-like-this", "--lexical").stderr.startswith("nothing matches")
    assert (
        cli.fails("search", "x*", code=2) == "ltm: a prefix term needs at least 2 characters: 'x*'"
    )
    assert "teams live on a server" in cli.fails("search", "oauth", "-t", "core")
    for empty in ("", "   ", '""'):  # said in the CLI's words, not the HTTP parameter's
        result = cli.run("search", empty)
        assert result.returncode == 2
        assert result.stderr == (
            "ltm: nothing to search for: give words to look for, e.g. 'flaky login'\n"
        )


def test_ls_filters_and_pages(cli: Cli) -> None:
    made = [
        save(cli, created_at=f"2026-03-0{n + 1}T10:00:00Z", tags=["api"] if n % 2 else ["ui"])
        for n in range(5)
    ]
    newest = list(reversed(made))

    def ids(*args: str) -> list[str]:
        return [p["id"] for p in json.loads(cli.ok("ls", "--json", *args))["packets"]]

    assert ids("--tag", "api") == [made[3], made[1]]
    assert ids("--since", "2026-03-03") == newest[:3]
    assert ids("--until", "2026-03-03", "--tag", "ui") == [made[0]]
    assert ids("--author", "me") == newest
    first = json.loads(cli.ok("ls", "--json", "-n", "2"))
    assert [p["id"] for p in first["packets"]] == newest[:2]
    assert ids("-n", "2", "--page-token", first["next_page_token"]) == newest[2:4]
    assert ids("-n", "2", "--all") == newest
    page = cli.run("ls", "-n", "2")
    assert "more packets: add --page-token" in page.stderr and len(page.stdout.splitlines()) == 2
    assert "--since: give a date" in cli.fails("ls", "--since", "yesterday-ish", code=2)
    # out of range: one line and a usage error, never an unexpected error
    out_of_range = "out of range: give a time between the years 1 and 9999 (UTC)"
    assert cli.fails("ls", "--since", "999999w", code=2) == f"ltm: --since: {out_of_range}"
    late = "9999-12-31T23:59:59-14:00"
    assert cli.fails("ls", "--until", late, "--json", code=2) == f"ltm: --until: {out_of_range}"
    early = "0001-01-01T00:00:00+14:00"
    assert cli.fails("ls", "--until", early, "--tag", "ui", code=2).endswith(out_of_range)
    assert ids("--since", "0005-01-01") == newest  # an early year still sorts before 2026
    # a range no time lies between (swapped, or equal) is refused, not "no packets match"
    for since, until in (("2026-03-04", "2026-03-02"), ("3d", "1w"), ("2026-03-03", "2026-03-03")):
        said = cli.fails("ls", "--since", since, "--until", until, "--json", code=2)
        assert said == f"ltm: --since {since} is not before --until {until}: no packet can match"
    assert ids("--since", "2026-03-02", "--until", "2026-03-04") == [made[2], made[1]]


def test_continues_log_show_and_resume(cli: Cli) -> None:
    root = save(cli, goal="Port the scheduler", next_step="port the timers")
    # a packet that names its parent is not re-parented by --continues: refused, not stored
    named = {"goal": "g", "next_step": "n", "parent_id": "01OTHERPARENT0000000000000"}
    refused = cli.run("save", "-", "--continues", "last", stdin=json.dumps(named))
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr
    assert refused.stderr.splitlines()[-1] == (
        "ltm: standard input already continues 01OTHERPARENT0000000000000 (its parent_id);"
        f" --continues last names {root}: remove one"
    )
    assert len(json.loads(cli.ok("ls", "--json"))["packets"]) == 1
    picked = cli.run("save", "-", "--continues", "last", stdin=json.dumps(
        {"goal": "Port the timers", "next_step": "port io"}))  # fmt: skip
    assert picked.returncode == 0, picked.stderr
    assert f"continues {root}: Port the scheduler\n" in picked.stderr  # which one was picked
    middle = picked.stdout.strip()
    tip = save(cli, "--continues", middle[:12], goal="Port io", next_step="ship it")
    assert json.loads(cli.ok("pull", tip))["parent_id"] == middle
    assert json.loads(cli.ok("pull", middle))["parent_id"] == root
    lines = cli.ok("log", tip[:12]).splitlines()
    assert [line[:12] for line in lines] == [root[:12], middle[:12], tip[:12]]
    assert lines[0].endswith("Port the scheduler  -> next: port the timers")
    shown = cli.ok("show", middle)
    assert f"Parent   {root}" in shown and f"Children {tip}" in shown
    block = cli.ok("resume", tip)
    assert f"- Continues: {middle} (2 packets came before this one" in block
    assert f"ltm log {tip}" in block
    assert "no earlier packet" in Cli(cli.home / "fresh").fails(
        "save", "-", "--continues", "last", stdin=json.dumps({"goal": "g", "next_step": "n"})
    )
    old = json.dumps({"ltm_version": "0.1", "goal": "g", "next_step": "n"})
    assert "needs an ltm_version 0.2" in cli.fails("save", "-", "--continues", root, stdin=old)


def test_log_says_why_a_thread_is_cut_short(cli: Cli, tmp_path: Path) -> None:
    """A thread whose parent_id links loop, or one longer than a walk reads, is not one
    whose earlier packets are "gone or not visible": the user would look for packets that
    are there. Each says what it is."""

    def push(packet: dict[str, object]) -> None:
        cli.ok("push", "-", stdin=json.dumps(packet))

    itself = make_packet(goal="Loops on itself")
    push({**itself, "parent_id": itself["id"]})
    one, two = make_packet(goal="One"), make_packet(goal="Two")
    push({**two, "parent_id": one["id"]})
    push({**one, "parent_id": two["id"]})
    said = {ref: cli.run("log", ref).stderr for ref in (itself["id"], one["id"])}
    assert "names itself as its parent" in said[itself["id"]]
    assert f"this thread loops: {two['id']} continues {one['id']}" in said[one["id"]]
    assert all("gone or not visible" not in line for line in said.values())
    # --json says why as a word a script can test, beside complete: false
    stopped = {ref: json.loads(cli.ok("log", ref, "--json")) for ref in (itself["id"], one["id"])}
    assert [(t["complete"], t["stopped"]) for t in stopped.values()] == [
        (False, "itself"),
        (False, "loop"),
    ]

    # 1,001 packets in one thread: the walk shows the newest 1,000 and names where to go on
    chain = [make_packet(goal=f"Step {n}") for n in range(1001)]
    for before, after in itertools.pairwise(chain):
        after["parent_id"] = before["id"]
    lines = [header_line(source="test", exported_at="2026-05-01T12:00:00Z")]
    for packet in chain:
        body, at = json.dumps(packet).encode(), str(packet["created_at"])
        lines.append(entry_line(body=body, team=None, created_by="local", created_at=at))
    (tmp_path / "thread.jsonl").write_text("".join(lines))
    cli.ok("import", str(tmp_path / "thread.jsonl"))
    long = cli.run("log", chain[-1]["id"])
    assert long.returncode == 0 and len(long.stdout.splitlines()) == 1000
    assert f"the earlier ones: ltm log {chain[0]['id']}" in long.stderr
    assert json.loads(cli.ok("log", chain[-1]["id"], "--json"))["stopped"] == "limit"
    assert "stopped" not in json.loads(cli.ok("log", chain[999]["id"], "--json"))
    assert cli.ok("log", chain[0]["id"]).startswith(chain[0]["id"][:12])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("cli-search")) as srv:
        yield srv


def test_search_on_a_server_by_scope(server: Server, tmp_path: Path) -> None:
    alice = signed_in(server, tmp_path / "alice", "alice")
    bob = signed_in(server, tmp_path / "bob", "bob")
    alice.ok("teams", "create", "falcons")
    mine = save(alice, goal="Falcon telemetry private notes")
    shared = save(alice, "-t", "falcons", goal="Falcon telemetry for the team")
    bobs = save(bob, goal="Falcon telemetry, bob's own")
    assert alice.ok("search", "telemetry").splitlines()[0].startswith(mine[:12])
    team = alice.ok("search", "telemetry", "-t", "falcons").splitlines()
    assert team[0].startswith(shared[:12]) and len(team) == 2
    every = json.loads(alice.ok("search", "falcon", "--all-scopes", "--json"))["results"]
    assert {h["id"]: h["team"] for h in every} == {mine: None, shared: "falcons"}
    assert {h["matched"] for h in every} == {"words"}
    assert [h["id"] for h in json.loads(bob.ok("search", "falcon", "--json"))["results"]] == [bobs]
    assert "not found" in bob.fails("search", "falcon", "-t", "falcons")
    assert "--since: out of range" in bob.fails("ls", "--since", "999999w", code=2)
    child = save(alice, "-t", "falcons", "--continues", "last", goal="Falcon follow-up")
    assert [line[:12] for line in alice.ok("log", child, "-t", "falcons").splitlines()] == [
        shared[:12],
        child[:12],
    ]


def test_a_server_without_meaning_answers_by_words(tmp_path: Path) -> None:
    """``ltm search`` asks a server for both; one without the semantic extra (here turned
    off) answers a 400 naming it, and the CLI searches by words instead; asked for
    meaning alone, it says what the server lacks."""
    from serverkit import clean_env, init_db, run_server

    db = tmp_path / "server.db"
    root = init_db(db)
    server = run_server(db, tmp_path / "server.log", root, env=clean_env(LTM_SEMANTIC="0"))
    try:
        me = signed_in(server, tmp_path / "me", "me")
        pool = save(me, goal="Fix Postgres connection pool exhaustion under peak load")
        found = json.loads(me.ok("search", "postgres", "pool", "--json"))["results"]
        assert [hit["id"] for hit in found] == [pool]
        assert "ltm[semantic]" in me.fails("search", "database sockets", "--semantic")
    finally:
        server.stop()


def _damaged_wordllama(where: Path, damage: str) -> Path:
    """A copy of the installed wordllama's model files, damaged as a disk, an interrupted
    install or a later release leaves them; a folder for PYTHONPATH, where it comes before
    the real package."""
    from ltm import semantic

    real = semantic.package_folder()
    assert real is not None
    package = where / "wordllama"
    (package / "weights").mkdir(parents=True)
    (package / "tokenizers").mkdir()
    (package / "__init__.py").write_text("")
    weights = real.joinpath(*semantic._WEIGHTS).read_bytes()
    tokenizer = real.joinpath(*semantic._TOKENIZER).read_bytes()
    header = 8 + int.from_bytes(weights[:8], "little")
    if damage == "weights cut short":  # the header whole, the table not
        weights = weights[: header + 1000]
    elif damage == "weights of four bytes":
        weights = weights[:4]
    elif damage == "tokenizer that does not parse":
        tokenizer = tokenizer[:5000]
    elif damage == "tokenizer of another shape":
        tokenizer = b'{"model": {"type": "BPE"}}'
    if damage != "files moved by another release":
        package.joinpath(*semantic._WEIGHTS).write_bytes(weights)
        package.joinpath(*semantic._TOKENIZER).write_bytes(tokenizer)
    return where


@MEANING
@pytest.mark.parametrize(
    "damage",
    [
        "weights cut short",
        "weights of four bytes",
        "tokenizer that does not parse",
        "tokenizer of another shape",
        "files moved by another release",
    ],
)
def test_a_damaged_model_leaves_saves_and_words_working(
    cli: Cli, tmp_path: Path, damage: str
) -> None:
    """The extra installed but its files unreadable: a save is kept, a search finds by
    its words, a search by meaning says so in one line naming the extra, recall at the
    prompt stays silent, and doctor says why meaning is off."""
    cli.env["PYTHONPATH"] = str(_damaged_wordllama(tmp_path / "site", damage))
    cli.env["LTM_CACHE_DIR"] = str(tmp_path / "cache")
    cli.env["LTM_STATE_DIR"] = str(tmp_path / "state")
    stripe = save(cli, goal="Deduplicate Stripe webhook events so nobody is billed twice")
    found = json.loads(cli.ok("search", "stripe", "--json"))["results"]
    assert [hit["id"] for hit in found] == [stripe]
    said = cli.fails("search", "customers charged two times", "--semantic")
    assert "ltm[semantic]" in said and "wordllama" in said
    prompt = {"session_id": "s-1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
              "prompt": "why are customers charged two times for one order?"}  # fmt: skip
    hook = cli.run("hook", "user-prompt", stdin=json.dumps(prompt))
    assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
    doctor = cli.run("doctor").stdout
    (meaning,) = [line for line in doctor.splitlines() if " meaning " in f"{line} "]
    assert "words only" in meaning and "wordllama" in meaning, meaning


@MEANING
def test_a_server_that_gains_the_extra_fills_the_packets_pushed_before(tmp_path: Path) -> None:
    """Packets pushed while the server searched by words only get their vectors when it
    starts with the extra: a search by meaning finds them, not only the newer ones."""
    import time

    from serverkit import clean_env, init_db, run_server
    from timing import scaled

    db, log = tmp_path / "server.db", tmp_path / "server.log"
    root = init_db(db)
    cache = str(tmp_path / "cache")
    server = run_server(db, log, root, env=clean_env(LTM_SEMANTIC="0", LTM_CACHE_DIR=cache))
    me = Cli(tmp_path / "me")
    try:
        _user, token = server.issue("me")
        me.ok("auth", server.url, "--with-token", stdin=token)
        pool = save(me, goal="Fix Postgres connection pool exhaustion under peak load")
        save(me, goal="Translate the storefront into German and French")
    finally:
        server.stop()
    server = run_server(db, log, root, env=clean_env(LTM_CACHE_DIR=cache))
    try:
        me.ok("auth", server.url, "--with-token", stdin=token)  # the same user, a new port
        deadline = time.monotonic() + scaled(60)
        while True:  # filled in the background: found once it is done
            found = me.ok("search", "database runs out of sockets", "--semantic", "--json")
            if [hit["id"] for hit in json.loads(found)["results"]][:1] == [pool]:
                break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert "ltm server: 2 packets have their vectors" in log.read_text()
    finally:
        server.stop()


@MEANING
def test_doctor_names_the_packets_recall_cannot_find_by_meaning_yet(cli: Cli) -> None:
    """Packets saved before the extra have no vector until a search makes them; recall at
    the prompt never does (a hook stays quick), so doctor says so, and how."""
    cli.env["LTM_CACHE_DIR"] = str(cli.home / "cache")
    packet = {"goal": "Fix Postgres connection pool exhaustion", "next_step": "cap the pool"}
    cli.ok("save", "-", stdin=json.dumps(packet), LTM_SEMANTIC="0")

    def meaning() -> str:
        (line,) = [row for row in cli.run("doctor").stdout.splitlines() if " meaning " in row]
        return line

    assert "1 packets of the local store have no vector yet" in meaning()
    assert "ltm search --local" in cli.run("doctor").stdout
    cli.ok("search", "--local", "x")
    assert meaning().startswith("ok") and "no vector" not in meaning()
