"""Where ltm keeps its data and state: the Linux rule spelled out in ``ltm.cli.config``
(to keep platformdirs out of every hook's start-up) must name exactly the folders
platformdirs names, or a user's store would move under them.

Each case runs in a fresh interpreter, so platformdirs reads the case's environment
and nothing is cached between cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip(
        "the spelled-out rule is Linux's; elsewhere platformdirs answers", allow_module_level=True
    )

PROBE = """
import json, platformdirs
from ltm.cli import config
print(json.dumps({
    "ours": [str(config.data_dir()), str(config.state_dir())],
    "platformdirs": [
        platformdirs.user_data_dir("ltm", appauthor=False),
        platformdirs.user_state_dir("ltm", appauthor=False),
    ],
}))
"""


def answers(env: dict[str, str], cwd: Path) -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def base_env(home: str | None) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("LTM_", "XDG_")) and k != "HOME"
    }
    if home is not None:
        env["HOME"] = home
    return env


@pytest.mark.parametrize(
    "xdg",
    [
        {},
        {"XDG_DATA_HOME": "/srv/xdg/data", "XDG_STATE_HOME": "/srv/xdg/state"},
        {"XDG_DATA_HOME": "relative/data", "XDG_STATE_HOME": "relative/state"},  # ignored
        {"XDG_DATA_HOME": "", "XDG_STATE_HOME": ""},
        {"XDG_DATA_HOME": "/srv/only-data"},
    ],
    ids=["defaults", "absolute", "relative", "empty", "one-set"],
)
@pytest.mark.parametrize("home", ["absolute", "relative", "unset"])
def test_the_linux_rule_names_the_folders_platformdirs_names(
    tmp_path: Path, xdg: dict[str, str], home: str
) -> None:
    homes = {"absolute": str(tmp_path / "home"), "relative": "not/absolute", "unset": None}
    env = {**base_env(homes[home]), **xdg}
    got = answers(env, tmp_path)
    assert got["ours"] == got["platformdirs"]
    if home == "absolute" and not xdg:
        assert got["ours"] == [
            f"{tmp_path}/home/.local/share/ltm",
            f"{tmp_path}/home/.local/state/ltm",
        ]


def test_ltm_variables_come_first(tmp_path: Path) -> None:
    env = {
        **base_env(str(tmp_path)),
        "LTM_DATA_DIR": str(tmp_path / "d"),
        "LTM_STATE_DIR": str(tmp_path / "s"),
        "XDG_DATA_HOME": "/srv/xdg/data",
    }
    assert answers(env, tmp_path)["ours"] == [str(tmp_path / "d"), str(tmp_path / "s")]


@pytest.mark.parametrize("home", ["", "not/absolute", None], ids=["empty", "relative", "unset"])
def test_sign_ins_live_in_the_same_home_as_the_store(tmp_path: Path, home: str | None) -> None:
    """An empty or relative $HOME is no home: the password database's is, for the config
    dir as for the data dir, never "/" or a folder under wherever ltm was started."""
    code = (
        "import json; from ltm.cli import config;"
        "print(json.dumps([str(config.config_dir()), str(config.data_dir())]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=base_env(home),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    config_dir, data_dir = map(Path, json.loads(out.stdout))
    assert config_dir.is_absolute()
    assert config_dir.parents[1] == data_dir.parents[2]  # HOME/.config/ltm, HOME/.local/share/ltm


def test_no_platformdirs_on_the_linux_path(tmp_path: Path) -> None:
    code = (
        "import sys; from ltm.cli import config; config.data_dir(); config.state_dir();"
        "print('platformdirs' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=base_env(str(tmp_path)), capture_output=True, text=True
    )
    assert out.stdout.strip() == "False"


# -- what other users of the machine may read: nothing ------------------------------------


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which a plain mkdir or open makes 0755 and 0644."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_data_dir_that_is_a_file_is_said_and_left_alone(tmp_path: Path) -> None:
    """LTM_DATA_DIR set to the store's own path (a file): one line naming it, and the
    file's mode as it was (no execute bits from making a folder private)."""
    from clikit import Cli

    cli = Cli(tmp_path / "home")
    db = tmp_path / "ltm.db"
    db.write_bytes(b"")
    db.chmod(0o644)
    done = cli.run("ls", LTM_DATA_DIR=str(db))
    assert done.returncode == 1
    assert f"a file, not a folder: '{db}'" in done.stderr and "Traceback" not in done.stderr
    assert "made private" not in done.stderr
    assert _mode(db) == 0o644


