"""Answers that must come fast, without loading the argument parser.

Agents call ``ltm --version`` and ``ltm example`` at the start of sessions;
typer alone costs more than the rest of the start-up, so ``ltm.cli.entry``
serves these two straight from here, and the typer commands call the same
functions.
"""

from __future__ import annotations

import sys


def print_version() -> None:
    from ltm import __version__

    print(f"ltm {__version__}")


def print_example(*, resume: bool) -> None:
    from ltm.examples import example_bytes

    raw = example_bytes()
    if resume:
        import json

        from ltm.resume import render

        sys.stdout.write(render(json.loads(raw)))
    else:
        sys.stdout.buffer.write(raw)
    sys.stdout.flush()
