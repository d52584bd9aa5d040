"""Export and import of many packets (time, peak memory), and ltm doctor as a whole command.

    .venv/bin/python bench/bench_portable.py [--counts 10000,100000] [--runs 10]
    .venv/bin/python bench/bench_portable.py --counts 10000 --runs 16 --versus OTHER/bin/ltm

- ``ltm export --local -o FILE`` and ``ltm import FILE --local`` (into an
  empty store, then again: every line skipped) on stores of each size in
  ``--counts``: wall time, CPU time (user and system, the workers an import
  starts included) and the command's peak RSS (``wait4``'s rusage of
  that very process). Memory that stays flat from the smaller count to the
  larger is what "streamed" means.
- the baseline: the same bundle's lines parsed, re-encoded and inserted into a bare
  SQLite table (``BARE``), as a whole process: what a store with no checks, no scan and
  no search index does with them.
- ``ltm doctor`` against a live ``ltm server run`` on loopback (every check:
  files, server, token, clock, store, MCP and hook entries): median wall
  time, as a ratio to ``python -c pass``.
- ``--versus OTHER/bin/ltm``: only the import into an empty store, by this tree and
  by another install of ltm (an earlier tree in a worktree with its own venv), in
  turns, ``--runs`` rounds of each: the medians tell two trees apart on a machine
  whose speed drifts more between minutes than the change being measured.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))

from common import LTM, disk, machine, median_ms, sign_in, time_command, user_env
from results import Figure, against, record

from ltm.examples import example_bytes


class Run(NamedTuple):
    seconds: float
    rss: float  # peak RSS in MiB, of the process itself
    cpu: float  # CPU seconds, user and system, of the process and the children it waited for
    err: str


def measured(argv: list[str], env: dict[str, str]) -> Run:
    """Wall time, peak RSS, CPU time and stderr of one run of ``argv``."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err}")
    cpu = usage.ru_utime + usage.ru_stime  # an import's worker processes included
    return Run(elapsed, usage.ru_maxrss / 1024, cpu, err)  # ru_maxrss is KiB on Linux


# The baseline the import is measured against, as a whole process too: each line of the
# bundle parsed and its packet re-encoded, inserted by id into one plain table (no checks,
# no scan, no search index), 500 a transaction, WAL, synchronous=FULL as the store has it.
BARE = """
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[2], isolation_level=None)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = FULL")
db.execute("CREATE TABLE packets (id TEXT PRIMARY KEY, body BLOB NOT NULL)")
def write(rows):
    db.execute("BEGIN")
    db.executemany("INSERT INTO packets VALUES (?, ?)", rows)
    db.execute("COMMIT")
rows = []
with open(sys.argv[1], "rb") as bundle:
    bundle.readline()  # the header
    for line in bundle:
        packet = json.loads(line)["packet"]
        rows.append((packet["id"], json.dumps(packet, separators=(",", ":")).encode()))
        if len(rows) == 500:
            write(rows)
            rows = []
if rows:
    write(rows)
"""


def exported(count: int, tmp: Path, base_env: dict[str, str]) -> tuple[Path, Run]:
    """A bundle of ``count`` example packets, and the run of the ``ltm export`` that wrote it."""
    source = tmp / f"src-{count}"
    source.mkdir()
    # Filled by a child process: the commands' peak RSS (wait4) would otherwise count this
    # process's memory, which a forked child starts with.
    seed = (
        "import sys, pathlib, common;"
        " common.fill_store(pathlib.Path(sys.argv[1]), int(sys.argv[2]))"
    )
    subprocess.run(
        [sys.executable, "-c", seed, str(source / "ltm.db"), str(count)],
        cwd=Path(__file__).parent,
        check=True,
    )
    bundle = tmp / f"bundle-{count}.jsonl"
    env = {**base_env, "LTM_DATA_DIR": str(source), "LTM_CONFIG_DIR": str(source)}
    return bundle, measured([LTM, "export", "--local", "-o", str(bundle)], env)


def imported(ltm: str, bundle: Path, target: Path, base_env: dict[str, str]) -> Run:
    """One ``ltm import FILE --local`` of ``bundle`` by ``ltm`` into the store in ``target``."""
    env = {**base_env, "LTM_DATA_DIR": str(target), "LTM_CONFIG_DIR": str(target)}
    run = measured([ltm, "import", str(bundle), "--local"], env)
    summary = run.err.strip().splitlines()[-1]
    assert re.search(r"\d+ added", summary), summary
    return run


