"""The Chalice app on DynamoDB the way Lambda runs it: API Gateway proxy events, moto in-process.

``chalice.test.Client`` turns each request into the API Gateway event Lambda
would receive and calls the app with it, with the ``dev`` stage's
environment variables from ``.chalice/config.json`` (``LTM_STORE=dynamodb``,
``LTM_DYNAMODB_TABLE=ltm-dev``); moto stands in for DynamoDB. The HTTP suites
(test_server_*.py) run the same app over real HTTP on DynamoDB too; this file
covers the Lambda path: the protocol table end to end, the request id of API
Gateway in the logs and the EMF metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client
from dynamo_moto import in_process
from serverkit import make_packet
from timing import scaled

from ltm.service import tokens
from ltm.store.dynamo import DynamoStore

ROOT = Path(__file__).resolve().parents[1]
STAGE = "dev"
TABLE = "ltm-dev"  # the dev stage's table (tests/test_infra.py keeps config and template in step)


class Api:
    """JSON requests through Chalice's test client, as API Gateway would send them."""

    def __init__(self, client: Client, store: DynamoStore) -> None:
        self.client = client
        self.store = store

    def user(self, name: str) -> str:
        _, secret = tokens.issue(self.store, name)
        return secret

    def call(
        self, method: str, path: str, token: str | None = None, body: Any = None
    ) -> tuple[int, Any, dict[str, str]]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        raw = b""
        if body is not None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        r = self.client.http.request(method, path, headers=headers, body=raw)
        try:
            data = json.loads(r.body) if r.body else None
        except ValueError:
            data = r.body
        return r.status_code, data, dict(r.headers)


@pytest.fixture
def lambda_app() -> Iterator[Any]:
    from ltm.cli.server.loader import load_app

    module = load_app()
    module.close_store()  # another test may have opened a SQLite store in this process
    yield module
    module.close_store()


@pytest.fixture
def api(lambda_app: Any) -> Iterator[Api]:
    with (
        in_process(TABLE) as dynamodb,
        Client(lambda_app.app, stage_name=STAGE, project_dir=str(ROOT)) as client,
    ):
        yield Api(client, DynamoStore(TABLE, client=dynamodb))
        assert isinstance(lambda_app.get_store(), DynamoStore)


