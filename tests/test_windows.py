"""The Windows branches, run on Linux by simulating the platform.

CI has no Windows machine, so each branch that depends on the platform is
driven here with the platform's markers set the way Windows sets them:

- config and state dirs: a real Python process whose ``sys.platform`` is
  ``"win32"`` before anything is imported (platformdirs picks its Windows
  implementation from it) and no Windows shell API, so the folders come from
  ``LOCALAPPDATA``/``APPDATA`` as Windows sets them;
- permission handling: the doctor's POSIX test answered "no" (Windows has
  ACLs, not modes), and the SQLite store without ``fcntl`` (no ``flock``);
- path redaction: ``C:\\Users\\...``, ``C:/Users/...`` and UNC paths through
  the real ``ltm save`` and ``ltm import``;
- ``ltm mcp install``: ``sys.platform == "win32"``, ``APPDATA`` and an
  ``ltm.exe`` as ``argv[0]``, as a pip-installed console script has.

What this cannot show: NTFS ACLs, real Windows path parsing (``pathlib`` here
is POSIX), and the console's behaviour; those need a Windows machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from clikit import Cli
from serverkit import make_packet
from timing import scaled

from ltm import bundle
from ltm.cli import doctor
from ltm.cli.agents.mcp import install

WINDOWS_PYTHON = """
import sys
sys.platform = "win32"  # before platformdirs (or anything) is imported
# No Windows shell API here: platformdirs then reads the folders from the environment
# (%LOCALAPPDATA%, %APPDATA%), which Windows sets to what the shell API answers.
sys.modules["ctypes"] = None
from ltm.cli.config import config_dir, data_dir, local_db_path
print(config_dir()); print(data_dir()); print(local_db_path())
"""


def as_windows(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", WINDOWS_PYTHON],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def windows_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LTM_") and k not in ("XDG_CONFIG_HOME", "XDG_DATA_HOME")
    }
    env.update(
        HOME=str(home),
        USERPROFILE=str(home),
        APPDATA=str(home / "AppData" / "Roaming"),
        LOCALAPPDATA=str(home / "AppData" / "Local"),
        **extra,
    )
    return env


# -- config and state dirs -------------------------------------------------------------


def test_windows_dirs_config_as_the_reference_data_in_local_appdata(tmp_path: Path) -> None:
    config, data, db = as_windows(windows_env(tmp_path))
    # The config dir follows the reference CLI's rule on every platform (one dotfile setup
    # works for both CLIs); the store is machine-local state: %LOCALAPPDATA%\ltm.
    assert Path(config) == tmp_path / ".config" / "ltm"
    assert Path(data) == tmp_path / "AppData" / "Local" / "ltm"
    assert Path(db) == tmp_path / "AppData" / "Local" / "ltm" / "ltm.db"


def test_windows_dirs_honour_the_overrides(tmp_path: Path) -> None:
    env = windows_env(
        tmp_path, LTM_CONFIG_DIR=str(tmp_path / "c"), LTM_DATA_DIR=str(tmp_path / "d")
    )
    config, data, _ = as_windows(env)
    assert (Path(config), Path(data)) == (tmp_path / "c", tmp_path / "d")
    config, _, _ = as_windows(windows_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg")))
    assert Path(config) == tmp_path / "xdg" / "ltm"


# -- permission handling ----------------------------------------------------------------


def test_doctor_on_windows_does_not_judge_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.mkdir(mode=0o755)
    (config / "credentials").write_text("token\n")
    (config / "credentials").chmod(0o644)  # what a mode looks like where ACLs rule
    monkeypatch.setenv("LTM_CONFIG_DIR", str(config))
    [posix] = doctor.check_files()
    assert posix.status == "fail" and "not 600" in posix.detail  # the same files on POSIX

    monkeypatch.setattr(doctor, "_posix", lambda: False)
    [windows] = doctor.check_files()
    assert windows.status == "ok"
    assert "permissions not checked: Windows uses ACLs" in windows.detail


def test_sqlite_store_without_flock_loses_no_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows has no fcntl: writers then queue on SQLite's own busy timeout alone.
    from ltm.store import PacketMeta, StoredPacket
    from ltm.store import sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "fcntl", None)
    stores = [sqlite_store.SqliteStore(tmp_path / "ltm.db") for _ in range(2)]
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(40):
                pid = f"01WIN{n}{i:06d}ABC"
                meta = PacketMeta(pid, "2026-01-01T00:00:00Z", "g", "local")
                stores[n % 2].put_packet(StoredPacket(meta, b"{}"), sort_key=f"{i:04d}")
        except BaseException as exc:  # pragma: no cover - shown by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    page = stores[0].list_packets(owner_id="local", limit=1000)
    assert len(page.items) == 160
    assert not (tmp_path / "ltm.db.writelock").exists()  # the flock file is POSIX-only
    for s in stores:
        s.close()


# -- path redaction ---------------------------------------------------------------------------

WINDOWS_PATHS = [
    ("windows-path", r"C:\Users\alice\src\billing\app.py"),
    ("windows-path", "C:/Users/alice/Desktop/notes.txt"),
    ("windows-path", r"D:\work\acme\.env"),
    ("unc-path", r"\\fileserver\team\handover.docx"),
    ("unc-path", r"\\?\C:\very\long\path"),
]


@pytest.mark.parametrize(("kind", "path"), WINDOWS_PATHS)
def test_save_blocks_windows_paths(tmp_path: Path, kind: str, path: str) -> None:
    cli = Cli(tmp_path)
    packet = make_packet(goal=f"Fix the build in {path}", project={"name": "x", "ref": path})
    result = cli.run("save", "-", "--local", stdin=json.dumps(packet))
    assert result.returncode == 1
    assert f"goal/{kind}" in result.stderr and f"project.ref/{kind}" in result.stderr
    assert cli.ok("ls", "--local", "--json").count('"id"') == 0  # nothing stored


def test_a_pipe_gets_utf8_whatever_its_encoding(tmp_path: Path) -> None:
    # Windows writes to a pipe (an agent's shell tool, `ltm ls > file`) in the ANSI code
    # page, cp1252: packet text beyond it (an arrow, CJK, an emoji) still comes out, in UTF-8.
    cli = Cli(tmp_path)
    cli.env["PYTHONIOENCODING"] = "cp1252"
    goal = "Move auth → tokens ✓ 日本 😀"
    packet_id = cli.ok("save", "-", stdin=json.dumps(make_packet(goal=goal))).strip()
    for args in (["ls"], ["show", packet_id], ["search", "tokens"], ["log", packet_id]):
        assert goal in cli.ok(*args), args  # decoded as UTF-8 by the harness of the test


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_packet_file_in_utf16_saves(tmp_path: Path, encoding: str) -> None:
    # Windows PowerShell 5's `ltm example > packet.json` writes UTF-16 (with its byte order
    # mark): the file the README's first steps make on Windows saves, its text intact.
    cli = Cli(tmp_path)
    goal = "Move auth → tokens ✓ 日本 😀"
    path = tmp_path / "packet.json"
    mark = b"\xfe\xff" if encoding == "utf-16-be" else b""  # the "utf-16" codec writes its own
    path.write_bytes(mark + json.dumps(make_packet(goal=goal), ensure_ascii=False).encode(encoding))
    assert "ok" in cli.ok("validate", str(path))
    packet_id = cli.ok("save", str(path), "--local").strip()
    assert json.loads(cli.ok("pull", packet_id, "--local"))["goal"] == goal
    path.write_bytes(b"\xff\xfe" + "{}".encode("utf-16-le") + b"\x00")  # odd length
    assert "not valid UTF-16; save it as UTF-8" in cli.fails("save", str(path), "--local")


def test_import_blocks_windows_paths(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    lines = [
        json.dumps(
            {"id": p["id"], "scope": "personal", "created_by": "x", "packet": p},
        )
        + "\n"
        for p in (make_packet(next_step=f"Open {path}") for _, path in WINDOWS_PATHS)
    ]
    file = tmp_path / "from-windows.jsonl"
    header = bundle.header_line(source="local", exported_at="2026-05-01T12:00:00Z")
    file.write_text(header + "".join(lines), encoding="utf-8")
    result = cli.run("import", str(file), "--local")
    assert result.returncode == 1
    assert result.stdout.count("refused") == len(WINDOWS_PATHS)
    assert "next_step/windows-path" in result.stdout and "next_step/unc-path" in result.stdout


# -- ltm mcp install ------------------------------------------------------------------------


@pytest.fixture
def on_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """sys.platform, APPDATA and argv[0] as a pip-installed ltm.exe on Windows has them."""
    scripts = tmp_path / "Program Files" / "Python312" / "Scripts"
    scripts.mkdir(parents=True)
    exe = scripts / "ltm.exe"
    exe.write_bytes(b"MZ")
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sys, "argv", [str(exe), "mcp", "install"])
    monkeypatch.setenv("APPDATA", str(tmp_path / "AppData" / "Roaming"))
    for name in ("LTM_CONFIG_DIR", "LTM_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return exe


def test_mcp_install_paths_on_windows(on_windows: Path, tmp_path: Path) -> None:
    roaming = tmp_path / "AppData" / "Roaming"
    clients = install.CLIENTS
    assert clients["claude-desktop"].path() == roaming / "Claude" / "claude_desktop_config.json"
    assert clients["zed"].path() == roaming / "Zed" / "settings.json"
    assert install.ltm_command() == [str(on_windows)]


@pytest.mark.parametrize("name", ["claude-desktop", "zed", "cursor", "claude-code"])
def test_mcp_install_writes_an_entry_running_ltm_exe(on_windows: Path, name: str) -> None:
    client = install.CLIENTS[name]
    entry = install.entry_for(client)
    assert entry["command"] == str(on_windows) and entry["args"] == ["mcp"]
    path = on_windows.parent / f"{name}.json"
    assert install.write_entry(path, client, entry) == "added"
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written[client.key]["ltm"] == entry
    assert install.write_entry(path, client, entry) == "unchanged"


def test_claude_add_command_quotes_for_windows_shells(on_windows: Path) -> None:
    entry = install.entry_for(install.CLIENTS["claude-code"])
    command = install.claude_add_command(entry)
    # Double quotes (cmd.exe and PowerShell read them), never POSIX single quotes.
    assert command.endswith(f'-- "{on_windows}" mcp'), command
    assert "'" not in command
