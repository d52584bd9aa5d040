"""The one argument parser: every verb through typer, cheap to start, plain to read.

The real ``ltm`` runs in subprocesses (and on a pseudo-terminal where colour is the
question); the help of every verb is built in-process, as the console script builds it.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import LTM, Cli
from timing import scaled

from ltm.cli.start.main import COMMANDS, GROUPS, SECTIONS, build, run

RAW_TYPE = re.compile(r"<(bool|str|int|float|path|list\[[^\]]*\]|[a-z]+ range)>|\blist\[str\]")
# What typer would bring in to coerce and draw, and what a plain verb never needs.
HEAVY = {"pydantic", "pydantic_core", "rich", "typer.rich_utils"}


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path)
    assert cli.ok("save", "-", "--local", stdin=cli.ok("example")).strip()
    return cli


def packet_id(cli: Cli) -> str:
    return str(json.loads(cli.ok("ls", "--local", "--json"))["packets"][0]["id"])


def _help(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    run([*args, "--help"])
    return capsys.readouterr().out


def _every_command() -> list[list[str]]:
    found: list[list[str]] = [[]]
    found += [[verb] for verb in COMMANDS]
    for group in GROUPS:
        found.append([group])
        found += [[group, sub] for sub in build([group]).commands[group].commands]
    return found


@pytest.mark.parametrize("args", _every_command(), ids=lambda a: " ".join(a) or "ltm")
def test_help_shows_no_raw_type_names(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(args, capsys)
    assert not RAW_TYPE.search(text), RAW_TYPE.search(text)
    assert text.startswith("Usage: ltm")


@pytest.mark.parametrize("args", _every_command(), ids=lambda a: " ".join(a) or "ltm")
def test_help_shows_no_docstring_markup(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A verb's docstring is its help: reST's ``double backquotes`` reach the user as is."""
    assert "``" not in _help(args, capsys)


def test_options_with_values_show_what_goes_there(capsys: pytest.CaptureFixture[str]) -> None:
    assert re.search(r"-n, --limit N\s+How many, at most.\s+\[default: 50; 1<=x<=1000\]",
                     _help(["ls"], capsys))  # fmt: skip
    assert re.search(r"-t, --team TEAM", _help(["ls"], capsys))
    assert re.search(r"-H, --host URL", _help([], capsys))
    assert re.search(r"--display NAME", _help(["join"], capsys))
    assert re.search(r"--json\s+One JSON", _help(["validate"], capsys))  # a flag: nothing between


@pytest.mark.parametrize(
    ("verb", "name", "words"),
    [
        (["mcp", "install"], "CLIENT", "claude-code, cursor, vscode, zed, claude-desktop, codex,"
         " gemini, copilot"),
        (["hooks", "install"], "HARNESS", "claude-code, codex, cursor, copilot, gemini"),
    ],
)  # fmt: skip
def test_an_argument_of_a_few_words_names_them(
    cli: Cli, verb: list[str], name: str, words: str
) -> None:
    """The help lists the clients and harnesses, and a word not among them is refused in
    the house's words: the help named none, and the refusal began "Value error, " (the
    coercion's own message)."""
    helped = " ".join(cli.ok(*verb, "--help").split())
    assert f"{name} The " in helped and f"configure: {words}. [required]" in helped
    assert cli.fails(*verb, "nosuch", code=2) == (
        f"ltm: Invalid value for '{name}': 'nosuch' is not one of {words}"
        f" (see: ltm {' '.join(verb)} --help)"
    )


def test_top_level_help_lists_every_verb_in_its_section(cli: Cli) -> None:
    text = cli.ok("--help")
    titles = [title for title, _ in SECTIONS]
    assert re.findall(r"^(\S[^\n:]*):$", text, re.M) == ["Options", *titles]
    assert "Other commands" not in text  # every verb has its section
    placed = [verb for _, verbs in SECTIONS for verb in verbs]
    assert sorted(placed) == sorted([*COMMANDS, *GROUPS])
    listed = re.findall(r"^  ([a-z]+)  ", text, re.M)
    assert listed == placed  # in the sections' order
    flowing = " ".join(text.split())  # one description each, wrapped, never cut short
    assert "the reference CLI, which shares config.toml. sensitive" in flowing
    assert cli.ok("-h") == text
    bare = cli.run()
    assert bare.returncode == 2 and bare.stdout == text


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["example"],
        ["ls", "--local"],
        ["ls", "--local", "-n", "5", "--tag", "docs", "--json"],
        ["resume", "ID", "--local"],
        ["show", "ID", "--local"],
        ["search", "readme", "words", "--local", "-n", "3"],
        ["log", "ID", "--local"],
        ["save", "FILE", "--local"],
    ],
)
def test_plain_verbs_load_no_pydantic_and_no_rich(
    cli: Cli, args: list[str], tmp_path: Path
) -> None:
    (tmp_path / "packet.json").write_text(cli.ok("example"))
    full = packet_id(cli)
    args = [full if a == "ID" else str(tmp_path / "packet.json") if a == "FILE" else a
            for a in args]  # fmt: skip
    loaded = cli.imports(*args)
    assert "typer" in loaded  # one parser for every verb
    assert not loaded & HEAVY, loaded & HEAVY


