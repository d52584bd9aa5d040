"""Benchmark the redaction pre-flight (chalicelib/redact.py).

Run: .venv/bin/python bench/bench_redact.py [--runs N] [--baseline OLD_REDACT_PY]

Builds a realistic ~32 KiB packet of engineering prose (no secrets, but the
usual near-misses: relative paths, API routes, versions, public URLs, hashes,
"AWS"/"secret" mentions) and an adversarial ~32 KiB packet made of near-misses
for every rule, then times ``scan_packet`` on each (warm-up, then N runs) and
prints median/p90 against the targets. It also times every adversarial family
as one 32 KiB string (a lenient packet with a huge ``goal``), and user rules
(RE2) that backtrack catastrophically in Python's ``re`` on the 32 KiB input
that makes them do it. Then the labelled corpus (tests/redact_corpus.py):
recall on true secrets of every kind, false positives on this repository's
docs, code and the published example packets, and how many random 40-char
keys the keyword-less AWS-secret rule catches. With ``--baseline``, another
copy of redact.py (e.g. ``git show REV:chalicelib/redact.py > /tmp/old.py``)
is timed on the same packets, interleaved, for a ratio that the load of a
shared machine does not skew. Exit status is 0 whatever the figures; the
numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the labelled corpus

import redact_corpus  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from results import Figure, record  # noqa: E402

from chalicelib.redact import (  # noqa: E402
    BUILTIN_RULES,
    compile_user_rule,
    is_secret_kind,
    scan_packet,
    scan_text,
)

CAP = 32_768
# Wall time by default; --clock cpu times the CPU this process spends
# (CLOCK_PROCESS_CPUTIME_ID), which the other jobs of a shared machine do not add to.
CLOCK = time.perf_counter
# What the run measured, recorded at its end.
FIGURES: list[Figure] = []
TYPICAL_TARGET_MS = 2.0
ADVERSARIAL_TARGET_MS = 10.0

PROSE = [
    "Refactored src/ltm/store/sqlite.py so that writes go through a single connection.",
    "The handler for POST /v1/packets now validates against the v0.2 schema before storing.",
    "Bumped pydantic to 2.7.1 and httpx to 0.27.0; pinned ruff at v0.6.9 in CI.",
    "See https://docs.python.org/3/library/re.html for possessive quantifiers (3.11+).",
    "Commit a1b2c3d fixed the flaky test; the full SHA is in the PR description.",
    "Deployed to AWS Lambda behind API Gateway; secrets live in SSM, never in the packet.",
    "Ran ./scripts/bootstrap.sh then ../tools/lint.sh; both pass on Python 3.11 and 3.12.",
    "GET /v1/packets/{id} returns 404 for packets the caller cannot see, by design.",
    "TCP/IP keep-alive and/or HTTP/2 made no difference to the I/O-bound benchmark.",
    "Release 1.4.0-rc.1 ships on 2025-03-14; the changelog lives in docs/CHANGELOG.md.",
    "The upstream repo is https://github.com/dennisdevulder/ltm and mirrors the spec.",
    "Use Stripe publishable keys (pk_test_...) in the browser only, per their docs.",
    "Ping maintainer@example.com if the schema changes; the team inbox is fine too.",
    "The cache key is the sha256 of the canonical JSON, e.g. sha256:" + "ab12" * 16 + ".",
    "UUID 550e8400-e29b-41d4-a716-446655440000 identifies the fixture tenant in tests.",
    "Throughput went from 1,200 to 4,800 req/s after batching; p99 latency is 38 ms.",
    "The task-runner desk-top flow and the risk-based retry both use a back-off of 2x.",
    "Kept the secret-scanning step in CI: it blocks pushes that contain tokens.",
    "The /healthz probe and /api/users/{id}/teams route are public; the rest need a bearer.",
    "Methods are named in kebab-case, e.g. lead-with-pain or voice-test-read-aloud.",
    "We chose SQLite WAL mode because readers must not block the single writer.",
    "Moved fixtures under tests/fixtures/packets/ and made the loader path-agnostic.",
    "The resume block orders sections for attention: goal first, next step last.",
    "Schemathesis found a 500 on an empty team name; fixed by validating ^[a-z0-9].",
    "Docker image is python:3.11-slim; the entrypoint runs waitress on port 8080 inside.",
    "Decided against Redis: one more moving part for a queue that sees 10 writes a day.",
    "Ratio 16:9 thumbnails, at 10:30 UTC daily; cron expression 30 10 * * *.",
    "The AWS SDK retries throttled calls; we cap attempts at 5 with full jitter.",
    "Secrets rotation is handled by the platform team, see the runbook in docs/ops.md.",
    "Coverage is 94% on chalicelib/ and 88% on cli/; the gap is interactive prompts.",
]

NEAR_MISSES: dict[str, Callable[[int], str]] = {
    # name -> builder of a string of about n chars that matches no rule
    "A-run": lambda n: "A" * n,
    "dashes": lambda n: "-" * n,
    "slashes": lambda n: "/" * n,
    "backslashes": lambda n: "\\" * n,
    "a-colon": lambda n: "a:" * (n // 2),
    "colons": lambda n: ":" * n,
    "eyJ-dots": lambda n: "eyJ" + "a." * ((n - 3) // 2),
    "eyJ-run": lambda n: "eyJ" * (n // 3),
    "sk-run": lambda n: "sk-" * (n // 3),
    "aws-words": lambda n: "aws secret " * (n // 11),
    "b64-41": lambda n: ("aws " + "aB3/" * 10 + "x ") * (n // 46),
    "home-root": lambda n: "/home /Users/ /etc " * (n // 19),
    "home-slash": lambda n: "/home/ " * (n // 7),
    "etc-prose": lambda n: "etc/ and /etc " * (n // 14),
    "tilde": lambda n: "~/" * (n // 2),
    "tilde-dots": lambda n: "~/." * (n // 3),
    "scheme": lambda n: "a://" * (n // 4),
    "url-creds": lambda n: "http://u:" * (n // 9),
    "at-colon": lambda n: ":@" * (n // 2),
    "localhost": lambda n: "localhost:" * (n // 10),
    "ip-dots": lambda n: "127.0.0.1." * (n // 10),
    "ten-dots": lambda n: "10." * (n // 3),
    "AKIA": lambda n: "AKIA" * (n // 4),
    "ghp": lambda n: "ghp_" * (n // 4),
    "xoxb": lambda n: "xoxb-" * (n // 5),
    "BEGIN": lambda n: "-----BEGIN " * (n // 11),
    "ssh": lambda n: "ssh-rsa AAAA " * (n // 13),
    "arn": lambda n: "arn:aws:" * (n // 8),
    "digits": lambda n: "1" * n,
    "drive": lambda n: "C:" * (n // 2),
    "sk_live": lambda n: "sk_live_" * (n // 8),
    "pypi": lambda n: "pypi-Ag" * (n // 7),
    "AIza": lambda n: "AIza" * (n // 4),
    "ipv6": lambda n: "[::1]" * (n // 5),
    # the rules added after an earlier audit
    "password-eq": lambda n: "password=" * (n // 9),
    "secret-colon": lambda n: "secret: x " * (n // 10),
    "api-key-eq": lambda n: "api_key=$K " * (n // 11),
    "conn-semis": lambda n: ";Password=" * (n // 10),
    "authz": lambda n: "Authorization: Bearer " * (n // 22),
    "authz-basic": lambda n: "Authorization: Basic dXNlcg " * (n // 28),
    "b64-40": lambda n: ("aB3/" * 10 + " ") * (n // 41),
    "b64-run": lambda n: "aB3/" * (n // 4),
    "pem-b64": lambda n: "LS0tLS1CRUdJTi" * (n // 14),
    "b64-prose": lambda n: _b64(("Refactored the store; tests pass. " * (n // 45))[: n * 3 // 4]),
    "zero-width": lambda n: "g\u200bh\u00adp_" * (n // 6),
    "full-width": lambda n: "ｇｈｐ＿ａｂ " * (n // 7),
}


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


# User rules that backtrack catastrophically in Python's `re` on their near-miss
# (ltm runs them on RE2): name -> (pattern, a 32 KiB string it does not match).
USER_RULES: dict[str, tuple[str, str]] = {
    "nested-plus": (r"(a+)+$", "a" * (CAP - 1) + "!"),
    "overlapping-plus": (r"(x+x+)+y", "x" * CAP),
    "words-and-spaces": (r"(\w+\s?)+$", "ab " * (CAP // 3) + "!"),
    "alternation": (r"(a|aa)+b", "a" * CAP),
    "dot-star-repeat": (r"(.*a){20}", "a" * 19 + "b" * (CAP - 19)),
}
USER_TARGET_MS = ADVERSARIAL_TARGET_MS


def _fill(rng: random.Random, lo: int, hi: int) -> str:
    target = rng.randint(lo, hi)
    parts: list[str] = []
    size = 0
    while size < target:
        s = rng.choice(PROSE)
        parts.append(s)
        size += len(s) + 1
    return " ".join(parts)[:hi]


def _size(packet: dict[str, Any]) -> int:
    return len(json.dumps(packet, ensure_ascii=False, separators=(",", ":")).encode())


def _skeleton(text: Callable[[int, int], str]) -> dict[str, Any]:
    return {
        "ltm_version": "0.2",
        "id": "01JS5LTMBENCHPACKET000001A",
        "created_at": "2026-04-22T00:00:00Z",
        "parent_id": "01JS5LTMBENCHPACKET000000Z",
        "project": {"name": "ltm-bench", "ref": "github.com/example/ltm-bench"},
        "goal": text(300, 900),
        "success_criteria": [text(100, 400) for _ in range(8)],
        "constraints": [text(100, 400) for _ in range(12)],
        "decisions": [
            {"what": text(80, 300), "why": text(150, 500), "consequences": text(80, 300)}
            for _ in range(10)
        ],
        "methods": [
            {"name": f"method-{i}", "when_applicable": text(80, 300), "how": text(300, 1200)}
            for i in range(5)
        ],
        "attempts": [
            {"tried": text(100, 400), "outcome": "failed", "learned": text(100, 400)}
            for _ in range(10)
        ],
        "open_questions": [text(80, 300) for _ in range(6)],
        "next_step": text(200, 600),
        "tags": ["bench", "redaction", "perf"],
        "provenance": {
            "author_model": "claude-opus-4-7",
            "author_human": "bench",
            "source_hash": "sha256:" + "0123456789abcdef" * 4,
            "confidence": "medium",
        },
    }


def _trim_to_cap(packet: dict[str, Any]) -> dict[str, Any]:
    """Pad or trim the longest prose list so the packet lands just under the cap."""
    while _size(packet) > CAP:
        packet["constraints"].pop()
    return packet


def typical_packet() -> dict[str, Any]:
    rng = random.Random(20250314)
    packet = _skeleton(lambda lo, hi: _fill(rng, lo, hi))
    while _size(packet) < CAP - 1500 and len(packet["constraints"]) < 32:
        packet["constraints"].append(_fill(rng, 300, 1000))
    return _trim_to_cap(packet)


def adversarial_packet() -> dict[str, Any]:
    builders = list(NEAR_MISSES.values())
    counter = iter(range(10**6))

    def text(lo: int, hi: int) -> str:
        # Short strings in the skeleton (escaping can double the JSON size of
        # backslashes), then the constraints fill the packet up to the cap.
        return builders[next(counter) % len(builders)](lo)[:lo]

    packet = _skeleton(text)
    while _size(packet) < CAP - 1100 and len(packet["constraints"]) < 32:
        packet["constraints"].append(text(1000, 1000))
    return _trim_to_cap(packet)


def measure(fn: Callable[[], object], runs: int, warmup: int = 20) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        t0 = CLOCK()
        fn()
        samples.append((CLOCK() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9) - 1]


def corpus_figures() -> None:
    """Recall and false positives on the labelled corpus (tests/redact_corpus.py)."""
    from collections import Counter

    secrets = redact_corpus.secrets()
    missed = [(label, kind) for label, kind, text in secrets if kind not in dict(scan_text(text))]
    kinds = Counter(kind for _, kind, _ in secrets)
    print(
        f"\ncorpus: {len(secrets) - len(missed)}/{len(secrets)} true secrets caught"
        f" ({len(kinds)} kinds); missed: {missed or 'none'}"
    )
    caught_share = 100 * (len(secrets) - len(missed)) / len(secrets)
    FIGURES.append(Figure("corpus: true secrets caught", caught_share, "%", "higher"))
    prose = redact_corpus.prose()
    sources = Counter(source.split("/")[0] if "/" in source else source for source, _ in prose)
    flagged: Counter[str] = Counter()
    paths: Counter[str] = Counter()
    for _source, text in prose:
        found = {kind for kind, _ in scan_text(text)}
        if any(is_secret_kind(k) for k in found):
            flagged["secret"] += 1
        if found and not any(is_secret_kind(k) for k in found):
            paths["path"] += 1
    print(
        f"prose: {len(prose)} units ({dict(sources)}); with a secret-class hit:"
        f" {flagged['secret']}; with path/local-URL hits only (flagged by design): {paths['path']}"
    )
    FIGURES.append(Figure("corpus: prose units with a secret-class hit", flagged["secret"], ""))
    rng = random.Random(7)
    alphabet = redact_corpus.B64
    keys = ["".join(rng.choice(alphabet) for _ in range(40)) for _ in range(5000)]
    caught = sum("aws-secret-key" in dict(scan_text(f"value {k} end")) for k in keys)
    print(
        f"random 40-char base64 keys, no keyword near: {caught}/{len(keys)} caught"
        f" ({caught / len(keys):.2%})"
    )
    FIGURES.append(Figure("random 40-char keys, no keyword: caught", 100 * caught / len(keys), "%"))


def baseline(path: str, runs: int) -> None:
    """The same packets timed against another redact.py, interleaved run by run."""
    import importlib.util

    # A module of the package, so that its relative imports (the rules table,
    # ltm.redact_rules) resolve: the baseline runs the current table.
    import ltm

    name = f"{ltm.__name__}.redact_baseline"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    sys.modules[name] = old
    spec.loader.exec_module(old)
    print(f"\nagainst {path} (interleaved, {runs} runs each):")
    example = json.loads((ROOT / "spec" / "examples" / "example.v0.2.json").read_bytes())
    for name, packet in (
        ("typical", typical_packet()),
        ("adversarial", adversarial_packet()),
        ("example", example),  # the size of a saved packet (2 KB of text)
    ):
        for _ in range(20):
            old.scan_packet(packet)
            scan_packet(packet)
        a: list[float] = []
        b: list[float] = []
        for _ in range(runs):
            t0 = CLOCK()
            old.scan_packet(packet)
            t1 = CLOCK()
            scan_packet(packet)
            t2 = CLOCK()
            a.append((t1 - t0) * 1000)
            b.append((t2 - t1) * 1000)
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"  {name:<12} baseline {ma:.3f} ms, this {mb:.3f} ms: x{mb / ma:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--baseline", metavar="REDACT_PY", help="another redact.py to compare with")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus,"
        f" load average {load}"
    )
    print(
        f"{len(BUILTIN_RULES)} built-in rules; {args.runs} runs after warm-up; {args.clock} clock\n"
    )

    typical = typical_packet()
    adversarial = adversarial_packet()
    rows = []
    for name, packet, target, secrets_only in (
        ("typical", typical, TYPICAL_TARGET_MS, False),
        ("adversarial", adversarial, ADVERSARIAL_TARGET_MS, False),
        # what the server runs on a push: the secret class alone
        ("typ/server", typical, TYPICAL_TARGET_MS, True),
        ("adv/server", adversarial, ADVERSARIAL_TARGET_MS, True),
    ):
        hits = scan_packet(packet, secrets_only=secrets_only)
        med, p90 = measure(
            lambda p=packet, so=secrets_only: scan_packet(p, secrets_only=so), args.runs
        )
        rows.append((name, _size(packet), len(hits), med, p90, target))
    # A process's first scans (and the one scan of ``ltm save``) run without the literal
    # sets, which a process builds once it has scanned a few packets.
    import chalicelib.redact as redact_module  # the module this bench scans with

    sets, redact_module._sets = redact_module._sets, None
    try:
        med, p90 = measure(lambda: scan_packet(typical), args.runs)
    finally:
        redact_module._sets = sets
    rows.append(("typ/no sets", _size(typical), 0, med, p90, TYPICAL_TARGET_MS))
    print(f"{'packet':<12} {'bytes':>6} {'hits':>5} {'median ms':>10} {'p90 ms':>8} {'target':>7}")
    for name, size, nhits, med, p90, target in rows:
        print(
            f"{name:<12} {size:>6} {nhits:>5} {med:>10.3f} {p90:>8.3f} {target:>7.1f}"
            f"  ({med / target:.0%} of target)"
        )
        FIGURES.append(
            Figure(f"{name} ({size:,} bytes, {nhits} hits): median", med, "ms", target=target)
        )

    print("\nadversarial families as one 32 KiB string in `goal` (lenient packet):")
    worst = ("", 0.0)
    for name, build in NEAR_MISSES.items():
        packet = {"goal": build(CAP)[:CAP], "next_step": "x"}
        nhits = len(scan_packet(packet))
        med, _ = measure(lambda p=packet: scan_packet(p), max(20, args.runs // 10), warmup=3)
        worst = max(worst, (name, med), key=lambda w: w[1])
        print(f"  {name:<12} hits={nhits:<3} median {med:6.3f} ms")
    print(f"worst family: {worst[0]} {worst[1]:.3f} ms (target {ADVERSARIAL_TARGET_MS} ms)")
    FIGURES.append(
        Figure(
            f"worst near-miss family as 32 KiB ({worst[0]})",
            worst[1],
            "ms",
            target=ADVERSARIAL_TARGET_MS,
        )
    )

    print("\nuser rules (RE2) on their catastrophic 32 KiB input, one `goal` (lenient packet):")
    runs = max(20, args.runs // 10)
    rules = []
    slowest = ("", 0.0)
    for name, (regex, text) in USER_RULES.items():
        rule = compile_user_rule(name, regex)
        rules.append(rule)
        packet = {"goal": text, "next_step": "."}
        nhits = len(scan_packet(packet, [rule]))
        med, _ = measure(lambda p=packet, r=rule: scan_packet(p, [r]), runs, warmup=3)
        alone, _ = measure(lambda p=packet: scan_packet(p), runs, warmup=3)
        print(
            f"  {name:<17} {regex!r:<16} hits={nhits} median {med:6.3f} ms"
            f" (built-ins alone {alone:.3f} ms; target {USER_TARGET_MS} ms)"
        )
        slowest = max(slowest, (name, med), key=lambda w: w[1])
    FIGURES.append(
        Figure(
            f"slowest user rule on its catastrophic input ({slowest[0]})",
            slowest[1],
            "ms",
            target=USER_TARGET_MS,
        )
    )
    med, p90 = measure(lambda: scan_packet(adversarial, rules), args.runs)
    print(
        f"  the adversarial packet with all {len(rules)} user rules:"
        f" median {med:.3f} ms, p90 {p90:.3f} ms"
    )
    FIGURES.append(Figure(f"adversarial with all {len(rules)} user rules: median", med, "ms"))

    # RE2 makes each search linear, but listing every match of a pattern is not:
    # when each match needs a look to the end of the text to be chosen (x*y|x on
    # x...x), that is n searches of up to n. So a user rule stops after USER_HITS
    # hits per field (ltm.redact); these two show what that bound costs.
    for label, regex, text in (
        ("user-rule hit flood ('a' on 32 KiB of 'a')", "a", "a" * CAP),
        ("user-rule quadratic listing ('x*y|x' on 32 KiB of 'x')", "x*y|x", "x" * CAP),
    ):
        packet = {"goal": text, "next_step": "."}
        rule = compile_user_rule("record", regex)
        nhits = len(scan_packet(packet, [rule]))
        med, _ = measure(lambda p=packet, r=rule: scan_packet(p, [r]), 5, warmup=1)
        print(f"\n{label}: {nhits} hits, median {med:.1f} ms")

    # Not a target, for the record: a packet that is nothing but real hits costs
    # per hit (field mapping, sorting, Hit objects), not per byte.
    flood = {"goal": "/home/a " * (CAP // 8), "next_step": "x"}
    nhits = len(scan_packet(flood))
    med, _ = measure(lambda: scan_packet(flood), max(20, args.runs // 10), warmup=3)
    print(f"\nhit flood (32 KiB of '/home/a '): {nhits} hits, median {med:.3f} ms")
    FIGURES.append(Figure(f"hit flood (32 KiB of '/home/a ', {nhits:,} hits)", med, "ms"))

    corpus_figures()
    if args.baseline:
        baseline(args.baseline, args.runs)
    record("redact", FIGURES, notes=[f"{args.clock} clock; {args.runs} runs after warm-up"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
