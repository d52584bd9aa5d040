"""The sign-in files and the server URL rules, in process (commands: other suites).

The config dir is shared with the Go reference CLI (dennisdevulder/ltm). What it
does with the two files it knows, from its source:

- ``internal/auth/auth.go``: ``SaveToken`` writes ``token + "\\n"`` to
  ``credentials`` with mode 0600 (one token: the default host's); ``LoadToken``
  reads it back trimming whitespace, and fails on an empty file.
- ``internal/config/config.go``: ``config.toml`` decoded with BurntSushi/toml into
  ``{host, user, output, lenient, editor}`` (strings, ``lenient`` a bool); keys it
  does not know are skipped, a key of the wrong type is an error; ``Save`` rewrites
  the file from those five fields (0600, dir 0700) with the encoder's
  ``key = value`` lines.

The helpers below do what that Go code does, so each test can check that files
written here are files the reference reads, and the other way round.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
from timing import scaled

from ltm.cli import config as settings
from ltm.cli.client import credentials
from ltm.cli.errors import CliError

REFERENCE_FIELDS = {"host": str, "user": str, "output": str, "lenient": bool, "editor": str}


@pytest.fixture(autouse=True)
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("LTM_HOST", "LTM_TOKEN", "XDG_CONFIG_HOME", "LTM_USER", "LTM_OUTPUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


# -- the reference, as its Go code does it ---------------------------------------------


def go_save_token(config: Path, token: str) -> None:
    """auth.SaveToken: MkdirAll 0700, then WriteFile(token + "\\n", 0600)."""
    config.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(config / "credentials", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")


def go_load_token(config: Path) -> str:
    """auth.LoadToken: the file, whitespace trimmed; an empty file is an error."""
    token = (config / "credentials").read_text().strip()
    assert token, "empty credentials file"
    return token


def go_load_config(config: Path) -> dict[str, Any]:
    """config.Load: BurntSushi/toml Unmarshal into the Config struct.

    A key matches a field exactly or in another case; keys matching no field are
    skipped; a matched key of another TOML type fails the whole load.
    """
    path = config / "config.toml"
    doc = tomllib.loads(path.read_text()) if path.exists() else {}
    out: dict[str, Any] = {"output": "human"}
    for key, value in doc.items():
        field = key.lower()
        if field not in REFERENCE_FIELDS:
            continue
        assert isinstance(value, REFERENCE_FIELDS[field]), f"Go fails: {key} = {value!r}"
        out[field] = value
    if not out["output"]:
        out["output"] = "human"
    return out


def go_save_config(config: Path, **fields: Any) -> None:
    """Config.Save: the five fields in struct order, omitempty, the encoder's lines."""
    config.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = []
    for name in REFERENCE_FIELDS:
        value = fields.get(name)
        if value:
            lines.append(f"{name} = {'true' if value is True else json.dumps(value)}\n")
    fd = os.open(config / "config.toml", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("".join(lines))


def go_auth(config: Path, host: str, token: str) -> None:
    """The reference's `ltm auth HOST TOKEN` once the server took the token (persist)."""
    go_save_token(config, token)
    current = go_load_config(config)
    go_save_config(config, **{**current, "host": host})


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- URLs and fingerprints --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("https://LTM.example.org/", "https://ltm.example.org"),
        ("ltm.example.org", "https://ltm.example.org"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("https://abc.execute-api.eu-west-1.amazonaws.com/prod/", None),
        ("  http://[::1]:9000  ", "http://[::1]:9000"),
        ("https://ltm.example.org:443/", "https://ltm.example.org"),
        ("HTTP://LTM.example.org:80", "http://ltm.example.org"),
        ("http://ltm.example.org:443", "http://ltm.example.org:443"),
        ("https://[::1]:443", "https://[::1]"),
        ("https://ltm.example.org:/", "https://ltm.example.org"),
    ],
)
def test_server_urls_are_normalized(raw: str, url: str | None) -> None:
    expected = url or raw.rstrip("/")
    assert credentials.normalize_host(raw) == expected