def test_only_the_verb_run_is_built() -> None:
    assert build(["--version"]).commands == {}  # answered before any verb is looked at
    assert set(build(["ls", "--local"]).commands) == {"ls"}
    assert set(build(["-H", "http://x", "teams", "ls"]).commands) == {"teams"}
    assert set(build(["--help"]).commands) == {*COMMANDS, *GROUPS}  # a line of help each
    assert set(build(["lss"]).commands) == {*COMMANDS, *GROUPS}  # "did you mean ls?"


def test_the_coercion_shim_still_fits_typer() -> None:
    """``ltm.cli.start.coercion`` replaces typer's lazy coercion for plain options; the
    names it leans on are still typer's, and its values are what the verbs expect."""
    from typer import _coercion, core

    assert callable(core._TyperParameter.get_runtime_param)
    assert _coercion.RuntimeParam.__abstractmethods__ == {"_coerce_value"}
    from typer._click import Context

    from ltm.cli.start.coercion import install

    install()
    command = build(["search"]).commands["search"]
    ctx = Context(command)
    params = {param.name: param for param in command.params}
    assert params["query"].process_value(ctx, ("a", "b")) == ["a", "b"]
    assert params["limit"].process_value(ctx, "7") == 7
    assert params["all_scopes"].process_value(ctx, True) is True
    assert params["team"].process_value(ctx, None) is None
    assert type(params["limit"].get_runtime_param()).__name__ == "PlainRuntimeParam"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["lss"], "No such command 'lss'. Did you mean 'ls'? (see: ltm --help)"),
        (["ls", "--jsn"], "No such option: --jsn"),
        (["ls", "-n", "0"], "'--limit' / '-n': 0 is below the least allowed, 1"),
        (["ls", "-n", "many"], "'many' is not a whole number (see: ltm ls --help)"),
        (["search"], "Missing argument 'QUERY'. (see: ltm search --help)"),
        (["save", "a.json", "b.json"], "unexpected extra argument(s) (b.json)"),
        (["teams", "nope"], "No such command 'nope'. (see: ltm teams --help)"),
        (["--local", "teams", "ls"], "ltm teams has no local store to use"),
    ],
)
def test_a_usage_error_is_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    out = Cli(tmp_path).run(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("ltm: ") and out.stderr.count("\n") == 1, out.stderr
    assert said in out.stderr


def test_local_before_the_verb_is_the_verbs_own(cli: Cli) -> None:
    # A server is set that nothing answers: --local, before or after the verb, never asks it.
    cli.env["LTM_HOST"] = "http://127.0.0.1:9"
    assert "not signed in" in cli.fails("ls")
    assert cli.ok("--local", "ls") == cli.ok("ls", "--local")
    assert packet_id(cli)[:8] in cli.ok("--local", "ls")
    assert cli.ok("--local", "show", packet_id(cli), "--json") == cli.ok(
        "show", packet_id(cli), "--local", "--json"
    )


def test_ids_sharing_a_long_prefix_are_shown_apart(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    example = json.loads(cli.ok("example"))
    twins = ["01JS5LTWINPREFIX00000000A1", "01JS5LTWINPREFIX00000000B2"]
    for pid in twins:
        cli.ok("save", "-", "--local", stdin=json.dumps({**example, "id": pid}))
    listed = cli.ok("ls", "--local")
    assert {line.split()[0] for line in listed.splitlines()} == {pid[:25] for pid in twins}


def test_an_ambiguous_prefix_names_the_candidates(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    example = json.loads(cli.ok("example"))
    ids = [f"01JS5LAMBIGUOUS000000000{n:02d}" for n in range(7)]
    for pid in ids:
        cli.ok("save", "-", "--local", stdin=json.dumps({**example, "id": pid}))
    refused = cli.fails("show", "01JS5LAMB", "--local")
    assert "'01JS5LAMB' matches more than one packet" in refused
    assert ", ".join(ids[:5]) + ", … — give more of the id" in refused


def _on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """What ``ltm ARGS`` writes to a terminal (a pseudo-terminal as its stdin and stdout)."""
    main, side = pty.openpty()
    try:
        proc = subprocess.Popen(
            [LTM, *args], stdin=side, stdout=side, stderr=subprocess.PIPE, env=env
        )
        os.close(side)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal is gone: the command is done
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=scaled(60)) == 0
    finally:
        os.close(main)
    return b"".join(chunks)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_no_color_and_a_dumb_terminal_get_no_bold(cli: Cli) -> None:
    env = {k: v for k, v in cli.env.items() if k not in ("NO_COLOR", "TERM")}
    bold = b"\x1b[1m"
    assert bold in _on_a_terminal(["--help"], {**env, "TERM": "xterm"})
    assert bold not in _on_a_terminal(["--help"], {**env, "TERM": "xterm", "NO_COLOR": "1"})
    assert bold not in _on_a_terminal(["--help"], {**env, "TERM": "dumb"})
    found = ["search", "readme", "--local"]  # the match is marked in bold on a terminal
    assert bold in _on_a_terminal(found, {**env, "TERM": "xterm"})
    assert bold not in _on_a_terminal(found, {**env, "TERM": "dumb"})
    assert bold not in _on_a_terminal(found, {**env, "TERM": "xterm", "NO_COLOR": "1"})
    # A dumb terminal cannot draw the picker: resume prints the newest packet's block.
    block = _on_a_terminal(["resume", "--local", "--no-copy"], {**env, "TERM": "dumb"})
    assert b"# Resume context" in block and b"Resume which packet?" not in block, block[:300]


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


def _reader_gone(cli: Cli, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    """``ltm ARGS`` writing to a pipe whose reader already went away (``| head -1`` done)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [LTM, *args],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=cli.env,
            timeout=scaled(60),
        )
    finally:
        os.close(write_end)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pipe")
@pytest.mark.parametrize(
    "args",
    [
        ["ls", "--local"],  # printed line by line
        ["example"],  # written at once and flushed
        ["export", "--local", "-o", "-"],  # a bundle, streamed
        ["--help"],  # printed while the arguments are parsed, before any verb
        ["teams", "--help"],
        ["resume", "--local", "--no-copy"],  # buffered until the process ends
    ],
    ids=" ".join,
)
def test_a_reader_gone_is_no_error(cli: Cli, args: list[str]) -> None:
    """``ltm ls | head -1``: the reader had what it wanted. Nothing on stderr and exit 0,
    whether the pipe broke while typer parsed, while the verb ran or at the final flush
    (typer made each an exit 1: a script under ``set -o pipefail`` failed at random)."""
    result = _reader_gone(cli, args)
    assert (result.returncode, result.stderr) == (0, b"")


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pipe")
def test_a_reader_gone_leaves_a_verdict_as_it_is(cli: Cli, tmp_path: Path) -> None:
    """``ltm validate *.json | head -1`` under ``set -o pipefail``: a verb whose exit
    status is its verdict runs to the end and exits with it, never with the 0 of a
    reader gone (an invalid packet read as a pass); nothing is said of the pipe."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"ltm_version": "0.2", "goal": ""}')
    good = tmp_path / "good.json"
    good.write_bytes(subprocess.run([LTM, "example"], capture_output=True, env=cli.env).stdout)
    for args in (["validate", str(bad), str(good)], ["validate", str(good), str(bad)]):
        for shape in ([], ["--json"]):
            result = _reader_gone(cli, [*args, *shape])
            assert (result.returncode, result.stderr) == (1, b""), (args, shape, result)
    assert _reader_gone(cli, ["validate", str(good)]).returncode == 0
    # doctor: the same verdict through a closed pipe as to a reader
    data = Path(cli.env["LTM_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    (data / "ltm.db").write_text("not a database")
    told = subprocess.run([LTM, "doctor"], capture_output=True, env=cli.env, timeout=scaled(60))
    assert told.returncode == 1, told
    assert _reader_gone(cli, ["doctor"]).returncode == 1


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX descriptors")
@pytest.mark.parametrize(
    ("closed", "args", "status", "said"),
    [
        (0, ["save", "-", "--local"], 1, "standard input is not a valid packet"),
        (0, ["validate", "-"], 1, "packet: empty (no JSON at all)"),
        (1, ["example"], 0, ""),
        (1, ["export", "--local", "-o", "-"], 0, "exported 1 packet"),
        (2, ["save", "no-such-file", "--local"], 1, ""),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_a_closed_standard_stream_reads_empty_and_writes_nowhere(
    cli: Cli, closed: int, args: list[str], status: int, said: str
) -> None:
    """A stream its caller closed (``ltm save - <&-``) reads as empty and swallows what is
    written to it: it was an "unexpected error: AttributeError", and a closed stderr's
    error line went to stdout, into the next program of a pipe."""
    result = subprocess.run(
        [LTM, *args],
        input=b"",
        capture_output=True,
        env=cli.env,
        timeout=scaled(60),
        preexec_fn=lambda: os.close(closed),
    )
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == status, err
    assert "unexpected error" not in err + out and "Traceback" not in err + out
    assert said in err + out
    if closed == 2:
        assert out == ""  # the error line is not written into the pipe
    if closed == 1:
        assert err.count("\n") <= 1, err