def portable(count: int, tmp: Path, base_env: dict[str, str]) -> list[tuple[str, Run]]:
    target = tmp / f"dst-{count}"
    target.mkdir()
    bundle, run = exported(count, tmp, base_env)
    rows = [(f"export {count:,} ({bundle.stat().st_size / 2**20:.0f} MiB)", run)]
    run = measured(
        [sys.executable, "-c", BARE, str(bundle), str(tmp / f"bare-{count}.db")], base_env
    )
    rows.append((f"baseline: bare SQLite insert of the lines {count:,}", run))
    for label in ("import into an empty store", "import again (all skipped)"):
        rows.append((f"{label} {count:,}", imported(LTM, bundle, target, base_env)))
    disk(target / "ltm.db", count)
    return rows


def versus(
    count: int, other: str, rounds: int, tmp: Path, base_env: dict[str, str]
) -> list[tuple[str, list[Run]]]:
    """``ltm import`` of one bundle into an empty store, by this ltm and by ``other`` (another
    install: an earlier tree's venv, say), in turns, ``rounds`` each: a machine whose speed
    drifts by several percent within minutes slows both alike. The first of a round
    alternates."""
    bundle, _ = exported(count, tmp, base_env)
    runs: dict[str, list[Run]] = {LTM: [], other: []}
    for n in range(rounds):
        for ltm in (LTM, other) if n % 2 == 0 else (other, LTM):
            target = tmp / f"versus-{n}-{len(runs[ltm])}-{ltm == LTM}"
            target.mkdir()
            runs[ltm].append(imported(ltm, bundle, target, base_env))
            shutil.rmtree(target)
    return [("this tree", runs[LTM]), ("the other ltm (--versus)", runs[other])]


