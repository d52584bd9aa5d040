"""The AWS side: CloudFormation template, Chalice stages, IAM policies, packaging.

- ``infra/*.yaml`` and what ``chalice package`` generates pass cfn-lint.
- The template's table is exactly ``TABLE_SCHEMA`` (the one definition), with
  the settings the issue asks for (on demand, PITR, deletion protection, SSE,
  TTL), and the Cognito pieces the device flow uses, with the outputs that
  feed the Chalice stages.
- Each stage's IAM policy allows exactly the DynamoDB actions the store uses
  (found by running the store contract suite against a recording client), only
  on its own table and indexes.
- ``chalice package`` builds a deployable artifact (pip fetches Linux wheels).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_store_contract as contract
from cfnlint.decode import decode
from dynamo_moto import in_process, moto_server
from timing import scaled

from ltm.store.dynamo import TABLE_SCHEMA, TTL_ATTRIBUTE, DynamoStore

ROOT = Path(__file__).resolve().parents[1]
INFRA = ROOT / "infra"
CHALICE = ROOT / ".chalice"
TEMPLATES = sorted(INFRA.glob("*.yaml")) + sorted(INFRA.glob("*.json"))
CONFIG = json.loads((CHALICE / "config.json").read_text())
STAGES = sorted(CONFIG["stages"])


def cfn_lint(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )


def template() -> dict[str, Any]:
    tpl, matches = decode(str(INFRA / "ltm.yaml"))
    assert not matches and tpl is not None
    return dict(tpl)


# -- the template ------------------------------------------------------------


def test_cfn_lint_passes_on_every_template() -> None:
    assert TEMPLATES, "no template in infra/"
    result = cfn_lint(*TEMPLATES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_table_is_the_one_definition() -> None:
    table = template()["Resources"]["Table"]
    assert table["Type"] == "AWS::DynamoDB::Table"
    props = table["Properties"]
    for key in ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode"):
        assert props[key] == TABLE_SCHEMA[key], key
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert (
        props["StreamSpecification"]["StreamViewType"]
        == (TABLE_SCHEMA["StreamSpecification"]["StreamViewType"])
    )
    assert template()["Outputs"]["TableStreamArn"]["Value"] == {
        "Fn::GetAtt": ["Table", "StreamArn"]
    }
    assert props["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["DeletionProtectionEnabled"] == {"Fn::If": ["Protect", True, False]}
    assert template()["Parameters"]["ProtectFromDeletion"]["Default"] == "true"
    assert table["DeletionPolicy"] == "Retain"
    # The policies and the stages name the table ltm-<stage>.
    assert props["TableName"] == {"Fn::Sub": "ltm-${Stage}"}


def test_cognito_pieces_for_the_device_flow() -> None:
    tpl = template()
    res = tpl["Resources"]
    types = {name: r["Type"] for name, r in res.items()}
    assert types["UserPool"] == "AWS::Cognito::UserPool"
    assert types["UserPoolDomain"] == "AWS::Cognito::UserPoolDomain"
    client = res["DeviceFlowClient"]
    assert client["Type"] == "AWS::Cognito::UserPoolClient"
    props = client["Properties"]
    assert props["GenerateSecret"] is False  # public client: authorization code + PKCE
    assert props["AllowedOAuthFlows"] == ["code"]
    assert "openid" in props["AllowedOAuthScopes"]
    assert props["AllowedOAuthFlowsUserPoolClient"] is True
    # Cognito sends the browser back to the API route the device flow serves.
    callback = props["CallbackURLs"][0]["Fn::If"]
    assert callback[1] == {"Fn::Sub": "${ApiUrl}/device/callback"}
    assert callback[2].endswith("/device/callback")
    app_source = (ROOT / "app.py").read_text()
    assert '"/device/callback"' in app_source
    outputs = tpl["Outputs"]
    for name in ("TableName", "UserPoolId", "UserPoolClientId", "CognitoDomain", "Region"):
        assert name in outputs


def test_stack_outputs_feed_the_chalice_stage(tmp_path: Path) -> None:
    """The stack's outputs go to an untracked settings file the app applies at start, never
    into the tracked .chalice/config.json (so git pull && chalice deploy keeps working)."""
    sys.path.insert(0, str(INFRA))
    try:
        import chalice_env
    finally:
        sys.path.remove(str(INFRA))
    from ltm import stage_settings

    outputs = [
        {"OutputKey": "TableName", "OutputValue": "my-ltm"},
        {"OutputKey": "UserPoolId", "OutputValue": "eu-west-1_AbCdEf123"},
        {"OutputKey": "UserPoolClientId", "OutputValue": "1example23456789"},
        {"OutputKey": "CognitoDomain", "OutputValue": "https://x.auth.eu-west-1.amazoncognito.com"},
        {"OutputKey": "Region", "OutputValue": "eu-west-1"},
    ]
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    settings = tmp_path / "stage_settings.json"
    settings.write_text(json.dumps({"stages": {"dev": {"LTM_DYNAMODB_TABLE": "ltm-dev"}}}))
    tracked = (ROOT / ".chalice" / "config.json").read_bytes()
    args = ["--stage", "prod", "--outputs", str(tmp_path / "outputs.json")]
    assert chalice_env.main([*args, "--settings", str(settings)]) == 0
    assert (ROOT / ".chalice" / "config.json").read_bytes() == tracked
    written = json.loads(settings.read_text())
    assert written["stages"]["dev"] == {"LTM_DYNAMODB_TABLE": "ltm-dev"}  # others kept
    prod = written["stages"]["prod"]
    assert prod["LTM_COGNITO_USER_POOL_ID"] == "eu-west-1_AbCdEf123"
    assert prod["LTM_DYNAMODB_TABLE"] == "my-ltm"
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "chalicelib/stage_settings.json"], cwd=ROOT
    )
    assert ignored.returncode == 0, "the settings file must not be tracked"

    # In Lambda: the stage's placeholders from the tracked config, then the file's values.
    environ = dict(CONFIG["stages"]["prod"]["environment_variables"])
    assert environ["LTM_STAGE"] == "prod"
    stage_settings.apply(environ, settings)
    assert environ["LTM_COGNITO_CLIENT_ID"] == "1example23456789"
    assert environ["LTM_DYNAMODB_TABLE"] == "my-ltm"
    other = {"AWS_LAMBDA_FUNCTION_NAME": "ltm-dev"}  # no LTM_STAGE: Chalice's <app>-<stage>
    stage_settings.apply(other, settings)
    assert other["LTM_DYNAMODB_TABLE"] == "ltm-dev"
    assert stage_settings.apply({"LTM_STAGE": "prod"}, tmp_path / "none.json") == {}
    # Every variable the script writes is one the stage declares.
    for stage in STAGES:
        declared = CONFIG["stages"][stage]["environment_variables"]
        assert set(chalice_env.OUTPUT_TO_ENV.values()) <= set(declared)


# -- Chalice stages and their IAM policies -------------------------------------


def _with_monkeypatch(test: Any, store: Any) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        test(store=store, monkeypatch=monkeypatch)


@pytest.fixture(scope="module")
def used_actions() -> set[str]:
    """The IAM actions the store needs: the whole contract suite, recorded."""
    actions: set[str] = set()

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            kinds = {next(iter(item)) for item in params["TransactItems"]}
            mapping = {
                "Put": "PutItem",
                "Update": "UpdateItem",
                "Delete": "DeleteItem",
                "ConditionCheck": "ConditionCheckItem",
            }
            actions.update(f"dynamodb:{mapping[k]}" for k in kinds)
        elif model.name not in ("CreateTable", "UpdateTimeToLive", "DescribeTable"):
            index = "index" if params.get("IndexName") else "table"
            actions.add(f"dynamodb:{model.name}@{index}")

    tests = [
        (name, fn)
        for name, fn in vars(contract).items()
        if name.startswith("test_") and callable(fn)
    ]
    runs: list[tuple[str, Any]] = []
    for name, fn in tests:
        params = set(inspect.signature(fn).parameters)
        if params == {"store"}:
            runs.append((name, fn))
        elif params == {"store", "owner", "team"}:
            runs.append((name, lambda store, fn=fn: fn(store, "u2", None)))
        elif params == {"store", "monkeypatch"}:
            runs.append((name, lambda store, fn=fn: _with_monkeypatch(fn, store)))
        elif marks := [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]:
            # parametrized arguments besides the store: every value, as pytest runs it
            argnames, values = marks[0].args[:2]
            names = argnames.split(",") if isinstance(argnames, str) else list(argnames)
            names = [argname.strip() for argname in names]
            assert params == {"store", *names}
            for i, value in enumerate(values):
                given = dict(zip(names, value if len(names) > 1 else (value,), strict=True))
                runs.append((f"{name}-{i}", lambda store, fn=fn, a=given: fn(store, **a)))
        else:  # pragma: no cover - a new contract test with other parameters
            raise AssertionError(f"update this recorder for {name}{tuple(params)}")
    for n, (name, run) in enumerate(runs):
        table = f"ltm-{n}-{name[:40]}".replace("_", "-")
        with in_process(table) as client:
            client.meta.events.register("provide-client-params.dynamodb", record)
            run(DynamoStore(table, client=client))
    return actions


STREAM_READ = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
}


def test_each_stage_is_dynamodb_with_its_own_least_privilege_policy(
    used_actions: set[str],
) -> None:
    assert CONFIG["autogen_policy"] is False
    assert CONFIG["environment_variables"]["LTM_STORE"] == "dynamodb"
    assert 256 <= CONFIG["lambda_memory_size"] <= 1024
    assert 5 <= CONFIG["lambda_timeout"] <= 29  # inside API Gateway's 29 s
    table_actions = {a.split("@")[0] for a in used_actions if not a.endswith("@index")}
    index_actions = {a.split("@")[0] for a in used_actions if a.endswith("@index")}
    assert "dynamodb:Scan" not in table_actions | index_actions
    indexes = [gsi["IndexName"] for gsi in TABLE_SCHEMA["GlobalSecondaryIndexes"]]
    for stage in STAGES:
        cfg = CONFIG["stages"][stage]
        table = f"ltm-{stage}"
        assert cfg["environment_variables"]["LTM_DYNAMODB_TABLE"] == table
        policy = json.loads((CHALICE / cfg["iam_policy_file"]).read_text())
        granted: dict[str, set[str]] = {}
        for statement in policy["Statement"]:
            assert statement["Effect"] == "Allow"
            resources = statement["Resource"]
            resources = [resources] if isinstance(resources, str) else resources
            for action in statement["Action"]:
                assert "*" not in action
                granted.setdefault(action, set()).update(resources)
        dynamo = {
            a: r for a, r in granted.items() if a.startswith("dynamodb:") and a not in STREAM_READ
        }
        table_arn = f"arn:aws:dynamodb:*:*:table/{table}"
        # Lambda's poller reads the table's stream with the function's role, for the
        # search index consumer: those four on the stream, nothing else.
        stream = {a: r for a, r in granted.items() if a in STREAM_READ}
        assert stream == {a: {f"{table_arn}/stream/*"} for a in STREAM_READ}, stage
        index_arns = {f"{table_arn}/index/{name}" for name in indexes}
        # Exactly what the code uses: nothing missing, nothing extra.
        assert set(dynamo) == table_actions | index_actions, stage
        for action, resources in dynamo.items():
            wanted = set()
            if action in table_actions:
                wanted.add(table_arn)
            if action in index_actions:
                wanted |= index_arns
            assert resources == wanted, (stage, action)
        logs = {a: r for a, r in granted.items() if a.startswith("logs:")}
        assert logs and all(
            r == {f"arn:aws:logs:*:*:log-group:/aws/lambda/ltm-{stage}*"} for r in logs.values()
        )
        xray = {a for a in granted if a.startswith("xray:")}
        if cfg.get("xray", CONFIG.get("xray", False)):
            assert xray == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
        else:
            assert not xray, f"{stage}: X-Ray is off, so its policy grants nothing for it"
        assert set(granted) == set(dynamo) | set(stream) | set(logs) | xray


# -- development tables against any endpoint ------------------------------------


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


def aws_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL_DYNAMODB=url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return env


def test_create_tables_command_against_an_endpoint(moto_url: str) -> None:
    import boto3

    run = [sys.executable, "-m", "ltm.store.dynamo", "create-tables", "--table", "ltm-cmd"]
    first = subprocess.run(
        run, env=aws_env(moto_url), capture_output=True, text=True, timeout=scaled(60)
    )
    assert first.returncode == 0, first.stderr
    again = subprocess.run(
        run, env=aws_env(moto_url), capture_output=True, text=True, timeout=scaled(60)
    )
    assert again.returncode == 0 and "already exists" in again.stderr
    client = boto3.client(
        "dynamodb",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    table = client.describe_table(TableName="ltm-cmd")["Table"]
    assert table["KeySchema"] == TABLE_SCHEMA["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        TABLE_SCHEMA["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    assert {g["IndexName"] for g in table["GlobalSecondaryIndexes"]} == {
        "gsi1",
        "gsi2",
        "gsi_project",
        "gsi_parent",
        "gsi_author",
    }
    ttl = client.describe_time_to_live(TableName="ltm-cmd")["TimeToLiveDescription"]
    assert ttl["AttributeName"] == TTL_ATTRIBUTE and ttl["TimeToLiveStatus"] == "ENABLED"


def test_open_store_follows_aws_endpoint_url_dynamodb(
    moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """boto3 reads AWS_ENDPOINT_URL_DYNAMODB itself: no code of ours passes it."""
    from ltm.store.dynamo import create_tables
    from ltm.store.select import open_store

    for name, value in aws_env(moto_url).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LTM_STORE", "dynamodb")
    monkeypatch.setenv("LTM_DYNAMODB_TABLE", "ltm-select")
    store = open_store()
    assert isinstance(store, DynamoStore)
    assert store.client.meta.endpoint_url == moto_url
    create_tables(store.client, "ltm-select")
    contract.put(store, contract.pkt("01SELECTED00", "u1"))
    assert store.get_packet("01SELECTED00") is not None


# -- packaging ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_chalice_package_builds_a_deployable_artifact(stage: str, tmp_path: Path) -> None:
    """``chalice package``: a SAM template cfn-lint accepts, and a zip with Linux wheels."""
    # A copy of exactly what Chalice deploys, so its wheel cache and build
    # directory (.chalice/deployments) stay out of the repo and apart per run.
    project = tmp_path / "project"
    shutil.copytree(
        ROOT / "chalicelib", project / "chalicelib", ignore=shutil.ignore_patterns("__pycache__")
    )
    (project / ".chalice").mkdir()
    for path in CHALICE.glob("*.json"):
        shutil.copy(path, project / ".chalice" / path.name)
    for name in ("app.py", "requirements.txt"):
        shutil.copy(ROOT / name, project / name)
    out = tmp_path / "out"
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("AWS_PROFILE", None)
    chalice = Path(sys.executable).with_name("chalice")
    result = subprocess.run(
        [str(chalice), "package", "--stage", stage, str(out)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(540),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sam = out / "sam.json"
    lint = cfn_lint(sam)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    tpl = json.loads(sam.read_text())
    fn = tpl["Resources"]["APIHandler"]["Properties"]
    assert fn["Runtime"] == "python3.11"
    assert fn["Environment"]["Variables"]["LTM_STORE"] == "dynamodb"
    assert fn["Environment"]["Variables"]["LTM_DYNAMODB_TABLE"] == f"ltm-{stage}"
    assert fn["Tracing"] == ("Active" if CONFIG["stages"][stage].get("xray") else "PassThrough")
    with zipfile.ZipFile(out / "deployment.zip") as zf:
        names = zf.namelist()
        unzipped = sum(info.file_size for info in zf.infolist())
    # Lambda's limits on a .zip package: 50 MB zipped when uploaded directly (chalice
    # deploy does), 250 MB unzipped
    # (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
    assert (out / "deployment.zip").stat().st_size < 50 * 10**6
    assert unzipped < 250 * 10**6
    tops = {name.split("/")[0] for name in names}
    assert {"app.py", "chalicelib", "chalice", "pydantic", "pydantic_core"} <= tops
    assert "ulid" not in tops  # ids are minted by ltm.ids: python-ulid is the tests' alone
    assert "aws_lambda_powertools" in tops
    assert {"mcp", "starlette", "anyio"} <= tops  # /mcp: the SDK and its server stack
    assert "chalicelib/store/dynamo.py" in names and "chalicelib/mcp/http.py" in names
    # A Linux build of the one compiled dependency, for the configured architecture.
    arch = "aarch64" if CONFIG.get("lambda_architecture") == "arm64" else "x86_64"
    assert any(n.startswith("pydantic_core/") and f"{arch}-linux" in n for n in names)
    # The runtime provides boto3; tests, the CLI and the virtualenv stay out.
    assert not tops & {"boto3", "botocore", "tests", "cli", ".venv", "moto"}


# -- the front door and the stream consumer: chalice package --merge-template ----------


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``chalice package --merge-template .chalice/merge-template.json`` once (slow), linted."""
    tmp = tmp_path_factory.mktemp("merged")
    project = tmp / "project"
    shutil.copytree(
        ROOT / "chalicelib", project / "chalicelib", ignore=shutil.ignore_patterns("__pycache__")
    )
    (project / ".chalice").mkdir()
    for path in CHALICE.glob("*.json"):
        shutil.copy(path, project / ".chalice" / path.name)
    for name in ("app.py", "requirements.txt"):
        shutil.copy(ROOT / name, project / name)
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("AWS_PROFILE", None)
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("chalice")),
            "package",
            "--stage",
            "prod",
            "--merge-template",
            ".chalice/merge-template.json",
            str(tmp / "out"),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(540),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lint = cfn_lint(tmp / "out" / "sam.json")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    return dict(json.loads((tmp / "out" / "sam.json").read_text()))


