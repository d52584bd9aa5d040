"""``ltm conformance URL``: the protocol's wire checks, run as a user runs them.

It runs against ``ltm server run`` (SQLite) and against the Chalice app on
DynamoDB (moto's server, over real HTTP: ``dynamo_moto.running_dynamo_server``),
must pass on both, must leave nothing it created behind, and must fail
(exit 1, with expected and got) against a server that breaks a rule. Tokens
come from the environment or a file, never from the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import Seen, json_reply, stub_server
from reference_standin import (
    CAP_32000,
    DROPS_CONSTRAINTS,
    LEAVER_STILL_LISTS,
    LISTS_DELETED,
    MEMBERS_DELETE_ANY,
    NO_AUTH_ON_DELETE,
    ODD_CODES,
    OLDEST_FIRST,
    ROWS_NOT_OBJECTS,
    TEAM_PACKETS_OPEN,
    TEAMS_HANG,
    TEAMS_HUGE,
    running_reference,
)
from serverkit import LTM, SERVER_STORES, Server, running_server
from timing import scaled


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("conformance"), store=request.param) as srv:
        yield srv


def conformance(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LTM_")}
    return subprocess.run(
        [LTM, "conformance", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )


def test_it_passes_against_our_server_and_leaves_nothing_behind(
    server: Server, tmp_path: Path
) -> None:
    second_id, second = server.issue("second")
    file = tmp_path / "second.token"
    file.write_text(second + "\n")
    root = server.client(server.root_token)
    before = root.get("/v1/packets", params={"limit": 1000}).json()["packets"]
    result = conformance(
        server.url,
        "--token2-file",
        str(file),
        "--json",
        env={"LTM_CONFORMANCE_TOKEN": server.root_token},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    failed = [c for c in report["checks"] if c["result"] != "pass"]
    assert failed == [] and report["failed"] == 0 and report["passed"] >= 40
    sections = {c["section"] for c in report["checks"]}
    assert {"The packet", "The HTTP API", "The HTTP API: scopes"} <= sections
    names = " | ".join(c["name"] for c in report["checks"])
    for topic in (
        "concurrent accepts",
        "32 KiB",
        "canonical form",
        "ltm_version",
        "lenient mode",
        "another user's personal packet",
        "a team you are not in",
    ):
        assert topic in names, topic
    # Nothing it made is left: packets, teams (both users), the concurrent accepts' user's token.
    assert root.get("/v1/packets", params={"limit": 1000}).json()["packets"] == before
    assert root.get("/v1/teams").json()["teams"] == []
    assert server.client(second).get("/v1/teams").json()["teams"] == []
    assert server.client(second).get("/v1/packets").json()["packets"] == []
    assert second_id and server.root_token not in result.stdout + result.stderr


def test_one_token_is_enough_the_second_user_is_minted(server: Server) -> None:
    if server.store != "sqlite":
        pytest.skip("the same client code on every store; the run above covers DynamoDB")
    result = conformance(server.url, env={"LTM_CONFORMANCE_TOKEN": server.root_token})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert all(line.startswith(("PASS  [", "note: ")) for line in lines[:-1]), lines
    assert "minted" in result.stdout and lines[-1].endswith("0 failed, 0 not offered")
    # The second user and the concurrent accepts' winner: one note says both, not one each.
    notes = [line for line in lines if line.startswith("note: ")]
    assert len(notes) == len(set(notes)), notes
    assert "note: 2 users minted by accepting an invite without a bearer stay" in result.stdout


def test_usage_errors_exit_2_and_tokens_never_come_from_argv(tmp_path: Path) -> None:
    missing = conformance("http://127.0.0.1:9")
    assert missing.returncode == 2 and "LTM_CONFORMANCE_TOKEN" in missing.stderr
    bad_url = conformance("ftp://x", env={"LTM_CONFORMANCE_TOKEN": "t"})
    assert bad_url.returncode == 2 and "URL" in bad_url.stderr
    empty = tmp_path / "empty"
    empty.write_text("")
    result = conformance("http://127.0.0.1:9", "--token-file", str(empty))
    assert result.returncode == 2 and "empty" in result.stderr
    assert conformance("http://127.0.0.1:9", "--token", "x").returncode == 2  # no such option


def test_a_server_that_breaks_the_rules_fails_with_expected_and_got() -> None:
    """A server that answers health and lists, but 200 for an absent packet and no teams."""

    def broken(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        path = seen.path.split("?", 1)[0]
        if path == "/v1/healthz":
            return json_reply(200, {"ok": True, "version": "0.2"})
        if "authorization" not in {k.lower() for k in seen.headers}:
            return json_reply(401, {"error": "missing bearer token"})
        if seen.headers.get("Authorization", seen.headers.get("authorization")) != "Bearer ok":
            return json_reply(401, {"error": "invalid token"})
        if seen.method == "POST" and path == "/v1/packets":
            return json_reply(201, {"id": json.loads(seen.body or b"{}").get("id")})
        if path == "/v1/packets":
            return json_reply(200, {"packets": []})
        if seen.method == "DELETE":
            return 204, {}, b""
        return 404, {"Content-Type": "text/plain"}, b"404 page not found\n"

    with stub_server(broken) as stub:
        result = conformance(stub.url, env={"LTM_CONFORMANCE_TOKEN": "ok"})
    assert result.returncode == 1, result.stdout + result.stderr
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert any(
        "[The HTTP API] GET /v1/packets/{id}: 200, the packet as pushed — expected" in line
        and "; got 404 404 page not found" in line
        for line in fails
    ), fails
    assert "N/A   [Extensions (beyond the HTTP table)] token management" in result.stdout


def test_it_passes_against_the_go_reference_and_says_where_it_differs() -> None:
    """The reference (a stand-in answering as its handlers do) is a correct server: the
    run exits 0. Its upsert of another user's packet is what the protocol recommends
    against, not a violation, so it is said (DIFF), never a failure."""
    with running_reference() as (stub, _reference, token):
        result = conformance(stub.url, env={"LTM_CONFORMANCE_TOKEN": token})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert not [line for line in lines if line.startswith("FAIL")], lines
    differs = [line for line in lines if line.startswith("DIFF")]
    assert len(differs) == 1 and "another user owns" in differs[0], differs
    assert "differs from the protocol's recommendation: expected the owner's" in differs[0]
    assert "1 differ from the protocol's recommendation" in lines[-1]
    # What the reference does not have is not offered, not failed.
    assert "N/A   [The packet] lenient mode" in result.stdout
    assert "N/A   [Extensions (beyond the HTTP table)] token management" in result.stdout


def test_a_user_with_many_recent_packets_still_passes() -> None:
    """Users run it with their own token: the run's packets must be the newest a listing
    shows, not fall below the 50 the user made since some fixed date."""
    from datetime import UTC, datetime

    with running_reference() as (stub, reference, token):
        reference.seed(token, 60, datetime.now(UTC).strftime("%Y-%m-%dT00:00:00Z"))
        result = conformance(stub.url, env={"LTM_CONFORMANCE_TOKEN": token})
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        (OLDEST_FIRST, "[The HTTP API] GET /v1/packets: newest first (by created_at) — expected"),
        (DROPS_CONSTRAINTS, "GET /v1/packets/{id}: 200, the packet as pushed — expected"),
        (CAP_32000, "[The packet] a packet of exactly 32768 bytes (32 KiB) is accepted — expected"),
        (NO_AUTH_ON_DELETE, 'without a bearer: 401 — expected 401 {"error": "..."} from each'),
        (TEAM_PACKETS_OPEN, "a packet of a team you are not in: GET and DELETE are 404 not found"),
        (LISTS_DELETED, "then GET is 404 not found and it is not listed — expected"),
        (MEMBERS_DELETE_ANY, "a member may not delete another member's team packet: 403 or 404"),
        (LEAVER_STILL_LISTS, "404 team not found to them, and unlisted — expected"),
    ],
)
def test_a_broken_reference_fails_the_check_made_for_its_bug(fault: str, check: str) -> None:
    """Each fault is a plausible protocol bug in an otherwise correct server; the check
    that exists for it fails, and it alone."""
    with running_reference(fault) as (stub, _reference, token):
        result = conformance(stub.url, env={"LTM_CONFORMANCE_TOKEN": token})
    assert result.returncode == 1, result.stdout + result.stderr
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and check in fails[0], fails


@pytest.mark.parametrize("fault", [TEAMS_HANG, TEAMS_HUGE])
def test_a_request_without_an_answer_ends_the_run_with_its_report(fault: str) -> None:
    """A route that never answers, or answers past the client's size cap, mid-run: the
    checks made so far are printed, that request is the failure, and the clean-up stops
    at once (each of its requests would wait as long) and says what it left."""
    with running_reference(fault) as (stub, _reference, token):
        env = {"LTM_CONFORMANCE_TOKEN": token, "LTM_TIMEOUT": str(scaled(3))}
        result = conformance(stub.url, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("PASS  [The HTTP API] GET /v1/healthz") for line in lines)
    fails = [line for line in lines if line.startswith("FAIL")]
    assert len(fails) == 1 and "the server answers every request" in fails[0], fails
    assert "Traceback" not in result.stderr, result.stderr
    left = [line for line in lines if line.startswith("note: left on the server")]
    if fault == TEAMS_HANG:  # the hang is the request that went unanswered
        assert len(left) == 1 and "/v1/packets/" in left[0], lines


def test_the_token_goes_to_the_url_given_and_server_text_is_shown_escaped() -> None:
    """A redirect to another host is never followed (the token would go with it), and what
    a server says reaches the terminal with its control characters escaped."""
    with stub_server(lambda seen: json_reply(200, {"packets": []})) as elsewhere:

        def redirecting(seen: Seen) -> tuple[int, dict[str, str], bytes]:
            if seen.path == "/v1/healthz":
                return json_reply(200, {"ok": True, "version": "0.2"})
            body = b'{"error": "moved \x1b]0;pwned\x07\x1b[2J"}'
            return 307, {"Location": elsewhere.url + seen.path}, body

        with stub_server(redirecting) as stub:
            result = conformance(stub.url, env={"LTM_CONFORMANCE_TOKEN": "secret-token"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert elsewhere.seen == []
    assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout
    assert "FAIL  [The HTTP API] the given token is accepted — expected 200; got 307" in (
        result.stdout
    )


def test_answers_of_another_shape_fail_a_check_never_crash_the_run() -> None:
    """A listing whose rows are not objects: said as a failure, with the checks before
    it, never a traceback."""
    with running_reference(ROWS_NOT_OBJECTS) as (stub, _reference, token):
        result = conformance(stub.url, env={"LTM_CONFORMANCE_TOKEN": token})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "FAIL  [The HTTP API] GET /v1/packets: 200 {packets: [{id, created_at, goal}]}" in (
        result.stdout
    )
    assert result.stdout.splitlines()[-1].endswith("not offered"), result.stdout


def test_server_values_in_paths_stay_one_segment() -> None:
    """An invite code is the server's text: one with a space and a slash is sent back
    escaped, as the one path segment it is (it stopped the run: 'control character or
    space in' the request)."""
    with running_reference(ODD_CODES) as (stub, _reference, token):
        result = conformance(stub.url, env={"LTM_CONFORMANCE_TOKEN": token})
    assert result.returncode == 0, result.stdout + result.stderr
    assert any("/v1/invites/odd%20code%2F" in seen.path for seen in stub.seen)