def test_one_server_spelled_two_ways_is_one_sign_in(config: Path) -> None:
    credentials.store_login(
        credentials.normalize_host("https://a.example:443/"), "tok-a", via="token"
    )
    assert credentials.token_for(credentials.normalize_host("A.example")) == "tok-a"
    # hosts.json edited by hand (or kept by a build that left the port in) still counts.
    hosts = json.loads((config / "hosts.json").read_text())
    hosts["hosts"] = {"https://B.example:443/": {"token": "tok-b"}}
    (config / "hosts.json").write_text(json.dumps(hosts))
    assert credentials.token_for("https://b.example") == "tok-b"


@pytest.mark.parametrize(
    "raw", ["", "ftp://host", "https://", "https://u:p@host", "https://host?x=1", "http://h:99999"]
)
def test_bad_server_urls(raw: str) -> None:
    with pytest.raises(CliError):
        credentials.normalize_host(raw)


def test_the_fingerprint_is_the_start_of_what_the_server_stores() -> None:
    from ltm.service.tokens import hash_token, mint

    token = mint()
    assert credentials.fingerprint(token) == hash_token(token)[:8]
    assert credentials.fingerprint(token) == hashlib.sha256(token.encode()).hexdigest()[:8]


# -- what we write, read as the reference reads it -------------------------------------


def test_store_forget_and_the_default(config: Path) -> None:
    assert credentials.active() is None
    assert credentials.store_login("https://a.example", "tok-a", via="token") is None
    previous = credentials.store_login(
        "https://b.example", "tok-b", via="invite", user={"id": "u1", "display": "Sam", "x": "y"}
    )
    assert previous == "https://a.example"
    target = credentials.active()
    assert target is not None
    assert (target.host, target.token, target.via) == ("https://b.example", "tok-b", "invite")
    assert target.user == {"id": "u1", "display": "Sam"}

    # The reference's pair names the default server and holds its token, byte for byte.
    assert (config / "credentials").read_bytes() == b"tok-b\n"
    assert go_load_token(config) == "tok-b"
    assert go_load_config(config)["host"] == "https://b.example"
    assert tomllib.loads((config / "config.toml").read_text()) == {"host": "https://b.example"}
    # The rest, ours: one entry per server; no token in any settings file.
    hosts = json.loads((config / "hosts.json").read_text())
    assert hosts["version"] == 1
    assert {h: e["token"] for h, e in hosts["hosts"].items()} == {
        "https://a.example": "tok-a",
        "https://b.example": "tok-b",
    }
    assert hosts["hosts"]["https://b.example"]["user"] == {"id": "u1", "display": "Sam"}
    assert "tok-" not in (config / "config.toml").read_text()

    assert credentials.forget("https://b.example")
    assert credentials.active() is None  # the default went with it; a.example stays stored
    assert not (config / "credentials").exists()  # the reference: "not authenticated"
    assert "host" not in go_load_config(config)
    assert credentials.token_for("https://a.example") == "tok-a"
    assert not credentials.forget("https://b.example")

    credentials.set_default("https://a.example")  # back to a: its token comes back too
    assert go_load_token(config) == "tok-a"
    assert go_load_config(config)["host"] == "https://a.example"


def test_signing_in_elsewhere_without_becoming_the_default(config: Path) -> None:
    credentials.store_login("https://a.example", "tok-a", via="token")
    credentials.store_login("https://b.example", "tok-b", via="token", make_default=False)
    assert go_load_token(config) == "tok-a"
    assert go_load_config(config)["host"] == "https://a.example"
    credentials.store_login("https://a.example", "tok-a2", via="device", make_default=False)
    assert go_load_token(config) == "tok-a2"  # the default's token is always the one in credentials


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    credentials.store_login("https://a.example", "tok-a", via="token")
    monkeypatch.setenv("LTM_HOST", "https://a.example/")
    monkeypatch.setenv("LTM_TOKEN", "tok-env")
    target = credentials.active()
    assert target is not None
    assert (target.host, target.token, target.source, target.via) == (
        "https://a.example",
        "tok-env",
        "LTM_HOST",
        "LTM_TOKEN",
    )
    monkeypatch.delenv("LTM_TOKEN")
    monkeypatch.setenv("LTM_HOST", "https://elsewhere.example")
    target = credentials.active()  # never a's token to another server
    assert target is not None and target.token is None


