"""Recall at the prompt (``ltm hook user-prompt``): how often its hint is right, and
how long it takes.

    .venv/bin/python bench/bench_recall.py --precision        # quick, in-process
    .venv/bin/python bench/bench_recall.py [--runs N] [--packets N] [--installed]

Precision: the packets and prompts of ``bench/recall_corpus.json`` (one project's
work, the packet a person would have wanted named for each prompt, or none for
prompts about nothing saved). Each prompt runs recall in a fresh session against a
local store holding those packets; reported: precision (hints that point at the
wanted packet / hints given), coverage (right hints / prompts that want one) and
false hints (hints on prompts that want none).

Latency: ``ltm hook user-prompt`` as Claude Code runs it (its UserPromptSubmit JSON
on stdin, in the project's folder), against a local store of ``--packets`` packets
(default 10,000: the corpus's packets again and again under new ids, all of one
project, so the searches go through a large project), each prompt of the corpus in
turn, a fresh session each run; p50 and p99. Target: p50 <= 60 ms, p99 <= 150 ms.
Then against a server that accepts connections and never answers: the hook must
have given up (an empty answer, exit 0) within 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, machine, run_installed_if_asked, user_env
from results import Figure, record

FIGURES: list[Figure] = []  # what each part measured, recorded at the end

CORPUS = Path(__file__).with_name("recall_corpus.json")


def load_corpus() -> dict[str, Any]:
    return json.loads(CORPUS.read_text(encoding="utf-8"))


def packet_of(item: dict[str, Any], project: str, n: int = 0) -> dict[str, Any]:
    """A complete packet of the corpus item (a fresh id, now as its time)."""
    from datetime import UTC, datetime

    from ulid import ULID

    data = {k: v for k, v in item.items() if k != "key"}
    if n:
        data["goal"] = f"{data['goal']} (round {n})"
    return {
        "ltm_version": "0.2",
        "id": str(ULID()),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **data,
        "project": {"name": project},
    }


def fill(env: dict[str, str], corpus: dict[str, Any], count: int) -> dict[str, str]:
    """Store the corpus's packets (then copies up to ``count``) through the service's
    push, so the search index is the one ``ltm save`` keeps; {key: id} of the originals."""
    os.environ.update(env)
    from ltm.cli.client.backend import LocalBackend

    backend = LocalBackend.open()
    keys: dict[str, str] = {}
    try:
        items = corpus["packets"]
        copies = max(count - len(items), 0)
        for n in range(copies):  # the copies first: the corpus's own packets are the newest
            item = items[n % len(items)]
            backend.push(packet_of(item, corpus["project"], n // len(items) + 1))
        for item in items:
            keys[item["key"]] = backend.push(packet_of(item, corpus["project"])).id
    finally:
        backend.close()
    return keys


def tally_hints(
    backend: Any, corpus: dict[str, Any], names: dict[str, str], *, show: bool = False
) -> tuple[int, int, int, int]:
    """The prompt hook's pick for each of the corpus's prompts, as (hints given, right
    hints, hints on prompts that want none, prompts that want a packet)."""
    from ltm.cli.agents.recall import best

    hints = right = false_hints = wanted = 0
    for case in corpus["prompts"]:
        text = case.get("text") or case["prompt"]
        found = best(backend, corpus["project"], text, skip=set())
        got = names.get(found["id"]) if found else None
        wanted += case["want"] is not None
        if found is not None:
            hints += 1
            right += got == case["want"]
            false_hints += case["want"] is None
        if show:
            mark = "ok " if got == case["want"] else "MISS" if got is None else "BAD "
            print(f"  {mark} {text[:60]:60} -> {got} (want {case['want']})")
    return hints, right, false_hints, wanted


def precision(env: dict[str, str]) -> None:
    from ltm.cli.client.backend import LocalBackend

    corpus = load_corpus()
    keys = fill(env, corpus, len(corpus["packets"]))
    names = {v: k for k, v in keys.items()}
    backend = LocalBackend.open()
    try:
        hints, right, false_hints, wanted = tally_hints(backend, corpus, names, show=True)
    finally:
        backend.close()
    print()
    print(f"prompts: {len(corpus['prompts'])} ({wanted} want a packet)")
    print(f"precision: {right}/{hints} = {right / max(hints, 1):.0%} of the hints are right")
    print(f"coverage: {right}/{wanted} = {right / max(wanted, 1):.0%} of the wanted packets")
    print(f"false hints on prompts that want none: {false_hints}")
    FIGURES.extend(
        [
            Figure("precision: hints that are right", 100 * right / max(hints, 1), "%", "higher"),
            Figure("coverage: wanted packets hinted", 100 * right / max(wanted, 1), "%", "higher"),
            Figure("false hints on prompts that want none", false_hints, ""),
        ]
    )


def meaning_installed() -> bool:
    from ltm import semantic

    return semantic.installed()


def run_hook(env: dict[str, str], cwd: Path, prompt: str, session: str) -> tuple[float, bytes]:
    payload = {
        "session_id": session,
        "transcript_path": str(cwd / "t.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }
    started = time.perf_counter()
    out = subprocess.run(
        [LTM, "hook", "user-prompt"],
        input=json.dumps(payload).encode(),
        env=env,
        capture_output=True,
        check=True,
        cwd=cwd,
    )
    return time.perf_counter() - started, out.stdout


def latency(env: dict[str, str], runs: int, packets: int, tmp: Path) -> None:
    corpus = load_corpus()
    started = time.perf_counter()
    fill(env, corpus, packets)
    print(f"filled {packets} packets in {time.perf_counter() - started:.1f} s")
    folder = tmp / "shop"  # the project comes from the packets, the folder only runs it
    folder.mkdir()
    env = {**env, "LTM_STATE_DIR": str(tmp / "state")}
    prompts = [case["prompt"] for case in corpus["prompts"]]
    for i in range(3):  # warm-up
        run_hook(env, folder, prompts[i], f"warm-{i}")
    what = f"hook user-prompt, {packets:,} packets"
    words_alone = None
    if meaning_installed():
        # The same prompts with meaning off, interleaved, so both see the same load.
        words_alone = {**env, "LTM_SEMANTIC": "0"}
    times: list[float] = []
    alone: list[float] = []
    hinted = 0
    for n in range(runs):
        took, out = run_hook(env, folder, prompts[n % len(prompts)], f"run-{n}")
        times.append(took)
        hinted += bool(out.strip())
        if words_alone is not None:
            alone.append(run_hook(words_alone, folder, prompts[n % len(prompts)], f"w-{n}")[0])
    times.sort()
    p50 = statistics.median(times) * 1000
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))] * 1000
    print(f"ltm hook user-prompt, local store of {packets} packets, {runs} runs ({hinted} hints)")
    print(f"  p50 {p50:.1f} ms (target <= 60), p99 {p99:.1f} ms (target <= 150)")
    if alone:
        base = statistics.median(alone) * 1000
        name = f"{what}, words alone (LTM_SEMANTIC=0): p50 of {runs}"
        print(f"  words alone: p50 {base:.1f} ms")
        FIGURES.append(Figure(name, base, "ms"))
        FIGURES.append(
            Figure(f"{what}: p50 of {runs}", p50, "ms", target=60, baseline=name, ratio=p50 / base)
        )
    else:
        FIGURES.append(Figure(f"{what}: p50 of {runs}", p50, "ms", target=60))
    FIGURES.append(Figure(f"{what}: p99 of {runs}", p99, "ms", target=150))

    with socket.socket() as sock:  # accepts connections, never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        silent = {**env, "LTM_HOST": url, "LTM_TOKEN": "t" * 40}
        worst = 0.0
        for n in range(10):
            took, out = run_hook(silent, folder, prompts[n], f"silent-{n}")
            assert not out.strip(), out
            worst = max(worst, took)
    print(f"  against a server that never answers: empty answers, slowest {worst * 1000:.0f} ms"
          " (target <= 500)")  # fmt: skip
    FIGURES.append(
        Figure(
            "hook against a server that never answers: slowest of 10",
            worst * 1000,
            "ms",
            target=500,
        )
    )


def main() -> None:
    run_installed_if_asked()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", action="store_true", help="only the precision part")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--packets", type=int, default=10_000)
    parser.add_argument("--installed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        env = {
            **user_env(),
            "LTM_CONFIG_DIR": str(tmp / "config"),
            "LTM_DATA_DIR": str(tmp / "data"),
            "HOME": str(tmp),
        }
        # Precision on the corpus alone, in a store of its own; latency (unless only
        # precision is asked for) on the corpus grown to --packets.
        alone = tmp / "precision"
        precision({**env, "LTM_CONFIG_DIR": str(alone / "config"), "LTM_DATA_DIR": str(alone)})
        if not args.precision:
            latency(env, args.runs, args.packets, tmp)
    record("recall", FIGURES)


if __name__ == "__main__":
    main()
