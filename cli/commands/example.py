"""ltm example: the sample v0.2 packet, to copy from (no store touched)."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.start.fast import print_example


def example(
    resume: Annotated[
        bool, typer.Option("--resume", help="Print the example's resume block instead.")
    ] = False,
) -> None:
    """Print a complete example packet (v0.2) to start from."""
    print_example(resume=resume)
