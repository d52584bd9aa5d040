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
from storekit import STORES, open_store

from ltm.store import Store


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
