"""Choose the store from configuration, so app.py is the same everywhere.

``LTM_STORE`` names the backend (``sqlite``, the default); each backend reads
its own settings from the same environment (for SQLite: ``LTM_DB``, the
database file; for DynamoDB: ``LTM_DYNAMODB_TABLE``, the table name, while
the AWS SDK itself reads ``AWS_REGION`` and ``AWS_ENDPOINT_URL_DYNAMODB``). On Lambda
the variables come from the stage's ``environment_variables`` in
``.chalice/config.json``; self-hosted, from ``ltm server run``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import Store

BACKENDS = ("sqlite", "dynamodb")


def open_store(environ: Mapping[str, str] | None = None) -> Store:
    if environ is None:
        environ = os.environ  # looked up now: chalice.test.Client swaps os.environ per request
    kind = environ.get("LTM_STORE", "sqlite")
    if kind == "sqlite":
        from .sqlite import SqliteStore

        path = environ.get("LTM_DB")
        if not path:
            raise RuntimeError("LTM_STORE=sqlite needs LTM_DB, the path of the database file")
        return SqliteStore(path)
    if kind == "dynamodb":
        # The SDK itself reads AWS_REGION and AWS_ENDPOINT_URL_DYNAMODB (a local endpoint).
        from .dynamo import DEFAULT_TABLE, DynamoStore

        return DynamoStore(environ.get("LTM_DYNAMODB_TABLE") or DEFAULT_TABLE)
    raise RuntimeError(f"unknown LTM_STORE {kind!r}; known: {', '.join(BACKENDS)}")
