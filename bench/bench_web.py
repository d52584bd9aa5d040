"""Benchmark the web view: time to first byte of the packet list, 1,000 vs 100,000 packets.

Run: .venv/bin/python bench/bench_web.py [--small N] [--big N] [--requests R]

Against one real ``ltm server run`` subprocess on 127.0.0.1 (the server of
bench_server.py): two users' personal scopes are seeded through the store,
each user signs in through the web view's own sign-in form, then one
keep-alive connection asks for ``GET /web`` (the 50 newest, as HTML) R times
per scope, the two scopes interleaved in rounds. Time to first byte is from
the last byte of the request sent to the first byte of the answer read.
Prints the medians, the 90th percentiles, their ratio (target: p50 within
1.3x) and the page's size.
"""

from __future__ import annotations

import argparse
import re
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import Server, seed
from common import machine
from results import Figure, record

TARGET_RATIO = 1.3


def web_cookie(port: int, token: str) -> str:
    """Sign in through the form; the session cookie's ``name=value``."""
    import httpx

    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=False)
    form = client.get("/web/signin").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf is not None
    answer = client.post("/web/signin", data={"csrf": csrf.group(1), "token": token})
    assert answer.status_code == 303, answer.text
    return answer.headers["set-cookie"].split(";", 1)[0]


def ttfb(sock: socket.socket, request: bytes) -> tuple[float, int]:
    """Seconds to the first byte of the answer, and the body's size (reads it all)."""
    sock.sendall(request)
    started = time.perf_counter()
    data = sock.recv(65536)
    first = time.perf_counter() - started
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    found = re.search(rb"(?i)content-length: (\d+)", head)
    assert found is not None, head
    length = int(found.group(1))
    while len(body) < length:
        body += sock.recv(65536)
    return first, length


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300, help="per scope, after warm-up")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        # With an external URL the pages answer where the API does (on loopback they would
        # have a *.localhost name of their own): the same pages, at the port measured.
        server = Server(Path(tmp), threads=4, extra=("--external-url", "http://127.0.0.1"))
        try:
            small_id, small_token = server.issue("web-small")
            big_id, big_token = server.issue("web-big")
            started = time.perf_counter()
            seed(server.db, small_id, args.small)
            seed(server.db, big_id, args.big)
            seeded = time.perf_counter() - started
            times: dict[str, list[float]] = {"small": [], "big": []}
            sizes: dict[str, int] = {}
            sockets = {}
            requests = {}
            for label, token in (("small", small_token), ("big", big_token)):
                cookie = web_cookie(server.port, token)
                requests[label] = (
                    f"GET /web HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nCookie: {cookie}\r\n"
                    "Accept: text/html\r\n\r\n"
                ).encode()
                sock = socket.create_connection(("127.0.0.1", server.port))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sockets[label] = sock
                for _ in range(20):  # warm-up
                    ttfb(sock, requests[label])
            rounds = 10
            for _ in range(rounds):
                for label in ("small", "big"):
                    for _ in range(args.requests // rounds):
                        first, size = ttfb(sockets[label], requests[label])
                        times[label].append(first)
                        sizes[label] = size
        finally:
            server.stop()

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    small_p50 = statistics.median(times["small"]) * 1000
    big_p50 = statistics.median(times["big"]) * 1000
    ratio = big_p50 / small_p50
    print(f"machine: {machine()}; seeded {args.small:,} + {args.big:,} packets in {seeded:.0f} s")
    print("| scope | requests | TTFB p50 ms | TTFB p90 ms | page bytes |")
    print("|---|---:|---:|---:|---:|")
    for label, count in (("small", args.small), ("big", args.big)):
        p50 = statistics.median(times[label]) * 1000
        print(
            f"| {count:,} packets | {len(times[label])} | {p50:.2f}"
            f" | {pct(times[label], 0.9):.2f} | {sizes[label]:,} |"
        )
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(f"p50 ratio {ratio:.2f} (target <= {TARGET_RATIO}: {verdict})")
    small = f"GET /web, {args.small:,} packets: TTFB p50"
    record(
        "web",
        [
            Figure(small, small_p50, "ms"),
            Figure(
                f"GET /web, {args.big:,} packets: TTFB p50",
                big_p50,
                "ms",
                baseline=small,
                ratio=ratio,
                ratio_target=TARGET_RATIO,
            ),
            Figure(f"GET /web, {args.big:,} packets: TTFB p90", pct(times["big"], 0.9), "ms"),
            Figure("page size", sizes["big"], "bytes"),
        ],
        notes=[f"{len(times['big'])} requests a scope on one keep-alive connection"],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
