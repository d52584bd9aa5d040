"""The server's own redaction scan: defense in depth behind the writer's pre-flight.

Against a real ``ltm server run`` on loopback, with raw HTTP pushes as the
reference CLI makes them (it scans before it pushes, and sends no override),
and with our CLI, whose ``--allow-unredacted`` sends ``X-LTM-Allow-Unredacted: 1``.
Fake secrets are assembled at run time (see test_redact.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import Cli, Seen, json_reply, signed_in, stub_server
from serverkit import Server, clean_env, example_packet, init_db, make_packet, run_server

from ltm.service.packets import OVERRIDE_HEADER, scan_wanted

GHP = "ghp_" + "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8aB3dE5gH7j"[:36]
AWS_KEY_ID = "AKIA" + "QYLPMN5H" + "T2ZRW3VK"
PASSWORD = "DB_PASSWORD=" + "Tr0ub4dor" + "&3"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _server(tmp_path_factory.mktemp("scan"))


@pytest.fixture(scope="module")
def server_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _server(tmp_path_factory.mktemp("scan-off"), LTM_SERVER_SCAN="off")


def _server(directory: Path, **env: str) -> Iterator[Server]:
    db = directory / "server.db"
    root = init_db(db)
    srv = run_server(db, directory / "server.log", root, env=clean_env(**env))
    try:
        yield srv
    finally:
        srv.stop()


def leaky() -> dict[str, Any]:
    """A valid packet with a secret in the id, the goal and a constraint."""
    return make_packet(
        id=GHP,
        goal=f"Rotate {AWS_KEY_ID} before the demo",
        constraints=[f"run with {PASSWORD}"],
        next_step="Open /home/dee/notes.txt and http://localhost:8080",  # not secrets
    )


def test_a_clean_packet_pushed_as_the_reference_cli_does_is_stored(server: Server) -> None:
    _, token = server.issue()
    packet = example_packet()
    with server.client(token) as c:
        pushed = c.post("/v1/packets", content=json.dumps(packet))
        assert pushed.status_code == 201, pushed.text
        assert c.get(f"/v1/packets/{packet['id']}").json()["goal"] == packet["goal"]


def test_a_secret_is_refused_with_the_field_kind_list_and_nothing_stored(server: Server) -> None:
    _, token = server.issue()
    packet = leaky()
    with server.client(token) as c:
        refused = c.post("/v1/packets", json=packet)
        assert refused.status_code == 400
        message = refused.json()["error"]
        assert message == (
            "the server's redaction scan refused the packet (3 hits: id/github-token,"
            " goal/aws-access-key, constraints[0]/secret-assignment); remove the secrets, or"
            f" send the header {OVERRIDE_HEADER}: 1 (ltm push --allow-unredacted) to store it"
            " anyway"
        )
        assert GHP not in message and AWS_KEY_ID not in message and "Tr0ub" not in message
        assert c.get(f"/v1/packets/{GHP}").status_code == 404
        assert c.get("/v1/packets").json()["packets"] == []
    assert AWS_KEY_ID not in server.logs() and "Tr0ub" not in server.logs()


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # The schema's own refusals quote what they judged: never a secret.
        ({"provenance": {"author_model": "m", AWS_KEY_ID: "x"}}, "provenance: unknown field"),
        ({"ltm_version": GHP}, "ltm_version: unsupported version"),
    ],
)
def test_a_schema_refusal_does_not_quote_a_secret(
    server: Server, fields: dict[str, Any], expected: str
) -> None:
    _, token = server.issue()
    with server.client(token) as c:
        refused = c.post("/v1/packets", json=make_packet(**fields))
        assert refused.status_code == 400, refused.text
        message = refused.json()["error"]
        assert expected in message and ", not shown>" in message
        assert AWS_KEY_ID[4:12] not in message and GHP[4:12] not in message
    assert AWS_KEY_ID not in server.logs()


def test_paths_and_local_urls_are_the_writers_business(server: Server) -> None:
    _, token = server.issue()
    packet = make_packet(goal="Open /home/dee/notes.txt", next_step="curl http://localhost:8080")
    with server.client(token) as c:
        assert c.post("/v1/packets", json=packet).status_code == 201


@pytest.mark.parametrize("value", ["1", "true", "TRUE"])
def test_the_users_override_stores_it(server: Server, value: str) -> None:
    _, token = server.issue()
    packet = leaky()
    with server.client(token) as c:
        stored = c.post("/v1/packets", json=packet, headers={OVERRIDE_HEADER: value})
        assert stored.status_code == 201, stored.text
        assert c.get(f"/v1/packets/{GHP}").json()["constraints"] == packet["constraints"]
        c.delete(f"/v1/packets/{GHP}")


@pytest.mark.parametrize("value", ["0", "no", ""])
def test_an_override_that_says_no_is_no_override(server: Server, value: str) -> None:
    _, token = server.issue()
    with server.client(token) as c:
        refused = c.post("/v1/packets", json=leaky(), headers={OVERRIDE_HEADER: value})
        assert refused.status_code == 400


def test_the_operator_can_turn_the_scan_off(server_off: Server) -> None:
    _, token = server_off.issue()
    with server_off.client(token) as c:
        assert c.post("/v1/packets", json=leaky()).status_code == 201
        assert c.get(f"/v1/packets/{GHP}").status_code == 200


def test_a_lenient_push_is_scanned_too(server: Server) -> None:
    _, token = server.issue()
    packet = {"id": "01JS5LTMLENIENTSCAN00000001", "goal": 5, "notes": {"api_key": GHP}}
    with server.client(token) as c:
        refused = c.post("/v1/packets", params={"lenient": "true"}, json=packet)
        assert refused.status_code == 400
        assert "(1 hit: notes.api_key/github-token)" in refused.json()["error"]


@pytest.mark.parametrize(
    ("environ", "override", "wanted"),
    [
        ({}, None, True),
        ({}, "1", False),
        ({}, "0", True),
        ({"LTM_SERVER_SCAN": "on"}, None, True),
        ({"LTM_SERVER_SCAN": "off"}, None, False),
        ({"LTM_SERVER_SCAN": "OFF"}, "0", False),
        ({"LTM_SERVER_SCAN": "false"}, None, False),
        ({"LTM_SERVER_SCAN": "0"}, None, False),
        ({"LTM_SERVER_SCAN": "sometimes"}, None, True),  # unknown: stay safe
    ],
)
def test_scan_wanted(environ: dict[str, str], override: str | None, wanted: bool) -> None:
    assert scan_wanted(override, environ) is wanted


# --------------------------------------------------------------------------- #
# Our CLI: --allow-unredacted reaches the server as the override
# --------------------------------------------------------------------------- #


def test_cli_blocks_first_then_the_override_reaches_the_server(
    server: Server, tmp_path: Path
) -> None:
    cli = signed_in(server, tmp_path / "home", "dee")
    path = tmp_path / "leaky.json"
    path.write_text(json.dumps(leaky()))
    blocked = cli.run("push", str(path))
    assert blocked.returncode == 1
    assert blocked.stderr.startswith("ltm: the redaction pre-flight blocked the packet (5 hits)")
    assert cli.ok("ls") == ""
    assert cli.ok("push", "--allow-unredacted", str(path)).strip() == GHP
    assert json.loads(cli.ok("pull", GHP))["goal"] == leaky()["goal"]


def _stub_push(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    if seen.method == "POST":
        return json_reply(201, {"id": json.loads(seen.body)["id"]})
    return json_reply(404, {"error": "not found"})


@pytest.mark.parametrize("verb", ["save", "push"])
def test_cli_sends_the_header_only_with_allow_unredacted(tmp_path: Path, verb: str) -> None:
    cli = Cli(tmp_path)
    body = json.dumps(leaky() if verb == "push" else make_packet())
    with stub_server(_stub_push) as stub:
        env = {"LTM_HOST": stub.url, "LTM_TOKEN": "ltm_stub"}
        cli.ok(verb, "-", stdin=json.dumps(make_packet()), **env)
        cli.ok(verb, "--allow-unredacted", "-", stdin=body, **env)
    plain, overridden = (s for s in stub.seen if s.method == "POST")
    assert "x-ltm-allow-unredacted" not in plain.headers
    assert overridden.headers["x-ltm-allow-unredacted"] == "1"


def test_push_from_local_carries_the_override(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    saved = cli.ok("save", "--local", "--allow-unredacted", "-", stdin=json.dumps(leaky()))
    assert saved.strip() == GHP  # the embedded store leaves the judgement to the pre-flight
    with stub_server(_stub_push) as stub:
        env = {"LTM_HOST": stub.url, "LTM_TOKEN": "ltm_stub"}
        blocked = cli.run("push", "--from-local", GHP, **env)
        assert blocked.returncode == 1 and "redaction pre-flight blocked" in blocked.stderr
        cli.ok("push", "--from-local", GHP, "--allow-unredacted", **env)
    (post,) = (s for s in stub.seen if s.method == "POST")
    assert post.headers["x-ltm-allow-unredacted"] == "1"
