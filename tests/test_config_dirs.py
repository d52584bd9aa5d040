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


def test_no_platformdirs_on_the_linux_path(tmp_path: Path) -> None:
    code = (
        "import sys; from ltm.cli import config; config.data_dir(); config.state_dir();"
        "print('platformdirs' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=base_env(str(tmp_path)), capture_output=True, text=True
    )
    assert out.stdout.strip() == "False"
