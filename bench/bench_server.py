"""Benchmark a server: ``ltm server run`` on loopback (default) or any server at a URL.

Run: .venv/bin/python bench/bench_server.py [--seconds S] [--big N] [--bulk N]
     LTM_BENCH_TOKEN=... .venv/bin/python bench/bench_server.py --url http://HOST:PORT

What it does, against one real server (ours started as a subprocess on
127.0.0.1, or the one at ``--url``, ours or another implementation such as
the Go reference, with the token in ``LTM_BENCH_TOKEN``: never on a command
line):

1. push: 8 keep-alive connections POST the example packet
   (``spec/examples/example.v0.2.json``), each with a fresh id, for S seconds;
   throughput and latency percentiles.
2. get: 8 connections GET packets pushed in step 1, S seconds.
3. list: 8 connections GET /v1/packets (the default 50 newest), S seconds.
4. bulk (``--bulk N``, default 10,000; 0 skips it): ``ltm import`` of a bundle of
   N example packets into the server, then ``ltm export`` of them, as whole
   commands; packets per second of each.
5. Our server only: ls at 1,000 vs N (default 100,000) packets, seeded straight
   into its SQLite file, one connection listing each scope; the server's peak
   RSS and its CPU per request (from /proc); and the CPU a GET costs the app
   alone, its WSGI callable called in the bench's process on the same database,
   beside the server's (what the HTTP server and its threads add).

The load generator is a small asyncio HTTP/1.1 client over raw sockets (one
process, request bytes prepared ahead), so it costs the server's two cores
as little as possible; it still shares the machine, and the figures include
that. Exit status is 0 whatever the figures; ``--check`` exits 1 on a missed
target. Results go to stdout (a markdown table for BENCHMARKS.md) and to
bench/results/.
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
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import user_env
from results import Figure, record, running_command

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LTM = str(BIN / "ltm")
CONNECTIONS = 8
TOKEN_ENV = "LTM_BENCH_TOKEN"  # the token for --url (a secret: never an argument)

# Half the Go reference's figures on the same 2-core box (SQLite WAL, every commit synced):
# it pushed 2,460/s at p99 13 ms and served 5,580 reads/s at p99 5 ms.
TARGETS = {
    "push_rps": 1200.0,
    "push_p99_ms": 25.0,
    "get_rps": 4000.0,
    "get_p99_ms": 8.0,
    "import_pps": 2000.0,
    "export_pps": 5000.0,
    "ls_ratio": 1.3,
    "rss_mb": 100.0,
}
# With --before: how the record names the other tree's ltm (a venv of the commit before a
# change, built outside the repository), and how much of its requests a second ours must do.
BEFORE = "BEFORE/.venv/bin/ltm"
PAIRED_RATIO = 0.8


# -- the server ---------------------------------------------------------------------------


class Server:
    """``ltm server run`` as a subprocess, with its memory and CPU read from /proc."""

    def __init__(
        self,
        workdir: Path,
        threads: int,
        sync: str = "",
        extra: tuple[str, ...] = (),
        ltm: str = LTM,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.db = workdir / "server.db"
        self.log = workdir / "server.log"
        cmd = self.cmd = [ltm, "server"]
        env = self.env = user_env()
        init = subprocess.run(
            [*cmd, "init", "--db", str(self.db)], capture_output=True, text=True, env=env
        )
        if init.returncode != 0:
            raise SystemExit(init.stderr)
        self.root = init.stdout.strip()
        argv = [*cmd, "run", "--db", str(self.db), "--addr", "127.0.0.1:0"]
        argv += ["--threads", str(threads)] if threads else []
        argv += ["--sqlite-sync", sync] if sync else []
        argv += list(extra)
        with self.log.open("wb") as sink:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=sink, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log.read_text())
            if found:
                self.port = int(found.group(1))
                self.host = "127.0.0.1"
                self.url = f"http://127.0.0.1:{self.port}"
                break
            if self.proc.poll() is not None:
                raise SystemExit(self.log.read_text())
            time.sleep(0.05)
        else:
            raise SystemExit("server did not start")
        time.sleep(0.5)  # a server of another tree may fork processes of its own as it starts
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
        """A new user and their token, by the server's own ``ltm server issue-token`` (a
        store of this tree would migrate the database of an older one under its server)."""
        done = subprocess.run(
            [*self.cmd, "issue-token", name, "--new-user", "--db", str(self.db)],
            capture_output=True,
            text=True,
            env=self.env,
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        token = done.stdout.strip()
        return token.split("_")[1], token  # ltm_<user id>_<secret>

    def stop(self) -> None:
        self._stop.set()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class External:
    """A server started by someone else, at a URL: only what HTTP shows of it."""

    def __init__(self, url: str) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise SystemExit(f"--url: an http://HOST:PORT URL, got {url!r}")
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.pids: list[int] = []

    def cpu_seconds(self) -> float:
        return 0.0  # not ours to read

    def stop(self) -> None:
        pass


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


def request_bytes(
    method: str, path: str, token: str, body: bytes | None = None, host: str = "127.0.0.1"
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + (body or b"")


async def _read_body(reader: asyncio.StreamReader, head: bytes) -> None:
    """The answer's body: Content-Length bytes, or the chunks of a chunked one (as a Go
    server, the reference, sends a larger reply; RFC 9112 section 7.1)."""
    found = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    if found is not None:
        if int(found.group(1)):
            await reader.readexactly(int(found.group(1)))
        return
    if not re.search(rb"(?i)\r\ntransfer-encoding: *[^\r]*chunked", head):
        return  # no body (204, 304)
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields, then the empty line
            return
        await reader.readexactly(size + 2)  # the chunk and its CRLF


async def _connection(
    host: str, port: int, requests: Any, result: Result, deadline: float, limit: int | None
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
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
            await _read_body(reader, head)
            result.latencies.append(time.perf_counter() - started)
            result.statuses[status] = result.statuses.get(status, 0) + 1
            if b"connection: close" in head.lower():
                return
    finally:
        writer.close()


def load(
    name: str,
    server: Server | External,
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
                _connection(server.host, server.port, requests, result, deadline, limit)
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


_EXAMPLE: dict[str, Any] | None = None


def example_body(packet_id: str) -> bytes:
    """The published example packet with a fresh id: what every push of the load sends."""
    global _EXAMPLE
    if _EXAMPLE is None:
        from ltm.examples import example_bytes

        _EXAMPLE = json.loads(example_bytes())
    return json.dumps({**_EXAMPLE, "id": packet_id}, ensure_ascii=False).encode()


def _children_cpu() -> float:
    """User + system CPU of this process's finished children (and theirs, once waited)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def bulk(server: Server | External, token: str, count: int, workdir: Path) -> dict[str, Any]:
    """``ltm import`` of ``count`` example packets into the server, then ``ltm export``."""
    from ulid import ULID

    from ltm import bundle, packet

    source, out = workdir / "bulk-in.jsonl", workdir / "bulk-out.jsonl"
    with source.open("w", encoding="utf-8") as f:
        f.write(bundle.header_line(source="bench", exported_at="2026-05-01T12:00:00Z"))
        for _ in range(count):
            data = json.loads(example_body(str(ULID())))
            f.write(
                bundle.entry_line(
                    body=packet.canonical_bytes(data),
                    team=None,
                    created_by="bench",
                    created_at=data["created_at"],
                    conforming=True,
                )
            )
    env = user_env()
    env.update(
        LTM_HOST=server.url,
        LTM_TOKEN=token,
        LTM_CONFIG_DIR=str(workdir / "config"),
        LTM_DATA_DIR=str(workdir / "data"),
        LTM_STATE_DIR=str(workdir / "state"),
    )
    figures: dict[str, Any] = {"packets": count}
    for name, argv in (
        ("import", [LTM, "import", str(source)]),
        ("export", [LTM, "export", "-o", str(out)]),
    ):
        children, server_cpu = _children_cpu(), server.cpu_seconds()
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        took = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"ltm {name} failed: {done.stderr.strip()[-500:]}")
        figures[f"{name}_seconds"] = round(took, 2)
        figures[f"{name}_pps"] = round(count / took)
        # CPU a packet: the command (its worker processes included), and the server's.
        figures[f"{name}_client_cpu_us"] = round((_children_cpu() - children) / count * 1e6)
        if server.pids:
            figures[f"{name}_server_cpu_us"] = round(
                (server.cpu_seconds() - server_cpu) / count * 1e6
            )
    return figures


