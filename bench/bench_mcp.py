"""The MCP shim's start-up, as a ratio to a bare interpreter start.

    .venv/bin/python bench/bench_mcp.py [--runs N]

One run spawns ``ltm mcp`` and speaks raw JSON-RPC on its pipes, as an MCP
client does when it starts a session: ``initialize``, then
``notifications/initialized`` and ``tools/list``; the clock stops when the
tool list arrives (and, separately, when the shim has exited after stdin is
closed). ``--warm`` measures the same with ``LTM_MCP_WARM=1`` once the warm
process (``ltm.cli.mcp.warm``) runs. Also measured: one ``tools/call`` round
trip inside a live session (``ls`` and ``save`` on the embedded store), and
what importing the MCP SDK alone costs, which is most of the start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, machine, median_ms

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


def start_up(env: dict[str, str], runs: int) -> dict[str, list[float]]:
    """Interleaved: each run times the bare interpreter, the SDK import and a session start,
    so a busy machine slows all three alike and the per-run ratios stay comparable."""
    out: dict[str, list[float]] = {
        "bare": [],
        "sdk": [],
        "initialize": [],
        "tools/list": [],
        "exit": [],
    }
    for i in range(runs + 2):  # two warm-up runs
        bare = timed([sys.executable, "-c", "pass"], env)
        sdk = timed([sys.executable, "-c", SDK_IMPORT], env)
        start = time.perf_counter()
        proc = spawn(env)
        initialized, listed = handshake(proc)
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        done = time.perf_counter()
        if i >= 2:
            out["bare"].append(bare)
            out["sdk"].append(sdk)
            out["initialize"].append(initialized - start)
            out["tools/list"].append(listed - start)
            out["exit"].append(done - start)
    return out


def calls(env: dict[str, str], runs: int) -> dict[str, list[float]]:
    """Round trips of tools/call inside one live session."""
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


def warm_up(env: dict[str, str], state: Path) -> None:
    """One session, which starts the warm process; then wait until it listens."""
    proc = spawn(env)
    handshake(proc)
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while not list(state.glob("mcp-*.sock")):
        if time.monotonic() > deadline:
            raise SystemExit("the warm process did not start")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--warm",
        action="store_true",
        help="with LTM_MCP_WARM=1: sessions handed to a warm process (started first)",
    )
    args = parser.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "LTM_DATA_DIR": tmp, "LTM_CONFIG_DIR": tmp}
        env.pop("LTM_HOST", None)
        env.pop("LTM_TOKEN", None)
        env.pop("LTM_MCP_WARM", None)
        if args.warm:
            env.update(LTM_MCP_WARM="1", LTM_STATE_DIR=str(Path(tmp) / "state"))
            warm_up(env, Path(tmp) / "state")
        try:
            session = start_up(env, runs)
            in_session = calls(env, runs)
        finally:
            for pid_file in (Path(tmp) / "state").glob("mcp-*.pid"):
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
    bare = session["bare"]
    mode = " (LTM_MCP_WARM=1, a warm process running)" if args.warm else ""
    print(f"machine: {machine()}; {runs} interleaved runs, medians (after 2 warm-up runs){mode}")
    print(f"{'what':<50} {'median ms':>10} {'x bare':>8}")
    for name, key in (
        ("python -c pass", "bare"),
        ("python -c 'import mcp.server.lowlevel, ...stdio'", "sdk"),
        ("ltm mcp: spawn -> initialize reply", "initialize"),
        ("ltm mcp: spawn -> initialize -> tools/list reply", "tools/list"),
        ("ltm mcp: spawn -> tools/list -> exit on EOF", "exit"),
    ):
        times = session[key]
        ratio = statistics.median(t / b for t, b in zip(times, bare, strict=True))
        print(f"{name:<50} {median_ms(times):>10.1f} {ratio:>8.2f}")
    for name, times in in_session.items():
        label = f"tools/call {name} (live session, local store)"
        print(f"{label:<50} {median_ms(times):>10.1f} {'':>8}")
    spread = statistics.quantiles(session["tools/list"], n=10)
    print(f"tools/list round trip p10-p90: {spread[0] * 1000:.0f}-{spread[-1] * 1000:.0f} ms")
    print("x bare: the median of the per-run ratios")


if __name__ == "__main__":
    main()
