"""The README's and the guides' promises, checked: the two commands, every `ltm ...` they
show, and every guide the README links to."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from timing import scaled

from ltm.cli.start.main import COMMANDS, GROUPS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDES = sorted((ROOT / "docs").glob("*.md"))
LTM = str(Path(sys.executable).with_name("ltm"))


def shell_blocks(text: str = README) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def ltm_lines() -> list[list[str]]:
    lines = []
    texts = [README, *(g.read_text(encoding="utf-8") for g in GUIDES)]
    for block in (b for text in texts for b in shell_blocks(text)):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("ltm "):
                lines.append(line.split()[1:])
    return lines


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    first = shell_blocks()[0].splitlines()
    assert [line.split()[:2] for line in first] == [["make", "demo"], ["make", "test"]]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_verb_shown_exists() -> None:
    shown = {args[0] for args in ltm_lines()}
    assert shown, "the README shows no ltm commands"
    unknown = shown - set(COMMANDS) - set(GROUPS)
    assert not unknown, f"README or a guide shows verbs the CLI lacks: {sorted(unknown)}"


@pytest.mark.parametrize(
    "group_command",
    sorted(
        {
            (a[0], a[1])
            for a in ltm_lines()
            if a[0] in GROUPS and len(a) > 1 and not a[1].startswith("-")
        }
    ),
)
def test_every_group_subcommand_shown_exists(group_command: tuple[str, str]) -> None:
    group, sub = group_command
    result = subprocess.run([LTM, group, sub, "--help"], capture_output=True, timeout=scaled(60))
    assert result.returncode == 0, result.stderr.decode()


def test_every_guide_is_reachable_from_the_readme_and_every_link_resolves() -> None:
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", README))
    assert {f"docs/{g.name}" for g in GUIDES} <= linked, "a guide the README does not link"
    for text_path in [ROOT / "README.md", *GUIDES]:
        text = text_path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+?)(?:#[^)]*)?\)", text):
            assert (text_path.parent / target).exists(), f"{text_path.name} links {target}"


@pytest.mark.parametrize("doc", [ROOT / "README.md", *GUIDES], ids=lambda p: p.name)
def test_every_code_block_closes_on_a_line_of_its_own(doc: Path) -> None:
    """A closing fence with text after it is no fence: the block runs on into the prose and
    swallows it, and the next block's fences pair the wrong way round."""
    open_at = 0
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if not line.lstrip().startswith("```"):
            continue
        if open_at:
            assert line.strip() == "```", f"{doc.name}:{number} closes a block with text after it"
            open_at = 0
        else:
            open_at = number
    assert not open_at, f"{doc.name}:{open_at} opens a block that never closes"


# Named in a guide but not in the repository, on purpose.
NOT_IN_THE_TREE = {
    "chalicelib/stage_settings.json",  # written by infra/chalice_env.py; git ignores it
    "cli/commands/VERB.py",  # a placeholder for any verb's file
}


def test_every_file_a_guide_names_exists() -> None:
    named = {
        path
        for text in [README, *(g.read_text(encoding="utf-8") for g in GUIDES)]
        for path in re.findall(
            r"`(?:\.venv/bin/python )?((?:infra|bench|chalicelib|cli|tests|spec|plugin)/[^`\s]+)",
            text,
        )
    }
    assert named, "no guide names a file of the repository"
    missing = sorted(p for p in named - NOT_IN_THE_TREE if not (ROOT / p).exists())
    assert not missing, f"guides name files the repository lacks: {missing}"


def test_every_module_a_guide_runs_exists() -> None:
    import importlib.util

    texts = [README, *(g.read_text(encoding="utf-8") for g in GUIDES)]
    modules = {m for text in texts for m in re.findall(r"python -m (ltm[\w.]*)", text)}
    assert modules
    assert all(importlib.util.find_spec(m) for m in modules), modules


