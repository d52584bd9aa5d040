"""Render BENCHMARKS.md from the benches' results (bench/results/*.json).

    .venv/bin/python bench/render.py            # write BENCHMARKS.md
    .venv/bin/python bench/render.py --check    # exit 1 when BENCHMARKS.md differs

Per bench: what it measures (its module docstring's first line), the command, the machine and
its load, and one table of figure, value, target, ratio to baseline and whether
the target is met. Nothing here measures; the numbers are the results files'.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from results import RESULTS, ROOT, Figure, load

OUTPUT = ROOT / "BENCHMARKS.md"

INTRO = """\
# Benchmarks

<!-- Rendered by bench/render.py from bench/results/*.json: re-run a bench, then the script. -->
Each bench under `bench/` records its figures in `bench/results/<bench>.json` (machine, load \
average at its start and end, command, UTC date); `.venv/bin/python bench/render.py` renders \
this file from them, and a test fails when the two differ. History is git's. Ratios divide by a \
baseline measured in the same run (most often `python -c pass`): read them before absolute times.
"""


def describe(bench: str, bench_dir: Path) -> str:
    """What the bench measures: the first paragraph of its module's docstring (the rest
    of the docstring, how it measures, stays with the code)."""
    source = (bench_dir / f"bench_{bench}.py").read_text()
    doc = ast.get_docstring(ast.parse(source)) or bench
    return " ".join(doc.split("\n\n")[0].split()).rstrip(".")


def number(value: float) -> str:
    size = abs(value)
    if float(value).is_integer() and size >= 100:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1 or size == 0:
        return f"{value:.2f}"
    return f"{value:.3g}"


def plain(value: float) -> str:
    """A target as written: 5, 1.5, 1,000."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def with_unit(text: str, unit: str) -> str:
    if unit in ("%", "x") or unit.startswith("/"):
        return f"{text}{unit}"
    return f"{text} {unit}".strip()


def target_text(f: Figure) -> str:
    sign = "≤" if f.better == "lower" else "≥"
    parts = []
    if isinstance(f.target, str):
        parts.append(f.target)
    elif f.target is not None:
        parts.append(f"{sign} {with_unit(plain(f.target), f.unit)}")
    if f.ratio_target is not None:
        parts.append(f"{sign} {plain(f.ratio_target)}x")
    return ", ".join(parts)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def section(data: dict[str, Any], bench_dir: Path) -> list[str]:
    bench = data["bench"]
    m = data["machine"]
    load = data["load"]
    when = data["date"].replace("T", " ").removesuffix("Z")[:16]
    lines = [
        f"## {describe(bench, bench_dir)}",
        f"`{data['command']}`, {when} UTC, {data['seconds']:,.0f} s: {m['cpu']}, {m['cores']}"
        f" cores, Python {m['python']} on {m['system']}, ltm {m['ltm']} install; load average"
        f" {load_text(load)}.",
    ]
    lines += [f"- {note}" for note in data.get("notes", [])]
    lines += [
        "",
        "| figure | value | target | ratio to baseline | met? |",
        "|---|---:|---|---|:-:|",
    ]
    for f in data["figures"]:
        ratio = f"{number(f.ratio)}x {f.baseline}" if f.ratio is not None else ""
        verdict = {True: "yes", False: "**no**", None: ""}[f.verdict()]
        row = [f.name, with_unit(number(f.value), f.unit), target_text(f), ratio, verdict]
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return lines


def load_text(load: dict[str, list[float]]) -> str:
    start, end = load.get("start") or [], load.get("end") or []
    if not start or not end:
        return "unknown"
    return f"{start[0]:.2f} at the start, {end[0]:.2f} at the end (1 min)"


def render(results: Path = RESULTS, bench_dir: Path = ROOT / "bench") -> str:
    lines = INTRO.splitlines()
    for path in sorted(results.glob("*.json")):
        lines.append("")
        lines += section(load(path), bench_dir)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    parser.add_argument("--results", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, default=OUTPUT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    text = render(args.results)
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(
                f"{args.output.name} differs from what bench/render.py renders from"
                f" {args.results.name}/: run .venv/bin/python bench/render.py",
                file=sys.stderr,
            )
            return 1
        return 0
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