@pytest.mark.slow
def test_the_stream_consumer_is_mapped_with_retries_bisection_and_a_failure_queue(
    merged: dict[str, Any],
) -> None:
    res = merged["Resources"]
    event = res["Index"]["Properties"]["Events"]["IndexDynamodbEventSource"]
    assert event["Type"] == "DynamoDB"
    props = event["Properties"]
    assert props["Stream"] == {"Ref": "TableStreamArn"}  # the infra stack's output
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert props["BisectBatchOnFunctionError"] is True
    assert 1 <= props["MaximumRetryAttempts"] <= 20
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    failures = props["DestinationConfig"]["OnFailure"]
    assert failures["Destination"] == {"Fn::GetAtt": ["IndexFailures", "Arn"]}
    assert res["IndexFailures"]["Type"] == "AWS::SQS::Queue"
    sends = res["IndexFailuresSend"]["Properties"]
    assert sends["Roles"] == [{"Ref": "IndexRole"}]
    assert sends["PolicyDocument"]["Statement"][0]["Action"] == ["sqs:SendMessage"]
    # Only packet records and the marks of the jobs (a team's tombstone, a member's
    # departure) invoke it (the index's own writes do not).
    (pattern,) = props["FilterCriteria"]["Filters"]
    assert json.loads(pattern["Pattern"]) == {
        "dynamodb": {"Keys": {"sk": {"S": ["PKT", "GONE", {"prefix": "LEFT#"}]}}}
    }
    assert res["Index"]["Properties"]["Handler"] == "app.index_changes"


