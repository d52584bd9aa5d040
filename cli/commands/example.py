"""ltm example: the sample v0.2 packet, to copy from (no store touched)."""

from __future__ import annotations

from typing import Annotated

import typer

from ltm.cli.errors import CliError


def example(
    resume: Annotated[
        bool, typer.Option("--resume", help="Print the example's resume block instead.")
    ] = False,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference",
            help="Print the reference's example exactly (its fixed id, date and project).",
        ),
    ] = False,
) -> None:
    """Print an example packet (v0.2) to copy from.

    It has no id, created_at or project: ltm save fills them in (a new id, now, this
    directory's project), so every copy you save is a new packet.
    """
    if resume and reference:
        raise CliError("give --resume or --reference, not both", exit_code=2)
    from ltm.cli.packets import print_example

    print_example(resume=resume, reference=reference)
