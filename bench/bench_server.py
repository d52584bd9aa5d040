"""Benchmark the self-hosted server: ``ltm server run`` on loopback, 16 connections.

Run: .venv/bin/python bench/bench_server.py [--seconds S] [--big N] [--threads T]

What it does, all against one real ``ltm server run`` subprocess on 127.0.0.1:

1. push: 16 keep-alive connections POST distinct valid packets (four users)
   for S seconds; throughput and latency percentiles.
2. get: 16 connections GET packets pushed in step 1, S seconds.
3. list: 16 connections GET /v1/packets (the default 50 newest), S seconds.
4. ls at 1,000 vs N (default 100,000) packets: two users' personal scopes are
   seeded straight into the SQLite file (through the store, as the server
   would write them), then one connection lists each scope sequentially;
   the median latencies and their ratio.
5. RSS: the server's peak resident set (VmHWM) over the whole run, sampled too.

The load generator is a small asyncio HTTP/1.1 client over raw sockets (one
process, request bytes prepared ahead), so it costs the server's two cores
as little as possible; it still shares the machine, and the figures include
that. Exit status is 0 whatever the figures; ``--check`` exits 1 on a missed
target. Results go to stdout (a markdown table for BENCHMARKS.md) and to
bench/results/server.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LTM = str(BIN / "ltm")
CONNECTIONS = 16

TARGETS = {
    "push_rps": 1000.0,
    "get_rps": 2500.0,
    "p99_ms": 50.0,
    "ls_ratio": 1.3,
    "rss_mb": 100.0,
}


# -- the server ---------------------------------------------------------------------------


def _server_cmd() -> list[str]:
    return [LTM, "server"]


class Server:
    """``ltm server run`` as a subprocess, with its memory and CPU read from /proc."""

    def __init__(self, workdir: Path, threads: int, workers: int = 0, sync: str = "") -> None:
        self.db = workdir / "server.db"
        self.log = workdir / "server.log"
        cmd = _server_cmd()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LTM_")}
        init = subprocess.run(
            [*cmd, "init", "--db", str(self.db)], capture_output=True, text=True, env=env
        )
        if init.returncode != 0:
            raise SystemExit(init.stderr)
        self.root = init.stdout.strip()
        argv = [*cmd, "run", "--db", str(self.db), "--addr", "127.0.0.1:0"]
        argv += ["--threads", str(threads)] + (["--workers", str(workers)] if workers else [])
        argv += ["--sqlite-sync", sync] if sync else []
        with self.log.open("wb") as sink:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=sink, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log.read_text())
            if found:
                self.port = int(found.group(1))
                break
            if self.proc.poll() is not None:
                raise SystemExit(self.log.read_text())
            time.sleep(0.05)
        else:
            raise SystemExit("server did not start")
        time.sleep(0.5)  # let the worker processes (if any) start
        self.pids = [self.proc.pid, *self._children()]
        self.rss_samples: list[int] = []  # total RSS of all server processes
        self.pss_samples: list[int] = []  # total PSS: shared pages counted once
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _children(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(p) for p in path.read_text().split()] if path.exists() else []

    @staticmethod
    def _kb(path: str, key: str) -> int:
        found = re.search(rf"^{key}:\s+(\d+) kB", Path(path).read_text(), re.M)
        return int(found.group(1)) * 1024 if found else 0

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.rss_samples.append(
                    sum(self._kb(f"/proc/{p}/status", "VmRSS") for p in self.pids)
                )
                self.pss_samples.append(
                    sum(self._kb(f"/proc/{p}/smaps_rollup", "Pss") for p in self.pids)
                )
            except OSError:
                return
            time.sleep(0.1)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server processes (all threads) so far."""
        total = 0
        for pid in self.pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def peak_rss(self) -> int:
        """The peak of the summed RSS; one process: its own high-water mark (VmHWM)."""
        peak = max(self.rss_samples, default=0)
        if len(self.pids) == 1:
            with contextlib.suppress(OSError):
                peak = max(peak, self._kb(f"/proc/{self.proc.pid}/status", "VmHWM"))
        return peak

    def peak_pss(self) -> int:
        return max(self.pss_samples, default=0)

    def issue(self, name: str) -> tuple[str, str]:
        from ltm.service import tokens
        from ltm.store.sqlite import SqliteStore

        store = SqliteStore(self.db)
        try:
            user, secret = tokens.issue(store, name, label=name)
        finally:
            store.close()
        return user.id, secret

    def stop(self) -> None:
        self._stop.set()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# -- the load generator ------------------------------------------------------------------