def test_a_new_local_store_is_its_owners_alone(tmp_path: Path, umask_022: None) -> None:
    from clikit import Cli

    from ltm.store.sqlite import SqliteStore

    cli = Cli(tmp_path / "home")
    saved = cli.run("save", stdin='{"goal": "g", "next_step": "n"}')
    assert saved.returncode == 0 and "private" not in saved.stderr, saved.stderr
    data = tmp_path / "home" / "data"
    assert _mode(data) == 0o700 and _mode(data / "ltm.db") == 0o600
    # SQLite's -wal and -shm exist while the store is open: they take the file's mode.
    store = SqliteStore(data / "ltm.db")
    try:
        store.list_packets  # noqa: B018 - opened: WAL mode makes the side files
        side = [data / "ltm.db-wal", data / "ltm.db-shm"]
        assert all(p.exists() for p in side)
        assert {_mode(p) for p in side} == {0o600}
    finally:
        store.close()


def test_an_existing_store_is_repaired_once_and_the_doctor_checks(
    tmp_path: Path, umask_022: None
) -> None:
    from clikit import Cli

    cli = Cli(tmp_path / "home")
    env = {"LTM_STATE_DIR": str(tmp_path / "home" / "state")}
    cli.ok("save", stdin='{"goal": "g", "next_step": "n"}', **env)
    data = tmp_path / "home" / "data"
    # As an earlier ltm left them: readable by every user of the machine.
    os.chmod(data, 0o755)
    os.chmod(data / "ltm.db", 0o644)
    doctor = cli.run("doctor", "--json", **env)
    (check,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "private"]
    assert check["status"] == "fail" and "ltm.db is mode 644" in check["detail"]
    assert f"chmod 700 {data}" in check["fix"]

    first = cli.run("ls", **env)
    assert first.returncode == 0
    said = [line for line in first.stderr.splitlines() if "made private" in line]
    assert len(said) == 2, first.stderr  # the folder, then the file
    assert _mode(data) == 0o700 and _mode(data / "ltm.db") == 0o600
    again = cli.run("ls", **env)
    assert "private" not in again.stderr  # said once: nothing is left to repair
    doctor = cli.run("doctor", "--json", **env)
    (check,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "private"]
    assert check["status"] == "ok", check


def test_the_hooks_state_is_its_owners_alone(tmp_path: Path, umask_022: None) -> None:
    from clikit import Cli

    cli = Cli(tmp_path / "home")
    state = tmp_path / "home" / "state"
    env = {"LTM_STATE_DIR": str(state)}
    payload = json.dumps({"session_id": "0b5c2f3e-1111-2222-3333-444455556666"})
    cli.ok("hook", "pre-compact", stdin=payload, **env)  # writes the session's marker
    cli.ok("hook", "pre-compact", "--harness", "nobody", stdin=payload, **env)  # logs
    marker = state / "sessions" / "0b5c2f3e-1111-2222-3333-444455556666.json"
    assert _mode(state) == 0o700 and _mode(state / "sessions") == 0o700
    assert _mode(marker) == 0o600 and _mode(state / "hook.log") == 0o600

    # Left 0755/0644 by an earlier ltm: repaired by the next hook.
    os.chmod(state, 0o755)
    os.chmod(state / "hook.log", 0o644)
    os.chmod(marker, 0o644)
    cli.ok("hook", "pre-compact", "--harness", "nobody", stdin=payload, **env)
    cli.ok("hook", "pre-compact", stdin=payload, **env)
    assert _mode(state) == 0o700 and _mode(state / "hook.log") == 0o600
    assert _mode(marker) == 0o600


def test_the_config_folder_holding_tokens_is_repaired(tmp_path: Path, umask_022: None) -> None:
    from clikit import Cli

    cli = Cli(tmp_path / "home")
    cli.ok("config", "set", "timeout", "20")
    assert _mode(cli.config) == 0o700
    os.chmod(cli.config, 0o755)
    result = cli.run("config", "set", "timeout", "25")
    assert result.returncode == 0 and "made private" in result.stderr
    assert _mode(cli.config) == 0o700


def test_folders_a_server_database_needs_are_made_private_under_a_loose_umask(
    tmp_path: Path,
) -> None:
    """``ltm server run --db /new/a/b/server.db``: every folder made on the way is its
    owner's alone, not only the last; a world-writable parent lets anyone rename the
    store's folder away and put their own in its place."""
    from ltm.store.sqlite import SqliteStore

    old = os.umask(0)
    try:
        store = SqliteStore(tmp_path / "new" / "a" / "b" / "server.db")
        store.close()
    finally:
        os.umask(old)
    made = [tmp_path / "new", tmp_path / "new" / "a", tmp_path / "new" / "a" / "b"]
    assert {_mode(p) for p in made} == {0o700}
