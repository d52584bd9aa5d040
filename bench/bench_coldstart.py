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
``python bench/bench_coldstart.py [--runs N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    parser.add_argument("--json", type=Path, help="also write the figures here")
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
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "runs": args.runs,
                    "medians_ms": {k: v * 1000 for k, v in medians.items()},
                    "ratio_import": ratio_import,
                    "ratio_init": ratio_init,
                },
                indent=2,
            )
        )
    return 0 if ratio_import <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
