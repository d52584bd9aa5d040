"""Every failure against a server is one clear line, a next step and a non-zero exit.

Refusals our server can give are produced by the real ``ltm server run``
(401 from a revoked token, 403, 404, 409, 410 from an expired and from a used
invite, 413). What our server never does — a dead port, a TLS endpoint with an
untrusted certificate, a server that never answers, a proxy in front answering
502 or an HTML 413, a web server that is not ltm at all — is played by small
stdlib servers on loopback.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clikit import (
    Cli,
    Seen,
    free_port,
    json_reply,
    signed_in,
    silent_server,
    stub_server,
    trickling_server,
)
from serverkit import Server, ltm_server, make_packet, running_server
from timing import scaled

CONTENT = {"goal": "Keep errors short", "next_step": "Read the one line"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("cli-errors")) as srv:
        yield srv


def against(tmp_path: Path, url: str, token: str = "ltm_" + "0" * 64) -> Cli:
    """A user whose configured server is ``url`` (signed in with ``token``)."""
    cli = Cli(tmp_path / "user")
    cli.env["LTM_HOST"] = url
    cli.env["LTM_TOKEN"] = token
    return cli


# -- the network ---------------------------------------------------------------------


def test_closed_port(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    cli = against(tmp_path, url)
    # A save is kept in the outbox instead (tests/test_outbox.py); push names the failure.
    for args in (["ls"], ["resume", "01ABC"], ["teams", "ls"], ["push", "-"]):
        stdin = json.dumps(make_packet()) if args[0] == "push" else ""
        line = cli.fails(*args, stdin=stdin)
        assert line == (
            f"ltm: cannot reach {url}: connection refused — is the server running there?"
            " (check the URL with: ltm whoami; work offline with --local)"
        )
    # whoami answers from this machine's files, without advice that names itself
    who = cli.run("whoami")
    assert who.returncode == 0 and url in who.stdout
    assert who.stderr == (
        f"ltm: warning: cannot reach {url}: connection refused; shown from this machine's files\n"
    )
    fresh = Cli(tmp_path / "fresh")
    assert "connection refused" in fresh.fails("auth", url, "--with-token", stdin="some-token")
    assert not (fresh.config / "credentials").exists()
    assert "connection refused" in fresh.fails("join", f"{url}/v1/invites/" + "c" * 32)


def test_debug_shows_the_details(tmp_path: Path) -> None:
    cli = against(tmp_path, f"http://127.0.0.1:{free_port()}")
    result = cli.run("--debug", "ls")
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "ConnectionRefusedError" in result.stderr


def test_timeout(tmp_path: Path) -> None:
    with silent_server() as url:
        cli = against(tmp_path, url)
        line = cli.fails("ls", LTM_TIMEOUT="1")
    assert line == (
        f"ltm: {url} did not answer within 1 s — try again, or allow more time:"
        " ltm config set timeout 30"
    )


def test_a_trickling_server_gets_the_timeout_for_the_whole_request(tmp_path: Path) -> None:
    """A byte every tenth of a second never lets a per-read timeout fire: the timeout is
    the whole request's, headers and body together, and ends it with the same line."""
    from ltm.cli.terminal.network import more_time

    timeout = f"{scaled(1):g}"
    with trickling_server(gap=0.1) as url:
        cli = against(tmp_path, url)
        result = cli.run("ls", LTM_TIMEOUT=timeout, timeout=scaled(30))
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == (
        f"ltm: {url} did not answer within {timeout} s — try again, or allow more time:"
        f" ltm config set timeout {more_time(float(timeout)):g}"
    )


def test_a_name_lookup_that_hangs_gets_the_timeout_too(tmp_path: Path) -> None:
    """The system's resolver takes no timeout (and retries for half a minute): the name
    lookup is part of the request's time."""
    hang = tmp_path / "resolver"
    hang.mkdir()
    # The ltm process's resolver, for this one name: no answer (a dead DNS server).
    (hang / "sitecustomize.py").write_text(
        "import socket, time\n"
        "real = socket.getaddrinfo\n"
        "def slow(host, *args, **kwargs):\n"
        "    if host == 'ltm.unanswered.test':\n"
        "        time.sleep(600)\n"
        "    return real(host, *args, **kwargs)\n"
        "socket.getaddrinfo = slow\n"
    )
    url = "http://ltm.unanswered.test:8080"
    cli = against(tmp_path, url)
    timeout = f"{scaled(1):g}"
    result = cli.run("ls", LTM_TIMEOUT=timeout, PYTHONPATH=str(hang), timeout=scaled(30))
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == (
        f"ltm: cannot reach {url}: no connection within {timeout} s — check the URL and"
        " your network (work offline with --local)"
    )