@pytest.mark.slow
def test_the_front_door_throttles_limits_and_alarms(merged: dict[str, Any]) -> None:
    res, params = merged["Resources"], merged["Parameters"]
    settings = res["RestAPI"]["Properties"]["MethodSettings"]
    stage = next(s for s in settings if s["ResourcePath"] == "/*")
    assert stage["ThrottlingRateLimit"] == {"Ref": "ApiRateLimit"}
    anonymous = {(s["ResourcePath"], s["HttpMethod"]) for s in settings if s is not stage}
    for path, method in (
        ("/register", "POST"),
        ("/oauth/token", "POST"),
        ("/device", "POST"),
        ("/v1/invites/{code}/accept", "POST"),
        ("/p/{secret}", "GET"),
    ):
        assert ("/" + path[1:].replace("/", "~1"), method) in anonymous, path
    for s in settings:
        if s is not stage:
            assert s["ThrottlingRateLimit"] == {"Ref": "AnonymousRateLimit"}
    assert int(params["AnonymousRateLimit"]["Default"]) < int(params["ApiRateLimit"]["Default"])
    for fn in ("APIHandler", "Index"):
        assert "ReservedConcurrentExecutions" in res[fn]["Properties"], fn
    alarms = {
        (a["Properties"].get("Namespace"), a["Properties"].get("MetricName"))
        for a in res.values()
        if a["Type"] == "AWS::CloudWatch::Alarm"
    }
    for wanted in (
        ("AWS/DynamoDB", "ReadThrottleEvents"),
        ("AWS/DynamoDB", "WriteThrottleEvents"),
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/ApiGateway", "5XXError"),
        ("ltm", "AuthFailures"),
    ):
        assert wanted in alarms, wanted
    system = res["TableSystemErrors"]["Properties"]["Metrics"]
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in system if "MetricStat" in m} == {
        "SystemErrors"
    }
    budget = res["MonthlyBudget"]
    assert budget["Type"] == "AWS::Budgets::Budget" and budget["Condition"] == "HasBudget"
    assert params["MonthlyBudgetUSD"]["Default"] == 0  # optional: off unless asked for


