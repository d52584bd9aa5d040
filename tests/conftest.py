"""Shared fixtures.

``store`` is parametrized over every Store implementation, so the contract
suite (test_store_contract.py) holds each of them to the same behaviour.
The contract suite adds a second DynamoDB engine, dynalite
(``dynalite_engine.py``), started once per test session by ``dynalite_url``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ltm.store import Store
from ltm.store.sqlite import SqliteStore

STORES = ["sqlite", "dynamodb"]


@pytest.fixture(scope="session")
def dynalite_url() -> Iterator[str]:
    import dynalite_engine

    if dynalite_engine.node() is None:
        pytest.skip(dynalite_engine.NO_NODE)
    with dynalite_engine.running() as url:
        yield url


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from open_store(request, tmp_path)


def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The store ``request.param`` names, fresh, closed after the test."""
    if request.param == "dynalite":
        from dynalite_engine import NEEDS_ISOLATION, NO_TRANSACTIONS, new_table

        if request.function.__name__ in NEEDS_ISOLATION:
            pytest.skip(NO_TRANSACTIONS)

        from ltm.store.dynamo import DynamoStore

        client, table = new_table(request.getfixturevalue("dynalite_url"))
        s: Store = DynamoStore(table, client=client)
        yield s
        s.close()
        return
    if request.param == "sqlite":
        s = SqliteStore(tmp_path / "ltm.db")
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
