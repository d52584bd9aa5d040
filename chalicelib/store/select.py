"""Choose the store from configuration, so app.py is the same everywhere.

``LTM_STORE`` names the backend (``sqlite``, the default); each backend reads
its own settings from the same environment (for SQLite: ``LTM_DB``, the
database file). On Lambda the variables come from the stage's
``environment_variables`` in ``.chalice/config.json``; self-hosted, from
``ltm server run``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import Store

BACKENDS = ("sqlite",)


def open_store(environ: Mapping[str, str] = os.environ) -> Store:
    kind = environ.get("LTM_STORE", "sqlite")
    if kind == "sqlite":
        from .sqlite import SqliteStore

        path = environ.get("LTM_DB")
        if not path:
            raise RuntimeError("LTM_STORE=sqlite needs LTM_DB, the path of the database file")
        return SqliteStore(path)
    raise RuntimeError(f"unknown LTM_STORE {kind!r}; known: {', '.join(BACKENDS)}")