# -- what the stacks resolve to, for given parameters ---------------------------------

NO_VALUE = object()  # AWS::NoValue: the property is left out


def resolve(node: Any, tpl: dict[str, Any], given: dict[str, Any]) -> Any:
    """``node`` as CloudFormation evaluates it with the parameters ``given`` (defaults for
    the rest): Ref to a parameter, Fn::Sub over parameters, Fn::If and the condition
    functions. A Ref to a resource stays as it is."""
    params = {name: p.get("Default") for name, p in tpl.get("Parameters", {}).items()}
    params.update(given)

    def condition(name: str) -> bool:
        return bool(value(tpl["Conditions"][name]))

    def value(n: Any) -> Any:
        if isinstance(n, list):
            return [value(v) for v in n]
        if not isinstance(n, dict):
            return n
        if len(n) != 1:
            return {k: value(v) for k, v in n.items()}
        ((fn, arg),) = n.items()
        if fn == "Ref":
            if arg == "AWS::NoValue":
                return NO_VALUE
            return params.get(arg, n)
        if fn == "Fn::Sub" and isinstance(arg, str):
            out = arg
            for name, v in params.items():
                out = out.replace("${" + name + "}", str(v))
            return out
        if fn == "Fn::If":
            return value(arg[1] if condition(arg[0]) else arg[2])
        if fn == "Fn::Equals":
            return str(value(arg[0])) == str(value(arg[1]))
        if fn == "Fn::Not":
            return not value(arg[0])
        if fn == "Fn::And":
            return all(value(a) for a in arg)
        if fn == "Condition":
            return condition(arg)
        return {fn: value(arg)}

    return value(node)


