"""The credentials file and the server URL rules, in process (commands: other suites)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from ltm.cli import credentials
from ltm.cli.errors import CliError


@pytest.fixture(autouse=True)
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("LTM_HOST", "LTM_TOKEN", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("https://LTM.example.org/", "https://ltm.example.org"),
        ("ltm.example.org", "https://ltm.example.org"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("https://abc.execute-api.eu-west-1.amazonaws.com/prod/", None),
        ("  http://[::1]:9000  ", "http://[::1]:9000"),
    ],
)
def test_server_urls_are_normalized(raw: str, url: str | None) -> None:
    expected = url or raw.rstrip("/")
    assert credentials.normalize_host(raw) == expected


@pytest.mark.parametrize(
    "raw", ["", "ftp://host", "https://", "https://u:p@host", "https://host?x=1", "http://h:99999"]
)
def test_bad_server_urls(raw: str) -> None:
    with pytest.raises(CliError):
        credentials.normalize_host(raw)


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
    path = config / "credentials"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["version"] == 1 and set(data["hosts"]) == {"https://a.example", "https://b.example"}

    assert credentials.forget("https://b.example")
    assert credentials.active() is None  # the default went with it; a.example stays stored
    assert credentials.token_for("https://a.example") == "tok-a"
    assert not credentials.forget("https://b.example")


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


def test_the_fingerprint_is_the_start_of_what_the_server_stores() -> None:
    from ltm.service.tokens import hash_token, mint

    token = mint()
    assert credentials.fingerprint(token) == hash_token(token)[:8]
    assert credentials.fingerprint(token) == hashlib.sha256(token.encode()).hexdigest()[:8]


def test_reference_format_and_damage(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config.mkdir(parents=True)
    (config / "credentials").write_text("ltm_reference_token\n")
    assert credentials.active() is None  # a bare token, but no host anywhere
    monkeypatch.setenv("LTM_HOST", "https://ref.example")
    target = credentials.active()
    assert target is not None and target.token == "ltm_reference_token"
    monkeypatch.delenv("LTM_HOST")
    (config / "config.toml").write_text('host = "https://toml.example/"\n')
    target = credentials.active()
    assert target is not None and target.host == "https://toml.example"

    (config / "credentials").write_text("{not json")
    with pytest.raises(CliError, match="damaged"):
        credentials.active()


def test_written_private_even_with_a_loose_umask(config: Path) -> None:
    old = os.umask(0)
    try:
        credentials.store_login("https://a.example", "tok", via="token")
    finally:
        os.umask(old)
    assert stat.S_IMODE((config / "credentials").stat().st_mode) == 0o600
