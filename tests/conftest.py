"""Shared fixtures.

``store`` is parametrized over every Store implementation, so the contract
suite (test_store_contract.py) holds each of them to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ltm.store import Store
from ltm.store.sqlite import SqliteStore

STORES = ["sqlite", "dynamodb"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s: Store = SqliteStore(tmp_path / "ltm.db")
    elif request.param == "dynamodb":
        from dynamo_moto import in_process

        from ltm.store.dynamo import DynamoStore

        with in_process("ltm-test") as client:  # moto, table from the store's own definition
            s = DynamoStore("ltm-test", client=client)
            yield s
            s.close()
        return
    else:  # pragma: no cover - every name in STORES has a branch above
        raise AssertionError(request.param)
    yield s
    s.close()