@pytest.mark.parametrize(("waited", "suggested"), [(1, 30), (10, 30), (30, 60), (400, 600)])
def test_a_timeout_suggests_more_time_than_was_waited(waited: float, suggested: int) -> None:
    from ltm.cli.client.transport import TimedOut
    from ltm.cli.terminal.network import describe

    line = describe(TimedOut("http://h", timeout=waited))
    assert line.endswith(f"allow more time: ltm config set timeout {suggested}")


def test_a_timeout_out_of_range_says_which_bounds(tmp_path: Path) -> None:
    """0 is refused: "between 0 and 600" read as if 0 were allowed. The setting and
    LTM_TIMEOUT are judged alike."""
    said = "ltm: timeout must be more than 0 and at most 600 seconds, got '0'"
    cli = Cli(tmp_path)
    assert cli.fails("config", "set", "timeout", "0", code=2) == said
    with silent_server() as url:
        assert against(tmp_path, url).fails("ls", LTM_TIMEOUT="0") == f"{said}, in LTM_TIMEOUT"


def test_timeout_from_the_config(tmp_path: Path) -> None:
    with silent_server() as url:
        cli = against(tmp_path, url)
        cli.ok("config", "set", "timeout", "0.5")
        assert "did not answer within 0.5 s" in cli.fails("ls")