def test_a_token_for_no_server_is_an_error_not_the_local_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LTM_TOKEN", "tok-env")
    with pytest.raises(CliError, match="LTM_TOKEN is set but no server is: set LTM_HOST"):
        credentials.active()
    with pytest.raises(CliError, match="LTM_HOST"):
        credentials.active("core")
    monkeypatch.setenv("LTM_HOST", "https://a.example")
    target = credentials.active()
    assert target is not None and (target.host, target.token) == ("https://a.example", "tok-env")


def test_a_token_is_one_clean_line(config: Path) -> None:
    for bad in ("", "two words", "line\nbreak", "tab\there", "bell\a"):
        with pytest.raises(CliError, match="one line"):
            credentials.store_login("https://a.example", bad, via="token")
    assert not config.exists()


# -- what the reference writes, read here ----------------------------------------------


def test_a_reference_sign_in_is_read(config: Path) -> None:
    go_auth(config, "https://ref.example", "ltm_reference_token")
    assert (config / "config.toml").read_text() == (
        'host = "https://ref.example"\noutput = "human"\n'
    )
    target = credentials.active()
    assert target is not None
    assert (target.host, target.token, target.source) == (
        "https://ref.example",
        "ltm_reference_token",
        "credentials",
    )
    assert target.via is None and target.user is None  # the reference keeps neither


def test_the_reference_trims_and_so_do_we(config: Path) -> None:
    go_save_config(config, host="https://ref.example/")
    (config / "credentials").write_text("\t  tok-padded \r\n\n")
    target = credentials.active()
    assert target is not None and target.token == "tok-padded"
    assert target.host == "https://ref.example"
    (config / "credentials").write_text(" \n")  # empty: the reference is not signed in either
    target = credentials.active()
    assert target is not None and target.token is None


def test_a_host_key_in_another_case_counts_as_the_reference_has_it(config: Path) -> None:
    config.mkdir()
    (config / "config.toml").write_text('Host = "https://ref.example"\n')
    go_save_token(config, "tok")
    assert credentials.default_host() == "https://ref.example"
    credentials.set_default("https://other.example")
    doc = tomllib.loads((config / "config.toml").read_text())
    assert doc == {"host": "https://other.example"}  # one spelling, no ambiguity for Go
    assert not (config / "credentials").exists()  # tok was ref.example's


def test_the_reference_signs_in_again_and_elsewhere(config: Path) -> None:
    credentials.store_login("https://a.example", "tok-a", via="token")
    credentials.store_login("https://b.example", "tok-b", via="invite", user={"id": "u1"})

    go_auth(config, "https://b.example", "tok-b2")  # new token for b, by the reference
    target = credentials.active()
    assert target is not None and target.token == "tok-b2"
    assert target.via is None and target.user is None  # those were about tok-b

    go_auth(config, "https://c.example", "tok-c")  # a new server, by the reference
    target = credentials.active()
    assert target is not None and (target.host, target.token) == ("https://c.example", "tok-c")
    assert credentials.token_for("https://a.example") == "tok-a"  # ours survive alongside

    credentials.set_default("https://a.example")  # switching away keeps c's token, in hosts.json
    assert go_load_token(config) == "tok-a"
    credentials.set_default("https://c.example")
    assert go_load_token(config) == "tok-c"
    assert go_load_config(config)["host"] == "https://c.example"


def test_credentials_removed_by_hand_is_signed_out(config: Path) -> None:
    credentials.store_login("https://a.example", "tok-a", via="token")
    (config / "credentials").unlink()
    target = credentials.active()
    assert target is not None and target.host == "https://a.example" and target.token is None
    credentials.store_login("https://b.example", "tok-b", via="token", make_default=False)
    assert not (config / "credentials").exists()  # not brought back behind the user's back
    assert "https://a.example" not in json.loads((config / "hosts.json").read_text())["hosts"]


def test_a_host_that_is_not_a_url(config: Path) -> None:
    go_save_config(config, host="ftp://files.example")
    with pytest.raises(CliError, match=r"config\.toml.*ltm config set host"):
        credentials.active()
    credentials.set_default("https://fixed.example")
    assert go_load_config(config)["host"] == "https://fixed.example"