@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_the_functions_write_to_log_groups_with_retention(
    merged: dict[str, Any], stage: str
) -> None:
    """The API stack names its functions as ``chalice deploy`` does: the stage's policy lets
    exactly those names write logs, and the infra stack keeps their logs 30 days. Unnamed,
    CloudFormation named them <stack>-APIHandler-<random>, whose logs the policy refused:
    no access log, no metric, no alarm on them."""
    import fnmatch

    assert merged["Parameters"]["Stage"]["AllowedValues"] == STAGES
    infra = template()
    retained = {
        resolve(r["Properties"]["LogGroupName"], infra, {"Stage": stage}): r["Properties"].get(
            "RetentionInDays"
        )
        for r in infra["Resources"].values()
        if r["Type"] == "AWS::Logs::LogGroup"
    }
    policy = json.loads((CHALICE / CONFIG["stages"][stage]["iam_policy_file"]).read_text())
    (logs,) = [s for s in policy["Statement"] if s["Action"][0].startswith("logs:")]
    app_name = CONFIG["app_name"]
    # chalice deploy's names: <app>-<stage> for the API, <app>-<stage>-<name> for the others
    for function, wanted in (
        ("APIHandler", f"{app_name}-{stage}"),
        ("Index", f"{app_name}-{stage}-index"),
    ):
        props = merged["Resources"][function]["Properties"]
        name = resolve(props.get("FunctionName"), merged, {"Stage": stage})
        assert name == wanted, function
        group = f"/aws/lambda/{name}"
        assert fnmatch.fnmatchcase(f"arn:aws:logs:eu-west-1:1:log-group:{group}", logs["Resource"])
        assert retained.get(group) == 30, group


