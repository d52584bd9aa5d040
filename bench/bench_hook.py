"""``ltm hook session-start`` and ``ltm hook user-prompt`` latency, as a harness runs them.

    .venv/bin/python bench/bench_hook.py [--runs N] [--installed]

A project folder ``ltm-example`` whose packets are the reference example and
15 more (so the index is full); Claude Code's SessionStart JSON on stdin.
Timed against the embedded local store and against ``ltm server run`` on
loopback (signed in with ``ltm auth``); each run times ``python -c pass`` and
the hook back to back, and the ratio is the median of the per-run ratios.
The prompt hook gets Claude Code's UserPromptSubmit JSON with a prompt that
recalls the example (a search of the project's packets, a hint injected), each
run in a session of its own. Target for both: median <= 100 ms and <= 3x
``python -c pass``. Also printed:
the injected size of the reference example alone, and with a full index.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_cli_remote import start_server
from common import LTM, machine, paired, per_run_ratio, run_installed_if_asked, sign_in, user_env
from results import Figure, record

OTHERS = 15


PROMPT = "Let's make the email.md copywriting exciting enough to forward to a teammate"
_sessions = iter(range(10**9))


def run_hook(env: dict[str, str], cwd: Path, event: str = "session-start") -> str:
    payload: dict[str, str] = {
        "session_id": "bench",
        "transcript_path": str(cwd / "t.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    if event == "user-prompt":
        # A session of its own each run: recall names a packet once per session.
        payload |= {"hook_event_name": "UserPromptSubmit", "prompt": PROMPT}
        payload["session_id"] = f"bench-{next(_sessions)}"
        del payload["source"]
    out = subprocess.run(
        [LTM, "hook", event],
        input=json.dumps(payload).encode(),
        env=env,
        capture_output=True,
        check=True,
        cwd=cwd,
    )
    return out.stdout.decode()


def injected(env: dict[str, str], cwd: Path) -> int:
    answer = json.loads(run_hook(env, cwd))
    return len(answer["hookSpecificOutput"]["additionalContext"])


def timed(
    env: dict[str, str], cwd: Path, runs: int, event: str = "session-start"
) -> tuple[list[float], list[float]]:
    return paired(lambda: run_hook(env, cwd, event), runs=runs)


def save(env: dict[str, str], cwd: Path, packet: dict) -> None:
    subprocess.run(
        [LTM, "save"],
        input=json.dumps(packet).encode(),
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def fill(env: dict[str, str], cwd: Path, example: dict, *, others: int) -> None:
    for n in range(others):
        save(env, cwd, {"goal": f"Earlier work item {n} on the example", "next_step": "go on"})
    save(env, cwd, {**example, "created_at": "2099-01-01T00:00:00Z"})  # the newest


def report(name: str, bare: list[float], hook: list[float]) -> Figure:
    ratio = per_run_ratio(bare, hook)
    ms = statistics.median(hook) * 1000
    return Figure(name, ms, "ms", target=100, baseline=BARE, ratio=ratio, ratio_target=3)


BARE = "python -c pass"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--installed", action="store_true", help="as users install ltm")
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    example = json.loads(subprocess.run([LTM, "example"], capture_output=True, check=True).stdout)
    example.pop("id", None)  # the example to copy from carries none
    example["project"] = {"name": "ltm-example"}
    # No LTM_* or XDG_* folders: each case has a HOME of its own, so the hook finds its
    # config, store and state where a user's would be (~/.config, ~/.local/share, ...).
    base = user_env("XDG_")
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        project = tmp / "ltm-example"
        project.mkdir()
        local = {**base, "HOME": str(tmp / "local-home")}
        save(local, project, example)
        alone = injected(local, project)
        fill(local, project, example, others=OTHERS)
        with_index = injected(local, project)
        bare, hook = timed(local, project, runs)
        bare_all = list(bare)
        rows.append(report("hook session-start, local store", bare, hook))
        hinted = run_hook(local, project, "user-prompt")
        assert "additionalContext" in hinted, f"the prompt recalls no packet: {hinted!r}"
        bare, hook = timed(local, project, runs, "user-prompt")
        bare_all += bare
        rows.append(report("hook user-prompt, local store", bare, hook))

        remote = {**base, "HOME": str(tmp / "remote-home")}
        proc, url, root = start_server(tmp, base)
        try:
            sign_in(url, root, remote)
            fill(remote, project, example, others=OTHERS)
            bare, hook = timed(remote, project, runs)
            bare_all += bare
            rows.append(report("hook session-start, local server", bare, hook))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
    print(f"machine: {machine()}; {runs} interleaved runs per case, medians (2 warm-up runs)")
    print(f"{'what':<44} {'median ms':>10} {'x bare':>8}")
    print(f"{'python -c pass':<44} {statistics.median(bare_all) * 1000:>10.1f} {1:>8.2f}")
    for f in rows:
        print(f"{f.name:<44} {f.value:>10.1f} {f.ratio:>8.2f}")
    print(f"injected, the reference example alone: {alone:,} characters")
    print(f"injected, the example + an index of 10 others: {with_index:,} characters")
    print("x bare: the median of the per-run ratios")
    record(
        "hook",
        [
            Figure(BARE, statistics.median(bare_all) * 1000, "ms"),
            *rows,
            Figure("injected, the reference example alone", alone, "characters"),
            Figure("injected, the example + an index of 10 others", with_index, "characters"),
        ],
        notes=["x: the median of per-run ratios, each run timing python -c pass and the hook"],
    )


if __name__ == "__main__":
    run_installed_if_asked()
    main()
