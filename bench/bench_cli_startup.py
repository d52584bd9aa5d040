"""CLI start-up, as a ratio to a bare interpreter start.

    .venv/bin/python bench/bench_cli_startup.py [--runs N]

On the embedded local store holding 10,000 packets, each command as a whole process, medians
of --runs runs after two warm-up runs. Targets, as ratios to `python -c pass` in the same
run: `ltm ls`, `ltm resume ID` and `ltm save FILE` within 5x, `ltm --help` within 6x.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, fill_store, machine, median_ms, time_command
from results import against, record

RATIO_TARGETS = {"ltm ls": 5, "ltm resume ID": 5, "ltm save FILE": 5, "ltm --help": 6}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        # Bytecode cached, as after a pip install (some sandboxes turn the cache off).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"LTM_DATA_DIR": tmp, "LTM_CONFIG_DIR": tmp}
        fill_store(Path(tmp) / "ltm.db", 10_000)
        bare = median_ms(time_command([sys.executable, "-c", "pass"], runs=runs, env=env))
        rows = [("python -c pass", bare)]
        some_id = f"01BENCH{5000:019d}"
        commands = (
            ["--version"],
            ["example"],
            ["example", "--resume"],
            ["ls"],
            ["resume", some_id],
            ["show", some_id],
            ["--help"],
        )
        for args in commands:
            rows.append(
                (f"ltm {' '.join(args)}", median_ms(time_command([LTM, *args], runs=runs, env=env)))
            )
        # Last, as it adds a packet at each run (the example has no id: save mints one),
        # into the store of 10,000, with every check save makes and the durable commit.
        packet = Path(tmp) / "packet.json"
        example = subprocess.run([LTM, "example"], env=env, capture_output=True, check=True)
        packet.write_bytes(example.stdout)
        save = time_command([LTM, "save", str(packet)], runs=runs, env=env)
        rows.append(("ltm save FILE", median_ms(save)))
    print(f"machine: {machine()}; {runs} runs each, medians; a store of 10,000 packets")
    print(f"{'command':<40} {'median ms':>10} {'x bare':>8}")
    for name, ms in rows:
        print(f"{name:<40} {ms:>10.1f} {ms / bare:>8.2f}")
    named = [(name.replace(some_id, "ID"), ms) for name, ms in rows[1:]]
    record("cli_startup", against(rows[0], named, ratio_targets=RATIO_TARGETS))


if __name__ == "__main__":
    main()
