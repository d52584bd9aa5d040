"""Lambda cold-start proxy: how long importing app.py takes, against its unavoidable floor.

On Lambda a cold start runs the interpreter, imports the handler module
(``app.py``) and then serves the first request. The interpreter is the same
for every app, so what this project controls is the import, measured here
inside fresh interpreters (one per sample, from the repo root as Lambda runs
from ``/var/task``, ``LTM_STORE=dynamodb``), against the floor of importing
what any Chalice app on DynamoDB must import: ``boto3`` and ``chalice``.

Two pairs are measured, interleaved run by run so machine noise hits all alike:

- import:        ``import app``           vs ``import boto3, chalice``
- import + store: the same, plus opening the store (the boto3 DynamoDB client,
  which the app creates on its first request) vs the floor plus creating that
  client: the whole init a cold request pays before its first DynamoDB call.

Target: median ratio <= 1.5 for the import. Usage:
``python bench/bench_coldstart.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from results import Figure, record  # noqa: E402

TARGET = 1.5

CASES = {
    "floor": "import boto3, chalice",
    "app": "import app",
    "floor+client": "import boto3, chalice\nboto3.session.Session().client('dynamodb')",
    "app+store": "import app\napp.get_store()",
}

PROBE = """
import time
_t0 = time.perf_counter()
{code}
print(time.perf_counter() - _t0)
"""


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LTM_"))}
    out.update(
        LTM_STORE="dynamodb",
        LTM_DYNAMODB_TABLE="ltm-bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
    )
    return out


def sample(code: str) -> float:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code)],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=31)
    args = parser.parse_args(argv)

    for code in CASES.values():  # warm the bytecode caches once
        sample(code)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.runs):
        for name, code in CASES.items():
            times[name].append(sample(code))
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio_import = medians["app"] / medians["floor"]
    ratio_init = medians["app+store"] / medians["floor+client"]

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"runs: {args.runs} fresh interpreters per case (medians, ms)")
    for name in CASES:
        print(f"  {name:13s} {medians[name] * 1000:8.1f}")
    print(f"import app / import boto3+chalice:      {ratio_import:.2f}x (target <= {TARGET}x)")
    print(f"app + store / boto3+chalice + client:   {ratio_init:.2f}x")
    ms = {name: medians[name] * 1000 for name in CASES}
    floor, floor_client = "import boto3, chalice", "import boto3, chalice; a DynamoDB client"
    record(
        "coldstart",
        [
            Figure(floor, ms["floor"], "ms"),
            Figure(
                "import app",
                ms["app"],
                "ms",
                baseline=floor,
                ratio=ratio_import,
                ratio_target=TARGET,
            ),
            Figure(floor_client, ms["floor+client"], "ms"),
            Figure(
                "import app; open the store",
                ms["app+store"],
                "ms",
                baseline=floor_client,
                ratio=ratio_init,
            ),
        ],
    )
    return 0 if ratio_import <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
