"""ltm show: one packet, for people (or as JSON)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from ltm.cli import options


def show(
    ref: Annotated[str, typer.Argument(metavar="ID", help="A packet id or a unique prefix.")],
    team: options.Team = None,
    as_json: options.Json = False,
    local: options.Local = False,
) -> None:
    """Show a packet: a readable summary, or its JSON with --json."""
    from ltm.cli.backend import open_backend

    backend = open_backend(local=local)
    try:
        body = backend.get(ref, team=team)
    finally:
        backend.close()
    if as_json:
        sys.stdout.buffer.write(body + b"\n")
        return
    print(summary(json.loads(body)), end="")


def summary(p: dict[str, Any]) -> str:
    lines = [f"ID       {p.get('id', '')}", f"Created  {p.get('created_at', '')}"]
    lines.append(f"Version  {p.get('ltm_version', '')}")
    project = p.get("project") or {}
    if project:
        lines.append(f"Project  {project.get('name', '')} {project.get('ref', '')}".rstrip())
    if p.get("tags"):
        lines.append(f"Tags     {', '.join(p['tags'])}")
    lines += ["", "Goal", f"  {p.get('goal', '')}"]
    for title, key in (("Done when", "success_criteria"), ("Constraints", "constraints")):
        if p.get(key):
            lines += ["", title, *(f"  - {item}" for item in p[key])]
    if p.get("decisions"):
        lines += ["", "Decisions"]
        for d in p["decisions"]:
            lock = " [locked]" if d.get("locked") else ""
            lines += [f"  - {d.get('what', '')}{lock}", f"    why: {d.get('why', '')}"]
    if p.get("attempts"):
        lines += ["", "Attempts"]
        for a in p["attempts"]:
            lines.append(f"  - [{a.get('outcome', '')}] {a.get('tried', '')}")
            if a.get("learned"):
                lines.append(f"    learned: {a['learned']}")
    if p.get("methods"):
        lines += [
            "",
            "Methods",
            *(f"  - {m.get('name', '')}: {m.get('how', '')}" for m in p["methods"]),
        ]
    if p.get("open_questions"):
        lines += ["", "Open questions", *(f"  - {q}" for q in p["open_questions"])]
    lines += ["", "Next step", f"  {p.get('next_step', '')}"]
    return "\n".join(lines) + "\n"