@pytest.mark.slow
def test_reserved_concurrency_can_be_left_off(merged: dict[str, Any]) -> None:
    """An account whose Lambda concurrency quota is low (a new one's) cannot reserve any:
    Lambda keeps 100 unreserved. 0 leaves the property out; by default it is reserved."""
    for function, param in (("APIHandler", "ApiConcurrency"), ("Index", "IndexConcurrency")):
        reserved = merged["Resources"][function]["Properties"]["ReservedConcurrentExecutions"]
        assert resolve(reserved, merged, {}) == merged["Parameters"][param]["Default"] > 0
        assert resolve(reserved, merged, {param: 0}) is NO_VALUE
        assert resolve(reserved, merged, {param: 3}) == 3
        assert merged["Parameters"][param]["MinValue"] == 0


@pytest.mark.slow
def test_the_front_door_publishes_no_per_method_metrics(merged: dict[str, Any]) -> None:
    """API Gateway's detailed metrics (MetricsEnabled) are per method, each billed as a
    custom metric: seven for every route called in a month, more than the rest of a
    small deployment costs. What the alarms read, the stage's own metrics (dimensions
    ApiName and Stage), API Gateway publishes without them: "To view the metrics at the
    method-level for your API, turn on detailed metrics"
    (https://docs.aws.amazon.com/apigateway/latest/developerguide/metrics_dimensions_view_in_cloud_watch.html)."""
    res = merged["Resources"]
    for setting in res["RestAPI"]["Properties"]["MethodSettings"]:
        assert not setting.get("MetricsEnabled"), setting["ResourcePath"]
    gateway = [
        a["Properties"]
        for a in res.values()
        if a["Type"] == "AWS::CloudWatch::Alarm"
        and a["Properties"].get("Namespace") == "AWS/ApiGateway"
    ]
    assert gateway
    for alarm in gateway:
        assert {d["Name"] for d in alarm["Dimensions"]} <= {"ApiName", "Stage"}


