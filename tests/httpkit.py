"""httpx's calls as the tests make them, with a scaled timeout by default.

httpx waits 5 s by default, which a loaded machine exceeds; every request the
tests send goes through here (or through a serverkit client, which sets the
same timeout), so the budget grows with ``LTM_TEST_TIME_SCALE``. A call that
names its own ``timeout`` keeps it. tests/test_http_timeouts.py keeps it so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from timing import scaled

TIMEOUT = scaled(30)

T = TypeVar("T")


def _timed(call: Callable[..., T]) -> Callable[..., T]:
    def timed(*args: Any, **kw: Any) -> T:
        kw.setdefault("timeout", TIMEOUT)
        return call(*args, **kw)

    return timed


get = _timed(httpx.get)
post = _timed(httpx.post)
head = _timed(httpx.head)
delete = _timed(httpx.delete)
request = _timed(httpx.request)
Client = _timed(httpx.Client)