def write_orders(count: int, tmp: Path) -> None:
    """Disk per packet as the order of the writes leaves it: ``count`` example packets in a
    scope of a server's user (a ULID, as ``ltm server`` mints), oldest first one a
    transaction (pushes as they happen), newest first 500 a transaction (the local import
    of an export), 100 a transaction (what ``ltm import`` sends a server per request, in
    batch bodies of up to 1 MiB) and 10 (what it sent in 32 KiB, as to a server that does
    not say it takes more)."""
    import json
    from datetime import UTC, datetime, timedelta

    from ltm import packet
    from ltm.examples import example_bytes
    from ltm.store import PacketMeta, PutItem, StoredPacket
    from ltm.store.sqlite import SqliteStore

    example = json.loads(example_bytes())
    owner = "01JS5LTMEXAMPLEUSER0000001A"
    start = datetime(2026, 1, 1, tzinfo=UTC)
    items = []
    for n in range(count):
        created = (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        data = {**example, "id": f"01ORDER{n:019d}", "created_at": created, "goal": f"Goal {n}"}
        meta = PacketMeta(data["id"], created, data["goal"], owner, None, "ltm-example")
        body = packet.canonical_bytes(data)
        items.append(PutItem(StoredPacket(meta, body), packet.created_at_sort_key(created)))
    for label, order, per in (
        ("oldest first, 1 a transaction", items, 1),
        ("newest first, 500 a transaction", items[::-1], 500),
        ("newest first, 100 a transaction", items[::-1], 100),
        ("newest first, 10 a transaction", items[::-1], 10),
    ):
        path = tmp / f"order-{per}.db"
        store = SqliteStore(path, sync="normal")  # the layout does not depend on fsyncs
        try:
            for at in range(0, count, per):
                store.put_many(order[at : at + per])
        finally:
            store.close()
        disk(path, count, label=f"{label}, ")


def doctor(runs: int, tmp: Path, base_env: dict[str, str]) -> list[tuple[str, float]]:
    home = tmp / "doctor"
    home.mkdir()
    db = home / "server.db"
    root = subprocess.run(
        [LTM, "server", "init", "--db", str(db)], capture_output=True, text=True, check=True
    ).stdout.strip()
    log = (home / "server.log").open("wb")
    server = subprocess.Popen(
        [LTM, "server", "run", "--db", str(db), "--addr", "127.0.0.1:0"], stderr=log
    )
    try:
        url = None
        for _ in range(300):
            found = re.findall(
                r"listening on (http://127\.0\.0\.1:\d+)", (home / "server.log").read_text()
            )
            if found:
                url = found[-1]
                break
            time.sleep(0.05)
        assert url, (home / "server.log").read_text()
        env = {
            **base_env,
            "LTM_CONFIG_DIR": str(home / "config"),
            "LTM_DATA_DIR": str(home / "data"),
            "HOME": str(home),
        }
        sign_in(url, root, env)
        subprocess.run(
            [LTM, "save", "-", "--local"],
            input=example_bytes(),
            env=env,
            capture_output=True,
            check=True,
        )
        subprocess.run(
            [LTM, "mcp", "install", "cursor", "--write"], env=env, capture_output=True, check=True
        )
        out = subprocess.run([LTM, "doctor"], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        bare = median_ms(time_command([sys.executable, "-c", "pass"], runs=runs, env=env))
        took = median_ms(time_command([LTM, "doctor"], runs=runs, env=env))
        return [("python -c pass", bare), ("ltm doctor (live local server)", took)]
    finally:
        server.terminate()
        server.wait(timeout=15)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="10000,100000")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--orders", action="store_true", help="disk per packet by the order of the writes"
    )
    parser.add_argument(
        "--versus",
        metavar="LTM",
        help="only the import into an empty store, by this tree and by the ltm at this path"
        " (another install), in turns, --runs rounds; medians",
    )
    args = parser.parse_args()
    if args.versus and not os.access(args.versus, os.X_OK):
        parser.error(f"--versus: no ltm to run at {args.versus}")
    base_env = user_env()
    print(f"machine: {machine()} (shared with other jobs while measured)")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if args.versus:
            print(
                "\n| import into an empty store | rounds | median wall time | CPU a packet"
                " (median) | fastest |\n|---|---:|---:|---:|---:|"
            )
            for count in (int(c) for c in args.counts.split(",")):
                for label, runs in versus(count, args.versus, args.runs, tmp, base_env):
                    wall = statistics.median(run.seconds for run in runs)
                    cpu = statistics.median(run.cpu for run in runs) / count * 1e6
                    fastest = min(run.seconds for run in runs)
                    print(
                        f"| {label}, {count:,} | {len(runs)} | {wall:.2f} s"
                        f" ({count / wall:,.0f}/s) | {cpu:,.0f} µs | {fastest:.2f} s |",
                        flush=True,
                    )
            return
        print("\n| what | wall time | CPU a packet | peak RSS |\n|---|---:|---:|---:|")
        figures = []
        for count in (int(c) for c in args.counts.split(",")):
            rows = portable(count, tmp, base_env)
            bare_label = next(label for label, _ in rows if label.startswith("baseline"))
            bare_run = dict(rows)[bare_label]
            for label, run in rows:
                rate, cpu = count / run.seconds, run.cpu / count * 1e6
                print(
                    f"| {label} | {run.seconds:.1f} s ({rate:,.0f}/s) | {cpu:,.0f} µs"
                    f" | {run.rss:.0f} MiB |",
                    flush=True,
                )
                vs_bare = {"baseline": bare_label, "ratio": run.seconds / bare_run.seconds}
                figures += [
                    Figure(label, run.seconds, "s", **(vs_bare if label != bare_label else {})),
                    Figure(f"{label}: peak RSS", run.rss, "MiB"),
                ]
        if args.orders:
            print()
            for count in (int(c) for c in args.counts.split(",")):
                write_orders(count, tmp)
        rows = doctor(args.runs, tmp, base_env)
        bare = rows[0][1]
        print("\n| command | median | ratio to python -c pass |\n|---|---:|---:|")
        for label, ms in rows:
            print(f"| {label} | {ms:.0f} ms | {ms / bare:.2f}x |")
        notes = []
        if args.counts != parser.get_default("counts"):
            notes.append(
                f"--counts {args.counts}, not {parser.get_default('counts')}: the larger"
                " store takes over 3 minutes on a loaded 2-core machine"
            )
        record("portable", [*figures, *against(rows[0], rows[1:])], notes=notes)


if __name__ == "__main__":
    main()
