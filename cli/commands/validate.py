"""ltm validate: schema and redaction checks for packet files, nothing stored."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ltm.cli.errors import CliError


def validate(
    sources: Annotated[
        list[str], typer.Argument(metavar="FILE...|-", help="Packet files, or - for stdin.")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per file, one per line.")
    ] = False,
) -> None:
    """Check packets against the schema and the redaction pre-flight.

    Exit status: 0 when every packet is valid and clean, 1 when any is invalid
    or has redaction hits, 2 when a file cannot be read.
    """
    from ltm.cli import preflight

    worst = 0
    for source in sources:
        report, status = _judge(source, preflight)
        worst = max(worst, status)
        if as_json:
            print(json.dumps(report, ensure_ascii=False))
        else:
            _print_text(report)
    if worst:
        raise typer.Exit(worst)


def _judge(source: str, preflight: Any) -> tuple[dict[str, Any], int]:
    report: dict[str, Any] = {"file": source, "valid": False, "errors": [], "redaction": []}
    try:
        raw = preflight.read_source(source)
    except CliError as exc:
        report["errors"] = [exc.message]
        return report, 2
    from ltm import packet

    try:
        checked = packet.check(packet.parse(raw), lenient=True)
    except packet.PacketError as exc:
        report["errors"] = exc.errors
        return report, 1
    report["valid"] = checked.conforming
    report["errors"] = list(checked.errors)
    report["redaction"] = [hit.as_dict() for hit in preflight.scan(checked.data)]
    return report, 0 if checked.conforming and not report["redaction"] else 1


def _print_text(report: dict[str, Any]) -> None:
    name = report["file"]
    if report["valid"] and not report["redaction"]:
        print(f"{name}: ok")
        return
    verdict = "invalid" if not report["valid"] else "valid, but the redaction pre-flight found"
    print(f"{name}: {verdict}")
    for error in report["errors"]:
        print(f"  {error}")
    for hit in report["redaction"]:
        print(f"  {hit['field']}/{hit['kind']}: {hit['match']}")