def request_phases(server: Server | External, tokens: list[str], seconds: float) -> dict[str, Any]:
    """Push, get and list, ``seconds`` each, on ``CONNECTIONS`` connections: their summaries."""
    from ulid import ULID

    results: dict[str, Any] = {}
    host = server.host
    pushed: list[tuple[str, str]] = []

    def pushes() -> Any:
        n = 0
        while True:
            pid = str(ULID())
            token = tokens[n % len(tokens)]
            pushed.append((pid, token))
            yield request_bytes("POST", "/v1/packets", token, example_body(pid), host)
            n += 1

    load("warm-up", server, pushes(), seconds=1.0)
    results["push"] = load("push", server, pushes(), seconds=seconds).summary()

    def gets() -> Any:
        n = 0
        while True:
            pid, token = pushed[(n * 7919) % len(pushed)]
            yield request_bytes("GET", f"/v1/packets/{pid}", token, None, host)
            n += 1

    results["get"] = load("get", server, gets(), seconds=seconds).summary()

    # the default 50 newest of a scope holding every pushed packet of its user
    def lists() -> Any:
        n = 0
        while True:
            yield request_bytes("GET", "/v1/packets", tokens[n % len(tokens)], None, host)
            n += 1

    results["list"] = load("list", server, lists(), seconds=seconds).summary()
    return results