def test_the_hook_events_the_guides_name_are_the_ones_installed(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LTM_CONFIG_DIR": str(tmp_path / "c")}
    env["LTM_DATA_DIR"] = str(tmp_path / "d")
    printed = subprocess.run(
        [LTM, "hooks", "install", "claude-code"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=scaled(60),
        check=True,
    ).stdout
    installed = set(json.loads(printed)["hooks"])
    texts = [README, *(g.read_text(encoding="utf-8") for g in GUIDES)]
    said = re.findall(
        r"ltm hooks install claude-code --write +# [^:\n]+: ([A-Za-z, ]+)", "\n".join(texts)
    )
    assert said, "no guide names the events ltm hooks install writes"
    for events in said:
        assert set(events.replace(" ", "").split(",")) == installed, events


# A file, then the section of it in quotes: `BENCHMARKS.md, "Benchmark a server"`,
# `[backup.md](backup.md), "The server's database"`, `BENCHMARKS.md ("A" and "B")`.
SECTION_REF = re.compile(
    r"(README|[\w-]+\.md)(?:\]\([^)]*\))?`?,?\s+\(?\"([^\"]+)\"(?:\s+and\s+\"([^\"]+)\")?"
)


def _sections(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return re.findall(r"^#+ (.+)$", text, re.M) + re.findall(r"\*\*([^*]+)\*\*", text)


def test_every_section_a_guide_quotes_exists() -> None:
    found = 0
    for doc in [ROOT / "README.md", *GUIDES]:
        for name, *titles in SECTION_REF.findall(doc.read_text(encoding="utf-8")):
            target = ROOT / "README.md" if name == "README" else ROOT / name
            if not target.exists():
                target = ROOT / "docs" / name
            headings = [h.replace("`", "") for h in _sections(target)]
            for title in (" ".join(t.split()) for t in titles if t):
                found += 1
                assert any(h.startswith(title) for h in headings), f"{doc.name}: {name}, {title!r}"
    assert found, "no guide quotes a section"


def test_every_variable_a_guide_names_is_read_by_the_code() -> None:
    texts = [README, *(g.read_text(encoding="utf-8") for g in GUIDES)]
    named = {v for text in texts for v in re.findall(r"\bLTM_[A-Z0-9_]*[A-Z0-9]\b", text)}
    code = "\n".join(
        p.read_text(encoding="utf-8")
        for folder in ("chalicelib", "cli", "infra")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in {".py", ".yaml"}
    )
    code += (ROOT / "app.py").read_text(encoding="utf-8")
    code += (ROOT / "tests" / "timing.py").read_text(encoding="utf-8")  # LTM_TEST_TIME_SCALE
    assert named, "no guide names an LTM_ variable"
    assert not sorted(v for v in named if v not in code), "guides name variables no code reads"


def _options_of(args: list[str]) -> tuple[str, set[str]]:
    """The command ``ltm ARGS`` runs (a verb, or a group's subcommand) and every option it takes."""
    from ltm.cli.start.main import build

    root = build(args)
    taken = {o for p in root.params for o in p.opts + p.secondary_opts}
    command, name = root.commands[args[0]], args[0]
    if args[0] in GROUPS and len(args) > 1 and args[1] in getattr(command, "commands", {}):
        taken |= {o for p in command.params for o in p.opts + p.secondary_opts}
        command, name = command.commands[args[1]], f"{args[0]} {args[1]}"
    return name, taken | {o for p in command.params for o in p.opts + p.secondary_opts}


def _inline_commands() -> list[list[str]]:
    """Every `ltm VERB ...` in the guides' prose, after the options any verb takes."""
    texts = [README, *(g.read_text(encoding="utf-8") for g in GUIDES)]
    found = []
    for span in {
        s for text in texts for s in re.findall(r"`ltm ([^`]+)`", text.replace("\n", " "))
    }:
        args = span.split("|", 1)[0].split()  # `ltm ls | head -1`: head's options are not ltm's
        while args and args[0] in ("-H", "--host", "--local", "--debug"):
            args = args[2:] if args[0] in ("-H", "--host") else args[1:]
        if args and (args[0] in COMMANDS or args[0] in GROUPS):
            found.append(args)
    return found


def test_every_option_shown_exists() -> None:
    """`ltm ls --tag infra --since 7d`: each option a guide shows is one its verb takes."""
    unknown = []
    for args in ltm_lines() + _inline_commands():
        name, taken = _options_of(args)
        shown = {a.split("=", 1)[0] for a in args if a.startswith("-") and a != "-"}
        unknown += [f"ltm {name} {o}" for o in sorted(shown - taken)]
    assert not unknown, f"guides show options the CLI lacks: {unknown}"


def test_a_chalice_deploy_shown_names_the_tables_stream() -> None:
    """app.py subscribes the index to ``LTM_DYNAMODB_STREAM_ARN``, read when chalice deploy
    imports it; unset, the mapping names a placeholder stream no account has."""
    texts = [README, *(g.read_text(encoding="utf-8") for g in GUIDES)]
    blocks = [b for text in texts for b in shell_blocks(text) if "chalice deploy" in b]
    assert blocks, "no guide shows chalice deploy"
    placeholder = re.search(
        r'"LTM_DYNAMODB_STREAM_ARN",\s*"([^"]+)"', (ROOT / "app.py").read_text()
    )
    assert placeholder and ":000000000000:" in placeholder[1]
    for block in blocks:
        before = block[: block.index("chalice deploy")]
        assert "LTM_DYNAMODB_STREAM_ARN=" in before, block
