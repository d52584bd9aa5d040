"""The times a listing is filtered by (``since``/``until``): one reading for the API and the CLI.

A value is an RFC 3339 time, a date (``2026-04-01``, midnight UTC) or an age
(``3d``, ``12h``, ``2w``, ``30m``: that long before now). It becomes a
listing sort key, UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, which compares as a
string in time order. Light (stdlib only): the CLI checks its ``--since``
before it opens a store or a connection.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

FORMS = "give a date (2026-04-01), an RFC 3339 time or an age (3d, 12h, 2w)"
OUT_OF_RANGE = "out of range: give a time between the years 1 and 9999 (UTC)"

_AGE = re.compile(r"([0-9]{1,6})([mhdw])")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class TimeError(ValueError):
    """A value that is not a time, or a time outside what a sort key can hold; one line."""


def sort_key(value: str, now: datetime) -> str:
    """``value`` as a listing sort key; ``TimeError`` saying why it cannot be one.

    Out of range is refused, not clamped: an age reaching before the year 1
    (``999999w``), or a time whose offset carries it out of years 1 to 9999
    in UTC (``0001-01-01T00:00:00+14:00``), is a mistake worth saying.
    """
    age = _AGE.fullmatch(value)
    try:
        if age:
            when = now - timedelta(**{_AGE_UNITS[age[2]]: int(age[1])})
        else:
            try:
                when = datetime.fromisoformat(value.replace("z", "Z"))
            except ValueError:
                raise TimeError(FORMS) from None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
        when = when.astimezone(UTC)
    except OverflowError:
        raise TimeError(OUT_OF_RANGE) from None
    # isoformat pads the year to four digits (strftime's %Y does not on every libc,
    # and "5-01-01" would sort after "2026-...").
    return when.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
