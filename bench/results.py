"""Benchmark results as data: each bench writes ``bench/results/<name>.json`` through ``record``.

A bench imports this module when it starts (the load average is read then) and,
once it has measured, calls::

    record("cli_startup", [
        Figure("python -c pass", 11.2, "ms"),
        Figure("ltm ls", 38.0, "ms", baseline="python -c pass", ratio=3.4, ratio_target=5),
    ])

The file holds the machine (CPU model, cores, Python, how ltm is installed), the
load average when the bench started and when it recorded, the exact command, the
UTC date and the figures. ``bench/render.py`` turns every file into BENCHMARKS.md;
the files are committed, so a figure's history is git's.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
INSTALLED = ROOT / "bench" / ".installed-venv"
FORMAT = 1

Better = Literal["lower", "higher"]


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # no load average on this platform
        return []


# Read when the bench starts (it imports this module first thing), so the record
# says how busy the machine was over the whole run, not only at its end.
_STARTED = datetime.now(UTC)
_LOAD_AT_START = _load()


@dataclass(frozen=True)
class Figure:
    """One measured figure.

    ``target`` is the value's own target: a number (compared with ``value`` in the
    direction of ``better``) or a text for targets no number captures, whose
    ``met`` the bench then states. ``ratio`` is ``value`` over the figure named
    ``baseline`` measured in the same run; ``ratio_target`` the most (or, with
    ``better="higher"``, the least) that ratio may be.
    """

    name: str
    value: float
    unit: str
    better: Better = "lower"
    target: float | str | None = None
    baseline: str | None = None
    ratio: float | None = None
    ratio_target: float | None = None
    met: bool | None = None

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise ValueError(
                f"{self.name}: better must be 'lower' or 'higher', not {self.better!r}"
            )
        if (self.ratio is None) != (self.baseline is None):
            raise ValueError(f"{self.name}: a ratio needs the name of its baseline, and back")
        if self.ratio_target is not None and self.ratio is None:
            raise ValueError(f"{self.name}: a ratio target needs a ratio")
        if isinstance(self.target, str) and self.met is None:
            raise ValueError(f"{self.name}: a text target needs met=True or met=False")

    def verdict(self) -> bool | None:
        """Whether every target is met; None when the figure has none."""
        checks: list[bool] = []
        if isinstance(self.target, int | float):
            checks.append(_within(self.value, self.target, self.better))
        if self.ratio_target is not None and self.ratio is not None:
            checks.append(_within(self.ratio, self.ratio_target, self.better))
        if self.met is not None:
            checks.append(self.met)
        return all(checks) if checks else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figure:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "met"}
        return cls(**known, met=data.get("met_stated"))

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if v is not None and k != "met"}
        if self.met is not None:
            data["met_stated"] = self.met
        data["met"] = self.verdict()
        return data


def against(
    baseline: tuple[str, float],
    rows: Iterable[tuple[str, float]],
    *,
    unit: str = "ms",
    ratio_targets: Mapping[str, float] | None = None,
    ratios: Mapping[str, float] | None = None,
) -> list[Figure]:
    """The baseline and each row as figures, each row with its ratio to the baseline.

    The ratio is ``ratios[name]`` where the bench has its own (the median of per-run
    ratios, say), else the row's value over the baseline's; ``ratio_targets`` holds
    the most each named row's ratio may be.
    """
    base_name, base_value = baseline
    measured = list(rows)
    targets = ratio_targets or {}
    own = ratios or {}
    unknown = set(targets) - {name for name, _ in measured}
    if unknown:  # a renamed row would otherwise drop its target without a word
        raise ValueError(f"ratio targets for rows not measured: {sorted(unknown)}")
    figures = [Figure(base_name, base_value, unit)]
    for name, value in measured:
        ratio = own.get(name, value / base_value)
        figures.append(
            Figure(
                name,
                value,
                unit,
                baseline=base_name,
                ratio=ratio,
                ratio_target=targets.get(name),
            )
        )
    return figures


def _within(value: float, target: float, better: Better) -> bool:
    return value <= target if better == "lower" else value >= target


def machine() -> dict[str, Any]:
    """The machine and interpreter a bench ran on."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": platform.system(),
        "ltm": "installed" if Path(sys.prefix) == INSTALLED else "editable",
    }


def running_command() -> str:
    """The command that is running, as one would type it from the repository's root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_text = str(script.relative_to(ROOT))
    except ValueError:
        script_text = str(script)
    python = Path(sys.executable)
    try:
        python_text = str(python.relative_to(ROOT))
    except ValueError:
        python_text = "python" if Path(sys.prefix) != INSTALLED else str(python)
    if Path(sys.prefix) == INSTALLED:
        python_text = ".venv/bin/python"  # re-executed by --installed; the user typed this
        return shlex.join([python_text, script_text, *sys.argv[1:], "--installed"])
    return shlex.join([python_text, script_text, *sys.argv[1:]])


def path_for(bench: str) -> Path:
    return RESULTS / f"{bench}.json"


def record(
    bench: str,
    figures: Iterable[Figure],
    *,
    command: str | None = None,
    notes: Iterable[str] = (),
    results: Path | None = None,
) -> Path:
    """Write the figures of ``bench/bench_<bench>.py`` to ``bench/results/<bench>.json``.

    ``command`` defaults to the running command line; ``notes`` are short facts
    the figures depend on (a reduced size and why, a baseline's origin).
    """
    if not (ROOT / "bench" / f"bench_{bench}.py").is_file():
        raise ValueError(f"no bench/bench_{bench}.py: record under the bench's own name")
    rows = list(figures)
    if not rows:
        raise ValueError(f"{bench}: no figures to record")
    names = [f.name for f in rows]
    if len(set(names)) != len(names):
        raise ValueError(f"{bench}: figure names repeat: {names}")
    for f in rows:
        if f.baseline is not None and f.baseline not in names:
            raise ValueError(f"{f.name}: its baseline {f.baseline!r} is not a figure of the run")
    data = {
        "format": FORMAT,
        "bench": bench,
        "command": command or running_command(),
        "date": _STARTED.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round((datetime.now(UTC) - _STARTED).total_seconds(), 1),
        "machine": machine(),
        "load": {"start": _LOAD_AT_START, "end": _load()},
        "notes": list(notes),
        "figures": [f.to_dict() for f in rows],
    }
    out = (results or RESULTS) / f"{bench}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(out)
    print(f"recorded {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}", flush=True)
    return out


def load(path: Path) -> dict[str, Any]:
    """One results file, its figures as ``Figure``s (verdicts recomputed from the data)."""
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path.name}: results format {data.get('format')!r}, expected {FORMAT}")
    data["figures"] = [Figure.from_dict(f) for f in data["figures"]]
    return data