def test_the_protocol_on_dynamodb_through_api_gateway_events(api: Api) -> None:
    assert api.call("GET", "/v1/healthz")[:2] == (200, {"ok": True, "version": "0.2"})
    assert api.call("GET", "/v1/packets")[:2] == (401, {"error": "missing bearer token"})
    assert api.call("GET", "/v1/packets", "ltm_" + "0" * 64)[:2] == (
        401,
        {"error": "invalid token"},
    )
    alice, bob = api.user("alice"), api.user("bob")

    # personal packets
    first = make_packet(created_at="2026-05-01T12:00:00Z")
    second = make_packet(created_at="2026-05-01T12:00:01Z", goal="Second goal")
    assert api.call("POST", "/v1/packets", alice, first)[:2] == (201, {"id": first["id"]})
    assert api.call("POST", "/v1/packets", alice, second)[0] == 201
    assert api.call("POST", "/v1/packets", alice, first)[0] == 201  # re-push: idempotent
    status, body, _ = api.call("GET", "/v1/packets", alice)
    assert status == 200
    assert [p["id"] for p in body["packets"]] == [second["id"], first["id"]]
    assert body["packets"][0] == {
        "id": second["id"],
        "created_at": "2026-05-01T12:00:01Z",
        "goal": "Second goal",
    }
    status, body, _ = api.call("GET", "/v1/packets?limit=1", alice)
    assert [p["id"] for p in body["packets"]] == [second["id"]]
    status, got, _ = api.call("GET", f"/v1/packets/{first['id']}", alice)
    assert status == 200 and got["id"] == first["id"] and got["goal"] == first["goal"]
    assert api.call("GET", f"/v1/packets/{first['id']}", bob)[:2] == (404, {"error": "not found"})
    # Bob pushing Alice's id never touches her packet.
    stolen = dict(first, goal="Bob was here")
    assert api.call("POST", "/v1/packets", bob, stolen)[0] == 409
    assert api.call("GET", f"/v1/packets/{first['id']}", alice)[1]["goal"] == first["goal"]
    assert api.call("DELETE", f"/v1/packets/{first['id']}", bob)[0] == 404
    assert api.call("DELETE", f"/v1/packets/{first['id']}", alice)[0] == 204
    assert api.call("GET", f"/v1/packets/{first['id']}", alice)[0] == 404

    # teams, invites, team packets
    status, body, _ = api.call("POST", "/v1/teams", alice, {"name": "core"})
    assert status == 201 and body["team"]["name"] == "core"
    assert api.call("POST", "/v1/teams", bob, {"name": "core"})[0] == 409
    assert api.call("GET", "/v1/packets?team=core", bob)[:2] == (404, {"error": "team not found"})
    status, invite, _ = api.call("POST", "/v1/teams/core/invites", alice)
    assert status == 201 and invite["url"].endswith(f"/v1/invites/{invite['code']}")
    status, joined, _ = api.call(
        "POST", f"/v1/invites/{invite['code']}/accept", None, {"display": "carol"}
    )
    assert status == 201 and joined["team"]["name"] == "core" and joined["token"]
    carol = joined["token"]
    again = api.call("POST", f"/v1/invites/{invite['code']}/accept", bob)
    assert again[:2] == (410, {"error": "invite expired or already consumed"})
    team_packet = make_packet(goal="For the team")
    assert api.call("POST", "/v1/packets?team=core", carol, team_packet)[0] == 201
    status, body, _ = api.call("GET", "/v1/packets?team=core", alice)
    assert [p["id"] for p in body["packets"]] == [team_packet["id"]]
    assert api.call("GET", f"/v1/packets/{team_packet['id']}", bob)[0] == 404
    status, body, _ = api.call("GET", "/v1/teams/core/members", carol)
    assert [m["role"] for m in body["members"]] == ["owner", "member"]
    assert [t["name"] for t in api.call("GET", "/v1/teams", carol)[1]["teams"]] == ["core"]
    # the team owner may delete a member's team packet; then the team
    assert api.call("DELETE", f"/v1/packets/{team_packet['id']}", alice)[0] == 204
    assert api.call("DELETE", "/v1/teams/core", carol)[0] == 403
    assert api.call("DELETE", "/v1/teams/core", alice)[0] == 204
    assert api.call("GET", "/v1/teams", carol)[1] == {"teams": []}


def proxy_event(
    method: str, path: str, resource: str, token: str | None, body: Any = None
) -> dict[str, Any]:
    """An API Gateway REST proxy event, as Lambda receives it behind the deployed API."""
    headers = {"Host": "abc123.execute-api.eu-west-1.amazonaws.com", "X-Forwarded-Proto": "https"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"id": path.rsplit("/", 1)[-1]} if "{id}" in resource else None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/api{path}",
            "stage": "api",
            "requestId": f"req-{method.lower()}-{len(path)}-7f3c",
            "identity": {"sourceIp": "198.51.100.7"},
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


class LambdaContext:
    function_name = "ltm-dev"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:ltm-dev"
    aws_request_id = "0f1e2d3c-lambda"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 20_000


