"""CLI start-up, as a ratio to a bare interpreter start.

    .venv/bin/python bench/bench_cli_startup.py [--runs N]

On the embedded local store holding 10,000 packets, each command as a whole process, medians
of --runs runs after two warm-up runs; each run times `python -c pass` and the command back
to back, and a ratio is the median of the per-run ratios (steady on a busy machine).
Targets, as ratios to `python -c pass` in the same run: `ltm ls`, `ltm resume ID` and
`ltm save FILE` within 5x, `ltm --help` within 6x.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, fill_store, machine, median_ms, paired, per_run_ratio, user_env
from results import against, record

RATIO_TARGETS = {"ltm ls": 5, "ltm resume ID": 5, "ltm save FILE": 5, "ltm --help": 6}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        env = user_env() | {"LTM_DATA_DIR": tmp, "LTM_CONFIG_DIR": tmp}
        fill_store(Path(tmp) / "ltm.db", 10_000)
        some_id = f"01BENCH{5000:019d}"
        packet = Path(tmp) / "packet.json"
        example = subprocess.run([LTM, "example"], env=env, capture_output=True, check=True)
        packet.write_bytes(example.stdout)
        commands = (
            ["--version"],
            ["example"],
            ["example", "--resume"],
            ["ls"],
            ["resume", some_id],
            ["show", some_id],
            ["--help"],
            # Last, as it adds a packet at each run (the example has no id: save mints
            # one), into the store of 10,000, with every check save makes and the
            # durable commit.
            ["save", str(packet)],
        )
        bare_all: list[float] = []
        rows, ratios = [], {}
        for args in commands:
            name = f"ltm {' '.join(args)}".replace(some_id, "ID").replace(str(packet), "FILE")
            bare, timed = paired(lambda a=args: quiet([LTM, *a], env), runs=runs)
            bare_all += bare
            rows.append((name, median_ms(timed)))
            ratios[name] = per_run_ratio(bare, timed)
    base = median_ms(bare_all)
    print(f"machine: {machine()}; {runs} runs each, medians; a store of 10,000 packets")
    print(f"{'command':<40} {'median ms':>10} {'x bare':>8}")
    print(f"{BARE:<40} {base:>10.1f} {1:>8.2f}")
    for name, ms in rows:
        print(f"{name:<40} {ms:>10.1f} {ratios[name]:>8.2f}")
    print(
        "x bare: the median of the per-run ratios, each run timing python -c pass and the command"
    )
    record(
        "cli_startup",
        against((BARE, base), rows, ratio_targets=RATIO_TARGETS, ratios=ratios),
        notes=[f"x: {NOTE}"],
    )


def quiet(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


BARE = "python -c pass"
NOTE = "the median of per-run ratios, each run timing python -c pass and the command"


if __name__ == "__main__":
    main()
