"""DynamoDB on moto for the tests: in-process (``mock_aws``) or over HTTP (moto's server).

Real DynamoDB applies each request atomically (a transaction either happens
whole or is cancelled; two conditional writes of one item never both pass).
moto's in-memory backend does not lock, so threads racing through it can
interleave inside one request ("dictionary changed size during iteration",
two winners of one condition). ``serialize_moto_dynamodb`` gives moto the
per-request atomicity DynamoDB has, by running its DynamoDB requests one at
a time; the store's own races (lost transactions, retries) stay real.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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
        create_tables(client, table)
        yield client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's server on a loopback port (a stand-in for DynamoDB Local); yields its URL."""
    from moto.server import ThreadedMotoServer

    serialize_moto_dynamodb()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def unique_table() -> str:
    return f"ltm-{uuid.uuid4().hex[:12]}"


def server_env(url: str, table: str) -> dict[str, str]:
    """The environment that points the app's store at moto's server (as a user would)."""
    return {
        "LTM_STORE": "dynamodb",
        "LTM_DYNAMODB_TABLE": table,
        "AWS_ENDPOINT_URL_DYNAMODB": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "PATH": os.environ.get("PATH", ""),
    }
