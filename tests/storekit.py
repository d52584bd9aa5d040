"""Opening each Store implementation for a test: the one place the engines are named.

``conftest.store`` runs a test on ``STORES``; the contract suite adds
``dynalite`` (a second DynamoDB engine, ``dynalite_engine.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ltm.store import Store

STORES = ["sqlite", "dynamodb"]


def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The store ``request.param`` names, fresh, closed after the test."""
    s: Store
    if request.param == "sqlite":
        from ltm.store.sqlite import SqliteStore

        s = SqliteStore(tmp_path / "ltm.db")
        yield s
        s.close()
    elif request.param == "dynamodb":
        from dynamo_moto import in_process

        from ltm.store.dynamo import DynamoStore

        with in_process("ltm-test") as client:  # moto, table from the store's own definition
            s = DynamoStore("ltm-test", client=client)
            yield s
            s.close()
    elif request.param == "dynalite":
        from dynalite_engine import NEEDS_ISOLATION, NO_TRANSACTIONS, new_table

        from ltm.store.dynamo import DynamoStore

        if request.function.__name__ in NEEDS_ISOLATION:
            pytest.skip(NO_TRANSACTIONS)
        client, table = new_table(request.getfixturevalue("dynalite_url"))
        s = DynamoStore(table, client=client)
        yield s
        s.close()
    else:  # pragma: no cover - every name has a branch above
        raise AssertionError(request.param)
