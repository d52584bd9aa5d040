"""dynalite: a second DynamoDB engine for the store contract suite, besides moto.

moto was written to mock boto3; dynalite implements DynamoDB's wire API on
LevelDB (in memory here), from DynamoDB's documentation, in another language.
The contract suite runs on both, so conditional writes, GSIs and pagination
are checked by an engine that shares no code with the SDK.

Installed from ``tests/dynalite/package.json`` + ``package-lock.json`` (``make
test`` runs ``npm ci`` there). Where Node.js is absent the dynalite tests are
skipped with that reason; where Node.js is present but dynalite was not
installed, they fail and say how to install it (never a silent skip).

What dynalite 4.0.0 lacks, precisely (its ``actions/`` folder implements
BatchGetItem, BatchWriteItem, CreateTable, DeleteItem, DeleteTable,
DescribeTable, DescribeTimeToLive, GetItem, ListTables, ListTagsOfResource,
PutItem, Query, Scan, TagResource, UntagResource, UpdateItem, UpdateTable):

- ``TransactWriteItems``. The store writes packets, users, tokens, teams,
  memberships, invites and device grants in transactions. So that those
  methods still meet dynalite's conditions, GSIs and batch reads, the test
  client replays a transaction as plain requests (``Transactions``): first
  every action's condition, each evaluated by dynalite against the current
  item, then the writes. All or nothing for one caller, but not isolated
  from concurrent ones: the tests of concurrent transactions
  (``NEEDS_ISOLATION``) are skipped on dynalite with ``NO_TRANSACTIONS`` as
  the reason; moto and real DynamoDB cover them.
- ``UpdateTimeToLive``: the table is created without it (the store never
  relies on TTL: it compares expiry times itself).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from timing import scaled

HERE = Path(__file__).resolve().parent / "dynalite"
VERSION = "4.0.0"
NO_NODE = "dynalite needs Node.js (node not found on PATH); the other engines still ran"
NO_TRANSACTIONS = (
    f"dynalite {VERSION} implements no TransactWriteItems: this test needs concurrent"
    " transactions to be isolated; moto and real DynamoDB cover it"
)
LISTENING = re.compile(r"dynalite listening on port (\d+)")


def node() -> str | None:
    return shutil.which("node")


def installed() -> bool:
    return (HERE / "node_modules" / "dynalite" / "package.json").is_file()


@contextmanager
def running() -> Iterator[str]:
    """dynalite on a loopback port; yields its URL. Stops with the block (or the test run)."""
    program = node()
    assert program is not None
    if not installed():
        raise RuntimeError(
            f"dynalite is not installed: run `npm ci --prefix {HERE}` (make test does it)"
        )
    proc = subprocess.Popen(
        [program, str(HERE / "server.js")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=HERE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = LISTENING.search(line)
        if not found:
            raise RuntimeError(f"dynalite did not start: {line}{proc.stdout.read()}")
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=scaled(10))


NEEDS_ISOLATION = {
    "test_concurrent_accepts_exactly_one_wins",
    "test_concurrent_decisions_exactly_one_wins",
    "test_concurrent_redeems_exactly_one_wins",
    "test_concurrent_puts_never_pass_the_quota_together",  # a push is a transaction
}
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
_EXPRESSIONS = ("ConditionExpression", "UpdateExpression")


def _only_used(request: dict[str, Any], keep: tuple[str, ...]) -> dict[str, Any]:
    """``request`` with only the expressions in ``keep`` and the placeholders they use."""
    out = {k: v for k, v in request.items() if k not in (*_EXPRESSIONS, "TableName")}
    out.pop("ExpressionAttributeNames", None)
    out.pop("ExpressionAttributeValues", None)
    out.pop("ReturnValuesOnConditionCheckFailure", None)
    used: set[str] = set()
    for name in keep:
        if request.get(name):
            out[name] = request[name]
            used.update(_PLACEHOLDER.findall(request[name]))
    for kind in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        chosen = {k: v for k, v in (request.get(kind) or {}).items() if k in used}
        if chosen:
            out[kind] = chosen
    return out


class Transactions:
    """A DynamoDB client whose TransactWriteItems is replayed as plain requests (see above)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, TransactItems: list[dict[str, Any]]) -> dict[str, Any]:
        client = self._client
        reasons = []
        for item in TransactItems:
            ((action, request),) = item.items()
            passed = self._condition_holds(action, request)
            reasons.append({"Code": "None" if passed else "ConditionalCheckFailed"})
        if any(r["Code"] != "None" for r in reasons):
            raise client.exceptions.TransactionCanceledException(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                    "CancellationReasons": reasons,
                },
                "TransactWriteItems",
            )
        for item in TransactItems:
            ((action, request),) = item.items()
            table = request["TableName"]
            if action == "Put":
                client.put_item(TableName=table, **_only_used(request, ()))
            elif action == "Update":
                client.update_item(TableName=table, **_only_used(request, ("UpdateExpression",)))
            elif action == "Delete":
                client.delete_item(TableName=table, **_only_used(request, ()))
        return {}

    def _condition_holds(self, action: str, request: dict[str, Any]) -> bool:
        """dynalite's verdict on the action's condition, against the item as it is now.

        The current item is written back unchanged under the condition (a
        missing one is written as its bare key under the condition, then
        removed), so dynalite, not this test code, evaluates the expression.
        """
        if not request.get("ConditionExpression"):
            return True
        client = self._client
        table = request["TableName"]
        key = request.get("Key") or {k: request["Item"][k] for k in ("pk", "sk")}
        current = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        check = _only_used(request, ("ConditionExpression",))
        check.pop("Key", None)
        check.pop("Item", None)
        try:
            client.put_item(TableName=table, Item=current or key, **check)
        except client.exceptions.ConditionalCheckFailedException:
            return False
        if current is None:
            client.delete_item(TableName=table, Key=key)
        return True


def new_table(url: str) -> tuple[Any, str]:
    """A fresh table (from the store's own definition) on dynalite: (client, table name)."""
    import uuid

    from dynamo_moto import endpoint_client

    from ltm.store.dynamo import create_tables

    client = endpoint_client(url)
    table = f"ltm-{uuid.uuid4().hex[:12]}"
    create_tables(client, table, ttl=False)
    return Transactions(client), table
