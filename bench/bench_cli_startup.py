"""CLI start-up, as a ratio to a bare interpreter start.

    .venv/bin/python bench/bench_cli_startup.py [--runs N]

Targets (issue 2): `ltm example` within 4x of `python -c pass`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, machine, median_ms, time_command

from ltm.examples import example_bytes
from ltm.store import PacketMeta
from ltm.store.sqlite import SqliteStore

EXAMPLE = json.loads(example_bytes())


def _body(packet_id: str, created: str, goal: str) -> bytes:
    return json.dumps({**EXAMPLE, "id": packet_id, "created_at": created, "goal": goal}).encode()


def fill_store(path: Path, count: int) -> None:
    store = SqliteStore(path)
    conn = store._conn()
    conn.execute("BEGIN")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(count):
        created = (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta = PacketMeta(f"01BENCH{n:019d}", created, f"goal number {n}", "local")
        conn.execute(
            "INSERT INTO packets (id, scope, owner_id, team_id, sort_key, created_at, goal,"
            " conforming, body) VALUES (?, 'u:local', 'local', NULL, ?, ?, ?, 1, ?)",
            (meta.id, created, created, meta.goal, _body(meta.id, created, meta.goal)),
        )
    conn.execute("COMMIT")
    store.close()


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
    print(f"machine: {machine()}; {runs} runs each, medians; ls on a store of 10,000 packets")
    print(f"{'command':<40} {'median ms':>10} {'x bare':>8}")
    for name, ms in rows:
        print(f"{name:<40} {ms:>10.1f} {ms / bare:>8.2f}")


if __name__ == "__main__":
    main()
