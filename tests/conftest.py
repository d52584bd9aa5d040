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


def pytest_configure(config: pytest.Config) -> None:
    try:
        import timing  # noqa: F401  (a bad LTM_TEST_TIME_SCALE is one line, before any test)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header() -> str:
    from timing import ENV, SCALE

    return f"time budgets: x{SCALE:g} ({ENV}, tests/timing.py)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    run, skipped, broken = _conformance["run"], _conformance["skipped"], _conformance["broken"]
    if run or skipped or broken:
        line = f"conformance: {run} cases run, {skipped} skipped"
        terminalreporter.write_line(line + (", the module failed to load" if broken else ""))
