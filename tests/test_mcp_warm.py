"""The warm ``ltm mcp`` (``LTM_MCP_WARM=1``): the first session starts a warm process, the
next ones are handed to it, each with its own working directory and environment.

Real ``ltm mcp`` subprocesses driven by the SDK client (tests/test_mcp.py); the
warm process this test starts is ended by its pid at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")
if sys.platform == "win32":
    pytest.skip("the warm process is POSIX only", allow_module_level=True)

import contextlib

from test_mcp import Shim, clean_env
from test_project import needs_git, repo


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "state"
    yield folder
    for pid_file in folder.glob("mcp-*.pid"):
        text = pid_file.read_text().strip()
        if text:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text), signal.SIGTERM)


def wait_for(folder: Path, pattern: str) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = list(folder.glob(pattern))
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no {pattern} in {folder}")


@needs_git
def test_sessions_after_the_first_are_served_warm_with_their_own_cwd_and_env(
    tmp_path: Path, state: Path
) -> None:
    first = clean_env(tmp_path / "one", LTM_MCP_WARM="1", LTM_STATE_DIR=str(state))
    with Shim(first, tmp_path / "one.log") as shim:
        shim.alive()
    sock = wait_for(state, "mcp-*.sock")
    assert sock.stat().st_mode & 0o777 == 0o600
    pid = int(wait_for(state, "mcp-*.pid").read_text())
    os.kill(pid, 0)  # the warm process is there

    app = repo(tmp_path / "app", "https://github.com/acme/app.git")
    second = clean_env(tmp_path / "two", LTM_MCP_WARM="1", LTM_STATE_DIR=str(state))
    with Shim(second, tmp_path / "two.log", cwd=app) as shim:
        saved = shim.ok("save", {"packet": {"goal": "warm goal", "next_step": "go on"}})
        assert "saved packet" in saved
        listed = shim.call("ls", {"here": True}).structured_content
        assert [p["goal"] for p in listed["packets"]] == ["warm goal"]
        assert listed["project"] == "acme/app"  # the session runs in this cwd
        assert str(tmp_path / "two" / "data") in shim.ok("whoami")  # and with this env
    assert (tmp_path / "two" / "data" / "ltm.db").exists()
    assert not (tmp_path / "one" / "data" / "ltm.db").exists()
    os.kill(pid, 0)  # still serving the next one


def test_without_the_opt_in_nothing_stays_behind(tmp_path: Path) -> None:
    env = clean_env(tmp_path, LTM_STATE_DIR=str(tmp_path / "state"))
    with Shim(env, tmp_path / "shim.log") as shim:
        assert json.loads(shim.ok("example"))["ltm_version"] == "0.2"
    assert not (tmp_path / "state").exists()
