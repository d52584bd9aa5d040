"""What durability costs the SQLite store: writes/s and latency, synchronous NORMAL vs FULL.

Run: .venv/bin/python bench/bench_store_sync.py [--seconds S] [--threads 1,4,16]

For each setting and each number of writer threads, the threads ``put_packet``
distinct packets into one fresh database (in the system's temp directory,
which is where the disk under test is) for S seconds; writes/s and the p50 and
p99 of one write. No HTTP: this isolates the store, where FULL's fsync per
commit lives, and shows what group commit (``SqliteStore._write``) recovers
when writers are concurrent.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_server import packet_body  # noqa: E402  (same packets as the server bench)
from results import Figure, record  # noqa: E402


def run(sync: str, threads: int, seconds: float) -> dict[str, Any]:
    from ulid import ULID

    from ltm import packet
    from ltm.store import PacketMeta, StoredPacket
    from ltm.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory(prefix="ltm-sync-") as tmp:
        store = SqliteStore(Path(tmp) / "bench.db", sync=sync)
        latencies: list[float] = []
        lock = threading.Lock()
        deadline = time.perf_counter() + seconds

        def writer(t: int) -> None:
            mine: list[float] = []
            n = 0
            while time.perf_counter() < deadline:
                pid = str(ULID())
                data = json.loads(packet_body(pid, n))
                meta = PacketMeta(pid, data["created_at"], data["goal"], f"user{t}")
                stored = StoredPacket(meta, packet.canonical_bytes(data))
                started = time.perf_counter()
                store.put_packet(stored, sort_key=packet.created_at_sort_key(data["created_at"]))
                mine.append(time.perf_counter() - started)
                n += 1
            with lock:
                latencies.extend(mine)

        started = time.perf_counter()
        workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - started
        # Transactions committed (writes / commits = the batch size); None before group commit.
        commits = getattr(store, "_ended", None)
        store.close()
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {
        "sync": sync,
        "threads": threads,
        "writes": len(ordered),
        "writes_per_s": round(len(ordered) / elapsed),
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "writes_per_commit": round(len(ordered) / max(commits, 1), 2) if commits else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--threads", default="1,4,16", help="comma-separated writer counts")
    args = parser.parse_args()
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for sync in ("normal", "full"):
            rows.append(run(sync, threads, args.seconds))
    print(f"SQLite store writes ({os.cpu_count()} cores, Python {platform.python_version()})\n")
    print("| sync | writer threads | writes/s | p50 ms | p99 ms | writes per commit |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['sync']} | {r['threads']} | {r['writes_per_s']:,} | {r['p50_ms']} |"
            f" {r['p99_ms']} | {r['writes_per_commit']} |"
        )
    figures = []
    by = {(r["sync"], r["threads"]): r for r in rows}
    for threads in sorted({r["threads"] for r in rows}):
        normal, full = by["normal", threads], by["full", threads]
        who = f"{threads} writer{'s' if threads > 1 else ''}"
        base = f"NORMAL, {who}: writes"
        figures += [
            Figure(base, normal["writes_per_s"], "/s", better="higher"),
            Figure(
                f"FULL, {who}: writes",
                full["writes_per_s"],
                "/s",
                better="higher",
                baseline=base,
                ratio=full["writes_per_s"] / normal["writes_per_s"],
            ),
            Figure(f"FULL, {who}: p99 of a write", full["p99_ms"], "ms"),
        ]
    record("store_sync", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
