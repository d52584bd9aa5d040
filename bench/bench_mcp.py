"""The MCP shim's start-up, as a ratio to a bare interpreter start.

    .venv/bin/python bench/bench_mcp.py [--runs N] [--installed]

One run spawns ``ltm mcp`` and speaks raw JSON-RPC on its pipes, as an MCP
client does when it starts a session: ``initialize``, then
``notifications/initialized`` and ``tools/list``; the clock stops when the
tool list arrives (and, separately, when the shim has exited after stdin is
closed). Each run starts three sessions: by default with the warm process
(``ltm.cli.agents.mcp.warm``) up, as every session after a user's first one finds it;
by default with no warm process yet (a first session, which starts one); and
with ``LTM_MCP_WARM=0``, the shim importing the SDK itself. Also measured: one
``tools/call`` round trip inside a live session (``ls``, ``save``, ``resume`` on
the embedded store, which holds ``--packets`` packets of ``bench/corpus.py``
first, search index included: 20,000 by default), what importing the MCP
SDK alone costs, and the warm process's resident memory between sessions beside
a bare interpreter's (what keeping the SDK loaded costs a user; Linux /proc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, machine, median_ms, run_installed_if_asked, user_env
from results import Figure, record

SDK_IMPORT = "import mcp.server.lowlevel, mcp.server.stdio"

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
PACKET = {
    "goal": "Make the login test stop flaking on CI",
    "decisions": [{"what": "Keep pytest", "why": "the team knows it", "locked": True}],
    "attempts": [{"tried": "Raised the timeout", "outcome": "failed", "learned": "not timing"}],
    "next_step": "Run the test with -p no:randomly and read the first failure",
}


def send(pipe: IO[str], message: dict[str, Any]) -> None:
    pipe.write(json.dumps(message) + "\n")
    pipe.flush()


def receive(pipe: IO[str]) -> dict[str, Any]:
    line = pipe.readline()
    if not line:
        raise RuntimeError("ltm mcp closed stdout")
    return json.loads(line)


def spawn(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [LTM, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )


def handshake(proc: subprocess.Popen[str]) -> tuple[float, float]:
    """Seconds from spawn to the initialize reply and to the tool list (clock started by caller)."""
    assert proc.stdin is not None and proc.stdout is not None
    send(proc.stdin, INITIALIZE)
    reply = receive(proc.stdout)
    assert reply["result"]["serverInfo"]["name"] == "ltm", reply
    initialized = time.perf_counter()
    send(proc.stdin, INITIALIZED)
    send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = receive(proc.stdout)
    names = {tool["name"] for tool in tools["result"]["tools"]}
    assert {"save", "resume", "search", "ls"} <= names, sorted(names)
    return initialized, time.perf_counter()


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def session(env: dict[str, str]) -> tuple[float, float, float]:
    """One session start: seconds from spawn to the initialize reply, to the tool list,
    and to the shim's exit once stdin is closed."""
    start = time.perf_counter()
    proc = spawn(env)
    initialized, listed = handshake(proc)
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    return initialized - start, listed - start, time.perf_counter() - start


def start_up(
    envs: dict[str, dict[str, str]], first: dict[str, str], runs: int
) -> dict[str, list[float]]:
    """Interleaved: each run times the bare interpreter, the SDK import and one session
    start of each kind, so a busy machine slows all alike and the per-run ratios stay
    comparable. ``first`` is the default with a state dir of its own each run: no warm
    process yet (a user's first session after 30 idle minutes), which starts one."""
    out: dict[str, list[float]] = {"bare": [], "sdk": []}
    for i in range(runs + 2):  # two warm-up runs
        row = {
            "bare": timed([sys.executable, "-c", "pass"], first),
            "sdk": timed([sys.executable, "-c", SDK_IMPORT], first),
        }
        for kind, env in envs.items():
            row[f"{kind} initialize"], row[f"{kind} tools/list"], row[f"{kind} exit"] = session(env)
        state = Path(first["LTM_STATE_DIR"]) / f"run-{i}"
        row["first tools/list"] = session({**first, "LTM_STATE_DIR": str(state)})[1]
        stop_warm(state, wait=True)
        if i >= 2:
            for key, value in row.items():
                out.setdefault(key, []).append(value)
    return out


def stop_warm(state: Path, *, wait: bool = False) -> None:
    """End the warm process(es) started with this state dir (waiting for it to appear)."""
    deadline = time.monotonic() + (30 if wait else 0)
    while True:
        pids = [f.read_text().strip() for f in state.glob("mcp-*.pid")]
        if (pids and all(pids)) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for pid in filter(None, pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGTERM)


def calls(env: dict[str, str], runs: int, packets: int) -> dict[str, list[float]]:
    """Round trips of tools/call inside one live session, on a store of ``packets``."""
    from bench_search import seed_sqlite

    if packets:
        seed_sqlite(Path(env["LTM_DATA_DIR"]) / "ltm.db", "local", packets)
    proc = spawn(env)
    handshake(proc)
    assert proc.stdin is not None and proc.stdout is not None
    out: dict[str, list[float]] = {"ls": [], "save": [], "resume": []}
    request_id = 10
    for i in range(runs + 2):
        for name, arguments in (("save", {"packet": PACKET}), ("ls", {}), ("resume", {})):
            request_id += 1
            start = time.perf_counter()
            send(
                proc.stdin,
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments},
                },
            )
            reply = receive(proc.stdout)
            assert reply["result"]["isError"] is False, reply
            if i >= 2:
                out[name].append(time.perf_counter() - start)
    proc.stdin.close()
    proc.wait(timeout=30)
    return out


