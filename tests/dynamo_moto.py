"""DynamoDB on moto for the tests: in-process (``mock_aws``) or over HTTP (moto's server).

Real DynamoDB applies each request atomically (a transaction either happens
whole or is cancelled; two conditional writes of one item never both pass).
moto's in-memory backend does not lock, so threads racing through it can
interleave inside one request ("dictionary changed size during iteration",
two winners of one condition). ``serialize_moto_dynamodb`` gives moto the
per-request atomicity DynamoDB has, by running its DynamoDB requests one at
a time; the store's own races (lost transactions, retries) stay real.
It also honours ``TransactWriteItems``' ``ClientRequestToken`` as DynamoDB
does: botocore fills one in and keeps it across its retries, so a transaction
that was applied but answered too late for the client's read timeout is not
applied again (moto would cancel the repeat: "team name taken").
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from timing import scaled

REGION = "us-east-1"
_LOCK = threading.RLock()


def serialize_moto_dynamodb() -> None:
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.call_action, "_ltm_serialized", False):
        return
    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _LOCK:
            return original(self)

    call_action._ltm_serialized = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
    DynamoHandler.transact_write_items = _idempotent(  # type: ignore[method-assign]
        DynamoHandler.transact_write_items
    )
    _rollback_what_was_touched()


def _rollback_what_was_touched() -> None:
    """moto backs a transaction up by deep-copying each table it names, once per action,
    the table's stream records included: every push then costs time and memory in
    proportion to all a test server has stored (minutes for an import late in a module,
    gigabytes of memory). The same rollback, kept small: a copy of the items the
    transaction names and the length of each stream, put back when it is cancelled."""
    import copy

    from moto.dynamodb import models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "_ltm_small", False):
        return

    class TablesStayPut:
        """``copy`` as moto's transaction sees it: a table's backup is the table itself."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    models.copy = TablesStayPut  # type: ignore[assignment]
    original = backend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[Any, Any, Any, Any]] = []
        streams: dict[int, tuple[Any, int]] = {}
        for entry in transact_items:
            for request in entry.values():
                table = self.tables.get(request.get("TableName"))
                key = request.get("Key") or request.get("Item") or {}
                if table is None or table.hash_key_attr not in key:
                    continue
                hash_value = DynamoType(key[table.hash_key_attr])
                range_value = None
                if table.range_key_attr is not None:
                    if table.range_key_attr not in key:
                        continue
                    range_value = DynamoType(key[table.range_key_attr])
                try:
                    before = table.get_item(hash_value, range_value)
                except Exception:  # a malformed key: moto refuses the request itself
                    continue
                saved.append((table, hash_value, range_value, copy.deepcopy(before)))
                if table.stream_shard is not None:
                    streams.setdefault(id(table), (table, len(table.stream_shard.items)))
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, before in reversed(saved):
                if range_value is None:
                    if before is None:
                        table.items.pop(hash_value, None)
                    else:
                        table.items[hash_value] = before
                elif before is None:
                    table.items[hash_value].pop(range_value, None)
                else:
                    table.items[hash_value][range_value] = before
            for table, length in streams.values():
                del table.stream_shard.items[length:]
            raise

    transact_write_items._ltm_small = True  # type: ignore[attr-defined]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def _idempotent(transact: Any) -> Any:
    """``transact`` applying a ``ClientRequestToken`` once: a repeat of a transaction that
    succeeded succeeds without effect (DynamoDB keeps tokens 10 minutes; a test run, for good).
    """
    applied: set[str] = set()

    def transact_write_items(self: Any) -> Any:
        token = self.body.get("ClientRequestToken")
        if token is not None and token in applied:
            from moto.core.responses import ActionResult

            return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})
        result = transact(self)
        if token is not None:
            applied.add(token)
        return result

    return transact_write_items