def _certificate(directory: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _ltm_like(request: Seen) -> tuple[int, dict[str, str], bytes]:
    if request.path == "/v1/healthz":
        return json_reply(200, {"ok": True, "version": "0.2"})
    if request.path.startswith("/v1/packets"):
        return json_reply(200, {"packets": []})
    return json_reply(404, {"error": "not found"})


def test_tls_failure_and_a_private_ca(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with stub_server(_ltm_like, tls=context) as stub:
        cli = against(tmp_path, stub.url)
        line = cli.fails("ls")
        assert line.startswith(f"ltm: TLS failure with {stub.url}: certificate not trusted (")
        assert line.endswith("point SSL_CERT_FILE at its certificate bundle")
        fresh = Cli(tmp_path / "fresh")
        assert "TLS failure" in fresh.fails("auth", stub.url, "--with-token", stdin="tok")
        # Trusting the server's CA is the fix the message names.
        fresh.ok("auth", stub.url, "--with-token", stdin="tok", SSL_CERT_FILE=str(cert))
        assert fresh.ok("ls", SSL_CERT_FILE=str(cert)) == ""


def test_https_to_a_plain_http_server(server: Server, tmp_path: Path) -> None:
    url = server.url.replace("http://", "https://")
    cli = against(tmp_path, url)
    line = cli.fails("ls", LTM_TIMEOUT="1")
    assert line.startswith(f"ltm: TLS failure with {url}")
    assert f"use {server.url}" in line


# -- refusals from our server --------------------------------------------------------


def test_revoked_token(server: Server, tmp_path: Path) -> None:
    issued = ltm_server("issue-token", "rita", "--label", "rita-laptop", "--db", str(server.db))
    assert issued.returncode == 0, issued.stderr
    cli = Cli(tmp_path / "rita")
    cli.ok("auth", server.url, "--with-token", stdin=issued.stdout.strip())
    cli.ok("ls")
    revoked = ltm_server("revoke-token", "rita-laptop", "--db", str(server.db))
    assert revoked.returncode == 0, revoked.stderr
    for args in (["ls"], ["resume", "01ABC"], ["teams", "ls"], ["invite", "-t", "x"]):
        assert cli.fails(*args) == (
            f"ltm: token rejected by {server.url} — run: ltm auth {server.url}"
        )


def test_a_wrong_token_is_not_saved(server: Server, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "wrong")
    line = cli.fails("auth", server.url, "--with-token", stdin="ltm_" + "f" * 64)
    assert line.startswith(f"ltm: token rejected by {server.url} (invalid token)")
    assert "nothing was saved" in line
    assert not (cli.config / "credentials").exists()


def test_a_token_pasted_with_what_is_not_a_token(server: Server, tmp_path: Path) -> None:
    _, token = server.issue("paster")
    # A file saved with a byte order mark (Notepad) or CRLF: still the token.
    cli = Cli(tmp_path / "bom")
    cli.ok("auth", server.url, "--with-token", stdin=f"\ufeff{token}\r\n")
    assert cli.credentials()["token"] == token
    # Copied with a chat's curly quotes: said as such, before anything is sent.
    fresh = Cli(tmp_path / "quotes")
    line = fresh.fails("auth", server.url, "--with-token", code=2, stdin=f"\u201c{token}\u201d")
    assert "printable ASCII" in line and "latin-1" not in line, line
    assert not (fresh.config / "credentials").exists()


def test_token_from_the_environment_rejected(server: Server, tmp_path: Path) -> None:
    cli = against(tmp_path, server.url, "ltm_" + "e" * 64)
    assert "(it comes from LTM_TOKEN) — fix LTM_TOKEN" in cli.fails("ls")


def test_a_token_from_the_environment_that_cannot_be_one(server: Server, tmp_path: Path) -> None:
    _, token = server.issue("quoted")
    cli = against(tmp_path, server.url, f"\u201c{token}\u201d")  # pasted with curly quotes
    line = cli.fails("ls", code=2)
    assert "LTM_TOKEN" in line and "latin-1" not in line, line


def test_403_404_409(server: Server, tmp_path: Path) -> None:
    owner = signed_in(server, tmp_path / "olga", "olga")
    member = signed_in(server, tmp_path / "max", "max")
    owner.ok("teams", "create", "errs")
    member.ok("join", owner.ok("invite", "-t", "errs").strip())

    assert member.fails("teams", "rm", "errs", "--yes") == (
        "ltm: only the owner of team 'errs' can delete it — ask them, or leave it:"
        " ltm teams leave errs"
    )
    assert "only the owner of team 'errs' can remove members" in member.fails(
        "teams", "kick", "errs", "olga", "--yes"
    )
    assert "owner cannot leave" in owner.fails("teams", "leave", "errs", "--yes")

    assert owner.fails("teams", "create", "errs") == (
        f"ltm: the team name 'errs' is taken on {server.url} — pick another name"
    )
    packet_id = owner.ok("save", "-", stdin=json.dumps(CONTENT)).strip()
    stolen = json.loads(owner.ok("pull", packet_id))
    line = member.fails("push", "-", stdin=json.dumps(stolen))
    assert line.startswith(f"ltm: packet {packet_id} already exists on {server.url}")
    assert "nothing was changed" in line
    assert json.loads(owner.ok("pull", packet_id)) == stolen

    assert member.fails("show", packet_id) == (
        f"ltm: no packet {packet_id} among yours on {server.url} (a team's? add -t TEAM)"
        " — list them with: ltm ls"
    )
    assert member.fails("ls", "-t", "nope") == (
        f"ltm: team 'nope' not found on {server.url}, or you are not a member — see your"
        " teams: ltm teams ls"
    )
    assert "no packet 01ZZ in team errs" in member.fails("rm", "01ZZ", "-t", "errs", "--yes")
    assert "no member 'ghost' in team errs" in owner.fails(
        "teams", "kick", "errs", "ghost", "--yes"
    )


def test_expired_used_and_unknown_invites(server: Server, tmp_path: Path) -> None:
    from ltm.service.invites import hash_code, invite_url
    from ltm.store import Invite
    from ltm.store.sqlite import SqliteStore

    owner = signed_in(server, tmp_path / "ivy", "ivy")
    owner.ok("teams", "create", "invites")
    # An invite made eight days ago, written into the server's own store.
    code = "expired-" + "x" * 24
    store = SqliteStore(server.db)
    try:
        team = store.get_team("invites")
        assert team is not None
        now = datetime.now(UTC)
        store.create_invite(
            Invite(hash_code(code), team.id, team.owner_id, now - timedelta(days=8),
                   now - timedelta(days=1))
        )  # fmt: skip
    finally:
        store.close()
    newcomer = Cli(tmp_path / "newcomer")
    expected = (
        "ltm: this invite has expired, was already used, or does not exist — ask a team member"
        " for a new one: ltm invite -t TEAM"
    )
    assert newcomer.fails("join", invite_url(server.url, code)) == expected
    assert not (newcomer.config / "credentials").exists()

    url = owner.ok("invite", "-t", "invites").strip()
    newcomer.ok("join", url)
    assert Cli(tmp_path / "late").fails("join", url) == expected  # single use

    unknown = f"{server.url}/v1/invites/" + "u" * 32
    # An unknown code is 410 too, as on the reference (internal/api/api.go, acceptInvite).
    assert Cli(tmp_path / "lost").fails("join", unknown) == expected
    assert "not an invite URL" in newcomer.fails("join", "https://example.org/x/y", code=2)


def test_413_from_our_server(server: Server, tmp_path: Path) -> None:
    cli = signed_in(server, tmp_path / "big", "big")
    # Just under 32 KiB as sent (it parses); with the id and date filled in, the packet
    # passes 32 KiB, which only --lenient lets through the client's own check.
    data = {**CONTENT, "constraints": ["x" * 1024] * 31}
    filler = 32_740 - len(json.dumps(data, separators=(",", ":"))) - 4
    data["constraints"].append("y" * filler)
    big = json.dumps(data, separators=(",", ":"))
    assert 32_700 < len(big) < 32_768 and filler <= 1024
    strict = cli.run("save", "-", stdin=big)
    assert strict.returncode == 1 and "over the 32768-byte limit" in strict.stderr
    line = cli.fails("save", "--lenient", "-", stdin=big)
    assert line.startswith(f"ltm: {server.url} refused the request as too large (")
    assert line.endswith("a packet may be at most 32 KiB; trim it")


def test_ctrl_c_while_a_verb_waits_for_its_server_says_so(tmp_path: Path) -> None:
    """Ctrl-C ends the verb with one line and status 130, as a shell expects: typer turned
    it into a silent exit 130, so a verb seemed to stop for no reason."""
    import os
    import signal
    import threading

    from clikit import LTM

    started = threading.Event()
    pid: list[int] = []

    def slow(request: Seen) -> tuple[int, dict[str, str], bytes]:
        started.wait(scaled(30))
        os.kill(pid[0], signal.SIGINT)  # the person presses Ctrl-C while ltm waits
        return json_reply(200, {"packets": []})

    with stub_server(slow) as stub:
        cli = against(tmp_path, stub.url)
        proc = subprocess.Popen(
            [LTM, "ls"], env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        pid.append(proc.pid)
        started.set()
        _, err = proc.communicate(timeout=scaled(60))
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "ltm: interrupted", err


# -- other servers and what stands in front of them ----------------------------------


def test_5xx_from_a_proxy_and_from_a_server(tmp_path: Path) -> None:
    def gateway(request: Seen) -> tuple[int, dict[str, str], bytes]:
        if request.path.startswith("/v1/packets/"):
            return json_reply(500, {"error": "internal server error"})
        return 502, {"Content-Type": "text/html"}, b"<html><h1>502 Bad Gateway</h1></html>"

    with stub_server(gateway) as stub:
        cli = against(tmp_path, stub.url)
        assert cli.fails("ls") == (
            f"ltm: {stub.url} failed with HTTP 502 (an HTML page) — a problem on the server's"
            " side; try again later, or work offline with --local"
        )
        assert cli.fails("show", "01ABCDEFGHJK") == (
            f"ltm: {stub.url} failed with HTTP 500 (internal server error) — a problem on the"
            " server's side; try again later, or work offline with --local"
        )


def test_413_from_a_proxy(tmp_path: Path) -> None:
    def nginx(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return 413, {"Content-Type": "text/html"}, b"<html>413 Request Entity Too Large</html>"

    with stub_server(nginx) as stub:
        cli = against(tmp_path, stub.url)
        line = cli.fails("save", "-", stdin=json.dumps(CONTENT))
    assert line == (
        f"ltm: {stub.url} refused the request as too large (an HTML page) — a packet may be"
        " at most 32 KiB; trim it"
    )


def test_a_web_server_that_is_not_ltm(tmp_path: Path) -> None:
    def website(request: Seen) -> tuple[int, dict[str, str], bytes]:
        if request.path == "/":
            return 200, {"Content-Type": "text/html"}, b"<html>hello</html>"
        return 404, {"Content-Type": "text/html"}, b"<html>Not Found</html>"

    with stub_server(website) as stub:
        fresh = Cli(tmp_path / "fresh")
        assert fresh.fails("auth", stub.url, "--with-token", stdin="tok") == (
            f"ltm: {stub.url} does not look like an ltm server (GET /v1/healthz: HTTP 404,"
            " an HTML page) — check the URL"
        )
        cli = against(tmp_path, stub.url)
        assert "not an ltm error — is it an ltm server?" in cli.fails("ls")


def test_unknown_name(tmp_path: Path) -> None:
    cli = against(tmp_path, "http://no-such-host.invalid")
    assert cli.fails("ls") == (
        "ltm: cannot reach http://no-such-host.invalid: the name no-such-host.invalid does not"
        " resolve — check the URL and your network (ltm whoami shows the configured server)"
    )


def test_not_signed_in(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "nobody")
    cli.ok("config", "set", "host", "https://ltm.example.org")
    assert cli.fails("ls") == (
        "ltm: not signed in to https://ltm.example.org — run: ltm auth https://ltm.example.org"
        " (or use --local for the local store)"
    )
    assert "teams live on a server" in Cli(tmp_path / "offline").fails("teams", "ls")
    assert "not a server URL" in cli.fails("auth", "ftp://x", code=2)


@pytest.mark.parametrize("url", ["http://a b", "https://ltm.example.org/a b", "http://a\tb"])
def test_a_url_with_a_space_is_not_a_server(tmp_path: Path, url: str) -> None:
    """ "http://a b" was the server "a b": ltm said to sign in there, or that it did not
    resolve. Said as bad usage (exit 2), as any other bad value given: a script can tell
    it from a server that failed."""
    said = f"ltm: not a server URL: {url!r}; give one like https://ltm.example.org"
    cli = Cli(tmp_path)
    assert cli.fails("-H", url, "ls", code=2) == said
    assert cli.fails("ls", code=2, LTM_HOST=url) == said
    assert cli.fails("auth", url, "--with-token", stdin="tok", code=2) == said
    assert cli.fails("config", "set", "host", url, code=2) == said


def test_a_redirect_is_not_followed(tmp_path: Path) -> None:
    def moved(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return 301, {"Location": "https://elsewhere.example" + request.path}, b""

    with stub_server(moved) as stub:
        cli = against(tmp_path, stub.url)
        line = cli.fails("ls")
        assert len(stub.seen) == 1  # asked once, not followed
    assert line.startswith(
        f"ltm: {stub.url} redirects (HTTP 301) to https://elsewhere.example/v1/packets?limit=50"
    )
    assert line.endswith("sign in at its new address: ltm auth NEW-URL")


@pytest.mark.parametrize(
    ("status", "headers", "said"),
    [
        (429, {"Retry-After": "30"}, "is rate-limiting requests (slow down) — wait a bit"),
        (301, {"Location": "https://ltm.example.org/v1/healthz"}, "redirects (HTTP 301) to"),
    ],
)
def test_auth_at_a_server_rate_limiting_or_moved_says_so(
    tmp_path: Path, status: int, headers: dict[str, str], said: str
) -> None:
    """``ltm auth`` asks /v1/healthz first: a 429 or a redirect there was "does not look
    like an ltm server — check the URL", when the URL was right and the fix is to wait, or
    to sign in at the address it moved to."""

    def answer(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json", **headers}, b'{"error": "slow down"}'

    with stub_server(answer) as stub:
        line = Cli(tmp_path).fails("auth", stub.url, "--with-token", stdin="tok")
    assert line.startswith(f"ltm: {stub.url} ") and said in line, line
    assert "does not look like an ltm server" not in line


def test_a_web_server_answering_200_to_everything_is_not_told_to_have_deleted(
    tmp_path: Path,
) -> None:
    """A URL that reaches a web site answering every address with its page (200): a delete,
    a leave or an unpublish there changed nothing, but ltm said "deleted team core"; a
    packet read there was "not readable JSON", as if it were one."""

    def site(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/html"}, b"<html>Welcome</html>"

    with stub_server(site) as stub:
        cli = against(tmp_path, stub.url)
        said = (
            f"ltm: {stub.url} answered HTTP 200 with a text/html body, not ltm JSON — check that"
            f" {stub.url} is an ltm server"
        )
        for verb in (
            ["rm", "01ABCDEFGHJKLMNPQRSTVWXYZ0", "--yes"],
            ["teams", "rm", "core", "--yes"],
            ["teams", "leave", "core", "--yes"],
            ["unpublish", "01ABCDEFGHJKLMNPQRSTVWXYZ0", "--yes"],
            ["unshare", "01ABCDEFGHJKLMNPQRSTVWXYZ0", "bob"],
            # and a packet read there is no packet ("is not readable JSON", it said)
            ["show", "01ABCDEFGHJKLMNPQRSTVWXYZ0"],
            ["pull", "01ABCDEFGHJKLMNPQRSTVWXYZ0"],
            ["resume", "01ABCDEFGHJKLMNPQRSTVWXYZ0"],
        ):
            assert cli.fails(*verb) == said, verb
