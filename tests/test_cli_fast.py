"""The fast path: the plain forms of the most used verbs answer without typer or pydantic.

``ltm.cli.start.entry`` hands ``--version``, ``example``, ``save``, ``ls``, ``resume``,
``show``, ``search``, ``log``, ``export`` and ``import`` to ``ltm.cli.start.fast`` when it
recognises their plain forms; anything else (help, typos, unusual options) goes through the
typer commands, which call the same bodies. These tests run the real ``ltm`` in subprocesses and
check both halves: nothing heavy is imported on the fast path, and the two
paths print the same thing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import LTM, Cli

HEAVY = ("typer", "pydantic", "click", "rich", "httpx", "ulid", "re2")
TYPER_PATH = "import sys; from ltm.cli.start.main import run; run(sys.argv[1:])"
# The whole CLI with the fast path turned off: every verb through typer, and its failures
# shown as the console script shows them (one "ltm: ..." line, the exit code).
TYPER_ENTRY = (
    "import sys; from ltm.cli.start import entry; entry._fast_path = lambda argv: False;"
    " entry.main(sys.argv[1:])"
)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path)
    assert cli.ok("save", "-", "--local", stdin=cli.ok("example")).strip()
    return cli


def packet_id(cli: Cli) -> str:
    return json.loads(cli.ok("ls", "--local", "--json"))["packets"][0]["id"]


def through_typer(cli: Cli, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", TYPER_PATH, *args],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["example"],
        ["ls", "--local"],
        ["ls", "--local", "--json", "-n", "5"],
        ["resume", "ID", "--local"],
        ["show", "ID", "--local"],
        ["show", "ID", "--local", "--json"],
        ["show", "PREFIX", "--local"],
        ["search", "readme", "--local"],
        ["search", '"email.md"', "tag:docs", "--local", "--json"],
        ["log", "ID", "--local"],
        ["ls", "--local", "--tag", "docs", "--since", "30d", "--author", "me", "--all"],
        ["save", "FILE"],
        ["save", "FILE", "--local", "--lenient"],
        ["export", "--local", "-o", "OUT"],
        ["export", "--local"],
        ["export", "--all", "--output=OUT"],
        ["import", "BUNDLE", "--local"],
        ["import", "BUNDLE", "--local", "--replace", "--lenient", "--allow-unredacted"],
    ],
)
def test_plain_forms_import_nothing_heavy(cli: Cli, args: list[str], tmp_path: Path) -> None:
    full = packet_id(cli)
    (tmp_path / "packet.json").write_text(cli.ok("example"))
    # Another person's packet: the import judges it (schema, redaction) and adds it.
    other = Cli(tmp_path / "other")
    other.ok("save", "-", stdin=other.ok("example"))
    (tmp_path / "bundle.jsonl").write_text(other.ok("export"))
    files = {"FILE": "packet.json", "BUNDLE": "bundle.jsonl", "OUT": "out.jsonl"}
    args = [full if a == "ID" else full[:12] if a == "PREFIX" else a for a in args]
    args = [str(tmp_path / files[a]) if a in files else a for a in args]
    args = [a.replace("OUT", str(tmp_path / "out.jsonl")) for a in args]
    assert not {name.split(".")[0] for name in cli.imports(*args)} & set(HEAVY)


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["example"],
        ["example", "--resume"],
        ["show", "ID", "--local"],
        ["show", "ID", "--local", "--json"],
        ["resume", "ID", "--local"],
        ["ls", "--local"],
        ["ls", "--local", "--tag", "docs", "--json"],
        ["search", "email", "--local"],
        ["log", "ID", "--local"],
    ],
)
def test_fast_and_typer_paths_print_the_same(cli: Cli, args: list[str]) -> None:
    full = packet_id(cli)
    args = [full if a == "ID" else a for a in args]
    assert cli.ok(*args) == through_typer(cli, *args)


def test_show_prints_a_summary_and_the_stored_json(cli: Cli) -> None:
    full = packet_id(cli)
    text = cli.ok("show", full[:12], "--local")
    assert text.startswith(f"ID       {full}\n") and "\nNext step\n  " in text
    assert json.loads(cli.ok("show", full, "--local", "--json"))["id"] == full


def test_unusual_forms_still_reach_typer(cli: Cli) -> None:
    # help and mistakes are typer's to answer, with its usage line
    assert "Usage: ltm show" in cli.ok("show", "--help")
    result = cli.run("show", "--local")
    assert result.returncode == 2 and "Missing argument 'ID'" in result.stderr
    line = cli.fails("show", "01NOSUCHPACKET", "--local")
    assert "01NOSUCHPACKET" in line


@pytest.mark.parametrize("verb", sorted(__import__("ltm.cli.start.fast").cli.start.fast.FLAGS_OF))
def test_every_fast_option_is_its_typer_twins(verb: str) -> None:
    """Each option the fast path takes for a verb is declared by that verb's typer command,
    as a flag where the fast path reads a flag and with a value where it reads a value, under
    the same parameter name: the two parsers cannot drift apart."""
    import typer

    from ltm.cli.start import fast
    from ltm.cli.start.main import build

    group = typer.main.get_command(build([verb]))
    command = group.commands[verb]  # type: ignore[attr-defined]
    declared: dict[str, tuple[str | None, bool]] = {}
    for param in command.params:
        for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
            declared[opt] = (param.name, bool(getattr(param, "is_flag", False)))
    for flag in fast.FLAGS_OF[verb]:
        assert flag in declared and declared[flag][1], f"ltm {verb} {flag}: not a typer flag"
    for opt, name in fast.OPTIONS.items():
        if name in fast.VALUES_OF[verb]:
            assert declared.get(opt) == (name, False), (
                f"ltm {verb} {opt}: typer has {declared.get(opt)}"
            )


def test_ids_sharing_a_long_prefix_are_shown_apart_on_both_paths(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    example = json.loads(cli.ok("example"))
    twins = ["01JS5LTWINPREFIX00000000A1", "01JS5LTWINPREFIX00000000B2"]
    for pid in twins:
        cli.ok("save", "-", "--local", stdin=json.dumps({**example, "id": pid}))
    fast = cli.ok("ls", "--local")
    assert fast == through_typer(cli, "ls", "--local")
    assert {line.split()[0] for line in fast.splitlines()} == {pid[:25] for pid in twins}


# -- ltm save ------------------------------------------------------------------------

TOKEN = "ghp_" + "Zk3Qw8Rt5Yu2Io9Pa4Sd7Fg1Hj6Kl0Zx3Cv8"  # a made-up GitHub token
WRITTEN = {"id": "01JS5LTSAVEFASTPATH0000001", "created_at": "2026-04-22T00:00:00Z"}
SAVES: dict[str, tuple[dict[str, object], list[str]]] = {
    # name: (what changes in the example packet, the arguments after "save")
    "file": ({}, ["FILE"]),
    "stdin": ({}, ["-"]),
    "stdin by default": ({}, []),
    "content only": ({"id": None, "created_at": None}, ["FILE", "--local"]),
    "options after": ({}, ["FILE", "--local", "--lenient", "--allow-unredacted"]),
    "options before": ({}, ["--local", "--team=", "FILE"]),
    "a secret": ({"goal": f"use {TOKEN}"}, ["FILE"]),
    "a secret, let through": ({"goal": f"use {TOKEN}"}, ["FILE", "--allow-unredacted"]),
    "schema errors": ({"tags": ["Bad Tag"], "next_step": None}, ["FILE"]),
    "schema errors, lenient": ({"tags": ["Bad Tag"]}, ["FILE", "--lenient"]),
    "schema errors and a secret": ({"tags": ["Bad Tag"], "goal": TOKEN}, ["-"]),
    "a bad id": ({"id": "01JS5L/../../etc"}, ["FILE"]),
    "the user's own rule": ({"goal": "ship project-bluebird"}, ["FILE"]),
    "an unknown parent": ({"parent_id": "01JS5LNOSUCHPARENT00000001"}, ["FILE"]),
    "continues last": ({}, ["FILE", "--continues", "last"]),
    "continues an id": ({}, ["FILE", "--continues=01JS5LEARLIER0000000000001"]),
    "continues itself": ({}, ["FILE", "--continues", "01JS5LTSAVEFASTPATH0000001"]),
    "a team, no server": ({}, ["FILE", "-t", "core"]),
    "no such file": ({}, ["NOFILE"]),
    "not JSON": ({"goal": "{"}, ["GARBAGE"]),
    "two files": ({}, ["FILE", "FILE"]),
    "an unknown option": ({}, ["FILE", "--frobnicate"]),
}


def _home(root: Path, name: str) -> Cli:
    """A person with one earlier packet and a rule of their own (ltm sensitive add)."""
    cli = Cli(root / name)
    earlier = {**json.loads(cli.ok("example")), "id": "01JS5LEARLIER0000000000001"}
    cli.ok("save", "-", stdin=json.dumps({**earlier, "created_at": "2026-04-21T00:00:00Z"}))
    cli.ok("sensitive", "add", "codename", "project-bluebird")
    return cli


def _answer(cli: Cli, argv: list[str], stdin: bytes) -> tuple[int, str, str]:
    out = subprocess.run(argv, input=stdin, env=cli.env, capture_output=True, timeout=60)
    home = str(cli.home)
    return (
        out.returncode,
        out.stdout.decode().replace(home, "HOME"),
        out.stderr.decode().replace(home, "HOME"),
    )


@pytest.mark.parametrize("case", SAVES, ids=list(SAVES))
def test_fast_save_answers_as_typer_save(tmp_path: Path, case: str) -> None:
    """Fast and typer ``save``, each in a home of its own: the same exit code, the same
    lines, and (saved) the same stored bytes, for what saves and for what must not."""
    changes, args = SAVES[case]
    packet = {**json.loads(Cli(tmp_path / "x").ok("example")), **WRITTEN, **changes}
    body = json.dumps({k: v for k, v in packet.items() if v is not None}).encode()
    (tmp_path / "packet.json").write_bytes(body)
    (tmp_path / "garbage.json").write_bytes(body[:40])
    names = {"FILE": "packet.json", "NOFILE": "missing.json", "GARBAGE": "garbage.json"}
    argv = ["save", *(str(tmp_path / names[a]) if a in names else a for a in args)]
    fast, typer = _home(tmp_path, "fast"), _home(tmp_path, "typer")
    answers = [
        _answer(fast, [LTM, *argv], body),
        _answer(typer, [sys.executable, "-c", TYPER_ENTRY, *argv], body),
    ]
    listed = [json.loads(c.ok("ls", "--local", "--json"))["packets"] for c in (fast, typer)]
    if "id" in changes:  # minted: another id (and time) in each home
        minted = [rows[0]["id"] for rows in listed]
        answers = [
            (c, o.replace(i, "ID"), e.replace(i, "ID"))
            for (c, o, e), i in zip(answers, minted, strict=True)
        ]
        listed = [[{**rows[0], "id": "ID", "created_at": "T"}, *rows[1:]] for rows in listed]
    assert answers[0] == answers[1]
    code, out, err = answers[0]
    assert "Traceback" not in err
    assert len(listed[0]) == (2 if code == 0 else 1)
    assert listed[0] == listed[1]
    if code == 0 and "id" not in changes:
        assert out == f"{WRITTEN['id']}\n"
        stored = [c.ok("show", WRITTEN["id"], "--local", "--json") for c in (fast, typer)]
        assert stored[0] == stored[1]


def test_save_refusals_say_why_and_store_nothing(tmp_path: Path) -> None:
    cli = _home(tmp_path, "home")
    example = json.loads(cli.ok("example"))
    secret = cli.run("save", "-", stdin=json.dumps({**example, "goal": f"use {TOKEN}"}))
    assert secret.returncode == 1
    assert "redaction pre-flight blocked the packet (1 hit)" in secret.stderr
    assert "goal/github-token" in secret.stderr
    own = cli.run("save", "-", stdin=json.dumps({**example, "goal": "ship project-bluebird"}))
    assert own.returncode == 1 and "goal/codename" in own.stderr
    schema = cli.run("save", "-", stdin=json.dumps({**example, "tags": ["Bad Tag"]}))
    assert schema.returncode == 1
    assert "tags[0]: must match ^[a-z0-9][a-z0-9-]{0,31}$" in schema.stderr
    assert len(json.loads(cli.ok("ls", "--local", "--json"))["packets"]) == 1


def test_fast_save_imports_no_parser_when_it_refuses_a_secret(tmp_path: Path) -> None:
    """A refused packet is still answered on the fast path; only a schema error brings in
    pydantic (the models name what is wrong), and typer never comes."""
    cli = _home(tmp_path, "home")
    example = json.loads(cli.ok("example"))
    for changes, heavy in (({"goal": f"use {TOKEN}"}, set()), ({"tags": ["X"]}, {"pydantic"})):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", LTM, "save", "-"],
            input=json.dumps({**example, **changes}),
            env=cli.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1
        lines = out.stderr.splitlines()
        names = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in lines if "|" in line}
        assert names & {"typer", "click", "pydantic"} == heavy


def test_unusual_save_forms_still_reach_typer(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    assert "Usage: ltm save" in cli.ok("save", "--help")
    two = cli.run("save", "a.json", "b.json")
    assert two.returncode == 2 and "unexpected extra argument" in two.stderr


# -- ltm export and ltm import ---------------------------------------------------------

STAMP = re.compile(r'"exported_at":"[^"]*"')  # the one byte range two exports may differ in
EXPORTS: dict[str, tuple[int, list[str]]] = {
    # name: (the exit code, the arguments after "export")
    "to a file": (0, ["--local", "-o", "OUT"]),
    "to a file, the long option": (0, ["--output=OUT", "--local"]),
    "over an older bundle": (0, ["--local", "-o", "OLD"]),
    "to standard output": (0, ["--local"]),
    "no --local": (0, ["-o", "OUT"]),
    "every scope": (0, ["--all", "--local", "-o", "OUT"]),
    "a team, locally": (1, ["-t", "core", "--local", "-o", "OUT"]),
    "a team and --all": (2, ["--team", "core", "--all", "-o", "OUT"]),
    "a missing folder": (1, ["--local", "-o", "NODIR"]),
    "over an unreadable file": (2, ["--local", "-o", "LOCKED"]),
    "an extra argument": (2, ["--local", "extra"]),
    "an unknown option": (2, ["--local", "--json"]),
    "-o without a file": (2, ["--local", "-o"]),
}


def _fast_answer(cli: Cli, argv: list[str], stdin: bytes) -> tuple[tuple[int, str, str], bool]:
    """``_answer`` of ``ltm ARGV``, and whether typer came (``-X importtime``'s lines, which
    are taken out of what the command wrote)."""
    code, out, err = _answer(cli, [sys.executable, "-X", "importtime", LTM, *argv], stdin)
    timed = [line for line in err.splitlines() if line.startswith("import time:")]
    err = "".join(line for line in err.splitlines(True) if not line.startswith("import time:"))
    typer = any(line.rsplit("|", 1)[-1].strip() == "typer" for line in timed)
    return (code, out, err), typer


def _typers(err: str) -> bool:
    """Whether this is typer refusing a command line: its usage line, or its boxed error."""
    return "Usage: ltm " in err or "─ Error ─" in err


def _unstamped(text: str) -> str:
    """A bundle (or a command's output holding one) with its header's time taken out."""
    return STAMP.sub('"exported_at":"T"', text, count=1)


@pytest.mark.parametrize("case", EXPORTS, ids=list(EXPORTS))
def test_fast_export_answers_as_typer_export(tmp_path: Path, case: str) -> None:
    """Fast and typer ``export`` of one store (export only reads it), to the same place:
    the same exit code, the same lines, the same bundle (but for the time it was made)."""
    code, args = EXPORTS[case]
    cli = _home(tmp_path, "home")
    lenient = {**json.loads(cli.ok("example")), **WRITTEN, "tags": ["Bad Tag"]}
    cli.ok("save", "-", "--lenient", stdin=json.dumps(lenient))
    out = tmp_path / "bundle.jsonl"
    names = {"OUT": out, "OLD": out, "LOCKED": out, "NODIR": tmp_path / "no" / "b.jsonl"}
    argv = ["export"]
    for arg in args:
        for name, path in names.items():
            arg = arg.replace(name, str(path))
        argv.append(arg)
    to_file = any(name in arg for arg in args for name in ("OUT", "OLD"))
    results = []
    typer_came = False
    for fast in (True, False):
        out.unlink(missing_ok=True)
        if "OLD" in args or "LOCKED" in args:
            out.write_text("an older bundle\n")
        if "LOCKED" in args:
            out.chmod(0)
            if os.access(out, os.R_OK):
                pytest.skip("a file no one may read is read all the same (running as root)")
        if fast:
            (code_, out_text, err), typer_came = _fast_answer(cli, argv, b"")
        else:
            code_, out_text, err = _answer(cli, [sys.executable, "-c", TYPER_ENTRY, *argv], b"")
        answer = (code_, _unstamped(out_text), err)
        written = _unstamped(out.read_text()) if out.exists() else None
        mode = out.stat().st_mode & 0o777 if out.exists() else None
        results.append((answer, written, mode))
    assert results[0] == results[1]
    (got, out_text, err), written, mode = results[0]
    assert got == code and "Traceback" not in err
    assert typer_came == _typers(err)  # only what typer must answer
    if code == 0:
        bundle = written if to_file else out_text
        assert bundle is not None and len(bundle.splitlines()) == 3, bundle
        assert '"exported_at":"T"' in bundle.splitlines()[0]
        assert mode in (None, 0o600)


def _bundle(cli: Cli, kinds: list[str]) -> bytes:
    """A bundle of lines of these kinds, for a person made by ``_home``."""
    from ltm import bundle

    example = json.loads(cli.ok("example"))
    stored = json.loads(cli.ok("show", "01JS5LEARLIER0000000000001", "--local", "--json"))
    new = {**example, **WRITTEN}
    packets = {
        "same": (stored, None),
        "changed": ({**stored, "goal": "Another goal under a known id"}, None),
        "new": (new, None),
        "secret": ({**new, "goal": f"use {TOKEN}"}, None),
        "bad schema": ({**new, "tags": ["Bad Tag"]}, None),
        "own rule": ({**new, "goal": "ship project-bluebird"}, None),
        "team": (new, "core"),
    }
    text = "" if "no header" in kinds else bundle.header_line(source="local", exported_at="T")
    for kind in kinds:
        if kind == "broken":
            text += '{"id": "01JS5LBROKEN"\n'
        elif kind in packets:
            packet, team = packets[kind]
            body = json.dumps(packet).encode()
            text += bundle.entry_line(
                body=body, team=team, created_by="local", created_at=str(packet["created_at"])
            )
    return text.encode()


IMPORTS: dict[str, tuple[int, list[str], list[str]]] = {
    # name: (the exit code, the bundle's lines, the arguments after "import")
    "a bundle": (0, ["same", "new"], ["BUNDLE", "--local"]),
    "standard input": (0, ["same", "new"], ["-", "--local"]),
    "no --local": (0, ["new"], ["BUNDLE"]),
    "options before": (0, ["new"], ["--local", "--lenient", "BUNDLE"]),
    "a changed packet": (1, ["changed", "new"], ["BUNDLE", "--local"]),
    "a changed packet, replaced": (0, ["changed"], ["BUNDLE", "--replace"]),
    "a secret": (1, ["secret"], ["BUNDLE"]),
    "a secret, let through": (0, ["secret"], ["BUNDLE", "--allow-unredacted"]),
    "schema errors": (1, ["bad schema"], ["BUNDLE"]),
    "schema errors, lenient": (0, ["bad schema"], ["BUNDLE", "--lenient"]),
    "the user's own rule": (1, ["own rule"], ["BUNDLE"]),
    "a broken line": (1, ["new", "broken"], ["BUNDLE"]),
    "a team's line": (0, ["team"], ["BUNDLE", "--local"]),
    "into a team, no server": (1, ["new"], ["BUNDLE", "-t", "core"]),
    "into a team, inline": (1, ["new"], ["BUNDLE", "--team=core"]),
    "not a bundle": (1, ["no header", "new"], ["BUNDLE"]),
    "no such file": (1, [], ["NOFILE"]),
    "no file": (2, [], []),
    "two files": (2, ["new"], ["BUNDLE", "BUNDLE"]),
    "an unknown option": (2, ["new"], ["BUNDLE", "--frobnicate"]),
}


@pytest.mark.parametrize("case", IMPORTS, ids=list(IMPORTS))
def test_fast_import_answers_as_typer_import(tmp_path: Path, case: str) -> None:
    """Fast and typer ``import``, each into a home of its own: the same exit code, the
    same lines, and the same store after (its export, but for the time it was made)."""
    code, kinds, args = IMPORTS[case]
    fast, typer = _home(tmp_path, "fast"), _home(tmp_path, "typer")
    body = _bundle(fast, kinds)
    (tmp_path / "bundle.jsonl").write_bytes(body)
    names = {"BUNDLE": "bundle.jsonl", "NOFILE": "missing.jsonl"}
    argv = ["import", *(str(tmp_path / names[a]) if a in names else a for a in args)]
    fast_answer, typer_came = _fast_answer(fast, argv, body)
    answers = [fast_answer, _answer(typer, [sys.executable, "-c", TYPER_ENTRY, *argv], body)]
    assert answers[0] == answers[1]
    got, out, err = answers[0]
    assert got == code and "Traceback" not in err
    assert typer_came == _typers(err)  # only what typer must answer
    assert (code == 1) == ("refused" in out or err.startswith("ltm: ")), (out, err)
    stores = [_unstamped(c.ok("export", "--local")) for c in (fast, typer)]
    assert stores[0] == stores[1]
    added = sum(line.startswith("added ") for line in out.splitlines())
    assert len(stores[0].splitlines()) == 1 + 1 + added  # the header, the earlier packet


# What the process's exit handlers see of the collector, in the order they run: one
# registered before the entry point's runs after the entry point's own.
_EXIT_PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0, flush=True))
from ltm.cli.start.entry import main
print("frozen in the command:", gc.get_freeze_count() > 0, flush=True)
main(sys.argv[1:])
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["nonsense-verb"]])
def test_the_collector_is_left_out_of_the_exit_once_the_command_is_done(
    args: list[str], tmp_path: Path
) -> None:
    """Python's shutdown runs the garbage collector over every object, all of which die
    with the process: once the command is done (even one that fails), the entry point
    freezes them, after every other exit handler ran with a working collector."""
    env = {**os.environ, "LTM_DATA_DIR": str(tmp_path), "LTM_CONFIG_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", _EXIT_PROBE, *args], env=env, capture_output=True, text=True
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("frozen ")]
    assert lines == ["frozen in the command: False", "frozen at exit: True"], out
