"""ltm ls: the newest packets, newest first."""

from __future__ import annotations

import json

from ltm.cli import options
from ltm.cli.output import info, one_line, relative_time, short_id


def ls(
    limit: options.Limit = 50,
    team: options.Team = None,
    as_json: options.Json = False,
    local: options.Local = False,
) -> None:
    """List packets: id, age and goal."""
    from ltm.cli.backend import open_backend

    backend = open_backend(local=local)
    try:
        rows = backend.list(team=team, limit=limit)
    finally:
        backend.close()
    if as_json:
        print(json.dumps({"packets": rows}, ensure_ascii=False, indent=2))
        return
    if not rows:
        info(f"no packets yet in {backend.label}; save one with: ltm save FILE")
        return
    for row in rows:
        when = relative_time(row["created_at"])
        print(f"{short_id(row['id']):<12}  {when:<12}  {one_line(row['goal'], 72)}")
