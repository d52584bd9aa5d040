"""No test waits on a fixed number of seconds, which a loaded machine exceeds.

Requests go through tests/httpkit.py or a serverkit client, whose timeout scales
with ``LTM_TEST_TIME_SCALE`` (tests/timing.py); every other budget (a subprocess's
``timeout=``, a socket's, a thread's join, a deadline) is written ``scaled(seconds)``
where it is stated, and the helpers of tests/ take it so, already scaled. A number
that is not a budget (a value under test, a polling tick) says so on its line with
``# not a budget``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).parent
DIRECT = re.compile(
    r"\bhttpx\.(get|post|put|patch|delete|head|options|request|stream|Client|AsyncClient)\("
)
# Methods whose first argument is a number of seconds (or, for a browser, milliseconds).
WAITS = {"settimeout", "set_default_timeout", "set_default_navigation_timeout", "wait", "join"}
NOT_A_BUDGET = "# not a budget"


def test_no_test_calls_httpx_on_its_default_timeout() -> None:
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in {"httpkit.py", Path(__file__).name}
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if DIRECT.search(line)
    ]
    assert not found, "use httpkit (a scaled timeout) instead of httpx directly:\n" + "\n".join(
        found
    )


def _number(node: ast.expr | None) -> bool:
    """A literal number of seconds, or sum of them: ``30``, ``0.5``, ``15_000``, ``10 + 5``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _number(node.left) and _number(node.right)
    return False


def _name(call: ast.Call) -> str:
    """What is called: ``join`` for ``thread.join(...)``, ``monotonic`` for ``monotonic()``."""
    return getattr(call.func, "attr", None) or getattr(call.func, "id", "")


def _fixed(node: ast.AST) -> bool:
    """A call, or a deadline, that waits a literal number of seconds."""
    if isinstance(node, ast.Call):
        keyword = any(kw.arg == "timeout" and _number(kw.value) for kw in node.keywords)
        return keyword or (_name(node) in WAITS and bool(node.args) and _number(node.args[0]))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        sides = [(node.left, node.right), (node.right, node.left)]
        return any(
            isinstance(clock, ast.Call) and _name(clock) == "monotonic" and _number(seconds)
            for clock, seconds in sides
        )
    return False


def fixed_waits(tree: ast.AST) -> Iterator[int]:
    """The lines of ``tree`` that wait a fixed number of seconds."""
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            params = [*node.posonlyargs, *node.args]
            pairs = [
                *zip(params[len(params) - len(node.defaults) :], node.defaults, strict=True),
                *zip(node.kwonlyargs, node.kw_defaults, strict=True),
            ]
            yield from (p.lineno for p, default in pairs if p.arg == "timeout" and _number(default))
        elif _fixed(node):
            yield getattr(node, "lineno", 0)


def test_no_test_waits_a_fixed_number_of_seconds() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == Path(__file__).name:
            continue
        source = path.read_text()
        lines = source.splitlines()
        for number in sorted(set(fixed_waits(ast.parse(source)))):
            if NOT_A_BUDGET not in lines[number - 1]:
                found.append(f"{path.relative_to(TESTS)}:{number}: {lines[number - 1].strip()}")
    assert not found, "write a wait as scaled(seconds) (tests/timing.py):\n" + "\n".join(found)


def test_the_check_sees_each_way_of_waiting() -> None:
    waits = """
subprocess.run(cmd, timeout=30)
sock.settimeout(0.5)
thread.join(10)
done.wait(60)
context.set_default_timeout(15_000)
deadline = time.monotonic() + 30
def run(timeout: float = 60) -> None: ...
def stop(*, timeout: float = 5) -> None: ...
"""
    scaled = """
subprocess.run(cmd, timeout=scaled(30))
sock.settimeout(scaled(0.5))
thread.join(scaled(10))
", ".join(parts)
deadline = time.monotonic() + scaled(30)
def run(timeout: float = scaled(60)) -> None: ...
assert "timeout=30" in out
"""
    assert sorted(set(fixed_waits(ast.parse(waits)))) == list(range(2, 10))
    assert not list(fixed_waits(ast.parse(scaled)))
