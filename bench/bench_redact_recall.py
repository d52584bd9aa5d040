"""Recall per credential format, and false positives on ~3 MB of engineering prose.

Run: .venv/bin/python bench/bench_redact_recall.py [--seeds N] [--markdown]

Recall: the labelled formats of tests/redact_corpus.py (``formats()``: every
format a security review found missing, and the others gitleaks and detect-secrets know,
each in several shapes: .env, JSON, YAML, shell, code, prose, quoted), drawn
with N seeds (fresh random keys each). A sample counts as caught when the
client's scan reports its kind; the server's scan (``secrets_only``) is
counted too. False positives: bench/prose_corpus.py's paragraphs (the
standard library's docstrings and comments, this project's docs, the
hand-written near misses); a paragraph with a secret-class hit is a false
positive. Path and local-URL hits are counted apart (the pre-flight flags
them by design; the server does not look for them). Exit status 0 always.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import prose_corpus  # noqa: E402
import redact_corpus  # noqa: E402
from results import Figure, record  # noqa: E402

from chalicelib.redact import is_secret_kind, scan_packet, scan_text  # noqa: E402


def recall(seeds: int) -> tuple[Counter[str], Counter[str], Counter[str], list[str]]:
    total: Counter[str] = Counter()
    caught: Counter[str] = Counter()
    server: Counter[str] = Counter()
    missed: list[str] = []
    for seed in range(22, 22 + seeds):
        for fmt, kind, text in redact_corpus.formats(seed):
            total[fmt] += 1
            if kind in {k for k, _ in scan_text(text)}:
                caught[fmt] += 1
            else:
                missed.append(f"{fmt}: {text[:60]!r}")
            if scan_packet({"goal": text}, secrets_only=True):
                server[fmt] += 1
    return total, caught, server, missed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--markdown", action="store_true", help="print the per-format table")
    args = ap.parse_args()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus,"
        f" load average {load}"
    )

    total, caught, server, missed = recall(args.seeds)
    n, c = sum(total.values()), sum(caught.values())
    print(f"\nrecall: {c}/{n} samples ({c / n:.2%}) in {len(total)} formats, {args.seeds} seeds")
    print(f"server's scan (secret class): {sum(server.values())}/{n} samples with a hit")
    worst = min(total, key=lambda f: caught[f] / total[f])
    print(f"lowest format: {worst} {caught[worst]}/{total[worst]}")
    for line in missed[:20]:
        print("  missed", line)
    if args.markdown:
        print("\n| format | samples | caught | server's scan |\n|---|---:|---:|---:|")
        for fmt in total:
            print(f"| {fmt} | {total[fmt]} | {caught[fmt]} | {server[fmt]} |")

    units = prose_corpus.units()
    size = sum(len(t.encode()) for _, t in units)
    t0 = time.process_time()
    secret_hits: list[tuple[str, str, str]] = []
    other = Counter[str]()
    for source, text in units:
        for kind, shown in scan_text(text):
            if is_secret_kind(kind):
                secret_hits.append((source, kind, shown))
            else:
                other[kind] += 1
    elapsed = time.process_time() - t0
    print(
        f"\nprose: {len(units):,} paragraphs, {size:,} bytes; scanned in {elapsed:.2f} s CPU"
        f" ({size / elapsed / 1e6:.1f} MB/s)"
    )
    print(f"false positives (paragraphs with a secret-class hit): {len(secret_hits)}")
    for source, kind, shown in secret_hits[:20]:
        print(f"  {source}: {kind}: {shown}")
    print(f"path and local-URL hits (flagged by design, not secrets): {dict(other)}")
    record(
        "redact_recall",
        [
            Figure(f"recall: samples caught ({len(total)} formats)", 100 * c / n, "%", "higher"),
            Figure(
                "the server's scan: samples with a hit",
                100 * sum(server.values()) / n,
                "%",
                "higher",
            ),
            Figure(f"lowest format ({worst})", 100 * caught[worst] / total[worst], "%", "higher"),
            Figure(
                f"prose: paragraphs with a secret-class hit (of {len(units):,})",
                len(secret_hits),
                "",
            ),
            Figure("prose: scan speed (CPU)", size / elapsed / 1e6, "MB/s", "higher"),
        ],
        notes=[f"{n:,} samples: {args.seeds} seeds; {size / 1e6:.1f} MB of prose"],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
