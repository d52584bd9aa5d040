"""Signing in from a browser: the device-flow client (RFC 8628) against real HTTP servers.

``OAuthServer`` is a small loopback server implementing the protocol's two
endpoints exactly as the protocol notes describe them (form-encoded
``POST /oauth/authorize_device`` and ``POST /oauth/token``), with a script of
answers per test; it also answers ``/v1/healthz`` and ``/v1/packets`` so the
whole ``ltm auth HOST`` command can run against it. The client's waits are
counted in process (a fake ``sleep``) and, for ``slow_down``, also measured
from the server's side with the real command. The last tests run the same
flow against a real ``ltm server run``, approving from a second signed-in
device through ``POST /v1/device/approve``.
"""

from __future__ import annotations

import json
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpkit
import pytest
from clikit import LTM, Cli, Seen, json_reply, stub_server
from serverkit import Server, running_server
from timing import scaled

from ltm.cli.client import device
from ltm.cli.client.remote import Http
from ltm.cli.errors import CliError

TOKEN = "ltm_" + "d" * 64
GRANT = "urn:ietf:params:oauth:grant-type:device_code"


class OAuthServer:
    """Answers ``/oauth/token`` polls from a script: each entry is an OAuth error or "ok"."""

    def __init__(self, script: list[str], *, interval: float = 1, expires_in: float = 600,
                 complete: bool = True) -> None:  # fmt: skip
        self.script = list(script)
        self.interval = interval
        self.expires_in = expires_in
        self.complete = complete
        self.lock = threading.Lock()

    def __call__(self, request: Seen) -> tuple[int, dict[str, str], bytes]:
        if request.path == "/v1/healthz":
            return json_reply(200, {"ok": True, "version": "0.2"})
        if request.path.startswith("/v1/packets"):
            if request.headers.get("authorization") == f"Bearer {TOKEN}":
                return json_reply(200, {"packets": []})
            return json_reply(401, {"error": "invalid token"})
        form = {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
        if request.path == "/oauth/authorize_device" and request.method == "POST":
            assert request.headers["content-type"] == "application/x-www-form-urlencoded"
            assert form == {"client_id": "ltm-cli", "scope": "read write"}
            answer = {
                "device_code": "dev-code-123",
                "user_code": "WDJB-MJHT",
                "verification_uri": "http://127.0.0.1/device",
                "expires_in": self.expires_in,
                "interval": self.interval,
            }
            if self.complete:
                answer["verification_uri_complete"] = "http://127.0.0.1/device?code=WDJB-MJHT"
            return json_reply(200, answer)
        if request.path == "/oauth/token" and request.method == "POST":
            assert form == {"grant_type": GRANT, "device_code": "dev-code-123",
                            "client_id": "ltm-cli"}  # fmt: skip
            with self.lock:
                step = self.script.pop(0) if self.script else "authorization_pending"
            status, _, retry = step.partition(":")  # "503:7": HTTP 503 with Retry-After 7
            if status.isdigit():  # a proxy's, or a busy server's
                headers = {"Retry-After": retry} if retry else {}
                return int(status), headers, b"busy, try again"
            if step == "ok":
                return json_reply(200, {"access_token": TOKEN, "token_type": "Bearer",
                                        "scope": "read write"})  # fmt: skip
            return json_reply(400, {"error": step, "error_description": f"test: {step}"})
        return json_reply(404, {"error": "not found"})


class Clock:
    """A fake clock that ``sleep`` moves forward, recording every wait."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def sign_in(url: str, clock: Clock, said: list[str], *, browser: bool = False) -> str:
    http = Http(url, timeout=scaled(5))
    try:
        return device.sign_in(
            http, open_browser=browser, say=said.append, sleep=clock.sleep, clock=clock
        )
    finally:
        http.close()


def polls(seen: list[Seen]) -> list[Seen]:
    return [r for r in seen if r.path == "/oauth/token"]


# -- the client, in process, against a real HTTP server --------------------------------


def test_success_after_pending_polls_at_the_interval() -> None:
    oauth = OAuthServer(["authorization_pending", "authorization_pending", "ok"], interval=2)
    clock, said = Clock(), []
    with stub_server(oauth) as stub:
        assert sign_in(stub.url, clock, said) == TOKEN
        assert len(polls(stub.seen)) == 3
    assert clock.waits == [2, 2, 2]
    shown = "\n".join(said)
    assert "open http://127.0.0.1/device" in shown and "enter the code: WDJB-MJHT" in shown


def test_slow_down_adds_five_seconds_from_then_on() -> None:
    oauth = OAuthServer(["slow_down", "authorization_pending", "slow_down", "ok"], interval=1)
    clock, said = Clock(), []
    with stub_server(oauth) as stub:
        assert sign_in(stub.url, clock, said) == TOKEN
        assert len(polls(stub.seen)) == 4
    assert clock.waits == [1, 6, 6, 11]


def test_a_server_busy_for_a_moment_does_not_end_the_sign_in() -> None:
    """502, 503 or 504 (a proxy, or DynamoDB throttled): the code is still good and the
    person may be approving it right now, so the device polls again, after Retry-After
    when that is longer than its interval."""
    oauth = OAuthServer(["authorization_pending", "503:7", "502", "504:1", "ok"], interval=2)
    clock = Clock()
    with stub_server(oauth) as stub:
        assert sign_in(stub.url, clock, []) == TOKEN
        assert len(polls(stub.seen)) == 5
    assert clock.waits == [2, 2, 7, 2, 2]


def test_a_throttled_poll_slows_down_and_polls_on() -> None:
    """429 from a gateway in front (API Gateway's stage limit on /oauth/token is a few
    requests a second for everyone signing in): as slow_down, five more seconds from then
    on, and the sign-in goes on."""
    oauth = OAuthServer(["authorization_pending", "429", "authorization_pending", "ok"],
                        interval=2)  # fmt: skip
    clock = Clock()
    with stub_server(oauth) as stub:
        assert sign_in(stub.url, clock, []) == TOKEN
        assert len(polls(stub.seen)) == 4
    assert clock.waits == [2, 2, 7, 7]


def test_a_server_unavailable_until_the_code_expires_says_so() -> None:
    oauth = OAuthServer(["503"] * 10, interval=1, expires_in=3)
    with stub_server(oauth) as stub, pytest.raises(CliError) as caught:
        sign_in(stub.url, Clock(), [])
    assert "failed with HTTP 503" in caught.value.message


@pytest.mark.parametrize("expires_in", [600, 3], ids=["back", "gone until expiry"])
def test_a_poll_that_gets_no_answer_is_polled_through(
    monkeypatch: pytest.MonkeyPatch, expires_in: float
) -> None:
    """No connection for two polls (the server restarting): the code is still good, so the
    device polls on; a server gone until the code expires says so, not "expired"."""
    from ltm.cli.client.transport import Unreachable

    real = Http.request
    dropped: list[str] = []

    def request(self: Http, method: str, path: str, **kw: Any) -> Any:
        if path == "/oauth/token" and (len(dropped) < 2 or expires_in <= 3):
            dropped.append(path)
            raise Unreachable(self.host, "refused")
        return real(self, method, path, **kw)

    monkeypatch.setattr(Http, "request", request)
    oauth = OAuthServer(["ok"], interval=1, expires_in=expires_in)
    with stub_server(oauth) as stub:
        if expires_in > 3:
            assert sign_in(stub.url, Clock(), []) == TOKEN
            assert len(dropped) == 2 and len(polls(stub.seen)) == 1
        else:
            with pytest.raises(CliError) as caught:
                sign_in(stub.url, Clock(), [])
            assert "connection refused" in caught.value.message


def test_a_server_error_still_ends_the_sign_in() -> None:
    with stub_server(OAuthServer(["500"])) as stub, pytest.raises(CliError) as caught:
        sign_in(stub.url, Clock(), [])
    assert "failed with HTTP 500" in caught.value.message


def test_denial_stops_with_a_clear_message() -> None:
    oauth = OAuthServer(["authorization_pending", "access_denied", "ok"])
    clock = Clock()
    with stub_server(oauth) as stub, pytest.raises(CliError) as caught:
        sign_in(stub.url, clock, [])
    assert caught.value.message == (
        f"sign-in to {stub.url} was declined in the browser — nothing was saved; to try"
        f" again: ltm auth {stub.url}"
    )
    assert len(clock.waits) == 2  # no poll after the denial


def test_expired_token_from_the_server() -> None:
    oauth = OAuthServer(["authorization_pending", "expired_token"])
    with stub_server(oauth) as stub, pytest.raises(CliError) as caught:
        sign_in(stub.url, Clock(), [])
    assert caught.value.message == (
        f"the sign-in code for {stub.url} expired before it was approved — start again:"
        f" ltm auth {stub.url}"
    )


def test_the_client_stops_at_expires_in_on_its_own() -> None:
    oauth = OAuthServer([], interval=1, expires_in=3)  # pending forever
    clock = Clock()
    with stub_server(oauth) as stub:
        with pytest.raises(CliError) as caught:
            sign_in(stub.url, clock, [])
        assert len(polls(stub.seen)) == 3
    assert "expired before it was approved" in caught.value.message
    assert clock.waits == [1, 1, 1]


def test_other_oauth_errors_and_missing_endpoints() -> None:
    with stub_server(OAuthServer(["invalid_grant"])) as stub, pytest.raises(CliError) as caught:
        sign_in(stub.url, Clock(), [])
    assert "browser sign-in failed" in caught.value.message
    assert "(invalid_grant: test: invalid_grant)" in caught.value.message

    def no_device_flow(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply(404, {"error": "not found"})

    with stub_server(no_device_flow) as stub, pytest.raises(CliError) as caught:
        sign_in(stub.url, Clock(), [])
    assert caught.value.message == (
        f"{stub.url} does not offer browser sign-in (no device flow; HTTP 404) — sign in with"
        f" a token instead: ltm auth {stub.url} --with-token"
    )


def test_defaults_when_the_server_leaves_out_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    def terse(request: Seen) -> tuple[int, dict[str, str], bytes]:
        if request.path == "/oauth/authorize_device":
            return json_reply(200, {"device_code": "d", "user_code": "U",
                                    "verification_uri": "javascript:alert(1)"})  # fmt: skip
        return json_reply(200, {"access_token": TOKEN, "token_type": "bearer"})

    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    clock = Clock()
    with stub_server(terse) as stub:
        assert sign_in(stub.url, clock, [], browser=True) == TOKEN
    assert clock.waits == [5]  # RFC 8628's default interval
    assert opened == []  # never hand a non-http(s) URL from a server to the browser


# -- the real command --------------------------------------------------------------------


def _browser_script(tmp_path: Path) -> tuple[str, Path]:
    """A browser that records its whole argv, and the page it was handed (``.page``)."""
    opened = tmp_path / "opened.txt"
    script = tmp_path / "browser.sh"
    script.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" >> {opened}\n'
        f'cat "${{1#file://}}" >> {opened}.page 2>/dev/null\n'
    )
    script.chmod(0o755)
    return f"{script} %s", opened


def test_ltm_auth_host_signs_in_and_opens_the_browser(tmp_path: Path) -> None:
    browser, opened = _browser_script(tmp_path)
    cli = Cli(tmp_path / "me")
    del cli.env["LTM_NO_BROWSER"]
    cli.env["BROWSER"] = browser
    cli.env["LTM_STATE_DIR"] = str(tmp_path / "state")
    with stub_server(OAuthServer(["authorization_pending", "ok"])) as stub:
        result = cli.run("auth", stub.url, timeout=scaled(30))
        assert cli.ok("ls") == ""  # the token works as a plain bearer
    assert result.returncode == 0, result.stderr
    assert "enter the code: WDJB-MJHT" in result.stderr
    assert "(opened in your browser)" in result.stderr
    # The code never reaches the browser's command line (every local user can read it):
    # the browser gets a private page that forwards to the complete verification URI.
    argv = opened.read_text()
    assert "WDJB" not in argv and "device" not in argv
    (page_url,) = argv.split()
    assert page_url.startswith("file://") and page_url.endswith(".html")
    forwarded = Path(f"{opened}.page").read_text()
    assert "http://127.0.0.1/device?code=WDJB-MJHT" in forwarded
    assert not Path(page_url.removeprefix("file://")).exists()  # removed once signed in
    assert "does not say which account" in result.stderr  # this stub has no /v1/whoami
    saved = cli.credentials()
    assert saved["default"] == stub.url
    assert saved["hosts"][stub.url] == {**saved["hosts"][stub.url], "token": TOKEN,
                                        "via": "device"}  # fmt: skip
    assert stat.S_IMODE((cli.config / "credentials").stat().st_mode) == 0o600


def test_no_browser_without_a_display(tmp_path: Path) -> None:
    browser, opened = _browser_script(tmp_path)
    cli = Cli(tmp_path / "ssh")
    del cli.env["LTM_NO_BROWSER"]
    with stub_server(OAuthServer(["ok", "ok"])) as stub:
        result = cli.run("auth", stub.url, "--no-browser", BROWSER=browser)
        assert result.returncode == 0, result.stderr
        again = cli.run("auth", stub.url, timeout=scaled(30))  # no DISPLAY, no BROWSER: no browser
        assert again.returncode == 0, again.stderr
    assert not opened.exists()
    assert "opened in your browser" not in result.stderr + again.stderr


class HostileServer(OAuthServer):
    """A server whose strings carry terminal escapes (a title change, a screen clear)."""

    def __call__(self, request: Seen) -> tuple[int, dict[str, str], bytes]:
        if request.path == "/v1/healthz":
            return json_reply(200, {"ok": True, "version": "0.2\x1b]0;pwned\x07"})
        if request.path == "/oauth/authorize_device":
            return json_reply(
                200,
                {
                    "device_code": "dev-code-123",
                    "user_code": "WDJB\x1b[2J-MJHT",
                    "verification_uri": "http://127.0.0.1/device\x1b]0;title\x07\u202e",
                    "expires_in": 600,
                    "interval": 1,
                },
            )
        if request.path == "/v1/whoami":
            return json_reply(200, {"user": {"id": "U1", "display": "eve\x1b[31m"}})
        return super().__call__(request)


def test_ltm_auth_shows_the_servers_words_through_safe(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "me")
    with stub_server(HostileServer(["ok"])) as stub:
        result = cli.run("auth", stub.url, timeout=scaled(30))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "\u202e" not in result.stderr
    assert "\\u001b[2J" in result.stderr  # shown, escaped
    assert "signed in as eve\\u001b[31m (user U1)" in result.stderr


class BusyAfterSignIn(OAuthServer):
    """Hands the token out, then is out of reach for the check of it (a proxy's 503)."""

    def __call__(self, request: Seen) -> tuple[int, dict[str, str], bytes]:
        if request.path.startswith(("/v1/packets", "/v1/whoami")):
            return 503, {"Retry-After": "1"}, b"busy, try again"
        return super().__call__(request)


def test_a_token_from_the_browser_is_kept_when_its_check_meets_a_busy_server(
    tmp_path: Path,
) -> None:
    """The code is spent once the token is handed out: losing the token to a busy moment
    would make the person approve a new code in the browser all over again."""
    cli = Cli(tmp_path / "me")
    with stub_server(BusyAfterSignIn(["ok"])) as stub:
        result = cli.run("auth", stub.url, timeout=scaled(30))
    assert result.returncode == 0, result.stderr
    assert "the new token could not be checked just now (" in result.stderr
    assert "HTTP 503" in result.stderr and "ltm whoami" in result.stderr
    assert cli.credentials()["hosts"][stub.url]["token"] == TOKEN


def test_ltm_auth_denied_saves_nothing(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "me")
    with stub_server(OAuthServer(["access_denied"])) as stub:
        result = cli.run("auth", stub.url)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"ltm: sign-in to {stub.url} was declined in the browser — nothing was saved; to try"
        f" again: ltm auth {stub.url}"
    )
    assert not (cli.config / "credentials").exists()


def test_ltm_auth_honours_slow_down_in_real_time(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "me")
    with stub_server(OAuthServer(["slow_down", "ok"], interval=1)) as stub:
        started = time.monotonic()
        result = cli.run("auth", stub.url, timeout=scaled(60))
        assert result.returncode == 0, result.stderr
        first, second = polls(stub.seen)
    assert first.at - started >= 1
    assert second.at - first.at >= 6  # the interval grew by five seconds


# -- against our own server --------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("device")) as srv:
        yield srv


def _approve_when_shown(
    proc: subprocess.Popen[bytes], server: Server, token: str, *, approve: bool
) -> str:
    """Read the code the command shows, and decide it from another signed-in device."""
    assert proc.stderr is not None
    shown = b""
    deadline = time.monotonic() + scaled(30)
    while b"enter the code: " not in shown and time.monotonic() < deadline:
        shown += proc.stderr.readline()
    code = shown.split(b"enter the code: ", 1)[1].split()[0].decode()
    r = httpkit.post(
        f"{server.url}/v1/device/approve",
        json={"user_code": code, "approve": approve},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 200, r.text
    return code


@pytest.mark.parametrize("approve", [True, False])
def test_ltm_auth_against_ltm_server_run(server: Server, tmp_path: Path, approve: bool) -> None:
    _user_id, token = server.issue("laptop-owner")
    cli = Cli(tmp_path / "new-laptop")
    proc = subprocess.Popen(
        [LTM, "auth", server.url], env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _approve_when_shown(proc, server, token, approve=approve)
        _out, err = proc.communicate(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            proc.kill()
    if not approve:
        assert proc.returncode == 1 and b"was declined" in err
        assert not (cli.config / "credentials").exists()
        return
    assert proc.returncode == 0, err
    saved = cli.credentials()["hosts"][server.url]
    assert saved["via"] == "device" and saved["token"] != token
    # Which account approved it, from the server: a swapped sign-in is visible.
    assert f"signed in as laptop-owner (user {_user_id})".encode() in err
    assert saved["user"] == {"id": _user_id, "display": "laptop-owner"}
    # The new device's token acts as the approving user.
    packet_id = cli.ok("save", "-", stdin=json.dumps({"goal": "g", "next_step": "n"})).strip()
    r = httpkit.get(f"{server.url}/v1/packets/{packet_id}",
                  headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert r.status_code == 200
