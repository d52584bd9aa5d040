"""Which hosts count as this machine: the one place plain HTTP is accepted.

A name that only starts with "127." is somebody's host: taking it for loopback
let ``LTM_COGNITO_DOMAIN=http://127.example.com`` through the https check, and
kept ``ltm auth login http://127.example.com`` from warning that its token
travels unencrypted.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ltm.loopback import loopback_host, loopback_url
from ltm.web.cognito import CognitoConfig
from ltm.web.view import loopback_name


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost",
        "http://LOCALHOST:8080/v1",
        "http://localhost.:80",
        "http://ltm-0123456789abcdef.localhost:8080",
        "http://127.0.0.1:8080",
        "http://127.1.2.3",
        "http://[::1]:9000",
        "//127.0.0.1:80",
        "http://[::ffff:127.0.0.1]:8080",  # IPv4 loopback, written as IPv6
        "http://[::ffff:7f00:1]",
    ],
)
def test_loopback_urls(url: str) -> None:
    assert loopback_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.example.com",
        "http://127.0.0.1.nip.io",
        "http://localhost.example.com",
        "http://notlocalhost",
        "http://10.0.0.1",
        "http://[::2]:80",
        "http://[::ffff:10.0.0.1]",
        "http://[::1",  # malformed: not loopback, and no exception
        "http://h:99999",
        "",
    ],
)
def test_other_urls_are_not_loopback(url: str) -> None:
    assert not loopback_url(url)


def test_the_web_views_host_check_and_the_host_rule_agree() -> None:
    assert loopback_name("127.0.0.1:8080") and loopback_name("[::1]:80")
    assert loopback_name("[::ffff:127.0.0.1]:8080")  # the pages' cookie stays off it
    assert not loopback_name("127.example.com:8080")
    assert loopback_host("::1") and not loopback_host(None)


def test_cognito_takes_plain_http_only_from_loopback() -> None:
    env = {"LTM_COGNITO_USER_POOL_ID": "eu-west-1_abc", "LTM_COGNITO_CLIENT_ID": "client"}
    local = CognitoConfig.from_env({**env, "LTM_COGNITO_DOMAIN": "http://127.0.0.1:9229"})
    assert local is not None and local.domain == "http://127.0.0.1:9229"
    with pytest.raises(ValueError, match="https"):
        CognitoConfig.from_env({**env, "LTM_COGNITO_DOMAIN": "http://127.example.com"})


@pytest.mark.parametrize(
    ("host", "external", "says"),
    [
        ("127.0.0.1", None, None),
        ("::1", None, None),
        ("0.0.0.0", None, "beyond this machine, with plain http"),
        ("192.0.2.10", None, "beyond this machine, with plain http"),
        ("0.0.0.0", "https://ltm.example.org", None),
        ("127.0.0.1", "https://ltm.example.org", None),  # a proxy on this machine
        ("0.0.0.0", "http://ltm.example.org", "plain http beyond this machine"),
        ("0.0.0.0", "http://127.0.0.1:8080", "names this machine"),
    ],
)
def test_a_loopback_only_setting_exposed_beyond_loopback_is_named(
    host: str, external: str | None, says: str | None
) -> None:
    from ltm.loopback import exposure_warnings

    found = exposure_warnings(host, external)
    if says is None:
        assert found == []
    else:
        assert len(found) == 1 and says in found[0]


def test_the_server_warns_when_it_listens_beyond_loopback(tmp_path: Path) -> None:
    """The warning comes with the server's first lines, where its operator looks."""
    import subprocess
    import time

    from serverkit import LTM, clean_env, init_db
    from timing import scaled

    db = tmp_path / "server.db"
    init_db(db)
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [LTM, "server", "run", "--db", str(db), "--addr", "0.0.0.0:0"],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=clean_env(),
        )
    try:
        deadline = time.monotonic() + scaled(30)
        while "listening on" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        time.sleep(0.2)
        text = log.read_text()
        assert "ltm server: listening on http://0.0.0.0:" in text
        assert "ltm server: warning: listening on 0.0.0.0, beyond this machine" in text
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(15))


def test_a_command_line_of_the_server_before_still_starts_it(tmp_path: Path) -> None:
    """``--workers``, from the server before waitress (a service file written then), starts
    the server and is said to be unused, where it stopped the server from starting."""
    from serverkit import running_server

    with running_server(tmp_path, "--workers", "2") as server:
        assert server.client().get("/v1/healthz").status_code == 200
        lines = (tmp_path / "server.log").read_text().splitlines()
        assert lines[0].startswith("ltm server: listening on http://127.0.0.1:")
        assert lines[1].startswith("ltm server: warning: --workers is no longer used")


# -- the other loopback address, where browsers send a *.localhost name first -----------------


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(
    not _ipv6_loopback(), reason="no IPv6 loopback here: no browser sends a name to ::1 either"
)


def _listen(address: str, port: int) -> socket.socket:
    """Listen on ``address:port`` as another program would (SO_REUSEADDR, as servers do)."""
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, port))
        sock.listen()
    except OSError:
        sock.close()
        raise
    return sock


def _held_for_browsers(port: int) -> None:
    """Nothing else can listen on [::1]:port, and a browser trying it is refused at once."""
    from timing import scaled

    with pytest.raises(OSError):
        _listen("::1", port).close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("::1", port), timeout=scaled(5)).close()


@needs_ipv6
def test_the_web_views_other_loopback_address_is_held_by_the_server(tmp_path: Path) -> None:
    """Browsers send the web view's ``*.localhost`` name to ::1 first: another user
    listening there on the server's port would be sent the sign-in key and the cookie."""
    from urllib.parse import urlsplit

    from serverkit import running_server

    with running_server(tmp_path / "server") as server:
        assert server.web is not None and ".localhost:" in server.web
        port = urlsplit(server.url).port
        assert port is not None
        _held_for_browsers(port)
    _listen("::1", port).close()  # let go once the server stops


@needs_ipv6
def test_ltm_ui_holds_its_other_loopback_address(tmp_path: Path) -> None:
    import re

    from clikit import Cli
    from test_web_pages import running_ui

    with running_ui(Cli(tmp_path / "me")) as (url, _proc):
        found = re.search(r"\.localhost:(\d+)/", url)
        assert found is not None
        _held_for_browsers(int(found.group(1)))


@needs_ipv6
def test_a_server_whose_web_view_another_program_would_be_sent_does_not_start(
    tmp_path: Path,
) -> None:
    import subprocess

    from serverkit import LTM, clean_env, init_db
    from timing import scaled

    db = tmp_path / "server.db"
    init_db(db)
    with _listen("::1", 0) as other:
        port = other.getsockname()[1]
        done = subprocess.run(
            [LTM, "server", "run", "--db", str(db), "--addr", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=scaled(60),
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().endswith(
        f"cannot listen on 127.0.0.1:{port}: [::1]:{port}, where browsers also send the"
        " web view's name, is in use by another program (its pages would be sent your"
        " sign-in there)"
    ), done.stderr