def test_each_packet_route_keeps_the_budget_of_the_store(api: Api, lambda_app: Any) -> None:
    """The budget of tests/test_dynamo_calls.py, through the routes: app.py adds no call.

    As there, a push or delete reads the packet's revision, then writes in one
    transaction (the packet and its owner's usage); the search index is the stream
    consumer's.
    """
    alice, bob = api.user("alice"), api.user("bob")
    for token in (alice, bob):  # first use records last-used; the budget is for the next ones
        assert api.call("GET", "/v1/packets?limit=1", token)[0] == 200
    assert api.call("POST", "/v1/teams", alice, {"name": "core"})[0] == 201
    team = api.store.get_team("core")
    assert team is not None
    bob_user = api.store.load(token_hash=tokens.hash_token(bob)).token
    assert bob_user is not None
    api.store.add_member(team.id, bob_user[1].id)

    ops: list[str] = []
    client = lambda_app.get_store().client
    client.meta.events.register("before-call.dynamodb", lambda model, **_: ops.append(model.name))

    def cost(method: str, path: str, token: str, body: Any = None, status: int = 200) -> int:
        ops.clear()
        assert api.call(method, path, token, body)[0] == status
        assert "Scan" not in ops
        return len([op for op in ops if op != "BatchWriteItem"])

    mine, theirs = make_packet(), make_packet(goal="For the team")
    assert cost("POST", "/v1/packets", alice, mine, 201) == 3
    assert cost("POST", "/v1/packets?team=core", bob, theirs, 201) == 3
    assert cost("GET", "/v1/packets", alice) == 2
    assert cost("GET", "/v1/packets?team=core", alice) == 2
    # A packet's reader who may publish it (here its owner; for a team packet its creator or
    # the team's owner) is told its publication, for the X-LTM-Published-At and
    # X-LTM-Public-URL headers the reference CLI's show reads (service/publish.py, read).
    # The packet is read once, with the token: unpublished, that is all; published, its
    # publication's item is one read more, and for a team packet its publisher's membership
    # one more (a removed member's publication is dead at once).
    assert cost("GET", f"/v1/packets/{mine['id']}", alice) == 1
    assert cost("GET", f"/v1/packets/{theirs['id']}", alice) == 2  # + the membership
    assert cost("GET", f"/v1/packets/{theirs['id']}", bob) == 2
    for who, packet in ((alice, mine), (bob, theirs)):
        assert api.call("POST", f"/v1/packets/{packet['id']}/publish", who)[0] in (200, 201)
    assert cost("GET", f"/v1/packets/{mine['id']}", alice) == 2
    assert cost("GET", f"/v1/packets/{theirs['id']}", alice) == 4
    assert cost("GET", f"/v1/packets/{theirs['id']}", bob) == 4
    read_only = tokens.new_token(bob_user[1].id, "bob-read-only", scope="read")
    api.store.add_token(read_only[1])
    api.call("GET", "/v1/packets?limit=1", read_only[0])  # its first use records last-used
    assert cost("GET", f"/v1/packets/{theirs['id']}", read_only[0]) == 2  # may not publish
    # 404 after one read more: a packet not in the reader's scopes may be shared with them
    assert cost("GET", f"/v1/packets/{mine['id']}", bob, status=404) == 2
    assert cost("DELETE", f"/v1/packets/{theirs['id']}", alice, status=204) == 3
    assert cost("DELETE", f"/v1/packets/{mine['id']}", alice, status=204) == 3
    assert cost("GET", "/v1/packets?team=nope", alice, status=404) == 1


