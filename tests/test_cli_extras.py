"""A verb that needs a pip extra says which one, in one line, before doing anything.

``ltm server ...`` after a plain ``pip install ltm`` (no ``[server]``) used to end in
``unexpected error: ModuleNotFoundError: waitress``. Here the missing module is
simulated in a real subprocess: ``sys.modules[name] = None`` makes ``import name``
fail exactly as an absent package does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clikit import base_env
from timing import scaled

from ltm.cli.start import entry
from ltm.cli.start.extras import extra_for, missing

SERVER_VERBS = [
    ["init"],
    ["run", "--addr", "127.0.0.1:0"],
    ["issue-token", "someone"],
    ["tokens"],
    ["revoke-token", "x"],
]


def ltm_without(
    modules: list[str], args: list[str], home: Path
) -> subprocess.CompletedProcess[str]:
    shim = (
        "import sys\n"
        f"for name in {modules!r}: sys.modules[name] = None\n"
        "from ltm.cli.start.entry import main\n"
        "main(sys.argv[1:])\n"
    )
    return subprocess.run(
        [sys.executable, "-c", shim, *args],
        env=base_env(home),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


@pytest.mark.parametrize("module", ["waitress", "chalice"])
def test_ltm_ui_names_the_extra_first(module: str, tmp_path: Path) -> None:
    result = ltm_without([module], ["ui", "--no-browser"], tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"ltm: ltm ui needs the server extra (missing: {module});"
        " install it with: pip install 'ltm[server]'\n"
    )


@pytest.mark.parametrize("module", ["waitress", "chalice", "jwt"])
@pytest.mark.parametrize("verb", SERVER_VERBS, ids=lambda v: v[0])
def test_server_verbs_name_the_extra_first(module: str, verb: list[str], tmp_path: Path) -> None:
    db = tmp_path / "server.db"
    result = ltm_without([module], ["server", *verb, "--db", str(db)], tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"ltm: ltm server {verb[0]} needs the server extra (missing: {module});"
        " install it with: pip install 'ltm[server]'\n"
    )
    assert not db.exists()  # nothing done: no database for a server that cannot run


def test_help_and_other_verbs_need_no_extra(tmp_path: Path) -> None:
    result = ltm_without(["waitress", "chalice"], ["server", "init", "--help"], tmp_path)
    assert result.returncode == 0 and "Create the database" in result.stdout
    result = ltm_without(["waitress", "chalice", "boto3"], ["example"], tmp_path)
    assert result.returncode == 0 and '"ltm_version"' in result.stdout


def test_an_undeclared_path_still_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(argv: list[str]) -> bool:
        raise ModuleNotFoundError("No module named 'waitress.server'", name="waitress.server")

    monkeypatch.setattr(entry, "_machine_entry", broken)
    with pytest.raises(SystemExit) as exited:
        entry.main(["ls"])
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "ltm: this needs the server extra; install it with: pip install 'ltm[server]'\n"
    )


def test_the_extras_match_pyproject() -> None:
    assert missing("server") == []  # the dev install has them all
    assert extra_for("jwt.algorithms") == "server" and extra_for("boto3") == "aws"
    assert extra_for("json") is None and extra_for(None) is None
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    for dist in ("waitress", "chalice", "aws-lambda-powertools", "pyjwt[crypto]", "boto3"):
        assert f'"{dist}' in pyproject