PHASES = ("push", "get", "list")


def paired(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The request phases on this tree's server and on ``--before``'s, in ``--rounds``
    alternating pairs (before, ours; then ours, before; ...), each on a fresh server:
    the median of each figure over the rounds, each tree's, and ours over before's."""
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "before": []}
    for round_ in range(args.rounds):
        order = ("before", "ours") if round_ % 2 == 0 else ("ours", "before")
        for tree in order:
            ltm = LTM if tree == "ours" else args.before
            server = Server(workdir / f"{tree}-{round_}", args.threads, args.sqlite_sync, ltm=ltm)
            try:
                tokens = [server.issue(f"bench{i}")[1] for i in range(4)]
                runs[tree].append(request_phases(server, tokens, args.seconds))
            finally:
                server.stop()
            print(
                f"round {round_ + 1}, {tree}: "
                + ", ".join(
                    f"{k} {runs[tree][-1][k]['rps']:.0f}/s p99 {runs[tree][-1][k]['p99_ms']} ms"
                    for k in PHASES
                ),
                file=sys.stderr,
            )
    results: dict[str, Any] = {k: _median(r[k] for r in runs["ours"]) for k in PHASES}
    results["before"] = {k: _median(r[k] for r in runs["before"]) for k in PHASES}
    results["ratios"] = {
        k: round(
            statistics.median(
                o[k]["rps"] / b[k]["rps"] for o, b in zip(runs["ours"], runs["before"], strict=True)
            ),
            3,
        )
        for k in PHASES
    }
    results["rounds"] = args.rounds
    return results


def _median(summaries: Any) -> dict[str, Any]:
    """The median of each figure of several runs' summaries."""
    rows = list(summaries)
    merged: dict[str, Any] = {}
    for key, value in rows[0].items():
        if isinstance(value, int | float):
            merged[key] = round(statistics.median(r[key] for r in rows), 2)
        else:
            merged[key] = value
    return merged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="per throughput phase")
    parser.add_argument(
        "--url", default="", help=f"an external server (its token in {TOKEN_ENV}); default: ours"
    )
    parser.add_argument("--bulk", type=int, default=10_000, help="packets to import/export")
    parser.add_argument("--big", type=int, default=100_000, help="packets in the big scope")
    parser.add_argument("--small", type=int, default=1_000, help="packets in the small scope")
    parser.add_argument(
        "--threads", type=int, default=0, help="the server's worker threads (0: its default)"
    )
    parser.add_argument("--ls-requests", type=int, default=400)
    parser.add_argument(
        "--sqlite-sync", default="", help="the server's --sqlite-sync (default: the server's own)"
    )
    parser.add_argument(
        "--before",
        default="",
        metavar="LTM",
        help="the ltm executable of another tree (the one before a change, installed in a"
        " venv of its own): the request phases run in pairs on both, in the same run",
    )
    parser.add_argument("--rounds", type=int, default=2, help="pairs with --before")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    if args.before and args.url:
        raise SystemExit("--before compares two trees of ours: not with --url")

    with tempfile.TemporaryDirectory(prefix="ltm-bench-") as tmp:
        server: Server | External
        if args.url:
            token = os.environ.get(TOKEN_ENV, "")
            if not token:
                raise SystemExit(f"--url needs the server's token in {TOKEN_ENV}")
            server = External(args.url)
            tokens = [token]
        else:
            server = Server(Path(tmp), args.threads, args.sqlite_sync)
            tokens = [server.issue(f"bench{i}")[1] for i in range(4)]
        try:
            results: dict[str, Any] = {}
            if args.before:  # the request phases in pairs, each on a fresh server of each tree
                results.update(paired(args, Path(tmp)))
            else:
                results.update(request_phases(server, tokens, args.seconds))

            # 4. import and export as whole commands, into a user of their own where we can
            if args.bulk:
                bulk_token = tokens[0] if isinstance(server, External) else server.issue("bulk")[1]
                results["bulk"] = bulk(server, bulk_token, args.bulk, Path(tmp))

            # 5. ours only: ls at small vs big, memory
            if isinstance(server, Server):
                results["ls"] = ls_phase(server, args)
                results["app_get_us"] = app_alone(server)
                results["rss_peak_mb"] = round(server.peak_rss() / 2**20, 1)
                results["pss_peak_mb"] = round(server.peak_pss() / 2**20, 1)
                results["processes"] = len(server.pids)
        finally:
            server.stop()

    results["machine"] = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    results["server"] = args.url or "ltm server run"
    results["threads"] = args.threads
    results["sqlite_sync"] = args.sqlite_sync or "server default"
    if not args.url:  # another implementation's figures are printed, never recorded as ours
        # The other tree's path is this machine's: the record names it by its role.
        command = running_command().replace(args.before, BEFORE) if args.before else None
        record("server", figures(results), command=command, notes=[server_notes(results, args)])

    checks = {
        "push_rps": results["push"]["rps"] >= TARGETS["push_rps"],
        "push_p99_ms": results["push"]["p99_ms"] <= TARGETS["push_p99_ms"],
        "get_rps": results["get"]["rps"] >= TARGETS["get_rps"],
        "get_p99_ms": results["get"]["p99_ms"] <= TARGETS["get_p99_ms"],
    }
    if "bulk" in results:
        checks["import_pps"] = results["bulk"]["import_pps"] >= TARGETS["import_pps"]
        checks["export_pps"] = results["bulk"]["export_pps"] >= TARGETS["export_pps"]
    if "ls" in results:
        checks["ls_ratio"] = results["ls"]["ratio_p50"] <= TARGETS["ls_ratio"]
        checks["rss_mb"] = results["rss_peak_mb"] <= TARGETS["rss_mb"]
    mark = {True: "met", False: "MISSED"}
    where = args.url or (
        f"ltm server run, {args.threads or 'default'} threads,"
        f" sqlite sync: {results['sqlite_sync']}"
    )
    print(f"Server benchmark ({results['machine']}; {where}; {CONNECTIONS} connections)\n")
    print(
        "| workload | requests/s | p50 ms | p90 ms | p99 ms | server CPU/request"
        " | server cores busy | statuses |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for key in ("push", "get", "list"):
        r = results[key]
        cpu = f"{r['server_cpu_us_per_request']} µs" if r["server_cpu_us_per_request"] else "-"
        print(
            f"| {key} | {r['rps']:.0f} | {r['p50_ms']} | {r['p90_ms']} | {r['p99_ms']} |"
            f" {cpu} | {r['server_cores_busy'] or '-'} | {r['statuses']} |"
        )
    if "bulk" in results:
        b = results["bulk"]
        print(
            f"\nltm import of {b['packets']:,} packets: {b['import_seconds']} s"
            f" ({b['import_pps']:,}/s); ltm export: {b['export_seconds']} s"
            f" ({b['export_pps']:,}/s)"
        )
        for name in ("import", "export"):
            server_cpu = b.get(f"{name}_server_cpu_us")
            print(
                f"  {name}, CPU a packet: the command {b[f'{name}_client_cpu_us']} µs"
                + (f", the server {server_cpu} µs" if server_cpu is not None else "")
            )
    if "ls" in results:
        ls_r = results["ls"]
        print(
            f"\nls (GET /v1/packets, 1 connection): {ls_r['small_packets']:,} packets p50"
            f" {ls_r['small_p50_ms']} ms, {ls_r['big_packets']:,} packets p50"
            f" {ls_r['big_p50_ms']} ms, ratio {ls_r['ratio_p50']}"
        )
        print(
            f"server peak RSS: {results['rss_peak_mb']} MB over {results['processes']}"
            f" process(es) (PSS, shared pages counted once: {results['pss_peak_mb']} MB)"
        )
    print("\ntargets: " + ", ".join(f"{k} {mark[v]}" for k, v in checks.items()))
    return 1 if args.check and not all(checks.values()) else 0


def figures(results: dict[str, Any]) -> list[Figure]:
    out = []
    before = results.get("before")
    for key in PHASES:
        r = results[key]
        rps, p99 = TARGETS.get(f"{key}_rps"), TARGETS.get(f"{key}_p99_ms")
        if before:  # the tree before, measured in the same run: ours at least 0.8x of it
            then = f"{key}: requests, the tree before"
            out += [
                Figure(then, before[key]["rps"], "/s", better="higher"),
                Figure(
                    f"{key}: requests",
                    r["rps"],
                    "/s",
                    better="higher",
                    target=rps,
                    baseline=then,
                    ratio=results["ratios"][key],
                    ratio_target=PAIRED_RATIO,
                ),
                Figure(f"{key}: p99, the tree before", before[key]["p99_ms"], "ms"),
            ]
        else:
            out.append(Figure(f"{key}: requests", r["rps"], "/s", better="higher", target=rps))
        out.append(Figure(f"{key}: p99", r["p99_ms"], "ms", target=p99))
        if r["server_cpu_us_per_request"]:
            out.append(Figure(f"{key}: server CPU a request", r["server_cpu_us_per_request"], "µs"))
        if key == "get" and results.get("app_get_us") and r["server_cpu_us_per_request"]:
            served = r["server_cpu_us_per_request"]
            out.append(
                Figure(
                    "get: the app alone (in process), CPU a request",
                    results["app_get_us"],
                    "µs",
                    baseline="get: server CPU a request",
                    ratio=round(results["app_get_us"] / served, 3),
                )
            )
    if b := results.get("bulk"):
        for name in ("import", "export"):
            out.append(
                Figure(
                    f"ltm {name} of {b['packets']:,} packets",
                    b[f"{name}_pps"],
                    "packets/s",
                    better="higher",
                    target=TARGETS[f"{name}_pps"],
                )
            )
    if ls := results.get("ls"):
        small = f"ls p50, {ls['small_packets']:,} packets"
        out += [
            Figure(small, ls["small_p50_ms"], "ms"),
            Figure(
                f"ls p50, {ls['big_packets']:,} packets",
                ls["big_p50_ms"],
                "ms",
                baseline=small,
                ratio=ls["ratio_p50"],
                ratio_target=TARGETS["ls_ratio"],
            ),
            Figure(
                "server peak RSS",
                results["rss_peak_mb"],
                "MB",
                target=TARGETS["rss_mb"],
            ),
        ]
    return out


def server_notes(results: dict[str, Any], args: argparse.Namespace) -> str:
    paired = (
        f"; push, get and list: the median of {args.rounds} alternating pairs of runs with the"
        " tree before (its own defaults), a fresh server each;"
        " each ratio the median of the pairs' ratios"
        if args.before
        else ""
    )
    return (
        f"ltm server run, {args.threads or 'its default'} threads,"
        f" SQLite sync {results['sqlite_sync']};"
        f" {CONNECTIONS} keep-alive connections, {args.seconds:g} s a phase{paired}"
    )


def app_alone(server: Server, requests: int = 3000) -> float:
    """The CPU a GET costs the app alone, in microseconds: the same WSGI app the server
    runs, called in this process on the server's database (no HTTP server, no threads),
    so that the server's own share of a request shows beside it."""
    import io

    from ulid import ULID

    os.environ.update(LTM_STORE="sqlite", LTM_DB=str(server.db))
    from ltm.cli.server.loader import load_app
    from ltm.cli.server.wsgi import ChaliceWSGI

    module = load_app()
    app = ChaliceWSGI(module.app, logger=module.logger)
    token = server.issue("alone")[1]

    def call(method: str, path: str, body: bytes = b"") -> None:
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": str(server.port),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "HTTP_HOST": f"127.0.0.1:{server.port}",
            "HTTP_AUTHORIZATION": f"Bearer {token}",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
        }
        statuses: list[str] = []
        b"".join(app(environ, lambda status, headers, exc=None: statuses.append(status)))
        if not statuses[0].startswith(("200", "201")):
            raise SystemExit(f"the app alone answered {statuses[0]} to {method} {path}")

    ids = [str(ULID()) for _ in range(200)]
    for pid in ids:
        call("POST", "/v1/packets", example_body(pid))
    for n in range(200):  # warm
        call("GET", f"/v1/packets/{ids[n % len(ids)]}")
    started = time.process_time()
    for n in range(requests):
        call("GET", f"/v1/packets/{ids[(n * 7919) % len(ids)]}")
    used = time.process_time() - started
    module.close_store()
    return round(used / requests * 1e6)


def ls_phase(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """``GET /v1/packets`` on one connection at ``--small`` and at ``--big`` packets."""
    small_id, small_token = server.issue("ls-small")
    big_id, big_token = server.issue("ls-big")
    started = time.perf_counter()
    seed(server.db, small_id, args.small)
    seed(server.db, big_id, args.big)
    seeded_s = time.perf_counter() - started
    ls: dict[str, list[float]] = {}
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
    return {
        "small_packets": args.small,
        "big_packets": args.big,
        "seed_seconds": round(seeded_s, 1),
        "small_p50_ms": round(ls_small.pct(0.5), 3),
        "big_p50_ms": round(ls_big.pct(0.5), 3),
        "small_p99_ms": round(ls_small.pct(0.99), 3),
        "big_p99_ms": round(ls_big.pct(0.99), 3),
        "ratio_p50": round(ls_big.pct(0.5) / ls_small.pct(0.5), 3),
    }


if __name__ == "__main__":
    sys.exit(main())
