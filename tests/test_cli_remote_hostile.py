"""A hostile server: what it answers can neither reach the terminal raw, put a file
outside ltm's folders, nor keep a command running forever.

Each server is a real HTTP server on loopback (``clikit.stub_server``) that answers
as an ltm server would, except for the one thing it abuses; ``ltm`` runs as a
person runs it, in a subprocess.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from clikit import Cli, Handler, Seen, json_reply, stub_server
from timing import scaled

from ltm.cli.client import remote
from ltm.cli.client.credentials import Target
from ltm.cli.client.remote import RemoteBackend
from ltm.cli.errors import CliError

ESC = "\x1b]0;owned\x07\x1b[2J"  # sets the terminal's title, then clears the screen
PACKET_ID = "01JS5LTMHOSTILE0000000001A"


def packet(packet_id: str = PACKET_ID) -> dict[str, Any]:
    return {
        "ltm_version": "0.2",
        "id": packet_id,
        "created_at": "2026-05-01T12:00:00Z",
        "goal": "Look harmless",
        "next_step": "Be edited",
    }


def row(packet_id: str = PACKET_ID) -> dict[str, str]:
    return {"id": packet_id, "created_at": "2026-05-01T12:00:00Z", "goal": "Look harmless"}


def hostile(**answers: Any) -> Handler:
    """A handler answering as an ltm server, but with ``answers`` (path or route: reply)."""

    def handler(request: Seen) -> tuple[int, dict[str, str], bytes]:
        path = urlsplit(request.path).path
        for key, answer in answers.items():
            if re.fullmatch(key, f"{request.method} {path}"):
                return answer(request) if callable(answer) else json_reply(200, answer)
        if path == "/v1/healthz":
            return json_reply(200, {"ok": True, "version": "0.2"})
        if path == "/v1/teams":
            return json_reply(200, {"teams": []})
        if path == "/v1/whoami":
            return json_reply(200, {"user": {"id": "u_1", "display": "me"}})
        if (
            path.startswith("/v1/packets/")
            and request.method == "GET"
            and path != "/v1/packets/batch"
        ):
            return json_reply(200, packet())
        return json_reply(404, {"error": "not found"})

    return handler


def against(tmp_path: Path, url: str) -> Cli:
    cli = Cli(tmp_path / "user")
    cli.env["LTM_HOST"] = url
    cli.env["LTM_TOKEN"] = "ltm_" + "0" * 64
    return cli


def no_escapes(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, text


# -- listings that never end -------------------------------------------------------------


def same_page(request: Seen) -> tuple[int, dict[str, str], bytes]:
    return json_reply(200, {"packets": [row()], "next_page_token": "again"})


def test_a_page_token_sent_twice_ends_ls_all_and_export(tmp_path: Path) -> None:
    with stub_server(hostile(**{"GET /v1/packets": same_page})) as server:
        cli = against(tmp_path, server.url)
        for args in (["ls", "--all"], ["export", "--all", "-o", str(tmp_path / "out.jsonl")]):
            line = cli.fails(*args)
            assert "sent a page token it had sent before" in line, line
        assert len(server.seen) < 20


def test_a_listing_that_always_has_a_new_page_stops_at_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    numbers = itertools.count()

    def fresh_page(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply(200, {"packets": [row()], "next_page_token": f"p{next(numbers)}"})

    monkeypatch.setattr(remote, "MAX_PAGES", 5)
    with stub_server(hostile(**{"GET /v1/packets": fresh_page})) as server:
        target = Target(server.url, "ltm_" + "0" * 64, "LTM_HOST")
        backend = RemoteBackend(target, remote.Http(server.url, timeout=scaled(5)))
        with pytest.raises(CliError, match="more than 5 pages"):
            list(backend.walk())
        backend.close()
    pages = [s for s in server.seen if urlsplit(s.path).path == "/v1/packets"]
    assert len(pages) == 6  # the first page and five more


def test_a_page_holds_no_more_rows_than_asked_for(tmp_path: Path) -> None:
    def flood(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply(200, {"packets": [row()] * 500})

    with stub_server(hostile(**{"GET /v1/packets": flood})) as server:
        lines = against(tmp_path, server.url).ok("ls", "--limit", "3").splitlines()
    assert len(lines) == 3


# -- server text on the terminal ----------------------------------------------------------


def test_a_page_token_with_escapes_is_refused(tmp_path: Path) -> None:
    def escapes(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply(200, {"packets": [row()], "next_page_token": ESC})

    with stub_server(hostile(**{"GET /v1/packets": escapes})) as server:
        result = against(tmp_path, server.url).run("ls", "--json")
    assert result.returncode == 1
    assert "sent a malformed page token" in result.stderr
    no_escapes(result.stdout + result.stderr)


def test_an_error_message_with_escapes_is_shown_escaped(tmp_path: Path) -> None:
    def refuse(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply(400, {"error": f"bad{ESC}request"})

    with stub_server(hostile(**{"GET /v1/packets": refuse})) as server:
        line = against(tmp_path, server.url).fails("ls")
    no_escapes(line)
    assert "bad\\u001b]0;owned" in line


def test_an_invites_expiry_with_escapes_is_shown_escaped(tmp_path: Path) -> None:
    invite = {"code": "c" * 32, "url": "https://ltm.example/i/c", "expires_at": f"soon{ESC}"}
    answers = {"POST /v1/teams/core/invites": lambda r: json_reply(201, invite)}
    with stub_server(hostile(**answers)) as server:
        result = against(tmp_path, server.url).run("invite", "-t", "core")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "https://ltm.example/i/c\n"
    assert "expires soon\\u001b]0;owned" in result.stderr
    no_escapes(result.stderr)


@pytest.mark.parametrize(
    "url",
    [f"https://evil.example/{ESC}", "javascript:alert(1)", "file:///etc/passwd", 42],
    ids=["escapes", "javascript", "file", "not text"],
)
def test_invite_and_publish_urls_must_be_plain_web_addresses(tmp_path: Path, url: Any) -> None:
    invite = {"code": "c" * 32, "url": url, "expires_at": "2099-01-01T00:00:00Z"}
    answers = {
        r"POST /v1/teams/core/invites": lambda r: json_reply(201, invite),
        r"GET /v1/packets/.*": lambda r: json_reply(200, packet()),
        r"POST /v1/packets/.*/publish": lambda r: json_reply(
            200, {"id": PACKET_ID, "public_url": url}
        ),
    }
    with stub_server(hostile(**answers)) as server:
        cli = against(tmp_path, server.url)
        for args in (["invite", "-t", "core"], ["publish", PACKET_ID]):
            result = cli.run(*args)
            assert result.returncode == 1, (args, result.stdout, result.stderr)
            assert "sent an unusable" in result.stderr
            assert result.stdout == ""
            no_escapes(result.stderr)


# -- ltm edit --------------------------------------------------------------------------------


@pytest.mark.parametrize("evil_id", ["../../../../escaped-0000000001", f"01JS5L{ESC}000000000"])
def test_edit_keeps_its_file_in_the_edits_folder(tmp_path: Path, evil_id: str) -> None:
    answers = {r"GET /v1/packets/.*": lambda r: json_reply(200, packet(evil_id))}
    with stub_server(hostile(**answers)) as server:
        cli = against(tmp_path, server.url)
        result = cli.run("edit", PACKET_ID, EDITOR="true")
    assert result.returncode == 1
    assert "came back with an invalid id" in result.stderr
    no_escapes(result.stderr)
    made = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert not [p for p in made if "escaped" in p.name or "01JS5L" in p.name]


def test_the_edit_file_name_takes_only_plain_characters_of_an_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ltm.cli.commands.edit import private_file

    monkeypatch.setenv("LTM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = private_file("../../" + ESC + "01JS5L")
    assert path.parent == tmp_path / "state" / "edits"
    assert re.fullmatch(r"[A-Za-z0-9_-]+\.json", path.name), path.name


def test_json_output_of_a_listing_is_the_servers_rows(tmp_path: Path) -> None:
    """The guards leave an honest server's answer as it is."""

    def pages(request: Seen) -> tuple[int, dict[str, str], bytes]:
        token = parse_qs(urlsplit(request.path).query).get("page_token")
        if token:
            return json_reply(200, {"packets": [row("01JS5LTMHOSTILE0000000002B")]})
        return json_reply(200, {"packets": [row()], "next_page_token": "eyJvIjoxfQ=="})

    with stub_server(hostile(**{"GET /v1/packets": pages})) as server:
        out = json.loads(against(tmp_path, server.url).ok("ls", "--all", "--json"))
    assert [r["id"] for r in out["packets"]] == [PACKET_ID, "01JS5LTMHOSTILE0000000002B"]


def test_only_team_names_of_the_protocol_are_recorded(tmp_path: Path) -> None:
    """A server's team list decides which server ``-t TEAM`` goes to: a name no team may
    have (escapes, a path, capitals, spaces) is never recorded, as ``join`` refuses it."""
    teams = [{"name": n} for n in ("core", f"evil{ESC}", "../../x", "Core Team", "")]
    answers = {"GET /v1/teams": {"teams": teams}, "GET /v1/packets": {"packets": []}}
    with stub_server(hostile(**answers)) as server:
        cli = Cli(tmp_path / "user")
        cli.ok("auth", server.url, "--with-token", stdin="ltm_" + "0" * 64)
        cli.ok("teams", "ls")
        hosts = json.loads((cli.config / "hosts.json").read_text())
    [entry] = hosts["hosts"].values()
    assert entry["teams"] == ["core"]
