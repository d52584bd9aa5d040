"""ltm validate: schema, id, parent and redaction checks for packet files, nothing stored."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import print_json


def validate(
    sources: Annotated[
        list[str], typer.Argument(metavar="FILE", help="Packet files, or - for standard input.")
    ],
    complete: Annotated[
        bool,
        typer.Option(
            "--complete",
            help="Judge what push needs (id, created_at, ltm_version present) instead of"
            " what save would store.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per file, one per line.")
    ] = False,
) -> None:
    """Check packets as save would (or push, with --complete): schema and redaction at once.

    Exit status: 0 when every packet is valid and clean, 1 when any is invalid
    or has redaction hits, 2 when a file cannot be read.
    """
    from ltm.cli.client import preflight
    from ltm.cli.terminal.output import keep_the_verdict

    keep_the_verdict()
    worst = 0
    for source in sources:
        report, status = _judge(source, complete=complete)
        worst = max(worst, status)
        if as_json:
            print_json(report, indent=None)
        else:
            _print_text(report, preflight.report_lines(report))
    if worst:
        raise typer.Exit(worst)


def _judge(source: str, *, complete: bool) -> tuple[dict[str, Any], int]:
    from ltm.cli.client import preflight

    try:
        raw = preflight.read_source(source)
    except CliError as exc:
        return {"file": source, "valid": False, "errors": [exc.message], "redaction": []}, 2
    report = {"file": source, **preflight.validation_report(raw, complete=complete)}
    return report, 0 if report["valid"] and not report["redaction"] else 1


def _print_text(report: dict[str, Any], lines: list[str]) -> None:
    from ltm.cli.terminal.output import safe

    if report["valid"] and not report["redaction"]:
        print(safe(f"{report['file']}: ok"))
        return
    # Errors and hits quote packet text: shown with its controls escaped.
    print(safe(f"{report['file']}:"))
    for line in lines:
        print(safe(line))
