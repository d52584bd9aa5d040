"""Self-hosted sign-in from a second machine, end to end with the real ``ltm`` commands.

A new machine runs ``ltm auth HOST`` (the device flow) and shows a code; on a
machine already signed in, the same person runs ``ltm approve CODE``; the new
machine stores its own token and ``ltm ls`` works there. Also: denial, expiry,
a wrong code, and ``ltm tokens`` / ``ltm tokens revoke``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from clikit import Cli, Seen, answered, json_reply, signed_in, stub_server
from devicekit import AuthProcess, device_server
from serverkit import Server, make_packet
from timing import scaled


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with device_server(tmp_path_factory.mktemp("device-cli")) as srv:
        yield srv


def test_new_machine_signs_in_with_ltm_approve(server: Server, tmp_path: Path) -> None:
    laptop = signed_in(server, tmp_path / "laptop", "dana")
    laptop.ok("save", "-", stdin=json.dumps(make_packet(goal="Dana's packet")))

    desktop = Cli(tmp_path / "desktop")
    auth = AuthProcess(desktop, server.url)
    assert auth.url() == server.url + "/device"
    code = auth.code()
    approved = laptop.run("approve", code, "--yes")
    assert approved.returncode == 0, approved.stderr
    assert "approved the sign-in of ltm-python/" in approved.stderr
    assert "from 127.0.0.1" in approved.stderr and "with full access" in approved.stderr
    assert auth.finish() == 0, auth.output()
    assert f"signed in to {server.url}" in auth.output()

    creds = desktop.credentials()
    assert creds["default"] == server.url
    entry = creds["hosts"][server.url]
    assert entry["via"] == "device" and entry["token"].startswith("ltm_")
    assert (desktop.config / "credentials").stat().st_mode & 0o777 == 0o600
    # Same person: the desktop sees the laptop's packet.
    listed = desktop.ok("ls", "--json")
    assert "Dana's packet" in listed

    # Each machine has its own token; the desktop's is marked as this machine's.
    rows = json.loads(desktop.ok("tokens", "--json"))["tokens"]
    assert len(rows) == 2
    mine = [row for row in rows if row["current"]]
    assert len(mine) == 1 and re.fullmatch(r"ltm-python-[0-9.]+-[0-9a-f]{6}", mine[0]["label"])
    table = laptop.ok("tokens")
    assert mine[0]["label"] in table and "LAST USED" in table
    assert "ltm_" not in table

    # The laptop revokes the desktop's token: the desktop is signed out at once.
    laptop.ok("tokens", "revoke", mine[0]["label"], "--yes")
    line = desktop.fails("ls")
    assert "token rejected" in line
    assert "no token labelled" in laptop.fails("tokens", "revoke", mine[0]["label"], "--yes")

    # The laptop revokes its own: the line says what is so (the token stays in its file,
    # rejected, not "signed out", which whoami would then contradict) and what to run.
    own = next(row for row in json.loads(laptop.ok("tokens", "--json"))["tokens"] if row["current"])
    said = laptop.run("tokens", "revoke", own["label"], "--yes")
    assert said.returncode == 0, said.stderr
    assert said.stderr.splitlines()[-1] == (
        f"the token this machine used on {server.url} no longer works; sign in again with:"
        f" ltm auth {server.url}"
    )
    assert f"token rejected by {server.url}" in laptop.fails("whoami")


def test_approve_asks_first_and_refuses_without_a_terminal(server: Server, tmp_path: Path) -> None:
    """RFC 8628 section 5.4: a code can come from someone who started the sign-in on their
    own machine. ``ltm approve`` approves nothing it has not shown: without a terminal it
    refuses (exit 2) unless --yes, and the device still waits."""
    laptop = signed_in(server, tmp_path / "laptop", "ida")
    desktop = Cli(tmp_path / "desktop")
    auth = AuthProcess(desktop, server.url)
    code = auth.code()
    line = laptop.fails("approve", code, code=2)
    assert f"ltm approve {code}" in line and "nothing approved" in line and "--yes" in line
    assert "signs another device in as you" in line and "cannot be undone" not in line
    assert laptop.fails("approve", code, "--json", code=2) == line
    # Still waiting: approved now, the desktop signs in.
    approved = laptop.run("approve", code, "--yes", "--json")
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "approved"
    assert auth.finish() == 0, auth.output()


def test_approve_on_a_terminal_shows_the_device_before_asking(
    server: Server, tmp_path: Path
) -> None:
    laptop = signed_in(server, tmp_path / "laptop", "jo")
    desktop = Cli(tmp_path / "desktop")
    auth = AuthProcess(desktop, server.url)
    code = auth.code()
    for answer, status in (("n", 1), ("y", 0)):
        asked, shown, exited = answered(laptop, ["approve", code], answer)
        assert exited == status, asked + shown
        assert re.search(r"ltm-python/\S+ \(asked .* from 127\.0\.0\.1\) asks to sign in", asked)
        assert f"to {server.url} as jo: it gets a token of its own, with full access" in asked
        if answer == "n":
            assert "nothing approved" in shown  # and the device still waits: approved next
    assert "approved the sign-in of ltm-python/" in shown
    assert auth.finish() == 0, auth.output()


@pytest.mark.parametrize(
    "refusal",
    [
        (405, {"error": "method not allowed"}),  # self-hosted
        (403, {"message": "Missing Authentication Token"}),  # API Gateway
    ],
)
def test_approve_asks_without_the_device_on_a_server_without_the_look(
    tmp_path: Path, refusal: tuple[int, dict[str, str]]
) -> None:
    """An older ltm server has only ``POST /v1/device/approve``: the question is still
    asked, without the device's details."""

    def older(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if seen.path == "/v1/healthz":
            return json_reply(200, {"ok": True})
        if seen.method == "GET" and seen.path.startswith("/v1/device/approve"):
            return json_reply(*refusal)
        if seen.method == "POST" and seen.path == "/v1/device/approve":
            device = {"client_id": "ltm-cli", "name": "old-box", "scope": "read write"}
            return json_reply(200, {"status": "approved", "device": device})
        return json_reply(200, {"user": {"id": "u1", "display": "kim"}, "scope": "read write"})

    with stub_server(older) as stub:
        laptop = Cli(tmp_path / "laptop")
        laptop.ok("auth", stub.url, "--with-token", stdin="ltm_" + "a" * 40)
        asked, shown, status = answered(laptop, ["approve", "BCDF-GHJK"], "y")
    assert status == 0, asked + shown
    assert f"sign a device in to {stub.url} as kim" in asked and "BCDF-GHJK" in asked
    assert "approved the sign-in of old-box" in shown
    assert [s.method for s in stub.seen if s.path.startswith("/v1/device/approve")] == [
        "GET",
        "POST",
    ]


def test_denied_sign_in_stores_nothing(server: Server, tmp_path: Path) -> None:
    laptop = signed_in(server, tmp_path / "laptop", "erin")
    stranger = Cli(tmp_path / "stranger")
    auth = AuthProcess(stranger, server.url)
    denied = laptop.run("approve", auth.code(), "--deny")
    assert denied.returncode == 0 and "denied the sign-in" in denied.stderr
    assert auth.finish() == 1
    assert "declined" in auth.output()
    assert not (stranger.config / "credentials").exists()
    # A decided code cannot be decided again.
    assert "already approved or denied" in laptop.fails("approve", auth.code(), "--yes")


def test_wrong_code(server: Server, tmp_path: Path) -> None:
    laptop = signed_in(server, tmp_path / "laptop", "frank")
    line = laptop.fails("approve", "BCDF-GHJK", "--yes")
    assert "no sign-in is waiting for code BCDF-GHJK" in line


def test_expired_code(tmp_path: Path) -> None:
    with device_server(tmp_path / "srv", LTM_DEVICE_EXPIRES_IN="3") as srv:
        laptop = signed_in(srv, tmp_path / "laptop", "gina")
        late = Cli(tmp_path / "late")
        auth = AuthProcess(late, srv.url)
        code = auth.code()
        assert auth.finish(timeout=scaled(30)) == 1
        assert "expired before it was approved" in auth.output()
        time.sleep(1.5)  # the client gives up an interval early; let the server's clock pass too
        assert "no sign-in is waiting" in laptop.fails("approve", code, "--yes")
        assert not (late.config / "credentials").exists()


def test_approve_on_a_server_without_device_approval_says_so(tmp_path: Path) -> None:
    """A reference server has no ``/v1/device/approve`` at all (a plain-text 404)."""

    def reference(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if seen.path == "/v1/healthz":
            return json_reply(200, {"ok": True})
        if seen.path.startswith("/v1/device/approve"):
            return 404, {"Content-Type": "text/plain"}, b"404 page not found"
        return json_reply(200, {"user": {"id": "u1", "display": "kim"}, "scope": "read write"})

    with stub_server(reference) as stub:
        laptop = Cli(tmp_path / "laptop")
        laptop.ok("auth", stub.url, "--with-token", stdin="ltm_" + "a" * 40)
        for extra in ("--yes", "--deny"):
            line = laptop.fails("approve", "BCDF-GHJK", extra)
            assert "does not offer device approval" in line, line


def test_approve_and_tokens_need_a_server(tmp_path: Path) -> None:
    offline = Cli(tmp_path / "offline")
    assert "needs a server" in offline.fails("approve", "BCDF-GHJK")
    assert "needs a server" in offline.fails("tokens")


def test_a_lifetime_set_by_the_operator_shows_on_each_signed_in_device(tmp_path: Path) -> None:
    """With ``LTM_DEVICE_TOKEN_DAYS`` a device's token says when it stops working; the
    tokens an operator issues by hand keep working until revoked."""
    with device_server(tmp_path / "server", LTM_DEVICE_TOKEN_DAYS="30") as server:
        laptop = signed_in(server, tmp_path / "laptop", "gus")
        desktop = Cli(tmp_path / "desktop")
        auth = AuthProcess(desktop, server.url)
        assert laptop.run("approve", auth.code(), "--yes").returncode == 0
        assert auth.finish() == 0, auth.output()
        rows = json.loads(desktop.ok("tokens", "--json"))["tokens"]
    mine = next(row for row in rows if row["current"])
    theirs = next(row for row in rows if not row["current"])
    issued = datetime.fromisoformat(mine["created_at"].replace("Z", "+00:00"))
    expires = datetime.fromisoformat(mine["expires_at"].replace("Z", "+00:00"))
    assert expires - issued == timedelta(days=30)
    assert theirs["expires_at"] is None  # the hand-issued token of `ltm server issue-token`
