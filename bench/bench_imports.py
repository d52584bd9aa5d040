"""What single imports cost a fresh interpreter, where start-up is judged by milliseconds.

    .venv/bin/python bench/bench_imports.py [--runs N] [--installed]

The figures behind choices on the hook's and ``ltm mcp``'s start-up paths: why the
Linux data and state dirs are spelled out instead of asking platformdirs, why the
records there are NamedTuples rather than dataclasses, why a hook's marker file is
named without hashlib, and what the standard library's ``http.client`` (the client for
both schemes) adds to a hook that talks to a server. Each run starts, back to
back, ``python -c pass``, one with the imports every hook makes anyway (BASE), BASE
plus each single import, and each whole path; a row gives the median time and the
median per-run difference (to BASE for a single import, to the bare start for a path).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import machine, run_installed_if_asked
from results import Figure, record

# What a hook loads whatever it does (its own imports, and the package's): each single
# import is timed on top of this, so a row is what that import adds there.
BASE = "import json, os, re, threading, datetime, pathlib, ltm.cli.config"
SINGLE = {
    "platformdirs.user_state_dir()": "import platformdirs; platformdirs.user_state_dir('ltm')",
    "ltm.cli.config.state_dir()": "ltm.cli.config.state_dir()",
    "dataclasses": "import dataclasses",
    "typing (NamedTuple's module)": "import typing",
    "hashlib": "import hashlib",
    "tomllib": "import tomllib",
    "http.client": "import http.client",
    "re2 (the scan's literal sets)": "import re2",
}
# Whole paths, over a bare start.
PATHS = {
    "the hook's local-store path": "import ltm.cli.agents.hook, ltm.cli.client.backend, "
    "ltm.store.sqlite, ltm.service.packets, ltm.cli.client.credentials",
    "the hook's server path": "import ltm.cli.agents.hook, ltm.cli.client.backend, "
    "ltm.cli.client.remote, ltm.cli.client.credentials, http.client, tomllib",
}


def timed(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--installed", action="store_true", help="as users install ltm")
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    keys = ["pass", "base", *SINGLE, *PATHS]
    codes = {"pass": "pass", "base": BASE}
    codes |= {name: f"{BASE}; {code}" for name, code in SINGLE.items()} | PATHS
    times: dict[str, list[float]] = {key: [] for key in keys}
    for i in range(runs + 2):  # two warm-up runs
        row = {key: timed(codes[key]) for key in keys}
        if i >= 2:
            for key, value in row.items():
                times[key].append(value)

    def added(key: str, over: str) -> float:
        return statistics.median(t - b for t, b in zip(times[key], times[over], strict=True))

    print(f"machine: {machine()}; {runs} interleaved runs, medians (after 2 warm-up runs)")
    print(f"{'python -c ...':<42} {'median ms':>10} {'added ms':>10}")
    print(f"{'pass':<42} {statistics.median(times['pass']) * 1000:>10.1f}")
    print(f"{'BASE (what every hook loads)':<42} {statistics.median(times['base']) * 1000:>10.1f}")
    for name in SINGLE:
        label = f"BASE; {name}"
        print(
            f"{label:<42} {statistics.median(times[name]) * 1000:>10.1f} "
            f"{added(name, 'base') * 1000:>+10.1f}"
        )
    for name in PATHS:
        print(
            f"{name:<42} {statistics.median(times[name]) * 1000:>10.1f} "
            f"{added(name, 'pass') * 1000:>+10.1f}"
        )
    print("added: the median per-run difference to BASE (single imports) or to pass (paths)")
    ms = {key: statistics.median(times[key]) * 1000 for key in keys}
    record(
        "imports",
        [
            Figure("python -c pass", ms["pass"], "ms"),
            Figure("BASE (what every hook loads)", ms["base"], "ms"),
            *(Figure(f"BASE; {n}: added", added(n, "base") * 1000, "ms") for n in SINGLE),
            *(Figure(f"{n}: added to pass", added(n, "pass") * 1000, "ms") for n in PATHS),
        ],
        notes=[f"BASE: `{BASE}`", "added: the median per-run difference"],
    )


if __name__ == "__main__":
    run_installed_if_asked()
    main()
