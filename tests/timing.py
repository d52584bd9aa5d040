"""Every wall-clock budget of the tests, scaled by one factor: ``LTM_TEST_TIME_SCALE``.

A test that waits (a subprocess's ``timeout=``, a deadline for a server to
answer, an HTTP client's timeout, the most a hook may take) says how long
through ``scaled(seconds)``, where the number is written: the helpers of tests/
take their ``timeout`` already scaled, and tests/test_http_timeouts.py fails on a
literal number of seconds. On an idle machine the factor is 1; on a loaded
one (CI, or the suite beside another ``make test``) set it higher, e.g.
``LTM_TEST_TIME_SCALE=4``: every budget grows by that much, and none shrinks.
``make test`` sets it to 3 unless the environment says otherwise.

Budgets that are the product's own and cannot be set from outside (the hook's
watchdog, ``ltm doctor``'s 1.5 s per request) stay as they are; a test then
scales only what it asserts about them. Waits that are lower bounds (sleeping
past an expiry) are not budgets and are not scaled.
"""

from __future__ import annotations

import os

ENV = "LTM_TEST_TIME_SCALE"


def _scale() -> float:
    raw = os.environ.get(ENV, "").strip() or "1"
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a number (a factor such as 3), got {raw!r}") from None
    if not value >= 1:
        raise ValueError(f"{ENV} must be 1 or more (budgets only grow), got {raw!r}")
    return value


SCALE = _scale()


def scaled(seconds: float) -> float:
    """``seconds`` times ``LTM_TEST_TIME_SCALE``."""
    return seconds * SCALE
