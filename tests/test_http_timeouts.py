"""No test sends a request on httpx's default 5 s timeout, which a loaded machine exceeds.

Requests go through tests/httpkit.py or a serverkit client, whose timeout scales
with ``LTM_TEST_TIME_SCALE`` (tests/timing.py).
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent
DIRECT = re.compile(
    r"\bhttpx\.(get|post|put|patch|delete|head|options|request|stream|Client|AsyncClient)\("
)


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
