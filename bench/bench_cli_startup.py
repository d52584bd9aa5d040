"""CLI start-up, as a ratio to a bare interpreter start.

    .venv/bin/python bench/bench_cli_startup.py [--runs N]

Targets: `ltm example`, `ltm save FILE` and `ltm --help` within 4x of `python -c pass`.
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


if __name__ == "__main__":
    main()