def test_a_throttled_database_is_a_503_the_cli_keeps_its_push_for(
    api: Api, lambda_app: Any
) -> None:
    """DynamoDB throttling past the SDK's retries, or out of reach, is not the caller's
    fault: 503 with Retry-After (a client's outbox keeps a push it got a 503 for, and a
    500 would lose it), where any other failure of a call stays a 500."""
    from botocore.exceptions import ClientError, EndpointConnectionError

    alice = api.user("alice")
    assert api.call("GET", "/v1/packets?limit=1", alice)[0] == 200  # the app's store is made
    events = lambda_app.get_store().client.meta.events
    failure: list[Exception] = []

    def fail(model: Any, **_: Any) -> None:
        if failure:
            raise failure[0]

    events.register("before-call.dynamodb", fail)
    try:
        for code in ("ProvisionedThroughputExceededException", "ThrottlingException"):
            failure[:] = [ClientError({"Error": {"Code": code, "Message": "slow down"}}, "op")]
            for method, path, body in (
                ("POST", "/v1/packets", make_packet()),
                ("GET", "/v1/packets", None),
            ):
                status, data, headers = api.call(method, path, alice, body)
                assert (status, headers.get("Retry-After")) == (503, "1"), (code, method, data)
                assert data == {"error": "the server's database is busy; try again shortly"}
        failure[:] = [EndpointConnectionError(endpoint_url="https://dynamodb.invalid")]
        assert api.call("POST", "/v1/packets", alice, make_packet())[0] == 503
        failure[:] = [ClientError({"Error": {"Code": "ValidationException"}}, "op")]
        status, data, headers = api.call("POST", "/v1/packets", alice, make_packet())
        assert (status, data, "Retry-After" in headers) == (
            500,
            {"error": "internal server error"},
            False,
        )
    finally:
        events.unregister("before-call.dynamodb", fail)
    assert api.call("POST", "/v1/packets", alice, make_packet())[0] == 201


