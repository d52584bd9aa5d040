"""Benchmark remote MCP: ``/mcp`` over HTTP on ``ltm server run``, and its cost on Lambda.

Run: .venv/bin/python bench/bench_mcp_http.py [--packets N] [--requests R]

1. Self-hosted: one ``ltm server run`` (SQLite) on loopback, N (default 10,000)
   packets of ``corpus.py`` in one user's scope (as pushes write them, search
   index included); the user's ltm token in a header (what a client configured
   by hand sends; an OAuth token is checked the same way). On one keep-alive
   connection: R ``tools/list`` calls, then R ``tools/call search`` calls
   cycling through ``corpus.QUERIES``; p50 / p99 each. Also the first answer
   of a fresh server (its worker imports the MCP SDK then).
2. Lambda: in fresh interpreters, ``import app`` then the first ``/mcp``
   ``tools/list`` through the Chalice handler (the SDK loaded on that request),
   and the next one (warm), against ``import app`` then ``/v1/healthz``;
   medians of --runs.

Targets (self-hosted): tools/list p50 <= 20 ms, search p50 <= 30 ms.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
from bench_search import seed_sqlite
from bench_server import Server, load
from common import machine, user_env
from results import Figure, record

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"tools_list_p50_ms": 20.0, "search_p50_ms": 30.0}


def mcp_request(token: str, message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\n"
        "Mcp-Protocol-Version: 2025-06-18\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def tools_list(token: str) -> bytes:
    return mcp_request(token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})


def search(token: str, query: str) -> bytes:
    call = {"name": "search", "arguments": {"query": query, "limit": 10}}
    return mcp_request(token, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})


def self_hosted(packets: int, requests: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), threads=4)
        try:
            user_id, token = server.issue("mcp-bench")
            seed_sqlite(server.db, user_id, packets)
            first = load("first", server, iter([tools_list(token)]), seconds=60, connections=1)
            load("warm", server, iter([tools_list(token)] * 20), seconds=60, connections=1)
            listed = load(
                "tools/list",
                server,
                iter([tools_list(token)] * requests),
                seconds=300,
                connections=1,
            )
            queries = itertools.cycle(corpus.QUERIES)
            found = load(
                "search",
                server,
                iter([search(token, next(queries)) for _ in range(requests)]),
                seconds=300,
                connections=1,
            )
        finally:
            server.stop()
    assert set(listed.statuses) == {200} and set(found.statuses) == {200}, (
        listed.statuses,
        found.statuses,
    )
    return {
        "packets": packets,
        "first_answer_ms": round(first.pct(0.5), 1),
        "tools_list_p50_ms": round(listed.pct(0.5), 2),
        "tools_list_p99_ms": round(listed.pct(0.99), 2),
        "search_p50_ms": round(found.pct(0.5), 2),
        "search_p99_ms": round(found.pct(0.99), 2),
    }


LAMBDA = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
started = time.perf_counter()
import app
from chalice.test import Client
imported = time.perf_counter()
from ltm.service import tokens
token = tokens.issue(app.get_store(), "lambda-bench")[1]
headers = {{"Authorization": "Bearer " + token, "Accept": "application/json, text/event-stream",
           "Mcp-Protocol-Version": "2025-06-18", "Content-Type": "application/json"}}
body = json.dumps({{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}).encode()
with Client(app.app) as client:
    t0 = time.perf_counter()
    if {mcp}:
        r = client.http.post("/mcp", headers=headers, body=body)
    else:
        r = client.http.get("/v1/healthz")
    t1 = time.perf_counter()
    assert r.status_code == 200, r.body
    if {mcp}:
        client.http.post("/mcp", headers=headers, body=body)
    t2 = time.perf_counter()
print(json.dumps({{"import": imported - started, "first": t1 - t0, "warm": t2 - t1}}))
"""


def lambda_costs(runs: int) -> dict[str, object]:
    out: dict[str, list[float]] = {"import": [], "healthz": [], "mcp_cold": [], "mcp_warm": []}
    for _ in range(runs):
        for mcp in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                env = {"LTM_STORE": "sqlite", "LTM_DB": str(Path(tmp) / "s.db")}
                code = LAMBDA.format(root=str(ROOT), mcp=mcp)
                done = subprocess.run(
                    [sys.executable, "-c", code],
                    capture_output=True,
                    text=True,
                    env={**_env(), **env},
                    cwd=ROOT,
                    timeout=120,
                )
                assert done.returncode == 0, done.stderr
                got = json.loads(done.stdout.strip().splitlines()[-1])
                out["import"].append(got["import"])
                if mcp:
                    out["mcp_cold"].append(got["first"])
                    out["mcp_warm"].append(got["warm"])
                else:
                    out["healthz"].append(got["first"])
    return {k + "_ms": round(statistics.median(v) * 1000, 1) for k, v in out.items()}


def _env() -> dict[str, str]:
    return user_env()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--packets", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    started = time.time()
    hosted = self_hosted(args.packets, args.requests)
    aws = lambda_costs(args.runs)
    print(json.dumps({"machine": machine(), "self_hosted": hosted, "lambda": aws}, indent=2))
    met = all(hosted[k] <= v for k, v in TARGETS.items())  # type: ignore[operator]
    hosted_rows = ("tools_list_p50_ms", "tools_list_p99_ms", "search_p50_ms", "search_p99_ms")
    lambda_rows = {
        "import_ms": "Lambda: import app",
        "healthz_ms": "Lambda: then GET /v1/healthz",
        "mcp_cold_ms": "Lambda: then the first /mcp tools/list",
        "mcp_warm_ms": "Lambda: the next /mcp tools/list",
    }
    record(
        "mcp_http",
        [
            Figure("self-hosted: a fresh server's first answer", hosted["first_answer_ms"], "ms"),
            *(
                Figure(
                    "self-hosted: " + name.removesuffix("_ms").replace("_", " "),
                    hosted[name],
                    "ms",
                    target=TARGETS.get(name),
                )
                for name in hosted_rows
            ),
            *(Figure(label, aws[key], "ms") for key, label in lambda_rows.items()),
        ],
        notes=[f"self-hosted: {args.packets:,} packets, {args.requests} requests of each"],
    )
    print(f"targets {'met' if met else 'NOT met'} ({time.time() - started:.0f} s)", file=sys.stderr)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