def _status_mib(pid: int, key: str) -> float:
    found = re.search(rf"^{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(found.group(1)) / 1024 if found else 0.0


def resident(proc: subprocess.Popen[bytes]) -> float:
    """A bare interpreter's resident memory (MiB), once it has started; then it is ended."""
    try:
        time.sleep(1.0)
        return _status_mib(proc.pid, "VmRSS")
    finally:
        proc.kill()
        proc.wait()


def warm_memory(state: Path) -> dict[str, float]:
    """What the warm process holds while it waits for sessions (MiB): the cost of keeping
    the SDK loaded for a user. It serves each session from a forked child, which shares
    these pages and ends with its session."""
    pids = [int(f.read_text().strip()) for f in state.glob("mcp-*.pid") if f.read_text().strip()]
    if not pids:
        raise SystemExit("no warm process to measure")
    return {"the warm process, between sessions: resident memory": _status_mib(pids[0], "VmRSS")}


def warm_up(env: dict[str, str], state: Path) -> None:
    """One session, which starts the warm process; then wait until it listens."""
    session(env)
    deadline = time.monotonic() + 60
    while not list(state.glob("mcp-*.sock")):
        if time.monotonic() > deadline:
            raise SystemExit("the warm process did not start")
        time.sleep(0.1)


ROWS = (
    ("python -c pass", "bare"),
    ("python -c 'import mcp.server.lowlevel, ...stdio'", "sdk"),
    ("default, warm process up: spawn -> initialize", "default initialize"),
    ("default, warm process up: spawn -> tools/list", "default tools/list"),
    ("default, warm process up: ... -> exit on EOF", "default exit"),
    ("default, first session (starts the warm one)", "first tools/list"),
    ("LTM_MCP_WARM=0: spawn -> initialize", "cold initialize"),
    ("LTM_MCP_WARM=0: spawn -> tools/list", "cold tools/list"),
    ("LTM_MCP_WARM=0: ... -> exit on EOF", "cold exit"),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--installed", action="store_true", help="as users install ltm")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--packets", type=int, default=20_000, help="in the store the tools/call rows use"
    )
    parser.add_argument("--calls", type=int, default=200, help="tools/call round trips of each")
    args = parser.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        base = user_env()
        first = {**base, "LTM_DATA_DIR": tmp, "LTM_CONFIG_DIR": tmp, "LTM_STATE_DIR": str(state)}
        default = {**first, "LTM_STATE_DIR": str(state / "default")}
        cold = {**first, "LTM_MCP_WARM": "0"}
        warm_up(default, state / "default")
        try:
            measured = start_up({"default": default, "cold": cold}, first, runs)
            in_session = calls(cold, args.calls, args.packets)
            memory = warm_memory(state / "default")
        finally:
            stop_warm(state / "default")
    bare = measured["bare"]
    print(f"machine: {machine()}; {runs} interleaved runs, medians (after 2 warm-up runs)")
    print(f"{'what':<50} {'median ms':>10} {'x bare':>8}")
    figures = [Figure(ROWS[0][0], median_ms(bare), "ms")]
    for name, key in ROWS[1:]:
        times = measured[key]
        ratio = statistics.median(t / b for t, b in zip(times, bare, strict=True))
        print(f"{name:<50} {median_ms(times):>10.1f} {ratio:>8.2f}")
        figures.append(Figure(name, median_ms(times), "ms", baseline=ROWS[0][0], ratio=ratio))
    for name, times in in_session.items():
        label = f"tools/call {name} ({args.packets:,} packets)"
        print(f"{label:<50} {median_ms(times):>10.1f} {'':>8}")
        figures.append(Figure(label, median_ms(times), "ms"))
    bare_rss = resident(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(9)"]))
    figures.append(Figure("a bare interpreter: resident memory", bare_rss, "MiB"))
    print(f"{'a bare interpreter: resident memory':<50} {bare_rss:>10.1f} MiB")
    for name, mib in memory.items():
        print(f"{name:<50} {mib:>10.1f} MiB")
        baseline = "a bare interpreter: resident memory"
        figures.append(Figure(name, mib, "MiB", baseline=baseline, ratio=mib / bare_rss))
    for kind in ("default", "cold"):
        spread = statistics.quantiles(measured[f"{kind} tools/list"], n=10)
        print(f"{kind} tools/list p10-p90: {spread[0] * 1000:.0f}-{spread[-1] * 1000:.0f} ms")
    print("x bare: the median of the per-run ratios")
    record("mcp", figures, notes=["x: the median of per-run ratios to python -c pass"])


if __name__ == "__main__":
    run_installed_if_asked()
    main()
