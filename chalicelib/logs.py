"""Structured logs: the aws-lambda-powertools Logger, with a fast path for access lines.

Every request writes one JSON line (method, path, status, latency, request
id). Powertools' formatter walks every attribute of every record to find the
extra keys, which costs more than some whole requests; the access line passes
its fields in one ``access`` mapping instead, and ``AccessFormatter`` writes
it directly (with the same standard keys, in the same order, as any other
line). Every other record, errors with tracebacks included, goes through
powertools unchanged.

What is logged is chosen by the callers, never a header, a token, a body or
a secret in a path (an invite code, a public link's secret: ``loggable_path``).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter


class AccessFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter, with a cheap path for records carrying ``access``."""

    def format(self, record: logging.LogRecord) -> str:
        access = record.__dict__.get("access")
        if access is None or record.exc_info:
            return super().format(record)
        line: dict[str, Any] = {}
        for key, value in self.log_format.items():
            if key == "level":
                line[key] = record.levelname
            elif key == "location":
                line[key] = f"{record.funcName}:{record.lineno}"
            elif key == "timestamp":
                line[key] = self.formatTime(record)
            elif key == "message":
                line[key] = record.getMessage()
            elif value is None:
                continue
            elif isinstance(value, str) and "%(" in value:
                line[key] = value % record.__dict__
            else:
                line[key] = value
        line.update(access)
        return self.serialize(log=line)


# Path segments that are secrets, each shown as its route's placeholder: whoever holds an
# invite code can join the team, and a published packet's link reads the packet.
_SECRET_IN_PATH = re.compile(r"(/v1/invites/|/p/)[^/]+")
_PLACEHOLDERS = {"/v1/invites/": "{code}", "/p/": "{secret}"}


def loggable_path(path: str) -> str:
    """``path`` as an access line shows it: invite codes and public links' secrets masked."""
    return _SECRET_IN_PATH.sub(lambda m: m[1] + _PLACEHOLDERS[m[1]], path)


# ASCII-only JSON: a client-chosen path can never put a raw line separator (U+2028,
# NEL) or a terminal escape into the log stream.
_serialize = functools.partial(json.dumps, separators=(",", ":"), default=str, ensure_ascii=True)


LEVEL_ENV = "LTM_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level() -> str:
    """``LTM_LOG_LEVEL`` (INFO when unset): a level's name, in any case (WARN: WARNING).

    Anything else is a ValueError naming the variable and the levels: powertools' own
    ("Unknown level: 'LOUD'") named neither, and stopped ``ltm server run`` as an
    unexpected error.
    """
    value = os.environ.get(LEVEL_ENV) or "INFO"
    level = value.strip().upper()
    level = "WARNING" if level == "WARN" else level
    if level not in LEVELS:
        raise ValueError(f"{LEVEL_ENV} must be one of {', '.join(LEVELS)}, got {value!r}")
    return level


def make_logger(service: str = "ltm") -> Logger:
    """The process's logger: JSON lines on stderr, level from ``LTM_LOG_LEVEL`` (INFO)."""
    return Logger(
        service=service,
        level=log_level(),
        logger_handler=logging.StreamHandler(sys.stderr),
        logger_formatter=AccessFormatter(json_serializer=_serialize),
    )
