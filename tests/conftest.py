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


# -- the count of conformance cases ---------------------------------------------------
# A conformance case that does not run must be seen: `make test` ends with how many of
# test_conformance.py's tests ran (xdist sends each worker's reports to the controller,
# where these hooks run), and how many were skipped, which should always be none.

CONFORMANCE = "test_conformance.py"
_conformance = {"run": 0, "skipped": 0, "broken": 0}


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.nodeid.endswith(CONFORMANCE) and report.failed:
        _conformance["broken"] += 1  # e.g. a published schema missing from spec/


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if f"{CONFORMANCE}::" not in report.nodeid:
        return
    if report.skipped:
        _conformance["skipped"] += 1
    elif report.when == "call":
        _conformance["run"] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    run, skipped, broken = _conformance["run"], _conformance["skipped"], _conformance["broken"]
    if run or skipped or broken:
        line = f"conformance: {run} cases run, {skipped} skipped"
        terminalreporter.write_line(line + (", the module failed to load" if broken else ""))