@dataclass
class Result:
    name: str
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    server_cpu: float = 0.0  # CPU seconds the server used during the run
    client_cpu: float = 0.0

    @property
    def count(self) -> int:
        return len(self.latencies)

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.count,
            "rps": round(self.count / self.seconds, 1) if self.seconds else 0,
            "p50_ms": round(self.pct(0.50), 2),
            "p90_ms": round(self.pct(0.90), 2),
            "p99_ms": round(self.pct(0.99), 2),
            "max_ms": round(max(self.latencies) * 1000, 2) if self.latencies else None,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "server_cpu_us_per_request": round(self.server_cpu / self.count * 1e6)
            if self.count
            else None,
            "server_cores_busy": round(self.server_cpu / self.seconds, 2) if self.seconds else None,
            "client_cores_busy": round(self.client_cpu / self.seconds, 2) if self.seconds else None,
        }


def request_bytes(method: str, path: str, token: str, body: bytes | None = None) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + (body or b"")


async def _connection(
    port: int, requests: Any, result: Result, deadline: float, limit: int | None
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < deadline:
            if limit is not None and result.count >= limit:
                return
            try:
                payload = next(requests)
            except StopIteration:
                return
            started = time.perf_counter()
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            if length:
                await reader.readexactly(length)
            result.latencies.append(time.perf_counter() - started)
            result.statuses[status] = result.statuses.get(status, 0) + 1
            if b"connection: close" in head.lower():
                return
    finally:
        writer.close()


def load(
    name: str,
    server: Server,
    requests: Any,
    *,
    seconds: float,
    connections: int = CONNECTIONS,
    limit: int | None = None,
) -> Result:
    result = Result(name)

    async def main() -> None:
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        await asyncio.gather(
            *(
                _connection(server.port, requests, result, deadline, limit)
                for _ in range(connections)
            )
        )
        result.seconds = time.perf_counter() - started

    server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
    asyncio.run(main())
    result.server_cpu = server.cpu_seconds() - server_cpu
    result.client_cpu = time.process_time() - client_cpu
    return result


# -- workloads ----------------------------------------------------------------------------


def packet_body(packet_id: str, n: int) -> bytes:
    return json.dumps(
        {
            "ltm_version": "0.2",
            "id": packet_id,
            "created_at": f"2026-0{1 + n % 9}-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00Z",
            "goal": f"Benchmark packet {n}: keep the server fast on a small box",
            "success_criteria": ["1,000 pushes per second", "p99 under 50 ms"],
            "decisions": [
                {"what": "SQLite in WAL mode", "why": "one file, crash-safe", "locked": True}
            ],
            "attempts": [{"tried": "one connection per thread", "outcome": "succeeded"}],
            "next_step": "Measure again after the next change",
            "tags": ["bench", "server"],
        },
        separators=(",", ":"),
    ).encode()


def seed(db: Path, owner_id: str, count: int) -> None:
    """``count`` packets in ``owner_id``'s personal scope, written through the store."""
    from ulid import ULID

    from ltm import packet
    from ltm.store import PacketMeta, StoredPacket
    from ltm.store.sqlite import SqliteStore

    # Setup, not measured: no fsync per seeded packet (FULL would take minutes for 100,000).
    store = SqliteStore(db, sync="normal")
    try:
        for n in range(count):
            pid = str(ULID())
            data = json.loads(packet_body(pid, n))
            meta = PacketMeta(pid, data["created_at"], data["goal"], owner_id)
            store.put_packet(
                StoredPacket(meta, packet.canonical_bytes(data)),
                sort_key=packet.created_at_sort_key(data["created_at"]),
            )
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="per throughput phase")
    parser.add_argument("--big", type=int, default=100_000, help="packets in the big scope")
    parser.add_argument("--small", type=int, default=1_000, help="packets in the small scope")
    parser.add_argument("--threads", type=int, default=4, help="server threads per process")
    parser.add_argument(
        "--workers", type=int, default=0, help="server processes (0: the server's default)"
    )
    parser.add_argument("--ls-requests", type=int, default=400)
    parser.add_argument(
        "--sqlite-sync", default="", help="the server's --sqlite-sync (default: the server's own)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    from ulid import ULID

    with tempfile.TemporaryDirectory(prefix="ltm-bench-") as tmp:
        server = Server(Path(tmp), args.threads, args.workers, args.sqlite_sync)
        try:
            users = [server.issue(f"bench{i}") for i in range(4)]
            tokens = [t for _, t in users]
            results: dict[str, Any] = {}

            # 1. push
            pushed: list[tuple[str, str]] = []

            def pushes() -> Any:
                n = 0
                while True:
                    pid = str(ULID())
                    token = tokens[n % len(tokens)]
                    pushed.append((pid, token))
                    yield request_bytes("POST", "/v1/packets", token, packet_body(pid, n))
                    n += 1

            load("warm-up", server, pushes(), seconds=1.0)
            push = load("push", server, pushes(), seconds=args.seconds)
            results["push"] = push.summary()

            # 2. get
            def gets() -> Any:
                n = 0
                while True:
                    pid, token = pushed[(n * 7919) % len(pushed)]
                    yield request_bytes("GET", f"/v1/packets/{pid}", token)
                    n += 1

            get = load("get", server, gets(), seconds=args.seconds)
            results["get"] = get.summary()

            # 3. list (the default 50 newest of a scope holding every pushed packet of its user)
            def lists() -> Any:
                n = 0
                while True:
                    yield request_bytes("GET", "/v1/packets", tokens[n % len(tokens)])
                    n += 1

            lst = load("list", server, lists(), seconds=args.seconds)
            results["list"] = lst.summary()

            # 4. ls at small vs big
            small_id, small_token = server.issue("ls-small")
            big_id, big_token = server.issue("ls-big")
            started = time.perf_counter()
            seed(server.db, small_id, args.small)
            seed(server.db, big_id, args.big)
            seeded_s = time.perf_counter() - started
            ls = {}
            for label, token in (
                ("small", small_token),
                ("big", big_token),
                ("small", small_token),
                ("big", big_token),
            ):
                requests = iter([request_bytes("GET", "/v1/packets", token)] * args.ls_requests)
                r = load(f"ls-{label}", server, requests, seconds=120, connections=1)
                ls.setdefault(label, []).extend(r.latencies)
            ls_small = Result("ls-small", ls["small"], seconds=1)
            ls_big = Result("ls-big", ls["big"], seconds=1)
            results["ls"] = {
                "small_packets": args.small,
                "big_packets": args.big,
                "seed_seconds": round(seeded_s, 1),
                "small_p50_ms": round(ls_small.pct(0.5), 3),
                "big_p50_ms": round(ls_big.pct(0.5), 3),
                "small_p99_ms": round(ls_small.pct(0.99), 3),
                "big_p99_ms": round(ls_big.pct(0.99), 3),
                "ratio_p50": round(ls_big.pct(0.5) / ls_small.pct(0.5), 3),
            }
            results["rss_peak_mb"] = round(server.peak_rss() / 2**20, 1)
            results["pss_peak_mb"] = round(server.peak_pss() / 2**20, 1)
            results["processes"] = len(server.pids)
            results["rss_samples"] = len(server.rss_samples)
            results["db_packets"] = len(pushed) + args.small + args.big
        finally:
            server.stop()

    results["machine"] = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    results["threads"] = args.threads
    results["sqlite_sync"] = args.sqlite_sync or "server default"
    results["workers"] = results["processes"]
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    name = f"server-w{results['processes']}-t{args.threads}.json"
    (out / name).write_text(json.dumps(results, indent=2))

    p99 = max(results[k]["p99_ms"] for k in ("push", "get", "list"))
    checks = {
        "push_rps": results["push"]["rps"] >= TARGETS["push_rps"],
        "get_rps": results["get"]["rps"] >= TARGETS["get_rps"],
        "p99_ms": p99 <= TARGETS["p99_ms"],
        "ls_ratio": results["ls"]["ratio_p50"] <= TARGETS["ls_ratio"],
        "rss_mb": results["rss_peak_mb"] <= TARGETS["rss_mb"],
    }
    mark = {True: "met", False: "MISSED"}
    print(
        f"Server benchmark ({results['machine']}, {args.threads} server threads,"
        f" x {results['processes']} process(es), {CONNECTIONS} connections, loopback,"
        f" sqlite sync: {results['sqlite_sync']})\n"
    )
    print(
        "| workload | requests/s | p50 ms | p90 ms | p99 ms | server CPU/request"
        " | server cores busy | statuses |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for key in ("push", "get", "list"):
        r = results[key]
        print(
            f"| {key} | {r['rps']:.0f} | {r['p50_ms']} | {r['p90_ms']} | {r['p99_ms']} |"
            f" {r['server_cpu_us_per_request']} µs | {r['server_cores_busy']} | {r['statuses']} |"
        )
    ls_r = results["ls"]
    print(
        f"\nls (GET /v1/packets, 1 connection): {ls_r['small_packets']:,} packets p50"
        f" {ls_r['small_p50_ms']} ms, {ls_r['big_packets']:,} packets p50 {ls_r['big_p50_ms']} ms,"
        f" ratio {ls_r['ratio_p50']}"
    )
    print(
        f"server peak RSS: {results['rss_peak_mb']} MB over {results['processes']} process(es)"
        f" (PSS, shared pages counted once: {results['pss_peak_mb']} MB)"
    )
    print("\ntargets: " + ", ".join(f"{k} {mark[v]}" for k, v in checks.items()))
    return 1 if args.check and not all(checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
