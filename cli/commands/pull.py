"""ltm pull: fetch a packet's JSON to stdout or a file (or into the local store)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info


def pull(
    ref: options.Ref,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Write to this file instead of stdout."
        ),
    ] = None,
    to_local: Annotated[
        bool,
        typer.Option("--to-local", help="Copy the packet from the server into the local store."),
    ] = False,
    team: options.Team = None,
    lenient: options.Lenient = False,
    local: options.Local = False,
) -> None:
    """Write a packet's JSON, exactly as stored, to stdout or to a file."""
    if to_local:
        if output is not None or local:
            raise CliError(
                "--to-local writes to the local store; give no --output and no --local", exit_code=2
            )
        from ltm.cli.client.transfer import to_local_store

        to_local_store(ref, team=team, lenient=lenient)
        return
    from ltm.cli.client.backend import open_backend
    from ltm.cli.client.portable import output_file, write_file

    # A packet is private memory: its file is written as a bundle is (0600, whole or not at
    # all, never through a link planted at its name); ``-o -`` is standard output.
    output = output_file(output)
    backend = open_backend(local=local, team=team)
    try:
        body = backend.get(ref, team=team)
    finally:
        backend.close()
    if output is None:
        from ltm.cli.terminal.output import terminal_bytes

        # The stored bytes as they are, except on a terminal: there, JSON escapes for
        # controls and bidi marks (equivalent JSON that cannot drive the terminal).
        sys.stdout.buffer.write(terminal_bytes(body + b"\n"))
        return
    write_file(output, body + b"\n")
    info(f"wrote {output}")