def test_a_switch_cut_short_never_pairs_a_token_with_another_host(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials.store_login("https://a.example", "tok-a", via="token")

    def crash(**_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(settings, "update_reference", crash)
    with pytest.raises(OSError):
        credentials.store_login("https://b.example", "tok-b", via="token")
    assert go_load_config(config)["host"] == "https://a.example"
    assert not (config / "credentials").exists()  # neither a's token for b nor b's for a


def held_between_read_and_write(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    write: str,
    first: threading.Thread,
    second: threading.Thread,
) -> None:
    """Run ``first`` up to its call of ``module.write`` (it has read the files), then
    ``second`` while it waits, then let ``first`` write. Threads open the lock as
    processes do; without one, ``first`` writes back what it read before ``second``."""
    real = getattr(module, write)
    between = threading.Event()
    go_on = threading.Event()

    def held(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is first:
            between.set()
            go_on.wait(scaled(10))  # not a budget: released below
        return real(*args, **kwargs)

    monkeypatch.setattr(module, write, held)
    first.start()
    assert between.wait(scaled(10))
    second.start()
    second.join(scaled(1))  # waits on the lock (or, without one, finishes first)
    go_on.set()
    first.join(scaled(10))
    second.join(scaled(10))


def test_two_processes_writing_at_once_lose_no_sign_in(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MCP server recording teams while the terminal signs in elsewhere: each reads,
    changes and writes hosts.json whole."""
    credentials.store_login("https://a.example", "tok-a", via="token")
    shim = threading.Thread(
        target=credentials.remember_teams,
        args=("https://a.example", ["core"]),
        kwargs={"token": "tok-a"},
    )
    terminal = threading.Thread(
        target=credentials.store_login,
        args=("https://b.example", "tok-b"),
        kwargs={"via": "token", "make_default": False},
    )
    held_between_read_and_write(monkeypatch, credentials, "_commit", shim, terminal)
    hosts = json.loads((config / "hosts.json").read_text())["hosts"]
    assert hosts["https://b.example"]["token"] == "tok-b"
    assert hosts["https://a.example"]["teams"] == ["core"]


def test_a_setting_written_meanwhile_never_pairs_a_token_with_another_server(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ltm config set editor vim`` rewrites config.toml whole from what it read: while
    ``ltm auth`` switches the default from a to b, that write must not put host = a back
    beside b's token in credentials (a's server would be sent b's token)."""
    credentials.store_login("https://a.example", "tok-a", via="token")
    setting = threading.Thread(target=settings.update_reference, kwargs={"editor": "vim"})
    sign_in = threading.Thread(
        target=credentials.store_login, args=("https://b.example", "tok-b"), kwargs={"via": "token"}
    )
    held_between_read_and_write(monkeypatch, settings, "write_toml", setting, sign_in)
    assert go_load_config(config)["host"] == "https://b.example"
    assert go_load_config(config)["editor"] == "vim"
    assert go_load_token(config) == "tok-b"


def test_an_answer_about_a_replaced_sign_in_is_not_recorded(config: Path) -> None:
    """``ltm auth`` again, as someone else, while a long-lived process (the MCP server)
    waits on ``GET /v1/teams`` with the old token: its answer is the old account's."""
    credentials.store_login("https://a.example", "tok-old", via="token")
    credentials.store_login("https://a.example", "tok-new", via="token")
    credentials.remember_teams("https://a.example", ["old-team"], token="tok-old")
    credentials.remember_user(
        "https://a.example", {"id": "u-old", "display": "Old"}, token="tok-old"
    )
    entry = credentials.load().hosts["https://a.example"]
    assert "teams" not in entry and "user" not in entry
    credentials.remember_teams("https://a.example", ["core"], token="tok-new")
    credentials.remember_user("https://a.example", {"id": "u2", "display": "New"}, token="tok-new")
    entry = credentials.load().hosts["https://a.example"]
    assert entry["teams"] == ["core"] and entry["user"] == {"id": "u2", "display": "New"}


# -- settings: config.toml and settings.toml -------------------------------------------


def test_unknown_keys_survive_our_writes(config: Path) -> None:
    config.mkdir()
    (config / "config.toml").write_text(
        'output = "json"\neditor = "vim"\nlenient = true\nfuture_key = [1, 2]\n'
        "[plugins.thing]\nenabled = true\n"
    )
    credentials.store_login("https://a.example", "tok-a", via="token")
    settings.update_reference(user="alice")
    doc = tomllib.loads((config / "config.toml").read_text())
    assert doc == {
        "output": "json",
        "editor": "vim",
        "lenient": True,
        "future_key": [1, 2],
        "plugins": {"thing": {"enabled": True}},
        "host": "https://a.example",
        "user": "alice",
    }
    assert go_load_config(config) == {
        "host": "https://a.example",
        "user": "alice",
        "output": "json",
        "lenient": True,
        "editor": "vim",
    }

    (config / "settings.toml").write_text('timeout = 5\nnew_thing = "x"\n[section]\nk = 1\n')
    current = settings.load_settings()
    current["sensitive"] = [{"kind": "codename", "regex": r"blue\.bird"}]
    settings.save_settings(current)
    assert tomllib.loads((config / "settings.toml").read_text()) == {
        "timeout": 5,
        "new_thing": "x",
        "section": {"k": 1},
        "sensitive": [{"kind": "codename", "regex": r"blue\.bird"}],
    }


def test_unknown_keys_of_hosts_json_survive_our_writes(config: Path) -> None:
    credentials.store_login("https://a.example", "tok-a", via="token")
    doc = json.loads((config / "hosts.json").read_text())
    doc["mirrors"] = {"https://a.example": ["https://a2.example"]}
    doc["hosts"]["https://a.example"]["note"] = "work laptop"
    (config / "hosts.json").write_text(json.dumps(doc))
    credentials.store_login("https://b.example", "tok-b", via="token", make_default=False)
    credentials.remember_teams("https://a.example", ["core"], token="tok-a")
    after = json.loads((config / "hosts.json").read_text())
    assert after["mirrors"] == {"https://a.example": ["https://a2.example"]}
    assert after["hosts"]["https://a.example"]["note"] == "work laptop"
    assert set(after["hosts"]) == {"https://a.example", "https://b.example"}


def test_our_settings_stay_out_of_the_reference_s_file(config: Path) -> None:
    """The reference rewrites config.toml from its five fields: ours would be lost there."""
    settings.save_settings({"timeout": 30, "sensitive": [{"kind": "k", "regex": "r"}]})
    credentials.store_login("https://a.example", "tok-a", via="token")
    go_auth(config, "https://a.example", "tok-a2")  # the reference rewrites config.toml
    assert settings.load_settings()["sensitive"] == [{"kind": "k", "regex": "r"}]
    assert "sensitive" not in (config / "config.toml").read_text()


def test_a_broken_config_toml_is_an_error_not_a_reset(config: Path) -> None:
    config.mkdir()
    (config / "config.toml").write_text("this is { not valid = toml\n")
    with pytest.raises(CliError, match="not valid TOML"):
        credentials.active()
    with pytest.raises(CliError, match="not valid TOML"):
        credentials.store_login("https://a.example", "tok-a", via="token")
    assert (config / "config.toml").read_text() == "this is { not valid = toml\n"


# -- earlier builds of this CLI --------------------------------------------------------


OLD_CREDENTIALS = {
    "version": 1,
    "default": "https://b.example",
    "hosts": {
        "https://a.example": {"token": "tok-a", "via": "token", "saved_at": "2026-05-01T12:00:00Z"},
        "https://b.example": {
            "token": "tok-b",
            "via": "invite",
            "saved_at": "2026-05-02T12:00:00Z",
            "user": {"id": "u1", "display": "Sam"},
        },
    },
}


def test_old_json_credentials_move_to_the_shared_layout(config: Path) -> None:
    config.mkdir()
    (config / "credentials").write_text(json.dumps(OLD_CREDENTIALS, indent=2) + "\n")
    (config / "config.toml").write_text('output = "json"\n')
    target = credentials.active()
    assert target is not None
    assert (target.host, target.token, target.via) == ("https://b.example", "tok-b", "invite")
    assert target.user == {"id": "u1", "display": "Sam"}

    assert (config / "credentials").read_bytes() == b"tok-b\n"
    assert go_load_config(config)["host"] == "https://b.example"
    assert go_load_config(config)["output"] == "json"
    hosts = json.loads((config / "hosts.json").read_text())["hosts"]
    assert hosts == OLD_CREDENTIALS["hosts"]
    for name in ("credentials", "hosts.json", "config.toml"):
        assert mode(config / name) == 0o600
    assert credentials.active() == target  # once only: the second read is the new layout


def test_old_json_credentials_without_a_default(config: Path) -> None:
    config.mkdir()
    old = {**OLD_CREDENTIALS, "default": None}
    (config / "credentials").write_text(json.dumps(old))
    assert credentials.active() is None
    assert not (config / "credentials").exists()
    assert credentials.token_for("https://a.example") == "tok-a"


def test_old_json_credentials_in_a_read_only_dir_still_work(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.mkdir()
    (config / "credentials").write_text(json.dumps(OLD_CREDENTIALS))

    def refuse(*_: Any, **__: Any) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(settings, "write_private", refuse)
    target = credentials.active()
    assert target is not None and target.token == "tok-b"
    assert json.loads((config / "credentials").read_text()) == OLD_CREDENTIALS


def test_damaged_json_credentials(config: Path) -> None:
    config.mkdir()
    (config / "credentials").write_text("{not json")
    with pytest.raises(CliError, match="damaged"):
        credentials.active()


def test_old_config_json_moves_to_settings_toml(config: Path) -> None:
    config.mkdir()
    old = {
        "timeout": 30,
        "browser": False,
        "sensitive": [{"kind": "codename", "regex": "project-bluebird"}],
        "someday": {"nested": "kept"},
        "nothing": None,
    }
    (config / "config.json").write_text(json.dumps(old, indent=2) + "\n")
    loaded = settings.load_settings()
    del old["nothing"]  # TOML has no null
    assert loaded == old
    assert not (config / "config.json").exists()
    assert tomllib.loads((config / "settings.toml").read_text()) == old
    assert mode(config / "settings.toml") == 0o600
    assert settings.load_settings() == old
    assert not (config / "config.toml").exists()  # nothing of the reference's to write


# -- modes -----------------------------------------------------------------------------


def test_written_private_even_with_a_loose_umask(config: Path) -> None:
    old = os.umask(0)
    try:
        credentials.store_login("https://a.example", "tok", via="token")
        settings.save_settings({"timeout": 5})
    finally:
        os.umask(old)
    assert mode(config) == 0o700
    for name in ("credentials", "hosts.json", "config.toml", "settings.toml", ".credentials.lock"):
        assert mode(config / name) == 0o600, name
    assert sorted(p.name for p in config.iterdir()) == [
        ".credentials.lock",  # empty: what writers take turns on
        "config.toml",
        "credentials",
        "hosts.json",
        "settings.toml",
    ]  # no temporary file left behind


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names fds by /proc")
def test_the_tokens_are_on_disk_before_they_replace_the_old_file(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Atomic is not enough: a rename can reach the disk before the bytes it names, and a
    crash then leaves an empty credentials file where every token was."""
    calls: list[tuple[str, str]] = []
    fsync, replace = os.fsync, os.replace

    def record_fsync(fd: int) -> None:
        calls.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def record_replace(src: Any, dst: Any) -> None:
        calls.append(("replace", str(src)))
        replace(src, dst)

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "replace", record_replace)
    credentials.store_login("https://a.example", "tok-a", via="token")
    replaced = [src for call, src in calls if call == "replace"]
    assert replaced  # hosts.json, config.toml, credentials
    for src in replaced:
        assert calls.index(("fsync", src)) < calls.index(("replace", src))
    assert calls[-1] == ("fsync", str(config))  # the last rename made durable too


def test_a_symlinked_file_stays_a_symlink(config: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "config.toml").write_text('editor = "vim"\n')
    config.mkdir()
    (config / "config.toml").symlink_to(dotfiles / "config.toml")
    credentials.store_login("https://a.example", "tok", via="token")
    assert (config / "config.toml").is_symlink()
    assert tomllib.loads((dotfiles / "config.toml").read_text()) == {
        "editor": "vim",
        "host": "https://a.example",
    }
