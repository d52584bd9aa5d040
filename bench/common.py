"""Helpers shared by the benchmarks: timing whole commands and reporting medians."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from results import INSTALLED

BIN = Path(sys.executable).parent
LTM = str(BIN / "ltm")
ROOT = Path(__file__).resolve().parent.parent


def user_env(*dropped: str) -> dict[str, str]:
    """The environment an ``ltm`` a bench starts runs in: this one without the ``LTM_*``
    settings (and variables starting with any of ``dropped``), and without
    ``PYTHONDONTWRITEBYTECODE``: an installed ltm has its bytecode compiled (pip does
    it at install), so a run that compiles every module from source measures the
    compiler, not ltm (40 ms of a hook's 95 in a sandbox that sets it)."""
    prefixes = ("LTM_", *dropped)
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(prefixes) and k != "PYTHONDONTWRITEBYTECODE"
    }


def run_installed_if_asked() -> None:
    """With ``--installed``: run this benchmark again under a non-editable install of ltm.

    Users get ltm from ``pipx install .`` (README); the dev venv's editable install adds
    a finder that every interpreter in it loads at start-up (~15 ms, ``python -c pass``
    included), which flatters every ratio to a bare start. So this builds a venv with
    ``pip install --no-deps .`` (its dependencies are read from this venv's
    site-packages through a .pth line, whose own .pth files stay unread) and re-executes
    the benchmark with that venv's interpreter: ``sys.executable``, ``BIN`` and ``LTM``
    are then the installed ones.
    """
    if "--installed" not in sys.argv:
        return
    import shutil
    import sysconfig

    argv = [a for a in sys.argv if a != "--installed"]
    shutil.rmtree(INSTALLED, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(INSTALLED)], check=True)
    python = INSTALLED / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "ltm-bench-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(ROOT)], check=True
    )
    print(f"(a non-editable install of ltm in {INSTALLED.relative_to(ROOT)})", flush=True)
    os.execv(python, [str(python), *argv])


def sign_in(url: str, token: str, env: dict[str, str]) -> None:
    """``ltm auth URL --with-token``, the token on stdin (never in argv)."""
    subprocess.run(
        [LTM, "auth", url, "--with-token"],
        input=token.encode(),
        env=env,
        check=True,
        capture_output=True,
    )


def time_command(
    argv: Sequence[str], *, runs: int, env: dict[str, str] | None = None
) -> list[float]:
    """Wall-clock seconds of each run, after two warm-up runs."""
    times = []
    for i in range(runs + 2):
        start = time.perf_counter()
        subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
        )
        if i >= 2:
            times.append(time.perf_counter() - start)
    return times


def paired(run: Callable[[], object], *, runs: int) -> tuple[list[float], list[float]]:
    """Wall-clock seconds of ``python -c pass`` and of ``run``, back to back in each run
    (after two warm-up pairs), so a ratio of the two sees the same load."""
    bare, timed = [], []
    for i in range(runs + 2):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        mid = time.perf_counter()
        run()
        end = time.perf_counter()
        if i >= 2:
            bare.append(mid - start)
            timed.append(end - mid)
    return bare, timed


def per_run_ratio(bare: Sequence[float], timed: Sequence[float]) -> float:
    """The median of the per-run ratios: steadier than a ratio of medians on a busy machine."""
    return statistics.median(t / b for t, b in zip(timed, bare, strict=True))


def median_ms(times: Sequence[float]) -> float:
    return statistics.median(times) * 1000


def machine() -> str:
    how = "installed (--installed)" if Path(sys.prefix) == INSTALLED else "editable (dev venv)"
    python = f"Python {platform.python_version()}, {platform.system()}"
    return f"{os.cpu_count()} cores, {python}, ltm {how}"


def fill_store(path: Path, count: int) -> None:
    """``count`` valid packets (the reference example, canonical bytes, unique ids and
    goals) written straight into a local store, 1,000 a transaction: fast, for benches
    that need thousands."""
    import json
    from datetime import UTC, datetime, timedelta

    from ltm import packet
    from ltm.examples import example_bytes
    from ltm.store import PacketMeta, StoredPacket
    from ltm.store.sqlite import SqliteStore

    example = json.loads(example_bytes())
    store = SqliteStore(path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    batch: list[tuple[StoredPacket, str]] = []
    for n in range(count):
        created = (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        packet_id = f"01BENCH{n:019d}"
        goal = f"Goal number {n}: keep the build green"
        data = {**example, "id": packet_id, "created_at": created, "goal": goal}
        meta = PacketMeta(packet_id, created, goal, "local", None, example["project"]["name"])
        sort_key = packet.created_at_sort_key(created)
        batch.append((StoredPacket(meta, packet.canonical_bytes(data)), sort_key))
        if len(batch) == 1000 or n == count - 1:
            store.put_packets(batch)
            batch = []
    store.close()


def disk(path: Path, count: int, *, label: str = "") -> None:
    """Disk per packet of a store: its file (checkpointed) over the packets' canonical
    bytes, and where the pages go (SQLite's dbstat table), free pages included."""
    import sqlite3

    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:  # the canonical bytes: stored packed, with their size beside them
            body = db.execute("SELECT sum(size) FROM packets").fetchone()[0]
        except sqlite3.OperationalError:  # a store from before the compact layout: as they are
            body = db.execute("SELECT sum(length(body)) FROM packets").fetchone()[0]
        size = path.stat().st_size
        print(
            f"disk per packet, {label}{count:,} packets: {size / count:,.0f} bytes,"
            f" {size / body:.2f}x the canonical bytes ({body / count:,.0f} a packet)",
            flush=True,
        )
        try:
            rows = db.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 10"
            ).fetchall()
        except sqlite3.OperationalError:  # an SQLite built without dbstat
            rows = []
        for name, pages in rows:
            print(f"  {name}: {pages / body:.2f}x", flush=True)
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
        print(f"  free pages: {free * page / body:.2f}x", flush=True)
    finally:
        db.close()
