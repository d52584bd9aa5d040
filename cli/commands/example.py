"""ltm example: the sample v0.2 packet, to copy from (no store touched)."""

from __future__ import annotations

from typing import Annotated

import typer


def run(*, resume: bool) -> None:
    """Print the example; kept import-light because agents call it at session start."""
    import json
    import sys
    from importlib.resources import files

    raw = files("ltm").joinpath("example.json").read_bytes()
    if resume:
        from ltm.resume import render

        sys.stdout.write(render(json.loads(raw)))
    else:
        sys.stdout.buffer.write(raw if raw.endswith(b"\n") else raw + b"\n")
    sys.stdout.flush()


def example(
    resume: Annotated[
        bool, typer.Option("--resume", help="Print the example's resume block instead.")
    ] = False,
) -> None:
    """Print a complete example packet (v0.2) to start from."""
    run(resume=resume)
