"""The wheel, installed as a user installs it (``pip install ltm[server]``), runs.

Every other suite runs on the editable install, which imports straight from the
checkout: a module the build leaves out of the wheel is invisible there. Here
the wheel is built from a clean copy of the sources (an old ``build/`` folder in
the checkout would lend the wheel files the build no longer puts in it),
installed with its ``server`` extra into a fresh venv, and run from outside the
checkout: every verb's ``--help``, a save and a resume on the embedded store,
and ``ltm conformance`` against that venv's own ``ltm server run``; then the
``semantic`` extra is added, as a user adds it later, and search by meaning runs with
every connection refused. The venv is
made once for the module; its dependencies come from the package index (pip's
cache makes that quick after the first run).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from clikit import base_env
from serverkit import run_server
from timing import scaled

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# Never copied into the build: the checkout's own environments, caches and build output.
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", "dist", "*.egg-info", "node_modules", "__pycache__",
    ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis", "tests", "bench",
)  # fmt: skip
# (folder in the checkout, package it installs as): the mapping of pyproject.toml's package-dir.
PACKAGE_DIRS = (("chalicelib", "ltm"), ("cli", "ltm/cli"))
# A name in the Commands list of a help screen, boxed (rich) or plain (click).
COMMAND_ROW = re.compile(r"^(?:│ |  )([a-z][a-z0-9-]*)(?:\s{2,}|\s*│?$)", re.MULTILINE)


@dataclass
class Installed:
    wheel: Path
    venv: Path
    home: Path  # the cwd of every command: outside the checkout, so nothing imports from it

    @property
    def ltm(self) -> str:
        return str(self.venv / "bin" / "ltm")

    def env(self, **extra: str) -> dict[str, str]:
        env = base_env(self.home, COLUMNS="200", **extra)
        for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
            env.pop(name, None)
        return env

    def run(
        self, *args: str, stdin: str = "", timeout: float = scaled(120), **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.ltm, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env(**env),
            cwd=self.home,
            timeout=timeout,
        )


def _pip(*args: str, timeout: float) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"pip {' '.join(args)}:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("wheel")
    source, dist, venv, home = work / "src", work / "dist", work / "venv", work / "home"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    _pip(
        "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(source), timeout=scaled(600)
    )
    (wheel,) = dist.glob("ltm-*.whl")
    # No pip of its own in the venv: this process's pip installs into it (pip --python).
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=scaled(120)
    )
    python = str(venv / "bin" / "python")
    _pip("--python", python, "install", "--quiet", f"{wheel}[server]", timeout=scaled(900))
    home.mkdir()
    yield Installed(wheel=wheel, venv=venv, home=home)


def test_the_wheel_carries_every_module_and_the_data_files(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as whl:
        names = set(whl.namelist())
    stem = "-".join(installed.wheel.name.split("-")[:2])  # ltm-VERSION
    expected = {f"{stem}.data/data/share/ltm/app.py"}  # what `ltm server run` serves
    for folder, package in PACKAGE_DIRS:
        for file in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in file.parts:
                expected.add(f"{package}/{file.relative_to(ROOT / folder).as_posix()}")
    expected |= {"ltm/example.json", "ltm/web/static/app.js", "ltm/web/static/app.css"}
    assert sorted(expected - names) == []
    # Nothing but ltm itself lands in site-packages: no top-level `cli`, `chalicelib` or tests.
    assert {name.split("/")[0] for name in names} == {
        "ltm",
        f"{stem}.dist-info",
        f"{stem}.data",
    }


def _commands(help_text: str) -> list[str]:
    """The verbs a help screen lists: the rows of every section but the options and
    arguments (``ltm --help`` groups its verbs under headings, a group's under Commands)."""
    sections = re.split(r"^(\S[^\n]*):$", help_text, flags=re.MULTILINE)
    return [
        verb
        for heading, body in zip(sections[1::2], sections[2::2], strict=True)
        if heading not in ("Options", "Arguments")
        for verb in COMMAND_ROW.findall(body)
    ]


def test_every_verb_answers_its_help(installed: Installed) -> None:
    top = installed.run("--help")
    assert top.returncode == 0, top.stderr
    verbs = _commands(top.stdout)
    assert {"save", "resume", "conformance", "server", "mcp", "hooks"} <= set(verbs), top.stdout
    seen: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}
    todo = [(verb,) for verb in verbs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        while todo:
            done = list(pool.map(lambda path: installed.run(*path, "--help"), todo))
            seen.update(zip(todo, done, strict=True))
            todo = [
                (*path, sub)
                for path, r in zip(todo, done, strict=True)
                for sub in _commands(r.stdout)
            ]
    broken = [
        f"ltm {' '.join(path)} --help: exit {r.returncode}\n{r.stderr}"
        for path, r in seen.items()
        if r.returncode != 0 or f"Usage: ltm {' '.join(path)}" not in r.stdout
    ]
    assert broken == []
    assert ("server", "run") in seen and ("teams",) in seen


def test_save_and_resume_on_the_embedded_store(installed: Installed) -> None:
    example = installed.run("example")
    assert example.returncode == 0, example.stderr
    saved = installed.run("save", "-", stdin=example.stdout)
    assert saved.returncode == 0, saved.stderr
    packet_id = saved.stdout.strip()
    listed = installed.run("ls")
    assert listed.returncode == 0 and packet_id[:12] in listed.stdout, listed.stderr
    resumed = installed.run("resume", packet_id)
    assert resumed.returncode == 0, resumed.stderr
    assert "# Resume context" in resumed.stdout
    assert (installed.home / "data").is_dir()  # the store is the one LTM_DATA_DIR names


def test_conformance_passes_against_the_installed_server(installed: Installed) -> None:
    db = installed.home / "server" / "ltm.db"
    db.parent.mkdir()
    init = installed.run("server", "init", "--db", str(db))
    assert init.returncode == 0, init.stderr
    root_token = init.stdout.strip()
    command = [installed.ltm, "server", "run", "--db", str(db)]
    server = run_server(
        db, db.with_suffix(".log"), root_token, command=command, env=installed.env()
    )
    try:
        result = installed.run(
            "conformance",
            server.url,
            "--json",
            LTM_CONFORMANCE_TOKEN=root_token,
            timeout=scaled(300),
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["failed"] == 0 and report["passed"] >= 40


# Run first by every ``ltm`` of the test below (sitecustomize, on PYTHONPATH): any
# connection is refused, so what works works with no network.
NO_NETWORK = """
import socket

def _refuse(*args, **kwargs):
    raise OSError("no network in this test")

socket.socket.connect = _refuse
socket.create_connection = _refuse
"""


def test_the_semantic_extra_added_later_finds_by_meaning_with_no_network(
    installed: Installed,
) -> None:
    """A user who adds ``ltm[semantic]`` to an install (pip install 'ltm[semantic]'):
    before, a search by meaning names the extra; after, the packets saved before it are
    found by meaning, the model read from the installed wordllama, nothing downloaded."""
    offline = installed.home / "offline"
    offline.mkdir()
    (offline / "sitecustomize.py").write_text(NO_NETWORK)
    env = installed.env(
        LTM_DATA_DIR=str(installed.home / "meaning-data"),
        LTM_CACHE_DIR=str(installed.home / "meaning-cache"),
    )
    env["PYTHONPATH"] = str(offline)

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [installed.ltm, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=installed.home,
            timeout=scaled(120),
        )

    ids = []
    for goal in (
        "Fix Postgres connection pool exhaustion under peak load",
        "Translate the storefront into German and French",
    ):
        saved = run("save", "-", stdin=json.dumps({"goal": goal, "next_step": "go on"}))
        assert saved.returncode == 0, saved.stderr
        ids.append(saved.stdout.strip())
    before = run("search", "database runs out of sockets", "--semantic")
    assert before.returncode == 1 and "pip install 'ltm[semantic]'" in before.stderr
    assert run("search", "postgres").stdout.startswith(ids[0][:12])  # the words, always
    python = str(installed.venv / "bin" / "python")
    _pip(
        "--python",
        python,
        "install",
        "--quiet",
        f"{installed.wheel}[semantic]",
        timeout=scaled(900),
    )
    after = run("search", "database runs out of sockets", "--semantic", "--json")
    assert after.returncode == 0, after.stderr
    assert "working out what each packet means (once): 2/2" in after.stderr
    assert [hit["id"] for hit in json.loads(after.stdout)["results"]][:1] == [ids[0]]