_EXPRESSIONS = (
    "ConditionExpression",
    "UpdateExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)
_TOKEN = re.compile(r"[#:][A-Za-z0-9_]+")


def _check_expressions(request: dict[str, Any], where: str) -> None:
    """What real DynamoDB refuses and moto lets through: placeholders given but never used."""
    used = set()
    for name in _EXPRESSIONS:
        used.update(_TOKEN.findall(request.get(name) or ""))
    for kind in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        unused = set(request.get(kind) or {}) - used
        if unused:
            raise ValueError(f"{where}: {kind} unused in expressions: {sorted(unused)}")


def check_like_dynamodb(params: dict[str, Any], model: Any, **_: Any) -> None:
    """A botocore hook (``provide-client-params.dynamodb``) holding requests to DynamoDB's rules."""
    _check_expressions(params, model.name)
    keys: list[str] = []
    for item in params.get("TransactItems") or []:
        for action, request in item.items():
            _check_expressions(request, f"{model.name}.{action}")
            key = request.get("Key") or {
                k: v for k, v in request["Item"].items() if k in ("pk", "sk")
            }
            keys.append(repr(sorted(key.items())))
    for table in (params.get("RequestItems") or {}).values():
        if isinstance(table, dict):  # BatchGetItem
            keys.extend(repr(sorted(k.items())) for k in table["Keys"])
        else:  # BatchWriteItem
            for request in table:
                for inner in request.values():
                    key = inner.get("Key") or {
                        k: v for k, v in inner["Item"].items() if k in ("pk", "sk")
                    }
                    keys.append(repr(sorted(key.items())))
    limit = {"TransactWriteItems": 100, "BatchGetItem": 100, "BatchWriteItem": 25}.get(model.name)
    if limit is not None and len(keys) > limit:
        raise ValueError(f"{model.name}: {len(keys)} items, DynamoDB takes at most {limit}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"{model.name}: two actions on one item (DynamoDB refuses that)")


def fake_credentials(env: Any) -> None:
    """Credentials and region moto accepts, and no endpoint override from the machine."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
        env.delenv(name, raising=False)
    env.setenv("AWS_ACCESS_KEY_ID", "testing")
    env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    env.setenv("AWS_SESSION_TOKEN", "testing")
    env.setenv("AWS_DEFAULT_REGION", REGION)
    env.setenv("AWS_REGION", REGION)


@contextmanager
def in_process(table: str = "ltm-test") -> Iterator[Any]:
    """moto in this process with the ltm table created; yields a DynamoDB client."""
    import pytest
    from moto import mock_aws

    from ltm.store.dynamo import create_tables, make_client

    serialize_moto_dynamodb()
    with pytest.MonkeyPatch.context() as env, mock_aws():
        fake_credentials(env)
        client = make_client(REGION)
        client.meta.events.register("provide-client-params.dynamodb", check_like_dynamodb)
        create_tables(client, table)
        yield client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_line(proc: subprocess.Popen[str], pattern: re.Pattern[str], what: str) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + scaled(60)
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        found = pattern.search(line)
        if found:
            return found.group(1)
    proc.kill()
    raise RuntimeError(f"{what} did not start:\n{''.join(seen)}")


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's server (a stand-in for DynamoDB Local) in its own process; yields its URL.

    Its own process, so no in-process ``mock_aws`` of another test can reset
    its data; DynamoDB requests are serialized there as in ``in_process``.
    """
    proc = subprocess.Popen(
        [sys.executable, __file__, "moto"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        port = _wait_for_line(proc, re.compile(r"moto listening on port (\d+)"), "moto server")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            proc.kill()


def unique_table() -> str:
    return f"ltm-{uuid.uuid4().hex[:12]}"


def endpoint_client(url: str) -> Any:
    """A DynamoDB client on an explicit endpoint, for the test process's own reads and writes."""
    import boto3
    from botocore.config import Config

    client = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "max_attempts": 4}),
    )
    client.meta.events.register("provide-client-params.dynamodb", check_like_dynamodb)
    return client


def app_env(url: str, table: str) -> dict[str, str]:
    """The environment pointing the app's store at ``url`` (as for DynamoDB Local)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LTM_", "AWS_"))}
    env.update(
        LTM_STORE="dynamodb",
        LTM_DYNAMODB_TABLE=table,
        AWS_ENDPOINT_URL_DYNAMODB=url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
    )
    return env


@contextmanager
def running_dynamo_server(
    directory: Path, *extra: str, env: dict[str, str] | None = None
) -> Iterator[Any]:
    """The app over HTTP (the production server and WSGI adapter) on DynamoDB at moto's server.

    A ``serverkit.Server`` like ``ltm server run``'s, so the HTTP suites run
    unchanged against it: its root token is minted straight into the table,
    and ``server.open_store()`` opens the same table from the test process.
    """
    from serverkit import run_server

    from ltm.service import tokens
    from ltm.store.dynamo import DynamoStore, create_tables

    with moto_server() as url:
        table = unique_table()
        client = endpoint_client(url)
        create_tables(client, table)
        _, root = tokens.issue(DynamoStore(table, client=client), "root", label="root")
        server = run_server(
            directory / "dynamodb",
            directory / "server.log",
            root,
            *extra,
            env={**app_env(url, table), **(env or {})},
            command=[sys.executable, __file__, "app"],
        )
        server.store = "dynamodb"
        server.open_store = lambda: DynamoStore(table, client=client)
        try:
            yield server
        finally:
            server.stop()


# -- the processes this module runs as a script ----------------------------------


def _run_moto() -> None:
    from moto.server import ThreadedMotoServer

    serialize_moto_dynamodb()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    print(f"moto listening on port {server.get_host_and_port()[1]}", flush=True)
    sys.stdin.read()  # until the parent closes the pipe or ends us
    server.stop()


def _patient_clients() -> None:
    """The app's DynamoDB client, waiting as long as a loaded test machine needs.

    The store's client gives DynamoDB 5 s per request, in milliseconds' reach.
    moto answers one request at a time, so under a busy suite a request can
    wait behind others past that and botocore gives up after three tries (a
    500). The rest of the client (retries, keep-alive) stays the store's.
    """
    import botocore.session
    from botocore.config import Config

    import ltm.store.dynamo as dynamo

    made = dynamo.make_client

    def make_client(region: str | None = None) -> Any:
        config = made(region).meta.config.merge(Config(read_timeout=scaled(30)))
        session = botocore.session.get_session()
        return session.create_client("dynamodb", region_name=region, config=config)

    dynamo.make_client = make_client


def _run_app(argv: list[str]) -> None:
    """Serve app.py over HTTP as ``ltm server run`` does, but on the store the environment names.

    ``ltm server run`` always uses SQLite; this runs the same app through the
    same production HTTP server and WSGI adapter with ``LTM_STORE=dynamodb``.
    """
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", default="127.0.0.1:0")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--external-url")
    args = parser.parse_args(argv)
    if args.external_url:
        os.environ["LTM_EXTERNAL_URL"] = args.external_url.rstrip("/")
    from ltm.cli.server.http import bind, serve
    from ltm.cli.server.loader import load_app
    from ltm.cli.server.wsgi import ChaliceWSGI

    host, _, port = args.addr.rpartition(":")
    _patient_clients()
    module = load_app()
    # The app's own client, held to DynamoDB's request rules too: a breach is a 500.
    module.get_store().client.meta.events.register(
        "provide-client-params.dynamodb", check_like_dynamodb
    )
    sock = bind(host, int(port))
    bound = sock.getsockname()[1]
    table = os.environ.get("LTM_DYNAMODB_TABLE")
    # The web pages' own name on loopback, as `ltm server run` gives them.
    from ltm.cli.server.commands import serve_web_at, web_name_for

    name = None if args.external_url else web_name_for(host, module.get_store())
    pages = serve_web_at(name, f"{host}:{bound}")
    shown = f", web view at {pages}" if pages else ""
    print(
        f"ltm server: listening on http://{host}:{bound} (dynamodb {table}){shown}",
        file=sys.stderr,
    )
    sys.stderr.flush()
    serve(
        ChaliceWSGI(module.app, logger=module.logger),
        sock,
        threads=args.threads,
        on_stop=module.close_store,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["moto"]:
        _run_moto()
    elif sys.argv[1:2] == ["app"]:
        _run_app(sys.argv[2:])
    else:
        raise SystemExit("usage: dynamo_moto.py moto | app [--addr H:P] [--threads N]")
