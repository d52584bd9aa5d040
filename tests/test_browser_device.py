"""Signing in from a browser, end to end, in a real headless Chromium (Debian's ``chromium``).

``ltm auth HOST`` runs in a subprocess and prints the code; Playwright drives
Chromium to the verification page, types the code, signs in and approves (or
denies); the CLI stores its token and ``ltm ls`` works. The server is the
real ``ltm server run``:

- configured for Cognito as on AWS, against a moto user pool, with
  ``tests/cognito_standin.py`` playing only the managed-login pages moto
  lacks (the ID token is moto's, verified against moto's JWKS);
- self-hosted (no Cognito), signing in on the page with an existing token.

Paths: approve (and a second device of the same Cognito user), deny, a
wrong code, a wrong password, a cancelled sign-in, and a code that expires
while the person is signing in. Every browser step has a timeout, and so has
every wait on the CLI.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import Cli
from cognito_standin import PASSWORD, Cognito, cognito_standin
from devicekit import AuthProcess, device_server
from serverkit import Server, make_packet
from timing import scaled

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STEP_TIMEOUT_MS = scaled(15_000)
ALICE = "alice@example.org"

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None,
    reason=f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)",
)


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, timeout=scaled(60_000)
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser profile (no cookies) per test."""
    context = browser.new_context()
    context.set_default_timeout(STEP_TIMEOUT_MS)
    context.set_default_navigation_timeout(STEP_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(scope="module")
def cognito() -> Iterator[Cognito]:
    with cognito_standin() as standin:
        standin.subject = standin.add_user(ALICE)  # type: ignore[attr-defined]
        yield standin


@pytest.fixture(scope="module")
def aws_server(cognito: Cognito, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``ltm server run`` configured for Cognito sign-in, as an AWS stage is."""
    with device_server(tmp_path_factory.mktemp("browser-aws"), **cognito.env()) as srv:
        cognito.allow_callback(srv.url + "/device/callback")
        # The web view signs in at its own name (a server on loopback), and comes back there.
        cognito.allow_callback(srv.web + "/device/callback")
        yield srv


# -- steps a person takes ----------------------------------------------------------------------


def enter_code(page: Any, url: str, code: str | None) -> Any:
    """Open the verification page, type the code (unless it is filled in), continue."""
    response = page.goto(url)
    assert response.status == 200
    headers = response.headers
    assert headers["x-frame-options"] == "DENY"
    assert "default-src 'none'" in headers["content-security-policy"]
    if code is not None:
        page.fill("#code", code)
    with page.expect_navigation():
        page.click("button[type=submit]")
    return page


def sign_in_at_cognito(page: Any, cognito: Cognito, email: str, password: str) -> None:
    assert page.url.startswith(cognito.domain + "/oauth2/authorize?"), page.url
    assert "code_challenge_method=S256" in page.url
    page.fill("#signInFormUsername", email)
    page.fill("#signInFormPassword", password)
    with page.expect_navigation():
        page.click("button[name=signin]")


def decide(page: Any, action: str) -> str:
    assert page.locator("h1").inner_text() == "Approve this device?"
    with page.expect_navigation():
        page.click(f"button[value={action}]")
    return str(page.locator("main").inner_text())


# -- with Cognito --------------------------------------------------------------------------------


def test_cognito_sign_in_approves_and_the_cli_works(
    aws_server: Server, cognito: Cognito, page: Any, tmp_path: Path
) -> None:
    laptop = Cli(tmp_path / "laptop")
    auth = AuthProcess(laptop, aws_server.url)
    url, code = auth.url(), auth.code()
    assert url == aws_server.url + "/device"

    enter_code(page, url, code.lower())
    # A wrong password first: the stand-in (moto) refuses it, nothing reaches ltm.
    sign_in_at_cognito(page, cognito, ALICE, "wrong-password")
    assert "Incorrect username or password" in page.content()
    page.fill("#signInFormUsername", ALICE)
    page.fill("#signInFormPassword", PASSWORD)
    with page.expect_navigation():
        page.click("button[name=signin]")
    # Back on ltm: which device asks, as whom.
    assert page.url.startswith(aws_server.url + "/device/callback?")
    text = page.locator("main").inner_text()
    assert f"Signed in as {ALICE}" in text
    assert "ltm-python/" in text and "ltm-cli" in text and "127.0.0.1" in text
    assert "Device approved" in decide(page, "approve")

    assert auth.finish() == 0, auth.output()
    assert laptop.credentials()["hosts"][aws_server.url]["via"] == "device"
    assert json.loads(laptop.ok("ls", "--json")) in ([], {"packets": []})
    laptop.ok("save", "-", stdin=json.dumps(make_packet(goal="From the laptop")))

    # The first sign-in created the ltm user, bound to the Cognito subject.
    from ltm.store.sqlite import SqliteStore

    store = SqliteStore(aws_server.db)
    try:
        user = store.get_user_by_subject(cognito.subject)  # type: ignore[attr-defined]
        assert user is not None and user.display == ALICE
        assert len(store.list_tokens(user_id=user.id)) == 1
    finally:
        store.close()

    # A second device of the same person, through verification_uri_complete: same user.
    desktop = Cli(tmp_path / "desktop")
    second = AuthProcess(desktop, aws_server.url)
    second_code = second.code()
    enter_code(page, f"{aws_server.url}/device?code={second_code}", None)
    sign_in_at_cognito(page, cognito, ALICE, PASSWORD)
    assert "Device approved" in decide(page, "approve")
    assert second.finish() == 0, second.output()
    assert "From the laptop" in desktop.ok("ls")
    rows = json.loads(desktop.ok("tokens", "--json"))["tokens"]
    assert len(rows) == 2 and sum(row["current"] for row in rows) == 1
    assert "POST /oauth2/token" in cognito.requests


def test_cognito_sign_in_denied(
    aws_server: Server, cognito: Cognito, page: Any, tmp_path: Path
) -> None:
    stranger = Cli(tmp_path / "stranger")
    auth = AuthProcess(stranger, aws_server.url)
    enter_code(page, auth.url(), auth.code())
    sign_in_at_cognito(page, cognito, ALICE, PASSWORD)
    assert "not signed in" in decide(page, "deny")
    assert auth.finish() == 1
    assert "declined" in auth.output()
    assert not (stranger.config / "credentials").exists()


def test_wrong_code_then_a_cancelled_sign_in(
    aws_server: Server, cognito: Cognito, page: Any, tmp_path: Path
) -> None:
    cli = Cli(tmp_path / "cli")
    auth = AuthProcess(cli, aws_server.url)
    try:
        code = auth.code()
        with page.expect_response(lambda r: r.request.method == "POST") as answer:
            enter_code(page, auth.url(), "BCDF-GHJK")
        assert answer.value.status == 404
        assert "unknown or expired code" in page.locator(".error").inner_text()
        assert page.url == aws_server.url + "/device"  # still on ltm: no trip to Cognito
        # The right code, then the person cancels at Cognito.
        page.fill("#code", code)
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert page.url.startswith(cognito.domain)
        with page.expect_navigation():
            page.click("button[name=cancel]")
        assert page.url.startswith(aws_server.url + "/device/callback?")
        assert page.locator("h1").inner_text() == "Sign-in cancelled"
    finally:
        auth.kill()


def test_code_expires_while_signing_in(cognito: Cognito, page: Any, tmp_path: Path) -> None:
    with device_server(
        tmp_path / "srv", LTM_DEVICE_EXPIRES_IN=f"{scaled(4):.0f}", **cognito.env()
    ) as srv:
        cognito.allow_callback(srv.url + "/device/callback")
        # The web view signs in at its own name (a server on loopback), and comes back there.
        cognito.allow_callback(srv.web + "/device/callback")
        cli = Cli(tmp_path / "cli")
        auth = AuthProcess(cli, srv.url)
        enter_code(page, auth.url(), auth.code())
        assert page.url.startswith(cognito.domain)
        assert auth.finish(timeout=scaled(30)) == 1  # the CLI gives up on its own
        assert "expired" in auth.output()
        time.sleep(1.5)  # and the server's clock passes the expiry too
        sign_in_at_cognito(page, cognito, ALICE, PASSWORD)
        assert page.locator("h1").inner_text() == "Code expired"
        assert not (cli.config / "credentials").exists()


# -- self-hosted: sign in on the page with an existing token -------------------------------------


def test_self_hosted_page_sign_in_with_a_token(page: Any, tmp_path: Path) -> None:
    with device_server(tmp_path / "srv") as srv:
        _uid, token = srv.issue("hana")
        laptop = Cli(tmp_path / "laptop")
        laptop.ok("auth", srv.url, "--with-token", stdin=token)
        laptop.ok("save", "-", stdin=json.dumps(make_packet(goal="Hana's packet")))

        phone = Cli(tmp_path / "phone")
        auth = AuthProcess(phone, srv.url)
        page.goto(auth.url())
        page.fill("#code", auth.code())
        page.fill("#token", "ltm_" + "0" * 64)  # a wrong token first
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert "not accepted" in page.locator(".error").inner_text()
        assert page.input_value("#token") == ""  # never echoed back
        page.fill("#token", token)
        with page.expect_navigation():
            page.click("button[type=submit]")
        text = page.locator("main").inner_text()
        assert "Signed in as hana" in text
        assert token not in page.content()
        assert "Device approved" in decide(page, "approve")
        assert auth.finish() == 0, auth.output()
        assert "Hana's packet" in phone.ok("ls")
        assert re.search(r"ltm-python-[0-9.]+-[0-9a-f]{6}", laptop.ok("tokens"))
        assert token not in srv.logs()
