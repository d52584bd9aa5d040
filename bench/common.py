"""Helpers shared by the benchmarks: timing whole commands and reporting medians."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

BIN = Path(sys.executable).parent
LTM = str(BIN / "ltm")


def time_command(
    argv: Sequence[str], *, runs: int, env: dict[str, str] | None = None
) -> list[float]:
    """Wall-clock seconds of each run, after two warm-up runs."""
    times = []
    for i in range(runs + 2):
        start = time.perf_counter()
        subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
        )
        if i >= 2:
            times.append(time.perf_counter() - start)
    return times


def median_ms(times: Sequence[float]) -> float:
    return statistics.median(times) * 1000


def machine() -> str:
    return f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"
