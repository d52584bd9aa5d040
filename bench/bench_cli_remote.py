"""The CLI against a local server, as a ratio to a bare interpreter start.

    .venv/bin/python bench/bench_cli_remote.py [--runs N]

Starts ``ltm server init`` + ``ltm server run`` on a free loopback port, signs
a user in (``ltm auth``) in a throw-away config dir, pushes 200 packets, then
times whole commands. Target: ``ltm ls`` and ``ltm resume ID``
within 5x of ``python -c pass``. Commands run with bytecode cached, as after
``pip install`` (``PYTHONDONTWRITEBYTECODE`` is dropped for them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, machine, median_ms, sign_in, time_command, user_env
from results import against, record

PACKETS = 200


def server_command() -> list[str]:
    return [LTM, "server"]


def start_server(tmp: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str, str]:
    db, log = tmp / "server.db", tmp / "server.log"
    server = server_command()
    init = subprocess.run(
        [*server, "init", "--db", str(db)], env=env, capture_output=True, text=True
    )
    if init.returncode != 0:
        raise SystemExit(f"ltm server init failed: {init.stderr}")
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*server, "run", "--db", str(db), "--addr", "127.0.0.1:0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            url = found.group(1)
            try:
                with urllib.request.urlopen(url + "/v1/healthz", timeout=2):
                    return proc, url, init.stdout.strip()
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        base = user_env()  # the warm-up runs write the .pyc files
        server_env = {**base, "LTM_DATA_DIR": str(tmp / "server-data"), "LTM_LOG_LEVEL": "ERROR"}
        proc, url, token = start_server(tmp, server_env)
        try:
            env = {**base, "LTM_CONFIG_DIR": str(tmp / "config"), "LTM_DATA_DIR": str(tmp)}
            sign_in(url, token, env)
            ids = []
            for n in range(PACKETS):
                packet = {"goal": f"Benchmark goal number {n}", "next_step": "Measure it"}
                out = subprocess.run(
                    [LTM, "save", "-"],
                    env=env,
                    input=json.dumps(packet).encode(),
                    capture_output=True,
                    check=True,
                )
                ids.append(out.stdout.decode().strip())
            newest = ids[-1]
            bare = median_ms(time_command([sys.executable, "-c", "pass"], runs=runs, env=env))
            rows = [("python -c pass", bare)]
            for args in (
                ["ls"],
                ["resume", newest],
                ["resume", newest[:14]],
                ["ls", "--json", "-n", "200"],
                ["show", newest],
            ):
                times = time_command([LTM, *args], runs=runs, env=env)
                shown = " ".join("ID" if a == newest else "PREFIX" if a == newest[:14] else a
                                 for a in args)  # fmt: skip
                rows.append((f"ltm {shown}", median_ms(times)))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {machine()}; load average {load:.2f}; {runs} runs each, medians;"
        f" ltm server run on loopback (SQLite), {PACKETS} packets"
    )
    print(f"{'command':<28} {'median ms':>10} {'x bare':>8}")
    for label, ms in rows:
        print(f"{label:<28} {ms:>10.1f} {ms / bare:>8.2f}")
    targets = {"ltm ls": 5, "ltm resume ID": 5}
    record(
        "cli_remote",
        against(rows[0], rows[1:], ratio_targets=targets),
        notes=[f"ltm server run on loopback (SQLite) holding {PACKETS} packets"],
    )


if __name__ == "__main__":
    main()
