"""Benchmark search: the HTTP API on 100,000 packets and the ``ltm search`` command.

Run: .venv/bin/python bench/bench_search.py [--packets N] [--requests R]

1. HTTP: one real ``ltm server run`` (SQLite) on loopback; N (default
   100,000) packets of ``corpus.py`` seeded into one user's personal scope
   through the store (``put_packet``, as a push writes them: FTS index
   included); then R sequential ``GET /v1/search`` requests on one keep-alive
   connection, cycling through ``corpus.QUERIES``: p50 / p99 overall and the
   median per query; the stop-word worst case (``corpus.WORST``) apart; and the
   seeded store's disk per packet (``common.disk``).
2. CLI: ``ltm search oauth retry --local`` as a whole command on a local store
   of 10,000 packets, against ``python -c pass``: medians and their ratio.
3. Multi-word queries (``MULTI_WORD``: two or three words, or a phrase) at
   ``--packets``: p50 / p95 over HTTP (from run 1) and on the local store in
   process (``service.search`` over the SQLite store, as ``ltm search --local
   --lexical`` runs it).
What a search costs on DynamoDB is ``bench_dynamo_cost.py``'s.

Targets: p50 <= 20 ms and p99 <= 50 ms (HTTP); ratio <= 5 (CLI); multi-word
p50 <= 6 ms and p95 <= 12 ms at 10,000 packets, local and over HTTP.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
from bench_server import Server, load, request_bytes
from common import LTM, disk, machine, median_ms, time_command, user_env
from results import Figure, record

ROOT = Path(__file__).resolve().parents[1]
MULTI_WORD = ("oauth retry", '"retry backoff"', "deadlock mutex race")
TARGETS = {"p50_ms": 20.0, "p99_ms": 50.0, "cli_ratio": 5.0}


def stored(n: int, owner_id: str, team_id: str | None = None) -> tuple[Any, str]:
    """Packet ``n`` of the corpus as the service would store it, and its sort key."""
    from ltm import packet
    from ltm.store import PacketMeta, StoredPacket

    packet_id = f"01SEARCHBENCH{n:013d}"
    data = corpus.packet(n, packet_id)
    meta = PacketMeta(packet_id, str(data["created_at"]), str(data["goal"]), owner_id, team_id)
    sort_key = packet.created_at_sort_key(str(data["created_at"]))
    return StoredPacket(meta, packet.canonical_bytes(data)), sort_key


def seed_sqlite(db: Path, owner_id: str, count: int) -> float:
    from ltm.store.sqlite import SqliteStore

    started = time.perf_counter()
    store = SqliteStore(db)
    try:  # what put_packet writes (FTS index included), 1,000 packets per transaction
        for start in range(0, count, 1000):
            store.put_packets([stored(n, owner_id) for n in range(start, min(count, start + 1000))])
    finally:
        store.close()
    return time.perf_counter() - started


def search_path(query: str) -> str:
    from urllib.parse import urlencode

    return "/v1/search?" + urlencode({"q": query, "limit": "20"})


def bench_http(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    server = Server(work, threads=8)
    try:
        user_id, token = server.issue("searcher")
        seconds = seed_sqlite(server.db, user_id, args.packets)
        print(f"seeded {args.packets} packets in {seconds:.0f} s", file=sys.stderr)
        disk(server.db, args.packets, label="the search corpus, ")
        queries = itertools.cycle(corpus.QUERIES)
        # Warm up (first touches of the FTS pages), then measure.
        load(
            "warm",
            server,
            iter([request_bytes("GET", search_path(q), token) for q in corpus.QUERIES * 5]),
            seconds=60,
            connections=1,
        )
        per_query: dict[str, list[float]] = {q: [] for q in corpus.QUERIES}
        ordered = [next(queries) for _ in range(args.requests)]
        result = load(
            "search",
            server,
            iter([request_bytes("GET", search_path(q), token) for q in ordered]),
            seconds=600,
            connections=1,
        )
        for query, latency in zip(ordered, result.latencies, strict=False):
            per_query[query].append(latency)
        multi = sorted(t for q in MULTI_WORD for t in per_query[q])
        worst = load(
            "worst",
            server,
            iter([request_bytes("GET", search_path(corpus.WORST), token)] * 50),
            seconds=120,
            connections=1,
        )
        return {
            "packets": args.packets,
            "seed_seconds": round(seconds, 1),
            **result.summary(),
            "per_query_p50_ms": {q: round(median_ms(t), 2) for q, t in per_query.items() if t},
            "worst_query": corpus.WORST,
            "worst_p50_ms": round(worst.pct(0.5), 2),
            "worst_p99_ms": round(worst.pct(0.99), 2),
            "multi_word_p50_ms": round(_pct(multi, 0.5) * 1000, 2),
            "multi_word_p95_ms": round(_pct(multi, 0.95) * 1000, 2),
        }
    finally:
        server.stop()


def _pct(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def bench_local(work: Path, packets: int, rounds: int = 100) -> dict[str, Any]:
    """Multi-word queries through the service on a SQLite store, in this process."""
    from datetime import UTC, datetime

    from ltm.service import search as searching
    from ltm.store import User
    from ltm.store.sqlite import SqliteStore

    db = work / "local.db"
    seed_sqlite(db, "local", packets)
    store = SqliteStore(db)
    user = User("local", "local", datetime.now(UTC))
    try:
        for query in MULTI_WORD * 5:  # warm-up
            searching.search(store, user, query, mode="lexical")
        times = []
        for _ in range(rounds):
            for query in MULTI_WORD:
                started = time.perf_counter()
                searching.search(store, user, query, mode="lexical")
                times.append(time.perf_counter() - started)
    finally:
        store.close()
    return {
        "packets": packets,
        "multi_word_p50_ms": round(_pct(times, 0.5) * 1000, 2),
        "multi_word_p95_ms": round(_pct(times, 0.95) * 1000, 2),
    }


def bench_cli(work: Path, packets: int, runs: int) -> dict[str, Any]:
    env = user_env()
    env["LTM_DATA_DIR"] = str(work / "data")
    env["LTM_CONFIG_DIR"] = str(work / "config")
    seed_sqlite(work / "data" / "ltm.db", "local", packets)  # the local store's one user
    command = [LTM, "search", "oauth", "retry", "--local"]
    baseline = time_command([sys.executable, "-c", "pass"], runs=runs, env=env)
    search = time_command(command, runs=runs, env=env)
    return {
        "packets": packets,
        "command": " ".join(["ltm", *command[1:]]),
        "python_pass_ms": round(median_ms(baseline), 1),
        "ltm_search_ms": round(median_ms(search), 1),
        "ratio": round(statistics.median(search) / statistics.median(baseline), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--cli-packets", type=int, default=10_000)
    parser.add_argument("--cli-runs", type=int, default=20)
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--skip-cli", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.skip_http:
            (work / "http").mkdir()
            results["http"] = bench_http(args, work / "http")
            print(json.dumps(results["http"], indent=2), file=sys.stderr)
        (work / "local").mkdir()
        results["local"] = bench_local(work / "local", args.packets)
        print(json.dumps(results["local"], indent=2), file=sys.stderr)
        if not args.skip_cli:
            (work / "cli").mkdir()
            results["cli"] = bench_cli(work / "cli", args.cli_packets, args.cli_runs)
            print(json.dumps(results["cli"], indent=2), file=sys.stderr)
    print(json.dumps(results, indent=2))
    record("search", figures(results))
    return 0


def figures(results: dict[str, Any]) -> list[Figure]:
    out = []
    if http := results.get("http"):
        where = f"GET /v1/search, {http['packets']:,} packets"
        out += [
            Figure(f"{where}: p50", http["p50_ms"], "ms", target=20),
            Figure(f"{where}: p99", http["p99_ms"], "ms", target=50),
            Figure(f"{where}: worst query p50", http["worst_p50_ms"], "ms"),
            Figure(f"{where}: worst query p99", http["worst_p99_ms"], "ms"),
            Figure(f"{where}: multi-word p50", http["multi_word_p50_ms"], "ms", target=6),
            Figure(f"{where}: multi-word p95", http["multi_word_p95_ms"], "ms", target=12),
        ]
    if local := results.get("local"):
        where = f"local store, {local['packets']:,} packets"
        out += [
            Figure(f"{where}: multi-word p50", local["multi_word_p50_ms"], "ms", target=6),
            Figure(f"{where}: multi-word p95", local["multi_word_p95_ms"], "ms", target=12),
        ]
    if cli := results.get("cli"):
        out += [
            Figure("python -c pass", cli["python_pass_ms"], "ms"),
            Figure(
                f"{cli['command']} ({cli['packets']:,} packets)",
                cli["ltm_search_ms"],
                "ms",
                baseline="python -c pass",
                ratio=cli["ratio"],
                ratio_target=5,
            ),
        ]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