@pytest.mark.slow
def test_the_consumer_is_mapped_after_its_role_may_send_to_the_failure_queue(
    merged: dict[str, Any],
) -> None:
    """Lambda refuses to create an event source mapping whose on-failure destination its
    function's role cannot send to; the grant is a policy of its own, which CloudFormation
    otherwise makes at the same time as the function and its mapping (the race of
    https://github.com/aws/serverless-application-model/issues/2534). The function, and so
    the mapping SAM makes for it, waits for the grant."""
    res = merged["Resources"]
    for name, resource in res.items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for event in resource["Properties"].get("Events", {}).values():
            destination = event["Properties"].get("DestinationConfig", {}).get("OnFailure")
            if destination is None:
                continue
            role = resource["Properties"]["Role"]["Fn::GetAtt"][0]
            grants = {
                policy
                for policy, r in res.items()
                if r["Type"] == "AWS::IAM::Policy"
                and {"Ref": role} in r["Properties"]["Roles"]
                and any(
                    "sqs:SendMessage" in s["Action"] and s["Resource"] == destination["Destination"]
                    for s in r["Properties"]["PolicyDocument"]["Statement"]
                )
            }
            assert grants, name
            assert grants <= set(resource.get("DependsOn", [])), name


def test_what_the_infra_stack_makes_is_tagged() -> None:
    """Each resource that takes tags carries app=ltm and its stage, so the owner can find
    (and, with cost allocation tags, price) what ltm made in the account."""
    tpl = template()
    wanted = {"app": "ltm", "stage": {"Ref": "Stage"}}
    taggable = {"AWS::DynamoDB::Table", "AWS::Logs::LogGroup", "AWS::Cognito::UserPool"}
    for name, resource in tpl["Resources"].items():
        if resource["Type"] not in taggable:
            continue
        props = resource["Properties"]
        if "UserPoolTags" in props:
            tags = dict(props["UserPoolTags"])
        else:
            tags = {t["Key"]: t["Value"] for t in props.get("Tags", [])}
        assert tags == wanted, name


def test_what_packaging_writes_is_not_tracked() -> None:
    """The docs' ``chalice package ... out/`` leaves its template and zip (which carries the
    stage's settings) in the checkout: git ignores them, so they are never committed."""
    docs = (ROOT / "docs" / "deploy-aws.md").read_text()
    out = next(line for line in docs.splitlines() if line.startswith("chalice package")).split()[-1]
    for name in ("sam.json", "deployment.zip", "packaged.yaml"):
        path = f"{out.rstrip('/')}/{name}"
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert ignored.returncode == 0, path
