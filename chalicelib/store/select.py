"""Choose the store from configuration, so app.py is the same everywhere.

``LTM_STORE`` names the backend (``sqlite``, the default); each backend reads
its own settings from the same environment (for SQLite: ``LTM_DB``, the
database file; for DynamoDB: ``LTM_DYNAMODB_TABLE``, the table name, while
the AWS SDK itself reads ``AWS_REGION`` and ``AWS_ENDPOINT_URL_DYNAMODB``). On Lambda
the variables come from the stage's ``environment_variables`` in
``.chalice/config.json``; self-hosted, from ``ltm server run``.

Every backend also takes the per-user storage bound from there:
``LTM_MAX_PACKETS_PER_USER`` (default 100,000) and ``LTM_MAX_BYTES_PER_USER``
(default 1 GiB of stored packets), counting what a user owns: their personal
packets and the packets they authored in teams, each as many bytes as the store
says it occupies (``Store.occupied``: SQLite its body, DynamoDB every item it makes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import Quota, Store

BACKENDS = ("sqlite", "dynamodb")
MAX_PACKETS_ENV = "LTM_MAX_PACKETS_PER_USER"
MAX_BYTES_ENV = "LTM_MAX_BYTES_PER_USER"
DEFAULT_QUOTA = Quota(packets=100_000, bytes=1 << 30)


def quota(environ: Mapping[str, str] | None = None) -> Quota:
    """The per-user bound the operator set (the defaults for what is unset); ValueError if bad."""
    if environ is None:
        environ = os.environ
    limits = []
    for name, default in (
        (MAX_PACKETS_ENV, DEFAULT_QUOTA.packets),
        (MAX_BYTES_ENV, DEFAULT_QUOTA.bytes),
    ):
        raw = (environ.get(name) or "").strip().replace("_", "")
        if not raw:
            limits.append(default)
        elif raw.isdigit() and int(raw) > 0:
            limits.append(int(raw))
        else:
            raise ValueError(f"{name} must be a whole number above 0, got {environ[name]!r}")
    return Quota(*limits)


def open_store(environ: Mapping[str, str] | None = None) -> Store:
    if environ is None:
        environ = os.environ  # looked up now: chalice.test.Client swaps os.environ per request
    kind = environ.get("LTM_STORE", "sqlite")
    try:
        bound = quota(environ)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None
    store: Store
    if kind == "sqlite":
        from .sqlite import SqliteStore

        path = environ.get("LTM_DB")
        if not path:
            raise RuntimeError("LTM_STORE=sqlite needs LTM_DB, the path of the database file")
        store = SqliteStore(path)
    elif kind == "dynamodb":
        # The SDK itself reads AWS_REGION and AWS_ENDPOINT_URL_DYNAMODB (a local endpoint).
        from .dynamo import DEFAULT_TABLE, DynamoStore

        store = DynamoStore(environ.get("LTM_DYNAMODB_TABLE") or DEFAULT_TABLE)
    else:
        raise RuntimeError(f"unknown LTM_STORE {kind!r}; known: {', '.join(BACKENDS)}")
    store.quota = bound
    return store