def test_lambda_logs_carry_the_request_id_and_emit_emf_metrics(
    lambda_app: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = json.loads((ROOT / ".chalice" / "config.json").read_text())
    variables = {
        **config["environment_variables"],
        **config["stages"][STAGE]["environment_variables"],
    }
    with in_process(TABLE) as dynamodb:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "ltm-dev")  # as on Lambda
        secret = tokens.issue(DynamoStore(TABLE, client=dynamodb), "dana")[1]
        capsys.readouterr()
        caplog.clear()
        pushed = make_packet()
        handler = lambda_app.app
        response = handler(
            proxy_event("POST", "/v1/packets", "/v1/packets", secret, pushed), LambdaContext()
        )
        assert response["statusCode"] == 201
        assert response["headers"]["X-Request-Id"] == "req-post-11-7f3c"
        path = f"/v1/packets/{pushed['id']}"
        assert (
            handler(proxy_event("GET", path, "/v1/packets/{id}", secret), LambdaContext())[
                "statusCode"
            ]
            == 200
        )
        bad = proxy_event("GET", "/v1/packets", "/v1/packets", "ltm_" + "1" * 64)
        assert handler(bad, LambdaContext())["statusCode"] == 401
    out, err = capsys.readouterr()
    access = [r.__dict__["access"] for r in caplog.records if r.getMessage() == "request"]
    assert [(a["method"], a["status"], a["request_id"]) for a in access] == [
        ("POST", 201, "req-post-11-7f3c"),
        ("GET", 200, f"req-get-{len(path)}-7f3c"),
        ("GET", 401, "req-get-11-7f3c"),
    ]
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert secret not in logged and secret not in out and secret not in err  # never a token
    emf = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
    counted = [name for blob in emf for name in ("Pushes", "Pulls", "AuthFailures") if name in blob]
    assert counted == ["Pushes", "Pulls", "AuthFailures"]
    for blob in emf:
        directive = blob["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == "ltm"
        assert blob["service"] == "ltm"


def test_no_metrics_off_lambda(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ltm import observe

    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.delenv("LTM_METRICS", raising=False)
    capsys.readouterr()
    observe.request_done("POST", "/v1/packets", 201)  # self-hosted: nothing on stdout
    assert '"_aws"' not in capsys.readouterr().out
    assert observe.metric_for("GET", "/v1/packets/{id}", 404) is None
    assert observe.metric_for("DELETE", "/v1/packets/{id}", 401) == "AuthFailures"


def mcp_event(token: str | None, message: dict[str, Any]) -> dict[str, Any]:
    event = proxy_event("POST", "/mcp", "/mcp", token, message)
    event["headers"]["Accept"] = "application/json, text/event-stream"
    event["headers"]["Mcp-Protocol-Version"] = "2025-06-18"
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
    return event


def test_mcp_through_the_lambda_event_on_dynamodb(
    lambda_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/mcp`` answers the API Gateway event Lambda gets: the SDK's JSON answer, the tools
    acting on DynamoDB as the token's user, and a 401 that points at this stage's metadata."""
    config = json.loads((ROOT / ".chalice" / "config.json").read_text())
    variables = {
        **config["environment_variables"],
        **config["stages"][STAGE]["environment_variables"],
    }
    with in_process(TABLE) as dynamodb:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        store = DynamoStore(TABLE, client=dynamodb)
        secret = tokens.issue(store, "lambda-user")[1]
        handler = lambda_app.app
        unsigned = handler(
            mcp_event(None, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), LambdaContext()
        )
        assert unsigned["statusCode"] == 401
        base = "https://abc123.execute-api.eu-west-1.amazonaws.com/api"
        assert (
            f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
            in (unsigned["headers"]["www-authenticate"])
        )
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "save",
                "arguments": {"packet": {"goal": "saved through lambda", "next_step": "go"}},
            },
        }
        saved = handler(mcp_event(secret, call), LambdaContext())
        assert saved["statusCode"] == 200, saved
        result = json.loads(saved["body"])["result"]
        assert result["isError"] is False
        assert "structuredContent" not in result  # the text is what the model sees
        packet_id = result["_meta"]["ltm/data"]["id"]
        stored = store.get_packet(packet_id)
        assert stored is not None and b"saved through lambda" in stored.body
        # DynamoDB throttled past the SDK's retries: the agent is told to try again
        from botocore.exceptions import ClientError

        def throttle(**_: Any) -> None:
            raise ClientError({"Error": {"Code": "ThrottlingException"}}, "op")

        events = lambda_app.get_store().client.meta.events
        events.register("before-call.dynamodb", throttle)
        try:  # the token's look-up throttled: the request; then the tool's write: the tool
            refused = handler(mcp_event(secret, {**call, "id": 3}), LambdaContext())
            events.unregister("before-call.dynamodb", throttle)
            events.register("before-call.dynamodb.TransactWriteItems", throttle)
            failed = handler(mcp_event(secret, {**call, "id": 4}), LambdaContext())
        finally:
            events.unregister("before-call.dynamodb", throttle)
            events.unregister("before-call.dynamodb.TransactWriteItems", throttle)
        assert (refused["statusCode"], refused["headers"].get("Retry-After")) == (503, "1")
        result = json.loads(failed["body"])["result"]
        assert result["isError"] is True, result
        assert result["content"][0]["text"] == (
            "the server's database is busy; try again shortly: call the tool again in a moment."
        )
        metadata = handler(
            proxy_event(
                "GET",
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource/mcp",
                None,
            ),
            LambdaContext(),
        )
        assert json.loads(metadata["body"])["resource"] == base + "/mcp"


def test_a_cold_start_imports_no_openapi_models() -> None:
    """The OpenAPI document's models (pydantic) are imported for /v1/openapi.json alone."""
    import subprocess
    import sys

    probe = (
        "import sys, app\n"
        "assert 'pydantic' not in sys.modules and 'chalicelib.openapi' not in sys.modules\n"
        "from chalice.test import Client\n"
        "with Client(app.app) as client:\n"
        "    answer = client.http.get('/v1/openapi.json')\n"
        "assert answer.status_code == 200 and 'openapi' in answer.json_body, answer.status_code\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=scaled(120)
    )
    assert done.returncode == 0, done.stderr


def test_a_throttled_database_during_a_device_sign_in_is_a_503(api: Api, lambda_app: Any) -> None:
    """The device flow's endpoints and the pages meet the same throttling as the API: a poll
    answered 503 with Retry-After is one a device polls again after (a 500 ended the
    sign-in the person may just have approved), and the pages say so too."""
    from botocore.exceptions import ClientError

    form = {"Content-Type": "application/x-www-form-urlencoded"}
    started = api.client.http.post(
        "/oauth/authorize_device", headers=form, body=b"client_id=ltm-cli&scope=read+write"
    )
    assert started.status_code == 200, started.body
    device_code = json.loads(started.body)["device_code"]
    poll = (
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code"
        f"&client_id=ltm-cli&device_code={device_code}"
    ).encode()
    opened = api.client.http.get("/device")
    cookie = opened.headers["Set-Cookie"].split(";", 1)[0]
    csrf = re.search(r'name="csrf" value="([^"]+)"', opened.body.decode())
    assert csrf is not None, opened.body
    typed = urlencode({"csrf": csrf.group(1), "code": "BCDF-GHJK", "token": api.user("alice")})
    events = lambda_app.get_store().client.meta.events

    def throttle(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "op")

    events.register("before-call.dynamodb", throttle)
    try:
        polled = api.client.http.post("/oauth/token", headers=form, body=poll)
        page = api.client.http.post(
            "/device", headers={**form, "Cookie": cookie}, body=typed.encode()
        )
        public = api.client.http.get("/p/" + "A" * 32)  # a web view page: a published link
    finally:
        events.unregister("before-call.dynamodb", throttle)
    assert (polled.status_code, polled.headers.get("Retry-After")) == (503, "1"), polled.body
    assert json.loads(polled.body)["error"] == "temporarily_unavailable"
    assert (page.status_code, page.headers.get("Retry-After")) == (503, "1"), page.body
    assert (public.status_code, public.headers.get("Retry-After")) == (503, "1"), public.body
    # Once DynamoDB answers again, the same device code polls on.
    polled = api.client.http.post("/oauth/token", headers=form, body=poll)
    assert json.loads(polled.body)["error"] in ("authorization_pending", "slow_down")


def test_a_table_owing_repairs_says_so_once_per_container_and_in_healthz(
    api: Api, lambda_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A table from before the repair record (upgraded, ``dynamo_repair`` not run): the
    first request of a container logs one line naming the commands, healthz lists them,
    and no other request reads the record again. healthz tells each repair's end at once,
    and once both ran a new container says nothing."""
    from ltm.store.dynamo import DERIVED_KEY, repairs_owed_line
    from ltm.store.dynamo_repair import repair_index, repair_usage

    api.store.client.delete_item(TableName=TABLE, Key=DERIVED_KEY)
    lambda_app.close_store()  # a new container
    caplog.clear()
    owing = {"ok": True, "version": "0.2", "repairs_owed": ["index", "usage"]}
    alice = api.user("alice")
    assert api.call("POST", "/v1/packets", alice, make_packet())[0] == 201
    reads: list[Any] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key") == DERIVED_KEY:
            reads.append(params)

    lambda_app.get_store().client.meta.events.register("provide-client-params.dynamodb", count)
    assert api.call("GET", "/v1/packets", alice)[0] == 200
    assert api.call("POST", "/v1/packets", alice, make_packet())[0] == 201
    assert reads == []  # read at the container's start: no other request pays for it
    assert api.call("GET", "/v1/healthz")[:2] == (200, owing)
    said = [r.getMessage() for r in caplog.records if "dynamo_repair" in r.getMessage()]
    assert said == [repairs_owed_line(["index", "usage"])]
    assert "python -m ltm.store.dynamo_repair index and" in said[0]

    repair_index(api.store, say=lambda _: None)
    assert api.call("GET", "/v1/healthz")[:2] == (200, {**owing, "repairs_owed": ["usage"]})
    assert repair_usage(api.store, say=lambda _: None)["busy"] == []
    assert api.call("GET", "/v1/healthz")[:2] == (200, {"ok": True, "version": "0.2"})
    reads.clear()
    assert api.call("GET", "/v1/healthz")[0] == 200
    assert reads == []  # nothing owed: not read again
    lambda_app.close_store()
    caplog.clear()
    assert api.call("GET", "/v1/healthz")[:2] == (200, {"ok": True, "version": "0.2"})
    assert not [r for r in caplog.records if "dynamo_repair" in r.getMessage()]
